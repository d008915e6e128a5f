//! A program launched with the library injected (the `child` scenarios, run by [`run`]): its records at exit, the
//! API records' filtering, a profiler inside the program, the flushes at a context's destruction and on a period, an
//! abort, a segfault, a fork, no driver, and nothing configured.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixListener;
use std::process::{Command, Stdio};
use std::time::Duration;

use gpu_tools::trace::*;
use gpu_tools_injection::env;

use crate::common;
use crate::program_profiler::program_profiler;
use crate::support::{CONCURRENT_KERNEL, MEMSET, SCENARIO, end, kernels, library, notice_texts};

const DRIVER: u32 = 4;
const RUNTIME: u32 = 5;

/// What the parent got from one child run.
struct Run {
    /// The stream's header.
    header: Option<StreamHeader>,
    records: Vec<Record>,
    errors: Vec<WireError>,
    status: std::process::ExitStatus,
    stdout: String,
}

/// Runs the child scenario with the library's environment and collects its stream. `talk` gets the child's
/// stdin and the records read so far whenever the child prints a line `WAIT`, and answers it.
fn run(scenario: &str, vars: &[(&str, String)], talk: impl Fn(&[Record]) -> bool) -> Run {
    // Refuses a missing or stale library here, with its message, rather than as a child that never connects.
    library();
    let dir = std::env::temp_dir().join(format!("inject_double-{scenario}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("s");
    let listener = UnixListener::bind(&socket).unwrap();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "launched::child",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(SCENARIO, scenario)
    .env(env::SOCKET, &socket)
    .env(env::FLUSH_MS, "50")
    .env(env::LOG, "debug")
    .env(
        "GPU_TOOLS_CUDA_DRIVER_LIB",
        common::double_path("cuda_driver"),
    )
    .env("GPU_TOOLS_CUPTI_LIB", common::double_path("cupti_activity"))
    .stdin(Stdio::piped())
    .stdout(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    // The child connects from InitializeInjection; the stream is read on a thread into a shared list.
    let records = std::sync::Arc::new(std::sync::Mutex::new((Vec::new(), Vec::new(), None)));
    let r = std::sync::Arc::clone(&records);
    let reader = std::thread::spawn(move || {
        // Bounded waits: a child that never connects, or never ends its stream, fails the test instead of
        // hanging it.
        let conn =
            gpu_tools_testing::accept_within(&listener, Duration::from_secs(30), "the library");
        let mut stream = StreamReader::new(conn);
        while let Some(item) = stream.next() {
            let mut g = r.lock().unwrap();
            g.2 = g.2.or(stream.header().copied());
            match item {
                Ok(rec) => g.0.push(rec),
                Err(e) => g.1.push(e),
            }
        }
    });
    let mut out = String::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if line == "WAIT" {
            // Give the stream a moment to arrive, then let the child go on.
            let mut ok = false;
            for _ in 0..100 {
                if talk(&records.lock().unwrap().0) {
                    ok = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            writeln!(stdin, "{}", if ok { "seen" } else { "not seen" }).unwrap();
        }
        out.push_str(&line);
        out.push('\n');
    }
    let status = child.wait().unwrap();
    reader.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let (records, errors, header) = std::mem::take(&mut *records.lock().unwrap());
    println!("scenario {scenario}: {status}\n{out}records {records:#?}\nerrors {errors:?}");
    Run {
        header,
        records,
        errors,
        status,
        stdout: out,
    }
}

/// Waits for the parent's answer to a `WAIT` line.
fn wait_for_parent() -> String {
    println!("WAIT");
    std::io::stdout().flush().unwrap();
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer).unwrap();
    answer.trim().to_string()
}

/// The child side: a stand-in CUDA program with the library injected.
#[test]
#[ignore = "the child process of the other tests"]
fn child() {
    let Ok(scenario) = std::env::var(SCENARIO) else {
        return;
    };
    let lib_path = library();
    let profiler = (scenario == "coexist").then(program_profiler);
    // SAFETY: the library's initialisers only set up Rust statics.
    let lib = unsafe { libloading::Library::new(&lib_path) }.expect("dlopen the library");
    // SAFETY: `int InitializeInjection(void)`, as CUDA calls it.
    let init =
        unsafe { lib.get::<unsafe extern "C" fn() -> i32>(b"InitializeInjection\0") }.unwrap();
    // SAFETY: no arguments; CUDA would call it from cuInit.
    let rc = unsafe { init() };
    println!("InitializeInjection returned {rc}");
    if scenario == "no-driver" {
        return;
    }
    assert_eq!(rc, 1);
    let d = common::double();
    let kernel = |start: u64, corr: u32| {
        d.kernel(
            CONCURRENT_KERNEL,
            start,
            start + 100,
            (0, 1, 7),
            corr,
            c"_Z4stepv",
            (1, 1, 1),
            (32, 1, 1),
        )
    };
    match scenario.as_str() {
        "exit" => {
            for i in 0..50u32 {
                assert_eq!(kernel(1000 + u64::from(i) * 200, i + 1), 1);
            }
            assert_eq!(d.memcpy(1, true, 4096, 20_000, 20_100, 7, 100), 1);
            assert_eq!(d.memset(0x5a, 1 << 20, 20_200, 20_300, 7, 101), 1);
            println!("thread id type {}", d.thread_id_type());
            // Nothing flushed by hand: the exit handler must deliver all of it.
        }
        "api" => {
            // A launch through each API, each beside the host-side bookkeeping a framework makes at a launch.
            use gpu_tools::cupti::{DriverCbid, RuntimeCbid};
            let runtime = |name: &str| {
                RuntimeCbid::all()
                    .find(|c| c.function_name() == Some(name))
                    .expect(name)
                    .id()
            };
            let driver = |name: &str| DriverCbid::from_name(name).expect(name).id();
            let calls = [
                (DRIVER, driver("cuDevicePrimaryCtxGetState")),
                (DRIVER, driver("cuLaunchKernel")),
                (DRIVER, driver("cuKernelGetName")),
                (RUNTIME, runtime("cudaLaunchKernel")),
                (RUNTIME, runtime("cudaGetLastError")),
                (RUNTIME, runtime("cudaStreamSynchronize")),
            ];
            for (i, (kind, cbid)) in (0u32..).zip(calls) {
                let start = 1000 + u64::from(i) * 100;
                // -1: CUPTI left it out (a function turned off there).
                let made = d.api(kind, cbid, start, start + 50, 77, i + 1, 0);
                assert!(made == 1 || made == -1, "{made}");
            }
            let (choices, off) = d.api_choices();
            println!("api choices {choices} off {off}");
        }
        "context-destroy" => {
            assert_eq!(kernel(1000, 1), 1);
            // The library flushes completed buffers when a context is about to be destroyed.
            let fired = d.resource(
                gpu_tools::sys::cupti::CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
                0x1000,
                0,
                None,
            );
            assert!(fired, "the library subscribed to resource callbacks");
            assert_eq!(wait_for_parent(), "seen", "the kernel arrived before exit");
        }
        "periodic" => {
            assert_eq!(kernel(1000, 1), 1);
            // Only the periodic flush (50 ms) can deliver it while this process waits.
            assert_eq!(
                wait_for_parent(),
                "seen",
                "the periodic flush delivered the kernel"
            );
            assert_eq!(kernel(2000, 2), 1);
            // A crash now: no exit handler; the second kernel may be lost, the first is not.
            std::process::abort();
        }
        "segv" => {
            assert_eq!(kernel(1000, 1), 1);
            assert_eq!(kernel(2000, 2), 1);
            // A real fault right after the last launch (no flush since): a read of a page with no access.
            // SAFETY: maps one inaccessible page; reading it faults, which is the point of this scenario.
            unsafe {
                let page = libc::mmap(
                    std::ptr::null_mut(),
                    4096,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                assert_ne!(page, libc::MAP_FAILED);
                std::ptr::read_volatile(page.cast::<u8>());
            }
            unreachable!("the read faults");
        }
        "fork" => {
            assert_eq!(kernel(1000, 1), 1);
            // SAFETY: the child only exits (running the exit handlers, as a forked child of a traced program would).
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // SAFETY: exit runs the atexit handlers, the library's among them; they must do nothing here.
                unsafe { libc::exit(0) };
            }
            let mut status = 0;
            // SAFETY: waits for the child forked above.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            println!("forked child exited with {status}");
            assert_eq!(kernel(2000, 2), 1);
        }
        "coexist" => {
            let p = profiler.expect("loaded above");
            let memset = |start: u64| d.memset(0x5a, 4096, start, start + 50, 7, 200);
            // Each record starts now, on CUPTI's clock (the trace's): whose it is goes by when its kind was on.
            // Before the program's own profiler starts: the trace's only.
            for i in 0..3u32 {
                assert_eq!(kernel(d.now(), i + 1), 1);
            }
            // Its session: kernels, which the trace records too, and sets, which only it wants.
            let both = [CONCURRENT_KERNEL, MEMSET];
            assert_eq!(p.start(&both), 0);
            for i in 3..8u32 {
                assert_eq!(kernel(d.now(), i + 1), 1);
            }
            assert_eq!(memset(d.now()), 1);
            assert_eq!(memset(d.now()), 1);
            assert_eq!(p.stop(&both), 0);
            println!(
                "program kernels {} memsets {}",
                p.count(CONCURRENT_KERNEL),
                p.count(MEMSET)
            );
            // After it: kernels still traced; sets off in CUPTI again.
            for i in 8..10u32 {
                assert_eq!(kernel(d.now(), i + 1), 1);
            }
            println!("memset after its session {}", memset(d.now()));
            println!("enabled mask {:#x}", d.stats().enabled_mask);
            // It subscribes: the trace holds CUPTI's one subscriber, and gives it up.
            println!("subscribe {}", p.subscribe());
            // A second session of its own.
            assert_eq!(p.start(&both[..1]), 0);
            assert_eq!(kernel(d.now(), 11), 1);
            assert_eq!(p.stop(&both[..1]), 0);
            println!(
                "program kernels {} memsets {} buffers {}",
                p.count(CONCURRENT_KERNEL),
                p.count(MEMSET),
                p.buffers()
            );
        }
        other => panic!("unknown scenario {other}"),
    }
}

#[test]
fn records_reach_the_tracer_at_exit_with_a_complete_count() {
    let r = run("exit", &[], |_| true);
    assert!(r.status.success(), "child failed");
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert!(
        matches!(r.records.first(), Some(Record::ProcessStart(_))),
        "the stream starts with the process"
    );
    let k = kernels(&r.records);
    assert_eq!(k.len(), 50);
    assert!(k.iter().all(|k| &*k.name == "_Z4stepv" && k.stream == 7));
    let corr: Vec<u32> = k.iter().map(|k| k.correlation).collect();
    assert_eq!(
        corr,
        (1..=50).collect::<Vec<_>>(),
        "each record once, in order"
    );
    assert!(
        r.records
            .iter()
            .any(|r| matches!(r, Record::Memcpy(m) if m.bytes == 4096))
    );
    assert!(
        r.records
            .iter()
            .any(|r| matches!(r, Record::Memset(m) if m.value == 0x5a))
    );
    let e = end(&r.records).expect("end record");
    assert_eq!(e.reason, EndReason::Exit);
    assert_eq!(
        e.records + 1,
        r.records.len() as u64,
        "every record sent arrived"
    );
    assert_eq!((e.dropped, e.callback_panics, e.skipped), (0, 0, 0));
    // Launched with the program, the library has CUPTI write Linux thread ids, and the header says so.
    assert!(r.stdout.contains("thread id type 1"), "{}", r.stdout);
    assert_eq!(r.header.map(|h| h.thread_ids), Some(ThreadIds::Linux));
    assert!(
        !r.records
            .iter()
            .any(|r| matches!(r, Record::Notice(n) if n.text.contains("thread ids"))),
        "no note about thread ids when CUPTI took the setting"
    );
}

/// The API functions of a run's records, in order.
fn api_names(records: &[Record]) -> Vec<&str> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Api(a) => Some(&*a.name),
            _ => None,
        })
        .collect()
}

