//! `DebugSession`: one debuggee under the CUDA debugger API, from spawn to teardown.
//!
//! `builder` starts sessions (launch or attach), `events` drains and hands out the driver's events, `batch` is
//! what a caller holds while the debuggee waits, `end` closes the session, `link` is the session as a connection
//! route sees it, and `error` says what the session itself refuses.

mod batch;
mod builder;
mod end;
mod error;
mod events;
mod link;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, VecDeque};
use std::marker::PhantomData;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use batch::{BatchTiming, EventBatch};
pub use builder::{ATTACH_CAPABILITIES, AttachBuilder, DEFAULT_SPIN, OnDrop, SessionBuilder};
pub use error::SessionError;

use super::DebuggerLibrary;
use super::api::{Api, api_call};
use super::attach::PtraceHandshake;
use super::event::{Event, Queue};
use super::handshake::{self, ClientInfo, EnvHandshake, Handshake};
use super::notify::{epoch, on_new_event, on_new_event_cuda12};
use crate::linux::exit_watch::{ChildState, ExitWatch};
use crate::linux::wait;
use crate::sys::cudbg as sys;
use end::remove_driver_dir;

/// The driver serves one debugger client per process.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Set when a session could not finalise the driver's debugger side (its debuggee died from a signal).
static UNUSABLE: AtomicBool = AtomicBool::new(false);

/// How often the session looks at the queues and the child when no callback arrives (a missed wake-up or a child
/// that exited costs at most this long).
const POLL: Duration = Duration::from_millis(20);

/// How often the async queue is drained at least while synchronous events keep coming.
const ASYNC_EVERY: Duration = Duration::from_millis(1);

/// How long a detaching session waits for the driver's `DETACH_COMPLETE`.
const DETACH_WAIT: Duration = Duration::from_secs(5);

/// The process-wide claim; released when dropped.
#[derive(Debug)]
struct Claim;

impl Claim {
    fn take() -> Result<Self, SessionError> {
        if UNUSABLE.load(Ordering::Acquire) {
            return Err(SessionError::DebuggerUnusable);
        }
        ACTIVE
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| Claim)
            .map_err(|_| SessionError::AlreadyActive)
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        ACTIVE.store(false, Ordering::Release);
    }
}

/// A CUDA program running under the debugger API.
///
/// Created with [`DebugSession::builder`] (the session starts the program) or [`DebugSession::attach`] (a
/// process that already runs). Events come in [`EventBatch`]es from [`DebugSession::next_batch`]; the debuggee
/// threads that raised synchronous events stay blocked until the batch is acknowledged (explicitly, or when it is
/// dropped). Dropping the session finalises the API, kills or detaches a program it started as chosen with
/// [`SessionBuilder::on_drop`], reaps it and removes what the driver left for it under `/tmp/cuda-dbg/`; a process
/// it attached to is always detached and runs on.
///
/// One session per process ([`SessionError::AlreadyActive`]). `Send` (it may move to another thread) but not
/// `Sync`: API calls of one session are issued from one thread at a time.
///
/// A debuggee that dies from a signal (it crashed, or something else killed it) leaves driver 580's debugger side
/// unusable: any later call crashed this process in trials. So the session watches its debuggee and, once it has
/// died that way, makes no further driver call: [`next_batch`](Self::next_batch) hands out what it had drained
/// and returns `Ok(None)`, calls that need the debuggee return [`SessionError::DebuggeeKilled`], the API is not
/// finalised, and later sessions in this process get [`SessionError::DebuggerUnusable`]. Events the driver still
/// held at the death are not fetched. A death in the instant before a call cannot be excluded.
///
/// ```compile_fail
/// fn assert_sync<T: Sync>() {}
/// assert_sync::<gpu_tools::cudbg::DebugSession>();
/// ```
#[derive(Debug)]
pub struct DebugSession {
    pub(crate) api: Api,
    child: RefCell<Option<Child>>,
    pid: u32,
    exit: Cell<Option<ExitStatus>>,
    /// How the debuggee ended, seen without a system call; checked before each call that reaches it.
    watch: Option<ExitWatch>,
    /// Set when this session killed the debuggee itself (after `finalize`, or before the handshake finished).
    killed_here: Cell<bool>,
    /// Whether the driver opened the session (reported a first event).
    opened: bool,
    on_drop: OnDrop,
    /// Events drained but not yet handed out (for example while waiting for the handshake).
    pending: VecDeque<(Queue, Event)>,
    pub(crate) breakpoints: RefCell<BTreeSet<(u32, u64)>>,
    /// Bit per device suspended through a [`super::Suspended`] guard.
    pub(crate) suspended: Cell<u64>,
    spin: Duration,
    /// When the async queue was last drained.
    async_at: Instant,
    finalized: bool,
    /// The connection route, kept until the API is finalised (an attach route holds the process under ptrace).
    handshake: Option<Box<dyn Handshake>>,
    /// Whether the session attached to a running process (never killed by the session).
    attached: bool,
    /// Whether synchronous events drained into `pending` still hold the debuggee.
    unacknowledged: Cell<bool>,
    _claim: Claim,
    _not_sync: PhantomData<Cell<()>>,
}

