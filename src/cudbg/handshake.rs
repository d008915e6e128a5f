//! How a debuggee is connected to this process's debugger client.
//!
//! The debugger side is the same for every route: before `initialize`, this process's own `libcuda.so.1` gets the
//! client variables (`cudbgApiClientPid`, `cudbgApiClientRevision`, `cudbgSessionId`); without them `initialize`
//! fails with `CUDBG_ERROR_INITIALIZATION_FAILURE`. The debuggee side differs per route and sits behind
//! [`Handshake`]: [`EnvHandshake`] connects a program the session starts (route 2, environment variables), and
//! [`PtraceHandshake`](super::PtraceHandshake) a process that already runs (route 1, ptrace and the driver's
//! attach entry point, as cuda-gdb does).

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use super::event::Event;
use super::notify::NOTIFIER;
use crate::linux::exit_watch::ExitWatch;
use crate::linux::memory;

use super::{DebuggerLibrary, SessionError};

/// How a debuggee that is not a child of this process ends, as a connection route sees it
/// ([`DebuggeeLink::watch_end`]). Only the crate's own routes make one.
#[derive(Debug, Clone)]
pub struct EndWatch(pub(crate) ExitWatch);

/// What both sides of a handshake agree on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientInfo {
    /// Process id of the debugger (this process).
    pub debugger_pid: u32,
    /// Session id, shared by both sides.
    pub session_id: u32,
    /// The negotiated API revision.
    pub revision: u32,
    /// `CUDBGCapabilityFlags` the debugger announces.
    pub capabilities: u32,
    /// Whether the debuggee's kernel launches should block (`cudbgEnableLaunchBlocking`).
    pub blocking_launches: bool,
}

/// The session as a route sees it while it connects or disconnects the debuggee: the debugger API is initialised,
/// the event callback registered.
pub trait DebuggeeLink {
    /// Process id of the debuggee.
    fn pid(&self) -> u32;
    /// The debuggee as a child of this process, when the session spawned it.
    fn child(&mut self) -> Option<&mut Child>;
    /// Drains the driver's events into the session (they are handed out later by
    /// [`DebugSession::next_batch`](super::DebugSession::next_batch)), acknowledging synchronous ones so the
    /// debuggee goes on, until an event matches `until` (true), or the debuggee ends or `timeout` passes (false).
    fn await_event(
        &mut self,
        until: &dyn Fn(&Event) -> bool,
        timeout: Duration,
    ) -> Result<bool, crate::Error>;
    /// The driver's side of a detach: asks it to clean up (`requestCleanupOnDetach` with the debuggee's
    /// `cudbgResumeForAttachDetach`) and waits for `DETACH_COMPLETE`.
    fn clean_up_on_detach(&mut self) -> Result<(), crate::Error>;
    /// Tells the driver's debugger side that a detach begins (`clearAttachState`), as cuda-gdb does before it calls
    /// the debuggee's `cudbgApiDetach`.
    fn clear_attach_state(&mut self) -> Result<(), crate::Error>;
    /// Asks the driver's debugger side to clean up on detach (`requestCleanupOnDetach`) with the debuggee's
    /// `cudbgResumeForAttachDetach` value `resume_flag`, without waiting for `DETACH_COMPLETE`.
    fn request_cleanup_on_detach(&mut self, resume_flag: u32) -> Result<(), crate::Error>;
    /// Marks the debuggee's side as connected: from now on the session treats it as debugged (a death by signal
    /// then leaves the driver's debugger side unusable, and the session detaches it at its end).
    fn mark_connected(&mut self);
    /// Gives the session the watch of how the debuggee ends (for a debuggee that is not a child of this process).
    fn watch_end(&mut self, watch: EndWatch);
}

