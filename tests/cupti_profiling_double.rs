//! The counter APIs against the CUPTI profiling double (`tests/doubles/cupti_profiling.c`, which also stands in
//! for `libnvperf_host.so`) and the driver double: the catalogue's checks and their typed errors, the PM sampler's
//! decode thread (values, timestamps, full images, overflow, gaps, the one-client rule, release on stop and drop,
//! callbacks and their panics), the range profiler (auto and user ranges, passes, dropped ranges) and PC sampling.
#![cfg(feature = "cupti")]

use std::ffi::{CStr, c_char};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use gpu_tools::Error;
use gpu_tools::counters::{DeviceCounters, SampleClock};
use gpu_tools::cuda::Context;
use gpu_tools::cupti::pc_sampling::PcSampler;
use gpu_tools::cupti::pm_sampling::{Interval, PmSampler};
use gpu_tools::cupti::profiler::host::{Catalog, ConfigImage, Methods};
use gpu_tools::cupti::profiler::{self, Method, NvperfHost, ProfilingError};
use gpu_tools::cupti::range_profiler::{RangeMode, RangeProfiler, Replay};
use gpu_tools::cupti::{CuptiError, CuptiLibrary};

fn doubles_dir() -> PathBuf {
    gpu_tools_testing::doubles_dir()
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counts {
    pm_enables: i32,
    pm_disables: i32,
    pm_decodes: i32,
    pm_enabled: i32,
    hosts_live: i32,
    profiler_initialized: i32,
    range_enabled: i32,
    pc_enabled: i32,
}

struct Double {
    controls: libloading::Library,
    driver: libloading::Library,
}

macro_rules! control {
    ($lib:expr, $t:ty, $name:literal) => {
        // SAFETY: the symbol has this signature in the double.
        *unsafe { $lib.get::<$t>($name) }.unwrap_or_else(|e| panic!("{e}"))
    };
}

impl Double {
    fn fail(&self, function: &'static CStr, code: i32) {
        let f = control!(
            self.controls,
            unsafe extern "C" fn(*const c_char, i32),
            b"cp_fail\0"
        );
        // SAFETY: the double copies the name.
        unsafe { f(function.as_ptr(), code) }
    }
    fn clear_failure(&self) {
        self.fail(c"", 0);
    }
    fn push_sample(&self, start: u64, end: u64, base: f64) {
        let f = control!(
            self.controls,
            unsafe extern "C" fn(u64, u64, f64) -> i32,
            b"cp_push_sample\0"
        );
        // SAFETY: a plain control.
        assert_eq!(unsafe { f(start, end, base) }, 0);
    }
    fn push_sample_on(&self, device: i32, start: u64, end: u64, base: f64) {
        let f = control!(
            self.controls,
            unsafe extern "C" fn(i32, u64, u64, f64) -> i32,
            b"cp_push_sample_on\0"
        );
        // SAFETY: a plain control.
        assert_eq!(unsafe { f(device, start, end, base) }, 0);
    }
    /// GPUs in both doubles: the driver's device queries and PM sampling.
    fn set_devices(&self, n: i32) {
        let f = control!(
            self.controls,
            unsafe extern "C" fn(i32),
            b"cp_set_devices\0"
        );
        // SAFETY: a plain control.
        unsafe { f(n) }
        let f = control!(
            self.driver,
            unsafe extern "C" fn(i32),
            b"dbl_set_device_count\0"
        );
        // SAFETY: a plain control.
        unsafe { f(n) }
    }
    /// Whether the catalogue holds the metrics of `gpu-tools top` too.
    fn catalogue_top(&self, on: bool) {
        let f = control!(
            self.controls,
            unsafe extern "C" fn(i32),
            b"cp_catalogue_top\0"
        );
        // SAFETY: a plain control.
        unsafe { f(i32::from(on)) }
    }
    fn overflow_next(&self) {
        let f = control!(self.controls, unsafe extern "C" fn(), b"cp_overflow_next\0");
        // SAFETY: a plain control.
        unsafe { f() }
    }
    fn set_busy(&self, busy: bool) {
        let f = control!(self.controls, unsafe extern "C" fn(i32), b"cp_set_busy\0");
        // SAFETY: a plain control.
        unsafe { f(i32::from(busy)) }
    }
    fn set_support(&self, arch: i32, vgpu: i32) {
        let f = control!(
            self.controls,
            unsafe extern "C" fn(i32, i32),
            b"cp_set_support\0"
        );
        // SAFETY: a plain control.
        unsafe { f(arch, vgpu) }
    }
    fn set_capability(&self, major: i32, minor: i32) {
        let f = control!(
            self.driver,
            unsafe extern "C" fn(i32, i32),
            b"dbl_set_capability\0"
        );
        // SAFETY: a plain control.
        unsafe { f(major, minor) }
    }
    fn launch(&self, name: &'static CStr) {
        let f = control!(
            self.controls,
            unsafe extern "C" fn(*const c_char) -> i32,
            b"cp_launch\0"
        );
        // SAFETY: the double copies the name.
        assert_eq!(unsafe { f(name.as_ptr()) }, 0, "no auto range running");
    }
    fn pc(&self, function: &'static CStr, offset: u64, reason: u32, samples: u32) {
        let f = control!(
            self.controls,
            unsafe extern "C" fn(*const c_char, u64, u32, u32) -> i32,
            b"cp_pc\0"
        );
        // SAFETY: a static name the double keeps a pointer to.
        assert_eq!(unsafe { f(function.as_ptr(), offset, reason, samples) }, 0);
    }
    fn counts(&self) -> Counts {
        let f = control!(
            self.controls,
            unsafe extern "C" fn(*mut Counts),
            b"cp_counts\0"
        );
        let mut c = Counts::default();
        // SAFETY: the double writes a struct of this layout.
        unsafe { f(&mut c) };
        c
    }
}

fn double() -> &'static Double {
    static D: OnceLock<Double> = OnceLock::new();
    D.get_or_init(|| {
        let dir = doubles_dir();
        gpu_tools::cuda::Driver::load_from(dir.join("libcuda_driver.so")).expect("driver double");
        CuptiLibrary::load_from(dir.join("libcupti_profiling.so"))
            .expect("profiling double as CUPTI");
        NvperfHost::load_from(dir.join("libcupti_profiling.so"))
            .expect("the double as libnvperf_host.so");
        // SAFETY: the same files the crate opened: the loader hands back the same handles.
        let controls = unsafe { libloading::Library::new(dir.join("libcupti_profiling.so")) }
            .expect("controls");
        // SAFETY: as above.
        let driver = unsafe { libloading::Library::new(dir.join("libcuda_driver.so")) }
            .expect("driver controls");
        Double { controls, driver }
    })
}

