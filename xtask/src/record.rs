//! `cargo xtask record --out DIR [--kernels N] [--device N] [--buffer-size BYTES]`: real CUPTI activity buffers
//! of a small workload, recorded as test fixtures (formerly `gpu-tools record`). Needs an NVIDIA GPU.

use std::ffi::{CStr, c_void};
use std::mem::offset_of;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use gpu_tools::cuda::Context;
use gpu_tools::cupti::activity::{Activity, ActivityBatch, ActivityKinds, ActivityTracer};
use gpu_tools::sys::cupti as sys;
use serde::Serialize;

/// `step(u32* buf, u64 n)`: an in-place kernel over `n` words.
const STEP_PTX: &CStr = match CStr::from_bytes_with_nul(
    concat!(include_str!("../../gpu-host/kernels/step.ptx"), "\0").as_bytes(),
) {
    Ok(ptx) => ptx,
    Err(_) => panic!("step.ptx holds a NUL byte"),
};

/// Host-to-device, device-to-host, device-to-device copy sizes and memset sizes the workload uses.
const HTOD: [usize; 3] = [4096, 65_536, 1 << 20];
const DTOH: [usize; 2] = [8192, 1 << 20];
const DTOD: [usize; 1] = [262_144];
const MEMSET: [usize; 2] = [1 << 20, 65_536];

/// Record real CUPTI activity buffers of a small CUDA workload as test fixtures.
///
/// Runs a few kernels, copies in the three directions, memsets and synchronisations under the activity tracer, and
/// writes every buffer CUPTI completed, as it came, to a folder, with the strings its records point at and a
/// manifest of what was run: `buffer-NNN.bin` (the valid bytes of one buffer), `buffer-NNN.strings.json`
/// (`[{"offset", "text"}]`: each pointer field in the buffer and the string it pointed at, so a reader can patch
/// the pointers), and `manifest.json` (CUPTI version, device, clock, and the workload). The library's test
/// `tests/cupti_doubles/cupti_recorded.rs` decodes such folders under `tests/fixtures/cupti/`.
pub struct Args {
    /// Folder to write the buffers and the manifest to: absent or empty; it appears, whole, only when the
    /// recording succeeded.
    out: PathBuf,
    /// Kernels to launch.
    kernels: usize,
    /// CUDA device ordinal.
    device: usize,
    /// Bytes per CUPTI buffer (small buffers make small fixtures and several files).
    buffer_size: usize,
}

pub const USAGE: &str =
    "cargo xtask record --out DIR [--kernels N (4)] [--device N (0)] [--buffer-size BYTES (32768)]";

impl Args {
    /// `--out DIR` and the options, each followed by its value.
    pub fn parse(mut args: impl Iterator<Item = String>) -> Result<Self, String> {
        let mut parsed = Args {
            out: PathBuf::new(),
            kernels: 4,
            device: 0,
            buffer_size: 32 * 1024,
        };
        while let Some(flag) = args.next() {
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let number = || {
                value
                    .parse::<usize>()
                    .map_err(|e| format!("{flag} {value}: {e}"))
            };
            match flag.as_str() {
                "--out" => parsed.out = PathBuf::from(&value),
                "--kernels" => parsed.kernels = number()?,
                "--device" => parsed.device = number()?,
                "--buffer-size" => parsed.buffer_size = number()?,
                _ => return Err(format!("unknown option {flag}")),
            }
        }
        if parsed.out.as_os_str().is_empty() {
            return Err("--out DIR is needed".to_string());
        }
        Ok(parsed)
    }
}

#[derive(Serialize)]
struct StringAt {
    offset: usize,
    text: String,
}

#[derive(Serialize)]
struct Workload {
    kernel_name: &'static str,
    kernels: usize,
    memcpy_htod_bytes: Vec<usize>,
    memcpy_dtoh_bytes: Vec<usize>,
    memcpy_dtod_bytes: Vec<usize>,
    memset_bytes: Vec<usize>,
    context_synchronizations: usize,
}

#[derive(Serialize)]
struct Manifest {
    cupti_version: u32,
    layout: String,
    clock: String,
    device: String,
    buffers: Vec<String>,
    dropped_records: u64,
    workload: Workload,
}

/// One buffer as CUPTI handed it over.
struct Captured {
    bytes: Vec<u8>,
    strings: Vec<StringAt>,
}

