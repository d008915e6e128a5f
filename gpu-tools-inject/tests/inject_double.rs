//! The injection library (`libgpu_tools_inject.so`) end to end without a GPU: a child process (this test binary
//! run again) opens the library, calls its `InitializeInjection` as CUDA would, with the CUDA driver and CUPTI
//! doubles named by `GPU_TOOLS_CUDA_DRIVER_LIB` / `GPU_TOOLS_CUPTI_LIB`, makes the CUPTI double write records, and
//! exits; the test listens on the socket the child's environment names and checks the stream: every record, the
//! flush at context destruction, the flush at exit, a forked child that writes nothing, the refusal without a
//! driver. Building this test builds the library too (the crate's `rlib` type makes cargo build its `cdylib`).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use gpu_tools::trace::*;
use gpu_tools_injection::control::Control;
use gpu_tools_injection::env;
use gpu_tools_injection::message::Message;
use gpu_tools_injection::settings::{Destination, Settings};

const SCENARIO: &str = "GPU_TOOLS_TEST_INJECT_SCENARIO";
const CONCURRENT_KERNEL: u32 = 10;
const DRIVER: u32 = 4;
const RUNTIME: u32 = 5;

fn library() -> PathBuf {
    gpu_tools_testing::inject_lib()
}

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
        "child",
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

fn kernels(records: &[Record]) -> Vec<&KernelRecord> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Kernel(k) => Some(k),
            _ => None,
        })
        .collect()
}

fn end(records: &[Record]) -> Option<&ProcessEnd> {
    records.iter().find_map(|r| match r {
        Record::ProcessEnd(e) => Some(e),
        _ => None,
    })
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
            // Before the program's own profiler starts: the trace's only.
            for i in 0..3u32 {
                assert_eq!(kernel(1000 + u64::from(i) * 200, i + 1), 1);
            }
            // Its session: kernels, which the trace records too, and sets, which only it wants.
            let both = [CONCURRENT_KERNEL, MEMSET];
            assert_eq!(p.start(&both), 0);
            for i in 3..8u32 {
                assert_eq!(kernel(1000 + u64::from(i) * 200, i + 1), 1);
            }
            assert_eq!(memset(5000), 1);
            assert_eq!(memset(5100), 1);
            assert_eq!(p.stop(&both), 0);
            println!(
                "program kernels {} memsets {}",
                p.count(CONCURRENT_KERNEL),
                p.count(MEMSET)
            );
            // After it: kernels still traced; sets off in CUPTI again.
            for i in 8..10u32 {
                assert_eq!(kernel(1000 + u64::from(i) * 200, i + 1), 1);
            }
            println!("memset after its session {}", memset(6000));
            println!("enabled mask {:#x}", d.stats().enabled_mask);
            // It subscribes: the trace holds CUPTI's one subscriber, and gives it up.
            println!("subscribe {}", p.subscribe());
            // A second session of its own.
            assert_eq!(p.start(&both[..1]), 0);
            assert_eq!(kernel(4000, 11), 1);
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

const MEMSET: u32 = 2;

/// The stand-in profiler inside the program (`gpu-tools-testing/doubles/program_profiler.c`), loaded before the library
/// starts, as PyTorch is loaded before its first `cuInit`.
struct ProgramProfiler {
    lib: libloading::Library,
}

impl ProgramProfiler {
    fn start(&self, kinds: &[u32]) -> i32 {
        // SAFETY: `int pp_start(const uint32_t *kinds, int n)`, with a live slice.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn(*const u32, i32) -> i32>(b"pp_start\0")
                .unwrap();
            f(kinds.as_ptr(), kinds.len() as i32)
        }
    }

    fn stop(&self, kinds: &[u32]) -> i32 {
        // SAFETY: `int pp_stop(const uint32_t *kinds, int n)`, with a live slice.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn(*const u32, i32) -> i32>(b"pp_stop\0")
                .unwrap();
            f(kinds.as_ptr(), kinds.len() as i32)
        }
    }

    fn subscribe(&self) -> i32 {
        // SAFETY: `int pp_subscribe(void)`.
        unsafe {
            self.lib
                .get::<unsafe extern "C" fn() -> i32>(b"pp_subscribe\0")
                .unwrap()()
        }
    }

    fn count(&self, kind: u32) -> u64 {
        // SAFETY: `uint64_t pp_count(uint32_t kind)`.
        unsafe {
            self.lib
                .get::<unsafe extern "C" fn(u32) -> u64>(b"pp_count\0")
                .unwrap()(kind)
        }
    }

    /// The size of the buffers it lends CUPTI from now on.
    fn buffer_bytes(&self, bytes: usize) {
        // SAFETY: `void pp_buffer_bytes(size_t bytes)`.
        unsafe {
            self.lib
                .get::<unsafe extern "C" fn(usize)>(b"pp_buffer_bytes\0")
                .unwrap()(bytes)
        }
    }

    /// Kernel records it was handed more than once.
    fn repeats(&self) -> u64 {
        // SAFETY: `uint64_t pp_repeats(void)`.
        unsafe {
            self.lib
                .get::<unsafe extern "C" fn() -> u64>(b"pp_repeats\0")
                .unwrap()()
        }
    }

    /// From now on it behaves as Kineto does with its buffers (`pp_kineto`).
    fn kineto(&self) {
        // SAFETY: `void pp_kineto(int on)`.
        unsafe {
            self.lib
                .get::<unsafe extern "C" fn(i32)>(b"pp_kineto\0")
                .unwrap()(1)
        }
    }

    /// Kernel records it was handed without a start (handed out while they still ran).
    fn incomplete(&self) -> u64 {
        // SAFETY: `uint64_t pp_incomplete(void)`.
        unsafe {
            self.lib
                .get::<unsafe extern "C" fn() -> u64>(b"pp_incomplete\0")
                .unwrap()()
        }
    }

    /// Completed buffers it passed over, not having lent them.
    fn unknown(&self) -> u64 {
        // SAFETY: `uint64_t pp_unknown(void)`.
        unsafe {
            self.lib
                .get::<unsafe extern "C" fn() -> u64>(b"pp_unknown\0")
                .unwrap()()
        }
    }

    fn buffers(&self) -> u64 {
        // SAFETY: `uint64_t pp_buffers(void)`.
        unsafe {
            self.lib
                .get::<unsafe extern "C" fn() -> u64>(b"pp_buffers\0")
                .unwrap()()
        }
    }
}

/// Loads the CUPTI double into the global scope, then the profiler, whose CUPTI imports bind to it.
fn program_profiler() -> ProgramProfiler {
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
    // SAFETY: the double's initialisers set up its own state only; kept loaded for the process.
    let cupti = unsafe {
        Library::open(
            Some(common::double_path("cupti_activity")),
            RTLD_NOW | RTLD_GLOBAL,
        )
    }
    .expect("the CUPTI double");
    std::mem::forget(cupti);
    // SAFETY: the profiler has no initialisers.
    let lib = unsafe { Library::open(Some(common::double_path("program_profiler")), RTLD_NOW) }
        .expect("the program profiler double");
    ProgramProfiler { lib: lib.into() }
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
            "child",
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

/// The child of the attach test: a stand-in CUDA program that never loaded the library. Its CUPTI subscriber slot is
/// held by "another profiler", as torch.profiler holds it. It waits for lines on stdin: `kernels A B` makes the
/// CUPTI double emit kernels with correlation ids A..=B, timed now, and prints how many CUPTI recorded (`old A B`:
/// the same, timed long before any attach); `subscriber` prints
/// the subscriber CUPTI names and how often anyone subscribed; `exit` ends it.
#[test]
#[ignore = "the child process of attach_traces_a_running_program_and_leaves_it_as_it_was"]
fn attach_child() {
    if std::env::var(SCENARIO).as_deref() != Ok("attach") {
        return;
    }
    let d = common::double();
    d.other_subscriber(Some(c"torch.profiler"));
    println!("READY");
    std::io::stdout().flush().unwrap();
    for line in std::io::stdin().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [what @ ("kernels" | "old"), a, b] => {
                let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                // Kernels of now, on CUPTI's clock (the tracer's once it runs), or of long before the attach.
                let base = if *what == "old" { 1000 } else { d.now() };
                let recorded = (a..=b)
                    .filter(|&c| {
                        let start = base + u64::from(c) * 200;
                        d.kernel(
                            CONCURRENT_KERNEL,
                            start,
                            start + 100,
                            (0, 1, 7),
                            c,
                            c"_Z4stepv",
                            (1, 1, 1),
                            (32, 1, 1),
                        ) == 1
                    })
                    .count();
                println!("recorded {recorded}");
            }
            ["unfinished", a, b] => {
                // Kernels still queued when a forced flush hands them over: CUPTI gives them no times.
                let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                let recorded = (a..=b)
                    .filter(|&c| {
                        d.kernel(
                            CONCURRENT_KERNEL,
                            0,
                            0,
                            (0, 1, 7),
                            c,
                            c"_Z4stepv",
                            (1, 1, 1),
                            (32, 1, 1),
                        ) == 1
                    })
                    .count();
                println!("recorded {recorded}");
            }
            ["graph", a, b, g] => {
                // Launches A..=B of graph G, three kernel nodes each (one correlation id per launch).
                let (a, b, g): (u32, u32, u32) =
                    (a.parse().unwrap(), b.parse().unwrap(), g.parse().unwrap());
                d.set_kernel_graph(g, 1);
                let base = d.now();
                let mut recorded = 0;
                for c in a..=b {
                    for node in 0..3u64 {
                        let start = base + u64::from(c - a) * 1000 + node * 300;
                        recorded += usize::from(
                            d.kernel(
                                CONCURRENT_KERNEL,
                                start,
                                start + 200,
                                (0, 1, 7),
                                c,
                                c"_Z4nodev",
                                (1, 1, 1),
                                (32, 1, 1),
                            ) == 1,
                        );
                    }
                }
                d.set_kernel_graph(0, 0);
                println!("recorded {recorded}");
            }
            ["subscriber"] => {
                let s = d.stats();
                println!(
                    "subscriber {:?}, {} subscribed, {} unsubscribed",
                    d.subscriber_name(),
                    s.subscribed,
                    s.unsubscribes
                )
            }
            ["threadids"] => println!("threadids {}", d.thread_id_type()),
            ["exit"] => return,
            other => panic!("unknown command {other:?}"),
        }
        std::io::stdout().flush().unwrap();
    }
}

