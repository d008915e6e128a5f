use super::builder::unit_of;
use super::coverage::{Coverage, gap_samples, is_stale, missed_periods};
use super::decoder::DecodeCounts;
use super::*;
use crate::cupti::profiler::ProfilingError;

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
