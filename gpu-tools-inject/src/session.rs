//! The tracing session of one process: started by `InitializeInjection`, flushed periodically and when a context
//! is destroyed, finished by the exit handler.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use gpu_tools::cupti::activity::{ActivityKind, ActivityKinds, ActivityTracer, Clock, FlushMode};
use gpu_tools::cupti::callback::{CallbackDomain, CallbackEvent, ResourceKind, Subscriber};
use gpu_tools::cupti::{ApiCbid, CuptiLibrary, DriverCbid, RuntimeCbid, TracingError};
use gpu_tools::trace::{
    ClockAnchor, EndReason, NoticeLevel, ProcessInfo, ProcessStart, Record, StreamHeader,
    ThreadIds, TimestampClock,
};
use gpu_tools_injection::env::{ApiMode, GraphMode};

use crate::sink::Sink;
use crate::writer::{EndCounts, Filter, Writer};
use gpu_tools_injection::env::TraceKind as Kind;
use gpu_tools_injection::settings::{Destination, Settings};

/// How long an attached session waits, between redirecting the program's CUPTI calls and starting its tracer, for
/// calls already on their way to CUPTI (a thread between reading its import slot and the call).
const IN_FLIGHT_GRACE: Duration = Duration::from_millis(20);

/// Set once `InitializeInjection` ran in this process.
static STARTED: AtomicBool = AtomicBool::new(false);
/// The process that started the session; a forked child (another pid) leaves it alone.
static OWNER: AtomicU32 = AtomicU32::new(0);
static SESSION: Mutex<Option<Session>> = Mutex::new(None);

/// One process's tracing: the stream, the tracer and what keeps it flushed.
pub struct Session {
    writer: Arc<Writer>,
    tracer: Arc<ActivityTracer>,
    /// The callback subscriber of a launched session (flushes at context destruction, serves the range profiler);
    /// shared with `coexist`, which gives it up to a profiler of the program that asks, where it can.
    subscriber: Arc<Mutex<crate::coexist::SubscriberSlot>>,
    flusher: Option<Flusher>,
    /// Attached: the program's NVTX state routed to CUPTI for the window (`nvtx_attach`).
    nvtx: Option<crate::nvtx_attach::Routing>,
    /// API functions turned off in CUPTI for the session (`--api-skip`), on again at its end.
    api_off: Vec<ApiCbid>,
}

/// The periodic flush: a thread that flushes completed buffers every interval until stopped.
struct Flusher {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: JoinHandle<()>,
}

impl Flusher {
    fn start(tracer: Arc<ActivityTracer>, every: Duration) -> std::io::Result<Flusher> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let s = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("gpu-tools-flush".into())
            .spawn(move || {
                crate::signals::block_in_this_thread();
                let (lock, cv) = &*s;
                let mut stopped = lock.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    let (guard, _) = cv
                        .wait_timeout(stopped, every)
                        .unwrap_or_else(|p| p.into_inner());
                    stopped = guard;
                    if *stopped {
                        return;
                    }
                    // Completed buffers only: records of work still running stay with CUPTI until later.
                    drop(stopped);
                    if let Err(e) = tracer.flush_all(FlushMode::Completed) {
                        log::warn!("periodic flush: {e}");
                    }
                    stopped = lock.lock().unwrap_or_else(|p| p.into_inner());
                }
            })?;
        Ok(Flusher { stop, thread })
    }

    fn stop(self) {
        let (lock, cv) = &*self.stop;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
        let _ = self.thread.join();
    }
}

/// CUPTI activity kinds for the configured record kinds.
fn activity_kinds(kinds: &[Kind]) -> ActivityKinds {
    kinds
        .iter()
        .map(|k| match k {
            Kind::Kernel => ActivityKinds::CONCURRENT_KERNEL,
            Kind::Memcpy => ActivityKinds::MEMCPY | ActivityKinds::MEMCPY2,
            Kind::Memset => ActivityKinds::MEMSET,
            Kind::Sync => ActivityKinds::SYNCHRONIZATION,
            Kind::Driver => ActivityKinds::DRIVER,
            Kind::Runtime => ActivityKinds::RUNTIME,
            Kind::Overhead => ActivityKinds::OVERHEAD,
            Kind::Nvtx => ActivityKinds::MARKER | ActivityKinds::MARKER_DATA,
        })
        .fold(ActivityKinds::empty(), |a, b| a | b)
}

/// Every kind the session enables: the record kinds (NVTX among them), graph-level records, and, for API records of launches
/// only, no whole API kind (single functions are enabled after the start).
///
/// Attached to a running program, graph-level records are never enabled: its graphs may have been instantiated
/// before CUPTI started, and CUPTI 13.0 then crashes their next launch (SIGSEGV, seen on driver 580). Graph mode
/// builds the launches from the kernels' records instead (`graph_fold`), which needs kernel records on.
fn session_kinds(config: &Settings, graph: GraphMode, mode: Mode) -> ActivityKinds {
    let mut kinds = activity_kinds(&config.kinds);
    if graph == GraphMode::Graph {
        match mode {
            Mode::Launched => kinds |= ActivityKinds::GRAPH_TRACE,
            Mode::Attached => kinds |= ActivityKinds::CONCURRENT_KERNEL,
        }
    }
    if config.api == ApiMode::Launches {
        kinds -= ActivityKinds::DRIVER | ActivityKinds::RUNTIME;
    }
    kinds
}

