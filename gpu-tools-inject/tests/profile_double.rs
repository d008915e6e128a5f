//! Kernel metrics from the injection library end to end without a GPU: a child process (this test binary run
//! again) opens the library and calls its `InitializeInjection` as CUDA would, with the CUDA driver double and
//! the whole CUPTI double (`cupti_full`: callbacks and range profiler in one library), then plays a program: it
//! fires the callbacks CUPTI would (context created, launches, an executable graph made) and makes the range
//! profiler double count one auto range per kernel that ran, named by number as CUPTI names them. The parent reads
//! the stream file and checks the kernel-metrics records: every range named after its kernel, graph kernels
//! included, per-name aggregation, `GPU_TOOLS_PROFILE_GRAPH=graph` (one record per graph launch), launches into a
//! capturing stream left out, and silence for a process that never made a context.

use std::ffi::{CStr, c_char, c_void};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use gpu_tools::profile::{KernelTable, combine_values};
use gpu_tools::trace::*;
use gpu_tools_injection::control::Control;
use gpu_tools_injection::env;
use gpu_tools_injection::message::Message;
use gpu_tools_injection::profile::notice::{MetricsEnd, MetricsEnded};
use gpu_tools_injection::settings::{Destination, Settings};

const SCENARIO: &str = "GPU_TOOLS_TEST_PROFILE_SCENARIO";
const METRICS: [&str; 3] = [
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
];
/// Callback ids of cupti_callbacks.h and cupti_driver_cbid.h.
const DOMAIN_DRIVER: u32 = 1;
const CONTEXT_CREATED: u32 = 1;
const GRAPHEXEC_CREATED: u32 = 18;
const GRAPHEXEC_DESTROY_STARTING: u32 = 19;
/// CUgraphNodeType: a memset node.
const MEMSET_NODE: i32 = 2;

/// Runs of child scenarios so far in this test binary: each gets a folder of its own.
static RUNS: AtomicUsize = AtomicUsize::new(0);

fn double(name: &str) -> PathBuf {
    gpu_tools_testing::double_path(name)
}

/// This test binary run again as the child of `scenario`, on the doubles of the CUDA driver and CUPTI.
fn child_command(scenario: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "child",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(SCENARIO, scenario)
    .env("GPU_TOOLS_CUDA_DRIVER_LIB", double("cuda_driver"))
    .env("GPU_TOOLS_CUPTI_LIB", double("cupti_full"))
    .env("GPU_TOOLS_NVPERF_HOST_LIB", double("cupti_full"));
    cmd
}

/// An empty folder of this test's own, `profile_double-NAME-PID-N`: the tests run in parallel, some with one scenario.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "profile_double-{name}-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs a child scenario with the library's environment; returns the records of its stream and its stdout.
fn run(scenario: &str, vars: &[(&str, &str)]) -> (Vec<Record>, String) {
    let lib = gpu_tools_testing::inject_lib();
    assert!(lib.is_file());
    let dir = fresh_dir(scenario);
    let mut cmd = child_command(scenario);
    cmd.env(env::FILE, dir.join("profile-%p.trace"))
        .env(env::KINDS, "kernel")
        .env(env::LOG, "debug")
        .env(env::PROFILE_METRICS, METRICS.join(","))
        .env_remove(env::SOCKET);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    println!(
        "scenario {scenario}: {}\n{stdout}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the child failed");
    let files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "one stream: {files:?}");
    let bytes = std::fs::read(&files[0]).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let records: Vec<Record> = StreamReader::new(&bytes[..])
        .map(|r| r.expect("a readable stream"))
        .collect();
    (records, stdout)
}

fn metrics(records: &[Record]) -> Vec<&KernelMetricsRecord> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::KernelMetrics(m) => Some(m),
            _ => None,
        })
        .collect()
}

fn notices(records: &[Record]) -> Vec<&Notice> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Notice(n) => Some(n),
            _ => None,
        })
        .collect()
}

/// The message a record carries, if it is one the tool acts on.
fn message(record: &Record) -> Option<Message> {
    match record {
        Record::CodedNotice(n) => Message::read(n),
        _ => None,
    }
}

fn names(records: &[Record]) -> Vec<String> {
    metrics(records)
        .iter()
        .map(|m| m.kernel.to_string())
        .collect()
}

/// The values of range `k` of a decode in the profiling double: `(k + 1) * 100 + metric index`.
fn range(k: usize) -> Vec<f64> {
    (0..METRICS.len())
        .map(|m| ((k + 1) * 100 + m) as f64)
        .collect()
}

/// What the test plays, decode by decode (the double numbers the ranges of each decode from 0):
/// 1. `copy`; a launch into a capturing stream (no range); graph 7 (k_a -> memset -> k_b -> k_c -> child graph
///    {k_x}) launched twice; `copy`;
/// 2. graph 9, whose edges the driver cannot give (its kernels unknown): two ranges, isolated;
/// 3. `copy`.
const NODE_NAMES: [&str; 13] = [
    "copy",
    "k_a",
    "k_b",
    "k_c",
    "k_x",
    "k_a",
    "k_b",
    "k_c",
    "k_x",
    "copy",
    "graph 9 (kernels unknown) kernel #0",
    "graph 9 (kernels unknown) kernel #1",
    "copy",
];

#[test]
fn graph_kernels_are_named_after_their_kernels_and_aggregate_per_name() {
    let (records, _) = run("graphs", &[]);
    assert_eq!(names(&records), NODE_NAMES);
    let m = metrics(&records);
    // Each record keeps its range's values and its launch's correlation id and index.
    assert_eq!(
        m[6].metrics.iter().map(|x| x.1).collect::<Vec<_>>(),
        range(6)
    );
    assert_eq!(m[11].metrics[0].1, range(1)[0], "the second decode");
    assert_eq!(
        m.iter().map(|r| r.correlation).collect::<Vec<_>>(),
        vec![1, 3, 3, 3, 3, 4, 4, 4, 4, 5, 6, 6, 7]
    );
    assert_eq!(
        m.iter().map(|r| r.launch).collect::<Vec<_>>(),
        (0..13).collect::<Vec<u32>>()
    );
    let table = KernelTable::from_records(m.iter().copied());
    let rows: Vec<(String, u64)> = table
        .rows
        .iter()
        .map(|r| (r.kernel.to_string(), r.launches))
        .collect();
    for (name, launches) in [("copy", 3), ("k_a", 2), ("k_b", 2), ("k_c", 2), ("k_x", 2)] {
        assert!(
            rows.contains(&(name.to_string(), launches)),
            "{name} x{launches} in {rows:?}"
        );
    }
    assert!(
        rows.iter().all(|(n, _)| n.parse::<u64>().is_err()),
        "no range is named by its number: {rows:?}"
    );
    let warnings: Vec<&str> = notices(&records).iter().map(|n| n.text.as_str()).collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("graph 9: its kernels could not be read")),
        "{warnings:?}"
    );
    assert!(
        !warnings
            .iter()
            .any(|w| w.contains("launches were expected")),
        "every decode found the ranges expected: {warnings:?}"
    );
}

