//! Record buffers: the vendor's callback is a plain C function without a user pointer, so it is routed to the
//! Rust closure through a registry keyed by (session, buffer). The closure gets a [`Batch`] borrowed for the
//! call through the shared [`Delivery`]; a panic in it is caught, counted and reported
//! by the next [`Buffer::flush`].

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use super::batch::Batch;
use super::library::sym;
use super::{ProfilerError, RocprofilerError, RocprofilerLibrary};
use crate::Result;
use crate::delivery::{self, Delivery};
use crate::sys::rocprofiler as sys;

/// The closure a buffer delivers batches to.
pub(crate) type Callback = Box<dyn for<'b> FnMut(&Batch<'b>) + Send>;

/// Size and flush interval of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferOptions {
    /// Bytes of each of the two halves the vendor swaps; at least the largest record (288 bytes).
    pub size: usize,
    /// Flush at this interval from a thread of the crate (the vendor stores but ignores its own interval
    /// property). `None`: flush only when a half fills, on [`Buffer::flush`], and when the session ends.
    pub flush_interval: Option<Duration>,
}

impl BufferOptions {
    /// A buffer of `size` bytes per half, without interval flushing.
    pub fn new(size: usize) -> Self {
        BufferOptions {
            size,
            flush_interval: None,
        }
    }

    /// Flushes every `interval`.
    pub fn flush_interval(mut self, interval: Duration) -> Self {
        self.flush_interval = Some(interval);
        self
    }
}

/// Delivery counts of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BufferStats {
    /// Batches handed to the closure.
    pub batches: u64,
    /// Bytes of fixed-size records in them.
    pub bytes: u64,
    /// Calls of the closure that panicked.
    pub callback_panics: u64,
}

/// State shared by the registry, the [`Buffer`] handle and the session.
pub(crate) struct Shared {
    half_len: usize,
    delivery: Delivery<dyn for<'b> FnMut(&Batch<'b>) + Send>,
    flusher_error: Mutex<Option<super::RocprofilerError>>,
}

impl Shared {
    pub(crate) fn new(half_len: usize, callback: Callback) -> Arc<Self> {
        Arc::new(Shared {
            half_len,
            delivery: Delivery::new(callback),
            flusher_error: Mutex::new(None),
        })
    }
}

struct Entry {
    session: u64,
    buffer: u64,
    shared: Arc<Shared>,
}

static REGISTRY: RwLock<Vec<Entry>> = RwLock::new(Vec::new());

/// Batches the vendor delivered for a buffer the crate does not know (should stay zero).
static ORPHAN_BATCHES: AtomicU64 = AtomicU64::new(0);

pub(crate) fn register(session: u64, buffer: u64, shared: Arc<Shared>) {
    REGISTRY
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .push(Entry {
            session,
            buffer,
            shared,
        });
}

pub(crate) fn unregister_session(session: u64) {
    REGISTRY
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|e| e.session != session);
}

fn lookup(session: u64, buffer: u64) -> Option<Arc<Shared>> {
    let reg = REGISTRY.read().unwrap_or_else(|p| p.into_inner());
    reg.iter()
        .find(|e| e.session == session && e.buffer == buffer)
        .map(|e| Arc::clone(&e.shared))
}

/// Whether this thread is running a buffer callback. Flushing, terminating or destroying from there would wait
/// for the callback itself.
pub(crate) fn in_callback() -> bool {
    delivery::in_callback()
}

/// The C callback given to `rocprofiler_create_buffer`; runs on the vendor's consumer thread.
pub(crate) unsafe extern "C" fn on_batch(
    begin: *const sys::rocprofiler_record_header_t,
    end: *const sys::rocprofiler_record_header_t,
    session: sys::rocprofiler_session_id_t,
    buffer: sys::rocprofiler_buffer_id_t,
) {
    // No panic may unwind into the vendor.
    delivery::vendor_callback((), || {
        let Some(shared) = lookup(session.handle, buffer.value) else {
            ORPHAN_BATCHES.fetch_add(1, Ordering::Relaxed);
            return;
        };
        // SAFETY: the vendor hands over [begin, end) at the front of a half of `half_len` bytes (the size the
        // buffer was created with), with the layout `Batch` checks, valid until this function returns; the
        // batch is only lent to the closure for this call.
        let batch = unsafe { Batch::new(begin.cast(), end.cast(), shared.half_len) };
        // Records are counted by the closure's own walk where it needs them; the buffer counts bytes.
        shared
            .delivery
            .deliver(0, batch.len_bytes() as u64, |callback| callback(&batch));
    });
}

