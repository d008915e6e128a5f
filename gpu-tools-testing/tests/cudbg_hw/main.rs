//! The CUDA Debugger API on a real NVIDIA GPU (feature `nvidia-hw-tests`), one module each: sessions over this
//! crate's debuggees (`debugger`), attaching to running processes (`attach`), and a fresh core dump against a live
//! session (`coredump`). Every test runs in a process of its own (`gpu_tools_testing::own_process`): the driver
//! serves one debugger client per process and keeps per-process state that one session can leave for the next.

mod attach;
mod coredump;
mod debugger;
