//! `DebugSession`: one debuggee under the CUDA debugger API, from spawn to teardown.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, VecDeque};
use std::marker::PhantomData;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::api::{Api, api_call};
use super::attach::{AttachProtocol, AttachStep, PtraceHandshake};
use super::batch::{BatchTiming, EventBatch};
use super::event::{Event, Queue};
use super::handshake::EndWatch;
use super::handshake::{self, ClientInfo, DebuggeeLink, EnvHandshake, Handshake};
use super::notify::{NOTIFIER, epoch, on_new_event, on_new_event_cuda12};
use super::{CudbgError, DebuggerLibrary, SessionError};
use crate::linux::exit_watch::{ChildState, ExitWatch};
use crate::linux::procfs::Process;
use crate::linux::wait;
use crate::sys::cudbg as sys;

/// The capabilities every attach announces: without lazy function loading, driver 580's attach entry point
/// refused the attach (`CUDBG_ERROR_NOT_SUPPORTED`, seen on an H100); cuda-gdb announces these two (and no
/// context push/pop events).
pub const ATTACH_CAPABILITIES: u32 = sys::CUDBG_DEBUGGER_CAPABILITY_LAZY_FUNCTION_LOADING
    | sys::CUDBG_DEBUGGER_CAPABILITY_REPORT_EXCEPTIONS_IN_EXITED_WARPS;

/// The driver serves one debugger client per process.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Set when a session could not finalise the driver's debugger side (its debuggee died from a signal).
static UNUSABLE: AtomicBool = AtomicBool::new(false);

/// How often the session looks at the queues and the child when no callback arrives (a missed wake-up or a child
/// that exited costs at most this long).
const POLL: Duration = Duration::from_millis(20);

/// How long [`DebugSession::next_batch`] busy-waits for the driver's callback before it parks the thread
/// ([`SessionBuilder::spin`]). A debuggee that raises a synchronous event per launch sends the next one a few tens of
/// microseconds after the acknowledgement; waking a parked thread costs about as much again.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(200);

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
    command: Command,
    handshake: Box<dyn Handshake>,
    handshake_timeout: Duration,
    on_drop: OnDrop,
    capabilities: u32,
    spin: Duration,
    blocking_launches: bool,
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
    /// driver honours them depends on the route (see [`EnvHandshake`]).
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

    /// Connects the debuggee another way than [`EnvHandshake`].
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
    pid: u32,
    ptrace: PtraceHandshake,
    handshake: Option<Box<dyn Handshake>>,
    capabilities: u32,
    spin: Duration,
    blocking_launches: bool,
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

/// The session as a [`Handshake`] sees it while connecting or disconnecting.
struct Linked<'s>(&'s mut DebugSession);

