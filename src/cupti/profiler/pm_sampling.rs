//! [`PmSampler`]: device-wide performance counters sampled at an interval (CUPTI's PM sampling). It sees every
//! process on the GPU, needs no context of its own, and is the NVIDIA side of [`DeviceCounters`].
//!
//! A thread owned by the sampler decodes the hardware buffer into samples (start and end on the GPU's global
//! timer, one value per metric) and hands them over either as borrowed batches to a closure
//! ([`PmSamplerBuilder::start_with`]) or through [`PmSampler::read`] / [`PmSampler::samples`]. Overflow of the
//! hardware buffer and samples lost to it are counted ([`PmStats`]), never silent; sampling periods that passed
//! without a sample while CUPTI reported no loss are counted apart, as gaps ([`PmStats::gaps`]). One PM client per
//! GPU: a second
//! one, or ncu, DCGM or Nsight Systems' GPU metrics, makes [`start`](PmSamplerBuilder::start) fail with
//! [`ProfilingError::CountersBusy`]. Stopping or dropping the sampler releases the counters.
//!
//! ```no_run
//! use std::time::Duration;
//! use gpu_tools::cupti::pm_sampling::{Interval, PmSampler};
//! use gpu_tools::counters::DeviceCounters;
//!
//! fn main() -> gpu_tools::Result<()> {
//!     let mut sampler = PmSampler::builder(0)
//!         .metrics(["sm__cycles_active.avg.pct_of_peak_sustained_elapsed", "dram__bytes_read.sum.per_second"])
//!         .interval(Interval::Time(Duration::from_millis(10)))
//!         .start()?;
//!     let mut samples = Vec::new();
//!     sampler.read(Duration::from_secs(1), &mut samples)?;
//!     for s in &samples {
//!         println!("{} ns: SM active {:.1}%, DRAM read {:.3e} B/s", s.start_ns, s.values[0], s.values[1]);
//!     }
//!     let report = sampler.stop()?; // releases the counters
//!     println!("{} samples, {} lost to overflow", report.stats.samples, report.stats.dropped);
//!     Ok(())
//! }
//! ```

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::counters::{
    CounterDevice, CounterInfo, DeviceCounters, DeviceSample, ReadStatus, SampleClock,
};
use crate::cupti::profiler::api::{Api, Needs, params, sym};
use crate::cupti::profiler::counter_data::{completed_samples, sample_counts, sample_times};
use crate::cupti::profiler::host::{Catalog, ConfigImage, Host, MetricNames};
use crate::cupti::profiler::{self, Method, ProfilerApi, ProfilerInit, ProfilingError, check};
use crate::delivery::{self, Delivery};
use crate::sys::cupti_profiling as sys;

/// How often a sample is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Interval {
    /// A fixed period of time (`CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL`): Ampere GA10x and later, not
    /// Turing or GA100.
    Time(Duration),
    /// A number of cycles of the GPU's SYS clock, whose frequency may vary
    /// (`CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL`): every architecture.
    Clocks(u64),
}

/// What the hardware buffer does when full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AppendMode {
    /// Keep the oldest records; new ones are lost and the decode reports an overflow.
    #[default]
    KeepOldest,
    /// Overwrite the oldest records (Ampere and later).
    KeepLatest,
}

/// Default decode period: the decode thread wakes this often.
pub const DEFAULT_DECODE_PERIOD: Duration = Duration::from_millis(50);
/// Default hardware buffer size.
pub const DEFAULT_HARDWARE_BUFFER: usize = 256 << 20;
/// Default most samples queued for [`PmSampler::read`] before the oldest are dropped (and counted).
pub const DEFAULT_QUEUE_LIMIT: usize = 1 << 20;

/// Settings of a [`PmSampler`].
#[derive(Debug, Clone)]
pub struct PmSamplerBuilder {
    device: usize,
    metrics: Vec<String>,
    interval: Interval,
    hardware_buffer: usize,
    append: AppendMode,
    decode_period: Duration,
    samples_per_decode: Option<usize>,
    queue_limit: usize,
    keep_counter_data: bool,
}

/// Sizes the sampler chose (for diagnostics and the bench).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PmLayout {
    /// The device's chip (`GH100`).
    pub chip: String,
    /// Bytes of the configuration image.
    pub config_bytes: usize,
    /// Bytes of the counter-availability image.
    pub availability_bytes: usize,
    /// Samples one decode can take before the counter-data image is full.
    pub samples_per_decode: usize,
    /// Bytes of the counter-data image.
    pub counter_data_bytes: usize,
    /// Bytes one sample adds to the counter-data image.
    pub sample_bytes: usize,
    /// Bytes of the hardware buffer.
    pub hardware_buffer: usize,
}

/// What a sampler delivered so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PmStats {
    /// Calls of `cuptiPmSamplingDecodeData`.
    pub decodes: u64,
    /// Samples decoded.
    pub samples: u64,
    /// Decodes that reported a hardware-buffer overflow.
    pub overflows: u64,
    /// Samples lost, as CUPTI or the sampler knows them: the sampling periods missing next to a hardware-buffer
    /// overflow CUPTI reported (at least one per overflow), and samples dropped from a full read queue.
    pub dropped: u64,
    /// Sampling periods without a sample where nothing reported a loss: time the samples do not cover. Estimated
    /// from consecutive sample ends (the periods between them less one, or, for an interval of clocks, gaps of
    /// more than 1.5 sample lengths). Not counted as lost: an idle H100 or H200 showed about one period in ten
    /// so, a busy one none, and CUPTI reported no overflow (docs/driver-notes.md in the repository).
    pub gaps: u64,
    /// Of [`gaps`](Self::gaps), those found between a restart of the counter-data image and the first sample with
    /// a sound span after it (a diagnostic: whether gaps come with image restarts).
    pub gaps_at_restart: u64,
    /// Samples CUPTI had begun (populated) but not completed in a counter-data image when it was started afresh;
    /// a diagnostic of what a restart may discard (`cuptiPmSamplingGetCounterDataInfo`).
    pub incomplete_at_restart: u64,
    /// Samples whose time span CUPTI gave as stale or empty, left out: the periods they stood for count as gaps.
    /// (CUPTI 13.0 on an H100 gave runs of them after each counter-data image was started afresh: zero length, a
    /// start seconds in the past. Their values were not sound either: placed one period each after the sample
    /// before them, a run read 100% SM active, 100% occupancy and no DRAM traffic both on an idle GPU and under a
    /// copy kernel moving 1.4 TB/s, and a hole remained before the next timed sample.)
    pub stale: u64,
    /// Decodes that stopped because the counter-data image was full (the thread decodes again at once).
    pub image_full: u64,
    /// Calls of the closure that panicked.
    pub callback_panics: u64,
}

/// What [`PmSampler::stop`] reports.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PmReport {
    /// Final counts.
    pub stats: PmStats,
    /// The first panic of the closure.
    pub panic: Option<String>,
}

/// One sample of a batch, borrowed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleRef<'a> {
    /// Start, ns on the GPU's global timer.
    pub start_ns: u64,
    /// End, same clock.
    pub end_ns: u64,
    /// One value per metric, in the sampler's order.
    pub values: &'a [f64],
}

impl SampleRef<'_> {
    /// An owned copy.
    pub fn to_owned(&self) -> DeviceSample {
        DeviceSample {
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            values: self.values.to_vec(),
        }
    }
}

