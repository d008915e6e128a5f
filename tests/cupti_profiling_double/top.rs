//! `cupti::top`: one sampler per GPU, gaps apart from losses, GPUs left out or failing.

use super::*;
use gpu_tools::cupti::top::{Top, TopBuilder, TopRow};

/// Refreshes `top` until each GPU read `n` samples (or 10 s passed); returns every row.
fn refresh_until(top: &mut Top<'_>, n: u64) -> Vec<TopRow> {
    let mut rows = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while top.totals().iter().any(|(_, t)| t.samples < n) && Instant::now() < deadline {
        rows.extend(top.rows(Duration::from_millis(10)));
    }
    rows
}

#[test]
fn top_watches_every_gpu_by_default_one_sampler_each() {
    let (_g, d) = serial();
    d.set_devices(2);
    d.catalogue_top(true);
    let before = d.counts();
    let mut top = TopBuilder::new()
        .sample(Duration::from_micros(100))
        .start()
        .unwrap();
    let names: Vec<(u32, String)> = top
        .gpus()
        .iter()
        .map(|g| (g.index, g.name.clone()))
        .collect();
    assert_eq!(
        names,
        [
            (0, "gpu-tools test double".to_string()),
            (1, "gpu-tools test double 1".to_string())
        ]
    );
    assert_eq!(d.counts().pm_enabled, 2, "one PM sampler per GPU");
    for i in 0..20u64 {
        d.push_sample_on(0, i * 100_000, (i + 1) * 100_000, 10.0);
        d.push_sample_on(1, i * 100_000, (i + 1) * 100_000, 60.0);
    }
    let rows = refresh_until(&mut top, 20);
    let sm = |device: u32| {
        rows.iter()
            .find(|r| r.device == device && r.samples > 0)
            .map(|r| r.values[0])
    };
    // Metric i of the double is base + i: SM% is the base of each GPU's samples.
    assert_eq!((sm(0), sm(1)), (Some(10.0), Some(60.0)));
    let totals = top.totals();
    assert_eq!(
        totals
            .iter()
            .map(|(_, t)| (t.samples, t.lost, t.gaps))
            .collect::<Vec<_>>(),
        [(20, 0, 0), (20, 0, 0)]
    );
    drop(top);
    let after = d.counts();
    assert_eq!(after.pm_enabled, 0, "the counters are released");
    assert_eq!(
        after.pm_enables - before.pm_enables,
        after.pm_disables - before.pm_disables
    );
}

#[test]
fn top_counts_gaps_apart_from_losses() {
    let (_g, d) = serial();
    d.catalogue_top(true);
    let mut top = Top::start(&[0], Duration::from_micros(100)).unwrap();
    // An idle GPU's pattern: one period in ten without a sample, no overflow.
    for i in 0..50u64 {
        if i % 10 != 5 {
            d.push_sample(i * 100_000, (i + 1) * 100_000, 0.0);
        }
    }
    let rows = refresh_until(&mut top, 45);
    assert_eq!(rows.iter().map(|r| r.gaps).sum::<u64>(), 5);
    assert_eq!(rows.iter().map(|r| r.dropped).sum::<u64>(), 0);
    let (_, t) = &top.totals()[0];
    assert_eq!((t.samples, t.lost, t.gaps, t.read_errors), (45, 0, 5, 0));
    // Then an overflow with a hole: lost.
    d.overflow_next();
    d.push_sample(80 * 100_000, 81 * 100_000, 0.0);
    refresh_until(&mut top, 46);
    let (_, t) = &top.totals()[0];
    assert_eq!((t.samples, t.lost, t.gaps), (46, 30, 5));
}

#[test]
fn top_leaves_out_a_gpu_it_cannot_sample_unless_it_was_named() {
    let (_g, d) = serial();
    d.set_devices(2);
    d.catalogue_top(true);
    // Another client holds device 0's counters: every GPU by default watches device 1 and says why 0 is left out.
    let hold = pm(&[SM]).start().unwrap();
    let top = TopBuilder::new()
        .sample(Duration::from_micros(100))
        .start()
        .unwrap();
    assert_eq!(top.gpus().iter().map(|g| g.index).collect::<Vec<_>>(), [1]);
    assert_eq!(top.skipped().len(), 1);
    assert!(
        top.skipped()[0].1.contains("one PM client per GPU"),
        "{:?}",
        top.skipped()
    );
    drop(top);
    // Named, it must start.
    match TopBuilder::new().devices([0, 1]).start().map_err(profiling) {
        Err(ProfilingError::AlreadySampling { device: 0 }) => {}
        other => panic!("{other:?}"),
    }
    drop(hold);
    assert_eq!(d.counts().pm_enabled, 0, "nothing left enabled");
    // A device that does not exist, named.
    assert!(matches!(
        TopBuilder::new().devices([5]).start().map_err(profiling),
        Err(ProfilingError::NoSuchDevice { index: 5, count: 2 })
    ));
    // No device can be sampled: the first reason.
    d.set_busy(true);
    assert!(matches!(
        TopBuilder::new().start().map_err(profiling),
        Err(ProfilingError::CountersBusy { .. })
    ));
}

#[test]
fn top_reports_a_gpu_whose_decode_failed_and_reads_the_others() {
    let (_g, d) = serial();
    d.set_devices(2);
    d.catalogue_top(true);
    let mut top = TopBuilder::new()
        .sample(Duration::from_micros(100))
        .start()
        .unwrap();
    d.fail(c"cuptiPmSamplingDecodeData", 999);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut failed = Vec::new();
    while failed.len() < 2 && Instant::now() < deadline {
        failed = top
            .rows(Duration::from_millis(10))
            .into_iter()
            .filter(|r| r.error.is_some())
            .collect();
    }
    assert_eq!(failed.len(), 2, "both decode threads ended");
    assert!(
        failed[0]
            .error
            .as_deref()
            .unwrap()
            .contains("cuptiPmSamplingDecodeData")
    );
    assert!(top.totals().iter().all(|(_, t)| t.read_errors >= 1));
    d.clear_failure();
}
