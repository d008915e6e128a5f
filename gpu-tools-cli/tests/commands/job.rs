//! `trace --job`, `where --job` and `--start-at` end to end: a job with no process here, a job whose only process
//! does not use CUDA (a launcher), a start time in the past, and a rank in an output name that none is known for.
//! (The whole path, through a real Slurm with several hosts, is `.ci/slurm`.)

use std::process::{Command, Output};

use gpu_tools_testing::process::Target;

fn gpu_tools(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(args)
        // The driver check passes (the double), so that what is said comes from the selection.
        .env(
            "GPU_TOOLS_CUDA_DRIVER_LIB",
            gpu_tools_testing::double_path("cuda_driver"),
        )
        .env_remove("RANK")
        .env_remove("SLURM_PROCID")
        .env_remove("OMPI_COMM_WORLD_RANK")
        .env_remove("PMI_RANK")
        .output()
        .expect("run gpu-tools");
    println!(
        "gpu-tools {}: {}\n--- stdout\n{}--- stderr\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A job id no process of this machine has: above any real one, and this test's own.
fn unused_job() -> String {
    format!("9{:08}", std::process::id())
}

#[test]
fn a_job_with_no_process_here_exits_1_naming_the_job() {
    for command in [
        &["trace", "--job", "slurm:999999", "--duration", "1"][..],
        &["where", "--job", "slurm:999999"],
        &["trace", "--job", "torchrun:no-such-run"],
        &["where", "--job", "k8s:0f3c2a1e-8b7d-4e5f-9a6b-c7d8e9f01234"],
    ] {
        let out = gpu_tools(command);
        assert_eq!(out.status.code(), Some(1), "{command:?}");
        let said = stderr(&out);
        let job = command[2]
            .replace("slurm:", "slurm job ")
            .replace("torchrun:", "torchrun run ")
            .replace("k8s:", "Kubernetes pod ");
        assert!(
            said.contains(&format!("no process of {job} on this host")),
            "{command:?}: {said}"
        );
    }
}

#[test]
fn a_job_of_launchers_only_names_what_was_skipped() {
    let job = unused_job();
    // The job's only process here: a shell, which uses no CUDA (as srun or a Python launcher would).
    let launcher = Target::spawn(
        Command::new("sh")
            .args(["-c", "exec sleep 60"])
            .env("SLURM_JOB_ID", &job)
            .env("SLURM_PROCID", "5"),
    );
    // /proc shows the exec'd sleep once the shell has run it.
    let execd = || {
        std::fs::read(format!("/proc/{}/cmdline", launcher.pid()))
            .is_ok_and(|c| c.starts_with(b"sleep"))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !execd() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(execd(), "the shell ran sleep within 30 s");
    for command in ["trace", "where"] {
        let out = gpu_tools(&[command, "--job", &format!("slurm:{job}")]);
        assert_eq!(out.status.code(), Some(1), "{command}");
        let said = stderr(&out);
        assert!(
            said.contains(&format!(
                "no process of slurm job {job} on this host uses CUDA (yet): skipped 1 that do not"
            )),
            "{command}: {said}"
        );
        assert!(
            said.contains(&format!("{} (rank 5: sleep 60)", launcher.pid())),
            "the launcher is named with its rank and command: {said}"
        );
    }
    // By command line too; this test and the tool itself are never selected.
    let out = gpu_tools(&["trace", "--job", "cmd:^sleep 60$", "--duration", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!("{} (rank 5: sleep 60)", launcher.pid())),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_start_time_in_the_past_is_refused_before_anything_else() {
    // A process that does not exist, and a job with none: the time is said first, as past, exit 2.
    for command in [
        &[
            "trace",
            "--pid",
            "2147483646",
            "--start-at",
            "2001-02-03T04:05:06Z",
        ][..],
        &[
            "trace",
            "--job",
            "slurm:999999",
            "--start-at",
            "2001-02-03T04:05:06Z",
        ],
        &[
            "where",
            "--job",
            "slurm:999999",
            "--start-at",
            "2001-02-03T06:05:06+02:00",
        ],
        &["where", "2147483646", "--start-at", "2001-02-03T04:05:06Z"],
    ] {
        let out = gpu_tools(command);
        assert_eq!(out.status.code(), Some(2), "{command:?}");
        let said = stderr(&out);
        assert!(
            said.contains(&format!("{} is in the past", command[command.len() - 1])),
            "{command:?}: {said}"
        );
        assert!(!said.contains("no process"), "{command:?}: {said}");
    }
    // Not a time at all, and a time for a launched program (which has no window to start).
    let out = gpu_tools(&["trace", "--pid", "1", "--start-at", "soon"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("not an RFC 3339 time"),
        "{}",
        stderr(&out)
    );
    let out = gpu_tools(&["trace", "--start-at", "+5", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--start-at applies only with --pid, --pid-tree or --job"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_rank_in_the_output_name_needs_a_rank() {
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("run-%h-%r.gputrace");
    let out = gpu_tools(&[
        "trace",
        "--backend",
        "cupti",
        "-o",
        template.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("%r stands for the rank, and this process has no rank variable"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no file written"
    );
}

#[test]
fn the_trace_waits_for_its_start_and_leaves_out_what_ended_meanwhile() {
    let cache = tempfile::tempdir().unwrap();
    let mut target = Target::sleeper();
    let pid = target.pid().to_string();
    let started = std::time::Instant::now();
    let tracer = std::thread::spawn(move || {
        Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
            .args([
                "trace",
                "--pid",
                &pid,
                "--start-at",
                "+1.5",
                "--duration",
                "1",
            ])
            .env(
                "GPU_TOOLS_CUDA_DRIVER_LIB",
                gpu_tools_testing::double_path("cuda_driver"),
            )
            .env("XDG_CACHE_HOME", cache.path())
            .env_remove("GPU_TOOLS_INJECT_LIB")
            .output()
            .expect("run gpu-tools")
    });
    // The process ends while the tracer waits for its start.
    std::thread::sleep(std::time::Duration::from_millis(500));
    target.kill();
    let out = tracer.join().unwrap();
    let waited = started.elapsed();
    let said = stderr(&out);
    println!("{said}");
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!(
            "process {} ended before --start-at +1.5: not traced",
            target.pid()
        )),
        "{said}"
    );
    assert!(
        said.contains("every process selected ended before --start-at +1.5: nothing was attached"),
        "{said}"
    );
    assert!(
        waited >= std::time::Duration::from_millis(1400),
        "the tracer waited for its start: {waited:?}"
    );
}
