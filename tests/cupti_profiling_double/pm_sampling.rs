//! The PM sampler's decode thread: values and timestamps, full images, overflow and gaps, the one-client rule,
//! release on stop and drop, callbacks and their panics, decode errors.

use super::*;

fn read_until(s: &mut PmSampler, n: usize) -> Vec<gpu_tools::counters::DeviceSample> {
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while out.len() < n && Instant::now() < deadline {
        s.read(Duration::from_millis(100), &mut out).unwrap();
    }
    out
}

#[test]
fn pm_samples_carry_timestamps_and_one_value_per_metric() {
    let (_g, d) = serial();
    let mut s = pm(&[SM, DRAM]).start().unwrap();
    assert_eq!(s.metrics(), &[SM.to_string(), DRAM.to_string()]);
    assert_eq!(s.counters()[1].unit, "byte");
    assert_eq!(s.clock(), SampleClock::GpuGlobalTimer);
    assert_eq!(s.device().index, 0);
    assert_eq!(s.layout().chip, "GH100");
    for i in 0..10u64 {
        d.push_sample(1000 + i * 100, 1100 + i * 100, i as f64);
    }
    let got = read_until(&mut s, 10);
    assert_eq!(got.len(), 10);
    assert_eq!((got[3].start_ns, got[3].end_ns), (1300, 1400));
    assert_eq!(got[3].values, vec![3.0, 4.0]);
    let report = s.stop().unwrap();
    assert_eq!(
        (
            report.stats.samples,
            report.stats.dropped,
            report.stats.overflows
        ),
        (10, 0, 0)
    );
    let c = d.counts();
    assert_eq!(
        (c.pm_enabled, c.pm_enables, c.pm_disables),
        (0, c.pm_disables, c.pm_enables)
    );
}

#[test]
fn a_full_image_is_decoded_again_and_nothing_is_lost() {
    let (_g, d) = serial();
    let mut s = pm(&[SM]).samples_per_decode(3).start().unwrap();
    for i in 0..11u64 {
        d.push_sample(i * 10, i * 10 + 10, i as f64);
    }
    let got = read_until(&mut s, 11);
    assert_eq!(
        got.iter().map(|x| x.values[0]).collect::<Vec<_>>(),
        (0..11).map(|i| i as f64).collect::<Vec<_>>()
    );
    let st = s.stop().unwrap().stats;
    assert!(st.image_full >= 3, "{st:?}");
    assert_eq!(st.samples, 11);
}

#[test]
fn overflow_and_gaps_are_reported() {
    let (_g, d) = serial();
    let mut s = pm(&[SM]).start().unwrap();
    // Samples every 100 us, the sampler's interval.
    d.push_sample(0, 100_000, 0.0);
    d.push_sample(100_000, 200_000, 1.0);
    // Three samples missing, and the decode that finds the next one reports an overflow: they were lost.
    d.overflow_next();
    d.push_sample(500_000, 600_000, 2.0);
    let mut out = Vec::new();
    let (mut dropped, mut gaps) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while out.len() < 3 && Instant::now() < deadline {
        let status = s.read(Duration::from_millis(100), &mut out).unwrap();
        dropped += status.dropped;
        gaps += status.gaps;
    }
    assert_eq!((dropped, gaps), (3, 0));
    let st = s.stop().unwrap().stats;
    assert_eq!((st.dropped, st.overflows, st.gaps), (3, 1, 0));
}

/// Reads until `n` samples came; returns them and the summed loss and gap counts of the reads.
fn read_counting(
    s: &mut PmSampler,
    n: usize,
) -> (Vec<gpu_tools::counters::DeviceSample>, u64, u64) {
    let mut out = Vec::new();
    let (mut dropped, mut gaps) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while out.len() < n && Instant::now() < deadline {
        let status = s.read(Duration::from_millis(100), &mut out).unwrap();
        dropped += status.dropped;
        gaps += status.gaps;
    }
    (out, dropped, gaps)
}

#[test]
fn periods_without_a_sample_and_no_overflow_are_gaps_not_losses() {
    let (_g, d) = serial();
    let mut s = pm(&[SM]).start().unwrap();
    // Samples every 100 us with one period in ten missing and no overflow reported, as on an idle H100.
    let mut pushed = 0;
    for i in 0..100u64 {
        if i % 10 != 5 {
            d.push_sample(i * 100_000, (i + 1) * 100_000, i as f64);
            pushed += 1;
        }
    }
    let (got, dropped, gaps) = read_counting(&mut s, pushed);
    assert_eq!((got.len(), dropped, gaps), (90, 0, 10));
    let st = s.stop().unwrap().stats;
    assert_eq!(
        (st.samples, st.dropped, st.gaps, st.overflows),
        (90, 0, 10, 0),
        "{st:?}"
    );
}

#[test]
fn an_overflow_that_no_missing_period_shows_still_counts_one_loss() {
    let (_g, d) = serial();
    let mut s = pm(&[SM]).start().unwrap();
    d.push_sample(0, 100_000, 0.0);
    let (got, _, _) = read_counting(&mut s, 1);
    assert_eq!(got.len(), 1);
    d.overflow_next();
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.stats().overflows == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let st = s.stop().unwrap().stats;
    assert_eq!((st.overflows, st.dropped, st.gaps), (1, 1, 0), "{st:?}");
}

