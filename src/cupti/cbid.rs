//! Callback ids of the driver and runtime APIs (`CUpti_driver_api_trace_cbid`, `CUpti_runtime_api_trace_cbid`),
//! named from the CUPTI headers. Activity records of the API kinds and API callbacks both carry them.

use std::fmt;

use crate::sys::cupti as sys;
use crate::sys::cupti_cbid_names::{DRIVER_CBID_NAMES, RUNTIME_CBID_NAMES};

/// The API an id belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiDomain {
    /// The CUDA driver API (`cu*`).
    Driver,
    /// The CUDA runtime API (`cuda*`).
    Runtime,
}

impl fmt::Display for ApiDomain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ApiDomain::Driver => "driver",
            ApiDomain::Runtime => "runtime",
        })
    }
}

/// The function name inside a runtime header name: the header appends the CUDA version that introduced the id
/// (`cudaLaunchKernel_v7000`); the function is `cudaLaunchKernel`.
fn strip_version(name: &'static str) -> &'static str {
    match name.rsplit_once("_v") {
        Some((head, digits))
            if (4..=6).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()) =>
        {
            head
        }
        _ => name,
    }
}

macro_rules! cbid_type {
    ($(#[$meta:meta])* $Name:ident, $table:ident, $domain:expr, $what:literal, $prefix:literal) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $Name(u32);

        impl $Name {
            /// The id with this value (any value: ids newer than the crate's header have no name).
            #[inline]
            pub const fn new(id: u32) -> Self {
                $Name(id)
            }

            /// The numeric id.
            #[inline]
            pub const fn id(self) -> u32 {
                self.0
            }

            /// The API the id belongs to.
            #[inline]
            pub const fn domain(self) -> ApiDomain {
                $domain
            }

            #[doc = concat!("The header's name without the `", $prefix, "` prefix; `None` for an id the CUPTI 13.0")]
            /// header does not define.
            #[inline]
            pub fn name(self) -> Option<&'static str> {
                $table
                    .get(self.0 as usize)
                    .copied()
                    .filter(|n| !n.is_empty())
            }

            #[doc = concat!("The id whose header name is `name` (without the `", $prefix, "` prefix).")]
            #[inline]
            pub fn from_name(name: &str) -> Option<Self> {
                $table
                    .iter()
                    .position(|n| !n.is_empty() && *n == name)
                    .map(|i| $Name(i as u32))
            }

            /// Every id the header names, in id order.
            #[inline]
            pub fn all() -> impl Iterator<Item = Self> {
                $table
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| !n.is_empty())
                    .map(|(i, _)| $Name(i as u32))
            }
        }

        impl fmt::Debug for $Name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(n) => write!(f, "{}({} {n})", stringify!($Name), self.0),
                    None => write!(f, "{}({})", stringify!($Name), self.0),
                }
            }
        }

        impl fmt::Display for $Name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.function_name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, concat!($what, " callback id {}"), self.0),
                }
            }
        }
    };
}

cbid_type!(
    /// A driver API callback id (`CUPTI_DRIVER_TRACE_CBID_*`), for example `cuLaunchKernel`.
    DriverCbid,
    DRIVER_CBID_NAMES,
    ApiDomain::Driver,
    "driver API",
    "CUPTI_DRIVER_TRACE_CBID_"
);

cbid_type!(
    /// A runtime API callback id (`CUPTI_RUNTIME_TRACE_CBID_*`), for example `cudaLaunchKernel_v7000`.
    RuntimeCbid,
    RUNTIME_CBID_NAMES,
    ApiDomain::Runtime,
    "runtime API",
    "CUPTI_RUNTIME_TRACE_CBID_"
);

impl DriverCbid {
    /// `cuLaunchKernel`.
    pub const LAUNCH_KERNEL: Self = DriverCbid(sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
    /// `cuLaunchKernelEx`.
    pub const LAUNCH_KERNEL_EX: Self = DriverCbid(sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx);
    /// `cuCtxSynchronize`.
    pub const CTX_SYNCHRONIZE: Self = DriverCbid(sys::CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize);
    /// `cuMemcpyHtoD_v2`.
    pub const MEMCPY_HTOD: Self = DriverCbid(sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2);
    /// `cuMemcpyDtoH_v2`.
    pub const MEMCPY_DTOH: Self = DriverCbid(sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2);

    /// The driver function the id stands for: the header name, which is the exported symbol (`cuMemAlloc_v2`).
    #[inline]
    pub fn function_name(self) -> Option<&'static str> {
        self.name()
    }
}

