//! Starting a session: [`SessionBuilder`] for a program the session starts, [`AttachBuilder`] for a process that
//! already runs, and the options both share.

use std::cell::RefCell;
use std::process::Command;
use std::time::Duration;

use super::link::Linked;
use super::{Claim, DebugSession};
use crate::cudbg::attach::{AttachProtocol, AttachStep, DetachProcedure, PtraceHandshake};
use crate::cudbg::handshake::Handshake;
use crate::cudbg::notify::NOTIFIER;
use crate::cudbg::{DebuggerLibrary, SessionError};
use crate::linux::exit_watch::ExitWatch;
use crate::sys::cudbg as sys;

/// The capabilities every attach announces: without lazy function loading, driver 580's attach entry point
/// refused the attach (`CUDBG_ERROR_NOT_SUPPORTED`, seen on an H100); cuda-gdb announces these two (and no
/// context push/pop events).
pub const ATTACH_CAPABILITIES: u32 = sys::CUDBG_DEBUGGER_CAPABILITY_LAZY_FUNCTION_LOADING
    | sys::CUDBG_DEBUGGER_CAPABILITY_REPORT_EXCEPTIONS_IN_EXITED_WARPS;

/// How long [`DebugSession::next_batch`] busy-waits for the driver's callback before it parks the thread
/// ([`SessionBuilder::spin`]). A debuggee that raises a synchronous event per launch sends the next one a few tens of
/// microseconds after the acknowledgement; waking a parked thread costs about as much again.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(200);

/// What happens to a still-running debuggee when the session ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDrop {
    /// Kill it (SIGKILL) and reap it.
    #[default]
    Kill,
    /// Remove breakpoints, resume it, detach, and let it run to its end (it is reaped in the background).
    Detach,
}

/// Options for starting a [`DebugSession`].
#[derive(Debug)]
pub struct SessionBuilder {
    pub(super) command: Command,
    pub(super) handshake: Box<dyn Handshake>,
    pub(super) handshake_timeout: Duration,
    pub(super) on_drop: OnDrop,
    pub(super) capabilities: u32,
    pub(super) spin: Duration,
    pub(super) blocking_launches: bool,
}

impl SessionBuilder {
    /// How long [`DebugSession::next_batch`] busy-polls for new events before it sleeps (default
    /// [`DEFAULT_SPIN`]). Spinning keeps one core busy for up to this long per wait; it cuts the latency of each
    /// synchronous event when events come close together. `Duration::ZERO` never spins.
    pub fn spin(mut self, window: Duration) -> Self {
        self.spin = window;
        self
    }

    /// Debugger capabilities to announce (`CUDBGCapabilityFlags` bits), before the API is initialised. Default:
    /// none. They are written into this process's libcuda and handed to the [`Handshake`]; whether the debuggee's
    /// driver honours them depends on the route (see [`EnvHandshake`](crate::cudbg::handshake::EnvHandshake)).
    pub fn capabilities(mut self, flags: u32) -> Self {
        self.capabilities = flags;
        self
    }

    /// Makes the debuggee's kernel launches blocking from its first launch on; see
    /// [`DebugSession::set_blocking_launches`]. Default: off.
    pub fn blocking_launches(mut self, on: bool) -> Self {
        self.blocking_launches = on;
        self
    }

    /// How long to wait for the driver to open a session for the debuggee (default 60 s). The debuggee's first
    /// CUDA call must come within it; otherwise it is killed and [`SessionError::HandshakeTimeout`] returned.
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// What happens to the debuggee when the session ends while it still runs (default [`OnDrop::Kill`]).
    pub fn on_drop(mut self, on_drop: OnDrop) -> Self {
        self.on_drop = on_drop;
        self
    }

    /// Connects the debuggee another way than [`EnvHandshake`](crate::cudbg::handshake::EnvHandshake).
    pub fn handshake(mut self, handshake: impl Handshake + 'static) -> Self {
        self.handshake = Box::new(handshake);
        self
    }