#[test]
fn the_default_api_records_leave_out_host_side_bookkeeping_and_all_keeps_it() {
    let r = run("api", &[], |_| true);
    assert!(r.status.success(), "child failed");
    assert_eq!(
        api_names(&r.records),
        [
            "cuLaunchKernel",
            "cudaLaunchKernel",
            "cudaStreamSynchronize"
        ]
    );
    // CUPTI's per-function choice is process-wide (the program's own profiler would lose those records too): the
    // writer leaves them out, and says how many.
    assert!(
        r.stdout.contains("api choices 0 off 0\n"),
        "CUPTI's choices untouched: {}",
        r.stdout
    );
    assert!(
        r.records.iter().any(|r| matches!(r, Record::Notice(n)
            if n.text.starts_with("3 API records of skipped functions left out"))),
        "{:?}",
        r.records
    );
    // Named functions are turned off in CUPTI itself (the user asked for them gone).
    let r = run("api", &[(env::API_SKIP, "cuLaunchKernel".into())], |_| true);
    assert!(r.status.success(), "child failed");
    assert!(r.stdout.contains("api choices 1 off 1\n"), "{}", r.stdout);
    assert_eq!(
        api_names(&r.records),
        ["cudaLaunchKernel", "cudaStreamSynchronize"]
    );
    let r = run("api", &[(env::API, "all".into())], |_| true);
    assert!(r.status.success(), "child failed");
    assert_eq!(
        api_names(&r.records),
        [
            "cuDevicePrimaryCtxGetState",
            "cuLaunchKernel",
            "cuKernelGetName",
            "cudaLaunchKernel",
            "cudaGetLastError",
            "cudaStreamSynchronize"
        ]
    );
}

