//! [`PtraceHandshake`], the documented route: the options, the checks made before anything changes, and the
//! connection and disconnection a session asks of a route.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::diagnostics::{AttachError, AttachStep, NoCudaReason};
use super::protocol::{AttachProtocol, DetachProcedure};
use super::target::{DRIVER_DEVICES, is_running, libcuda_paths};
use super::{REPORTED, WIDE};
use crate::cudbg::event::Event;
use crate::cudbg::handshake::{ClientInfo, DebuggeeLink, Handshake};
use crate::linux::procfs::Process;
use crate::linux::ptrace::{TraceError, Tracer};

type Progress = Box<dyn FnMut(&AttachStep) + Send>;

/// The documented route (route 1): ptrace the running process and call the driver's attach entry point in it, as
/// cuda-gdb does. Used by [`DebugSession::attach`](crate::cudbg::DebugSession::attach).
///
/// The process stays traced while the session lasts: its signals are handed back to it at once, other tracers are
/// kept out, and its exit status (including death by a signal) is seen exactly. Detaching asks the driver to clean
/// up and lets the process run on ([`DetachProcedure`]); the session never kills a process it attached to. Only x86-64
/// processes can be attached to.
pub struct PtraceHandshake {
    pub(super) tracer: Option<Tracer>,
    pub(super) progress: Option<Progress>,
    pub(super) call_timeout: Duration,
    pub(super) complete_timeout: Duration,
    pub(super) protocol: AttachProtocol,
    pub(super) detach: DetachProcedure,
    /// Variables written into the process and their values before, to put back if the attach fails.
    pub(super) written: Vec<(&'static str, u64)>,
    pub(super) connected: bool,
    pub(super) pid: u32,
    /// The process [`Self::check`] last passed.
    pub(super) checked: Option<u32>,
}

impl std::fmt::Debug for PtraceHandshake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PtraceHandshake")
            .field("pid", &self.pid)
            .field("traced", &self.tracer.is_some())
            .field("connected", &self.connected)
            .field("call_timeout", &self.call_timeout)
            .field("complete_timeout", &self.complete_timeout)
            .field("protocol", &self.protocol)
            .field("detach", &self.detach)
            .finish_non_exhaustive()
    }
}

impl Default for PtraceHandshake {
    fn default() -> Self {
        Self::new()
    }
}

impl PtraceHandshake {
    /// The route with default timeouts (30 s for the attach call, 30 s for the driver's `ATTACH_COMPLETE`).
    pub fn new() -> Self {
        PtraceHandshake {
            tracer: None,
            progress: None,
            call_timeout: Duration::from_secs(30),
            complete_timeout: Duration::from_secs(30),
            protocol: AttachProtocol::Auto,
            detach: DetachProcedure::default(),
            written: Vec::new(),
            connected: false,
            pid: 0,
            checked: None,
        }
    }

    /// Calls `report` with each step of the attach and of the detach (variables read and written, calls made,
    /// events seen), for tools that show what attaching did.
    pub fn progress(mut self, report: impl FnMut(&AttachStep) + Send + 'static) -> Self {
        self.progress = Some(Box::new(report));
        self
    }

