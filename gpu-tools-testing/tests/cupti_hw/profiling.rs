//! CUPTI's counter APIs on a real NVIDIA GPU (feature `nvidia-hw-tests`; CUDA 13 host with Python, PyTorch and
//! Nsight Compute), each against a reference:
//! - PM sampling: an idle GPU reads at most 2% SM active; a bf16 matmul loop in another process at least 80%; a
//!   second sampler gets the typed busy error; dropping the first and starting again works;
//! - range profiler: a copy kernel moving a known number of bytes (larger than L2) reads and writes that many bytes
//!   of DRAM within 2%, and within 2% of `ncu --metrics` on the same kernel in the same run;
//! - PC sampling: a kernel whose hot loop is a dependent-load chase gets most samples, with a fitting stall reason.
//!
//! Prints what it saw (sizes, first samples, values). The tests take one lock: one PM client per GPU.
#![cfg(feature = "nvidia-hw-tests")]

use std::ffi::{CStr, c_void};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use gpu_tools::Error;
use gpu_tools::counters::{DeviceCounters, DeviceSample, mean_values};
use gpu_tools::cuda::Context;
use gpu_tools::cupti::pc_sampling::PcSampler;
use gpu_tools::cupti::pm_sampling::{Interval, PmSampler};
use gpu_tools::cupti::profiler::ProfilingError;
use gpu_tools::cupti::range_profiler::RangeProfiler;

const SM_ACTIVE: &str = "sm__cycles_active.avg.pct_of_peak_sustained_elapsed";
/// The tensor-pipe metric read beside SM activity; `GPU_TOOLS_TEST_TENSOR_METRIC` names another.
fn tensor_metric() -> String {
    std::env::var("GPU_TOOLS_TEST_TENSOR_METRIC")
        .ok()
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| gpu_tools::cupti::top::TOP_METRICS[1].metric.to_string())
}
const COPY_BYTES: u64 = 512 << 20;

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn example(name: &str) -> PathBuf {
    gpu_tools_testing::example(name)
}

/// `$GPU_STAGE_BIN/../python/<name>` on the GPU host, else `gpu-host/python/<name>`.
fn python_script(name: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os("GPU_STAGE_BIN") {
        return PathBuf::from(dir).join("../python").join(name);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../gpu-host/python")
        .join(name)
}

fn ptx() -> &'static CStr {
    CStr::from_bytes_with_nul(
        concat!(include_str!("../../../gpu-host/kernels/counters.ptx"), "\0").as_bytes(),
    )
    .expect("PTX without NUL")
}

fn sample_for(sampler: &mut PmSampler, how_long: Duration) -> Vec<DeviceSample> {
    let mut out = Vec::new();
    let end = Instant::now() + how_long;
    while Instant::now() < end {
        sampler
            .read(Duration::from_millis(100), &mut out)
            .expect("read");
    }
    out
}

fn sampler() -> PmSampler {
    let s = PmSampler::builder(0)
        .metrics([SM_ACTIVE.to_string(), tensor_metric()])
        .interval(Interval::Time(Duration::from_millis(1)))
        .start()
        .expect("PM sampler on device 0");
    println!("PM sampler: {:?}", s.layout());
    s
}

/// A bf16 matmul loop in another process, ready when it says so.
struct Load(Child);

