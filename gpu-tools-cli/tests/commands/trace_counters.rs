//! `gpu-tools trace --counters` end to end without a GPU: the CUDA driver double (two devices), the CUPTI profiling
//! double as the tracer's CUPTI (its PM samplers take a sample per millisecond by themselves, on the wall clock as
//! the hardware's are, the first one starting 2 s early), and this test binary run again as the traced program: it
//! streams a kernel on each device, timed on CLOCK_MONOTONIC as the injection library times them. The trace file's
//! counter stream is decoded and checked (pid 0, no process start or end, samples of both devices on the processes'
//! clock inside the trace's span), then each bad input: counters held by another tool, unknown and uncollectable
//! metrics, too short an interval, another backend, no CUPTI in the tracer, attached processes that number GPUs
//! differently; each refused before the program runs.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use gpu_tools::trace::file::{TraceItem, TraceReader};
use gpu_tools::trace::*;
use gpu_tools_injection::env;
use gpu_tools_testing::records::kernel_record;

const STANDIN: &str = "GPU_TOOLS_TEST_STANDIN";

/// `gpu-tools trace` with the driver and profiling doubles: two GPUs, the default set's metrics in the
/// catalogue, a sample every millisecond.
fn gpu_tools_trace() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpu-tools"));
    c.arg("trace")
        .env(
            "GPU_TOOLS_CUDA_DRIVER_LIB",
            gpu_tools_testing::double_path("cuda_driver"),
        )
        .env(
            "GPU_TOOLS_CUPTI_LIB",
            gpu_tools_testing::double_path("cupti_profiling"),
        )
        .env(
            "GPU_TOOLS_NVPERF_HOST_LIB",
            gpu_tools_testing::double_path("cupti_profiling"),
        )
        .env("GPU_TOOLS_DOUBLE_DEVICES", "2")
        .env("GPU_TOOLS_DOUBLE_TOP_METRICS", "1")
        .env("GPU_TOOLS_DOUBLE_PM_PATTERN", "1000:1")
        .env_remove("GPU_TOOLS_INJECT_LIB")
        .env_remove("CUDA_VISIBLE_DEVICES")
        .env_remove("GPU_TOOLS_DOUBLE_PM_BUSY")
        .stdin(Stdio::null());
    c
}

