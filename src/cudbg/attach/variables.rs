//! The driver's variables and functions inside the attached process: where they lie (at the same offset from the
//! library's base as in this process's `libcuda.so.1`), reading and writing them, putting them back, and the errors
//! those steps map to.

use std::ffi::c_void;
use std::time::{Duration, Instant};

use super::WIDE;
use super::diagnostics::{AttachError, AttachStep, NoCudaReason};
use super::route::PtraceHandshake;
use super::target::is_running;
use crate::cudbg::handshake::client_variable;
use crate::cudbg::library::DebuggerLibrary;
use crate::linux::exit_watch::ChildState;
use crate::linux::inject::why_not_traceable;
use crate::linux::memory;
use crate::linux::ptrace::TraceError;

impl PtraceHandshake {
    pub(super) fn step(&mut self, step: AttachStep) {
        log::debug!("attach {}: {step}", self.pid);
        if let Some(report) = self.progress.as_mut() {
            report(&step);
        }
    }

    pub(super) fn lib() -> Result<&'static DebuggerLibrary, AttachError> {
        DebuggerLibrary::get()
            .ok_or_else(|| AttachError::Unsupported("libcuda.so.1 is not loaded".into()))
    }

    /// Where this process's libcuda variable `name` lies in the process.
    pub(super) fn address(&self, name: &'static str) -> Result<u64, AttachError> {
        let local = client_variable(Self::lib()?, name).map_err(|_| {
            AttachError::Unsupported(format!("libcuda.so.1 does not export `{name}`"))
        })?;
        self.remote(local.cast_const().cast())
    }

    /// Where this process's libcuda function `name` lies in the process.
    pub(super) fn function(&self, name: &'static str) -> Result<u64, AttachError> {
        let mut symbol = name.as_bytes().to_vec();
        symbol.push(0);
        // SAFETY: only the symbol's address is taken; the function is never called in this process.
        let local = unsafe { Self::lib()?.lib.get::<*const c_void>(&symbol) }
            .map(|s| *s)
            .map_err(|_| {
                AttachError::Unsupported(format!("libcuda.so.1 does not export `{name}`"))
            })?;
        self.remote(local.cast())
    }

    pub(super) fn remote(&self, local: *const u32) -> Result<u64, AttachError> {
        let pid = self.pid;
        let ended = || {
            !is_running(pid)
                || self
                    .tracer
                    .as_ref()
                    .is_some_and(|t| t.watch().state() != ChildState::Running)
        };
        match memory::remote_address(pid, local) {
            Ok(Some(addr)) => Ok(addr),
            // A process that ended maps nothing any more. One killed during the attach has an empty memory map
            // for a moment before it is seen to have ended (seen on an H100): give it that moment.
            Ok(None) => {
                let deadline = Instant::now() + Duration::from_secs(1);
                while !ended() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(2));
                }
                if ended() {
                    Err(self.gone())
                } else {
                    Err(AttachError::NoCuda {
                        pid,
                        why: NoCudaReason::LibcudaNotMapped,
                    })
                }
            }
            Err(e) => Err(self.io_error("read its memory map", e)),
        }
    }

    pub(super) fn io_error(&self, what: &str, e: std::io::Error) -> AttachError {
        let pid = self.pid;
        match e.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => AttachError::PermissionDenied {
                pid,
                detail: format!("cannot {what}: {e}"),
            },
            Some(libc::ESRCH | libc::ENOENT) => self.gone(),
            _ => AttachError::Trace {
                pid,
                detail: format!("cannot {what}: {e}"),
            },
        }
    }

    /// The error for a process that is no longer there, with its status when the tracer saw it end.
    pub(super) fn gone(&self) -> AttachError {
        // The tracer publishes the end within a poll or two of it.
        let deadline = Instant::now() + Duration::from_secs(1);
        let status = loop {
            let status = self
                .tracer
                .as_ref()
                .and_then(|t| t.watch().state().raw_status());
            if status.is_some() || self.tracer.is_none() || Instant::now() >= deadline {
                break status;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        .map(std::os::unix::process::ExitStatusExt::from_raw);
        if self.tracer.is_some() || status.is_some() {
            AttachError::Exited {
                pid: self.pid,
                status,
            }
        } else {
            AttachError::NoSuchProcess(self.pid)
        }
    }

    pub(super) fn read(&self, name: &'static str) -> Result<u64, AttachError> {
        let addr = self.address(name)?;
        let r = if name == WIDE {
            memory::read_u64(self.pid, addr)
        } else {
            memory::read_u32(self.pid, addr).map(u64::from)
        };
        r.map_err(|e| self.io_error(&format!("read {name}"), e))
    }

    pub(super) fn write(&mut self, name: &'static str, value: u64) -> Result<(), AttachError> {
        let old = self.read(name)?;
        let addr = self.address(name)?;
        let r = if name == WIDE {
            memory::write_u64(self.pid, addr, value)
        } else {
            memory::write_u32(self.pid, addr, value as u32)
        };
        r.map_err(|e| self.io_error(&format!("write {name}"), e))?;
        if !self.written.iter().any(|(n, _)| *n == name) {
            self.written.push((name, old));
        }
        self.step(AttachStep::Wrote {
            name,
            old,
            new: value,
        });
        Ok(())
    }

    pub(super) fn trace_error(&self, e: TraceError) -> AttachError {
        let pid = self.pid;
        match e {
            TraceError::Ended(_) => self.gone(),
            TraceError::Ptrace {
                call: "PTRACE_SEIZE",
                errno: errno @ nix::errno::Errno::EPERM,
                ..
            } => AttachError::PermissionDenied {
                pid,
                detail: format!("ptrace refused ({errno}): {}", why_not_traceable(pid)),
            },
            TraceError::Ptrace {
                errno: nix::errno::Errno::ESRCH,
                ..
            } => self.gone(),
            TraceError::Timeout { what, waited } => AttachError::Timeout { pid, what, waited },
            TraceError::Unsupported => AttachError::Unsupported(e.to_string()),
            other => AttachError::Trace {
                pid,
                detail: other.to_string(),
            },
        }
    }

    /// Puts back what was written and lets the process go (before it was connected).
    pub(super) fn undo(&mut self) {
        let written = std::mem::take(&mut self.written);
        let n = written.len();
        for (name, old) in written.into_iter().rev() {
            if let Ok(addr) = self.address(name) {
                let _ = if name == WIDE {
                    memory::write_u64(self.pid, addr, old)
                } else {
                    memory::write_u32(self.pid, addr, old as u32)
                };
            }
        }
        if n > 0 {
            self.step(AttachStep::Undone { variables: n });
        }
        if let Some(tracer) = self.tracer.take() {
            let _ = tracer.detach();
        }
    }
}