#[test]
fn a_profiler_inside_the_program_gets_its_records_beside_the_trace() {
    let r = run("coexist", &[(env::KINDS, "kernel".into())], |_| true);
    assert!(r.status.success(), "{}", r.stdout);
    // Its first session: the 5 kernels and 2 sets made during it, none from before.
    assert!(
        r.stdout.contains("program kernels 5 memsets 2\n"),
        "{}",
        r.stdout
    );
    // Its kind alone was enabled for it, and disabled with its session; the trace's kernels stayed on.
    assert!(
        r.stdout.contains("memset after its session -1"),
        "{}",
        r.stdout
    );
    let mask = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("enabled mask 0x"))
        .and_then(|m| u64::from_str_radix(m, 16).ok())
        .expect("the mask printed");
    assert_eq!(
        (mask >> CONCURRENT_KERNEL & 1, mask >> MEMSET & 1),
        (1, 0),
        "{mask:#x}"
    );
    // CUPTI's one subscriber went to it.
    assert!(r.stdout.contains("subscribe 0"), "{}", r.stdout);
    // Its second session: one kernel more.
    assert!(
        r.stdout.contains("program kernels 6 memsets 2 buffers"),
        "{}",
        r.stdout
    );
    // The trace: every kernel, once, in order; none of the program's sets.
    let corr: Vec<u32> = kernels(&r.records).iter().map(|k| k.correlation).collect();
    assert_eq!(corr, (1..=11).collect::<Vec<_>>());
    assert!(!r.records.iter().any(|r| matches!(r, Record::Memset(_))));
    let notices = notice_texts(&r.records);
    for said in [
        "CUPTI is shared with the program's own profiler",
        "the trace gave it up",
        "the program's own profiler recorded during the trace: 8 of its records",
    ] {
        assert!(
            notices.iter().any(|n| n.contains(said)),
            "{said:?} in {notices:#?}"
        );
    }
    let e = end(&r.records).expect("end record");
    assert_eq!((e.dropped, e.callback_panics), (0, 0));
}

