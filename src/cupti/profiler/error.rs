//! [`ProfilingError`]: what the counter APIs report, typed where the user can act on it.

use super::Method;
use crate::cupti::CuptiError;

/// What holds a GPU's performance counters when CUPTI reports them busy. One client per GPU can hold them.
pub const LIKELY_HOLDERS: &str = "another gpu-tools sampler or profiler, Nsight Compute (ncu), DCGM's profiling \
     metrics (nv-hostengine, dcgm-exporter; `dcgmi profile --pause` releases them), or Nsight Systems' GPU metrics \
     (`nsys --gpu-metrics-devices`)";

/// How to get access to the counters when the driver restricts them to administrators.
pub const PRIVILEGES_FIX: &str = "the driver restricts GPU performance counters to administrators \
     (NVreg_RestrictProfilingToAdminUsers=1): run as root, or give the program CAP_PERFMON (driver R565 and later; \
     not as a file capability: NVIDIA notes that CAP_PERFMON does not work in secure-execution mode outside a \
     container), or allow every user with `options nvidia \
     NVreg_RestrictProfilingToAdminUsers=0` in /etc/modprobe.d and a driver reload \
     (https://developer.nvidia.com/ERR_NVGPUCTRPERM)";

/// A CUPTI counter API (host catalogue, PM sampling, range profiler, PC sampling) could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProfilingError {
    /// The loaded `libcupti` has no such entry point (a release older than the API: PM sampling came with CUDA
    /// 12.6, the range profiler and the profiler host with 12.8).
    #[error(
        "the loaded CUPTI library has no `{0}` (PM sampling needs CUPTI 12.6+, the range profiler 12.8+)"
    )]
    MissingSymbol(&'static str),
    /// The chip name is not one the loaded CUPTI knows.
    #[error("chip {chip:?} is not known to this CUPTI; known chips: {}", .known.join(", "))]
    UnknownChip {
        /// The name given.
        chip: String,
        /// Every chip the library supports.
        known: Vec<String>,
    },
    /// No such metric for the chip.
    #[error("no metric {name:?} on {chip}{}", close_text(.close))]
    UnknownMetric {
        /// The name given.
        name: String,
        /// The chip.
        chip: String,
        /// The closest names the chip has (full names, best first; may be empty).
        close: Vec<String>,
    },
    /// The metric exists, but its name lacks a roll-up or carries one its kind does not have
    /// (`dram__bytes_read` needs `.sum`, `.avg`, ...).
    #[error("metric {name:?}: {base} takes one of {}", .valid.join(" "))]
    BadSubmetric {
        /// The name given.
        name: String,
        /// Its base metric.
        base: String,
        /// The suffixes the base takes (with their leading dot).
        valid: Vec<String>,
    },
    /// The metric exists on the chip, but not for the chosen collection method.
    #[error("metric {name:?} cannot be collected by {method} on {chip}{}", other_text(.other))]
    NotSupportedByMethod {
        /// The name given.
        name: String,
        /// The method asked for.
        method: Method,
        /// The chip.
        chip: String,
        /// The other method, where it supports the metric.
        other: Option<Method>,
    },
    /// The metrics need several passes over the workload, which the method cannot do (PM sampling collects in one).
    #[error("{method} collects in one pass; these metrics need {passes}: {}; collect fewer at once", .metrics.join(", "))]
    TooManyPasses {
        /// The method.
        method: Method,
        /// Passes the configuration needs.
        passes: usize,
        /// The metrics asked for.
        metrics: Vec<String>,
    },
    /// No metric was asked for.
    #[error("no metric to collect")]
    NoMetrics,
    /// A metric or range name holds a NUL byte.
    #[error("name {0:?} holds a NUL byte")]
    NulInName(String),
    /// No CUDA device with this index.
    #[error("no CUDA device {index} (this machine has {count})")]
    NoSuchDevice {
        /// The index given.
        index: usize,
        /// Devices the driver sees.
        count: usize,
    },
    /// The device is older than the API supports.
    #[error("device {index} ({name}, compute capability {}.{}) is older than {method} supports (needs {}.{} or later)", .capability.0, .capability.1, .needed.0, .needed.1)]
    DeviceTooOld {
        /// The device.
        index: usize,
        /// Its name.
        name: String,
        /// Its compute capability.
        capability: (i32, i32),
        /// What the API needs.
        needed: (i32, i32),
        /// The API.
        method: &'static str,
    },
    /// CUPTI says the device's configuration does not allow profiling (`cuptiProfilerDeviceSupported`).
    #[error("device {index} cannot be profiled here: {}", .reasons.join("; "))]
    DeviceUnsupported {
        /// The device.
        index: usize,
        /// Why, one entry per configuration CUPTI flags (SLI, vGPU, confidential computing, CMP, WSL, ...).
        reasons: Vec<String>,
    },
    /// The GPU's counters are held by another client (`CUPTI_ERROR_HARDWARE_BUSY`): one per GPU.
    #[error("{call}: the GPU's performance counters are in use; likely holders: {LIKELY_HOLDERS}")]
    CountersBusy {
        /// The call that found them busy.
        call: &'static str,
    },
    /// CUPTI's profiler host knows the chip but lists no metric for it (a `libnvperf_host.so` of another CUPTI
    /// release, or a profiler that could not be initialised).
    #[error(
        "CUPTI lists no metric for {chip}: is libnvperf_host.so the one of the loaded CUPTI (see `gpu-tools doctor \
         --verbose`)?"
    )]
    EmptyCatalog {
        /// The chip.
        chip: String,
    },
    /// A [`PmSampler`](crate::cupti::pm_sampling::PmSampler) of this process already samples the device: the GPU
    /// has one PM client (checked before any vendor call; a second one in the same process would otherwise get an
    /// unexplained `CUPTI_ERROR_UNKNOWN`).
    #[error(
        "device {device} is already sampled by a PM sampler of this process (one PM client per GPU): drop it first"
    )]
    AlreadySampling {
        /// The device.
        device: usize,
    },
    /// CUPTI's profiler is taken in this process by another client (`CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED`).
    #[error(
        "{call}: another CUPTI client in this process holds the profiler (a debugger such as cuda-gdb, or another \
         profiling tool loaded into the program)"
    )]
    ProfilerTaken {
        /// The call that was refused.
        call: &'static str,
    },
    /// The driver refuses counter access to this user (`CUPTI_ERROR_INSUFFICIENT_PRIVILEGES`).
    #[error("{call}: no permission for GPU performance counters: {PRIVILEGES_FIX}")]
    InsufficientPrivileges {
        /// The call that was refused.
        call: &'static str,
    },
    /// A buffer cannot hold one sample (or one range).
    #[error("the {what} of {bytes} bytes cannot hold one sample (needs at least {needed} bytes)")]
    BufferTooSmall {
        /// Which buffer.
        what: &'static str,
        /// Its size.
        bytes: usize,
        /// The smallest size that holds one.
        needed: usize,
    },
    /// A setting is outside what the API accepts.
    #[error("{what}: {reason}")]
    InvalidSetting {
        /// The setting.
        what: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A call made in the wrong state (pop without push, results before stop, ...).
    #[error("{0}")]
    State(&'static str),
    /// The sampler's decode thread ended with an error or a panic; the text says which.
    #[error("the decode thread failed: {0}")]
    DecodeThread(String),
    /// A saved counter-data file could not be read.
    #[error(transparent)]
    ImageFile(#[from] ImageFileError),
    /// A CUPTI call failed.
    #[error("{call} failed: {error}")]
    Vendor {
        /// The function.
        call: &'static str,
        /// CUPTI's code.
        error: CuptiError,
    },
}

impl ProfilingError {
    /// The typed error for a failed CUPTI call: busy counters and missing privileges get their own variants.
    pub(crate) fn vendor(call: &'static str, error: CuptiError) -> Self {
        match error {
            CuptiError::HardwareBusy => ProfilingError::CountersBusy { call },
            CuptiError::MultipleSubscribersNotSupported => ProfilingError::ProfilerTaken { call },
            CuptiError::InsufficientPrivileges
            | CuptiError::VirtualizedDeviceInsufficientPrivileges => {
                ProfilingError::InsufficientPrivileges { call }
            }
            error => ProfilingError::Vendor { call, error },
        }
    }

    /// The CUPTI code behind the error, where there is one.
    pub fn vendor_code(&self) -> Option<CuptiError> {
        match self {
            ProfilingError::CountersBusy { .. } => Some(CuptiError::HardwareBusy),
            ProfilingError::ProfilerTaken { .. } => {
                Some(CuptiError::MultipleSubscribersNotSupported)
            }
            ProfilingError::InsufficientPrivileges { .. } => {
                Some(CuptiError::InsufficientPrivileges)
            }
            ProfilingError::Vendor { error, .. } => Some(*error),
            _ => None,
        }
    }
}

/// `Ok` for `CUPTI_SUCCESS`, the typed error otherwise (logged with the call's name).
pub(crate) fn check(call: &'static str, code: u32) -> Result<(), ProfilingError> {
    CuptiError::check_call(call, code).map_err(|e| ProfilingError::vendor(call, e))
}

fn close_text(close: &[String]) -> String {
    if close.is_empty() {
        String::new()
    } else {
        format!("; close names: {}", close.join(", "))
    }
}

fn other_text(other: &Option<Method>) -> String {
    match other {
        Some(m) => format!(" (the {m} supports it)"),
        None => String::new(),
    }
}

/// The counter-data file version this crate writes and reads ([`image::VERSION`](super::image::VERSION)).
pub(super) const IMAGE_FILE_VERSION: u16 = 1;

/// A counter-data file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ImageFileError {
    /// Not a counter-data file.
    #[error("not a gpu-tools counter-data file (magic {0:02x?})")]
    BadMagic([u8; 8]),
    /// A version this crate does not read.
    #[error(
        "counter-data file version {0} is not supported (this crate reads {IMAGE_FILE_VERSION})"
    )]
    Version(u16),
    /// A method code this crate does not know.
    #[error("counter-data file names method {0}, not one this crate knows")]
    Method(u8),
    /// The file ends inside a field.
    #[error("counter-data file ends inside its {0}")]
    Truncated(&'static str),
    /// A length or count above the limits.
    #[error("counter-data file: {what} of {value} is above the limit of {limit}")]
    TooLarge {
        /// Which field.
        what: &'static str,
        /// Its value.
        value: u64,
        /// The limit.
        limit: u64,
    },
    /// A name is not UTF-8.
    #[error("counter-data file: the {0} is not UTF-8")]
    NotUtf8(&'static str),
    /// The image does not hash to the value stored with it.
    #[error("counter-data file: the image is corrupt (hash {found:#018x}, stored {stored:#018x})")]
    HashMismatch {
        /// The hash of the bytes found.
        found: u64,
        /// The hash stored.
        stored: u64,
    },
    /// Bytes follow the image.
    #[error("counter-data file: {0} bytes follow the image")]
    TrailingBytes(usize),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_and_privileges_are_typed_and_say_what_to_do() {
        let busy = ProfilingError::vendor("cuptiPmSamplingEnable", CuptiError::HardwareBusy);
        assert!(matches!(busy, ProfilingError::CountersBusy { .. }));
        let text = busy.to_string();
        assert!(
            text.contains("ncu") && text.contains("DCGM") && text.contains("Nsight Systems"),
            "{text}"
        );
        assert_eq!(busy.vendor_code(), Some(CuptiError::HardwareBusy));
        let denied =
            ProfilingError::vendor("cuptiPmSamplingEnable", CuptiError::InsufficientPrivileges);
        assert!(denied.to_string().contains("CAP_PERFMON"), "{denied}");
        let other = ProfilingError::vendor("cuptiPmSamplingStart", CuptiError::InvalidOperation);
        assert!(matches!(
            other,
            ProfilingError::Vendor {
                call: "cuptiPmSamplingStart",
                ..
            }
        ));
    }
}