/// The samples of one decode, borrowed for the duration of the callback.
///
/// ```compile_fail
/// fn send<T: Send>() {}
/// send::<gpu_tools::cupti::pm_sampling::PmBatch<'static>>();
/// ```
#[derive(Debug)]
pub struct PmBatch<'a> {
    starts: &'a [u64],
    ends: &'a [u64],
    values: &'a [f64],
    metrics: usize,
    dropped: u64,
    gaps: u64,
    overflow: bool,
    counter_data: Option<(&'a [u8], usize)>,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl<'a> PmBatch<'a> {
    /// A batch over decoded columns (`values` holds `metrics` values per sample).
    pub(crate) fn new(
        starts: &'a [u64],
        ends: &'a [u64],
        values: &'a [f64],
        metrics: usize,
        dropped: u64,
        overflow: bool,
    ) -> Self {
        PmBatch {
            starts,
            ends,
            values,
            metrics,
            dropped,
            gaps: 0,
            overflow,
            counter_data: None,
            _not_send: std::marker::PhantomData,
        }
    }

    /// The counter-data image these samples were evaluated from, and the image index of the batch's first sample
    /// (with [`PmSamplerBuilder::keep_counter_data`]); to save it as recorded data.
    pub fn counter_data(&self) -> Option<(&'a [u8], usize)> {
        self.counter_data
    }

    /// Samples in the batch.
    pub fn len(&self) -> usize {
        self.starts.len().min(self.ends.len())
    }

    /// True when it holds none (a batch that only reports an overflow).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Samples lost just before or within this batch (see [`PmStats::dropped`]).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Sampling periods without a sample, and no loss reported, before or within this batch (see
    /// [`PmStats::gaps`]).
    pub fn gaps(&self) -> u64 {
        self.gaps
    }

    /// Whether this decode reported a hardware-buffer overflow.
    pub fn overflow(&self) -> bool {
        self.overflow
    }

    /// One sample.
    pub fn get(&self, i: usize) -> Option<SampleRef<'a>> {
        let values = self
            .values
            .get(i.checked_mul(self.metrics)?..(i + 1).checked_mul(self.metrics)?)?;
        Some(SampleRef {
            start_ns: *self.starts.get(i)?,
            end_ns: *self.ends.get(i)?,
            values,
        })
    }

    /// The samples, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = SampleRef<'a>> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }
}

/// The closure batches go to.
type BatchFn = dyn for<'b> FnMut(&PmBatch<'b>) + Send;

/// Samples waiting for [`PmSampler::read`].
#[derive(Default)]
struct Queue {
    samples: VecDeque<DeviceSample>,
    dropped_unread: u64,
    gaps_unread: u64,
    ended: bool,
}

/// Where the decode thread puts samples.
enum Sink {
    Queue {
        queue: Mutex<Queue>,
        ready: Condvar,
        limit: usize,
    },
    Callback(Delivery<BatchFn>),
}

/// State shared by the sampler and its decode thread.
struct Shared {
    sink: Sink,
    stop: Mutex<bool>,
    wake: Condvar,
    decodes: AtomicU64,
    samples: AtomicU64,
    overflows: AtomicU64,
    dropped: AtomicU64,
    gaps: AtomicU64,
    gaps_at_restart: AtomicU64,
    incomplete_at_restart: AtomicU64,
    stale: AtomicU64,
    image_full: AtomicU64,
    failed: Mutex<Option<String>>,
    running: AtomicBool,
}

impl Shared {
    fn stats(&self) -> PmStats {
        let callback_panics = match &self.sink {
            Sink::Callback(d) => d.counts().panics,
            Sink::Queue { .. } => 0,
        };
        PmStats {
            decodes: self.decodes.load(Ordering::Relaxed),
            samples: self.samples.load(Ordering::Relaxed),
            overflows: self.overflows.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            gaps: self.gaps.load(Ordering::Relaxed),
            gaps_at_restart: self.gaps_at_restart.load(Ordering::Relaxed),
            incomplete_at_restart: self.incomplete_at_restart.load(Ordering::Relaxed),
            stale: self.stale.load(Ordering::Relaxed),
            image_full: self.image_full.load(Ordering::Relaxed),
            callback_panics,
        }
    }

    fn deliver(&self, batch: &PmBatch<'_>) {
        match &self.sink {
            Sink::Callback(d) => d.deliver(batch.len() as u64, 0, |f| f(batch)),
            Sink::Queue {
                queue,
                ready,
                limit,
            } => {
                let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
                q.dropped_unread += batch.dropped();
                q.gaps_unread += batch.gaps();
                for s in batch.iter() {
                    if q.samples.len() >= *limit {
                        q.samples.pop_front();
                        q.dropped_unread += 1;
                        self.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    q.samples.push_back(s.to_owned());
                }
                ready.notify_all();
            }
        }
    }

    fn end(&self) {
        self.running.store(false, Ordering::Release);
        if let Sink::Queue { queue, ready, .. } = &self.sink {
            queue.lock().unwrap_or_else(|p| p.into_inner()).ended = true;
            ready.notify_all();
        }
    }
}

/// The CUPTI PM sampling object, moved to the decode thread.
struct Object(*mut sys::CUpti_PmSampling_Object);

// SAFETY: a device-level object CUPTI does not tie to a thread; after `start` only the decode thread uses it.
unsafe impl Send for Object {}

/// Disables PM sampling on drop (the object is made by `cuptiPmSamplingEnable`).
struct Enabled {
    api: Api,
    obj: Object,
}

impl Drop for Enabled {
    fn drop(&mut self) {
        if let Ok(f) = sym!(self.api, cuptiPmSamplingDisable) {
            let mut p = params!(CUpti_PmSampling_Disable_Params, pPmSamplingObject);
            p.pPmSamplingObject = self.obj.0;
            // SAFETY: the object is live and disabled once, here; this releases the counters.
            let _ = unsafe { f(&mut p) };
        }
    }
}

/// A device-wide PM sampler: started by [`PmSamplerBuilder::start`] or [`start_with`](PmSamplerBuilder::start_with);
/// stopped, with every sample decoded and delivered, by [`stop`](Self::stop) or on drop.
///
/// `Send` and `Sync`: the decode thread owns the CUPTI object; the handle holds only shared counters and the read
/// queue.
pub struct PmSampler {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    device: CounterDevice,
    counters: Vec<CounterInfo>,
    metrics: MetricNames,
    layout: PmLayout,
    interval: Interval,
}

impl std::fmt::Debug for PmSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PmSampler")
            .field("device", &self.device)
            .field("metrics", &self.metrics.names())
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

impl PmSampler {
    /// Settings for device `index` (a CUDA device ordinal): no metric yet, 10 ms interval, 256 MiB hardware buffer,
    /// oldest records kept.
    pub fn builder(device: usize) -> PmSamplerBuilder {
        PmSamplerBuilder {
            device,
            metrics: Vec::new(),
            interval: Interval::Time(Duration::from_millis(10)),
            hardware_buffer: DEFAULT_HARDWARE_BUFFER,
            append: AppendMode::KeepOldest,
            decode_period: DEFAULT_DECODE_PERIOD,
            samples_per_decode: None,
            queue_limit: DEFAULT_QUEUE_LIMIT,
            keep_counter_data: false,
        }
    }

    /// The metrics, in the order of each sample's values.
    pub fn metrics(&self) -> &[String] {
        self.metrics.names()
    }

    /// The interval.
    pub fn interval(&self) -> Interval {
        self.interval
    }

    /// The sizes chosen.
    pub fn layout(&self) -> &PmLayout {
        &self.layout
    }

    /// Counts so far.
    pub fn stats(&self) -> PmStats {
        self.shared.stats()
    }

