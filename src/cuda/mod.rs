//! The few CUDA driver services the crate needs: loading and initialising the driver, devices, contexts, device
//! memory and PTX modules. They establish the preconditions of the vendor tool APIs (a driver, a live context)
//! and let examples and tests run kernels, on several streams, without another crate. [`process`] checkpoints
//! whole processes through the driver; [`graph`] reads what a CUDA graph runs.

mod driver;
pub mod graph;
pub mod process;
mod stream;
mod uuid;

pub use driver::{DeviceInfo, Driver, DriverApi};
pub use stream::{PinnedBuffer, Stream};
pub use uuid::GpuUuid;

#[cfg(feature = "cudbg")]
pub(crate) fn driver_spec() -> &'static crate::loader::LibrarySpec {
    &driver::SPEC
}

use std::ffi::{CStr, c_uint, c_void};
use std::marker::PhantomData;

use crate::sys::cuda_driver as sys;

/// Raw CUDA context handle (`CUcontext`).
pub type RawContext = sys::CUcontext;
/// Raw device pointer (`CUdeviceptr`).
pub type DevicePtr = sys::CUdeviceptr;

/// A CUDA driver call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name} ({code}): {message}")]
pub struct CudaError {
    /// The `CUresult` code.
    pub code: u32,
    /// The driver's name for it, for example `CUDA_ERROR_INVALID_CONTEXT`.
    pub name: String,
    /// The driver's description.
    pub message: String,
}

impl CudaError {
    pub(crate) fn from_code(driver: &Driver, code: u32) -> Self {
        let text = |f: unsafe extern "C" fn(u32, *mut *const std::ffi::c_char) -> u32| {
            // SAFETY: cuGetErrorName and cuGetErrorString hand out static strings and return CUDA_SUCCESS (0).
            unsafe { crate::status::code_string(f, code) }
        };
        CudaError {
            code,
            name: text(driver.api().cu_get_error_name)
                .unwrap_or_else(|| "CUDA_ERROR_UNRECOGNIZED".into()),
            message: text(driver.api().cu_get_error_string)
                .unwrap_or_else(|| "unrecognized error code".into()),
        }
    }

    /// True for `CUDA_ERROR_INVALID_CONTEXT` and `CUDA_ERROR_CONTEXT_IS_DESTROYED`.
    pub fn is_invalid_context(&self) -> bool {
        self.code == sys::CUDA_ERROR_INVALID_CONTEXT
            || self.code == sys::CUDA_ERROR_CONTEXT_IS_DESTROYED
    }
}

/// Whether dropping a [`Context`] releases something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ownership {
    /// A retained primary context: released on drop.
    Primary(sys::CUdevice),
    /// A context created by [`Context::create`]: destroyed on drop.
    Created,
    /// A context owned elsewhere (raw handle, cudarc): nothing on drop.
    Borrowed,
}

/// A CUDA context the crate can pass explicitly to vendor calls.
///
/// `Send` and `Sync`: a CUDA context may be made current on any thread, and every method here pushes it for the
/// duration of the call and pops it afterwards.
#[derive(Debug)]
pub struct Context {
    raw: RawContext,
    driver: &'static Driver,
    ownership: Ownership,
}

// SAFETY: CUcontext handles are process-wide and usable from any thread (the driver API is thread-safe); the
// struct adds no thread-affine state.
unsafe impl Send for Context {}
// SAFETY: shared use only makes driver calls that the driver serialises itself.
unsafe impl Sync for Context {}

impl Context {
    /// Retains the primary context of device `ordinal` (loading and initialising the driver first).
    pub fn primary(ordinal: usize) -> Result<Self, crate::Error> {
        let driver = Driver::load()?;
        let dev = driver.device(ordinal)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: driver initialised by device(); valid out-pointer and device.
        driver.check(unsafe { (driver.api().cu_device_primary_ctx_retain)(&mut raw, dev) })?;
        Ok(Context {
            raw,
            driver,
            ownership: Ownership::Primary(dev),
        })
    }

    /// Retains the primary context of device `ordinal` only if the process has made it active already: `None`
    /// when it is not (retaining it then would create it, which a tool observing a program must not do). For a
    /// tool inside a program it did not start (an attached tracer), this finds the contexts the program runs on.
    pub fn active_primary(ordinal: usize) -> Result<Option<Self>, crate::Error> {
        let driver = Driver::load()?;
        let dev = driver.device(ordinal)?;
        let Some(get_state) = driver.api().cu_device_primary_ctx_get_state else {
            return Err(CudaError::from_code(driver, sys::CUDA_ERROR_NOT_SUPPORTED).into());
        };
        let (mut flags, mut active): (c_uint, std::ffi::c_int) = (0, 0);
        // SAFETY: driver initialised by device(); valid out-pointers and device.
        driver.check(unsafe { get_state(dev, &mut flags, &mut active) })?;
        if active == 0 {
            return Ok(None);
        }
        let mut raw = std::ptr::null_mut();
        // SAFETY: as above; the context is active, so retaining it only adds a reference.
        driver.check(unsafe { (driver.api().cu_device_primary_ctx_retain)(&mut raw, dev) })?;
        Ok(Some(Context {
            raw,
            driver,
            ownership: Ownership::Primary(dev),
        }))
    }

