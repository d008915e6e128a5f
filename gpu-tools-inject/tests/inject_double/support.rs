//! What the tests share: the doubles' constants, the library, readers of a stream's records, scratch folders, and a
//! stand-in program run from this binary, started and attached to.

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use gpu_tools::trace::*;
use gpu_tools_injection::env;
use gpu_tools_injection::message::Message;
use gpu_tools_injection::settings::{Destination, Settings};

use crate::common;

pub(crate) const SCENARIO: &str = "GPU_TOOLS_TEST_INJECT_SCENARIO";
pub(crate) const CONCURRENT_KERNEL: u32 = 10;

pub(crate) const MEMSET: u32 = 2;
pub(crate) const OVERHEAD: u32 = 17;

/// Has the CUPTI double emit kernels of correlation ids `a..=b` (`_Z4stepv`, one block of 32 threads on device 0,
/// context 1, stream 7), each 100 ns long and 200 ns apart from `base` on CUPTI's clock; returns how many it
/// recorded.
pub(crate) fn step_kernels(
    d: &gpu_tools_testing::cupti_double::Controls,
    base: u64,
    a: u32,
    b: u32,
) -> usize {
    (a..=b)
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
        .count()
}

pub(crate) fn library() -> PathBuf {
    gpu_tools_testing::inject_lib()
}

pub(crate) fn kernels(records: &[Record]) -> Vec<&KernelRecord> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Kernel(k) => Some(k),
            _ => None,
        })
        .collect()
}

pub(crate) fn end(records: &[Record]) -> Option<&ProcessEnd> {
    records.iter().find_map(|r| match r {
        Record::ProcessEnd(e) => Some(e),
        _ => None,
    })
}

/// The texts of the stream's notices.
pub(crate) fn notice_texts(records: &[Record]) -> Vec<&str> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Notice(n) => Some(n.text.as_str()),
            _ => None,
        })
        .collect()
}

/// A scratch folder of this test process named after `name`, emptied, and the socket path in it.
pub(crate) fn scratch(name: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("inject_double-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("s");
    (dir, socket)
}

/// The message a record carries, if it is one the tool acts on.
pub(crate) fn message(record: &Record) -> Option<Message> {
    match record {
        Record::CodedNotice(n) => Message::read(n),
        _ => None,
    }
}

/// What an attach gives: the injection's report, the connection (for the stop byte), the stream's reader, and the
/// stream's header.
pub(crate) type Attach = (
    gpu_tools::linux::inject::Injected,
    std::os::unix::net::UnixStream,
    std::thread::JoinHandle<Vec<Record>>,
    Option<StreamHeader>,
);

/// One attach: injects the library into `pid` with the attach settings, accepts its connection and reads its
/// stream on a thread. Returns the injection's report, the connection (for the stop byte) and the reader.
pub(crate) fn attach(pid: u32, socket: &std::path::Path) -> Attach {
    attach_recording(pid, socket, &[env::TraceKind::Kernel])
}

/// [`attach`] on a thread of its own, so that the test can drive the program while the attach looks at it.
pub(crate) fn attach_in_background(
    pid: u32,
    socket: &std::path::Path,
) -> std::thread::JoinHandle<Attach> {
    let socket = socket.to_path_buf();
    std::thread::spawn(move || attach(pid, &socket))
}

/// [`attach`], recording `kinds`.
pub(crate) fn attach_recording(
    pid: u32,
    socket: &std::path::Path,
    kinds: &[env::TraceKind],
) -> Attach {
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

/// Tells an attach child to exit (`exit` on its stdin, then its stdin closed) and checks that it exited 0: the
/// program ran on.
pub(crate) fn exit_child(mut stdin: std::process::ChildStdin, child: &mut std::process::Child) {
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
pub(crate) fn attached_child(test: &str, scenario: &str) -> Command {
    attached_child_through(
        Command::new(std::env::current_exe().unwrap()),
        test,
        scenario,
    )
}

/// [`attached_child`], `cmd` running this test binary (directly, or in a container).
pub(crate) fn attached_child_through(mut cmd: Command, test: &str, scenario: &str) -> Command {
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
