//! Handing vendor record buffers to a user's closure, shared by rocprofiler buffers and the CUPTI activity
//! tracer: the closure runs behind a lock with the thread marked as inside a callback, a panic in it is caught,
//! counted and kept for the next report, and what was delivered is counted.

use std::any::Any;
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a [`Delivery`] handed over so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct DeliveryCounts {
    /// Batches handed to the closure.
    pub batches: u64,
    /// Records in them.
    pub records: u64,
    /// Bytes in them.
    pub bytes: u64,
    /// Calls of the closure that panicked.
    pub panics: u64,
}

/// A user's closure `F` (a `dyn FnMut(&Batch<'_>)` of the vendor's batch type) and its delivery counts.
pub(crate) struct Delivery<F: ?Sized> {
    callback: Mutex<Box<F>>,
    batches: AtomicU64,
    records: AtomicU64,
    bytes: AtomicU64,
    panics: AtomicU64,
    pending_panic: Mutex<Option<String>>,
}

impl<F: ?Sized> Delivery<F> {
    pub(crate) fn new(callback: Box<F>) -> Self {
        Delivery {
            callback: Mutex::new(callback),
            batches: AtomicU64::new(0),
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            pending_panic: Mutex::new(None),
        }
    }

    /// Hands one batch of `records` records and `bytes` bytes to the closure through `call`. Batches from
    /// several vendor threads are serialised. A panic is caught, counted and kept for
    /// [`take_panic`](Self::take_panic); the call returns normally either way.
    pub(crate) fn deliver(&self, records: u64, bytes: u64, call: impl FnOnce(&mut F)) {
        let _scope = CallbackScope::enter();
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.records.fetch_add(records, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        // A panic of an earlier call poisons nothing the closure relies on: the lock only serialises calls.
        let mut callback = self.callback.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| call(&mut **callback))) {
            self.panics.fetch_add(1, Ordering::Relaxed);
            let msg = panic_message(&*payload);
            // Dropping the payload could panic again; leak it instead.
            std::mem::forget(payload);
            let mut pending = self.pending_panic.lock().unwrap_or_else(|p| p.into_inner());
            pending.get_or_insert(msg);
        }
    }

    /// The message of the first panic not yet reported, clearing it.
    pub(crate) fn take_panic(&self) -> Option<String> {
        self.pending_panic
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// Counts so far.
    pub(crate) fn counts(&self) -> DeliveryCounts {
        DeliveryCounts {
            batches: self.batches.load(Ordering::Relaxed),
            records: self.records.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            panics: self.panics.load(Ordering::Relaxed),
        }
    }
}

/// The text of a panic payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_string())
}

/// Runs the body of a C callback the vendor calls, so that no panic unwinds into the vendor: a panic there (a
/// bug of the crate, not of the user's closure, which `Delivery` guards) is leaked and `fallback` returned.
pub(crate) fn vendor_callback<R>(fallback: R, body: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(payload) => {
            std::mem::forget(payload);
            fallback
        }
    }
}

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Whether this thread is running a delivery callback. Flushing, stopping or destroying from there would wait for
/// the callback itself, so the crate refuses those calls.
pub(crate) fn in_callback() -> bool {
    DEPTH.with(|d| d.get() > 0)
}

/// Marks the thread as inside a callback until dropped (nests).
pub(crate) struct CallbackScope(());

impl CallbackScope {
    pub(crate) fn enter() -> Self {
        DEPTH.with(|d| d.set(d.get().saturating_add(1)));
        CallbackScope(())
    }
}

impl Drop for CallbackScope {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_are_caught_counted_and_reported_once() {
        let d: Delivery<dyn FnMut(u32) + Send> = Delivery::new(Box::new(|n: u32| {
            assert!(in_callback());
            if n == 2 {
                panic!("batch {n}");
            }
        }));
        assert!(!in_callback());
        for n in 0..4u32 {
            d.deliver(3, 24, |f| f(n));
        }
        assert!(!in_callback());
        let c = d.counts();
        assert_eq!((c.batches, c.records, c.bytes, c.panics), (4, 12, 96, 1));
        assert_eq!(d.take_panic().as_deref(), Some("batch 2"));
        assert_eq!(d.take_panic(), None);
    }

    #[test]
    fn vendor_callbacks_never_unwind() {
        assert_eq!(vendor_callback(7, || -> i32 { panic!("inside") }), 7);
        assert_eq!(vendor_callback(7, || 8), 8);
    }
}
