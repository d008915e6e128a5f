//! The worker thread that owns a traced process: it seizes every thread, polls them for stops and exits, hands
//! each signal back, keeps job-control stops, follows new threads and `exec`, and detaches.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::unistd::Pid;

mod breakpoint;
mod call;

use breakpoint::Breakpoint;
use call::Call;

use super::regs::{pc_of, sp_of, syscall_of};
use super::sys::{EVENT_CLONE, EVENT_EXEC, EVENT_STOP, is_stop_signal, raw_ptrace};
use super::{Request, ThreadRegisters, TraceError};
use crate::linux::exit_watch::{ChildState, EndPublisher};
use crate::linux::procfs::Process;
use crate::linux::wait::{WALL, WEXITED, WNOHANG, WNOWAIT, WSTOPPED, Waited, wait_id};

/// How long the worker sleeps between polls right after something happened; each quiet poll doubles it, up to
/// [`IDLE_POLL_MAX`]. A thread that stopped for a signal waits at most that long to get it back.
const IDLE_POLL_MIN: Duration = Duration::from_millis(1);
/// The longest sleep between polls (each poll is two `waitid` calls per traced thread).
const IDLE_POLL_MAX: Duration = Duration::from_millis(8);
/// How long stopping every thread may take.
pub(super) const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// What the worker knows of one traced thread.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Thread {
    /// In a ptrace-stop (requests can be made).
    pub(super) stopped: bool,
    /// Held in a job-control stop: resumed with `PTRACE_LISTEN`, so it stays stopped until SIGCONT.
    pub(super) group_stop: bool,
    /// The signal it was about to receive when it stopped (0: none); handed back when it resumes.
    pub(super) signal: i32,
    /// Whether its current stop is a signal-delivery stop (only there can a signal be handed back).
    pub(super) at_signal: bool,
}

pub(super) struct Worker {
    pub(super) pid: u32,
    pub(super) threads: BTreeMap<u32, Thread>,
    /// Whether stopped threads stay stopped (true) or are resumed as soon as they report (false).
    pub(super) hold: bool,
    pub(super) end: Option<ChildState>,
    pub(super) publisher: EndPublisher,
    /// A child of this process: its exit is left for its `Child` to reap.
    pub(super) own_child: bool,
    call: Option<Call>,
    breakpoint: Option<Breakpoint>,
}

/// The thread ids of process `pid`.
pub(super) fn task_ids(pid: u32) -> Result<Vec<u32>, TraceError> {
    Process::new(pid)
        .thread_ids()
        .map_err(|e| TraceError::System(format!("/proc/{pid}/task: {e}")))
}

impl Worker {
    pub(super) fn new(pid: u32, publisher: EndPublisher) -> Self {
        Worker {
            pid,
            threads: BTreeMap::new(),
            hold: true,
            end: None,
            publisher,
            own_child: Process::new(pid)
                .stat()
                .is_ok_and(|s| s.parent == std::process::id()),
            call: None,
            breakpoint: None,
        }
    }

    pub(super) fn run(
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

    pub(super) fn serve(&mut self, request: Request) {
        match request {
            Request::Stop(reply) => {
                let _ = reply.send(self.stop_all());
            }
            Request::Resume(reply) => {
                let _ = reply.send(self.resume_all());
            }
            Request::Threads(reply) => {
                let _ = reply.send(self.thread_registers());
            }
            Request::Call { spec, reply } => {
                let _ = reply.send(self.call(spec));
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

    pub(super) fn ended(&self) -> Result<(), TraceError> {
        match self.end {
            Some(state) => Err(TraceError::Ended(state)),
            None => Ok(()),
        }
    }

    /// Seizes every thread (again until no new one appears), then stops them all.
    pub(super) fn attach_all(&mut self) -> Result<usize, TraceError> {
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
    pub(super) fn poll(&mut self) -> Result<bool, TraceError> {
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

    pub(super) fn on_exit(&mut self, tid: u32, how: Waited) {
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

    pub(super) fn on_stop(&mut self, tid: u32, signal: i32, event: i32) {
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
    pub(super) fn main_thread(&self) -> Result<u32, TraceError> {
        if self.threads.contains_key(&self.pid) {
            Ok(self.pid)
        } else {
            self.threads.keys().next().copied().ok_or(TraceError::Gone)
        }
    }

    /// The registers of every thread, after stopping them all; the main thread first.
    pub(super) fn thread_registers(&mut self) -> Result<Vec<ThreadRegisters>, TraceError> {
        self.stop_all()?;
        let main = self.main_thread()?;
        let mut tids: Vec<u32> = self.threads.keys().copied().collect();
        tids.sort_by_key(|&t| (t != main, t));
        let mut out = Vec::with_capacity(tids.len());
        for tid in tids {
            match ptrace::getregs(Pid::from_raw(tid as i32)) {
                Ok(regs) => out.push(ThreadRegisters {
                    tid,
                    pc: pc_of(regs),
                    sp: sp_of(regs),
                    syscall: syscall_of(regs),
                }),
                // A thread that is exiting; it is no candidate for anything.
                Err(Errno::ESRCH) => {}
                Err(errno) => {
                    return Err(TraceError::Ptrace {
                        call: "PTRACE_GETREGS",
                        tid,
                        errno,
                    });
                }
            }
        }
        Ok(out)
    }

    pub(super) fn adopt_new_thread(&mut self, parent: u32) {
        if let Ok(new) = ptrace::getevent(Pid::from_raw(parent as i32)) {
            let new = new as u32;
            // Its first stop may already have been seen; then it is known already.
            self.threads.entry(new).or_default();
            log::debug!("tracer: thread {new} appeared in process {}", self.pid);
        }
    }

    /// Lets a stopped thread run (or, in a job-control stop, wait for SIGCONT), handing back its signal.
    pub(super) fn release(&mut self, tid: u32) {
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

    pub(super) fn stop_all(&mut self) -> Result<(), TraceError> {
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

    pub(super) fn resume_all(&mut self) -> Result<(), TraceError> {
        self.ended()?;
        self.hold = false;
        let tids: Vec<u32> = self.threads.keys().copied().collect();
        for tid in tids {
            self.release(tid);
        }
        Ok(())
    }

    pub(super) fn detach_all(&mut self) -> Result<(), TraceError> {
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
}