/// The callback ids of the skipped function names (by function or header name).
fn skipped_cbids(names: &[String]) -> Vec<ApiCbid> {
    let all = DriverCbid::all()
        .map(ApiCbid::Driver)
        .chain(RuntimeCbid::all().map(ApiCbid::Runtime));
    all.filter(|c| {
        names
            .iter()
            .any(|n| c.function_name() == Some(n.as_str()) || c.name() == Some(n.as_str()))
    })
    .collect()
}

/// Sets up per-function API records: launches-only mode enables single functions; `--api-skip` turns the named
/// functions off in CUPTI (given back at the session's end); the essential mode's host-side bookkeeping
/// ([`ApiCbid::is_bookkeeping`]) is left out by the writer alone. CUPTI's per-function choice is process-wide: made
/// there, it would take those records from the program's own profiler too (its copies come from the trace's
/// records while the trace runs, and it reads CUPTI directly after), so the default leaves CUPTI's as it is.
/// Returns the functions the writer must leave out, and those turned off in CUPTI.
fn api_records(
    config: &Settings,
    tracer: &ActivityTracer,
    writer: &Writer,
) -> (Filter, Vec<ApiCbid>) {
    let mut filter = Filter::default();
    let wants = |c: &ApiCbid| match c {
        ApiCbid::Driver(_) => config.kinds.contains(&Kind::Driver),
        ApiCbid::Runtime(_) => config.kinds.contains(&Kind::Runtime),
    };
    let skip = skipped_cbids(&config.api_skip);
    if config.api == ApiMode::Launches {
        let launches = DriverCbid::all()
            .map(ApiCbid::Driver)
            .chain(RuntimeCbid::all().map(ApiCbid::Runtime))
            .filter(|c| wants(c) && c.launches_or_moves_data() && !skip.contains(c));
        let mut failed = None;
        for c in launches {
            if let Err(e) = tracer.set_api_records(c, true) {
                failed.get_or_insert(e);
            }
        }
        if let Some(e) = failed {
            writer.notice(
                NoticeLevel::Warning,
                format!("API records of launches only could not be set up ({e}): some launch calls are missing"),
            );
        }
        return (filter, Vec::new());
    }
    // The essential set's bookkeeping: the writer's.
    if config.api == ApiMode::Essential {
        filter.leave_out_bookkeeping(
            config.kinds.contains(&Kind::Driver),
            config.kinds.contains(&Kind::Runtime),
        );
    }
    // What was named: CUPTI's, where it can.
    let mut off = Vec::new();
    let mut by_writer = None;
    for c in skip.into_iter().filter(wants) {
        match tracer.set_api_records(c, false) {
            Ok(()) => off.push(c),
            Err(e) => {
                by_writer.get_or_insert((c, e));
                filter.skip.insert(crate::writer::skip_key(&c));
            }
        }
    }
    if let Some((c, e)) = by_writer {
        log::debug!("CUPTI cannot leave out named API functions ({c}: {e}); the writer does");
    }
    (filter, off)
}

/// Turns the API functions the session turned off in CUPTI on again, as CUPTI had them.
fn give_back_api_records(tracer: &ActivityTracer, off: &[ApiCbid]) {
    for &c in off {
        if let Err(e) = tracer.set_api_records(c, true) {
            log::warn!("API records of {c} could not be turned on again: {e}");
        }
    }
}

/// The program's command line from `/proc/self/cmdline`, arguments joined by spaces.
fn command_line() -> String {
    gpu_tools::linux::procfs::Process::current()
        .command_line_text()
        .unwrap_or_default()
}

/// Uses the CUDA driver and the CUPTI library the program has mapped already, so the process holds one copy of
/// each; otherwise the crate's search finds them.
pub fn use_mapped_libraries() {
    let me = gpu_tools::linux::procfs::Process::current();
    if let Some(path) = me.mapped_library("libcuda.so") {
        match gpu_tools::cuda::Driver::load_from(&path) {
            Ok(_) => log::debug!("CUDA driver: {} (mapped by the program)", path.display()),
            Err(e) => log::warn!(
                "the program's CUDA driver {} did not load: {e}",
                path.display()
            ),
        }
    }
    if let Some(path) = me.mapped_library("libcupti.so") {
        match CuptiLibrary::load_from(&path) {
            Ok(_) => log::debug!("CUPTI: {} (mapped by the program)", path.display()),
            Err(e) => log::warn!("the program's CUPTI {} did not load: {e}", path.display()),
        }
    }
}

