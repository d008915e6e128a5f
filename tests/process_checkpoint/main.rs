//! `cuda::process::ProcessCheckpoint` against the driver doubles, one module each: the driver double with the
//! process-checkpoint calls (`process_checkpoint_double`), and a driver that predates them
//! (`process_checkpoint_old_driver`, each test in a process of its own, `gpu_tools_testing::own_process`: a process
//! loads one driver).

mod process_checkpoint_double;
mod process_checkpoint_old_driver;
