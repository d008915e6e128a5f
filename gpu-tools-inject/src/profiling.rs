//! Per-kernel metrics and PC sampling inside the traced program, when `GPU_TOOLS_PROFILE_METRICS` or
//! `GPU_TOOLS_PROFILE_PC_SAMPLING` ask for them (`gpu_tools::profile::ProfileRequest`).
//!
//! Each context gets a range profiler in auto-range, kernel-replay mode when it is created. The session's callback
//! subscriber hands over context creation and destruction and the entry of every kernel launch: a launch is noted
//! (correlation id, kernel name), so range `i` of a decode is the context's `i`-th launch since the previous one.
//! The counter data is decoded into kernel-metrics records when it is full (before the launch that would not fit),
//! when the context is destroyed, and at exit. PC samples are read at the same moments. Anything lost is sent as a
//! profile-loss record; anything that fails is sent as a notice, and the program runs on.
//!
//! With a per-kernel limit (`GPU_TOOLS_PROFILE_LAUNCHES_PER_KERNEL`), the profiler is stopped at the first launch
//! past its name's limit and started again at the next launch to profile: stopped, it neither replays nor counts,
//! and the ranges of the launches profiled before stay in the counter data until the next decode.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use gpu_tools::cupti::DriverCbid;
use gpu_tools::cupti::callback::{CallbackDomain, CallbackEvent, ResourceKind, Subscriber};
use gpu_tools::cupti::pc_sampling::PcSampler;
use gpu_tools::cupti::range_profiler::RangeProfiler;
use gpu_tools::profile::ProfileRequest;
use gpu_tools::trace::{
    KernelMetricsRecord, NoticeLevel, ProfileLoss, ProfileLossKind, Record, StallRecord,
};

use crate::writer::Writer;

/// The launch calls whose entry marks a kernel (and so an auto range).
const LAUNCHES: [&str; 6] = [
    "cuLaunchKernel",
    "cuLaunchKernel_ptsz",
    "cuLaunchKernelEx",
    "cuLaunchKernelEx_ptsz",
    "cuLaunchCooperativeKernel",
    "cuLaunchCooperativeKernel_ptsz",
];

struct ContextProfile {
    raw: usize,
    id: u32,
    device: u32,
    profiler: Option<RangeProfiler<'static>>,
    pc: Option<PcSampler<'static>>,
    /// (correlation id, kernel name) of each launch since the last decode.
    pending: Vec<(u32, Arc<str>)>,
    /// Launches decoded before the pending ones.
    decoded: u32,
    /// Launches of each kernel name seen (with a per-kernel limit).
    launches: HashMap<Arc<str>, u32>,
    /// Launches left unprofiled by the per-kernel limit.
    skipped: u64,
    /// The profiler is stopped while launches past the limit run.
    paused: bool,
}

struct State {
    writer: Arc<Writer>,
    request: ProfileRequest,
    contexts: Vec<ContextProfile>,
    names: HashMap<String, Arc<str>>,
    metric_names: Vec<Arc<str>>,
    seen_context: bool,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

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
    if request.is_empty() {
        return false;
    }
    if request.pc_sampling && !request.metrics.is_empty() {
        writer.notice(
            NoticeLevel::Warning,
            "PC sampling with kernel metrics in one run: CUPTI gives no PC samples while the range profiler is \
             on (gpu_tools::profile::run runs the program twice instead)"
                .into(),
        );
    }
    log::info!(
        "profiling kernels: metrics {:?}, PC sampling {}",
        request.metrics,
        request.pc_sampling
    );
    let metric_names = request
        .metrics
        .iter()
        .map(|m| Arc::from(m.as_str()))
        .collect();
    *STATE.lock().unwrap_or_else(|p| p.into_inner()) = Some(State {
        writer: Arc::clone(writer),
        request,
        contexts: Vec::new(),
        names: HashMap::new(),
        metric_names,
        seen_context: false,
    });
    true
}

/// Enables the launch callbacks on the session's subscriber (when profiling was asked for).
pub fn enable_callbacks(subscriber: &Subscriber) -> gpu_tools::Result<()> {
    if STATE.lock().unwrap_or_else(|p| p.into_inner()).is_none() {
        return Ok(());
    }
    for name in LAUNCHES {
        if let Some(cbid) = DriverCbid::from_name(name) {
            subscriber.enable_driver(cbid)?;
        }
    }
    // Resource events come with the session's own domain; enabling it again does no harm.
    subscriber.enable_domain(CallbackDomain::Resource)
}

