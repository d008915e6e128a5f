//! Streams, page-locked host memory and the asynchronous copies and sets between them, for workloads that
//! exercise tracers (several streams, copies in both directions).

use std::ffi::c_void;

use super::{Context, CudaError, DeviceBuffer, Function, sys};

/// A non-blocking CUDA stream of a [`Context`]; destroyed on drop.
///
/// `Send` and `Sync`: a stream handle may be used from any thread; every method makes its context current for
/// the call. A stream borrows its context, so it cannot outlive it:
///
/// ```compile_fail
/// # fn f() -> Result<(), gpu_tools::Error> {
/// let ctx = gpu_tools::cuda::Context::primary(0)?;
/// let stream = ctx.create_stream()?;
/// drop(ctx);
/// stream.synchronize()?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Stream<'ctx> {
    ctx: &'ctx Context,
    raw: sys::CUstream,
}

// SAFETY: CUstream handles are process-wide; the driver serialises work submitted to one stream.
unsafe impl Send for Stream<'_> {}
// SAFETY: as above; shared use only submits work or queries, which the driver allows from any thread.
unsafe impl Sync for Stream<'_> {}

/// `Err(CUDA_ERROR_NOT_SUPPORTED)` for a driver entry point the loaded driver lacks.
fn supported<T>(ctx: &Context, f: Option<T>) -> Result<T, CudaError> {
    f.ok_or_else(|| CudaError::from_code(ctx.driver, sys::CUDA_ERROR_NOT_SUPPORTED))
}

impl Context {
    /// Creates a non-blocking stream (`cuStreamCreate` with `CU_STREAM_NON_BLOCKING`): it does not wait for the
    /// default stream.
    pub fn create_stream(&self) -> Result<Stream<'_>, CudaError> {
        let create = supported(self, self.driver.api().cu_stream_create)?;
        supported(self, self.driver.api().cu_stream_destroy)?;
        let _g = self.make_current()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: the context is current; valid out-pointer and flags from the header.
        let created = unsafe { create(&mut raw, sys::CU_STREAM_NON_BLOCKING) };
        self.driver.check(created)?;
        Ok(Stream { ctx: self, raw })
    }

    /// The context's unique id (`cuCtxGetId`, CUDA 12.0+): the id tool APIs such as CUPTI report for it.
    pub fn id(&self) -> Result<u64, CudaError> {
        let get = supported(self, self.driver.api().cu_ctx_get_id)?;
        self.check_valid()?;
        let mut id = 0;
        // SAFETY: a valid context (checked above) and a valid out-pointer.
        self.driver.check(unsafe { get(self.raw, &mut id) })?;
        Ok(id)
    }

    /// Allocates `bytes` of page-locked host memory (`cuMemAllocHost`), zeroed.
    pub fn alloc_pinned(&self, bytes: usize) -> Result<PinnedBuffer<'_>, CudaError> {
        let alloc = supported(self, self.driver.api().cu_mem_alloc_host)?;
        supported(self, self.driver.api().cu_mem_free_host)?;
        let _g = self.make_current()?;
        let mut ptr = std::ptr::null_mut();
        // SAFETY: the context is current; valid out-pointer.
        let allocated = unsafe { alloc(&mut ptr, bytes.max(1)) };
        self.driver.check(allocated)?;
        // SAFETY: the driver returned `bytes` (at least 1) writable bytes at `ptr`.
        unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), 0, bytes) };
        Ok(PinnedBuffer {
            ctx: self,
            ptr: ptr.cast(),
            len: bytes,
        })
    }
}

impl<'ctx> Stream<'ctx> {
    /// The raw handle.
    pub fn as_raw(&self) -> sys::CUstream {
        self.raw
    }

    /// The stream's unique id (`cuStreamGetId`, CUDA 12.0+): the id tool APIs such as CUPTI report for it.
    pub fn id(&self) -> Result<u64, CudaError> {
        let get = supported(self.ctx, self.ctx.driver.api().cu_stream_get_id)?;
        let mut id = 0;
        // SAFETY: a live stream of this value; valid out-pointer.
        self.ctx.driver.check(unsafe { get(self.raw, &mut id) })?;
        Ok(id)
    }