impl Load {
    fn start(seconds: u32) -> Load {
        let mut child = Command::new("python3")
            .arg(python_script("bf16_matmul.py"))
            .args(["--seconds", &seconds.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 bf16_matmul.py");
        let stdout = child.stdout.take().expect("piped");
        let mut lines = BufReader::new(stdout).lines();
        let ready = lines.next().and_then(Result::ok).unwrap_or_default();
        assert_eq!(ready, "bf16_matmul ready", "the load did not start");
        std::thread::spawn(move || lines.for_each(|l| println!("load: {}", l.unwrap_or_default())));
        Load(child)
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn pm_sampling_reads_an_idle_gpu_and_a_busy_one() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _s = serial();
    let mut s = sampler();
    let idle = sample_for(&mut s, Duration::from_secs(1));
    let idle_mean = mean_values(&idle, 2);
    println!(
        "idle: {} samples, first {:?}, mean SM active {:.2}%, tensor {:.2}%",
        idle.len(),
        idle.first(),
        idle_mean[0],
        idle_mean[1]
    );
    assert!(idle.len() >= 500, "{} samples in 1 s at 1 ms", idle.len());
    assert!(
        idle_mean[0] <= 2.0,
        "idle GPU: SM active {:.2}%",
        idle_mean[0]
    );
    let load = Load::start(8);
    std::thread::sleep(Duration::from_millis(500));
    // What was queued while the load started (Python and PyTorch take seconds) is not the busy GPU.
    let mut backlog = Vec::new();
    s.read(Duration::ZERO, &mut backlog).expect("read");
    println!("before the load was ready: {} samples", backlog.len());
    let busy = sample_for(&mut s, Duration::from_secs(2));
    drop(load);
    let busy_mean = mean_values(&busy, 2);
    println!(
        "busy: {} samples, mean SM active {:.2}%, tensor {:.2}%",
        busy.len(),
        busy_mean[0],
        busy_mean[1]
    );
    let report = s.stop().expect("stop");
    println!("report: {:?}", report.stats);
    // Where consecutive samples do not tile the time, what the sampler gave (the first few).
    let mut shown = 0;
    for (i, w) in busy.windows(2).enumerate() {
        if w[1].start_ns != w[0].end_ns && shown < 12 {
            shown += 1;
            println!(
                "samples {i}, {}: [{}, {}] then [{}, {}] (start - previous end {} ns, length {} ns)",
                i + 1,
                w[0].start_ns,
                w[0].end_ns,
                w[1].start_ns,
                w[1].end_ns,
                w[1].start_ns as i128 - w[0].end_ns as i128,
                w[1].end_ns as i128 - w[1].start_ns as i128
            );
        }
    }
    assert!(
        busy_mean[0] >= 80.0,
        "bf16 matmul in another process: SM active {:.2}%",
        busy_mean[0]
    );
    assert!(
        busy_mean[1] > idle_mean[1],
        "the tensor pipe is busier under matmul"
    );
    assert_eq!(report.stats.overflows, 0, "no hardware-buffer overflow");
    // The accounting covers the time: samples read plus periods counted lost or as gaps cover the span of the
    // samples read, one per period (an idle H100 showed about one period in ten without a sample, and no
    // overflow).
    let all: Vec<&DeviceSample> = idle.iter().chain(&backlog).chain(&busy).collect();
    let (first, last) = (all[0], all[all.len() - 1]);
    let periods = (last.end_ns - first.end_ns) as f64 / 1e6;
    let counted = (all.len() - 1) as f64 + report.stats.dropped as f64 + report.stats.gaps as f64;
    println!(
        "{} samples read, {} counted lost and {} gaps ({} at image restarts) over {periods:.0} periods; {} \
         stale (left out, their periods among the gaps); {} samples begun but not completed at image restarts",
        all.len(),
        report.stats.dropped,
        report.stats.gaps,
        report.stats.gaps_at_restart,
        report.stats.stale,
        report.stats.incomplete_at_restart
    );
    assert!(
        (counted - periods).abs() <= 0.02 * periods,
        "{counted} samples read, lost or missing for {periods:.0} periods"
    );
    assert_eq!(report.stats.dropped, 0, "no loss without an overflow");
    // Gaps come with image restarts (no sample while one restarts; stale samples after it are left out).
    assert!(
        report.stats.gaps * 4 <= report.stats.samples,
        "more than a quarter of the periods without a sample: {:?}",
        report.stats
    );
    // Timestamps rise and tile the time under load: each sample starts where the one before ended (within 0.1 ms),
    // or whole periods later where an image restart left periods without a sample (an H200 under a bf16 matmul:
    // one hole of 59 periods in 2 s; those periods are among the gaps counted).
    let mut missing = 0u64;
    for w in busy.windows(2) {
        let period = w[0].end_ns - w[0].start_ns;
        let hole = w[1].start_ns.saturating_sub(w[0].end_ns);
        let periods = (hole + period / 2) / period.max(1);
        assert!(
            w[1].start_ns >= w[0].end_ns.saturating_sub(100_000)
                && hole.abs_diff(periods * period) < 100_000,
            "{:?} then {:?}",
            w[0],
            w[1]
        );
        missing += periods;
    }
    assert!(
        missing <= report.stats.gaps,
        "{missing} periods missing under load, {} gaps counted",
        report.stats.gaps
    );
}

#[test]
fn one_pm_client_per_gpu_and_a_dropped_sampler_frees_it() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _s = serial();
    let first = sampler();
    // In this process: refused before any vendor call.
    let second = PmSampler::builder(0).metrics([SM_ACTIVE]).start();
    match second {
        Err(Error::CuptiCounters(e @ ProfilingError::AlreadySampling { device: 0 })) => {
            println!("second sampler of this process: {e}")
        }
        other => panic!("a second sampler must be refused, got {other:?}"),
    }
    // In another process (`gpu-tools top`, named device 0: on a host of several GPUs it would watch the others and
    // leave this one out with a note, exit 0): CUPTI finds the counters busy.
    let other = std::process::Command::new(gpu_tools_testing::gpu_tools_cli())
        .args(["top", "--device", "0", "--duration", "1"])
        .output()
        .expect("gpu-tools runs");
    let stderr = String::from_utf8_lossy(&other.stderr);
    println!(
        "gpu-tools top while this process samples: {:?}: {stderr}",
        other.status
    );
    assert_eq!(other.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("in use"), "{stderr}");
    drop(first);
    let mut again = sampler();
    let got = sample_for(&mut again, Duration::from_millis(300));
    assert!(
        !got.is_empty(),
        "a sampler started after the first was dropped samples"
    );
    again.stop().expect("stop");
}

#[test]
fn bad_input_is_refused_before_the_device_is_touched() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _s = serial();
    let e = PmSampler::builder(0)
        .metrics(["sm__cycles_actve.avg"])
        .start()
        .unwrap_err();
    println!("{e}");
    assert!(
        matches!(e, Error::CuptiCounters(ProfilingError::UnknownMetric { ref close, .. }) if !close.is_empty())
    );
    let e = PmSampler::builder(99)
        .metrics([SM_ACTIVE])
        .start()
        .unwrap_err();
    println!("{e}");
    assert!(matches!(
        e,
        Error::CuptiCounters(ProfilingError::NoSuchDevice { index: 99, .. })
    ));
    // A metric of the range profiler only.
    let e = PmSampler::builder(0)
        .metrics(["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"])
        .start()
        .unwrap_err();
    println!("{e}");
    assert!(matches!(
        e,
        Error::CuptiCounters(
            ProfilingError::NotSupportedByMethod { .. } | ProfilingError::TooManyPasses { .. }
        )
    ));
    let e = PmSampler::builder(0)
        .metrics([SM_ACTIVE])
        .hardware_buffer(64)
        .start()
        .unwrap_err();
    println!("{e}");
    assert!(matches!(
        e,
        Error::CuptiCounters(ProfilingError::BufferTooSmall { .. } | ProfilingError::Vendor { .. })
    ));
    // The counters are free afterwards.
    sampler()
        .stop()
        .expect("a sampler starts after refused ones");
}

/// `ncu --metrics` on the copy example: (dram__bytes_read.sum, dram__bytes_write.sum) of its one kernel.
fn ncu_copy(bytes: u64) -> (f64, f64) {
    let ncu = ["ncu", "/usr/local/cuda/bin/ncu"]
        .into_iter()
        .find(|n| {
            Command::new(n)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("ncu (Nsight Compute) on PATH or in /usr/local/cuda/bin");
    // As the range profiler measures: no cache flush before the kernel (ncu's default flushes the dirty lines
    // an earlier fill left in L2, which the kernel would otherwise write back), no clock lock.
    let out = Command::new(ncu)
        .args([
            "--cache-control",
            "none",
            "--clock-control",
            "none",
            "--metrics",
            "dram__bytes_read.sum,dram__bytes_write.sum",
            "--csv",
            "--page",
            "raw",
            "--print-units",
            "base",
        ])
        .arg(example("counter_kernels"))
        .args(["copy", "--bytes", &bytes.to_string()])
        .output()
        .expect("run ncu");
    let text = String::from_utf8_lossy(&out.stdout);
    println!(
        "ncu (exit {:?}):\n{text}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Vec<String>> = text
        .lines()
        .filter(|l| l.starts_with('"'))
        .map(|l| {
            l.split("\",\"")
                .map(|c| c.trim_matches('"').replace(',', ""))
                .collect()
        })
        .collect();
    let header = rows.first().expect("ncu CSV header");
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("ncu column {name}"))
    };
    let (r, w) = (col("dram__bytes_read.sum"), col("dram__bytes_write.sum"));
    // Row 1 holds units; the kernel is the last row.
    let units = &rows[1];
    let row = rows.last().expect("a kernel row");
    let scale = |unit: &str| match unit {
        "byte" => 1.0,
        "Kbyte" => 1e3,
        "Mbyte" => 1e6,
        "Gbyte" => 1e9,
        other => panic!("ncu unit {other}"),
    };
    let v = |c: usize| row[c].parse::<f64>().expect("a number") * scale(&units[c]);
    (v(r), v(w))
}

#[test]
fn range_profiler_counts_the_bytes_a_copy_moves_as_ncu_does() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _s = serial();
    let ctx = Context::primary(0).expect("context");
    let module = ctx.load_module(ptx()).expect("PTX");
    let copy = module.function(c"copy16").expect("copy16");
    let src = ctx.alloc(COPY_BYTES as usize).expect("src");
    let mut dst = ctx.alloc(COPY_BYTES as usize).expect("dst");
    dst.fill_u32(0).expect("fill");
    ctx.synchronize().expect("sync");
    let mut p = RangeProfiler::builder(&ctx)
        .metrics([
            "dram__bytes_read.sum",
            "dram__bytes_write.sum",
            "gpu__time_duration.sum",
        ])
        .start()
        .expect("range profiler");
    println!(
        "range profiler: {} passes, {} bytes of counter data",
        p.passes_needed(),
        p.counter_data_bytes()
    );
    let (mut s, mut d, mut n) = (src.device_ptr(), dst.device_ptr(), COPY_BYTES / 16);
    let mut params: [*mut c_void; 3] = [
        (&mut s as *mut u64).cast(),
        (&mut d as *mut u64).cast(),
        (&mut n as *mut u64).cast(),
    ];
    // SAFETY: copy16 takes (u64 src, u64 dst, u64 n); both buffers hold n * 16 bytes.
    unsafe { copy.launch((1024, 1, 1), (256, 1, 1), &mut params) }.expect("launch");
    ctx.synchronize().expect("sync");
    let r = p.results().expect("results");
    println!("ranges: {:?}, dropped {}", r.ranges, r.dropped);
    assert_eq!((r.ranges.len(), r.dropped), (1, 0));
    let (read, write) = (r.ranges[0].values[0], r.ranges[0].values[1]);
    let bytes = COPY_BYTES as f64;
    // ncu needs the counters this process holds while the profiler lives.
    drop(p);
    let (ncu_read, ncu_write) = ncu_copy(COPY_BYTES);
    println!(
        "copy of {bytes} bytes: read {read} (ncu {ncu_read}), write {write} (ncu {ncu_write})"
    );
    let within = |a: f64, b: f64| (a - b).abs() <= 0.02 * b;
    assert!(within(read, bytes), "DRAM read {read} for {bytes} bytes");
    assert!(within(write, bytes), "DRAM write {write} for {bytes} bytes");
    assert!(within(read, ncu_read), "read {read}, ncu {ncu_read}");
    assert!(within(write, ncu_write), "write {write}, ncu {ncu_write}");
}

#[test]
fn pc_sampling_finds_the_hot_loop_and_its_stall() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _s = serial();
    let ctx = Context::primary(0).expect("context");
    let module = ctx.load_module(ptx()).expect("PTX");
    let chase = module.function(c"chase").expect("chase");
    let copy = module.function(c"copy16").expect("copy16");
    // A random cycle over 64 Mi indices (256 MiB).
    let n: u32 = 64 << 20;
    let mut next: Vec<u32> = (0..n).collect();
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for i in (1..next.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        next.swap(i, (x % i as u64) as usize);
    }
    let bytes: Vec<u8> = next.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut dev = ctx.alloc(bytes.len()).expect("chain");
    dev.copy_from_host(&bytes).expect("upload");
    let out = ctx.alloc(65536 * 4).expect("out");
    let small = ctx.alloc(16 << 20).expect("copy buffer");
    let sampler = PcSampler::builder(&ctx)
        .period(10)
        .start()
        .expect("PC sampler");
    println!(
        "stall reasons: {:?}",
        sampler
            .stall_reasons()
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
    );
    // A short copy as a second function, then the chase.
    let (mut s, mut d, mut k) = (small.device_ptr(), small.device_ptr(), 1u64 << 20);
    let mut cp: [*mut c_void; 3] = [
        (&mut s as *mut u64).cast(),
        (&mut d as *mut u64).cast(),
        (&mut k as *mut u64).cast(),
    ];
    // SAFETY: an in-place copy of 16 MiB in a 16 MiB buffer.
    unsafe { copy.launch((64, 1, 1), (256, 1, 1), &mut cp) }.expect("copy");
    let (mut p, mut steps, mut o) = (dev.device_ptr(), 2048u32, out.device_ptr());
    let mut params: [*mut c_void; 3] = [
        (&mut p as *mut u64).cast(),
        (&mut steps as *mut u32).cast(),
        (&mut o as *mut u64).cast(),
    ];
    // SAFETY: chase takes (u64 next, u32 steps, u64 out); 65536 threads start below n; `out` holds one u32 each.
    unsafe { chase.launch((256, 1, 1), (256, 1, 1), &mut params) }.expect("chase");
    ctx.synchronize().expect("sync");
    let samples = sampler.finish().expect("PC samples");
    let functions = samples.functions();
    for f in functions.iter().take(3) {
        let top: Vec<(&str, u64)> = f
            .stalls
            .iter()
            .take(3)
            .map(|(r, n)| (samples.reason_name(*r), *n))
            .collect();
        println!(
            "{}: {} samples, top {top:?}, hot PCs {:?}",
            f.name,
            f.samples,
            &f.hot_pcs[..f.hot_pcs.len().min(3)]
        );
    }
    println!(
        "total {}, dropped {}, records {}",
        samples.total_samples,
        samples.dropped_samples,
        samples.records.len()
    );
    let all: u64 = functions.iter().map(|f| f.samples).sum();
    let top = functions.first().expect("some samples");
    assert_eq!(
        &*top.name, "chase",
        "the hot loop's function has the most samples"
    );
    assert!(
        top.samples * 2 > all,
        "chase has {} of {all} samples",
        top.samples
    );
    let reason = samples.reason_name(top.top_stall().expect("a stall").0);
    assert!(
        reason.contains("long_scoreboard"),
        "a dependent global load chain stalls on the long scoreboard, got {reason}"
    );
}
