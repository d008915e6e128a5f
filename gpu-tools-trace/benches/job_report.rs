//! What merging the trace files of a whole job and making the `stragglers` report costs, in time and peak memory,
//! at 64 and 512 ranks: `cargo bench -p gpu-tools-trace --bench job_report`.
//!
//! The job is the test support's synthetic one ([`JobSpec::large`]): 8 ranks a host, steps of 20 ms with 100
//! kernels and their launch calls, four AllReduce buckets and an NVTX range each (about 5,000 kernels a second per
//! rank), over 5 seconds (`GPU_TOOLS_JOB_SECONDS` to change). Its files are written to a temporary folder first;
//! then, each in a process of its own (so that its peak resident memory is its own), on one thread:
//! - `decode` (the baseline): reading every file's records and dropping them, as any report must;
//! - `stragglers`: the same reading into [`Analysis::for_reports`] with `stragglers` alone, then the report.
//!
//! Prints a line per case: ranks, records, file size, seconds and peak resident memory (`VmHWM`).

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use gpu_tools_testing::job::JobSpec;
use gpu_tools_trace::file::{TraceItem, TraceReader};
use gpu_tools_trace::report::{Analysis, STRAGGLERS};

const CHILD: &str = "GPU_TOOLS_JOB_BENCH_CHILD";

fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("bench folder")
        .map(|e| e.expect("entry").path())
        .collect();
    v.sort();
    v
}

/// One measurement, in this process: prints `records seconds peak_kib`.
fn child(mode: &str, dir: &Path) {
    let files = files_in(dir);
    let started = Instant::now();
    let mut records = 0u64;
    if mode == "decode" {
        for f in &files {
            let reader = TraceReader::new(BufReader::new(std::fs::File::open(f).expect("open")));
            for item in reader {
                if let TraceItem::Record { .. } = item.expect("readable") {
                    records += 1;
                }
            }
        }
    } else {
        let mut a = Analysis::for_reports(&[STRAGGLERS]);
        for (i, f) in files.iter().enumerate() {
            let errors = a.read(
                i as u32,
                BufReader::new(std::fs::File::open(f).expect("open")),
            );
            assert!(errors.is_empty(), "{errors:?}");
            records += a.records(i as u32);
        }
        let t = a.report(STRAGGLERS).expect("collected");
        assert!(t.notes[0].starts_with("rank "), "{}", t.notes[0]);
        std::hint::black_box(t);
    }
    println!(
        "{records} {:.3} {}",
        started.elapsed().as_secs_f64(),
        peak_kib()
    );
}

fn main() {
    if let Ok(mode) = std::env::var(CHILD) {
        let dir = std::env::args().next_back().expect("folder");
        child(&mode, Path::new(&dir));
        return;
    }
    let seconds: f64 = std::env::var("GPU_TOOLS_JOB_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5.0);
    let me = std::env::current_exe().expect("own path");
    for ranks in [64u32, 512] {
        let spec = JobSpec::large(ranks, seconds);
        let dir = std::env::temp_dir().join(format!(
            "gpu-tools-job-bench-{ranks}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("bench folder");
        let written = Instant::now();
        let mut bytes = 0u64;
        for h in 0..spec.hosts {
            let path = dir.join(format!("{}.gputrace", JobSpec::host_name(h)));
            let out = std::io::BufWriter::new(std::fs::File::create(&path).expect("create"));
            spec.write_host_file(h, out).expect("write");
            bytes += std::fs::metadata(&path).map_or(0, |m| m.len());
        }
        println!(
            "job of {ranks} ranks, {seconds} s ({} steps): {} files, {:.1} MB, written in {:.1} s",
            spec.steps,
            spec.hosts,
            bytes as f64 / 1e6,
            written.elapsed().as_secs_f64()
        );
        for mode in ["decode", STRAGGLERS] {
            let out = Command::new(&me)
                .env(CHILD, mode)
                .arg(&dir)
                .output()
                .expect("run the measurement");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let line = String::from_utf8_lossy(&out.stdout);
            let v: Vec<&str> = line.split_whitespace().collect();
            println!(
                "  {mode:<10} {ranks:>4} ranks  {:>11} records  {:>7} s  peak {:>7.1} MiB",
                v.first().unwrap_or(&"?"),
                v.get(1).unwrap_or(&"?"),
                v.get(2).and_then(|k| k.parse::<f64>().ok()).unwrap_or(0.0) / 1024.0
            );
        }
        std::fs::remove_dir_all(&dir).expect("remove the bench folder");
    }
}
