//! The notices of an attached profile (`gpu-tools profile --pid`) whose numbers the tool reads back: the stream
//! carries notices as text, so each is written and read here, in one place, and the two sides cannot drift apart.
//! Each reader takes its own writer's text only: a text that its writer would not have written is `None`.

/// The integers of `text`, in order (runs of ASCII digits).
fn integers(text: &str) -> Vec<u64> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// What CUPTI counted in one context's PC sampling, said whatever came of it: a window without stall records is
/// judged by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PcCounts {
    /// CUPTI's id of the context.
    pub context: u32,
    /// Samples CUPTI counted, in every kernel and reason.
    pub samples: u64,
    /// PC records it gave (one per function and PC).
    pub records: u64,
    /// Samples the hardware dropped.
    pub dropped: u64,
    /// Samples in kernels CUPTI does not give records for (its "non-user kernels").
    pub non_user: u64,
    /// PCs beyond the sampler's read buffer (read again later).
    pub truncated_pcs: u64,
    /// Reads during which the hardware buffer was full.
    pub full_buffer_reads: u64,
}

impl PcCounts {
    /// The notice's text.
    pub fn text(&self) -> String {
        format!(
            "context {}: PC sampling counted {} samples in {} PC records ({} dropped, {} outside the program's \
             kernels, {} PCs beyond the read buffer, {} reads with a full hardware buffer)",
            self.context,
            self.samples,
            self.records,
            self.dropped,
            self.non_user,
            self.truncated_pcs,
            self.full_buffer_reads
        )
    }

    /// The counts of a [`text`](Self::text).
    pub fn parse(text: &str) -> Option<PcCounts> {
        let n = integers(text);
        let [
            context,
            samples,
            records,
            dropped,
            non_user,
            truncated_pcs,
            full_buffer_reads,
        ] = n[..]
        else {
            return None;
        };
        let counts = PcCounts {
            context: u32::try_from(context).ok()?,
            samples,
            records,
            dropped,
            non_user,
            truncated_pcs,
            full_buffer_reads,
        };
        (counts.text() == text).then_some(counts)
    }
}

/// What made attached kernel metrics end before the tracer finished them, on the program's thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsEnd {
    /// The program's first CUDA graph launch.
    GraphLaunch,
    /// The program's first stream capture.
    CaptureBegin,
}

impl MetricsEnd {
    /// What it is, in a sentence.
    pub fn what(self) -> &'static str {
        match self {
            MetricsEnd::GraphLaunch => "the program's first CUDA graph launch",
            MetricsEnd::CaptureBegin => "the program's first stream capture",
        }
    }
}

/// Attached kernel metrics ended before `before`, with `launches` profiled until then (sent before it): said once
/// the range profiler is off, so that the counters are free for another tool from then on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsEnded {
    /// What ended them.
    pub before: MetricsEnd,
    /// Launches profiled until then.
    pub launches: u64,
}

impl MetricsEnded {
    /// The notice's text.
    pub fn text(&self) -> String {
        format!(
            "kernel metrics ended before {}, the range profiler off: {} launches profiled",
            self.before.what(),
            self.launches
        )
    }

    /// The notice of a [`text`](Self::text).
    pub fn parse(text: &str) -> Option<MetricsEnded> {
        let [launches] = integers(text)[..] else {
            return None;
        };
        [MetricsEnd::GraphLaunch, MetricsEnd::CaptureBegin]
            .into_iter()
            .map(|before| MetricsEnded { before, launches })
            .find(|m| m.text() == text)
    }
}

/// Kernel metrics whose ranges could not be named (the program holds CUPTI's callback subscriber): one context's
/// ranges, numbered in launch order, the first `shown` sent as notices of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NumberedRanges {
    /// CUPTI's id of the context.
    pub context: u32,
    /// Ranges profiled.
    pub ranges: u64,
    /// Ranges whose values were sent.
    pub shown: u64,
    /// Ranges CUPTI dropped.
    pub dropped: u64,
}

impl NumberedRanges {
    /// The notice's text.
    pub fn text(&self) -> String {
        format!(
            "context {}: {} ranges ({} shown), {} dropped",
            self.context, self.ranges, self.shown, self.dropped
        )
    }

    /// The counts of a [`text`](Self::text).
    pub fn parse(text: &str) -> Option<NumberedRanges> {
        let [context, ranges, shown, dropped] = integers(text)[..] else {
            return None;
        };
        let r = NumberedRanges {
            context: u32::try_from(context).ok()?,
            ranges,
            shown,
            dropped,
        };
        (r.text() == text).then_some(r)
    }
}

/// Said when PC sampling starts in a process in which CUPTI's range profiler ran before (a kernel-metrics attach
/// of an earlier `profile --pid`): PC sampling after it was seen to give no records.
pub const PC_AFTER_RANGE_PROFILER: &str = "PC sampling starts in a process in which CUPTI's range profiler ran \
     before (an earlier kernel-metrics attach): PC sampling after it was seen to give no stall records";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pc_counts_are_read_back_from_their_own_notice_only() {
        let c = PcCounts {
            context: 1,
            samples: 914_554,
            records: 0,
            dropped: 2,
            non_user: 914_554,
            truncated_pcs: 3,
            full_buffer_reads: 4,
        };
        assert_eq!(
            c.text(),
            "context 1: PC sampling counted 914554 samples in 0 PC records (2 dropped, 914554 outside the \
             program's kernels, 3 PCs beyond the read buffer, 4 reads with a full hardware buffer)"
        );
        assert_eq!(PcCounts::parse(&c.text()), Some(c));
        assert_eq!(PcCounts::parse(&c.text().replace("counted", "saw")), None);
        assert_eq!(
            PcCounts::parse("context 1: 7 ranges (7 shown), 0 dropped"),
            None
        );
    }

    #[test]
    fn an_early_end_says_what_ended_it_and_the_launches_profiled() {
        for before in [MetricsEnd::GraphLaunch, MetricsEnd::CaptureBegin] {
            let m = MetricsEnded {
                before,
                launches: 9,
            };
            assert_eq!(MetricsEnded::parse(&m.text()), Some(m));
        }
        assert!(
            MetricsEnded {
                before: MetricsEnd::GraphLaunch,
                launches: 9
            }
            .text()
            .contains("before the program's first CUDA graph launch")
        );
        assert_eq!(
            MetricsEnded::parse("kernel metrics end at 3 launches"),
            None
        );
    }

    #[test]
    fn numbered_ranges_are_read_back() {
        let r = NumberedRanges {
            context: 3,
            ranges: 50,
            shown: 40,
            dropped: 1,
        };
        assert_eq!(NumberedRanges::parse(&r.text()), Some(r));
        assert_eq!(
            NumberedRanges::parse(&r.text().replace("ranges", "kernels")),
            None
        );
    }
}
