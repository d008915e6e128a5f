//! CUPTI's counter APIs ([`pm_sampling`], [`range_profiler`], [`pc_sampling`], also reachable at their old paths
//! `cupti::pm_sampling`, ...) and the ground they share: the metric catalogue and
//! configuration ([`host`], no GPU needed), the typed [`ProfilingError`], device checks, and the loading of
//! `libnvperf_host.so`, which CUPTI opens by its bare name and so rarely finds on its own ([`NvperfHost`]).
//!
//! ```no_run
//! use gpu_tools::cupti::profiler::{self, Method, host::Catalog};
//!
//! fn main() -> gpu_tools::Result<()> {
//!     println!("chips: {}", profiler::host::supported_chips()?.join(" "));
//!     let catalog = Catalog::for_chip("GH100")?;
//!     let pm = catalog.filter(Some(Method::PmSampling), "").count();
//!     println!("{} base metrics, {pm} for PM sampling", catalog.metrics().len());
//!     // A misspelt name is refused with the closest names the chip has.
//!     if let Err(e) = catalog.resolve("dram__bytes_reed.sum", Method::RangeProfiler) {
//!         eprintln!("{e}");
//!     }
//!     Ok(())
//! }
//! ```

pub(crate) mod api;
mod counter_data;
mod error;
pub mod host;
pub mod image;
mod metric;
mod nvperf;
pub mod pc_sampling;
pub mod pm_sampling;
pub mod range_profiler;

use std::ffi::CStr;
use std::sync::Mutex;

use api::{Api, Needs, params, sym};
pub(crate) use error::check;
pub use error::{LIKELY_HOLDERS, PRIVILEGES_FIX, ProfilingError};
pub use nvperf::NvperfHost;

use crate::cuda::{DeviceInfo, Driver};
use crate::sys::cupti_profiling as sys;

/// How counters are collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum Method {
    /// Per range (a kernel, or a range the program pushes) of one context: the range profiler.
    RangeProfiler,
    /// The whole device, sampled at an interval: PM sampling.
    PmSampling,
}

impl Method {
    /// Both methods.
    pub const ALL: [Method; 2] = [Method::RangeProfiler, Method::PmSampling];

    /// `range` or `pm`.
    pub fn name(self) -> &'static str {
        match self {
            Method::RangeProfiler => "range",
            Method::PmSampling => "pm",
        }
    }

    pub(crate) fn profiler_type(self) -> sys::CUpti_ProfilerType {
        match self {
            Method::RangeProfiler => sys::CUPTI_PROFILER_TYPE_RANGE_PROFILER,
            Method::PmSampling => sys::CUPTI_PROFILER_TYPE_PM_SAMPLING,
        }
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Method::RangeProfiler => "range profiler",
            Method::PmSampling => "PM sampling",
        })
    }
}

impl std::str::FromStr for Method {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "range" | "range-profiler" => Ok(Method::RangeProfiler),
            "pm" | "pm-sampling" => Ok(Method::PmSampling),
            _ => Err(format!("unknown method {s:?}; known: range, pm")),
        }
    }
}

/// What a metric measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum MetricKind {
    /// A count (bytes, cycles, instructions); roll-ups `.sum`, `.avg`, `.min`, `.max` and their rates.
    Counter,
    /// A ratio of two counters; `.ratio`, `.pct`, `.max_rate`.
    Ratio,
    /// A percentage of a unit's peak throughput; `.avg.pct_of_peak_sustained_elapsed`, ...
    Throughput,
    /// A code newer than this crate.
    Other(u32),
}

impl MetricKind {
    /// The three kinds CUPTI lists metrics by.
    pub const ALL: [MetricKind; 3] = [
        MetricKind::Counter,
        MetricKind::Ratio,
        MetricKind::Throughput,
    ];

    pub(crate) fn code(self) -> sys::CUpti_MetricType {
        match self {
            MetricKind::Counter => sys::CUPTI_METRIC_TYPE_COUNTER,
            MetricKind::Ratio => sys::CUPTI_METRIC_TYPE_RATIO,
            MetricKind::Throughput => sys::CUPTI_METRIC_TYPE_THROUGHPUT,
            MetricKind::Other(c) => c,
        }
    }

    pub(crate) fn from_code(code: sys::CUpti_MetricType) -> Self {
        match code {
            sys::CUPTI_METRIC_TYPE_COUNTER => MetricKind::Counter,
            sys::CUPTI_METRIC_TYPE_RATIO => MetricKind::Ratio,
            sys::CUPTI_METRIC_TYPE_THROUGHPUT => MetricKind::Throughput,
            c => MetricKind::Other(c),
        }
    }

