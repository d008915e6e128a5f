//! The doubles' controls, opened in the child: CUPTI's callbacks fired, auto ranges counted, graphs made.

use std::ffi::{CStr, c_char, c_void};

use crate::support::double;

// ------------------------------------------------------------------------------------------------------ the child

/// Callback ids of cupti_callbacks.h and cupti_driver_cbid.h.
const DOMAIN_DRIVER: u32 = 1;
const CONTEXT_CREATED: u32 = 1;
const GRAPHEXEC_CREATED: u32 = 18;
pub(crate) const GRAPHEXEC_DESTROY_STARTING: u32 = 19;
/// CUgraphNodeType: a memset node.
pub(crate) const MEMSET_NODE: i32 = 2;

/// The doubles' controls, opened in the child (the same libraries the injection library loads).
pub(crate) struct Controls {
    pub(crate) cupti: libloading::Library,
    driver: libloading::Library,
}

macro_rules! control {
    ($lib:expr, $t:ty, $name:literal) => {
        // SAFETY: the symbol has this signature in the double.
        *unsafe { $lib.get::<$t>($name) }.unwrap_or_else(|e| panic!("{e}"))
    };
}

pub(crate) use control;

/// `cuLaunchKernel_params` (generated_cuda_meta.h).
#[repr(C)]
struct LaunchParams {
    f: *mut c_void,
    dims: [u32; 7],
    stream: *mut c_void,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
}

/// `cuGraphLaunch_params`.
#[repr(C)]
struct GraphLaunchParams {
    exec: *mut c_void,
    stream: *mut c_void,
}

type ApiCallbackFn = unsafe extern "C" fn(
    u32,
    u32,
    *const c_char,
    *const c_char,
    *const c_void,
    *mut c_void,
    u32,
    u32,
    i32,
) -> u64;

impl Controls {
    pub(crate) fn open() -> Controls {
        // SAFETY: the doubles' initialisers only set up their statics.
        unsafe {
            Controls {
                cupti: libloading::Library::new(double("cupti_full")).unwrap(),
                driver: libloading::Library::new(double("cuda_driver")).unwrap(),
            }
        }
    }

    pub(crate) fn context_created(&self, ctx: *mut c_void) {
        let f = control!(
            self.cupti,
            unsafe extern "C" fn(u32, *mut c_void, *mut c_void, u32, *const c_char, usize) -> i32,
            b"cd_resource\0"
        );
        // SAFETY: a live context of the driver double; no module.
        let delivered = unsafe {
            f(
                CONTEXT_CREATED,
                ctx,
                std::ptr::null_mut(),
                0,
                std::ptr::null(),
                0,
            )
        };
        assert_eq!(delivered, 1, "the library subscribed to resource callbacks");
    }

    /// Fires the callbacks of a driver call; returns whether they were delivered (enabled for a subscriber).
    pub(crate) fn api_delivered(
        &self,
        function: &CStr,
        symbol: Option<&CStr>,
        params: *const c_void,
        ctx: *mut c_void,
        corr: u32,
    ) -> bool {
        let cbid = gpu_tools::cupti::DriverCbid::from_name(function.to_str().unwrap())
            .unwrap()
            .id();
        let f = control!(self.cupti, ApiCallbackFn, b"cd_api_callback_params\0");
        // SAFETY: static strings and a parameter struct alive during the call.
        let got = unsafe {
            f(
                DOMAIN_DRIVER,
                cbid,
                function.as_ptr(),
                symbol.map_or(std::ptr::null(), CStr::as_ptr),
                params,
                ctx,
                1,
                corr,
                0,
            )
        };
        got != u64::MAX
    }

    fn api(
        &self,
        function: &CStr,
        symbol: Option<&CStr>,
        params: *const c_void,
        ctx: *mut c_void,
        corr: u32,
    ) {
        assert!(
            self.api_delivered(function, symbol, params, ctx, corr),
            "{function:?} callbacks are enabled"
        );
    }

    /// A kernel launch into `stream`: the callbacks, then (unless the stream captures) its auto range.
    pub(crate) fn launch(
        &self,
        ctx: *mut c_void,
        stream: usize,
        name: &CStr,
        corr: u32,
        runs: bool,
    ) {
        let params = LaunchParams {
            f: std::ptr::null_mut(),
            dims: [1, 1, 1, 32, 1, 1, 0],
            stream: stream as *mut c_void,
            kernel_params: std::ptr::null_mut(),
            extra: std::ptr::null_mut(),
        };
        self.api(
            c"cuLaunchKernel",
            Some(name),
            (&raw const params).cast(),
            ctx,
            corr,
        );
        if runs {
            self.ranges(1);
        }
    }

    /// A kernel launch of a program that may or may not be watched: the callbacks if any are enabled, then its
    /// auto range. Returns whether the callbacks were delivered, and whether a range profiler counted the kernel.
    pub(crate) fn launch_maybe_watched(
        &self,
        ctx: *mut c_void,
        name: &CStr,
        corr: u32,
    ) -> (bool, bool) {
        let params = LaunchParams {
            f: std::ptr::null_mut(),
            dims: [1, 1, 1, 32, 1, 1, 0],
            stream: std::ptr::null_mut(),
            kernel_params: std::ptr::null_mut(),
            extra: std::ptr::null_mut(),
        };
        let delivered = self.api_delivered(
            c"cuLaunchKernel",
            Some(name),
            (&raw const params).cast(),
            ctx,
            corr,
        );
        let run = control!(
            self.cupti,
            unsafe extern "C" fn(*const c_char) -> i32,
            b"cp_launch\0"
        );
        // SAFETY: null asks for a numbered range.
        let counted = unsafe { run(std::ptr::null()) } == 0;
        (delivered, counted)
    }