/// The pointer fields of a batch's records and the strings they point at.
fn strings_of(batch: &ActivityBatch<'_>) -> Vec<StringAt> {
    let base = batch.as_bytes().as_ptr() as usize;
    let mut out = Vec::new();
    let mut push = |record: usize, field: usize, s: Option<&CStr>| {
        if let Some(s) = s {
            out.push(StringAt {
                offset: record - base + field,
                text: s.to_string_lossy().into_owned(),
            });
        }
    };
    for r in batch.records().flatten() {
        match r {
            Activity::Kernel(k) => push(
                std::ptr::from_ref(k.raw()) as usize,
                offset_of!(sys::CUpti_ActivityKernel9, name),
                k.name(),
            ),
            Activity::Device(d) => push(
                std::ptr::from_ref(d.raw()) as usize,
                offset_of!(sys::CUpti_ActivityDevice5, name),
                d.name(),
            ),
            Activity::Name(n) => push(
                std::ptr::from_ref(n.raw()) as usize,
                offset_of!(sys::CUpti_ActivityName, name),
                n.name(),
            ),
            Activity::Marker(m) => {
                let at = std::ptr::from_ref(m.raw()) as usize;
                push(at, offset_of!(sys::CUpti_ActivityMarker2, name), m.name());
                push(
                    at,
                    offset_of!(sys::CUpti_ActivityMarker2, domain),
                    m.domain(),
                );
            }
            Activity::Memory(m) => push(
                std::ptr::from_ref(m.raw()) as usize,
                offset_of!(sys::CUpti_ActivityMemory4, name),
                m.name(),
            ),
            _ => {}
        }
    }
    out
}

fn launch_step(
    module: &gpu_tools::cuda::Module<'_>,
    buf: &gpu_tools::cuda::DeviceBuffer<'_>,
) -> gpu_tools::Result<()> {
    let step = module.function(c"step")?;
    let mut ptr = buf.device_ptr();
    let mut words = (buf.len() / 4) as u64;
    let mut params = [
        (&raw mut ptr).cast::<c_void>(),
        (&raw mut words).cast::<c_void>(),
    ];
    // SAFETY: `step` takes a u64 device pointer and a u64 word count; the pointer addresses that many words.
    unsafe { step.launch((64, 1, 1), (256, 1, 1), &mut params) }?;
    Ok(())
}

/// The CUDA work: kernels, copies in each direction, memsets, context synchronisations.
fn workload(args: &Args) -> Result<(String, usize), Box<dyn std::error::Error>> {
    let ctx = Context::primary(args.device)?;
    let info = ctx.driver().device_info(args.device)?;
    let module = ctx.load_module(STEP_PTX)?;
    let mut buf = ctx.alloc(1 << 20)?;
    let mut other = ctx.alloc(1 << 20)?;
    let host = vec![7u8; 1 << 20];
    let mut back = vec![0u8; 1 << 20];
    let mut syncs = 0;
    for (i, n) in MEMSET.iter().enumerate() {
        if i == 0 {
            buf.fill_u32(0x0102_0304)?;
        } else {
            let mut small = ctx.alloc(*n)?;
            small.fill_u32(0xffff_ffff)?;
        }
    }
    for n in HTOD {
        buf.copy_from_host(&host[..n])?;
    }
    for _ in 0..args.kernels {
        launch_step(&module, &buf)?;
    }
    ctx.synchronize()?;
    syncs += 1;
    for n in DTOD {
        let mut part = ctx.alloc(n)?;
        part.copy_from_device(&buf)?;
        other.copy_from_device(&part)?;
    }
    for n in DTOH {
        buf.copy_to_host(&mut back[..n])?;
    }
    ctx.synchronize()?;
    syncs += 1;
    Ok((info.name, syncs))
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<(), Box<dyn std::error::Error>> {
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text + "\n").map_err(|e| format!("write {}: {e}", path.display()))?;
    Ok(())
}

/// Records into a temporary folder beside `--out`, renamed to it once everything is written.
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let out = &args.out;
    if std::fs::read_dir(out).is_ok_and(|mut d| d.next().is_some()) {
        return Err(format!(
            "cannot write the recording {}: the folder is not empty",
            out.display()
        )
        .into());
    }
    let mut partial = out.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    std::fs::create_dir(&partial)
        .map_err(|e| format!("cannot write the recording {}: {e}", out.display()))?;
    let recorded = record(args, &partial);
    let done = recorded.and_then(|()| {
        // An empty folder at `out` is replaced; rename does not replace a folder.
        let _ = std::fs::remove_dir(out);
        std::fs::rename(&partial, out)
            .map_err(|e| format!("move {} to {}: {e}", partial.display(), out.display()).into())
    });
    if done.is_err() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    done
}