    /// `counter`, `ratio` or `throughput`.
    pub fn name(self) -> &'static str {
        match self {
            MetricKind::Counter => "counter",
            MetricKind::Ratio => "ratio",
            MetricKind::Throughput => "throughput",
            MetricKind::Other(_) => "other",
        }
    }
}

/// Which CUPTI API a device check is for (`CUpti_Profiler_API`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProfilerApi {
    /// The range profiler.
    RangeProfiler,
    /// PC sampling.
    PcSampling,
    /// PM sampling.
    PmSampling,
}

impl ProfilerApi {
    fn code(self) -> sys::CUpti_Profiler_API {
        match self {
            ProfilerApi::RangeProfiler => sys::CUPTI_PROFILER_RANGE_PROFILING,
            ProfilerApi::PcSampling => sys::CUPTI_PROFILER_PC_SAMPLING,
            ProfilerApi::PmSampling => sys::CUPTI_PROFILER_PM_SAMPLING,
        }
    }

    /// The oldest compute capability the API supports: Turing for PM sampling, Volta for the others.
    pub fn oldest_capability(self) -> (i32, i32) {
        match self {
            ProfilerApi::PmSampling => (7, 5),
            ProfilerApi::RangeProfiler | ProfilerApi::PcSampling => (7, 0),
        }
    }

    fn name(self) -> &'static str {
        match self {
            ProfilerApi::RangeProfiler => "the range profiler",
            ProfilerApi::PcSampling => "PC sampling",
            ProfilerApi::PmSampling => "PM sampling",
        }
    }
}

/// One answer of `cuptiProfilerDeviceSupported` (`CUpti_Profiler_Support_Level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum SupportLevel {
    /// CUPTI could not tell.
    Unknown,
    /// Not possible in this configuration.
    Unsupported,
    /// Possible, but turned off by the system (a vGPU without profiling enabled).
    Disabled,
    /// Possible.
    Supported,
}

impl SupportLevel {
    fn from_code(code: sys::CUpti_Profiler_Support_Level) -> Self {
        match code {
            sys::CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED => SupportLevel::Unsupported,
            sys::CUPTI_PROFILER_CONFIGURATION_DISABLED => SupportLevel::Disabled,
            sys::CUPTI_PROFILER_CONFIGURATION_SUPPORTED => SupportLevel::Supported,
            _ => SupportLevel::Unknown,
        }
    }
}

/// What `cuptiProfilerDeviceSupported` says about a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DeviceSupport {
    /// All of the below.
    pub overall: SupportLevel,
    /// The architecture (compute capability 7.0 or later).
    pub architecture: SupportLevel,
    /// Not in an SLI group.
    pub sli: SupportLevel,
    /// A vGPU with profiling enabled, or no vGPU.
    pub vgpu: SupportLevel,
    /// Confidential computing off.
    pub confidential_compute: SupportLevel,
    /// Not a crypto-mining processor.
    pub cmp: SupportLevel,
    /// Not WSL, or WSL with support.
    pub wsl: SupportLevel,
}

impl DeviceSupport {
    /// Why the device cannot be profiled, one entry per configuration CUPTI flags (empty when it can).
    pub fn reasons(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (what, level) in [
            ("the architecture is not supported", self.architecture),
            ("SLI is enabled", self.sli),
            ("profiling is not enabled on this vGPU", self.vgpu),
            ("confidential computing is on", self.confidential_compute),
            ("a crypto-mining processor (CMP)", self.cmp),
            ("WSL does not support it", self.wsl),
        ] {
            match level {
                SupportLevel::Unsupported => out.push(what.to_string()),
                SupportLevel::Disabled => out.push(format!("{what} (disabled by the system)")),
                _ => {}
            }
        }
        if out.is_empty()
            && matches!(
                self.overall,
                SupportLevel::Unsupported | SupportLevel::Disabled
            )
        {
            out.push("CUPTI reports the device unsupported".to_string());
        }
        out
    }
}

/// What `cuptiProfilerDeviceSupported` says about CUDA device `index` for `which` API.
pub fn device_support(index: usize, which: ProfilerApi) -> crate::Result<DeviceSupport> {
    let api = Api::load(Needs::CuptiOnly)?;
    let driver = Driver::load()?;
    let dev = driver.device(index)?;
    Ok(support(api, dev, which)?)
}

