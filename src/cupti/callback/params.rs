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
        // In each arm: the struct CUPTI documents for this callback id, read while the callback runs.
        match self {
            // SAFETY: as said above the match.
            LaunchCall::Kernel => Some(unsafe { (*params.cast::<LaunchKernel>()).stream }),
            LaunchCall::Cooperative => {
                // SAFETY: as said above the match.
                Some(unsafe { (*params.cast::<LaunchCooperativeKernel>()).stream })
            }
            LaunchCall::KernelEx => {
                // SAFETY: as said above the match.
                let config = unsafe { (*params.cast::<LaunchKernelEx>()).config };
                // SAFETY: the caller's launch configuration, valid during its call.
                (!config.is_null()).then(|| unsafe { (*config).hStream })
            }
            // SAFETY: as said above the match.
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

/// `cuStreamSynchronize_params`, `cuStreamQuery_params` (and their `_ptsz` forms); the first field of the capture
/// calls' parameter structs too.
#[repr(C)]
struct OnStream {
    stream: sys::CUstream,
}

/// `cuEventRecord_params`, `cuEventRecordWithFlags_params` (the flags follow; not read), and their `_ptsz` forms.
#[repr(C)]
struct EventRecord {
    event: sys::CUevent,
    stream: sys::CUstream,
}

/// `cuEventSynchronize_params`, `cuEventQuery_params`.
#[repr(C)]
struct OnEvent {
    event: sys::CUevent,
}

/// `cuCtxSynchronize_v2_params` (generated_cuda_meta.h): the context to wait for, NULL for the current one.
#[repr(C)]
struct OnContext {
    ctx: sys::CUcontext,
}

const _: () = {
    assert!(std::mem::size_of::<EventRecord>() == 16);
    assert!(std::mem::size_of::<OnStream>() == 8);
    assert!(std::mem::size_of::<OnContext>() == 8);
};

/// A driver call that waits for, asks about or marks the progress of a stream's work: what a program's own
/// synchronisation says of which launches have finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncCall {
    /// `cuStreamSynchronize`: returns once the stream's earlier work has finished.
    StreamSynchronize(sys::CUstream),
    /// `cuStreamQuery`: `CUDA_SUCCESS` when the stream's earlier work has finished.
    StreamQuery(sys::CUstream),
    /// `cuEventRecord` (and `WithFlags`): the event marks the stream's work launched so far.
    EventRecord {
        /// The event.
        event: sys::CUevent,
        /// The stream whose work it marks.
        stream: sys::CUstream,
    },
    /// `cuEventSynchronize`: returns once the work the event marks has finished.
    EventSynchronize(sys::CUevent),
    /// `cuEventQuery`: `CUDA_SUCCESS` when the work the event marks has finished.
    EventQuery(sys::CUevent),
    /// `cuCtxSynchronize` (`None`: the calling thread's current context) or `cuCtxSynchronize_v2` (the context it
    /// names, `None` where it passes NULL for the current one): returns once all of that context's work has
    /// finished.
    ContextSynchronize(Option<sys::CUcontext>),
}

impl SyncCall {
    /// The driver functions `SyncCall::of` reads.
    pub const NAMES: [&'static str; 12] = [
        "cuStreamSynchronize",
        "cuStreamSynchronize_ptsz",
        "cuStreamQuery",
        "cuStreamQuery_ptsz",
        "cuEventRecord",
        "cuEventRecord_ptsz",
        "cuEventRecordWithFlags",
        "cuEventRecordWithFlags_ptsz",
        "cuEventSynchronize",
        "cuEventQuery",
        "cuCtxSynchronize",
        "cuCtxSynchronize_v2",
    ];

    /// The call of a driver callback, read from its parameters.
    ///
    /// # Safety
    /// `params` is the non-null `functionParams` of a callback of `cbid`, valid during the call.
    pub(super) unsafe fn of(cbid: DriverCbid, params: *const std::ffi::c_void) -> Option<SyncCall> {
        // SAFETY: the struct CUPTI documents for this callback id (each arm below calls the closure for its own),
        // read while the callback runs.
        let stream = || unsafe { (*params.cast::<OnStream>()).stream };
        // SAFETY: as above.
        let event = || unsafe { (*params.cast::<OnEvent>()).event };
        Some(match cbid.name()? {
            "cuStreamSynchronize" | "cuStreamSynchronize_ptsz" => {
                SyncCall::StreamSynchronize(stream())
            }
            "cuStreamQuery" | "cuStreamQuery_ptsz" => SyncCall::StreamQuery(stream()),
            "cuEventRecord"
            | "cuEventRecord_ptsz"
            | "cuEventRecordWithFlags"
            | "cuEventRecordWithFlags_ptsz" => {
                // SAFETY: as above.
                let r = unsafe { &*params.cast::<EventRecord>() };
                SyncCall::EventRecord {
                    event: r.event,
                    stream: r.stream,
                }
            }
            "cuEventSynchronize" => SyncCall::EventSynchronize(event()),
            "cuEventQuery" => SyncCall::EventQuery(event()),
            "cuCtxSynchronize" => SyncCall::ContextSynchronize(None),
            "cuCtxSynchronize_v2" => {
                // SAFETY: as above.
                let ctx = unsafe { (*params.cast::<OnContext>()).ctx };
                SyncCall::ContextSynchronize((!ctx.is_null()).then_some(ctx))
            }
            _ => return None,
        })
    }
}

