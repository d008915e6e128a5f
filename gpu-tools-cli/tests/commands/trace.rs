//! `gpu-tools trace --backend cupti` end to end without a GPU: the traced program is this test binary run again as
//! a stand-in for a CUDA program with the injection library. It connects to the socket `gpu-tools trace` names in
//! `GPU_TOOLS_TRACE_SOCKET` and streams records in the crate's format, as the library does, for each scenario of
//! the `STANDIN` variable: a normal run, dropped records, a crash, a program that never uses CUDA, two processes, a
//! forked child that keeps the connection open, a corrupt stream. Checks the listing, the summary, the Chrome trace
//! and the exit code of each; then the checks made before the program runs (the program, the driver, the trace
//! file, the options) and the embedded injection library.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpu_tools::trace::*;
use gpu_tools_injection::env;
use gpu_tools_testing::records::kernel_record;

const STANDIN: &str = "GPU_TOOLS_TEST_STANDIN";

const FILL: &str = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_";
const FILL_DEMANGLED: &str = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, \
                              std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)";

/// `gpu-tools trace` with the CUDA driver double, so that the cupti backend's driver check passes here.
fn gpu_tools_trace() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpu-tools"));
    c.arg("trace")
        .env(
            "GPU_TOOLS_CUDA_DRIVER_LIB",
            gpu_tools_testing::double_path("cuda_driver"),
        )
        .env_remove("GPU_TOOLS_INJECT_LIB");
    c
}

/// Runs `gpu-tools trace ARGS -- <this binary as stand-in> SCENARIO`.
fn trace(scenario: &str, args: &[&str]) -> Output {
    trace_with(scenario, args, &[])
}

/// Variable that makes the stand-in wait this many milliseconds after it sent everything.
const LINGER: &str = "GPU_TOOLS_TEST_LINGER_MS";

