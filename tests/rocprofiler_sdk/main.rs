//! The rocprofiler-sdk layer against its C double (`gpu-tools-testing/doubles/rocprofiler_sdk.c`), one module each: the
//! services through one tool registered in this process (`rocprofiler_sdk_double`), no record lost or delivered
//! twice under load (`rocprofiler_sdk_loss`), bad input (`rocprofiler_sdk_bad_input`) and an SDK from before ROCTx
//! range records (`rocprofiler_sdk_before_ranges`). Registration is per process: each test of the last three runs
//! in a process of its own (`gpu_tools_testing::own_process`).
#![cfg(feature = "rocprofiler-sdk")]

mod common;
mod rocprofiler_sdk_bad_input;
mod rocprofiler_sdk_before_ranges;
mod rocprofiler_sdk_double;
mod rocprofiler_sdk_loss;