#[test]
fn recorded_h100_sample_spans_have_no_gap_and_no_loss() {
    // The spans PM sampling gave on an H100 at 1 ms while copy kernels ran (tests/fixtures/cupti-counters), the
    // first one starting 0.8 s early, as CUPTI 13.0 gives it.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/cupti-counters/h100-cuda13/manifest.json");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir).unwrap()).unwrap();
    let mut spans = Vec::new();
    for f in manifest["files"].as_array().unwrap() {
        if f["method"] != "pm" {
            continue;
        }
        for r in f["records"].as_array().unwrap() {
            spans.push((r["start"].as_u64().unwrap(), r["end"].as_u64().unwrap()));
        }
    }
    assert!(spans.len() > 100, "{}", spans.len());
    let (_g, d) = serial();
    let mut s = PmSampler::builder(0)
        .metrics([SM])
        .interval(Interval::Time(Duration::from_millis(1)))
        .decode_period(Duration::from_millis(5))
        .hardware_buffer(1 << 20)
        .start()
        .unwrap();
    for (i, &(start, end)) in spans.iter().enumerate() {
        d.push_sample(start, end, i as f64);
    }
    let (got, dropped, gaps) = read_counting(&mut s, spans.len());
    assert_eq!((got.len(), dropped, gaps), (spans.len(), 0, 0));
    let st = s.stop().unwrap().stats;
    assert_eq!((st.dropped, st.gaps, st.stale), (0, 0, 0), "{st:?}");
}

#[test]
fn stale_or_empty_sample_spans_are_left_out_as_gaps() {
    let (_g, d) = serial();
    let mut s = pm(&[SM]).start().unwrap();
    // A first sample that starts long before the rest, then samples every 100 us, two of them with the span
    // CUPTI gave on an H100 after an image restart: zero length, far in the past. Their values were not sound:
    // they are left out, and the two periods they stood for are gaps.
    d.push_sample(0, 5_000_000, 0.0);
    d.push_sample(5_000_000, 5_100_000, 1.0);
    d.push_sample(7, 7, 2.0);
    d.push_sample(7, 7, 3.0);
    d.push_sample(5_300_000, 5_400_000, 4.0);
    let out = read_until(&mut s, 3);
    let spans: Vec<(u64, u64)> = out.iter().map(|x| (x.start_ns, x.end_ns)).collect();
    assert_eq!(
        spans,
        [
            (0, 5_000_000),
            (5_000_000, 5_100_000),
            (5_300_000, 5_400_000)
        ]
    );
    let values: Vec<f64> = out.iter().map(|x| x.values[0]).collect();
    assert_eq!(values.len(), 3);
    let st = s.stop().unwrap().stats;
    assert_eq!((st.stale, st.dropped, st.gaps), (2, 0, 2), "{st:?}");
}