#[test]
fn graph_profiling_makes_one_record_per_graph_launch() {
    let (records, _) = run("graphs", &[(env::PROFILE_GRAPH, "graph")]);
    assert_eq!(
        names(&records),
        vec![
            "copy",
            "graph 7 (4 kernels)",
            "graph 7 (4 kernels)",
            "copy",
            "graph 9 (kernels unknown)",
            "copy"
        ]
    );
    let m = metrics(&records);
    // The first launch of graph 7 is ranges 1..=4 of the first decode; the second, ranges 5..=8.
    let first: Vec<Vec<f64>> = (1..=4).map(range).collect();
    let rows: Vec<&[f64]> = first.iter().map(Vec::as_slice).collect();
    let got: Vec<f64> = m[1].metrics.iter().map(|x| x.1).collect();
    assert_eq!(got, combine_values(&METRICS, &rows));
    assert_eq!(got[0], 200.0 + 300.0 + 400.0 + 500.0, "durations add");
    assert_eq!(got[1], 201.0 + 301.0 + 401.0 + 501.0, "bytes add");
    let weighted = (202.0 * 200.0 + 302.0 * 300.0 + 402.0 * 400.0 + 502.0 * 500.0) / 1400.0;
    assert!((got[2] - weighted).abs() < 1e-9, "{} {weighted}", got[2]);
    assert_eq!(m[2].metrics[0].1, 600.0 + 700.0 + 800.0 + 900.0);
    assert_eq!(
        m[4].metrics[0].1,
        100.0 + 200.0,
        "the unknown graph's two ranges"
    );
    assert_eq!(
        m.iter()
            .map(|r| (r.correlation, r.launch))
            .collect::<Vec<_>>(),
        vec![(1, 0), (3, 1), (4, 2), (5, 3), (6, 4), (7, 5)]
    );
    let table = KernelTable::from_records(m.iter().copied());
    let graph = table
        .rows
        .iter()
        .find(|r| &*r.kernel == "graph 7 (4 kernels)")
        .expect("a row for graph 7");
    assert_eq!(graph.launches, 2);
    assert_eq!(graph.metrics[0].sum, 1400.0 + 3000.0);
}

#[test]
fn a_process_that_never_makes_a_context_says_nothing() {
    let (records, _) = run("no-context", &[]);
    assert!(metrics(&records).is_empty());
    let said: Vec<&Notice> = notices(&records)
        .into_iter()
        .filter(|n| n.level != NoticeLevel::Info)
        .collect();
    assert!(said.is_empty(), "{said:?}");
}

#[test]
fn without_a_callback_subscriber_the_stream_says_nothing_is_profiled() {
    let (records, _) = run("other-subscriber", &[]);
    let texts: Vec<&str> = notices(&records)
        .iter()
        .filter(|n| n.level == NoticeLevel::Error)
        .map(|n| n.text.as_str())
        .collect();
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("nothing is profiled") && t.contains("callback subscriber")),
        "{texts:?}"
    );
}

#[test]
fn a_graph_launch_counts_once_for_the_per_kernel_limit() {
    let (records, _) = run("graphs", &[(env::PROFILE_LAUNCHES_PER_KERNEL, "1")]);
    // One copy, one launch of each graph: the second launch of graph 7 and the later copies run unprofiled.
    let got = names(&records);
    assert_eq!(
        got,
        vec![
            "copy",
            "k_a",
            "k_b",
            "k_c",
            "k_x",
            "graph 9 (kernels unknown) kernel #0",
            "graph 9 (kernels unknown) kernel #1",
        ]
    );
}

/// A child of the attach tests (`attached_child`): a program that made its context before any library was
/// injected, driven by lines on its stdin.
struct AttachChild {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

impl AttachChild {
    /// Starts the child of `scenario` and waits until it made its context.
    fn start(scenario: &str) -> AttachChild {
        AttachChild::start_with(scenario, &[])
    }

    /// As [`start`](Self::start), with `vars` in the child's environment.
    fn start_with(scenario: &str, vars: &[(&str, &str)]) -> AttachChild {
        use std::io::BufRead;
        use std::process::Stdio;

        let mut child = child_command(scenario)
            .envs(vars.iter().copied())
            .env_remove(env::SOCKET)
            .env_remove(env::FILE)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let mut c = AttachChild {
            child,
            stdin,
            lines,
        };
        assert_eq!(c.answer("ready"), "ready", "the child made its context");
        c
    }

    fn id(&self) -> u32 {
        self.child.id()
    }

    /// Sends `command`; returns what the child said it did (its `done ...` line).
    fn answer(&mut self, command: &str) -> String {
        use std::io::Write;
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
        loop {
            let line = self.lines.next().expect("the child answers").unwrap();
            // The harness's own words may start the first line ("test child ... ").
            if let Some((_, rest)) = line.split_once("done ") {
                return rest.to_string();
            }
        }
    }

