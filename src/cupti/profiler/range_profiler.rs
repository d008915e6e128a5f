//! [`RangeProfiler`]: counters per range of one CUDA context (CUPTI's range profiler): one range per kernel
//! ([`RangeMode::Auto`]) or ranges the program pushes and pops by name ([`RangeMode::User`]). Metrics that need
//! several passes are collected by replaying each kernel ([`Replay::Kernel`], CUPTI saves and restores the memory
//! it touches) or the program's own code between passes ([`Replay::User`]). Results come per range as
//! (range name, metric, value); ranges the counter-data image had no room for are counted, never silent.
//!
//! ```no_run
//! use gpu_tools::cuda::Context;
//! use gpu_tools::cupti::range_profiler::{RangeMode, RangeProfiler, Replay};
//!
//! fn main() -> gpu_tools::Result<()> {
//!     let ctx = Context::primary(0)?;
//!     let mut profiler = RangeProfiler::builder(&ctx)
//!         .metrics(["dram__bytes_read.sum", "dram__bytes_write.sum"])
//!         .range(RangeMode::User)
//!         .replay(Replay::User)
//!         .start()?;
//!     // Every pass runs the same work; the profiler says when it has all of them.
//!     let passes = profiler.run_passes(|p| {
//!         p.push_range("step")?;
//!         // ... launch kernels in `ctx` ...
//!         p.pop_range()
//!     })?;
//!     let results = profiler.results()?;
//!     for (range, metric, value) in results.iter() {
//!         println!("{range}: {metric} = {value} ({passes} passes)");
//!     }
//!     Ok(())
//! }
//! ```

use std::ffi::CString;
use std::marker::PhantomData;

use crate::cuda::{Context, Driver, RawContext};
use crate::cupti::profiler::api::{Api, Needs, params, sym};
use crate::cupti::profiler::counter_data::evaluate_ranges;
use crate::cupti::profiler::host::{Catalog, ConfigImage, Host, MetricNames};
use crate::cupti::profiler::{self, Method, ProfilerApi, ProfilerInit, ProfilingError, check};
use crate::sys::cupti_profiling as sys;

/// What a range is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RangeMode {
    /// One range per kernel launch (`CUPTI_AutoRange`).
    #[default]
    Auto,
    /// The ranges the program pushes and pops ([`RangeProfiler::push_range`]) (`CUPTI_UserRange`).
    User,
}

/// How metrics that need several passes are collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Replay {
    /// CUPTI replays each kernel as often as needed, saving and restoring the memory it writes
    /// (`CUPTI_KernelReplay`).
    #[default]
    Kernel,
    /// The program runs its work once per pass ([`RangeProfiler::run_passes`]) (`CUPTI_UserReplay`).
    User,
}

/// Default ranges the counter-data image holds between two [`RangeProfiler::results`].
pub const DEFAULT_MAX_RANGES: usize = 1024;

/// Default ceiling on the counter-data image's size (64 MiB). A range of metrics that need many passes takes
/// hundreds of KiB (the `basic` set of `gpu_tools::profile` on an H100: about 650 KB), so 1024 ranges of it would
/// take 650 MB of the profiled program's memory and seconds to set up.
pub const DEFAULT_COUNTER_DATA_LIMIT: usize = 64 << 20;

/// Settings of a [`RangeProfiler`].
#[derive(Debug, Clone)]
pub struct RangeProfilerBuilder<'c> {
    ctx: RawContext,
    metrics: Vec<String>,
    range: RangeMode,
    replay: Replay,
    max_ranges: usize,
    counter_data_limit: Option<usize>,
    nesting_levels: u16,
    min_nesting_level: u16,
    keep_counter_data: bool,
    _ctx: PhantomData<&'c Context>,
}

/// One range's values.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RangeValues {
    /// The range's name: what the program pushed (nested ranges joined by `/`), or CUPTI's name for a kernel's
    /// auto range.
    pub name: String,
    /// One value per metric, in the profiler's order.
    pub values: Vec<f64>,
}

/// What one [`RangeProfiler::results`] decoded.
#[derive(Debug, Clone, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RangeResults {
    /// The metrics, in the order of each range's values.
    pub metrics: Vec<String>,
    /// The ranges, in the order profiled.
    pub ranges: Vec<RangeValues>,
    /// Ranges profiled but not kept: the counter-data image had no room (`numOfRangeDropped`).
    pub dropped: u64,
    /// The decoded counter-data image, where the builder asked to keep it
    /// ([`RangeProfilerBuilder::keep_counter_data`]).
    #[cfg_attr(feature = "serde", serde(skip))]
    pub counter_data: Option<Vec<u8>>,
}