    /// Creates a new context on device `ordinal` (`cuCtxCreate`), owned by the value and destroyed on drop.
    /// The calling thread's current context is left as it was.
    pub fn create(ordinal: usize) -> Result<Self, crate::Error> {
        let driver = Driver::load()?;
        let dev = driver.device(ordinal)?;
        let (Some(create), Some(_)) = (driver.api().cu_ctx_create, driver.api().cu_ctx_destroy)
        else {
            return Err(CudaError::from_code(driver, sys::CUDA_ERROR_NOT_SUPPORTED).into());
        };
        let mut raw = std::ptr::null_mut();
        // Zeroed parameters: no execution affinity, no graphics interop.
        let mut params = sys::CUctxCreateParams::default();
        // SAFETY: driver initialised by device(); valid out-pointer, parameter block and device.
        driver.check(unsafe { create(&mut raw, &mut params, 0, dev) })?;
        // cuCtxCreate also makes the new context current; pop it so the thread's state is unchanged.
        let mut popped = std::ptr::null_mut();
        // SAFETY: the new context was pushed onto this thread's stack by cuCtxCreate.
        let _ = unsafe { (driver.api().cu_ctx_pop_current)(&mut popped) };
        Ok(Context {
            raw,
            driver,
            ownership: Ownership::Created,
        })
    }

    /// Wraps a context created elsewhere. The crate never destroys it.
    ///
    /// # Safety
    /// `raw` must be a context created by the CUDA driver of this process (`libcuda.so.1`, the library
    /// [`Driver::load`] finds), and must stay alive as long as the returned value, and anything borrowing it, is
    /// used. If it is destroyed early, the crate's checks report [`CudaError::is_invalid_context`] errors where the
    /// driver detects it, but that is not guaranteed: the handle may be reused for another context.
    pub unsafe fn from_raw(raw: RawContext) -> Result<Self, crate::Error> {
        let driver = Driver::load()?;
        driver.init()?;
        let ctx = Context {
            raw,
            driver,
            ownership: Ownership::Borrowed,
        };
        ctx.check_valid()?;
        Ok(ctx)
    }

