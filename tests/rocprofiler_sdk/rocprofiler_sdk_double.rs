//! The rocprofiler-sdk layer against the C double of the library (`gpu-tools-testing/doubles/rocprofiler_sdk.c`): one tool,
//! registered in-process with `force_configure`, configures every service the tests use; each test then drives the
//! double and checks what the tool's closures received.
#![cfg(feature = "rocprofiler-sdk")]

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use common::double;
use gpu_tools::counters::{DeviceCounters, SampleClock};
use gpu_tools::rocprofiler_sdk::{
    ApiKind, Batch, Buffer, BufferOptions, BufferPolicy, CallbackEvent, Context, CopyDirection,
    DeviceSampler, MIN_BUFFER_SIZE, MarkerCall, Payload, Phase, RangeOperation, Record,
    RecordError, SdkError, Setup, Tool, TraceKind, force_configure,
};
use gpu_tools::sys::rocprofiler_sdk as sys;

/// A record as a test keeps it.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Kernel {
        dispatch: u64,
        kernel: u64,
        agent: u64,
        correlation: u64,
        workgroups: [u32; 3],
        duration: u64,
    },
    Copy {
        direction: CopyDirection,
        bytes: u64,
        correlation: u64,
    },
    Api {
        api: Option<ApiKind>,
        operation: i32,
        name: Option<String>,
        correlation: u64,
    },
    Allocation {
        size: u64,
    },
    Scratch {
        operation: u32,
    },
    Retired {
        correlation: u64,
    },
    DispatchHeader {
        dispatch: u64,
        values: u64,
    },
    Counter {
        counter: u64,
        value: f64,
        dispatch: u64,
    },
    Unknown {
        category: u32,
        kind: u32,
    },
    Range {
        operation: RangeOperation,
        correlation: u64,
        thread: u64,
        start: u64,
        end: u64,
    },
    Error(RecordError),
}

fn own(batch: &Batch<'_>) -> Vec<Seen> {
    let lib = double().lib;
    batch
        .records()
        .map(|r| match r {
            Ok(Record::KernelDispatch(k)) => Seen::Kernel {
                dispatch: k.dispatch_id(),
                kernel: k.kernel_id(),
                agent: k.agent_id(),
                correlation: k.correlation_id(),
                workgroups: k.workgroups(),
                duration: k.time().duration_ns(),
            },
            Ok(Record::MemoryCopy(c)) => Seen::Copy {
                direction: c.direction(),
                bytes: c.bytes(),
                correlation: c.correlation_id(),
            },
            Ok(Record::Api(a)) => Seen::Api {
                api: a.api(),
                operation: a.operation(),
                name: lib.operation_name(a.kind(), a.operation()),
                correlation: a.correlation_id(),
            },
            Ok(Record::MemoryAllocation(m)) => Seen::Allocation {
                size: m.allocation_size(),
            },
            Ok(Record::ScratchMemory(s)) => Seen::Scratch {
                operation: s.operation(),
            },
            Ok(Record::CorrelationRetired(c)) => Seen::Retired {
                correlation: c.correlation_id(),
            },
            Ok(Record::DispatchCounters(d)) => Seen::DispatchHeader {
                dispatch: d.dispatch_id(),
                values: d.values(),
            },
            Ok(Record::CounterValue(v)) => Seen::Counter {
                counter: lib.counter_of_instance(v.instance_id()).unwrap(),
                value: v.value(),
                dispatch: v.dispatch_id(),
            },
            Ok(Record::Unknown { category, kind }) => Seen::Unknown { category, kind },
            Ok(Record::MarkerRange(m)) => Seen::Range {
                operation: m.operation(),
                correlation: m.correlation_id(),
                thread: m.thread_id(),
                start: m.time().start,
                end: m.time().end,
            },
            Ok(other) => panic!("unexpected {other:?}"),
            Err(e) => Seen::Error(e),
        })
        .collect()
}

/// What the tool's closures received.
#[derive(Default)]
struct Received {
    main: Vec<Seen>,
    counting: Vec<Seen>,
    discard: Vec<Seen>,
    discard_drops: u64,
    code_objects: Vec<String>,
    markers: Vec<MarkerNote>,
}

