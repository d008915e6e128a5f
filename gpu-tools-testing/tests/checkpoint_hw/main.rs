//! Checkpoints on a real NVIDIA GPU (feature `nvidia-hw-tests`), one module each: `cupti::Checkpoint` of a
//! context (`checkpoint`), across two GPUs (`multi_gpu`, every test `#[ignore]`d: run on a two-GPU host with
//! `--ignored`) and `cuda::process::ProcessCheckpoint` of other processes (`process_checkpoint`). The tests of the
//! last two each run in a process of their own (`gpu_tools_testing::own_process`), as they did in binaries of
//! their own.

mod checkpoint;
mod multi_gpu;
mod process_checkpoint;