/// [`trace`], with variables for the stand-in.
fn trace_with(scenario: &str, args: &[&str], vars: &[(&str, &str)]) -> Output {
    let me = std::env::current_exe().unwrap();
    let t0 = Instant::now();
    let out = gpu_tools_trace()
        .envs(vars.iter().copied())
        .args(["--backend", "cupti", "--inject-lib"])
        .arg(&me)
        .args(args)
        .arg("--")
        .arg(&me)
        .args([
            "trace::standin",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(STANDIN, scenario)
        .output()
        .expect("run gpu-tools trace");
    println!(
        "scenario {scenario}: {} in {:.2} s\n--- stdout\n{}--- stderr\n{}",
        out.status,
        t0.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn kernel(name: &str, start: u64, stream: u32, correlation: u32) -> Record {
    Record::Kernel(KernelRecord {
        stream,
        grid: [2, 1, 1],
        block: [32, 1, 1],
        registers: 16,
        ..kernel_record(name, start, start + 2_000, correlation)
    })
}

fn api(name: &str, domain: ApiDomain, start: u64, correlation: u32) -> Record {
    Record::Api(ApiRecord {
        start,
        end: start + 500,
        domain,
        cbid: 1,
        name: Arc::from(name),
        correlation,
        process: std::process::id(),
        thread: 77,
        return_value: 0,
    })
}

/// What a traced process sends in the normal scenario: 3 kernels of 2 names on 2 streams, a copy, a set, the API
/// calls of all of them.
fn workload(base: u64) -> Vec<Record> {
    vec![
        api("cudaLaunchKernel", ApiDomain::Runtime, base, 1),
        api("cuLaunchKernel", ApiDomain::Driver, base + 100, 1),
        kernel(FILL, base + 1_000, 7, 1),
        api("cudaLaunchKernel", ApiDomain::Runtime, base + 200, 2),
        kernel(FILL, base + 4_000, 7, 2),
        api("cuLaunchKernel", ApiDomain::Driver, base + 300, 3),
        kernel("add_one", base + 5_000, 13, 3),
        api("cudaMemcpyAsync", ApiDomain::Runtime, base + 400, 4),
        Record::Memcpy(MemcpyRecord {
            start: base + 9_000,
            end: base + 10_000,
            device: 0,
            context: 1,
            stream: 13,
            correlation: 4,
            bytes: 65536,
            kind: CopyKind::HtoD,
            src: MemoryKind::Pinned,
            dst: MemoryKind::Device,
            is_async: true,
        }),
        Record::Memset(MemsetRecord {
            start: base + 11_000,
            end: base + 11_500,
            device: 0,
            context: 1,
            stream: 13,
            correlation: 5,
            bytes: 1 << 20,
            value: 0x5a,
            memory: MemoryKind::Device,
            is_async: true,
        }),
    ]
}

/// A stand-in traced process: one connection, records, and (unless it crashes) the end record.
struct Sender {
    sock: UnixStream,
    enc: Encoder,
}

impl Sender {
    fn connect() -> Sender {
        let path = std::env::var_os(env::SOCKET).expect("gpu-tools trace sets the socket");
        assert!(
            std::env::var_os(env::CUDA_INJECTION).is_some(),
            "gpu-tools trace sets CUDA_INJECTION64_PATH"
        );
        assert_eq!(
            std::env::var(env::KINDS).as_deref(),
            Ok("kernel,memcpy,memset,driver,runtime,nvtx"),
            "default kinds"
        );
        let sock = UnixStream::connect(path).expect("connect");
        let pid = std::process::id();
        // As the injection library's streams: thread fields hold Linux thread ids.
        let mut enc = Encoder::new(
            &StreamHeader::new(pid, 130001, TimestampClock::Monotonic)
                .with_thread_ids(ThreadIds::Linux),
        );
        enc.push(&Record::ProcessStart(ProcessStart {
            pid,
            parent_pid: 1,
            time: 0,
            command: "standin".into(),
        }));
        Sender { sock, enc }
    }

    fn send(&mut self, records: &[Record]) {
        for r in records {
            self.enc.push(r);
        }
        self.sock.write_all(self.enc.bytes()).expect("send");
        self.enc.clear();
    }

    fn end(mut self) {
        let records = self.enc.records();
        self.send(&[Record::ProcessEnd(ProcessEnd {
            time: 99_000_000,
            reason: EndReason::Exit,
            records,
            dropped: 0,
            skipped: 0,
            callback_panics: 0,
        })]);
    }
}

/// The stand-in program (run only by the tests below, through `gpu-tools trace`).
#[test]
#[ignore = "a stand-in traced program, run by the other tests"]
fn standin() {
    let Ok(scenario) = std::env::var(STANDIN) else {
        return;
    };
    match scenario.as_str() {
        "normal" => {
            let mut s = Sender::connect();
            s.send(&workload(1_000_000));
            s.end();
            if let Ok(ms) = std::env::var(LINGER) {
                std::thread::sleep(Duration::from_millis(ms.parse().unwrap()));
            }
        }
        "dropped" => {
            let mut s = Sender::connect();
            s.send(&workload(1_000_000));
            s.send(&[Record::Dropped(DroppedRecords {
                context: 1,
                stream: 7,
                count: 42,
            })]);
            s.end();
        }
        "crash" => {
            let mut s = Sender::connect();
            s.send(&workload(1_000_000));
            std::process::abort();
        }
        "nocuda" => println!("not using CUDA"),
        // What the tracer set, on stdout, for the tests of its options; then no CUDA.
        "environment" => {
            for var in [
                env::KINDS,
                env::CUDA_INJECTION,
                env::NVTX_INJECTION,
                env::CUDA_GRAPH,
                env::API,
                env::API_SKIP,
            ] {
                println!("{var}={}", std::env::var(var).unwrap_or_default());
            }
        }
        "two" => {
            let mut s = Sender::connect();
            s.send(&workload(1_000_000));
            let me = std::env::current_exe().unwrap();
            let status = Command::new(me)
                .args(["trace::standin", "--exact", "--ignored", "--test-threads=1"])
                .env(STANDIN, "normal")
                .status()
                .unwrap();
            assert!(status.success());
            s.end();
        }
        "lingering-child" => {
            let mut s = Sender::connect();
            s.send(&workload(1_000_000));
            // A child that keeps a copy of the connection open after this process is gone (10 s), and never sends
            // an end record: the tracer must not wait for it past its drain timeout.
            // SAFETY: the child only sleeps and exits without running exit handlers.
            if unsafe { libc::fork() } == 0 {
                // Not the test's output pipes, only the trace connection stays open.
                // SAFETY: closes this child's copies of stdout and stderr.
                unsafe {
                    libc::close(1);
                    libc::close(2);
                }
                std::thread::sleep(Duration::from_secs(10));
                // SAFETY: leaves the child at once.
                unsafe { libc::_exit(0) };
            }
            // The parent dies without its end record (as a crash would).
            // SAFETY: leaves at once.
            unsafe { libc::_exit(0) };
        }
        "garbage" => {
            let path = std::env::var_os(env::SOCKET).unwrap();
            let mut sock = UnixStream::connect(path).unwrap();
            sock.write_all(b"NOTATRACE-STREAM").unwrap();
        }
        other => panic!("unknown scenario {other}"),
    }
}

#[test]
fn normal_run_lists_kernels_copies_and_sets_with_their_api_calls() {
    let dir = tempfile::tempdir().unwrap();
    let chrome = dir.path().join("trace.json");
    let out = trace("normal", &["--chrome-trace", chrome.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "exit code");
    // Listing: demangled names, ids, the API call of each (runtime wins over the driver call it made).
    let kernels: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("kernel  "))
        .collect();
    assert_eq!(kernels.len(), 3, "{stdout}");
    assert!(
        kernels[0].contains(FILL_DEMANGLED) && kernels[0].contains("stream 7"),
        "{}",
        kernels[0]
    );
    assert!(
        kernels[0].ends_with("from cudaLaunchKernel"),
        "{}",
        kernels[0]
    );
    assert!(kernels[0].contains("dur 2.000 us"), "{}", kernels[0]);
    assert!(
        kernels[2].contains("add_one") && kernels[2].ends_with("from cuLaunchKernel"),
        "{}",
        kernels[2]
    );
    assert!(
        stdout.contains("memcpy  HtoD  65536 bytes")
            && stdout.contains("pinned -> device async  from cudaMemcpyAsync"),
        "{stdout}"
    );
    assert!(
        stdout.contains("memset  1048576 bytes") && stdout.contains("value 0x5a"),
        "{stdout}"
    );
    // Summary: counts, and per kernel count, total, mean, min, max.
    assert!(
        stdout.contains(
            "--- summary (backend cupti): 1 process, 3 kernels, 1 memcpys, 1 memsets, 5 API calls, 0 dropped records"
        ),
        "{stdout}"
    );
    let fill_row = stdout
        .lines()
        .find(|l| l.ends_with(FILL_DEMANGLED) && !l.starts_with("kernel"))
        .expect("summary row of the fill kernel");
    let cols: Vec<&str> = fill_row.split_whitespace().take(5).collect();
    assert_eq!(
        cols,
        ["2", "4.000", "2.000", "2.000", "2.000"],
        "{fill_row}"
    );
    // The Chrome trace: valid JSON with GPU and stream tracks, kernel/copy/set/API categories and flows.
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&chrome).unwrap()).expect("valid JSON");
    let events = json["traceEvents"].as_array().expect("traceEvents");
    let named = |what: &str, name: &str| {
        events
            .iter()
            .any(|e| e["ph"] == "M" && e["name"] == what && e["args"]["name"] == name)
    };
    assert!(events.iter().any(|e| {
        e["ph"] == "M"
            && e["name"] == "process_name"
            && e["args"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("GPU 0"))
    }));
    assert!(named("thread_name", "stream 7") && named("thread_name", "stream 13"));
    // Host threads by the Linux thread id the stream's header says its records carry.
    assert!(
        named("thread_name", "TID 77 CUDA runtime") && named("thread_name", "TID 77 CUDA driver"),
        "{events:?}"
    );
    let count = |cat: &str| {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == cat)
            .count()
    };
    assert_eq!(
        (
            count("kernel"),
            count("gpu_memcpy"),
            count("gpu_memset"),
            count("cuda_runtime"),
            count("cuda_driver")
        ),
        (3, 1, 1, 3, 2)
    );
    let k = events
        .iter()
        .find(|e| e["cat"] == "kernel" && e["name"] == FILL_DEMANGLED)
        .expect("kernel event");
    assert_eq!(k["dur"], 2.0);
    assert_eq!(k["args"]["correlation"], 1);
    let flows = events.iter().filter(|e| e["ph"] == "f").count();
    assert_eq!(
        flows, 4,
        "one arrow into each kernel and copy from its API call (the set has none)"
    );
    assert_eq!(
        entries(dir.path()),
        ["trace.json"],
        "no temporary file left"
    );
}

/// The names in a folder, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn dropped_records_are_reported_with_a_nonzero_exit() {
    let out = trace("dropped", &["--quiet"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out.stdout).contains("42 dropped records"));
    assert!(text(&out.stderr).contains("42 activity records were dropped"));
}

