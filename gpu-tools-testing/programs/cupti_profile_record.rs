//! Records real counter data on a GPU host, for `tests/wheels/cupti_counters_recorded.rs` to decode without a GPU: a range
//! profiler run (auto ranges, kernel replay) over copy kernels of known sizes, and PM sampling while they run. Each
//! counter-data image is saved in the crate's container (`*.gtc`), with `manifest.json` naming the chip, metrics
//! and the values the GPU host evaluated; it also prints what it saw (sizes, statuses, first samples).
//!
//!     cupti_profile_record --out tests/fixtures/cupti-counters/h100-cuda13

use std::ffi::{CStr, c_void};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use gpu_tools::cuda::Context;
use gpu_tools::cupti::pm_sampling::{Interval, PmSampler};
use gpu_tools::cupti::profiler::Method;
use gpu_tools::cupti::profiler::image::{CounterDataFile, RecordInfo};
use gpu_tools::cupti::range_profiler::RangeProfiler;
use serde_json::json;

#[derive(Parser, Debug)]
#[command(about = "Record CUPTI counter data (range profiler and PM sampling) as test fixtures")]
struct Cli {
    /// Folder to write into (created).
    #[arg(long)]
    out: PathBuf,
    /// CUDA device.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

const RANGE_METRICS: [&str; 3] = [
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "gpu__time_duration.sum",
];
const PM_METRICS: [&str; 3] = [
    "sm__cycles_active.avg",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum.per_second",
];
/// Copy sizes, bytes read (and written) per launch: all larger than an H100's 50 MiB L2.
const COPIES: [u64; 3] = [64 << 20, 128 << 20, 256 << 20];

/// A decode's counter-data image, the image index of its first sample, and its samples (start, end, values).
type SavedBatch = (Vec<u8>, usize, Vec<(u64, u64, Vec<f64>)>);

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cupti_profile_record: {e}");
            ExitCode::FAILURE
        }
    }
}

fn ptx() -> &'static CStr {
    match CStr::from_bytes_with_nul(
        concat!(include_str!("../../gpu-host/kernels/counters.ptx"), "\0").as_bytes(),
    ) {
        Ok(c) => c,
        Err(_) => c"",
    }
}