fn record(args: &Args, out: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let captured: Arc<Mutex<Vec<Captured>>> = Arc::default();
    let sink = Arc::clone(&captured);
    // Started before the first cuInit, as CUPTI needs.
    let tracer = ActivityTracer::builder()
        .kinds(
            ActivityKinds::CONCURRENT_KERNEL
                | ActivityKinds::MEMCPY
                | ActivityKinds::MEMSET
                | ActivityKinds::SYNCHRONIZATION
                | ActivityKinds::DRIVER
                | ActivityKinds::OVERHEAD
                | ActivityKinds::DEVICE
                | ActivityKinds::CONTEXT,
        )
        .buffer_size(args.buffer_size)
        .start(move |batch| {
            let strings = strings_of(batch);
            if let Ok(mut all) = sink.lock() {
                all.push(Captured {
                    bytes: batch.as_bytes().to_vec(),
                    strings,
                });
            }
        })?;
    let version = tracer.cupti_version();
    let layout = tracer.layout();
    let clock = tracer.clock();
    let (device, syncs) = workload(args)?;
    let report = tracer.stop()?;
    if let Some(panic) = report.panic {
        return Err(format!("the recorder's closure panicked: {panic}").into());
    }
    let captured = std::mem::take(&mut *captured.lock().map_err(|_| "capture lock poisoned")?);
    let mut names = Vec::new();
    for (i, c) in captured.iter().enumerate() {
        let name = format!("buffer-{i:03}");
        let bin = out.join(format!("{name}.bin"));
        std::fs::write(&bin, &c.bytes).map_err(|e| format!("write {}: {e}", bin.display()))?;
        write_json(&out.join(format!("{name}.strings.json")), &c.strings)?;
        println!(
            "{name}: {} bytes, {} strings",
            c.bytes.len(),
            c.strings.len()
        );
        names.push(name);
    }
    write_json(
        &out.join("manifest.json"),
        &Manifest {
            cupti_version: version,
            layout: format!("{layout:?}"),
            clock: format!("{clock:?}"),
            device: device.clone(),
            buffers: names,
            dropped_records: report.stats.dropped_records,
            workload: Workload {
                kernel_name: "step",
                kernels: args.kernels,
                memcpy_htod_bytes: HTOD.to_vec(),
                memcpy_dtoh_bytes: DTOH.to_vec(),
                // Each device-to-device round copies into the part and back out of it.
                memcpy_dtod_bytes: DTOD.iter().flat_map(|n| [*n, *n]).collect(),
                memset_bytes: MEMSET.to_vec(),
                context_synchronizations: syncs,
            },
        },
    )?;
    println!(
        "{device}: CUPTI {version} ({layout:?}), {} records in {} buffers, {} dropped -> {}",
        report.stats.records,
        report.stats.batches,
        report.stats.dropped_records,
        args.out.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, String> {
        Args::parse(args.iter().map(|a| a.to_string()))
    }

    #[test]
    fn options_take_values_and_out_is_needed() {
        let args = parse(&["--out", "fx", "--kernels", "2", "--buffer-size", "8192"]).unwrap();
        assert_eq!(
            (args.out, args.kernels, args.device, args.buffer_size),
            (PathBuf::from("fx"), 2, 0, 8192)
        );
        assert_eq!(parse(&[]).err().unwrap(), "--out DIR is needed");
        assert_eq!(parse(&["--out"]).err().unwrap(), "--out needs a value");
        assert_eq!(
            parse(&["--out", "fx", "--kernels", "two"]).err().unwrap(),
            "--kernels two: invalid digit found in string"
        );
        assert_eq!(
            parse(&["--out", "fx", "--bogus", "1"]).err().unwrap(),
            "unknown option --bogus"
        );
    }

    /// A folder that holds files is refused before any CUDA call; a recording that fails (here: no GPU, or a
    /// missing parent folder) leaves nothing behind.
    #[test]
    fn nothing_is_left_when_the_recording_fails() {
        let dir = std::env::temp_dir().join(format!("xtask-record-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("full")).unwrap();
        std::fs::write(dir.join("full/keep.bin"), b"mine").unwrap();
        let full = parse(&["--out", dir.join("full").to_str().unwrap()]).unwrap();
        let err = run(&full).unwrap_err().to_string();
        assert!(err.ends_with("the folder is not empty"), "{err}");
        assert_eq!(std::fs::read(dir.join("full/keep.bin")).unwrap(), b"mine");
        let orphan = parse(&["--out", dir.join("missing/fx").to_str().unwrap()]).unwrap();
        let err = run(&orphan).unwrap_err().to_string();
        assert!(err.starts_with("cannot write the recording"), "{err}");
        // Fails without a CUDA driver (this machine) or succeeds on a GPU host: never half-written.
        let fresh = parse(&["--out", dir.join("fresh").to_str().unwrap()]).unwrap();
        let recorded = run(&fresh);
        let mut left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        std::fs::remove_dir_all(&dir).unwrap();
        match recorded {
            Ok(()) => assert_eq!(left, ["fresh", "full"]),
            Err(e) => assert_eq!(left, ["full"], "{e}"),
        }
    }
}