    /// Tells the child to exit; it must exit 0 (the program ran on).
    fn exit(mut self) {
        assert_eq!(self.answer("exit"), "exit");
        let status = self.child.wait().unwrap();
        assert!(
            status.success(),
            "the program ran on and exited 0: {status}"
        );
    }
}

/// `profile --pid`'s side of a running program: the library is injected into a child that already made its
/// context (as `gpu-tools profile --pid` does, without the stops, which the doubles do not need), starts on the
/// start byte, and finishes on the finish byte (with `vanish`, the connection ends instead). Returns the stream's
/// records and what the child printed after the finish (`after`: its launch once profiling ended).
fn run_attached(scenario: &str, limit: u32, vanish: bool) -> (Vec<Record>, String) {
    run_attached_with(scenario, limit, vanish, None)
}

/// [`run_attached`], with the child's command `before.1` (`graph 10`: a CUDA graph of two kernels launched;
/// `capture 10`: a stream capture begun) given before the launch at index `before.0` in the list.
fn run_attached_with(
    scenario: &str,
    limit: u32,
    vanish: bool,
    before: Option<(usize, &str)>,
) -> (Vec<Record>, String) {
    use std::io::Write;
    use std::os::unix::net::UnixListener;
    use std::time::Duration;

    let lib = gpu_tools_testing::inject_lib();
    let dir = fresh_dir(&format!("attach-{scenario}"));
    let socket = dir.join("s");
    let mut child = AttachChild::start(scenario);

    let listener = UnixListener::bind(&socket).unwrap();
    let mut request =
        gpu_tools_injection::profile::ProfileRequest::new(METRICS.map(String::from).to_vec());
    request.launches_per_kernel = Some(limit);
    let settings = Settings {
        log: Some(log::LevelFilter::Debug),
        cupti: Some(double("cupti_full")),
        profile: Some(request),
        // No recorder: its callbacks (it starts inside the finish) would count among the profiling's.
        flight_recorder: false,
        ..Settings::new(Destination::Socket(socket.clone()))
    }
    .attach_argument()
    .unwrap();
    let done = gpu_tools::linux::inject::Injection::new(child.id(), &lib, env::ATTACH_ENTRY)
        .argument(settings)
        .run()
        .expect("inject the library");
    assert_eq!(done.entry_result, 0, "the attach thread started");
    let conn = gpu_tools_testing::accept_within(
        &listener,
        Duration::from_secs(30),
        "the attached library",
    );
    let mut control = conn.try_clone().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for r in StreamReader::new(conn) {
            if tx.send(r.expect("a readable stream")).is_err() {
                return;
            }
        }
    });
    let mut records = Vec::new();
    // Takes records until the message `wanted` accepts, or the stream's end.
    let wait_for = |what: &str, wanted: fn(&Message) -> bool, records: &mut Vec<Record>| {
        loop {
            let r = rx
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|e| panic!("waiting for {what}: {e}; got {records:#?}"));
            let hit = message(&r).is_some_and(|m| wanted(&m));
            let end = matches!(&r, Record::ProcessEnd(_));
            records.push(r);
            if hit || end {
                return;
            }
        }
    };
    wait_for(
        "ready",
        |m| matches!(m, Message::ProfileReady { .. }),
        &mut records,
    );
    // Launches before the start are not profiled.
    assert_eq!(child.answer("launch copy 1"), "launched");
    control.write_all(&[Control::ProfileStart.byte()]).unwrap();
    wait_for(
        "started",
        |m| matches!(m, Message::ProfileStarted { .. }),
        &mut records,
    );
    // copy three times, gemm once, copy again: with a limit of 2, the third and fourth copies run unprofiled.
    for (i, (name, corr)) in [
        ("copy", 2),
        ("copy", 3),
        ("gemm", 4),
        ("copy", 5),
        ("copy", 6),
    ]
    .into_iter()
    .enumerate()
    {
        if let Some((_, command)) = before.filter(|b| b.0 == i) {
            assert_eq!(child.answer(command), "launched");
        }
        assert_eq!(child.answer(&format!("launch {name} {corr}")), "launched");
    }
    let after = if vanish {
        // The profiler goes away without finishing: the library sees its connection end.
        control.shutdown(std::net::Shutdown::Write).unwrap();
        wait_for("the stream's end", |_| false, &mut records);
        child.answer("after")
    } else {
        control.write_all(&[Control::ProfileFinish.byte()]).unwrap();
        wait_for(
            "finished",
            |m| matches!(m, Message::ProfileFinished { .. }),
            &mut records,
        );
        let after = child.answer("after");
        control.write_all(&[Control::Stop.byte()]).unwrap();
        wait_for("the stream's end", |_| false, &mut records);
        after
    };
    drop(rx);
    let _ = reader.join();
    child.exit();
    let _ = std::fs::remove_dir_all(&dir);
    (records, after)
}

#[test]
fn attached_kernel_metrics_are_named_after_their_launches_and_limited_per_kernel() {
    let (records, after) = run_attached("attach", 2, false);
    assert_eq!(names(&records), vec!["copy", "copy", "gemm"]);
    let m = metrics(&records);
    assert_eq!(
        m.iter().map(|r| r.correlation).collect::<Vec<_>>(),
        vec![2, 3, 4],
        "the launches after the start, each once"
    );
    assert_eq!(
        m[2].metrics.iter().map(|x| x.1).collect::<Vec<_>>(),
        range(2)
    );
    let texts: Vec<&str> = notices(&records).iter().map(|n| n.text.as_str()).collect();
    let said: Vec<Message> = records.iter().filter_map(message).collect();
    assert!(
        said.contains(&Message::ProfileStarted {
            contexts: 1,
            ranges_named: true
        }),
        "{said:?}"
    );
    assert!(
        texts.iter().any(|t| t
            .contains("3 launches profiled, 2 more ran unprofiled (at most 2 per kernel name)")),
        "{texts:?}"
    );
    assert!(
        said.contains(&Message::ProfileFinished {
            count: 3,
            ranges_named: true
        }),
        "{said:?}"
    );
    assert!(
        !texts.iter().any(|t| t.contains("launches were expected")),
        "every range was expected: {texts:?}"
    );
    // Finished: the subscriber is gone (no launch callback is delivered), the profiler counts nothing.
    assert_eq!(after, "callbacks 0, ranges 0, range profilers enabled 1");
}