fn support(
    api: Api,
    dev: crate::sys::cuda_driver::CUdevice,
    which: ProfilerApi,
) -> Result<DeviceSupport, ProfilingError> {
    let f = sym!(api, cuptiProfilerDeviceSupported)?;
    let mut p = params!(CUpti_Profiler_DeviceSupported_Params, api);
    p.cuDevice = dev;
    p.api = which.code();
    // SAFETY: a parameter struct of the header's layout; CUPTI writes the levels.
    check("cuptiProfilerDeviceSupported", unsafe { f(&mut p) })?;
    Ok(DeviceSupport {
        overall: SupportLevel::from_code(p.isSupported),
        architecture: SupportLevel::from_code(p.architecture),
        sli: SupportLevel::from_code(p.sli),
        vgpu: SupportLevel::from_code(p.vGpu),
        confidential_compute: SupportLevel::from_code(p.confidentialCompute),
        cmp: SupportLevel::from_code(p.cmp),
        wsl: SupportLevel::from_code(p.wsl),
    })
}

/// The chip name of CUDA device `index` (`cuptiDeviceGetChipName`), for example `GH100`: the name the metric
/// catalogue takes.
pub fn chip_name(index: usize) -> crate::Result<String> {
    let api = Api::load(Needs::CuptiOnly)?;
    check_index(index)?;
    let init = ProfilerInit::acquire(api)?;
    Ok(chip(api, &init, index)?)
}

/// The chip of device `index`. `cuptiDeviceGetChipName` crashes the process (SIGSEGV in libcupti, driver 580,
/// CUPTI 13.0) unless the profiler is initialised, hence the `ProfilerInit` it takes.
pub(crate) fn chip(api: Api, _init: &ProfilerInit, index: usize) -> Result<String, ProfilingError> {
    let f = sym!(api, cuptiDeviceGetChipName)?;
    let mut p = params!(CUpti_Device_GetChipName_Params, pChipName);
    p.deviceIndex = index;
    // SAFETY: a parameter struct of the header's layout; CUPTI writes a pointer to a static name.
    check("cuptiDeviceGetChipName", unsafe { f(&mut p) })?;
    if p.pChipName.is_null() {
        return Err(ProfilingError::State(
            "cuptiDeviceGetChipName returned no name",
        ));
    }
    // SAFETY: on success a NUL-terminated name CUPTI keeps.
    Ok(unsafe { CStr::from_ptr(p.pChipName) }
        .to_string_lossy()
        .into_owned())
}

/// The device exists (the driver is loaded and initialised first).
pub(crate) fn check_index(index: usize) -> crate::Result<&'static Driver> {
    let driver = Driver::load()?;
    let count = driver.device_count()?;
    if index >= count {
        return Err(ProfilingError::NoSuchDevice { index, count }.into());
    }
    Ok(driver)
}

/// Checks, before any counter call, that device `index` exists, is recent enough for `which`, and that CUPTI
/// supports profiling it in this configuration.
pub(crate) fn check_device(
    api: Api,
    index: usize,
    which: ProfilerApi,
) -> crate::Result<DeviceInfo> {
    let driver = check_index(index)?;
    let info = driver.device_info(index)?;
    let needed = which.oldest_capability();
    if info.compute_capability < needed {
        return Err(ProfilingError::DeviceTooOld {
            index,
            name: info.name,
            capability: info.compute_capability,
            needed,
            method: which.name(),
        }
        .into());
    }
    // Releases without the query are left to fail at the call itself; so is a query that fails (the check is
    // advisory: only a definite "unsupported" stops here).
    if api.t.cuptiProfilerDeviceSupported.is_ok() {
        let dev = driver.device(index)?;
        let answer = match support(api, dev, which) {
            // Some releases want the profiler initialised first.
            Err(ProfilingError::Vendor {
                error: crate::cupti::CuptiError::NotInitialized,
                ..
            }) => ProfilerInit::acquire(api).and_then(|_init| support(api, dev, which)),
            other => other,
        };
        match answer {
            Ok(support) => {
                let reasons = support.reasons();
                if !reasons.is_empty() {
                    return Err(ProfilingError::DeviceUnsupported { index, reasons }.into());
                }
            }
            Err(e) => log::debug!("device {index}: support query failed ({e}); going on"),
        }
    }
    Ok(info)
}

/// Users of `cuptiProfilerInitialize` in this process; the last one out calls `cuptiProfilerDeInitialize`.
static INITIALIZED: Mutex<usize> = Mutex::new(0);

/// A hold on CUPTI's profiler initialisation (`cuptiProfilerInitialize`), process-wide and counted.
#[derive(Debug)]
pub(crate) struct ProfilerInit {
    api: Api,
}

impl ProfilerInit {
    pub(crate) fn acquire(api: Api) -> Result<ProfilerInit, ProfilingError> {
        let mut n = INITIALIZED.lock().unwrap_or_else(|p| p.into_inner());
        if *n == 0 {
            let f = sym!(api, cuptiProfilerInitialize)?;
            let mut p = params!(CUpti_Profiler_Initialize_Params, pPriv);
            // SAFETY: a parameter struct of the header's layout.
            check("cuptiProfilerInitialize", unsafe { f(&mut p) })?;
        }
        *n += 1;
        Ok(ProfilerInit { api })
    }
}

