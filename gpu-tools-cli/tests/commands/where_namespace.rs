//! `gpu-tools where` refuses a process in another network namespace before anything is attached: on driver 580
//! the debugger's attach across namespaces never completed and left the job stuck.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn a_process_in_another_network_namespace_is_refused_untouched() {
    // A sleeper in a network namespace of its own (root, or a user namespace, is needed to make one).
    let mut child = match Command::new("unshare")
        .args(["--net", "sleep", "30"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            gpu_tools_testing::skip_unless_ci(&format!("unshare cannot run here: {e}"));
            return;
        }
    };
    // `unshare` execs `sleep` in the new namespace: wait until the process's namespace differs from ours.
    let pid = child.id();
    let ours = std::fs::read_link("/proc/self/ns/net").expect("our network namespace");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut moved = false;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            gpu_tools_testing::skip_unless_ci(&format!(
                "unshare --net is not permitted here ({status})"
            ));
            return;
        }
        if std::fs::read_link(format!("/proc/{pid}/ns/net")).is_ok_and(|n| n != ours) {
            moved = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(moved, "the sleeper reached a network namespace of its own");
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["where", &pid.to_string()])
        .output()
        .expect("run gpu-tools where");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Nothing was attached: the sleeper is not traced, and still sleeps.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    assert!(
        status.lines().any(|l| l.starts_with("TracerPid:\t0")),
        "{status}"
    );
    assert!(
        child.try_wait().is_ok_and(|s| s.is_none()),
        "the sleeper lives"
    );
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("is in another network namespace"),
        "{stderr}"
    );
    assert!(stderr.contains("nsenter --target"), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "refused at once"
    );
}