    /// Whether the decode thread still runs (it ends at [`stop`](Self::stop) or on a decode error).
    pub fn is_running(&self) -> bool {
        self.shared.running.load(Ordering::Acquire)
    }

    /// The samples that arrive until `deadline` (or until the sampler ends), oldest first; for a sampler started
    /// with [`start`](PmSamplerBuilder::start).
    pub fn samples(&mut self, deadline: Instant) -> Samples<'_> {
        Samples {
            sampler: self,
            deadline,
            buffer: VecDeque::new(),
        }
    }

    /// Stops sampling, decodes and delivers what the hardware buffer still holds, and releases the counters.
    pub fn stop(mut self) -> crate::Result<PmReport> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> crate::Result<PmReport> {
        if delivery::in_callback() {
            return Err(ProfilingError::State(
                "a PM sampler cannot be stopped from its own callback",
            )
            .into());
        }
        *self.shared.stop.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            if let Err(payload) = t.join() {
                let msg = delivery::panic_message(&*payload);
                std::mem::forget(payload);
                return Err(ProfilingError::DecodeThread(format!("panicked: {msg}")).into());
            }
        }
        let panic = match &self.shared.sink {
            Sink::Callback(d) => d.take_panic(),
            Sink::Queue { .. } => None,
        };
        if let Some(e) = self
            .shared
            .failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            return Err(ProfilingError::DecodeThread(e).into());
        }
        Ok(PmReport {
            stats: self.shared.stats(),
            panic,
        })
    }
}

impl Drop for PmSampler {
    fn drop(&mut self) {
        if self.thread.is_some() && !delivery::in_callback() {
            let _ = self.shutdown();
        }
    }
}

impl DeviceCounters for PmSampler {
    fn device(&self) -> &CounterDevice {
        &self.device
    }

    fn counters(&self) -> &[CounterInfo] {
        &self.counters
    }

    fn clock(&self) -> SampleClock {
        SampleClock::GpuGlobalTimer
    }

    fn read(
        &mut self,
        timeout: Duration,
        out: &mut Vec<DeviceSample>,
    ) -> crate::Result<ReadStatus> {
        let Sink::Queue { queue, ready, .. } = &self.shared.sink else {
            return Err(ProfilingError::State(
                "this sampler hands its samples to its callback; read has none",
            )
            .into());
        };
        let deadline = Instant::now() + timeout;
        let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
        while q.samples.is_empty() && !q.ended {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            q = ready
                .wait_timeout(q, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        let samples = q.samples.len();
        out.extend(q.samples.drain(..));
        let dropped = std::mem::take(&mut q.dropped_unread);
        let gaps = std::mem::take(&mut q.gaps_unread);
        let ended = q.ended;
        drop(q);
        if samples == 0 && ended {
            if let Some(e) = self
                .shared
                .failed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
            {
                return Err(ProfilingError::DecodeThread(e).into());
            }
        }
        Ok(ReadStatus {
            samples,
            dropped,
            gaps,
        })
    }

    /// Stops sampling and decodes what the hardware buffer still holds into the read queue (the counters are
    /// released too: the decode thread disables the sampling when it ends).
    fn finish(&mut self) -> crate::Result<()> {
        self.shutdown().map(drop)
    }
}

/// The iterator of [`PmSampler::samples`].
pub struct Samples<'s> {
    sampler: &'s mut PmSampler,
    deadline: Instant,
    buffer: VecDeque<DeviceSample>,
}

impl Iterator for Samples<'_> {
    type Item = DeviceSample;
    fn next(&mut self) -> Option<DeviceSample> {
        loop {
            if let Some(s) = self.buffer.pop_front() {
                return Some(s);
            }
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            let mut got = Vec::new();
            match self.sampler.read(left, &mut got) {
                Ok(r) if r.samples > 0 => self.buffer.extend(got),
                Ok(_) if self.sampler.is_running() => {}
                _ => return None,
            }
        }
    }
}

impl PmSamplerBuilder {
    /// The metrics, full names (`sm__cycles_active.avg.pct_of_peak_sustained_elapsed`); checked against the
    /// device's catalogue at start.
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

    /// The sampling interval (default 10 ms).
    pub fn interval(mut self, interval: Interval) -> Self {
        self.interval = interval;
        self
    }

    /// Bytes of the hardware buffer the GPU writes samples into (default 256 MiB).
    pub fn hardware_buffer(mut self, bytes: usize) -> Self {
        self.hardware_buffer = bytes;
        self
    }

    /// What the hardware buffer does when full (default [`AppendMode::KeepOldest`]).
    pub fn append_mode(mut self, mode: AppendMode) -> Self {
        self.append = mode;
        self
    }

    /// How often the decode thread decodes (default 50 ms).
    pub fn decode_period(mut self, period: Duration) -> Self {
        self.decode_period = period;
        self
    }

    /// Samples the counter-data image holds per decode (default: four decode periods' worth or two seconds' worth,
    /// whichever is more, at least 64).
    pub fn samples_per_decode(mut self, samples: usize) -> Self {
        self.samples_per_decode = Some(samples);
        self
    }

    /// Most samples kept for [`PmSampler::read`] before the oldest are dropped and counted (default 2^20).
    pub fn queue_limit(mut self, samples: usize) -> Self {
        self.queue_limit = samples.max(1);
        self
    }

    /// Hands each batch's counter-data image to the callback too ([`PmBatch::counter_data`]), to save it.
    pub fn keep_counter_data(mut self, keep: bool) -> Self {
        self.keep_counter_data = keep;
        self
    }

    /// Starts sampling; read the samples with [`PmSampler::read`] or [`PmSampler::samples`].
    pub fn start(self) -> crate::Result<PmSampler> {
        let limit = self.queue_limit;
        self.start_into(Sink::Queue {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            limit,
        })
    }