impl Drop for ProfilerInit {
    fn drop(&mut self) {
        let mut n = INITIALIZED.lock().unwrap_or_else(|p| p.into_inner());
        *n = n.saturating_sub(1);
        if *n == 0 {
            if let Ok(f) = sym!(self.api, cuptiProfilerDeInitialize) {
                let mut p = params!(CUpti_Profiler_DeInitialize_Params, pPriv);
                // SAFETY: balances the initialisation made when the count left zero.
                let _ = unsafe { f(&mut p) };
            }
        }
    }
}

/// Asks twice, as CUPTI's availability calls want: the size, then the image.
fn availability(
    call: &'static str,
    mut ask: impl FnMut(&mut usize, *mut u8) -> u32,
) -> Result<Vec<u8>, ProfilingError> {
    let mut size = 0usize;
    check(call, ask(&mut size, std::ptr::null_mut()))?;
    let mut image = vec![0u8; size];
    check(call, ask(&mut size, image.as_mut_ptr()))?;
    image.truncate(size);
    Ok(image)
}

/// The counter-availability image of a device for PM sampling (`cuptiPmSamplingGetCounterAvailability`). This is
/// where a device whose counters another client holds answers `CUPTI_ERROR_HARDWARE_BUSY`.
pub(crate) fn pm_availability(api: Api, index: usize) -> Result<Vec<u8>, ProfilingError> {
    let f = sym!(api, cuptiPmSamplingGetCounterAvailability)?;
    availability("cuptiPmSamplingGetCounterAvailability", |size, buf| {
        let mut p = params!(
            CUpti_PmSampling_GetCounterAvailability_Params,
            pCounterAvailabilityImage
        );
        p.deviceIndex = index;
        p.counterAvailabilityImageSize = *size;
        p.pCounterAvailabilityImage = buf;
        // SAFETY: `buf` is null (size query) or holds `*size` bytes.
        let code = unsafe { f(&mut p) };
        *size = p.counterAvailabilityImageSize;
        code
    })
}

/// The counter-availability image of a context's device for the range profiler
/// (`cuptiProfilerGetCounterAvailability`).
pub(crate) fn context_availability(
    api: Api,
    ctx: crate::cuda::RawContext,
) -> Result<Vec<u8>, ProfilingError> {
    let f = sym!(api, cuptiProfilerGetCounterAvailability)?;
    availability("cuptiProfilerGetCounterAvailability", |size, buf| {
        let mut p = params!(
            CUpti_Profiler_GetCounterAvailability_Params,
            pCounterAvailabilityImage
        );
        p.ctx = ctx;
        p.counterAvailabilityImageSize = *size;
        p.pCounterAvailabilityImage = buf;
        // SAFETY: a live context (the caller's); `buf` is null (size query) or holds `*size` bytes.
        let code = unsafe { f(&mut p) };
        *size = p.counterAvailabilityImageSize;
        code
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_read_and_print() {
        assert_eq!("pm".parse::<Method>(), Ok(Method::PmSampling));
        assert_eq!("range".parse::<Method>(), Ok(Method::RangeProfiler));
        assert!("ncu".parse::<Method>().unwrap_err().contains("range, pm"));
        for m in Method::ALL {
            assert_eq!(m.name().parse::<Method>(), Ok(m));
        }
        assert_eq!(Method::PmSampling.to_string(), "PM sampling");
    }

    #[test]
    fn kinds_round_trip_their_codes() {
        for k in MetricKind::ALL {
            assert_eq!(MetricKind::from_code(k.code()), k);
        }
        assert_eq!(MetricKind::from_code(9), MetricKind::Other(9));
    }

    #[test]
    fn unsupported_configurations_are_named() {
        let ok = DeviceSupport {
            overall: SupportLevel::Supported,
            architecture: SupportLevel::Supported,
            sli: SupportLevel::Supported,
            vgpu: SupportLevel::Supported,
            confidential_compute: SupportLevel::Supported,
            cmp: SupportLevel::Supported,
            wsl: SupportLevel::Supported,
        };
        assert!(ok.reasons().is_empty());
        let vgpu = DeviceSupport {
            overall: SupportLevel::Unsupported,
            vgpu: SupportLevel::Disabled,
            ..ok
        };
        assert_eq!(
            vgpu.reasons(),
            vec!["profiling is not enabled on this vGPU (disabled by the system)"]
        );
        let bare = DeviceSupport {
            overall: SupportLevel::Unsupported,
            ..ok
        };
        assert_eq!(bare.reasons().len(), 1);
    }
}