impl RangeResults {
    /// Every (range name, metric, value).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, f64)> + '_ {
        self.ranges.iter().flat_map(move |r| {
            self.metrics
                .iter()
                .zip(&r.values)
                .map(move |(m, v)| (r.name.as_str(), m.as_str(), *v))
        })
    }

    /// The value of `metric` in range `index`.
    pub fn value(&self, index: usize, metric: &str) -> Option<f64> {
        let m = self.metrics.iter().position(|x| x == metric)?;
        self.ranges.get(index)?.values.get(m).copied()
    }
}

/// Where the profiler stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A pass is running (`cuptiRangeProfilerStart` called).
    Running,
    /// Stopped after a pass; `all` when every pass of the configuration was submitted.
    Stopped { all: bool },
}

/// Disables the range profiler on drop.
struct Enabled {
    api: Api,
    obj: *mut sys::CUpti_RangeProfiler_Object,
}

impl Drop for Enabled {
    fn drop(&mut self) {
        if let Ok(f) = sym!(self.api, cuptiRangeProfilerDisable) {
            let mut p = params!(CUpti_RangeProfiler_Disable_Params, pRangeProfilerObject);
            p.pRangeProfilerObject = self.obj;
            // SAFETY: the object is live and disabled once, here.
            let _ = unsafe { f(&mut p) };
        }
    }
}

/// A range profiler on one context. Stopped and disabled on drop.
///
/// `Send` (CUPTI's object belongs to the context, which any thread may use), not `Sync`: its calls change the
/// profiler's state and take `&mut self`.
pub struct RangeProfiler<'c> {
    api: Api,
    enabled: Enabled,
    _init: ProfilerInit,
    host: Host,
    config: ConfigImage,
    image: Vec<u8>,
    metrics: MetricNames,
    range: RangeMode,
    replay: Replay,
    max_ranges: usize,
    nesting_levels: u16,
    min_nesting_level: u16,
    keep_counter_data: bool,
    state: State,
    depth: usize,
    passes: usize,
    chip: String,
    /// Why the profiler could not be made ready again after the last results (reported by the next pass).
    not_ready: Option<ProfilingError>,
    _ctx: PhantomData<&'c Context>,
}

// SAFETY: the CUPTI object is tied to the context, not to a thread; every call takes `&mut self`.
unsafe impl Send for RangeProfiler<'_> {}