/// Keeps this library mapped until the process ends: its exit handler, its flush thread and CUPTI's callbacks
/// point into it, and a `dlclose` would also run the exit handler under the loader's lock, where the thread it
/// starts could never begin. CUDA itself never unloads an injection library; this makes it so for anyone.
pub fn pin_this_library() {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only reads the address (a function of this library) and fills `info`.
    let found = unsafe { libc::dladdr(pin_this_library as *const libc::c_void, info.as_mut_ptr()) };
    // SAFETY: dladdr succeeded (non-zero), so it filled the struct; dli_fname is then a path it owns.
    let name = unsafe { info.assume_init() }.dli_fname;
    if found == 0 || name.is_null() {
        log::warn!("dladdr found no file for this library; it is not pinned");
        return;
    }
    // SAFETY: `name` is the NUL-terminated path of this (loaded) library; RTLD_NOLOAD only adds a reference to
    // the copy already mapped, and RTLD_NODELETE keeps it mapped for good. The handle is deliberately kept.
    let handle = unsafe {
        libc::dlopen(
            name,
            libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE,
        )
    };
    if handle.is_null() {
        log::warn!("could not pin this library in memory");
    }
}

/// How a session began: with the program (`InitializeInjection`), or attached to a running program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Started from the program's first `cuInit`.
    Launched,
    /// Loaded into a program that already ran: no callback subscriber (the program's own profiler may hold the one
    /// CUPTI 13.0 allows), no signal handlers (the program's are left as they are).
    Attached,
}

/// Which thread ids the records will carry, and a note for the stream where they are not the ones asked for.
///
/// Launched with the program, the library has CUPTI write Linux thread ids (`gettid()`, what `top -H` and py-spy
/// show) instead of its default, `pthread_self()` cut to 32 bits. The setting is the process's: a profiler inside
/// the program sees Linux ids too (Kineto shows them either way, see `gpu_tools::cupti::activity::ThreadIdKind`).
/// Attached to a running program, the program's setting is left as it is, since its own profiler may already
/// read records with it; the stream's header says which ids it holds.
fn thread_ids(mode: Mode) -> (ThreadIds, Option<String>) {
    use gpu_tools::cupti::activity::{ThreadIdKind, set_thread_id_kind, thread_id_kind};
    let mut note = None;
    if mode == Mode::Launched {
        // Without the driver or CUPTI tracing does not start either, and says so: no note for that.
        if let Err(e @ (gpu_tools::Error::Tracing(_) | gpu_tools::Error::Cupti(_))) =
            set_thread_id_kind(ThreadIdKind::System)
        {
            note = Some(format!(
                "CUPTI keeps its own thread ids ({e}): API calls are on threads numbered by pthread id, not the \
                 Linux thread id"
            ));
        }
    }
    match thread_id_kind() {
        Ok(ThreadIdKind::System) => (ThreadIds::Linux, note),
        Ok(_) => (ThreadIds::Vendor, note),
        Err(e) => {
            log::debug!("CUPTI's thread id kind is unknown ({e}); taken as its default");
            (ThreadIds::Vendor, note)
        }
    }
}

/// `InitializeInjection`'s work: true when tracing runs.
pub fn initialize() -> bool {
    if STARTED.swap(true, Ordering::SeqCst) {
        return true;
    }
    pin_this_library();
    let config = match Settings::from_env() {
        Ok(c) => c,
        Err(e) => {
            // Nowhere to report it but the log, which is silent unless asked for.
            if let Some(level) = std::env::var(gpu_tools_injection::env::LOG)
                .ok()
                .and_then(|v| gpu_tools_injection::settings::parse_log(&v).ok())
            {
                crate::logger::init(level);
            }
            log::error!("not tracing: {e}");
            return false;
        }
    };
    if let Some(level) = config.log {
        crate::logger::init(level);
    }
    let Some(sink) = open_sink(&config) else {
        return false;
    };
    OWNER.store(std::process::id(), Ordering::SeqCst);
    use_mapped_libraries();
    let Some(session) = Session::start(&config, sink, Mode::Launched) else {
        return false;
    };
    *SESSION.lock().unwrap_or_else(|p| p.into_inner()) = Some(session);
    register_exit_handler();
    true
}

/// Opens the configured output; a failure is logged.
pub fn open_sink(config: &Settings) -> Option<Sink> {
    let sink = match &config.destination {
        Destination::Socket(path) => Sink::connect(path),
        Destination::File(path) => Sink::create_file(path),
    };
    match sink {
        Ok(s) => Some(s),
        Err(e) => {
            log::error!("not tracing: cannot open {:?}: {e}", config.destination);
            None
        }
    }
}

/// Registers the exit handler, once per process (an attached library registers it at its first attach and keeps
/// it: a dormant handler does nothing).
pub fn register_exit_handler() {
    static REGISTERED: AtomicBool = AtomicBool::new(false);
    if REGISTERED.swap(true, Ordering::SeqCst) {
        return;
    }
    // SAFETY: registers a function that stays valid for the process and catches every panic.
    if unsafe { libc::atexit(at_exit) } != 0 {
        log::warn!("atexit failed: records not flushed before exit are lost");
    }
}

/// Whether a session runs in this process now.
pub fn is_running() -> bool {
    SESSION.lock().unwrap_or_else(|p| p.into_inner()).is_some()
}

/// Makes `session` the process's session, unless one runs already (then it is handed back).
// Handed back by value, once per attach: nothing to gain from a box.
#[allow(clippy::result_large_err)]
pub fn install(session: Session) -> Result<(), Session> {
    let mut slot = SESSION.lock().unwrap_or_else(|p| p.into_inner());
    if slot.is_some() {
        return Err(session);
    }
    OWNER.store(std::process::id(), Ordering::SeqCst);
    *slot = Some(session);
    Ok(())
}