/// What a ROCTx callback carried.
#[derive(Debug, Clone, PartialEq)]
struct MarkerNote {
    kind: u32,
    call: Option<MarkerCall>,
    range: Option<RangeOperation>,
    enter: bool,
    correlation: u64,
    thread: u64,
    message: Option<String>,
    started: Option<u64>,
    stopped: Option<u64>,
}

fn marker_note(e: &CallbackEvent<'_>) -> Option<MarkerNote> {
    let Payload::Marker(args) = e.payload() else {
        return None;
    };
    Some(MarkerNote {
        kind: e.kind(),
        call: args.call(),
        range: args.range_operation(),
        enter: e.phase() == Phase::Enter,
        correlation: e.correlation_id(),
        thread: e.thread_id(),
        message: args.message().map(|m| m.to_string_lossy().into_owned()),
        started: args.started_range_id(),
        stopped: args.stopped_range_id(),
    })
}

static RECEIVED: Mutex<Option<Received>> = Mutex::new(None);
static GATE: Mutex<()> = Mutex::new(());
static PANIC_NEXT: AtomicBool = AtomicBool::new(false);
static PANICKY_BATCHES: AtomicU64 = AtomicU64::new(0);

fn received() -> MutexGuard<'static, Option<Received>> {
    RECEIVED.lock().unwrap_or_else(|p| p.into_inner())
}

fn take() -> Received {
    received().replace(Received::default()).unwrap_or_default()
}

/// What the tests reach: the tool keeps its own handles; these are shared with it.
struct Handles {
    main: Arc<Buffer>,
    counting: Arc<Buffer>,
    discard: Arc<Buffer>,
    panicky: Arc<Buffer>,
    sampler: Mutex<Option<DeviceSampler>>,
    setup_errors: Vec<String>,
}

static HANDLES: OnceLock<Handles> = OnceLock::new();

struct TestTool {
    _contexts: Vec<Context>,
    _buffers: Vec<Arc<Buffer>>,
}

impl Tool for TestTool {
    const NAME: &'static str = "gpu-tools double test";

