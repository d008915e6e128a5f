//! What a subscriber's closure receives: [`CallbackEvent`], typed from the domain and callback id, borrowing the
//! vendor's callback data for the duration of the call.

use std::ffi::{CStr, c_void};
use std::fmt;

use super::params::{CaptureCall, LaunchCall, SyncCall};
use crate::cupti::cbid::{ApiCbid, DriverCbid, RuntimeCbid};
use crate::cupti::library::CallbackFns;
use crate::sys::cupti as sys;

/// A callback domain (`CUpti_CallbackDomain`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallbackDomain {
    /// Driver API functions, on entry and exit.
    DriverApi,
    /// Runtime API functions, on entry and exit.
    RuntimeApi,
    /// Contexts, streams and modules created and destroyed.
    Resource,
    /// Stream and context synchronisation finished.
    Synchronize,
    /// NVTX calls.
    Nvtx,
    /// CUPTI's own errors and warnings.
    State,
}

impl CallbackDomain {
    /// The vendor's value.
    pub fn raw(self) -> sys::CUpti_CallbackDomain {
        match self {
            CallbackDomain::DriverApi => sys::CUPTI_CB_DOMAIN_DRIVER_API,
            CallbackDomain::RuntimeApi => sys::CUPTI_CB_DOMAIN_RUNTIME_API,
            CallbackDomain::Resource => sys::CUPTI_CB_DOMAIN_RESOURCE,
            CallbackDomain::Synchronize => sys::CUPTI_CB_DOMAIN_SYNCHRONIZE,
            CallbackDomain::Nvtx => sys::CUPTI_CB_DOMAIN_NVTX,
            CallbackDomain::State => sys::CUPTI_CB_DOMAIN_STATE,
        }
    }
}

/// Where in an API function a callback came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiSite {
    /// On entry, before the function runs.
    Enter,
    /// On exit, after it ran (the return value is known).
    Exit,
}

/// One callback, typed by domain, borrowing CUPTI's data for the duration of the call. It holds CUPTI's handles
/// and pointers, so it is neither `Send` nor `Sync`, and cannot outlive the call:
///
/// ```compile_fail
/// fn send<T: Send>() {}
/// send::<gpu_tools::cupti::callback::CallbackEvent<'static>>();
/// ```
///
/// ```compile_fail
/// # use gpu_tools::cupti::callback::{CallbackEvent, Subscriber};
/// # use std::ffi::CStr;
/// let kept: std::sync::Mutex<Vec<&'static CStr>> = std::sync::Mutex::new(Vec::new());
/// let _ = Subscriber::new(move |event| {
///     if let CallbackEvent::Api(call) = event {
///         kept.lock().unwrap().extend(call.symbol_name()); // error: the name borrows the call
///     }
/// });
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum CallbackEvent<'a> {
    /// A driver or runtime API function was entered or is returning.
    Api(ApiEvent<'a>),
    /// A context, stream or module was created or is being destroyed.
    Resource(ResourceEvent<'a>),
    /// A stream or context synchronisation finished.
    Synchronize(SyncEvent),
    /// A domain or callback id the crate does not type (NVTX, state, graphs), with the vendor's data pointer.
    Other {
        /// The domain's value.
        domain: u32,
        /// The callback id.
        cbid: u32,
        /// The vendor's data, valid during the call only.
        data: *const c_void,
    },
}

/// A driver or runtime API callback (`CUpti_CallbackData`).
pub struct ApiEvent<'a> {
    raw: &'a sys::CUpti_CallbackData,
    cbid: ApiCbid,
}