impl std::fmt::Debug for RangeProfiler<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeProfiler")
            .field("chip", &self.chip)
            .field("metrics", &self.metrics.names())
            .field("range", &self.range)
            .field("replay", &self.replay)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl<'c> RangeProfiler<'c> {
    /// Settings for a context: auto ranges, kernel replay, 1024 ranges per decode.
    pub fn builder(ctx: &'c Context) -> RangeProfilerBuilder<'c> {
        RangeProfilerBuilder::new(ctx.as_raw())
    }

    /// Settings for a context the caller keeps alive (a context seen in a CUPTI callback, for example).
    ///
    /// # Safety
    /// `ctx` must be a live context of the driver this crate loaded, and stay alive until the profiler started
    /// from these settings is dropped.
    pub unsafe fn builder_for_raw(ctx: RawContext) -> RangeProfilerBuilder<'static> {
        RangeProfilerBuilder::new(ctx)
    }

    /// The metrics, in the order of each range's values.
    pub fn metrics(&self) -> &[String] {
        self.metrics.names()
    }

    /// The chip of the context's device.
    pub fn chip(&self) -> &str {
        &self.chip
    }

    /// Passes the configuration needs (1 unless a metric needs more).
    pub fn passes_needed(&self) -> usize {
        self.config.passes()
    }

    /// Ranges the counter-data image holds.
    pub fn max_ranges(&self) -> usize {
        self.max_ranges
    }

    /// Bytes of the counter-data image.
    pub fn counter_data_bytes(&self) -> usize {
        self.image.len()
    }

    /// Opens a named range (user ranges only); ranges nest up to the builder's nesting levels.
    pub fn push_range(&mut self, name: &str) -> crate::Result<()> {
        if self.range != RangeMode::User {
            return Err(ProfilingError::State("push_range needs RangeMode::User").into());
        }
        if self.state != State::Running {
            return Err(
                ProfilingError::State("push_range outside a pass (call begin_pass first)").into(),
            );
        }
        let c = CString::new(name).map_err(|_| ProfilingError::NulInName(name.to_string()))?;
        let f = sym!(self.api, cuptiRangeProfilerPushRange)?;
        let mut p = params!(CUpti_RangeProfiler_PushRange_Params, pRangeName);
        p.pRangeProfilerObject = self.enabled.obj;
        p.pRangeName = c.as_ptr();
        // SAFETY: a live, started object; CUPTI copies the name.
        check("cuptiRangeProfilerPushRange", unsafe { f(&mut p) })?;
        self.depth += 1;
        Ok(())
    }

    /// Closes the innermost range.
    pub fn pop_range(&mut self) -> crate::Result<()> {
        if self.depth == 0 {
            return Err(ProfilingError::State("pop_range without an open range").into());
        }
        let f = sym!(self.api, cuptiRangeProfilerPopRange)?;
        let mut p = params!(CUpti_RangeProfiler_PopRange_Params, pRangeProfilerObject);
        p.pRangeProfilerObject = self.enabled.obj;
        // SAFETY: a live object with an open range.
        check("cuptiRangeProfilerPopRange", unsafe { f(&mut p) })?;
        self.depth -= 1;
        Ok(())
    }

    /// Ends the running pass (`cuptiRangeProfilerStop`); true once every pass of the configuration was submitted.
    pub fn end_pass(&mut self) -> crate::Result<bool> {
        if self.depth != 0 {
            return Err(
                ProfilingError::State("end_pass with a range still open (pop it first)").into(),
            );
        }
        match self.state {
            State::Running => {}
            State::Stopped { all } => return Ok(all),
        }
        let f = sym!(self.api, cuptiRangeProfilerStop)?;
        let mut p = params!(CUpti_RangeProfiler_Stop_Params, isAllPassSubmitted);
        p.pRangeProfilerObject = self.enabled.obj;
        // SAFETY: a live, started object.
        check("cuptiRangeProfilerStop", unsafe { f(&mut p) })?;
        self.passes += 1;
        let all = p.isAllPassSubmitted != 0;
        log::debug!(
            "range profiler: pass {} ended, next pass {}, all submitted: {all}",
            self.passes,
            p.passIndex
        );
        self.state = State::Stopped { all };
        Ok(all)
    }

    /// Starts the next pass (user replay), after [`end_pass`](Self::end_pass) returned false.
    pub fn begin_pass(&mut self) -> crate::Result<()> {
        if let Some(e) = &self.not_ready {
            return Err(e.clone().into());
        }
        match self.state {
            State::Running => Err(ProfilingError::State("a pass is already running").into()),
            State::Stopped { .. } => {
                let t0 = std::time::Instant::now();
                start(self.api, &self.enabled)?;
                self.state = State::Running;
                log::debug!(
                    "range profiler: started in {:.1} ms",
                    t0.elapsed().as_secs_f64() * 1e3
                );
                Ok(())
            }
        }
    }

    /// Runs `work` once per pass until the configuration has all of them (user replay; with kernel replay, once).
    /// Each call must do the same work and open and close the same ranges. Returns the passes run.
    pub fn run_passes(
        &mut self,
        mut work: impl FnMut(&mut Self) -> crate::Result<()>,
    ) -> crate::Result<usize> {
        let mut runs = 0;
        loop {
            if self.state != State::Running {
                self.begin_pass()?;
            }
            work(self)?;
            runs += 1;
            if self.end_pass()? {
                return Ok(runs);
            }
            // A configuration never needs more passes than it said, plus the one that reports completion.
            if runs > self.config.passes() + 1 {
                return Err(ProfilingError::State(
                    "CUPTI asked for more passes than the configuration needs",
                )
                .into());
            }
        }
    }

    /// Ends the pass if one runs, decodes every range into values, and makes the image ready for more ranges
    /// ([`resume`](Self::resume) starts again).
    pub fn results(&mut self) -> crate::Result<RangeResults> {
        if self.depth != 0 {
            return Err(
                ProfilingError::State("results with a range still open (pop it first)").into(),
            );
        }
        self.end_pass()?;
        let f = sym!(self.api, cuptiRangeProfilerDecodeData)?;
        let mut p = params!(CUpti_RangeProfiler_DecodeData_Params, numOfRangeDropped);
        p.pRangeProfilerObject = self.enabled.obj;
        // SAFETY: a live, stopped object.
        check("cuptiRangeProfilerDecodeData", unsafe { f(&mut p) })?;
        let dropped = p.numOfRangeDropped as u64;
        if dropped > 0 {
            log::warn!(
                "range profiler: {dropped} ranges dropped (the counter-data image holds {})",
                self.max_ranges
            );
        }
        // SAFETY: the image CUPTI just decoded into.
        let ranges = unsafe { evaluate_ranges(self.api, &self.host, &self.image, &self.metrics) }?
            .into_iter()
            .map(|(name, values)| RangeValues { name, values })
            .collect();
        let counter_data = self.keep_counter_data.then(|| self.image.clone());
        // The results are kept whatever happens next; a failure to get ready again is reported by the next pass.
        self.not_ready = initialize_image(self.api, &self.enabled, &mut self.image)
            .and_then(|()| set_config(self, 0))
            .err();
        if let Some(e) = &self.not_ready {
            log::warn!("range profiler: not ready for more ranges: {e}");
        }
        Ok(RangeResults {
            metrics: self.metrics.names().to_vec(),
            ranges,
            dropped,
            counter_data,
        })
    }

    /// Starts profiling again after [`results`](Self::results).
    pub fn resume(&mut self) -> crate::Result<()> {
        self.begin_pass()
    }
}

