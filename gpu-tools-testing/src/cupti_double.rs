//! The controls of the CUPTI double (`gpu-tools-testing/doubles/cupti_activity.c`): what it counted, and the calls that make
//! it write records, fail and call back. Feature-free: opening the double through the library (its CUPTI and
//! driver slots) is left to the tests of each crate, under that crate's features.

use std::ffi::{CStr, c_char, c_void};
use std::path::Path;

/// What the double counted (layout of `struct cd_stats`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub requests: u64,
    pub refused: u64,
    pub completions: u64,
    pub completed_bytes: u64,
    pub records: u64,
    pub dropped_total: u64,
    pub flushes: u64,
    pub enabled_mask: u64,
    pub timestamp_callback: u64,
    pub subscribed: u64,
    pub unsubscribes: u64,
    pub worker_completions: u64,
    pub flush_period_ms: u64,
    /// `cuptiFinalize` calls; of those, made inside a subscriber's callback at an API exit; of those, made while
    /// an activity kind was enabled.
    pub finalizes: u64,
    pub finalizes_at_api_exit: u64,
    pub finalizes_recording: u64,
}

type KernelFn = unsafe extern "C" fn(
    u32,
    u64,
    u64,
    u32,
    u32,
    u32,
    u32,
    *const c_char,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
) -> i32;
type MemcpyFn = unsafe extern "C" fn(u8, u8, u8, u8, u64, u64, u64, u32, u32, u32, u32) -> i32;
type MemsetFn = unsafe extern "C" fn(u32, u64, u64, u64, u32, u32, u32, u32, u16, u16) -> i32;
type ApiFn = unsafe extern "C" fn(u32, u32, u64, u64, u32, u32, u32, u32) -> i32;
type SyncFn = unsafe extern "C" fn(u32, u64, u64, u32, u32, u32, u32) -> i32;
type OverheadFn = unsafe extern "C" fn(u32, u32, u32, u32, u32, u64, u64, u32) -> i32;
type ApiCallbackFn =
    unsafe extern "C" fn(u32, u32, *const c_char, *const c_char, *mut c_void, u32, u32, i32) -> u64;
type ResourceFn =
    unsafe extern "C" fn(u32, *mut c_void, *mut c_void, u32, *const c_char, usize) -> i32;

/// The double's controls, opened beside the copy the library loaded.
pub struct Controls {
    lib: libloading::Library,
}

impl Controls {
    /// Opens the double's controls. Open the same file through the library first, so that both are one copy.
    pub fn open(path: &Path) -> Result<Controls, libloading::Error> {
        // SAFETY: the double has no initialisers to run; opening the file the library opened returns its handle.
        let lib = unsafe { libloading::Library::new(path) }?;
        Ok(Controls { lib })
    }
}

macro_rules! sym {
    ($self:ident, $t:ty, $name:literal) => {
        // SAFETY: the symbol has this signature in cupti_activity.c.
        *unsafe { $self.lib.get::<$t>($name) }.unwrap_or_else(|e| panic!("{e}"))
    };
}

impl Controls {
    pub fn set_version(&self, v: u32) {
        let f = sym!(self, unsafe extern "C" fn(u32), b"cd_set_version\0");
        // SAFETY: a plain setter.
        unsafe { f(v) }
    }

    /// A forced flush keeps an empty current buffer, and one is asked for right after each completion while a kind
    /// is enabled, as CUPTI 13.0 does (`cd_empty_buffer_kept`).
    pub fn set_empty_buffer_kept(&self, on: bool) {
        let f = sym!(self, unsafe extern "C" fn(i32), b"cd_empty_buffer_kept\0");
        // SAFETY: a plain setter.
        unsafe { f(i32::from(on)) }
    }

    /// Each flush, while OVERHEAD is enabled, first completes a buffer of its own holding two overhead records, as
    /// CUPTI 13.0's own thread's buffer comes back ahead of one whose kernels still run (`cd_flush_overhead`).
    pub fn set_flush_overhead(&self, on: bool) {
        let f = sym!(self, unsafe extern "C" fn(i32), b"cd_flush_overhead\0");
        // SAFETY: a plain setter.
        unsafe { f(i32::from(on)) }
    }

    /// Kernel records written from now on (`on`) are of kernels still running: start and end 0 until [`land`]; a
    /// default flush holds back the buffer that holds one, a forced flush returns it with them incomplete, as CUPTI
    /// does (`cd_in_flight`).
    ///
    /// [`land`]: Self::land
    pub fn set_in_flight(&self, on: bool) {
        let f = sym!(self, unsafe extern "C" fn(i32), b"cd_in_flight\0");
        // SAFETY: a plain setter.
        unsafe { f(i32::from(on)) }
    }

