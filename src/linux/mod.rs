//! Linux process control, shared by the debugger API (`cudbg`) and whole-process checkpoints (`cuda::process`):
//! what `/proc` says about a process ([`procfs`], public and always
//! built, for tools and the injection library), and, for the debugger, waiting for processes and threads
//! (`waitid`), reading and writing another process's memory, watching how a process ends, and holding it under
//! ptrace (stopping, resuming, calling a function in it, running it to an address).
//!
//! Only [`procfs`] is public: the rest (built with the `cudbg` feature) serves the crate's own launch and attach
//! routes, whose safe face is `cudbg::DebugSession`.

pub mod procfs;

#[cfg(feature = "cudbg")]
pub(crate) mod exit_watch;
#[cfg(feature = "cudbg")]
pub(crate) mod memory;
#[cfg(feature = "cudbg")]
pub(crate) mod ptrace;
#[cfg(feature = "cudbg")]
pub(crate) mod wait;