/// Ends the process's session, if one runs: every record CUPTI holds is delivered, then the stream ends. True when
/// one ran.
pub fn finish_running(reason: EndReason) -> bool {
    let session = SESSION.lock().unwrap_or_else(|p| p.into_inner()).take();
    match session {
        Some(s) => {
            s.finish(reason);
            true
        }
        None => false,
    }
}

impl Session {
    /// Starts tracing into `sink` as `config` says. `None` when CUPTI could not start (said in the stream).
    pub fn start(config: &Settings, sink: Sink, mode: Mode) -> Option<Session> {
        let version = CuptiLibrary::load()
            .ok()
            .and_then(|l| l.version().ok())
            .unwrap_or(0);
        // Before the tracer puts CUPTI on the trace's clock: the program's profiler keeps its own (`coexist`).
        let mut before = crate::coexist::read_clock_before_trace();
        let writer = begin_stream(config, sink, mode, version, &mut before);
        // The program's own CUPTI calls come to the trace before its tracer registers: a profiler that registers
        // its callbacks again in between (torch.profiler on a `schedule` does so every few steps) would otherwise
        // take CUPTI's completed buffers from the tracer for the whole window. On an H200 every window beside such a
        // job held no record, and the job's profiler ended 24% short of its records (docs/driver-notes.md).
        let expected = session_kinds(config, config.graph, mode);
        let subscriber = Arc::new(Mutex::new(crate::coexist::SubscriberSlot::default()));
        if mode == Mode::Attached {
            // Beside a profiler on a schedule, the sharing and the tracer's forced flush come between two of its
            // sessions (while watched, its calls still reach CUPTI as without the trace).
            crate::coexist::wait_for_session_gap("start", Some(&before));
        }
        let redirected_now = share_cupti(expected, before, &writer, &subscriber);
        if mode == Mode::Attached && redirected_now {
            // A program thread that read an import slot just before it was redirected still calls CUPTI itself
            // once; such calls end before the tracer enables its kinds (a disable made after the enable would stop
            // the window's records). Not where the watch redirected the slots before the probe, hundreds of
            // milliseconds ago: there the wait only put the tracer's start past the gap between a scheduled
            // profiler's sessions (about 11 ms on an H100), and its forced flush inside the next session, which
            // lost the kernels running then (1-5 of a cycle's 141 at every window's start).
            std::thread::sleep(IN_FLIGHT_GRACE);
        }
        let started = start_tracer(config, mode, &writer);
        let tracer = match started {
            Ok(t) => {
                writer.window_starts_at(t.clock_in_at());
                Arc::new(t)
            }
            Err(e) => {
                // Nothing was recorded: the program's calls go back to CUPTI, its callbacks and kinds as they were.
                let _ = crate::coexist::uninstall(false, ActivityKinds::empty());
                writer.notice(
                    NoticeLevel::Error,
                    format!("CUPTI tracing could not start: {e}"),
                );
                writer.end(
                    EndReason::Stopped,
                    EndCounts::default(),
                    Clock::Monotonic.now_ns(),
                );
                return None;
            }
        };
        crate::coexist::set_trace_layout(tracer.layout());
        let (filter, api_off) = api_records(config, &tracer, &writer);
        if !filter.skip.is_empty() {
            writer.set_skip(filter.skip);
        }
        log::info!(
            "tracing with CUPTI {version} ({:?}), kinds {:?}, to {:?} ({mode:?})",
            tracer.layout(),
            tracer.kinds(),
            config.destination
        );
        if tracer.dropped_before_start() > 0 {
            // Read as the tracer started: drops of the program's own profiler, or of an earlier attach's hand-back,
            // which CUPTI counts until someone reads them. Not the trace's, and said apart.
            writer.notice(
                NoticeLevel::Info,
                format!(
                    "CUPTI had dropped {} records before the trace started (while the program's own profiler, or \
                     no one, held CUPTI): not counted as the trace's",
                    tracer.dropped_before_start()
                ),
            );
        }
        if tracer.kinds() != expected {
            // Graph-level records were refused and the tracer runs node by node.
            crate::coexist::set_session_kinds(tracer.kinds());
        }
        // Activity records need no subscriber, and an attached session takes none: the program's own profiler may
        // hold the only one.
        if mode == Mode::Launched {
            let (launched, profiling) = launched_subscriber(&tracer, &writer);
            *subscriber.lock().unwrap_or_else(|p| p.into_inner()) =
                crate::coexist::SubscriberSlot {
                    subscriber: launched,
                    kept: profiling,
                };
        }
        let flusher = start_flusher(config, &tracer, &writer);
        if config.signals && mode == Mode::Launched {
            if let Err(e) = crate::signals::install(Arc::clone(&writer), Arc::clone(&tracer)) {
                writer.notice(
                    NoticeLevel::Warning,
                    format!(
                        "no flush at fatal signals (a crash loses the records not flushed yet): {e}"
                    ),
                );
            }
        }
        let nvtx = (mode == Mode::Attached && config.nvtx()).then(|| route_nvtx(&writer));
        Some(Session {
            writer,
            tracer,
            subscriber,
            flusher,
            nvtx,
            api_off,
        })
    }

