//! The debugger API on a machine without an NVIDIA driver: typed errors, no panic; and the thread-safety
//! decisions of the public types.
#![cfg(feature = "cudbg")]

use std::process::Command;

use gpu_tools::cudbg::{BatchTiming, DebugSession, Event, EventBatch, SessionError, api::Api};

fn assert_send<T: Send>() {}
fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn thread_safety_is_decided() {
    // A session may move to another thread; it is not Sync (see the compile_fail doc test on DebugSession).
    assert_send::<DebugSession>();
    assert_send::<EventBatch<'static>>();
    assert_send_sync::<Api>();
    assert_send_sync::<Event>();
    assert_send_sync::<BatchTiming>();
    assert_send_sync::<SessionError>();
}

#[test]
fn without_a_driver_start_is_a_load_error_and_the_claim_is_released() {
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
