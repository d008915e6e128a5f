//! Device counter samples on a trace's timeline: what `gpu-tools trace --counters` writes beside the traced
//! processes' streams, as a counter stream ([`crate::trace::counters`]).
//!
//! A [`CounterTimeline`] turns what a [`DeviceCounters`](super::DeviceCounters) sampler reads into the trace's
//! records:
//! - each sample's span is moved onto the host's `CLOCK_MONOTONIC`, the clock of the injection libraries' streams
//!   ([`to_monotonic`]);
//! - samples are clipped to the span the trace covers (from the launch or attach to the end of the last traced
//!   process's stream): NVIDIA's first sample starts seconds early, and samples after the end are of no process;
//! - every stretch of that span that no sample covers becomes a [`CounterGap`]: with the samples the sampler
//!   reported lost in it, or with none (a gap: no sample was taken and nothing was lost, as an idle GPU or a
//!   restart of the sampler's configuration leaves).
//!
//! [`counter_stream`] starts the stream the records go into.
//!
//! **Clocks.** NVIDIA's PM samples carry the GPU's global timer, which the driver keeps on the host's wall clock
//! (nanoseconds since the Unix epoch, [`SampleClock::GpuGlobalTimer`]). They are moved to `CLOCK_MONOTONIC` by the
//! difference of the two host clocks, read with a [`ClockAnchor`] at each batch; the difference is kept until it
//! moves by more than [`CLOCK_STEP_NS`] (the wall clock was set), so reading noise does not shift samples against
//! each other. How closely the GPU's timer follows the wall clock is the driver's business: the accuracy of the
//! placement is measured on the GPU host (`benches/gpu/counters_accuracy.sh` in the repository).
//!
//! **Where losses go.** A read says how many samples were lost since the previous one, not where. They are placed
//! in the holes before the read's samples, in order, each hole taking at most the sampling periods it spans; any
//! left over (an overflow that left no hole, samples dropped from a full queue) is a gap of zero length at the end
//! of the last sample. A hole is a stretch of at least half a sampling period (of the last sample's length where
//! the period is a number of clocks) between two samples, or between the trace's start and the first sample;
//! shorter ones are rounding. After the last sample, the period the trace ended in was not over and has no
//! sample: only a stretch of one and a half periods or more is a gap there.
//!
//! ```
//! use std::sync::Arc;
//! use gpu_tools::counters::timeline::CounterTimeline;
//! use gpu_tools::counters::{CounterInfo, DeviceSample, SampleClock};
//! use gpu_tools::trace::{ClockAnchor, Record};
//!
//! let counters = [CounterInfo { name: "sm__cycles_active.avg.pct_of_peak_sustained_elapsed".into(), unit: "%".into() }];
//! let ms = 1_000_000;
//! // A trace from 10 ms to 14 ms on CLOCK_MONOTONIC, samples of 1 ms on a clock that is already monotonic.
//! let mut t = CounterTimeline::new(0, &counters, SampleClock::HostMonotonic, Some(ms), 10 * ms).unwrap();
//! let sample = |start: u64| DeviceSample { start_ns: start * ms, end_ns: (start + 1) * ms, values: vec![50.0] };
//! let anchor = ClockAnchor::now();
//! let mut out = Vec::new();
//! t.add(&[sample(9), sample(10), sample(13)], 0, &anchor, &mut out);
//! t.finish(14 * ms, &mut out);
//! // 10–11 ms sampled, 11–13 ms a gap, 13–14 ms sampled; the sample before the trace is left out.
//! assert_eq!(out.len(), 3);
//! assert!(matches!(&out[1], Record::CounterGap(g) if (g.start, g.end, g.samples) == (11 * ms, 13 * ms, 0)));
//! assert_eq!((t.totals().samples, t.totals().gaps, t.totals().outside), (2, 1, 1));
//! ```

use std::sync::Arc;

use super::{CounterInfo, DeviceSample, SampleClock};
use crate::trace::counters::COUNTER_STREAM_PID;
use crate::trace::{
    ClockAnchor, CounterGap, CounterSample, Encoder, ProcessInfo, Record, StreamHeader,
    TimestampClock,
};

