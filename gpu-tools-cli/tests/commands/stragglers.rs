//! `gpu-tools stats --report stragglers` and the multi-host export on the committed 8-rank job
//! (`tests/fixtures/traces/job-8rank/`: 4 hosts, rank 5 on h2 1.8 times slower, the hosts' wall clocks hundreds of
//! microseconds apart): the straggler named with its host, JSON, a rank traced twice refused (exit 1), and the
//! export's hosts moved on their collectives.

use std::path::PathBuf;
use std::process::{Command, Output};

fn gpu_tools(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(args)
        .output()
        .expect("run gpu-tools");
    println!(
        "{args:?}: {}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn fixture(host: u32) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!(
            "../tests/fixtures/traces/job-8rank/h{host}.gputrace"
        ))
        .display()
        .to_string()
}

#[test]
fn stats_names_the_straggler_of_the_committed_job() {
    let files: Vec<String> = (0..4).map(fixture).collect();
    let mut args = vec!["stats", "--report", "stragglers"];
    args.extend(files.iter().map(String::as_str));
    let out = gpu_tools(&args);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(
        "note: rank 5 on h2 enters collectives last (100% of them): its steps take 1.7× the median rank's device \
         time outside collectives (7.6 ms against 4.4 ms); the other 7 ranks wait for it in \
         ncclDevKernel_AllReduce_Sum_f32_RING_LL, 62% of their time"
    ));
    assert!(text.contains(
        "note: host h1 moved by -412.4 µs on its collectives, beyond the clock anchors' -731.0 s; collective ends \
         agree within 672 ns (90th percentile of 120 collectives)"
    ));
    // Only the report asked for.
    assert!(!text.contains("cuda_gpu_kern_sum"));

    args.extend(["--format", "json"]);
    let out = gpu_tools(&args);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let rows = json[0]["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 8);
    assert_eq!(rows[5]["Rank"], 5);
    assert_eq!(rows[5]["Host"], "h2");
    assert_eq!(rows[5]["Last In (%)"], 100.0);
}

#[test]
fn a_rank_in_two_files_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("again.gputrace");
    std::fs::copy(fixture(0), &copy).unwrap();
    let copy = copy.display().to_string();
    let first = fixture(0);
    let out = gpu_tools(&[
        "stats",
        "--report",
        "stragglers",
        &first,
        &fixture(1),
        &copy,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        format!(
            "gpu-tools stats: rank 0 is traced twice: in {first} (stream 0, pid 1000, host h0) and in {copy} (stream \
             0, pid 1000, host h0); its time would count twice (give each rank's trace once)"
        )
    );
}

#[test]
fn export_moves_the_hosts_on_their_collectives_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("job.json");
    let out_path = out_path.display().to_string();
    let files: Vec<String> = (0..4).map(fixture).collect();
    let mut args = vec!["export", "--chrome", out_path.as_str()];
    args.extend(files.iter().map(String::as_str));
    let out = gpu_tools(&args);
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(
        "gpu-tools export: host h2 moved by +187.6 µs on its collectives, beyond the clock anchors' -1462.0 s"
    ));
    let chrome = std::fs::read_to_string(&out_path).unwrap();
    assert!(chrome.contains("h2 rank 5 (local 1): process 1005 python train.py --rank 5"));
}