#[test]
fn attached_kernel_metrics_end_before_the_programs_first_graph_launch() {
    // In a running program, graph launches made while the range profiler was on lost their work (H200, driver
    // 580): the profiling ends before the first one is made, and nothing after it is profiled.
    let (records, after) = run_attached_with("attach", 2, false, Some((2, "graph 10")));
    assert_eq!(
        names(&records),
        vec!["copy", "copy"],
        "only the launches before the graph"
    );
    let texts: Vec<&str> = notices(&records).iter().map(|n| n.text.as_str()).collect();
    assert!(
        texts.iter().any(|t| t.starts_with(
            "kernel metrics end at the program's first CUDA graph launch: in a running program"
        )),
        "{texts:?}"
    );
    assert!(
        !texts.iter().any(|t| t.contains("graph exec")),
        "the graph's launch made no range: {texts:?}"
    );
    // The launches profiled until then are sent, then said once the profiler is off, and counted by the finish's
    // answer (`profile --pid` reads both: the counters are free from the first, and the table is not empty).
    ended_early_is_said_and_counted(&records, MetricsEnd::GraphLaunch, 2);
    // Ended: no launch callback is delivered any more and the profiler counts nothing.
    assert_eq!(after, "callbacks 0, ranges 0, range profilers enabled 1");
}

/// The early end's notice comes after the records of the launches profiled until then, with their count, and the
/// finish's answer counts them too.
fn ended_early_is_said_and_counted(records: &[Record], before: MetricsEnd, launches: u64) {
    let ended = MetricsEnded { before, launches };
    let at = records
        .iter()
        .position(|r| message(r) == Some(Message::MetricsEnded(ended)))
        .unwrap_or_else(|| panic!("no {ended:?} in {records:#?}"));
    let sent_before = records[..at]
        .iter()
        .filter(|r| matches!(r, Record::KernelMetrics(_)))
        .count();
    assert_eq!(sent_before as u64, launches, "the records come first");
    assert!(
        records.iter().any(|r| matches!(r, Record::CodedNotice(n)
            if matches!(Message::read(n), Some(Message::ProfileFinished { count, .. }) if count == launches))),
        "the finish counts {launches} launches: {records:#?}"
    );
}

#[test]
fn attached_kernel_metrics_end_before_the_programs_first_stream_capture() {
    // In a running program, a capture begun while the range profiler was on failed (capture-late, H200, driver 580:
    // a cuBLAS launch into the capturing stream failed and the capture was invalidated): the profiling ends before
    // the capture begins, and nothing after it is profiled.
    let (records, after) = run_attached_with("attach", 2, false, Some((2, "capture 10")));
    assert_eq!(
        names(&records),
        vec!["copy", "copy"],
        "only the launches before the capture"
    );
    let texts: Vec<&str> = notices(&records).iter().map(|n| n.text.as_str()).collect();
    assert!(
        texts.iter().any(|t| t.starts_with(
            "kernel metrics end at the program's first stream capture: in a running program"
        )),
        "{texts:?}"
    );
    ended_early_is_said_and_counted(&records, MetricsEnd::CaptureBegin, 2);
    assert_eq!(after, "callbacks 0, ranges 0, range profilers enabled 1");
}

#[test]
fn attached_kernel_metrics_end_at_the_next_launch_when_the_profiler_goes_away() {
    let (records, after) = run_attached("attach", 2, true);
    let texts: Vec<&str> = notices(&records).iter().map(|n| n.text.as_str()).collect();
    assert!(
        texts.contains(
            &"kernel metrics end at the program's next launch: the tracer ended before finishing them"
        ),
        "{texts:?}"
    );
    assert!(
        records
            .iter()
            .any(|r| matches!(r, Record::ProcessEnd(e) if e.reason == EndReason::Stopped)),
        "the stream ends: {records:#?}"
    );
    // The subscriber stays (its callbacks idle); the launch ended the profiler, so nothing is replayed or counted.
    assert_eq!(after, "callbacks 1, ranges 0, range profilers enabled 1");
}

#[test]
fn attached_kernel_metrics_are_not_started_where_the_program_holds_the_subscriber() {
    // Without the subscriber nothing limits the range profiler's replays, and on an H200 with 8 and 16 jobs the
    // tracer then found no moment to finish it: it stayed on for the process's life, holding the GPU's counters.
    // So it is never enabled; the window ends at its start, said by a message.
    let (records, after) = run_attached("attach-other-subscriber", 2, false);
    assert!(metrics(&records).is_empty(), "nothing profiled");
    let texts: Vec<&str> = notices(&records).iter().map(|n| n.text.as_str()).collect();
    assert!(
        texts.iter().any(|t| t.starts_with(
            "kernel metrics not started in the process: CUPTI's callback subscriber could not be had"
        )),
        "{texts:?}"
    );
    let messages: Vec<Message> = records.iter().filter_map(message).collect();
    assert!(
        messages.contains(&Message::ProfileStarted {
            contexts: 0,
            ranges_named: false
        }),
        "{messages:?}"
    );
    assert!(
        messages.contains(&Message::MetricsEnded(MetricsEnded {
            before: MetricsEnd::NoSubscriber,
            launches: 0
        })),
        "{messages:?}"
    );
    assert_eq!(after, "callbacks 0, ranges 0, range profilers enabled 0");
}

// ------------------------------------------------------------------------------------------------------ the child

/// The doubles' controls, opened in the child (the same libraries the injection library loads).
struct Controls {
    cupti: libloading::Library,
    driver: libloading::Library,
}

macro_rules! control {
    ($lib:expr, $t:ty, $name:literal) => {
        // SAFETY: the symbol has this signature in the double.
        *unsafe { $lib.get::<$t>($name) }.unwrap_or_else(|e| panic!("{e}"))
    };
}

/// `cuLaunchKernel_params` (generated_cuda_meta.h).
#[repr(C)]
struct LaunchParams {
    f: *mut c_void,
    dims: [u32; 7],
    stream: *mut c_void,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
}

/// `cuGraphLaunch_params`.
#[repr(C)]
struct GraphLaunchParams {
    exec: *mut c_void,
    stream: *mut c_void,
}

type ApiCallbackFn = unsafe extern "C" fn(
    u32,
    u32,
    *const c_char,
    *const c_char,
    *const c_void,
    *mut c_void,
    u32,
    u32,
    i32,
) -> u64;

impl Controls {
    fn open() -> Controls {
        // SAFETY: the doubles' initialisers only set up their statics.
        unsafe {
            Controls {
                cupti: libloading::Library::new(double("cupti_full")).unwrap(),
                driver: libloading::Library::new(double("cuda_driver")).unwrap(),
            }
        }
    }

