//! [`PmSampler`]: device-wide performance counters sampled at an interval (CUPTI's PM sampling). It sees every
//! process on the GPU, needs no context of its own, and is the NVIDIA side of [`DeviceCounters`](crate::counters::DeviceCounters).
//!
//! A thread owned by the sampler decodes the hardware buffer into samples (start and end on the GPU's global
//! timer, one value per metric) and hands them over either as borrowed batches to a closure
//! ([`PmSamplerBuilder::start_with`]) or through [`PmSampler::read`](crate::counters::DeviceCounters::read) / [`PmSampler::samples`]. Overflow of the
//! hardware buffer and samples lost to it are counted ([`PmStats`]), never silent; sampling periods that passed
//! without a sample while CUPTI reported no loss are counted apart, as gaps ([`PmStats::gaps`]). One PM client per
//! GPU: a second
//! one, or ncu, DCGM or Nsight Systems' GPU metrics, makes [`start`](PmSamplerBuilder::start) fail with
//! [`ProfilingError::CountersBusy`](crate::cupti::profiler::ProfilingError::CountersBusy). Stopping or dropping the sampler releases the counters.
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

use std::time::Duration;

mod batch;
mod builder;
mod claims;
mod coverage;
mod decoder;
mod held;
mod object;
mod sampler;
mod shared;
#[cfg(test)]
mod tests;

pub use batch::{PmBatch, SampleRef};
pub use held::counters_held_elsewhere;
pub use sampler::{PmSampler, Samples};

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
/// Default most samples queued for [`PmSampler::read`](crate::counters::DeviceCounters::read) before the oldest are dropped (and counted).
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