    /// Sends a notice for whoever reads the stream.
    pub fn notice(&self, level: NoticeLevel, text: String) {
        self.writer.notice(level, text);
    }

    /// Sends a message the tool acts on into the session's stream.
    pub fn message(&self, message: &gpu_tools_injection::message::Message) {
        self.writer.message(message);
    }
}

/// The process as its stream names it: as the tool sees it where the tool said so ([`Settings::seen_as`], an
/// attach), else as it sees itself; and its own numbers, where a PID namespace of its own (a container's) makes them
/// differ. Streams of two containers would otherwise both name pid 1, and match no process the tool attached to.
pub(crate) struct StreamPids {
    /// The pid the stream's header and process start carry.
    pub(crate) pid: u32,
    /// The parent's (0: not known).
    pub(crate) parent: u32,
    /// The process's own pid, where it differs.
    own: Option<u32>,
}

impl StreamPids {
    pub(crate) fn of(config: &Settings) -> StreamPids {
        let own = std::process::id();
        match config.seen_as {
            Some(seen) => StreamPids {
                pid: seen.pid,
                parent: seen.parent,
                own: (seen.pid != own).then_some(own),
            },
            None => StreamPids {
                pid: own,
                // SAFETY: getppid has no preconditions and cannot fail.
                parent: u32::try_from(unsafe { libc::getppid() }).unwrap_or(0),
                own: None,
            },
        }
    }

    /// What the stream says of the two numbers, where they differ (shown after the process's pid, so it does not
    /// name it again).
    pub(crate) fn note(&self) -> Option<String> {
        self.own.map(|own| {
            format!(
                "pid {own} in a PID namespace of its own (a container's); the trace names the process by the pid the \
                 tool attached to"
            )
        })
    }
}

/// The stream's start: the writer (its header, and what it leaves out: graph nodes or plain kernels, records from
/// before an attach's window), the process's start, info and clock anchor, and, attached, what was found of the
/// program's own profiler.
fn begin_stream(
    config: &Settings,
    sink: Sink,
    mode: Mode,
    version: u32,
    before: &mut crate::coexist::Before,
) -> Arc<Writer> {
    let named = StreamPids::of(config);
    let pid = named.pid;
    let (thread_ids, thread_note) = thread_ids(mode);
    let graph_mode = config.graph == GraphMode::Graph;
    let attached = mode == Mode::Attached;
    let writer = Arc::new(Writer::new(
        sink,
        &StreamHeader::new(pid, version, TimestampClock::Monotonic).with_thread_ids(thread_ids),
        Filter {
            drop_graph_nodes: graph_mode && !attached,
            fold_graphs: graph_mode && attached,
            drop_plain_kernels: graph_mode && attached && !config.kinds.contains(&Kind::Kernel),
            skip: Default::default(),
            stage: config.stage,
            // The window starts now: CUPTI may deliver records of earlier work late (seen: kernels of the
            // program's first seconds, in the first attach to it).
            window_start: attached.then(|| Clock::Monotonic.now_ns()),
        },
    ));
    writer.push(&Record::ProcessStart(ProcessStart {
        pid,
        parent_pid: named.parent,
        time: Clock::Monotonic.now_ns(),
        command: command_line(),
    }));
    writer.push(&Record::ProcessInfo(ProcessInfo::current()));
    if let Some(note) = named.note() {
        writer.notice(NoticeLevel::Info, note);
    }
    if let Some(note) = thread_note {
        writer.notice(NoticeLevel::Warning, note);
    }
    writer.push(&Record::ClockAnchor(ClockAnchor::now()));
    if attached {
        probe_program(&writer, before);
    }
    writer
}

/// Starts the tracer on the session's kinds; where CUPTI has no graph-level tracing, graphs node by node instead
/// (said in a notice).
fn start_tracer(
    config: &Settings,
    mode: Mode,
    writer: &Arc<Writer>,
) -> gpu_tools::Result<ActivityTracer> {
    if log::log_enabled!(log::Level::Debug) {
        // Said at the stream's end: how often CUPTI read the clock through the library (`writer`).
        gpu_tools::cupti::activity::count_timestamp_calls();
    }
    let start = |graph: GraphMode| {
        let w = Arc::clone(writer);
        ActivityTracer::builder()
            .kinds(session_kinds(config, graph, mode))
            .buffer_size(config.buffer_size & !7)
            .max_buffers(config.max_buffers)
            .clock(Clock::Monotonic)
            .flush_before_start(crate::coexist::program_profiler_shared())
            .start(move |batch| {
                // The program's own profiler first: it gets its copies before the writer reads the batch.
                crate::coexist::dispatch(batch);
                w.write_batch(batch)
            })
    };
    let mut started = start(config.graph);
    if config.graph == GraphMode::Graph {
        if let Err(gpu_tools::Error::Tracing(TracingError::EnableKind { kind, error })) = &started {
            if *kind == ActivityKind::GRAPH_TRACE {
                writer.notice(
                    NoticeLevel::Warning,
                    format!(
                        "graph-level tracing is not available in this CUPTI ({error}): graphs are traced node \
                         by node instead"
                    ),
                );
                writer.set_drop_graph_nodes(false);
                started = start(GraphMode::Node);
            }
        }
    }
    started
}