    /// How long `cudbgApiAttach()` and `cudbgApiDetach()` may take inside the process, and how long the driver's
    /// attach procedure may take with [`AttachProtocol::Descriptor`].
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// How the driver is asked to start its debugger back end. Default: [`AttachProtocol::Auto`].
    pub fn protocol(mut self, protocol: AttachProtocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// How the session lets the process go when it detaches. Default: [`DetachProcedure::WithoutInProcessCall`].
    pub fn detach_procedure(mut self, procedure: DetachProcedure) -> Self {
        self.detach = procedure;
        self
    }

    /// How long to wait for the driver's `ATTACH_COMPLETE` once the process runs again.
    pub fn complete_timeout(mut self, timeout: Duration) -> Self {
        self.complete_timeout = timeout;
        self
    }

    /// The checks that need neither the target's memory nor this process's driver library: the process exists,
    /// is another one and not a child, is not traced, and maps a `libcuda.so.1`. Returns that file.
    pub(crate) fn check_process(&mut self, pid: u32) -> Result<PathBuf, AttachError> {
        self.pid = pid;
        let me = std::process::id();
        if pid == me {
            return Err(AttachError::OwnProcess);
        }
        let target = Process::new(pid);
        if !is_running(pid) {
            return Err(AttachError::NoSuchProcess(pid));
        }
        if target.stat().is_ok_and(|s| s.parent == me) {
            return Err(AttachError::OwnChild(pid));
        }
        if let Ok(Some(tracer)) = target.tracer() {
            return Err(AttachError::AlreadyTraced { pid, tracer });
        }
        if target.stat().is_ok_and(|s| s.state == 'T') {
            return Err(AttachError::Stopped(pid));
        }
        if !cfg!(target_arch = "x86_64") {
            return Err(AttachError::Unsupported(
                "calling the driver's attach entry point is implemented for x86-64 only".into(),
            ));
        }
        let maps = target
            .maps()
            .map_err(|e| self.io_error("read its memory map", e))?;
        libcuda_paths(&maps)
            .first()
            .cloned()
            .ok_or(AttachError::NoCuda {
                pid,
                why: NoCudaReason::LibcudaNotMapped,
            })
    }

    /// Checks everything that can be checked without changing the process (once per process: a session checks
    /// before it initialises the debugger API, and `connect` then skips it).
    pub(crate) fn check(&mut self, pid: u32) -> Result<(), AttachError> {
        if self.checked == Some(pid) {
            return Ok(());
        }
        let libcuda = self.check_process(pid)?;
        let me = std::process::id();
        // The variables are found by their offset in this process's libcuda: the file must be the same.
        if let Err(AttachError::NoCuda { .. }) = self.address("cudbgIpcFlag") {
            return Err(AttachError::NoCuda {
                pid,
                why: NoCudaReason::OtherLibcuda(libcuda),
            });
        }
        self.function("cudbgApiAttach")?;
        self.function("cudbgApiDetach")?;
        let open = Process::new(pid)
            .open_files()
            .map_err(|e| self.io_error("list its open files", e))?;
        if !open
            .iter()
            .any(|f| DRIVER_DEVICES.iter().any(|d| f == Path::new(d)))
        {
            return Err(AttachError::NoCuda {
                pid,
                why: NoCudaReason::DriverNotInitialised,
            });
        }
        let command = Process::new(pid).command_line_text().unwrap_or_default();
        self.step(AttachStep::Target {
            pid,
            command,
            libcuda,
        });
        let mut vars = Vec::new();
        for &name in REPORTED {
            match self.read(name) {
                Ok(v) => vars.push((name, v)),
                // A variable this driver does not have is left out of the report.
                Err(AttachError::Unsupported(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let value = |n: &str| vars.iter().find(|(v, _)| *v == n).map_or(0, |(_, x)| *x);
        let flagged = value("cudbgDebuggerInitialized") != 0 || value("cudbgIpcFlag") != 0;
        let recorded = u32::try_from(value("cudbgApiClientPid")).unwrap_or(0);
        self.step(AttachStep::Variables(vars));
        // A program started under a debugger through the environment (route 2) names its client there.
        let env = |name| Process::new(pid).environment_variable(name).ok().flatten();
        let from_env = env("CUDBG_GET_SESSION_FROM_ENV").is_some_and(|v| v == "1");
        let env_client = env("CUDBG_APICLIENT_PID")
            .and_then(|v| v.to_str()?.trim().parse::<u32>().ok())
            .unwrap_or(0);
        let client = if recorded != 0 { recorded } else { env_client };
        // A client that is gone left its marks behind; one that is alive still debugs the process.
        let alive = client != 0 && client != me && Process::new(client).exists();
        if alive && (flagged || from_env) {
            return Err(AttachError::AlreadyDebugged { pid, client });
        }
        self.checked = Some(pid);
        Ok(())
    }
}

impl Handshake for PtraceHandshake {
    fn attaches(&self) -> bool {
        true
    }

    fn connect(
        &mut self,
        link: &mut dyn DebuggeeLink,
        info: &ClientInfo,
    ) -> Result<(), crate::Error> {
        let start = Instant::now();
        self.check(link.pid())?;
        if let Err(e) = self.prepare_and_call(link, info) {
            self.undo();
            return Err(e.into());
        }
        // The process's side of the driver now talks to this session: from here a failure is undone by the
        // session's detach.
        self.connected = true;
        link.mark_connected();
        self.complete(link, info)?;
        self.step(AttachStep::Attached {
            elapsed: start.elapsed(),
        });
        Ok(())
    }

    fn disconnect(&mut self, link: &mut dyn DebuggeeLink) -> Result<(), crate::Error> {
        if !self.connected {
            return Ok(());
        }
        self.connected = false;
        let Some(tracer) = self.tracer.as_ref() else {
            return Ok(());
        };
        // The order is cuda-gdb's (`cuda_do_detach`); the session removed its breakpoints before this. Taken out
        // of order (the process resumed before the driver was asked to clean up, no `clearAttachState`), driver
        // 580 let the process run on but it died from SIGSEGV at its exit (seen on an H100).
        let state_cleared = link.clear_attach_state();
        match tracer.stop() {
            // Gone already: nothing to detach from.
            Err(TraceError::Ended(_)) => return Ok(()),
            r => r.map_err(|e| self.trace_error(e))?,
        }
        let (called, resume_flag) = match self.detach {
            DetachProcedure::Documented => {
                let entry = self.function("cudbgApiDetach")?;
                self.write(WIDE, 0)?;
                let called = self
                    .tracer
                    .as_ref()
                    .ok_or_else(|| self.gone())?
                    .call(entry, [0; 6], self.call_timeout)
                    .map(|_| ())
                    .map_err(|e| self.trace_error(e));
                let internal_error = self.read(WIDE).unwrap_or(u64::MAX);
                let resume_flag = self.read("cudbgResumeForAttachDetach").unwrap_or(u64::MAX);
                self.step(AttachStep::DetachCalled {
                    internal_error,
                    resume_flag,
                });
                (called, resume_flag)
            }
            // With the call, driver 580 crashes at exit a process that destroyed its last context first
            // (`DetachProcedure`); the clean-up below does not need it.
            DetachProcedure::WithoutInProcessCall => {
                let resume_flag = self.read("cudbgResumeForAttachDetach").unwrap_or(u64::MAX);
                self.step(AttachStep::DetachCallLeftOut { resume_flag });
                (Ok(()), resume_flag)
            }
        };
        let cleanup = resume_flag != 0 && resume_flag != u64::MAX;
        // While the process is still stopped: the driver's side is asked to clean up, then the process's side is
        // told that no debugger is there any more.
        let requested = if cleanup {
            link.request_cleanup_on_detach(u32::try_from(resume_flag).unwrap_or(u32::MAX))
        } else {
            Ok(())
        };
        let wrote = self
            .write("cudbgDebuggerCapabilities", 0)
            .and_then(|()| self.write("cudbgDebuggerInitialized", 0));
        // Whatever the call did, the process must run on; with a clean-up under way, until the driver reports
        // DETACH_COMPLETE.
        let resumed = self
            .tracer
            .as_ref()
            .ok_or_else(|| self.gone())
            .and_then(|t| t.resume().map_err(|e| self.trace_error(e)));
        let completed = if cleanup && requested.is_ok() {
            match link.await_event(
                &|e| matches!(e, Event::DetachComplete),
                self.complete_timeout,
            ) {
                Ok(true) => Ok(()),
                Ok(false) => Err(crate::Error::from(crate::cudbg::SessionError::Attach(
                    AttachError::Timeout {
                        pid: self.pid,
                        what: "the driver's DETACH_COMPLETE event",
                        waited: self.complete_timeout,
                    },
                ))),
                Err(e) => Err(e),
            }
        } else {
            Ok(())
        };
        let cleared = self.write("cudbgIpcFlag", 0);
        self.written.clear();
        state_cleared?;
        called?;
        requested?;
        wrote?;
        resumed?;
        completed?;
        cleared?;
        self.step(AttachStep::Detached);
        Ok(())
    }
}

impl Drop for PtraceHandshake {
    fn drop(&mut self) {
        if !self.connected && !self.written.is_empty() {
            self.undo();
        }
        // Dropping the tracer detaches from every thread.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_before_any_change() {
        let mut h = PtraceHandshake::new();
        assert!(matches!(
            h.check(std::process::id()),
            Err(AttachError::OwnProcess)
        ));
        assert!(matches!(
            h.check(u32::MAX / 2),
            Err(AttachError::NoSuchProcess(_))
        ));
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let r = h.check(child.id());
        assert!(
            matches!(r, Err(AttachError::OwnChild(p)) if p == child.id()),
            "{r:?}"
        );
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_process_without_cuda_is_refused_unchanged() {
        // A grandchild (not our child), which maps no libcuda.
        let mut shell = std::process::Command::new("sh")
            .args(["-c", "sleep 5 & echo $!; wait $!"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(shell.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        let pid: u32 = line.trim().parse().unwrap();
        let r = PtraceHandshake::new().check(pid);
        if cfg!(target_arch = "x86_64") {
            assert!(
                matches!(
                    r,
                    Err(AttachError::NoCuda {
                        why: NoCudaReason::LibcudaNotMapped,
                        ..
                    })
                ),
                "{r:?}"
            );
        }
        assert_eq!(Process::new(pid).tracer().unwrap(), None, "never traced");
        let _ = std::process::Command::new("kill")
            .arg(pid.to_string())
            .status();
        let _ = shell.wait();
    }
}
