//! Per-kernel metrics and PC sampling inside the traced program, when `GPU_TOOLS_PROFILE_METRICS` or
//! `GPU_TOOLS_PROFILE_PC_SAMPLING` ask for them (`gpu_tools_injection::profile::ProfileRequest`).
//!
//! Each context gets a range profiler in auto-range, kernel-replay mode when it is created. CUPTI names an auto
//! range by its number only, so the session's callback subscriber tells which launch each range is (`ranges`):
//! the entry of every kernel launch queues one expected range (correlation id, kernel name); the entry of a graph
//! launch queues one per kernel node of the graph, in the order the graph runs them, read from the graph when its
//! executable was made (`graphs`). A launch into a stream that is capturing runs nothing and is not queued. The
//! counter data is decoded into kernel-metrics records when it is full (before the launch that would not fit),
//! when the context is destroyed, and at exit; with `GPU_TOOLS_PROFILE_GRAPH=graph`, each graph launch makes one
//! record. PC samples are read at the same moments. Anything lost is sent as a profile-loss record; anything that
//! fails is sent as a notice, and the program runs on.
//!
//! With a per-kernel limit (`GPU_TOOLS_PROFILE_LAUNCHES_PER_KERNEL`), the profiler is stopped at the first launch
//! past its name's limit (a graph launch counts for its graph) and started again at the next launch to profile:
//! stopped, it neither replays nor counts, and the ranges of the launches profiled before stay in the counter data
//! until the next decode.
//!
//! A process that never makes a context (a worker that loads CUDA and does nothing with it) profiles nothing and
//! says nothing.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use gpu_tools::cuda::Driver;
use gpu_tools::cuda::graph::{GraphKernels, stream_is_capturing};
use gpu_tools::cupti::DriverCbid;
use gpu_tools::cupti::callback::{
    ApiEvent, ApiSite, CallbackDomain, CallbackEvent, CaptureCall, ResourceEvent, ResourceKind,
    Subscriber,
};
use gpu_tools::cupti::pc_sampling::{PcSampler, PcSamples};
use gpu_tools::cupti::range_profiler::RangeProfiler;
use gpu_tools::trace::{NoticeLevel, ProfileLoss, ProfileLossKind, Record, StallRecord};
use gpu_tools_injection::env::GraphMode;
use gpu_tools_injection::message::Message;
use gpu_tools_injection::profile::ProfileRequest;
use gpu_tools_injection::profile::notice::{MetricsEnd, MetricsEnded, PcCounts};

use crate::writer::Writer;

mod gate;
mod graphs;
mod ranges;

use graphs::Graphs;
use ranges::{Expected, Place, Tail};

/// The launch calls whose entry marks a kernel (and so an auto range).
pub(crate) const LAUNCHES: [&str; 6] = [
    "cuLaunchKernel",
    "cuLaunchKernel_ptsz",
    "cuLaunchKernelEx",
    "cuLaunchKernelEx_ptsz",
    "cuLaunchCooperativeKernel",
    "cuLaunchCooperativeKernel_ptsz",
];

/// The graph launch calls: one range per kernel node of the graph.
pub(crate) const GRAPH_LAUNCHES: [&str; 2] = ["cuGraphLaunch", "cuGraphLaunch_ptsz"];

struct ContextProfile {
    raw: usize,
    id: u32,
    device: u32,
    profiler: Option<RangeProfiler<'static>>,
    pc: Option<PcSampler<'static>>,
    /// The ranges expected since the last decode.
    pending: Vec<Expected>,
    /// A graph launch whose kernels are unknown ran after the pending ranges: the ranges past them are its.
    tail: Option<Tail>,
    /// Workloads decoded before the pending ones.
    decoded: u32,
    /// Launches of each kernel name (or graph) seen (with a per-kernel limit).
    launches: HashMap<Arc<str>, u32>,
    /// Launches left unprofiled by the per-kernel limit.
    skipped: u64,
    /// The profiler is stopped while launches past the limit run.
    paused: bool,
    /// A decode found other than the ranges expected (said once).
    misaligned: bool,
}