fn run(cli: &Cli) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(&cli.out).map_err(|e| io(&cli.out, e))?;
    let ctx = Context::primary(cli.device)?;
    let module = ctx.load_module(ptx())?;
    let copy = module.function(c"copy16")?;
    let max = *COPIES.iter().max().unwrap_or(&0) as usize;
    let src = ctx.alloc(max)?;
    let mut dst = ctx.alloc(max)?;
    dst.fill_u32(0)?;
    let launch = |bytes: u64| -> gpu_tools::Result<()> {
        let (mut s, mut d, mut n) = (src.device_ptr(), dst.device_ptr(), bytes / 16);
        let mut params = [
            (&mut s as *mut u64).cast::<c_void>(),
            (&mut d as *mut u64).cast::<c_void>(),
            (&mut n as *mut u64).cast::<c_void>(),
        ];
        // SAFETY: copy16 takes (u64 src, u64 dst, u64 n); both buffers hold at least n * 16 bytes.
        unsafe { copy.launch((1024, 1, 1), (256, 1, 1), &mut params) }?;
        Ok(())
    };
    let mut manifest = Vec::new();

    // Range profiler: one range per copy.
    let mut profiler = RangeProfiler::builder(&ctx)
        .metrics(RANGE_METRICS)
        .keep_counter_data(true)
        .max_ranges(16)
        .start()?;
    println!(
        "range profiler: chip {}, {} passes, counter data {} bytes for {} ranges",
        profiler.chip(),
        profiler.passes_needed(),
        profiler.counter_data_bytes(),
        profiler.max_ranges()
    );
    for bytes in COPIES {
        launch(bytes)?;
    }
    ctx.synchronize()?;
    let results = profiler.results()?;
    println!(
        "range profiler: {} ranges, {} dropped",
        results.ranges.len(),
        results.dropped
    );
    for (r, bytes) in results.ranges.iter().zip(COPIES) {
        println!(
            "  range {:?}: {:?} (copied {bytes} bytes each way)",
            r.name, r.values
        );
    }
    let chip = profiler.chip().to_string();
    drop(profiler);
    let file = CounterDataFile {
        method: Method::RangeProfiler,
        chip: chip.clone(),
        metrics: results.metrics.clone(),
        records: results
            .ranges
            .iter()
            .map(|r| RecordInfo {
                name: r.name.clone(),
                start: 0,
                end: 0,
            })
            .collect(),
        image: results.counter_data.clone().unwrap_or_default(),
    };
    let path = cli.out.join("range-copies.gtc");
    std::fs::write(&path, file.to_bytes()).map_err(|e| io(&path, e))?;
    manifest.push(json!({
        "file": "range-copies.gtc",
        "method": "range",
        "chip": chip,
        "metrics": results.metrics,
        "bytes_per_copy": COPIES,
        "records": results.ranges.iter().map(|r| json!({"name": r.name, "values": r.values})).collect::<Vec<_>>(),
    }));

    // PM sampling at 1 ms while the copies run again, for about 300 ms.
    let batches: Arc<Mutex<Vec<SavedBatch>>> = Arc::default();
    let sink = Arc::clone(&batches);
    let sampler = PmSampler::builder(cli.device)
        .metrics(PM_METRICS)
        .interval(Interval::Time(Duration::from_millis(1)))
        .keep_counter_data(true)
        .start_with(move |b| {
            if let Some((image, first)) = b.counter_data() {
                let samples = b
                    .iter()
                    .map(|s| (s.start_ns, s.end_ns, s.values.to_vec()))
                    .collect::<Vec<_>>();
                if !samples.is_empty() {
                    if let Ok(mut v) = sink.lock() {
                        if v.len() < 3 {
                            v.push((image.to_vec(), first, samples));
                        }
                    }
                }
            }
        })?;
    println!("PM sampling: {:?}", sampler.layout());
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(300) {
        launch(COPIES[2])?;
        ctx.synchronize()?;
    }
    let report = sampler.stop()?;
    println!("PM sampling: {:?}", report.stats);
    let batches = batches.lock().map(|v| v.clone()).unwrap_or_default();
    for (i, (image, first, samples)) in batches.iter().enumerate() {
        for (start, end, values) in samples.iter().take(3) {
            println!("  batch {i} sample [{start}, {end}] {values:?}");
        }
        let name = format!("pm-{i}.gtc");
        let file = CounterDataFile {
            method: Method::PmSampling,
            chip: chip.clone(),
            metrics: PM_METRICS.iter().map(|s| s.to_string()).collect(),
            records: Vec::new(),
            image: image.clone(),
        };
        let path = cli.out.join(&name);
        std::fs::write(&path, file.to_bytes()).map_err(|e| io(&path, e))?;
        manifest.push(json!({
            "file": name,
            "method": "pm",
            "chip": chip,
            "metrics": PM_METRICS,
            "first_index": first,
            "records": samples.iter().map(|(s, e, v)| json!({"start": s, "end": e, "values": v})).collect::<Vec<_>>(),
        }));
    }
    let info = ctx.driver().device_info(cli.device)?;
    let cupti = gpu_tools::cupti::CuptiLibrary::load()?;
    let m = json!({
        "device": info.name,
        "cupti_version": cupti.version().unwrap_or(0),
        "driver_version": ctx.driver().version().unwrap_or(0),
        "files": manifest,
    });
    let path = cli.out.join("manifest.json");
    std::fs::write(&path, serde_json::to_string_pretty(&m).unwrap_or_default())
        .map_err(|e| io(&path, e))?;
    println!(
        "wrote {} files and manifest.json to {}",
        batches.len() + 1,
        cli.out.display()
    );
    Ok(())
}

fn io(path: &std::path::Path, e: std::io::Error) -> String {
    format!("{}: {e}", path.display())
}