#[test]
fn a_context_destruction_flushes_before_the_exit() {
    let r = run("context-destroy", &[(env::FLUSH_MS, "0".into())], |got| {
        !kernels(got).is_empty()
    });
    assert!(r.status.success(), "{}", r.stdout);
    assert_eq!(kernels(&r.records).len(), 1);
    assert!(end(&r.records).is_some());
}

#[test]
fn the_periodic_flush_keeps_records_of_a_program_that_crashes() {
    // Without the signal handlers: only the periodic flush can have delivered the kernel.
    let r = run("periodic", &[(env::SIGNALS, "0".into())], |got| {
        !kernels(got).is_empty()
    });
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&r.status),
        Some(6),
        "the child aborts"
    );
    assert!(r.stdout.contains("WAIT"));
    let k = kernels(&r.records);
    assert!(
        k.iter().any(|k| k.correlation == 1),
        "the flushed kernel arrived"
    );
    assert!(end(&r.records).is_none(), "no exit handler ran");
}

#[test]
fn an_abort_flushes_everything_ends_the_stream_and_still_kills_the_program() {
    // The same crash with the signal handlers (the default): the program still dies of SIGABRT, and the kernel
    // launched after the last periodic flush arrives, followed by the end record naming the signal.
    let r = run("periodic", &[(env::FLUSH_MS, "0".into())], |_| true);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&r.status),
        Some(6),
        "the program's SIGABRT goes on to the default action"
    );
    let corr: Vec<u32> = kernels(&r.records).iter().map(|k| k.correlation).collect();
    assert_eq!(corr, [1, 2], "both kernels, with no periodic flush at all");
    let e = end(&r.records).expect("the handler sent the end record");
    assert_eq!(e.reason, EndReason::Signal(6));
    assert_eq!(e.records + 1, r.records.len() as u64, "nothing lost");
    assert!(r.errors.is_empty(), "{:?}", r.errors);
}