impl Drop for RangeProfiler<'_> {
    fn drop(&mut self) {
        while self.depth > 0 && self.pop_range().is_ok() {}
        if self.state == State::Running {
            let _ = self.end_pass();
        }
    }
}

impl<'c> RangeProfilerBuilder<'c> {
    fn new(ctx: RawContext) -> Self {
        RangeProfilerBuilder {
            ctx,
            metrics: Vec::new(),
            range: RangeMode::Auto,
            replay: Replay::Kernel,
            max_ranges: DEFAULT_MAX_RANGES,
            counter_data_limit: Some(DEFAULT_COUNTER_DATA_LIMIT),
            nesting_levels: 1,
            min_nesting_level: 1,
            keep_counter_data: false,
            _ctx: PhantomData,
        }
    }

    /// The metrics, full names (`dram__bytes_read.sum`); checked against the device's catalogue at start.
    pub fn metrics<I, S>(mut self, metrics: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.metrics = metrics
            .into_iter()
            .map(|s| s.as_ref().to_string())
            .collect();
        self
    }

    /// Auto or user ranges (default auto).
    pub fn range(mut self, mode: RangeMode) -> Self {
        self.range = mode;
        self
    }

    /// Kernel or user replay (default kernel).
    pub fn replay(mut self, replay: Replay) -> Self {
        self.replay = replay;
        self
    }

    /// Ranges the counter-data image holds between two [`RangeProfiler::results`] (default 1024); more are
    /// dropped and counted. Lowered, when the image would be larger than the
    /// [counter-data limit](Self::counter_data_limit), to what fits; [`RangeProfiler::max_ranges`] says what was
    /// kept.
    pub fn max_ranges(mut self, ranges: usize) -> Self {
        self.max_ranges = ranges;
        self
    }

    /// The most bytes the counter-data image may take (default [`DEFAULT_COUNTER_DATA_LIMIT`]); `None`: as many as
    /// [`max_ranges`](Self::max_ranges) need. At least one range is always kept, whatever it takes.
    pub fn counter_data_limit(mut self, bytes: Option<usize>) -> Self {
        self.counter_data_limit = bytes;
        self
    }

    /// User ranges: how many nesting levels to profile, from which level (default 1 from 1).
    pub fn nesting(mut self, levels: u16, from_level: u16) -> Self {
        self.nesting_levels = levels;
        self.min_nesting_level = from_level;
        self
    }

    /// Keeps a copy of each decoded counter-data image in [`RangeResults::counter_data`] (to save it).
    pub fn keep_counter_data(mut self, keep: bool) -> Self {
        self.keep_counter_data = keep;
        self
    }