/// A change of the wall clock against `CLOCK_MONOTONIC` larger than this is taken as the wall clock being set,
/// and samples are placed with the new difference from then on; smaller ones are reading noise.
pub const CLOCK_STEP_NS: u64 = 1_000_000;

/// A sampler's clock that cannot be put on the host's `CLOCK_MONOTONIC`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("samples on the {0:?} clock cannot be placed on the host's CLOCK_MONOTONIC")]
pub struct UnplacedClock(pub SampleClock);

/// A time `t` of `clock` on the host's `CLOCK_MONOTONIC`, by the difference of the host's clocks in `anchor` (for
/// [`SampleClock::GpuGlobalTimer`], whose values are wall-clock nanoseconds). `None` for a clock that cannot be
/// placed, or a time before the monotonic clock's zero.
pub fn to_monotonic(clock: SampleClock, t: u64, anchor: &ClockAnchor) -> Option<u64> {
    match clock {
        SampleClock::HostMonotonic => Some(t),
        SampleClock::GpuGlobalTimer => u64::try_from(i128::from(t) - anchor.offset()).ok(),
        _ => None,
    }
}

/// Starts a counter stream: an encoder that holds its header (pid 0, `CLOCK_MONOTONIC`, the vendor library's
/// version; send its bytes, then clear it), and the records that come first, not pushed yet: a clock anchor read
/// now, and the host (name and boot id, no rank labels: the tracer is no rank).
pub fn counter_stream(vendor_version: u32) -> (Encoder, Vec<Record>) {
    let encoder = Encoder::new(&StreamHeader::new(
        COUNTER_STREAM_PID,
        vendor_version,
        TimestampClock::Monotonic,
    ));
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let first = vec![
        Record::ClockAnchor(ClockAnchor::now()),
        Record::ProcessInfo(ProcessInfo::from_lookup(
            crate::trace::host_name(),
            boot_id,
            |_| None,
        )),
    ];
    (encoder, first)
}

/// What a [`CounterTimeline`] wrote so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct TimelineTotals {
    /// Samples written (within the trace's span).
    pub samples: u64,
    /// Samples the sampler reported lost, in the gaps written.
    pub lost: u64,
    /// Gaps written with no sample lost: stretches of the span without samples.
    pub gaps: u64,
    /// Nanoseconds those gaps cover.
    pub gap_ns: u64,
    /// Samples left out: outside the trace's span, or covered by the sample before them.
    pub outside: u64,
    /// Times the wall clock was seen set against `CLOCK_MONOTONIC` ([`CLOCK_STEP_NS`]).
    pub clock_steps: u64,
}

/// One device's samples as records of a counter stream, on `CLOCK_MONOTONIC`, clipped to the trace's span, with
/// the stretches without samples as gaps (the module docs say how).
#[derive(Debug, Clone)]
pub struct CounterTimeline {
    device: u32,
    metrics: Vec<Arc<str>>,
    clock: SampleClock,
    period_ns: Option<u64>,
    end: Option<u64>,
    /// The end of the last sample written, or the span's start.
    covered_to: u64,
    /// The length of the last sample with one.
    last_len: Option<u64>,
    /// The difference of the host's clocks in use (`realtime - monotonic`).
    offset: Option<i128>,
    totals: TimelineTotals,
}

impl CounterTimeline {
    /// A timeline of the samples of `counters` (in their order) for trace device `device`, on `clock`, taken every
    /// `period_ns` (`None` where the period is a number of clocks), for a trace that starts at `start` (ns on
    /// `CLOCK_MONOTONIC`).
    pub fn new(
        device: u32,
        counters: &[CounterInfo],
        clock: SampleClock,
        period_ns: Option<u64>,
        start: u64,
    ) -> Result<Self, UnplacedClock> {
        if !matches!(
            clock,
            SampleClock::HostMonotonic | SampleClock::GpuGlobalTimer
        ) {
            return Err(UnplacedClock(clock));
        }
        Ok(CounterTimeline {
            device,
            metrics: counters
                .iter()
                .map(|c| Arc::from(c.name.as_str()))
                .collect(),
            clock,
            period_ns: period_ns.filter(|&p| p > 0),
            end: None,
            covered_to: start,
            last_len: None,
            offset: None,
            totals: TimelineTotals::default(),
        })
    }

