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

/// Environment variable naming the one test a child test process runs.
const CHILD_VAR: &str = "GPU_TOOLS_CUDBG_TEST_CHILD";

/// Runs test `name` in a child process of its own (the driver keeps per-process debugger state that one session
/// can leave behind for the next). Returns `true` in that child, where the caller runs the test's body; in the
/// parent it runs the child, forwards its output, asserts that exactly this test ran and passed, and returns
/// `false`.
pub fn isolated(name: &str) -> bool {
    if std::env::var(CHILD_VAR).as_deref() == Ok(name) {
        return true;
    }
    let exe = std::env::current_exe().expect("test binary path");
    let out = Command::new(exe)
        .args([
            name,
            "--exact",
            "--nocapture",
            "--test-threads=1",
            "--include-ignored",
        ])
        .env(CHILD_VAR, name)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("start the child test process");
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "child test {name} failed: {}",
        out.status
    );
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "child ran no test named {name}"
    );
    false
}