#[test]
fn a_crash_keeps_what_came_before_and_exits_with_the_signal() {
    let out = trace("crash", &["--quiet"]);
    assert_eq!(out.status.code(), Some(128 + 6), "SIGABRT");
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("3 kernels, 1 memcpys, 1 memsets"),
        "{stdout}"
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("ended without finishing its stream"),
        "{stderr}"
    );
    assert!(stderr.contains("ended by signal 6"), "{stderr}");
}

#[test]
fn a_program_that_never_uses_cuda_is_a_clear_error_and_writes_no_trace() {
    let dir = tempfile::tempdir().unwrap();
    let chrome = dir.path().join("trace.json");
    let out = trace(
        "nocuda",
        &["--quiet", "--chrome-trace", chrome.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no traced process connected"));
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
}

#[test]
fn every_process_that_uses_cuda_is_traced() {
    let out = trace("two", &["--quiet"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("2 processes, 6 kernels"));
}

#[test]
fn a_stream_kept_open_by_a_child_does_not_hang_the_tracer() {
    let t0 = Instant::now();
    let out = trace("lingering-child", &["--quiet", "--drain-timeout-ms", "700"]);
    assert!(t0.elapsed() < Duration::from_secs(20), "bounded wait");
    assert_eq!(out.status.code(), Some(3), "incomplete trace");
    assert!(text(&out.stdout).contains("3 kernels"));
    assert!(text(&out.stderr).contains("had not finished its stream"));
}

#[test]
fn a_corrupt_stream_is_reported() {
    let out = trace("garbage", &["--quiet"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains("not a gpu-tools trace stream"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn an_unwritable_trace_file_fails_before_the_program_runs() {
    for (path, why) in [
        ("/nonexistent-dir/trace.json", "No such file or directory"),
        ("/", "it is a folder"),
    ] {
        let out = trace("normal", &["--chrome-trace", path]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "gpu-tools trace: cannot write the Chrome trace {path}: "
            )) && stderr.contains(why),
            "{stderr}"
        );
        assert!(
            !text(&out.stdout).contains("--- summary"),
            "the program did not run"
        );
    }
}

#[test]
fn a_missing_or_unrunnable_program_is_a_clear_error() {
    let out = gpu_tools_trace()
        .args(["--backend", "cupti", "--", "/nonexistent/program"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert!(text(&out.stderr).contains("cannot start /nonexistent/program: not found"));
    let out = gpu_tools_trace()
        .args(["--", "no-such-program-in-path"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert!(
        text(&out.stderr).contains("cannot start no-such-program-in-path: not found in PATH"),
        "{}",
        text(&out.stderr)
    );
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("not-executable");
    std::fs::write(&plain, b"#!/bin/sh\n").unwrap();
    for program in [plain.as_path(), dir.path()] {
        let out = gpu_tools_trace().arg("--").arg(program).output().unwrap();
        assert_eq!(out.status.code(), Some(126), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("not an executable file"),
            "{}",
            text(&out.stderr)
        );
    }
}

#[test]
fn without_a_driver_the_cupti_backend_says_so_and_does_not_run_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["trace", "--backend", "cupti", "--", "touch"])
        .arg(&marker)
        .env("GPU_TOOLS_CUDA_DRIVER_LIB", "/nonexistent/libcuda.so.1")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(
            "gpu-tools trace: the CUDA driver is not installed here, and the cupti backend needs it (the program \
             was not run): CUDA driver (libcuda.so.1) not loaded; tried "
        ),
        "{stderr}"
    );
    assert!(!marker.exists(), "the program did not run");
}

#[test]
fn a_missing_injection_library_is_named() {
    let out = gpu_tools_trace()
        .args([
            "--backend",
            "cupti",
            "--inject-lib",
            "/nonexistent/libgpu_tools_inject.so",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr)
            .contains("the injection library /nonexistent/libgpu_tools_inject.so does not exist"),
        "{}",
        text(&out.stderr)
    );
    let out = gpu_tools_trace()
        .args(["--backend", "cupti", "--", "true"])
        .env("GPU_TOOLS_INJECT_LIB", "/nonexistent/lib.so")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr)
            .contains("$GPU_TOOLS_INJECT_LIB names /nonexistent/lib.so, which does not exist"),
        "{}",
        text(&out.stderr)
    );
}

/// With nothing named, the library embedded in `gpu-tools` is written to the user's cache folder once and handed
/// to the program.
#[test]
fn the_embedded_injection_library_is_written_to_the_cache_and_used() {
    let cache = tempfile::tempdir().unwrap();
    let me = std::env::current_exe().unwrap();
    let run = || {
        let out = gpu_tools_trace()
            .args(["--backend", "cupti", "--"])
            .arg(&me)
            .args([
                "trace::standin",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(STANDIN, "environment")
            .env("XDG_CACHE_HOME", cache.path())
            .output()
            .unwrap();
        let stdout = text(&out.stdout);
        let line = stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{}=", env::CUDA_INJECTION)))
            .unwrap_or_else(|| panic!("the program saw no injection library: {stdout}"))
            .to_string();
        PathBuf::from(line)
    };
    let lib = run();
    assert!(
        lib.starts_with(cache.path().join("gpu-tools")),
        "{}",
        lib.display()
    );
    let bytes = std::fs::read(&lib).unwrap();
    assert!(bytes.starts_with(b"\x7fELF"), "a shared object");
    // A damaged copy is replaced before use; an intact one is used as it is.
    std::fs::write(&lib, b"damaged").unwrap();
    assert_eq!(run(), lib);
    assert_eq!(std::fs::read(&lib).unwrap(), bytes);
    assert_eq!(entries(&cache.path().join("gpu-tools")).len(), 1);
}

/// A `gpu-tools` whose embedded library cannot be written to any cache folder (a read-only home, a full disk) says
/// so, names `--inject-lib` and `$GPU_TOOLS_INJECT_LIB`, and runs nothing; `doctor` says the same.
#[test]
fn an_unwritable_cache_names_the_ways_to_give_the_library() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    // XDG_CACHE_HOME: a read-only folder (for root, who may write anywhere, a file where the folder should be).
    let cache = dir.path().join("cache");
    if root {
        std::fs::write(&cache, b"").unwrap();
    } else {
        std::fs::create_dir(&cache).unwrap();
        std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o500)).unwrap();
    }
    // HOME has a file where ~/.cache is; the temporary folder a file where its private folder would be.
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join(".cache"), b"").unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    // SAFETY: as above.
    let uid = unsafe { libc::geteuid() };
    std::fs::write(tmp.join(format!("gpu-tools-{uid}")), b"").unwrap();
    let marker = dir.path().join("ran");
    let run = |args: &[&str]| {
        gpu_tools_trace()
            .args(args)
            .env("XDG_CACHE_HOME", &cache)
            .env("HOME", &home)
            .env("TMPDIR", &tmp)
            .output()
            .unwrap()
    };
    let out = run(&[
        "--backend",
        "cupti",
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with(
            "gpu-tools trace: the injection library embedded in gpu-tools cannot be written to a cache folder ("
        ),
        "{err}"
    );
    let why = if root {
        format!("{} is not a folder", cache.display())
    } else {
        "permission denied".to_string()
    };
    assert!(
        err.contains(&format!("{}/gpu-tools: {why}", cache.display())),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{}/.cache/gpu-tools: {}/.cache is not a folder",
            home.display(),
            home.display()
        )),
        "{err}"
    );
    assert!(
        err.contains(
            "): name a copy of libgpu_tools_inject.so with --inject-lib PATH or $GPU_TOOLS_INJECT_LIB, or set \
             XDG_CACHE_HOME to a folder this user can write (the program was not run)"
        ),
        "{err}"
    );
    assert!(!marker.exists(), "the program did not run");
    // The same for the AMD tool library.
    let out = gpu_tools_trace()
        .args(["--backend", "rocm", "--", "touch", marker.to_str().unwrap()])
        .env("XDG_CACHE_HOME", &cache)
        .env("HOME", &home)
        .env("TMPDIR", &tmp)
        .env(
            gpu_tools::rocprofiler_sdk::ENV_VAR,
            gpu_tools_testing::double_path("rocprofiler_sdk"),
        )
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--inject-lib PATH or $GPU_TOOLS_INJECT_ROCM_LIB"),
        "{err}"
    );
    assert!(!marker.exists(), "the program did not run");
    // doctor says it too, and writes nothing.
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["doctor", "--json"])
        .env("XDG_CACHE_HOME", &cache)
        .env("HOME", &home)
        .env("TMPDIR", &tmp)
        .env_remove("GPU_TOOLS_INJECT_LIB")
        .output()
        .unwrap();
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["injection_library"]["found"], false);
    assert!(
        report["injection_library"]["detail"]
            .as_str()
            .unwrap()
            .contains("--inject-lib PATH or $GPU_TOOLS_INJECT_LIB"),
        "{report}"
    );
    if !root {
        std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
}

