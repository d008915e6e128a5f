//! The rocprofiler safe layer against the C double of the library (`gpu-tools-testing/doubles/rocprofiler_double.c`).
#![cfg(feature = "rocprofiler")]

use crate::common;

use std::mem::offset_of;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{double, init, serial};
use gpu_tools::Error;
use gpu_tools::rocprofiler::{
    Batch, Buffer, BufferOptions, CaptureMode, CodeObjectCapture, CounterReading,
    DeviceProfilingSession, Filter, FilterProperty, Phase, ProfilerError, ProfilingSession, Record,
    RecordError, Rocprofiler, RocprofilerError, TraceDomain,
};
use gpu_tools::sys::rocprofiler as sys;

const DISPATCH: u32 = sys::ROCPROFILER_DISPATCH_TIMESTAMPS_COLLECTION;

/// What a callback saw, owned.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Profiler {
        id: u64,
        kernel: u64,
        begin: u64,
        end: u64,
        counters: Vec<(u64, f64)>,
    },
    Tracer {
        id: u64,
        name: Option<String>,
        phase: Phase,
        domain: TraceDomain,
    },
    Att {
        id: u64,
        writer: u64,
    },
    Pc {
        id: u64,
        pc: u64,
        se: u32,
    },
    Spm {
        id: u64,
        se1: [u16; 32],
    },
    Sampler {
        id: u64,
        values: Vec<(u32, f64)>,
    },
    Unknown {
        kind: u32,
        id: u64,
    },
    Error(RecordError),
}

fn own(batch: &Batch<'_>) -> Vec<Seen> {
    batch
        .records()
        .map(|r| match r {
            Ok(Record::Profiler(p)) => Seen::Profiler {
                id: p.id(),
                kernel: p.kernel_id(),
                begin: p.timestamps().begin,
                end: p.timestamps().end,
                counters: p
                    .counters()
                    .iter()
                    .map(|c| (c.counter_id, c.value))
                    .collect(),
            },
            Ok(Record::Tracer(t)) => Seen::Tracer {
                id: t.id(),
                name: t.name().map(|n| n.to_string_lossy().into_owned()),
                phase: t.phase(),
                domain: t.domain(),
            },
            Ok(Record::Att(a)) => Seen::Att {
                id: a.id(),
                writer: a.writer_id(),
            },
            Ok(Record::PcSample(p)) => Seen::Pc {
                id: p.id(),
                pc: p.pc(),
                se: p.shader_engine(),
            },
            Ok(Record::Spm(s)) => Seen::Spm {
                id: s.id(),
                se1: s.shader_engine(1).unwrap(),
            },
            Ok(Record::CountersSampler(s)) => Seen::Sampler {
                id: s.id(),
                values: s
                    .counters()
                    .iter()
                    .map(|c| (c.counter_type, c.value))
                    .collect(),
            },
            Ok(Record::Unknown { kind, id }) => Seen::Unknown { kind, id },
            Ok(other) => panic!("unexpected record {other:?}"),
            Err(e) => Seen::Error(e),
        })
        .collect()
}

type Sink = Arc<Mutex<Vec<Seen>>>;

fn sink() -> (Sink, impl for<'b> FnMut(&Batch<'b>) + Send + 'static) {
    let seen: Sink = Arc::default();
    let s2 = Arc::clone(&seen);
    (seen, move |batch: &Batch<'_>| {
        s2.lock().unwrap().extend(own(batch))
    })
}

fn taken(sink: &Sink) -> Vec<Seen> {
    std::mem::take(&mut *sink.lock().unwrap())
}

/// Sends dispatch timestamps to `buffer` and starts the session.
fn record_timestamps(session: &ProfilingSession<'_>, buffer: &Buffer<'_>) {
    session
        .add_filter(Filter::dispatch_timestamps(), buffer)
        .unwrap();
    session.start().unwrap();
}

