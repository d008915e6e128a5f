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
    where_refuses_untouched(
        &mut child,
        &["is in another network namespace", "nsenter --target"],
    );
}

/// Runs `gpu-tools where` on the sleeper `child` and checks that it was refused at once (exit 1, naming each of
/// `says`) with nothing attached: the sleeper is not traced, and still sleeps. Ends the sleeper.
fn where_refuses_untouched(child: &mut std::process::Child, says: &[&str]) {
    let pid = child.id();
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["where", &pid.to_string()])
        .output()
        .expect("run gpu-tools where");
    let stderr = String::from_utf8_lossy(&out.stderr);
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
    for said in says {
        assert!(stderr.contains(said), "{stderr}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "refused at once"
    );
}

/// `where` refuses a process into which an earlier attach loaded the injection library (so CUPTI ran in it) before
/// the debugger is touched: the driver refuses that attach, and after such a refused attach the next CUPTI session
/// crashed jobs (driver 580).
#[test]
fn a_process_that_ran_cupti_for_an_attach_is_refused_untouched() {
    // A sleeper that maps a library of the injection library's name (a C double, which does nothing when loaded).
    let dir = tempfile::tempdir().expect("temporary folder");
    let lib = dir.path().join("libgpu_tools_inject-0123456789abcdef.so");
    std::fs::copy(gpu_tools_testing::double_path("cupti_activity"), &lib).expect("copy a double");
    let mut child = Command::new("sleep")
        .arg("30")
        .env("LD_PRELOAD", &lib)
        .stdin(Stdio::null())
        .spawn()
        .expect("start a sleeper");
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline
        && !std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .is_ok_and(|m| m.contains("libgpu_tools_inject-"))
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    where_refuses_untouched(
        &mut child,
        &[
            "has run CUPTI for an earlier `gpu-tools trace --pid`",
            "refuses the debugger in any process where CUPTI has",
        ],
    );
}