/// How a session ended ([`DebugSession::close`]).
#[derive(Debug)]
pub struct Closed {
    /// Events still in the driver's queues at the end; delivered here so none is lost.
    pub events: Vec<(Queue, Event)>,
    /// The debuggee's exit status, when it ended (killed, or exited) before the session closed.
    pub exit: Option<ExitStatus>,
}

impl DebugSession {
    /// Starts building a session for `command` (the debuggee and its arguments, environment, stdio).
    pub fn builder(command: Command) -> SessionBuilder {
        SessionBuilder {
            command,
            handshake: Box::new(EnvHandshake),
            handshake_timeout: Duration::from_secs(60),
            on_drop: OnDrop::Kill,
            capabilities: 0,
            spin: DEFAULT_SPIN,
            blocking_launches: false,
        }
    }

    /// Starts `command` under a session with the default options.
    pub fn start(command: Command) -> Result<Self, crate::Error> {
        Self::builder(command).start()
    }

    /// Starts building a session that attaches to the running CUDA process `pid` (route 1: ptrace and the
    /// driver's attach entry point, see [`PtraceHandshake`]).
    pub fn attach_builder(pid: u32) -> AttachBuilder {
        AttachBuilder {
            pid,
            ptrace: PtraceHandshake::new(),
            handshake: None,
            capabilities: 0,
            spin: DEFAULT_SPIN,
            blocking_launches: false,
        }
    }

    /// Attaches to the running CUDA process `pid` with the default options.
    ///
    /// Refused, with the process left as it was, when it does not exist, is this process or its child, does not
    /// run CUDA, is traced by another process, already has a CUDA debugger, or may not be traced by this user
    /// ([`super::AttachError`]). When the session ends ([`DebugSession::close`] or drop) it detaches: breakpoints
    /// are removed, the driver's attach is undone inside the process, and the process runs on; it is never
    /// killed.
    pub fn attach(pid: u32) -> Result<Self, crate::Error> {
        Self::attach_builder(pid).start()
    }

    /// The part of starting a session that is the same for every route: the claim, the driver, the client
    /// variables, `initialize` and the event callback.
    fn open(
        claim: Claim,
        capabilities: u32,
        blocking_launches: bool,
        spin: Duration,
        on_drop: OnDrop,
    ) -> Result<(Self, ClientInfo), crate::Error> {
        // Fixes the reference point of notification times before the driver's thread first reads it.
        let _ = epoch();
        let lib = DebuggerLibrary::load()?;
        let api = Api::load(lib)?;
        let info = ClientInfo {
            debugger_pid: std::process::id(),
            session_id: handshake::new_session_id(),
            revision: api.version().revision,
            capabilities,
            blocking_launches,
        };
        handshake::set_client_variables(lib, &info)?;
        // SAFETY: no arguments; the client variables are set, as initialize requires.
        if let Err(e) = api_call!(api, initialize()) {
            // initialize creates the driver's folder for this process even when it fails.
            remove_driver_dir(info.debugger_pid);
            return Err(e);
        }
        let session = DebugSession {
            api,
            child: RefCell::new(None),
            pid: 0,
            exit: Cell::new(None),
            watch: None,
            killed_here: Cell::new(false),
            opened: false,
            on_drop,
            pending: VecDeque::new(),
            breakpoints: RefCell::new(BTreeSet::new()),
            suspended: Cell::new(0),
            spin,
            async_at: Instant::now(),
            finalized: false,
            handshake: None,
            attached: false,
            unacknowledged: Cell::new(false),
            _claim: claim,
            _not_sync: PhantomData,
        };
        // The callbacks are plain functions that only touch a static, and catch unwinds.
        session
            .api
            .register_event_callback(on_new_event, on_new_event_cuda12)?;
        Ok((session, info))
    }

    /// Whether the session attached to a process that was already running (rather than starting it).
    pub fn is_attached(&self) -> bool {
        self.attached
    }

