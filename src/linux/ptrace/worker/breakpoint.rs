//! Running the traced process to an address: a software breakpoint (`int3`) that exists only while the process
//! runs to it, whose trap never reaches the process.

use std::time::{Duration, Instant};

use nix::sys::ptrace;
use nix::unistd::Pid;

use super::Worker;
use crate::linux::ptrace::TraceError;
use crate::linux::ptrace::regs::{pc_of, set_pc};

/// A software breakpoint while [`Tracer::run_to`](crate::linux::ptrace::Tracer::run_to) runs the process.
#[derive(Debug)]
pub(super) struct Breakpoint {
    pub(super) addr: u64,
    /// The first thread that reached it.
    pub(super) hit: Option<u32>,
    /// A failure to put a thread that reached it back before the instruction.
    pub(super) failed: Option<TraceError>,
}

impl Worker {
    /// Whether thread `tid`, stopped by SIGTRAP, trapped at the armed breakpoint. If so it is held there, put back
    /// before the instruction, and the trap is not handed to it.
    pub(super) fn at_breakpoint(&mut self, tid: u32) -> bool {
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

    /// See [`Tracer::run_to`](crate::linux::ptrace::Tracer::run_to).
    pub(super) fn run_to(&mut self, addr: u64, timeout: Duration) -> Result<u32, TraceError> {
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
}
