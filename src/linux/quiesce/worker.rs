//! The thread that holds the stopped threads under ptrace: it seizes and interrupts them, waits for their stops,
//! reads their registers, and detaches them.
//!
//! ptrace ties a tracee to the thread that seized it, so one thread of this process makes every request, and
//! [`Holder`] sends it work. That thread also ends when the threads are let go: a thread that was seized but never
//! stopped (one blocked where no stop request reaches it) cannot be detached, and the kernel detaches every
//! tracee of a tracing thread that exits.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::unistd::Pid;

use super::{QuiesceError, StoppedThread};
use crate::linux::inject::why_not_traceable;
use crate::linux::procfs::Process;
use crate::linux::ptrace::{bp_of, pc_of, raw_ptrace, sp_of};
use crate::linux::wait::{WALL, WEXITED, WNOHANG, WNOWAIT, WSTOPPED, Waited, wait_id};

/// The first pause between looks at threads not yet stopped; each quiet look doubles it, up to [`POLL_MAX`].
const POLL_MIN: Duration = Duration::from_micros(50);

/// What one look at a thread that runs alone found.
enum Poll {
    /// Stopped again: the signal and the ptrace event of the stop.
    Stopped { signal: i32, event: i32 },
    /// Ended, or no longer this tracer's.
    Gone,
    /// Still running.
    Running,
}
/// The longest pause between looks.
const POLL_MAX: Duration = Duration::from_millis(2);
/// How long letting go waits for the kernel to show threads it detached as untraced.
const UNTRACED_WAIT: Duration = Duration::from_secs(1);

/// A pause between seizing and interrupting each thread of one process, which tests set so that a signal lands
/// in between.
#[cfg(test)]
pub(super) static SEIZE_PAUSE: std::sync::Mutex<Option<(u32, Duration)>> =
    std::sync::Mutex::new(None);

type Reply<T> = mpsc::SyncSender<T>;
/// A thread's program counter, stack pointer and frame pointer.
type Registers = (u64, u64, u64);

enum Request {
    /// Seize and stop these threads (id and name) by `deadline`; `waited` is the whole time given, for the error.
    Stop {
        threads: Vec<(u32, OsString)>,
        deadline: Instant,
        waited: Duration,
        reply: Reply<Result<Vec<StoppedThread>, QuiesceError>>,
    },
    /// Detach every thread and end: the first failure, and the threads seized but never stopped.
    Release(Reply<(Result<(), QuiesceError>, Vec<u32>)>),
    /// Let one stopped thread run alone for `run_for`, then stop it again: its registers then, or `None` when it
    /// ended meanwhile.
    Nudge {
        tid: u32,
        run_for: Duration,
        reply: Reply<Result<Option<Registers>, QuiesceError>>,
    },
    /// Let one stopped thread run alone until it reaches `address` (a breakpoint there, taken out again), within
    /// `limit`: its registers then, or `None` when it ended meanwhile.
    RunTo {
        tid: u32,
        address: u64,
        limit: Duration,
        reply: Reply<Result<Option<Registers>, QuiesceError>>,
    },
}

/// The handle on the holding thread.
#[derive(Debug)]
pub(super) struct Holder {
    pid: u32,
    requests: Option<mpsc::Sender<Request>>,
    thread: Option<JoinHandle<()>>,
}

impl Holder {
    /// Starts the holding thread for process `pid`.
    pub(super) fn start(pid: u32) -> Result<Self, QuiesceError> {
        let (requests, incoming) = mpsc::channel();
        let worker = Worker {
            pid,
            own_child: Process::new(pid)
                .stat()
                .is_ok_and(|s| s.parent == std::process::id()),
            held: BTreeMap::new(),
            running: BTreeSet::new(),
        };
        let thread = std::thread::Builder::new()
            .name("gpu-tools-quiesce".into())
            .spawn(move || worker.run(incoming))
            .map_err(|e| QuiesceError::Trace {
                pid,
                detail: format!("cannot start the stopping thread: {e}"),
            })?;
        Ok(Holder {
            pid,
            requests: Some(requests),
            thread: Some(thread),
        })
    }

    fn gone(&self) -> QuiesceError {
        QuiesceError::Trace {
            pid: self.pid,
            detail: "the stopping thread is gone".into(),
        }
    }