    /// The trace device the records name.
    pub fn device(&self) -> u32 {
        self.device
    }

    /// What was written so far.
    pub fn totals(&self) -> TimelineTotals {
        self.totals
    }

    /// The clocks' difference to place samples by: the one in use, or the anchor's where none is or the wall clock
    /// was set since.
    fn anchor(&mut self, anchor: &ClockAnchor) -> ClockAnchor {
        let offset = anchor.offset();
        match self.offset {
            Some(o) if (o - offset).unsigned_abs() <= u128::from(CLOCK_STEP_NS) => {}
            Some(_) => {
                self.totals.clock_steps += 1;
                self.offset = Some(offset);
            }
            None => self.offset = Some(offset),
        }
        let used = self.offset.unwrap_or(offset);
        // An anchor with the difference in use: monotonic 0, realtime = the difference (clamped to the clock's
        // range; a difference below zero means a wall clock before the boot, which no sample has).
        ClockAnchor {
            monotonic: 0,
            realtime: u64::try_from(used.max(0)).unwrap_or(u64::MAX),
            uncertainty: anchor.uncertainty,
        }
    }

    /// The records of one read's samples (oldest first) and the samples the read reported lost, appended to `out`;
    /// `anchor` is a reading of the host's clocks taken about now.
    pub fn add(
        &mut self,
        samples: &[DeviceSample],
        lost: u64,
        anchor: &ClockAnchor,
        out: &mut Vec<Record>,
    ) {
        let anchor = self.anchor(anchor);
        let mut unplaced = lost;
        for s in samples {
            let span = to_monotonic(self.clock, s.start_ns, &anchor)
                .zip(to_monotonic(self.clock, s.end_ns, &anchor));
            let Some((start, end)) = span else {
                self.totals.outside += 1;
                continue;
            };
            let end = self.end.map_or(end, |e| end.min(e));
            let start = start.max(self.covered_to);
            if end <= start {
                self.totals.outside += 1;
                continue;
            }
            self.hole(start, &mut unplaced, out);
            out.push(Record::CounterSample(CounterSample {
                start,
                end,
                device: self.device,
                values: self
                    .metrics
                    .iter()
                    .cloned()
                    .zip(s.values.iter().copied())
                    .collect(),
            }));
            self.totals.samples += 1;
            self.covered_to = end;
            self.last_len = s
                .end_ns
                .checked_sub(s.start_ns)
                .filter(|&l| l > 0)
                .or(self.last_len);
        }
        if unplaced > 0 {
            self.gap(self.covered_to, unplaced, out);
        }
    }

    /// After the last read, with the trace's end (ns on `CLOCK_MONOTONIC`): the stretch from the last sample (or
    /// the start) to the end as a gap where a whole sampling period in it had no sample (the period the trace
    /// ended in was not over, and has none).
    pub fn finish(&mut self, end: u64, out: &mut Vec<Record>) {
        self.end = Some(end);
        let len = end.saturating_sub(self.covered_to);
        let whole_period_missed = match self.period_ns.or(self.last_len) {
            Some(p) => len.saturating_mul(2) >= p.saturating_mul(3),
            None => len > 0,
        };
        if whole_period_missed {
            self.gap(end, 0, out);
        }
    }

    /// Sets the trace's end before the last reads, so that they are clipped to it ([`finish`](Self::finish) sets
    /// it too).
    pub fn set_end(&mut self, end: u64) {
        self.end = Some(end);
    }

    /// The stretch from the last sample to `until`, as a gap where it is one, with as many of `unplaced` as the
    /// periods it spans.
    fn hole(&mut self, until: u64, unplaced: &mut u64, out: &mut Vec<Record>) {
        let len = until.saturating_sub(self.covered_to);
        let period = self.period_ns.or(self.last_len);
        let is_hole = match period {
            Some(p) => len > 0 && len.saturating_mul(2) >= p,
            None => len > 0,
        };
        if !is_hole {
            return;
        }
        let periods = period.map_or(1, |p| (len.saturating_add(p / 2) / p).max(1));
        let lost = periods.min(*unplaced);
        *unplaced -= lost;
        self.gap(until, lost, out);
    }