/// The debuggee side of a connection route.
///
/// A launch route ([`attaches`](Handshake::attaches) false) adjusts the command in [`prepare`](Handshake::prepare)
/// and finishes in [`connect`](Handshake::connect) right after the spawn; the session then waits for the driver's
/// first event. An attach route connects a running process in [`connect`](Handshake::connect) and must have marked
/// it connected when it returns. The session keeps the route until it ends and calls
/// [`disconnect`](Handshake::disconnect) when it lets a still-running debuggee go; the route is dropped after the
/// API is finalised.
pub trait Handshake: Send + std::fmt::Debug {
    /// Whether this route connects a process that already runs rather than one the session starts.
    fn attaches(&self) -> bool {
        false
    }
    /// Adjusts the debuggee's command before it is spawned (launch routes only).
    fn prepare(&self, _command: &mut Command, _info: &ClientInfo) {}
    /// Connects the debuggee: a launch route right after the spawn, an attach route to the running process.
    fn connect(
        &mut self,
        link: &mut dyn DebuggeeLink,
        info: &ClientInfo,
    ) -> Result<(), crate::Error>;
    /// Lets the debuggee go on without this debugger, before the API is finalised. The default is the driver's
    /// side only ([`DebuggeeLink::clean_up_on_detach`]).
    fn disconnect(&mut self, link: &mut dyn DebuggeeLink) -> Result<(), crate::Error> {
        link.clean_up_on_detach()
    }
}

/// Route 2 of the driver: the debuggee's libcuda reads the session from its environment
/// (`CUDBG_GET_SESSION_FROM_ENV=1` and the client variables). Seen working on driver 580; not documented publicly.
///
/// The driver reads no environment variable for the debugger capabilities, so when any are asked for, they are
/// written into the debuggee's `cudbgDebuggerCapabilities` (`process_vm_writev`, same uid, no ptrace stop) from
/// the moment its libcuda is mapped until the driver reports the first event. Seen on driver 580:
/// `CUDBG_DEBUGGER_CAPABILITY_NO_CONTEXT_PUSH_POP_EVENTS` written this way removes the context push/pop events.
#[derive(Debug, Clone, Copy, Default)]
pub struct EnvHandshake;

impl Handshake for EnvHandshake {
    fn prepare(&self, command: &mut Command, info: &ClientInfo) {
        command
            .env("CUDBG_GET_SESSION_FROM_ENV", "1")
            .env("CUDBG_APICLIENT_PID", info.debugger_pid.to_string())
            .env("CUDBG_SESSION_ID", info.session_id.to_string())
            .env("CUDBG_IPC_FLAG_NAME", "1")
            .env("CUDBG_APICLIENT_REVISION", info.revision.to_string());
    }

