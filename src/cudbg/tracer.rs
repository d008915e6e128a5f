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

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::libc;
use nix::sys::ptrace;
use nix::unistd::Pid;

use super::procfs;
use super::wait::{WALL, WEXITED, WNOHANG, WNOWAIT, WSTOPPED, Waited, wait_id};
use super::watch::{ChildState, EndPublisher, ExitWatch};

/// How long the worker sleeps between polls right after something happened; each quiet poll doubles it, up to
/// [`IDLE_POLL_MAX`]. A thread that stopped for a signal waits at most that long to get it back.
const IDLE_POLL_MIN: Duration = Duration::from_millis(1);
/// The longest sleep between polls (each poll is two `waitid` calls per traced thread).
const IDLE_POLL_MAX: Duration = Duration::from_millis(8);
/// How long stopping every thread may take.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

const EVENT_CLONE: i32 = 3;
const EVENT_EXEC: i32 = 4;
const EVENT_STOP: i32 = 128;

/// Where a called function returns to: nothing is mapped at 0, so the return faults (SIGSEGV at pc 0), which the
/// worker intercepts before the process sees it.
const RETURN_ADDRESS: u64 = 0;

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

enum Request {
    Stop(Reply<()>),
    Resume(Reply<()>),
    Call {
        entry: u64,
        args: [u64; 6],
        timeout: Duration,
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
        self.ask(|reply| Request::Call {
            entry,
            args,
            timeout,
            reply,
        })
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

/// What the worker knows of one traced thread.
#[derive(Debug, Default, Clone, Copy)]
struct Thread {
    /// In a ptrace-stop (requests can be made).
    stopped: bool,
    /// Held in a job-control stop: resumed with `PTRACE_LISTEN`, so it stays stopped until SIGCONT.
    group_stop: bool,
    /// The signal it was about to receive when it stopped (0: none); handed back when it resumes.
    signal: i32,
    /// Whether its current stop is a signal-delivery stop (only there can a signal be handed back).
    at_signal: bool,
}

/// An inferior call in progress.
#[derive(Debug)]
struct Call {
    tid: u32,
    done: Option<Result<u64, TraceError>>,
    /// Asynchronous signals the calling thread received meanwhile: sent again once it is back.
    deferred: Vec<i32>,
    timing_out: bool,
}

/// A software breakpoint while [`Tracer::run_to`] runs the process.
#[derive(Debug)]
struct Breakpoint {
    addr: u64,
    /// The first thread that reached it.
    hit: Option<u32>,
    /// A failure to put a thread that reached it back before the instruction.
    failed: Option<TraceError>,
}

struct Worker {
    pid: u32,
    threads: BTreeMap<u32, Thread>,
    /// Whether stopped threads stay stopped (true) or are resumed as soon as they report (false).
    hold: bool,
    end: Option<ChildState>,
    publisher: EndPublisher,
    /// A child of this process: its exit is left for its `Child` to reap.
    own_child: bool,
    call: Option<Call>,
    breakpoint: Option<Breakpoint>,
}

fn is_stop_signal(signal: i32) -> bool {
    matches!(
        signal,
        libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
    )
}

fn raw_ptrace(request: libc::c_uint, tid: u32, addr: usize, data: usize) -> Result<(), Errno> {
    // SAFETY: the requests made through here (CONT, LISTEN, DETACH, GETREGSET, SETREGSET) take plain integers, or a
    // pointer to an iovec that the caller keeps alive for the call.
    let rc = unsafe {
        libc::ptrace(
            request,
            tid as libc::pid_t,
            addr as *mut libc::c_void,
            data as *mut libc::c_void,
        )
    };
    if rc == -1 { Err(Errno::last()) } else { Ok(()) }
}

fn tgkill(pid: u32, tid: u32, signal: i32) {
    // SAFETY: a plain system call with integer arguments.
    unsafe {
        libc::syscall(
            libc::SYS_tgkill,
            pid as libc::c_long,
            tid as libc::c_long,
            signal,
        )
    };
}

/// The thread ids of process `pid`.
fn task_ids(pid: u32) -> Result<Vec<u32>, TraceError> {
    procfs::thread_ids(pid).map_err(|e| TraceError::System(format!("/proc/{pid}/task: {e}")))
}

impl Worker {
    fn new(pid: u32, publisher: EndPublisher) -> Self {
        Worker {
            pid,
            threads: BTreeMap::new(),
            hold: true,
            end: None,
            publisher,
            own_child: procfs::parent_of(pid) == Some(std::process::id()),
            call: None,
            breakpoint: None,
        }
    }

    fn run(
        mut self,
        requests: mpsc::Receiver<Request>,
        ready: mpsc::SyncSender<Result<usize, TraceError>>,
    ) {
        match self.attach_all() {
            Ok(n) => {
                let _ = ready.send(Ok(n));
            }
            Err(e) => {
                let _ = self.detach_all();
                let _ = ready.send(Err(e));
                return;
            }
        }
        let mut idle = IDLE_POLL_MIN;
        loop {
            let busy = match self.poll() {
                Ok(busy) => busy,
                Err(e) => {
                    log::debug!("tracer: polling process {} failed: {e}", self.pid);
                    false
                }
            };
            let wait = if self.end.is_some() {
                Duration::from_secs(3600)
            } else if busy {
                idle = IDLE_POLL_MIN;
                Duration::ZERO
            } else {
                idle = (idle * 2).min(IDLE_POLL_MAX);
                idle
            };
            match requests.recv_timeout(wait) {
                Ok(Request::Detach(reply)) => {
                    let r = self.detach_all();
                    let _ = reply.send(r);
                    return;
                }
                Ok(request) => self.serve(request),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let _ = self.detach_all();
                    return;
                }
            }
        }
    }

    fn serve(&mut self, request: Request) {
        match request {
            Request::Stop(reply) => {
                let _ = reply.send(self.stop_all());
            }
            Request::Resume(reply) => {
                let _ = reply.send(self.resume_all());
            }
            Request::Call {
                entry,
                args,
                timeout,
                reply,
            } => {
                let _ = reply.send(self.call(entry, args, timeout));
            }
            Request::RunTo {
                addr,
                timeout,
                reply,
            } => {
                let _ = reply.send(self.run_to(addr, timeout));
            }
            Request::Detach(reply) => {
                let _ = reply.send(self.detach_all());
            }
        }
    }

    fn ended(&self) -> Result<(), TraceError> {
        match self.end {
            Some(state) => Err(TraceError::Ended(state)),
            None => Ok(()),
        }
    }

    /// Seizes every thread (again until no new one appears), then stops them all.
    fn attach_all(&mut self) -> Result<usize, TraceError> {
        let options = ptrace::Options::PTRACE_O_TRACECLONE | ptrace::Options::PTRACE_O_TRACEEXEC;
        loop {
            let fresh: Vec<u32> = task_ids(self.pid)?
                .into_iter()
                .filter(|t| !self.threads.contains_key(t))
                .collect();
            if fresh.is_empty() {
                break;
            }
            for tid in fresh {
                match ptrace::seize(Pid::from_raw(tid as i32), options) {
                    Ok(()) => {
                        self.threads.insert(tid, Thread::default());
                    }
                    // A thread that ended meanwhile; the leader's absence is reported by the caller.
                    Err(Errno::ESRCH) if tid != self.pid => {}
                    Err(errno) => {
                        return Err(TraceError::Ptrace {
                            call: "PTRACE_SEIZE",
                            tid,
                            errno,
                        });
                    }
                }
            }
        }
        self.stop_all()?;
        Ok(self.threads.len())
    }

    /// Looks once at every traced thread; true when something was reported.
    ///
    /// One `waitid` per thread for stops and exits together: for a tracee, a wait for exits alone reports (and
    /// consumes) its stops as well.
    fn poll(&mut self) -> Result<bool, TraceError> {
        let mut any = false;
        let tids: Vec<u32> = self.threads.keys().copied().collect();
        for tid in tids {
            // A child of this process is left for its `Child` to reap: its end is only looked at.
            let peek = tid == self.pid && self.own_child;
            let keep = if peek { WNOWAIT } else { 0 };
            match wait_id(tid, WEXITED | WSTOPPED | WNOHANG | WALL | keep) {
                Ok(Some(Waited::Stopped { signal, event })) => {
                    if peek {
                        // Consume the stop that was only looked at.
                        let _ = wait_id(tid, WSTOPPED | WNOHANG | WALL);
                    }
                    any = true;
                    self.on_stop(tid, signal, event);
                }
                Ok(Some(end)) => {
                    any = true;
                    self.on_exit(tid, end);
                }
                Ok(None) => {}
                Err(e) if e.raw_os_error() == Some(libc::ECHILD) => {
                    // Reaped elsewhere (or never ours any more): forget the thread.
                    if tid == self.pid {
                        self.on_exit(tid, Waited::Exited(-1));
                    } else {
                        self.threads.remove(&tid);
                    }
                }
                Err(e) => return Err(TraceError::System(format!("waitid({tid}): {e}"))),
            }
        }
        Ok(any)
    }

    fn on_exit(&mut self, tid: u32, how: Waited) {
        self.threads.remove(&tid);
        if tid != self.pid {
            return;
        }
        let state = match how {
            Waited::Exited(-1) => ChildState::Unknown,
            Waited::Exited(code) => ChildState::Exited(code),
            Waited::Signaled(signal) => ChildState::Signaled(signal),
            Waited::Stopped { .. } => return,
        };
        log::debug!("tracer: process {} ended: {state:?}", self.pid);
        self.end = Some(state);
        self.publisher.publish(state);
        self.threads.clear();
        if let Some(call) = self.call.as_mut() {
            call.done.get_or_insert(Err(TraceError::Ended(state)));
        }
    }

    fn on_stop(&mut self, tid: u32, signal: i32, event: i32) {
        if self.call.as_ref().is_some_and(|c| c.tid == tid) {
            self.on_call_stop(tid, signal, event);
            return;
        }
        if event == 0 && signal == libc::SIGTRAP && self.at_breakpoint(tid) {
            return;
        }
        let (signal, at_signal, group) = match event {
            EVENT_CLONE => {
                self.adopt_new_thread(tid);
                (0, false, false)
            }
            EVENT_EXEC => {
                // The program was replaced: only the thread that called exec remains, under the leader's id.
                log::debug!("tracer: process {} called exec", self.pid);
                if let Ok(tids) = task_ids(self.pid) {
                    self.threads.retain(|t, _| tids.contains(t));
                }
                (0, false, false)
            }
            EVENT_STOP => (0, false, is_stop_signal(signal)),
            0 => (signal, true, false),
            _ => (0, false, false),
        };
        let t = self.threads.entry(tid).or_default();
        t.stopped = true;
        t.signal = signal;
        t.at_signal = at_signal;
        // An event stop tells whether the process is in a job-control stop; other stops leave that as it was.
        if event == EVENT_STOP {
            t.group_stop = group;
        }
        if !self.hold {
            self.release(tid);
        }
    }

    /// The thread calls and code patches go through: the main thread, else any traced one.
    fn main_thread(&self) -> Result<u32, TraceError> {
        if self.threads.contains_key(&self.pid) {
            Ok(self.pid)
        } else {
            self.threads.keys().next().copied().ok_or(TraceError::Gone)
        }
    }

    /// Whether thread `tid`, stopped by SIGTRAP, trapped at the armed breakpoint. If so it is held there, put back
    /// before the instruction, and the trap is not handed to it.
    fn at_breakpoint(&mut self, tid: u32) -> bool {
        let Some(bp) = self.breakpoint.as_mut() else {
            return false;
        };
        let pid = Pid::from_raw(tid as i32);
        let Ok(mut regs) = ptrace::getregs(pid) else {
            return false;
        };
        if pc_of(regs) != bp.addr.wrapping_add(1) {
            return false;
        }
        set_pc(&mut regs, bp.addr);
        if let Err(errno) = ptrace::setregs(pid, regs) {
            bp.failed.get_or_insert(TraceError::Ptrace {
                call: "PTRACE_SETREGS",
                tid,
                errno,
            });
        }
        bp.hit.get_or_insert(tid);
        let t = self.threads.entry(tid).or_default();
        t.stopped = true;
        t.signal = 0;
        t.at_signal = false;
        true
    }

    /// See [`Tracer::run_to`].
    fn run_to(&mut self, addr: u64, timeout: Duration) -> Result<u32, TraceError> {
        // The breakpoint instruction and the pc's rewind are x86's.
        if !cfg!(target_arch = "x86_64") {
            return Err(TraceError::Unsupported);
        }
        self.stop_all()?;
        let tid = self.main_thread()?;
        let failed = |call: &'static str| move |errno| TraceError::Ptrace { call, tid, errno };
        let at = addr as ptrace::AddressType;
        let original =
            ptrace::read(Pid::from_raw(tid as i32), at).map_err(failed("PTRACE_PEEKTEXT"))?;
        // The instruction's first byte becomes `int3` (0xcc); the word's other bytes stay as they are.
        let armed = (original & !0xff) | 0xcc;
        ptrace::write(Pid::from_raw(tid as i32), at, armed).map_err(failed("PTRACE_POKETEXT"))?;
        self.breakpoint = Some(Breakpoint {
            addr,
            hit: None,
            failed: None,
        });
        let deadline = Instant::now().checked_add(timeout);
        let ran = self.resume_all().and_then(|()| {
            loop {
                // A thread that reached the breakpoint stays stopped; the others are stopped next.
                if let Some(hit) = self.breakpoint.as_ref().and_then(|b| b.hit) {
                    break Ok(hit);
                }
                self.ended()?;
                if !self.poll()? {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        break Err(TraceError::Timeout {
                            what: "running to the breakpoint",
                            waited: timeout,
                        });
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        });
        if self.end.is_some() {
            self.breakpoint = None;
            return ran;
        }
        // Every thread stops before the instruction is put back: one that traps meanwhile is put back before it.
        let stopped = self.stop_all();
        let holder = self
            .threads
            .iter()
            .find(|(_, t)| t.stopped)
            .map(|(&t, _)| t)
            .unwrap_or(tid);
        let restored = ptrace::write(Pid::from_raw(holder as i32), at, original).map_err(|errno| {
            TraceError::Ptrace {
                call: "PTRACE_POKETEXT",
                tid: holder,
                errno,
            }
        });
        let bp = self.breakpoint.take();
        restored?;
        stopped?;
        if let Some(e) = bp.and_then(|b| b.failed) {
            return Err(e);
        }
        ran
    }

    fn adopt_new_thread(&mut self, parent: u32) {
        if let Ok(new) = ptrace::getevent(Pid::from_raw(parent as i32)) {
            let new = new as u32;
            // Its first stop may already have been seen; then it is known already.
            self.threads.entry(new).or_default();
            log::debug!("tracer: thread {new} appeared in process {}", self.pid);
        }
    }

    /// Lets a stopped thread run (or, in a job-control stop, wait for SIGCONT), handing back its signal.
    fn release(&mut self, tid: u32) {
        let Some(t) = self.threads.get_mut(&tid) else {
            return;
        };
        if !t.stopped {
            return;
        }
        let r = if t.group_stop {
            raw_ptrace(libc::PTRACE_LISTEN, tid, 0, 0)
        } else {
            let signal = if t.at_signal { t.signal } else { 0 };
            raw_ptrace(libc::PTRACE_CONT, tid, 0, signal as usize)
        };
        if let Err(e) = r {
            // ESRCH: it is dying; its exit will be reported.
            log::debug!("tracer: resuming thread {tid} failed: {e}");
        }
        t.stopped = false;
        t.signal = 0;
        t.at_signal = false;
    }

    fn stop_all(&mut self) -> Result<(), TraceError> {
        self.ended()?;
        self.hold = true;
        for (&tid, t) in &self.threads {
            if !t.stopped {
                if let Err(errno) = ptrace::interrupt(Pid::from_raw(tid as i32)) {
                    if errno != Errno::ESRCH {
                        return Err(TraceError::Ptrace {
                            call: "PTRACE_INTERRUPT",
                            tid,
                            errno,
                        });
                    }
                }
            }
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            self.ended()?;
            if self.threads.values().all(|t| t.stopped) {
                return Ok(());
            }
            // Threads that appeared since the interrupts were sent start stopped; others are still on their way.
            if !self.poll()? {
                if Instant::now() >= deadline {
                    return Err(TraceError::Timeout {
                        what: "stopping every thread",
                        waited: STOP_TIMEOUT,
                    });
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }

    fn resume_all(&mut self) -> Result<(), TraceError> {
        self.ended()?;
        self.hold = false;
        let tids: Vec<u32> = self.threads.keys().copied().collect();
        for tid in tids {
            self.release(tid);
        }
        Ok(())
    }

    fn detach_all(&mut self) -> Result<(), TraceError> {
        if self.end.is_some() || self.threads.is_empty() {
            return Ok(());
        }
        let stopped = self.stop_all();
        let mut first_err = stopped.err();
        for (&tid, t) in &self.threads {
            if !t.stopped {
                continue;
            }
            let signal = if t.at_signal { t.signal } else { 0 };
            if let Err(errno) = raw_ptrace(libc::PTRACE_DETACH, tid, 0, signal as usize) {
                if errno != Errno::ESRCH {
                    first_err.get_or_insert(TraceError::Ptrace {
                        call: "PTRACE_DETACH",
                        tid,
                        errno,
                    });
                }
            }
        }
        self.threads.clear();
        log::debug!("tracer: detached from process {}", self.pid);
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn on_call_stop(&mut self, tid: u32, signal: i32, event: i32) {
        let Some(call) = self.call.as_mut() else {
            return;
        };
        if let Some(t) = self.threads.get_mut(&tid) {
            t.stopped = true;
            t.at_signal = event == 0;
        }
        let resume = |tid: u32| {
            if let Err(e) = raw_ptrace(libc::PTRACE_CONT, tid, 0, 0) {
                log::debug!("tracer: resuming the calling thread {tid} failed: {e}");
            }
        };
        match event {
            0 => {
                let pc = ptrace::getregs(Pid::from_raw(tid as i32)).map_or(u64::MAX, pc_of);
                if signal == libc::SIGSEGV && pc == RETURN_ADDRESS {
                    let result = ptrace::getregs(Pid::from_raw(tid as i32))
                        .map(return_value)
                        .map_err(|errno| TraceError::Ptrace {
                            call: "PTRACE_GETREGS",
                            tid,
                            errno,
                        });
                    call.done = Some(result);
                } else if matches!(
                    signal,
                    libc::SIGSEGV
                        | libc::SIGBUS
                        | libc::SIGILL
                        | libc::SIGFPE
                        | libc::SIGTRAP
                        | libc::SIGSYS
                        | libc::SIGABRT
                ) {
                    call.done = Some(Err(TraceError::CallFaulted { signal, pc }));
                } else {
                    // Another signal for this thread while it runs the call: given to it after the call.
                    call.deferred.push(signal);
                    if let Some(t) = self.threads.get_mut(&tid) {
                        t.stopped = false;
                    }
                    resume(tid);
                }
            }
            EVENT_CLONE => {
                // The called function started a thread.
                self.adopt_new_thread(tid);
                if let Some(t) = self.threads.get_mut(&tid) {
                    t.stopped = false;
                }
                resume(tid);
            }
            EVENT_STOP if call.timing_out => {
                call.done = Some(Err(TraceError::Timeout {
                    what: "the called function",
                    waited: Duration::ZERO,
                }));
            }
            EVENT_STOP if is_stop_signal(signal) => {
                // Job control stopped the process during the call; it goes on after SIGCONT (or times out).
                if let Some(t) = self.threads.get_mut(&tid) {
                    t.stopped = false;
                }
                let _ = raw_ptrace(libc::PTRACE_LISTEN, tid, 0, 0);
            }
            _ => {
                if let Some(t) = self.threads.get_mut(&tid) {
                    t.stopped = false;
                }
                resume(tid);
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    fn call(&mut self, entry: u64, args: [u64; 6], timeout: Duration) -> Result<u64, TraceError> {
        self.stop_all()?;
        let tid = self.main_thread()?;
        let pid = Pid::from_raw(tid as i32);
        let failed = |call: &'static str| move |errno| TraceError::Ptrace { call, tid, errno };
        let saved = ptrace::getregs(pid).map_err(failed("PTRACE_GETREGS"))?;
        let vector_state = x86::save_vector_state(tid).map_err(failed("PTRACE_GETREGSET"))?;
        let mut regs = saved;
        // Below the red zone, 16-byte aligned, then the return address: at the entry rsp + 8 is 16-byte aligned,
        // as the System V ABI requires.
        let sp = (saved.rsp.wrapping_sub(256) & !0xf).wrapping_sub(8);
        ptrace::write(
            pid,
            sp as ptrace::AddressType,
            RETURN_ADDRESS as libc::c_long,
        )
        .map_err(failed("PTRACE_POKEDATA"))?;
        regs.rsp = sp;
        regs.rip = entry;
        regs.rax = 0;
        // Not inside a system call any more: the kernel must not restart the one it was in at the new pc.
        regs.orig_rax = u64::MAX;
        regs.rdi = args[0];
        regs.rsi = args[1];
        regs.rdx = args[2];
        regs.rcx = args[3];
        regs.r8 = args[4];
        regs.r9 = args[5];
        // The direction flag must be clear at a function's entry.
        regs.eflags &= !0x400;
        ptrace::setregs(pid, regs).map_err(failed("PTRACE_SETREGS"))?;
        let own = self.threads.get(&tid).copied().unwrap_or_default();
        self.call = Some(Call {
            tid,
            done: None,
            deferred: Vec::new(),
            timing_out: false,
        });
        // Every thread runs during the call: the function may wait for another one.
        self.hold = false;
        let others: Vec<u32> = self.threads.keys().copied().filter(|&t| t != tid).collect();
        for t in others {
            self.release(t);
        }
        if let Some(t) = self.threads.get_mut(&tid) {
            t.stopped = false;
        }
        let started = raw_ptrace(libc::PTRACE_CONT, tid, 0, 0);
        let result = match started {
            Err(errno) => Err(TraceError::Ptrace {
                call: "PTRACE_CONT",
                tid,
                errno,
            }),
            Ok(()) => self.await_call(tid, timeout),
        };
        let call = self.call.take();
        if self.end.is_some() {
            return result;
        }
        // Back to where it was, whatever the call did.
        let restored = ptrace::setregs(pid, saved)
            .map_err(failed("PTRACE_SETREGS"))
            .and_then(|()| {
                x86::restore_vector_state(tid, &vector_state).map_err(failed("PTRACE_SETREGSET"))
            });
        if let Some(t) = self.threads.get_mut(&tid) {
            t.stopped = true;
            t.group_stop = own.group_stop;
            if own.signal != 0 && !(own.at_signal && t.at_signal) {
                // Its own signal can no longer be handed back at this stop: send it again.
                tgkill(self.pid, tid, own.signal);
                t.signal = 0;
                t.at_signal = false;
            } else {
                t.signal = own.signal;
                t.at_signal = own.at_signal && t.at_signal;
            }
        }
        for signal in call.map(|c| c.deferred).unwrap_or_default() {
            tgkill(self.pid, tid, signal);
        }
        restored?;
        self.stop_all()?;
        result
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn call(
        &mut self,
        _entry: u64,
        _args: [u64; 6],
        _timeout: Duration,
    ) -> Result<u64, TraceError> {
        Err(TraceError::Unsupported)
    }

    /// Polls until the calling thread returned, faulted, or `timeout` passed (then it is interrupted).
    #[cfg(target_arch = "x86_64")]
    fn await_call(&mut self, tid: u32, timeout: Duration) -> Result<u64, TraceError> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            if let Some(done) = self.call.as_mut().and_then(|c| c.done.take()) {
                return match done {
                    Err(TraceError::Timeout { what, .. }) => Err(TraceError::Timeout {
                        what,
                        waited: timeout,
                    }),
                    other => other,
                };
            }
            if !self.poll()? {
                let late = deadline.is_some_and(|d| Instant::now() >= d);
                if late && self.call.as_ref().is_some_and(|c| !c.timing_out) {
                    if let Some(c) = self.call.as_mut() {
                        c.timing_out = true;
                    }
                    if let Err(errno) = ptrace::interrupt(Pid::from_raw(tid as i32)) {
                        return Err(TraceError::Ptrace {
                            call: "PTRACE_INTERRUPT",
                            tid,
                            errno,
                        });
                    }
                }
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn pc_of(regs: libc::user_regs_struct) -> u64 {
    regs.rip
}

#[cfg(target_arch = "x86_64")]
fn return_value(regs: libc::user_regs_struct) -> u64 {
    regs.rax
}

#[cfg(target_arch = "x86_64")]
fn set_pc(regs: &mut libc::user_regs_struct, pc: u64) {
    regs.rip = pc;
}

#[cfg(not(target_arch = "x86_64"))]
fn set_pc(_regs: &mut libc::user_regs_struct, _pc: u64) {}

#[cfg(not(target_arch = "x86_64"))]
fn pc_of(_regs: libc::user_regs_struct) -> u64 {
    u64::MAX
}

#[cfg(not(target_arch = "x86_64"))]
fn return_value(_regs: libc::user_regs_struct) -> u64 {
    0
}

/// The x86 vector and floating-point state of a thread (`NT_X86_XSTATE`, or the legacy FXSAVE area where the
/// kernel has no XSAVE state), saved and restored around a call.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Errno, libc, raw_ptrace};

    const NT_PRFPREG: usize = 2;
    const NT_X86_XSTATE: usize = 0x202;

    /// A saved register set: which one, and its bytes.
    pub(super) struct VectorState {
        set: usize,
        bytes: Vec<u8>,
    }

    fn transfer(
        request: libc::c_uint,
        tid: u32,
        set: usize,
        bytes: &mut [u8],
    ) -> Result<usize, Errno> {
        let mut iov = libc::iovec {
            iov_base: bytes.as_mut_ptr().cast(),
            iov_len: bytes.len(),
        };
        raw_ptrace(request, tid, set, std::ptr::from_mut(&mut iov) as usize)?;
        Ok(iov.iov_len)
    }

    pub(super) fn save_vector_state(tid: u32) -> Result<VectorState, Errno> {
        // Large enough for every XSAVE component Linux exposes (AMX tile data included).
        let mut bytes = vec![0u8; 16 * 1024];
        let (set, len) = match transfer(libc::PTRACE_GETREGSET, tid, NT_X86_XSTATE, &mut bytes) {
            Ok(len) => (NT_X86_XSTATE, len),
            Err(Errno::EINVAL | Errno::ENODEV) => (
                NT_PRFPREG,
                transfer(libc::PTRACE_GETREGSET, tid, NT_PRFPREG, &mut bytes)?,
            ),
            Err(e) => return Err(e),
        };
        bytes.truncate(len);
        Ok(VectorState { set, bytes })
    }

    pub(super) fn restore_vector_state(tid: u32, state: &VectorState) -> Result<(), Errno> {
        let mut bytes = state.bytes.clone();
        transfer(libc::PTRACE_SETREGSET, tid, state.set, &mut bytes).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// A process that is not a child of the test (a shell's child), as an attached process usually is. Returns
    /// the shell (reaped by the test) and the grandchild's pid.
    fn grandchild(script: &str) -> (std::process::Child, u32) {
        let mut shell = Command::new("sh")
            .args(["-c", &format!("{script} & echo $!; wait $!")])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(shell.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        let pid: u32 = line.trim().parse().unwrap();
        // `$!` is known right after the fork: wait until the program is exec'd and its libraries are loaded, so
        // addresses computed now stay valid.
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let loaded = std::fs::read_to_string(format!("/proc/{pid}/maps"))
                .is_ok_and(|m| m.contains("libc.so"));
            // The program may be found through a wrapper that execs the real one: compare the arguments.
            let args = |c: &str| c.split_once(' ').map(|(_, a)| a.to_owned());
            if args(&procfs::command_line(pid)) == args(&script.replace('\'', "")) && loaded {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        (shell, pid)
    }

    fn ptrace_allowed() -> bool {
        // Sandboxes may forbid ptrace outright; the tests then say so instead of failing for the wrong reason.
        let (mut shell, pid) = grandchild("sleep 5");
        let ok = ptrace::seize(Pid::from_raw(pid as i32), ptrace::Options::empty()).is_ok();
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
        if ok {
            // This thread is its tracer: it must collect the death before the real parent can.
            let _ = wait_id(pid, WEXITED | WALL);
        }
        let _ = shell.wait();
        if !ok {
            eprintln!("ptrace is not permitted here; skipping");
        }
        ok
    }

    #[test]
    fn attach_stop_resume_and_see_the_exit_code() {
        if !ptrace_allowed() {
            return;
        }
        let (mut shell, pid) = grandchild("sh -c 'sleep 0.5; exit 7'");
        let (tracer, threads) = Tracer::attach(pid).expect("attach");
        assert_eq!(threads, 1);
        // Stopped: it shows as traced and stopped in /proc.
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        assert!(status.contains("(tracing stop)"), "{status}");
        // The kernel names the worker thread as the tracer; it belongs to this process.
        assert_eq!(procfs::tracer_of(pid), Some(std::process::id()));
        tracer.resume().unwrap();
        let watch = tracer.watch();
        let deadline = Instant::now() + Duration::from_secs(20);
        while watch.state() == ChildState::Running && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        // Its child (sleep) delivers SIGCHLD, which is forwarded; then it exits with its own code.
        assert_eq!(watch.state(), ChildState::Exited(7));
        assert_eq!(tracer.stop(), Err(TraceError::Ended(ChildState::Exited(7))));
        drop(tracer);
        // Released to its real parent, which sees the same status.
        assert_eq!(shell.wait().unwrap().code(), Some(7));
    }

    #[test]
    fn threads_started_while_traced_run_and_the_exit_is_seen() {
        if !ptrace_allowed() || Command::new("python3").arg("-V").output().is_err() {
            return;
        }
        let (mut shell, pid) = grandchild(
            "python3 -c 'import threading,time,sys;time.sleep(1);ts=[threading.Thread(target=time.sleep,args=(0.2,)) for _ in range(4)];[t.start() for t in ts];[t.join() for t in ts];sys.exit(5)'",
        );
        let (tracer, _) = Tracer::attach(pid).expect("attach");
        tracer.resume().unwrap();
        let watch = tracer.watch();
        let deadline = Instant::now() + Duration::from_secs(30);
        while watch.state() == ChildState::Running && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(watch.state(), ChildState::Exited(5));
        drop(tracer);
        assert_eq!(shell.wait().unwrap().code(), Some(5));
    }

    #[test]
    fn a_job_control_stop_stays_a_stop_until_sigcont() {
        if !ptrace_allowed() {
            return;
        }
        let (mut shell, pid) = grandchild("sleep 1");
        let (tracer, _) = Tracer::attach(pid).expect("attach");
        tracer.resume().unwrap();
        let state = || {
            std::fs::read_to_string(format!("/proc/{pid}/status"))
                .unwrap_or_default()
                .lines()
                .find_map(|l| l.strip_prefix("State:").map(|v| v.trim().to_owned()))
                .unwrap_or_default()
        };
        let _ = Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status();
        // Stopped, and held there (not resumed by the tracer) well past the sleep's own second.
        std::thread::sleep(Duration::from_millis(1500));
        let stopped = state();
        assert!(
            stopped.starts_with('T') || stopped.starts_with('t'),
            "{stopped}"
        );
        assert_eq!(tracer.watch().state(), ChildState::Running);
        let _ = Command::new("kill")
            .args(["-CONT", &pid.to_string()])
            .status();
        let watch = tracer.watch();
        let deadline = Instant::now() + Duration::from_secs(20);
        while watch.state() == ChildState::Running && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            watch.state(),
            ChildState::Exited(0),
            "it went on after SIGCONT"
        );
        drop(tracer);
        assert_eq!(shell.wait().unwrap().code(), Some(0));
    }

    #[test]
    fn a_fatal_signal_is_forwarded_and_published() {
        if !ptrace_allowed() {
            return;
        }
        let (mut shell, pid) = grandchild("sleep 30");
        let (tracer, _) = Tracer::attach(pid).expect("attach");
        tracer.resume().unwrap();
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let watch = tracer.watch();
        let deadline = Instant::now() + Duration::from_secs(20);
        while watch.state() == ChildState::Running && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(watch.state(), ChildState::Signaled(libc::SIGTERM));
        drop(tracer);
        assert_eq!(shell.wait().unwrap().code(), Some(128 + libc::SIGTERM));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn calls_a_function_in_the_process_and_puts_it_back() {
        if !ptrace_allowed() {
            return;
        }
        // `getppid` of the shared libc: the same library file is mapped in both processes, so the function lies
        // at the same offset from the library's base there.
        let (mut shell, pid) = grandchild("sleep 2");
        let local = libc::getppid as *const () as *const u32;
        let entry = super::super::inject::remote_address(pid, local)
            .unwrap()
            .expect("the process maps our libc");
        let (tracer, _) = Tracer::attach(pid).expect("attach");
        let before = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
        let parent = tracer
            .call(entry, [0; 6], Duration::from_secs(10))
            .expect("call");
        assert_eq!(parent as u32, shell.id(), "getppid ran inside the process");
        // Twice, to show the thread came back to a state from which a call works again.
        let again = tracer
            .call(entry, [0; 6], Duration::from_secs(10))
            .expect("second call");
        assert_eq!(again, parent);
        let after = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
        assert_eq!(before, after, "the same system call, at the same place");
        tracer.detach().expect("detach");
        // The interrupted sleep goes on to finish normally.
        assert_eq!(shell.wait().unwrap().code(), Some(0));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_faulting_call_is_reported_and_the_process_survives() {
        if !ptrace_allowed() {
            return;
        }
        let (mut shell, pid) = grandchild("sleep 1");
        let (tracer, _) = Tracer::attach(pid).expect("attach");
        // Address 8: not mapped, so the "function" faults at its first instruction.
        let r = tracer.call(8, [0; 6], Duration::from_secs(10));
        assert_eq!(
            r,
            Err(TraceError::CallFaulted {
                signal: libc::SIGSEGV,
                pc: 8
            })
        );
        drop(tracer);
        assert_eq!(shell.wait().unwrap().code(), Some(0), "it was put back");
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn runs_to_a_breakpoint_whose_trap_never_reaches_the_process() {
        if !ptrace_allowed() {
            return;
        }
        if Command::new("python3").arg("-V").output().is_err() {
            eprintln!("no python3 here; skipping");
            return;
        }
        // A program that calls libc's `getppid` every few milliseconds, then exits 0.
        let (mut shell, pid) = grandchild(
            "python3 -c 'import os,time;[(os.getppid(),time.sleep(0.002)) for _ in range(1000)]'",
        );
        let local = libc::getppid as *const () as *const u32;
        let entry = super::super::inject::remote_address(pid, local)
            .unwrap()
            .expect("the process maps our libc");
        let (tracer, _) = Tracer::attach(pid).expect("attach");
        let first = tracer
            .run_to(entry, Duration::from_secs(10))
            .expect("reached");
        assert_eq!(first, pid, "python calls getppid on its main thread");
        // Stopped right before the instruction, with the code intact: a second run gets there again.
        let second = tracer
            .run_to(entry, Duration::from_secs(10))
            .expect("reached again");
        assert_eq!(second, pid);
        tracer.detach().expect("detach");
        let status = shell.wait().unwrap();
        assert_eq!(
            status.code(),
            Some(0),
            "no trap reached the program: {status}"
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_breakpoint_never_reached_times_out_and_is_removed() {
        if !ptrace_allowed() {
            return;
        }
        let (mut shell, pid) = grandchild("sleep 1");
        let local = libc::getppid as *const () as *const u32;
        let entry = super::super::inject::remote_address(pid, local)
            .unwrap()
            .expect("the process maps our libc");
        let (tracer, _) = Tracer::attach(pid).expect("attach");
        let code = super::super::inject::read_u64(pid, entry).expect("read the code");
        let started = Instant::now();
        let r = tracer.run_to(entry, Duration::from_millis(300));
        assert!(
            matches!(r, Err(TraceError::Timeout { .. })),
            "{r:?} after {:?}",
            started.elapsed()
        );
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert_eq!(
            super::super::inject::read_u64(pid, entry).expect("read the code again"),
            code,
            "the breakpoint was removed"
        );
        drop(tracer);
        assert_eq!(shell.wait().unwrap().code(), Some(0));
    }

    #[test]
    fn a_missing_process_is_refused() {
        let r = Tracer::attach(u32::MAX / 2);
        assert!(matches!(r, Err(TraceError::System(_))), "{r:?}");
    }
}
