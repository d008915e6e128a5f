//! Helpers for the debugger tests: where the debuggee binaries are, one session at a time, event collection.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

use gpu_tools::cudbg::{DebugSession, Event, Queue};

/// The driver serves one debugger client per process: tests that start sessions take this lock.
pub fn one_session() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Path of an example binary: `$GPU_STAGE_BIN/example-<name>` on the GPU host, otherwise
/// `target/<profile>/examples/<name>` next to the test binary.
pub fn example(name: &str) -> PathBuf {
    crate::example(name)
}

/// A command for the debuggee example in `mode`.
pub fn debuggee(args: &[&str]) -> Command {
    let mut c = Command::new(example("debuggee_kernels"));
    c.args(args);
    c
}

/// Runs the session to the debuggee's exit, acknowledging every batch, and returns every event.
pub fn collect_all(session: &mut DebugSession) -> Vec<(Queue, Event)> {
    let mut all = Vec::new();
    while let Some(batch) = session
        .next_batch(Some(std::time::Duration::from_secs(60)))
        .expect("events")
    {
        all.extend(batch.events().iter().copied());
    }
    all
}
