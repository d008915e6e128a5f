//! The state a sampler shares with its decode thread: where samples go (the read queue or the closure), the stop
//! flag and the counts behind [`PmStats`].

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

use super::PmStats;
use super::batch::PmBatch;
use crate::counters::DeviceSample;
use crate::delivery::Delivery;

/// The closure batches go to.
pub(super) type BatchFn = dyn for<'b> FnMut(&PmBatch<'b>) + Send;

/// Samples waiting for [`PmSampler::read`](crate::counters::DeviceCounters::read).
#[derive(Default)]
pub(super) struct Queue {
    pub(super) samples: VecDeque<DeviceSample>,
    pub(super) dropped_unread: u64,
    pub(super) gaps_unread: u64,
    pub(super) ended: bool,
}

/// Where the decode thread puts samples.
pub(super) enum Sink {
    Queue {
        queue: Mutex<Queue>,
        ready: Condvar,
        limit: usize,
    },
    Callback(Delivery<BatchFn>),
}

/// State shared by the sampler and its decode thread.
pub(super) struct Shared {
    pub(super) sink: Sink,
    pub(super) stop: Mutex<bool>,
    pub(super) wake: Condvar,
    pub(super) decodes: AtomicU64,
    pub(super) samples: AtomicU64,
    pub(super) overflows: AtomicU64,
    pub(super) dropped: AtomicU64,
    pub(super) gaps: AtomicU64,
    pub(super) gaps_at_restart: AtomicU64,
    pub(super) incomplete_at_restart: AtomicU64,
    pub(super) stale: AtomicU64,
    pub(super) image_full: AtomicU64,
    pub(super) failed: Mutex<Option<String>>,
    pub(super) running: AtomicBool,
}

impl Shared {
    pub(super) fn stats(&self) -> PmStats {
        let callback_panics = match &self.sink {
            Sink::Callback(d) => d.counts().panics,
            Sink::Queue { .. } => 0,
        };
        PmStats {
            decodes: self.decodes.load(Ordering::Relaxed),
            samples: self.samples.load(Ordering::Relaxed),
            overflows: self.overflows.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            gaps: self.gaps.load(Ordering::Relaxed),
            gaps_at_restart: self.gaps_at_restart.load(Ordering::Relaxed),
            incomplete_at_restart: self.incomplete_at_restart.load(Ordering::Relaxed),
            stale: self.stale.load(Ordering::Relaxed),
            image_full: self.image_full.load(Ordering::Relaxed),
            callback_panics,
        }
    }

    pub(super) fn deliver(&self, batch: &PmBatch<'_>) {
        match &self.sink {
            Sink::Callback(d) => d.deliver(batch.len() as u64, 0, |f| f(batch)),
            Sink::Queue {
                queue,
                ready,
                limit,
            } => {
                let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
                q.dropped_unread += batch.dropped();
                q.gaps_unread += batch.gaps();
                for s in batch.iter() {
                    if q.samples.len() >= *limit {
                        q.samples.pop_front();
                        q.dropped_unread += 1;
                        self.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    q.samples.push_back(s.to_owned());
                }
                ready.notify_all();
            }
        }
    }

    pub(super) fn end(&self) {
        self.running.store(false, Ordering::Release);
        if let Sink::Queue { queue, ready, .. } = &self.sink {
            queue.lock().unwrap_or_else(|p| p.into_inner()).ended = true;
            ready.notify_all();
        }
    }
}
