//! No record lost, none delivered twice: millions of records from several producer threads through the double,
//! with explicit and interval flushes, then a session dropped while producers are still writing.
//!
//! `GPU_TOOLS_LOSS_RECORDS` sets the records of the first phase (default 10,000,000; run with `--release`).
#![cfg(feature = "rocprofiler")]

use crate::common;

use std::mem::offset_of;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{double, init, serial};
use gpu_tools::rocprofiler::{Batch, Buffer, BufferOptions, Filter, ProfilingSession, Record};
use gpu_tools::sys::rocprofiler as sys;

const THREADS: u64 = 4;
const SEQ_BITS: u32 = 40;

fn id_of(thread: u64, seq: u64) -> u64 {
    (thread << SEQ_BITS) | seq
}

fn counters_for(id: u64) -> ([sys::rocprofiler_record_counter_instance_t; 4], usize) {
    let n = 1 + (id % 4) as usize;
    let mut c = [sys::rocprofiler_record_counter_instance_t::default(); 4];
    for (i, e) in c.iter_mut().enumerate().take(n) {
        e.counter_handler.handle = i as u64 + 1;
        e.value.value = id as f64 * 0.5 + i as f64;
    }
    (c, n)
}

fn emit(id: u64) -> i32 {
    let mut rec = sys::rocprofiler_record_profiler_t::default();
    rec.header.kind = sys::ROCPROFILER_PROFILER_RECORD;
    rec.header.id.handle = id;
    rec.kernel_id.handle = id ^ 0x55;
    let (counters, n) = counters_for(id);
    rec.counters_count.value = n as u64;
    // SAFETY: the array is plain data; its first n entries are n * 16 readable bytes.
    let bytes = unsafe { std::slice::from_raw_parts(counters.as_ptr().cast::<u8>(), n * 16) };
    double().emit(
        sys::ROCPROFILER_DISPATCH_TIMESTAMPS_COLLECTION,
        &rec,
        bytes,
        offset_of!(sys::rocprofiler_record_profiler_t, counters),
    )
}

/// Which ids arrived, how often, and whether their contents were intact.
struct Tracker {
    seen: Vec<Vec<u64>>,
    delivered: u64,
    duplicates: u64,
    corrupt: u64,
    errors: u64,
}

impl Tracker {
    fn new(per_thread: u64) -> Self {
        let words = per_thread.div_ceil(64) as usize;
        Tracker {
            seen: (0..THREADS).map(|_| vec![0u64; words]).collect(),
            delivered: 0,
            duplicates: 0,
            corrupt: 0,
            errors: 0,
        }
    }