struct State {
    writer: Arc<Writer>,
    request: ProfileRequest,
    contexts: Vec<ContextProfile>,
    names: HashMap<String, Arc<str>>,
    metric_names: Vec<Arc<str>>,
    graphs: Graphs,
    /// Graph ids made up for graphs CUPTI gives none.
    graph_ids: u32,
    /// Attached to a running program: its first CUDA graph launch ends the kernel metrics (see `on_event`).
    attached: bool,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);
/// Kernel metrics were asked for (set with `STATE`, cleared by nothing: a stale `true` costs a look at a stream
/// or a graph that no state then uses). Read before `STATE` is locked, see [`on_event`].
static METRICS_ASKED: AtomicBool = AtomicBool::new(false);
/// Profiling was asked for at all (as above).
static PROFILING_ASKED: AtomicBool = AtomicBool::new(false);
/// Launches profiled by a session whose profiling ended on one of the program's threads (an early end, or the next
/// launch after the tracer went away), for the finish's answer; taken by [`finish`], reset by [`start_with`].
static PROFILED_BEFORE_END: AtomicU64 = AtomicU64::new(0);
/// CUPTI's range profiler ran in this process (in this or an earlier session): PC sampling after it was seen to
/// give no stall records (see [`range_profiler_ran`]).
static RANGE_PROFILER_RAN: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Set while this module makes CUPTI calls: a callback they cause on this thread is ignored.
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// Reads the request; from here on contexts are profiled. Returns whether anything was asked for.
pub fn start(writer: &Arc<Writer>) -> bool {
    let request = match ProfileRequest::from_env() {
        Ok(r) => r,
        Err(e) => {
            writer.notice(NoticeLevel::Error, format!("not profiling: {e}"));
            return false;
        }
    };
    start_with(writer, request)
}

/// Starts profiling for `request` (from the environment, or from an attach's argument). Returns whether anything
/// was asked for.
pub fn start_with(writer: &Arc<Writer>, request: ProfileRequest) -> bool {
    if request.is_empty() {
        return false;
    }
    FINISH_AT_NEXT_LAUNCH.store(false, Ordering::SeqCst);
    PROFILED_BEFORE_END.store(0, Ordering::SeqCst);
    if request.pc_sampling && !request.metrics.is_empty() {
        writer.notice(
            NoticeLevel::Warning,
            "PC sampling with kernel metrics in one run: CUPTI gives no PC samples while the range profiler is \
             on (gpu_tools_injection::profile::run runs the program twice instead)"
                .into(),
        );
    }
    log::info!(
        "profiling kernels: metrics {:?}, PC sampling {}, graphs profiled by {}",
        request.metrics,
        request.pc_sampling,
        request.graph_profiling
    );
    let metric_names = request
        .metrics
        .iter()
        .map(|m| Arc::from(m.as_str()))
        .collect();
    PROFILING_ASKED.store(true, Ordering::SeqCst);
    if !request.metrics.is_empty() {
        METRICS_ASKED.store(true, Ordering::SeqCst);
    }
    *STATE.lock().unwrap_or_else(|p| p.into_inner()) = Some(State {
        writer: Arc::clone(writer),
        request,
        contexts: Vec::new(),
        names: HashMap::new(),
        metric_names,
        graphs: Graphs::default(),
        graph_ids: 0,
        attached: false,
    });
    true
}

/// The session could not subscribe to callbacks: nothing can be profiled (contexts are never seen). Says so and
/// drops the request.
pub fn no_subscriber(error: &dyn std::fmt::Display) {
    let Some(state) = STATE.lock().unwrap_or_else(|p| p.into_inner()).take() else {
        return;
    };
    state.writer.notice(
        NoticeLevel::Error,
        format!(
            "nothing is profiled: kernel metrics and PC sampling need CUPTI's callback subscriber, which could \
             not be had ({error})"
        ),
    );
}

/// Profiles a context that existed before profiling started (an attach), as if it had just been made; returns
/// whether a range profiler runs in it. Called while no other thread of the program is inside the driver or
/// CUPTI.
pub fn adopt_context(raw: gpu_tools::cuda::RawContext, id: u32) -> bool {
    let mut guard = STATE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(state) = guard.as_mut() else {
        return false;
    };
    BUSY.with(|b| b.set(true));
    state.attached = true;
    state.context_created(raw as usize, id);
    BUSY.with(|b| b.set(false));
    state
        .contexts
        .iter()
        .any(|c| c.raw == raw as usize && (c.profiler.is_some() || c.pc.is_some()))
}

