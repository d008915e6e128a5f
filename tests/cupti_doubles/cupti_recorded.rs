//! Decodes real CUPTI buffers recorded on a GPU host by `cargo xtask record` and committed under
//! `tests/fixtures/cupti/<name>/`, and checks what they hold against the recorder's manifest: the kernel names and
//! count, kernels ordered within their stream, every copy's and set's byte count, each kernel's launch call found
//! by correlation id, no decoding error, no drop.
//!
//! While `tests/fixtures/cupti` does not exist the real-buffer test says so and checks nothing; once it exists,
//! every folder in it must hold a manifest. The reader itself is checked on a folder written the same way from the
//! CUPTI double.
#![cfg(feature = "cupti")]

use crate::common as cupti_double;

use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};

use gpu_tools::cupti::activity::{
    Activity, ActivityBatch, ActivityKinds, ActivityTracer, CopyKind, LayoutMatch, RecordLayout,
    SyncType,
};
use gpu_tools::cupti::{ApiCbid, DriverCbid};
use serde_json::{Value, json};

fn fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cupti")
}

/// What a fixture folder held.
#[derive(Debug, Default)]
struct Summary {
    records: usize,
    kernels: usize,
    memcpys: usize,
    memsets: usize,
    api_calls: usize,
    syncs: usize,
    /// Buffers whose walk was compared with the real library's.
    vendor_checked: usize,
}

fn list(v: &Value, key: &str) -> Vec<u64> {
    let mut out: Vec<u64> = v["workload"][key]
        .as_array()
        .unwrap_or_else(|| panic!("manifest lacks workload.{key}"))
        .iter()
        .map(|n| n.as_u64().expect("a byte count"))
        .collect();
    out.sort_unstable();
    out
}

/// One buffer of a fixture, 8-aligned, with its pointer fields patched to point at strings this value owns.
struct Buffer {
    words: Vec<u64>,
    len: usize,
    _strings: Vec<CString>,
}

fn load_buffer(dir: &Path, name: &str) -> Buffer {
    let bytes = std::fs::read(dir.join(format!("{name}.bin"))).expect("buffer file");
    let strings: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join(format!("{name}.strings.json"))).expect("strings file"),
    )
    .expect("strings JSON");
    let mut words = vec![0u64; bytes.len().div_ceil(8)];
    // SAFETY: the words hold at least `bytes.len()` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), words.as_mut_ptr().cast(), bytes.len())
    };
    let mut owned = Vec::new();
    for s in strings.as_array().expect("a list of strings") {
        let offset = s["offset"].as_u64().expect("offset") as usize;
        let text = CString::new(s["text"].as_str().expect("text")).expect("no NUL");
        assert!(
            offset % 8 == 0 && offset + 8 <= bytes.len(),
            "pointer field at {offset}"
        );
        words[offset / 8] = text.as_ptr() as u64;
        owned.push(text);
    }
    Buffer {
        words,
        len: bytes.len(),
        _strings: owned,
    }
}

/// The real library of the release that wrote `layout`, where CI's wheel variables name it.
fn wheel_library(layout: RecordLayout) -> Option<PathBuf> {
    let (var, file) = match layout {
        RecordLayout::Cupti13_0 => ("GPU_TOOLS_CUPTI_WHEEL_LIB", "libcupti.so.13"),
        _ => ("GPU_TOOLS_CUPTI12_WHEEL_LIB", "libcupti.so.12"),
    };
    Some(PathBuf::from(std::env::var_os(var)?).join(file))
}

