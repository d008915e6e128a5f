//! PC sampling in a process whose own profiler used CUPTI's activity API before any PC sampling there: on an H100 such
//! a job's windows counted every sample outside its kernels (0 stall records), so the library refuses it before
//! anything is sampled, by that reason, once a trace's probe has found the program's profiler.

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::time::Duration;

use gpu_tools::trace::StreamReader;
use gpu_tools_injection::control::Control;
use gpu_tools_injection::env;
use gpu_tools_injection::message::Message;
use gpu_tools_injection::profile::ProfileRequest;
use gpu_tools_injection::settings::{Destination, Settings};

use crate::common;
use crate::cycles::cycles_child;
use crate::support::{attach, library, message, scratch};

/// Injects the library into `pid` for a PC sampling window (retrying while the previous attach's thread still
/// runs), and returns the messages of its stream until the library ends it. The tracer's side sends nothing: a
/// refused window ends on its own.
fn pc_sampling_messages(pid: u32, socket: &std::path::Path) -> Vec<Message> {
    let _ = std::fs::remove_file(socket);
    let listener = UnixListener::bind(socket).unwrap();
    let settings = Settings {
        cupti: Some(common::double_path("cupti_activity")),
        profile: Some(ProfileRequest {
            pc_sampling: true,
            ..ProfileRequest::new(Vec::new())
        }),
        ..Settings::new(Destination::Socket(socket.into()))
    }
    .attach_argument()
    .unwrap();
    gpu_tools_testing::inject_until_started(
        pid,
        &library(),
        env::ATTACH_ENTRY,
        &settings,
        Duration::from_secs(30),
        "the PC sampling attach",
    );
    let conn = gpu_tools_testing::accept_within(
        &listener,
        Duration::from_secs(30),
        "the attached library",
    );
    // Nothing is written back: a byte the library has not read when it closes its end after a refusal would make
    // the kernel reset the connection, and this side's next read fail.
    StreamReader::new(conn)
        .filter_map(|item| message(&item.unwrap()))
        .collect()
}

#[test]
fn pc_sampling_after_the_programs_own_profiler_is_refused_by_that_reason() {
    library();
    let (dir, socket) = scratch("pc-after-program");
    let (mut child, mut ask) = cycles_child();
    // The program's own profiler ran a session before any attach: its activity API came first.
    assert_eq!(ask("start", "started "), "0");
    assert_eq!(ask("kernels 1 3", "recorded "), "3");
    assert_eq!(ask("stop", "stopped "), "0");
    // A trace: its probe finds the program's profiler.
    let (done, mut control, reader, _) = attach(child.id(), &socket);
    assert_eq!(done.entry_result, 0, "the window started");
    control.write_all(&[Control::Stop.byte()]).unwrap();
    reader.join().unwrap();
    let messages = pc_sampling_messages(child.id(), &dir.join("pc.sock"));
    let reason = messages
        .iter()
        .find_map(|m| match m {
            Message::ProfileRefused { reason } => Some(reason.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("refused: {messages:?}"));
    assert!(
        reason.contains("activity API in this process before any PC sampling"),
        "{reason}"
    );
    assert!(
        !messages
            .iter()
            .any(|m| matches!(m, Message::ProfileStarted { .. })),
        "nothing sampled: {messages:?}"
    );
    assert_eq!(ask("exit", "bye"), "");
    assert!(child.wait().unwrap().success(), "the program ran on");
    let _ = std::fs::remove_dir_all(dir);
}
