//! The `cuda_freeze` example end to end against the driver double with the process-checkpoint calls: the target
//! is a sleeping child that the double knows (through `GPU_TOOLS_DBL_PROCS`), so the example's whole path runs
//! here (NVML is absent, which the example reports and goes on). Needs the examples built: `cargo test` builds
//! them; run `cargo build --examples` first when running this test alone.

#[path = "common/checkpoint.rs"]
mod checkpoint_common;
#[path = "common/cudbg.rs"]
mod cudbg_common;
#[path = "common/process.rs"]
mod process;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn freeze(target: u32, args: &[&str]) -> Command {
    let mut c = Command::new(cudbg_common::example("cuda_freeze"));
    c.arg(target.to_string())
        .args(args)
        .env(
            "GPU_TOOLS_CUDA_DRIVER_LIB",
            checkpoint_common::double_path("cuda_driver_checkpointing"),
        )
        .env("GPU_TOOLS_DBL_PROCS", format!("{target}:0:1073741824"))
        .stdin(Stdio::null());
    c
}

#[test]
fn freezes_for_the_given_time_and_writes_json() {
    let t = process::Target::sleeper();
    let json = std::env::temp_dir().join(format!("cuda_freeze_{}.json", t.pid()));
    let out = freeze(
        t.pid(),
        &["--seconds", "0", "--json", json.to_str().unwrap()],
    )
    .output()
    .expect("run cuda_freeze");
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{}", out.status);
    for line in [
        "locked",
        "checkpointed",
        "restored",
        "unlocked",
        "time is up: restoring",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(line)),
            "no {line:?} line"
        );
    }
    assert!(
        stdout.contains(&format!("process {}: running", t.pid())),
        "{stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    assert_eq!(report["pid"], t.pid());
    assert_eq!(
        report["states"],
        serde_json::json!(["running", "locked", "checkpointed", "locked", "running"])
    );
}

#[test]
fn sigterm_while_frozen_restores_before_exiting() {
    let t = process::Target::sleeper();
    let mut child = freeze(t.pid(), &[])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start cuda_freeze");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        seen.push(line.clone());
        if line.starts_with("frozen") {
            break;
        }
    }
    assert!(
        seen.last().is_some_and(|l| l.starts_with("frozen")),
        "{seen:?}"
    );
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    seen.extend(lines.map(|l| l.unwrap()));
    let status = child.wait().unwrap();
    println!("{}", seen.join("\n"));
    assert!(status.success(), "{status}");
    assert!(
        seen.iter().any(|l| l == "signal received: restoring"),
        "{seen:?}"
    );
    assert!(seen.iter().any(|l| l.starts_with("unlocked")), "{seen:?}");
}

#[test]
fn bad_arguments_exit_2_and_bad_pids_exit_1_with_the_reason() {
    let usage = Command::new(cudbg_common::example("cuda_freeze"))
        .arg("not-a-pid")
        .output()
        .unwrap();
    assert_eq!(usage.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&usage.stderr).contains("invalid value"));
    let gone = process::vanished_pid();
    // Unknown to the double, as a pid that does not exist is to the driver.
    let out = freeze(gone, &["--seconds", "0"])
        .env("GPU_TOOLS_DBL_PROCS", "")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("no process {gone}")), "{stderr}");
    assert!(
        stderr.contains("CUDA_ERROR_OPERATING_SYSTEM (304)"),
        "{stderr}"
    );
}