impl<'a> ApiEvent<'a> {
    /// The record as the header declares it.
    pub fn raw(&self) -> &'a sys::CUpti_CallbackData {
        self.raw
    }

    /// The function, named from the headers.
    pub fn cbid(&self) -> ApiCbid {
        self.cbid
    }

    /// Entry or exit.
    pub fn site(&self) -> ApiSite {
        if self.raw.callbackSite == sys::CUPTI_API_EXIT {
            ApiSite::Exit
        } else {
            ApiSite::Enter
        }
    }

    /// The function's name as CUPTI gives it (a static string).
    pub fn function_name(&self) -> Option<&'static CStr> {
        let p = self.raw.functionName;
        // SAFETY: CUPTI documents this as a global constant string, or null.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) })
    }

    /// For launches, the kernel's (mangled) name.
    pub fn symbol_name(&self) -> Option<&'a CStr> {
        let p = self.raw.symbolName;
        // SAFETY: CUPTI's string, valid during the callback, or null.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) })
    }

    /// The correlation id the activity records of this call carry (`CUpti_ActivityAPI`, and the kernels,
    /// copies and sets it started).
    pub fn correlation_id(&self) -> u32 {
        self.raw.correlationId
    }

    /// The id of the thread's current context (the id activity records carry), 0 if none.
    pub fn context_uid(&self) -> u32 {
        self.raw.contextUid
    }

    /// The thread's current context, null if none (it may change between entry and exit of a runtime call that
    /// creates one).
    pub fn context(&self) -> sys::CUcontext {
        self.raw.context
    }

    /// The 64 bits CUPTI keeps for this call between its entry and exit callbacks.
    pub fn correlation_data(&self) -> u64 {
        let p = self.raw.correlationData;
        // SAFETY: CUPTI's slot for this call, valid during the callback, or null.
        if p.is_null() { 0 } else { unsafe { p.read() } }
    }

    /// Sets the 64 bits the exit callback of this call will read with
    /// [`correlation_data`](Self::correlation_data).
    pub fn set_correlation_data(&self, value: u64) {
        let p = self.raw.correlationData;
        if !p.is_null() {
            // SAFETY: CUPTI hands this slot over for the client to write, valid during the callback.
            unsafe { p.write(value) };
        }
    }

    /// What the function returned (`CUresult` or `cudaError_t`); `None` on entry.
    pub fn return_value(&self) -> Option<i32> {
        let p = self.raw.functionReturnValue;
        if self.site() != ApiSite::Exit || p.is_null() {
            return None;
        }
        // SAFETY: on exit CUPTI points this at the function's CUresult or cudaError_t, both C enums (int).
        Some(unsafe { p.cast::<i32>().read_unaligned() })
    }

    /// The function's parameter struct (see CUPTI's `generated_cuda_meta.h` and
    /// `generated_cuda_runtime_api_meta.h`), valid during the callback.
    pub fn params(&self) -> *const c_void {
        self.raw.functionParams
    }

    /// For the driver's kernel and graph launches (`cuLaunchKernel`, `cuLaunchKernelEx`,
    /// `cuLaunchCooperativeKernel`, `cuGraphLaunch`, and their `_ptsz` forms), the stream launched into.
    pub fn launch_stream(&self) -> Option<sys::CUstream> {
        let (call, params) = self.launch_call()?;
        // SAFETY: the parameter struct of this callback id, valid during the callback.
        unsafe { call.stream(params) }
    }

    /// For a graph launch (`cuGraphLaunch`, `cuGraphLaunch_ptsz`), the executable graph it runs.
    pub fn graph_exec(&self) -> Option<sys::CUgraphExec> {
        let (call, params) = self.launch_call()?;
        // SAFETY: as above.
        unsafe { call.graph_exec(params) }
    }

    /// For the driver's synchronisation calls ([`SyncCall::NAMES`]), what the call waits for, asks about or
    /// marks.
    pub fn sync_call(&self) -> Option<SyncCall> {
        let (cbid, params) = self.driver_params()?;
        // SAFETY: the parameter struct of this callback id, valid during the callback.
        unsafe { SyncCall::of(cbid, params) }
    }

    /// For the driver's stream capture calls ([`CaptureCall::BEGINS`] and [`CaptureCall::ENDS`]), whether the call
    /// begins or ends a capture, and of which stream.
    pub fn capture_call(&self) -> Option<CaptureCall> {
        let (cbid, params) = self.driver_params()?;
        // SAFETY: the parameter struct of this callback id, valid during the callback.
        unsafe { CaptureCall::of(cbid, params) }
    }

    /// A driver call's id and its non-null parameter struct.
    fn driver_params(&self) -> Option<(DriverCbid, *const c_void)> {
        let ApiCbid::Driver(cbid) = self.cbid else {
            return None;
        };
        let params = self.raw.functionParams;
        (!params.is_null()).then_some((cbid, params))
    }

    fn launch_call(&self) -> Option<(LaunchCall, *const c_void)> {
        let (cbid, params) = self.driver_params()?;
        Some((LaunchCall::of(cbid)?, params))
    }
}

