//! The end of a session: closing it, letting a debuggee go (detach) or killing it, finalising the API, and what is
//! left to clean up.

use std::sync::atomic::Ordering;

use super::builder::OnDrop;
use super::link::Linked;
use super::{Closed, DETACH_WAIT, DebugSession, UNUSABLE};
use crate::cudbg::CudbgError;
use crate::cudbg::api::api_call;
use crate::cudbg::event::Event;
use crate::cudbg::handshake;
use crate::linux::procfs::Process;

impl DebugSession {
    /// Ends the session now and reports what was left: events still queued, and the exit status.
    pub fn close(mut self) -> Result<Closed, crate::Error> {
        let drained = self.drain(true);
        let teardown = self.teardown();
        // Includes what a detach drained while it waited for the driver.
        let events = self.pending.drain(..).collect();
        drained?;
        teardown?;
        Ok(Closed {
            events,
            exit: self.exit.get(),
        })
    }

    /// Stops the debuggee (SIGSTOP) while it is a child not yet reaped; SIGKILL still ends a stopped process.
    pub(super) fn stop_child(&self) {
        if self.exit.get().is_some() || self.child.borrow().is_none() {
            return;
        }
        let Ok(pid) = i32::try_from(self.pid) else {
            return;
        };
        // SAFETY: plain system call; the pid is our unreaped child, so it cannot name another process.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
    }

    fn kill_and_reap(&mut self) {
        if let Some(child) = self.child.get_mut().as_mut() {
            if self.exit.get().is_none() {
                self.killed_here.set(true);
                let _ = child.kill();
                self.exit.set(child.wait().ok());
            }
        }
    }

    /// Lets the debuggee go on without a debugger: breakpoints removed, then the route disconnects it (by default
    /// [`Self::clean_up_on_detach`]; an attached process also has the driver's attach undone inside it). Events
    /// drained meanwhile stay in `pending`.
    fn detach(&mut self) -> Result<(), crate::Error> {
        let bps: Vec<_> = self.breakpoints.borrow_mut().iter().copied().collect();
        for (dev, addr) in bps {
            // SAFETY: an address this session set a breakpoint at.
            api_call!(*self.live_api()?, unsetBreakpoint(dev, addr))?;
        }
        self.breakpoints.borrow_mut().clear();
        if self.attached {
            // Nothing may hold the process inside the driver while it detaches: with a launch
            // still waiting for its KERNEL_READY to be acknowledged, driver 580 never reported DETACH_COMPLETE and
            // the process later died from SIGSEGV (seen on an H100). New launches raise no event from here on;
            // the events already queued are fetched (they stay for the caller) and acknowledged.
            self.set_launch_events(false)?;
            self.drain(true)?;
            if self.unacknowledged.get() {
                self.acknowledge()?;
            }
        }
        match self.handshake.take() {
            Some(mut route) => {
                let r = route.disconnect(&mut Linked(self));
                self.handshake = Some(route);
                r
            }
            None => self.clean_up_on_detach(),
        }
    }

    /// The driver's side of a detach: asks it to clean up, then acknowledges events until it reports
    /// `DETACH_COMPLETE` (finalising earlier leaves the debuggee's driver waiting for a debugger that is gone).
    pub(super) fn clean_up_on_detach(&mut self) -> Result<(), crate::Error> {
        let resume = handshake::resume_flag(self.pid);
        // SAFETY: plain flag argument: the debuggee's `cudbgResumeForAttachDetach`, as the header asks.
        api_call!(*self.live_api()?, requestCleanupOnDetach(resume))?;
        self.await_event(&|e| matches!(e, Event::DetachComplete), DETACH_WAIT)?;
        Ok(())
    }

    pub(super) fn teardown(&mut self) -> Result<(), crate::Error> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        let running = (self.child.get_mut().is_some() || self.attached)
            && matches!(self.exit_status(), Ok(None));
        // Only a debuggee the driver opened a session for can be detached; one that never got that far would
        // stay blocked in `cuInit`, so it is killed whatever `on_drop` says. A process the session attached to is
        // never killed.
        let detach = running && self.opened && (self.attached || self.on_drop == OnDrop::Detach);
        let kill = running && !detach && !self.attached;
        let mut first_err: Option<crate::Error> = None;
        let mut keep = |r: Result<(), crate::Error>| {
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        };
        if detach {
            keep(self.detach());
        }
        if self.opened && self.death_signal().is_some() && !self.killed_here.get() {
            // The debuggee died from a signal while attached: finalize crashed this process in most trials
            // (driver 580), so it is not called, and no later session may use the driver's debugger side.
            UNUSABLE.store(true, Ordering::Release);
        } else {
            // A debuggee that is to be killed is stopped, the API finalised, and only then is it killed: killing
            // it first made the driver's debugger side crash this process in most trials (driver 580),
            // finalising first in none. Stopped, it cannot run on without its debugger (it then sometimes died
            // from SIGSEGV before the SIGKILL came).
            if kill {
                self.stop_child();
            }
            // SAFETY: no arguments; initialize succeeded when the session was built, and this runs once.
            let fin = api_call!(self.api, finalize());
            if kill {
                self.kill_and_reap();
            }
            // A debuggee that is gone makes finalize report a communication failure: the session is over
            // either way.
            if !matches!(
                fin,
                Err(crate::Error::Cudbg(
                    CudbgError::CommunicationFailure | CudbgError::Uninitialized
                ))
            ) {
                keep(fin);
            }
        }
        // After finalize: an attach route lets go of the process here (ptrace detach).
        self.handshake = None;
        if self.exit.get().is_none() {
            if let Some(mut child) = self.child.get_mut().take() {
                // Detached and still running: reap it when it ends, so it never lingers as a zombie.
                let _ = std::thread::Builder::new()
                    .name("gpu-tools-reaper".into())
                    .spawn(move || child.wait());
            }
        }
        // The driver's FIFOs for the debuggee (unless it is an attached process that runs on) and for this
        // process's client side.
        if self.pid != 0 && (!self.attached || !Process::new(self.pid).exists()) {
            remove_driver_dir(self.pid);
        }
        remove_driver_dir(std::process::id());
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Removes `/tmp/cuda-dbg/<pid>/`, where the driver keeps a process's debugger FIFOs.
pub(super) fn remove_driver_dir(pid: u32) {
    let _ = std::fs::remove_dir_all(format!("/tmp/cuda-dbg/{pid}"));
}

impl Drop for DebugSession {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}