impl RuntimeCbid {
    /// `cudaLaunchKernel`.
    pub const LAUNCH_KERNEL: Self =
        RuntimeCbid(sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
    /// `cudaDeviceSynchronize`.
    pub const DEVICE_SYNCHRONIZE: Self =
        RuntimeCbid(sys::CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020);
    /// `cudaMemcpy`.
    pub const MEMCPY: Self = RuntimeCbid(sys::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020);

    /// The runtime function the id stands for: the header name without the CUDA version it appeared in
    /// (`cudaLaunchKernel_v7000` is `cudaLaunchKernel`, `cudaMemcpyAsync_ptsz_v7000` is `cudaMemcpyAsync_ptsz`).
    #[inline]
    pub fn function_name(self) -> Option<&'static str> {
        self.name().map(strip_version)
    }
}

/// A callback id together with its API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiCbid {
    /// A driver API function.
    Driver(DriverCbid),
    /// A runtime API function.
    Runtime(RuntimeCbid),
}

impl ApiCbid {
    /// The API.
    #[inline]
    pub fn domain(self) -> ApiDomain {
        match self {
            ApiCbid::Driver(_) => ApiDomain::Driver,
            ApiCbid::Runtime(_) => ApiDomain::Runtime,
        }
    }

    /// The numeric id.
    #[inline]
    pub fn id(self) -> u32 {
        match self {
            ApiCbid::Driver(c) => c.id(),
            ApiCbid::Runtime(c) => c.id(),
        }
    }

    /// The header name (see [`DriverCbid::name`], [`RuntimeCbid::name`]).
    #[inline]
    pub fn name(self) -> Option<&'static str> {
        match self {
            ApiCbid::Driver(c) => c.name(),
            ApiCbid::Runtime(c) => c.name(),
        }
    }

    /// The function name (see [`DriverCbid::function_name`], [`RuntimeCbid::function_name`]).
    #[inline]
    pub fn function_name(self) -> Option<&'static str> {
        match self {
            ApiCbid::Driver(c) => c.function_name(),
            ApiCbid::Runtime(c) => c.function_name(),
        }
    }

    /// Whether the function launches device work or moves data: kernel and graph launches, copies and sets
    /// (`cuLaunch*`, `cuGraphLaunch*`, `cuMemcpy*`, `cuMemset*` and their runtime counterparts).
    pub fn launches_or_moves_data(self) -> bool {
        let Some(name) = self.function_name() else {
            return false;
        };
        [
            "cuLaunch",
            "cuGraphLaunch",
            "cuMemcpy",
            "cuMemset",
            "cudaLaunch",
            "cudaGraphLaunch",
            "cudaMemcpy",
            "cudaMemset",
        ]
        .iter()
        .any(|p| name.starts_with(p))
    }

    /// Whether the function only reads or sets state the CUDA library keeps on the host: getters and error
    /// checks (`cudaGetDevice`, `cuKernelGetName`, `cuDevicePrimaryCtxGetState`, `cudaGetLastError`,
    /// `cudaPeekAtLastError`, `cuGetProcAddress`), occupancy calculations, capture-status queries (`cudaStreamIsCapturing`) and the
    /// current device or context (`cudaSetDevice`, `cuCtxSetCurrent`, `cuCtxPushCurrent`, `cuCtxPopCurrent`).
    /// None of them queues work, waits or allocates, and frameworks call some at every launch (PyTorch 2.11: two
    /// driver getters per kernel launch), so recording them costs more than anything they tell on a timeline.
    /// The default API records leave them out, as Nsight Systems' CUDA trace leaves out calls "not critical for
    /// performance analysis" unless `--cuda-trace-all-apis` is given.
    pub fn is_bookkeeping(self) -> bool {
        let Some(name) = self.function_name() else {
            return false;
        };
        let name = name.strip_suffix("_ptsz").unwrap_or(name);
        name.contains("Get")
            || name.starts_with("cudaPeekAt")
            || name.starts_with("cudaOccupancy")
            || name.starts_with("cuOccupancy")
            || name.contains("IsCapturing")
            || [
                "cudaSetDevice",
                "cuCtxSetCurrent",
                "cuCtxPushCurrent",
                "cuCtxPopCurrent",
                "cuCtxPushCurrent_v2",
                "cuCtxPopCurrent_v2",
            ]
            .contains(&name)
    }
}

