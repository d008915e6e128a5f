//! rocprofiler on a real AMD GPU (ROCm 6.1+): `cargo test --features amd-hw-tests --test rocprofiler_hw`.
//!
//! rocprofiler is loaded and initialised once, before the HIP runtime is opened (it is an HSA tool). The GPU
//! work is `hipMemset`, which HIP runs as a fill kernel.
#![cfg(feature = "amd-hw-tests")]

use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use gpu_tools::rocprofiler::{
    CaptureMode, CodeObjectCapture, CounterReading, DeviceProfilingSession, Filter,
    ProfilingSession, Record, Rocprofiler, RocprofilerLibrary,
};

struct Hip {
    _lib: libloading::Library,
    malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> i32,
    memset: unsafe extern "C" fn(*mut c_void, i32, usize) -> i32,
    synchronize: unsafe extern "C" fn() -> i32,
    free: unsafe extern "C" fn(*mut c_void) -> i32,
}

struct Gpu {
    rocprofiler: Rocprofiler,
    hip: Hip,
}

/// rocprofiler first, then HIP; tests take turns (one active session per process).
fn gpu() -> (&'static Gpu, MutexGuard<'static, ()>) {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    static TURN: Mutex<()> = Mutex::new(());
    let turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let gpu = GPU.get_or_init(|| {
        let lib = RocprofilerLibrary::load().expect("librocprofiler64.so.2 (set ROCM_PATH)");
        let rocprofiler = Rocprofiler::initialize(lib).expect("AMD driver and rocprofiler");
        let rocm = std::env::var("ROCM_PATH").unwrap_or_else(|_| "/opt/rocm".into());
        // SAFETY: opening the HIP runtime after rocprofiler, as required; C signatures as in hip_runtime_api.h.
        let hip = unsafe {
            let lib = libloading::Library::new(format!("{rocm}/lib/libamdhip64.so"))
                .or_else(|_| libloading::Library::new("libamdhip64.so"))
                .expect("libamdhip64.so");
            Hip {
                malloc: *lib.get(b"hipMalloc\0").unwrap(),
                memset: *lib.get(b"hipMemset\0").unwrap(),
                synchronize: *lib.get(b"hipDeviceSynchronize\0").unwrap(),
                free: *lib.get(b"hipFree\0").unwrap(),
                _lib: lib,
            }
        };
        Gpu { rocprofiler, hip }
    });
    (gpu, turn)
}

/// Begin, end and counter values of one dispatch.
type Dispatch = (u64, u64, Vec<f64>);

/// `n` fill kernels on 16 MiB.
fn run_kernels(hip: &Hip, n: usize) {
    let mut dev: *mut c_void = std::ptr::null_mut();
    // SAFETY: HIP calls with valid arguments; the allocation is freed.
    unsafe {
        assert_eq!((hip.malloc)(&mut dev, 16 << 20), 0);
        for i in 0..n {
            assert_eq!((hip.memset)(dev, i as i32, 16 << 20), 0);
        }
        assert_eq!((hip.synchronize)(), 0);
        assert_eq!((hip.free)(dev), 0);
    }
}

#[test]
fn dispatch_timestamps_and_a_counter() {
    let (gpu, _turn) = gpu();
    let session = ProfilingSession::new(&gpu.rocprofiler).unwrap();
    let got: Arc<Mutex<Vec<Dispatch>>> = Arc::default();
    let g2 = Arc::clone(&got);
    let buffer = session
        .create_buffer(1 << 20, move |batch| {
            for r in batch.records() {
                if let Ok(Record::Profiler(p)) = r {
                    let values = p.counters().iter().map(|c| c.value).collect();
                    g2.lock()
                        .unwrap()
                        .push((p.timestamps().begin, p.timestamps().end, values));
                }
            }
        })
        .unwrap();
    session
        .add_filter(Filter::counters(["SQ_WAVES"]), &buffer)
        .unwrap();
    session.start().unwrap();
    run_kernels(&gpu.hip, 4);
    session.terminate().unwrap();
    let got = got.lock().unwrap();
    assert!(got.len() >= 4, "dispatches seen: {}", got.len());
    for (begin, end, values) in got.iter() {
        assert!(end > begin && *begin > 0);
        assert!(
            !values.is_empty() && values.iter().any(|v| *v > 0.0),
            "SQ_WAVES: {values:?}"
        );
    }
}

#[test]
fn device_profiling_poll() {
    let (gpu, _turn) = gpu();
    let mut dev = DeviceProfilingSession::new(&gpu.rocprofiler, ["GRBM_COUNT"], 0, 0).unwrap();
    dev.start().unwrap();
    run_kernels(&gpu.hip, 2);
    let samples = dev.poll().unwrap();
    dev.stop().unwrap();
    assert_eq!(samples.len(), 1);
    assert!(
        matches!(samples[0].reading, CounterReading::Value(v) if v > 0.0),
        "{samples:?}"
    );
}

#[test]
fn code_object_capture() {
    let (gpu, _turn) = gpu();
    let mut capture = CodeObjectCapture::new(&gpu.rocprofiler, CaptureMode::CopyMemory, 1).unwrap();
    capture.start().unwrap();
    run_kernels(&gpu.hip, 1);
    capture.stop().unwrap();
    let objects = capture.get().unwrap();
    assert!(!objects.is_empty(), "no code object captured");
    assert!(objects.iter().all(|o| o.uri().is_some()));
}
