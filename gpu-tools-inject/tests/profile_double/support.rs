//! What the tests share: the metrics asked for, the doubles, this binary run again as the child of a scenario,
//! scratch folders, readers of a stream's records, and the handle of an attach child driven by lines on its stdin.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use gpu_tools::trace::*;
use gpu_tools_injection::env;
use gpu_tools_injection::message::Message;

pub(crate) const SCENARIO: &str = "GPU_TOOLS_TEST_PROFILE_SCENARIO";
pub(crate) const METRICS: [&str; 3] = [
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
];

/// Runs of child scenarios so far in this test binary: each gets a folder of its own.
static RUNS: AtomicUsize = AtomicUsize::new(0);

pub(crate) fn double(name: &str) -> PathBuf {
    gpu_tools_testing::double_path(name)
}

/// This test binary run again as the child of `scenario`, on the doubles of the CUDA driver and CUPTI.
fn child_command(scenario: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "program::child",
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
pub(crate) fn fresh_dir(name: &str) -> PathBuf {
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
pub(crate) fn run(scenario: &str, vars: &[(&str, &str)]) -> (Vec<Record>, String) {
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

pub(crate) fn metrics(records: &[Record]) -> Vec<&KernelMetricsRecord> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::KernelMetrics(m) => Some(m),
            _ => None,
        })
        .collect()
}

pub(crate) fn notices(records: &[Record]) -> Vec<&Notice> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Notice(n) => Some(n),
            _ => None,
        })
        .collect()
}

/// The message a record carries, if it is one the tool acts on.
pub(crate) fn message(record: &Record) -> Option<Message> {
    match record {
        Record::CodedNotice(n) => Message::read(n),
        _ => None,
    }
}

pub(crate) fn names(records: &[Record]) -> Vec<String> {
    metrics(records)
        .iter()
        .map(|m| m.kernel.to_string())
        .collect()
}

/// The values of range `k` of a decode in the profiling double: `(k + 1) * 100 + metric index`.
pub(crate) fn range(k: usize) -> Vec<f64> {
    (0..METRICS.len())
        .map(|m| ((k + 1) * 100 + m) as f64)
        .collect()
}

/// A child of the attach tests (`attached_child`): a program that made its context before any library was
/// injected, driven by lines on its stdin.
pub(crate) struct AttachChild {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

impl AttachChild {
    /// Starts the child of `scenario` and waits until it made its context.
    pub(crate) fn start(scenario: &str) -> AttachChild {
        AttachChild::start_with(scenario, &[])
    }

    /// As [`start`](Self::start), with `vars` in the child's environment.
    pub(crate) fn start_with(scenario: &str, vars: &[(&str, &str)]) -> AttachChild {
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

    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    /// Sends `command`; returns what the child said it did (its `done ...` line).
    pub(crate) fn answer(&mut self, command: &str) -> String {
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
    pub(crate) fn exit(mut self) {
        assert_eq!(self.answer("exit"), "exit");
        let status = self.child.wait().unwrap();
        assert!(
            status.success(),
            "the program ran on and exited 0: {status}"
        );
    }
}
