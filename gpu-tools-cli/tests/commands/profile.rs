//! `gpu-tools profile` end to end without a GPU: this test binary stands in
//! for the profiled program and sends, over the socket the injection library would stream to, the counter records
//! it would send. Checks the request the program receives, the per-kernel table (text, CSV, JSON) with demangled
//! names, the stall report, losses and notices, and the errors: a program that never uses CUDA, an unknown set.

use std::process::{Command, Output};
use std::sync::Arc;

use gpu_tools::trace::*;
use gpu_tools_injection::env;

const STANDIN: &str = "GPU_TOOLS_TEST_STANDIN";
const COPY: &str = "_Z4copyPKfPfm";

/// `gpu-tools profile --inject-lib <this test binary> --no-check ARGS -- PROGRAM`, with the CUDA driver and CUPTI
/// doubles for the checks made before the program runs.
fn profile_command<S: AsRef<std::ffi::OsStr>>(args: &[&str], program: &[S]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpu-tools"));
    c.arg("profile")
        .env(
            "GPU_TOOLS_CUDA_DRIVER_LIB",
            gpu_tools_testing::double_path("cuda_driver"),
        )
        .env(
            "GPU_TOOLS_CUPTI_LIB",
            gpu_tools_testing::double_path("cupti_profiling"),
        )
        .arg("--inject-lib")
        .arg(std::env::current_exe().unwrap())
        .arg("--no-check")
        .args(args)
        .arg("--")
        .args(program);
    c
}