#[test]
fn a_progress_line_only_when_asked_or_on_a_terminal() {
    // stderr is a pipe here: no progress line by default.
    let out = trace("normal", &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        !err.contains('\r') && !err.contains("records from"),
        "{err:?}"
    );
    // --progress forces it: one line rewritten in place with the records and processes so far and the trace
    // file's size, erased at the end.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.gputrace");
    let out = trace_with(
        "normal",
        &["--progress", "-o", file.to_str().unwrap()],
        &[(LINGER, "700")],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // The last line drawn, after every record arrived (the program lingers after sending them).
    let drawn = err
        .rfind("\r\x1b[Kgpu-tools trace: ")
        .unwrap_or_else(|| panic!("a progress line: {err:?}"));
    let line = &err[drawn + 4..];
    let line = &line[..line.find('\r').unwrap()];
    assert!(
        line.starts_with("gpu-tools trace: 12 records from 1 process, ")
            && line.contains(" written, "),
        "{line:?}"
    );
    assert!(err.ends_with("\r\x1b[K"), "erased at the end: {err:?}");
    // --no-progress wins over --progress given before it; --quiet alone keeps it off.
    let out = trace("normal", &["--progress", "--no-progress"]);
    assert!(!text(&out.stderr).contains('\r'));
    let out = trace("normal", &["--quiet"]);
    assert!(!text(&out.stderr).contains('\r'));
}

#[test]
fn kinds_take_all() {
    let me = std::env::current_exe().unwrap();
    let out = gpu_tools_trace()
        .args(["--backend", "cupti", "--kinds", "all", "--inject-lib"])
        .arg(&me)
        .arg("--")
        .arg(&me)
        .args([
            "trace::standin",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(STANDIN, "environment")
        .output()
        .unwrap();
    assert!(
        text(&out.stdout).contains(&format!(
            "{}=kernel,memcpy,memset,sync,driver,runtime,overhead",
            env::KINDS
        )),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let out = gpu_tools_trace()
        .args(["--backend", "cupti", "--kinds", "kernels", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("invalid value 'kernels' for '--kinds <KINDS>'"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn options_of_the_other_backend_are_usage_errors() {
    let out = gpu_tools_trace()
        .args(["--backend", "debugger", "--no-api", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--no-api does not apply to the debugger backend"));
    assert!(
        text(&out.stderr).contains("Usage: gpu-tools trace"),
        "{}",
        text(&out.stderr)
    );
    let out = gpu_tools_trace()
        .args(["--backend", "cupti", "--buffer-size", "lots", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("invalid value 'lots' for '--buffer-size <BYTES>'"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn an_attach_protocol_without_attach_is_a_usage_error() {
    let out = gpu_tools_trace()
        .args(["--attach-protocol", "call", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--attach-protocol applies only with --attach PID"),
        "{}",
        text(&out.stderr)
    );
    let out = gpu_tools_trace()
        .args(["--attach", "1", "--attach-protocol", "fd"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("[possible values: auto, call, descriptor]"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn attaching_to_a_missing_process_is_a_clear_error() {
    let gone = gpu_tools_testing::process::vanished_pid();
    let out = gpu_tools_trace()
        .args(["--attach", &gone.to_string()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!("gpu-tools trace: no process {gone}\n")
    );
}

/// Runs `gpu-tools trace ARGS` on the stand-in's "environment" scenario and returns what it saw.
fn environment(args: &[&str]) -> String {
    let me = std::env::current_exe().unwrap();
    let out = gpu_tools_trace()
        .args(["--backend", "cupti", "--inject-lib"])
        .arg(&me)
        .args(args)
        .arg("--")
        .arg(&me)
        .args([
            "trace::standin",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(STANDIN, "environment")
        .output()
        .unwrap();
    text(&out.stdout)
}

#[test]
fn graph_api_and_nvtx_options_reach_the_injection_library() {
    let me = std::env::current_exe().unwrap();
    let me = me.to_str().unwrap();
    // Defaults: graphs as whole launches, every API call, NVTX on (the nvtx kind is on by default).
    let seen = environment(&[]);
    assert!(
        seen.contains(&format!("{}=graph\n", env::CUDA_GRAPH)),
        "{seen}"
    );
    assert!(seen.contains(&format!("{}=all\n", env::API)), "{seen}");
    assert!(
        seen.contains(&format!("{}={me}\n", env::NVTX_INJECTION)),
        "{seen}"
    );
    assert!(seen.contains(&format!("{}=\n", env::API_SKIP)), "{seen}");
    let seen = environment(&[
        "--cuda-graph-trace",
        "node",
        "--api",
        "launches",
        "--api-skip",
        "cudaGetLastError,cuKernelGetName",
        "--kinds",
        "kernel,runtime",
    ]);
    assert!(
        seen.contains(&format!("{}=node\n", env::CUDA_GRAPH)),
        "{seen}"
    );
    assert!(seen.contains(&format!("{}=launches\n", env::API)), "{seen}");
    assert!(
        seen.contains(&format!(
            "{}=cudaGetLastError,cuKernelGetName\n",
            env::API_SKIP
        )),
        "{seen}"
    );
    // Without the nvtx kind, NVTX is not injected.
    assert!(
        seen.contains(&format!("{}=\n", env::NVTX_INJECTION)),
        "{seen}"
    );
    let seen = environment(&["--api", "none"]);
    assert!(
        seen.contains(&format!("{}=kernel,memcpy,memset,nvtx\n", env::KINDS)),
        "{seen}"
    );
    // Usage errors: a bad value, or the option for the other backend.
    let out = gpu_tools_trace()
        .args([
            "--backend",
            "cupti",
            "--cuda-graph-trace",
            "kernel",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = gpu_tools_trace()
        .args(["--backend", "debugger", "--api", "launches", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--api does not apply to the debugger backend"));
}

#[test]
fn the_trace_file_is_streamed_and_read_back_by_stats_and_export() {
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("run-%p.gputrace");
    let out = trace("normal", &["-q", "-o", template.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let files = entries(dir.path());
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(
        files[0].starts_with("run-") && !files[0].contains("%p"),
        "{files:?}"
    );
    let file = dir.path().join(&files[0]);
    let stats = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["stats", "--format", "csv", "--report", "cuda_gpu_kern_sum"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(stats.status.code(), Some(0), "{}", text(&stats.stderr));
    let csv = text(&stats.stdout);
    assert!(
        csv.contains("add_one") && csv.contains(FILL_DEMANGLED),
        "{csv}"
    );
    let json = dir.path().join("t.json");
    let export = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .arg("export")
        .arg(&file)
        .arg("--chrome")
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(export.status.code(), Some(0), "{}", text(&export.stderr));
    // A run that traced nothing writes no trace file.
    let empty = dir.path().join("none");
    std::fs::create_dir(&empty).unwrap();
    let out = trace(
        "nocuda",
        &["-o", empty.join("t.gputrace").to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(entries(&empty).is_empty());
}

/// No backend asked for and no CUPTI: options that need the cupti backend are refused with what is missing and
/// its fix (not blamed on the debugger backend), and nothing runs.
#[test]
fn without_cupti_an_option_that_needs_it_names_the_missing_library() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let file = dir.path().join("run.gputrace");
    let out = gpu_tools_trace()
        .arg("-o")
        .arg(&file)
        .args(["--", "touch"])
        .arg(&marker)
        .env("GPU_TOOLS_CUPTI_LIB", "/nonexistent/libcupti.so.13")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(
            "gpu-tools trace: --output needs the cupti backend, and CUPTI was not found (the program was not run): \
             CUPTI (libcupti.so.13 or .12) not loaded; tried /nonexistent/libcupti.so.13 ($GPU_TOOLS_CUPTI_LIB): \
             no such file. CUPTI comes with the CUDA toolkit, not the driver: "
        ),
        "{stderr}"
    );
    assert!(stderr.contains("pip install nvidia-cuda-cupti"), "{stderr}");
    assert!(!stderr.contains("does not apply"), "{stderr}");
    assert!(!marker.exists(), "the program did not run");
    assert!(!file.exists(), "no trace file");
}

/// No backend asked for, no CUPTI and no driver: the driver is named (both backends need it), CUPTI beside it, and
/// nothing runs; no bare loader error.
#[test]
fn without_cupti_or_a_driver_trace_says_both_are_missing() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["trace", "--", "touch"])
        .arg(&marker)
        .env("GPU_TOOLS_CUPTI_LIB", "/nonexistent/libcupti.so.13")
        .env("GPU_TOOLS_CUDA_DRIVER_LIB", "/nonexistent/libcuda.so.1")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(
            "gpu-tools trace: the CUDA driver is not installed here, and the debugger backend needs it (the \
             program was not run): CUDA driver (libcuda.so.1) not loaded; tried /nonexistent/libcuda.so.1"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("install the NVIDIA driver"), "{stderr}");
    assert!(
        stderr
            .contains("(and CUPTI was not found either: CUPTI (libcupti.so.13 or .12) not loaded;"),
        "{stderr}"
    );
    assert!(!marker.exists(), "the program did not run");
}

/// `-o -` is standard output: the trace goes there (`gpu-tools stats -` reads it back), and the listing, the
/// summary and the program's own output go to stderr; both traces on standard output are refused.
#[test]
fn a_dash_writes_the_trace_to_standard_output() {
    let out = trace("normal", &["-o", "-"]);
    assert_eq!(out.status.code(), Some(0), "exit code");
    let err = text(&out.stderr);
    assert!(err.contains("kernel  "), "the listing on stderr: {err}");
    assert!(
        err.contains("running 1 test"),
        "the program's output on stderr: {err}"
    );
    let mut stats = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args([
            "stats",
            "--report",
            "cuda_gpu_kern_sum",
            "--format",
            "csv",
            "-",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    stats.stdin.take().unwrap().write_all(&out.stdout).unwrap();
    let read = stats.wait_with_output().unwrap();
    assert_eq!(read.status.code(), Some(0));
    assert!(
        text(&read.stdout).contains("FillFunctor"),
        "{}",
        text(&read.stdout)
    );

    let both = trace("normal", &["-o", "-", "--chrome-trace", "-"]);
    assert_eq!(both.status.code(), Some(2));
    assert!(text(&both.stderr).contains("cannot both be standard output"));
}

/// A device that is also standard output (`/dev/null` for both) is written, but not taken for standard output: the
/// listing stays there and does not move to stderr.
#[test]
fn a_device_that_is_standard_output_too_keeps_the_listing_there() {
    let me = std::env::current_exe().unwrap();
    let out = gpu_tools_trace()
        .args(["--backend", "cupti", "--inject-lib"])
        .arg(&me)
        .args(["--chrome-trace", "/dev/null", "--"])
        .arg(&me)
        .args(["trace::standin", "--exact", "--ignored", "--test-threads=1"])
        .env(STANDIN, "normal")
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        !err.contains("kernel  "),
        "the listing is not on stderr: {err}"
    );
}
