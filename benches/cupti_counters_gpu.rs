//! GPU-host benchmarks of the counter APIs (run as a bench binary, one run each, on a CUDA 13 host with Python,
//! PyTorch and Nsight Compute):
//!
//! - `cost`: the sampled program's time with no sampler, with PM sampling at 10 ms and at 1 ms (another process: a
//!   DRAM-bound copy loop and a bf16 matmul loop), interleaved rounds, medians. Bar: at most 1% slower.
//! - `sustained`: PM sampling at 1 ms for 60 s under a matmul load: every sample decoded, no overflow, no loss.
//! - `torch`: `gpu-host/python/torch_train.py --steps 5` natively, under the injection library's per-kernel
//!   profile (three single-pass metrics; the four metrics of the `basic` set with each kernel name profiled once;
//!   the `basic` set on every launch), interleaved rounds, medians; then `ncu --metrics` with the same four once;
//!   the program's CUDA part (its `cuda_ms`) of each, and the relative differences from ncu's per-kernel values.
//!   Bar: at most 2x native.
//!
//!     bench-cupti_counters_gpu [cost] [sustained] [torch] [--rounds N] [--seconds S]
//!
//! Finds `counter_kernels` and the injection library as the tests do (`$GPU_STAGE_BIN`, else `target/release`),
//! and the Python scripts in `$GPU_STAGE_BIN/../python` or `gpu-host/python`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpu_tools::counters::DeviceCounters;
use gpu_tools::cupti::pm_sampling::{Interval, PmSampler};
use gpu_tools::trace::KernelMetricsRecord;
use gpu_tools_injection::profile::{self, BASIC_SET, ProfileRequest};

fn stage_dir() -> Option<PathBuf> {
    std::env::var_os("GPU_STAGE_BIN").map(PathBuf::from)
}

fn example(name: &str) -> PathBuf {
    if let Some(d) = stage_dir() {
        return d.join(format!("example-{name}"));
    }
    let exe = std::env::current_exe().expect("bench path");
    exe.parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>")
        .join("examples")
        .join(name)
}

fn script(name: &str) -> PathBuf {
    match stage_dir() {
        Some(d) => d.join("../python").join(name),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("gpu-host/python")
            .join(name),
    }
}

fn inject_lib() -> PathBuf {
    if let Some(p) = std::env::var_os("GPU_TOOLS_INJECT_LIB") {
        return PathBuf::from(p);
    }
    if let Some(d) = stage_dir() {
        return d.join("libgpu_tools_inject.so");
    }
    let exe = std::env::current_exe().expect("bench path");
    exe.parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>")
        .join("libgpu_tools_inject.so")
}

/// The number after `key` in a program's output (`elapsed_ms 12.5`).
fn field(text: &str, key: &str) -> Option<f64> {
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if w == key {
            return words.next()?.parse().ok();
        }
    }
    None
}

fn run_timed(cmd: &mut Command, key: &str) -> f64 {
    let out = cmd.output().expect("run the workload");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{cmd:?} failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    field(&text, key).unwrap_or_else(|| panic!("no {key} in {text}"))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn sampler(interval: Duration) -> PmSampler {
    PmSampler::builder(0)
        .metrics([
            "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
            "dram__bytes_read.sum.per_second",
        ])
        .interval(Interval::Time(interval))
        .start()
        .expect("PM sampler")
}

/// Reads a sampler until dropped, as a tool would, so the decode thread's work is part of the cost.
fn drain_while(s: &mut PmSampler, work: impl FnOnce() -> f64 + Send) -> f64 {
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let h = scope.spawn(|| {
            let r = work();
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            r
        });
        let mut buf = Vec::new();
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            buf.clear();
            let _ = s.read(Duration::from_millis(100), &mut buf);
        }
        h.join().expect("workload thread")
    })
}