/// Runs `gpu-tools profile ARGS -- PROGRAM...` with this binary named as the injection library (it is never loaded:
/// nothing here initialises CUDA), and the C doubles of the CUDA driver and CUPTI, so that the checks made before
/// the program runs pass.
fn profile(args: &[&str], program: &[&str], scenario: &str) -> Output {
    let out = profile_command(args, program)
        .env(STANDIN, scenario)
        .output()
        .expect("run gpu-tools profile");
    println!(
        "{args:?} {program:?}: {}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn standin_program() -> Vec<String> {
    let me = std::env::current_exe()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    vec![
        me,
        "profile::standin".into(),
        "--exact".into(),
        "--ignored".into(),
        "--test-threads=1".into(),
    ]
}

/// Runs the stand-in under `gpu-tools profile ARGS --output FILE`; returns the run and the report.
fn run_standin(args: &[&str]) -> (Output, String) {
    let p = standin_program();
    let p: Vec<&str> = p.iter().map(String::as_str).collect();
    let report = std::env::temp_dir().join(format!(
        "gpu-tools-profile-{}-{}.txt",
        std::process::id(),
        args.join("_")
    ));
    let report_arg = report.to_string_lossy().into_owned();
    let mut all = args.to_vec();
    all.extend(["--output", &report_arg]);
    let out = profile(&all, &p, "profile");
    let text = std::fs::read_to_string(&report).unwrap_or_default();
    let _ = std::fs::remove_file(&report);
    println!("--- report\n{text}");
    (out, text)
}

/// The stand-in: what the injection library sends for two copy launches and a scale launch.
#[test]
#[ignore = "run by the tests below as the profiled program"]
fn standin() {
    if std::env::var(STANDIN).as_deref() != Ok("profile") {
        return;
    }
    let metrics = std::env::var(env::PROFILE_METRICS).unwrap();
    let pc = std::env::var(env::PROFILE_PC_SAMPLING).unwrap() == "1";
    assert!(
        metrics == gpu_tools_injection::profile::BASIC_SET.join(",") || (metrics.is_empty() && pc),
        "the request travels in the environment: {metrics:?}"
    );
    assert!(
        metrics.is_empty() || !pc,
        "metrics and PC sampling are never asked of one run"
    );
    let graph = std::env::var(env::PROFILE_GRAPH).unwrap();
    // Each process streams to the socket `gpu-tools profile` listens on, as the injection library does.
    let socket = std::env::var(env::SOCKET).unwrap();
    assert!(
        std::env::var_os(env::FILE).is_none(),
        "one destination: the socket"
    );
    assert_eq!(
        std::env::var(env::CUDA_GRAPH).as_deref(),
        Ok("node"),
        "kernel records of graph nodes are asked for"
    );
    let m = |launch: u32, kernel: &str, t: f64, read: f64| {
        Record::KernelMetrics(KernelMetricsRecord {
            device: 0,
            context: 1,
            correlation: 10 + launch,
            launch,
            kernel: Arc::from(kernel),
            metrics: vec![
                (Arc::from("gpu__time_duration.sum"), t),
                (Arc::from("dram__bytes_read.sum"), read),
                (Arc::from("dram__bytes_write.sum"), read),
                (
                    Arc::from("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
                    12.5,
                ),
            ],
        })
    };
    let mut records = vec![Record::ProcessStart(ProcessStart {
        pid: std::process::id(),
        parent_pid: 1,
        time: 1,
        command: "standin".into(),
    })];
    if !metrics.is_empty() {
        records.extend([
            Record::Notice(Notice {
                level: NoticeLevel::Info,
                text: format!("graphs profiled by {graph}"),
            }),
            m(0, COPY, 1000.0, 1e9),
            m(1, "scale", 50.0, 1e6),
            m(2, COPY, 3000.0, 3e9),
            Record::ProfileLoss(ProfileLoss {
                kind: ProfileLossKind::Ranges,
                count: 2,
                context: 1,
            }),
            Record::Notice(Notice {
                level: NoticeLevel::Warning,
                text: "a warning from inside".into(),
            }),
        ]);
    }
    if pc {
        records.push(Record::Notice(Notice {
            level: NoticeLevel::Warning,
            text: "a warning from the PC-sampling run".into(),
        }));
        records.push(Record::Stall(StallRecord {
            context: 1,
            function: Arc::from(COPY),
            pc_offset: 0x80,
            stalls: vec![(
                Arc::from("smsp__pcsamp_warps_issue_stalled_long_scoreboard"),
                90,
            )],
        }));
    }
    records.push(Record::ProcessEnd(ProcessEnd {
        time: 2,
        reason: EndReason::Exit,
        records: 4,
        // As CUPTI did for a third of the kernel records under multi-pass kernel replay.
        dropped: if metrics.is_empty() { 0 } else { 3 },
        skipped: 0,
        callback_panics: 0,
    }));
    let mut e = Encoder::new(&StreamHeader::new(
        std::process::id(),
        130001,
        TimestampClock::Monotonic,
    ));
    for r in &records {
        e.push(r);
    }
    let send = |bytes: &[u8]| {
        let mut c = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        std::io::Write::write_all(&mut c, bytes).unwrap();
    };
    send(e.bytes());
    // A second process that loaded CUDA and ran no kernel (a compile worker): a stream with its start and end only.
    let mut idle = Encoder::new(&StreamHeader::new(1, 130001, TimestampClock::Monotonic));
    idle.push(&records[0]);
    idle.push(&Record::ProcessEnd(ProcessEnd {
        time: 2,
        reason: EndReason::Exit,
        records: 1,
        dropped: 0,
        skipped: 0,
        callback_panics: 0,
    }));
    send(idle.bytes());
    // A third process that sends its start and then leaves a child holding its stream open past the program's
    // end (the child sleeps 11 s): profile waits its drain time, counts what came, and says so.
    if std::env::var_os("GPU_TOOLS_TEST_KEEP_OPEN").is_some() {
        use std::os::fd::AsRawFd;
        let mut kept = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        let mut e = Encoder::new(&StreamHeader::new(3, 130001, TimestampClock::Monotonic));
        e.push(&records[0]);
        std::io::Write::write_all(&mut kept, e.bytes()).unwrap();
        let fd = kept.as_raw_fd();
        // SAFETY: fcntl on a descriptor this process owns: the child inherits the connection.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            assert!(flags >= 0 && libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) == 0);
        }
        // Left running on purpose: the stand-in exits next, and init reaps the orphan.
        #[allow(clippy::zombie_processes)]
        // It outlives the 10 s drain by far, so that a wait for the child and the drain are told apart on a
        // loaded machine too.
        Command::new("sleep")
            .arg("60")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
    }
    // A program that runs on after its records were written (for the progress line to see them).
    if let Ok(ms) = std::env::var("GPU_TOOLS_TEST_LINGER_MS") {
        std::thread::sleep(std::time::Duration::from_millis(ms.parse().unwrap()));
    }
}

#[test]
fn kernels_are_tabled_per_name_with_demangled_names() {
    let (out, text) = run_standin(&["--set", "basic"]);
    assert!(out.status.success());
    let copy = text
        .lines()
        .find(|l| l.contains("copy(float const*, float*, unsigned long)"))
        .expect("the copy row");
    let cells: Vec<&str> = copy.split_whitespace().collect();
    assert_eq!(
        &cells[..4],
        &["2", "2000.00", "1000.00", "3000.00"],
        "{copy}"
    );
    assert!(text.contains("[1] gpu__time_duration.sum"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("a warning from inside") && err.contains("2 Ranges lost"),
        "{err}"
    );
    assert!(
        err.contains("2 processes (1 ran no kernel), 3 kernel launches profiled"),
        "{err}"
    );
    assert!(
        err.contains("graphs profiled by node"),
        "the default: {err}"
    );
    assert!(err.contains("CUPTI dropped 3 kernel records"), "{err}");
}

#[test]
fn csv_and_json_carry_every_kernel_and_metric() {
    let (_, csv) = run_standin(&["--set", "basic", "--csv", "--mangled"]);
    assert!(csv.starts_with("kernel,launches,metric,mean,min,max\n"));
    assert!(
        csv.contains(&format!(
            "{COPY},2,dram__bytes_read.sum,2000000000,1000000000,3000000000"
        )),
        "{csv}"
    );
    assert_eq!(csv.lines().count(), 1 + 2 * 4);
    let (_, json) = run_standin(&["--set", "basic", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(json.as_array().unwrap().len(), 2);
    assert_eq!(json[0]["launches"], 2);
    assert_eq!(json[0]["metrics"]["gpu__time_duration.sum"]["max"], 3000.0);
}

#[test]
fn pc_sampling_adds_the_stall_report() {
    let (out, text) = run_standin(&["--set", "basic", "--pc-sampling"]);
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("a warning from inside"), "{stderr}");
    assert!(
        stderr.contains("a warning from the PC-sampling run"),
        "{stderr}"
    );
    assert!(stderr.contains("second run"), "{stderr}");
    assert!(
        text.contains("copy(float const*, float*, unsigned long)"),
        "{text}"
    );
    assert!(text.contains("top stall reasons per function"), "{text}");
    assert!(
        text.contains("100.0%  smsp__pcsamp_warps_issue_stalled_long_scoreboard"),
        "{text}"
    );
    assert!(text.contains("pc +0x0080"), "{text}");
}

#[test]
fn graph_profiling_travels_to_the_program() {
    let (out, _) = run_standin(&["--set", "basic", "--graph-profiling", "graph"]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("graphs profiled by graph"), "{err}");
    assert!(
        err.contains("3 launches (a graph launch counts once) profiled"),
        "{err}"
    );
    let p = standin_program();
    let p: Vec<&str> = p.iter().map(String::as_str).collect();
    let out = profile(&["--graph-profiling", "whole"], &p, "none");
    assert_eq!(out.status.code(), Some(2), "a usage error");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--graph-profiling") && err.contains("node") && err.contains("graph"),
        "{err}"
    );
}

#[test]
fn a_program_that_never_uses_cuda_is_an_error() {
    let out = profile(&["--set", "basic"], &["true"], "none");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("never initialised CUDA"));
}

#[test]
fn bad_requests_are_refused_before_running() {
    let out = profile(&["--set", "fast"], &["true"], "none");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown set \"fast\""));
    let out = profile(&["--metrics", "nonsense"], &["true"], "none");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("neither a metric name"));
    let out = profile(&["--launches-per-kernel", "0"], &["true"], "none");
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--launches-per-kernel"));
}

