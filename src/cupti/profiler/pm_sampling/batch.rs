//! The samples of one decode as the decode thread hands them over: [`PmBatch`] and its [`SampleRef`]s, borrowed for
//! the duration of a callback.

use crate::counters::DeviceSample;

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
    pub(super) gaps: u64,
    overflow: bool,
    pub(super) counter_data: Option<(&'a [u8], usize)>,
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
    /// (with [`PmSamplerBuilder::keep_counter_data`](super::PmSamplerBuilder::keep_counter_data)); to save it as recorded data.
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

    /// Samples lost just before or within this batch (see [`PmStats::dropped`](super::PmStats::dropped)).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Sampling periods without a sample, and no loss reported, before or within this batch (see
    /// [`PmStats::gaps`](super::PmStats::gaps)).
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