#[test]
fn one_pm_client_per_gpu_and_drop_releases_it() {
    let (_g, d) = serial();
    let first = pm(&[SM]).start().unwrap();
    // A second sampler of this process is refused before any vendor call (real CUPTI answers it with
    // CUPTI_ERROR_UNKNOWN, seen on an H100).
    let before = d.counts();
    match pm(&[SM]).start().map_err(profiling) {
        Err(e @ ProfilingError::AlreadySampling { device: 0 }) => {
            assert!(e.to_string().contains("one PM client per GPU"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(d.counts(), before, "no vendor call");
    drop(first);
    assert_eq!(d.counts().pm_enabled, 0);
    let again = pm(&[SM]).start().unwrap();
    again.stop().unwrap();
    // Another tool holding the counters.
    d.set_busy(true);
    match pm(&[SM]).start().map_err(profiling) {
        Err(e @ ProfilingError::CountersBusy { .. }) => {
            let text = e.to_string();
            assert!(text.contains("ncu") && text.contains("DCGM"), "{text}");
            assert_eq!(e.vendor_code(), Some(CuptiError::HardwareBusy));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn privileges_and_bad_settings_are_typed_and_leave_the_device_alone() {
    let (_g, d) = serial();
    let before = d.counts();
    d.fail(c"cuptiPmSamplingGetCounterAvailability", 35);
    let e = pm(&[SM]).start().map_err(profiling).unwrap_err();
    assert!(matches!(e, ProfilingError::InsufficientPrivileges { .. }));
    assert!(e.to_string().contains("CAP_PERFMON"), "{e}");
    d.clear_failure();
    assert!(matches!(
        pm(&["sm__throughput.avg.pct_of_peak_sustained_elapsed"])
            .start()
            .map_err(profiling),
        Err(ProfilingError::TooManyPasses { passes: 3, .. })
    ));
    assert!(matches!(
        pm(&["gpu__time_duration.sum"]).start().map_err(profiling),
        Err(ProfilingError::NotSupportedByMethod { .. })
    ));
    assert!(matches!(
        pm(&[]).start().map_err(profiling),
        Err(ProfilingError::NoMetrics)
    ));
    assert!(matches!(
        pm(&[SM]).hardware_buffer(10).start().map_err(profiling),
        Err(ProfilingError::BufferTooSmall {
            what: "hardware buffer",
            bytes: 10,
            ..
        })
    ));
    assert!(matches!(
        PmSampler::builder(3)
            .metrics([SM])
            .start()
            .map_err(profiling),
        Err(ProfilingError::NoSuchDevice { index: 3, count: 1 })
    ));
    d.set_capability(7, 0);
    assert!(matches!(
        pm(&[SM]).start().map_err(profiling),
        Err(ProfilingError::DeviceTooOld {
            capability: (7, 0),
            ..
        })
    ));
    d.set_capability(7, 5);
    // Turing: no time-based interval.
    assert!(matches!(
        pm(&[SM]).start().map_err(profiling),
        Err(ProfilingError::InvalidSetting {
            what: "interval",
            ..
        })
    ));
    d.set_capability(9, 0);
    d.set_support(3, 2);
    match pm(&[SM]).start().map_err(profiling) {
        Err(ProfilingError::DeviceUnsupported { reasons, .. }) => {
            assert!(reasons[0].contains("vGPU"), "{reasons:?}")
        }
        other => panic!("{other:?}"),
    }
    let after = d.counts();
    // Only the buffer check enables (to ask the sample size), and disables again.
    assert_eq!(after.pm_enabled, 0);
    assert_eq!(
        after.pm_enables - before.pm_enables,
        after.pm_disables - before.pm_disables
    );
    assert_eq!(after.profiler_initialized, 0);
}

#[test]
fn callbacks_get_borrowed_batches_and_their_panics_are_reported() {
    let (_g, d) = serial();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = Arc::clone(&seen);
    let s = pm(&[SM, DRAM])
        .start_with(move |batch| {
            for x in batch.iter() {
                s2.lock().unwrap().push((x.start_ns, x.values.to_vec()));
                if x.start_ns == 20 {
                    panic!("sample 20");
                }
            }
        })
        .unwrap();
    for i in 0..4u64 {
        d.push_sample(i * 10, i * 10 + 10, i as f64);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.lock().unwrap().len() < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let report = s.stop().unwrap();
    assert_eq!(report.panic.as_deref(), Some("sample 20"));
    assert_eq!(report.stats.callback_panics, 1);
    assert_eq!(seen.lock().unwrap()[1], (10, vec![1.0, 2.0]));
}

#[test]
fn a_failing_decode_ends_the_sampler_with_its_error() {
    let (_g, d) = serial();
    let mut s = pm(&[SM]).start().unwrap();
    d.fail(c"cuptiPmSamplingDecodeData", 999);
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.is_running() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!s.is_running());
    let e = s
        .read(Duration::ZERO, &mut Vec::new())
        .map_err(profiling)
        .unwrap_err();
    assert!(
        matches!(e, ProfilingError::DecodeThread(ref t) if t.contains("cuptiPmSamplingDecodeData")),
        "{e}"
    );
    d.clear_failure();
    assert!(s.stop().is_err());
    assert_eq!(d.counts().pm_enabled, 0, "the counters are released");
}

#[test]
fn a_sampler_reads_through_the_vendor_neutral_trait() {
    let (_g, d) = serial();
    let mut s: Box<dyn DeviceCounters> = Box::new(pm(&[SM]).start().unwrap());
    d.push_sample(5, 15, 42.0);
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while out.is_empty() && Instant::now() < deadline {
        s.read(Duration::from_millis(50), &mut out).unwrap();
    }
    assert_eq!(out[0].values, vec![42.0]);
    assert_eq!(s.counters()[0].name, SM);
}

#[test]
fn the_sample_iterator_ends_at_its_deadline() {
    let (_g, d) = serial();
    let mut s = pm(&[SM]).start().unwrap();
    d.push_sample(0, 10, 1.0);
    d.push_sample(10, 20, 2.0);
    let got: Vec<f64> = s
        .samples(Instant::now() + Duration::from_millis(300))
        .map(|x| x.values[0])
        .collect();
    assert_eq!(got, vec![1.0, 2.0]);
}

#[test]
fn counters_held_elsewhere_are_asked_without_taking_them() {
    use gpu_tools::cupti::pm_sampling::counters_held_elsewhere;
    let (_g, d) = serial();
    let before = d.counts();
    assert!(!counters_held_elsewhere(0).unwrap());
    assert_eq!(d.counts().pm_enabled, before.pm_enabled, "nothing enabled");
    d.set_busy(true);
    assert!(counters_held_elsewhere(0).unwrap());
    d.set_busy(false);
    // A sampler of this process is not another client: refused before CUPTI is asked.
    let first = pm(&[SM]).start().unwrap();
    assert!(matches!(
        counters_held_elsewhere(0).map_err(profiling),
        Err(ProfilingError::AlreadySampling { device: 0 })
    ));
    first.stop().unwrap();
    assert!(matches!(
        counters_held_elsewhere(99).map_err(profiling),
        Err(ProfilingError::NoSuchDevice { index: 99, .. })
    ));
}