/// A driver call that begins or ends a stream capture: while one is under way, the captured stream's work is
/// recorded into a graph instead of run, and a question about that stream (or, from a thread in the default capture
/// mode, about any stream) ends the capture with an error in the program's thread (`cudaErrorStreamCaptureInvalidated`
/// at its end: a PyTorch job so killed on an H100 by a `where` that asked its streams during a `torch.cuda.graph`
/// capture).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureCall {
    /// `cuStreamBeginCapture` (every form, `ToGraph` included): the stream starts capturing when the call succeeds.
    Begin(sys::CUstream),
    /// `cuStreamEndCapture`: the stream's capture has ended when the call returns, whatever it returns.
    End(sys::CUstream),
}

impl CaptureCall {
    /// The driver functions that begin a capture.
    pub const BEGINS: [&'static str; 6] = [
        "cuStreamBeginCapture",
        "cuStreamBeginCapture_ptsz",
        "cuStreamBeginCapture_v2",
        "cuStreamBeginCapture_v2_ptsz",
        "cuStreamBeginCaptureToGraph",
        "cuStreamBeginCaptureToGraph_ptsz",
    ];
    /// The driver functions that end one.
    pub const ENDS: [&'static str; 2] = ["cuStreamEndCapture", "cuStreamEndCapture_ptsz"];

    /// The call of a driver callback, read from its parameters (the stream is the first field of each).
    ///
    /// # Safety
    /// `params` is the non-null `functionParams` of a callback of `cbid`, valid during the call.
    pub(super) unsafe fn of(
        cbid: DriverCbid,
        params: *const std::ffi::c_void,
    ) -> Option<CaptureCall> {
        let name = cbid.name()?;
        let begins = Self::BEGINS.contains(&name);
        if !begins && !Self::ENDS.contains(&name) {
            return None;
        }
        // SAFETY: each of these calls' parameter structs (generated_cuda_meta.h) starts with the stream, and the
        // caller's struct is valid while the callback runs.
        let stream = unsafe { (*params.cast::<OnStream>()).stream };
        Some(if begins {
            CaptureCall::Begin(stream)
        } else {
            CaptureCall::End(stream)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(name: &str, params: &[usize]) -> Option<SyncCall> {
        let cbid = DriverCbid::from_name(name).expect("a driver callback id");
        // SAFETY: `params` has the layout of the call's parameter struct (pointer-sized fields) and lives for the
        // call.
        unsafe { SyncCall::of(cbid, params.as_ptr().cast()) }
    }

    #[test]
    fn a_capture_call_names_its_stream_and_whether_it_begins_or_ends() {
        let of = |name: &str, params: &[usize]| {
            let cbid = DriverCbid::from_name(name).expect("a driver callback id");
            // SAFETY: `params` has the layout of the call's parameter struct (pointer-sized fields) and lives for
            // the call.
            unsafe { CaptureCall::of(cbid, params.as_ptr().cast()) }
        };
        for name in CaptureCall::BEGINS.iter().chain(&CaptureCall::ENDS) {
            assert!(DriverCbid::from_name(name).is_some(), "{name}");
        }
        assert_eq!(
            of("cuStreamBeginCapture_v2", &[0x70, 0]),
            Some(CaptureCall::Begin(0x70 as sys::CUstream))
        );
        assert_eq!(
            of("cuStreamBeginCaptureToGraph", &[0x71, 0xa0, 0, 0, 0, 0]),
            Some(CaptureCall::Begin(0x71 as sys::CUstream))
        );
        assert_eq!(
            of("cuStreamEndCapture", &[0x70, 0xb0]),
            Some(CaptureCall::End(0x70 as sys::CUstream))
        );
        assert_eq!(of("cuStreamQuery", &[0x70]), None);
    }

    #[test]
    fn a_context_synchronisation_names_the_context_it_waits_for() {
        assert_eq!(
            of("cuCtxSynchronize", &[]),
            Some(SyncCall::ContextSynchronize(None))
        );
        assert_eq!(
            of("cuCtxSynchronize_v2", &[0xc0]),
            Some(SyncCall::ContextSynchronize(Some(0xc0 as sys::CUcontext)))
        );
        assert_eq!(
            of("cuCtxSynchronize_v2", &[0]),
            Some(SyncCall::ContextSynchronize(None)),
            "NULL is the current context"
        );
        assert_eq!(
            of("cuStreamQuery", &[0x70]),
            Some(SyncCall::StreamQuery(0x70 as sys::CUstream))
        );
    }
}
