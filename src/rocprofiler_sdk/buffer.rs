//! Record buffers: the SDK hands each filled buffer to a C callback with the buffer's `void*` data, which points
//! at the buffer's shared state; the closure gets a [`Batch`] borrowed for the call through the shared
//! [`Delivery`], as rocprofiler v2 buffers and the CUPTI activity tracer deliver
//! theirs.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::batch::{Batch, HEADER_SIZE, LARGEST_RECORD};
use super::library::sym;
use super::{Context, SdkError, SdkLibrary, check};
use crate::delivery::{self, Delivery};
use crate::sys::rocprofiler_sdk as sys;

/// The closure a buffer delivers batches to.
pub(crate) type BatchFn = dyn for<'b> FnMut(&Batch<'b>) + Send;

/// The smallest buffer accepted: room for two of the largest records the crate decodes, with their headers.
pub const MIN_BUFFER_SIZE: usize = 2 * (HEADER_SIZE + LARGEST_RECORD);

/// What the SDK does when the buffer is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BufferPolicy {
    /// The producing thread waits until the buffer was handed over (`ROCPROFILER_BUFFER_POLICY_LOSSLESS`).
    #[default]
    Lossless,
    /// Records that do not fit are dropped and counted (`ROCPROFILER_BUFFER_POLICY_DISCARD`): see
    /// [`Batch::dropped_records`] and [`BufferStats::dropped_records`].
    Discard,
}

impl BufferPolicy {
    fn raw(self) -> sys::rocprofiler_buffer_policy_t {
        match self {
            BufferPolicy::Lossless => sys::ROCPROFILER_BUFFER_POLICY_LOSSLESS,
            BufferPolicy::Discard => sys::ROCPROFILER_BUFFER_POLICY_DISCARD,
        }
    }
}

/// Size, watermark and policy of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferOptions {
    /// Bytes of the buffer, at least [`MIN_BUFFER_SIZE`].
    pub size: usize,
    /// The SDK hands the buffer over once this many bytes are filled (at most `size`).
    pub watermark: usize,
    /// What happens when it is full.
    pub policy: BufferPolicy,
}

impl BufferOptions {
    /// A lossless buffer of `size` bytes, handed over when seven eighths are filled.
    pub fn new(size: usize) -> Self {
        BufferOptions {
            size,
            watermark: size - size / 8,
            policy: BufferPolicy::Lossless,
        }
    }

    /// Hands the buffer over at `watermark` bytes.
    pub fn watermark(mut self, watermark: usize) -> Self {
        self.watermark = watermark;
        self
    }

    /// Sets the policy.
    pub fn policy(mut self, policy: BufferPolicy) -> Self {
        self.policy = policy;
        self
    }

    pub(crate) fn check(&self) -> Result<(), SdkError> {
        if self.size < MIN_BUFFER_SIZE {
            return Err(SdkError::BufferTooSmall {
                size: self.size,
                min: MIN_BUFFER_SIZE,
            });
        }
        if self.watermark > self.size {
            return Err(SdkError::WatermarkAboveSize {
                watermark: self.watermark,
                size: self.size,
            });
        }
        Ok(())
    }
}

/// Delivery counts of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BufferStats {
    /// Batches handed to the closure.
    pub batches: u64,
    /// Records in them.
    pub records: u64,
    /// Records the SDK reported dropped (a full buffer under [`BufferPolicy::Discard`]).
    pub dropped_records: u64,
    /// Calls of the closure that panicked.
    pub callback_panics: u64,
}

/// State the SDK's callback reaches through its data pointer.
pub(crate) struct Shared {
    delivery: Delivery<BatchFn>,
    dropped: AtomicU64,
}

/// The C callback given to `rocprofiler_create_buffer`; runs on the SDK's buffer thread or the flushing thread.
unsafe extern "C" fn on_batch(
    _context: sys::rocprofiler_context_id_t,
    _buffer: sys::rocprofiler_buffer_id_t,
    headers: *mut *mut sys::rocprofiler_record_header_t,
    num_headers: usize,
    data: *mut c_void,
    drop_count: u64,
) {
    // No panic may unwind into the SDK.
    delivery::vendor_callback((), || {
        if data.is_null() {
            return;
        }
        // SAFETY: `data` is the `Arc<Shared>` pointer the buffer was created with; the buffer holds that reference
        // until the SDK destroyed the buffer, after which no callback comes.
        let shared = unsafe { &*data.cast::<Shared>() };
        if drop_count > 0 {
            shared.dropped.fetch_add(drop_count, Ordering::Relaxed);
            log::warn!("rocprofiler-sdk dropped {drop_count} records (buffer full)");
        }
        // SAFETY: the SDK hands over `num_headers` header pointers, each with its payload, valid until this
        // function returns; the batch is only lent to the closure for this call.
        let batch = unsafe { Batch::new(headers, num_headers, drop_count) };
        if batch.is_empty() && drop_count == 0 {
            return;
        }
        shared
            .delivery
            .deliver(batch.len() as u64, 0, |callback| callback(&batch));
    });
}

/// A record buffer (`rocprofiler_create_buffer`), created in the tool's initialisation
/// ([`Setup::create_buffer`](super::Setup::create_buffer)). Dropping it flushes it and destroys it: every record
/// the SDK wrote reaches the closure first.
pub struct Buffer {
    lib: &'static SdkLibrary,
    id: u64,
    size: usize,
    /// The `Arc` whose raw pointer the SDK holds as callback data; released once the SDK destroyed the buffer.
    shared: *const Shared,
    destroyed: bool,
}