impl fmt::Display for ApiCbid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiCbid::Driver(c) => c.fmt(f),
            ApiCbid::Runtime(c) => c.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_header() {
        assert_eq!(DriverCbid::LAUNCH_KERNEL.name(), Some("cuLaunchKernel"));
        assert_eq!(DriverCbid::new(1).name(), Some("cuInit"));
        assert_eq!(DriverCbid::new(0).name(), None, "INVALID is not a name");
        assert_eq!(DriverCbid::new(100_000).name(), None);
        assert_eq!(
            RuntimeCbid::LAUNCH_KERNEL.name(),
            Some("cudaLaunchKernel_v7000")
        );
        assert_eq!(
            RuntimeCbid::LAUNCH_KERNEL.function_name(),
            Some("cudaLaunchKernel")
        );
        assert_eq!(RuntimeCbid::LAUNCH_KERNEL.to_string(), "cudaLaunchKernel");
        assert_eq!(
            DriverCbid::from_name("cuLaunchKernel"),
            Some(DriverCbid::LAUNCH_KERNEL)
        );
        assert_eq!(DriverCbid::from_name(""), None);
        assert_eq!(
            DriverCbid::new(99_999).to_string(),
            "driver API callback id 99999"
        );
        assert_eq!(
            format!("{:?}", DriverCbid::LAUNCH_KERNEL),
            format!(
                "DriverCbid({} cuLaunchKernel)",
                DriverCbid::LAUNCH_KERNEL.id()
            )
        );
    }

    #[test]
    fn bookkeeping_calls_are_getters_checks_and_current_state() {
        let driver = |n: &str| ApiCbid::Driver(DriverCbid::from_name(n).expect(n));
        let runtime = |n: &str| {
            ApiCbid::Runtime(
                RuntimeCbid::all()
                    .find(|c| c.function_name() == Some(n))
                    .expect(n),
            )
        };
        for c in [
            driver("cuDevicePrimaryCtxGetState"),
            driver("cuKernelGetName"),
            driver("cuGetProcAddress_v2"),
            driver("cuCtxGetCurrent"),
            driver("cuCtxSetCurrent"),
            driver("cuCtxPushCurrent_v2"),
            driver("cuPointerGetAttribute"),
            runtime("cudaGetDevice"),
            runtime("cudaGetLastError"),
            runtime("cudaPeekAtLastError"),
            runtime("cudaSetDevice"),
            runtime("cudaStreamIsCapturing"),
            runtime("cudaStreamGetCaptureInfo_ptsz"),
            runtime("cudaOccupancyMaxActiveBlocksPerMultiprocessor"),
        ] {
            assert!(c.is_bookkeeping(), "{c}");
        }
        // What a timeline needs stays: launches, copies, waits, allocations, events, captures, graphs, modules.
        for c in [
            driver("cuLaunchKernel"),
            driver("cuLaunchKernelEx"),
            driver("cuMemcpyHtoDAsync_v2"),
            driver("cuStreamSynchronize"),
            driver("cuCtxSynchronize"),
            driver("cuMemAlloc_v2"),
            driver("cuModuleLoadData"),
            driver("cuGraphLaunch"),
            driver("cuEventRecord"),
            runtime("cudaLaunchKernel"),
            runtime("cudaMemcpyAsync"),
            runtime("cudaDeviceSynchronize"),
            runtime("cudaStreamWaitEvent"),
            runtime("cudaEventQuery"),
            runtime("cudaMalloc"),
            runtime("cudaFree"),
            runtime("cudaStreamBeginCapture"),
            runtime("cudaStreamEndCapture"),
            runtime("cudaGraphInstantiate"),
            runtime("cudaGraphLaunch"),
        ] {
            assert!(!c.is_bookkeeping(), "{c}");
        }
        // Most of the API is neither: about a fifth of the driver's functions are getters and the like.
        let driver_all = DriverCbid::all().count();
        let driver_kept = DriverCbid::all()
            .filter(|&c| !ApiCbid::Driver(c).is_bookkeeping())
            .count();
        assert!(
            driver_kept * 10 > driver_all * 6,
            "{driver_kept} of {driver_all}"
        );
    }

    #[test]
    fn every_named_id_round_trips() {
        let drivers: Vec<_> = DriverCbid::all().collect();
        assert!(drivers.len() > 700, "{}", drivers.len());
        for id in drivers {
            let name = id.name().expect("named");
            // Names are unique, so the lookup finds this id.
            assert_eq!(DriverCbid::from_name(name), Some(id), "{name}");
        }
        for id in RuntimeCbid::all() {
            let f = id.function_name().expect("named");
            assert!(f.starts_with("cuda") || f.starts_with("__cuda"), "{f}");
            // One version suffix per name: stripping again changes nothing.
            assert_eq!(strip_version(f), f);
        }
    }

    #[test]
    fn version_suffixes() {
        assert_eq!(
            strip_version("cudaMemcpyAsync_ptsz_v7000"),
            "cudaMemcpyAsync_ptsz"
        );
        assert_eq!(
            strip_version("cudaGetDeviceProperties_v12000"),
            "cudaGetDeviceProperties"
        );
        assert_eq!(strip_version("cuMemAlloc_v2"), "cuMemAlloc_v2");
        assert_eq!(strip_version("cudaMalloc3D_v3020"), "cudaMalloc3D");
    }
}
