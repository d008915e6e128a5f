//! The counter APIs against the CUPTI profiling double (`gpu-tools-testing/doubles/cupti_profiling.c`, which also stands in
//! for `libnvperf_host.so`) and the driver double: the catalogue's checks and their typed errors, the PM sampler's
//! decode thread (values, timestamps, full images, overflow, gaps, the one-client rule, release on stop and drop,
//! callbacks and their panics), the range profiler (auto and user ranges, passes, dropped ranges) and PC sampling.
#![cfg(feature = "cupti")]

mod catalogue;
mod no_nvperf;
mod pc_sampling;
mod pm_sampling;
mod range_profiler;
mod saved_counter_data;
mod top;

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
    /// PC sampling off in the double, its buffer forgotten: the process ended.
    fn pc_reset(&self) {
        let f = control!(self.controls, unsafe extern "C" fn(), b"cp_pc_reset\0");
        // SAFETY: a plain control.
        unsafe { f() }
    }
    /// The worker threads' sleep span the last PC sampling configuration set (0: none).
    fn pc_sleep_span(&self) -> u32 {
        let f = control!(
            self.controls,
            unsafe extern "C" fn() -> u32,
            b"cp_pc_sleep_span\0"
        );
        // SAFETY: a plain control.
        unsafe { f() }
    }
    /// `cuptiPCSamplingGetData` calls made while continuous mode's decoding worker ran (since the double loaded).
    fn pc_reads_while_decoding(&self) -> u32 {
        let f = control!(
            self.controls,
            unsafe extern "C" fn() -> u32,
            b"cp_pc_reads_while_decoding\0"
        );
        // SAFETY: a plain control.
        unsafe { f() }
    }
    /// `cuptiPCSamplingStart` calls (since the double loaded).
    fn pc_starts(&self) -> u32 {
        let f = control!(
            self.controls,
            unsafe extern "C" fn() -> u32,
            b"cp_pc_starts\0"
        );
        // SAFETY: a plain control.
        unsafe { f() }
    }
    /// Whether PC sampling takes samples now.
    fn pc_running(&self) -> bool {
        let f = control!(
            self.controls,
            unsafe extern "C" fn() -> i32,
            b"cp_pc_running\0"
        );
        // SAFETY: a plain control.
        unsafe { f() != 0 }
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

/// Settings of a PM sampler of device 0 with `metrics`: 100 µs interval, 5 ms decode period, 1 MiB hardware buffer.
fn pm(metrics: &[&str]) -> gpu_tools::cupti::pm_sampling::PmSamplerBuilder {
    PmSampler::builder(0)
        .metrics(metrics)
        .interval(Interval::Time(Duration::from_micros(100)))
        .decode_period(Duration::from_millis(5))
        .hardware_buffer(1 << 20)
}
