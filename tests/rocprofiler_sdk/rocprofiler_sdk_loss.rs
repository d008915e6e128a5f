//! No record lost, none delivered twice: records from 4 producer threads through the double's swapping buffers,
//! with explicit flushes from another thread, then the rest delivered by the tool's finalisation alone.
//!
//! `GPU_TOOLS_SDK_LOSS_RECORDS` sets the records (default 1,000,000; CI runs 10,000,000 with `--release`).
#![cfg(feature = "rocprofiler-sdk")]

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::double;
use gpu_tools::rocprofiler_sdk::{
    Batch, Buffer, BufferOptions, Context, Record, Setup, Tool, TraceKind,
};
use gpu_tools::sys::rocprofiler_sdk as sys;

const THREADS: u64 = 4;
const SEQ_BITS: u32 = 40;

struct Tracker {
    seen: Vec<Vec<u64>>,
    delivered: u64,
    duplicates: u64,
    corrupt: u64,
    errors: u64,
}

impl Tracker {
    fn take(&mut self, batch: &Batch<'_>) {
        for r in batch.records() {
            let Ok(Record::Api(a)) = r else {
                self.errors += 1;
                continue;
            };
            let id = a.correlation_id();
            let (thread, seq) = (id >> SEQ_BITS, id & ((1 << SEQ_BITS) - 1));
            if a.time().start != id ^ 0x5555 || a.operation() != (id % 7) as i32 {
                self.corrupt += 1;
            }
            let Some(word) = self
                .seen
                .get_mut(thread as usize)
                .and_then(|v| v.get_mut((seq / 64) as usize))
            else {
                self.errors += 1;
                continue;
            };
            let bit = 1u64 << (seq % 64);
            if *word & bit != 0 {
                self.duplicates += 1;
            }
            *word |= bit;
            self.delivered += 1;
        }
    }
}

static TRACKER: Mutex<Option<Tracker>> = Mutex::new(None);
static BUFFER: OnceLock<Arc<Buffer>> = OnceLock::new();
static FINALIZED: AtomicBool = AtomicBool::new(false);

struct LossTool {
    _context: Context,
    _buffer: Arc<Buffer>,
}

impl Tool for LossTool {
    const NAME: &'static str = "loss test";
    fn initialize(setup: &mut Setup<'_>) -> gpu_tools::Result<Self> {
        let context = setup.create_context()?;
        let buffer =
            Arc::new(
                setup.create_buffer(&context, BufferOptions::new(64 << 10), |b| {
                    if let Some(t) = TRACKER.lock().unwrap().as_mut() {
                        t.take(b)
                    }
                })?,
            );
        setup.trace(&context, &[TraceKind::HipRuntimeApi], &buffer)?;
        context.start()?;
        let _ = BUFFER.set(Arc::clone(&buffer));
        Ok(LossTool {
            _context: context,
            _buffer: buffer,
        })
    }
    fn finalize(&mut self) {
        FINALIZED.store(true, Ordering::SeqCst);
    }
}

fn emit(id: u64) -> i32 {
    // SAFETY: the double's control takes plain values.
    unsafe {
        (double().emit_api)(
            sys::ROCPROFILER_BUFFER_TRACING_HIP_RUNTIME_API,
            (id % 7) as i32,
            id,
            id ^ 0x5555,
            id,
        )
    }
}

#[test]
fn every_record_is_delivered_exactly_once_also_at_finalisation() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let total: u64 = std::env::var("GPU_TOOLS_SDK_LOSS_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let per_thread = total / THREADS;
    *TRACKER.lock().unwrap() = Some(Tracker {
        seen: (0..THREADS)
            .map(|_| vec![0u64; per_thread.div_ceil(64) as usize + 1])
            .collect(),
        delivered: 0,
        duplicates: 0,
        corrupt: 0,
        errors: 0,
    });
    gpu_tools::rocprofiler_sdk::force_configure::<LossTool>(double().lib).unwrap();
    let buffer = BUFFER.get().unwrap();
    let started = Instant::now();
    let done = AtomicBool::new(false);
    let flushes = AtomicU64::new(0);
    let before = double().stats();
    std::thread::scope(|s| {
        let producers: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    for seq in 0..per_thread {
                        assert_eq!(emit((t << SEQ_BITS) | seq), 1);
                    }
                })
            })
            .collect();
        s.spawn(|| {
            while !done.load(Ordering::Acquire) {
                buffer.flush().unwrap();
                flushes.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(300));
            }
        });
        for p in producers {
            p.join().unwrap();
        }
        done.store(true, Ordering::Release);
    });
    // No explicit flush: the tool's finalisation delivers what is left.
    gpu_tools::rocprofiler_sdk::finalize().unwrap();
    assert!(FINALIZED.load(Ordering::SeqCst), "the tool's finalize ran");
    let after = double().stats();
    let t = TRACKER.lock().unwrap().take().unwrap();
    println!(
        "{} records from {THREADS} threads: {} delivered, {} duplicates, {} corrupt, {} errors; {} explicit flushes, \
         {} callbacks, {:.2?}",
        per_thread * THREADS,
        t.delivered,
        t.duplicates,
        t.corrupt,
        t.errors,
        flushes.load(Ordering::Relaxed),
        after.callbacks - before.callbacks,
        started.elapsed()
    );
    assert_eq!(t.delivered, per_thread * THREADS);
    assert_eq!((t.duplicates, t.corrupt, t.errors), (0, 0, 0));
    for words in &t.seen {
        let set: u64 = words.iter().map(|w| u64::from(w.count_ones())).sum();
        assert_eq!(set, per_thread);
    }
    assert_eq!(after.dropped, 0);
    assert_eq!(buffer.stats().records, per_thread * THREADS);
}