fn profiler_error(e: Error) -> ProfilerError {
    match e {
        Error::RocprofilerUsage(p) => p,
        other => panic!("expected a ProfilerError, got {other:?}"),
    }
}

fn vendor_error(e: Error) -> RocprofilerError {
    match e {
        Error::Rocprofiler(r) => r,
        other => panic!("expected a RocprofilerError, got {other:?}"),
    }
}

#[test]
fn thread_safety_is_as_designed() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Rocprofiler>();
    send_sync::<ProfilingSession<'static>>();
    send_sync::<gpu_tools::rocprofiler::Buffer<'static>>();
    send_sync::<DeviceProfilingSession<'static>>();
    send_sync::<CodeObjectCapture<'static>>();
}

#[test]
fn initialize_without_a_driver_is_a_typed_error_and_never_reaches_the_vendor() {
    let _s = serial();
    if gpu_tools::rocprofiler::amd_gpus().is_ok() {
        eprintln!("AMD driver present: nothing to check on this host");
        return;
    }
    let before = double().stats().initialize;
    let err = Rocprofiler::initialize(double().lib).unwrap_err();
    assert!(matches!(profiler_error(err), ProfilerError::NoAmdDriver(_)));
    assert_eq!(
        double().stats().initialize,
        before,
        "vendor initialise must not be called"
    );
}

#[test]
fn one_guard_per_process_and_finalize_on_drop() {
    let _s = serial();
    let before = double().stats();
    let rp = init();
    // SAFETY: the double never aborts.
    let second = unsafe { Rocprofiler::initialize_unchecked(double().lib) }.unwrap_err();
    assert_eq!(profiler_error(second), ProfilerError::AlreadyInitialized);
    drop(rp);
    let after = double().stats();
    assert_eq!(after.initialize, before.initialize + 1);
    assert_eq!(after.finalize, before.finalize + 1);
    drop(init());
    // A vendor failure of initialise leaves the crate able to try again.
    double().fail_next("rocprofiler_initialize", sys::ROCPROFILER_STATUS_ERROR);
    // SAFETY: the double never aborts.
    let failed = unsafe { Rocprofiler::initialize_unchecked(double().lib) }.unwrap_err();
    assert_eq!(vendor_error(failed), RocprofilerError::Error);
    drop(init());
}

#[test]
fn dispatch_timestamps_and_counters_arrive_decoded() {
    let _s = serial();
    let rp = init();
    let session = ProfilingSession::new(&rp).unwrap();
    let (seen, cb) = sink();
    let buffer = session.create_buffer(4096, cb).unwrap();
    session
        .add_filter(
            Filter::dispatch_timestamps()
                .with_property(FilterProperty::KernelNames(vec!["saxpy.*".into()])),
            &buffer,
        )
        .unwrap();
    session.start().unwrap();
    assert!(session.is_active());
    assert_eq!(double().emit_profiler(DISPATCH, 1, 77, &[]), 0);
    assert_eq!(
        double().emit_profiler(DISPATCH, 2, 78, &[(5, 1.5), (6, -2.25)]),
        0
    );
    buffer.flush().unwrap();
    assert_eq!(
        taken(&seen),
        vec![
            Seen::Profiler {
                id: 1,
                kernel: 77,
                begin: 1,
                end: 101,
                counters: vec![]
            },
            Seen::Profiler {
                id: 2,
                kernel: 78,
                begin: 2,
                end: 102,
                counters: vec![(5, 1.5), (6, -2.25)]
            },
        ]
    );
    session.terminate().unwrap();
    assert!(!session.is_active());
    assert_eq!(buffer.stats().batches, 1);
    assert_eq!(buffer.stats().bytes, 2 * 176);
}

