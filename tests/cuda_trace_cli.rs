//! `cuda_trace --backend cupti` end to end without a GPU: the traced program is this test binary run again as a
//! stand-in for a CUDA program with the injection library. It connects to the socket `cuda_trace` names in
//! `GPU_TOOLS_TRACE_SOCKET` and streams records in the crate's format, as the library does, for each scenario of
//! the `STANDIN` variable: a normal run, dropped records, a crash, a program that never uses CUDA, two processes, a
//! forked child that keeps the connection open, a corrupt stream. Checks the listing, the summary, the Chrome trace
//! and the exit code of each. Needs the `cuda_trace` example built (`cargo test` builds it).
#![cfg(all(feature = "cupti", feature = "cudbg"))]

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpu_tools::trace::*;

const STANDIN: &str = "GPU_TOOLS_TEST_STANDIN";

const FILL: &str = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_";
const FILL_DEMANGLED: &str = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, \
                              std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)";

fn cuda_trace() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>");
    let p = profile.join("examples").join("cuda_trace");
    assert!(
        p.exists(),
        "{} missing: build the examples (cargo test builds them)",
        p.display()
    );
    p
}

/// Runs `cuda_trace ARGS -- <this binary as stand-in> SCENARIO`.
fn trace(scenario: &str, args: &[&str]) -> Output {
    let me = std::env::current_exe().unwrap();
    let t0 = Instant::now();
    let out = Command::new(cuda_trace())
        .args(["--backend", "cupti", "--inject-lib"])
        .arg(&me)
        .args(args)
        .arg("--")
        .arg(&me)
        .args([
            "standin",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(STANDIN, scenario)
        .output()
        .expect("run cuda_trace");
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
        start,
        end: start + 2_000,
        device: 0,
        context: 1,
        stream,
        correlation,
        grid_id: u64::from(correlation),
        grid: [2, 1, 1],
        block: [32, 1, 1],
        static_shared: 0,
        dynamic_shared: 0,
        registers: 16,
        graph_id: 0,
        graph_node_id: 0,
        name: Arc::from(name),
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
        let path = std::env::var_os(env::SOCKET).expect("cuda_trace sets the socket");
        assert!(
            std::env::var_os(env::CUDA_INJECTION).is_some(),
            "cuda_trace sets CUDA_INJECTION64_PATH"
        );
        assert_eq!(
            std::env::var(env::KINDS).as_deref(),
            Ok("kernel,memcpy,memset,driver,runtime"),
            "default kinds"
        );
        let sock = UnixStream::connect(path).expect("connect");
        let pid = std::process::id();
        let mut enc = Encoder::new(&StreamHeader::new(pid, 130001, TimestampClock::Monotonic));
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

/// The stand-in program (run only by the tests below, through `cuda_trace`).
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
        "two" => {
            let mut s = Sender::connect();
            s.send(&workload(1_000_000));
            let me = std::env::current_exe().unwrap();
            let status = Command::new(me)
                .args(["standin", "--exact", "--ignored", "--test-threads=1"])
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
            // an end record: cuda_trace must not wait for it past its drain timeout.
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
    let dir = std::env::temp_dir().join(format!("cuda_trace_cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let chrome = dir.join("trace.json");
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
    assert!(named("process_name", "GPU 0"));
    assert!(named("thread_name", "stream 7") && named("thread_name", "stream 13"));
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
    assert_eq!(k["args"]["api"], "cudaLaunchKernel");
    let flows = events.iter().filter(|e| e["ph"] == "s").count();
    assert_eq!(
        flows, 4,
        "one arrow per kernel, copy and set with a known API call (not the set)"
    );
    let _ = std::fs::remove_dir_all(&dir);
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
fn a_program_that_never_uses_cuda_is_a_clear_error() {
    let out = trace("nocuda", &["--quiet"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no traced process connected"));
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
    let out = trace("normal", &["--chrome-trace", "/nonexistent-dir/trace.json"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("cannot write the Chrome trace /nonexistent-dir/trace.json")
    );
    assert!(
        !text(&out.stdout).contains("--- summary"),
        "the program did not run"
    );
}

#[test]
fn a_missing_program_is_a_clear_error() {
    let out = Command::new(cuda_trace())
        .args(["--backend", "cupti", "--", "/nonexistent/program"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert!(text(&out.stderr).contains("cannot start /nonexistent/program: not found"));
}

#[test]
fn a_missing_injection_library_names_the_places_searched() {
    // A copy of cuda_trace in a folder without the library (a built workspace has it next to the original).
    let dir = std::env::temp_dir().join(format!("cuda_trace_cli-nolib-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    let copy = dir.join("bin").join("cuda_trace");
    std::fs::copy(cuda_trace(), &copy).unwrap();
    let out = Command::new(&copy)
        .args(["--backend", "cupti", "--", "true"])
        .env_remove("GPU_TOOLS_INJECT_LIB")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("libgpu_tools_inject.so was not found"),
        "{stderr}"
    );
    assert!(
        stderr.contains("bin/libgpu_tools_inject.so (next to cuda_trace)")
            && stderr.contains("/libgpu_tools_inject.so (parent folder of cuda_trace)"),
        "{stderr}"
    );
}

#[test]
fn options_of_the_other_backend_are_usage_errors() {
    let out = Command::new(cuda_trace())
        .args(["--backend", "debugger", "--no-api", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--no-api does not apply to the debugger backend"));
}

#[test]
fn an_attach_protocol_without_attach_is_a_usage_error() {
    let out = Command::new(cuda_trace())
        .args(["--attach-protocol", "call", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--attach-protocol applies only with --attach PID"),
        "{}",
        text(&out.stderr)
    );
    let out = Command::new(cuda_trace())
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
