//! Record builders shared by this crate's test binaries (each includes this file as a module).
#![allow(dead_code)]

use std::sync::Arc;

use gpu_tools_trace::*;

/// A kernel on device 0, context 1, stream 7.
pub fn kernel(name: &str, start: u64, end: u64, correlation: u32) -> Record {
    Record::Kernel(KernelRecord {
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
    })
}

/// A runtime API call of process 100 on `thread`.
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