#[test]
fn tracer_records_carry_phase_and_name() {
    let _s = serial();
    let rp = init();
    let session = ProfilingSession::new(&rp).unwrap();
    let (seen, cb) = sink();
    let buffer = session.create_buffer(4096, cb).unwrap();
    session
        .add_filter(
            Filter::api_trace([TraceDomain::HipApi])
                .with_property(FilterProperty::HipFunctions(vec!["hipLaunchKernel".into()])),
            &buffer,
        )
        .unwrap();
    session.start().unwrap();
    // An odd-length name leaves later variable data unaligned; the decoder reads it anyway.
    assert_eq!(
        double().emit_tracer(10, "hipLaunchKernel", sys::ROCPROFILER_PHASE_ENTER),
        0
    );
    assert_eq!(
        double().emit_tracer(11, "hipMemcpy", sys::ROCPROFILER_PHASE_EXIT),
        0
    );
    session.terminate().unwrap();
    assert_eq!(
        taken(&seen),
        vec![
            Seen::Tracer {
                id: 10,
                name: Some("hipLaunchKernel".into()),
                phase: Phase::Enter,
                domain: TraceDomain::HipApi
            },
            Seen::Tracer {
                id: 11,
                name: Some("hipMemcpy".into()),
                phase: Phase::Exit,
                domain: TraceDomain::HipApi
            },
        ]
    );
}

#[test]
fn every_record_kind_is_decoded_with_its_own_size() {
    let _s = serial();
    let rp = init();
    let session = ProfilingSession::new(&rp).unwrap();
    let (seen, cb) = sink();
    let buffer = session.create_buffer(8192, cb).unwrap();
    record_timestamps(&session, &buffer);
    let d = double();

    let mut pc = sys::rocprofiler_record_pc_sample_t::default();
    pc.header.kind = sys::ROCPROFILER_PC_SAMPLING_RECORD;
    pc.header.id.handle = 20;
    pc.pc_sample.pc = 0xdead_beef;
    pc.pc_sample.se = 3;
    assert_eq!(d.emit(DISPATCH, &pc, &[], 0), 0);

    let mut spm = sys::rocprofiler_record_spm_t::default();
    spm.header.kind = sys::ROCPROFILER_SPM_RECORD;
    spm.header.id.handle = 21;
    for (i, c) in spm.shader_engine_data[1]
        .counters_data
        .iter_mut()
        .enumerate()
    {
        c.value = i as u16 * 3;
    }
    assert_eq!(d.emit(DISPATCH, &spm, &[], 0), 0);

    let mut att = sys::rocprofiler_record_att_tracer_t::default();
    att.header.kind = sys::ROCPROFILER_ATT_TRACER_RECORD;
    att.header.id.handle = 22;
    att.writer_id = 99;
    assert_eq!(d.emit(DISPATCH, &att, &[], 0), 0);

    let mut sampler = sys::rocprofiler_record_counters_sampler_t::default();
    sampler.header.kind = sys::ROCPROFILER_COUNTERS_SAMPLER_RECORD;
    sampler.header.id.handle = 23;
    sampler.num_counters = 2;
    let mut values = Vec::new();
    for (t, v) in [(0u32, 10.5f64), (1, 20.25)] {
        values.extend_from_slice(&(t as u64).to_ne_bytes());
        values.extend_from_slice(&v.to_ne_bytes());
    }
    assert_eq!(
        d.emit(
            DISPATCH,
            &sampler,
            &values,
            offset_of!(sys::rocprofiler_record_counters_sampler_t, counters)
        ),
        0
    );
    assert_eq!(d.emit_profiler(DISPATCH, 24, 1, &[(1, 4.0)]), 0);
    buffer.flush().unwrap();

    let spm_values: [u16; 32] = std::array::from_fn(|i| i as u16 * 3);
    assert_eq!(
        taken(&seen),
        vec![
            Seen::Pc {
                id: 20,
                pc: 0xdead_beef,
                se: 3
            },
            Seen::Spm {
                id: 21,
                se1: spm_values
            },
            Seen::Att { id: 22, writer: 99 },
            Seen::Sampler {
                id: 23,
                values: vec![(0, 10.5), (1, 20.25)]
            },
            Seen::Profiler {
                id: 24,
                kernel: 1,
                begin: 24,
                end: 124,
                counters: vec![(1, 4.0)]
            },
        ]
    );
    assert_eq!(buffer.stats().bytes, (56 + 288 + 176 + 40 + 176) as u64);
    session.terminate().unwrap();
}