/// One test at a time: the double's state is process-wide. Each test starts from a clean double.
fn serial() -> (MutexGuard<'static, ()>, &'static Double) {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let d = double();
    d.clear_failure();
    d.set_busy(false);
    d.set_support(3, 3);
    d.set_capability(9, 0);
    d.set_devices(1);
    d.catalogue_top(false);
    (guard, d)
}

fn profiling(e: Error) -> ProfilingError {
    match e {
        Error::CuptiCounters(p) => p,
        other => panic!("expected a profiling error, got {other:?}"),
    }
}

const SM: &str = "sm__cycles_active.avg";
const DRAM: &str = "dram__bytes_read.sum";

// ------------------------------------------------------------------------------------------------- catalogue

#[test]
fn the_catalogue_lists_metrics_with_their_methods() {
    let (_g, _d) = serial();
    assert_eq!(
        profiler::host::supported_chips().unwrap(),
        vec!["GH100", "TU102"]
    );
    let c = Catalog::for_chip("GH100").unwrap();
    assert_eq!(c.chip(), "GH100");
    assert_eq!(c.metrics().len(), 7);
    let dram = c.get("dram__bytes_read").unwrap();
    assert_eq!(dram.methods, Methods::RANGE_PROFILER | Methods::PM_SAMPLING);
    assert_eq!(dram.unit, "byte");
    assert_eq!(
        c.get("gpu__time_duration").unwrap().methods,
        Methods::RANGE_PROFILER
    );
    let pm: Vec<&str> = c
        .filter(Some(Method::PmSampling), "")
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(
        pm,
        vec![
            "dram__bytes_read",
            "dram__bytes_write",
            "sm__cycles_active",
            "sm__throughput"
        ]
    );
    assert_eq!(c.filter(None, "DRAM").count(), 2);
    assert!(
        c.submetrics("dram__bytes_read", Method::RangeProfiler)
            .unwrap()
            .contains(&".sum".to_string())
    );
    assert_eq!(
        c.resolve(
            "TPC.TriageCompute.sm__cycles_active.avg",
            Method::RangeProfiler
        )
        .unwrap(),
        "TPC.TriageCompute.sm__cycles_active.avg"
    );
}