    /// The running kernels end `ms` milliseconds from now, as the first flush after that moment sees
    /// (`cd_land_after`): a kernel that outlives a window's stop by a little.
    pub fn land_after(&self, ms: u32) {
        let f = sym!(self, unsafe extern "C" fn(u32), b"cd_land_after\0");
        // SAFETY: a plain setter.
        unsafe { f(ms) }
    }

    /// Kernel records written from now on (`on`) take their start from CUPTI's clock as they go into a buffer, their
    /// duration kept, as CUPTI stamps a record with the clock registered when it builds it (`cd_stamp_at_write`).
    /// Off, a record keeps the stamps it was given, which may be of a clock registered before the write.
    pub fn set_stamp_at_write(&self, on: bool) {
        let f = sym!(self, unsafe extern "C" fn(i32), b"cd_stamp_at_write\0");
        // SAFETY: a plain setter.
        unsafe { f(i32::from(on)) }
    }

    /// The running kernels of the current buffer end: their records are complete (`cd_land`).
    pub fn land(&self) {
        let f = sym!(self, unsafe extern "C" fn(), b"cd_land\0");
        // SAFETY: no arguments; the double takes its own lock.
        unsafe { f() }
    }

    /// The buffer-request callback registered now, which the caller may call later as CUPTI does: it reads the
    /// callback, then calls it without its lock.
    pub fn current_request(
        &self,
    ) -> Option<unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize)> {
        type RequestFn = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
        let f = sym!(
            self,
            unsafe extern "C" fn() -> Option<RequestFn>,
            b"cd_current_request\0"
        );
        // SAFETY: no arguments; the double takes its own lock.
        unsafe { f() }
    }

    /// `cuptiActivityRegisterCallbacks` and `cuptiActivityEnable(kind)`, as another consumer in the process calls
    /// them: it records `kind` into buffers of its own from then on.
    pub fn record_as_another_consumer(
        &self,
        kind: u32,
        request: unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize),
        complete: unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize),
    ) -> (i32, i32) {
        type RequestFn = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
        type CompleteFn = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
        let register = sym!(
            self,
            unsafe extern "C" fn(RequestFn, CompleteFn) -> i32,
            b"cuptiActivityRegisterCallbacks\0"
        );
        let enable = sym!(
            self,
            unsafe extern "C" fn(u32) -> i32,
            b"cuptiActivityEnable\0"
        );
        // SAFETY: the caller's two callbacks have CUPTI's signatures; the double takes its own lock.
        unsafe { (register(request, complete), enable(kind)) }
    }

    /// `cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)`, as another consumer in the process calls it.
    pub fn flush_forced(&self) -> i32 {
        let f = sym!(
            self,
            unsafe extern "C" fn(u32) -> i32,
            b"cuptiActivityFlushAll\0"
        );
        // SAFETY: the flag is the call's only argument; the double takes its own lock.
        unsafe { f(1) }
    }

    /// `cuptiActivityFlushAll(0)`: only the buffers whose records are all complete.
    pub fn flush_completed(&self) -> i32 {
        let f = sym!(
            self,
            unsafe extern "C" fn(u32) -> i32,
            b"cuptiActivityFlushAll\0"
        );
        // SAFETY: the flag is the call's only argument; the double takes its own lock.
        unsafe { f(0) }
    }

    /// Calls `hook` on a thread writing a record, after the buffer-requested callback returned it a buffer and
    /// before the record goes in (the double's lock not held); `None` ends it.
    pub fn set_after_request(&self, hook: Option<extern "C" fn()>) {
        let f = sym!(
            self,
            unsafe extern "C" fn(Option<extern "C" fn()>),
            b"cd_after_request\0"
        );
        // SAFETY: a plain setter; the hook is a function with no arguments, callable from any thread.
        unsafe { f(hook) }
    }

    pub fn set_async(&self, on: bool) {
        let f = sym!(self, unsafe extern "C" fn(i32), b"cd_async\0");
        // SAFETY: a plain setter.
        unsafe { f(i32::from(on)) }
    }

    /// Makes the named CUPTI function fail once with `code`.
    pub fn fail_next(&self, function: &'static CStr, code: i32) {
        let f = sym!(
            self,
            unsafe extern "C" fn(*const c_char, i32),
            b"cd_fail_next\0"
        );
        // SAFETY: a static string the double keeps a pointer to.
        unsafe { f(function.as_ptr(), code) }
    }

    pub fn set_private_kind(&self, kind: u32, size: u32) {
        let f = sym!(
            self,
            unsafe extern "C" fn(u32, u32),
            b"cd_set_private_kind\0"
        );
        // SAFETY: a plain setter.
        unsafe { f(kind, size) }
    }

    pub fn stats(&self) -> Stats {
        let f = sym!(self, unsafe extern "C" fn(*mut Stats), b"cd_stats\0");
        let mut s = Stats::default();
        // SAFETY: `s` has the layout of struct cd_stats.
        unsafe { f(&mut s) };
        s
    }

    /// Kernels emitted from now on ran as nodes of graph `graph` (0: outside any graph), node ids from `first_node`
    /// on.
    pub fn set_kernel_graph(&self, graph: u32, first_node: u64) {
        let f = sym!(
            self,
            unsafe extern "C" fn(u32, u64),
            b"cd_set_kernel_graph\0"
        );
        // SAFETY: a plain setter.
        unsafe { f(graph, first_node) }
    }

    /// A timestamp from the double, through the timestamp callback the tracer registered.
    pub fn now(&self) -> u64 {
        let f = sym!(self, unsafe extern "C" fn() -> u64, b"cd_now\0");
        // SAFETY: no arguments.
        unsafe { f() }
    }

    /// Writes raw record bytes; 1 written, 0 dropped, -1 kind disabled.
    pub fn raw(&self, bytes: &[u64]) -> i32 {
        let f = sym!(
            self,
            unsafe extern "C" fn(*const c_void, usize) -> i32,
            b"cd_raw\0"
        );
        // SAFETY: `bytes` is readable for its length.
        unsafe { f(bytes.as_ptr().cast(), bytes.len() * 8) }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn kernel(
        &self,
        kind: u32,
        start: u64,
        end: u64,
        ids: (u32, u32, u32),
        correlation: u32,
        name: &'static CStr,
        grid: (i32, i32, i32),
        block: (i32, i32, i32),
    ) -> i32 {
        let f = sym!(self, KernelFn, b"cd_kernel\0");
        // SAFETY: `name` is static, so it outlives every record pointing at it.
        unsafe {
            f(
                kind,
                start,
                end,
                ids.0,
                ids.1,
                ids.2,
                correlation,
                name.as_ptr(),
                grid.0,
                grid.1,
                grid.2,
                block.0,
                block.1,
                block.2,
            )
        }
    }

    /// A memcpy of `bytes` with `copy_kind` (1 HtoD, 2 DtoH, 8 DtoD), async flag, on (device 0, ctx 1, stream).
    #[allow(clippy::too_many_arguments)]
    pub fn memcpy(
        &self,
        copy_kind: u8,
        is_async: bool,
        bytes: u64,
        start: u64,
        end: u64,
        stream: u32,
        corr: u32,
    ) -> i32 {
        let f = sym!(self, MemcpyFn, b"cd_memcpy\0");
        let (src, dst) = match copy_kind {
            1 => (2, 3),
            2 => (3, 1),
            _ => (3, 3),
        };
        // SAFETY: plain values.
        unsafe {
            f(
                copy_kind,
                src,
                dst,
                u8::from(is_async),
                bytes,
                start,
                end,
                0,
                1,
                stream,
                corr,
            )
        }
    }

    pub fn memset(
        &self,
        value: u32,
        bytes: u64,
        start: u64,
        end: u64,
        stream: u32,
        corr: u32,
    ) -> i32 {
        let f = sym!(self, MemsetFn, b"cd_memset\0");
        // SAFETY: plain values.
        unsafe { f(value, bytes, start, end, 0, 1, stream, corr, 1, 3) }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn api(
        &self,
        kind: u32,
        cbid: u32,
        start: u64,
        end: u64,
        tid: u32,
        corr: u32,
        ret: u32,
    ) -> i32 {
        let f = sym!(self, ApiFn, b"cd_api\0");
        // SAFETY: plain values.
        unsafe { f(kind, cbid, start, end, 4242, tid, corr, ret) }
    }

    pub fn sync(&self, ty: u32, start: u64, end: u64, corr: u32, stream: u32, event: u32) -> i32 {
        let f = sym!(self, SyncFn, b"cd_sync\0");
        // SAFETY: plain values.
        unsafe { f(ty, start, end, corr, 1, stream, event) }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn overhead(
        &self,
        kind: u32,
        object_kind: u32,
        ids: [u32; 3],
        start: u64,
        end: u64,
        corr: u32,
    ) -> i32 {
        let f = sym!(self, OverheadFn, b"cd_overhead\0");
        // SAFETY: plain values.
        unsafe { f(kind, object_kind, ids[0], ids[1], ids[2], start, end, corr) }
    }

    /// Fires an API call's entry and exit callbacks; what the exit found in the correlation data, `None` when
    /// the callback is not enabled.
    #[allow(clippy::too_many_arguments)]
    pub fn api_callback(
        &self,
        domain: u32,
        cbid: u32,
        function: &'static CStr,
        symbol: Option<&'static CStr>,
        context: usize,
        context_uid: u32,
        corr: u32,
        ret: i32,
    ) -> Option<u64> {
        let f = sym!(self, ApiCallbackFn, b"cd_api_callback\0");
        // SAFETY: static strings; the context is an opaque value the double passes through.
        let v = unsafe {
            f(
                domain,
                cbid,
                function.as_ptr(),
                symbol.map_or(std::ptr::null(), CStr::as_ptr),
                context as *mut c_void,
                context_uid,
                corr,
                ret,
            )
        };
        (v != u64::MAX).then_some(v)
    }

    /// Fires a resource callback; true if delivered.
    pub fn resource(
        &self,
        cbid: u32,
        context: usize,
        stream: usize,
        module: Option<(u32, &[u8])>,
    ) -> bool {
        let f = sym!(self, ResourceFn, b"cd_resource\0");
        let (id, ptr, len) = match module {
            Some((id, bytes)) => (id, bytes.as_ptr().cast::<c_char>(), bytes.len()),
            None => (0, std::ptr::null(), 0),
        };
        // SAFETY: the cubin slice outlives the call; handles are opaque values.
        unsafe {
            f(
                cbid,
                context as *mut c_void,
                stream as *mut c_void,
                id,
                ptr,
                len,
            ) == 1
        }
    }

    /// Fires an API call's callbacks with `params` as its parameter struct; see [`api_callback`](Self::api_callback).
    ///
    /// # Safety
    ///
    /// `params` points to a readable parameter struct of `function`'s layout (the callbacks read it), alive for the
    /// call.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn api_callback_params(
        &self,
        domain: u32,
        cbid: u32,
        function: &'static CStr,
        symbol: Option<&'static CStr>,
        params: *const c_void,
        context: usize,
        corr: u32,
    ) -> Option<u64> {
        // SAFETY: the caller's contract.
        unsafe {
            self.api_callback_returning(domain, cbid, function, symbol, params, context, corr, 0)
        }
    }

    /// [`api_callback_params`](Self::api_callback_params) for a call that returns `ret` (the exit callback's
    /// return value: a `CUresult`, say).
    ///
    /// # Safety
    ///
    /// As [`api_callback_params`](Self::api_callback_params).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn api_callback_returning(
        &self,
        domain: u32,
        cbid: u32,
        function: &'static CStr,
        symbol: Option<&'static CStr>,
        params: *const c_void,
        context: usize,
        corr: u32,
        ret: i32,
    ) -> Option<u64> {
        type F = unsafe extern "C" fn(
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
        let f = sym!(self, F, b"cd_api_callback_params\0");
        // SAFETY: static strings; the parameter struct is alive and readable (the caller's contract); the context is
        // an opaque value.
        let v = unsafe {
            f(
                domain,
                cbid,
                function.as_ptr(),
                symbol.map_or(std::ptr::null(), CStr::as_ptr),
                params,
                context as *mut c_void,
                1,
                corr,
                ret,
            )
        };
        (v != u64::MAX).then_some(v)
    }

    /// Fires a graph resource callback (`CUpti_GraphData` with `graph` and `graph_exec`); true if delivered.
    pub fn graph_resource(
        &self,
        cbid: u32,
        context: usize,
        graph: usize,
        graph_exec: usize,
    ) -> bool {
        let f = sym!(
            self,
            unsafe extern "C" fn(u32, *mut c_void, *mut c_void, *mut c_void) -> i32,
            b"cd_graph_resource\0"
        );
        // SAFETY: opaque handle values the double passes through.
        unsafe {
            f(
                cbid,
                context as *mut c_void,
                graph as *mut c_void,
                graph_exec as *mut c_void,
            ) == 1
        }
    }

    /// The id `cuptiGetGraphId` (and `cuptiGetGraphExecId`) gives a handle from now on.
    pub fn set_graph_id(&self, handle: usize, id: u32) {
        let f = sym!(
            self,
            unsafe extern "C" fn(*mut c_void, u32),
            b"cd_graph_id\0"
        );
        // SAFETY: an opaque handle value.
        unsafe { f(handle as *mut c_void, id) }
    }

    /// Fires a synchronize callback; true if delivered.
    pub fn sync_callback(&self, cbid: u32, context: usize, stream: usize) -> bool {
        let f = sym!(
            self,
            unsafe extern "C" fn(u32, *mut c_void, *mut c_void) -> i32,
            b"cd_sync_callback\0"
        );
        // SAFETY: opaque handle values.
        unsafe { f(cbid, context as *mut c_void, stream as *mut c_void) == 1 }
    }

    /// How many per-function API record choices were made (`cuptiActivityEnableDriverApi`/`RuntimeApi`), and how
    /// many functions are turned off now.
    pub fn api_choices(&self) -> (u64, i32) {
        let calls = sym!(self, unsafe extern "C" fn() -> u64, b"cd_api_choices\0");
        let off = sym!(self, unsafe extern "C" fn() -> i32, b"cd_api_off_count\0");
        // SAFETY: plain getters.
        unsafe { (calls(), off()) }
    }

    /// The thread id kind CUPTI was set to (`cuptiSetThreadIdType`: 0 default, 1 system).
    pub fn thread_id_type(&self) -> u32 {
        let f = sym!(self, unsafe extern "C" fn() -> u32, b"cd_thread_id_type\0");
        // SAFETY: a plain getter.
        unsafe { f() }
    }

    /// The name the double keeps for the current subscriber.
    pub fn subscriber_name(&self) -> String {
        let f = sym!(
            self,
            unsafe extern "C" fn() -> *const c_char,
            b"cd_subscriber_name\0"
        );
        // SAFETY: a NUL-terminated static buffer of the double.
        unsafe { CStr::from_ptr(f()) }
            .to_string_lossy()
            .into_owned()
    }

    /// How often the double's NVTX functions were called (through a module's slots), and how many modules its
    /// `InitializeInjectionNvtx2` took.
    pub fn nvtx_counts(&self) -> (u64, u64) {
        let f = sym!(
            self,
            unsafe extern "C" fn(*mut u64, *mut u64),
            b"cd_nvtx_counts\0"
        );
        let (mut calls, mut inits) = (0, 0);
        // SAFETY: the double writes two u64 through valid pointers.
        unsafe { f(&mut calls, &mut inits) };
        (calls, inits)
    }

    /// Makes another tool hold the subscription, or releases it.
    pub fn other_subscriber(&self, name: Option<&'static CStr>) {
        let f = sym!(
            self,
            unsafe extern "C" fn(*const c_char),
            b"cd_other_subscriber\0"
        );
        // SAFETY: a static string or null; the double copies it.
        unsafe { f(name.map_or(std::ptr::null(), CStr::as_ptr)) }
    }
}

/// Defines, in the calling test crate: `Double` (the library's copy of the CUPTI double, and its [`Controls`]
/// through `Deref`), `double()` (the driver double and the CUPTI double loaded into this process's slots, once),
/// `serial()` (one test at a time: the tracer, the subscriber and the double's state are process-wide; it resets
/// the double's version and synchronous mode) and `double_path`. A macro, so that its calls into the library compile
/// under the features of the crate whose tests use it: a dev-dependency cannot follow them.
#[macro_export]
macro_rules! cupti_double_loader {
    () => {
        /// The library's copy of the double, and the double's controls.
        pub struct Double {
            pub lib: &'static ::gpu_tools::cupti::CuptiLibrary,
            controls: $crate::cupti_double::Controls,
        }

        impl ::std::ops::Deref for Double {
            type Target = $crate::cupti_double::Controls;
            fn deref(&self) -> &$crate::cupti_double::Controls {
                &self.controls
            }
        }

        pub fn double_path(name: &str) -> ::std::path::PathBuf {
            $crate::double_path(name)
        }

        /// Loads the driver double and the CUPTI double into this process's slots, once.
        pub fn double() -> &'static Double {
            static D: ::std::sync::OnceLock<Double> = ::std::sync::OnceLock::new();
            D.get_or_init(|| {
                ::gpu_tools::cuda::Driver::load_from(double_path("cuda_driver"))
                    .expect("driver double loads");
                let lib =
                    ::gpu_tools::cupti::CuptiLibrary::load_from(double_path("cupti_activity"))
                        .expect("CUPTI double loads through the crate");
                let controls = $crate::cupti_double::Controls::open(&double_path("cupti_activity"))
                    .expect("open the double's controls");
                Double { lib, controls }
            })
        }

        /// One test at a time: the tracer, the subscriber and the double's state are process-wide.
        pub fn serial() -> ::std::sync::MutexGuard<'static, ()> {
            static LOCK: ::std::sync::Mutex<()> = ::std::sync::Mutex::new(());
            let guard = LOCK.lock().unwrap_or_else(|p| p.into_inner());
            let d = double();
            d.set_version(130_001);
            d.set_async(false);
            guard
        }
    };
}