#[test]
fn a_second_active_session_is_refused_by_the_crate() {
    let _s = serial();
    let rp = init();
    let a = ProfilingSession::new(&rp).unwrap();
    let b = ProfilingSession::new(&rp).unwrap();
    let ba = a.create_buffer(4096, |_| {}).unwrap();
    let bb = b.create_buffer(4096, |_| {}).unwrap();
    a.add_filter(Filter::dispatch_timestamps(), &ba).unwrap();
    b.add_filter(Filter::dispatch_timestamps(), &bb).unwrap();
    a.start().unwrap();
    let flushes = double().stats().flushes;
    let err = profiler_error(b.start().unwrap_err());
    assert_eq!(err, ProfilerError::SessionAlreadyActive { active: a.id() });
    assert_eq!(double().stats().active, a.id(), "the vendor was not asked");
    assert_eq!(double().stats().flushes, flushes);
    assert_eq!(
        profiler_error(a.start().unwrap_err()),
        ProfilerError::SessionAlreadyActive { active: a.id() }
    );
    a.terminate().unwrap();
    b.start().unwrap();
    assert_eq!(double().stats().active, b.id());
    drop(bb);
    drop(b);
    assert_eq!(
        double().stats().active,
        0,
        "dropping an active session ends it"
    );
}

#[test]
fn misuse_is_a_typed_error_before_any_vendor_call() {
    let _s = serial();
    let rp = init();
    let a = ProfilingSession::new(&rp).unwrap();
    let b = ProfilingSession::new(&rp).unwrap();
    let small = profiler_error(a.create_buffer(100, |_| {}).unwrap_err());
    assert_eq!(
        small,
        ProfilerError::BufferTooSmall {
            size: 100,
            min: 288
        }
    );
    let zero = a.create_buffer_with(
        BufferOptions::new(4096).flush_interval(Duration::ZERO),
        |_| {},
    );
    assert_eq!(
        profiler_error(zero.unwrap_err()),
        ProfilerError::ZeroFlushInterval
    );
    let ba = a.create_buffer(4096, |_| {}).unwrap();
    let bb = b.create_buffer(4096, |_| {}).unwrap();
    assert_eq!(
        profiler_error(a.start().unwrap_err()),
        ProfilerError::NoFilter
    );
    assert_eq!(
        profiler_error(
            a.add_filter(Filter::dispatch_timestamps(), &bb)
                .unwrap_err()
        ),
        ProfilerError::ForeignBuffer
    );
    a.add_filter(Filter::counters(["SQ_WAVES"]), &ba).unwrap();
    assert_eq!(
        profiler_error(
            a.add_filter(Filter::counters(["GRBM_COUNT"]), &ba)
                .unwrap_err()
        ),
        ProfilerError::DuplicateFilter("counters")
    );
    assert_eq!(
        profiler_error(a.terminate().unwrap_err()),
        ProfilerError::SessionNotActive
    );
    a.start().unwrap();
    assert_eq!(
        profiler_error(
            a.add_filter(Filter::dispatch_timestamps(), &ba)
                .unwrap_err()
        ),
        ProfilerError::SessionStarted
    );
    a.terminate().unwrap();
}