    /// Starts sampling and hands each decode's samples to `callback` on the decode thread. A panic in it is
    /// caught, counted and reported by [`PmSampler::stop`].
    pub fn start_with<F>(self, callback: F) -> crate::Result<PmSampler>
    where
        F: for<'b> FnMut(&PmBatch<'b>) + Send + 'static,
    {
        self.start_into(Sink::Callback(Delivery::new(Box::new(callback))))
    }

    fn samples_for(&self) -> usize {
        if let Some(n) = self.samples_per_decode {
            return n;
        }
        // Four decode periods of samples, at least 64: the size that ran 60 s at 1 ms on an H100 (CUPTI 13.0).
        // CUPTI loses about ten samples each time the image fills and is started afresh, so a larger image would
        // lose fewer; larger ones went with crashes inside CUPTI while the sampler freed its configuration image
        // after starting, and have not been tried since it keeps it. `samples_per_decode` sets another size.
        let per_period = match self.interval {
            Interval::Time(d) if !d.is_zero() => {
                (self.decode_period.as_nanos() / d.as_nanos()).min(1 << 20) as usize
            }
            Interval::Clocks(c) if c > 0 => {
                (self.decode_period.as_nanos() / u128::from(c)).min(1 << 20) as usize
            }
            _ => 0,
        };
        // Two seconds of samples at least: each start afresh costs a run of samples (a gap, then stale spans that
        // are left out), about a tenth of the time with 200-sample images at 1 ms.
        let two_seconds = match self.interval {
            Interval::Time(d) if !d.is_zero() => {
                (2_000_000_000 / d.as_nanos()).min(1 << 16) as usize
            }
            _ => 0,
        };
        per_period.saturating_mul(4).max(two_seconds).max(64)
    }

    fn check_settings(&self, capability: (i32, i32)) -> Result<(), ProfilingError> {
        match self.interval {
            Interval::Time(d) if d.is_zero() || d.as_nanos() > u128::from(u64::MAX) => {
                return Err(ProfilingError::InvalidSetting {
                    what: "interval",
                    reason: format!("{d:?} is not a sampling interval"),
                });
            }
            // Turing (7.5) and GA100 (8.0) lack the fixed-frequency trigger; GA10x is 8.6 and up.
            Interval::Time(_) if capability < (8, 6) => {
                return Err(ProfilingError::InvalidSetting {
                    what: "interval",
                    reason: format!(
                        "time-based intervals need Ampere GA10x or later (this device is compute capability {}.{}); use Interval::Clocks",
                        capability.0, capability.1
                    ),
                });
            }
            Interval::Clocks(0) => {
                return Err(ProfilingError::InvalidSetting {
                    what: "interval",
                    reason: "0 clocks is not a sampling interval".into(),
                });
            }
            _ => {}
        }
        if self.append == AppendMode::KeepLatest && capability < (8, 0) {
            return Err(ProfilingError::InvalidSetting {
                what: "append mode",
                reason: "keeping the latest records needs Ampere or later".into(),
            });
        }
        if self.decode_period.is_zero() {
            return Err(ProfilingError::InvalidSetting {
                what: "decode period",
                reason: "must be above zero".into(),
            });
        }
        if self.samples_for() == 0 {
            return Err(ProfilingError::BufferTooSmall {
                what: "counter-data image",
                bytes: 0,
                needed: 1,
            });
        }
        if self.hardware_buffer == 0 {
            return Err(ProfilingError::BufferTooSmall {
                what: "hardware buffer",
                bytes: 0,
                needed: 1,
            });
        }
        Ok(())
    }

    fn start_into(self, sink: Sink) -> crate::Result<PmSampler> {
        let api = Api::load(Needs::Metrics)?;
        // Before any vendor call: CUPTI answers a second PM client of the same process with CUPTI_ERROR_UNKNOWN.
        let claim = DeviceClaim::take(self.device)?;
        let info = profiler::check_device(api, self.device, ProfilerApi::PmSampling)?;
        self.check_settings(info.compute_capability)?;
        if self.metrics.is_empty() {
            return Err(ProfilingError::NoMetrics.into());
        }
        let init = ProfilerInit::acquire(api)?;
        let chip = profiler::chip(api, &init, self.device)?;
        // Checked against the catalogue before anything is enabled on the device.
        let catalog = Catalog::create(api, &chip)?;
        let metrics = catalog.resolve_all(&self.metrics, Method::PmSampling)?;
        let counters: Vec<CounterInfo> = metrics
            .names()
            .iter()
            .map(|n| {
                let base = n.split('.').next().unwrap_or(n);
                let unit = unit_of(n, catalog.get(base).map(|m| m.unit.as_str()).unwrap_or(""));
                CounterInfo {
                    name: n.clone(),
                    unit,
                }
            })
            .collect();
        drop(catalog);
        // Where another client holds the counters, this answers CUPTI_ERROR_HARDWARE_BUSY.
        let availability = profiler::pm_availability(api, self.device)?;
        let config = ConfigImage::create(
            api,
            &chip,
            Method::PmSampling,
            Some(&availability),
            &metrics,
        )?;
        if config.passes() > 1 {
            return Err(ProfilingError::TooManyPasses {
                method: Method::PmSampling,
                passes: config.passes(),
                metrics: metrics.names().to_vec(),
            }
            .into());
        }
        let host = Host::create(api, &chip, Method::PmSampling, Some(&availability))?;
        host.add_metrics(&metrics)?;
        let enabled = enable(api, self.device)?;
        let samples_per_decode = self.samples_for();
        // What one sample adds to the counter-data image, an estimate of what it takes in the hardware buffer.
        // Asked before the configuration so that a buffer too small is refused before it is set; where CUPTI wants
        // the configuration first, asked again after it.
        let per_sample = |e: &Enabled| -> Result<usize, ProfilingError> {
            let one = counter_data_size(api, e, &metrics, 1)?;
            let two = counter_data_size(api, e, &metrics, 2)?;
            Ok(two.saturating_sub(one).max(1))
        };
        let early = per_sample(&enabled);
        let too_small = |needed: usize| ProfilingError::BufferTooSmall {
            what: "hardware buffer",
            bytes: self.hardware_buffer,
            needed,
        };
        if let Ok(needed) = early {
            if self.hardware_buffer < needed {
                return Err(too_small(needed).into());
            }
        }
        if let Err(e) = set_config(api, &enabled, &config, &self) {
            // A buffer CUPTI finds too small is reported as such where the estimate says so.
            return Err(match (e, early) {
                (
                    ProfilingError::Vendor {
                        error: crate::cupti::CuptiError::InvalidParameter,
                        ..
                    },
                    Ok(needed),
                ) if self.hardware_buffer < 4 * needed => too_small(4 * needed),
                (e, _) => e,
            }
            .into());
        }
        let sample_bytes = match early {
            Ok(n) => n,
            Err(_) => per_sample(&enabled)?,
        };
        if self.hardware_buffer < sample_bytes {
            return Err(too_small(sample_bytes).into());
        }
        let samples_u32 =
            u32::try_from(samples_per_decode).map_err(|_| ProfilingError::InvalidSetting {
                what: "samples per decode",
                reason: format!("{samples_per_decode} is above {}", u32::MAX),
            })?;
        let image_bytes = counter_data_size(api, &enabled, &metrics, samples_u32)?;
        let mut image = vec![0u8; image_bytes];
        initialize_image(api, &enabled, &mut image)?;
        start(api, &enabled)?;
        let layout = PmLayout {
            chip,
            config_bytes: config.bytes().len(),
            availability_bytes: availability.len(),
            samples_per_decode,
            counter_data_bytes: image.len(),
            sample_bytes,
            hardware_buffer: self.hardware_buffer,
        };
        log::debug!("PM sampling on device {}: {layout:?}", self.device);
        let shared = Arc::new(Shared {
            sink,
            stop: Mutex::new(false),
            wake: Condvar::new(),
            decodes: AtomicU64::new(0),
            samples: AtomicU64::new(0),
            overflows: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            gaps: AtomicU64::new(0),
            gaps_at_restart: AtomicU64::new(0),
            incomplete_at_restart: AtomicU64::new(0),
            stale: AtomicU64::new(0),
            image_full: AtomicU64::new(0),
            failed: Mutex::new(None),
            running: AtomicBool::new(true),
        });
        let decoder = Decoder {
            api,
            enabled,
            _init: init,
            host,
            metrics: metrics.clone(),
            image,
            keep: self.keep_counter_data,
            evaluated: 0,
            coverage: Coverage::new(match self.interval {
                Interval::Time(d) => u64::try_from(d.as_nanos()).ok().filter(|&n| n > 0),
                Interval::Clocks(_) => None,
            }),
            device: self.device,
            starts: Vec::new(),
            ends: Vec::new(),
            values: Vec::new(),
            _config: config,
            _claim: claim,
        };
        let s = Arc::clone(&shared);
        let period = self.decode_period;
        let thread = std::thread::Builder::new()
            .name("gpu-tools-pm-decode".into())
            .spawn(move || decoder.run(&s, period))
            .map_err(|e| ProfilingError::DecodeThread(format!("cannot start: {e}")))?;
        Ok(PmSampler {
            shared,
            thread: Some(thread),
            device: CounterDevice {
                index: self.device as u32,
                name: info.name,
            },
            counters,
            metrics,
            layout,
            interval: self.interval,
        })
    }
}

