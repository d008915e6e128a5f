//! The activity tracer and the callback subscriber in-process on a real NVIDIA GPU (feature `nvidia-hw-tests`;
//! CUDA 13 host). Prints what it saw; each assertion names what failed.
//!
//! The tests run one at a time (one tracer and one subscriber per process).
#![cfg(feature = "nvidia-hw-tests")]

use gpu_tools_testing::kernels as common;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use common::STEP_PTX;
use gpu_tools::cuda::{Context, DeviceBuffer, Function};
use gpu_tools::cupti::activity::{
    Activity, ActivityKinds, ActivityTracer, Clock, CopyKind, FlushMode, SyncType,
};
use gpu_tools::cupti::callback::{ApiSite, CallbackEvent, Subscriber};
use gpu_tools::cupti::{ApiCbid, DriverCbid};

const MIB: usize = 1 << 20;

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Launches `step` over the buffer without waiting.
fn launch(step: &Function<'_>, buf: &DeviceBuffer<'_>) {
    let mut ptr = buf.device_ptr();
    let mut n = (buf.len() / 4) as u64;
    let mut params = [
        (&raw mut ptr).cast::<c_void>(),
        (&raw mut n).cast::<c_void>(),
    ];
    // SAFETY: `step` takes (u64 device pointer, u64 word count); the pointer addresses `n` words of `buf`.
    unsafe { step.launch((256, 1, 1), (256, 1, 1), &mut params) }.expect("cuLaunchKernel of step");
}

#[derive(Debug, Clone)]
struct KernelSeen {
    name: String,
    ctx: u32,
    stream: u32,
    corr: u32,
    start: u64,
    end: u64,
}

#[derive(Default)]
struct Seen {
    kernels: Vec<KernelSeen>,
    copies: Vec<(CopyKind, u64, u64, u64)>,
    sets: Vec<u64>,
    api: BTreeMap<u32, ApiCbid>,
    context_syncs: usize,
    errors: Vec<String>,
    batch_drops: u64,
}