    /// Waits for all work submitted to the stream.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        let sync = supported(self.ctx, self.ctx.driver.api().cu_stream_synchronize)?;
        let _g = self.ctx.make_current()?;
        // SAFETY: a live stream of the current context.
        self.ctx.driver.check(unsafe { sync(self.raw) })
    }

    /// Queues a copy of `min(src.len(), dst.len())` bytes from page-locked host memory to the device.
    ///
    /// # Safety
    /// Until the stream has finished the copy (see [`Stream::synchronize`]), `src` must not be written or freed
    /// and `dst` must not be freed.
    pub unsafe fn copy_to_device(
        &self,
        dst: &DeviceBuffer<'_>,
        src: &PinnedBuffer<'_>,
    ) -> Result<(), CudaError> {
        let copy = supported(self.ctx, self.ctx.driver.api().cu_memcpy_htod_async)?;
        let n = src.len.min(dst.len());
        let _g = self.ctx.make_current()?;
        // SAFETY: n bytes lie in both buffers; the caller keeps them alive and unchanged until the copy ends.
        self.ctx.driver.check(unsafe {
            copy(
                dst.device_ptr(),
                src.ptr.cast::<c_void>().cast_const(),
                n,
                self.raw,
            )
        })
    }

    /// Queues a copy of `min(src.len(), dst.len())` bytes from the device to page-locked host memory.
    ///
    /// # Safety
    /// Until the stream has finished the copy, `dst` must not be read, written or freed, and `src` must not be
    /// freed. The shared borrow of `dst` does not stop other code from reading it meanwhile: the caller must.
    pub unsafe fn copy_to_host(
        &self,
        dst: &PinnedBuffer<'_>,
        src: &DeviceBuffer<'_>,
    ) -> Result<(), CudaError> {
        let copy = supported(self.ctx, self.ctx.driver.api().cu_memcpy_dtoh_async)?;
        let n = dst.len.min(src.len());
        let _g = self.ctx.make_current()?;
        // SAFETY: n bytes lie in both buffers; the caller keeps them alive and unused until the copy ends.
        self.ctx
            .driver
            .check(unsafe { copy(dst.ptr.cast::<c_void>(), src.device_ptr(), n, self.raw) })
    }

    /// Queues setting the first `bytes` bytes of `dst` (at most its length) to `value`.
    ///
    /// # Safety
    /// `dst` must not be freed until the stream has finished the set.
    pub unsafe fn set_bytes(
        &self,
        dst: &DeviceBuffer<'_>,
        value: u8,
        bytes: usize,
    ) -> Result<(), CudaError> {
        let set = supported(self.ctx, self.ctx.driver.api().cu_memset_d8_async)?;
        let n = bytes.min(dst.len());
        let _g = self.ctx.make_current()?;
        // SAFETY: n bytes lie in the allocation, which the caller keeps alive until the set ends.
        self.ctx
            .driver
            .check(unsafe { set(dst.device_ptr(), value, n, self.raw) })
    }

    /// Queues a launch of `function` on this stream.
    ///
    /// # Errors
    /// `CUDA_ERROR_INVALID_HANDLE`, before any driver call, when the stream belongs to another context than the
    /// function's module; otherwise what the driver reports.
    ///
    /// # Safety
    /// As [`Function::launch`]; in addition, device memory the kernel uses must stay allocated until the stream
    /// has finished it.
    pub unsafe fn launch(
        &self,
        function: &Function<'_>,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        params: &mut [*mut c_void],
    ) -> Result<(), CudaError> {
        // `launch_on` needs a stream of the function's context: checked here, not left to the driver.
        if self.ctx.as_raw() != function.context().as_raw() {
            return Err(CudaError::from_code(
                self.ctx.driver,
                sys::CUDA_ERROR_INVALID_HANDLE,
            ));
        }
        // SAFETY: a live stream (it borrows its context) of the function's context (checked above); the
        // parameters and the memory the kernel uses are the caller's to vouch for.
        unsafe { function.launch_on(self.raw, grid, block, params) }
    }
}

impl Drop for Stream<'_> {
    fn drop(&mut self) {
        if let (Ok(_g), Some(destroy)) = (
            self.ctx.make_current(),
            self.ctx.driver.api().cu_stream_destroy,
        ) {
            // SAFETY: the stream was created by `create_stream` and is destroyed once; the driver lets queued
            // work finish first. Errors cannot be reported from drop.
            let _ = unsafe { destroy(self.raw) };
        }
    }
}

/// Page-locked host memory of a context; freed on drop.
#[derive(Debug)]
pub struct PinnedBuffer<'ctx> {
    ctx: &'ctx Context,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the memory is plain host memory owned by this value; access goes through &/&mut like a Vec<u8>.
unsafe impl Send for PinnedBuffer<'_> {}
// SAFETY: as above.
unsafe impl Sync for PinnedBuffer<'_> {}

impl PinnedBuffer<'_> {
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-byte buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes. Do not call while an asynchronous copy into the buffer may be running.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `len` initialised bytes (zeroed at allocation) owned by this value.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The bytes, writable. Do not call while an asynchronous copy from or into the buffer may be running.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `len` initialised bytes owned by this value, borrowed exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for PinnedBuffer<'_> {
    fn drop(&mut self) {
        if let (Ok(_g), Some(free)) = (
            self.ctx.make_current(),
            self.ctx.driver.api().cu_mem_free_host,
        ) {
            // SAFETY: allocated by cuMemAllocHost in this context and freed once.
            let _ = unsafe { free(self.ptr.cast()) };
        }
    }
}