/// The unit of a full metric name: the base's unit, turned into a rate or a percentage by the suffix.
pub(crate) fn unit_of(name: &str, base_unit: &str) -> String {
    if name.contains(".pct") {
        "%".to_string()
    } else if name.ends_with(".per_second") {
        format!("{base_unit}/second")
    } else if name.contains(".per_cycle") {
        format!("{base_unit}/cycle")
    } else {
        base_unit.to_string()
    }
}

fn enable(api: Api, device: usize) -> Result<Enabled, ProfilingError> {
    let f = sym!(api, cuptiPmSamplingEnable)?;
    let mut p = params!(CUpti_PmSampling_Enable_Params, pPmSamplingObject);
    p.deviceIndex = device;
    // SAFETY: a parameter struct of the header's layout; CUPTI writes the object.
    check("cuptiPmSamplingEnable", unsafe { f(&mut p) })?;
    if p.pPmSamplingObject.is_null() {
        return Err(ProfilingError::State(
            "cuptiPmSamplingEnable returned no object",
        ));
    }
    Ok(Enabled {
        api,
        obj: Object(p.pPmSamplingObject),
    })
}

fn counter_data_size(
    api: Api,
    e: &Enabled,
    metrics: &MetricNames,
    samples: u32,
) -> Result<usize, ProfilingError> {
    let f = sym!(api, cuptiPmSamplingGetCounterDataSize)?;
    let mut names = metrics.pointers();
    let mut p = params!(CUpti_PmSampling_GetCounterDataSize_Params, counterDataSize);
    p.pPmSamplingObject = e.obj.0;
    p.pMetricNames = names.as_mut_ptr();
    p.numMetrics = names.len();
    p.maxSamples = samples;
    // SAFETY: a live object; the names outlive the call.
    check("cuptiPmSamplingGetCounterDataSize", unsafe { f(&mut p) })?;
    Ok(p.counterDataSize)
}

fn initialize_image(api: Api, e: &Enabled, image: &mut [u8]) -> Result<(), ProfilingError> {
    let f = sym!(api, cuptiPmSamplingCounterDataImageInitialize)?;
    let mut p = params!(
        CUpti_PmSampling_CounterDataImage_Initialize_Params,
        pCounterData
    );
    p.pPmSamplingObject = e.obj.0;
    p.counterDataSize = image.len();
    p.pCounterData = image.as_mut_ptr();
    // SAFETY: a live object and a buffer of the size CUPTI asked for.
    check("cuptiPmSamplingCounterDataImageInitialize", unsafe {
        f(&mut p)
    })
}

fn set_config(
    api: Api,
    e: &Enabled,
    config: &ConfigImage,
    b: &PmSamplerBuilder,
) -> Result<(), ProfilingError> {
    let f = sym!(api, cuptiPmSamplingSetConfig)?;
    let mut p = params!(CUpti_PmSampling_SetConfig_Params, hwBufferAppendMode);
    p.pPmSamplingObject = e.obj.0;
    p.configSize = config.bytes().len();
    p.pConfig = config.bytes().as_ptr();
    p.hardwareBufferSize = b.hardware_buffer;
    (p.triggerMode, p.samplingInterval) = match b.interval {
        Interval::Time(d) => (
            sys::CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL,
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
        ),
        Interval::Clocks(c) => (sys::CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL, c),
    };
    p.hwBufferAppendMode = match b.append {
        AppendMode::KeepOldest => sys::CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST,
        AppendMode::KeepLatest => sys::CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST,
    };
    // SAFETY: a live object; the configuration image outlives the call, and the decode thread keeps it until the
    // object is disabled.
    check("cuptiPmSamplingSetConfig", unsafe { f(&mut p) })
}

fn start(api: Api, e: &Enabled) -> Result<(), ProfilingError> {
    let f = sym!(api, cuptiPmSamplingStart)?;
    let mut p = params!(CUpti_PmSampling_Start_Params, pPmSamplingObject);
    p.pPmSamplingObject = e.obj.0;
    // SAFETY: a live, configured object.
    check("cuptiPmSamplingStart", unsafe { f(&mut p) })
}

/// What one `cuptiPmSamplingDecodeData` reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DecodeOutcome {
    /// The counter-data image is full: decode again after evaluating it.
    pub full: bool,
    /// The hardware buffer overflowed.
    pub overflow: bool,
}

/// The decode thread's state: the only user of the CUPTI object after start.
struct Decoder {
    api: Api,
    enabled: Enabled,
    _init: ProfilerInit,
    host: Host,
    metrics: MetricNames,
    image: Vec<u8>,
    keep: bool,
    /// Samples of the current image already evaluated and delivered.
    evaluated: usize,
    /// How the samples so far cover the time: spans, losses and gaps.
    coverage: Coverage,
    /// The CUDA device ordinal (for the log).
    device: usize,
    starts: Vec<u64>,
    ends: Vec<u64>,
    values: Vec<f64>,
    /// The configuration CUPTI was given (`cuptiPmSamplingSetConfig`), kept until the sampling is disabled: the
    /// header does not say that CUPTI copies it.
    _config: ConfigImage,
    /// Last, so that the device is released after the sampling was disabled.
    _claim: DeviceClaim,
}

/// Devices a PM sampler of this process samples.
static SAMPLED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// A device claimed for this process's one PM sampler of it; released on drop.
struct DeviceClaim(usize);

impl DeviceClaim {
    fn take(device: usize) -> Result<DeviceClaim, ProfilingError> {
        let mut sampled = SAMPLED.lock().unwrap_or_else(|p| p.into_inner());
        if sampled.contains(&device) {
            return Err(ProfilingError::AlreadySampling { device });
        }
        sampled.push(device);
        Ok(DeviceClaim(device))
    }
}

impl Drop for DeviceClaim {
    fn drop(&mut self) {
        SAMPLED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|&d| d != self.0);
    }
}