    fn context_created(&self, ctx: *mut c_void) {
        let f = control!(
            self.cupti,
            unsafe extern "C" fn(u32, *mut c_void, *mut c_void, u32, *const c_char, usize) -> i32,
            b"cd_resource\0"
        );
        // SAFETY: a live context of the driver double; no module.
        let delivered = unsafe {
            f(
                CONTEXT_CREATED,
                ctx,
                std::ptr::null_mut(),
                0,
                std::ptr::null(),
                0,
            )
        };
        assert_eq!(delivered, 1, "the library subscribed to resource callbacks");
    }

    /// Fires the callbacks of a driver call; returns whether they were delivered (enabled for a subscriber).
    fn api_delivered(
        &self,
        function: &CStr,
        symbol: Option<&CStr>,
        params: *const c_void,
        ctx: *mut c_void,
        corr: u32,
    ) -> bool {
        let cbid = gpu_tools::cupti::DriverCbid::from_name(function.to_str().unwrap())
            .unwrap()
            .id();
        let f = control!(self.cupti, ApiCallbackFn, b"cd_api_callback_params\0");
        // SAFETY: static strings and a parameter struct alive during the call.
        let got = unsafe {
            f(
                DOMAIN_DRIVER,
                cbid,
                function.as_ptr(),
                symbol.map_or(std::ptr::null(), CStr::as_ptr),
                params,
                ctx,
                1,
                corr,
                0,
            )
        };
        got != u64::MAX
    }

    fn api(
        &self,
        function: &CStr,
        symbol: Option<&CStr>,
        params: *const c_void,
        ctx: *mut c_void,
        corr: u32,
    ) {
        assert!(
            self.api_delivered(function, symbol, params, ctx, corr),
            "{function:?} callbacks are enabled"
        );
    }

    /// A kernel launch into `stream`: the callbacks, then (unless the stream captures) its auto range.
    fn launch(&self, ctx: *mut c_void, stream: usize, name: &CStr, corr: u32, runs: bool) {
        let params = LaunchParams {
            f: std::ptr::null_mut(),
            dims: [1, 1, 1, 32, 1, 1, 0],
            stream: stream as *mut c_void,
            kernel_params: std::ptr::null_mut(),
            extra: std::ptr::null_mut(),
        };
        self.api(
            c"cuLaunchKernel",
            Some(name),
            (&raw const params).cast(),
            ctx,
            corr,
        );
        if runs {
            self.ranges(1);
        }
    }

    /// A kernel launch of a program that may or may not be watched: the callbacks if any are enabled, then its
    /// auto range. Returns whether the callbacks were delivered, and whether a range profiler counted the kernel.
    fn launch_maybe_watched(&self, ctx: *mut c_void, name: &CStr, corr: u32) -> (bool, bool) {
        let params = LaunchParams {
            f: std::ptr::null_mut(),
            dims: [1, 1, 1, 32, 1, 1, 0],
            stream: std::ptr::null_mut(),
            kernel_params: std::ptr::null_mut(),
            extra: std::ptr::null_mut(),
        };
        let delivered = self.api_delivered(
            c"cuLaunchKernel",
            Some(name),
            (&raw const params).cast(),
            ctx,
            corr,
        );
        let run = control!(
            self.cupti,
            unsafe extern "C" fn(*const c_char) -> i32,
            b"cp_launch\0"
        );
        // SAFETY: null asks for a numbered range.
        let counted = unsafe { run(std::ptr::null()) } == 0;
        (delivered, counted)
    }

    fn graph_launch(&self, ctx: *mut c_void, exec: usize, corr: u32, kernels: usize) {
        let params = GraphLaunchParams {
            exec: exec as *mut c_void,
            stream: std::ptr::null_mut(),
        };
        self.api(
            c"cuGraphLaunch",
            None,
            (&raw const params).cast(),
            ctx,
            corr,
        );
        self.ranges(kernels);
    }

    /// `n` kernels run: auto ranges named by number, as CUPTI names them, while the profiler runs (the library
    /// stops it for launches past a per-kernel limit).
    fn ranges(&self, n: usize) {
        let f = control!(
            self.cupti,
            unsafe extern "C" fn(*const c_char) -> i32,
            b"cp_launch\0"
        );
        for _ in 0..n {
            // SAFETY: null asks for a numbered range.
            unsafe { f(std::ptr::null()) };
        }
    }

    fn capturing(&self, stream: usize, on: bool) {
        let f = control!(
            self.driver,
            unsafe extern "C" fn(*mut c_void, i32),
            b"dbl_set_capturing\0"
        );
        // SAFETY: an opaque handle value.
        unsafe { f(stream as *mut c_void, i32::from(on)) }
    }

    fn graph(&self) -> *mut c_void {
        let f = control!(
            self.driver,
            unsafe extern "C" fn() -> *mut c_void,
            b"dbl_graph_create\0"
        );
        // SAFETY: a plain control.
        let g = unsafe { f() };
        assert!(!g.is_null());
        g
    }

    fn kernel(&self, graph: *mut c_void, name: &CStr, kind: i32) -> i32 {
        let f = control!(
            self.driver,
            unsafe extern "C" fn(*mut c_void, *const c_char, i32) -> i32,
            b"dbl_graph_add_kernel\0"
        );
        // SAFETY: a graph of the double; the name is copied.
        unsafe { f(graph, name.as_ptr(), kind) }
    }

    fn node(&self, graph: *mut c_void, ty: i32) -> i32 {
        let f = control!(
            self.driver,
            unsafe extern "C" fn(*mut c_void, i32) -> i32,
            b"dbl_graph_add_node\0"
        );
        // SAFETY: a graph of the double.
        unsafe { f(graph, ty) }
    }

    fn child(&self, graph: *mut c_void, child: *mut c_void) -> i32 {
        let f = control!(
            self.driver,
            unsafe extern "C" fn(*mut c_void, *mut c_void) -> i32,
            b"dbl_graph_add_child\0"
        );
        // SAFETY: graphs of the double.
        unsafe { f(graph, child) }
    }

    fn edge(&self, graph: *mut c_void, from: i32, to: i32) {
        let f = control!(
            self.driver,
            unsafe extern "C" fn(*mut c_void, i32, i32) -> i32,
            b"dbl_graph_add_edge\0"
        );
        // SAFETY: a graph of the double.
        assert_eq!(unsafe { f(graph, from, to) }, 0);
    }