#[test]
fn injected_vendor_failures_are_typed_errors() {
    let _s = serial();
    let rp = init();
    let d = double();
    d.fail_next("rocprofiler_create_session", sys::ROCPROFILER_STATUS_ERROR);
    assert_eq!(
        vendor_error(ProfilingSession::new(&rp).unwrap_err()),
        RocprofilerError::Error
    );
    let session = ProfilingSession::new(&rp).unwrap();
    d.fail_next(
        "rocprofiler_create_buffer",
        sys::ROCPROFILER_STATUS_ERROR_SESSION_NOT_FOUND,
    );
    assert_eq!(
        vendor_error(session.create_buffer(4096, |_| {}).unwrap_err()),
        RocprofilerError::SessionNotFound
    );
    let (seen, cb) = sink();
    let buffer = session.create_buffer(4096, cb).unwrap();
    d.fail_next(
        "rocprofiler_create_filter",
        sys::ROCPROFILER_STATUS_ERROR_FILTER_DATA_CORRUPTED,
    );
    assert_eq!(
        vendor_error(
            session
                .add_filter(Filter::dispatch_timestamps(), &buffer)
                .unwrap_err()
        ),
        RocprofilerError::FilterDataCorrupted
    );
    d.fail_next(
        "rocprofiler_set_filter_buffer",
        sys::ROCPROFILER_STATUS_ERROR_BUFFER_NOT_FOUND,
    );
    assert_eq!(
        vendor_error(
            session
                .add_filter(Filter::dispatch_timestamps(), &buffer)
                .unwrap_err()
        ),
        RocprofilerError::BufferNotFound
    );
    // Neither failure left a filter behind: the same kind can still be added.
    session
        .add_filter(Filter::dispatch_timestamps(), &buffer)
        .unwrap();
    d.fail_next(
        "rocprofiler_start_session",
        sys::ROCPROFILER_STATUS_ERROR_HAS_ACTIVE_SESSION,
    );
    assert_eq!(
        vendor_error(session.start().unwrap_err()),
        RocprofilerError::HasActiveSession
    );
    assert!(!session.is_active());
    session.start().unwrap();
    assert_eq!(d.emit_profiler(DISPATCH, 5, 5, &[]), 0);
    d.fail_next(
        "rocprofiler_flush_data",
        sys::ROCPROFILER_STATUS_ERROR_CORRUPTED_SESSION_BUFFER,
    );
    let flush = vendor_error(buffer.flush().unwrap_err());
    assert_eq!(flush, RocprofilerError::CorruptedSessionBuffer);
    assert!(
        flush
            .to_string()
            .starts_with("ROCPROFILER_STATUS_ERROR_CORRUPTED_SESSION_BUFFER: "),
        "{flush}"
    );
    assert!(!flush.to_string().ends_with('\n'));
    d.fail_next(
        "rocprofiler_terminate_session",
        sys::ROCPROFILER_STATUS_ERROR,
    );
    assert_eq!(
        vendor_error(session.terminate().unwrap_err()),
        RocprofilerError::Error
    );
    assert!(
        session.is_active(),
        "a failed terminate leaves the session active"
    );
    session.terminate().unwrap();
    assert_eq!(
        taken(&seen).len(),
        1,
        "the record reached the callback once"
    );
}