impl fmt::Debug for ApiEvent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiEvent")
            .field("cbid", &self.cbid)
            .field("site", &self.site())
            .field("correlation_id", &self.correlation_id())
            .field("symbol_name", &self.symbol_name())
            .finish_non_exhaustive()
    }
}

/// A resource callback (`CUpti_ResourceData`).
pub struct ResourceEvent<'a> {
    raw: &'a sys::CUpti_ResourceData,
    cbid: u32,
    fns: &'a CallbackFns,
}

/// What happened to a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ResourceKind {
    /// The driver finished `cuInit`.
    CuInitFinished,
    /// A context was created.
    ContextCreated,
    /// A context is about to be destroyed: the moment to flush its activity.
    ContextDestroyStarting,
    /// A stream was created.
    StreamCreated,
    /// A stream is about to be destroyed.
    StreamDestroyStarting,
    /// A module was loaded ([`ResourceEvent::module`]).
    ModuleLoaded,
    /// A module is about to be unloaded ([`ResourceEvent::module`]).
    ModuleUnloadStarting,
    /// An executable graph was made from a graph ([`ResourceEvent::graph`]: both).
    GraphExecCreated,
    /// An executable graph is about to be destroyed ([`ResourceEvent::graph`]).
    GraphExecDestroyStarting,
    /// Another resource callback id (other graph events, stream attributes).
    Other(u32),
}

/// What a graph resource event is about (`CUpti_GraphData`); the fields that do not apply to the event are null.
#[derive(Debug, Clone, Copy)]
pub struct GraphInfo {
    /// The graph (for an executable graph's creation: the graph it was made from).
    pub graph: sys::CUgraph,
    /// The graph a cloned graph was cloned from.
    pub original_graph: sys::CUgraph,
    /// The node.
    pub node: sys::CUgraphNode,
    /// The node a cloned node was cloned from.
    pub original_node: sys::CUgraphNode,
    /// The node's type (`CUgraphNodeType`).
    pub node_type: u32,
    /// The node a dependency is on.
    pub dependency: sys::CUgraphNode,
    /// The executable graph.
    pub graph_exec: sys::CUgraphExec,
}

/// A module a resource event is about.
#[derive(Debug, Clone, Copy)]
pub struct ModuleInfo<'a> {
    /// CUPTI's id for the module.
    pub id: u32,
    /// The cubin, valid during the callback.
    pub cubin: &'a [u8],
}