/// Record offsets by the vendor's own walk (`cuptiActivityGetNextRecord` of the real library).
fn vendor_offsets(lib: &Path, buffer: &Buffer) -> Vec<usize> {
    type Next = unsafe extern "C" fn(*mut u8, usize, *mut *mut u8) -> u32;
    // SAFETY: the vendor library; opening it runs its initialisers, which need no driver.
    let lib = unsafe { libloading::Library::new(lib) }.expect("open the wheel library");
    // SAFETY: the header's signature.
    let next = *unsafe { lib.get::<Next>(b"cuptiActivityGetNextRecord\0") }.expect("symbol");
    let base = buffer.words.as_ptr().cast::<u8>().cast_mut();
    let mut record = std::ptr::null_mut();
    let mut out = Vec::new();
    // SAFETY: `len` readable bytes at `base`; the vendor reads kinds and steps inside them.
    while unsafe { next(base, buffer.len, &mut record) } == 0 {
        out.push(record as usize - base as usize);
    }
    out
}

/// The offsets of the crate's walk.
fn crate_offsets(batch: &ActivityBatch<'_>) -> Vec<usize> {
    let base = batch.as_bytes().as_ptr() as usize;
    batch
        .records()
        .map(|r| match r.expect("decodes") {
            Activity::Kernel(k) => std::ptr::from_ref(k.raw()) as usize - base,
            Activity::Memcpy(m) => std::ptr::from_ref(m.raw()) as usize - base,
            Activity::Memset(m) => std::ptr::from_ref(m.raw()) as usize - base,
            Activity::Api(a) => std::ptr::from_ref(a.raw()) as usize - base,
            Activity::Synchronization(y) => std::ptr::from_ref(y.raw()) as usize - base,
            Activity::Overhead(o) => std::ptr::from_ref(o.raw()) as usize - base,
            Activity::Context(c) => std::ptr::from_ref(c.raw()) as usize - base,
            Activity::Device(d) => std::ptr::from_ref(d.raw()) as usize - base,
            Activity::Unknown { bytes, .. } => bytes.as_ptr() as usize - base,
            other => panic!("a record the recorder does not enable: {other:?}"),
        })
        .collect()
}