    fn edges_unsupported(&self, on: bool) {
        let f = control!(
            self.driver,
            unsafe extern "C" fn(i32),
            b"dbl_graph_edges_unsupported\0"
        );
        // SAFETY: a plain control.
        unsafe { f(i32::from(on)) }
    }

    /// An executable graph `exec` made from `graph`, which CUPTI numbers `id`.
    fn exec_created(&self, ctx: *mut c_void, graph: *mut c_void, exec: usize, id: u32) {
        let set_id = control!(
            self.cupti,
            unsafe extern "C" fn(*mut c_void, u32),
            b"cd_graph_id\0"
        );
        // SAFETY: opaque handle values.
        unsafe { set_id(graph, id) };
        self.graph_event(GRAPHEXEC_CREATED, ctx, graph, exec);
    }

    fn graph_event(&self, cbid: u32, ctx: *mut c_void, graph: *mut c_void, exec: usize) {
        let f = control!(
            self.cupti,
            unsafe extern "C" fn(u32, *mut c_void, *mut c_void, *mut c_void) -> i32,
            b"cd_graph_resource\0"
        );
        // SAFETY: handles of the doubles.
        assert_eq!(unsafe { f(cbid, ctx, graph, exec as *mut c_void) }, 1);
    }

    fn other_subscriber(&self, name: &'static CStr) {
        let f = control!(
            self.cupti,
            unsafe extern "C" fn(*const c_char),
            b"cd_other_subscriber\0"
        );
        // SAFETY: a static string; the double copies it.
        unsafe { f(name.as_ptr()) }
    }
}

fn initialize(lib: &Path) -> libloading::Library {
    // SAFETY: the library's initialisers only set up Rust statics.
    let lib = unsafe { libloading::Library::new(lib) }.expect("dlopen the library");
    // SAFETY: `int InitializeInjection(void)`, as CUDA calls it.
    let init =
        unsafe { lib.get::<unsafe extern "C" fn() -> i32>(b"InitializeInjection\0") }.unwrap();
    // SAFETY: no arguments; CUDA would call it from cuInit.
    assert_eq!(unsafe { init() }, 1, "tracing runs");
    lib
}

/// The child side: a stand-in CUDA program with the library injected.
#[test]
#[ignore = "the child process of the other tests"]
fn child() {
    let Ok(scenario) = std::env::var(SCENARIO) else {
        return;
    };
    let c = Controls::open();
    if scenario == "other-subscriber" || scenario == "attach-other-subscriber" {
        c.other_subscriber(c"torch.profiler");
    }
    if scenario.starts_with("attach") {
        return attached_child(&c);
    }
    let _lib = initialize(&gpu_tools_testing::inject_lib());
    if scenario != "graphs" {
        // A process that loads CUDA and never makes a context (a compile worker), or that could not subscribe.
        return;
    }
    let ctx = gpu_tools::cuda::Context::primary(0).expect("a context of the driver double");
    let raw = ctx.as_raw().cast::<c_void>();
    c.context_created(raw);
    // 1. copy; a launch that is captured; graph 7 twice; copy.
    c.launch(raw, 0, c"copy", 1, true);
    c.capturing(0x5, true);
    c.launch(raw, 0x5, c"captured", 2, false);
    c.capturing(0x5, false);
    let g7 = c.graph();
    let child = c.graph();
    let x = c.kernel(child, c"k_x", 0);
    assert_eq!(x, 0);
    // Listed out of order: the edges decide.
    let k_c = c.kernel(g7, c"k_c", 2);
    let memset = c.node(g7, MEMSET_NODE);
    let k_a = c.kernel(g7, c"k_a", 0);
    let k_b = c.kernel(g7, c"k_b", 1);
    let sub = c.child(g7, child);
    c.edge(g7, k_a, memset);
    c.edge(g7, memset, k_b);
    c.edge(g7, k_b, k_c);
    c.edge(g7, k_c, sub);
    c.exec_created(raw, g7, 0xE7, 7);
    c.graph_launch(raw, 0xE7, 3, 4);
    c.graph_launch(raw, 0xE7, 4, 4);
    c.launch(raw, 0, c"copy", 5, true);
    // 2. graph 9, its edges unreadable.
    let g9 = c.graph();
    c.kernel(g9, c"k_y", 0);
    c.edges_unsupported(true);
    c.exec_created(raw, g9, 0xE9, 9);
    c.edges_unsupported(false);
    c.graph_launch(raw, 0xE9, 6, 2);
    // 3. copy.
    c.launch(raw, 0, c"copy", 7, true);
    c.graph_event(GRAPHEXEC_DESTROY_STARTING, raw, std::ptr::null_mut(), 0xE7);
    // The exit handler decodes the rest and ends the stream.
    drop(ctx);
}

/// The child of the attach tests: a program that made its context before any library was injected; it answers
/// lines on stdin with `done ...`: `launch NAME CORR` fires the launch callbacks (if any are enabled) and runs the
/// kernel; `after` launches once more and says whether its callbacks were delivered and its range counted.
fn attached_child(c: &Controls) {
    use std::io::Write;
    let ctx = gpu_tools::cuda::Context::primary(0).expect("a context of the driver double");
    let raw = ctx.as_raw().cast::<c_void>();
    for line in std::io::stdin().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        let reply = match words.as_slice() {
            ["ready"] => "ready".to_string(),
            ["launch", name, corr] => {
                let name = std::ffi::CString::new(*name).unwrap();
                c.launch_maybe_watched(raw, &name, corr.parse().unwrap());
                "launched".to_string()
            }
            ["graph", corr] => {
                // A graph the program instantiated before the attach, of two kernels.
                c.graph_launch(raw, 0x6000, corr.parse().unwrap(), 2);
                "launched".to_string()
            }
            ["capture", corr] => {
                // A stream capture begins (its callbacks, when enabled).
                let params = [0usize; 2];
                c.api_delivered(
                    c"cuStreamBeginCapture_v2",
                    None,
                    params.as_ptr().cast(),
                    raw,
                    corr.parse().unwrap(),
                );
                "launched".to_string()
            }
            ["after"] => {
                let (delivered, counted) = c.launch_maybe_watched(raw, c"late", 99);
                let enables = control!(
                    c.cupti,
                    unsafe extern "C" fn() -> u32,
                    b"cp_range_enables\0"
                );
                format!(
                    "callbacks {}, ranges {}, range profilers enabled {}",
                    u32::from(delivered),
                    u32::from(counted),
                    // SAFETY: reads a counter of the double.
                    unsafe { enables() }
                )
            }
            ["api"] => {
                let choices = control!(c.cupti, unsafe extern "C" fn() -> u64, b"cd_api_choices\0");
                let off = control!(
                    c.cupti,
                    unsafe extern "C" fn() -> i32,
                    b"cd_api_off_count\0"
                );
                // SAFETY: reads counters of the double.
                unsafe { format!("api choices {} off {}", choices(), off()) }
            }
            ["exit"] => {
                println!("done exit");
                return;
            }
            other => panic!("unknown command {other:?}"),
        };
        println!("done {reply}");
        std::io::stdout().flush().unwrap();
    }
}