#[test]
fn corrupted_records_are_reported_not_read_blindly() {
    let _s = serial();
    let rp = init();
    let session = ProfilingSession::new(&rp).unwrap();
    let (seen, cb) = sink();
    let buffer = session.create_buffer(4096, cb).unwrap();
    record_timestamps(&session, &buffer);
    let d = double();

    // A pointer outside the buffer: that record is an error, the walk goes on.
    d.corrupt_next(2);
    assert_eq!(d.emit_profiler(DISPATCH, 1, 1, &[(1, 1.0)]), 0);
    assert_eq!(d.emit_profiler(DISPATCH, 2, 1, &[(2, 2.0)]), 0);
    buffer.flush().unwrap();
    let got = taken(&seen);
    assert!(
        matches!(
            &got[0],
            Seen::Error(RecordError::PointerOutOfBuffer {
                id: 1,
                field: "counters",
                offset: 0
            })
        ),
        "{got:?}"
    );
    assert_eq!(
        got[1],
        Seen::Profiler {
            id: 2,
            kernel: 1,
            begin: 2,
            end: 102,
            counters: vec![(2, 2.0)]
        }
    );

    // An unknown kind: reported, and the walk stops (its size is unknown).
    assert_eq!(d.emit_profiler(DISPATCH, 3, 1, &[]), 0);
    d.corrupt_next(1);
    assert_eq!(d.emit_profiler(DISPATCH, 4, 1, &[]), 0);
    assert_eq!(d.emit_profiler(DISPATCH, 5, 1, &[]), 0);
    buffer.flush().unwrap();
    let got = taken(&seen);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(matches!(got[0], Seen::Profiler { id: 3, .. }));
    assert_eq!(got[1], Seen::Unknown { kind: 0x77, id: 4 });

    // A hand-over that ends inside a record.
    assert_eq!(d.emit_profiler(DISPATCH, 6, 1, &[]), 0);
    assert_eq!(d.emit_profiler(DISPATCH, 7, 1, &[]), 0);
    d.corrupt_next(3);
    buffer.flush().unwrap();
    let got = taken(&seen);
    assert!(matches!(got[0], Seen::Profiler { id: 6, .. }));
    assert_eq!(
        got[1],
        Seen::Error(RecordError::Truncated {
            offset: 176,
            kind: Some(0)
        })
    );
    session.terminate().unwrap();
}