#[test]
fn bad_metric_names_get_typed_errors() {
    let (_g, _d) = serial();
    let c = Catalog::for_chip("GH100").unwrap();
    match c.resolve("dram__bytes_reed.sum", Method::RangeProfiler) {
        Err(ProfilingError::UnknownMetric { close, .. }) => {
            assert_eq!(close[0], "dram__bytes_read.sum")
        }
        other => panic!("{other:?}"),
    }
    match c.resolve("gpu__time_duration.sum", Method::PmSampling) {
        Err(ProfilingError::NotSupportedByMethod { other, .. }) => {
            assert_eq!(other, Some(Method::RangeProfiler))
        }
        other => panic!("{other:?}"),
    }
    match c.resolve("dram__bytes_read", Method::RangeProfiler) {
        Err(ProfilingError::BadSubmetric { base, valid, .. }) => {
            assert_eq!(base, "dram__bytes_read");
            assert!(valid.contains(&".sum".to_string()));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        c.resolve("dram__bytes_read.bogus", Method::RangeProfiler),
        Err(ProfilingError::BadSubmetric { .. })
    ));
    let text = c
        .resolve("dram__bytes_reed.sum", Method::RangeProfiler)
        .unwrap_err()
        .to_string();
    assert!(text.contains("close names: dram__bytes_read.sum"), "{text}");
    match Catalog::for_chip("XX100").map_err(profiling) {
        Err(ProfilingError::UnknownChip { known, .. }) => assert_eq!(known, vec!["GH100", "TU102"]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn configuration_images_say_their_passes() {
    let (_g, _d) = serial();
    let c = Catalog::for_chip("GH100").unwrap();
    let one = c.resolve_all(&[DRAM, SM], Method::RangeProfiler).unwrap();
    let image = ConfigImage::build("GH100", Method::RangeProfiler, None, &one).unwrap();
    assert_eq!((image.bytes().len(), image.passes()), (12, 1));
    let tp = c
        .resolve_all(
            &["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
            Method::PmSampling,
        )
        .unwrap();
    assert_eq!(
        ConfigImage::build("GH100", Method::PmSampling, None, &tp)
            .unwrap()
            .passes(),
        3
    );
    // Every host object made is gone again.
    drop(c);
    assert_eq!(double().counts().hosts_live, 0);
}

// ------------------------------------------------------------------------------------------------- PM sampling

fn pm(metrics: &[&str]) -> gpu_tools::cupti::pm_sampling::PmSamplerBuilder {
    PmSampler::builder(0)
        .metrics(metrics)
        .interval(Interval::Time(Duration::from_micros(100)))
        .decode_period(Duration::from_millis(5))
        .hardware_buffer(1 << 20)
}

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

// ------------------------------------------------------------------------------------------------- range profiler

#[test]
fn auto_ranges_give_one_range_per_kernel() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    let mut p = RangeProfiler::builder(&ctx)
        .metrics([DRAM, "dram__bytes_write.sum"])
        .start()
        .unwrap();
    assert_eq!((p.chip(), p.passes_needed()), ("GH100", 1));
    d.launch(c"copy");
    d.launch(c"scale");
    let r = p.results().unwrap();
    assert_eq!(
        r.ranges.iter().map(|x| x.name.as_str()).collect::<Vec<_>>(),
        vec!["copy", "scale"]
    );
    assert_eq!(r.value(1, "dram__bytes_write.sum"), Some(201.0));
    assert_eq!(r.dropped, 0);
    assert!(p.push_range("x").is_err(), "no user ranges in auto mode");
    p.resume().unwrap();
    d.launch(c"again");
    assert_eq!(p.results().unwrap().ranges.len(), 1);
    drop(p);
    assert_eq!(d.counts().range_enabled, 0);
}

#[test]
fn user_ranges_replay_until_every_pass_is_in() {
    let (_g, _d) = serial();
    let ctx = Context::primary(0).unwrap();
    let mut p = RangeProfiler::builder(&ctx)
        .metrics(["sm__throughput.avg.pct_of_peak_sustained_elapsed"])
        .range(RangeMode::User)
        .replay(Replay::User)
        .nesting(2, 1)
        .start()
        .unwrap();
    assert_eq!(p.passes_needed(), 2);
    let passes = p
        .run_passes(|p| {
            p.push_range("step")?;
            p.push_range("inner")?;
            p.pop_range()?;
            p.pop_range()
        })
        .unwrap();
    assert_eq!(passes, 2);
    let r = p.results().unwrap();
    let names: Vec<&str> = r.iter().map(|(n, _, _)| n).collect();
    assert_eq!(names, vec!["step/inner", "step"]);
    assert!(matches!(
        p.pop_range().map_err(profiling),
        Err(ProfilingError::State(_))
    ));
}

#[test]
fn ranges_beyond_the_image_are_counted() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    let mut p = RangeProfiler::builder(&ctx)
        .metrics([DRAM])
        .max_ranges(2)
        .start()
        .unwrap();
    for _ in 0..5 {
        d.launch(c"k");
    }
    let r = p.results().unwrap();
    assert_eq!((r.ranges.len(), r.dropped), (2, 3));
    assert!(matches!(
        RangeProfiler::builder(&ctx)
            .metrics([DRAM])
            .max_ranges(0)
            .start()
            .map_err(profiling),
        Err(ProfilingError::BufferTooSmall { .. })
    ));
}

// ------------------------------------------------------------------------------------------------- PC sampling

#[test]
fn pc_samples_come_per_function_pc_and_reason() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    let mut s = PcSampler::builder(&ctx)
        .period(10)
        .pcs_per_read(2)
        .start()
        .unwrap();
    assert_eq!(s.stall_reasons().len(), 3);
    assert_eq!(
        s.stall_reasons()[0].name,
        "smsp__pcsamp_warps_issue_stalled_long_scoreboard"
    );
    d.pc(c"chase", 0x40, 4, 90);
    d.pc(c"chase", 0x50, 4, 10);
    d.pc(c"chase", 0x40, 17, 3);
    d.pc(c"other", 0x10, 9, 5);
    s.read().unwrap();
    let all = s.finish().unwrap();
    assert_eq!(all.records.len(), 4);
    let f = all.functions();
    assert_eq!(&*f[0].name, "chase");
    assert_eq!(f[0].samples, 103);
    assert_eq!(
        all.reason_name(f[0].top_stall().unwrap().0),
        "smsp__pcsamp_warps_issue_stalled_long_scoreboard"
    );
    assert_eq!(f[0].hot_pcs[0], (0x40, 93));
    assert_eq!(d.counts().pc_enabled, 0);
}

#[test]
fn pc_sampling_settings_are_checked() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    assert!(matches!(
        PcSampler::builder(&ctx)
            .period(40)
            .start()
            .map_err(profiling),
        Err(ProfilingError::InvalidSetting { what: "period", .. })
    ));
    assert!(matches!(
        PcSampler::builder(&ctx)
            .stall_reasons(["no_such_reason"])
            .start()
            .map_err(profiling),
        Err(ProfilingError::InvalidSetting {
            what: "stall reasons",
            ..
        })
    ));
    assert_eq!(
        d.counts().pc_enabled,
        0,
        "a refused configuration disables again"
    );
    assert!(matches!(
        PcSampler::builder(&ctx)
            .pcs_per_read(0)
            .start()
            .map_err(profiling),
        Err(ProfilingError::BufferTooSmall { .. })
    ));
}

