//! The CUDA driver library (`libcuda.so.1`), loaded once per process.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::path::Path;
use std::sync::OnceLock;

use super::CudaError;
use crate::loader::{self, LibrarySpec, LoadError, Rejection, Slot};
use crate::status::Call;
use crate::sys::cuda_driver as sys;

pub(crate) static SPEC: LibrarySpec = LibrarySpec {
    name: "CUDA driver (libcuda.so.1)",
    file_names: &["libcuda.so.1"],
    env_var: "GPU_TOOLS_CUDA_DRIVER_LIB",
    // The driver is installed with the kernel module, not the toolkit: a toolkit root holds only `lib64/stubs`
    // (links, but every call fails) and `compat` (forward-compatibility driver, which fails with
    // CUDA_ERROR_SYSTEM_DRIVER_MISMATCH on a newer system driver). Neither is searched.
    roots: &[],
    root_subdirs: &[],
    standard_dirs: &[
        "/usr/local/nvidia/lib64",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/lib/wsl/lib",
    ],
    wheel_subdirs: &[],
};

static DRIVER: Slot<Driver> = Slot::new();

type CuResult = sys::CUresult;

/// Function pointers of the driver calls the crate makes, copied once out of the bindgen table.
#[derive(Clone, Copy)]
#[allow(missing_docs)]
pub struct DriverApi {
    pub cu_init: unsafe extern "C" fn(c_uint) -> CuResult,
    pub cu_driver_get_version: unsafe extern "C" fn(*mut c_int) -> CuResult,
    pub cu_get_error_name: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
    pub cu_get_error_string: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
    pub cu_device_get: unsafe extern "C" fn(*mut sys::CUdevice, c_int) -> CuResult,
    pub cu_device_get_count: unsafe extern "C" fn(*mut c_int) -> CuResult,
    pub cu_device_get_name: unsafe extern "C" fn(*mut c_char, c_int, sys::CUdevice) -> CuResult,
    pub cu_device_total_mem: unsafe extern "C" fn(*mut usize, sys::CUdevice) -> CuResult,
    pub cu_device_get_attribute:
        unsafe extern "C" fn(*mut c_int, sys::CUdevice_attribute, sys::CUdevice) -> CuResult,
    pub cu_device_primary_ctx_retain:
        unsafe extern "C" fn(*mut sys::CUcontext, sys::CUdevice) -> CuResult,
    pub cu_device_primary_ctx_release: unsafe extern "C" fn(sys::CUdevice) -> CuResult,
    pub cu_ctx_push_current: unsafe extern "C" fn(sys::CUcontext) -> CuResult,
    pub cu_ctx_pop_current: unsafe extern "C" fn(*mut sys::CUcontext) -> CuResult,
    pub cu_ctx_get_current: unsafe extern "C" fn(*mut sys::CUcontext) -> CuResult,
    pub cu_ctx_get_device: unsafe extern "C" fn(*mut sys::CUdevice) -> CuResult,
    pub cu_ctx_get_api_version: unsafe extern "C" fn(sys::CUcontext, *mut c_uint) -> CuResult,
    pub cu_ctx_synchronize: unsafe extern "C" fn() -> CuResult,
    /// `cuCtxCreate_v4` (CUDA 12.5+); `None` where the driver lacks it.
    pub cu_ctx_create: Option<
        unsafe extern "C" fn(
            *mut sys::CUcontext,
            *mut sys::CUctxCreateParams,
            c_uint,
            sys::CUdevice,
        ) -> CuResult,
    >,
    /// `cuCtxDestroy_v2`; `None` where the driver lacks it.
    pub cu_ctx_destroy: Option<unsafe extern "C" fn(sys::CUcontext) -> CuResult>,
    pub cu_mem_alloc: unsafe extern "C" fn(*mut sys::CUdeviceptr, usize) -> CuResult,
    pub cu_mem_free: unsafe extern "C" fn(sys::CUdeviceptr) -> CuResult,
    pub cu_mem_get_info: unsafe extern "C" fn(*mut usize, *mut usize) -> CuResult,
    pub cu_memcpy_htod: unsafe extern "C" fn(sys::CUdeviceptr, *const c_void, usize) -> CuResult,
    pub cu_memcpy_dtoh: unsafe extern "C" fn(*mut c_void, sys::CUdeviceptr, usize) -> CuResult,
    pub cu_memcpy_dtod: unsafe extern "C" fn(sys::CUdeviceptr, sys::CUdeviceptr, usize) -> CuResult,
    pub cu_memset_d32: unsafe extern "C" fn(sys::CUdeviceptr, c_uint, usize) -> CuResult,
    pub cu_module_load_data: unsafe extern "C" fn(*mut sys::CUmodule, *const c_void) -> CuResult,
    pub cu_module_unload: unsafe extern "C" fn(sys::CUmodule) -> CuResult,
    pub cu_module_get_function:
        unsafe extern "C" fn(*mut sys::CUfunction, sys::CUmodule, *const c_char) -> CuResult,
    #[allow(clippy::type_complexity)]
    pub cu_launch_kernel: unsafe extern "C" fn(
        sys::CUfunction,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        sys::CUstream,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> CuResult,
    // Optional below: absent from the test double, or from drivers older than the call (`None` then).
    /// `cuStreamCreate`.
    pub cu_stream_create: Option<unsafe extern "C" fn(*mut sys::CUstream, c_uint) -> CuResult>,
    /// `cuStreamDestroy_v2`.
    pub cu_stream_destroy: Option<unsafe extern "C" fn(sys::CUstream) -> CuResult>,
    /// `cuStreamSynchronize`.
    pub cu_stream_synchronize: Option<unsafe extern "C" fn(sys::CUstream) -> CuResult>,
    /// `cuStreamGetId` (CUDA 12.0+): the id CUPTI records carry for a stream.
    pub cu_stream_get_id: Option<unsafe extern "C" fn(sys::CUstream, *mut u64) -> CuResult>,
    /// `cuCtxGetId` (CUDA 12.0+): the id CUPTI records carry for a context.
    pub cu_ctx_get_id: Option<unsafe extern "C" fn(sys::CUcontext, *mut u64) -> CuResult>,
    /// `cuMemcpyHtoDAsync_v2`.
    pub cu_memcpy_htod_async: Option<
        unsafe extern "C" fn(sys::CUdeviceptr, *const c_void, usize, sys::CUstream) -> CuResult,
    >,
    /// `cuMemcpyDtoHAsync_v2`.
    pub cu_memcpy_dtoh_async: Option<
        unsafe extern "C" fn(*mut c_void, sys::CUdeviceptr, usize, sys::CUstream) -> CuResult,
    >,
    /// `cuMemcpyDtoDAsync_v2`.
    pub cu_memcpy_dtod_async: Option<
        unsafe extern "C" fn(sys::CUdeviceptr, sys::CUdeviceptr, usize, sys::CUstream) -> CuResult,
    >,
    /// `cuMemsetD8Async`.
    pub cu_memset_d8_async:
        Option<unsafe extern "C" fn(sys::CUdeviceptr, u8, usize, sys::CUstream) -> CuResult>,
    /// `cuMemsetD32Async`.
    pub cu_memset_d32_async:
        Option<unsafe extern "C" fn(sys::CUdeviceptr, c_uint, usize, sys::CUstream) -> CuResult>,
    /// `cuMemAllocHost_v2`: page-locked host memory.
    pub cu_mem_alloc_host: Option<unsafe extern "C" fn(*mut *mut c_void, usize) -> CuResult>,
    /// `cuMemFreeHost`.
    pub cu_mem_free_host: Option<unsafe extern "C" fn(*mut c_void) -> CuResult>,
    /// `cuDevicePrimaryCtxGetState`: whether a device's primary context is active (without creating it).
    pub cu_device_primary_ctx_get_state:
        Option<unsafe extern "C" fn(sys::CUdevice, *mut c_uint, *mut c_int) -> CuResult>,
    /// `cuDeviceGetUuid_v2`.
    pub cu_device_get_uuid:
        Option<unsafe extern "C" fn(*mut sys::CUuuid, sys::CUdevice) -> CuResult>,
    /// `cuDeviceGetPCIBusId`.
    pub cu_device_get_pci_bus_id:
        Option<unsafe extern "C" fn(*mut c_char, c_int, sys::CUdevice) -> CuResult>,
    /// `cuCheckpointProcessGetRestoreThreadId` (CUDA 12.8+ drivers).
    pub cu_checkpoint_process_get_restore_thread_id:
        Option<unsafe extern "C" fn(c_int, *mut c_int) -> CuResult>,
    /// `cuCheckpointProcessGetState` (CUDA 12.8+ drivers).
    pub cu_checkpoint_process_get_state:
        Option<unsafe extern "C" fn(c_int, *mut sys::CUprocessState) -> CuResult>,
    /// `cuCheckpointProcessLock` (CUDA 12.8+ drivers).
    pub cu_checkpoint_process_lock:
        Option<unsafe extern "C" fn(c_int, *mut sys::CUcheckpointLockArgs) -> CuResult>,
    /// `cuCheckpointProcessCheckpoint` (CUDA 12.8+ drivers).
    pub cu_checkpoint_process_checkpoint:
        Option<unsafe extern "C" fn(c_int, *mut sys::CUcheckpointCheckpointArgs) -> CuResult>,
    /// `cuCheckpointProcessRestore` (CUDA 12.8+ drivers).
    pub cu_checkpoint_process_restore:
        Option<unsafe extern "C" fn(c_int, *mut sys::CUcheckpointRestoreArgs) -> CuResult>,
    /// `cuCheckpointProcessUnlock` (CUDA 12.8+ drivers).
    pub cu_checkpoint_process_unlock:
        Option<unsafe extern "C" fn(c_int, *mut sys::CUcheckpointUnlockArgs) -> CuResult>,
    /// `cuStreamIsCapturing`: whether work sent to a stream is captured into a graph instead of run.
    pub cu_stream_is_capturing:
        Option<unsafe extern "C" fn(sys::CUstream, *mut sys::CUstreamCaptureStatus) -> CuResult>,
    /// `cuGraphGetNodes`.
    pub cu_graph_get_nodes:
        Option<unsafe extern "C" fn(sys::CUgraph, *mut sys::CUgraphNode, *mut usize) -> CuResult>,
    /// `cuGraphGetEdges_v2` (CUDA 12.3+ drivers).
    pub cu_graph_get_edges: Option<
        unsafe extern "C" fn(
            sys::CUgraph,
            *mut sys::CUgraphNode,
            *mut sys::CUgraphNode,
            *mut sys::CUgraphEdgeData,
            *mut usize,
        ) -> CuResult,
    >,
    /// `cuGraphNodeGetType`.
    pub cu_graph_node_get_type:
        Option<unsafe extern "C" fn(sys::CUgraphNode, *mut sys::CUgraphNodeType) -> CuResult>,
    /// `cuGraphKernelNodeGetParams_v2`.
    pub cu_graph_kernel_node_get_params: Option<
        unsafe extern "C" fn(sys::CUgraphNode, *mut sys::CUDA_KERNEL_NODE_PARAMS) -> CuResult,
    >,
    /// `cuGraphChildGraphNodeGetGraph`.
    pub cu_graph_child_graph_node_get_graph:
        Option<unsafe extern "C" fn(sys::CUgraphNode, *mut sys::CUgraph) -> CuResult>,
    /// `cuFuncGetName` (CUDA 12.3+ drivers).
    pub cu_func_get_name:
        Option<unsafe extern "C" fn(*mut *const c_char, sys::CUfunction) -> CuResult>,
    /// `cuKernelGetName` (CUDA 12.3+ drivers).
    pub cu_kernel_get_name:
        Option<unsafe extern "C" fn(*mut *const c_char, sys::CUkernel) -> CuResult>,
}

/// The loaded CUDA driver. Obtain it with [`Driver::load`]; it lives for the rest of the process.
pub struct Driver {
    api: DriverApi,
    _table: sys::DriverFns,
    init: OnceLock<Result<(), CudaError>>,
}

// SAFETY: the struct holds function pointers and a library handle, which the driver allows to be used from any
// thread; the one-time initialisation state is a OnceLock.
unsafe impl Send for Driver {}
// SAFETY: as above; every driver entry point is thread-safe per the CUDA driver API documentation.
unsafe impl Sync for Driver {}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("path", &DRIVER.path())
            .finish_non_exhaustive()
    }
}