    fn connect(
        &mut self,
        link: &mut dyn DebuggeeLink,
        info: &ClientInfo,
    ) -> Result<(), crate::Error> {
        if info.capabilities == 0 {
            return Ok(());
        }
        // The driver reads no environment variable for the capabilities: write them into the debuggee's libcuda
        // from the moment it is mapped until the driver first reports an event, so the value stands when the
        // debuggee's side of the session starts.
        let Some(lib) = DebuggerLibrary::get() else {
            return Ok(());
        };
        let local = client_variable(lib, "cudbgDebuggerCapabilities")?;
        let pid = link.pid();
        let seen = NOTIFIER.seen();
        let deadline = Instant::now() + Duration::from_secs(10);
        while NOTIFIER.seen() == seen && Instant::now() < deadline {
            if let Some(child) = link.child() {
                if child.try_wait().map_err(SessionError::Process)?.is_some() {
                    break;
                }
            }
            if let Ok(Some(addr)) = memory::remote_address(pid, local.cast_const()) {
                // Fails until the page is mapped; the next round tries again.
                let _ = memory::write_u32(pid, addr, info.capabilities);
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        Ok(())
    }
}

/// Writes the client variables into this process's own libcuda (the debugger side of every route).
pub(crate) fn set_client_variables(
    lib: &DebuggerLibrary,
    info: &ClientInfo,
) -> Result<(), SessionError> {
    let mut vars = vec![
        ("cudbgApiClientPid", info.debugger_pid),
        ("cudbgApiClientRevision", info.revision),
        ("cudbgSessionId", info.session_id),
    ];
    if info.capabilities != 0 {
        vars.push(("cudbgDebuggerCapabilities", info.capabilities));
    }
    for (name, value) in vars {
        let ptr = client_variable(lib, name)?;
        // SAFETY: the symbol is a writable `uint32_t` in libcuda's data segment, alive as long as the library
        // (never unloaded); the driver reads it only inside `initialize`, which has not run yet.
        unsafe { ptr.write_volatile(value) };
    }
    Ok(())
}

/// The address of the `uint32_t` libcuda variable `name` in this process (the same variable of a debuggee lies
/// at the same offset in its copy of the library).
pub(crate) fn client_variable(
    lib: &DebuggerLibrary,
    name: &'static str,
) -> Result<*mut u32, SessionError> {
    let mut symbol = name.as_bytes().to_vec();
    symbol.push(0);
    // SAFETY: a look-up of a data symbol that cudadebugger.h declares as `uint32_t`; only its address is taken,
    // nothing is called.
    let ptr = unsafe { lib.lib.get::<*mut u32>(&symbol) }
        .map(|s| *s)
        .map_err(|_| SessionError::MissingClientVariable(name))?;
    if ptr.is_null() {
        return Err(SessionError::MissingClientVariable(name));
    }
    Ok(ptr)
}

/// Writes `value` into the debuggee's copy of the libcuda variable `name` (a `uint32_t` that cudadebugger.h names
/// as set by the API client), while the debuggee runs.
pub(crate) fn write_debuggee_variable(
    pid: u32,
    name: &'static str,
    value: u32,
) -> Result<(), SessionError> {
    let lib = DebuggerLibrary::get().ok_or(SessionError::MissingClientVariable(name))?;
    let local = client_variable(lib, name)?;
    let failed = |source| SessionError::DebuggeeVariable { name, source };
    let addr = memory::remote_address(pid, local.cast_const())
        .map_err(failed)?
        .ok_or_else(|| {
            failed(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the debuggee does not map the libcuda.so.1 file this process uses",
            ))
        })?;
    memory::write_u32(pid, addr, value).map_err(failed)
}

/// The debuggee's `cudbgResumeForAttachDetach`, which `requestCleanupOnDetach` takes; 0 when it cannot be read
/// (a debuggee that was launched under the session, not attached to, has nothing to resume).
pub(crate) fn resume_flag(pid: u32) -> u32 {
    let Some(lib) = DebuggerLibrary::get() else {
        return 0;
    };
    let Ok(local) = client_variable(lib, "cudbgResumeForAttachDetach") else {
        return 0;
    };
    match memory::remote_address(pid, local.cast_const()) {
        Ok(Some(addr)) => memory::read_u32(pid, addr).unwrap_or(0),
        _ => 0,
    }
}

/// A session id that differs between runs and processes (never 0).
pub(crate) fn new_session_id() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    (std::process::id().wrapping_mul(2_654_435_761) ^ nanos) & 0x7fff_ffff | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_route_sets_every_variable() {
        let mut cmd = Command::new("true");
        let info = ClientInfo {
            debugger_pid: 1234,
            session_id: 99,
            revision: 163,
            capabilities: 8,
            blocking_launches: false,
        };
        EnvHandshake.prepare(&mut cmd, &info);
        let envs: std::collections::HashMap<_, _> = cmd
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect();
        let get = |k: &str| envs.get(k).cloned().flatten();
        assert_eq!(get("CUDBG_GET_SESSION_FROM_ENV").as_deref(), Some("1"));
        assert_eq!(get("CUDBG_APICLIENT_PID").as_deref(), Some("1234"));
        assert_eq!(get("CUDBG_SESSION_ID").as_deref(), Some("99"));
        assert_eq!(get("CUDBG_IPC_FLAG_NAME").as_deref(), Some("1"));
        assert_eq!(get("CUDBG_APICLIENT_REVISION").as_deref(), Some("163"));
        // The driver reads no such variable; capabilities go through memory instead.
        assert_eq!(get("CUDBG_DEBUGGER_CAPABILITIES"), None);
    }

    #[test]
    fn session_ids_are_nonzero_31_bit() {
        let id = new_session_id();
        assert_ne!(id, 0);
        assert!(id <= 0x7fff_ffff);
    }
}