    fn initialize(setup: &mut Setup<'_>) -> gpu_tools::Result<Self> {
        *received() = Some(Received::default());
        let mut setup_errors = Vec::new();
        let main_ctx = setup.create_context()?;
        let main = Arc::new(
            setup.create_buffer(&main_ctx, BufferOptions::new(4096), |b| {
                let seen = own(b);
                received()
                    .get_or_insert_with(Default::default)
                    .main
                    .extend(seen);
            })?,
        );
        setup.trace(
            &main_ctx,
            &[
                TraceKind::KernelDispatch,
                TraceKind::MemoryCopy,
                TraceKind::HipRuntimeApi,
                TraceKind::HsaApi,
                TraceKind::MarkerApi,
                TraceKind::MarkerRanges,
                TraceKind::CorrelationIdRetirement,
                TraceKind::MemoryAllocation,
            ],
            &main,
        )?;
        setup.trace_code_objects(&main_ctx, |e: &CallbackEvent<'_>| {
            let text = match e.payload() {
                Payload::CodeObjectLoad(c) => format!("load {} {:?}", c.id(), c.uri().unwrap()),
                Payload::KernelSymbol(k) => {
                    format!(
                        "kernel {} {}",
                        k.kernel_id(),
                        k.name().unwrap().to_string_lossy()
                    )
                }
                other => format!("{other:?}"),
            };
            received()
                .get_or_insert_with(Default::default)
                .code_objects
                .push(text);
        })?;
        setup.trace_callbacks(
            &main_ctx,
            &[
                sys::ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_API,
                sys::ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_RANGE_API,
            ],
            |e: &CallbackEvent<'_>| {
                if let Some(note) = marker_note(e) {
                    received()
                        .get_or_insert_with(Default::default)
                        .markers
                        .push(note);
                }
            },
        )?;
        let counting = Arc::new(
            setup.create_buffer(&main_ctx, BufferOptions::new(8192), |b| {
                let seen = own(b);
                received()
                    .get_or_insert_with(Default::default)
                    .counting
                    .extend(seen);
            })?,
        );
        let agents = setup.agents()?;
        let gpu = agents
            .iter()
            .find(|a| a.is_gpu())
            .expect("a GPU agent")
            .clone();
        let config = setup.counter_config(&gpu, &["SQ_WAVES", "GRBM_COUNT"])?;
        setup.count_dispatches(&main_ctx, &counting, vec![config])?;
        // Bad input during configuration.
        match setup.counter_config(&gpu, &["GRBM_CONT"]) {
            Err(gpu_tools::Error::Sdk(e)) => setup_errors.push(e.to_string()),
            other => setup_errors.push(format!("unexpected {other:?}")),
        }
        match setup.create_buffer(&main_ctx, BufferOptions::new(64), |_| {}) {
            Err(gpu_tools::Error::Sdk(e)) => setup_errors.push(e.to_string()),
            other => setup_errors.push(format!("unexpected {other:?}")),
        }
        match setup.device_counting(&gpu, &["GRBM_COUNT"]) {
            Err(e) => setup_errors.push(e.to_string()),
            Ok(_) => setup_errors.push("device counting without /dev/kfd check".into()),
        }
        // A small buffer that discards when full, its consumer held back by GATE.
        let discard_ctx = setup.create_context()?;
        let discard = Arc::new(
            setup.create_buffer(
                &discard_ctx,
                BufferOptions::new(1024)
                    .watermark(1024)
                    .policy(BufferPolicy::Discard),
                |b| {
                    let _held = GATE.lock().unwrap_or_else(|p| p.into_inner());
                    let seen = own(b);
                    let mut r = received();
                    let r = r.get_or_insert_with(Default::default);
                    r.discard.extend(seen);
                    r.discard_drops += b.dropped_records();
                },
            )?,
        );
        setup.trace(&discard_ctx, &[TraceKind::ScratchMemory], &discard)?;
        let panicky_ctx = setup.create_context()?;
        let panicky =
            Arc::new(
                setup.create_buffer(&panicky_ctx, BufferOptions::new(4096), |b| {
                    PANICKY_BATCHES.fetch_add(1, Ordering::Relaxed);
                    if PANIC_NEXT.swap(false, Ordering::Relaxed) {
                        panic!("a closure bug, {} records", b.len());
                    }
                })?,
            );
        setup.trace(
            &panicky_ctx,
            &[TraceKind::Raw(sys::ROCPROFILER_BUFFER_TRACING_RCCL_API)],
            &panicky,
        )?;
        let sampler = setup.device_counting_unchecked(&gpu, &["GRBM_COUNT", "SQ_WAVES"])?;
        for c in [&main_ctx, &discard_ctx, &panicky_ctx] {
            c.start()?;
        }
        let buffers = vec![
            Arc::clone(&main),
            Arc::clone(&counting),
            Arc::clone(&discard),
            Arc::clone(&panicky),
        ];
        let _ = HANDLES.set(Handles {
            main,
            counting,
            discard,
            panicky,
            sampler: Mutex::new(Some(sampler)),
            setup_errors,
        });
        Ok(TestTool {
            _contexts: vec![main_ctx, discard_ctx, panicky_ctx],
            _buffers: buffers,
        })
    }
}

/// Registers the tool once per process; tests take turns.
fn handles() -> (MutexGuard<'static, ()>, &'static Handles) {
    static SERIAL: Mutex<()> = Mutex::new(());
    static REGISTER: OnceLock<()> = OnceLock::new();
    let guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    REGISTER.get_or_init(|| {
        force_configure::<TestTool>(double().lib).expect("the tool registers");
    });
    (guard, HANDLES.get().expect("initialize ran"))
}

fn api(
    kind: u32,
    operation: i32,
    correlation: u64,
) -> sys::rocprofiler_buffer_tracing_hip_api_record_t {
    let mut r = sys::rocprofiler_buffer_tracing_hip_api_record_t::default();
    r.size = size_of_val(&r) as u64;
    r.kind = kind;
    r.operation = operation;
    r.correlation_id.internal = correlation;
    r
}