// ------------------------------------------------------------------------------------------------- saved counter data

use gpu_tools::cupti::profiler::image::{CounterDataFile, RecordInfo};

#[test]
fn saved_range_counter_data_evaluates_to_the_same_values() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    let mut p = RangeProfiler::builder(&ctx)
        .metrics([DRAM, SM])
        .keep_counter_data(true)
        .start()
        .unwrap();
    d.launch(c"copy");
    d.launch(c"copy");
    let r = p.results().unwrap();
    let file = CounterDataFile {
        method: Method::RangeProfiler,
        chip: p.chip().to_string(),
        metrics: r.metrics.clone(),
        records: r
            .ranges
            .iter()
            .map(|x| RecordInfo {
                name: x.name.clone(),
                start: 0,
                end: 0,
            })
            .collect(),
        image: r.counter_data.clone().expect("kept"),
    };
    let back = CounterDataFile::parse(&file.to_bytes()).unwrap();
    // SAFETY: the image is the one the (double's) CUPTI wrote, read back with a matching hash.
    let evaluated = unsafe { back.evaluate() }.unwrap();
    assert_eq!(evaluated.len(), 2);
    for (e, range) in evaluated.iter().zip(&r.ranges) {
        assert_eq!((&e.name, &e.values), (&range.name, &range.values));
    }
}