/// `gpu-tools profile` with nothing of the vendor's: the driver (and, in a second run, CUPTI) named by a variable
/// that points nowhere, so that no search finds one.
fn profile_without(missing: &[(&str, &std::path::Path)], program: &[&str]) -> Output {
    let me = std::env::current_exe().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpu-tools"));
    cmd.args(["profile", "--inject-lib"])
        .arg(&me)
        .arg("--")
        .args(program);
    for (var, value) in missing {
        cmd.env(var, value);
    }
    let out = cmd.output().unwrap();
    println!(
        "{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn without_a_driver_or_cupti_the_program_is_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let touch = format!("touch {}", marker.display());
    let program = ["sh", "-c", touch.as_str()];
    let nowhere = dir.path().join("nothing.so");
    // No driver.
    let out = profile_without(&[("GPU_TOOLS_CUDA_DRIVER_LIB", &nowhere)], &program);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(
            "gpu-tools profile: the CUDA driver is not installed here, and profile needs it (the program was not \
             run): CUDA driver (libcuda.so.1) not loaded; "
        ),
        "{stderr}"
    );
    assert!(!marker.exists(), "the program did not run");
    // A driver (the double), no CUPTI: named, with its fix.
    let driver = gpu_tools_testing::double_path("cuda_driver");
    let out = profile_without(
        &[
            ("GPU_TOOLS_CUDA_DRIVER_LIB", &driver),
            ("GPU_TOOLS_CUPTI_LIB", &nowhere),
        ],
        &program,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(
            "gpu-tools profile: CUPTI was not found, and profile needs it (the program was not run): CUPTI \
             (libcupti.so.13 or .12) not loaded; "
        ),
        "{stderr}"
    );
    assert!(stderr.contains("pip install nvidia-cuda-cupti"), "{stderr}");
    assert!(!marker.exists(), "the program did not run");
}