/// Enables the launch callbacks on the session's subscriber (when profiling was asked for).
pub fn enable_callbacks(subscriber: &Subscriber) -> gpu_tools::Result<()> {
    if STATE.lock().unwrap_or_else(|p| p.into_inner()).is_none() {
        return Ok(());
    }
    for name in LAUNCHES
        .iter()
        .chain(&GRAPH_LAUNCHES)
        .chain(&CaptureCall::BEGINS)
    {
        if let Some(cbid) = DriverCbid::from_name(name) {
            subscriber.enable_driver(cbid)?;
        }
    }
    // Resource events (contexts, executable graphs) come with the session's own domain; enabling it again does no
    // harm.
    subscriber.enable_domain(CallbackDomain::Resource)
}

/// Every callback of the session's subscriber comes through here first.
pub fn on_event(event: &CallbackEvent<'_>) {
    if BUSY.with(Cell::get) {
        return;
    }
    // Every kernel launch is counted while inside the driver, before anything else (see `gate`).
    if let CallbackEvent::Api(a) = event
        && a.cbid().name().is_some_and(|n| LAUNCHES.contains(&n))
    {
        match a.site() {
            ApiSite::Enter => gate::enter(),
            ApiSite::Exit => gate::leave(),
        }
    }
    // What needs the driver is asked before `STATE` is locked. A driver call made while holding it deadlocked a
    // four-thread program (two H200s, CUPTI 13.0, driver 580): one thread held `STATE` and waited in
    // cuStreamIsCapturing for a lock inside CUPTI, which another thread held while CUPTI called this function
    // for it, waiting for `STATE`; the other two threads waited for CUPTI's lock in their launches.
    let ahead = if PROFILING_ASKED.load(Ordering::SeqCst) {
        Ahead::of(event)
    } else {
        Ahead::default()
    };
    let mut guard = STATE.lock().unwrap_or_else(|p| p.into_inner());
    if FINISH_AT_NEXT_LAUNCH.load(Ordering::SeqCst) && matches!(event, CallbackEvent::Api(_)) {
        FINISH_AT_NEXT_LAUNCH.store(false, Ordering::SeqCst);
        if let Some(state) = guard.take() {
            drop(guard);
            let profiled = finish_gated(state);
            PROFILED_BEFORE_END.fetch_add(profiled, Ordering::SeqCst);
            log::info!("profiling ended at a launch: {profiled} launches profiled");
        }
        return;
    }
    let Some(state) = guard.as_mut() else { return };
    BUSY.with(|b| b.set(true));
    let mut end_before = None;
    match event {
        CallbackEvent::Resource(r) => match r.kind() {
            ResourceKind::ContextCreated => {
                state.context_created(r.context() as usize, r.context_id().unwrap_or(0))
            }
            ResourceKind::ContextDestroyStarting => {
                state.context_ending(r.context() as usize);
            }
            ResourceKind::GraphExecCreated => state.graph_exec_created(r, ahead.graph),
            ResourceKind::GraphExecDestroyStarting => {
                if let Some(g) = r.graph() {
                    state.graphs.destroyed(g.graph_exec as usize);
                }
            }
            _ => {}
        },
        CallbackEvent::Api(a) if a.site() == ApiSite::Enter => {
            let name = a.cbid().name();
            if name.is_some_and(|n| LAUNCHES.contains(&n)) && !ahead.captured {
                let kernel = a
                    .symbol_name()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                state.launch(a.context() as usize, a.correlation_id(), &kernel);
            } else if name.is_some_and(|n| GRAPH_LAUNCHES.contains(&n)) && !ahead.captured {
                if state.attached && !state.request.metrics.is_empty() {
                    end_before = Some(MetricsEnd::GraphLaunch);
                } else if let Some(exec) = a.graph_exec() {
                    state.graph_launch(a.context() as usize, a.correlation_id(), exec as usize);
                }
            } else if name.is_some_and(|n| CaptureCall::BEGINS.contains(&n))
                && state.attached
                && !state.request.metrics.is_empty()
            {
                end_before = Some(MetricsEnd::CaptureBegin);
            }
        }
        _ => {}
    }
    if let Some(why) = end_before {
        // Attached to a running program, a CUDA graph launch made while the range profiler was on lost its work:
        // 10 of 10 launches it profiled, and 2627 of 2627 launched unprofiled while it stayed on (CUPTI 13.0, driver
        // 580, an H200). Launches after it had stopped ran right. And a capture begun while it was on failed: a
        // cuBLAS launch into the capturing stream failed (CUBLAS_STATUS_EXECUTION_FAILED), the capture was
        // invalidated, and the job (capture-late of the survival matrix) died. So the profiling ends here, on the
        // program's thread before the call is made (as at the next launch of an ended attach), and the call runs
        // without it.
        if let Some(state) = guard.take() {
            drop(guard);
            let text = match why {
                MetricsEnd::GraphLaunch => {
                    "kernel metrics end at the program's first CUDA graph launch: in a running program, graph \
                     launches made while CUPTI's range profiler is on lose their work (seen with CUPTI 13.0 on \
                     driver 580), so it is turned off before the launch; the kernels profiled until then are \
                     reported"
                }
                MetricsEnd::CaptureBegin => {
                    "kernel metrics end at the program's first stream capture: in a running program, a capture \
                     begun while CUPTI's range profiler is on fails (seen with CUPTI 13.0 on driver 580), so it is \
                     turned off before the capture begins; the kernels profiled until then are reported"
                }
                // Not an end this callback finds (it is said at the start, in `pc_attach`).
                MetricsEnd::NoSubscriber => "kernel metrics end",
            };
            state.writer.notice(NoticeLevel::Warning, text.into());
            let writer = Arc::clone(&state.writer);
            let profiled = finish_gated(state);
            PROFILED_BEFORE_END.fetch_add(profiled, Ordering::SeqCst);
            // Said once the range profiler is off: the tracer may hand the counters to another tool from here on.
            let ended = MetricsEnded {
                before: why,
                launches: profiled,
            };
            writer.message(&Message::MetricsEnded(ended));
        }
    }
    BUSY.with(|b| b.set(false));
}