/// One attach of a series into the same child (`order` tests): injects the library with `request` (`None`: a trace)
/// on a socket of its own, plays the tracer's side (a trace: stop once attached; PC sampling: start, finish,
/// stop) and returns the stream's messages once the library ended it.
fn attach_in_order(
    pid: u32,
    dir: &Path,
    n: usize,
    request: Option<gpu_tools_injection::profile::ProfileRequest>,
) -> Vec<Message> {
    attach_in_order_with_notices(pid, dir, n, request, |_| {}).0
}

/// [`attach_in_order`], with the texts of the plain notices too, and the attach's settings changed by `tweak`.
fn attach_in_order_with_notices(
    pid: u32,
    dir: &Path,
    n: usize,
    request: Option<gpu_tools_injection::profile::ProfileRequest>,
    tweak: impl Fn(&mut Settings),
) -> (Vec<Message>, Vec<String>) {
    use std::io::Write;
    use std::os::unix::net::UnixListener;
    use std::time::{Duration, Instant};

    let socket = dir.join(format!("s{n}"));
    let listener = UnixListener::bind(&socket).unwrap();
    let trace = request.is_none();
    let mut settings = Settings {
        cupti: Some(double("cupti_full")),
        profile: request,
        ..Settings::new(Destination::Socket(socket))
    };
    tweak(&mut settings);
    let settings = settings.attach_argument().unwrap();
    // The previous attach's thread ends right after its stream: until then the library answers busy.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let done = gpu_tools::linux::inject::Injection::new(
            pid,
            gpu_tools_testing::inject_lib(),
            env::ATTACH_ENTRY,
        )
        .argument(settings.clone())
        .run()
        .expect("inject the library");
        if done.entry_result == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "attach {n}: entry result {}",
            done.entry_result
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let conn = gpu_tools_testing::accept_within(
        &listener,
        Duration::from_secs(30),
        "the attached library",
    );
    let mut control = conn.try_clone().unwrap();
    let mut messages = Vec::new();
    let notices = std::cell::RefCell::new(Vec::new());
    let mut reader = StreamReader::new(conn);
    let mut next = |what: &str| -> Option<Record> {
        let r = reader
            .next()
            .map(|r| r.unwrap_or_else(|e| panic!("attach {n}, waiting for {what}: {e}")));
        if let Some(Record::Notice(notice)) = &r {
            notices.borrow_mut().push(notice.text.clone());
        }
        // Where the finish's answer came among the notices (the tracer lets the program go on at it).
        if matches!(
            r.as_ref().and_then(message),
            Some(Message::ProfileFinished { .. })
        ) {
            notices.borrow_mut().push(FINISHED.into());
        }
        r
    };
    let mut until = |what: &str, wanted: &dyn Fn(&Message) -> bool, messages: &mut Vec<Message>| loop {
        let Some(r) = next(what) else {
            panic!("attach {n}: the stream ended before {what}: {messages:?}")
        };
        if let Some(m) = message(&r) {
            let hit = wanted(&m);
            messages.push(m);
            if hit {
                return;
            }
        }
    };
    if trace {
        until(
            "attached",
            &|m| matches!(m, Message::Attached { .. }),
            &mut messages,
        );
    } else {
        until(
            "ready",
            &|m| matches!(m, Message::ProfileReady { .. }),
            &mut messages,
        );
        control.write_all(&[Control::ProfileStart.byte()]).unwrap();
        until(
            "started",
            &|m| matches!(m, Message::ProfileStarted { .. }),
            &mut messages,
        );
        control.write_all(&[Control::ProfileFinish.byte()]).unwrap();
        until(
            "finished",
            &|m| matches!(m, Message::ProfileFinished { .. }),
            &mut messages,
        );
    }
    control.write_all(&[Control::Stop.byte()]).unwrap();
    while let Some(r) = next("the stream's end") {
        messages.extend(message(&r));
    }
    (messages, notices.into_inner())
}

