//! Counter records: per-kernel metric values and PC-sampling stall summaries that a profiler collects inside the
//! traced process, and notices of profiling data it lost.

use std::sync::Arc;

/// The metric values of one kernel launch (one range of the range profiler in auto-range mode).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct KernelMetricsRecord {
    /// Device ordinal.
    pub device: u32,
    /// Context id.
    pub context: u32,
    /// Correlation id of the launch (the [`ApiRecord`](super::ApiRecord) of the launch call carries the same); 0
    /// where not known.
    pub correlation: u32,
    /// The launch's index among those profiled in its context, from 0.
    pub launch: u32,
    /// The kernel's name as the vendor reports it (mangled for C++ kernels).
    pub kernel: Arc<str>,
    /// (metric name, value) pairs, in the order asked for.
    pub metrics: Vec<(Arc<str>, f64)>,
}

/// Equal when every field is, values compared by their bits (so a `NaN` equals itself).
impl PartialEq for KernelMetricsRecord {
    fn eq(&self, o: &Self) -> bool {
        (self.device, self.context, self.correlation, self.launch)
            == (o.device, o.context, o.correlation, o.launch)
            && self.kernel == o.kernel
            && self.metrics.len() == o.metrics.len()
            && self
                .metrics
                .iter()
                .zip(&o.metrics)
                .all(|(a, b)| a.0 == b.0 && a.1.to_bits() == b.1.to_bits())
    }
}

impl Eq for KernelMetricsRecord {}

impl KernelMetricsRecord {
    /// The value of one metric.
    pub fn value(&self, metric: &str) -> Option<f64> {
        self.metrics
            .iter()
            .find(|(m, _)| &**m == metric)
            .map(|(_, v)| *v)
    }
}

/// PC-sampling samples of one PC, per stall reason.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct StallRecord {
    /// Context id.
    pub context: u32,
    /// The function's name (mangled).
    pub function: Arc<str>,
    /// The PC's offset in the function.
    pub pc_offset: u64,
    /// (stall reason name, samples) pairs.
    pub stalls: Vec<(Arc<str>, u32)>,
}

/// What a profiler lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum ProfileLossKind {
    /// Kernel ranges the counter-data image had no room for.
    Ranges,
    /// PC samples the hardware dropped.
    PcSamples,
    /// A code newer than this crate.
    Other(u8),
}

impl ProfileLossKind {
    /// Wire code.
    pub fn code(self) -> u8 {
        match self {
            ProfileLossKind::Ranges => 1,
            ProfileLossKind::PcSamples => 2,
            ProfileLossKind::Other(c) => c,
        }
    }

    /// From the wire code.
    pub fn from_code(code: u8) -> Self {
        match code {
            1 => ProfileLossKind::Ranges,
            2 => ProfileLossKind::PcSamples,
            c => ProfileLossKind::Other(c),
        }
    }
}

/// Profiling data lost in the traced process (never silent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ProfileLoss {
    /// What was lost.
    pub kind: ProfileLossKind,
    /// How many.
    pub count: u64,
    /// Context id (0 when not known).
    pub context: u32,
}

/// Device-wide counter values over one sampling interval (NVIDIA PM sampling), from a sampler beside the traced
/// processes. Times are on the stream's clock like every record's; the values cover `[start, end)`.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CounterSample {
    /// Start of the interval, ns.
    pub start: u64,
    /// End of the interval, ns.
    pub end: u64,
    /// Device ordinal, as the traced processes' kernel records number it.
    pub device: u32,
    /// (metric name, value) pairs: rates and percentages as the hardware reports them over the interval, sums
    /// (`….sum`, bytes for example) as the amount in the interval.
    pub values: Vec<(Arc<str>, f64)>,
}

/// Equal when every field is, values compared by their bits (so a `NaN` equals itself).
impl PartialEq for CounterSample {
    fn eq(&self, o: &Self) -> bool {
        (self.start, self.end, self.device) == (o.start, o.end, o.device)
            && self.values.len() == o.values.len()
            && self
                .values
                .iter()
                .zip(&o.values)
                .all(|(a, b)| a.0 == b.0 && a.1.to_bits() == b.1.to_bits())
    }
}

impl Eq for CounterSample {}

impl CounterSample {
    /// The value of one metric.
    pub fn value(&self, metric: &str) -> Option<f64> {
        self.values
            .iter()
            .find(|(m, _)| &**m == metric)
            .map(|(_, v)| *v)
    }
}

/// Counter samples of a device that the sampler lost (`samples` > 0: the hardware or its buffer dropped them),
/// or a span with no sample at all (`samples` 0: the sampler was not sampling, for example while its
/// configuration restarted). Either way nothing is known of the device in `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CounterGap {
    /// Start of the span, ns.
    pub start: u64,
    /// End of the span, ns.
    pub end: u64,
    /// Device ordinal.
    pub device: u32,
    /// Samples lost in the span (0 for a gap where none were taken).
    pub samples: u64,
}