#[test]
fn a_program_that_is_not_there_or_not_executable_is_127_or_126() {
    let out = profile(&[], &["/nonexistent/program"], "none");
    assert_eq!(out.status.code(), Some(127));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("cannot start /nonexistent/program: not found")
    );
    let out = profile(&[], &["no-such-program-in-path"], "none");
    assert_eq!(out.status.code(), Some(127));
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "#!/bin/sh\n").unwrap();
    let out = profile(&[], &[plain.to_str().unwrap()], "none");
    assert_eq!(out.status.code(), Some(126));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an executable file"));
    // Without a driver too: the program is checked first.
    let out = profile_without(
        &[(
            "GPU_TOOLS_CUDA_DRIVER_LIB",
            std::path::Path::new("/nonexistent/libcuda.so.1"),
        )],
        &["/nonexistent/program"],
    );
    assert_eq!(out.status.code(), Some(127));
}

#[test]
fn a_progress_line_only_when_asked_or_on_a_terminal() {
    // stderr is a pipe here: no progress line by default.
    let (out, _) = run_standin(&["--set", "basic"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success());
    assert!(
        !err.contains('\r') && !err.contains("kernels run)"),
        "{err:?}"
    );
    // --progress forces it: one line rewritten in place, showing the launches profiled so far, then erased.
    let out = profile_command(&["--set", "basic", "--progress"], &standin_program())
        .env(STANDIN, "profile")
        .env("GPU_TOOLS_TEST_LINGER_MS", "700")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err:?}");
    assert!(
        err.contains(
            "\r\x1b[Kgpu-tools profile: 3 kernel launches profiled (0 kernels run) in 2 processes, "
        ),
        "{err:?}"
    );
    // Erased before the summary lines.
    let erased = err.rfind("\r\x1b[K").unwrap();
    let summary = err
        .find("gpu-tools profile: 2 processes (1 ran no kernel), 3 kernel launches profiled")
        .unwrap();
    assert!(erased < summary, "{err:?}");
    assert!(!err[summary..].contains('\r'), "{err:?}");
}