/// Attaches to one child in the order `kinds` gives (`true`: PC sampling, `false`: a trace); returns each attach's
/// messages.
fn attaches_in_order(kinds: &[bool]) -> Vec<Vec<Message>> {
    let dir = fresh_dir("order");
    let mut child = AttachChild::start("attach");
    let mut out = Vec::new();
    for (n, pc) in kinds.iter().enumerate() {
        let request = pc.then(|| {
            let mut r = gpu_tools_injection::profile::ProfileRequest::new(Vec::new());
            r.pc_sampling = true;
            r
        });
        out.push(attach_in_order(child.id(), &dir, n, request));
        assert_eq!(child.answer(&format!("launch copy {}", n + 1)), "launched");
    }
    child.exit();
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// PC sampling after a first attach that traced is said (`PcAfterTrace`: on an H200 every sample then fell outside
/// the program's kernels); after a first attach that sampled PCs it is not, traces between them or not.
#[test]
fn pc_sampling_says_when_the_first_attach_traced() {
    let said = |m: &[Message]| m.contains(&Message::PcAfterTrace);
    let traced_first = attaches_in_order(&[false, true, true]);
    assert!(!said(&traced_first[0]), "{:?}", traced_first[0]);
    assert!(
        traced_first[1]
            .iter()
            .any(|m| matches!(m, Message::ProfileStarted { contexts: 1, .. })),
        "PC sampling started: {:?}",
        traced_first[1]
    );
    assert!(said(&traced_first[1]), "{:?}", traced_first[1]);
    assert!(
        said(&traced_first[2]),
        "every later window: {:?}",
        traced_first[2]
    );
    let sampled_first = attaches_in_order(&[true, false, true]);
    assert!(
        sampled_first[0]
            .iter()
            .any(|m| matches!(m, Message::ProfileStarted { contexts: 1, .. })),
        "{:?}",
        sampled_first[0]
    );
    assert!(sampled_first.iter().all(|m| !said(m)), "{sampled_first:?}");
}

/// Among an attach's notices: where the finish's answer came.
const FINISHED: &str = "(the finish's answer)";

/// The flight recorder starts inside the finish of a PC sampling window, before its answer (while the tracer holds
/// the program's threads outside the driver: enabled after it, its callbacks crashed a launching job on an H200),
/// and one an earlier attach left stays on through the window (stopping it did not keep PC sampling after a trace
/// from being blind).
#[test]
fn the_recorder_starts_inside_the_finish_of_pc_sampling() {
    let dir = fresh_dir("recorder");
    let child = AttachChild::start("attach");
    let pc = || {
        let mut r = gpu_tools_injection::profile::ProfileRequest::new(Vec::new());
        r.pc_sampling = true;
        Some(r)
    };
    let stops = |notices: &[String]| {
        notices
            .iter()
            .filter(|t| t.starts_with("the flight recorder stops"))
            .count()
    };
    let runs = |notices: &[String]| {
        notices
            .iter()
            .position(|t| t.starts_with("a flight recorder runs in the process from now on"))
    };
    let finished = |notices: &[String]| notices.iter().position(|t| t == FINISHED);
    // The first attach samples: its own recorder starts before the finish's answer.
    let (first, notices) = attach_in_order_with_notices(child.id(), &dir, 0, pc(), |_| {});
    assert_eq!(stops(&notices), 0, "{notices:?}");
    let (Some(run), Some(done)) = (runs(&notices), finished(&notices)) else {
        panic!("a recorder and a finish: {notices:?}");
    };
    assert!(
        run < done,
        "the recorder starts before the answer: {notices:?}"
    );
    assert!(
        first
            .iter()
            .any(|m| matches!(m, Message::ProfileFinished { .. })),
        "{first:?}"
    );
    // A trace, then PC sampling: the recorder is not stopped for the window.
    attach_in_order(child.id(), &dir, 1, None);
    let (_, notices) = attach_in_order_with_notices(child.id(), &dir, 2, pc(), |_| {});
    assert_eq!(stops(&notices), 0, "{notices:?}");
    assert!(finished(&notices).is_some(), "{notices:?}");
    child.exit();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A trace after a PC sampling window that left no recorder (`--no-flight-recorder`) starts none: it could only
/// enable the recorder's callbacks while the program launches, which after a PC sampling window crashed a job on an
/// H200. The stream says why; a later PC sampling window starts one inside its finish.
#[test]
fn a_trace_after_pc_sampling_starts_no_recorder_while_the_program_runs() {
    let dir = fresh_dir("no-recorder-after-pc");
    let child = AttachChild::start("attach");
    let pc = || {
        let mut r = gpu_tools_injection::profile::ProfileRequest::new(Vec::new());
        r.pc_sampling = true;
        Some(r)
    };
    let says = |notices: &[String], start: &str| notices.iter().any(|t| t.starts_with(start));
    let (_, notices) = attach_in_order_with_notices(child.id(), &dir, 0, pc(), |s| {
        s.flight_recorder = false;
    });
    assert!(
        !says(&notices, "a flight recorder runs"),
        "none asked: {notices:?}"
    );
    let (_, notices) = attach_in_order_with_notices(child.id(), &dir, 1, None, |_| {});
    assert!(
        says(
            &notices,
            "no flight recorder: PC sampling has run in this process"
        ),
        "{notices:?}"
    );
    assert!(!says(&notices, "a flight recorder runs"), "{notices:?}");
    let (_, notices) = attach_in_order_with_notices(child.id(), &dir, 2, pc(), |_| {});
    let runs = notices
        .iter()
        .position(|t| t.starts_with("a flight recorder runs"));
    let done = notices.iter().position(|t| t == FINISHED);
    assert!(
        matches!((runs, done), (Some(r), Some(d)) if r < d),
        "started inside the finish: {notices:?}"
    );
    child.exit();
    let _ = std::fs::remove_dir_all(&dir);
}

/// API functions a trace turned off in CUPTI (`--api-skip`) are on again once its window ends: CUPTI's choice is
/// process-wide, and the program (its own profiler) lives on.
#[test]
fn an_attached_trace_gives_back_the_api_functions_it_turned_off() {
    let dir = fresh_dir("api-give-back");
    let mut child = AttachChild::start("attach");
    assert_eq!(child.answer("api"), "api choices 0 off 0");
    attach_in_order_with_notices(child.id(), &dir, 0, None, |s| {
        s.api_skip = vec!["cuLaunchKernel".into(), "cudaGetLastError".into()];
    });
    // Two turned off as the window began, two on again at its end.
    assert_eq!(child.answer("api"), "api choices 4 off 0");
    child.exit();
    let _ = std::fs::remove_dir_all(&dir);
}

/// PC sampling that CUPTI could not turn off is said (`PcLeftOn`: CUPTI then keeps it on, and the GPU's counters
/// held, for the process's life; on an H200 every other process's PC sampling was refused meanwhile), and what was
/// read before still comes.
#[test]
fn pc_sampling_that_could_not_be_turned_off_is_said() {
    let dir = fresh_dir("left-on");
    // CUPTI_ERROR_INVALID_PARAMETER, as the H200 answered.
    let child = AttachChild::start_with(
        "attach",
        &[("GPU_TOOLS_DOUBLE_FAIL", "cuptiPCSamplingDisable=1")],
    );
    let mut request = gpu_tools_injection::profile::ProfileRequest::new(Vec::new());
    request.pc_sampling = true;
    let got = attach_in_order(child.id(), &dir, 0, Some(request));
    child.exit();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        got.iter().any(|m| matches!(m, Message::PcLeftOn { .. })),
        "{got:?}"
    );
    assert!(
        got.iter().any(|m| matches!(m, Message::PcCounts(_))),
        "the counts are sent after the failed disable too (before, a failed finish sent none): {got:?}"
    );
}