/// The message a record carries, if it is one the tool acts on.
fn message(record: &Record) -> Option<Message> {
    match record {
        Record::CodedNotice(n) => Message::read(n),
        _ => None,
    }
}

/// What an attach gives: the injection's report, the connection (for the stop byte), the stream's reader, and the
/// stream's header.
type Attach = (
    gpu_tools::linux::inject::Injected,
    std::os::unix::net::UnixStream,
    std::thread::JoinHandle<Vec<Record>>,
    Option<StreamHeader>,
);

/// One attach: injects the library into `pid` with the attach settings, accepts its connection and reads its
/// stream on a thread. Returns the injection's report, the connection (for the stop byte) and the reader.
fn attach(pid: u32, socket: &std::path::Path) -> Attach {
    attach_recording(pid, socket, &[env::TraceKind::Kernel])
}

/// [`attach`] on a thread of its own, so that the test can drive the program while the attach looks at it.
fn attach_in_background(pid: u32, socket: &std::path::Path) -> std::thread::JoinHandle<Attach> {
    let socket = socket.to_path_buf();
    std::thread::spawn(move || attach(pid, &socket))
}

/// [`attach`], recording `kinds`.
fn attach_recording(pid: u32, socket: &std::path::Path, kinds: &[env::TraceKind]) -> Attach {
    let _ = std::fs::remove_file(socket);
    let listener = UnixListener::bind(socket).unwrap();
    let settings = Settings {
        kinds: kinds.to_vec(),
        flush_interval: Some(Duration::from_millis(50)),
        log: Some(log::LevelFilter::Debug),
        cupti: Some(common::double_path("cupti_activity")),
        ..Settings::new(Destination::Socket(socket.into()))
    }
    .attach_argument()
    .unwrap();
    let done = gpu_tools::linux::inject::Injection::new(pid, library(), env::ATTACH_ENTRY)
        .argument(settings)
        .run()
        .expect("inject the library");
    let conn = gpu_tools_testing::accept_within(
        &listener,
        Duration::from_secs(30),
        "the attached library",
    );
    let back = conn.try_clone().unwrap();
    // Tracing runs once the library says it attached (its tracer enabled); what the program does before that is
    // not recorded, so the test waits for the notice before it makes the program launch.
    let mut stream = StreamReader::new(conn);
    let mut before = Vec::new();
    for item in stream.by_ref() {
        let record = item.unwrap();
        let attached = matches!(message(&record), Some(Message::Attached { .. }));
        before.push(record);
        if attached {
            break;
        }
    }
    let header = stream.header().copied();
    let reader = std::thread::spawn(move || {
        before.extend(stream.map(|r| r.unwrap()));
        before
    });
    (done, back, reader, header)
}

