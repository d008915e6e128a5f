//! Calling a function inside the traced process: on one thread, with up to six integer arguments, while every
//! thread runs (the function may wait for another), then putting that thread back exactly where it was.

use std::time::{Duration, Instant};

use nix::sys::ptrace;
use nix::unistd::Pid;

use super::Worker;
#[cfg(target_arch = "x86_64")]
use crate::linux::memory;
use crate::linux::ptrace::regs::{pc_of, return_value};
#[cfg(target_arch = "x86_64")]
use crate::linux::ptrace::regs::{restore_vector_state, save_vector_state};
use crate::linux::ptrace::sys::{EVENT_CLONE, EVENT_STOP, is_stop_signal, raw_ptrace, tgkill};
use crate::linux::ptrace::{Arg, CallSpec, TraceError};

/// Where a called function returns to: nothing is mapped at 0, so the return faults (SIGSEGV at pc 0), which the
/// worker intercepts before the process sees it.
const RETURN_ADDRESS: u64 = 0;

/// An inferior call in progress.
#[derive(Debug)]
pub(super) struct Call {
    pub(super) tid: u32,
    pub(super) done: Option<Result<u64, TraceError>>,
    /// Asynchronous signals the calling thread received meanwhile: sent again once it is back.
    pub(super) deferred: Vec<i32>,
    pub(super) timing_out: bool,
}

impl Worker {
    pub(super) fn on_call_stop(&mut self, tid: u32, signal: i32, event: i32) {
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
    pub(super) fn call(&mut self, spec: CallSpec) -> Result<u64, TraceError> {
        self.stop_all()?;
        let tid = match spec.thread {
            Some(t) if self.threads.contains_key(&t) => t,
            Some(t) => {
                return Err(TraceError::System(format!(
                    "thread {t} is not a traced thread of process {}",
                    self.pid
                )));
            }
            None => self.main_thread()?,
        };
        if spec.args.len() > 6 {
            return Err(TraceError::System(format!(
                "{} arguments: at most six can be passed in registers",
                spec.args.len()
            )));
        }
        let pid = Pid::from_raw(tid as i32);
        let failed = |call: &'static str| move |errno| TraceError::Ptrace { call, tid, errno };
        let saved = ptrace::getregs(pid).map_err(failed("PTRACE_GETREGS"))?;
        let vector_state = save_vector_state(tid).map_err(failed("PTRACE_GETREGSET"))?;
        // Below the red zone: the call's data (16-byte aligned), then the return address, placed so that at the
        // entry rsp + 8 is 16-byte aligned, as the System V ABI requires. Nothing of the thread's lives there.
        let below_red_zone = saved.rsp.wrapping_sub(256) & !0xf;
        let data_at = below_red_zone.wrapping_sub(spec.data.len() as u64) & !0xf;
        let sp = data_at.wrapping_sub(8);
        // What the data and the return address overwrite is put back after the call.
        let mut overwritten = vec![0u8; (below_red_zone - sp) as usize];
        memory::read_bytes(self.pid, sp, &mut overwritten)
            .map_err(|e| TraceError::System(format!("reading the stack of thread {tid}: {e}")))?;
        let mut frame = RETURN_ADDRESS.to_ne_bytes().to_vec();
        frame.extend_from_slice(&spec.data);
        memory::write_bytes(self.pid, sp, &frame)
            .map_err(|e| TraceError::System(format!("writing the stack of thread {tid}: {e}")))?;
        let mut args = [0u64; 6];
        for (slot, arg) in args.iter_mut().zip(&spec.args) {
            *slot = match *arg {
                Arg::Int(v) => v,
                Arg::Data(offset) => data_at + offset as u64,
            };
        }
        let mut regs = saved;
        regs.rsp = sp;
        regs.rip = spec.entry;
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
        if let Err(errno) = ptrace::setregs(pid, regs) {
            let _ = memory::write_bytes(self.pid, sp, &overwritten);
            return Err(failed("PTRACE_SETREGS")(errno));
        }
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
            Ok(()) => self.await_call(tid, spec.timeout),
        };
        let call = self.call.take();
        if self.end.is_some() {
            return result;
        }
        // Back to where it was, whatever the call did.
        let restored = ptrace::setregs(pid, saved)
            .map_err(failed("PTRACE_SETREGS"))
            .and_then(|()| {
                restore_vector_state(tid, &vector_state).map_err(failed("PTRACE_SETREGSET"))
            })
            .and_then(|()| {
                memory::write_bytes(self.pid, sp, &overwritten).map_err(|e| {
                    TraceError::System(format!("restoring the stack of thread {tid}: {e}"))
                })
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
    pub(super) fn call(&mut self, _spec: CallSpec) -> Result<u64, TraceError> {
        Err(TraceError::Unsupported)
    }

    /// Polls until the calling thread returned, faulted, or `timeout` passed (then it is interrupted).
    #[cfg(target_arch = "x86_64")]
    pub(super) fn await_call(&mut self, tid: u32, timeout: Duration) -> Result<u64, TraceError> {
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