    /// Uses a `cudarc` context. The cudarc context must outlive the returned value, which the borrow ensures.
    #[cfg(feature = "cudarc")]
    pub fn from_cudarc(
        ctx: &std::sync::Arc<cudarc::driver::CudaContext>,
    ) -> Result<CudarcContext<'_>, crate::Error> {
        let raw = ctx.cu_ctx() as RawContext;
        // SAFETY: the raw handle comes from a live cudarc context, kept alive by the borrow in CudarcContext.
        // It must come from the driver the crate uses: on a normal install cudarc and the crate open the same
        // `libcuda.so.1` (the dynamic loader maps one file once), which `check_valid` in `from_raw` confirms
        // where the driver can tell; a different file named by `GPU_TOOLS_CUDA_DRIVER_LIB` or
        // `Driver::load_from` is the caller's choice (loader docs, "Trust").
        let inner = unsafe { Context::from_raw(raw) }?;
        Ok(CudarcContext {
            inner,
            _owner: PhantomData,
        })
    }

    /// The raw handle.
    pub fn as_raw(&self) -> RawContext {
        self.raw
    }

    /// The loaded driver.
    pub fn driver(&self) -> &'static Driver {
        self.driver
    }

    /// Checks with the driver that the context is still alive (`cuCtxGetApiVersion`).
    pub fn check_valid(&self) -> Result<(), CudaError> {
        if self.raw.is_null() {
            return Err(CudaError::from_code(
                self.driver,
                sys::CUDA_ERROR_INVALID_CONTEXT,
            ));
        }
        let mut v: c_uint = 0;
        // SAFETY: a non-null handle this value owns, or one `from_raw`'s contract keeps alive; for a context
        // destroyed anyway the driver answers CUDA_ERROR_INVALID_CONTEXT where it can tell (not guaranteed).
        self.driver
            .check(unsafe { (self.driver.api().cu_ctx_get_api_version)(self.raw, &mut v) })
    }

    /// Makes the context current on this thread until the guard drops.
    pub fn make_current(&self) -> Result<CurrentGuard<'_>, CudaError> {
        self.check_valid()?;
        // SAFETY: a valid context handle.
        let pushed = unsafe { (self.driver.api().cu_ctx_push_current)(self.raw) };
        self.driver.check(pushed)?;
        Ok(CurrentGuard {
            ctx: self,
            _not_send: PhantomData,
        })
    }

    /// Waits for all work in the context.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        let _g = self.make_current()?;
        // SAFETY: the context is current.
        self.driver
            .check(unsafe { (self.driver.api().cu_ctx_synchronize)() })
    }

    /// Free and total device memory, in bytes.
    pub fn memory_info(&self) -> Result<(usize, usize), CudaError> {
        let _g = self.make_current()?;
        let (mut free, mut total) = (0, 0);
        // SAFETY: the context is current; valid out-pointers.
        let got = unsafe { (self.driver.api().cu_mem_get_info)(&mut free, &mut total) };
        self.driver.check(got)?;
        Ok((free, total))
    }

    /// Allocates `bytes` of device memory.
    pub fn alloc(&self, bytes: usize) -> Result<DeviceBuffer<'_>, CudaError> {
        let _g = self.make_current()?;
        let mut ptr = 0;
        // SAFETY: the context is current; valid out-pointer.
        let allocated = unsafe { (self.driver.api().cu_mem_alloc)(&mut ptr, bytes.max(1)) };
        self.driver.check(allocated)?;
        Ok(DeviceBuffer {
            ctx: self,
            ptr,
            len: bytes,
        })
    }

    /// Loads a module from a NUL-terminated PTX text or a cubin/fatbin image.
    pub fn load_module(&self, image: &CStr) -> Result<Module<'_>, CudaError> {
        let _g = self.make_current()?;
        let mut m = std::ptr::null_mut();
        // SAFETY: the context is current; the image is NUL-terminated and outlives the call.
        self.driver.check(unsafe {
            (self.driver.api().cu_module_load_data)(&mut m, image.as_ptr().cast())
        })?;
        Ok(Module { ctx: self, raw: m })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        if let Ownership::Primary(dev) = self.ownership {
            // SAFETY: balances the retain in `primary`; errors cannot be reported from drop and are ignored.
            let _ = unsafe { (self.driver.api().cu_device_primary_ctx_release)(dev) };
        }
        if let (Ownership::Created, Some(destroy)) =
            (self.ownership, self.driver.api().cu_ctx_destroy)
        {
            // SAFETY: the context was created by `create` and is destroyed once; errors are ignored in drop.
            let _ = unsafe { destroy(self.raw) };
        }
    }
}

/// A [`Context`] borrowed from a `cudarc` context.
#[cfg(feature = "cudarc")]
#[derive(Debug)]
pub struct CudarcContext<'a> {
    inner: Context,
    _owner: PhantomData<&'a cudarc::driver::CudaContext>,
}

#[cfg(feature = "cudarc")]
impl std::ops::Deref for CudarcContext<'_> {
    type Target = Context;
    fn deref(&self) -> &Context {
        &self.inner
    }
}

/// Keeps a context current on this thread; pops it on drop. Not `Send`: it belongs to the thread that pushed.
/// Guards nest like the driver's context stack: drop them in reverse order of creation (plain scoping does);
/// dropping an outer guard first pops the inner guard's context.
#[derive(Debug)]
pub struct CurrentGuard<'a> {
    ctx: &'a Context,
    _not_send: PhantomData<*const ()>,
}

impl Drop for CurrentGuard<'_> {
    fn drop(&mut self) {
        let mut popped = std::ptr::null_mut();
        // SAFETY: balances the push in make_current on the same thread (the guard is not Send).
        let _ = unsafe { (self.ctx.driver.api().cu_ctx_pop_current)(&mut popped) };
    }
}

/// Device memory owned by the crate; freed on drop.
#[derive(Debug)]
pub struct DeviceBuffer<'ctx> {
    ctx: &'ctx Context,
    ptr: DevicePtr,
    len: usize,
}