#[test]
fn attach_traces_a_running_program_and_leaves_it_as_it_was() {
    library();
    let (dir, socket) = scratch("attach");
    let mut child = attached_child("attach_child", "attach").spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answer = |command: &str| -> String {
        writeln!(stdin, "{command}").unwrap();
        loop {
            let line = lines.next().expect("the child answers").unwrap();
            // The harness's own lines ("running 1 test", ...) are not answers.
            if line.starts_with("recorded ")
                || line.starts_with("subscriber ")
                || line.starts_with("threadids ")
            {
                return line;
            }
        }
    };
    // Wait for READY (the doubles loaded).
    assert_eq!(
        answer("kernels 0 0"),
        "recorded 0",
        "nothing traces before the attach"
    );

    let (first, mut control, reader, header) = attach(child.id(), &socket);
    assert_eq!(first.entry_result, 0, "the attach thread started");
    assert!(!first.already_loaded);
    // Attached, the library leaves the program's thread id setting (its own profiler may rely on it) as it was,
    // and the header says the records hold CUPTI's own ids.
    assert_eq!(answer("threadids"), "threadids 0");
    assert_eq!(header.map(|h| h.thread_ids), Some(ThreadIds::Vendor));
    assert_eq!(answer("kernels 1 20"), "recorded 20");
    // Records CUPTI delivers late, of work that ended before the attach, are not the window's.
    assert_eq!(answer("old 900 902"), "recorded 3");
    // Records of kernels that had not run when the flush came (no end time) are not the window's either.
    assert_eq!(answer("unfinished 950 951"), "recorded 2");
    // Graph mode (the default), attached: three launches of graph 7, each from its three kernels' records.
    assert_eq!(answer("graph 100 102 7"), "recorded 9");
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    let k = kernels(&records);
    assert_eq!(
        k.iter().map(|k| k.correlation).collect::<Vec<_>>(),
        (1..=20).collect::<Vec<_>>(),
        "every kernel of the attached time, once, and none from before it"
    );
    assert!(
        records.iter().any(|r| matches!(r, Record::Notice(n)
            if n.text.starts_with("3 records of work that ended before the attach left out"))),
        "{records:#?}"
    );
    assert!(
        records
            .iter()
            .any(|r| message(r) == Some(Message::UnfinishedLeftOut { records: 2 })),
        "the unfinished records are counted apart"
    );
    let launches: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            Record::GraphLaunch(g) => Some(g),
            _ => None,
        })
        .collect();
    assert_eq!(
        launches
            .iter()
            .map(|g| (g.graph_id, g.correlation, g.end - g.start))
            .collect::<Vec<_>>(),
        vec![(7, 100, 800), (7, 101, 800), (7, 102, 800)],
        "one launch record each, from its first node's start to its last node's end"
    );
    assert!(
        records.iter().any(|r| matches!(r, Record::Notice(n)
            if n.text.starts_with("graph mode, attached: 3 graph launches built from the records of their 9 kernels"))),
        "{records:#?}"
    );
    let e = end(&records).expect("the stream ends after the stop byte");
    assert_eq!(e.reason, EndReason::Stopped);
    assert_eq!(
        e.records + 1,
        records.len() as u64,
        "every record sent arrived"
    );
    assert!(
        records
            .iter()
            .any(|r| matches!(message(r), Some(Message::Attached { .. }))),
        "{records:#?}"
    );
    // Detached: CUPTI records nothing any more, and the library never took (or tried to take) a callback
    // subscriber: the program's own profiler keeps the one it holds.
    assert_eq!(answer("kernels 21 25"), "recorded 0");
    assert_eq!(
        answer("subscriber"),
        "subscriber \"\", 0 subscribed, 0 unsubscribed"
    );

    // A second attach to the same process: the library is there, dormant; a new session starts.
    let (second, mut control, reader, _) = attach(child.id(), &socket);
    assert_eq!(second.entry_result, 0);
    assert!(second.already_loaded);
    assert_eq!(answer("kernels 26 30"), "recorded 5");
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    assert_eq!(
        kernels(&records)
            .iter()
            .map(|k| k.correlation)
            .collect::<Vec<_>>(),
        (26..=30).collect::<Vec<_>>()
    );
    assert_eq!(end(&records).map(|e| e.reason), Some(EndReason::Stopped));
    assert_eq!(answer("kernels 31 31"), "recorded 0");

    exit_child(stdin, &mut child);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A child of this binary (`test`, scenario `scenario`) run in a container (a mount namespace with a `/tmp` of its
/// own), with the driver double mapped from the start under the name an attach looks for in a CUDA program
/// (`libcuda.so`, a copy in `dir`, which the container sees); with `pid_namespace`, in a PID namespace of its own
/// too. The started process (the child itself, or `unshare` waiting for it) and the child's pid as this process
/// sees it. `None` where no container can be made here.
fn contained_child(
    test: &str,
    scenario: &str,
    dir: &std::path::Path,
    pid_namespace: bool,
) -> Option<(std::process::Child, u32)> {
    use gpu_tools_testing::container;
    if !container::available() {
        return None;
    }
    let driver = dir.join("libcuda.so.1");
    std::fs::copy(common::double_path("cuda_driver"), &driver).unwrap();
    let exe = std::env::current_exe().unwrap();
    let contained = if pid_namespace {
        container::command_in_pid_namespace(exe, &[dir])
    } else {
        container::command(exe, &[dir])
    };
    let child = attached_child_through(contained, test, scenario)
        .env("GPU_TOOLS_CUDA_DRIVER_LIB", &driver)
        .env(container::PRELOAD, &driver)
        .spawn()
        .unwrap();
    let pid = if pid_namespace {
        container::program_of(child.id()).expect("unshare starts the program")
    } else {
        child.id()
    };
    Some((child, pid))
}

/// An attach as `trace --pid` makes it (`Listening`, sockets placed per mount namespace), of the library into `pid`
/// with `settings`, its connection accepted and read until the library says it attached.
struct PlacedAttach {
    session: gpu_tools_injection::attach::Attached,
    rx: std::sync::mpsc::Receiver<gpu_tools_injection::collect::Delivery>,
    /// The socket as the process names it.
    in_target: PathBuf,
    /// The records until the library's word that it attached, then the rest once read.
    records: Vec<Record>,
    /// The stream's header, once read.
    header: Option<StreamHeader>,
}

impl PlacedAttach {
    /// Kernel records only, flushed every 50 ms, from the CUPTI double (which the children load).
    fn kernel_settings() -> Settings {
        Settings {
            kinds: vec![env::TraceKind::Kernel],
            flush_interval: Some(Duration::from_millis(50)),
            cupti: Some(common::double_path("cupti_activity")),
            ..Settings::new(Destination::Socket(PathBuf::new()))
        }
    }

    fn start(pid: u32, settings: &Settings) -> PlacedAttach {
        use gpu_tools_injection::attach::{Listening, Placement, Sockets};
        use gpu_tools_injection::collect::AcceptOptions;
        let sockets = Sockets {
            prefix: "gpu-tools-inject-test-",
            name: "test.sock",
            placement: Placement::PerMountNamespace,
        };
        let listening = Listening::new(&[pid], &sockets).unwrap();
        let in_target = listening.sockets().next().unwrap().1.to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        let session = listening
            .attach(&library(), settings, AcceptOptions::default(), tx, |_| {})
            .unwrap();
        assert!(
            session.outcomes()[0].result.is_ok(),
            "{:?}",
            session.outcomes()[0].result
        );
        session
            .wait_for_connections(1, Duration::from_secs(30))
            .expect("the library in the container connects");
        let mut attach = PlacedAttach {
            session,
            rx,
            in_target,
            records: Vec::new(),
            header: None,
        };
        while let Some(r) = attach.next() {
            let attached = matches!(message(&r), Some(Message::Attached { .. }));
            attach.records.push(r);
            if attached {
                break;
            }
        }
        attach
    }

    /// The stream's next record (its header kept on the way); `None` at its connection's close.
    fn next(&mut self) -> Option<Record> {
        use gpu_tools_injection::collect::Delivery;
        loop {
            match self.rx.recv_timeout(Duration::from_secs(30)) {
                Ok(Delivery::Item(_, r)) => return Some(r.expect("a readable stream")),
                Ok(Delivery::Closed(_)) => return None,
                Ok(Delivery::Header(_, h)) => self.header = Some(h),
                Ok(Delivery::Bytes(..)) => {}
                Err(e) => panic!("the stream: {e}"),
            }
        }
    }

    /// The stop byte, then the rest of the stream.
    fn stop(&mut self) {
        self.session
            .stop(gpu_tools_injection::attach::AfterStop::KeepOpen);
        while let Some(r) = self.next() {
            self.records.push(r);
        }
    }
}

/// A program in a container (mount and PID namespaces of its own, with a `/tmp` of its own) is traced through a
/// socket placed in its own `/tmp` (`Placement::PerMountNamespace`, as `trace --pid` places it), with the library
/// copied there: the attach's private folder, which it cannot see, would not have reached it. Its stream names it
/// by the pid the tool attached to, not its own (1, there), and says both.
#[test]
fn attach_traces_a_program_in_a_container_through_a_socket_in_its_own_tmp() {
    use gpu_tools_injection::attach::{Listening, Placement, Sockets};
    use gpu_tools_testing::container;

    library();
    let (dir, _) = scratch("container");
    let Some((mut child, pid)) = contained_child("attach_child", "attach", &dir, true) else {
        return;
    };
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answer = |command: &str| -> String {
        writeln!(stdin, "{command}").unwrap();
        loop {
            let line = lines.next().expect("the child answers").unwrap();
            if line.starts_with("recorded ") {
                return line;
            }
        }
    };
    assert_eq!(answer("kernels 0 0"), "recorded 0", "the child runs");
    // The premise: the private folder's socket is not seen from inside.
    let private = Listening::new(
        &[pid],
        &Sockets {
            prefix: "gpu-tools-inject-test-",
            name: "test.sock",
            placement: Placement::PrivateFolder,
        },
    )
    .unwrap();
    let (_, in_folder) = private.sockets().next().unwrap();
    assert!(in_folder.exists());
    assert!(
        !container::seen_from_here(pid, in_folder).exists(),
        "the container does not see this machine's {}",
        in_folder.display()
    );
    drop(private);
    let mut attach = PlacedAttach::start(pid, &PlacedAttach::kernel_settings());
    let from_here = container::seen_from_here(pid, &attach.in_target);
    assert!(
        attach.in_target.starts_with("/tmp") && from_here.exists() && !attach.in_target.exists(),
        "the socket is in the container's /tmp, not this machine's: {}",
        attach.in_target.display()
    );
    assert_eq!(answer("kernels 1 20"), "recorded 20");
    attach.stop();
    let records = std::mem::take(&mut attach.records);
    assert_eq!(
        attach.header.map(|h| h.pid),
        Some(pid),
        "the header names the process as the tool sees it"
    );
    assert_eq!(
        kernels(&records)
            .iter()
            .map(|k| k.correlation)
            .collect::<Vec<_>>(),
        (1..=20).collect::<Vec<_>>(),
        "{records:#?}"
    );
    assert_eq!(end(&records).map(|e| e.reason), Some(EndReason::Stopped));
    let start = records
        .iter()
        .find_map(|r| match r {
            Record::ProcessStart(p) => Some(p),
            _ => None,
        })
        .expect("the process's start");
    assert_eq!(
        (start.pid, start.parent_pid),
        (pid, child.id()),
        "named as the tool sees it: its parent is unshare"
    );
    assert!(
        notice_texts(&records).contains(
            &"pid 1 in a PID namespace of its own (a container's); the trace names the process by the pid the tool \
              attached to"
        ),
        "{records:#?}"
    );
    // The library was copied into the container's /tmp; the socket placed there goes with the session.
    let copies = std::fs::read_dir(container::seen_from_here(pid, "/tmp".as_ref()))
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("libgpu_tools_inject-")
        })
        .count();
    assert_eq!(copies, 1, "the library's copy in the container's /tmp");
    drop(attach);
    assert!(!from_here.exists(), "the placed socket is removed");
    exit_child(stdin, &mut child);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The flight recorder an attach leaves in a program in a container (mount and PID namespaces of its own, as
/// Docker's and Kubernetes' are) listens in the container's own `/tmp`, named after the program's pid there (1),
/// where `where` reaches it through the process's root (`flight::socket_of`, from the last `NSpid`), and not in
/// this machine's `/tmp`.
#[test]
fn a_program_in_a_container_keeps_a_flight_recorder_that_where_reaches() {
    use gpu_tools_injection::flight;
    library();
    let (dir, _) = scratch("container-flight");
    let Some((mut child, pid)) = contained_child("attach_child_flight", "flight", &dir, true)
    else {
        return;
    };
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answer = |command: &str| -> String {
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        loop {
            let line = lines.next().expect("the child answers").unwrap();
            if line.starts_with("fired ") {
                return line;
            }
        }
    };
    assert_eq!(
        answer("launch 0x11 1 1 _Z4stepv"),
        "fired 0",
        "the child runs"
    );
    let mut attach = PlacedAttach::start(pid, &PlacedAttach::kernel_settings());
    attach.stop();
    assert!(
        attach.records.iter().any(|r| matches!(r, Record::Notice(n)
            if n.text.starts_with("a flight recorder runs in the process"))),
        "{:#?}",
        attach.records
    );
    drop(attach);
    assert_eq!(answer("launch 0x11 1 5 _Z4stepv"), "fired 5");
    let recorder = flight::socket_of(pid).unwrap();
    assert_eq!(
        recorder,
        PathBuf::from(format!("/proc/{pid}/root/tmp/gpu-tools-flight-1.sock")),
        "pid 1 in its namespace"
    );
    assert!(
        !std::path::Path::new("/tmp/gpu-tools-flight-1.sock").exists()
            && !std::path::Path::new(&format!("/tmp/gpu-tools-flight-{pid}.sock")).exists(),
        "not in this machine's /tmp"
    );
    let report = flight::ask(&recorder, Duration::from_secs(5)).expect("the recorder answers");
    assert_eq!(report.launches, 5);
    exit_child(stdin, &mut child);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The child of the NVTX attach test: a program with two modules that carry NVTX v3 (copies of the NVTX module
/// double, `called` and `fresh`), started without a tool. `called` makes its first NVTX call before any attach
/// (so its NVTX is a no-op for good); `fresh` makes none. Lines on stdin: `push M NAME`, `pop M`, `mark M NAME`
/// (NVTX calls in module M, answered `pushed N`, `popped N`, `marked`), `state M` (its init state and how many
/// function slots are not NULL), `calls` (the CUPTI double's NVTX calls and the modules it took), `exit`.
#[test]
#[ignore = "the child process of attach_records_the_nvtx_of_a_running_program_and_puts_it_back"]
fn attach_nvtx_child() {
    use gpu_tools_testing::nvtx_module::NvtxModule;
    if std::env::var(SCENARIO).as_deref() != Ok("attach-nvtx") {
        return;
    }
    let d = common::double();
    let dir = std::env::temp_dir().join(format!("inject_double-nvtx-child-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fresh_path = dir.join("libnvtx_fresh.so");
    std::fs::copy(common::double_path("nvtx_module"), &fresh_path).unwrap();
    let called = NvtxModule::open(&common::double_path("nvtx_module")).unwrap();
    let fresh = NvtxModule::open(&fresh_path).unwrap();
    assert_eq!(
        called.push(c"before the attach"),
        gpu_tools_testing::nvtx_module::NO_PUSH_POP_TRACKING
    );
    called.pop();
    println!("READY");
    std::io::stdout().flush().unwrap();
    for line in std::io::stdin().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        let module = |m: &str| match m {
            "called" => &called,
            "fresh" => &fresh,
            other => panic!("no module {other}"),
        };
        let text = |t: &str| std::ffi::CString::new(t).unwrap();
        match words.as_slice() {
            ["push", m, name] => println!("pushed {}", module(m).push(&text(name))),
            ["pop", m] => println!("popped {}", module(m).pop()),
            ["mark", m, name] => {
                module(m).mark(&text(name));
                println!("marked");
            }
            ["state", m] => println!(
                "state {} {}",
                module(m).init_state(),
                module(m).live_slots()
            ),
            ["calls"] => {
                let (calls, inits) = d.nvtx_counts();
                println!("calls {calls} {inits}");
            }
            ["exit"] => break,
            other => panic!("unknown command {other:?}"),
        }
        std::io::stdout().flush().unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The NVTX records of a stream: kind, name and id of each marker.
fn markers(records: &[Record]) -> Vec<(MarkerKind, String, u32)> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Marker(m) => Some((m.kind, m.name.clone(), m.id)),
            _ => None,
        })
        .collect()
}

#[test]
fn attach_records_the_nvtx_of_a_running_program_and_puts_it_back() {
    library();
    let dir =
        std::env::temp_dir().join(format!("inject_double-attach-nvtx-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("s");
    let mut child = attached_child("attach_nvtx_child", "attach-nvtx")
        .env_remove(env::NVTX_INJECTION)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answer = |command: &str| -> String {
        writeln!(stdin, "{command}").unwrap();
        loop {
            let line = lines.next().expect("the child answers").unwrap();
            if ["pushed ", "popped ", "marked", "state ", "calls "]
                .iter()
                .any(|p| line.starts_with(p))
            {
                return line;
            }
        }
    };
    // Before the attach: `called` initialised without a tool (every call a no-op), `fresh` not yet.
    assert_eq!(answer("state called"), "state 2 0");
    assert_eq!(answer("state fresh"), "state 0 64");

    let kinds = [env::TraceKind::Kernel, env::TraceKind::Nvtx];
    let (first, mut control, reader, _) = attach_recording(child.id(), &socket, &kinds);
    assert_eq!(first.entry_result, 0, "the attach thread started");
    // Routed: CUPTI took three functions of each module; `fresh` was initialised as its first call would have.
    assert_eq!(answer("state called"), "state 2 3");
    assert_eq!(answer("state fresh"), "state 2 3");
    assert_eq!(answer("push called step"), "pushed 0");
    assert_eq!(answer("mark fresh tick"), "marked");
    assert_eq!(answer("push fresh inner"), "pushed 1");
    assert_eq!(answer("pop fresh"), "popped 1");
    assert_eq!(answer("pop called"), "popped 0");
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    let m = markers(&records);
    let names: Vec<(MarkerKind, &str)> = m.iter().map(|(k, n, _)| (*k, n.as_str())).collect();
    assert_eq!(
        names,
        vec![
            (MarkerKind::Start, "step"),
            (MarkerKind::Instant, "tick"),
            (MarkerKind::Start, "inner"),
            (MarkerKind::End, ""),
            (MarkerKind::End, ""),
        ],
        "exactly the NVTX calls of the window, none from before it: {records:#?}"
    );
    assert_eq!(
        (m[3].2, m[4].2),
        (m[2].2, m[0].2),
        "each end pairs with its start"
    );
    assert!(
        records
            .iter()
            .all(|r| !matches!(r, Record::Marker(k) if k.process != child.id())),
        "the program's markers"
    );
    assert!(
        records.iter().any(|r| matches!(r, Record::Notice(n)
            if n.text.starts_with("NVTX is recorded from")
                && n.text.contains("libnvtx_module.so, ")
                && n.text.contains("libnvtx_fresh.so (no NVTX call before the attach)"))),
        "the notice names both modules: {records:#?}"
    );
    assert_eq!(end(&records).map(|e| e.reason), Some(EndReason::Stopped));
    // After the stop: every slot is NULL again, and calls reach CUPTI no more.
    assert_eq!(answer("state called"), "state 2 0");
    assert_eq!(answer("state fresh"), "state 2 0");
    assert_eq!(answer("push called after"), "pushed -2");
    assert_eq!(answer("mark fresh after"), "marked");
    assert_eq!(answer("calls"), "calls 5 2");

    // A second attach routes the same modules again (through the same getters), and puts them back again.
    let (second, mut control, reader, _) = attach_recording(child.id(), &socket, &kinds);
    assert_eq!(second.entry_result, 0);
    assert!(second.already_loaded);
    assert_eq!(answer("push fresh again"), "pushed 0");
    assert_eq!(answer("pop fresh"), "popped 0");
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    let names: Vec<(MarkerKind, String)> = markers(&records)
        .into_iter()
        .map(|(k, n, _)| (k, n))
        .collect();
    assert_eq!(
        names,
        vec![
            (MarkerKind::Start, "again".into()),
            (MarkerKind::End, String::new())
        ]
    );
    assert!(
        records.iter().any(|r| matches!(r, Record::Notice(n)
            if n.text.starts_with("NVTX is recorded from")
                && n.text.contains("libnvtx_fresh.so")
                && !n.text.contains("no NVTX call before"))),
        "{records:#?}"
    );
    assert_eq!(answer("state fresh"), "state 2 0");
    assert_eq!(answer("calls"), "calls 7 4");

    exit_child(stdin, &mut child);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Tells an attach child to exit (`exit` on its stdin, then its stdin closed) and checks that it exited 0: the
/// program ran on.
fn exit_child(mut stdin: std::process::ChildStdin, child: &mut std::process::Child) {
    writeln!(stdin, "exit").unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "the program ran on and exited 0: {status}"
    );
}

/// The command that runs the ignored test `test` of this binary as a stand-in program for scenario `scenario`, on the
/// driver and CUPTI doubles, its stdin and stdout piped for the test's commands and the child's answers.
fn attached_child(test: &str, scenario: &str) -> Command {
    attached_child_through(
        Command::new(std::env::current_exe().unwrap()),
        test,
        scenario,
    )
}

/// [`attached_child`], `cmd` running this test binary (directly, or in a container).
fn attached_child_through(mut cmd: Command, test: &str, scenario: &str) -> Command {
    cmd.args([
        test,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(SCENARIO, scenario)
    .env(
        "GPU_TOOLS_CUDA_DRIVER_LIB",
        common::double_path("cuda_driver"),
    )
    .env("GPU_TOOLS_CUPTI_LIB", common::double_path("cupti_activity"))
    .stdin(Stdio::piped())
    .stdout(Stdio::piped());
    cmd
}

/// The child of the scheduled-profiler attach test: a stand-in program whose own profiler runs on a schedule (a
/// thread that starts and stops its sessions over and over, registering its callbacks each time). `kernels A B`
/// makes the CUPTI double emit kernels A..=B and prints how many CUPTI recorded; `exit` stops the profiler and
/// prints how many sessions it ran and how many kernel records it got.
#[test]
#[ignore = "the child process of attach_beside_a_profiler_on_a_schedule_records_every_window"]
fn attach_child_scheduled() {
    if std::env::var(SCENARIO).as_deref() != Ok("scheduled") {
        return;
    }
    let profiler = program_profiler();
    let d = common::double();
    let kinds = [CONCURRENT_KERNEL];
    // SAFETY: `int pp_cycle_start(const uint32_t *kinds, int n)`, with a live slice.
    let started = unsafe {
        profiler
            .lib
            .get::<unsafe extern "C" fn(*const u32, i32) -> i32>(b"pp_cycle_start\0")
            .unwrap()(kinds.as_ptr(), 1)
    };
    assert_eq!(started, 0);
    println!("READY");
    std::io::stdout().flush().unwrap();
    for line in std::io::stdin().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["kernels", a, b] => {
                let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                let base = d.now();
                let recorded = (a..=b)
                    .filter(|&c| {
                        let start = base + u64::from(c) * 200;
                        d.kernel(
                            CONCURRENT_KERNEL,
                            start,
                            start + 100,
                            (0, 1, 7),
                            c,
                            c"_Z4stepv",
                            (1, 1, 1),
                            (32, 1, 1),
                        ) == 1
                    })
                    .count();
                println!("recorded {recorded}");
            }
            ["exit"] => {
                // SAFETY: `uint64_t pp_cycle_stop(void)`.
                let cycles = unsafe {
                    profiler
                        .lib
                        .get::<unsafe extern "C" fn() -> u64>(b"pp_cycle_stop\0")
                        .unwrap()()
                };
                println!(
                    "cycles {cycles} program kernels {} repeats {}",
                    profiler.count(CONCURRENT_KERNEL),
                    profiler.repeats()
                );
                return;
            }
            other => panic!("unknown command {other:?}"),
        }
        std::io::stdout().flush().unwrap();
    }
}

/// Attached beside a profiler that registers its callbacks again every few steps (torch.profiler on a `schedule`):
/// each window holds every kernel of its time. The program's calls reach CUPTI through the sharing from before the
/// tracer registers; when they were redirected only after it, a registration in between took CUPTI's buffers from
/// the tracer for the whole window (an H200 showed windows of 0 records beside such a job).
#[test]
fn attach_beside_a_profiler_on_a_schedule_records_every_window() {
    library();
    let (dir, socket) = scratch("scheduled");
    let mut child = attached_child("attach_child_scheduled", "scheduled")
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answer = |command: &str, prefix: &str| -> String {
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        loop {
            let line = lines.next().expect("the child answers").unwrap();
            if line.starts_with(prefix) {
                return line;
            }
        }
    };
    assert_eq!(
        answer("kernels 0 0", "recorded "),
        "recorded 0",
        "nothing before the attach"
    );
    let mut first = 1;
    for window in 0..3 {
        let (done, mut control, reader, _) = attach(child.id(), &socket);
        assert_eq!(
            done.entry_result, 0,
            "window {window}: the attach thread started"
        );
        let last = first + 199;
        assert_eq!(
            answer(&format!("kernels {first} {last}"), "recorded "),
            "recorded 200",
            "window {window}: the trace keeps the kernels enabled through the program's stops"
        );
        control.write_all(&[Control::Stop.byte()]).unwrap();
        let records = reader.join().unwrap();
        assert_eq!(
            kernels(&records)
                .iter()
                .map(|k| k.correlation)
                .collect::<Vec<_>>(),
            (first..=last).collect::<Vec<_>>(),
            "window {window}: every kernel of the window, once"
        );
        assert_eq!(end(&records).map(|e| e.reason), Some(EndReason::Stopped));
        first = last + 1;
    }
    let bye = answer("exit", "cycles ");
    let words: Vec<&str> = bye.split_whitespace().collect();
    let cycles: u64 = words[1].parse().unwrap();
    assert!(
        cycles > 0,
        "the profiler ran its sessions throughout: {bye}"
    );
    // Its sessions came and went during the windows: what it got, it got once, and never more than was made.
    let (program_kernels, repeats): (u64, u64) =
        (words[4].parse().unwrap(), words[6].parse().unwrap());
    assert_eq!(
        repeats, 0,
        "no kernel record reached the program twice: {bye}"
    );
    assert!(program_kernels <= 601, "{bye}");
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "the program ran on and exited 0: {status}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The child of the profiler-cycles test: a stand-in program whose own profiler's sessions the test starts and stops
/// from the program's thread, as `torch.profiler`'s `schedule` does at `prof.step()`. `kernels A B` makes the CUPTI
/// double emit kernels A..=B, each starting now, and prints how many CUPTI recorded; `busy` starts a second thread
/// that launches a kernel every 200 us (correlation ids from [`BUSY_FIRST`]) and `idle` stops it and prints how many
/// it made; `memsets A B` makes sets A..=B; `start` and `stop` begin and end a session of the profiler (of kernels
/// only); `buffers N` sets the size of the buffers the profiler lends CUPTI from then on (4096 bytes at first);
/// `count` prints the kernel records the profiler was handed so far, how many of them twice, how many kernels were
/// made while a session was open, and the sets it was handed.
/// Each launch and each start or stop holds one lock, so that what a session spans is exact.
#[test]
#[ignore = "the child process of a_profiler_in_cycles_gets_each_record_of_its_sessions_once_beside_windows"]
fn attach_child_cycles() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    if std::env::var(SCENARIO).as_deref() != Ok("cycles") {
        return;
    }
    /// Whether a session is open, and the kernels made while one was.
    #[derive(Default)]
    struct Program {
        open: bool,
        made_in_sessions: u64,
    }
    let profiler = Arc::new(program_profiler());
    let state = Arc::new(Mutex::new(Program::default()));
    let launch = {
        let state = Arc::clone(&state);
        move |correlation: u32| -> i32 {
            let d = common::double();
            let mut st = state.lock().unwrap();
            let start = d.now();
            let code = d.kernel(
                CONCURRENT_KERNEL,
                start,
                start + 100,
                (0, 1, 7),
                correlation,
                c"_Z4stepv",
                (1, 1, 1),
                (32, 1, 1),
            );
            if code == 1 && st.open {
                st.made_in_sessions += 1;
            }
            code
        }
    };
    let kinds = [CONCURRENT_KERNEL];
    let busy = Arc::new(AtomicBool::new(false));
    let mut launcher: Option<std::thread::JoinHandle<u32>> = None;
    println!("READY");
    std::io::stdout().flush().unwrap();
    for line in std::io::stdin().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["kernels", a, b] => {
                let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                let recorded = (a..=b).filter(|&c| launch(c) == 1).count();
                println!("recorded {recorded}");
            }
            ["buffers", bytes] => {
                profiler.buffer_bytes(bytes.parse().unwrap());
                println!("buffers set");
            }
            ["kineto"] => {
                // CUPTI keeping an empty buffer across forced flushes, and a profiler that flushes only while a
                // buffer of its own is out.
                common::double().set_empty_buffer_kept(true);
                profiler.kineto();
                println!("kineto on");
            }
            ["unknown"] => println!("unknown buffers {}", profiler.unknown()),
            ["incomplete"] => println!("incomplete kernels {}", profiler.incomplete()),
            ["memsets", a, b] => {
                let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                let d = common::double();
                let _held = state.lock().unwrap();
                let recorded = (a..=b)
                    .filter(|&c| {
                        let start = d.now();
                        d.memset(0x5a, 4096, start, start + 50, 7, c) == 1
                    })
                    .count();
                println!("recorded {recorded}");
            }
            ["busy"] | ["busy", "lossy" | "lagging"] => {
                // `busy lossy`: CUPTI may drop some of its records (said in the stream), which are not counted as
                // made in a session. `busy lagging`: the GPU runs behind the launches, as in a training step: each
                // kernel still runs until the next launch, a launch every 100 us, and every twentieth launch the GPU
                // drains (a synchronize) for 3 ms.
                let lossy = words.get(1) == Some(&"lossy");
                let lagging = words.get(1) == Some(&"lagging");
                busy.store(true, Ordering::SeqCst);
                let (busy, launch) = (Arc::clone(&busy), launch.clone());
                launcher = Some(std::thread::spawn(move || {
                    // Ids go on from the last busy period: each launch has its own.
                    static NEXT: std::sync::atomic::AtomicU32 =
                        std::sync::atomic::AtomicU32::new(BUSY_FIRST);
                    let d = common::double();
                    let first = NEXT.load(Ordering::SeqCst);
                    let mut next = first;
                    while busy.load(Ordering::SeqCst) {
                        if lagging {
                            d.land();
                            d.set_in_flight(true);
                        }
                        let code = launch(next);
                        if lagging {
                            d.set_in_flight(false);
                        }
                        // Lagging, the test may stop and start sessions meanwhile: between two, with no window
                        // open, no kind records (-1).
                        assert!(
                            code == 1 || (lossy && code == 0) || (lagging && code == -1),
                            "the launcher's kernel {next} recorded ({code})"
                        );
                        next += 1;
                        if lagging && next % 20 == 0 {
                            // Longer than the 2 ms between the library's flushes, so that one of them falls in it
                            // (a drain shorter than that, at a steady period, can miss every one).
                            d.land();
                            std::thread::sleep(Duration::from_millis(3));
                        }
                        std::thread::sleep(Duration::from_micros(if lagging { 100 } else { 200 }));
                    }
                    if lagging {
                        d.land();
                    }
                    NEXT.store(next, Ordering::SeqCst);
                    next - first
                }));
                println!("busy");
            }
            ["idle"] => {
                busy.store(false, Ordering::SeqCst);
                let made = launcher.take().map_or(0, |t| t.join().unwrap());
                println!("idle {made}");
            }
            ["start"] => {
                let mut st = state.lock().unwrap();
                st.open = true;
                println!("started {}", profiler.start(&kinds));
            }
            ["stop"] | ["stop", "drained"] => {
                let mut st = state.lock().unwrap();
                if words.len() == 2 {
                    // Its GPU drained first (a synchronize at the step's end): its own forced flush then hands out
                    // no running kernel.
                    common::double().land();
                }
                st.open = false;
                println!("stopped {}", profiler.stop(&kinds));
            }
            ["count"] => println!(
                "program kernels {} repeats {} made {} memsets {}",
                profiler.count(CONCURRENT_KERNEL),
                profiler.repeats(),
                state.lock().unwrap().made_in_sessions,
                profiler.count(MEMSET)
            ),
            ["exit"] => {
                println!("bye");
                return;
            }
            other => panic!("unknown command {other:?}"),
        }
        std::io::stdout().flush().unwrap();
    }
}

/// The first correlation id of the cycles child's launcher thread (the test's own kernels stay below it).
const BUSY_FIRST: u32 = 500_000;

/// A profiler of the program in cycles (`torch.profiler` on a `schedule`: a session started and stopped every few
/// steps, by the program's thread) beside attached windows: a session open across a window's start (the program
/// launching meanwhile, as a training job does), one that starts inside a window and ends after it, one inside a
/// window, and many short ones in a window. Each session gets exactly the kernels made while it was open, each once;
/// each window records every kernel made during it. Kineto keeps the records a session is handed (within its
/// time), so a record handed twice, late or not at all shows in the job's count.
#[test]
fn a_profiler_in_cycles_gets_each_record_of_its_sessions_once_beside_windows() {
    library();
    let (dir, socket) = scratch("cycles");
    let (mut child, mut ask) = cycles_child();
    let made = |a: u32, b: u32, ask: &mut dyn FnMut(&str, &str) -> String| {
        assert_eq!(
            ask(&format!("kernels {a} {b}"), "recorded "),
            (b - a + 1).to_string(),
            "kernels {a}..={b} recorded"
        );
    };
    // The program's records so far: each once, and as many as were made while its sessions were open.
    let handed = |ask: &mut dyn FnMut(&str, &str) -> String, when: &str| -> u64 {
        let c = program_count(ask);
        let answer = &c.answer;
        assert_eq!(c.repeats, 0, "{when}: no record handed twice ({answer})");
        assert_eq!(
            c.handed, c.made,
            "{when}: handed as many as made during its sessions ({answer})"
        );
        c.handed
    };
    let session = |ask: &mut dyn FnMut(&str, &str) -> String, start: bool| {
        let (command, prefix) = if start {
            ("start", "started ")
        } else {
            ("stop", "stopped ")
        };
        assert_eq!(ask(command, prefix), "0", "{command}");
    };
    // The window's kernels: the test's own exactly `want`, in order, and the launcher's each once.
    let stop_window = |mut control: std::os::unix::net::UnixStream,
                       reader: std::thread::JoinHandle<Vec<Record>>,
                       want: std::ops::RangeInclusive<u32>,
                       sets: usize,
                       window: &str| {
        control.write_all(&[Control::Stop.byte()]).unwrap();
        let records = reader.join().unwrap();
        assert_eq!(end(&records).map(|e| e.reason), Some(EndReason::Stopped));
        assert_eq!(
            records
                .iter()
                .filter(|r| matches!(r, Record::Memset(_)))
                .count(),
            sets,
            "{window}: its sets"
        );
        let ids: Vec<u32> = kernels(&records).iter().map(|k| k.correlation).collect();
        let own: Vec<u32> = ids.iter().copied().filter(|&c| c < BUSY_FIRST).collect();
        assert_eq!(
            own,
            want.collect::<Vec<_>>(),
            "{window}: every kernel made during it, once"
        );
        let mut launcher: Vec<u32> = ids.iter().copied().filter(|&c| c >= BUSY_FIRST).collect();
        let n = launcher.len();
        launcher.dedup();
        assert_eq!(
            launcher.len(),
            n,
            "{window}: the launcher's kernels once each"
        );
    };

    // As Kineto's: large enough that CUPTI still holds one of its buffers well after a trace started.
    assert_eq!(ask(&format!("buffers {}", 1 << 20), "buffers "), "set");
    // A session before any window: the profiler alone.
    session(&mut ask, true);
    made(1, 10, &mut ask);
    session(&mut ask, false);
    assert_eq!(handed(&mut ask, "before the windows"), 10);

    // A session open across the first window's start, the program launching, stopped inside the window.
    session(&mut ask, true);
    made(11, 20, &mut ask);
    assert_eq!(ask("busy", "busy"), "");
    let (done, control, reader, _) = attach_recording(
        child.id(),
        &socket,
        &[env::TraceKind::Kernel, env::TraceKind::Memset],
    );
    assert_eq!(done.entry_result, 0, "the first window started");
    let busy: u32 = ask("idle", "idle ").parse().unwrap();
    assert!(busy > 0, "the launcher ran during the attach");
    // Sets, which the trace records and the profiler does not: CUPTI writes them into the profiler's buffer it
    // holds, and the trace reads them there. (They reach the profiler too, in that buffer: the probe did not see it
    // record sets, which does not say it has them off.)
    assert_eq!(ask("memsets 1 5", "recorded "), "5");
    made(21, 30, &mut ask);
    session(&mut ask, false);
    let mut expected = 30 + u64::from(busy);
    assert_eq!(
        handed(&mut ask, "a session open across the window's start"),
        expected
    );
    // Then sessions inside the window, short ones, as a schedule's cycles come round.
    let mut next = 31;
    for cycle in 0..6u32 {
        made(next, next + 4, &mut ask); // wait steps: no session
        next += 5;
        session(&mut ask, true);
        let n = 3 + cycle;
        made(next, next + n - 1, &mut ask);
        next += n;
        expected += u64::from(n);
        session(&mut ask, false);
        assert_eq!(
            handed(&mut ask, &format!("cycle {cycle} inside the window")),
            expected
        );
    }
    // A session that starts inside the window and ends after it.
    session(&mut ask, true);
    made(next, next + 9, &mut ask);
    let window_last = next + 9;
    stop_window(control, reader, 21..=window_last, 5, "the first window");
    made(window_last + 1, window_last + 10, &mut ask);
    session(&mut ask, false);
    expected += 20;
    assert_eq!(
        handed(&mut ask, "a session that outlived the window"),
        expected
    );
    next = window_last + 11;

    // A second window, with a session wholly inside it and kernels on either side.
    let (done, control, reader, _) = attach(child.id(), &socket);
    assert_eq!(done.entry_result, 0, "the second window started");
    let first = next;
    made(next, next + 4, &mut ask);
    session(&mut ask, true);
    made(next + 5, next + 14, &mut ask);
    session(&mut ask, false);
    made(next + 15, next + 19, &mut ask);
    expected += 10;
    assert_eq!(
        handed(&mut ask, "a session inside the second window"),
        expected
    );
    stop_window(control, reader, first..=next + 19, 0, "the second window");
    next += 20;

    // After the windows: the profiler alone again, as before them.
    session(&mut ask, true);
    made(next, next + 9, &mut ask);
    session(&mut ask, false);
    expected += 10;
    assert_eq!(handed(&mut ask, "a session after the windows"), expected);

    end_cycles_child(&mut ask, &mut child, &dir);
}

/// Sends the cycles child a command and returns the rest of its first answer line that starts with the given prefix.
type Ask = Box<dyn FnMut(&str, &str) -> String>;

/// The cycles child's `count`: the kernel records its profiler was handed, how many of them twice, and how many
/// kernels were made while a session was open; with the answer as printed, for messages.
struct ProgramCount {
    handed: u64,
    repeats: u64,
    made: u64,
    answer: String,
}

fn program_count(ask: &mut dyn FnMut(&str, &str) -> String) -> ProgramCount {
    let answer = ask("count", "program kernels ");
    let words: Vec<&str> = answer.split_whitespace().collect();
    let number = |at: usize| -> u64 { words[at].parse().unwrap() };
    ProgramCount {
        handed: number(0),
        repeats: number(2),
        made: number(4),
        answer: answer.clone(),
    }
}

/// The end of a busy round of the cycles child, after its window's stream ended: its launcher stops, having
/// launched (more than 100 kernels), its session ends (`stop`: the command that ends it), and the window's stream
/// says CUPTI dropped nothing.
fn end_busy_round(ask: &mut Ask, round: usize, stop: &str, records: &[Record]) {
    let made: u32 = ask("idle", "idle ").parse().unwrap();
    assert!(made > 100, "round {round}: the program launched ({made})");
    assert_eq!(ask(stop, "stopped "), "0");
    let notices = notice_texts(records);
    assert!(
        !notices.iter().any(|n| n.starts_with("CUPTI dropped ")),
        "round {round}: CUPTI had a buffer for each record: {notices:?}"
    );
}

/// [`sessions_whole`], and no kernel handed to the program's profiler while it ran (without its start or end).
fn sessions_whole_and_complete(ask: &mut Ask) {
    let (count, incomplete) = sessions_whole(ask);
    assert_eq!(
        incomplete, 0,
        "none handed out while it ran ({})",
        count.answer
    );
}

/// The cycles child's profiler at the end: it was handed no kernel twice and every kernel of its sessions. Returns
/// its count and the kernels it was handed without a start.
fn sessions_whole(ask: &mut Ask) -> (ProgramCount, u64) {
    let count = program_count(ask);
    let incomplete: u64 = ask("incomplete", "incomplete kernels ").parse().unwrap();
    let answer = &count.answer;
    assert_eq!(count.repeats, 0, "none twice ({answer})");
    assert_eq!(
        count.handed, count.made,
        "every kernel of its sessions ({answer})"
    );
    (count, incomplete)
}

/// The first line of the child's log that holds `needle`, waiting for it up to 30 s (`what`: what it says, for the
/// failure).
fn wait_for_line(log: &std::sync::mpsc::Receiver<String>, needle: &str, what: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match log.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return line,
            Ok(_) => {}
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

/// A scratch folder of this test process named after `name`, emptied, and the socket path in it.
fn scratch(name: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("inject_double-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("s");
    (dir, socket)
}

/// The texts of the stream's notices.
fn notice_texts(records: &[Record]) -> Vec<&str> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Notice(n) => Some(n.text.as_str()),
            _ => None,
        })
        .collect()
}

/// Ends the cycles child (`exit`), checks it exited 0, and removes the test's scratch folder.
fn end_cycles_child(ask: &mut Ask, child: &mut std::process::Child, dir: &std::path::Path) {
    assert_eq!(ask("exit", "bye"), "");
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "the program ran on and exited 0: {status}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The cycles child, started, and its [`Ask`].
fn cycles_child() -> (std::process::Child, Ask) {
    cycles_child_from(attached_child("attach_child_cycles", "cycles"))
}

/// The cycles child, with each line of its standard error (the injected library's debug log among them) also sent
/// to the receiver.
fn cycles_child_logged() -> (std::process::Child, Ask, std::sync::mpsc::Receiver<String>) {
    let mut command = attached_child("attach_child_cycles", "cycles");
    command.stderr(Stdio::piped());
    let (mut child, ask) = cycles_child_from(command);
    let stderr = child.stderr.take().unwrap();
    let (lines, log) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
            let _ = lines.send(line);
        }
    });
    (child, ask, log)
}

