//! The tracer's contract: kinds enabled with it, one tracer per process, options checked first, a refused kind, a
//! failed flush, calls from inside the closure, the clocks, the flush period, the library path, Send and Sync.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::start;
use crate::common::{double, serial};
use gpu_tools::Error;
use gpu_tools::cupti::TracingError;
use gpu_tools::cupti::activity::{ActivityKind, ActivityKinds, ActivityTracer, Clock, FlushMode};

#[test]
fn kinds_are_enabled_and_disabled_with_the_tracer() {
    let _serial = serial();
    let d = double();
    let kinds = ActivityKinds::CONCURRENT_KERNEL | ActivityKinds::MEMSET;
    let (tracer, _sink) = start(kinds);
    assert_eq!(d.stats().enabled_mask, kinds.bits());
    assert_eq!(tracer.kinds(), kinds);
    // A kind not enabled is not recorded.
    assert_eq!(d.memcpy(1, false, 1, 1, 2, 0, 1), -1);
    tracer.stop().unwrap();
    assert_eq!(d.stats().enabled_mask, 0);
}

#[test]
fn one_tracer_per_process() {
    let _serial = serial();
    let (tracer, _sink) = start(ActivityKinds::MEMSET);
    let second = ActivityTracer::builder()
        .kinds(ActivityKinds::MEMSET)
        .start(|_| {});
    assert!(
        matches!(second, Err(Error::Tracing(TracingError::TracerActive))),
        "{second:?}"
    );
    tracer.stop().unwrap();
    // Free again after the stop.
    let (again, _sink) = start(ActivityKinds::MEMSET);
    again.stop().unwrap();
}

#[test]
fn options_are_checked_before_cupti_is_called() {
    let _serial = serial();
    let d = double();
    let before = d.stats();
    let no_kinds = ActivityTracer::builder()
        .kinds(ActivityKinds::empty())
        .start(|_| {});
    assert!(matches!(
        no_kinds,
        Err(Error::Tracing(TracingError::NoKinds))
    ));
    let no_buffers = ActivityTracer::builder().max_buffers(0).start(|_| {});
    assert!(matches!(
        no_buffers,
        Err(Error::Tracing(TracingError::NoBuffers))
    ));
    for size in [64, 4097] {
        let bad = ActivityTracer::builder().buffer_size(size).start(|_| {});
        assert!(
            matches!(
                bad,
                Err(Error::Tracing(TracingError::BufferSize { min: 216, .. }))
            ),
            "{size}: {bad:?}"
        );
    }
    assert_eq!(d.stats().enabled_mask, before.enabled_mask);
    // None of these held the tracer slot.
    let (tracer, _sink) = start(ActivityKinds::MEMSET);
    tracer.stop().unwrap();
}