// SAFETY: `shared` points at an `Arc<Shared>` whose contents are `Sync` (a mutex around the closure, atomics);
// every method takes `&self` and calls thread-safe SDK functions.
unsafe impl Send for Buffer {}
// SAFETY: as above.
unsafe impl Sync for Buffer {}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("id", &self.id)
            .field("size", &self.size)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Buffer {
    pub(crate) fn create(
        lib: &'static SdkLibrary,
        context: &Context,
        options: BufferOptions,
        callback: Box<BatchFn>,
    ) -> crate::Result<Buffer> {
        options.check()?;
        let f = sym(
            &lib.t.rocprofiler_create_buffer,
            "rocprofiler_create_buffer",
        )?;
        let shared = Arc::into_raw(Arc::new(Shared {
            delivery: Delivery::new(callback),
            dropped: AtomicU64::new(0),
        }));
        let mut id = sys::rocprofiler_buffer_id_t { handle: 0 };
        // SAFETY: the context exists; `on_batch` stays valid for the process and reads `shared`, which stays alive
        // until the buffer is destroyed; `id` is a valid out-pointer.
        let status = unsafe {
            f(
                context.raw(),
                options.size,
                options.watermark,
                options.policy.raw(),
                Some(on_batch),
                shared.cast_mut().cast(),
                &mut id,
            )
        };
        if let Err(e) = check("rocprofiler_create_buffer", status) {
            // SAFETY: the SDK refused the buffer, so it holds no copy of the pointer.
            drop(unsafe { Arc::from_raw(shared) });
            return Err(super::locked_or(e));
        }
        super::tracked::track_buffer(id.handle);
        Ok(Buffer {
            lib,
            id: id.handle,
            size: options.size,
            shared,
            destroyed: false,
        })
    }

    fn shared(&self) -> &Shared {
        // SAFETY: the Arc is alive until `self` is dropped.
        unsafe { &*self.shared }
    }

    pub(crate) fn raw(&self) -> sys::rocprofiler_buffer_id_t {
        sys::rocprofiler_buffer_id_t { handle: self.id }
    }

    /// The SDK's buffer id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Bytes of the buffer.
    pub fn size(&self) -> usize {
        self.size
    }

    /// `rocprofiler_flush_buffer`: hands the records written so far to the closure and waits for it. Reports a
    /// panic of the closure (caught, never unwound into the SDK) since the last report.
    pub fn flush(&self) -> crate::Result<()> {
        if delivery::in_callback() {
            return Err(SdkError::InsideCallback.into());
        }
        flush_raw(self.lib, self.id)?;
        match self.take_panic() {
            Some(msg) => Err(SdkError::CallbackPanicked(msg).into()),
            None => Ok(()),
        }
    }

    /// The message of the first closure panic not yet reported, clearing it.
    pub fn take_panic(&self) -> Option<String> {
        self.shared().delivery.take_panic()
    }

    /// Delivery and drop counts so far.
    pub fn stats(&self) -> BufferStats {
        let shared = self.shared();
        let c = shared.delivery.counts();
        BufferStats {
            batches: c.batches,
            records: c.records,
            dropped_records: shared.dropped.load(Ordering::Relaxed),
            callback_panics: c.panics,
        }
    }
}

pub(crate) fn flush_raw(lib: &SdkLibrary, id: u64) -> crate::Result<()> {
    let f = sym(&lib.t.rocprofiler_flush_buffer, "rocprofiler_flush_buffer")?;
    // SAFETY: a buffer id the SDK gave; this thread runs no buffer callback, so waiting for it cannot deadlock.
    check("rocprofiler_flush_buffer", unsafe {
        f(sys::rocprofiler_buffer_id_t { handle: id })
    })?;
    Ok(())
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if self.destroyed {
            return;
        }
        self.destroyed = true;
        if delivery::in_callback() {
            // Destroying would wait for the callback this code runs in: the buffer stays, and so does its closure.
            log::warn!(
                "rocprofiler-sdk buffer {} dropped inside a callback: left alive",
                self.id
            );
            return;
        }
        let finalized = self.lib.is_finalized().unwrap_or(false);
        if !finalized {
            if let Err(e) = flush_raw(self.lib, self.id) {
                log::warn!("flushing rocprofiler-sdk buffer {}: {e}", self.id);
            }
        }
        let destroyed = match sym(
            &self.lib.t.rocprofiler_destroy_buffer,
            "rocprofiler_destroy_buffer",
        ) {
            // SAFETY: the buffer exists and is destroyed once, here, by the thread that owns it.
            Ok(f) => check("rocprofiler_destroy_buffer", unsafe { f(self.raw()) }).is_ok(),
            Err(_) => false,
        };
        super::tracked::untrack_buffer(self.id);
        if destroyed {
            // SAFETY: no callback can come any more: the SDK destroyed the buffer. The reference made in `create`
            // is released.
            drop(unsafe { Arc::from_raw(self.shared) });
        } else {
            // The SDK may still call back with the pointer: the state stays alive for the process.
            log::debug!(
                "rocprofiler-sdk buffer {} not destroyed; its state is kept",
                self.id
            );
        }
    }
}