fn cycles_child_from(mut command: Command) -> (std::process::Child, Ask) {
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ask = move |command: &str, prefix: &str| -> String {
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        loop {
            let line = lines.next().expect("the child answers").unwrap();
            if let Some(rest) = line.strip_prefix(prefix) {
                return rest.to_string();
            }
        }
    };
    (child, Box::new(ask))
}

/// A profiler of the program recording while it launches, through an attach: CUPTI fills and completes the
/// profiler's small buffers, and asks for new ones, while the attach looks for the profiler's callbacks (before they
/// are known). Every kernel made during its session reaches it once; the window records every kernel of its time.
#[test]
fn a_profiler_recording_through_an_attach_loses_no_record_while_it_is_looked_for() {
    library();
    let (dir, socket) = scratch("looked-for");
    let (mut child, mut ask) = cycles_child();
    // Buffers of 4096 bytes: 18 kernel records each, full every 3.6 ms at the launcher's pace.
    assert_eq!(ask("buffers 4096", "buffers "), "set");
    for round in 0..3 {
        assert_eq!(ask("start", "started "), "0");
        assert_eq!(ask("busy", "busy"), "");
        let (done, mut control, reader, _) = attach(child.id(), &socket);
        assert_eq!(done.entry_result, 0, "round {round}: the window started");
        std::thread::sleep(Duration::from_millis(20));
        let busy: u32 = ask("idle", "idle ").parse().unwrap();
        assert_eq!(ask("stop", "stopped "), "0");
        let c = program_count(&mut ask);
        let answer = &c.answer;
        assert_eq!(
            c.repeats, 0,
            "round {round}: no record handed twice ({answer})"
        );
        assert_eq!(
            c.handed, c.made,
            "round {round}: every kernel of its session, of {busy} made ({answer})"
        );
        control.write_all(&[Control::Stop.byte()]).unwrap();
        let records = reader.join().unwrap();
        let mut ids: Vec<u32> = kernels(&records).iter().map(|k| k.correlation).collect();
        let n = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(
            ids.len(),
            n,
            "round {round}: the window's kernels once each"
        );
        assert!(
            n > 0,
            "round {round}: the window recorded the launcher's kernels"
        );
    }
    end_cycles_child(&mut ask, &mut child, &dir);
}