/// A record buffer of a [`ProfilingSession`](super::ProfilingSession), created by
/// [`ProfilingSession::create_buffer`](super::ProfilingSession::create_buffer). The vendor buffer lives as long
/// as the session; this handle borrows the session and flushes it.
pub struct Buffer<'s> {
    pub(crate) lib: &'static RocprofilerLibrary,
    pub(crate) session: u64,
    pub(crate) id: u64,
    pub(crate) shared: Arc<Shared>,
    pub(crate) _session: PhantomData<&'s ()>,
}

impl std::fmt::Debug for Buffer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("session", &self.session)
            .field("id", &self.id)
            .field("size", &self.shared.half_len)
            .finish()
    }
}

impl Buffer<'_> {
    /// The vendor's buffer id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Bytes per half.
    pub fn size(&self) -> usize {
        self.shared.half_len
    }

    /// `rocprofiler_flush_data`: hands the records written so far to the callback and waits for it. Reports a
    /// panic of the callback (caught, never unwound into the vendor) since the last report, and an error of the
    /// interval flusher.
    ///
    /// When the current half is empty the vendor returns at once, even if a half it swapped out because it was
    /// full is still being delivered; terminating or dropping the session waits for every delivery.
    pub fn flush(&self) -> Result<()> {
        if in_callback() {
            return Err(ProfilerError::InsideCallback.into());
        }
        flush_raw(self.lib, self.session, self.id)?;
        if let Some(e) = self
            .shared
            .flusher_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            return Err(e.into());
        }
        match self.take_panic() {
            Some(msg) => Err(ProfilerError::CallbackPanicked(msg).into()),
            None => Ok(()),
        }
    }

    /// The message of the first callback panic not yet reported, clearing it.
    pub fn take_panic(&self) -> Option<String> {
        self.shared.delivery.take_panic()
    }

    /// Batches the vendor delivered, in this process, for buffers the crate did not know (dropped unread). Zero
    /// unless the library calls back after its session was destroyed.
    pub fn orphan_batches() -> u64 {
        ORPHAN_BATCHES.load(Ordering::Relaxed)
    }

    /// Delivery counts so far.
    pub fn stats(&self) -> BufferStats {
        let counts = self.shared.delivery.counts();
        BufferStats {
            batches: counts.batches,
            bytes: counts.bytes,
            callback_panics: counts.panics,
        }
    }
}

pub(crate) fn flush_raw(lib: &RocprofilerLibrary, session: u64, buffer: u64) -> Result<()> {
    let f = sym(&lib.t.rocprofiler_flush_data, "rocprofiler_flush_data")?;
    // SAFETY: the session and buffer exist (their owner is alive) and this thread is not the buffer's
    // consumer thread, so waiting for the callback cannot deadlock.
    RocprofilerError::check(unsafe {
        f(
            sys::rocprofiler_session_id_t { handle: session },
            sys::rocprofiler_buffer_id_t { value: buffer },
        )
    })?;
    Ok(())
}

/// A thread flushing one buffer at an interval, stopped and joined before its session is destroyed.
pub(crate) struct Flusher {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<JoinHandle<()>>,
}

impl Flusher {
    pub(crate) fn spawn(
        lib: &'static RocprofilerLibrary,
        session: u64,
        buffer: u64,
        interval: Duration,
        shared: Arc<Shared>,
    ) -> std::io::Result<Self> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let stop2 = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name(format!("rocprofiler-flush-{buffer}"))
            .spawn(move || {
                let (lock, cv) = &*stop2;
                loop {
                    let stopped = lock.lock().unwrap_or_else(|p| p.into_inner());
                    let (stopped, _) = cv
                        .wait_timeout_while(stopped, interval, |s| !*s)
                        .unwrap_or_else(|p| p.into_inner());
                    if *stopped {
                        return;
                    }
                    drop(stopped);
                    if let Err(crate::Error::Rocprofiler(e)) = flush_raw(lib, session, buffer) {
                        *shared
                            .flusher_error
                            .lock()
                            .unwrap_or_else(|p| p.into_inner()) = Some(e);
                    }
                }
            })?;
        Ok(Flusher {
            stop,
            handle: Some(handle),
        })
    }

    pub(crate) fn stop(&mut self) {
        let (lock, cv) = &*self.stop;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.stop();
    }
}