impl Decoder {
    fn run(mut self, shared: &Shared, period: Duration) {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.run_loop(shared, period)
        }));
        let error = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(payload) => {
                let msg = delivery::panic_message(&*payload);
                std::mem::forget(payload);
                Some(format!("panicked: {msg}"))
            }
        };
        if let Some(e) = error {
            log::warn!("PM sampling decode thread: {e}");
            *shared.failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
        }
        // Disable (releasing the counters) before telling readers the sampler ended.
        drop(self);
        shared.end();
    }

    fn run_loop(&mut self, shared: &Shared, period: Duration) -> Result<(), ProfilingError> {
        loop {
            let stopping = {
                let stop = shared.stop.lock().unwrap_or_else(|p| p.into_inner());
                let (stop, _) = shared
                    .wake
                    .wait_timeout_while(stop, period, |s| !*s)
                    .unwrap_or_else(|p| p.into_inner());
                *stop
            };
            if stopping {
                self.stop_sampling()?;
            }
            self.drain(shared)?;
            if stopping {
                self.finish(shared);
                log::debug!(
                    "PM sampling on device {} stopped: {:?}",
                    self.device,
                    shared.stats()
                );
                return Ok(());
            }
        }
    }

    fn stop_sampling(&self) -> Result<(), ProfilingError> {
        let f = sym!(self.api, cuptiPmSamplingStop)?;
        let mut p = params!(CUpti_PmSampling_Stop_Params, pPmSamplingObject);
        p.pPmSamplingObject = self.enabled.obj.0;
        // SAFETY: a live, started object.
        check("cuptiPmSamplingStop", unsafe { f(&mut p) })
    }

    /// Decodes until the hardware buffer is empty, delivering each image's new samples.
    fn drain(&mut self, shared: &Shared) -> Result<(), ProfilingError> {
        loop {
            let outcome = self.decode()?;
            shared.decodes.fetch_add(1, Ordering::Relaxed);
            if outcome.overflow {
                shared.overflows.fetch_add(1, Ordering::Relaxed);
                log::warn!("PM sampling: the hardware buffer overflowed; samples were lost");
                self.coverage.overflow();
            }
            let first = self.evaluated;
            let counts = self.evaluate_new()?;
            self.count(shared, &counts);
            if !self.starts.is_empty() || outcome.overflow || counts.lost > 0 || counts.gaps > 0 {
                let mut batch = PmBatch::new(
                    &self.starts,
                    &self.ends,
                    &self.values,
                    self.metrics.len(),
                    counts.lost,
                    outcome.overflow,
                );
                batch.gaps = counts.gaps;
                if self.keep {
                    batch.counter_data = Some((&self.image, first));
                }
                shared.deliver(&batch);
            }
            // The image is started afresh only once CUPTI reports it full: initialising it earlier, between two
            // decodes, crashed the process inside CUPTI (H100, CUPTI 13.0).
            if !outcome.full {
                // The hardware buffer is drained: an overflow it reported is placed among the samples of this
                // drain, or before the next sample.
                self.coverage.end_decode();
                return Ok(());
            }
            shared.image_full.fetch_add(1, Ordering::Relaxed);
            // SAFETY: the image is the one CUPTI decodes into.
            if let Ok((populated, completed)) = unsafe { sample_counts(self.api, &self.image) } {
                let begun = populated.saturating_sub(completed);
                shared
                    .incomplete_at_restart
                    .fetch_add(begun as u64, Ordering::Relaxed);
                log::debug!(
                    "PM sampling on device {}: counter-data image full ({completed} samples completed, {begun} \
                     begun but not completed); started afresh",
                    self.device
                );
            }
            initialize_image(self.api, &self.enabled, &mut self.image)?;
            self.evaluated = 0;
            self.coverage.restart();
        }
    }

    /// Adds a decode's counts to the shared ones.
    fn count(&self, shared: &Shared, counts: &DecodeCounts) {
        shared.stale.fetch_add(counts.stale, Ordering::Relaxed);
        shared
            .samples
            .fetch_add(self.starts.len() as u64, Ordering::Relaxed);
        shared.dropped.fetch_add(counts.lost, Ordering::Relaxed);
        shared.gaps.fetch_add(counts.gaps, Ordering::Relaxed);
        shared
            .gaps_at_restart
            .fetch_add(counts.gaps_at_restart, Ordering::Relaxed);
    }

    /// After the last decode: an overflow that no missing period showed still lost at least one sample.
    fn finish(&mut self, shared: &Shared) {
        let lost = self.coverage.finish();
        if lost > 0 {
            shared.dropped.fetch_add(lost, Ordering::Relaxed);
            shared.deliver(&PmBatch::new(
                &[],
                &[],
                &[],
                self.metrics.len(),
                lost,
                false,
            ));
        }
    }

    fn decode(&mut self) -> Result<DecodeOutcome, ProfilingError> {
        let f = sym!(self.api, cuptiPmSamplingDecodeData)?;
        let mut p = params!(CUpti_PmSampling_DecodeData_Params, overflow);
        p.pPmSamplingObject = self.enabled.obj.0;
        p.pCounterDataImage = self.image.as_mut_ptr();
        p.counterDataImageSize = self.image.len();
        // SAFETY: a live object and the image initialised for it.
        let code = unsafe { f(&mut p) };
        // "CUPTI_ERROR_OUT_OF_MEMORY if there is record overflow in the hardware buffer".
        if code == crate::sys::cupti::CUPTI_ERROR_OUT_OF_MEMORY {
            return Ok(DecodeOutcome {
                full: false,
                overflow: true,
            });
        }
        check("cuptiPmSamplingDecodeData", code)?;
        Ok(DecodeOutcome {
            full: p.decodeStopReason == sys::CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL,
            overflow: p.overflow != 0,
        })
    }

    /// Evaluates the image's samples completed since the last call into the column buffers; returns what the
    /// coverage of their time says (samples lost and gaps before and among them, stale samples left out).
    fn evaluate_new(&mut self) -> Result<DecodeCounts, ProfilingError> {
        self.starts.clear();
        self.ends.clear();
        self.values.clear();
        // SAFETY: the image is the one CUPTI decodes into.
        let completed = unsafe { completed_samples(self.api, &self.image) }?;
        let mut counts = DecodeCounts::default();
        for i in self.evaluated..completed {
            // SAFETY: as above; `i` is below the completed count.
            let (start, end) =
                unsafe { sample_times(self.api, self.enabled.obj.0, &self.image, i) }?;
            let c = self.coverage.sample(start, end);
            counts.add(&c);
            if c.stale {
                continue;
            }
            if c.gaps > 0 || c.lost > 0 {
                log::debug!(
                    "PM sampling on device {}: {} sampling periods without a sample ({}) before the sample \
                     ending at {} ns (image sample {i}{})",
                    self.device,
                    c.gaps + c.lost,
                    if c.lost > 0 {
                        "lost to an overflow"
                    } else {
                        "a gap, no loss reported"
                    },
                    c.end,
                    if c.at_restart {
                        ", after an image restart"
                    } else {
                        ""
                    }
                );
            }
            let at = self.values.len();
            self.values.resize(at + self.metrics.len(), f64::NAN);
            // SAFETY: as above.
            unsafe {
                self.host
                    .evaluate_into(&self.image, i, &self.metrics, &mut self.values[at..])
            }?;
            self.starts.push(c.start);
            self.ends.push(c.end);
        }
        self.evaluated = self.evaluated.max(completed);
        Ok(counts)
    }
}

/// What one decode's samples said about the time they cover.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct DecodeCounts {
    lost: u64,
    gaps: u64,
    gaps_at_restart: u64,
    stale: u64,
}

impl DecodeCounts {
    fn add(&mut self, c: &Covered) {
        self.lost += c.lost;
        self.gaps += c.gaps;
        if c.at_restart {
            self.gaps_at_restart += c.gaps;
        }
        self.stale += u64::from(c.stale);
    }
}

/// Where an overflow CUPTI reported stands. The hardware buffer loses a run of records when it overflows: its
/// oldest ones (kept latest), which leaves a hole among the samples of the decode that reports it, or its newest
/// (kept oldest), which leaves a hole before the first sample of the next decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Overflow {
    /// None waits to be placed.
    None,
    /// The decode being evaluated reported one: every missing period among its samples is lost.
    ThisDecode,
    /// The decode before reported one: missing periods before the next sample are lost too.
    NextSample,
}

/// How the samples of a sampler cover the GPU's time: it takes each sample's span (telling stale or empty ones,
/// which are left out), and counts the sampling periods before it that have no sample, as lost where a hardware-buffer overflow
/// CUPTI reported explains them, else as a gap. Pure: the decode thread feeds it each sample's span as CUPTI gave
/// it, and tells it of overflows and image restarts.
#[derive(Debug, Clone)]
pub(crate) struct Coverage {
    /// The sampling period in GPU nanoseconds, where the interval is one of time.
    period_ns: Option<u64>,
    last_end: Option<u64>,
    /// The length of the last sample with a time span.
    last_len: Option<u64>,
    overflow: Overflow,
    /// Samples were counted lost for the overflow waiting to be placed.
    placed: bool,
    /// The counter-data image was started afresh and no sample with a sound span has come since.
    after_restart: bool,
}