/// A profiler whose session was open across the attach while it had recorded nothing yet (so the attach could not
/// see its kinds): what it then lacks is said, when it ends its session inside the window, not left silent.
#[test]
fn a_profiler_found_idle_that_had_a_kind_on_is_said() {
    library();
    let (dir, socket) = scratch("unseen");
    let (mut child, mut ask) = cycles_child();
    assert_eq!(ask("start", "started "), "0");
    let (done, mut control, reader, _) = attach(child.id(), &socket);
    assert_eq!(done.entry_result, 0, "the window started");
    assert_eq!(ask("kernels 6 10", "recorded "), "5");
    assert_eq!(ask("stop", "stopped "), "0");
    let c = program_count(&mut ask);
    let (handed, answer) = (c.handed, &c.answer);
    assert_eq!(
        handed, 0,
        "those after the attach went to the trace ({answer})"
    );
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    let ids: Vec<u32> = kernels(&records).iter().map(|k| k.correlation).collect();
    assert_eq!(ids, (6..=10).collect::<Vec<_>>());
    assert!(
        records.iter().any(|r| matches!(r, Record::Notice(n)
            if n.text.contains("kind 10 on since before the attach") && n.text.contains("went to the trace"))),
        "the loss is said: {:?}",
        records.iter().filter(|r| matches!(r, Record::Notice(_))).collect::<Vec<_>>()
    );
    end_cycles_child(&mut ask, &mut child, &dir);
}

