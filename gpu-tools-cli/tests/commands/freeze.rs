//! `gpu-tools freeze` end to end against the driver double with the process-checkpoint calls: the target is a
//! sleeping child that the double knows (through `GPU_TOOLS_DBL_PROCS`), so the command's whole path runs here
//! (NVML is absent, which the command reports and goes on).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use gpu_tools_testing::process;

use super::sleepers::Mapping;

fn gpu_tools() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
}

fn freeze(target: u32, args: &[&str]) -> Command {
    let mut c = gpu_tools();
    c.arg("freeze")
        .arg(target.to_string())
        .args(args)
        .env(
            "GPU_TOOLS_CUDA_DRIVER_LIB",
            gpu_tools_testing::double_path("cuda_driver_checkpointing"),
        )
        .env("GPU_TOOLS_DBL_PROCS", format!("{target}:0:1073741824"))
        .stdin(Stdio::null());
    c
}

#[test]
fn freezes_for_the_given_time_and_writes_json() {
    let t = process::Target::sleeper();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("freeze.json");
    let out = freeze(
        t.pid(),
        &["--seconds", "0", "--json", json.to_str().unwrap()],
    )
    .output()
    .expect("run gpu-tools freeze");
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
        .expect("start gpu-tools freeze");
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
    let usage = gpu_tools().args(["freeze", "not-a-pid"]).output().unwrap();
    assert_eq!(usage.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&usage.stderr).contains("invalid value"));
    // A process that does not exist: the same words as every subcommand, before the driver is asked.
    let gone = process::vanished_pid();
    let out = freeze(gone, &["--seconds", "0"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr, format!("gpu-tools freeze: no process {gone}\n"));
    // A live process the driver does not know (unknown to the double, as a process without CUDA is to the
    // driver): the driver's refusal, named.
    let t = process::Target::sleeper();
    let out = freeze(t.pid(), &["--seconds", "0"])
        .env("GPU_TOOLS_DBL_PROCS", "")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("CUDA_ERROR_OPERATING_SYSTEM (304)"),
        "{stderr}"
    );
}

#[test]
fn an_unwritable_report_fails_before_the_process_is_touched() {
    let t = process::Target::sleeper();
    for path in ["/nonexistent-dir/freeze.json", "/"] {
        let out = freeze(t.pid(), &["--seconds", "0", "--json", path])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.starts_with(&format!(
                "gpu-tools freeze: cannot write the report {path}: "
            )),
            "{stderr}"
        );
        assert!(stdout.is_empty(), "nothing was done: {stdout}");
    }
}

#[test]
fn a_failed_freeze_writes_no_report() {
    let t = process::Target::sleeper();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("freeze.json");
    // Unknown to the double: the lock is refused.
    let out = freeze(
        t.pid(),
        &["--seconds", "0", "--json", json.to_str().unwrap()],
    )
    .env("GPU_TOOLS_DBL_PROCS", "")
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing left"
    );
}

/// `--json -`: the report is standard output, whole and alone (valid JSON); the steps go to stderr.
#[test]
fn a_dash_writes_the_report_alone_to_standard_output() {
    let t = process::Target::sleeper();
    let out = freeze(t.pid(), &["--seconds", "0", "--json", "-"])
        .output()
        .expect("run gpu-tools freeze");
    let stderr = String::from_utf8_lossy(&out.stderr);
    print!("{stderr}");
    assert!(out.status.success(), "{}", out.status);
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("standard output is the JSON report alone");
    assert_eq!(report["pid"], t.pid());
    assert!(
        stderr.lines().any(|l| l.starts_with("checkpointed")),
        "{stderr}"
    );
}

/// A process into which an attach loaded the injection library has run CUPTI, and the driver refuses its checkpoint
/// lock for the rest of its life: refused before anything is touched (the driver is not even asked its state, and
/// no report is begun), with the reason and what to do instead.
#[test]
fn a_process_that_ran_cupti_for_an_attach_is_refused_before_anything_is_touched() {
    let target = Mapping::start(&["libgpu_tools_inject-0123456789abcdef.so"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("freeze.json");
    let out = freeze(
        target.pid(),
        &["--seconds", "0", "--json", json.to_str().unwrap()],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for says in [
        format!(
            "gpu-tools freeze: process {} has run CUPTI for an earlier `gpu-tools trace --pid` or `profile --pid`",
            target.pid()
        ),
        "the CUDA driver refuses the checkpoint lock (cuCheckpointProcessLock) in a process where CUPTI has run, \
         for the rest of its life"
            .into(),
        "CUDA_ERROR_NOT_SUPPORTED".into(),
        "Nothing was touched".into(),
        "freeze a fresh run of the job before any trace or profile of it".into(),
    ] {
        assert!(stderr.contains(&says), "{says:?} in {stderr}");
    }
    assert!(
        out.stdout.is_empty(),
        "the driver was not asked: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no report begun"
    );
    target.assert_untouched();
}

/// Where the driver refuses the lock as not supported anyway (CUPTI run by the program's own profiler: the double's
/// kind 5), the error names that likely cause.
#[test]
fn a_lock_the_driver_does_not_support_names_cupti_as_the_likely_cause() {
    let t = process::Target::sleeper();
    let out = freeze(t.pid(), &["--seconds", "0"])
        .env("GPU_TOOLS_DBL_PROCS", format!("{}:5:1073741824", t.pid()))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cuCheckpointProcessLock failed for process {}: CUDA_ERROR_NOT_SUPPORTED (801)",
            t.pid()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("most likely the program's own profiler (torch.profiler, Kineto) or another CUPTI tool ran in it"),
        "{stderr}"
    );
    assert!(stderr.contains("Nothing was locked"), "{stderr}");
    assert!(!stdout.lines().any(|l| l.starts_with("locked")), "{stdout}");
    // Another refusal of the lock keeps its own words.
    let busy = freeze(t.pid(), &["--seconds", "0", "--timeout-ms", "1"])
        .env("GPU_TOOLS_DBL_PROCS", format!("{}:2:1073741824", t.pid()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&busy.stderr);
    assert_eq!(busy.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("CUPTI"), "{stderr}");
}
