//! Tests that need a process of their own, inside a test binary shared with others: a test that changes the
//! environment, installs the process's logger, registers with a vendor library once per process or loads a
//! library into a process-wide slot (the loader's) runs again in a child process of its test binary, alone.
//!
//! Such a test begins with `if !own_process() { return; }`. In the test binary's own process, [`own_process`]
//! runs the binary again with only this test selected (`--exact`, ignored tests included: the parent chose to run
//! it), waits, and fails unless the child ran exactly this one test and it passed; then it returns `false` and the
//! test returns. In the child it returns `true` and the test's body runs. The child's output is printed in the
//! parent, so that `--nocapture` shows it and a failure carries it.
//!
//! The test's name comes from its thread: libtest names each test's thread after the test (`module::test`).

use std::process::Command;

/// Variable that names the one test a child process runs.
const CHILD: &str = "GPU_TOOLS_OWN_PROCESS_TEST";

/// `true` in the child process that runs the calling test alone; in the test binary's process, runs that child and
/// returns `false` once it passed (panics if it did not).
pub fn own_process() -> bool {
    let thread = std::thread::current();
    let Some(test) = thread.name().filter(|n| *n != "main") else {
        panic!("own_process: the calling thread has no test name (called outside a libtest test)");
    };
    if std::env::var(CHILD).is_ok_and(|t| t == test) {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(&exe)
        .args([
            test,
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, test)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("own_process: cannot run {} for {test}: {e}", exe.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    print!("{stdout}");
    eprint!("{stderr}");
    // With --nocapture the test's own output comes between its name and its `ok`.
    let ran = stdout.contains(&format!("test {test} ... "))
        && stdout.contains("test result: ok. 1 passed; 0 failed");
    assert!(
        out.status.success() && ran,
        "{test} in its own process: {} (the child's output is above)",
        if out.status.success() {
            "the child did not run exactly this test".to_string()
        } else {
            format!("failed ({})", out.status)
        }
    );
    false
}