/// A profiler whose session was open across the attach, its records still in CUPTI's buffer while the program
/// launched nothing more: the probe makes no flush before it looks for the callbacks, so that buffer comes back
/// through the probe at its watch's end, which sees its kinds, and the profiler keeps every kernel of its session,
/// those of the window too. (Flushed before the probe, the buffer went straight to it, the probe saw nothing, and
/// the window's kernels went to the trace alone.)
#[test]
fn a_profiler_whose_records_wait_in_cupti_across_the_attach_keeps_its_kernels() {
    library();
    let (dir, socket) = scratch("waiting");
    let (mut child, mut ask) = cycles_child();
    assert_eq!(ask("start", "started "), "0");
    assert_eq!(ask("kernels 1 5", "recorded "), "5");
    let (done, mut control, reader, _) = attach(child.id(), &socket);
    assert_eq!(done.entry_result, 0, "the window started");
    assert_eq!(ask("kernels 6 10", "recorded "), "5");
    assert_eq!(ask("stop", "stopped "), "0");
    let c = program_count(&mut ask);
    assert_eq!(
        (c.handed, c.repeats),
        (10, 0),
        "every kernel of its session, once ({})",
        c.answer
    );
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    let ids: Vec<u32> = kernels(&records).iter().map(|k| k.correlation).collect();
    assert_eq!(ids, (6..=10).collect::<Vec<_>>(), "the window's kernels");
    end_cycles_child(&mut ask, &mut child, &dir);
}