impl DeviceBuffer<'_> {
    /// The device address.
    pub fn device_ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-byte buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `src` to the start of the buffer.
    pub fn copy_from_host(&mut self, src: &[u8]) -> Result<(), CudaError> {
        let n = src.len().min(self.len);
        let _g = self.ctx.make_current()?;
        // SAFETY: n bytes fit in both the host slice and the device allocation.
        self.ctx.driver.check(unsafe {
            (self.ctx.driver.api().cu_memcpy_htod)(self.ptr, src.as_ptr().cast(), n)
        })
    }

    /// Copies the start of the buffer into `dst`.
    pub fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), CudaError> {
        let n = dst.len().min(self.len);
        let _g = self.ctx.make_current()?;
        // SAFETY: n bytes fit in both the host slice and the device allocation.
        self.ctx.driver.check(unsafe {
            (self.ctx.driver.api().cu_memcpy_dtoh)(dst.as_mut_ptr().cast(), self.ptr, n)
        })
    }

    /// Copies `min(self.len, src.len)` bytes from another device buffer.
    pub fn copy_from_device(&mut self, src: &DeviceBuffer<'_>) -> Result<(), CudaError> {
        let n = src.len.min(self.len);
        let _g = self.ctx.make_current()?;
        // SAFETY: n bytes lie inside both allocations.
        self.ctx
            .driver
            .check(unsafe { (self.ctx.driver.api().cu_memcpy_dtod)(self.ptr, src.ptr, n) })
    }

    /// Fills the buffer with a 32-bit pattern (a trailing partial word is left as it is).
    pub fn fill_u32(&mut self, value: u32) -> Result<(), CudaError> {
        let _g = self.ctx.make_current()?;
        // SAFETY: len/4 words lie inside the allocation.
        self.ctx
            .driver
            .check(unsafe { (self.ctx.driver.api().cu_memset_d32)(self.ptr, value, self.len / 4) })
    }
}

impl Drop for DeviceBuffer<'_> {
    fn drop(&mut self) {
        if let Ok(_g) = self.ctx.make_current() {
            // SAFETY: ptr was allocated by cuMemAlloc in this context and is freed once.
            let _ = unsafe { (self.ctx.driver.api().cu_mem_free)(self.ptr) };
        }
    }
}

/// A loaded module; unloaded on drop.
#[derive(Debug)]
pub struct Module<'ctx> {
    ctx: &'ctx Context,
    raw: sys::CUmodule,
}

impl<'ctx> Module<'ctx> {
    /// Looks up a kernel by its (mangled) name.
    pub fn function(&self, name: &CStr) -> Result<Function<'_>, CudaError> {
        // The module lives in its context: the context must still be valid (and is made current, as for every
        // other call of this crate).
        let _current = self.ctx.make_current()?;
        let mut f = std::ptr::null_mut();
        // SAFETY: live module of a valid, current context; NUL-terminated name.
        self.ctx.driver.check(unsafe {
            (self.ctx.driver.api().cu_module_get_function)(&mut f, self.raw, name.as_ptr())
        })?;
        Ok(Function {
            module: self,
            raw: f,
        })
    }
}

impl Drop for Module<'_> {
    fn drop(&mut self) {
        if let Ok(_g) = self.ctx.make_current() {
            // SAFETY: the module was loaded in this context and is unloaded once.
            let _ = unsafe { (self.ctx.driver.api().cu_module_unload)(self.raw) };
        }
    }
}

/// A kernel of a [`Module`].
#[derive(Debug)]
pub struct Function<'m> {
    module: &'m Module<'m>,
    raw: sys::CUfunction,
}

impl Function<'_> {
    /// The raw handle (`CUfunction`), for callers that launch through [`Driver::api`] themselves.
    pub fn as_raw(&self) -> sys::CUfunction {
        self.raw
    }

    /// Launches the kernel on the default stream.
    ///
    /// # Safety
    /// `params` must point to one value per kernel parameter, each of the type and size the kernel declares, and
    /// any device pointer among them must be valid for what the kernel does with it.
    pub unsafe fn launch(
        &self,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        params: &mut [*mut c_void],
    ) -> Result<(), CudaError> {
        // SAFETY: forwarded to the caller; the null stream is the default stream.
        unsafe { self.launch_on(std::ptr::null_mut(), grid, block, params) }
    }

    /// The context of the function's module.
    pub(crate) fn context(&self) -> &Context {
        self.module.ctx
    }

    /// # Safety
    /// As [`Function::launch`]; `stream` is null or a live stream of the function's context.
    pub(crate) unsafe fn launch_on(
        &self,
        stream: sys::CUstream,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        params: &mut [*mut c_void],
    ) -> Result<(), CudaError> {
        let ctx = self.module.ctx;
        let _g = ctx.make_current()?;
        // SAFETY: live function of a live module; the caller vouches for the stream and the parameters.
        ctx.driver.check(unsafe {
            (ctx.driver.api().cu_launch_kernel)(
                self.raw,
                grid.0,
                grid.1,
                grid.2,
                block.0,
                block.1,
                block.2,
                0,
                stream,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }
}
