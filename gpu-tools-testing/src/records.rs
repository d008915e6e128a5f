//! Trace records for tests and benches, with plain values for the fields a test does not care about.

use std::sync::Arc;

use gpu_tools::trace::{KernelRecord, Record};

/// A kernel `name` that ran from `start` to `end` (ns) with correlation id `correlation`: device 0, context 1,
/// stream 7, grid id = correlation, grid 128×1×1 of blocks of 256×1×1, 32 registers, no shared memory, no graph.
/// Change other fields with struct-update syntax: `KernelRecord { stream: 3, ..kernel_record(...) }`.
pub fn kernel_record(name: &str, start: u64, end: u64, correlation: u32) -> KernelRecord {
    KernelRecord {
        start,
        end,
        device: 0,
        context: 1,
        stream: 7,
        correlation,
        grid_id: u64::from(correlation),
        grid: [128, 1, 1],
        block: [256, 1, 1],
        static_shared: 0,
        dynamic_shared: 0,
        registers: 32,
        graph_id: 0,
        graph_node_id: 0,
        name: Arc::from(name),
    }
}

/// [`kernel_record`] as a [`Record`].
pub fn kernel(name: &str, start: u64, end: u64, correlation: u32) -> Record {
    Record::Kernel(kernel_record(name, start, end, correlation))
}