#[test]
fn a_stream_kept_open_after_the_program_ends_is_counted_and_said() {
    let started = std::time::Instant::now();
    let out = profile_command(&["--set", "basic"], &standin_program())
        .env(STANDIN, "profile")
        .env("GPU_TOOLS_TEST_KEEP_OPEN", "1")
        .output()
        .unwrap();
    let waited = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{waited:?}\n--- stdout\n{text}--- stderr\n{err}");
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(
            "kept its stream open 10 s after the program exited: what it sent by then is counted"
        ),
        "{err}"
    );
    // The other processes' records are all there, and the wait was the drain time, not the child's life.
    assert!(text.contains(COPY) || text.contains("copy("), "{text}");
    assert!(
        err.contains("3 processes (2 ran no kernel), 3 kernel launches profiled"),
        "{err}"
    );
    assert!(
        waited >= std::time::Duration::from_secs(10) && waited < std::time::Duration::from_secs(40),
        "{waited:?}"
    );
}

/// Runs plain `gpu-tools profile ARGS` (no doubles named), which must exit 1; its stderr.
fn profile_refused(args: &[&str]) -> String {
    refused_by(Command::new(env!("CARGO_BIN_EXE_gpu-tools")), args)
}

/// Runs `command` as `gpu-tools profile ARGS`, which must exit 1; its stderr.
fn refused_by(mut command: Command, args: &[&str]) -> String {
    let out = command.arg("profile").args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    err
}

#[test]
fn a_running_process_is_refused_before_it_is_touched() {
    let mut target = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = target.id().to_string();
    // Asleep before it is asked about (under load a fresh `sleep` can still be starting: state R).
    let state_of = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.rsplit(") ").next().and_then(|s| s.chars().next())
    };
    let asleep_by = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while state_of() != Some('S') && std::time::Instant::now() < asleep_by {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let untouched = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let state = stat.rsplit(") ").next().unwrap().chars().next().unwrap();
        assert_eq!(state, 'S', "{stat}");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        assert!(status.contains("TracerPid:\t0"), "{status}");
    };
    // `gpu-tools profile ARGS` exits 1 with `words` in its message, and leaves the process as it was.
    let refused = |args: &[&str], words: &str| {
        let err = profile_refused(args);
        assert!(err.contains(words), "{err}");
        untouched();
    };
    // Both at once: refused before anything else.
    refused(
        &["--pid", &pid, "--pc-sampling", "--set", "basic"],
        "one at a time",
    );
    // Kernel metrics of a process that does not use CUDA.
    refused(&["--pid", &pid, "--duration", "1"], "does not use CUDA");
    // PC sampling of a process that does not use CUDA.
    refused(
        &["--pid", &pid, "--pc-sampling", "--duration", "1"],
        "does not use CUDA",
    );
    assert!(target.try_wait().unwrap().is_none());
    target.kill().unwrap();
    target.wait().unwrap();
    // A process that is not there is said so.
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["profile", "--pid", "2147483646"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .into_owned()
            .contains("no process 2147483646")
    );
}

/// PC sampling and `--kernel-replay` of a process in a mount namespace of its own (a container's) go as for any
/// process: their socket is placed in its own `/tmp`. The contained process here is stopped, so that the attach
/// refuses it untouched: what is checked is that it gets as far as the attach (with the doubles of the driver and
/// CUPTI named, so that the tool's own checks pass), and that it is left as it was.
#[test]
fn pc_sampling_of_a_process_in_a_container_goes_as_far_as_the_attach() {
    let Some(contained) = super::sleepers::Mapping::start_in_container(&["libcuda.so.1"]) else {
        return;
    };
    let pid = contained.pid().to_string();
    contained.stop();
    for args in [
        &["--pid", &pid, "--pc-sampling", "--duration", "1"][..],
        &[
            "--pid",
            &pid,
            "--metrics",
            "gpu__time_duration.sum",
            "--kernel-replay",
            "--duration",
            "1",
        ][..],
    ] {
        let mut doubles = Command::new(env!("CARGO_BIN_EXE_gpu-tools"));
        doubles
            .env(
                "GPU_TOOLS_CUDA_DRIVER_LIB",
                gpu_tools_testing::double_path("cuda_driver"),
            )
            .env(
                "GPU_TOOLS_CUPTI_LIB",
                gpu_tools_testing::double_path("cupti_full"),
            );
        let err = refused_by(doubles, args);
        // Named once, as a trace names it.
        assert!(
            err.contains(&format!(
                "gpu-tools profile: process {pid} is stopped (state T)"
            )),
            "{args:?}: {err}"
        );
        assert!(!err.contains("namespace"), "{args:?}: {err}");
    }
    contained.resume();
    contained.assert_untouched();
}