    /// Sends the request `make` builds around a reply channel, and waits for the holding thread's answer.
    fn ask<T>(
        &self,
        make: impl FnOnce(Reply<Result<T, QuiesceError>>) -> Request,
    ) -> Result<T, QuiesceError> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.requests
            .as_ref()
            .ok_or_else(|| self.gone())?
            .send(make(reply))
            .map_err(|_| self.gone())?;
        answer.recv().map_err(|_| self.gone())?
    }

    /// Seizes and stops `threads`; returns those that stopped (the others ended meanwhile).
    pub(super) fn stop(
        &self,
        threads: Vec<(u32, OsString)>,
        deadline: Instant,
        waited: Duration,
    ) -> Result<Vec<StoppedThread>, QuiesceError> {
        if threads.is_empty() {
            return Ok(Vec::new());
        }
        self.ask(|reply| Request::Stop {
            threads,
            deadline,
            waited,
            reply,
        })
    }

    /// Lets stopped thread `tid` run alone for `run_for` and stops it again: its registers then, or `None` when it
    /// ended meanwhile.
    pub(super) fn nudge(
        &self,
        tid: u32,
        run_for: Duration,
    ) -> Result<Option<Registers>, QuiesceError> {
        self.ask(|reply| Request::Nudge {
            tid,
            run_for,
            reply,
        })
    }

    /// Lets stopped thread `tid` run alone until it reaches `address`, within `limit`.
    pub(super) fn run_to(
        &self,
        tid: u32,
        address: u64,
        limit: Duration,
    ) -> Result<Option<Registers>, QuiesceError> {
        self.ask(|reply| Request::RunTo {
            tid,
            address,
            limit,
            reply,
        })
    }

    /// Lets every thread go (with the signals they were about to receive) and ends the holding thread. Returns
    /// once the kernel shows them untraced, or after [`UNTRACED_WAIT`].
    pub(super) fn release(&mut self) -> Result<(), QuiesceError> {
        let Some(requests) = self.requests.take() else {
            return Ok(());
        };
        let (reply, answer) = mpsc::sync_channel(1);
        let answered = requests
            .send(Request::Release(reply))
            .ok()
            .and_then(|()| answer.recv().ok());
        drop(requests);
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                log::warn!("quiesce {}: the stopping thread panicked", self.pid);
            }
        }
        let Some((result, unstopped)) = answered else {
            return Err(self.gone());
        };
        // Those were detached by the kernel as the holding thread ended, a moment after `join` returned.
        let deadline = Instant::now() + UNTRACED_WAIT;
        let process = Process::new(self.pid);
        for tid in unstopped {
            while process.thread(tid).tracer().is_ok_and(|t| t.is_some())
                && Instant::now() < deadline
            {
                std::thread::sleep(POLL_MAX);
            }
        }
        result
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            log::warn!("quiesce {}: letting the threads go: {e}", self.pid);
        }
    }
}

/// What the holding thread holds.
struct Worker {
    pid: u32,
    /// A child of this process: its end is left for its `Child` to reap.
    own_child: bool,
    /// The stopped threads and the signal each is to be given when it goes on (0: none).
    held: BTreeMap<u32, i32>,
    /// Seized threads that have not stopped (yet).
    running: BTreeSet<u32>,
}

impl Worker {
    fn run(mut self, requests: mpsc::Receiver<Request>) {
        for request in requests.iter() {
            match request {
                Request::Stop {
                    threads,
                    deadline,
                    waited,
                    reply,
                } => {
                    let _ = reply.send(self.stop(threads, deadline, waited));
                }
                Request::Release(reply) => {
                    let _ = reply.send(self.release());
                    return;
                }
                Request::Nudge {
                    tid,
                    run_for,
                    reply,
                } => {
                    let _ = reply.send(self.nudge(tid, run_for));
                }
                Request::RunTo {
                    tid,
                    address,
                    limit,
                    reply,
                } => {
                    let _ = reply.send(self.run_to(tid, address, limit));
                }
            }
        }
        // The handle is gone without a word: let go all the same.
        if let (Err(e), _) = self.release() {
            log::warn!("quiesce {}: letting the threads go: {e}", self.pid);
        }
    }

    /// Continues stopped thread `tid` (the others stay stopped); false when it is gone.
    fn continue_alone(&mut self, tid: u32) -> Result<bool, QuiesceError> {
        match raw_ptrace(libc::PTRACE_CONT, tid, 0, 0) {
            Ok(()) => {}
            Err(Errno::ESRCH) => {
                self.held.remove(&tid);
                return Ok(false);
            }
            Err(errno) => {
                return Err(self.trace_error(format!("PTRACE_CONT of thread {tid}: {errno}")));
            }
        }
        self.held.remove(&tid);
        self.running.insert(tid);
        Ok(true)
    }

