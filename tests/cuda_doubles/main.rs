//! `cuda` and `Checkpoint` against the CUDA driver double and the checkpoint double (`tests/doubles/cuda_driver.c`,
//! `checkpoint.c`), one module each: checkpoints through the crate, streams and pinned memory, graphs. One binary:
//! each module's process-wide state is its own (contexts, the checkpoint double's counters, the driver double's
//! graphs under the graph module's lock). The raw checkpoint calls that bypass the crate's serialisation are in
//! `checkpoint_double_rules.rs`, a binary of its own.

#[cfg(feature = "cupti")]
#[path = "../common/checkpoint.rs"]
mod common;

mod checkpoint_doubles;
mod cuda_graph_double;
mod cuda_streams_double;
