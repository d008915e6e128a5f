//! Linux process control, shared by the debugger API (`cudbg`) and whole-process checkpoints (`cuda::process`):
//! what `/proc` says about a process ([`procfs`], public and always
//! built, for tools and the injection library), and, for the debugger, waiting for processes and threads
//! (`waitid`), reading and writing another process's memory, watching how a process ends, and holding it under
//! ptrace (stopping, resuming, calling a function in it, running it to an address).
//!
//! [`procfs`] and [`threads`] (what each thread is blocked in, read without stopping it) are public and always
//! built. [`inject`] (the `inject` feature) loads a library into a running process
//! and calls it, through the same ptrace machinery that serves the debugger's launch and attach routes
//! (`cudbg::DebugSession`); that machinery itself stays private. [`quiesce`] (the `inject` feature too) stops every
//! thread of a running process but a few and tells whether a stopped thread is inside given libraries.

pub mod procfs;
pub mod threads;

// Parts of the ptrace machinery serve only the debugger's routes (`cudbg`).
#[cfg(feature = "inject")]
#[cfg_attr(not(feature = "cudbg"), allow(dead_code))]
pub(crate) mod exit_watch;
#[cfg(feature = "inject")]
pub mod inject;
#[cfg(feature = "inject")]
#[cfg_attr(not(feature = "cudbg"), allow(dead_code))]
pub(crate) mod memory;
#[cfg(feature = "inject")]
#[cfg_attr(not(feature = "cudbg"), allow(dead_code))]
pub(crate) mod ptrace;
#[cfg(feature = "inject")]
pub mod quiesce;
#[cfg(feature = "inject")]
#[cfg_attr(not(feature = "cudbg"), allow(dead_code))]
pub(crate) mod wait;