    /// A gap from the last sample to `until` with `lost` samples lost in it.
    fn gap(&mut self, until: u64, lost: u64, out: &mut Vec<Record>) {
        let start = self.covered_to;
        out.push(Record::CounterGap(CounterGap {
            start,
            end: until,
            device: self.device,
            samples: lost,
        }));
        if lost > 0 {
            self.totals.lost += lost;
        } else {
            self.totals.gaps += 1;
            self.totals.gap_ns += until.saturating_sub(start);
        }
        self.covered_to = self.covered_to.max(until);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn counters() -> Vec<CounterInfo> {
        ["a.pct", "b.sum.per_second"]
            .iter()
            .map(|n| CounterInfo {
                name: n.to_string(),
                unit: String::new(),
            })
            .collect()
    }

    fn sample(start: u64, end: u64) -> DeviceSample {
        DeviceSample {
            start_ns: start,
            end_ns: end,
            values: vec![1.0, 2.0],
        }
    }

    /// Samples of 1 ms starting at each of `starts` (in ms).
    fn at(starts: &[u64]) -> Vec<DeviceSample> {
        starts
            .iter()
            .map(|&s| sample(s * MS, (s + 1) * MS))
            .collect()
    }

    fn monotonic_anchor() -> ClockAnchor {
        ClockAnchor {
            monotonic: 0,
            realtime: 0,
            uncertainty: 0,
        }
    }

    /// (kind, start, end, device, lost) of each record: 's' a sample, 'g' a gap.
    fn shape(records: &[Record]) -> Vec<(char, u64, u64, u32, u64)> {
        records
            .iter()
            .map(|r| match r {
                Record::CounterSample(s) => ('s', s.start, s.end, s.device, 0),
                Record::CounterGap(g) => ('g', g.start, g.end, g.device, g.samples),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn wall_clock_samples_move_to_the_monotonic_clock() {
        let anchor = ClockAnchor {
            monotonic: 5_000 * MS,
            realtime: 1_700_000_000_000 * MS,
            uncertainty: 40,
        };
        let wall = anchor.realtime + 3 * MS;
        assert_eq!(
            to_monotonic(SampleClock::GpuGlobalTimer, wall, &anchor),
            Some(5_003 * MS)
        );
        assert_eq!(
            to_monotonic(SampleClock::HostMonotonic, 7, &anchor),
            Some(7)
        );
        assert_eq!(to_monotonic(SampleClock::Vendor, 7, &anchor), None);
        assert_eq!(
            to_monotonic(SampleClock::GpuGlobalTimer, 7, &anchor),
            None,
            "before the monotonic clock's zero"
        );
        assert_eq!(
            CounterTimeline::new(0, &counters(), SampleClock::Vendor, Some(MS), 0).unwrap_err(),
            UnplacedClock(SampleClock::Vendor)
        );
        // A whole timeline on the wall clock: the records come out on the monotonic one, device and values kept.
        let mut t = CounterTimeline::new(
            3,
            &counters(),
            SampleClock::GpuGlobalTimer,
            Some(MS),
            5_000 * MS,
        )
        .unwrap();
        let mut out = Vec::new();
        t.add(&[sample(wall, wall + MS)], 0, &anchor, &mut out);
        t.finish(5_004 * MS, &mut out);
        assert_eq!(
            shape(&out),
            [
                ('g', 5_000 * MS, 5_003 * MS, 3, 0),
                ('s', 5_003 * MS, 5_004 * MS, 3, 0)
            ]
        );
        let Record::CounterSample(s) = &out[1] else {
            panic!()
        };
        assert_eq!(s.value("a.pct"), Some(1.0));
        assert_eq!(s.value("b.sum.per_second"), Some(2.0));
    }

    #[test]
    fn samples_are_clipped_to_the_span() {
        let mut t = CounterTimeline::new(
            0,
            &counters(),
            SampleClock::HostMonotonic,
            Some(MS),
            10 * MS,
        )
        .unwrap();
        let mut out = Vec::new();
        // The first sample of a PM sampler starts seconds early; one sample ends before the trace.
        t.add(
            &[sample(2 * MS, 9 * MS), sample(9 * MS, 10 * MS + MS / 2)],
            0,
            &monotonic_anchor(),
            &mut out,
        );
        t.add(&at(&[10, 11]), 0, &monotonic_anchor(), &mut out);
        t.set_end(12 * MS + MS / 4);
        t.add(&at(&[12, 13]), 0, &monotonic_anchor(), &mut out);
        t.finish(12 * MS + MS / 4, &mut out);
        assert_eq!(
            shape(&out),
            [
                ('s', 10 * MS, 10 * MS + MS / 2, 0, 0),
                ('s', 10 * MS + MS / 2, 11 * MS, 0, 0),
                ('s', 11 * MS, 12 * MS, 0, 0),
                ('s', 12 * MS, 12 * MS + MS / 4, 0, 0),
            ],
            "clipped at both ends; the overlap of the straddling sample's successor is cut"
        );
        assert_eq!(
            t.totals(),
            TimelineTotals {
                samples: 4,
                outside: 2,
                ..TimelineTotals::default()
            }
        );
    }

    #[test]
    fn holes_are_gaps_unless_losses_explain_them() {
        let mut t =
            CounterTimeline::new(1, &counters(), SampleClock::HostMonotonic, Some(MS), 0).unwrap();
        let mut out = Vec::new();
        // 0, 1, then 2–5 missing with 3 lost reported: the hole takes the 3; then 7 after a gap of one period.
        t.add(&at(&[0, 1, 5]), 3, &monotonic_anchor(), &mut out);
        t.add(&at(&[7]), 0, &monotonic_anchor(), &mut out);
        // A loss that no hole shows: a zero-length gap at the last sample's end.
        t.add(&at(&[8]), 2, &monotonic_anchor(), &mut out);
        // Rounding: a hole of a third of a period is none.
        t.add(
            &[sample(9 * MS + MS / 3, 10 * MS)],
            0,
            &monotonic_anchor(),
            &mut out,
        );
        t.finish(13 * MS, &mut out);
        assert_eq!(
            shape(&out),
            [
                ('s', 0, MS, 1, 0),
                ('s', MS, 2 * MS, 1, 0),
                ('g', 2 * MS, 5 * MS, 1, 3),
                ('s', 5 * MS, 6 * MS, 1, 0),
                ('g', 6 * MS, 7 * MS, 1, 0),
                ('s', 7 * MS, 8 * MS, 1, 0),
                ('s', 8 * MS, 9 * MS, 1, 0),
                ('g', 9 * MS, 9 * MS, 1, 2),
                ('s', 9 * MS + MS / 3, 10 * MS, 1, 0),
                ('g', 10 * MS, 13 * MS, 1, 0),
            ]
        );
        assert_eq!(
            t.totals(),
            TimelineTotals {
                samples: 6,
                lost: 5,
                gaps: 2,
                gap_ns: 4 * MS,
                outside: 0,
                clock_steps: 0,
            }
        );
    }

    #[test]
    fn losses_beyond_a_hole_stay_for_the_next() {
        let mut t =
            CounterTimeline::new(0, &counters(), SampleClock::HostMonotonic, Some(MS), 0).unwrap();
        let mut out = Vec::new();
        t.add(&at(&[0, 2, 5]), 3, &monotonic_anchor(), &mut out);
        // The first hole spans one period and takes one loss; the second two, and takes the other two.
        assert_eq!(
            shape(&out),
            [
                ('s', 0, MS, 0, 0),
                ('g', MS, 2 * MS, 0, 1),
                ('s', 2 * MS, 3 * MS, 0, 0),
                ('g', 3 * MS, 5 * MS, 0, 2),
                ('s', 5 * MS, 6 * MS, 0, 0),
            ]
        );
    }

    #[test]
    fn the_period_the_trace_ends_in_is_no_gap() {
        let end_after = |end: u64| {
            let mut t =
                CounterTimeline::new(0, &counters(), SampleClock::HostMonotonic, Some(MS), 0)
                    .unwrap();
            let mut out = Vec::new();
            t.add(&at(&[0, 1]), 0, &monotonic_anchor(), &mut out);
            t.finish(end, &mut out);
            shape(&out[2..])
        };
        assert_eq!(end_after(2 * MS + 9 * MS / 10), [], "not over");
        assert_eq!(
            end_after(3 * MS + MS / 3),
            [],
            "one period over: its sample may still come short of it"
        );
        assert_eq!(
            end_after(3 * MS + MS / 2),
            [('g', 2 * MS, 3 * MS + MS / 2, 0, 0)]
        );
    }

    #[test]
    fn a_span_without_samples_is_one_gap() {
        let mut t =
            CounterTimeline::new(0, &counters(), SampleClock::HostMonotonic, None, 4 * MS).unwrap();
        let mut out = Vec::new();
        t.add(&at(&[1]), 0, &monotonic_anchor(), &mut out);
        t.finish(6 * MS, &mut out);
        assert_eq!(shape(&out), [('g', 4 * MS, 6 * MS, 0, 0)]);
        assert_eq!((t.totals().gaps, t.totals().outside), (1, 1));
        // A clock interval (no period): the last sample's length measures holes.
        let mut t =
            CounterTimeline::new(0, &counters(), SampleClock::HostMonotonic, None, 0).unwrap();
        let mut out = Vec::new();
        t.add(
            &[
                sample(0, 10),
                sample(10, 20),
                sample(24, 34),
                sample(40, 50),
            ],
            0,
            &monotonic_anchor(),
            &mut out,
        );
        t.finish(50, &mut out);
        assert_eq!(
            shape(&out),
            [
                ('s', 0, 10, 0, 0),
                ('s', 10, 20, 0, 0),
                ('s', 24, 34, 0, 0),
                ('g', 34, 40, 0, 0),
                ('s', 40, 50, 0, 0),
            ]
        );
    }

    #[test]
    fn the_clocks_difference_moves_only_when_the_wall_clock_is_set() {
        let mut t =
            CounterTimeline::new(0, &counters(), SampleClock::GpuGlobalTimer, Some(MS), 0).unwrap();
        let anchor = |offset_ns: u64| ClockAnchor {
            monotonic: 100 * MS,
            realtime: 100 * MS + offset_ns,
            uncertainty: 0,
        };
        let base = 1_000_000 * MS;
        let mut out = Vec::new();
        t.add(&[sample(base, base + MS)], 0, &anchor(base), &mut out);
        // Reading noise of 20 us: the samples still tile.
        t.add(
            &[sample(base + MS, base + 2 * MS)],
            0,
            &anchor(base + 20_000),
            &mut out,
        );
        // The wall clock set 5 s ahead: the next sample carries a wall time 5 s later too.
        let later = base + 5_000 * MS;
        t.add(
            &[sample(later + 2 * MS, later + 3 * MS)],
            0,
            &anchor(later),
            &mut out,
        );
        assert_eq!(
            shape(&out),
            [
                ('s', 0, MS, 0, 0),
                ('s', MS, 2 * MS, 0, 0),
                ('s', 2 * MS, 3 * MS, 0, 0)
            ]
        );
        assert_eq!(t.totals().clock_steps, 1);
    }

    #[test]
    fn the_counter_stream_starts_with_its_header_anchor_and_host() {
        let (mut encoder, first) = counter_stream(130_000);
        for r in &first {
            encoder.push(r);
        }
        let mut d = crate::trace::Decoder::new();
        d.feed(encoder.bytes());
        let mut records = Vec::new();
        while let Some(r) = d.next_record().unwrap() {
            records.push(r);
        }
        let header = *d.header().expect("a header");
        assert_eq!(
            (header.pid, header.vendor_version, header.clock),
            (0, 130_000, TimestampClock::Monotonic)
        );
        assert_eq!(records, first);
        assert!(matches!(records[0], Record::ClockAnchor(a) if a.monotonic > 0));
        let Record::ProcessInfo(info) = &records[1] else {
            panic!("{records:?}")
        };
        assert!(!info.host.is_empty() && info.labels.is_empty(), "{info:?}");
        assert_eq!(records.len(), 2);
    }
}