#[test]
fn kernels_copies_and_sets_are_recorded_once_with_their_launch_calls() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _serial = serial();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let sink = Arc::clone(&seen);
    let before = Clock::Monotonic.now_ns();
    let tracer = ActivityTracer::builder()
        .kinds(
            ActivityKinds::CONCURRENT_KERNEL
                | ActivityKinds::MEMCPY
                | ActivityKinds::MEMSET
                | ActivityKinds::DRIVER
                | ActivityKinds::SYNCHRONIZATION,
        )
        .start(move |batch| {
            let mut s = sink.lock().unwrap();
            s.batch_drops += batch.dropped_records();
            for r in batch.records() {
                match r {
                    Ok(Activity::Kernel(k)) => s.kernels.push(KernelSeen {
                        name: k
                            .name()
                            .map(|n| n.to_string_lossy().into_owned())
                            .unwrap_or_default(),
                        ctx: k.context_id(),
                        stream: k.stream_id(),
                        corr: k.correlation_id(),
                        start: k.time().start,
                        end: k.time().end,
                    }),
                    Ok(Activity::Memcpy(m)) => {
                        s.copies
                            .push((m.copy_kind(), m.bytes(), m.time().start, m.time().end))
                    }
                    Ok(Activity::Memset(m)) => s.sets.push(m.bytes()),
                    Ok(Activity::Api(a)) => {
                        s.api.insert(a.correlation_id(), a.cbid());
                    }
                    Ok(Activity::Synchronization(y)) => {
                        if y.sync_type() == SyncType::ContextSynchronize {
                            s.context_syncs += 1;
                        }
                    }
                    Ok(_) => {}
                    Err(e) => s.errors.push(e.to_string()),
                }
            }
        })
        .expect("ActivityTracer::start on the GPU host");
    eprintln!(
        "CUPTI {} ({:?}), clock {:?}",
        tracer.cupti_version(),
        tracer.layout(),
        tracer.clock()
    );
    let launches = Arc::new(Mutex::new(BTreeSet::new()));
    let l = Arc::clone(&launches);
    let subscriber = Subscriber::new(move |event| {
        if let CallbackEvent::Api(call) = event {
            if call.site() == ApiSite::Enter {
                l.lock().unwrap().insert(call.correlation_id());
            }
        }
    })
    .expect("Subscriber::new on the GPU host");
    subscriber
        .enable_driver(DriverCbid::LAUNCH_KERNEL)
        .expect("enable cuLaunchKernel callbacks");

    const KERNELS: usize = 50;
    {
        let ctx = Context::primary(0).expect("primary context of device 0");
        let info = ctx.driver().device_info(0).expect("device info");
        eprintln!("device 0: {}", info.name);
        let module = ctx.load_module(STEP_PTX).expect("load step.ptx");
        let step = module.function(c"step").expect("step");
        let mut buf = ctx.alloc(4 * MIB).expect("alloc 4 MiB");
        let mut other = ctx.alloc(MIB).expect("alloc 1 MiB");
        buf.fill_u32(1).expect("memset 4 MiB");
        buf.copy_from_host(&vec![3u8; 2 * MIB]).expect("HtoD 2 MiB");
        for _ in 0..KERNELS {
            launch(&step, &buf);
        }
        ctx.synchronize().expect("cuCtxSynchronize");
        other.copy_from_device(&buf).expect("DtoD 1 MiB");
        let mut back = vec![0u8; 3 * MIB];
        buf.copy_to_host(&mut back).expect("DtoH 3 MiB");
        // The last work before the tracer stops: a kernel and a copy right before stop.
        launch(&step, &buf);
        other.copy_to_host(&mut back[..MIB]).expect("DtoH 1 MiB");
        ctx.synchronize().expect("cuCtxSynchronize");
    }
    tracer
        .flush_all(FlushMode::Completed)
        .expect("cuActivityFlushAll");
    let report = tracer.stop().expect("stop");
    subscriber.unsubscribe().expect("unsubscribe");
    let after = Clock::Monotonic.now_ns();
    let s = seen.lock().unwrap();
    eprintln!(
        "{} kernels, {} copies {:?}, {} sets {:?}, {} API records, {} context syncs; report {:?}",
        s.kernels.len(),
        s.copies.len(),
        s.copies.iter().map(|c| (c.0, c.1)).collect::<Vec<_>>(),
        s.sets.len(),
        s.sets,
        s.api.len(),
        s.context_syncs,
        report
    );
    assert!(s.errors.is_empty(), "decoding errors: {:?}", s.errors);
    assert_eq!(
        report.stats.dropped_records, 0,
        "drops: {:?}",
        report.dropped
    );
    assert_eq!(s.batch_drops, 0);
    assert_eq!(report.panic, None);
    assert_eq!(
        s.kernels.len(),
        KERNELS + 1,
        "one record per launch, the last one included"
    );
    let launches = launches.lock().unwrap();
    assert_eq!(
        launches.len(),
        KERNELS + 1,
        "one cuLaunchKernel callback per launch"
    );
    let mut per_stream: BTreeMap<(u32, u32), Vec<&KernelSeen>> = BTreeMap::new();
    for k in &s.kernels {
        assert_eq!(k.name, "step");
        assert!(k.end > k.start, "kernel without a positive duration: {k:?}");
        assert!(
            k.start >= before && k.end <= after,
            "kernel outside [{before}, {after}] on the monotonic clock: {k:?}"
        );
        assert!(
            launches.contains(&k.corr),
            "no launch callback with correlation {}: {k:?}",
            k.corr
        );
        assert_eq!(
            s.api.get(&k.corr),
            Some(&ApiCbid::Driver(DriverCbid::LAUNCH_KERNEL)),
            "the API record of kernel {k:?}"
        );
        per_stream.entry((k.ctx, k.stream)).or_default().push(k);
    }
    for (stream, ks) in &mut per_stream {
        ks.sort_by_key(|k| k.start);
        for w in ks.windows(2) {
            assert!(
                w[1].start >= w[0].end,
                "kernels overlap on stream {stream:?}: {w:?}"
            );
        }
    }
    let mut copies: Vec<(CopyKind, u64)> = s.copies.iter().map(|c| (c.0, c.1)).collect();
    copies.sort_by_key(|c| (format!("{:?}", c.0), c.1));
    let mib = MIB as u64;
    let mut expected = vec![
        (CopyKind::HtoD, 2 * mib),
        (CopyKind::DtoD, mib),
        (CopyKind::DtoH, 3 * mib),
        (CopyKind::DtoH, mib),
    ];
    expected.sort_by_key(|c| (format!("{:?}", c.0), c.1));
    assert_eq!(copies, expected, "copies by direction and size");
    for c in &s.copies {
        assert!(c.3 > c.2, "copy without a positive duration: {c:?}");
    }
    assert_eq!(s.sets, vec![4 * mib]);
    assert!(
        s.context_syncs >= 2,
        "{} context synchronisations",
        s.context_syncs
    );
}

#[test]
fn a_one_buffer_pool_with_a_slow_consumer_reports_drops() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _serial = serial();
    let flags = Arc::new(Mutex::new(0u64));
    let f = Arc::clone(&flags);
    let tracer = ActivityTracer::builder()
        .kinds(ActivityKinds::CONCURRENT_KERNEL)
        .buffer_size(4096)
        .max_buffers(1)
        .start(move |batch| {
            *f.lock().unwrap() += batch.dropped_records();
            // A slow consumer: the one buffer stays lent meanwhile.
            std::thread::sleep(Duration::from_millis(20));
        })
        .expect("tracer");
    {
        let ctx = Context::primary(0).expect("primary context");
        let module = ctx.load_module(STEP_PTX).expect("load step.ptx");
        let step = module.function(c"step").expect("step");
        let buf = ctx.alloc(MIB).expect("alloc");
        for _ in 0..5000 {
            launch(&step, &buf);
        }
        ctx.synchronize().expect("synchronize");
    }
    let report = tracer.stop().expect("stop");
    let flagged = *flags.lock().unwrap();
    eprintln!(
        "5000 launches, 4 KiB buffers, at most 1: {} records delivered, {} dropped ({:?}), {} flagged in batches, {} requests refused",
        report.stats.records,
        report.stats.dropped_records,
        report.dropped,
        flagged,
        report.stats.buffers_refused
    );
    assert!(
        report.stats.dropped_records > 0,
        "a one-buffer pool under 5000 launches dropped nothing"
    );
    assert_eq!(
        report.stats.records + report.stats.dropped_records,
        5000,
        "every kernel is either delivered or counted as dropped"
    );
    assert_eq!(
        report.dropped.iter().map(|d| d.count).sum::<u64>(),
        report.stats.dropped_records
    );
    assert!(flagged <= report.stats.dropped_records);
}