fn cost(rounds: usize) {
    println!(
        "== PM sampling cost: the sampled program's time (median of {rounds} interleaved rounds)"
    );
    // GPU_TOOLS_BENCH_PM_INTERVALS=10,1 (milliseconds) names the sampling intervals.
    let intervals: Vec<(String, Duration)> = std::env::var("GPU_TOOLS_BENCH_PM_INTERVALS")
        .unwrap_or_else(|_| "10,1".into())
        .split(',')
        .filter_map(|ms| ms.trim().parse::<u64>().ok())
        .map(|ms| (format!("{ms} ms"), Duration::from_millis(ms)))
        .collect();
    type MakeCommand = Box<dyn Fn() -> Command + Sync>;
    let workloads: Vec<(&str, MakeCommand, &str)> = vec![
        (
            "copy 256 MiB x 8000",
            Box::new(|| {
                let mut c = Command::new(example("counter_kernels"));
                c.args([
                    "copy",
                    "--bytes",
                    &(256u64 << 20).to_string(),
                    "--repeat",
                    "8000",
                ]);
                c
            }),
            "elapsed_ms",
        ),
        (
            "bf16 matmul 8192 x 1500",
            Box::new(|| {
                let mut c = Command::new("python3");
                c.arg(script("bf16_matmul.py")).args(["--iters", "1500"]);
                c
            }),
            "elapsed_ms",
        ),
    ];
    for (name, make, key) in &workloads {
        let mut times: HashMap<&str, Vec<f64>> = HashMap::new();
        for _ in 0..rounds {
            times
                .entry("none")
                .or_default()
                .push(run_timed(&mut make(), key));
            for &(ref label, interval) in &intervals {
                let mut s = sampler(interval);
                let t = drain_while(&mut s, || run_timed(&mut make(), key));
                let r = s.stop().expect("stop");
                assert_eq!(r.stats.overflows, 0, "{name} at {label}: overflow");
                times.entry(label.as_str()).or_default().push(t);
            }
        }
        let base = median(times.get_mut("none").expect("baseline"));
        println!("{name}: no sampler {base:.1} ms");
        for (label, _) in &intervals {
            let m = median(times.get_mut(label.as_str()).expect("runs"));
            let pct = (m / base - 1.0) * 100.0;
            println!(
                "{name}: PM sampling at {label}: {m:.1} ms ({pct:+.2}%, bar <= 1%) {}",
                if pct <= 1.0 { "PASS" } else { "OVER" }
            );
        }
    }
}