impl Driver {
    /// Loads `libcuda.so.1` with the crate's search order (the `loader` module), once per process.
    pub fn load() -> Result<&'static Driver, LoadError> {
        DRIVER.load(&SPEC, None, bind)
    }

    /// Loads the driver from an explicit path (or returns the one already loaded from that path).
    pub fn load_from(path: impl AsRef<Path>) -> Result<&'static Driver, LoadError> {
        DRIVER.load(&SPEC, Some(path.as_ref()), bind)
    }

    /// The driver, if it has been loaded already; never loads.
    pub fn get() -> Option<&'static Driver> {
        DRIVER.get()
    }

    /// The path the driver was loaded from.
    pub fn path(&self) -> Option<&'static Path> {
        DRIVER.path()
    }

    /// The raw function pointers, for callers that need the C API itself (benchmarks, tests).
    pub fn api(&self) -> &DriverApi {
        &self.api
    }

    /// `cuInit(0)`, once per process; later calls return the first call's result.
    pub fn init(&self) -> Result<(), CudaError> {
        // SAFETY: cuInit takes a flags word (must be 0) and may be called from any thread.
        self.init
            .get_or_init(|| self.check_call("cuInit", unsafe { (self.api.cu_init)(0) }))
            .clone()
    }

    /// The driver's CUDA version, for example 13000 for 13.0.
    pub fn version(&self) -> Result<i32, CudaError> {
        let mut v = 0;
        // SAFETY: valid out-pointer; cuDriverGetVersion needs no initialisation.
        self.check_call("cuDriverGetVersion", unsafe {
            (self.api.cu_driver_get_version)(&mut v)
        })?;
        Ok(v)
    }

    /// Number of CUDA devices (initialises the driver).
    pub fn device_count(&self) -> Result<usize, CudaError> {
        self.init()?;
        let mut n = 0;
        // SAFETY: driver initialised; valid out-pointer.
        self.check_call("cuDeviceGetCount", unsafe {
            (self.api.cu_device_get_count)(&mut n)
        })?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// Name, memory and compute capability of device `ordinal`.
    pub fn device_info(&self, ordinal: usize) -> Result<DeviceInfo, CudaError> {
        let dev = self.device(ordinal)?;
        let mut name = [0 as c_char; 256];
        // SAFETY: the buffer holds 256 bytes and its length is passed; dev is a valid device handle.
        self.check_call("cuDeviceGetName", unsafe {
            (self.api.cu_device_get_name)(name.as_mut_ptr(), 256, dev)
        })?;
        // SAFETY: the driver wrote a NUL-terminated string into the buffer (which we zeroed, so it ends in NUL).
        let name = unsafe { CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let mut mem = 0usize;
        // SAFETY: valid out-pointer and device.
        self.check_call("cuDeviceTotalMem_v2", unsafe {
            (self.api.cu_device_total_mem)(&mut mem, dev)
        })?;
        let attr = |a| -> Result<i32, CudaError> {
            let mut v = 0;
            // SAFETY: valid out-pointer, attribute from the header, valid device.
            self.check_call("cuDeviceGetAttribute", unsafe {
                (self.api.cu_device_get_attribute)(&mut v, a, dev)
            })?;
            Ok(v)
        };
        Ok(DeviceInfo {
            ordinal,
            name,
            total_memory: mem as u64,
            compute_capability: (
                attr(sys::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                attr(sys::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            ),
            multiprocessors: attr(sys::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        })
    }

    pub(crate) fn device(&self, ordinal: usize) -> Result<sys::CUdevice, CudaError> {
        self.init()?;
        let mut dev = 0;
        let ordinal = c_int::try_from(ordinal)
            .map_err(|_| CudaError::from_code(self, sys::CUDA_ERROR_INVALID_DEVICE))?;
        // SAFETY: driver initialised; valid out-pointer.
        self.check_call("cuDeviceGet", unsafe {
            (self.api.cu_device_get)(&mut dev, ordinal)
        })?;
        Ok(dev)
    }

    /// Maps a driver result code to `Ok` or a [`CudaError`] with the driver's name and message. A failure is
    /// logged at debug level with the place in the crate that made the call.
    #[track_caller]
    pub(crate) fn check(&self, code: CuResult) -> Result<(), CudaError> {
        self.check_as(Call::At(std::panic::Location::caller()), code)
    }

    /// [`check`](Self::check) for a call the caller names: the log names the driver function.
    pub(crate) fn check_call(&self, call: &'static str, code: CuResult) -> Result<(), CudaError> {
        self.check_as(Call::Named(call), code)
    }

    fn check_as(&self, call: Call, code: CuResult) -> Result<(), CudaError> {
        if code == sys::CUDA_SUCCESS {
            return Ok(());
        }
        let e = CudaError::from_code(self, code);
        crate::status::log_failure(module_path!(), call, Some(&e.name), code);
        Err(e)
    }
}

/// What the driver reports about one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Marketing name, for example `NVIDIA H200`.
    pub name: String,
    /// Global memory in bytes.
    pub total_memory: u64,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Number of streaming multiprocessors.
    pub multiprocessors: i32,
}

fn bind(path: &Path) -> Result<Driver, Rejection> {
    let lib = loader::dlopen(path)?;
    // SAFETY: from_library only looks symbols up and calls nothing; each one is typed with the vendor
    // header's signature, which holds for the vendor library the loader opened (loader docs, "Trust").
    let table = unsafe { sys::DriverFns::from_library(lib) }
        .map_err(|e| Rejection::OpenFailed(e.to_string()))?;
    use loader::optional as o;
    use loader::required as r;
    let api = DriverApi {
        cu_init: r(&table.cuInit, "cuInit")?,
        cu_driver_get_version: r(&table.cuDriverGetVersion, "cuDriverGetVersion")?,
        cu_get_error_name: r(&table.cuGetErrorName, "cuGetErrorName")?,
        cu_get_error_string: r(&table.cuGetErrorString, "cuGetErrorString")?,
        cu_device_get: r(&table.cuDeviceGet, "cuDeviceGet")?,
        cu_device_get_count: r(&table.cuDeviceGetCount, "cuDeviceGetCount")?,
        cu_device_get_name: r(&table.cuDeviceGetName, "cuDeviceGetName")?,
        cu_device_total_mem: r(&table.cuDeviceTotalMem_v2, "cuDeviceTotalMem_v2")?,
        cu_device_get_attribute: r(&table.cuDeviceGetAttribute, "cuDeviceGetAttribute")?,
        cu_device_primary_ctx_retain: r(
            &table.cuDevicePrimaryCtxRetain,
            "cuDevicePrimaryCtxRetain",
        )?,
        cu_device_primary_ctx_release: r(
            &table.cuDevicePrimaryCtxRelease_v2,
            "cuDevicePrimaryCtxRelease_v2",
        )?,
        cu_ctx_push_current: r(&table.cuCtxPushCurrent_v2, "cuCtxPushCurrent_v2")?,
        cu_ctx_pop_current: r(&table.cuCtxPopCurrent_v2, "cuCtxPopCurrent_v2")?,
        cu_ctx_get_current: r(&table.cuCtxGetCurrent, "cuCtxGetCurrent")?,
        cu_ctx_get_device: r(&table.cuCtxGetDevice, "cuCtxGetDevice")?,
        cu_ctx_get_api_version: r(&table.cuCtxGetApiVersion, "cuCtxGetApiVersion")?,
        cu_ctx_synchronize: r(&table.cuCtxSynchronize, "cuCtxSynchronize")?,
        cu_ctx_create: loader::optional(&table.cuCtxCreate_v4),
        cu_ctx_destroy: loader::optional(&table.cuCtxDestroy_v2),
        cu_mem_alloc: r(&table.cuMemAlloc_v2, "cuMemAlloc_v2")?,
        cu_mem_free: r(&table.cuMemFree_v2, "cuMemFree_v2")?,
        cu_mem_get_info: r(&table.cuMemGetInfo_v2, "cuMemGetInfo_v2")?,
        cu_memcpy_htod: r(&table.cuMemcpyHtoD_v2, "cuMemcpyHtoD_v2")?,
        cu_memcpy_dtoh: r(&table.cuMemcpyDtoH_v2, "cuMemcpyDtoH_v2")?,
        cu_memcpy_dtod: r(&table.cuMemcpyDtoD_v2, "cuMemcpyDtoD_v2")?,
        cu_memset_d32: r(&table.cuMemsetD32_v2, "cuMemsetD32_v2")?,
        cu_module_load_data: r(&table.cuModuleLoadData, "cuModuleLoadData")?,
        cu_module_unload: r(&table.cuModuleUnload, "cuModuleUnload")?,
        cu_module_get_function: r(&table.cuModuleGetFunction, "cuModuleGetFunction")?,
        cu_launch_kernel: r(&table.cuLaunchKernel, "cuLaunchKernel")?,
        cu_stream_create: o(&table.cuStreamCreate),
        cu_stream_destroy: o(&table.cuStreamDestroy_v2),
        cu_stream_synchronize: o(&table.cuStreamSynchronize),
        cu_stream_get_id: o(&table.cuStreamGetId),
        cu_ctx_get_id: o(&table.cuCtxGetId),
        cu_memcpy_htod_async: o(&table.cuMemcpyHtoDAsync_v2),
        cu_memcpy_dtoh_async: o(&table.cuMemcpyDtoHAsync_v2),
        cu_memcpy_dtod_async: o(&table.cuMemcpyDtoDAsync_v2),
        cu_memset_d8_async: o(&table.cuMemsetD8Async),
        cu_memset_d32_async: o(&table.cuMemsetD32Async),
        cu_mem_alloc_host: o(&table.cuMemAllocHost_v2),
        cu_mem_free_host: o(&table.cuMemFreeHost),
        cu_device_primary_ctx_get_state: o(&table.cuDevicePrimaryCtxGetState),
        cu_device_get_uuid: o(&table.cuDeviceGetUuid_v2),
        cu_device_get_pci_bus_id: o(&table.cuDeviceGetPCIBusId),
        cu_checkpoint_process_get_restore_thread_id: o(&table.cuCheckpointProcessGetRestoreThreadId),
        cu_checkpoint_process_get_state: o(&table.cuCheckpointProcessGetState),
        cu_checkpoint_process_lock: o(&table.cuCheckpointProcessLock),
        cu_checkpoint_process_checkpoint: o(&table.cuCheckpointProcessCheckpoint),
        cu_checkpoint_process_restore: o(&table.cuCheckpointProcessRestore),
        cu_checkpoint_process_unlock: o(&table.cuCheckpointProcessUnlock),
        cu_stream_is_capturing: o(&table.cuStreamIsCapturing),
        cu_graph_get_nodes: o(&table.cuGraphGetNodes),
        cu_graph_get_edges: o(&table.cuGraphGetEdges_v2),
        cu_graph_node_get_type: o(&table.cuGraphNodeGetType),
        cu_graph_kernel_node_get_params: o(&table.cuGraphKernelNodeGetParams_v2),
        cu_graph_child_graph_node_get_graph: o(&table.cuGraphChildGraphNodeGetGraph),
        cu_func_get_name: o(&table.cuFuncGetName),
        cu_kernel_get_name: o(&table.cuKernelGetName),
    };
    Ok(Driver {
        api,
        _table: table,
        init: OnceLock::new(),
    })
}
