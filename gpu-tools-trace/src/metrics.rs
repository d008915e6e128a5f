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
