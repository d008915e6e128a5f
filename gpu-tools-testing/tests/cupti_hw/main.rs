//! CUPTI on a real NVIDIA GPU (feature `nvidia-hw-tests`; CUDA 13), one module each: the injection library and
//! `gpu-tools trace --backend cupti` driving other processes (`injection`), the counter APIs in-process
//! (`profiling`) and the activity tracer and callback subscriber in-process (`tracing`). The tests of the last two
//! each run in a process of their own (`gpu_tools_testing::own_process`): one tracer, one subscriber and one PM
//! client per process.

mod injection;
mod profiling;
mod tracing;