/// Decodes and checks one fixture folder.
fn check_fixture(dir: &Path) -> Summary {
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("manifest.json")).expect("manifest.json"),
    )
    .expect("manifest JSON");
    let version = manifest["cupti_version"].as_u64().expect("cupti_version") as u32;
    let layout = match RecordLayout::for_version(version) {
        LayoutMatch::Exact(l) => l,
        other => panic!(
            "{}: CUPTI {version} is not known exactly: {other:?}",
            dir.display()
        ),
    };
    assert_eq!(
        manifest["layout"].as_str(),
        Some(format!("{layout:?}").as_str())
    );
    assert_eq!(
        manifest["dropped_records"].as_u64(),
        Some(0),
        "the recording lost records"
    );
    let kernel_name = manifest["workload"]["kernel_name"]
        .as_str()
        .expect("kernel_name");
    let mut s = Summary::default();
    let mut kernels = Vec::new();
    let mut copies: BTreeMap<&'static str, Vec<u64>> = BTreeMap::new();
    let mut sets = Vec::new();
    let mut api: BTreeMap<u32, ApiCbid> = BTreeMap::new();
    let mut context_syncs = 0;
    let mut device_names = Vec::new();
    for name in manifest["buffers"].as_array().expect("buffers") {
        let buffer = load_buffer(dir, name.as_str().expect("buffer name"));
        // SAFETY: the words hold `len` bytes, and every pointer field was patched to a string owned by `buffer`
        // (the recorder listed all of them); the rest of the record is plain data.
        let batch =
            unsafe { ActivityBatch::from_raw(buffer.words.as_ptr().cast(), buffer.len, layout) };
        if let Some(lib) = wheel_library(layout) {
            // The real library of the same release walks the buffer as the crate does.
            assert_eq!(
                crate_offsets(&batch),
                vendor_offsets(&lib, &buffer),
                "{name}"
            );
            s.vendor_checked += 1;
        }
        for r in batch.records() {
            let r = r.unwrap_or_else(|e| panic!("{}/{name}: {e}", dir.display()));
            s.records += 1;
            match r {
                Activity::Kernel(k) => {
                    let t = k.time();
                    assert!(t.is_complete() && t.duration_ns() > 0, "{k:?}");
                    assert_eq!(k.name().map(|n| n.to_str().unwrap()), Some(kernel_name));
                    kernels.push((
                        k.context_id(),
                        k.stream_id(),
                        t.start,
                        t.end,
                        k.correlation_id(),
                    ));
                }
                Activity::Memcpy(m) => {
                    assert!(m.time().is_complete(), "{m:?}");
                    let dir = match m.copy_kind() {
                        CopyKind::HtoD => "htod",
                        CopyKind::DtoH => "dtoh",
                        CopyKind::DtoD => "dtod",
                        other => panic!("unexpected copy {other:?}"),
                    };
                    copies.entry(dir).or_default().push(m.bytes());
                    s.memcpys += 1;
                }
                Activity::Memset(m) => {
                    sets.push(m.bytes());
                    s.memsets += 1;
                }
                Activity::Api(a) => {
                    assert!(a.time().start <= a.time().end, "{a:?}");
                    api.insert(a.correlation_id(), a.cbid());
                    s.api_calls += 1;
                }
                Activity::Synchronization(y) => {
                    if y.sync_type() == SyncType::ContextSynchronize {
                        context_syncs += 1;
                    }
                    s.syncs += 1;
                }
                Activity::Device(d) => device_names.push(
                    d.name()
                        .expect("device name")
                        .to_string_lossy()
                        .into_owned(),
                ),
                _ => {}
            }
        }
    }
    s.kernels = kernels.len();
    assert_eq!(
        kernels.len() as u64,
        manifest["workload"]["kernels"].as_u64().unwrap()
    );
    // Kernels of one stream run one after the other.
    kernels.sort_by_key(|k| (k.0, k.1, k.2));
    for w in kernels.windows(2) {
        if (w[0].0, w[0].1) == (w[1].0, w[1].1) {
            assert!(w[1].2 >= w[0].3, "overlapping kernels on one stream: {w:?}");
        }
    }
    // Every kernel came from a launch call found by correlation id.
    for k in &kernels {
        let call = api
            .get(&k.4)
            .unwrap_or_else(|| panic!("no API record for kernel {k:?}"));
        assert!(
            matches!(call, ApiCbid::Driver(c) if *c == DriverCbid::LAUNCH_KERNEL),
            "{call:?}"
        );
    }
    for (key, dir) in [
        ("memcpy_htod_bytes", "htod"),
        ("memcpy_dtoh_bytes", "dtoh"),
        ("memcpy_dtod_bytes", "dtod"),
    ] {
        let mut got = copies.remove(dir).unwrap_or_default();
        got.sort_unstable();
        assert_eq!(got, list(&manifest, key), "{dir} copies");
    }
    assert!(copies.is_empty(), "{copies:?}");
    sets.sort_unstable();
    assert_eq!(sets, list(&manifest, "memset_bytes"));
    assert!(
        context_syncs
            >= manifest["workload"]["context_synchronizations"]
                .as_u64()
                .unwrap(),
        "{context_syncs} context synchronisations"
    );
    if let Some(device) = manifest["device"].as_str() {
        assert!(
            device_names.iter().all(|n| n == device),
            "{device_names:?} vs {device}"
        );
    }
    s
}

#[test]
fn recorded_real_buffers_decode_to_the_workload() {
    let root = fixtures_root();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (the recorded CUPTI buffers are in the repository; `cargo xtask record` on a GPU host \
                 records more)",
                root.display()
            )
        })
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(
        !dirs.is_empty(),
        "{} holds no fixture folder",
        root.display()
    );
    for dir in dirs {
        let s = check_fixture(&dir);
        eprintln!("{}: {s:?}", dir.display());
        assert!(s.kernels > 0 && s.memcpys > 0 && s.memsets > 0 && s.api_calls > 0);
    }
}

