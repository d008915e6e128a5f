//! Trace records for tests and benches, with plain values for the fields a test does not care about.

use std::sync::Arc;

use gpu_tools::trace::{
    ApiDomain, ApiRecord, ClockAnchor, CounterSample, Encoder, KernelRecord, ProcessInfo, Record,
    StreamHeader, TimestampClock,
};

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

/// A runtime API call (`cudaLaunchKernel`'s callback id, 211) `name` of process 100 on `thread`, from `start` to
/// `end` (ns), with correlation id `correlation`, returning 0.
pub fn api(name: &str, start: u64, end: u64, correlation: u32, thread: u32) -> Record {
    Record::Api(ApiRecord {
        start,
        end,
        domain: ApiDomain::Runtime,
        cbid: 211,
        name: Arc::from(name),
        correlation,
        process: 100,
        thread,
        return_value: 0,
    })
}

/// A counter sample of `device` over `[start, end)` with these (metric, value) pairs.
pub fn counter_sample(device: u32, start: u64, end: u64, values: &[(&str, f64)]) -> Record {
    Record::CounterSample(CounterSample {
        start,
        end,
        device,
        values: values.iter().map(|(m, v)| (Arc::from(*m), *v)).collect(),
    })
}

/// The bytes of a stream of `host` as a tracer writes it for a process or (`pid` 0) for its device counters: the
/// header, a clock anchor reading `monotonic` at wall-clock time 1.7e18 ns, the host's process information, then
/// `records`.
pub fn stream_of_host(pid: u32, host: &str, monotonic: u64, records: &[Record]) -> Vec<u8> {
    let mut e = Encoder::new(&StreamHeader::new(pid, 0, TimestampClock::Monotonic));
    e.push(&Record::ClockAnchor(ClockAnchor {
        monotonic,
        realtime: 1_700_000_000_000_000_000,
        uncertainty: 40,
    }));
    e.push(&Record::ProcessInfo(ProcessInfo {
        host: host.into(),
        boot_id: format!("boot-{host}"),
        labels: vec![],
    }));
    for r in records {
        e.push(r);
    }
    e.bytes().to_vec()
}
