//! The debugger API on a machine without an NVIDIA driver: typed errors, no panic; and the thread-safety
//! decisions of the public types.
#![cfg(feature = "cudbg")]

use std::process::Command;

use gpu_tools::cudbg::{
    AttachError, AttachStep, BatchTiming, DebugSession, EndWatch, Event, EventBatch, GridInfo,
    NoCudaReason, PtraceHandshake, SessionError, api::Api,
};

/// One session per process: tests that try to start one take turns.
static ONE_SESSION: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn assert_send<T: Send>() {}
fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn thread_safety_is_decided() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    // A session may move to another thread; it is not Sync (see the compile_fail doc test on DebugSession).
    assert_send::<DebugSession>();
    assert_send::<EventBatch<'static>>();
    assert_send_sync::<Api>();
    assert_send_sync::<Event>();
    assert_send_sync::<BatchTiming>();
    assert_send_sync::<SessionError>();
    assert_send_sync::<AttachError>();
    assert_send_sync::<AttachStep>();
    assert_send_sync::<GridInfo>();
    assert_send_sync::<EndWatch>();
    // The attach route is kept by the session, which may move between threads.
    assert_send::<PtraceHandshake>();
}

fn attach_error(pid: u32) -> AttachError {
    match DebugSession::attach(pid) {
        Err(gpu_tools::Error::Session(SessionError::Attach(e))) => e,
        Err(other) => panic!("attach {pid}: expected an attach error, got {other}"),
        Ok(_) => panic!("attach {pid} succeeded"),
    }
}

#[test]
fn attach_refusals_need_no_driver_and_leave_the_process_alone() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _one = ONE_SESSION.lock().unwrap_or_else(|p| p.into_inner());
    assert!(matches!(
        attach_error(std::process::id()),
        AttachError::OwnProcess
    ));
    assert!(matches!(
        attach_error(0x7fff_fff0),
        AttachError::NoSuchProcess(0x7fff_fff0)
    ));
    let mut child = Command::new("sleep").arg("10").spawn().unwrap();
    let e = attach_error(child.id());
    assert!(
        matches!(e, AttachError::OwnChild(p) if p == child.id()),
        "{e}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    // A process that is not this one's child and maps no libcuda.
    let mut shell = Command::new("sh")
        .args(["-c", "sleep 2 & echo $!; wait $!"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(shell.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    let pid: u32 = line.trim().parse().unwrap();
    let e = attach_error(pid);
    assert!(
        matches!(
            e,
            AttachError::NoCuda {
                why: NoCudaReason::LibcudaNotMapped,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        format!("process {pid} does not use CUDA: it does not load libcuda.so.1")
    );
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.contains("TracerPid:\t0"), "{status}");
    // It runs on to its normal end.
    assert_eq!(shell.wait().unwrap().code(), Some(0));
    // Refusals release the one-session claim.
    assert!(matches!(
        attach_error(0x7fff_fff0),
        AttachError::NoSuchProcess(_)
    ));
}

#[test]
fn without_a_driver_start_is_a_load_error_and_the_claim_is_released() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _one = ONE_SESSION.lock().unwrap_or_else(|p| p.into_inner());
    if gpu_tools::cudbg::DebuggerLibrary::load().is_ok() {
        eprintln!("a CUDA driver is installed here; this test is for machines without one");
        return;
    }
    for _ in 0..2 {
        // The second attempt proves the one-session claim was released by the first failure.
        let err = DebugSession::start(Command::new("true")).unwrap_err();
        match err {
            gpu_tools::Error::Load(e) => assert!(!e.attempts().is_empty(), "{e}"),
            other => panic!("expected a load error, got {other}"),
        }
    }
}