/// The reader above on a folder written as the recorder writes it, from buffers of the CUPTI double.
#[test]
fn the_reader_reads_a_folder_written_like_the_recorder() {
    let d = cupti_double::double();
    let _serial = cupti_double::serial();
    let captured = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(Vec<u8>, Vec<Value>)>::new()));
    let sink = std::sync::Arc::clone(&captured);
    let tracer = ActivityTracer::builder()
        .kinds(
            ActivityKinds::CONCURRENT_KERNEL
                | ActivityKinds::MEMCPY
                | ActivityKinds::MEMSET
                | ActivityKinds::DRIVER
                | ActivityKinds::SYNCHRONIZATION,
        )
        .buffer_size(1024)
        .start(move |batch| {
            // As the recorder does: the bytes, and each kernel name's field offset with its text.
            let base = batch.as_bytes().as_ptr() as usize;
            let strings = batch
                .records()
                .flatten()
                .filter_map(|r| match r {
                    Activity::Kernel(k) => Some(json!({
                        "offset": std::ptr::from_ref(k.raw()) as usize - base
                            + std::mem::offset_of!(gpu_tools::sys::cupti::CUpti_ActivityKernel9, name),
                        "text": k.name()?.to_str().ok()?,
                    })),
                    _ => None,
                })
                .collect();
            sink.lock().unwrap().push((batch.as_bytes().to_vec(), strings));
        })
        .unwrap();
    let launch = DriverCbid::LAUNCH_KERNEL.id();
    for i in 0..6u32 {
        let t = u64::from(i) * 100 + 1;
        d.api(4, launch, t - 1, t, 1, 100 + i, 0);
        d.kernel(
            10,
            t,
            t + 50,
            (0, 1, 7),
            100 + i,
            c"step",
            (64, 1, 1),
            (256, 1, 1),
        );
    }
    for (i, (kind, n)) in [(1u8, 4096u64), (1, 65_536), (2, 8192), (8, 262_144)]
        .into_iter()
        .enumerate()
    {
        d.memcpy(kind, false, n, 1000, 1100, 7, 200 + i as u32);
    }
    d.memset(0, 1 << 20, 1200, 1300, 7, 300);
    d.sync(4, 1400, 1500, 301, u32::MAX, u32::MAX);
    tracer.stop().unwrap();
    let dir = std::env::temp_dir().join(format!("gpu-tools-fixture-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut names = Vec::new();
    for (i, (bytes, strings)) in captured.lock().unwrap().iter().enumerate() {
        let name = format!("buffer-{i:03}");
        std::fs::write(dir.join(format!("{name}.bin")), bytes).unwrap();
        std::fs::write(
            dir.join(format!("{name}.strings.json")),
            Value::Array(strings.clone()).to_string(),
        )
        .unwrap();
        names.push(name);
    }
    assert!(names.len() > 1, "several buffers");
    let n_buffers = names.len();
    let manifest = json!({
        "cupti_version": 130001, "layout": "Cupti13_0", "clock": "Monotonic", "device": null,
        "buffers": names, "dropped_records": 0,
        "workload": {
            "kernel_name": "step", "kernels": 6,
            "memcpy_htod_bytes": [4096, 65536], "memcpy_dtoh_bytes": [8192], "memcpy_dtod_bytes": [262144],
            "memset_bytes": [1048576], "context_synchronizations": 1
        }
    });
    std::fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
    let s = check_fixture(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        (s.kernels, s.memcpys, s.memsets, s.api_calls, s.syncs),
        (6, 4, 1, 6, 1)
    );
    assert_eq!(s.records, 18);
    if std::env::var_os("GPU_TOOLS_CUPTI_WHEEL_LIB").is_some() {
        // The real CUPTI 13.0 walks the double's buffers as the crate does: the double's layouts have the
        // vendor's sizes.
        assert_eq!(s.vendor_checked, n_buffers);
    }
}