    fn take(&mut self, batch: &Batch<'_>) {
        for r in batch.records() {
            let Ok(Record::Profiler(p)) = r else {
                self.errors += 1;
                continue;
            };
            let id = p.id();
            let (thread, seq) = (id >> SEQ_BITS, id & ((1 << SEQ_BITS) - 1));
            let (want, n) = counters_for(id);
            let intact = p.kernel_id() == id ^ 0x55
                && p.counters().len() == n
                && p.counters().iter().zip(&want).all(|(got, w)| {
                    got.counter_id == w.counter_handler.handle && got.value == w.value.value
                });
            if !intact {
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

    /// Ids of `thread` delivered are exactly 0..count.
    fn exactly(&self, thread: usize, count: u64) -> bool {
        let words = &self.seen[thread];
        (0..words.len() as u64 * 64).all(|seq| {
            let set = words[(seq / 64) as usize] & (1 << (seq % 64)) != 0;
            set == (seq < count)
        })
    }
}

fn attach<'s>(session: &'s ProfilingSession<'_>, buffer: Buffer<'s>) -> Buffer<'s> {
    session
        .add_filter(Filter::dispatch_timestamps(), &buffer)
        .unwrap();
    buffer
}

#[test]
fn every_record_is_delivered_exactly_once() {
    let _s = serial();
    let total: u64 = std::env::var("GPU_TOOLS_LOSS_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let per_thread = total / THREADS;
    let rp = init();
    let before = double().stats();

    // Phase 1: producers, explicit flushes from another thread, interval flushes from the crate.
    let started = Instant::now();
    let tracker = Arc::new(Mutex::new(Tracker::new(per_thread)));
    let t2 = Arc::clone(&tracker);
    let session = ProfilingSession::new(&rp).unwrap();
    let buffer = attach(
        &session,
        session
            .create_buffer_with(
                BufferOptions::new(1 << 16).flush_interval(Duration::from_millis(2)),
                move |b| t2.lock().unwrap().take(b),
            )
            .unwrap(),
    );
    session.start().unwrap();
    let done = AtomicBool::new(false);
    let flushes = AtomicU64::new(0);
    std::thread::scope(|s| {
        let producers: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    for seq in 0..per_thread {
                        assert_eq!(emit(id_of(t, seq)), 0);
                    }
                })
            })
            .collect();
        s.spawn(|| {
            while !done.load(Ordering::Acquire) || flushes.load(Ordering::Relaxed) < 100 {
                buffer.flush().unwrap();
                flushes.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(200));
            }
        });
        for p in producers {
            p.join().unwrap();
        }
        done.store(true, Ordering::Release);
    });
    session.terminate().unwrap();
    drop(buffer);
    drop(session);
    let phase1 = started.elapsed();
    let t = tracker.lock().unwrap();
    let after = double().stats();
    println!(
        "phase 1: {} records from {THREADS} threads, {} delivered, {} duplicates, {} corrupt, {} errors, \
         {} explicit flushes, {} vendor flushes, {} callbacks, {:.2?}",
        per_thread * THREADS,
        t.delivered,
        t.duplicates,
        t.corrupt,
        t.errors,
        flushes.load(Ordering::Relaxed),
        after.flushes - before.flushes,
        after.callbacks - before.callbacks,
        phase1
    );
    assert_eq!(t.delivered, per_thread * THREADS);
    assert_eq!((t.duplicates, t.corrupt, t.errors), (0, 0, 0));
    assert!((0..THREADS as usize).all(|i| t.exactly(i, per_thread)));
    // Every explicit flush reached the vendor (which also counts the crate's interval flushes).
    assert!(after.flushes - before.flushes >= flushes.load(Ordering::Relaxed));
    drop(t);

    // Phase 2: the session is dropped while the producers are still writing.
    let cap = 4_000_000;
    let tracker = Arc::new(Mutex::new(Tracker::new(cap)));
    let t2 = Arc::clone(&tracker);
    let session = ProfilingSession::new(&rp).unwrap();
    let buffer = attach(
        &session,
        session
            .create_buffer_with(
                BufferOptions::new(1 << 16).flush_interval(Duration::from_millis(3)),
                move |b| t2.lock().unwrap().take(b),
            )
            .unwrap(),
    );
    session.start().unwrap();
    drop(buffer); // phase 2 flushes from the interval thread only
    let accepted: Vec<AtomicU64> = (0..THREADS).map(|_| AtomicU64::new(0)).collect();
    std::thread::scope(|s| {
        for (t, count) in accepted.iter().enumerate() {
            s.spawn(move || {
                for seq in 0..cap {
                    match emit(id_of(t as u64, seq)) {
                        0 => count.store(seq + 1, Ordering::Release),
                        status => {
                            assert_eq!(status, common::SESSION_NOT_ACTIVE);
                            return;
                        }
                    }
                }
                panic!("the session was not dropped before {cap} records");
            });
        }
        let t0 = Instant::now();
        while accepted
            .iter()
            .map(|a| a.load(Ordering::Acquire))
            .sum::<u64>()
            < 200_000
        {
            assert!(t0.elapsed() < Duration::from_secs(120));
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(session); // mid-stream
    });
    let t = tracker.lock().unwrap();
    let accepted: Vec<u64> = accepted.iter().map(|a| a.load(Ordering::Acquire)).collect();
    let sum: u64 = accepted.iter().sum();
    println!(
        "phase 2 (session dropped mid-stream): {sum} records accepted ({accepted:?}), {} delivered, \
         {} duplicates, {} corrupt, {} errors",
        t.delivered, t.duplicates, t.corrupt, t.errors
    );
    assert_eq!(t.delivered, sum);
    assert_eq!((t.duplicates, t.corrupt, t.errors), (0, 0, 0));
    for (i, &n) in accepted.iter().enumerate() {
        assert!(
            t.exactly(i, n),
            "thread {i}: delivered ids are not exactly 0..{n}"
        );
    }
    assert_eq!(Buffer::orphan_batches(), 0);
    println!("total records checked: {}", per_thread * THREADS + sum);
}