/// A profiler of the program that starts its session while the attach looks for it (torch.profiler on a `schedule`
/// beginning a cycle then; on an H200 such cycles lost one or two steps of kernels to the trace): it made no record
/// the attach could see, but its calls were seen, and every kernel of its session reaches it, once.
#[test]
fn a_profiler_that_starts_while_the_attach_looks_for_it_gets_its_records() {
    library();
    let (dir, socket) = scratch("watched");
    let (mut child, mut ask, log) = cycles_child_logged();
    // A profiler that ran a session before the attach: its callbacks are registered, its kinds off.
    assert_eq!(ask("start", "started "), "0");
    assert_eq!(ask("stop", "stopped "), "0");
    let pid = child.id();
    let attaching = attach_in_background(pid, &socket);
    // Its next session starts while the attach watches its buffers, and makes no record then.
    wait_for_line(
        &log,
        "buffers are watched",
        "the attach never watched the program's buffers",
    );
    assert_eq!(ask("start", "started "), "0");
    let (done, mut control, reader, _) = attaching.join().unwrap();
    assert_eq!(done.entry_result, 0, "the window started");
    assert_eq!(ask("kernels 1 5", "recorded "), "5");
    assert_eq!(ask("stop", "stopped "), "0");
    let c = program_count(&mut ask);
    assert_eq!(
        (c.handed, c.repeats),
        (5, 0),
        "every kernel of its session, none twice ({})",
        c.answer
    );
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    let ids: Vec<u32> = kernels(&records).iter().map(|k| k.correlation).collect();
    assert_eq!(ids, (1..=5).collect::<Vec<_>>(), "the window's kernels");
    let notices = notice_texts(&records);
    assert!(
        notices
            .iter()
            .any(|n| n.contains("while the attach looked for it")),
        "the stream says what it enabled then: {notices:?}"
    );
    assert!(
        !notices
            .iter()
            .any(|n| n.contains("since before the attach")),
        "no kind of its went unseen: {notices:?}"
    );
    end_cycles_child(&mut ask, &mut child, &dir);
}

/// A window that ends while the program's profiler records, with CUPTI holding an empty buffer of the tracer's (CUPTI
/// asks for one right after a flush and keeps it across forced flushes), beside a profiler that, as Kineto, flushes
/// only while a buffer of its own is out and passes over buffers it did not lend: on an H200 such a torch.profiler
/// recorded nothing more after the window. One of its buffers is kept out, so it flushes and its next sessions get
/// their kernels; the records CUPTI wrote into the tracer's buffer are lost to it, and the stream says so.
#[test]
fn a_profiler_that_flushes_only_with_a_buffer_out_goes_on_after_a_window_that_left_one_in_cupti() {
    library();
    let (dir, socket) = scratch("kept");
    let (mut child, mut ask) = cycles_child();
    assert_eq!(ask("kineto", "kineto "), "on");
    // Its callbacks registered by a session before the attach.
    assert_eq!(ask("start", "started "), "0");
    assert_eq!(ask("stop", "stopped "), "0");
    let (done, mut control, reader, _) = attach(child.id(), &socket);
    assert_eq!(done.entry_result, 0, "the window started");
    assert_eq!(ask("start", "started "), "0");
    assert_eq!(ask("kernels 1 5", "recorded "), "5");
    // The window ends with its session open.
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    assert_eq!(
        kernels(&records)
            .iter()
            .map(|k| k.correlation)
            .collect::<Vec<_>>(),
        (1..=5).collect::<Vec<_>>()
    );
    let notices = notice_texts(&records);
    assert!(
        notices
            .iter()
            .any(|n| n.contains("still held a buffer of the trace's")),
        "the stream says CUPTI kept a buffer of the trace's: {notices:?}"
    );
    // Its session goes on after the window, into the tracer's buffer CUPTI holds, and ends.
    assert_eq!(ask("kernels 6 10", "recorded "), "5");
    assert_eq!(ask("stop", "stopped "), "0");
    let count = |ask: &mut Ask| -> u64 { program_count(ask).handed };
    let after_first = count(&mut ask);
    // Its next session gets every kernel.
    assert_eq!(ask("start", "started "), "0");
    assert_eq!(ask("kernels 11 15", "recorded "), "5");
    assert_eq!(ask("stop", "stopped "), "0");
    assert_eq!(
        count(&mut ask),
        after_first + 5,
        "the session after the window got its kernels"
    );
    assert!(
        after_first >= 5,
        "the window's kernels reached it: {after_first}"
    );
    let unknown: u64 = ask("unknown", "unknown buffers ").parse().unwrap();
    assert_eq!(
        unknown, 1,
        "the tracer's buffer came to it, and it passed over it"
    );
    end_cycles_child(&mut ask, &mut child, &dir);
}

/// The same profiler, its program launching through the window's end (every 200 us): no buffer of the tracer's is
/// left in CUPTI (one CUPTI holds empty fills and comes back at one of the stop's flushes: the library's
/// `a_stop_keeping_kinds_takes_back_the_empty_buffer_cupti_held_once_it_fills` tests that apart), CUPTI drops
/// nothing between the tracer's last buffer and its callbacks' return (it has the profiler's buffers then), and
/// every kernel CUPTI recorded in its session reaches it once.
#[test]
fn a_profiler_that_flushes_only_with_a_buffer_out_keeps_its_records_when_the_program_launches_through_the_end()
 {
    library();
    let (dir, socket) = scratch("busy-end");
    let (mut child, mut ask) = cycles_child();
    assert_eq!(ask("kineto", "kineto "), "on");
    assert_eq!(ask("start", "started "), "0");
    assert_eq!(ask("stop", "stopped "), "0");
    let (done, mut control, reader, _) = attach(child.id(), &socket);
    assert_eq!(done.entry_result, 0, "the window started");
    assert_eq!(ask("start", "started "), "0");
    assert_eq!(ask("busy lossy", "busy"), "");
    std::thread::sleep(Duration::from_millis(100));
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let _made: u32 = ask("idle", "idle ").parse().unwrap();
    assert_eq!(ask("stop", "stopped "), "0");
    let notices = notice_texts(&records);
    assert!(
        !notices
            .iter()
            .any(|n| n.contains("still held a buffer of the trace's")),
        "no buffer of the trace's left in CUPTI: {notices:?}"
    );
    let dropped: u64 = notices
        .iter()
        .find_map(|n| {
            n.strip_prefix("CUPTI dropped ")
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0);
    let ProgramCount {
        handed,
        repeats,
        made,
        answer,
    } = program_count(&mut ask);
    assert_eq!(repeats, 0, "none twice ({answer})");
    assert_eq!(
        dropped, 0,
        "CUPTI had a buffer for each record: {notices:?}"
    );
    assert_eq!(
        handed, made,
        "every kernel of its session CUPTI recorded ({answer})"
    );
    let unknown: u64 = ask("unknown", "unknown buffers ").parse().unwrap();
    assert_eq!(unknown, 0, "no buffer of the trace's came to it");
    end_cycles_child(&mut ask, &mut child, &dir);
}

/// A profiler whose program's GPU runs behind its launches (the last kernel still running, the GPU drained every
/// twentieth launch) through ten windows' ends, its session open: every kernel of its sessions reaches it once and
/// complete. The stop that keeps its kinds, and the return of its callbacks inside that stop, flush without force
/// until the buffers come back whole; a forced flush hands out a running kernel's record without a start or an end,
/// which CUPTI never completes (on an H200, a torch.profiler cycle so lost 44 kernels at a window's end).
#[test]
fn a_profiler_gets_its_kernels_whole_when_windows_end_while_they_run() {
    library();
    let (dir, socket) = scratch("lagging");
    let (mut child, mut ask) = cycles_child();
    assert_eq!(ask("buffers 65536", "buffers "), "set");
    // Its callbacks registered by a session before the attach.
    assert_eq!(ask("start", "started "), "0");
    assert_eq!(ask("stop", "stopped "), "0");
    for round in 0..10 {
        let (done, mut control, reader, _) = attach(child.id(), &socket);
        assert_eq!(done.entry_result, 0, "round {round}: the window started");
        assert_eq!(ask("start", "started "), "0");
        assert_eq!(ask("busy lagging", "busy"), "");
        std::thread::sleep(Duration::from_millis(100));
        control.write_all(&[Control::Stop.byte()]).unwrap();
        let records = reader.join().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        end_busy_round(&mut ask, round, "stop", &records);
    }
    sessions_whole_and_complete(&mut ask);
    end_cycles_child(&mut ask, &mut child, &dir);
}

/// A profiler on a schedule (sessions stopped with a forced flush and started with its callbacks registered again,
/// every few milliseconds) whose program's GPU runs behind its launches (as in
/// [`a_profiler_gets_its_kernels_whole_when_windows_end_while_they_run`]), through six windows' starts. The probe
/// makes no forced flush: it makes no flush before it looks for the callbacks, and at its watch's end the program's
/// buffers had gone back at its own flush. Forced there, each handed the profiler a running kernel without a start
/// or an end (on an H200, torch.profiler cycles lost 31 and 47 kernels so at windows' starts). Every kernel of its
/// sessions reaches it once. The program's own stops come after its GPU drained, so that only the attach's forced
/// flushes can hand out a running kernel: the one left before the tracer's start (which CUPTI needs, see
/// `ActivityTracerBuilder::flush_before_start`) may, so at most one per window is incomplete.
#[test]
fn a_scheduled_profiler_is_not_flushed_by_force_while_a_window_starts() {
    library();
    let (dir, socket) = scratch("lagging-start");
    let (mut child, mut ask, log) = cycles_child_logged();
    assert_eq!(ask("buffers 65536", "buffers "), "set");
    let rounds = 6;
    let mut left_to_program = 0;
    for round in 0..rounds {
        assert_eq!(ask("start", "started "), "0");
        assert_eq!(ask("busy lagging", "busy"), "");
        let pid = child.id();
        let attaching = attach_in_background(pid, &socket);
        // Its sessions cycle until three of its cycles fell in the probe's 200 ms watch, well before the watch ends:
        // stopped during the window, an incomplete record of a kernel launched after the stop would be the trace's,
        // outside this test's question.
        let (mut watching, mut cycled_in_watch) = (false, 0);
        loop {
            std::thread::sleep(Duration::from_millis(15));
            watching |= log
                .try_iter()
                .any(|line| line.contains("buffers are watched"));
            if cycled_in_watch == 3 || attaching.is_finished() {
                break;
            }
            assert_eq!(ask("stop drained", "stopped "), "0");
            assert_eq!(ask("start", "started "), "0");
            cycled_in_watch += usize::from(watching);
        }
        assert_eq!(cycled_in_watch, 3, "round {round}: it cycled while watched");
        // What the probe did at its watch's end (logged before the attach's answer).
        let end_of_watch = wait_for_line(
            &log,
            "at the watch's end",
            &format!("round {round}: no word of the watch's end"),
        );
        left_to_program += usize::from(end_of_watch.contains("no flush at the watch's end"));
        let (done, mut control, reader, _) = attaching.join().unwrap();
        assert_eq!(done.entry_result, 0, "round {round}: the window started");
        std::thread::sleep(Duration::from_millis(50));
        control.write_all(&[Control::Stop.byte()]).unwrap();
        let records = reader.join().unwrap();
        // With the debug log on, the stream's end says how often CUPTI read the clock through the library (the
        // double reads it at each launch).
        let ended = wait_for_line(
            &log,
            "stream ended:",
            &format!("round {round}: no word of the stream's end"),
        );
        let calls = ended
            .split("the timestamp callback was called ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse::<u64>().ok());
        assert!(calls.is_some_and(|n| n > 0), "round {round}: {ended}");
        end_busy_round(&mut ask, round, "stop drained", &records);
    }
    assert_eq!(
        left_to_program, rounds,
        "no forced flush at any watch's end"
    );
    let (count, incomplete) = sessions_whole(&mut ask);
    assert!(
        incomplete <= rounds as u64,
        "at most the tracer's start's forced flush hands one out: {incomplete} ({})",
        count.answer
    );
    end_cycles_child(&mut ask, &mut child, &dir);
}

/// A profiler on a schedule (sessions of 15 ms, stopped with a forced flush, one every 55 ms) whose program's GPU
/// runs behind its launches, through six whole windows, their starts and stops included: each window starts and
/// stops between two of its sessions, so the attach's forced flushes (before the tracer's start, at the stop) hand it
/// no running kernel, and every kernel of its sessions reaches it once and complete. Made inside a session, each
/// handed it a running kernel's record without a start or an end (on an H200: cycles of 94 of 141, and one of 1,598
/// of 2,350).
#[test]
fn a_scheduled_profiler_keeps_every_kernel_through_windows_that_start_and_stop_between_its_sessions()
 {
    library();
    let (dir, socket) = scratch("gaps");
    let (mut child, mut ask, log) = cycles_child_logged();
    assert_eq!(ask("buffers 65536", "buffers "), "set");
    let rounds = 6;
    // A session of 15 ms, then 40 ms without one (Kineto registers its callbacks again some tens of milliseconds
    // after its flush).
    let cycle = |ask: &mut Ask| {
        std::thread::sleep(Duration::from_millis(15));
        assert_eq!(ask("stop drained", "stopped "), "0");
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(ask("start", "started "), "0");
    };
    for round in 0..rounds {
        assert_eq!(ask("start", "started "), "0");
        assert_eq!(ask("busy lagging", "busy"), "");
        for _ in 0..3 {
            cycle(&mut ask);
        }
        let pid = child.id();
        let attaching = attach_in_background(pid, &socket);
        while !attaching.is_finished() {
            cycle(&mut ask);
        }
        let (done, mut control, reader, _) = attaching.join().unwrap();
        assert_eq!(done.entry_result, 0, "round {round}: the window started");
        for _ in 0..5 {
            cycle(&mut ask);
        }
        control.write_all(&[Control::Stop.byte()]).unwrap();
        while !reader.is_finished() {
            cycle(&mut ask);
        }
        let records = reader.join().unwrap();
        end_busy_round(&mut ask, round, "stop drained", &records);
        assert!(
            !kernels(&records).is_empty(),
            "round {round}: the window recorded the program's kernels"
        );
    }
    let lines: Vec<String> = log.try_iter().collect();
    let found = |moment: &str| {
        lines
            .iter()
            .filter(|l| {
                l.contains(&format!("the window's {moment} waited")) && l.contains("for the end")
            })
            .count()
    };
    assert_eq!(
        (found("start"), found("stop")),
        (rounds, rounds),
        "every window started and stopped between two sessions"
    );
    sessions_whole_and_complete(&mut ask);
    end_cycles_child(&mut ask, &mut child, &dir);
}

/// The child of the flight recorder test: a stand-in program with a profiler of its own loaded (not recording).
/// `launch S A B NAME` fires the launch callbacks of kernels A..=B named NAME on stream S (its context: the double's
/// primary context); `sync S` fires a `cuStreamSynchronize(S)` that returns success; `subscribe` has its
/// profiler ask for CUPTI's subscriber and prints CUPTI's answer; `exit` ends it.
#[test]
#[ignore = "the child process of an_attach_leaves_a_flight_recorder_that_where_reads"]
fn attach_child_flight() {
    if std::env::var(SCENARIO).as_deref() != Ok("flight") {
        return;
    }
    let profiler = program_profiler();
    let d = common::double();
    let ctx = gpu_tools::cuda::Context::primary(0).expect("the driver double's context");
    let context = ctx.as_raw() as usize;
    let id = |name: &str| gpu_tools::cupti::DriverCbid::from_name(name).unwrap().id();
    println!("READY");
    std::io::stdout().flush().unwrap();
    for line in std::io::stdin().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["launch", s, a, b, name] => {
                let stream = u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
                let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                let name = std::ffi::CString::new(*name).unwrap();
                // cuLaunchKernel_params: the stream after the function and seven 32-bit dimensions.
                let mut params = [0u64; 8];
                params[5] = stream;
                let mut fired = 0;
                for corr in a..=b {
                    // SAFETY: the array and the name live to the end of the call; the layout is cuLaunchKernel's.
                    let seen = unsafe {
                        d.api_callback_params(
                            1,
                            id("cuLaunchKernel"),
                            c"cuLaunchKernel",
                            Some(Box::leak(name.clone().into_boxed_c_str())),
                            params.as_ptr().cast(),
                            context,
                            corr,
                        )
                    };
                    fired += usize::from(seen.is_some());
                }
                println!("fired {fired}");
            }
            ["sync", s] => {
                let stream = u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
                let params = [stream];
                // SAFETY: cuStreamSynchronize_params is the stream alone.
                let seen = unsafe {
                    d.api_callback_params(
                        1,
                        id("cuStreamSynchronize"),
                        c"cuStreamSynchronize",
                        None,
                        params.as_ptr().cast(),
                        context,
                        999,
                    )
                };
                println!("fired {}", usize::from(seen.is_some()));
            }
            ["subscribe"] => println!("subscribed {}", profiler.subscribe()),
            ["exit"] => return,
            other => panic!("unknown command {other:?}"),
        }
        std::io::stdout().flush().unwrap();
    }
}