fn sustained(seconds: u64) {
    println!("== sustained decode: PM sampling at 1 ms for {seconds} s under a bf16 matmul load");
    let mut load = Command::new("python3")
        .arg(script("bf16_matmul.py"))
        .args(["--seconds", &(seconds + 10).to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("load");
    let mut lines = BufReader::new(load.stdout.take().expect("piped")).lines();
    assert_eq!(
        lines.next().and_then(Result::ok).as_deref(),
        Some("bf16_matmul ready")
    );
    let mut s = sampler(Duration::from_millis(1));
    println!("layout: {:?}", s.layout());
    let t0 = Instant::now();
    let mut got = 0usize;
    let mut lost = 0u64;
    let mut buf = Vec::new();
    let mut sm = 0.0;
    while t0.elapsed() < Duration::from_secs(seconds) {
        buf.clear();
        let st = s.read(Duration::from_millis(200), &mut buf).expect("read");
        got += st.samples;
        lost += st.dropped;
        sm += buf.iter().map(|x| x.values[0]).sum::<f64>();
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let report = s.stop().expect("stop");
    let _ = load.kill();
    let _ = load.wait();
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    // SAFETY: filled above (zeroed if the call failed).
    let u = unsafe { usage.assume_init() };
    let cpu = (u.ru_utime.tv_sec + u.ru_stime.tv_sec) as f64
        + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) as f64 / 1e6;
    println!(
        "{got} samples in {elapsed:.1} s ({:.0}/s), mean SM active {:.1}%, lost {lost}; {:?}; process CPU {cpu:.1} s ({:.1}% of one core)",
        got as f64 / elapsed,
        sm / got.max(1) as f64,
        report.stats,
        100.0 * cpu / elapsed
    );
    let ok = report.stats.overflows == 0
        && report.stats.dropped == 0
        && got as f64 >= 0.95 * elapsed * 1000.0;
    println!(
        "sustained decode: {}",
        if ok {
            "PASS (no overflow, no loss)"
        } else {
            "FAIL"
        }
    );
}

/// ncu's per-kernel rows: (mangled name, metric -> value in base units).
fn ncu_rows(text: &str) -> Vec<(String, HashMap<String, f64>)> {
    let rows: Vec<Vec<String>> = text
        .lines()
        .filter(|l| l.starts_with('"'))
        .map(|l| {
            l.split("\",\"")
                .map(|c| c.trim_matches('"').to_string())
                .collect()
        })
        .collect();
    let Some(header) = rows.first() else {
        return Vec::new();
    };
    let name = header.iter().position(|h| h == "Kernel Name");
    rows.iter()
        .skip(2)
        .map(|r| {
            let values = header
                .iter()
                .zip(r)
                .filter(|(h, _)| h.contains("__"))
                .filter_map(|(h, v)| {
                    v.replace(',', "")
                        .parse::<f64>()
                        .ok()
                        .map(|v| (h.clone(), v))
                })
                .collect();
            (
                name.and_then(|i| r.get(i)).cloned().unwrap_or_default(),
                values,
            )
        })
        .collect()
}

fn torch(rounds: usize) {
    println!(
        "== per-kernel profile vs ncu --metrics on torch_train.py --steps 5 ({}), {rounds} interleaved rounds",
        BASIC_SET.join(",")
    );
    let native = || {
        let mut c = Command::new("python3");
        c.arg(script("torch_train.py")).args(["--steps", "5"]);
        run_timed(&mut c, "cuda_ms")
    };
    let profiled = |metrics: &[&str], per_kernel: Option<u32>| {
        // profile::run inherits stdio; the program's cuda_ms is captured through a wrapper shell.
        let mut wrapped = Command::new("sh");
        let out_file =
            std::env::temp_dir().join(format!("torch-profile-{}.txt", std::process::id()));
        wrapped.arg("-c").arg(format!(
            "python3 {} --steps 5 > {}",
            script("torch_train.py").display(),
            out_file.display()
        ));
        let mut request = ProfileRequest::new(metrics.iter().map(|s| s.to_string()).collect());
        request.launches_per_kernel = per_kernel;
        let run = profile::run(wrapped, &inject_lib(), &request).expect("profiled run");
        let text = std::fs::read_to_string(&out_file).unwrap_or_default();
        let _ = std::fs::remove_file(&out_file);
        let ms = field(&text, "cuda_ms").unwrap_or(f64::NAN);
        println!(
            "  {}{}: cuda_ms {ms:.1}, {} launches profiled, {} kernel records, {} losses{}",
            if metrics.len() == BASIC_SET.len() {
                "basic".to_string()
            } else {
                metrics.join(",")
            },
            per_kernel.map_or(String::new(), |n| format!(" --launches-per-kernel {n}")),
            run.metrics.len(),
            run.kernels.len(),
            run.losses.len(),
            run.notices
                .iter()
                .map(|n| format!("; notice: {}", n.text))
                .collect::<String>()
        );
        (ms, run)
    };
    // Native; the three single-pass metrics (sm__throughput needs several replay passes per kernel); the basic
    // set with each kernel name profiled once (later steps repeat the first one's kernels and run unreplayed);
    // the basic set on every launch.
    let mut times: [Vec<f64>; 4] = Default::default();
    let mut last = None;
    for round in 1..=rounds {
        println!("round {round}");
        let ms = native();
        println!("  native: cuda_ms {ms:.1}");
        times[0].push(ms);
        times[1].push(profiled(&BASIC_SET[..3], None).0);
        let (ms, first) = profiled(&BASIC_SET, Some(1));
        times[2].push(ms);
        let (ms, every) = profiled(&BASIC_SET, None);
        times[3].push(ms);
        last = Some((first, every));
    }
    let Some((first, run)) = last else { return };
    let [mut native_times, single, first_only, every] = times;
    let native_ms = median(&mut native_times);
    for (label, mut t) in [
        ("three single-pass metrics", single),
        ("basic, --launches-per-kernel 1", first_only),
        ("basic, every launch", every),
    ] {
        let m = median(&mut t);
        println!(
            "median: gpu-tools profile {label}: cuda_ms {m:.1} against native {native_ms:.1}: {:.2}x (bar <= 2x)",
            m / native_ms
        );
    }

    let t0 = Instant::now();
    let ncu = Command::new("ncu")
        // Like the range profiler: no cache flush and no clock lock between passes (ncu's defaults flush the
        // caches, which turns L2 hits of small kernels into DRAM reads, and lock the clocks to base).
        .args([
            "--cache-control",
            "none",
            "--clock-control",
            "none",
            "--metrics",
            &BASIC_SET.join(","),
            "--csv",
            "--page",
            "raw",
            "--print-units",
            "base",
        ])
        .args(["--print-kernel-base", "mangled", "python3"])
        .arg(script("torch_train.py"))
        .args(["--steps", "5"])
        .output()
        .expect("ncu");
    let ncu_text = String::from_utf8_lossy(&ncu.stdout);
    let ncu_ms = field(&ncu_text, "cuda_ms").unwrap_or(f64::NAN);
    let rows = ncu_rows(&ncu_text);
    println!(
        "ncu: cuda_ms {ncu_ms:.1} ({:.2}x the native median) (wall {:.1} s), {} kernels",
        ncu_ms / native_ms,
        t0.elapsed().as_secs_f64(),
        rows.len()
    );
    // Full run: record k is launch k. Limited run: a record's launch is its correlation id's place among the
    // kernel records' (every launch has one).
    let all: Vec<(usize, &KernelMetricsRecord)> = run.metrics.iter().enumerate().collect();
    compare_with_ncu("every launch", &all, &rows);
    let mut order: Vec<u32> = first.kernels.iter().map(|k| k.correlation).collect();
    order.sort_unstable();
    let placed: Vec<(usize, &KernelMetricsRecord)> = first
        .metrics
        .iter()
        .filter_map(|m| order.binary_search(&m.correlation).ok().map(|i| (i, m)))
        .collect();
    println!(
        "--launches-per-kernel 1: {} of {} records placed among {} kernel records",
        placed.len(),
        first.metrics.len(),
        order.len()
    );
    compare_with_ncu("--launches-per-kernel 1", &placed, &rows);
    let mut names_match = 0;
    for (ours, theirs) in run.metrics.iter().zip(&rows) {
        names_match += usize::from(*ours.kernel == *theirs.0);
    }
    println!(
        "kernels compared by launch order: {} (ours {}, ncu {}), names equal for {names_match}",
        rows.len().min(run.metrics.len()),
        run.metrics.len(),
        rows.len()
    );
}

/// Prints, per metric, the largest and median relative difference from ncu's value for the same launch.
fn compare_with_ncu(
    label: &str,
    ours: &[(usize, &KernelMetricsRecord)],
    rows: &[(String, HashMap<String, f64>)],
) {
    for metric in BASIC_SET {
        let (mut worst, mut worst_at, mut worst_big) = (0.0f64, 0usize, 0.0f64);
        let mut big_rel = Vec::new();
        let mut names_differ = 0;
        for (i, record) in ours {
            let Some(theirs) = rows.get(*i) else { continue };
            if *record.kernel != *theirs.0 {
                names_differ += 1;
                continue;
            }
            let (Some(a), Some(b)) = (record.value(metric), theirs.1.get(metric).copied()) else {
                continue;
            };
            let rel = (a - b).abs() / b.abs().max(1e-12);
            if rel > worst {
                (worst, worst_at) = (rel, *i);
            }
            let big = match metric {
                "gpu__time_duration.sum" => b >= 10_000.0,
                m if m.starts_with("dram__") => b >= 1e6,
                _ => b >= 10.0,
            };
            if big {
                worst_big = worst_big.max(rel);
                big_rel.push(rel);
            }
        }
        big_rel.sort_by(f64::total_cmp);
        let median_big = big_rel.get(big_rel.len() / 2).copied().unwrap_or(f64::NAN);
        println!(
            "{label}: {metric}: largest relative difference from ncu {:.2}% (launch {worst_at}: {}); over the {} launches with large values: largest {:.2}%, median {:.2}%{}",
            worst * 100.0,
            rows.get(worst_at).map_or("", |r| r.0.as_str()),
            big_rel.len(),
            worst_big * 100.0,
            median_big * 100.0,
            if names_differ > 0 {
                format!("; {names_differ} launches left out: kernel names differ from ncu's")
            } else {
                String::new()
            }
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let mut rounds = 3;
    let mut seconds = 60;
    let mut what = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rounds" => rounds = it.next().and_then(|v| v.parse().ok()).unwrap_or(rounds),
            "--seconds" => seconds = it.next().and_then(|v| v.parse().ok()).unwrap_or(seconds),
            w => what.push(w.to_string()),
        }
    }
    if what.is_empty() {
        what = vec!["cost".into(), "sustained".into(), "torch".into()];
    }
    for w in what {
        match w.as_str() {
            "cost" => cost(rounds),
            "sustained" => sustained(seconds),
            "torch" => torch(rounds),
            other => eprintln!("unknown part {other:?}: cost, sustained, torch"),
        }
    }
}