impl DebuggeeLink for Linked<'_> {
    fn pid(&self) -> u32 {
        self.0.pid
    }

    fn child(&mut self) -> Option<&mut Child> {
        self.0.child.get_mut().as_mut()
    }

    fn await_event(
        &mut self,
        until: &dyn Fn(&Event) -> bool,
        timeout: Duration,
    ) -> Result<bool, crate::Error> {
        self.0.await_event(until, timeout)
    }

    fn clean_up_on_detach(&mut self) -> Result<(), crate::Error> {
        self.0.clean_up_on_detach()
    }

    fn clear_attach_state(&mut self) -> Result<(), crate::Error> {
        // SAFETY: no arguments.
        api_call!(*self.0.live_api()?, clearAttachState())
    }

    fn request_cleanup_on_detach(&mut self, resume_flag: u32) -> Result<(), crate::Error> {
        // SAFETY: plain flag argument: the debuggee's `cudbgResumeForAttachDetach`, as the header asks.
        api_call!(*self.0.live_api()?, requestCleanupOnDetach(resume_flag))
    }

    fn mark_connected(&mut self) {
        self.0.opened = true;
    }

    fn watch_end(&mut self, watch: EndWatch) {
        self.0.watch = Some(watch.0);
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

    /// Whether events were fetched but not handed out, or handed out but not acknowledged.
    pub(super) fn has_events(&self) -> bool {
        !self.pending.is_empty() || self.unacknowledged.get()
    }

    /// Moves the events now in the driver's queues into `pending`; true when the sync queue had any. Without
    /// `full`, the async queue is skipped when the sync queue had events and was looked at less than
    /// [`ASYNC_EVERY`] ago.
    pub(super) fn drain(&mut self, full: bool) -> Result<bool, crate::Error> {
        let mut had_sync = false;
        // After a death from a signal nothing more can be fetched (see `live_api`).
        if self.death_signal().is_some() {
            return Ok(false);
        }
        for queue in [Queue::Sync, Queue::Async] {
            // Each getNextEvent is a round trip to the driver (about 12 us on driver 580). While synchronous events
            // stream, the async queue is looked at every ASYNC_EVERY only; it needs no acknowledgement, so only its
            // latency grows.
            if queue == Queue::Async && had_sync && !full && self.async_at.elapsed() < ASYNC_EVERY {
                continue;
            }
            if queue == Queue::Async {
                self.async_at = Instant::now();
            }
            loop {
                let mut raw = sys::CUDBGEvent::default();
                // SAFETY: a valid queue type and a writable event of the 13.0 layout, which the negotiated
                // table's getNextEvent fills in.
                match api_call!(*self.live_api()?, getNextEvent(queue.raw(), &mut raw)) {
                    Ok(()) => {
                        had_sync |= queue == Queue::Sync;
                        self.pending.push_back((queue, Event::from_raw(&raw)));
                    }
                    Err(crate::Error::Cudbg(CudbgError::NoEventAvailable)) => break,
                    Err(e) => return Err(e),
                }
            }
        }
        if had_sync {
            self.unacknowledged.set(true);
        }
        Ok(had_sync)
    }

    /// Drains events into `pending`, acknowledging synchronous ones, until one matches `until` (true), or the
    /// debuggee ends or `timeout` passes (false).
    fn await_event(
        &mut self,
        until: &dyn Fn(&Event) -> bool,
        timeout: Duration,
    ) -> Result<bool, crate::Error> {
        let deadline = Instant::now().checked_add(timeout);
        let mut seen = NOTIFIER.seen();
        loop {
            let before = self.pending.len();
            if self.drain(true)? {
                self.acknowledge()?;
            }
            // Each new event is shown to `until` once.
            if self.pending.iter().skip(before).any(|(_, e)| until(e)) {
                return Ok(true);
            }
            if self.exit_status()?.is_some() || deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(false);
            }
            seen = NOTIFIER.wait_past(seen, Duration::ZERO, Duration::from_millis(5));
        }
    }

    fn await_open(&mut self, mut seen: u64, timeout: Duration) -> Result<(), crate::Error> {
        // A timeout too large for an `Instant` never passes.
        let deadline = Instant::now().checked_add(timeout);
        loop {
            self.drain(true)?;
            if !self.pending.is_empty() {
                self.opened = true;
                return Ok(());
            }
            if let Some(status) = self.exit_status()? {
                return Err(SessionError::NoCuda { status }.into());
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                // Stopped now; the teardown (the session is dropped with this error) finalises, then kills it.
                self.stop_child();
                return Err(SessionError::HandshakeTimeout {
                    waited: timeout,
                    pid: self.pid,
                }
                .into());
            }
            let slice = deadline.map_or(POLL, |d| POLL.min(d - now));
            seen = NOTIFIER.wait_past(seen, Duration::ZERO, slice);
        }
    }

    /// Waits for the next events and returns them as a batch, or `Ok(None)` once the debuggee has exited and no
    /// event is left (or it died from a signal: see [`DebugSession`]). `timeout` bounds the wait (`None`: until
    /// events come or the debuggee exits).
    ///
    /// The wait spins for the builder's [`SessionBuilder::spin`] window, then sleeps until the driver's callback
    /// wakes it. Whether the debuggee has exited is checked only when a wait passed without a notification, so
    /// its exit is noticed within about 20 ms.
    pub fn next_batch(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<Option<EventBatch<'_>>, crate::Error> {
        let start = Instant::now();
        let mut seen = NOTIFIER.seen();
        let mut woke = start;
        let mut quiet = false;
        loop {
            if self.death_signal().is_some() {
                // Events the driver still holds cannot be fetched without crashing this process (see
                // `live_api`); what was drained before is handed out first.
                if self.pending.is_empty() {
                    self.exit_status()?;
                    return Ok(None);
                }
            }
            self.settle()?;
            let notified = NOTIFIER.last_notified();
            let had_sync = self.drain(false)?;
            if !self.pending.is_empty() {
                let events: Vec<_> = self.pending.drain(..).collect();
                // Sync events drained earlier (while waiting for the handshake) may still hold the debuggee.
                let needs_ack = had_sync || self.unacknowledged.get();
                return Ok(Some(EventBatch {
                    session: self,
                    events,
                    needs_ack,
                    timing: BatchTiming {
                        notified,
                        woke,
                        drained: Instant::now(),
                    },
                }));
            }
            if quiet && self.exit_status()?.is_some() {
                // One last look: the queues may have filled between the drain and the exit check.
                self.drain(true)?;
                if self.pending.is_empty() {
                    return Ok(None);
                }
                continue;
            }
            let slice = match timeout {
                Some(t) => {
                    let spent = start.elapsed();
                    if spent >= t {
                        return Err(SessionError::Timeout(t).into());
                    }
                    POLL.min(t - spent)
                }
                None => POLL,
            };
            let now = NOTIFIER.wait_past(seen, self.spin, slice);
            woke = Instant::now();
            quiet = now == seen;
            seen = now;
        }
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

    /// Releases the debuggee threads blocked on synchronous events; nothing to release once it died.
    pub(crate) fn acknowledge(&self) -> Result<(), crate::Error> {
        if self.death_signal().is_some() {
            return Ok(());
        }
        // SAFETY: no arguments.
        let r = api_call!(self.api, acknowledgeSyncEvents());
        // A failed acknowledgement leaves the debuggee held: the flag stays, and the next wait tries again.
        if r.is_ok() {
            self.unacknowledged.set(false);
        }
        r
    }

    /// Acknowledges again when events already handed out are still unacknowledged (their acknowledgement failed,
    /// or their batch was forgotten): they hold the debuggee, so nothing new would come while waiting.
    pub(super) fn settle(&self) -> Result<(), crate::Error> {
        if self.pending.is_empty() && self.unacknowledged.get() {
            self.acknowledge()
        } else {
            Ok(())
        }
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
    fn stop_child(&self) {
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
            // Nothing may hold the process inside the driver while `cudbgApiDetach()` runs in it: with a launch
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
    fn clean_up_on_detach(&mut self) -> Result<(), crate::Error> {
        let resume = handshake::resume_flag(self.pid);
        // SAFETY: plain flag argument: the debuggee's `cudbgResumeForAttachDetach`, as the header asks.
        api_call!(*self.live_api()?, requestCleanupOnDetach(resume))?;
        self.await_event(&|e| matches!(e, Event::DetachComplete), DETACH_WAIT)?;
        Ok(())
    }

    fn teardown(&mut self) -> Result<(), crate::Error> {
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
fn remove_driver_dir(pid: u32) {
    let _ = std::fs::remove_dir_all(format!("/tmp/cuda-dbg/{pid}"));
}

impl Drop for DebugSession {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}