    /// One look at thread `tid`, continued alone: stopped again (no longer counted as running), gone, or still
    /// running.
    fn poll_one(&mut self, tid: u32) -> Result<Poll, QuiesceError> {
        match wait_id(tid, WSTOPPED | WEXITED | WNOHANG | WALL) {
            Ok(Some(Waited::Stopped { signal, event })) => {
                self.running.remove(&tid);
                Ok(Poll::Stopped { signal, event })
            }
            Ok(Some(_end)) => {
                self.running.remove(&tid);
                Ok(Poll::Gone)
            }
            Ok(None) => Ok(Poll::Running),
            Err(e) if e.raw_os_error() == Some(libc::ECHILD) => {
                self.running.remove(&tid);
                Ok(Poll::Gone)
            }
            Err(e) => Err(self.trace_error(format!("waitid({tid}): {e}"))),
        }
    }

    fn trace_error(&self, what: String) -> QuiesceError {
        QuiesceError::Trace {
            pid: self.pid,
            detail: what,
        }
    }

    /// Whether thread `tid` has ended (gone, or a zombie: it never stops again).
    fn ended(&self, tid: u32) -> bool {
        match Process::new(self.pid).thread(tid).stat() {
            Ok(stat) => stat.has_ended(),
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        }
    }

    /// Why seizing `tid` was refused: another tracer, or the system's rules.
    fn refused(&self, tid: u32) -> QuiesceError {
        match Process::new(self.pid).thread(tid).tracer() {
            Ok(Some(tracer)) => QuiesceError::AlreadyTraced {
                pid: self.pid,
                tid,
                tracer,
            },
            _ => QuiesceError::PermissionDenied {
                pid: self.pid,
                tid,
                detail: why_not_traceable(self.pid),
            },
        }
    }