/// `--quiet` (`-q`), which the help promises: no progress line and no summary of the run on stderr; the report,
/// and what went wrong, are still there.
#[test]
fn quiet_leaves_out_the_summary_of_the_run() {
    for quiet in ["--quiet", "-q"] {
        let (out, text) = run_standin(&["--set", "basic", quiet]);
        assert!(out.status.success(), "{quiet}");
        assert!(
            text.contains("copy(float const*, float*, unsigned long)"),
            "{text}"
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !err.contains("2 processes (1 ran no kernel)"),
            "{quiet}: {err}"
        );
        assert!(err.contains("a warning from inside"), "{quiet}: {err}");
        assert!(err.contains("2 Ranges lost"), "{quiet}: {err}");
    }
}

/// `--raw-names`, as `trace`, `stats` and `export` call it; `--mangled` still works.
#[test]
fn raw_names_keeps_kernel_names_as_recorded() {
    for flag in ["--raw-names", "--mangled"] {
        let (out, text) = run_standin(&["--set", "basic", flag]);
        assert!(out.status.success(), "{flag}");
        assert!(text.contains(COPY), "{flag}: {text}");
        assert!(!text.contains("copy(float const*"), "{flag}: {text}");
    }
    let help = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["profile", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--raw-names"), "{help}");
    assert!(!help.contains("--mangled"), "a hidden alias: {help}");
}

/// `-o -` is standard output, as for every output option.
#[test]
fn a_dash_writes_the_report_to_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let p = standin_program();
    let out = profile_command(&["--set", "basic", "-o", "-"], &p)
        .current_dir(dir.path())
        .env(STANDIN, "profile")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("copy(float const*, float*, unsigned long)"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no file named -"
    );
}

/// `--duration` without `--pid` is refused as `trace` refuses it: a usage error, before anything runs.
#[test]
fn duration_needs_a_process() {
    let out = profile(&["--duration", "2"], &["/bin/true"], "none");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--duration"), "{err}");
}

/// `--kernel-replay` belongs to an attached window's kernel metrics: without `--pid`, or with `--pc-sampling`, it is
/// a usage error before anything runs.
#[test]
fn kernel_replay_needs_a_process_and_metrics() {
    for args in [
        &["profile", "--kernel-replay", "--", "/bin/true"][..],
        &["profile", "--pid", "1", "--kernel-replay", "--pc-sampling"][..],
        // The range profiler's own options, without it.
        &["profile", "--pid", "1", "--launches-per-kernel", "3"][..],
        &["profile", "--pid", "1", "--graph-profiling", "graph"][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--kernel-replay"), "{args:?}: {err}");
    }
}

/// `profile --help` says what a `--pid` window that gives nothing exits with, and where per-kernel values of graph
/// jobs come from.
#[test]
fn the_help_says_how_an_attached_window_ends() {
    let help = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["profile", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for says in [
        "1 when it gave none (PC sampling without a stall record, kernel metrics without a kernel profiled)",
        "3 when --kernel-replay's kernel metrics ended at the program's first CUDA graph launch",
        "Kernel metrics come from PM sampling attribution",
        "nothing replays the program's launches",
        "Only for a process that launches no CUDA graph",
    ] {
        assert!(help.contains(says), "{says:?} in {help}");
    }
}