    /// Checks the settings and metrics, enables the profiler on the context and starts the first pass.
    pub fn start(self) -> crate::Result<RangeProfiler<'c>> {
        if self.metrics.is_empty() {
            return Err(ProfilingError::NoMetrics.into());
        }
        if self.max_ranges == 0 {
            return Err(ProfilingError::BufferTooSmall {
                what: "counter-data image",
                bytes: 0,
                needed: 1,
            }
            .into());
        }
        let u32_ranges =
            u32::try_from(self.max_ranges).map_err(|_| ProfilingError::InvalidSetting {
                what: "max ranges",
                reason: format!("{} is above {}", self.max_ranges, u32::MAX),
            })?;
        if self.nesting_levels == 0 || self.min_nesting_level == 0 {
            return Err(ProfilingError::InvalidSetting {
                what: "nesting",
                reason: "levels start at 1".into(),
            }
            .into());
        }
        let (levels, min_level) = match self.range {
            RangeMode::Auto => (1, 1),
            RangeMode::User => (self.nesting_levels, self.min_nesting_level),
        };
        // Where set-up time goes (it runs at context creation, in the program's way): logged at debug level.
        let mut steps = SetUpSteps::new();
        let api = Api::load(Needs::Metrics)?;
        let driver = Driver::load()?;
        let device = device_of(driver, self.ctx)?;
        profiler::check_device(api, device, ProfilerApi::RangeProfiler)?;
        steps.done("device check");
        let init = ProfilerInit::acquire(api)?;
        steps.done("profiler initialize");
        let chip = profiler::chip(api, &init, device)?;
        let catalog = Catalog::create(api, &chip)?;
        let metrics = catalog.resolve_all(&self.metrics, Method::RangeProfiler)?;
        drop(catalog);
        steps.done("metric names");
        let availability = profiler::context_availability(api, self.ctx)?;
        steps.done("counter availability");
        let config = ConfigImage::create(
            api,
            &chip,
            Method::RangeProfiler,
            Some(&availability),
            &metrics,
        )?;
        if self.range == RangeMode::Auto && self.replay == Replay::User && config.passes() > 1 {
            return Err(ProfilingError::InvalidSetting {
                what: "replay",
                reason: format!(
                    "these metrics need {} passes; auto ranges replay them with Replay::Kernel",
                    config.passes()
                ),
            }
            .into());
        }
        steps.done("configuration image");
        let host = Host::create(api, &chip, Method::RangeProfiler, Some(&availability))?;
        host.add_metrics(&metrics)?;
        steps.done("evaluation host");
        let enabled = enable(api, self.ctx)?;
        steps.done("enable");
        let (max_ranges, size) = fit_ranges(u32_ranges, self.counter_data_limit, |n| {
            counter_data_size(api, &enabled, &metrics, n)
        })?;
        let max_ranges = max_ranges as usize;
        if max_ranges < self.max_ranges {
            log::info!(
                "range profiler: {max_ranges} ranges per decode, not {} (their counter data would exceed {} bytes)",
                self.max_ranges,
                self.counter_data_limit.unwrap_or(0)
            );
        }
        let mut image = vec![0u8; size];
        initialize_image(api, &enabled, &mut image)?;
        steps.done("counter-data image");
        let mut profiler = RangeProfiler {
            api,
            enabled,
            _init: init,
            host,
            config,
            image,
            metrics,
            range: self.range,
            replay: self.replay,
            max_ranges,
            nesting_levels: levels,
            min_nesting_level: min_level,
            keep_counter_data: self.keep_counter_data,
            state: State::Stopped { all: false },
            depth: 0,
            passes: 0,
            chip,
            not_ready: None,
            _ctx: PhantomData,
        };
        set_config(&mut profiler, 0)?;
        steps.done("configure");
        profiler.begin_pass()?;
        steps.done("start");
        log::debug!("range profiler set-up: {steps}");
        log::debug!(
            "range profiler on device {device}: {} passes, counter data {} bytes for {} ranges",
            profiler.config.passes(),
            profiler.image.len(),
            profiler.max_ranges
        );
        Ok(profiler)
    }
}

/// Milliseconds per set-up step.
struct SetUpSteps {
    last: std::time::Instant,
    steps: Vec<(&'static str, f64)>,
}

impl SetUpSteps {
    fn new() -> Self {
        SetUpSteps {
            last: std::time::Instant::now(),
            steps: Vec::new(),
        }
    }