/// A launched session's callback subscriber, which flushes at context destruction and serves the profiling if it
/// runs; and whether it does. Without the subscriber, said in a notice.
fn launched_subscriber(
    tracer: &Arc<ActivityTracer>,
    writer: &Arc<Writer>,
) -> (Option<Subscriber>, bool) {
    let profiling = crate::profiling::start(writer);
    let subscriber = match context_flush(tracer, profiling) {
        Ok(s) => Some(s),
        Err(e) => {
            if profiling {
                crate::profiling::no_subscriber(&e);
            }
            writer.notice(
                NoticeLevel::Warning,
                format!(
                    "no flush at context destruction (records still reach the exit handler): {e}"
                ),
            );
            None
        }
    };
    (subscriber, profiling)
}

/// The periodic flush, where one is asked for; one that cannot start is said in a notice.
fn start_flusher(
    config: &Settings,
    tracer: &Arc<ActivityTracer>,
    writer: &Writer,
) -> Option<Flusher> {
    match config.flush_interval {
        Some(every) => match Flusher::start(Arc::clone(tracer), every) {
            Ok(f) => Some(f),
            Err(e) => {
                writer.notice(
                    NoticeLevel::Warning,
                    format!("no periodic flush (a crash loses every record not flushed yet): {e}"),
                );
                None
            }
        },
        None => None,
    }
}

/// Attached: the program's NVTX initialised without a tool at its first call; routed to CUPTI now that the tracer
/// records markers, and before the attach is reported, so that calls from then on are recorded (`nvtx_attach`).
fn route_nvtx(writer: &Writer) -> crate::nvtx_attach::Routing {
    let began = std::time::Instant::now();
    let routing = crate::nvtx_attach::route();
    log::info!(
        "NVTX: {} states routed to CUPTI in {:?}",
        routing.routed(),
        began.elapsed()
    );
    for (level, text) in routing.notices() {
        writer.notice(*level, text.clone());
    }
    routing
}

/// Attached: finds a profiler inside the program that records now, before the tracer takes CUPTI's callbacks, so
/// that it keeps its records (`coexist::probe_program`); says what was found.
fn probe_program(writer: &Writer, before: &mut crate::coexist::Before) {
    use crate::coexist::ProgramProfiler;
    let lost_before = crate::coexist::probe_lost_records();
    let answer = crate::coexist::probe_program(before);
    let lost = crate::coexist::probe_lost_records().saturating_sub(lost_before);
    if lost > 0 {
        writer.notice(
            NoticeLevel::Warning,
            format!(
                "{lost} records CUPTI made while the program's profiler was being looked for could not reach it \
                 (its buffer callbacks were not found, or it gave no buffer): they are lost to it"
            ),
        );
    }
    if answer.as_ref().is_ok_and(ProgramProfiler::registered) {
        crate::first_attach::note_program_profiler();
    }
    match answer {
        Ok(ProgramProfiler::None) => {}
        Ok(ProgramProfiler::Idle { asked }) => writer.notice(
            NoticeLevel::Info,
            format!(
                "a profiler inside the program had registered CUPTI's buffer callbacks and recorded nothing while \
                 they were watched (its session had ended, or nothing ran{}): they go back to CUPTI when the trace \
                 ends",
                if asked {
                    "; CUPTI asked it for a buffer, so a kind of its that recorded nothing may be enabled"
                } else {
                    ""
                }
            ),
        ),
        Ok(ProgramProfiler::Recording(kinds)) => writer.notice(
            NoticeLevel::Info,
            format!(
                "the program's own profiler is recording (kinds {kinds:?}): it keeps getting its records during \
                 the trace, and its callbacks and kinds go back to CUPTI when the trace ends"
            ),
        ),
        Err(e) => writer.notice(
            NoticeLevel::Warning,
            format!(
                "a profiler inside the program that records now could not be found ({e}): if one does, the trace \
                 takes its records, and it records nothing after the trace"
            ),
        ),
    }
}

/// Shares CUPTI with a profiler inside the program (`coexist`), and says so where the program calls CUPTI: called
/// before the tracer starts with the kinds it will enable. Returns whether the program's import slots were
/// redirected just now (`coexist::Installed::redirected_now`).
fn share_cupti(
    kinds: ActivityKinds,
    before: crate::coexist::Before,
    writer: &Arc<Writer>,
    subscriber: &Arc<Mutex<crate::coexist::SubscriberSlot>>,
) -> bool {
    let link = crate::coexist::SessionLink {
        writer: Arc::clone(writer),
        subscriber: Arc::clone(subscriber),
    };
    match crate::coexist::install(kinds, before, link) {
        Ok(installed) if installed.slots > 0 => {
            writer.notice(
                NoticeLevel::Info,
                format!(
                    "CUPTI is shared with the program's own profiler: its activity calls from {} go through the \
                     trace, so that both get their records",
                    installed.objects.join(", ")
                ),
            );
            if !installed.enabled_while_watched.is_empty() {
                writer.notice(
                    NoticeLevel::Info,
                    format!(
                        "the program's own profiler enabled {:?} while the attach looked for it: it keeps getting \
                         those records during the trace",
                        installed.enabled_while_watched
                    ),
                );
            }
            installed.redirected_now
        }
        Ok(_) => false,
        Err(e) => {
            writer.notice(
                NoticeLevel::Warning,
                format!(
                    "CUPTI is not shared with a profiler inside the program ({e}): one that starts during the \
                     trace takes its records"
                ),
            );
            false
        }
    }
}

