//! AMD's profiling libraries on a real AMD GPU (feature `amd-hw-tests`), one module each: rocprofiler v2
//! (`rocprofiler`, ROCm 6.1+, loaded and initialised once per process before HIP) and rocprofiler-sdk
//! (`rocprofiler_sdk`, ROCm 7.0+; each test in a process of its own, `gpu_tools_testing::own_process`: a tool
//! registers once per process).

mod rocprofiler;
mod rocprofiler_sdk;