#[test]
fn a_segfault_right_after_the_launches_keeps_all_kernels_and_still_kills_the_program() {
    let r = run("segv", &[(env::FLUSH_MS, "0".into())], |_| true);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&r.status),
        Some(libc::SIGSEGV),
        "the fault goes on to the default action"
    );
    let corr: Vec<u32> = kernels(&r.records).iter().map(|k| k.correlation).collect();
    assert_eq!(corr, [1, 2], "both kernels, with no periodic flush at all");
    let e = end(&r.records).expect("the handler sent the end record");
    assert_eq!(e.reason, EndReason::Signal(libc::SIGSEGV as u8));
    assert_eq!(e.records + 1, r.records.len() as u64, "nothing lost");
    assert!(r.errors.is_empty(), "{:?}", r.errors);
}

#[test]
fn a_forked_child_does_not_write_into_the_stream() {
    let r = run("fork", &[], |_| true);
    assert!(r.status.success(), "{}", r.stdout);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let corr: Vec<u32> = kernels(&r.records).iter().map(|k| k.correlation).collect();
    assert_eq!(
        corr,
        [1, 2],
        "the parent's records, once each, and nothing from the child"
    );
    let ends = r
        .records
        .iter()
        .filter(|r| matches!(r, Record::ProcessEnd(_)))
        .count();
    assert_eq!(ends, 1, "only the parent ends the stream");
    let e = end(&r.records).unwrap();
    assert_eq!(e.records + 1, r.records.len() as u64);
}

#[test]
fn without_a_driver_tracing_is_refused_with_a_notice() {
    let r = run(
        "no-driver",
        &[(
            "GPU_TOOLS_CUDA_DRIVER_LIB",
            "/nonexistent/libcuda.so.1".into(),
        )],
        |_| true,
    );
    assert!(r.status.success());
    assert!(
        r.stdout.contains("InitializeInjection returned 0"),
        "{}",
        r.stdout
    );
    let notice = r
        .records
        .iter()
        .find_map(|r| match r {
            Record::Notice(n) => Some(n),
            _ => None,
        })
        .expect("a notice says why");
    assert_eq!(notice.level, NoticeLevel::Error);
    assert!(
        notice.text.contains("CUPTI tracing could not start")
            && notice.text.contains("/nonexistent/libcuda.so.1"),
        "{}",
        notice.text
    );
    assert_eq!(end(&r.records).map(|e| e.reason), Some(EndReason::Stopped));
}

#[test]
fn the_library_leaves_the_program_alone_when_nothing_is_configured() {
    // No socket or file named: InitializeInjection refuses quietly and the program runs on.
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "launched::child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SCENARIO, "no-driver")
        .env_remove(env::SOCKET)
        .env_remove(env::FILE)
        .env_remove(env::LOG)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        stdout.contains("InitializeInjection returned 0"),
        "{stdout}"
    );
    let mut stderr = String::new();
    (&out.stderr[..]).read_to_string(&mut stderr).unwrap();
    assert!(
        !stderr.contains("gpu-tools-inject"),
        "silent unless asked: {stderr}"
    );
}