/// `gpu-tools trace --backend cupti ARGS -- PROGRAM...`, with this binary standing in for the injection library's
/// path (the program connects to the socket itself).
fn trace(args: &[&str], program: &[&str], vars: &[(&str, &str)]) -> Output {
    let me = std::env::current_exe().unwrap();
    let mut c = gpu_tools_trace();
    c.args(["--backend", "cupti", "--inject-lib"])
        .arg(&me)
        .args(args)
        .arg("--")
        .args(program);
    for (k, v) in vars {
        c.env(k, v);
    }
    let out = c.output().expect("run gpu-tools trace");
    println!(
        "{args:?}: {}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

/// `trace ARGS` of the stand-in.
fn trace_standin(args: &[&str]) -> Output {
    let me = std::env::current_exe().unwrap();
    let me = me.to_str().unwrap();
    trace(
        args,
        &[
            me,
            "trace_counters::standin",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ],
        &[(STANDIN, "two-devices")],
    )
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn monotonic_ns() -> u64 {
    gpu_tools::counters::host_monotonic_ns()
}

/// The stand-in traced program (run only by the tests below, through `gpu-tools trace`): a kernel on device 0,
/// 150 ms later one on device 1, on CLOCK_MONOTONIC, then 150 ms more and its end.
#[test]
#[ignore = "a stand-in traced program, run by the other tests"]
fn standin() {
    let Ok(scenario) = std::env::var(STANDIN) else {
        return;
    };
    assert_eq!(scenario, "two-devices");
    let path = std::env::var_os(env::SOCKET).expect("gpu-tools trace sets the socket");
    let mut sock = UnixStream::connect(path).expect("connect");
    let pid = std::process::id();
    let mut enc = Encoder::new(&StreamHeader::new(pid, 130001, TimestampClock::Monotonic));
    enc.push(&Record::ProcessStart(ProcessStart {
        pid,
        parent_pid: 1,
        time: monotonic_ns(),
        command: "standin".into(),
    }));
    for (device, correlation) in [(0, 1), (1, 2)] {
        std::thread::sleep(Duration::from_millis(150));
        let start = monotonic_ns();
        enc.push(&Record::Kernel(KernelRecord {
            device,
            ..kernel_record("copy", start, start + 5_000_000, correlation)
        }));
    }
    std::thread::sleep(Duration::from_millis(150));
    let records = enc.records();
    enc.push(&Record::ProcessEnd(ProcessEnd {
        time: monotonic_ns(),
        reason: EndReason::Exit,
        records,
        dropped: 0,
        skipped: 0,
        callback_panics: 0,
    }));
    sock.write_all(enc.bytes()).expect("send");
}

/// Every stream of a trace file: its header and records.
fn streams(file: &Path) -> Vec<(StreamHeader, Vec<Record>)> {
    let reader = TraceReader::new(std::io::BufReader::new(std::fs::File::open(file).unwrap()));
    let mut out: std::collections::BTreeMap<u32, (Option<StreamHeader>, Vec<Record>)> =
        Default::default();
    for item in reader {
        match item.expect("the file reads without error") {
            TraceItem::Header { stream, header } => out.entry(stream).or_default().0 = Some(header),
            TraceItem::Record { stream, record } => out.entry(stream).or_default().1.push(record),
            _ => {}
        }
    }
    out.into_values()
        .map(|(h, r)| (h.expect("every stream has a header"), r))
        .collect()
}

/// The `N` before `what` in the summary line of GPU `device`.
fn summary(stdout: &str, device: u32, what: &str) -> u64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("counters: ") && l.contains(&format!(" on GPU {device} ")))
        .unwrap_or_else(|| panic!("no counters line of GPU {device}:\n{stdout}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| w.trim_end_matches(',') == what)
        .unwrap_or_else(|| panic!("no {what} in {line}"));
    words[at - 1].parse().unwrap()
}

#[test]
fn counters_of_every_device_land_in_the_trace_file_on_the_processes_clock() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.gputrace");
    let before = monotonic_ns();
    let out = trace_standin(&["-q", "--counters", "-o", file.to_str().unwrap()]);
    let after = monotonic_ns();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for device in [0, 1] {
        assert!(summary(&stdout, device, "samples") >= 300, "{stdout}");
        assert_eq!(summary(&stdout, device, "lost"), 0);
        assert_eq!(summary(&stdout, device, "gaps"), 0);
    }
    assert!(stdout.contains("on GPU 0 every 1 ms,"), "{stdout}");

    let streams = streams(&file);
    assert_eq!(
        streams.len(),
        2,
        "the program's stream and the counter stream"
    );
    let (_, program) = streams
        .iter()
        .find(|(h, _)| h.pid != 0)
        .expect("the program's stream");
    let kernels: Vec<&KernelRecord> = program
        .iter()
        .filter_map(|r| match r {
            Record::Kernel(k) => Some(k),
            _ => None,
        })
        .collect();
    assert_eq!(kernels.len(), 2);
    let (header, counters) = streams
        .iter()
        .find(|(h, _)| h.pid == counters::COUNTER_STREAM_PID)
        .expect("a counter stream");
    assert_eq!(header.clock, TimestampClock::Monotonic);
    assert!(
        matches!(counters[0], Record::ClockAnchor(a) if a.monotonic > before && a.monotonic < after)
    );
    assert!(matches!(&counters[1], Record::ProcessInfo(i) if !i.host.is_empty()));
    assert!(
        !counters
            .iter()
            .any(|r| matches!(r, Record::ProcessStart(_) | Record::ProcessEnd(_))),
        "a counter stream has no process start or end"
    );
    let notices: Vec<&str> = counters
        .iter()
        .filter_map(|r| match r {
            Record::Notice(n) => Some(n.text.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        notices
            .iter()
            .any(|n| n.starts_with("counters: device 1 is ") && n.contains("sampled every 1 ms")),
        "{notices:?}"
    );
    assert!(
        !counters.iter().any(|r| matches!(r, Record::CounterGap(_))),
        "every period has its sample"
    );
    for device in [0u32, 1] {
        let samples: Vec<&CounterSample> = counters
            .iter()
            .filter_map(|r| match r {
                Record::CounterSample(s) if s.device == device => Some(s),
                _ => None,
            })
            .collect();
        assert!(samples.len() >= 300, "device {device}: {}", samples.len());
        // On the processes' clock, inside the trace: the first sample (2 s early at the source) is clipped to the
        // launch, after this test started it; the last ends before the trace ended; they tile the time.
        let first = samples[0];
        assert!(
            first.start > before && first.start < kernels[0].start,
            "{first:?}"
        );
        assert!(samples.last().unwrap().end < after);
        assert!(samples.windows(2).all(|w| w[0].end == w[1].start));
        // The kernel of this device ran inside a sample of it.
        let k = kernels.iter().find(|k| k.device == device).unwrap();
        assert!(
            samples
                .iter()
                .any(|s| s.start <= k.start && k.start < s.end),
            "kernel of device {device} at {} not covered",
            k.start
        );
        // The default set, each metric's value as the double gives it (base + i; base 40 + 10 × device).
        let base = 40.0 + 10.0 * f64::from(device);
        for (i, metric) in counters::DEFAULT_SET.iter().enumerate() {
            assert_eq!(first.value(metric), Some(base + i as f64), "{metric}");
        }
    }
    // `stats` reads the file with its counter stream.
    let stats = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["stats", "--format", "csv", "--report", "cuda_gpu_kern_sum"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(stats.status.code(), Some(0), "{}", text(&stats.stderr));
    assert!(text(&stats.stdout).contains("copy"));
}

#[test]
fn counters_name_their_metrics_and_interval() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.gputrace");
    let out = trace_standin(&[
        "-q",
        "--counters",
        "dram__bytes_read.sum.per_second,sm__cycles_active.avg",
        "--counter-interval",
        "2ms",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("on GPU 1 every 2 ms,"));
    let streams = streams(&file);
    let (_, counters) = streams.iter().find(|(h, _)| h.pid == 0).unwrap();
    let Some(Record::CounterSample(s)) = counters
        .iter()
        .find(|r| matches!(r, Record::CounterSample(_)))
    else {
        panic!("no sample")
    };
    let names: Vec<&str> = s.values.iter().map(|(n, _)| &**n).collect();
    assert_eq!(
        names,
        ["dram__bytes_read.sum.per_second", "sm__cycles_active.avg"]
    );
}

#[test]
fn lost_samples_are_gaps_that_say_so_and_make_the_trace_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.gputrace");
    let me = std::env::current_exe().unwrap();
    let me = me.to_str().unwrap();
    // In every 200 periods, one without a sample (as an idle GPU leaves them) and, 130 periods later (in another
    // decode, every 50 ms), one lost to an overflow the sampler reports.
    let pattern = format!(
        "1000:{}0{}x{}",
        "1".repeat(19),
        "1".repeat(129),
        "1".repeat(50)
    );
    let out = trace(
        &["-q", "--counters", "-o", file.to_str().unwrap()],
        &[
            me,
            "trace_counters::standin",
            "--exact",
            "--ignored",
            "--test-threads=1",
        ],
        &[
            (STANDIN, "two-devices"),
            ("GPU_TOOLS_DOUBLE_PM_PATTERN", &pattern),
        ],
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("counter samples of device 0 were lost"),
        "{stderr}"
    );
    assert!(summary(&stdout, 0, "lost") >= 1, "{stdout}");
    assert!(summary(&stdout, 1, "gaps") >= 1, "{stdout}");
    let streams = streams(&file);
    let (_, counters) = streams.iter().find(|(h, _)| h.pid == 0).unwrap();
    let gaps: Vec<&CounterGap> = counters
        .iter()
        .filter_map(|r| match r {
            Record::CounterGap(g) if g.device == 0 => Some(g),
            _ => None,
        })
        .collect();
    // Each gap spans its missing period, and says whether the period's sample was lost or never taken.
    assert!(
        gaps.iter()
            .any(|g| g.samples == 1 && g.end - g.start == 1_000_000),
        "{gaps:?}"
    );
    assert!(
        gaps.iter()
            .any(|g| g.samples == 0 && g.end - g.start == 1_000_000),
        "{gaps:?}"
    );
    let lost: u64 = gaps.iter().map(|g| g.samples).sum();
    assert_eq!(lost, summary(&stdout, 0, "lost"));
}

/// A program that would leave a mark: it must not run.
fn marked(dir: &Path) -> (Vec<String>, std::path::PathBuf) {
    let marker = dir.join("ran");
    (
        vec!["touch".to_string(), marker.to_str().unwrap().to_string()],
        marker,
    )
}

/// `trace ARGS -- touch MARKER` with `vars`: its output; checks that the program did not run.
fn refused(args: &[&str], vars: &[(&str, &str)]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let (program, marker) = marked(dir.path());
    let file = dir.path().join("t.gputrace");
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["-o", file.to_str().unwrap()]);
    let program: Vec<&str> = program.iter().map(String::as_str).collect();
    let out = trace(&all, &program, vars);
    assert!(!marker.exists(), "the program ran");
    assert!(!file.exists(), "a trace file was left");
    (out.status.code(), text(&out.stderr))
}

#[test]
fn counters_held_by_another_tool_refuse_the_trace_before_the_program_runs() {
    let (code, stderr) = refused(&["--counters"], &[("GPU_TOOLS_DOUBLE_PM_BUSY", "1")]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.starts_with("gpu-tools trace: --counters: the performance counters of device 1 (")
            && stderr.contains("held by another tool")
            && stderr.contains("ncu")
            && stderr.contains("trace without --counters")
            && stderr.contains("(the program was not run)"),
        "{stderr}"
    );
}

#[test]
fn unknown_and_uncollectable_metrics_are_named() {
    let (code, stderr) = refused(
        &[
            "--counters",
            "sm__cycles_activ.avg.pct_of_peak_sustained_elapsed",
        ],
        &[],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("no metric \"sm__cycles_activ.avg.pct_of_peak_sustained_elapsed\"")
            && stderr.contains("close names: sm__cycles_active")
            && stderr.contains("gpu-tools metrics --method pm"),
        "{stderr}"
    );
    // The range profiler has it, PM sampling does not.
    let (code, stderr) = refused(&["--counters", "gpu__time_duration.sum"], &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("gpu__time_duration.sum") && stderr.contains("cannot be collected by"),
        "{stderr}"
    );
}

#[test]
fn bad_options_are_usage_errors() {
    for (args, says) in [
        (
            &["--counters", "--counter-interval", "50us"][..],
            "shorter than 100 us",
        ),
        (
            &["--counter-interval", "1ms"],
            "applies only with --counters",
        ),
        (
            &["--counters", "touch"],
            "neither a counter set (default) nor a metric name",
        ),
    ] {
        let (code, stderr) = refused(args, &[]);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    // Another backend: PM sampling is the cupti backend's (ROCm device counters are not sampled in a trace).
    for backend in ["debugger", "rocm"] {
        let dir = tempfile::tempdir().unwrap();
        let (program, marker) = marked(dir.path());
        let out = gpu_tools_trace()
            .args(["--backend", backend, "--counters", "--"])
            .args(&program)
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "--counters does not apply to the {backend} backend"
            )),
            "{stderr}"
        );
        assert!(!marker.exists());
    }
}

#[test]
fn without_cupti_in_the_tracer_counters_are_refused_with_the_fix() {
    let (code, stderr) = refused(
        &["--counters"],
        &[("GPU_TOOLS_CUPTI_LIB", "/nonexistent/libcupti.so.13")],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("the PM sampler runs in gpu-tools and needs CUPTI here")
            && stderr.contains("/nonexistent/libcupti.so.13"),
        "{stderr}"
    );
}

/// A process that sleeps, with `CUDA_VISIBLE_DEVICES` set to `visible`.
fn sleeper(visible: &str) -> std::process::Child {
    Command::new("sleep")
        .arg("30")
        .env("CUDA_VISIBLE_DEVICES", visible)
        .spawn()
        .unwrap()
}

#[test]
fn attached_processes_are_mapped_by_their_visible_devices_before_anything_is_attached() {
    // Two processes that each see one GPU as device 0: samples of device 0 could not say whose they are.
    let a = sleeper("0");
    let b = sleeper("1");
    let me = std::env::current_exe().unwrap();
    let out = gpu_tools_trace()
        .arg("--inject-lib")
        .arg(&me)
        .args(["--counters", "--duration", "1", "--pid"])
        .arg(format!("{},{}", a.id(), b.id()))
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("processes {} and {}", a.id(), b.id()))
            && stderr.contains("different GPU device 0")
            && stderr.contains("(no process was attached)"),
        "{stderr}"
    );
    // One process that sees GPU 1 as its device 0: the sampler of this host's device 1 is numbered 0 (the
    // attach itself then fails: `sleep` is no CUDA process).
    let out = gpu_tools_trace()
        .arg("--inject-lib")
        .arg(&me)
        .args(["--counters", "--duration", "1", "--pid"])
        .arg(b.id().to_string())
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("counters: sampling device 1 (gpu-tools test double 1) as trace device 0"),
        "{stderr}"
    );
    assert!(!stderr.contains("sampling device 0"), "{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for mut p in [a, b] {
        let _ = p.kill();
        let _ = p.wait();
    }
}
