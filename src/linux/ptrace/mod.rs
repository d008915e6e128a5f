//! Holding a running process under ptrace: stopping and resuming all its threads, calling a function inside it,
//! forwarding its signals, and seeing its end.
//!
//! ptrace ties a tracee to the thread that attached it: every request and every wait must come from that thread.
//! So one worker thread owns the tracee for as long as it is traced, and [`Tracer`] sends it requests. Stops are
//! found by polling each traced thread with `waitid(WNOHANG)`: a blocking wait for "any child" would also reap
//! this process's own children. Requests that `nix` does not offer (`PTRACE_LISTEN`, resuming with a real-time
//! signal, the x86 extended register set, `tgkill`) are made through `libc` directly.
//!
//! While the process runs, every signal it receives stops the receiving thread and is handed back to it at once;
//! a job-control stop (SIGSTOP, SIGTSTP) is kept as such (`PTRACE_LISTEN`). Threads it creates are traced as they
//! appear. When the process ends, its status (exit code or signal) is published through an [`ExitWatch`].
//!
//! [`Tracer::run_to`] lets the process run until one of its threads reaches an address: a software breakpoint
//! (`int3`) that exists only while the process runs to it; its trap never reaches the process.
//!
//! The module is split by concern: this file is the handle and its request channel; `worker` owns the tracee
//! (attaching, polling, stopping, resuming, detaching, forwarding signals), and its submodules `worker::call` (runs
//! a function inside the process) and `worker::breakpoint` (runs it to an address) extend it; `regs` reads and
//! restores the x86-64 registers; `sys` holds the raw calls (`ptrace` requests nix lacks, `tgkill`) and the event
//! codes that all of them use.

mod regs;
mod sys;
#[cfg(test)]
mod tests;
mod worker;

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use nix::errno::Errno;

use super::exit_watch::{ChildState, ExitWatch};
use worker::Worker;

// For `linux::quiesce`, which stops threads under ptrace without this module's worker.
pub(crate) use regs::{bp_of, pc_of, sp_of};
pub(crate) use sys::raw_ptrace;

/// A ptrace request or wait that failed, or a traced process that went away.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TraceError {
    /// A ptrace request failed.
    #[error("{call} on thread {tid} failed: {errno}")]
    Ptrace {
        /// The request.
        call: &'static str,
        /// The thread it was for.
        tid: u32,
        /// The system's error.
        errno: Errno,
    },
    /// The process ended.
    #[error("the process ended ({0:?})")]
    Ended(ChildState),
    /// Something did not happen in time.
    #[error("{what} did not finish within {waited:?}")]
    Timeout {
        /// What was waited for.
        what: &'static str,
        /// How long.
        waited: Duration,
    },
    /// A called function faulted; the thread was put back where it was.
    #[error("the called function raised signal {signal} at pc {pc:#x}")]
    CallFaulted {
        /// The signal.
        signal: i32,
        /// Where.
        pc: u64,
    },
    /// Calling functions in a process is implemented for x86-64 only.
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    #[error("calling a function in another process is not implemented on this architecture")]
    Unsupported,
    /// Reading `/proc` or waiting failed.
    #[error("{0}")]
    System(String),
    /// The worker thread is gone.
    #[error("the tracing thread is gone")]
    Gone,
}

type Reply<T> = mpsc::SyncSender<Result<T, TraceError>>;

/// An integer argument of a called function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arg {
    /// This value.
    Int(u64),
    /// The address of this offset in the call's data ([`CallSpec::data`]).
    Data(usize),
}

/// A function to call inside the traced process ([`Tracer::call_with`]).
#[derive(Debug, Clone)]
pub(crate) struct CallSpec {
    /// The function's address in the process.
    pub(crate) entry: u64,
    /// Up to six integer arguments; missing ones are 0.
    pub(crate) args: Vec<Arg>,
    /// Bytes placed on the calling thread's stack, below its red zone, for the call's duration (strings the
    /// function reads). The bytes that were there are put back afterwards.
    pub(crate) data: Vec<u8>,
    /// The thread that makes the call; `None`: the main thread.
    pub(crate) thread: Option<u32>,
    /// How long the function may run.
    pub(crate) timeout: Duration,
}

/// A stopped thread's program counter and stack pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ThreadRegisters {
    /// The thread.
    pub(crate) tid: u32,
    /// Its program counter.
    pub(crate) pc: u64,
    /// Its stack pointer.
    pub(crate) sp: u64,
    /// The system call it is stopped in (`orig_rax`), or `None` when it is not in one.
    pub(crate) syscall: Option<u64>,
}

