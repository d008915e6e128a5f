//! The parameter structs of the launch calls, as driver API callbacks hand them over (`functionParams`), for the
//! two things a profiler reads there: the stream a launch goes to, and the executable graph a graph launch runs.
//! Their layouts are those of CUPTI's `generated_cuda_meta.h` (CUDA 13.0), written out here: that header needs
//! the driver's internal declarations (`__CUDA_API_VERSION_INTERNAL`) to be parsed, so the sys layer leaves it
//! out. Fields the crate does not read start with `_`.

use crate::cupti::cbid::DriverCbid;
use crate::sys::cuda_driver as sys;

/// `cuLaunchKernel_params` (also `cuLaunchKernel_ptsz`).
#[repr(C)]
struct LaunchKernel {
    _f: sys::CUfunction,
    _grid: [u32; 3],
    _block: [u32; 3],
    _shared_mem_bytes: u32,
    stream: sys::CUstream,
    _kernel_params: *mut *mut std::ffi::c_void,
    _extra: *mut *mut std::ffi::c_void,
}

/// `cuLaunchCooperativeKernel_params`: the same fields up to the stream.
#[repr(C)]
struct LaunchCooperativeKernel {
    _f: sys::CUfunction,
    _grid: [u32; 3],
    _block: [u32; 3],
    _shared_mem_bytes: u32,
    stream: sys::CUstream,
    _kernel_params: *mut *mut std::ffi::c_void,
}

/// `cuLaunchKernelEx_params`: the stream is in the launch configuration.
#[repr(C)]
struct LaunchKernelEx {
    config: *const sys::CUlaunchConfig,
    _f: sys::CUfunction,
    _kernel_params: *mut *mut std::ffi::c_void,
    _extra: *mut *mut std::ffi::c_void,
}

/// `cuGraphLaunch_params` (also `cuGraphLaunch_ptsz`).
#[repr(C)]
struct GraphLaunch {
    exec: sys::CUgraphExec,
    stream: sys::CUstream,
}

const _: () = {
    assert!(std::mem::offset_of!(LaunchKernel, stream) == 40);
    assert!(std::mem::size_of::<LaunchKernel>() == 64);
    assert!(std::mem::offset_of!(LaunchCooperativeKernel, stream) == 40);
    assert!(std::mem::size_of::<GraphLaunch>() == 16);
    assert!(std::mem::offset_of!(sys::CUlaunchConfig, hStream) == 32);
};

/// Which parameter struct a driver callback id has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LaunchCall {
    Kernel,
    Cooperative,
    KernelEx,
    Graph,
}

impl LaunchCall {
    pub(super) fn of(cbid: DriverCbid) -> Option<LaunchCall> {
        Some(match cbid.name()? {
            "cuLaunchKernel" | "cuLaunchKernel_ptsz" => LaunchCall::Kernel,
            "cuLaunchCooperativeKernel" | "cuLaunchCooperativeKernel_ptsz" => {
                LaunchCall::Cooperative
            }
            "cuLaunchKernelEx" | "cuLaunchKernelEx_ptsz" => LaunchCall::KernelEx,
            "cuGraphLaunch" | "cuGraphLaunch_ptsz" => LaunchCall::Graph,
            _ => return None,
        })
    }

    /// The stream the call launches into.
    ///
    /// # Safety
    /// `params` is the non-null `functionParams` of a callback of this call, valid during the call.
    pub(super) unsafe fn stream(self, params: *const std::ffi::c_void) -> Option<sys::CUstream> {
        // SAFETY (each arm): the struct CUPTI documents for this callback id, read while the callback runs.
        match self {
            LaunchCall::Kernel => Some(unsafe { (*params.cast::<LaunchKernel>()).stream }),
            LaunchCall::Cooperative => {
                Some(unsafe { (*params.cast::<LaunchCooperativeKernel>()).stream })
            }
            LaunchCall::KernelEx => {
                let config = unsafe { (*params.cast::<LaunchKernelEx>()).config };
                // SAFETY: the caller's launch configuration, valid during its call.
                (!config.is_null()).then(|| unsafe { (*config).hStream })
            }
            LaunchCall::Graph => Some(unsafe { (*params.cast::<GraphLaunch>()).stream }),
        }
    }

    /// The executable graph a graph launch runs.
    ///
    /// # Safety
    /// As [`stream`](Self::stream).
    pub(super) unsafe fn graph_exec(
        self,
        params: *const std::ffi::c_void,
    ) -> Option<sys::CUgraphExec> {
        match self {
            // SAFETY: a cuGraphLaunch callback's parameters, read while it runs.
            LaunchCall::Graph => Some(unsafe { (*params.cast::<GraphLaunch>()).exec }),
            _ => None,
        }
    }
}