/// An attach leaves a flight recorder: after the window, the program's launches and synchronisations are kept in
/// account, and the recorder's socket answers with the launches not known to have finished (the oldest first) and
/// the driver's word on each stream; a second window leaves it running; a profiler of the program that asks for
/// CUPTI's subscriber gets it, and the recorder says it stopped.
#[test]
fn an_attach_leaves_a_flight_recorder_that_where_reads() {
    use gpu_tools_injection::flight::{self, StreamState};
    library();
    let (dir, socket) = scratch("flight");
    let mut child = attached_child("attach_child_flight", "flight")
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answer = |command: &str| -> String {
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        loop {
            let line = lines.next().expect("the child answers").unwrap();
            if line.starts_with("fired ") || line.starts_with("subscribed ") {
                return line;
            }
        }
    };
    assert_eq!(
        answer("launch 0x11 1 1 _Z4stepv"),
        "fired 0",
        "no subscriber before the attach"
    );
    let recorder = flight::socket_of(child.id()).unwrap();
    assert!(
        flight::ask(&recorder, Duration::from_secs(5)).is_err(),
        "no recorder before the attach"
    );

    let (done, mut control, reader, _) = attach(child.id(), &socket);
    assert_eq!(done.entry_result, 0);
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    assert!(
        records.iter().any(|r| matches!(r, Record::Notice(n) if n.text.starts_with("a flight recorder runs in the process"))),
        "{records:#?}"
    );
    assert_eq!(answer("launch 0x11 1 5 _Z4stepv"), "fired 5");
    assert_eq!(answer("sync 0x11"), "fired 1");
    assert_eq!(answer("launch 0x11 6 7 _Z9wait_flagPVi"), "fired 2");
    assert_eq!(answer("launch 0x20 8 9 _Z4stepv"), "fired 2");
    let report = flight::ask(&recorder, Duration::from_secs(5)).expect("the recorder answers");
    assert_eq!(report.launches, 9);
    assert_eq!(report.stopped, None);
    let s11 = report
        .streams
        .iter()
        .find(|s| s.stream == 0x11)
        .expect("stream 0x11");
    assert_eq!(
        s11.state,
        StreamState::Busy,
        "the driver double says an odd stream is busy"
    );
    assert_eq!(s11.unfinished_count, 2);
    assert_eq!(
        s11.unfinished
            .iter()
            .map(|l| (l.seq, l.correlation, l.name.as_str()))
            .collect::<Vec<_>>(),
        vec![(6, 6, "_Z9wait_flagPVi"), (7, 7, "_Z9wait_flagPVi")],
        "the oldest unfinished first"
    );
    assert_eq!(
        s11.last_finished.as_ref().map(|l| l.seq),
        Some(5),
        "up to the synchronisation"
    );
    let s20 = report
        .streams
        .iter()
        .find(|s| s.stream == 0x20)
        .expect("stream 0x20");
    assert_eq!(
        s20.state,
        StreamState::Idle,
        "the driver said it had no work left"
    );
    assert_eq!(s20.unfinished_count, 0);
    assert!(s20.unfinished.is_empty());

    // A second window: the recorder runs on through it and after it.
    let (done, mut control, reader, _) = attach(child.id(), &socket);
    assert_eq!(done.entry_result, 0);
    control.write_all(&[Control::Stop.byte()]).unwrap();
    reader.join().unwrap();
    assert_eq!(answer("launch 0x11 10 10 _Z4stepv"), "fired 1");
    let report = flight::ask(&recorder, Duration::from_secs(5)).unwrap();
    assert_eq!(report.launches, 10);

    // The program's profiler asks for the subscriber: it gets it, and the recorder stops, said.
    assert_eq!(answer("subscribe"), "subscribed 0");
    assert_eq!(
        answer("launch 0x11 11 11 _Z4stepv"),
        "fired 0",
        "the program's subscriber has no launch callbacks on"
    );
    let report = flight::ask(&recorder, Duration::from_secs(5)).unwrap();
    assert!(
        report.stopped.as_deref().is_some_and(
            |s| s.contains("the program's own profiler asked for CUPTI's callback subscriber")
        ),
        "{report:?}"
    );
    assert_eq!(report.launches, 10);

    exit_child(stdin, &mut child);
    assert!(
        !recorder.exists(),
        "the recorder's socket went with the process"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