    fn done(&mut self, step: &'static str) {
        let now = std::time::Instant::now();
        self.steps
            .push((step, (now - self.last).as_secs_f64() * 1e3));
        self.last = now;
    }
}

impl std::fmt::Display for SetUpSteps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (step, ms)) in self.steps.iter().enumerate() {
            write!(f, "{}{step} {ms:.1} ms", if i == 0 { "" } else { ", " })?;
        }
        Ok(())
    }
}

/// The device ordinal of a context.
fn device_of(driver: &Driver, ctx: RawContext) -> crate::Result<usize> {
    driver.init()?;
    // SAFETY: the caller's context is live; pushed and popped around one query on this thread.
    driver.check_call("cuCtxPushCurrent_v2", unsafe {
        (driver.api().cu_ctx_push_current)(ctx)
    })?;
    let mut dev = 0;
    // SAFETY: the context is current; a valid out-pointer.
    let got = driver.check_call("cuCtxGetDevice", unsafe {
        (driver.api().cu_ctx_get_device)(&mut dev)
    });
    let mut popped = std::ptr::null_mut();
    // SAFETY: balances the push above.
    let _ = unsafe { (driver.api().cu_ctx_pop_current)(&mut popped) };
    got?;
    Ok(usize::try_from(dev).unwrap_or(0))
}

fn enable(api: Api, ctx: RawContext) -> Result<Enabled, ProfilingError> {
    let f = sym!(api, cuptiRangeProfilerEnable)?;
    let mut p = params!(CUpti_RangeProfiler_Enable_Params, pRangeProfilerObject);
    p.ctx = ctx;
    // SAFETY: a live context (the builder's contract); CUPTI writes the object.
    check("cuptiRangeProfilerEnable", unsafe { f(&mut p) })?;
    if p.pRangeProfilerObject.is_null() {
        return Err(ProfilingError::State(
            "cuptiRangeProfilerEnable returned no object",
        ));
    }
    Ok(Enabled {
        api,
        obj: p.pRangeProfilerObject,
    })
}

fn counter_data_size(
    api: Api,
    e: &Enabled,
    metrics: &MetricNames,
    ranges: u32,
) -> Result<usize, ProfilingError> {
    let f = sym!(api, cuptiRangeProfilerGetCounterDataSize)?;
    let mut names = metrics.pointers();
    let mut p = params!(
        CUpti_RangeProfiler_GetCounterDataSize_Params,
        counterDataSize
    );
    p.pRangeProfilerObject = e.obj;
    p.pMetricNames = names.as_mut_ptr();
    p.numMetrics = names.len();
    p.maxNumOfRanges = ranges as usize;
    p.maxNumRangeTreeNodes = ranges;
    // SAFETY: a live object; the names outlive the call.
    check("cuptiRangeProfilerGetCounterDataSize", unsafe { f(&mut p) })?;
    Ok(p.counterDataSize)
}

/// The most ranges, up to `wanted`, whose counter data fits in `limit` bytes (at least one), with that size. The
/// size grows with the ranges by a fixed amount per range: two sizes give it.
fn fit_ranges(
    wanted: u32,
    limit: Option<usize>,
    size_of: impl Fn(u32) -> Result<usize, ProfilingError>,
) -> Result<(u32, usize), ProfilingError> {
    let full = size_of(wanted)?;
    let Some(limit) = limit else {
        return Ok((wanted, full));
    };
    if full <= limit || wanted == 1 {
        return Ok((wanted, full));
    }
    let one = size_of(1)?;
    if one >= limit {
        return Ok((1, one));
    }
    let per_range = (full.saturating_sub(one) / (wanted as usize - 1)).max(1);
    let mut n = u32::try_from(1 + (limit - one) / per_range)
        .unwrap_or(wanted)
        .clamp(1, wanted);
    let mut size = size_of(n)?;
    // The slope is an estimate: step down until the image fits.
    while size > limit && n > 1 {
        n -= n.div_ceil(16);
        size = size_of(n)?;
    }
    Ok((n, size))
}

fn initialize_image(api: Api, e: &Enabled, image: &mut [u8]) -> Result<(), ProfilingError> {
    let f = sym!(api, cuptiRangeProfilerCounterDataImageInitialize)?;
    let mut p = params!(
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params,
        pCounterData
    );
    p.pRangeProfilerObject = e.obj;
    p.counterDataSize = image.len();
    p.pCounterData = image.as_mut_ptr();
    // SAFETY: a live object and a buffer of the size CUPTI asked for.
    check("cuptiRangeProfilerCounterDataImageInitialize", unsafe {
        f(&mut p)
    })
}