/// One sample as [`Coverage`] placed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Covered {
    /// Its span.
    pub start: u64,
    pub end: u64,
    /// CUPTI gave it a stale or empty span: it is left out, and stands for nothing (its periods are gaps).
    pub stale: bool,
    /// Sampling periods before it lost to an overflow.
    pub lost: u64,
    /// Sampling periods before it without a sample, no loss reported.
    pub gaps: u64,
    /// Whether those gaps lie between an image restart and the first sound span after it.
    pub at_restart: bool,
}

impl Coverage {
    /// Coverage of samples due every `period_ns` (`None`: a period of clocks, whose length in time is unknown).
    pub(crate) fn new(period_ns: Option<u64>) -> Self {
        Coverage {
            period_ns,
            last_end: None,
            last_len: None,
            overflow: Overflow::None,
            placed: false,
            after_restart: false,
        }
    }

    /// A decode of the drain whose samples come next reported a hardware-buffer overflow.
    pub(crate) fn overflow(&mut self) {
        if self.overflow != Overflow::ThisDecode {
            self.placed = false;
        }
        self.overflow = Overflow::ThisDecode;
    }

    /// The counter-data image was started afresh.
    pub(crate) fn restart(&mut self) {
        self.after_restart = true;
    }

    /// The next sample, with the span CUPTI gave it.
    pub(crate) fn sample(&mut self, start: u64, end: u64) -> Covered {
        if is_stale(self.last_end, start, end) {
            return Covered {
                start,
                end,
                stale: true,
                lost: 0,
                gaps: 0,
                at_restart: false,
            };
        }
        let missing = match self.period_ns {
            Some(period) => missed_periods(self.last_end, end, period),
            None => gap_samples(self.last_end, start, end),
        };
        let (lost, gaps) = match self.overflow {
            Overflow::None => (0, missing),
            Overflow::ThisDecode => {
                self.placed |= missing > 0;
                (missing, 0)
            }
            Overflow::NextSample => {
                self.overflow = Overflow::None;
                // An overflow that left no hole still lost at least one sample.
                let lost = if missing > 0 || self.placed {
                    missing
                } else {
                    1
                };
                (lost, 0)
            }
        };
        let at_restart = self.after_restart && gaps > 0;
        self.after_restart = false;
        self.last_end = Some(end);
        self.last_len = end.checked_sub(start).filter(|&l| l > 0).or(self.last_len);
        Covered {
            start,
            end,
            stale: false,
            lost,
            gaps,
            at_restart,
        }
    }

    /// The samples of one drain of the hardware buffer (decodes until CUPTI has no more records) were all given.
    pub(crate) fn end_decode(&mut self) {
        if self.overflow == Overflow::ThisDecode {
            self.overflow = Overflow::NextSample;
        }
    }

    /// No sample comes any more: samples lost to an overflow that no sample placed (one, or none).
    pub(crate) fn finish(&mut self) -> u64 {
        let left = u64::from(self.overflow != Overflow::None && !self.placed);
        self.overflow = Overflow::None;
        left
    }
}

/// Whether CUPTI gave a sample a span that cannot be its own: empty, or ending no later than the previous sample's
/// end (at `last_end`).
pub(crate) fn is_stale(last_end: Option<u64>, start: u64, end: u64) -> bool {
    end <= start || last_end.is_some_and(|prev| end <= prev)
}

/// Samples missing between two samples ending at `last_end` and `end`, with samples due every `period`
/// nanoseconds: the periods between them, rounded, less one. Ends, not starts: the first sample of a sampler can
/// start long before it (seconds on an H100), and a sample's length says nothing of the gaps.
pub(crate) fn missed_periods(last_end: Option<u64>, end: u64, period: u64) -> u64 {
    let Some(prev) = last_end else { return 0 };
    if period == 0 {
        return 0;
    }
    let step = end.saturating_sub(prev);
    (step.saturating_add(period / 2) / period).saturating_sub(1)
}