/// What a callback learns from the driver, before `STATE` is locked.
#[derive(Default)]
struct Ahead {
    /// A launch (of a kernel or a graph) into a stream that is capturing.
    captured: bool,
    /// The kernels of an executable graph just made (kernel metrics only).
    graph: Option<Result<GraphKernels, String>>,
}

impl Ahead {
    fn of(event: &CallbackEvent<'_>) -> Ahead {
        match event {
            CallbackEvent::Api(a) if a.site() == ApiSite::Enter => {
                let launch = a
                    .cbid()
                    .name()
                    .is_some_and(|n| LAUNCHES.contains(&n) || GRAPH_LAUNCHES.contains(&n));
                Ahead {
                    captured: launch && captured(a),
                    graph: None,
                }
            }
            CallbackEvent::Resource(r)
                if r.kind() == ResourceKind::GraphExecCreated
                    && METRICS_ASKED.load(Ordering::SeqCst) =>
            {
                Ahead {
                    captured: false,
                    graph: Some(graph_kernels(r)),
                }
            }
            _ => Ahead::default(),
        }
    }
}

/// The kernels of the graph an executable was made from, read while the graph surely exists.
pub(crate) fn graph_kernels(r: &ResourceEvent<'_>) -> Result<GraphKernels, String> {
    let Some(info) = r.graph() else {
        return Err("CUPTI named no graph".to_string());
    };
    match Driver::load() {
        Ok(driver) if !info.graph.is_null() => {
            // SAFETY: the graph CUPTI reports an executable made from, alive during this callback, which runs on
            // the thread that made it.
            unsafe { GraphKernels::of_raw(driver, info.graph) }.map_err(|e| e.to_string())
        }
        Ok(_) => Err("CUPTI named no graph".to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// Whether a launch goes to a stream that is capturing: it is recorded into a graph, not run, and makes no range.
fn captured(a: &ApiEvent<'_>) -> bool {
    let (Some(stream), Ok(driver)) = (a.launch_stream(), Driver::load()) else {
        return false;
    };
    // SAFETY: the stream of the launch call in progress, alive during its callback.
    match unsafe { stream_is_capturing(driver, stream) } {
        Ok(capturing) => capturing,
        Err(e) => {
            log::debug!("cuStreamIsCapturing: {e}; taken as not capturing");
            false
        }
    }
}

/// Decodes and sends everything still held, and disables the profilers: at the end of the session, before the
/// stream's end record. Returns how many launches the session profiled, those of a profiling that ended earlier on
/// one of the program's threads included (their records were sent then).
pub fn finish() -> u64 {
    let before = PROFILED_BEFORE_END.swap(0, Ordering::SeqCst);
    let Some(state) = STATE.lock().unwrap_or_else(|p| p.into_inner()).take() else {
        return before;
    };
    before + finish_state(state)
}

/// Whether CUPTI's range profiler ran in this process, in this session or an earlier one.
pub fn range_profiler_ran() -> bool {
    RANGE_PROFILER_RAN.load(Ordering::SeqCst)
}

/// A range profiler started in this process (see [`range_profiler_ran`]).
pub fn note_range_profiler() {
    RANGE_PROFILER_RAN.store(true, Ordering::SeqCst);
}

fn finish_state(mut state: State) -> u64 {
    BUSY.with(|b| b.set(true));
    let raws: Vec<usize> = state.contexts.iter().map(|c| c.raw).collect();
    let mut profiled = 0;
    for raw in raws {
        profiled += u64::from(state.context_ending(raw));
    }
    BUSY.with(|b| b.set(false));
    profiled
}

/// Ends the profiling on one of the program's threads while the others run: after every launch another thread is
/// inside has left it, with launches that begin meanwhile held at their entry (`gate`).
fn finish_gated(state: State) -> u64 {
    let drained = gate::close_and_drain();
    if !drained {
        state.writer.notice(
            NoticeLevel::Warning,
            format!(
                "kernel metrics end while a kernel launch of another thread is still inside the driver after {} s \
                 (it did not return): the range profiler is disabled regardless",
                gate::PATIENCE.as_secs()
            ),
        );
    }
    let profiled = finish_state(state);
    gate::open();
    profiled
}

/// Set when the profiling must end but the caller cannot end it safely itself (an attach whose tracer went away
/// while the program ran): the next launch ends it, on the launching thread, where CUPTI's calls are safe.
static FINISH_AT_NEXT_LAUNCH: AtomicBool = AtomicBool::new(false);

/// Ends the profiling at the program's next kernel launch (its profilers stop replaying from then on).
pub fn finish_at_next_launch() {
    FINISH_AT_NEXT_LAUNCH.store(true, Ordering::SeqCst);
}

impl State {
    fn name(&mut self, text: &str) -> Arc<str> {
        intern(&mut self.names, text)
    }

    fn context_created(&mut self, raw: usize, id: u32) {
        let ctx = raw as gpu_tools::cuda::RawContext;
        let profiler = if self.request.metrics.is_empty() {
            None
        } else {
            let t0 = std::time::Instant::now();
            // SAFETY: CUPTI reports a context it just created; the profiler is dropped when the context's
            // destruction starts, or at exit.
            let started = unsafe { RangeProfiler::builder_for_raw(ctx) }
                .metrics(&self.request.metrics)
                .max_ranges(self.request.max_ranges)
                .start();
            match started {
                Ok(p) => {
                    note_range_profiler();
                    log::info!(
                        "context {id}: range profiler on {}, {} passes, {} bytes of counter data, set up in {:.1} ms",
                        p.chip(),
                        p.passes_needed(),
                        p.counter_data_bytes(),
                        t0.elapsed().as_secs_f64() * 1e3
                    );
                    Some(p)
                }
                Err(e) => {
                    self.writer.notice(
                        NoticeLevel::Error,
                        format!("context {id}: no kernel metrics: {e}"),
                    );
                    None
                }
            }
        };
        let pc = if self.request.pc_sampling {
            // SAFETY: as above.
            match unsafe { PcSampler::builder_for_raw(ctx) }.start() {
                Ok(s) => Some(s),
                Err(e) => {
                    self.writer.notice(
                        NoticeLevel::Error,
                        format!("context {id}: no PC sampling: {e}"),
                    );
                    None
                }
            }
        } else {
            None
        };
        let device = device_of(ctx);
        self.contexts.push(ContextProfile {
            raw,
            id,
            device,
            profiler,
            pc,
            pending: Vec::new(),
            tail: None,
            decoded: 0,
            launches: HashMap::new(),
            skipped: 0,
            paused: false,
            misaligned: false,
        });
    }

    /// An executable graph was made; `read`: its kernels, read before `STATE` was locked.
    fn graph_exec_created(
        &mut self,
        r: &ResourceEvent<'_>,
        read: Option<Result<GraphKernels, String>>,
    ) {
        if self.request.metrics.is_empty() {
            return;
        }
        let Some(info) = r.graph() else { return };
        let Some(read) = read else { return };
        let id = match r.graph_id().or_else(|| r.graph_exec_id()) {
            Some(id) => id,
            None => {
                self.graph_ids += 1;
                u32::MAX - self.graph_ids
            }
        };
        if let Ok(g) = &read {
            log::debug!(
                "graph {id}: {} kernels, one chain: {}, {} conditional nodes",
                g.kernels.len(),
                g.ordered,
                g.conditional_nodes
            );
        }
        let names = &mut self.names;
        let warning = self
            .graphs
            .created(info.graph_exec as usize, id, read, |n| intern(names, n));
        if let Some(w) = warning {
            // The order of parallel kernels does not matter when a graph launch makes one record.
            if !(w.order_only && self.request.graph_profiling == GraphMode::Graph) {
                self.writer.notice(NoticeLevel::Warning, w.text);
            }
        }
    }

    fn launch(&mut self, raw: usize, correlation: u32, kernel: &str) {
        let name = self.name(kernel);
        let expected = vec![Expected {
            correlation,
            kernel: Arc::clone(&name),
            graph: None,
        }];
        self.queue(raw, &name, expected, None);
    }

    fn graph_launch(&mut self, raw: usize, correlation: u32, exec: usize) {
        if self.request.metrics.is_empty() {
            return;
        }
        // Attached, graph launches end the profiling before they are made (`on_event`); none reaches here.
        if self.attached {
            return;
        }
        let plan = match self.graphs.plan(exec) {
            Some(plan) => plan,
            None => {
                let (plan, warning) = self.graphs.unreported(exec);
                self.writer.notice(NoticeLevel::Warning, warning);
                plan
            }
        };
        let run = self.graphs.run(&plan.name);
        match &plan.kernels {
            Some(kernels) => {
                let expected = kernels
                    .iter()
                    .map(|k| Expected {
                        correlation,
                        kernel: Arc::clone(k),
                        graph: Some(run.clone()),
                    })
                    .collect();
                self.queue(raw, &plan.name, expected, None);
            }
            None => self.queue(raw, &plan.name, Vec::new(), Some(Tail { correlation, run })),
        }
    }

    /// Queues the ranges a launch will make (`unit`: the kernel or graph counted by the per-kernel limit), or, for
    /// a graph launch whose kernels are unknown (`tail`), isolates them: decoded before it, and after it at the
    /// next launch.
    fn queue(&mut self, raw: usize, unit: &Arc<str>, expected: Vec<Expected>, tail: Option<Tail>) {
        let Some(i) = self.contexts.iter().position(|c| c.raw == raw) else {
            return;
        };
        if self.contexts[i].profiler.is_none() || (expected.is_empty() && tail.is_none()) {
            return;
        }
        if let Some(limit) = self.request.launches_per_kernel {
            let c = &mut self.contexts[i];
            let seen = c.launches.entry(Arc::clone(unit)).or_insert(0);
            *seen = seen.saturating_add(1);
            if *seen > limit {
                c.skipped += 1;
                if !c.paused {
                    // Stopped, the profiler neither replays nor counts the launches that follow.
                    c.paused = true;
                    if let Some(Err(e)) = c.profiler.as_mut().map(|p| p.end_pass()) {
                        self.give_up_metrics(i, &format!("kernel metrics stop here: {e}"));
                    }
                }
                return;
            }
        }
        let c = &self.contexts[i];
        let room = c.profiler.as_ref().map_or(0, |p| p.max_ranges());
        // Decoded first: a full image; ranges of an unknown graph launch to close; or ranges to set apart from
        // those of an unknown graph launch.
        let must_decode = c.tail.is_some()
            || (!c.pending.is_empty()
                && (tail.is_some() || c.pending.len() + expected.len() > room));
        if must_decode {
            // Decoding starts the profiler again.
            self.decode(i, true);
            self.contexts[i].paused = false;
        } else if c.paused {
            let c = &mut self.contexts[i];
            c.paused = false;
            if let Some(Err(e)) = c.profiler.as_mut().map(|p| p.begin_pass()) {
                log::warn!(
                    "context {}: restarting the range profiler: {e}; decoding first",
                    c.id
                );
                self.decode(i, true);
            }
        }
        let c = &mut self.contexts[i];
        if c.profiler.is_some() {
            c.pending.extend(expected);
            c.tail = tail;
        }
    }

    /// Decodes what a context still holds and stops profiling it; returns how many of its launches were profiled.
    fn context_ending(&mut self, raw: usize) -> u32 {
        let Some(i) = self.contexts.iter().position(|c| c.raw == raw) else {
            return 0;
        };
        self.decode(i, false);
        self.pc_samples(i);
        let c = self.contexts.remove(i);
        if c.skipped > 0 {
            self.writer.notice(
                NoticeLevel::Info,
                format!(
                    "context {}: {} launches profiled, {} more ran unprofiled (at most {} per kernel name)",
                    c.id,
                    c.decoded,
                    c.skipped,
                    self.request.launches_per_kernel.unwrap_or(0)
                ),
            );
        }
        c.decoded
    }

    /// Decodes a context's ranges into kernel-metrics records; resumes profiling when asked.
    fn decode(&mut self, i: usize, resume: bool) {
        let t0 = std::time::Instant::now();
        let (id, device) = (self.contexts[i].id, self.contexts[i].device);
        let Some(profiler) = self.contexts[i].profiler.as_mut() else {
            return;
        };
        let results = match profiler.results() {
            Ok(r) => r,
            Err(e) => {
                self.give_up_metrics(i, &format!("decoding kernel metrics: {e}"));
                return;
            }
        };
        let resumed = if resume { profiler.resume() } else { Ok(()) };
        let c = &mut self.contexts[i];
        let pending = std::mem::take(&mut c.pending);
        let tail = c.tail.take();
        log::info!(
            "context {id}: {} ranges decoded for {} expected in {:.1} ms",
            results.ranges.len(),
            pending.len(),
            t0.elapsed().as_secs_f64() * 1e3
        );
        let found = results.ranges.len() + results.dropped as usize;
        let fits = found == pending.len() || (tail.is_some() && found >= pending.len());
        if !fits && !c.misaligned {
            c.misaligned = true;
            self.writer.notice(
                NoticeLevel::Warning,
                format!(
                    "context {id}: {} ranges profiled where {} launches were expected: names of kernels \
                     profiled in this stretch may be wrong (said once per context)",
                    found,
                    pending.len()
                ),
            );
        }
        let place = Place {
            device,
            context: id,
            first: self.contexts[i].decoded,
        };
        let (records, next) = ranges::kernel_records(
            &results,
            &pending,
            tail.as_ref(),
            &self.metric_names,
            place,
            self.request.graph_profiling,
        );
        for record in &records {
            self.writer.push(record);
        }
        self.contexts[i].decoded = next;
        if results.dropped > 0 {
            self.writer.push(&Record::ProfileLoss(ProfileLoss {
                kind: ProfileLossKind::Ranges,
                count: results.dropped,
                context: id,
            }));
        }
        if let Err(e) = resumed {
            self.writer.notice(
                NoticeLevel::Error,
                format!("context {id}: kernel metrics stop here: {e}"),
            );
            self.contexts[i].profiler = None;
        }
    }

    /// Ends a context's kernel metrics after a failed call of its range profiler (`why`, said in an error notice):
    /// the profiler is dropped, and with it the ranges of the launches queued since the last decode, never decoded.
    /// Those are sent as lost, in a profile-loss record as ranges the counter data had no room for are, so that the
    /// tool counts them; those of a graph launch whose kernels are unknown, which no one counted, are said.
    fn give_up_metrics(&mut self, i: usize, why: &str) {
        let c = &mut self.contexts[i];
        c.profiler = None;
        let lost = std::mem::take(&mut c.pending).len() as u64;
        let tail = c.tail.take();
        let id = c.id;
        let uncounted = match tail {
            Some(t) => format!(
                "; also lost, in a number not known: the ranges of the launch of {} (correlation {})",
                t.run.name, t.correlation
            ),
            None => String::new(),
        };
        self.writer.notice(
            NoticeLevel::Error,
            format!("context {id}: {why}{uncounted}"),
        );
        if lost > 0 {
            self.writer.push(&Record::ProfileLoss(ProfileLoss {
                kind: ProfileLossKind::Ranges,
                count: lost,
                context: id,
            }));
        }
    }

    /// Finishes a context's PC sampling and sends its records.
    fn pc_samples(&mut self, i: usize) {
        let id = self.contexts[i].id;
        let Some(sampler) = self.contexts[i].pc.take() else {
            return;
        };
        let samples = match sampler.finish() {
            Ok(s) => s,
            Err(e) => {
                self.writer.notice(
                    NoticeLevel::Error,
                    format!("context {id}: PC sampling: {e}"),
                );
                return;
            }
        };
        send_pc_samples(&self.writer, id, &samples);
    }
}

/// Sends the stall records of one context's PC samples (and their losses); returns how many records.
pub fn send_pc_samples(writer: &Writer, id: u32, samples: &PcSamples) -> usize {
    log::info!(
        "context {id}: PC sampling: {} records, {} samples, {} dropped, {} outside the program's kernels, \
     {} reads with a full buffer",
        samples.records.len(),
        samples.total_samples,
        samples.dropped_samples,
        samples.non_user_samples,
        samples.buffer_full
    );
    // What CUPTI counted, said in the stream whatever came of it: a window without stall records is judged by it.
    let counts = PcCounts {
        context: id,
        samples: samples.total_samples,
        records: samples.records.len() as u64,
        dropped: samples.dropped_samples,
        non_user: samples.non_user_samples,
        truncated_pcs: samples.truncated_pcs,
        full_buffer_reads: samples.buffer_full,
    };
    writer.message(&Message::PcCounts(counts));
    let reasons: HashMap<u32, Arc<str>> = samples
        .reasons
        .iter()
        .map(|r| (r.index, Arc::from(r.name.as_str())))
        .collect();
    let unknown: Arc<str> = Arc::from("?");
    for r in &samples.records {
        let stalls = r
            .stalls
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(reason, n)| {
                (
                    reasons
                        .get(reason)
                        .cloned()
                        .unwrap_or_else(|| Arc::clone(&unknown)),
                    *n,
                )
            })
            .collect();
        writer.push(&Record::Stall(StallRecord {
            context: id,
            function: Arc::clone(&r.function),
            pc_offset: r.pc_offset,
            stalls,
        }));
    }
    if samples.dropped_samples > 0 {
        writer.push(&Record::ProfileLoss(ProfileLoss {
            kind: ProfileLossKind::PcSamples,
            count: samples.dropped_samples,
            context: id,
        }));
    }
    samples.records.len()
}

/// The device ordinal of a context (0 when it cannot be asked).
fn device_of(ctx: gpu_tools::cuda::RawContext) -> u32 {
    let Some(driver) = gpu_tools::cuda::Driver::get() else {
        return 0;
    };
    let api = driver.api();
    // SAFETY: a live context CUPTI just reported; pushed and popped around one query on this thread.
    if unsafe { (api.cu_ctx_push_current)(ctx) } != 0 {
        return 0;
    }
    let mut dev = 0;
    // SAFETY: the context is current; a valid out-pointer.
    let ok = unsafe { (api.cu_ctx_get_device)(&mut dev) } == 0;
    let mut popped = std::ptr::null_mut();
    // SAFETY: balances the push above.
    let _ = unsafe { (api.cu_ctx_pop_current)(&mut popped) };
    if ok {
        u32::try_from(dev).unwrap_or(0)
    } else {
        0
    }
}

/// The one `Arc` of a name.
fn intern(names: &mut HashMap<String, Arc<str>>, text: &str) -> Arc<str> {
    if let Some(n) = names.get(text) {
        return Arc::clone(n);
    }
    let n: Arc<str> = Arc::from(text);
    names.insert(text.to_string(), Arc::clone(&n));
    n
}