enum Request {
    Stop(Reply<()>),
    Resume(Reply<()>),
    Threads(Reply<Vec<ThreadRegisters>>),
    Call {
        spec: CallSpec,
        reply: Reply<u64>,
    },
    RunTo {
        addr: u64,
        timeout: Duration,
        reply: Reply<u32>,
    },
    Detach(Reply<()>),
}

/// A process held under ptrace by a worker thread. Right after [`Tracer::attach`] all its threads are stopped.
///
/// Dropping it detaches (the process runs on, with any signal it was about to receive).
#[derive(Debug)]
pub(crate) struct Tracer {
    requests: Option<mpsc::Sender<Request>>,
    worker: Option<JoinHandle<()>>,
    watch: ExitWatch,
}

impl Tracer {
    /// Attaches to every thread of process `pid` and stops them all. Returns the tracer and the number of threads.
    /// On failure nothing stays attached.
    pub(crate) fn attach(pid: u32) -> Result<(Self, usize), TraceError> {
        let (watch, publisher) = ExitWatch::published();
        let (requests, incoming) = mpsc::channel();
        let (ready, attached) = mpsc::sync_channel(1);
        let worker = std::thread::Builder::new()
            .name("gpu-tools-tracer".into())
            .spawn(move || Worker::new(pid, publisher).run(incoming, ready))
            .map_err(|e| TraceError::System(format!("cannot start the tracing thread: {e}")))?;
        let threads = attached.recv().map_err(|_| TraceError::Gone)?;
        let tracer = Tracer {
            requests: Some(requests),
            worker: Some(worker),
            watch,
        };
        match threads {
            Ok(n) => Ok((tracer, n)),
            // The worker detached what it had and ended; dropping the tracer joins it.
            Err(e) => Err(e),
        }
    }

    /// How the process ended, as far as seen (published by the worker).
    pub(crate) fn watch(&self) -> ExitWatch {
        self.watch.clone()
    }

    fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Request) -> Result<T, TraceError> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.requests
            .as_ref()
            .ok_or(TraceError::Gone)?
            .send(make(reply))
            .map_err(|_| TraceError::Gone)?;
        answer.recv().map_err(|_| TraceError::Gone)?
    }

    /// Stops every thread (a no-op for those already stopped).
    pub(crate) fn stop(&self) -> Result<(), TraceError> {
        self.ask(Request::Stop)
    }

    /// Lets every thread run again, with the signals they were about to receive.
    pub(crate) fn resume(&self) -> Result<(), TraceError> {
        self.ask(Request::Resume)
    }

    /// Calls the function at `entry` with up to six integer arguments on one thread of the stopped process, while
    /// all its threads run (a function may wait for another thread), and returns its integer result. Afterwards
    /// the thread is put back exactly where it was (all registers, including vector state) and every thread is
    /// stopped again.
    pub(crate) fn call(
        &self,
        entry: u64,
        args: [u64; 6],
        timeout: Duration,
    ) -> Result<u64, TraceError> {
        self.call_with(CallSpec {
            entry,
            args: args.iter().map(|&v| Arg::Int(v)).collect(),
            data: Vec::new(),
            thread: None,
            timeout,
        })
    }

    /// [`Tracer::call`] on a chosen thread, with data on its stack that arguments may point to.
    pub(crate) fn call_with(&self, spec: CallSpec) -> Result<u64, TraceError> {
        self.ask(|reply| Request::Call { spec, reply })
    }

    /// The registers of every thread (all stopped), main thread first.
    pub(crate) fn threads(&self) -> Result<Vec<ThreadRegisters>, TraceError> {
        self.ask(Request::Threads)
    }

    /// Lets every thread of the stopped process run until one reaches the instruction at `addr` (which must be
    /// the start of an instruction in executable memory), then stops them all, that thread right before the
    /// instruction, and returns its id. The breakpoint is removed before this returns, also on failure; its traps
    /// never reach the process. After `timeout` every thread is stopped again and [`TraceError::Timeout`]
    /// returned.
    pub(crate) fn run_to(&self, addr: u64, timeout: Duration) -> Result<u32, TraceError> {
        self.ask(|reply| Request::RunTo {
            addr,
            timeout,
            reply,
        })
    }

    /// Detaches from every thread now (they run on), reporting a failure.
    pub(crate) fn detach(mut self) -> Result<(), TraceError> {
        let r = self.ask(Request::Detach);
        self.requests = None;
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
        r
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        // Closing the channel makes the worker detach and end.
        self.requests = None;
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}