    fn stop(
        &mut self,
        threads: Vec<(u32, OsString)>,
        deadline: Instant,
        waited: Duration,
    ) -> Result<Vec<StoppedThread>, QuiesceError> {
        let mut pending = BTreeMap::new();
        for (tid, name) in threads {
            if self.ended(tid) {
                continue;
            }
            let id = Pid::from_raw(tid as i32);
            match ptrace::seize(id, ptrace::Options::empty()) {
                Ok(()) => {}
                // It ended meanwhile.
                Err(Errno::ESRCH) => continue,
                Err(Errno::EPERM) => return Err(self.refused(tid)),
                Err(errno) => {
                    return Err(self.trace_error(format!("PTRACE_SEIZE of thread {tid}: {errno}")));
                }
            }
            self.running.insert(tid);
            #[cfg(test)]
            if let Some((_, pause)) = SEIZE_PAUSE
                .lock()
                .ok()
                .and_then(|p| *p)
                .filter(|&(p, _)| p == self.pid)
            {
                std::thread::sleep(pause);
            }
            match ptrace::interrupt(id) {
                // ESRCH: it is ending; its end is reported below.
                Ok(()) | Err(Errno::ESRCH) => {}
                Err(errno) => {
                    return Err(
                        self.trace_error(format!("PTRACE_INTERRUPT of thread {tid}: {errno}"))
                    );
                }
            }
            pending.insert(tid, name);
        }
        let mut stopped = Vec::with_capacity(pending.len());
        let mut pause = POLL_MIN;
        while !pending.is_empty() {
            let mut any = false;
            let tids: Vec<u32> = pending.keys().copied().collect();
            for tid in tids {
                // A child of this process is left for its `Child` to reap: its end is only looked at.
                let peek = tid == self.pid && self.own_child;
                let keep = if peek { WNOWAIT } else { 0 };
                match wait_id(tid, WSTOPPED | WEXITED | WNOHANG | WALL | keep) {
                    Ok(Some(Waited::Stopped { signal, event })) => {
                        if peek {
                            // Consume the stop that was only looked at.
                            let _ = wait_id(tid, WSTOPPED | WNOHANG | WALL);
                        }
                        any = true;
                        self.running.remove(&tid);
                        let name = pending.remove(&tid).unwrap_or_default();
                        // Event 0 is a signal-delivery stop: a signal came before the interrupt. Any ptrace-stop
                        // answers a pending PTRACE_INTERRUPT (the kernel clears it on entering one), so the thread
                        // stays in this one, and PTRACE_DETACH hands it the signal (with its original siginfo), as
                        // it does only from this kind of stop.
                        let signal = if event == 0 { signal } else { 0 };
                        self.held.insert(tid, signal);
                        match ptrace::getregs(Pid::from_raw(tid as i32)) {
                            Ok(regs) => stopped.push(StoppedThread {
                                tid,
                                name,
                                pc: pc_of(regs),
                                sp: sp_of(regs),
                                bp: bp_of(regs),
                                pending_signal: (signal != 0).then_some(signal),
                            }),
                            // Killed while stopped.
                            Err(Errno::ESRCH) => {}
                            Err(errno) => {
                                return Err(self.trace_error(format!(
                                    "PTRACE_GETREGS of thread {tid}: {errno}"
                                )));
                            }
                        }
                    }
                    Ok(Some(_end)) => {
                        any = true;
                        pending.remove(&tid);
                        self.running.remove(&tid);
                        if tid == self.pid {
                            return Err(QuiesceError::Ended { pid: self.pid });
                        }
                    }
                    Ok(None) => {}
                    // Reaped elsewhere: no longer ours.
                    Err(e) if e.raw_os_error() == Some(libc::ECHILD) => {
                        pending.remove(&tid);
                        self.running.remove(&tid);
                    }
                    Err(e) => return Err(self.trace_error(format!("waitid({tid}): {e}"))),
                }
            }
            if any {
                pause = POLL_MIN;
                continue;
            }
            // A thread that became a zombie after it was seized (a main thread that called pthread_exit) never
            // stops; it stays in `running`, released when this thread ends.
            pending.retain(|&tid, _| !self.ended(tid));
            if pending.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                return Err(QuiesceError::Timeout {
                    pid: self.pid,
                    waited,
                    threads: pending.keys().copied().collect(),
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(POLL_MAX);
        }
        Ok(stopped)
    }

    /// Continues thread `tid` alone, then interrupts it and waits for it to stop again.
    fn nudge(&mut self, tid: u32, run_for: Duration) -> Result<Option<Registers>, QuiesceError> {
        match self.held.get(&tid) {
            Some(0) => {}
            // A signal waits for it: continuing would have to deliver or drop it, so it is left as it is.
            Some(_) => {
                return Err(
                    self.trace_error(format!("thread {tid} has a signal pending: not run alone"))
                );
            }
            None => return Err(self.trace_error(format!("thread {tid} is not stopped"))),
        }
        let id = Pid::from_raw(tid as i32);
        if !self.continue_alone(tid)? {
            return Ok(None);
        }
        if !run_for.is_zero() {
            std::thread::sleep(run_for);
        }
        match ptrace::interrupt(id) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(errno) => {
                return Err(self.trace_error(format!("PTRACE_INTERRUPT of thread {tid}: {errno}")));
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self.poll_one(tid)? {
                Poll::Stopped { signal, event } => {
                    let signal = if event == 0 { signal } else { 0 };
                    self.held.insert(tid, signal);
                    return match ptrace::getregs(id) {
                        Ok(regs) => Ok(Some((pc_of(regs), sp_of(regs), bp_of(regs)))),
                        Err(Errno::ESRCH) => Ok(None),
                        Err(errno) => {
                            Err(self
                                .trace_error(format!("PTRACE_GETREGS of thread {tid}: {errno}")))
                        }
                    };
                }
                Poll::Gone => return Ok(None),
                Poll::Running => {}
            }
            if Instant::now() >= deadline {
                return Err(QuiesceError::Timeout {
                    pid: self.pid,
                    waited: Duration::from_secs(5),
                    threads: vec![tid],
                });
            }
            std::thread::sleep(POLL_MIN);
        }
    }

    /// Runs thread `tid` alone to `address`: an `int3` written there (the other threads are stopped, so only this
    /// one can reach it), the thread continued until it traps there, the byte put back and the program counter
    /// set back to `address`. On a timeout, a signal, or any failure, the byte is put back before returning, and
    /// the thread is stopped again.
    #[cfg(target_arch = "x86_64")]
    fn run_to(
        &mut self,
        tid: u32,
        address: u64,
        limit: Duration,
    ) -> Result<Option<Registers>, QuiesceError> {
        if self.held.get(&tid) != Some(&0) {
            return Err(self.trace_error(format!(
                "thread {tid} is not stopped without a signal: not run alone"
            )));
        }
        let id = Pid::from_raw(tid as i32);
        let at = address as ptrace::AddressType;
        let original = ptrace::read(id, at)
            .map_err(|e| self.trace_error(format!("reading {address:#x}: {e}")))?;
        let patched = (original & !0xff) | 0xcc;
        ptrace::write(id, at, patched)
            .map_err(|e| self.trace_error(format!("writing a breakpoint at {address:#x}: {e}")))?;
        let outcome = self.run_to_trap(tid, address, limit);
        // The byte goes back whatever happened (through any stopped thread of the process).
        let restorer = if self.held.contains_key(&tid) {
            Some(id)
        } else {
            self.held.keys().next().map(|&t| Pid::from_raw(t as i32))
        };
        if let Some(r) = restorer {
            if let Err(e) = ptrace::write(r, at, original) {
                log::warn!(
                    "quiesce {}: the byte at {address:#x} not put back: {e}",
                    self.pid
                );
            }
        }
        outcome
    }

    #[cfg(target_arch = "x86_64")]
    fn run_to_trap(
        &mut self,
        tid: u32,
        address: u64,
        limit: Duration,
    ) -> Result<Option<Registers>, QuiesceError> {
        let id = Pid::from_raw(tid as i32);
        let deadline = Instant::now() + limit;
        let mut interrupted = false;
        loop {
            if !self.continue_alone(tid)? {
                return Ok(None);
            }
            loop {
                match self.poll_one(tid)? {
                    Poll::Stopped { signal, event } => {
                        let regs = match ptrace::getregs(id) {
                            Ok(r) => r,
                            Err(Errno::ESRCH) => return Ok(None),
                            Err(errno) => {
                                self.held.insert(tid, 0);
                                return Err(self.trace_error(format!(
                                    "PTRACE_GETREGS of thread {tid}: {errno}"
                                )));
                            }
                        };
                        if event == 0 && signal == libc::SIGTRAP && pc_of(regs) == address + 1 {
                            let mut back = regs;
                            back.rip = address;
                            self.held.insert(tid, 0);
                            ptrace::setregs(id, back).map_err(|e| {
                                self.trace_error(format!("PTRACE_SETREGS of thread {tid}: {e}"))
                            })?;
                            return Ok(Some((address, sp_of(back), bp_of(back))));
                        }
                        if event == 0 {
                            // A signal for the thread: it keeps it, and the run ends here.
                            self.held.insert(tid, signal);
                            return Err(self.trace_error(format!(
                                "thread {tid} got signal {signal} on its way to {address:#x}"
                            )));
                        }
                        if interrupted {
                            self.held.insert(tid, 0);
                            return Err(QuiesceError::Timeout {
                                pid: self.pid,
                                waited: limit,
                                threads: vec![tid],
                            });
                        }
                        // Another kind of stop (a group stop): on again.
                        self.held.insert(tid, 0);
                        break;
                    }
                    Poll::Gone => return Ok(None),
                    Poll::Running => {}
                }
                if !interrupted && Instant::now() >= deadline {
                    interrupted = true;
                    let _ = ptrace::interrupt(id);
                }
                std::thread::sleep(POLL_MIN);
            }
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn run_to(
        &mut self,
        _tid: u32,
        _address: u64,
        _limit: Duration,
    ) -> Result<Option<Registers>, QuiesceError> {
        Err(self
            .trace_error("running a thread to an address is implemented for x86-64 only".into()))
    }

    /// Detaches every stopped thread, handing back its signal. Returns the first failure and the threads seized
    /// but never stopped (the kernel detaches those when this thread ends).
    fn release(&mut self) -> (Result<(), QuiesceError>, Vec<u32>) {
        let mut first = None;
        for (tid, signal) in std::mem::take(&mut self.held) {
            match raw_ptrace(libc::PTRACE_DETACH, tid, 0, signal as usize) {
                Ok(()) => {}
                // Killed meanwhile; ending this thread releases what is left of it.
                Err(Errno::ESRCH) => {}
                Err(errno) => {
                    log::debug!(
                        "quiesce {}: PTRACE_DETACH of thread {tid}: {errno}",
                        self.pid
                    );
                    first.get_or_insert_with(|| {
                        self.trace_error(format!("PTRACE_DETACH of thread {tid}: {errno}"))
                    });
                }
            }
        }
        let unstopped = std::mem::take(&mut self.running).into_iter().collect();
        (first.map_or(Ok(()), Err), unstopped)
    }
}