    pub(crate) fn graph_launch(&self, ctx: *mut c_void, exec: usize, corr: u32, kernels: usize) {
        let params = GraphLaunchParams {
            exec: exec as *mut c_void,
            stream: std::ptr::null_mut(),
        };
        self.api(
            c"cuGraphLaunch",
            None,
            (&raw const params).cast(),
            ctx,
            corr,
        );
        self.ranges(kernels);
    }

    /// `n` kernels run: auto ranges named by number, as CUPTI names them, while the profiler runs (the library
    /// stops it for launches past a per-kernel limit).
    fn ranges(&self, n: usize) {
        let f = control!(
            self.cupti,
            unsafe extern "C" fn(*const c_char) -> i32,
            b"cp_launch\0"
        );
        for _ in 0..n {
            // SAFETY: null asks for a numbered range.
            unsafe { f(std::ptr::null()) };
        }
    }

    pub(crate) fn capturing(&self, stream: usize, on: bool) {
        let f = control!(
            self.driver,
            unsafe extern "C" fn(*mut c_void, i32),
            b"dbl_set_capturing\0"
        );
        // SAFETY: an opaque handle value.
        unsafe { f(stream as *mut c_void, i32::from(on)) }
    }

    pub(crate) fn graph(&self) -> *mut c_void {
        let f = control!(
            self.driver,
            unsafe extern "C" fn() -> *mut c_void,
            b"dbl_graph_create\0"
        );
        // SAFETY: a plain control.
        let g = unsafe { f() };
        assert!(!g.is_null());
        g
    }

    pub(crate) fn kernel(&self, graph: *mut c_void, name: &CStr, kind: i32) -> i32 {
        let f = control!(
            self.driver,
            unsafe extern "C" fn(*mut c_void, *const c_char, i32) -> i32,
            b"dbl_graph_add_kernel\0"
        );
        // SAFETY: a graph of the double; the name is copied.
        unsafe { f(graph, name.as_ptr(), kind) }
    }

    pub(crate) fn node(&self, graph: *mut c_void, ty: i32) -> i32 {
        let f = control!(
            self.driver,
            unsafe extern "C" fn(*mut c_void, i32) -> i32,
            b"dbl_graph_add_node\0"
        );
        // SAFETY: a graph of the double.
        unsafe { f(graph, ty) }
    }

    pub(crate) fn child(&self, graph: *mut c_void, child: *mut c_void) -> i32 {
        let f = control!(
            self.driver,
            unsafe extern "C" fn(*mut c_void, *mut c_void) -> i32,
            b"dbl_graph_add_child\0"
        );
        // SAFETY: graphs of the double.
        unsafe { f(graph, child) }
    }

    pub(crate) fn edge(&self, graph: *mut c_void, from: i32, to: i32) {
        let f = control!(
            self.driver,
            unsafe extern "C" fn(*mut c_void, i32, i32) -> i32,
            b"dbl_graph_add_edge\0"
        );
        // SAFETY: a graph of the double.
        assert_eq!(unsafe { f(graph, from, to) }, 0);
    }

    pub(crate) fn edges_unsupported(&self, on: bool) {
        let f = control!(
            self.driver,
            unsafe extern "C" fn(i32),
            b"dbl_graph_edges_unsupported\0"
        );
        // SAFETY: a plain control.
        unsafe { f(i32::from(on)) }
    }

    /// An executable graph `exec` made from `graph`, which CUPTI numbers `id`.
    pub(crate) fn exec_created(&self, ctx: *mut c_void, graph: *mut c_void, exec: usize, id: u32) {
        let set_id = control!(
            self.cupti,
            unsafe extern "C" fn(*mut c_void, u32),
            b"cd_graph_id\0"
        );
        // SAFETY: opaque handle values.
        unsafe { set_id(graph, id) };
        self.graph_event(GRAPHEXEC_CREATED, ctx, graph, exec);
    }

    pub(crate) fn graph_event(&self, cbid: u32, ctx: *mut c_void, graph: *mut c_void, exec: usize) {
        let f = control!(
            self.cupti,
            unsafe extern "C" fn(u32, *mut c_void, *mut c_void, *mut c_void) -> i32,
            b"cd_graph_resource\0"
        );
        // SAFETY: handles of the doubles.
        assert_eq!(unsafe { f(cbid, ctx, graph, exec as *mut c_void) }, 1);
    }

    pub(crate) fn other_subscriber(&self, name: &'static CStr) {
        let f = control!(
            self.cupti,
            unsafe extern "C" fn(*const c_char),
            b"cd_other_subscriber\0"
        );
        // SAFETY: a static string; the double copies it.
        unsafe { f(name.as_ptr()) }
    }
}
