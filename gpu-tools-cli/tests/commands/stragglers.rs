//! `gpu-tools stats --report stragglers` and the multi-host export (Chrome and Perfetto) on the committed 8-rank job
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
fn every_report_refuses_a_rank_in_two_files_not_only_stragglers() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("again.gputrace");
    std::fs::copy(fixture(0), &copy).unwrap();
    let copy = copy.display().to_string();
    let first = fixture(0);
    for report in [None, Some("cuda_gpu_kern_sum")] {
        let mut args = vec!["stats"];
        if let Some(r) = report {
            args.extend(["--report", r]);
        }
        args.extend([first.as_str(), copy.as_str()]);
        let out = gpu_tools(&args);
        assert_eq!(out.status.code(), Some(1), "{report:?}");
        assert!(
            out.stdout.is_empty(),
            "{report:?}: nothing counted twice is printed"
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&format!(
                "rank 0 is traced twice: in {first} (stream 0, pid 1000, host h0) and in {copy}"
            )),
            "{report:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Each rank once: read as before.
    let out = gpu_tools(&["stats", &first, &fixture(1)]);
    assert_eq!(out.status.code(), Some(0));
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

/// A protobuf message's fields as (number, value): a varint as `Ok`, a length-delimited field's bytes as `Err`
/// (fixed-size fields skipped). Enough to read the export's track descriptors back.
fn fields(mut b: &[u8]) -> Vec<(u64, Result<u64, &[u8]>)> {
    fn varint(b: &mut &[u8]) -> u64 {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (byte, rest) = b.split_first().expect("a varint");
            *b = rest;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
        }
        v
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = varint(&mut b);
        match key & 7 {
            0 => out.push((key >> 3, Ok(varint(&mut b)))),
            1 => b = &b[8..],
            2 => {
                let n = varint(&mut b) as usize;
                out.push((key >> 3, Err(&b[..n])));
                b = &b[n..];
            }
            5 => b = &b[4..],
            w => panic!("wire type {w}"),
        }
    }
    out
}

/// A track descriptor as written: uuid, name, whether it is a process group, `sibling_order_rank`,
/// `process_ordering`.
#[derive(Debug)]
struct Descriptor {
    uuid: u64,
    name: String,
    process: bool,
    order: Option<i32>,
    process_ordering: Option<u64>,
}

fn descriptors(trace: &[u8]) -> Vec<Descriptor> {
    let mut out = Vec::new();
    for (n, packet) in fields(trace) {
        assert_eq!(n, 1, "Trace.packet");
        let packet = packet.expect_err("a message");
        for (n, d) in fields(packet) {
            let Err(d) = d else { continue };
            if n != 60 {
                continue;
            }
            let mut t = Descriptor {
                uuid: 0,
                name: String::new(),
                process: false,
                order: None,
                process_ordering: None,
            };
            for (f, v) in fields(d) {
                match (f, v) {
                    (1, Ok(v)) => t.uuid = v,
                    (2, Err(s)) => t.name = String::from_utf8(s.to_vec()).unwrap(),
                    (3, Err(_)) => t.process = true,
                    // int32: a negative one sign-extended to 64 bits.
                    (12, Ok(v)) => t.order = Some(i32::try_from(v as i64).expect("an int32")),
                    (19, Ok(v)) => t.process_ordering = Some(v),
                    _ => {}
                }
            }
            out.push(t);
        }
    }
    out
}

#[test]
fn the_perfetto_export_orders_the_groups_by_host_then_rank() {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("job.pftrace");
    let out_path = out_path.display().to_string();
    // The files in no particular order: the groups' order is the hosts' and ranks', not the files'.
    let files: Vec<String> = [3, 0, 2, 1].into_iter().map(fixture).collect();
    let mut args = vec!["export", "--perfetto", out_path.as_str()];
    args.extend(files.iter().map(String::as_str));
    let out = gpu_tools(&args);
    assert_eq!(out.status.code(), Some(0));
    let trace = std::fs::read(&out_path).unwrap();
    let tracks = descriptors(&trace);
    // First, the root track (uuid 0) asking Perfetto to order the process groups by their ranks.
    assert_eq!(tracks[0].uuid, 0);
    assert_eq!(tracks[0].process_ordering, Some(1), "{:?}", tracks[0]);
    let mut groups: Vec<&Descriptor> = tracks.iter().filter(|t| t.process).collect();
    assert!(
        groups.iter().all(|g| g.order.is_some()),
        "every group has its place: {groups:#?}"
    );
    groups.sort_by_key(|g| g.order);
    let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
    let mut expected = Vec::new();
    for host in 0..4 {
        for local in 0..2 {
            let rank = host * 2 + local;
            let pid = 1000 + rank;
            expected.push(format!(
                "h{host} rank {rank} (local {local}): process {pid} python train.py --rank {rank}"
            ));
            expected.push(format!("GPU 0 (h{host} rank {rank}, pid {pid})"));
        }
    }
    assert_eq!(names, expected);
    // Places are distinct: no two groups left to Perfetto's own tie-breaking.
    let mut places: Vec<i32> = groups.iter().filter_map(|g| g.order).collect();
    places.dedup();
    assert_eq!(places.len(), groups.len());
}

#[test]
fn a_merge_without_some_ranks_warns_and_a_rank_twice_is_refused_by_the_export() {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("job.json");
    let out_path = out_path.display().to_string();
    // h2 (ranks 4 and 5) left out.
    let files: Vec<String> = [0, 1, 3].into_iter().map(fixture).collect();
    let mut args = vec!["export", "--chrome", out_path.as_str()];
    args.extend(files.iter().map(String::as_str));
    let out = gpu_tools(&args);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("gpu-tools export: warning: ranks 4-5 of 0-7 have no trace (WORLD_SIZE 8)\n")
    );
    let mut stats = vec!["stats", "--report", "stragglers"];
    stats.extend(files.iter().map(String::as_str));
    let out = gpu_tools(&stats);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("gpu-tools stats: warning: ranks 4-5 of 0-7 have no trace (WORLD_SIZE 8)\n")
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(
        "note: missing: ranks 4-5 of 0-7 have no trace (WORLD_SIZE 8); the report covers the 6 traced"
    ));

    // h0's file twice (under another name): refused before OUT is written.
    let copy = dir.path().join("again.gputrace");
    std::fs::copy(fixture(0), &copy).unwrap();
    let copy = copy.display().to_string();
    let twice_path = dir.path().join("twice.json");
    let twice_path = twice_path.display().to_string();
    let out = gpu_tools(&[
        "export",
        "--chrome",
        &twice_path,
        &fixture(0),
        &fixture(1),
        &copy,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "gpu-tools export: rank 0 is traced twice: in {} (stream 0, pid 1000, host h0) and in {copy}",
            fixture(0)
        )),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!std::path::Path::new(&twice_path).exists());
}