#[test]
fn a_refused_kind_names_itself_and_undoes_the_start() {
    let _serial = serial();
    let d = double();
    d.fail_next(c"cuptiActivityEnable", 27);
    let err = ActivityTracer::builder()
        .kinds(ActivityKinds::MEMSET | ActivityKinds::MEMCPY)
        .start(|_| {})
        .unwrap_err();
    match &err {
        Error::Tracing(TracingError::EnableKind { kind, error }) => {
            // Kinds are enabled in value order: MEMCPY (1) first.
            assert_eq!(*kind, ActivityKind::MEMCPY);
            assert_eq!(error.code(), 27);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string()
            .starts_with("cuptiActivityEnable(MEMCPY) failed: CUPTI_ERROR_NOT_SUPPORTED"),
        "{err}"
    );
    assert_eq!(d.stats().enabled_mask, 0);
    let (tracer, _sink) = start(ActivityKinds::MEMSET);
    tracer.stop().unwrap();
}

#[test]
fn a_failed_flush_names_the_call() {
    let _serial = serial();
    let d = double();
    let (tracer, _sink) = start(ActivityKinds::MEMSET);
    d.fail_next(c"cuptiActivityFlushAll", 999);
    let err = tracer.flush_all(FlushMode::Completed).unwrap_err();
    assert!(
        matches!(&err, Error::Tracing(TracingError::Vendor { call: "cuptiActivityFlushAll", error }) if error.code() == 999),
        "{err:?}"
    );
    tracer.stop().unwrap();
}

#[test]
fn flushing_or_stopping_inside_the_closure_is_refused() {
    let _serial = serial();
    let d = double();
    let seen_err = Arc::new(Mutex::new(None));
    let e = Arc::clone(&seen_err);
    let inner = Arc::new(Mutex::new(None::<ActivityTracer>));
    let tracer = ActivityTracer::builder()
        .kinds(ActivityKinds::MEMSET)
        .buffer_size(1024)
        .start(move |_batch| {
            // No tracer handle is reachable here, but a second start is: it must not reach CUPTI.
            let r = ActivityTracer::builder().start(|_| {});
            *e.lock().unwrap() = Some(format!("{:?}", r.err()));
        })
        .unwrap();
    d.memset(1, 1, 1, 2, 0, 1);
    tracer.flush_all(FlushMode::Forced).unwrap();
    assert_eq!(
        seen_err.lock().unwrap().as_deref(),
        Some("Some(Tracing(InsideCallback))")
    );
    drop(inner);
    tracer.stop().unwrap();
}

#[test]
fn timestamps_are_on_the_monotonic_clock_unless_realtime_is_asked() {
    let _serial = serial();
    let d = double();
    let (tracer, _sink) = start(ActivityKinds::MEMSET);
    assert!(d.stats().timestamp_callback >= 1);
    let (before, t, after) = (
        Clock::Monotonic.now_ns(),
        d.now(),
        Clock::Monotonic.now_ns(),
    );
    assert!(before <= t && t <= after, "{before} {t} {after}");
    let own = tracer.timestamp();
    assert!(own >= t && own <= Clock::Monotonic.now_ns());
    assert_eq!(tracer.clock(), Clock::Monotonic);
    tracer.stop().unwrap();
    let tracer = ActivityTracer::builder()
        .kinds(ActivityKinds::MEMSET)
        .clock(Clock::Realtime)
        .start(|_| {})
        .unwrap();
    let (before, t) = (Clock::Realtime.now_ns(), d.now());
    assert!(t >= before && t - before < 1_000_000_000, "{before} {t}");
    tracer.stop().unwrap();
}

#[test]
fn a_flush_period_reaches_cupti() {
    let _serial = serial();
    let d = double();
    let tracer = ActivityTracer::builder()
        .kinds(ActivityKinds::MEMSET)
        .flush_period(Duration::from_millis(250))
        .start(|_| {})
        .unwrap();
    assert_eq!(d.stats().flush_period_ms, 250);
    tracer.stop().unwrap();
}

#[test]
fn the_library_path_option_must_match_the_loaded_library() {
    let _serial = serial();
    double();
    let err = ActivityTracer::builder()
        .library_path("/nonexistent/libcupti.so.13")
        .start(|_| {})
        .unwrap_err();
    assert!(matches!(err, Error::Load(_)), "{err:?}");
    // The slot was released.
    let (tracer, _sink) = start(ActivityKinds::MEMSET);
    tracer.stop().unwrap();
}

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn send_and_sync_are_decided() {
    use gpu_tools::cupti::activity::*;
    assert_send_sync::<ActivityTracer>();
    assert_send_sync::<ActivityTracerBuilder>();
    assert_send_sync::<TracerStats>();
    assert_send_sync::<TracerReport>();
    assert_send_sync::<DroppedRecords>();
    assert_send_sync::<ActivityKinds>();
    assert_send_sync::<Clock>();
    assert_send_sync::<RecordError>();
    assert_send_sync::<TracingError>();
    // Record views are read-only views of memory valid for their lifetime: shareable within the callback.
    assert_send_sync::<Activity<'static>>();
    assert_send_sync::<Kernel<'static>>();
    assert_send_sync::<Memcpy<'static>>();
    assert_send_sync::<Memset<'static>>();
    assert_send_sync::<ApiCall<'static>>();
    assert_send_sync::<Synchronization<'static>>();
    assert_send_sync::<Overhead<'static>>();
    assert_send_sync::<PeerCopy<'static>>();
    assert_send_sync::<ContextRecord<'static>>();
    assert_send_sync::<StreamRecord<'static>>();
    assert_send_sync::<DeviceRecord<'static>>();
    assert_send_sync::<NameRecord<'static>>();
    assert_send_sync::<Marker<'static>>();
    assert_send_sync::<ExternalCorrelation<'static>>();
    assert_send_sync::<MemoryRecord<'static>>();
    // Plain values.
    assert_send_sync::<ActivityKind>();
    assert_send_sync::<RecordLayout>();
    assert_send_sync::<LayoutMatch>();
    assert_send_sync::<FlushMode>();
    assert_send_sync::<TimeRange>();
    assert_send_sync::<Dim3>();
    assert_send_sync::<ActivityObject>();
    assert_send_sync::<CopyKind>();
    assert_send_sync::<MemoryKind>();
    assert_send_sync::<SyncType>();
    assert_send_sync::<OverheadKind>();
    assert_send_sync::<LaunchType>();
    assert_send_sync::<StreamFlag>();
    assert_send_sync::<MemoryOperation>();
    assert_send_sync::<gpu_tools::cupti::DriverCbid>();
    assert_send_sync::<gpu_tools::cupti::RuntimeCbid>();
    assert_send_sync::<gpu_tools::cupti::ApiCbid>();
    assert_send_sync::<gpu_tools::cupti::CuptiLibrary>();
    assert_send_sync::<gpu_tools::cupti::TracingSymbols>();
    // ActivityBatch and Records are neither (compile_fail doctests on ActivityBatch show it).
}

#[test]
fn the_tracer_says_when_its_clock_went_in_on_that_clock() {
    let _serial = serial();
    let d = double();
    let before = gpu_tools::cupti::activity::Clock::Monotonic.now_ns();
    let (tracer, _sink) = start(ActivityKinds::MEMSET);
    let after = gpu_tools::cupti::activity::Clock::Monotonic.now_ns();
    let at = tracer.clock_in_at();
    assert!(before <= at && at <= after, "{before} <= {at} <= {after}");
    // CUPTI's clock is the tracer's from that moment: a record made now is stamped after it.
    assert!(d.now() >= at, "the double reads the registered clock");
    tracer.stop().unwrap();
}
