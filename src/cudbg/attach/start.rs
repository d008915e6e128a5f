//! The attach itself, once the checks passed: the process stopped, this client written into its driver, the driver
//! asked to start its debugger back end (an inferior call of `cudbgApiAttach()`, or a byte to the driver's
//! attach descriptor), then the process run until the driver reports its state.

use std::time::{Duration, Instant};

use super::diagnostics::{AttachError, AttachStep, NoCudaReason};
use super::protocol::AttachProtocol;
use super::route::PtraceHandshake;
use super::{ATTACH_FD, ATTACH_FINISHED, ATTACH_NOT_POSSIBLE, RETRY_DELAY, RETRY_FOR, WIDE};
use crate::cudbg::event::Event;
use crate::cudbg::handshake::{ClientInfo, DebuggeeLink, EndWatch};
use crate::linux::exit_watch::ChildState;
use crate::linux::procfs::Process;
use crate::linux::ptrace::{TraceError, Tracer};

impl PtraceHandshake {
    /// Calls `cudbgApiAttach()` until the driver accepts (retrying while it answers "not possible").
    pub(super) fn call_attach(&mut self) -> Result<(), AttachError> {
        let entry = self.function("cudbgApiAttach")?;
        let start = Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            self.write(WIDE, 0)?;
            let tracer = self.tracer.as_ref().ok_or_else(|| self.gone())?;
            tracer
                .call(entry, [0; 6], self.call_timeout)
                .map_err(|e| self.trace_error(e))?;
            let code = self.read(WIDE)?;
            self.step(AttachStep::AttachCalled {
                attempt,
                internal_error: code,
            });
            match code {
                0 => return Ok(()),
                ATTACH_NOT_POSSIBLE if start.elapsed() < RETRY_FOR => {
                    self.step(AttachStep::Retrying { attempt });
                    let tracer = self.tracer.as_ref().ok_or_else(|| self.gone())?;
                    tracer.resume().map_err(|e| self.trace_error(e))?;
                    std::thread::sleep(RETRY_DELAY);
                    let tracer = self.tracer.as_ref().ok_or_else(|| self.gone())?;
                    tracer.stop().map_err(|e| self.trace_error(e))?;
                }
                ATTACH_NOT_POSSIBLE => {
                    return Err(AttachError::NotPossible {
                        pid: self.pid,
                        attempts: attempt,
                        waited: start.elapsed(),
                    });
                }
                code => {
                    return Err(AttachError::DriverRefused {
                        pid: self.pid,
                        code,
                    });
                }
            }
        }
    }

    /// The steps up to the attach call; on failure the caller undoes them.
    pub(super) fn prepare_and_call(
        &mut self,
        link: &mut dyn DebuggeeLink,
        info: &ClientInfo,
    ) -> Result<(), AttachError> {
        let (tracer, threads) = Tracer::attach(self.pid).map_err(|e| self.trace_error(e))?;
        link.watch_end(EndWatch(tracer.watch()));
        self.tracer = Some(tracer);
        self.step(AttachStep::Stopped { threads });
        let descriptor = self.attach_descriptor()?;
        self.write("cudbgApiClientPid", u64::from(info.debugger_pid))?;
        self.write("cudbgApiClientRevision", u64::from(info.revision))?;
        self.write("cudbgSessionId", u64::from(info.session_id))?;
        // cuda-gdb also sets `cudbgRpcEnabled`; this crate's debugger side is not an RPC client, and with the flag
        // set driver 580 accepted the attach but never reported its completion (seen on an H100). The session then
        // runs as a launched one does, whose debuggee has the flag at 0.
        self.write(
            "cudbgEnableLaunchBlocking",
            u64::from(info.blocking_launches),
        )?;
        self.write("cudbgDebuggerCapabilities", u64::from(info.capabilities))?;
        match descriptor {
            Some(fd) => self.request_attach(fd),
            None => self.call_attach(),
        }
    }

    /// The driver's attach-procedure descriptor, if the protocol is to use it (`None`: call `cudbgApiAttach()`).
    /// A driver that offers it but has not set it up yet (-1) is let run until it has, for up to [`RETRY_FOR`].
    pub(super) fn attach_descriptor(&mut self) -> Result<Option<i32>, AttachError> {
        if self.protocol == AttachProtocol::InferiorCall {
            return Ok(None);
        }
        let fd = match self.read(ATTACH_FD) {
            Ok(v) => v as u32 as i32,
            Err(AttachError::Unsupported(_)) if self.protocol == AttachProtocol::Auto => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        if fd >= 0 {
            return Ok(Some(fd));
        }
        let start = Instant::now();
        let tracer = self.tracer.as_ref().ok_or_else(|| self.gone())?;
        tracer.resume().map_err(|e| self.trace_error(e))?;
        let fd = loop {
            std::thread::sleep(Duration::from_millis(10));
            let fd = self.read(ATTACH_FD)? as u32 as i32;
            if fd >= 0 || start.elapsed() >= RETRY_FOR {
                break fd;
            }
        };
        let tracer = self.tracer.as_ref().ok_or_else(|| self.gone())?;
        tracer.stop().map_err(|e| self.trace_error(e))?;
        if fd < 0 {
            return Err(AttachError::NoCuda {
                pid: self.pid,
                why: NoCudaReason::DriverNotInitialised,
            });
        }
        Ok(Some(fd))
    }

    /// Starts the driver's attach procedure through its descriptor `fd` and runs the process until the driver
    /// reports it finished.
    pub(super) fn request_attach(&mut self, fd: i32) -> Result<(), AttachError> {
        let finished = self.function(ATTACH_FINISHED)?;
        if self.read("cudbgDebuggerInitialized")? != 0 {
            self.step(AttachStep::BackEndRunning);
            return Ok(());
        }
        self.write(WIDE, 0)?;
        let path = format!("/proc/{}/fd/{fd}", self.pid);
        let sent = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &[0]));
        if let Err(e) = sent {
            return Err(match e.raw_os_error() {
                // A descriptor the process does not have, while the process itself is still there.
                Some(libc::ENOENT) if Process::new(self.pid).exists() => AttachError::Trace {
                    pid: self.pid,
                    detail: format!("cannot write to {path} ({ATTACH_FD}): {e}"),
                },
                _ => self.io_error(&format!("write to {path}"), e),
            });
        }
        self.step(AttachStep::AttachRequested { fd });
        let start = Instant::now();
        let tracer = self.tracer.as_ref().ok_or_else(|| self.gone())?;
        let thread = tracer
            .run_to(finished, self.call_timeout)
            .map_err(|e| match e {
                TraceError::Timeout { .. } => AttachError::Timeout {
                    pid: self.pid,
                    what: "the driver's attach procedure (cudbgReportAttachProcedureFinished)",
                    waited: self.call_timeout,
                },
                e => self.trace_error(e),
            })?;
        let code = self.read(WIDE)?;
        self.step(AttachStep::AttachProcedureFinished {
            thread,
            waited: start.elapsed(),
            internal_error: code,
        });
        if code != 0 {
            return Err(AttachError::DriverRefused {
                pid: self.pid,
                code,
            });
        }
        Ok(())
    }

    /// The steps after the driver accepted: the process runs again and the driver reports its state.
    pub(super) fn complete(
        &mut self,
        link: &mut dyn DebuggeeLink,
        info: &ClientInfo,
    ) -> Result<(), AttachError> {
        // cuda-gdb writes the capabilities once more after the call.
        self.write("cudbgDebuggerCapabilities", u64::from(info.capabilities))?;
        let resume = self.read("cudbgResumeForAttachDetach")?;
        self.step(AttachStep::ResumeFlag(resume));
        let tracer = self.tracer.as_ref().ok_or_else(|| self.gone())?;
        tracer.resume().map_err(|e| self.trace_error(e))?;
        self.step(AttachStep::Resumed);
        if resume == 0 {
            // No state to report first: switch the driver's callbacks on directly.
            return self.write("cudbgIpcFlag", 1);
        }
        let seen = std::cell::RefCell::new(Vec::new());
        let found = link
            .await_event(
                &|e| {
                    seen.borrow_mut().push(*e);
                    matches!(e, Event::AttachComplete)
                },
                self.complete_timeout,
            )
            .map_err(|e| match e {
                // Killed while the driver replayed its state: the process's end, as anywhere else in the attach.
                crate::Error::Session(crate::cudbg::SessionError::DebuggeeKilled { .. }) => {
                    self.gone()
                }
                e => AttachError::Trace {
                    pid: self.pid,
                    detail: format!("while waiting for ATTACH_COMPLETE: {e}"),
                },
            })?;
        self.step(AttachStep::Events(seen.into_inner()));
        if found {
            Ok(())
        } else if self
            .tracer
            .as_ref()
            .is_some_and(|t| t.watch().state() != ChildState::Running)
        {
            Err(self.gone())
        } else {
            Err(AttachError::Timeout {
                pid: self.pid,
                what: "the driver's ATTACH_COMPLETE event",
                waited: self.complete_timeout,
            })
        }
    }
}
