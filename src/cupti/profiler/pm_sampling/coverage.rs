//! How a sampler's samples cover the GPU's time: stale spans told apart, missing sampling periods counted as lost
//! (a reported overflow explains them) or as gaps. Pure, tested without a GPU.

/// Where an overflow CUPTI reported stands. The hardware buffer loses a run of records when it overflows: its
/// oldest ones (kept latest), which leaves a hole among the samples of the decode that reports it, or its newest
/// (kept oldest), which leaves a hole before the first sample of the next decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Overflow {
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