/// Every callback of the session's subscriber comes through here first.
pub fn on_event(event: &CallbackEvent<'_>) {
    if BUSY.with(Cell::get) {
        return;
    }
    let mut guard = STATE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(state) = guard.as_mut() else { return };
    BUSY.with(|b| b.set(true));
    match event {
        CallbackEvent::Resource(r) => match r.kind() {
            ResourceKind::ContextCreated => {
                state.context_created(r.context() as usize, r.context_id().unwrap_or(0))
            }
            ResourceKind::ContextDestroyStarting => state.context_ending(r.context() as usize),
            _ => {}
        },
        CallbackEvent::Api(a) if a.site() == gpu_tools::cupti::callback::ApiSite::Enter => {
            let is_launch = matches!(a.cbid(), gpu_tools::cupti::ApiCbid::Driver(_))
                && a.cbid().name().is_some_and(|n| LAUNCHES.contains(&n));
            if is_launch {
                let name = a
                    .symbol_name()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                state.launch(a.context() as usize, a.correlation_id(), &name);
            }
        }
        _ => {}
    }
    BUSY.with(|b| b.set(false));
}

/// Decodes and sends everything still held, and disables the profilers: at the end of the session, before the
/// stream's end record.
pub fn finish() {
    let mut guard = STATE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(mut state) = guard.take() else {
        return;
    };
    BUSY.with(|b| b.set(true));
    let raws: Vec<usize> = state.contexts.iter().map(|c| c.raw).collect();
    for raw in raws {
        state.context_ending(raw);
    }
    if !state.seen_context {
        state.writer.notice(
            NoticeLevel::Warning,
            "profiling was asked for but no CUDA context was seen (no callback subscriber?)".into(),
        );
    }
    BUSY.with(|b| b.set(false));
}

impl State {
    fn name(&mut self, text: &str) -> Arc<str> {
        if let Some(n) = self.names.get(text) {
            return Arc::clone(n);
        }
        let n: Arc<str> = Arc::from(text);
        self.names.insert(text.to_string(), Arc::clone(&n));
        n
    }

    fn context_created(&mut self, raw: usize, id: u32) {
        self.seen_context = true;
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
            decoded: 0,
            launches: HashMap::new(),
            skipped: 0,
            paused: false,
        });
    }

    fn launch(&mut self, raw: usize, correlation: u32, kernel: &str) {
        let name = self.name(kernel);
        let Some(i) = self.contexts.iter().position(|c| c.raw == raw) else {
            return;
        };
        let limit = self.request.launches_per_kernel;
        let c = &mut self.contexts[i];
        if c.profiler.is_none() {
            return;
        }
        if let Some(limit) = limit {
            let seen = c.launches.entry(Arc::clone(&name)).or_insert(0);
            *seen = seen.saturating_add(1);
            if *seen > limit {
                c.skipped += 1;
                if !c.paused {
                    // Stopped, the profiler neither replays nor counts the launches that follow.
                    c.paused = true;
                    if let Some(Err(e)) = c.profiler.as_mut().map(|p| p.end_pass()) {
                        let id = c.id;
                        c.profiler = None;
                        self.writer.notice(
                            NoticeLevel::Error,
                            format!("context {id}: kernel metrics stop here: {e}"),
                        );
                    }
                }
                return;
            }
        }
        let full = c
            .profiler
            .as_ref()
            .is_some_and(|p| c.pending.len() >= p.max_ranges());
        if full {
            // Decoding starts the profiler again.
            self.decode(i, true);
            self.contexts[i].paused = false;
        } else if c.paused {
            c.paused = false;
            if let Some(Err(e)) = c.profiler.as_mut().map(|p| p.begin_pass()) {
                log::warn!(
                    "context {}: restarting the range profiler: {e}; decoding first",
                    c.id
                );
                self.decode(i, true);
            }
        }
        if self.contexts[i].profiler.is_some() {
            self.contexts[i].pending.push((correlation, name));
        }
    }

    fn context_ending(&mut self, raw: usize) {
        let Some(i) = self.contexts.iter().position(|c| c.raw == raw) else {
            return;
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
                self.writer.notice(
                    NoticeLevel::Error,
                    format!("context {id}: decoding kernel metrics: {e}"),
                );
                self.contexts[i].profiler = None;
                return;
            }
        };
        let resumed = if resume { profiler.resume() } else { Ok(()) };
        let pending = std::mem::take(&mut self.contexts[i].pending);
        log::info!(
            "context {id}: {} ranges decoded for {} launches in {:.1} ms",
            results.ranges.len(),
            pending.len(),
            t0.elapsed().as_secs_f64() * 1e3
        );
        if results.ranges.len() + results.dropped as usize != pending.len() {
            log::warn!(
                "context {id}: {} ranges and {} dropped for {} launches",
                results.ranges.len(),
                results.dropped,
                pending.len()
            );
        }
        let base = self.contexts[i].decoded;
        let fallback: Vec<Arc<str>> = results.ranges.iter().map(|r| self.name(&r.name)).collect();
        for record in kernel_records(
            &results,
            &pending,
            &fallback,
            &self.metric_names,
            (device, id, base),
        ) {
            self.writer.push(&record);
        }
        self.contexts[i].decoded = base + pending.len() as u32;
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
        log::info!(
            "context {id}: PC sampling: {} records, {} samples, {} dropped, {} outside the program's kernels, \
             {} reads with a full buffer",
            samples.records.len(),
            samples.total_samples,
            samples.dropped_samples,
            samples.non_user_samples,
            samples.buffer_full
        );
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
            self.writer.push(&Record::Stall(StallRecord {
                context: id,
                function: Arc::clone(&r.function),
                pc_offset: r.pc_offset,
                stalls,
            }));
        }
        if samples.dropped_samples > 0 {
            self.writer.push(&Record::ProfileLoss(ProfileLoss {
                kind: ProfileLossKind::PcSamples,
                count: samples.dropped_samples,
                context: id,
            }));
        }
    }
}