#[test]
fn every_category_decodes_and_unknown_kinds_are_kept() {
    let (_s, h) = handles();
    let d = double();
    take();
    // SAFETY: the double's controls take plain values.
    unsafe {
        assert_eq!(
            (d.emit_api)(
                sys::ROCPROFILER_BUFFER_TRACING_HIP_RUNTIME_API,
                3,
                10,
                100,
                200
            ),
            1
        );
        assert_eq!((d.emit_kernel)(1, 2, 0x1001, 10, 300, 900), 1);
        assert_eq!(
            (d.emit_copy)(
                sys::ROCPROFILER_MEMORY_COPY_DEVICE_TO_HOST,
                4096,
                11,
                1000,
                2000
            ),
            1
        );
        assert_eq!(
            (d.emit_api)(sys::ROCPROFILER_BUFFER_TRACING_HSA_CORE_API, 1, 12, 0, 1),
            1
        );
        assert_eq!(
            (d.emit_api)(sys::ROCPROFILER_BUFFER_TRACING_MARKER_CORE_API, 1, 13, 0, 1),
            1
        );
    }
    let mut alloc = sys::rocprofiler_buffer_tracing_memory_allocation_record_t::default();
    alloc.size = size_of_val(&alloc) as u64;
    alloc.kind = sys::ROCPROFILER_BUFFER_TRACING_MEMORY_ALLOCATION;
    alloc.allocation_size = 1 << 30;
    assert_eq!(
        d.emit(sys::ROCPROFILER_BUFFER_TRACING_MEMORY_ALLOCATION, &alloc),
        1
    );
    let mut retired = sys::rocprofiler_buffer_tracing_correlation_id_retirement_record_t::default();
    retired.size = size_of_val(&retired) as u64;
    retired.internal_correlation_id = 10;
    assert_eq!(
        d.emit(
            sys::ROCPROFILER_BUFFER_TRACING_CORRELATION_ID_RETIREMENT,
            &retired
        ),
        1
    );
    // Kinds and categories newer than the bindings, and a record smaller than its layout.
    let main = h.main.id();
    let newer = [64u64, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(d.emit_to(main, 1, 999, &newer), 0);
    assert_eq!(d.emit_to(main, 7, 1, &newer), 0);
    assert_eq!(
        d.emit_to(
            main,
            sys::ROCPROFILER_BUFFER_CATEGORY_PC_SAMPLING,
            1,
            &newer
        ),
        0
    );
    let mut short = api(sys::ROCPROFILER_BUFFER_TRACING_HIP_RUNTIME_API, 1, 14);
    short.size = 40;
    assert_eq!(
        d.emit_to(
            main,
            1,
            sys::ROCPROFILER_BUFFER_TRACING_HIP_RUNTIME_API,
            &short
        ),
        0
    );
    h.main.flush().unwrap();
    let got = take().main;
    let hip = Some(ApiKind::Hip);
    assert_eq!(
        got,
        vec![
            Seen::Api {
                api: hip,
                operation: 3,
                name: Some("hipLaunchKernel".into()),
                correlation: 10
            },
            Seen::Kernel {
                dispatch: 1,
                kernel: 2,
                agent: 0x1001,
                correlation: 10,
                workgroups: [4096, 1, 1],
                duration: 600
            },
            Seen::Copy {
                direction: CopyDirection::DeviceToHost,
                bytes: 4096,
                correlation: 11
            },
            Seen::Api {
                api: Some(ApiKind::Hsa),
                operation: 1,
                name: Some("hsa_queue_create".into()),
                correlation: 12
            },
            Seen::Api {
                api: Some(ApiKind::Marker),
                operation: 1,
                name: Some("roctxRangePushA".into()),
                correlation: 13
            },
            Seen::Allocation { size: 1 << 30 },
            Seen::Retired { correlation: 10 },
            Seen::Unknown {
                category: 1,
                kind: 999
            },
            Seen::Unknown {
                category: 7,
                kind: 1
            },
            Seen::Unknown {
                category: 2,
                kind: 1
            },
            Seen::Error(RecordError::TooSmall {
                index: 10,
                category: 1,
                kind: 5,
                size: 40,
                need: 64
            }),
        ]
    );
    let stats = h.main.stats();
    assert!(
        stats.records >= 11 && stats.batches >= 1 && stats.callback_panics == 0,
        "{stats:?}"
    );
}

#[test]
fn dispatch_counting_writes_a_header_then_every_instance() {
    let (_s, h) = handles();
    // Counts of kernels other tests emitted are left behind first.
    h.counting.flush().unwrap();
    take();
    // SAFETY: plain values.
    unsafe { (double().emit_kernel)(7, 1, 0x1001, 70, 0, 10) };
    h.main.flush().unwrap();
    h.counting.flush().unwrap();
    let got = take().counting;
    // SQ_WAVES is counter 3, GRBM_COUNT counter 1, two instances each; values: dispatch * 10 + position.
    assert_eq!(
        got,
        vec![
            Seen::DispatchHeader {
                dispatch: 7,
                values: 4
            },
            Seen::Counter {
                counter: 3,
                value: 70.0,
                dispatch: 7
            },
            Seen::Counter {
                counter: 3,
                value: 70.0,
                dispatch: 7
            },
            Seen::Counter {
                counter: 1,
                value: 71.0,
                dispatch: 7
            },
            Seen::Counter {
                counter: 1,
                value: 71.0,
                dispatch: 7
            },
        ]
    );
}

#[test]
fn code_objects_and_kernel_symbols_reach_the_callback_with_raw_names() {
    let (_s, _h) = handles();
    take();
    // SAFETY: plain values.
    unsafe { (double().load_code_object)(5, 2) };
    assert_eq!(
        take().code_objects,
        [
            "load 5 \"file:///opt/app/vecadd#offset=8192&size=40960\"",
            "kernel 1 _Z7kernel1Pfi.kd",
            "kernel 2 _Z7kernel2Pfi.kd",
        ]
    );
}

#[test]
fn a_full_discarding_buffer_reports_its_drops() {
    let (_s, h) = handles();
    take();
    let before = double().stats().dropped;
    let mut scratch = sys::rocprofiler_buffer_tracing_scratch_memory_record_t::default();
    scratch.size = size_of_val(&scratch) as u64;
    scratch.kind = sys::ROCPROFILER_BUFFER_TRACING_SCRATCH_MEMORY;
    let (mut accepted, mut dropped) = (0u64, 0u64);
    {
        let _held = GATE.lock().unwrap();
        // 88-byte records, 1024-byte arenas: the first arena goes to the held consumer, the second fills, the rest
        // is dropped.
        for i in 0..100u32 {
            scratch.operation = i;
            match double().emit(sys::ROCPROFILER_BUFFER_TRACING_SCRATCH_MEMORY, &scratch) {
                1 => accepted += 1,
                _ => dropped += 1,
            }
        }
    }
    h.discard.flush().unwrap();
    let r = take();
    assert!(dropped > 0, "nothing dropped");
    assert_eq!(double().stats().dropped - before, dropped);
    assert_eq!(r.discard_drops, dropped, "the batches carry every drop");
    assert_eq!(r.discard.len() as u64, accepted);
    assert!(r.discard.iter().all(|s| matches!(s, Seen::Scratch { .. })));
    assert_eq!(h.discard.stats().dropped_records, dropped);
}

#[test]
fn a_panicking_closure_is_reported_and_delivery_goes_on() {
    let (_s, h) = handles();
    let rec = api(sys::ROCPROFILER_BUFFER_TRACING_RCCL_API, 0, 1);
    PANIC_NEXT.store(true, Ordering::Relaxed);
    let before = PANICKY_BATCHES.load(Ordering::Relaxed);
    assert_eq!(
        double().emit(sys::ROCPROFILER_BUFFER_TRACING_RCCL_API, &rec),
        1
    );
    match h.panicky.flush() {
        Err(gpu_tools::Error::Sdk(SdkError::CallbackPanicked(m))) => {
            assert!(m.contains("a closure bug, 1 records"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        double().emit(sys::ROCPROFILER_BUFFER_TRACING_RCCL_API, &rec),
        1
    );
    h.panicky.flush().unwrap();
    assert_eq!(PANICKY_BATCHES.load(Ordering::Relaxed) - before, 2);
    assert_eq!(h.panicky.stats().callback_panics, 1);
}

#[test]
fn the_device_sampler_reads_through_the_vendor_neutral_trait() {
    let (_s, h) = handles();
    let mut sampler = h.sampler.lock().unwrap().take().expect("one sampler");
    let mut out = Vec::new();
    assert!(matches!(
        sampler.read(Duration::ZERO, &mut out),
        Err(gpu_tools::Error::Sdk(SdkError::NotStarted))
    ));
    sampler.start().unwrap();
    let mut sampler: Box<dyn DeviceCounters> = Box::new(sampler);
    assert_eq!(sampler.device().name, "AMD Instinct MI300X");
    assert_eq!(sampler.clock(), SampleClock::Vendor);
    let names: Vec<&str> = sampler.counters().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["GRBM_COUNT", "SQ_WAVES"]);
    for _ in 0..2 {
        let status = sampler.read(Duration::from_millis(2), &mut out).unwrap();
        assert_eq!((status.samples, status.dropped), (1, 0));
    }
    // Sample k of the double reads k * 100 + position * 10 + instance; each value is the sum of two instances.
    let values: Vec<Vec<f64>> = out.iter().map(|s| s.values.clone()).collect();
    assert_eq!(values, [vec![201.0, 221.0], vec![401.0, 421.0]]);
    assert!(
        out[0].end_ns > out[0].start_ns && out[1].start_ns == out[0].end_ns,
        "{out:?}"
    );
    assert!(out[1].duration() >= Duration::from_millis(2));
}

#[test]
fn bad_input_during_setup_is_typed() {
    let (_s, h) = handles();
    let errors = &h.setup_errors;
    assert!(
        errors[0].contains("no counter \"GRBM_CONT\"") && errors[0].contains("close: GRBM_COUNT"),
        "{errors:?}"
    );
    assert_eq!(
        errors[1],
        format!("buffer size 64 is below the smallest the crate accepts ({MIN_BUFFER_SIZE} bytes)")
    );
    if std::path::Path::new("/dev/kfd").exists() {
        assert!(!errors[2].contains("no AMD GPU driver"), "{errors:?}");
    } else {
        assert!(
            errors[2].starts_with("no AMD GPU driver: /dev/kfd"),
            "{errors:?}"
        );
    }
    // A second registration is refused.
    match force_configure::<TestTool>(double().lib) {
        Err(gpu_tools::Error::Sdk(SdkError::AlreadyRegistered)) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn agents_are_listed_with_their_properties() {
    let lib = double().lib;
    let agents = gpu_tools::rocprofiler_sdk::agents(lib).unwrap();
    assert_eq!(agents.len(), 3);
    assert!(!agents[0].is_gpu());
    let gpu = &agents[1];
    assert_eq!(
        (
            gpu.name.as_str(),
            gpu.product_name.as_str(),
            gpu.gfx_target_version,
            gpu.cu_count,
            gpu.num_xcc
        ),
        ("gfx942", "AMD Instinct MI300X", 90402, 304, 8)
    );
    assert_eq!(
        (gpu.logical_node_type_id, gpu.pci_id),
        (0, (0x1002, 0x74a1))
    );
    let counters = gpu_tools::rocprofiler_sdk::counters(lib, gpu.id).unwrap();
    assert_eq!(counters.len(), 5);
    assert_eq!(counters[0].name, "GRBM_COUNT");
    assert_eq!(lib.version(), (1, 0, 0));
}

#[test]
fn handles_are_send_and_sync_where_meant() {
    fn both<T: Send + Sync>() {}
    fn send<T: Send>() {}
    both::<Buffer>();
    both::<Context>();
    both::<gpu_tools::rocprofiler_sdk::SdkLibrary>();
    send::<DeviceSampler>();
}

#[test]
fn roctx_ranges_are_records_of_their_own_named_by_their_callbacks() {
    let (_s, h) = handles();
    let d = double();
    take();
    // SAFETY: the controls take NUL-terminated strings that outlive the calls, and plain values.
    let (tid, levels, id) = unsafe {
        let tid = (d.thread_id)();
        (d.roctx_push)(c"outer".as_ptr());
        (d.roctx_push)(c"inner".as_ptr());
        (d.roctx_mark)(c"here".as_ptr());
        let levels = ((d.roctx_pop)(), (d.roctx_pop)());
        (tid, levels, (d.roctx_start)(c"across threads".as_ptr()))
    };
    assert_eq!(levels, (1, 0));
    // SAFETY: a plain value.
    let stopper = std::thread::spawn(move || unsafe { (d.roctx_stop)(id) });
    stopper.join().unwrap();
    h.main.flush().unwrap();
    let r = take();
    let ranges: Vec<(RangeOperation, u64, u64, u64, u64)> = r
        .main
        .iter()
        .filter_map(|s| match *s {
            Seen::Range {
                operation,
                correlation,
                thread,
                start,
                end,
            } => Some((operation, correlation, thread, start, end)),
            _ => None,
        })
        .collect();
    // Written as each ends: the mark, the inner range, the outer one, the range stopped on another thread, which
    // keeps the thread that started it.
    let ops: Vec<RangeOperation> = ranges.iter().map(|r| r.0).collect();
    assert_eq!(
        ops,
        [
            RangeOperation::Mark,
            RangeOperation::ThreadRange,
            RangeOperation::ThreadRange,
            RangeOperation::ProcessRange
        ]
    );
    assert!(
        ranges.iter().all(|r| r.2 == tid && r.3 <= r.4),
        "{ranges:?}"
    );
    let [mark, inner, outer, across] = ranges[..] else {
        unreachable!()
    };
    assert!(outer.3 <= inner.3 && inner.3 <= mark.3 && mark.4 <= inner.4 && inner.4 <= outer.4);
    assert!(outer.4 <= across.3);
    // Each name is the argument of the opening call, in the callback of the range's correlation id, at its Enter.
    let name_of = |correlation: u64| -> Vec<Option<String>> {
        r.markers
            .iter()
            .filter(|n| n.correlation == correlation)
            .map(|n| n.message.clone())
            .collect()
    };
    let some = |s: &str| Some(s.to_string());
    assert_eq!(name_of(mark.1), [some("here"), None]);
    assert_eq!(name_of(inner.1), [some("inner"), None]);
    assert_eq!(name_of(outer.1), [some("outer"), None]);
    assert_eq!(name_of(across.1), [some("across threads"), None]);
    // The calls come as calls too, each under a correlation id of its own.
    let calls: Vec<(String, u64)> = r
        .main
        .iter()
        .filter_map(|s| match s {
            Seen::Api {
                api: Some(ApiKind::Marker),
                name,
                correlation,
                ..
            } => Some((name.clone().unwrap_or_default(), *correlation)),
            _ => None,
        })
        .collect();
    let names: Vec<&str> = calls.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "roctxRangePushA",
            "roctxRangePushA",
            "roctxMarkA",
            "roctxRangePop",
            "roctxRangePop",
            "roctxRangeStartA",
            "roctxRangeStop"
        ]
    );
    assert!(calls.iter().all(|c| ranges.iter().all(|r| r.1 != c.1)));
    // The calls' callbacks: the id the start returned, at its Exit, and the id the stop was given.
    let call_note = |call: MarkerCall, enter: bool| {
        r.markers
            .iter()
            .find(|n| n.call == Some(call) && n.enter == enter)
            .cloned()
            .unwrap()
    };
    assert_eq!(call_note(MarkerCall::RangeStart, false).started, Some(id));
    assert_eq!(call_note(MarkerCall::RangeStop, true).stopped, Some(id));
    assert_eq!(
        call_note(MarkerCall::RangePush, true).message.as_deref(),
        Some("outer")
    );
    assert_eq!(call_note(MarkerCall::RangePop, true).message, None);
    let stopped_on = call_note(MarkerCall::RangeStop, true).thread;
    assert_ne!(stopped_on, tid);
    assert!(
        r.markers.iter().all(
            |n| n.kind == sys::ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_API || n.range.is_some()
        )
    );
}