/// Samples missing between a sample ending at `last_end` and the next one over `[start, end]`, where the period
/// is a number of clocks (its length in time is unknown): a gap of more than 1.5 sample lengths counts as
/// `gap / length` lost samples.
pub(crate) fn gap_samples(last_end: Option<u64>, start: u64, end: u64) -> u64 {
    let (Some(prev), Some(len)) = (last_end, end.checked_sub(start).filter(|&l| l > 0)) else {
        return 0;
    };
    let gap = start.saturating_sub(prev);
    if gap.saturating_mul(2) > len.saturating_mul(3) {
        (gap + len / 2) / len
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_or_empty_spans_are_told() {
        let ms = 1_000_000;
        assert!(is_stale(None, 5, 5), "empty");
        assert!(!is_stale(None, 5, 6));
        assert!(!is_stale(Some(10 * ms), 10 * ms, 11 * ms), "sound");
        assert!(
            !is_stale(Some(10 * ms), 10 * ms - 3, 11 * ms),
            "a start a little early, an end later: kept"
        );
        // As CUPTI gave them on an H100: zero length, seconds in the past.
        assert!(is_stale(Some(10_000 * ms), 4 * ms, 4 * ms));
        assert!(is_stale(Some(10 * ms), 12 * ms, 12 * ms), "empty");
        assert!(
            is_stale(Some(10 * ms), 8 * ms, 9 * ms),
            "ends before the last one"
        );
    }

    #[test]
    fn missed_periods_count_lost_samples() {
        let ms = 1_000_000;
        assert_eq!(missed_periods(None, 5 * ms, ms), 0);
        assert_eq!(missed_periods(Some(0), ms, ms), 0, "the next sample");
        assert_eq!(missed_periods(Some(0), ms + ms / 3, ms), 0, "a late one");
        assert_eq!(missed_periods(Some(0), 4 * ms, ms), 3);
        assert_eq!(missed_periods(Some(0), 4 * ms - ms / 3, ms), 3, "rounded");
        assert_eq!(
            missed_periods(Some(5 * ms), ms, ms),
            0,
            "a clock going back"
        );
        assert_eq!(missed_periods(Some(0), u64::MAX, ms), u64::MAX / ms - 1);
        assert_eq!(missed_periods(Some(0), 10, 0), 0, "no period");
    }

    #[test]
    fn gaps_count_lost_samples() {
        assert_eq!(gap_samples(None, 100, 110), 0);
        assert_eq!(gap_samples(Some(100), 100, 110), 0);
        assert_eq!(gap_samples(Some(100), 114, 124), 0, "under 1.5 lengths");
        assert_eq!(gap_samples(Some(100), 130, 140), 3);
        assert_eq!(
            gap_samples(Some(100), 200, 200),
            0,
            "a zero-length sample says nothing"
        );
        assert_eq!(
            gap_samples(Some(500), 100, 110),
            0,
            "a clock going back says nothing"
        );
    }

    /// Feeds spans to a coverage as the samples of one decode; returns (lost, gaps, gaps at restart).
    fn cover(c: &mut Coverage, spans: &[(u64, u64)]) -> (u64, u64, u64) {
        let mut counts = DecodeCounts::default();
        for &(start, end) in spans {
            counts.add(&c.sample(start, end));
        }
        c.end_decode();
        (counts.lost, counts.gaps, counts.gaps_at_restart)
    }

    #[test]
    fn periods_without_a_sample_are_gaps_unless_an_overflow_explains_them() {
        let ms = 1_000_000;
        // Every period has its sample (as on a busy H100): nothing missing.
        let mut c = Coverage::new(Some(ms));
        let tiled: Vec<(u64, u64)> = (0..100).map(|i| (i * ms, (i + 1) * ms)).collect();
        assert_eq!(cover(&mut c, &tiled), (0, 0, 0));
        // One period in ten without a sample and no overflow (as an idle H100 showed): gaps, not losses.
        let mut c = Coverage::new(Some(ms));
        let idle: Vec<(u64, u64)> = (0..100)
            .filter(|i| i % 10 != 5)
            .map(|i| (i * ms, (i + 1) * ms))
            .collect();
        assert_eq!(cover(&mut c, &idle), (0, 10, 0));
        assert_eq!(c.finish(), 0);
        // An overflow reported by the decode whose samples hold the hole (the oldest records overwritten): lost.
        let mut c = Coverage::new(Some(ms));
        cover(&mut c, &[(0, ms), (ms, 2 * ms)]);
        c.overflow();
        assert_eq!(
            cover(&mut c, &[(2 * ms, 3 * ms), (7 * ms, 8 * ms)]),
            (4, 0, 0)
        );
        // A hole before the next decode's first sample is the overflow's too; later holes are gaps again.
        assert_eq!(
            cover(
                &mut c,
                &[(10 * ms, 11 * ms), (11 * ms, 12 * ms), (13 * ms, 14 * ms)]
            ),
            (2, 1, 0)
        );
        assert_eq!(c.finish(), 0);
        // An overflow whose hole shows at the first sample of the next decode (the newest records dropped).
        let mut c = Coverage::new(Some(ms));
        c.overflow();
        assert_eq!(cover(&mut c, &[(0, ms), (ms, 2 * ms)]), (0, 0, 0));
        assert_eq!(cover(&mut c, &[(5 * ms, 6 * ms)]), (3, 0, 0));
        // An overflow that no hole shows still lost a sample: at the next sample, or when sampling ends.
        let mut c = Coverage::new(Some(ms));
        c.overflow();
        assert_eq!(cover(&mut c, &[(0, ms)]), (0, 0, 0));
        assert_eq!(cover(&mut c, &[(ms, 2 * ms), (3 * ms, 4 * ms)]), (1, 1, 0));
        c.overflow();
        assert_eq!(cover(&mut c, &[]), (0, 0, 0));
        assert_eq!(c.finish(), 1);
        assert_eq!(c.finish(), 0);
    }

    #[test]
    fn gaps_after_an_image_restart_are_told_apart() {
        let ms = 1_000_000;
        let mut c = Coverage::new(Some(ms));
        assert_eq!(
            cover(&mut c, &[(0, 10 * ms), (10 * ms, 11 * ms)]),
            (0, 0, 0)
        );
        c.restart();
        // A run of stale zero-length spans (left out), then a sound sample four periods after the last sound one:
        // three gaps, at the restart.
        let first = c.sample(3, 3);
        assert!(first.stale && (first.lost, first.gaps) == (0, 0));
        let (lost, gaps, at_restart) = cover(&mut c, &[(3, 3), (15 * ms, 16 * ms)]);
        assert_eq!((lost, gaps, at_restart), (0, 4, 4));
        // Past the first sound sample, gaps are no longer the restart's.
        assert_eq!(cover(&mut c, &[(17 * ms, 18 * ms)]), (0, 1, 0));
    }

    #[test]
    fn gaps_of_a_clock_interval_are_measured_in_sample_lengths() {
        let mut c = Coverage::new(None);
        assert_eq!(
            cover(&mut c, &[(100, 110), (110, 120), (150, 160)]),
            (0, 3, 0)
        );
        c.overflow();
        assert_eq!(cover(&mut c, &[(200, 210)]), (4, 0, 0));
    }

    #[test]
    fn batches_slice_their_columns() {
        let starts = [1, 3];
        let ends = [2, 4];
        let values = [10.0, 11.0, 20.0, 21.0];
        let b = PmBatch::new(&starts, &ends, &values, 2, 5, true);
        assert_eq!(b.len(), 2);
        assert_eq!(b.get(1).unwrap().values, &[20.0, 21.0]);
        assert!(b.get(2).is_none());
        assert_eq!(b.iter().map(|s| s.start_ns).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(b.get(0).unwrap().to_owned().values, vec![10.0, 11.0]);
        assert!(b.overflow() && b.dropped() == 5);
        // Uneven columns never index out of bounds.
        let short = PmBatch::new(&starts, &ends, &values[..3], 2, 0, false);
        assert!(short.get(1).is_none());
    }

    #[test]
    fn units_follow_the_suffix() {
        assert_eq!(
            unit_of("dram__bytes_read.sum.per_second", "byte"),
            "byte/second"
        );
        assert_eq!(
            unit_of(
                "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
                "cycle"
            ),
            "%"
        );
        assert_eq!(unit_of("sm__cycles_active.avg", "cycle"), "cycle");
        assert_eq!(unit_of("x.avg.per_cycle_elapsed", "inst"), "inst/cycle");
    }

    #[test]
    fn default_image_holds_two_seconds_or_four_periods() {
        let b = PmSampler::builder(0).interval(Interval::Time(Duration::from_millis(1)));
        assert_eq!(b.samples_for(), 2000);
        let b = PmSampler::builder(0)
            .interval(Interval::Time(Duration::from_millis(1)))
            .decode_period(Duration::from_secs(1));
        assert_eq!(b.samples_for(), 4000);
        let b = PmSampler::builder(0).interval(Interval::Time(Duration::from_millis(100)));
        assert_eq!(b.samples_for(), 64);
        assert_eq!(PmSampler::builder(0).samples_per_decode(7).samples_for(), 7);
    }

    #[test]
    fn settings_are_checked_before_the_device_is_touched() {
        let b = PmSampler::builder(0).interval(Interval::Time(Duration::ZERO));
        assert!(matches!(
            b.check_settings((9, 0)),
            Err(ProfilingError::InvalidSetting {
                what: "interval",
                ..
            })
        ));
        let turing = PmSampler::builder(0);
        let e = turing.check_settings((7, 5)).unwrap_err();
        assert!(e.to_string().contains("Interval::Clocks"), "{e}");
        assert!(
            PmSampler::builder(0)
                .interval(Interval::Clocks(1000))
                .check_settings((7, 5))
                .is_ok()
        );
        assert!(PmSampler::builder(0).check_settings((8, 6)).is_ok());
        assert!(PmSampler::builder(0).check_settings((9, 0)).is_ok());
        let ga100 = PmSampler::builder(0).check_settings((8, 0));
        assert!(ga100.is_err());
        let latest = PmSampler::builder(0)
            .interval(Interval::Clocks(1))
            .append_mode(AppendMode::KeepLatest);
        assert!(latest.check_settings((7, 5)).is_err());
        let none = PmSampler::builder(0).hardware_buffer(0);
        assert!(matches!(
            none.check_settings((9, 0)),
            Err(ProfilingError::BufferTooSmall { .. })
        ));
        let zero = PmSampler::builder(0).samples_per_decode(0);
        assert!(matches!(
            zero.check_settings((9, 0)),
            Err(ProfilingError::BufferTooSmall { .. })
        ));
    }

    fn send_sync<T: Send + Sync>() {}

    #[test]
    fn samplers_are_send_and_sync() {
        send_sync::<PmSampler>();
    }
}