#[test]
fn full_halves_swap_and_oversized_data_stays_readable() {
    let _s = serial();
    let rp = init();
    let session = ProfilingSession::new(&rp).unwrap();
    let (seen, cb) = sink();
    // Two records of one counter fill a half exactly: (176 + 16) * 2.
    let buffer = session.create_buffer(384, cb).unwrap();
    record_timestamps(&session, &buffer);
    let d = double();
    for id in 0..5 {
        assert_eq!(d.emit_profiler(DISPATCH, id, 9, &[(id, id as f64)]), 0);
    }
    buffer.flush().unwrap();
    let got = taken(&seen);
    let ids: Vec<u64> = got
        .iter()
        .map(|s| match s {
            Seen::Profiler { id, counters, .. } => {
                assert_eq!(counters, &vec![(*id, *id as f64)]);
                *id
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ids, vec![0, 1, 2, 3, 4]);
    assert_eq!(
        buffer.stats().batches,
        3,
        "halves of two, two, then one record"
    );

    // 20 counters (320 bytes) do not fit next to a record (384 - 176): the vendor leaves them in the
    // producer's memory and hands the half over at once.
    let big: Vec<(u64, f64)> = (0..20).map(|i| (i, i as f64 * 0.5)).collect();
    assert_eq!(d.emit_profiler(DISPATCH, 50, 9, &big), 0);
    let got = taken(&seen);
    assert_eq!(
        got,
        vec![Seen::Profiler {
            id: 50,
            kernel: 9,
            begin: 50,
            end: 150,
            counters: big
        }]
    );
    session.terminate().unwrap();
}

#[test]
fn a_panicking_callback_is_caught_and_reported() {
    let _s = serial();
    let rp = init();
    let session = ProfilingSession::new(&rp).unwrap();
    let calls = Arc::new(Mutex::new(0u32));
    let c2 = Arc::clone(&calls);
    let buffer = session
        .create_buffer(4096, move |_batch| {
            let mut n = c2.lock().unwrap();
            *n += 1;
            if *n == 1 {
                drop(n);
                panic!("boom in callback");
            }
        })
        .unwrap();
    record_timestamps(&session, &buffer);
    assert_eq!(double().emit_profiler(DISPATCH, 1, 1, &[]), 0);
    let err = profiler_error(buffer.flush().unwrap_err());
    assert_eq!(
        err,
        ProfilerError::CallbackPanicked("boom in callback".into())
    );
    assert_eq!(double().emit_profiler(DISPATCH, 2, 1, &[]), 0);
    buffer.flush().unwrap();
    assert_eq!(
        *calls.lock().unwrap(),
        2,
        "batches keep coming after a panic"
    );
    assert_eq!(buffer.stats().callback_panics, 1);
    session.terminate().unwrap();
}

#[test]
fn the_crate_flushes_at_the_interval() {
    let _s = serial();
    let rp = init();
    let session = ProfilingSession::new(&rp).unwrap();
    let (seen, cb) = sink();
    let buffer = session
        .create_buffer_with(
            BufferOptions::new(1 << 16).flush_interval(Duration::from_millis(5)),
            cb,
        )
        .unwrap();
    record_timestamps(&session, &buffer);
    assert_eq!(double().emit_profiler(DISPATCH, 1, 1, &[]), 0);
    let t0 = Instant::now();
    while seen.lock().unwrap().is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(5), "no interval flush");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(taken(&seen).len(), 1);
    session.terminate().unwrap();
}

#[test]
fn dropping_a_session_delivers_every_record_once() {
    let _s = serial();
    let rp = init();
    let session = ProfilingSession::new(&rp).unwrap();
    let (seen, cb) = sink();
    let buffer = session.create_buffer(4096, cb).unwrap();
    record_timestamps(&session, &buffer);
    for id in 0..1000 {
        assert_eq!(double().emit_profiler(DISPATCH, id, 1, &[(id, 1.0)]), 0);
    }
    let destroyed = double().stats().destroyed;
    drop(buffer);
    drop(session);
    assert_eq!(double().stats().destroyed, destroyed + 1);
    assert_eq!(
        double().emit_profiler(DISPATCH, 9999, 1, &[]),
        common::SESSION_NOT_ACTIVE
    );
    let ids: Vec<u64> = taken(&seen)
        .iter()
        .map(|s| match s {
            Seen::Profiler { id, .. } => *id,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ids, (0..1000).collect::<Vec<_>>());
}

#[test]
fn device_profiling_polls_owned_values_and_reports_unknown_counters() {
    let _s = serial();
    let rp = init();
    let long = "X".repeat(64);
    let err = profiler_error(DeviceProfilingSession::new(&rp, [long.as_str()], 0, 0).unwrap_err());
    assert_eq!(
        err,
        ProfilerError::CounterNameTooLong {
            name: long.clone(),
            len: 64
        }
    );
    let gpu = DeviceProfilingSession::new(&rp, ["SQ_WAVES"], 0, 3).unwrap_err();
    assert_eq!(vendor_error(gpu), RocprofilerError::AgentNotFound);
    let mut dev =
        DeviceProfilingSession::new(&rp, ["SQ_WAVES", "NO_SUCH_COUNTER", "GRBM_COUNT"], 0, 0)
            .unwrap();
    assert_eq!(
        profiler_error(dev.poll().unwrap_err()),
        ProfilerError::NotStarted
    );
    dev.start().unwrap();
    let first = dev.poll().unwrap();
    let readings: Vec<_> = first.iter().map(|s| (s.name.as_str(), s.reading)).collect();
    assert_eq!(
        readings,
        vec![
            ("SQ_WAVES", CounterReading::Value(1000.0)),
            ("NO_SUCH_COUNTER", CounterReading::Unknown),
            ("GRBM_COUNT", CounterReading::Value(1002.0)),
        ]
    );
    let second = dev.poll().unwrap();
    assert_eq!(second[0].reading, CounterReading::Value(2000.0));
    dev.stop().unwrap();
    assert_eq!(
        profiler_error(dev.stop().unwrap_err()),
        ProfilerError::NotStarted
    );
}

#[test]
fn code_object_capture_results_borrow_the_capture() {
    let _s = serial();
    let rp = init();
    let mut capture = CodeObjectCapture::new(&rp, CaptureMode::CopyMemory, 42).unwrap();
    capture.start().unwrap();
    assert_eq!(
        profiler_error(capture.start().unwrap_err()),
        ProfilerError::AlreadyStarted
    );
    capture.stop().unwrap();
    {
        let objects = capture.get().unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects.userdata(), 42);
        let first = objects.get(0).unwrap();
        assert_eq!(
            first.uri().unwrap().to_str().unwrap(),
            "file:///opt/app/kernels.hsaco"
        );
        assert_eq!(&first.data().unwrap()[..4], b"\x7fELF");
        assert_eq!(first.mem_size(), 64);
        let second = objects.get(1).unwrap();
        assert!(
            second
                .uri()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("memory://")
        );
        assert_eq!(second.att_marker_id(), 2);
        assert!(objects.get(2).is_none());
    }
    // The next get frees the previous result in the vendor; the borrow above ended first.
    assert_eq!(capture.get().unwrap().iter().count(), 2);
    double().fail_next(
        "rocprofiler_codeobj_capture_get",
        sys::ROCPROFILER_STATUS_ERROR_INVALID_ARGUMENTS,
    );
    assert_eq!(
        vendor_error(capture.get().unwrap_err()),
        RocprofilerError::InvalidArguments
    );

    // Symbols only: no bytes are copied.
    let mut symbols = CodeObjectCapture::new(&rp, CaptureMode::SymbolsOnly, 7).unwrap();
    let objects = symbols.get().unwrap();
    assert!(objects.iter().all(|o| o.data().is_none()));
}

#[test]
fn counters_are_listed_and_timestamps_advance() {
    let _s = serial();
    let rp = init();
    let counters = rp.counters().unwrap();
    let names: Vec<&str> = counters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["SQ_WAVES", "SQ_INSTS_VALU", "GRBM_COUNT", "GRBM_GUI_ACTIVE"]
    );
    assert_eq!(counters[2].block_name, "GRBM");
    assert_eq!(counters[0].gpu_name, "gfx942");
    let t1 = rp.timestamp().unwrap();
    let t2 = rp.timestamp().unwrap();
    assert!(t2 >= t1 && t1 > 0);
    double().fail_next(
        "rocprofiler_iterate_counters",
        sys::ROCPROFILER_STATUS_ERROR_NOT_INITIALIZED,
    );
    assert_eq!(
        vendor_error(rp.counters().unwrap_err()),
        RocprofilerError::NotInitialized
    );
}

