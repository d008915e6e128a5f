//! rocprofiler-sdk on a real AMD GPU (ROCm 7.0+, `librocprofiler-sdk.so.1`, `libamdhip64.so`): kernel dispatch
//! timestamps of a known number of kernels, code objects, device counters. Runs with `--features amd-hw-tests`.
#![cfg(feature = "amd-hw-tests")]

use std::ffi::c_void;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use gpu_tools::counters::DeviceCounters;
use gpu_tools::rocprofiler_sdk::{
    Buffer, BufferOptions, Context, DeviceSampler, Payload, Record, SdkLibrary, Setup, Tool,
    TraceKind,
};

static DISPATCHES: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());
static CODE_OBJECTS: AtomicU64 = AtomicU64::new(0);
static KERNEL_SYMBOLS: AtomicU64 = AtomicU64::new(0);
static SAMPLER: Mutex<Option<DeviceSampler>> = Mutex::new(None);

struct HwTool {
    _context: Context,
    _buffer: Buffer,
}

impl Tool for HwTool {
    const NAME: &'static str = "gpu-tools hardware test";
    fn initialize(setup: &mut Setup<'_>) -> gpu_tools::Result<Self> {
        let context = setup.create_context()?;
        let buffer = setup.create_buffer(&context, BufferOptions::new(1 << 20), |b| {
            for r in b.records().flatten() {
                if let Record::KernelDispatch(k) = r {
                    DISPATCHES
                        .lock()
                        .unwrap()
                        .push((k.time().start, k.time().end));
                }
            }
        })?;
        setup.trace(&context, &[TraceKind::KernelDispatch], &buffer)?;
        setup.trace_code_objects(&context, |e| match e.payload() {
            Payload::CodeObjectLoad(_) => {
                CODE_OBJECTS.fetch_add(1, Ordering::Relaxed);
            }
            Payload::KernelSymbol(_) => {
                KERNEL_SYMBOLS.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        })?;
        let gpu = setup
            .agents()?
            .into_iter()
            .find(|a| a.is_gpu())
            .expect("an AMD GPU");
        println!(
            "GPU agent: {} ({}), {} CUs",
            gpu.product_name, gpu.name, gpu.cu_count
        );
        *SAMPLER.lock().unwrap() = Some(setup.device_counting(&gpu, &["GRBM_COUNT"])?);
        context.start()?;
        Ok(HwTool {
            _context: context,
            _buffer: buffer,
        })
    }
}

type HipMalloc = unsafe extern "C" fn(*mut *mut c_void, usize) -> i32;
type HipMemset = unsafe extern "C" fn(*mut c_void, i32, usize) -> i32;
type HipSync = unsafe extern "C" fn() -> i32;

#[test]
fn kernel_timestamps_code_objects_and_device_counters() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let lib = SdkLibrary::load().expect("rocprofiler-sdk 1.x");
    println!("rocprofiler-sdk {:?} at {:?}", lib.version(), lib.path());
    gpu_tools::rocprofiler_sdk::force_configure::<HwTool>(lib)
        .expect("registers before HIP starts");
    let mut sampler = SAMPLER.lock().unwrap().take().unwrap();
    sampler.start().unwrap();
    const KERNELS: usize = 20;
    // SAFETY: the HIP runtime's own symbols, with their C signatures.
    unsafe {
        let hip = libloading::Library::new("libamdhip64.so").expect("libamdhip64.so");
        let malloc: libloading::Symbol<HipMalloc> = hip.get(b"hipMalloc\0").unwrap();
        let memset: libloading::Symbol<HipMemset> = hip.get(b"hipMemset\0").unwrap();
        let sync: libloading::Symbol<HipSync> = hip.get(b"hipDeviceSynchronize\0").unwrap();
        let mut p = std::ptr::null_mut();
        assert_eq!(malloc(&mut p, 64 << 20), 0);
        for i in 0..KERNELS {
            assert_eq!(memset(p, i as i32, 64 << 20), 0); // a fill kernel per call
        }
        assert_eq!(sync(), 0);
        std::mem::forget(hip);
    }
    let mut samples = Vec::new();
    sampler
        .read(Duration::from_millis(10), &mut samples)
        .unwrap();
    gpu_tools::rocprofiler_sdk::finalize().unwrap();
    let dispatches = DISPATCHES.lock().unwrap();
    println!(
        "{} dispatches, {} code objects, {} kernel symbols, GRBM_COUNT {:?}",
        dispatches.len(),
        CODE_OBJECTS.load(Ordering::Relaxed),
        KERNEL_SYMBOLS.load(Ordering::Relaxed),
        samples[0].values
    );
    assert!(
        dispatches.len() >= KERNELS,
        "{} dispatches",
        dispatches.len()
    );
    assert!(dispatches.iter().all(|(s, e)| e > s && *s > 0));
    assert!(CODE_OBJECTS.load(Ordering::Relaxed) >= 1);
    assert!(KERNEL_SYMBOLS.load(Ordering::Relaxed) >= 1);
    assert!(samples[0].values[0] > 0.0, "{samples:?}");
}