/// The kernel-metrics records of one decode: range `k` is the `k`-th pending launch (kernel replay serialises
/// launches); a range without a launch keeps the name CUPTI gave it (`fallback`).
fn kernel_records(
    results: &gpu_tools::cupti::range_profiler::RangeResults,
    pending: &[(u32, Arc<str>)],
    fallback: &[Arc<str>],
    metrics: &[Arc<str>],
    (device, context, base): (u32, u32, u32),
) -> Vec<Record> {
    results
        .ranges
        .iter()
        .enumerate()
        .map(|(k, range)| {
            let (correlation, kernel) = match pending.get(k) {
                Some((c, n)) => (*c, Arc::clone(n)),
                None => (0, fallback.get(k).cloned().unwrap_or_else(|| Arc::from(""))),
            };
            Record::KernelMetrics(KernelMetricsRecord {
                device,
                context,
                correlation,
                launch: base + k as u32,
                kernel,
                metrics: metrics
                    .iter()
                    .cloned()
                    .zip(range.values.iter().copied())
                    .collect(),
            })
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_tools::cupti::range_profiler::{RangeResults, RangeValues};

    #[test]
    fn ranges_map_to_launches_in_order() {
        let results = RangeResults {
            metrics: vec!["a.sum".into()],
            ranges: vec![
                RangeValues {
                    name: "0".into(),
                    values: vec![1.0],
                },
                RangeValues {
                    name: "1".into(),
                    values: vec![2.0],
                },
                RangeValues {
                    name: "orphan".into(),
                    values: vec![3.0],
                },
            ],
            dropped: 0,
            counter_data: None,
        };
        let pending = vec![(11, Arc::from("copy")), (12, Arc::from("scale"))];
        let fallback: Vec<Arc<str>> = results
            .ranges
            .iter()
            .map(|r| Arc::from(r.name.as_str()))
            .collect();
        let metrics = vec![Arc::from("a.sum")];
        let records = kernel_records(&results, &pending, &fallback, &metrics, (0, 5, 10));
        let got: Vec<(u32, u32, String, f64)> = records
            .iter()
            .map(|r| match r {
                Record::KernelMetrics(k) => (
                    k.correlation,
                    k.launch,
                    k.kernel.to_string(),
                    k.metrics[0].1,
                ),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (11, 10, "copy".into(), 1.0),
                (12, 11, "scale".into(), 2.0),
                (0, 12, "orphan".into(), 3.0)
            ]
        );
    }
}