/// The end of the sharing, after the tracer stopped: what the program's own profiler got.
fn unshare_cupti(writer: &Writer, reason: EndReason, kept: ActivityKinds) {
    let Some(u) = crate::coexist::uninstall(reason != EndReason::Stopped, kept) else {
        return;
    };
    if u.registered || u.handed.records > 0 {
        writer.notice(
            if u.handed.lost > 0 {
                NoticeLevel::Warning
            } else {
                NoticeLevel::Info
            },
            format!(
                "the program's own profiler recorded during the trace: {} of its records handed to it in {} \
                 buffers, {} lost for want of a buffer of its own; its callbacks{} given back to CUPTI",
                u.handed.records,
                u.handed.buffers,
                u.handed.lost,
                if u.enabled.is_empty() {
                    String::new()
                } else {
                    format!(" and kinds {:?}", u.enabled)
                }
            ),
        );
    }
    if u.kept_outstanding {
        writer.notice(
            NoticeLevel::Warning,
            "CUPTI still held a buffer of the trace's when it ended, which it will complete to the program's own \
             profiler: records of the profiler's written there before its next flush are lost to it if it passes \
             over buffers it did not give (Kineto does). One of its own buffers is kept outstanding, so that it goes \
             on flushing and gets its buffers again (without that, a torch.profiler on a schedule recorded nothing \
             more after such a window)"
                .into(),
        );
    }
    if u.clock.is_none() && !u.exiting {
        writer.notice(
            NoticeLevel::Warning,
            "CUPTI's clock before the trace was not recognised: CUPTI stays on the trace's clock (CLOCK_MONOTONIC), \
             and a profiler inside the program that reads CUPTI timestamps gets that clock from now on"
                .into(),
        );
    }
}

/// A subscriber that flushes completed buffers when a context is about to be destroyed (its records are complete
/// then; the exit handler forces out the rest). It takes CUPTI's one subscriber slot: a profiler inside the
/// program (torch.profiler) cannot subscribe while the library traces.
fn context_flush(tracer: &Arc<ActivityTracer>, profiling: bool) -> gpu_tools::Result<Subscriber> {
    let weak = Arc::downgrade(tracer);
    let subscriber = Subscriber::builder()
        .name("gpu-tools-inject")
        .subscribe(move |event| {
            if profiling {
                crate::profiling::on_event(event);
            }
            if let CallbackEvent::Resource(r) = event {
                if r.kind() == ResourceKind::ContextDestroyStarting {
                    if let Some(t) = weak.upgrade() {
                        if let Err(e) = t.flush_all(FlushMode::Completed) {
                            log::warn!("flush at context destruction: {e}");
                        }
                    }
                }
            }
        })?;
    subscriber.enable_domain(CallbackDomain::Resource)?;
    if profiling {
        crate::profiling::enable_callbacks(&subscriber)?;
    }
    Ok(subscriber)
}

/// How long the exit handler waits for the final flush. CUPTI's flush could wait on a driver that is already
/// tearing down (other exit handlers run in any order); the program must exit anyway.
const EXIT_FLUSH_LIMIT: Duration = Duration::from_secs(10);

/// The exit handler: stops tracing, so that every record CUPTI holds is delivered, and ends the stream. The work
/// runs on a thread of its own and is waited for at most [`EXIT_FLUSH_LIMIT`]; past that the stream stays without
/// its end record, which the tracer reports.
extern "C" fn at_exit() {
    let finished = std::panic::catch_unwind(|| {
        // A forked child runs its parent's exit handlers: it must not touch the parent's state.
        if OWNER.load(Ordering::SeqCst) != std::process::id() {
            return;
        }
        let session = SESSION.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some(s) = session else { return };
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let worker = std::thread::Builder::new()
            .name("gpu-tools-exit".into())
            .spawn(move || {
                s.finish(EndReason::Exit);
                let _ = done_tx.send(());
            });
        match worker {
            Ok(_) => {
                if done_rx.recv_timeout(EXIT_FLUSH_LIMIT).is_err() {
                    log::error!(
                        "the final flush did not finish within {EXIT_FLUSH_LIMIT:?}; the program exits without it"
                    );
                }
            }
            Err(e) => log::error!(
                "no thread for the final flush ({e}); records CUPTI still holds are lost"
            ),
        }
    });
    if let Err(payload) = finished {
        // Dropping a panic payload could panic again, here where nothing may unwind.
        std::mem::forget(payload);
    }
}