fn set_config(p: &mut RangeProfiler<'_>, pass_index: usize) -> Result<(), ProfilingError> {
    let f = sym!(p.api, cuptiRangeProfilerSetConfig)?;
    let mut s = params!(CUpti_RangeProfiler_SetConfig_Params, targetNestingLevel);
    s.pRangeProfilerObject = p.enabled.obj;
    s.configSize = p.config.bytes().len();
    s.pConfig = p.config.bytes().as_ptr();
    s.counterDataImageSize = p.image.len();
    s.pCounterDataImage = p.image.as_mut_ptr();
    s.range = match p.range {
        RangeMode::Auto => sys::CUPTI_AutoRange,
        RangeMode::User => sys::CUPTI_UserRange,
    };
    s.replayMode = match p.replay {
        Replay::Kernel => sys::CUPTI_KernelReplay,
        Replay::User => sys::CUPTI_UserReplay,
    };
    s.maxRangesPerPass = p.max_ranges;
    s.numNestingLevels = p.nesting_levels;
    s.minNestingLevel = p.min_nesting_level;
    s.passIndex = pass_index;
    s.targetNestingLevel = p.min_nesting_level;
    // SAFETY: a live object; the configuration and the counter-data image are owned by the profiler and outlive
    // the object (CUPTI writes into the image until it is disabled).
    check("cuptiRangeProfilerSetConfig", unsafe { f(&mut s) })?;
    p.state = State::Stopped { all: false };
    Ok(())
}

fn start(api: Api, e: &Enabled) -> Result<(), ProfilingError> {
    let f = sym!(api, cuptiRangeProfilerStart)?;
    let mut p = params!(CUpti_RangeProfiler_Start_Params, pRangeProfilerObject);
    p.pRangeProfilerObject = e.obj;
    // SAFETY: a live, configured object.
    check("cuptiRangeProfilerStart", unsafe { f(&mut p) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_list_range_metric_value() {
        let r = RangeResults {
            metrics: vec!["a.sum".into(), "b.sum".into()],
            ranges: vec![
                RangeValues {
                    name: "one".into(),
                    values: vec![1.0, 2.0],
                },
                RangeValues {
                    name: "two".into(),
                    values: vec![3.0, 4.0],
                },
            ],
            dropped: 0,
            counter_data: None,
        };
        let all: Vec<(&str, &str, f64)> = r.iter().collect();
        assert_eq!(
            all,
            vec![
                ("one", "a.sum", 1.0),
                ("one", "b.sum", 2.0),
                ("two", "a.sum", 3.0),
                ("two", "b.sum", 4.0)
            ]
        );
        assert_eq!(r.value(1, "b.sum"), Some(4.0));
        assert_eq!(r.value(2, "b.sum"), None);
        assert_eq!(r.value(0, "c.sum"), None);
    }

    fn send<T: Send>() {}

    #[test]
    fn profilers_move_between_threads() {
        send::<RangeProfiler<'static>>();
    }

    #[test]
    fn the_counter_data_limit_lowers_the_ranges_to_what_fits() {
        // About what an H100 asked for the basic set: 650 KB a range over a fixed part.
        let size = |n: u32| Ok(200_000 + 652_000 * n as usize);
        let (n, bytes) = fit_ranges(2048, Some(64 << 20), size).unwrap();
        assert!(bytes <= 64 << 20, "{bytes}");
        assert_eq!(n, 102, "the most that fit");
        assert_eq!(fit_ranges(2048, None, size).unwrap().0, 2048);
        assert_eq!(
            fit_ranges(8, Some(64 << 20), size).unwrap(),
            (8, 200_000 + 652_000 * 8)
        );
        assert_eq!(
            fit_ranges(2048, Some(1000), size).unwrap().0,
            1,
            "one range whatever it takes"
        );
        // A size that is not affine: the first estimate does not fit, and the ranges step down until they do.
        let convex = |n: u32| Ok(1000 * (n as usize) * (n as usize));
        let (n, bytes) = fit_ranges(1000, Some(1_000_000), convex).unwrap();
        assert!(bytes <= 1_000_000 && n >= 1, "{n} {bytes}");
        assert!(fit_ranges(10, Some(5), |_| Err(ProfilingError::NoMetrics)).is_err());
    }
}