    /// Loads the driver, initialises the API, starts the debuggee and waits until the driver opened its session.
    pub fn start(self) -> Result<DebugSession, crate::Error> {
        let mut handshake = self.handshake;
        if handshake.attaches() {
            return Err(SessionError::WrongRoute {
                route: format!("{handshake:?}"),
                what: "start a program (it attaches to running processes)",
            }
            .into());
        }
        let (mut session, info) = DebugSession::open(
            Claim::take()?,
            self.capabilities,
            self.blocking_launches,
            self.spin,
            self.on_drop,
        )?;
        let mut command = self.command;
        handshake.prepare(&mut command, &info);
        let program = command.get_program().to_string_lossy().into_owned();
        let seen = NOTIFIER.seen();
        let child = command
            .spawn()
            .map_err(|source| SessionError::Spawn { program, source })?;
        session.pid = child.id();
        let watch = ExitWatch::spawn(session.pid).map_err(SessionError::Process);
        session.child = RefCell::new(Some(child));
        session.watch = Some(watch?);
        let connected = handshake.connect(&mut Linked(&mut session), &info);
        session.handshake = Some(handshake);
        connected?;
        session.await_open(seen, self.handshake_timeout)?;
        // The first event (the context's creation) holds the debuggee until it is acknowledged, so this lands
        // before any launch.
        if self.blocking_launches {
            session.set_blocking_launches(true)?;
        }
        Ok(session)
    }
}

/// Options for attaching a [`DebugSession`] to a CUDA process that already runs ([`DebugSession::attach_builder`]).
#[derive(Debug)]
pub struct AttachBuilder {
    pub(super) pid: u32,
    pub(super) ptrace: PtraceHandshake,
    pub(super) handshake: Option<Box<dyn Handshake>>,
    pub(super) capabilities: u32,
    pub(super) spin: Duration,
    pub(super) blocking_launches: bool,
}

impl AttachBuilder {
    /// As [`SessionBuilder::spin`].
    pub fn spin(mut self, window: Duration) -> Self {
        self.spin = window;
        self
    }

    /// Debugger capabilities to announce (`CUDBGCapabilityFlags` bits) besides [`ATTACH_CAPABILITIES`], which an
    /// attach always announces; written into the process's `cudbgDebuggerCapabilities` before the driver's attach
    /// entry point runs, as cuda-gdb does. Default: none besides those.
    pub fn capabilities(mut self, flags: u32) -> Self {
        self.capabilities = flags;
        self
    }

    /// Makes the process's kernel launches blocking from the attach on (see
    /// [`DebugSession::set_blocking_launches`]). Default: off.
    pub fn blocking_launches(mut self, on: bool) -> Self {
        self.blocking_launches = on;
        self
    }

    /// How the process's driver is asked to start its debugger back end (see [`AttachProtocol`]). Default:
    /// [`AttachProtocol::Auto`].
    pub fn protocol(mut self, protocol: AttachProtocol) -> Self {
        self.ptrace = self.ptrace.protocol(protocol);
        self
    }

    /// How the session lets the process go when it detaches (see [`DetachProcedure`]). Default:
    /// [`DetachProcedure::WithoutInProcessCall`].
    pub fn detach_procedure(mut self, procedure: DetachProcedure) -> Self {
        self.ptrace = self.ptrace.detach_procedure(procedure);
        self
    }

    /// Reports each step of the attach and of the later detach (see [`PtraceHandshake::progress`]).
    pub fn progress(mut self, report: impl FnMut(&AttachStep) + Send + 'static) -> Self {
        self.ptrace = self.ptrace.progress(report);
        self
    }

    /// Connects the process another way than [`PtraceHandshake`] (the route must attach).
    pub fn handshake(mut self, handshake: impl Handshake + 'static) -> Self {
        self.handshake = Some(Box::new(handshake));
        self
    }

    /// Loads the driver, initialises the API and attaches: when this returns, the driver has reported the
    /// process's contexts, modules and running kernels as events (handed out by
    /// [`DebugSession::next_batch`]) and the process runs on under the session.
    pub fn start(mut self) -> Result<DebugSession, crate::Error> {
        let claim = Claim::take()?;
        if self.handshake.is_none() {
            // Refusals that need no debugger API come before this process initialises it; those that need no
            // driver library at all, before it is loaded.
            self.ptrace.check_process(self.pid)?;
            DebuggerLibrary::load()?;
            self.ptrace.check(self.pid)?;
        }
        let mut handshake = self
            .handshake
            .unwrap_or_else(|| Box::new(self.ptrace) as Box<dyn Handshake>);
        if !handshake.attaches() {
            return Err(SessionError::WrongRoute {
                route: format!("{handshake:?}"),
                what: "attach to a running process (it starts programs)",
            }
            .into());
        }
        let (mut session, info) = DebugSession::open(
            claim,
            self.capabilities | ATTACH_CAPABILITIES,
            self.blocking_launches,
            self.spin,
            OnDrop::Detach,
        )?;
        session.pid = self.pid;
        session.attached = true;
        let connected = handshake.connect(&mut Linked(&mut session), &info);
        session.handshake = Some(handshake);
        // On failure the session is dropped here: its teardown detaches what was connected and finalises.
        connected?;
        Ok(session)
    }
}