#[test]
fn saved_pm_counter_data_evaluates_to_the_same_values() {
    let (_g, d) = serial();
    let saved = Arc::new(Mutex::new(Vec::new()));
    let s2 = Arc::clone(&saved);
    let s = pm(&[SM, DRAM])
        .keep_counter_data(true)
        .start_with(move |b| {
            if let Some((image, first)) = b.counter_data() {
                let samples: Vec<_> = b.iter().map(|x| x.to_owned()).collect();
                s2.lock().unwrap().push((image.to_vec(), first, samples));
            }
        })
        .unwrap();
    for i in 0..3u64 {
        d.push_sample(100 * i, 100 * i + 100, i as f64 * 10.0);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while saved
        .lock()
        .unwrap()
        .iter()
        .map(|x| x.2.len())
        .sum::<usize>()
        < 3
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    s.stop().unwrap();
    let saved = saved.lock().unwrap();
    let (image, first, samples) = saved
        .iter()
        .find(|x| !x.2.is_empty())
        .expect("a batch with samples");
    let file = CounterDataFile {
        method: Method::PmSampling,
        chip: "GH100".into(),
        metrics: vec![SM.into(), DRAM.into()],
        records: Vec::new(),
        image: image.clone(),
    };
    // SAFETY: as above.
    let evaluated =
        unsafe { CounterDataFile::parse(&file.to_bytes()).unwrap().evaluate() }.unwrap();
    for (k, s) in samples.iter().enumerate() {
        let e = &evaluated[first + k];
        assert_eq!(
            (e.start, e.end, &e.values),
            (s.start_ns, s.end_ns, &s.values)
        );
    }
}

#[test]
fn results_survive_a_profiler_that_cannot_be_configured_again() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    let mut p = RangeProfiler::builder(&ctx)
        .metrics([DRAM])
        .start()
        .unwrap();
    d.launch(c"copy");
    d.fail(c"cuptiRangeProfilerSetConfig", 7);
    let r = p.results().expect("the decoded ranges are returned");
    assert_eq!(r.ranges.len(), 1);
    let e = p.resume().map_err(profiling).unwrap_err();
    assert!(
        matches!(
            e,
            ProfilingError::Vendor {
                call: "cuptiRangeProfilerSetConfig",
                ..
            }
        ),
        "{e}"
    );
    d.clear_failure();
}

// ------------------------------------------------------------------------------------------------- top

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