    /// The negotiated API version.
    pub fn api_version(&self) -> super::ApiVersion {
        self.api.version()
    }

    /// Process id of the debuggee.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The debuggee's exit status, once it has exited (checks without blocking). For an attached process it is
    /// what its tracer saw: the exit code, or the signal that ended it.
    pub fn exit_status(&self) -> Result<Option<ExitStatus>, SessionError> {
        if self.exit.get().is_none() {
            if let Some(child) = self.child.borrow_mut().as_mut() {
                self.exit
                    .set(child.try_wait().map_err(SessionError::Process)?);
            } else if let Some(raw) = self.watch.as_ref().and_then(|w| w.state().raw_status()) {
                self.exit.set(Some(ExitStatus::from_raw(raw)));
            }
        }
        Ok(self.exit.get())
    }

    /// The debuggee's piped stdout, if the command asked for a pipe (taken once).
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.get_mut().as_mut().and_then(|c| c.stdout.take())
    }

    /// The debuggee's piped stderr, if the command asked for a pipe (taken once).
    pub fn take_stderr(&mut self) -> Option<std::process::ChildStderr> {
        self.child.get_mut().as_mut().and_then(|c| c.stderr.take())
    }

    /// Chooses whether kernel launches raise [`Event::KernelReady`] (`true`, the default) or raise nothing
    /// (`false`, `CUDBG_KNL_LAUNCH_NOTIFY_DEFER`). The header's word is "deferred", but with it kernel launches
    /// generate no notification at all: launches are no longer reported, and the debuggee is spared one
    /// synchronous round trip per launch.
    pub fn set_launch_events(&self, immediate: bool) -> Result<(), crate::Error> {
        let mode = if immediate {
            sys::CUDBG_KNL_LAUNCH_NOTIFY_EVENT
        } else {
            sys::CUDBG_KNL_LAUNCH_NOTIFY_DEFER
        };
        // SAFETY: a mode value from the header.
        api_call!(*self.live_api()?, setKernelLaunchNotificationMode(mode))
    }

    /// Makes every kernel launch of the debuggee blocking (`true`) or asynchronous again (`false`), as cuda-gdb's
    /// `set cuda launch_blocking` does: it sets the debuggee's `cudbgEnableLaunchBlocking`, which the driver reads
    /// at each launch.
    ///
    /// With blocking launches the driver also reports the end of each kernel ([`Event::KernelFinished`]); without
    /// them driver 580 never does. The price: each launch waits for its kernel, and raises a second synchronous
    /// event. Takes effect from the debuggee's next launch.
    pub fn set_blocking_launches(&self, on: bool) -> Result<(), SessionError> {
        const NAME: &str = "cudbgEnableLaunchBlocking";
        // A reaped debuggee's pid may already belong to another process.
        if self.exit.get().is_some() {
            return Err(SessionError::DebuggeeVariable {
                name: NAME,
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "the debuggee has exited",
                ),
            });
        }
        handshake::write_debuggee_variable(self.pid, NAME, u32::from(on))
    }

    /// The signal the debuggee died from, if it did: from its reaped status, or else from the exit watch (one
    /// atomic load), and for a launched child that the watch still sees running, from a non-blocking `waitid`
    /// that leaves the child waitable: the watch thread publishes a death only once it is scheduled, and a driver
    /// call in that gap crashed this process (driver 580), so the kernel is asked directly (a system call of about
    /// a microsecond, against a driver round trip of ten or more).
    fn death_signal(&self) -> Option<i32> {
        if let Some(status) = self.exit.get() {
            return status.signal();
        }
        match self.watch.as_ref().map(ExitWatch::state) {
            Some(ChildState::Signaled(signal)) => Some(signal),
            // Reaped before the watch looked (for example by a handshake's `try_wait`): `Child` kept the status.
            Some(ChildState::Unknown) => self.exit_status().ok().flatten().and_then(|s| s.signal()),
            Some(ChildState::Running) if !self.attached && self.pid != 0 => {
                match wait::wait_id(self.pid, wait::WEXITED | wait::WNOHANG | wait::WNOWAIT) {
                    Ok(Some(wait::Waited::Signaled(signal))) => Some(signal),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// The API table, unless the debuggee died from a signal: after that, driver 580's debugger side crashed
    /// this process on `getNextEvent` in every trial, so no call reaches it any more. A death in the instant
    /// between this check and the call cannot be excluded.
    pub(crate) fn live_api(&self) -> Result<&Api, SessionError> {
        match self.death_signal() {
            Some(signal) => Err(SessionError::DebuggeeKilled { signal }),
            None => Ok(&self.api),
        }
    }
}