impl<'a> ResourceEvent<'a> {
    /// The record as the header declares it.
    pub fn raw(&self) -> &'a sys::CUpti_ResourceData {
        self.raw
    }

    /// What happened.
    pub fn kind(&self) -> ResourceKind {
        match self.cbid {
            sys::CUPTI_CBID_RESOURCE_CU_INIT_FINISHED => ResourceKind::CuInitFinished,
            sys::CUPTI_CBID_RESOURCE_CONTEXT_CREATED => ResourceKind::ContextCreated,
            sys::CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING => {
                ResourceKind::ContextDestroyStarting
            }
            sys::CUPTI_CBID_RESOURCE_STREAM_CREATED => ResourceKind::StreamCreated,
            sys::CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING => ResourceKind::StreamDestroyStarting,
            sys::CUPTI_CBID_RESOURCE_MODULE_LOADED => ResourceKind::ModuleLoaded,
            sys::CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING => ResourceKind::ModuleUnloadStarting,
            sys::CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED => ResourceKind::GraphExecCreated,
            sys::CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING => {
                ResourceKind::GraphExecDestroyStarting
            }
            other => ResourceKind::Other(other),
        }
    }

    /// The context created or destroyed, or holding the stream or module.
    pub fn context(&self) -> sys::CUcontext {
        self.raw.context
    }

    /// The context's id (`cuptiGetContextId`), the id activity records carry.
    pub fn context_id(&self) -> Option<u32> {
        let (f, ctx) = (self.fns.get_context_id?, self.raw.context);
        if ctx.is_null() {
            return None;
        }
        let mut id = 0;
        // SAFETY: a context CUPTI handed over, alive during the callback; a valid out-pointer.
        (unsafe { f(ctx, &mut id) } == sys::CUPTI_SUCCESS).then_some(id)
    }

    /// For stream events, the stream.
    pub fn stream(&self) -> Option<sys::CUstream> {
        matches!(
            self.kind(),
            ResourceKind::StreamCreated | ResourceKind::StreamDestroyStarting
        )
        // SAFETY: for stream callbacks the union holds the stream (the header's documentation).
        .then(|| unsafe { *self.raw.resourceHandle.stream.as_ref() })
    }

    /// For stream events, the stream's id (`cuptiGetStreamId`), the id activity records carry.
    pub fn stream_id(&self) -> Option<u32> {
        let (f, stream) = (self.fns.get_stream_id?, self.stream()?);
        let mut id = 0;
        // SAFETY: a context and stream CUPTI handed over, alive during the callback; a valid out-pointer.
        (unsafe { f(self.raw.context, stream, &mut id) } == sys::CUPTI_SUCCESS).then_some(id)
    }

    /// For graph events (graphs, graph nodes and executable graphs created, cloned, destroyed or updated), what
    /// they are about.
    pub fn graph(&self) -> Option<GraphInfo> {
        let graph_event = matches!(
            self.cbid,
            sys::CUPTI_CBID_RESOURCE_GRAPH_CREATED
                ..=sys::CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED
                    | sys::CUPTI_CBID_RESOURCE_GRAPH_NODE_UPDATED
                    | sys::CUPTI_CBID_RESOURCE_GRAPH_NODE_SET_PARAMS
        );
        if !graph_event || self.raw.resourceDescriptor.is_null() {
            return None;
        }
        // SAFETY: for graph callbacks CUPTI points the descriptor at a CUpti_GraphData, valid during the callback.
        let g = unsafe { &*self.raw.resourceDescriptor.cast::<sys::CUpti_GraphData>() };
        Some(GraphInfo {
            graph: g.graph,
            original_graph: g.originalGraph,
            node: g.node,
            original_node: g.originalNode,
            node_type: g.nodeType,
            dependency: g.dependency,
            graph_exec: g.graphExec,
        })
    }

    /// For graph events, the id CUPTI gives the graph (`cuptiGetGraphId`), the id its activity records carry.
    pub fn graph_id(&self) -> Option<u32> {
        let (f, graph) = (self.fns.get_graph_id?, self.graph()?.graph);
        if graph.is_null() {
            return None;
        }
        let mut id = 0;
        // SAFETY: a graph CUPTI handed over, alive during the callback; a valid out-pointer.
        (unsafe { f(graph, &mut id) } == sys::CUPTI_SUCCESS).then_some(id)
    }

    /// For graph events, the id CUPTI gives the executable graph (`cuptiGetGraphExecId`).
    pub fn graph_exec_id(&self) -> Option<u32> {
        let (f, exec) = (self.fns.get_graph_exec_id?, self.graph()?.graph_exec);
        if exec.is_null() {
            return None;
        }
        let mut id = 0;
        // SAFETY: an executable graph CUPTI handed over, alive during the callback; a valid out-pointer.
        (unsafe { f(exec, &mut id) } == sys::CUPTI_SUCCESS).then_some(id)
    }

    /// For module events, the module and its cubin.
    pub fn module(&self) -> Option<ModuleInfo<'a>> {
        if !matches!(
            self.kind(),
            ResourceKind::ModuleLoaded | ResourceKind::ModuleUnloadStarting
        ) || self.raw.resourceDescriptor.is_null()
        {
            return None;
        }
        // SAFETY: for module callbacks CUPTI points the descriptor at a CUpti_ModuleResourceData, valid during
        // the callback.
        let m = unsafe {
            &*self
                .raw
                .resourceDescriptor
                .cast::<sys::CUpti_ModuleResourceData>()
        };
        let cubin = if m.pCubin.is_null() || m.cubinSize == 0 {
            &[][..]
        } else {
            // SAFETY: `cubinSize` bytes at `pCubin`, CUPTI's copy of the module, valid during the callback.
            unsafe { std::slice::from_raw_parts(m.pCubin.cast::<u8>(), m.cubinSize) }
        };
        Some(ModuleInfo {
            id: m.moduleId,
            cubin,
        })
    }
}