impl Session {
    /// Stops tracing: every record CUPTI holds is delivered, then the stream ends with `reason`.
    pub fn finish(self, reason: EndReason) {
        // NVTX goes back first, while the tracer still records: ranges closed until now are in the trace, and no
        // slot points into CUPTI afterwards, the exit included (CUPTI's destructors run after the exit handlers,
        // while other threads may still call NVTX).
        if let Some(nvtx) = self.nvtx {
            nvtx.unroute(reason != EndReason::Stopped);
        }
        if let Some(f) = self.flusher {
            f.stop();
        }
        // Counter records go out before the tracer stops and the stream ends.
        crate::profiling::finish();
        // No callback may flush while the tracer stops.
        let subscriber = self
            .subscriber
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .subscriber
            .take();
        if let Some(s) = subscriber {
            if let Err(e) = s.unsubscribe() {
                log::warn!("unsubscribe: {e}");
            }
        }
        if self.writer.has_ended() {
            // A fatal signal ended the stream already: what came after it was left out (`Writer::after_end`).
            let after = self.writer.after_end();
            if after.records > 0 || after.dropped > 0 {
                log::warn!(
                    "the stream ended early, at a fatal signal the program lived on after: {} records after its end \
                     were not sent, and CUPTI reported {} dropped with them",
                    after.records,
                    after.dropped
                );
            }
            return;
        }
        // The program lives on (an attached window's end): CUPTI's per-function choice goes back as it was.
        if reason == EndReason::Stopped {
            give_back_api_records(&self.tracer, &self.api_off);
        }
        // The kinds the program's own profiler records stay enabled: turned off and on again under its other
        // kinds, CUPTI stopped kernel records for everyone after a few windows (`ActivityTracer::stop_keeping`).
        // Not at the exit: nothing of the program's is given back then.
        let keep = if reason == EndReason::Stopped {
            crate::coexist::program_kinds()
        } else {
            ActivityKinds::empty()
        };
        if !keep.is_empty() {
            crate::coexist::lend_program_buffers_at_stop();
        }
        let counts = match Arc::try_unwrap(self.tracer) {
            // The program's callbacks go back inside the stop, as soon as the tracer holds no buffer.
            Ok(tracer) => match tracer.stop_keeping_then(keep, || {
                // Only when kinds are kept. Given back at every stop (tried on an H200), the hand-back with its
                // forced flush ran 27 ms while the program's profiler began its next session, whose enables the
                // sharing still took as the tracer's: that torch.profiler cycle recorded nothing. Otherwise they go
                // back before the program's first enable after the stop, or as the sharing's end begins.
                if !keep.is_empty() {
                    crate::coexist::give_back_callbacks();
                }
                crate::coexist::tracer_stopped();
            }) {
                Ok(report) => {
                    if report.stats.buffers_in_use > 0 {
                        crate::coexist::tracer_kept_a_buffer();
                    }
                    if let Some(p) = &report.panic {
                        log::error!("writing a batch panicked: {p}");
                    }
                    if report.dropped_after_stop > 0 {
                        self.writer.notice(
                            NoticeLevel::Warning,
                            format!(
                                "CUPTI dropped {} records of the program's own profiler after the trace's end, \
                                 before its callbacks were given back (work after the window; its profiler can read \
                                 the count with cuptiActivityGetNumDroppedRecords)",
                                report.dropped_after_stop
                            ),
                        );
                    }
                    EndCounts {
                        dropped: report.stats.dropped_records,
                        callback_panics: report.stats.callback_panics,
                    }
                }
                Err(e) => {
                    self.writer.notice(
                        NoticeLevel::Error,
                        format!("stopping the tracer failed: {e}"),
                    );
                    EndCounts::default()
                }
            },
            // Someone else still holds the tracer (cannot happen once the flusher and subscriber are gone):
            // force out what CUPTI holds; the tracer stops when the last holder drops it.
            Err(tracer) => {
                if let Err(e) = tracer.flush_all(FlushMode::Forced) {
                    log::warn!("final flush: {e}");
                }
                let s = tracer.stats();
                EndCounts {
                    dropped: s.dropped_records,
                    callback_panics: s.callback_panics,
                }
            }
        };
        unshare_cupti(&self.writer, reason, keep);
        self.writer.push(&Record::ClockAnchor(ClockAnchor::now()));
        self.writer.end(reason, counts, Clock::Monotonic.now_ns());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_cupti_activity_kinds() {
        assert_eq!(
            activity_kinds(&Kind::DEFAULT),
            ActivityKinds::CONCURRENT_KERNEL
                | ActivityKinds::MEMCPY
                | ActivityKinds::MEMCPY2
                | ActivityKinds::MEMSET
                | ActivityKinds::DRIVER
                | ActivityKinds::RUNTIME
        );
        assert_eq!(
            activity_kinds(&[Kind::Sync]),
            ActivityKinds::SYNCHRONIZATION
        );
        assert_eq!(activity_kinds(&[Kind::Overhead]), ActivityKinds::OVERHEAD);
    }

    #[test]
    fn the_command_line_is_read() {
        let c = command_line();
        assert!(!c.is_empty());
        assert!(!c.contains('\0'));
    }
}
