//! The unit tests of `cuda_trace`'s trace model, run from here: `cargo test` then builds the `cuda_trace`
//! executable itself (an example with `test = true` is built only as a test harness), which `cuda_trace_cli` runs.
#![cfg(all(feature = "cupti", feature = "cudbg"))]

#[allow(dead_code)]
#[path = "../examples/cuda_trace/model.rs"]
mod model;
