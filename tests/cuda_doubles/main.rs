//! `cuda` and `Checkpoint` against the CUDA driver double and the checkpoint double (`gpu-tools-testing/doubles/cuda_driver.c`,
//! `checkpoint.c`), one module each: checkpoints through the crate, streams and pinned memory, graphs. One binary:
//! each module's process-wide state is its own (contexts, the checkpoint double's counters, the driver double's
//! graphs under the graph module's lock). The raw checkpoint calls that bypass the crate's serialisation
//! (`checkpoint_double_rules`) and the library's log (`logging`: the test logger is the process's only one) run
//! each test in a process of its own (`gpu_tools_testing::own_process`).

#[cfg(feature = "cupti")]
mod common;

mod checkpoint_double_rules;
mod checkpoint_doubles;
mod cuda_graph_double;
mod cuda_streams_double;
mod logging;