#[test]
fn device_profiling_reads_through_the_vendor_neutral_trait() {
    use gpu_tools::counters::{DeviceCounters, SampleClock};
    let _s = serial();
    let rp = init();
    let mut dev = DeviceProfilingSession::new(&rp, ["SQ_WAVES", "NO_SUCH_COUNTER"], 0, 0).unwrap();
    let mut out = Vec::new();
    assert_eq!(
        profiler_error(dev.read(std::time::Duration::ZERO, &mut out).unwrap_err()),
        ProfilerError::NotStarted
    );
    dev.start().unwrap();
    {
        let sampler: &mut dyn DeviceCounters = &mut dev;
        assert_eq!(sampler.clock(), SampleClock::HostMonotonic);
        assert_eq!(sampler.counters()[1].name, "NO_SUCH_COUNTER");
        assert_eq!(sampler.device().index, 0);
        let interval = std::time::Duration::from_millis(20);
        let status = sampler.read(interval, &mut out).unwrap();
        assert_eq!((status.samples, status.dropped), (1, 0));
        sampler.read(interval, &mut out).unwrap();
    }
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].values[0], 1000.0);
    assert!(out[0].values[1].is_nan(), "an unknown counter reads NaN");
    assert_eq!(out[1].start_ns, out[0].end_ns, "samples tile the time");
    assert!(
        out[1].duration() >= std::time::Duration::from_millis(20),
        "each read waits out its interval"
    );
    dev.stop().unwrap();
}