impl fmt::Debug for ResourceEvent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceEvent")
            .field("kind", &self.kind())
            .field("context", &self.context())
            .finish_non_exhaustive()
    }
}

/// A synchronisation callback (`CUpti_SynchronizeData`).
#[derive(Debug, Clone, Copy)]
pub struct SyncEvent {
    /// A stream (`CUPTI_CBID_SYNCHRONIZE_STREAM_SYNCHRONIZED`) or a context was synchronised.
    pub stream_synchronized: bool,
    /// The context.
    pub context: sys::CUcontext,
    /// The stream, null for a context.
    pub stream: sys::CUstream,
}

impl<'a> CallbackEvent<'a> {
    /// Types the vendor's `(domain, cbid, data)`.
    ///
    /// # Safety
    /// `data` must be CUPTI's callback data for `domain` and `cbid`, valid for `'a`.
    pub(crate) unsafe fn new(
        domain: u32,
        cbid: u32,
        data: *const c_void,
        fns: &'a CallbackFns,
    ) -> Self {
        if data.is_null() {
            return CallbackEvent::Other { domain, cbid, data };
        }
        match domain {
            sys::CUPTI_CB_DOMAIN_DRIVER_API | sys::CUPTI_CB_DOMAIN_RUNTIME_API => {
                let cbid = if domain == sys::CUPTI_CB_DOMAIN_DRIVER_API {
                    ApiCbid::Driver(DriverCbid::new(cbid))
                } else {
                    ApiCbid::Runtime(RuntimeCbid::new(cbid))
                };
                CallbackEvent::Api(ApiEvent {
                    // SAFETY: for the API domains the data is a CUpti_CallbackData (the caller's contract).
                    raw: unsafe { &*data.cast() },
                    cbid,
                })
            }
            sys::CUPTI_CB_DOMAIN_RESOURCE => CallbackEvent::Resource(ResourceEvent {
                // SAFETY: for the resource domain the data is a CUpti_ResourceData.
                raw: unsafe { &*data.cast() },
                cbid,
                fns,
            }),
            sys::CUPTI_CB_DOMAIN_SYNCHRONIZE => {
                // SAFETY: for the synchronize domain the data is a CUpti_SynchronizeData.
                let raw = unsafe { &*data.cast::<sys::CUpti_SynchronizeData>() };
                CallbackEvent::Synchronize(SyncEvent {
                    stream_synchronized: cbid == sys::CUPTI_CBID_SYNCHRONIZE_STREAM_SYNCHRONIZED,
                    context: raw.context,
                    stream: raw.stream,
                })
            }
            _ => CallbackEvent::Other { domain, cbid, data },
        }
    }
}
