//! The job-wide report (`stragglers`) and the alignment on collectives, on synthetic multi-host jobs
//! (`gpu_tools_testing::job`), the committed 8-rank fixture (`tests/fixtures/traces/job-8rank/`) and the real
//! 2-rank DDP recording.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;

use gpu_tools_testing::job::{ALLREDUCE_NAME, JobSpec};
use gpu_tools_testing::records::{kernel, stream_of_host};
use gpu_tools_trace::export::{Slice, Timeline, TimelineSink, Track};
use gpu_tools_trace::report::{Analysis, Cell, Job, STRAGGLERS, Table, collective_name};

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/traces/job-8rank")
}

/// The committed fixture's files, h0 to h3.
fn fixture_files() -> Vec<Vec<u8>> {
    (0..4)
        .map(|h| {
            let path = fixture_dir().join(format!("h{h}.gputrace"));
            std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .collect()
}

fn generated(spec: &JobSpec) -> Vec<Vec<u8>> {
    (0..spec.hosts).map(|h| spec.host_file(h)).collect()
}

fn stragglers(files: &[Vec<u8>]) -> Table {
    let mut a = Analysis::for_reports(&[STRAGGLERS]);
    for (i, f) in files.iter().enumerate() {
        let errors = a.read(i as u32, &f[..]);
        assert!(errors.is_empty(), "{errors:?}");
    }
    a.report(STRAGGLERS).expect("collected")
}

fn job(files: &[Vec<u8>]) -> Job {
    let mut j = Job::new();
    for (i, f) in files.iter().enumerate() {
        assert!(j.read(i as u32, &f[..]).is_empty());
    }
    j
}

fn column(t: &Table, name: &str) -> usize {
    t.columns
        .iter()
        .position(|c| *c == name)
        .unwrap_or_else(|| panic!("no column {name}"))
}

fn int(c: &Cell) -> u64 {
    match c {
        Cell::Int(v) => *v,
        other => panic!("not an integer: {other:?}"),
    }
}

fn float(c: &Cell) -> f64 {
    match c {
        Cell::Float(v) => *v,
        other => panic!("not a number: {other:?}"),
    }
}

fn has_note(t: &Table, note: &str) -> bool {
    t.notes.iter().any(|n| n == note)
}

#[test]
fn the_committed_fixture_is_what_the_generator_writes() {
    let spec = JobSpec::fixture();
    for (h, committed) in fixture_files().iter().enumerate() {
        assert!(
            *committed == spec.host_file(h as u32),
            "h{h}.gputrace differs from JobSpec::fixture(): regenerate it with `cargo run -p xtask -- job-trace \
             tests/fixtures/traces/job-8rank` and review why"
        );
    }
}

#[test]
fn the_straggler_of_the_committed_fixture_is_named_with_its_host() {
    let t = stragglers(&fixture_files());
    assert_eq!(
        t.notes[0],
        format!(
            "rank 5 on h2 enters collectives last (100% of them): its steps take 1.7× the median rank's device time \
             outside collectives (7.6 ms against 4.4 ms); the other 7 ranks wait for it in {ALLREDUCE_NAME}, 62% of \
             their time"
        ),
        "{:#?}",
        t.notes
    );
    assert!(has_note(
        &t,
        "steps: no NVTX range repeats on every rank; a step is the pattern of 2 collectives that repeats, from one \
         to the next at the same place in it"
    ));
    assert!(has_note(
        &t,
        "ranks: the processes' RANK variables (or OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID)"
    ));
    // A row per rank, in rank order, with its host; rank 5 last into every collective, the others never.
    let (rank, host, last, steps, wait) = (
        column(&t, "Rank"),
        column(&t, "Host"),
        column(&t, "Last In (%)"),
        column(&t, "Steps"),
        column(&t, "Wait (%)"),
    );
    let ranks: Vec<(u64, String)> = t
        .rows
        .iter()
        .map(|r| {
            let Cell::Text(h) = &r[host] else { panic!() };
            (int(&r[rank]), h.clone())
        })
        .collect();
    let want: Vec<(u64, String)> = (0..8).map(|r| (r, format!("h{}", r / 2))).collect();
    assert_eq!(ranks, want);
    for row in &t.rows {
        let slow = int(&row[rank]) == 5;
        assert_eq!(float(&row[last]), if slow { 100.0 } else { 0.0 });
        assert_eq!(float(&row[wait]) == 0.0, slow);
        // 30 steps of 2 collectives: 29 from one first collective to the next.
        assert_eq!(int(&row[steps]), 29);
    }
}

#[test]
fn hosts_are_moved_by_their_wall_clock_error_within_the_end_jitter() {
    let spec = JobSpec::fixture();
    let alignment = job(&fixture_files()).collective_alignment();
    let hosts: Vec<&str> = alignment.hosts.iter().map(|h| h.host.as_str()).collect();
    assert_eq!(hosts, ["h0", "h1", "h2", "h3"]);
    for (h, a) in alignment.hosts.iter().enumerate() {
        // What the anchors leave is the wall clocks' disagreement: the collectives take it back.
        let error = JobSpec::wall_error(h as u32) - JobSpec::wall_error(0);
        assert!(
            (a.correction + error).abs() <= 1_500,
            "{}: moved {} ns, its wall clock is {error} ns off",
            a.host,
            a.correction
        );
        assert_eq!(
            a.collectives,
            u64::from(spec.steps * spec.buckets * spec.ranks_per_host)
        );
        assert!(a.residual <= 1_500, "{a:?}");
    }
    assert_eq!(alignment.hosts[0].correction, 0);
    assert_eq!(
        alignment.notes[2],
        "host h2 moved by +187.6 µs on its collectives, beyond the clock anchors' -1462.0 s; collective ends agree \
         within 615 ns (90th percentile of 120 collectives)"
    );
}

#[test]
fn nvtx_ranges_give_the_steps_where_every_rank_has_them() {
    let spec = JobSpec {
        nvtx: true,
        ..JobSpec::fixture()
    };
    let t = stragglers(&generated(&spec));
    assert!(has_note(
        &t,
        "steps: the NVTX range \"train_step\", each from its start to the next one's"
    ));
    let steps = column(&t, "Steps");
    assert!(t.rows.iter().all(|r| int(&r[steps]) == 30));
    assert!(t.notes[0].starts_with("rank 5 on h2 enters collectives last (100% of them)"));
}

#[test]
fn a_missing_rank_is_named() {
    let files = fixture_files();
    // h2 (ranks 4 and 5) not given.
    let t = stragglers(&[files[0].clone(), files[1].clone(), files[3].clone()]);
    assert!(
        has_note(
            &t,
            "missing: ranks 4-5 of 0-7 have no trace (WORLD_SIZE 8); the report covers the 6 traced"
        ),
        "{:#?}",
        t.notes
    );
    // Without the straggler, nobody enters last in most collectives by much: whoever does is not named as one.
    assert!(!t.notes[0].contains("rank 5"));
}

#[test]
fn a_rank_traced_twice_is_refused() {
    let files = fixture_files();
    let j = job(&[files[0].clone(), files[1].clone(), files[0].clone()]);
    let e = j.check().expect_err("rank 0 twice");
    assert_eq!(e.rank, 0);
    assert_eq!((e.first.0, e.second.0), ((0, 0), (2, 0)));
    let t = stragglers(&[files[0].clone(), files[0].clone()]);
    assert!(t.rows.is_empty());
    assert_eq!(
        t.notes,
        [
            "no report: rank 0 is traced twice: file 0 stream 0 (pid 1000, host h0) and file 1 stream 0 (pid 1000, \
          host h0)"
        ]
    );
}

const MS: u64 = 1_000_000;

fn allreduce(start: u64, end: u64, correlation: u32) -> gpu_tools_trace::Record {
    kernel(
        "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE",
        start,
        end,
        correlation,
    )
}

#[test]
fn windows_that_do_not_overlap_are_said_per_host() {
    // Both anchors read monotonic 0 at one wall-clock instant: host b's work lies 20 s after host a's.
    let a = stream_of_host(1, "a", 0, &[kernel("k", 1_000 * MS, 2_000 * MS, 1)]);
    let b = stream_of_host(2, "b", 0, &[kernel("k", 20_000 * MS, 21_000 * MS, 1)]);
    let t = stragglers(&[a, b]);
    assert!(has_note(
        &t,
        "host a's window (+0.000 s to +1.000 s) does not overlap host b's (+19.000 s to +20.000 s): their ranks \
         were not traced at the same time, and what they wait for cannot be compared"
    ));
    assert!(has_note(
        &t,
        "host b's window (+19.000 s to +20.000 s) does not overlap host a's (+0.000 s to +1.000 s): their ranks \
         were not traced at the same time, and what they wait for cannot be compared"
    ));
    assert!(has_note(
        &t,
        "ranks: numbered in the order of the files and streams given (the processes have no rank variable)"
    ));
    assert!(has_note(
        &t,
        "no NCCL collective kernels in the trace: hosts aligned on clock anchors only"
    ));
    assert_eq!(
        t.notes[0],
        "no NCCL collective kernels in the trace: no rank can be seen waiting for another"
    );
}

#[test]
fn collective_counts_that_disagree_are_said_and_matched_by_their_ends() {
    // Host a: ten AllReduce every 10 ms; host b: the last eight of them (its window started later), 300 µs apart
    // on the anchors.
    let ends = |n: u64| n * 10 * MS + 5 * MS;
    let a: Vec<_> = (0..10)
        .map(|n| allreduce(ends(n) - MS, ends(n), n as u32))
        .collect();
    let b: Vec<_> = (2..10)
        .map(|n| allreduce(ends(n) - 2 * MS + 300_000, ends(n) + 300_000, n as u32))
        .collect();
    let files = [stream_of_host(1, "a", 0, &a), stream_of_host(2, "b", 0, &b)];
    let j = job(&files);
    let alignment = j.collective_alignment();
    assert_eq!(alignment.hosts[1].correction, -300_000);
    assert_eq!(alignment.hosts[1].collectives, 8);
    assert!(
        alignment.notes.iter().any(|n| n
            == &format!(
                "the ranks ran different numbers of {ALLREDUCE_NAME}: 10 on 1 rank, 8 on rank 1; matched by their \
                 ends, those without a partner on another rank count for nothing"
            )),
        "{:#?}",
        alignment.notes
    );
    let t = stragglers(&files);
    // Rank 0 (host a) enters each shared collective 1 ms after rank 1: the others wait for it.
    assert!(
        t.notes[0].starts_with("rank 0 on a enters collectives last (100% of them)"),
        "{:#?}",
        t.notes
    );
}

#[test]
fn collective_names_are_read_plain_with_a_signature_or_mangled() {
    for (recorded, name) in [
        (
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            Some("ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
        ),
        (
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
            Some("ncclKernel_AllReduce_RING_LL_Sum_float"),
        ),
        (
            "_Z31ncclDevKernel_Broadcast_RING_LL24ncclDevKernelArgsStorageILm4096EE",
            Some("ncclDevKernel_Broadcast_RING_LL"),
        ),
        ("_Z99ncclDevKernel_cut", None),
        ("void gemm_kernel<float>(float*)", None),
        ("_Z4gemmPf", None),
    ] {
        assert_eq!(collective_name(recorded), name, "{recorded}");
    }
}

#[test]
fn the_real_ddp_recording_has_two_ranks_on_one_host_and_their_steps() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/traces/ddp_2rank.gputrace");
    let t = stragglers(&[std::fs::read(path).expect("fixture")]);
    let (rank, host, collectives, steps) = (
        column(&t, "Rank"),
        column(&t, "Host"),
        column(&t, "Collectives"),
        column(&t, "Steps"),
    );
    let rows: Vec<(u64, &Cell, u64)> = t
        .rows
        .iter()
        .map(|r| (int(&r[rank]), &r[host], int(&r[collectives])))
        .collect();
    // 200 AllReduce, 4 Broadcast and one AllGather per rank (the kernel summary's counts, halved); the launcher
    // ran no device work and is no rank.
    let vm = Cell::Text("vm".into());
    assert_eq!(rows, [(0, &vm, 205), (1, &vm, 205)]);
    // NCCL's own NVTX ranges are not steps: the AllReduce pattern is, one a step.
    assert!(
        has_note(
            &t,
            "steps: no NVTX range repeats on every rank; a step is the pattern of 1 collective that repeats, from \
             one to the next at the same place in it"
        ),
        "{t:#?}"
    );
    assert!(t.rows.iter().all(|r| int(&r[steps]) >= 199), "{:?}", t.rows);
    // The ranks take turns entering last, with the same work: nobody is named a straggler.
    assert!(
        t.notes[0].starts_with(
            "no straggler by its work: rank 1 on vm enters collectives last most often"
        ),
        "{}",
        t.notes[0]
    );
}

/// Tracks and the collective slices of an export.
#[derive(Default)]
struct Collect {
    groups: Vec<String>,
    /// Collective slice ends by group.
    ends: BTreeMap<u64, Vec<u64>>,
    parents: BTreeMap<u64, u64>,
}

impl TimelineSink for Collect {
    fn track(&mut self, track: &Track) -> io::Result<()> {
        if let Some(p) = &track.process {
            self.groups.push(p.name.clone());
        }
        if let Some(parent) = track.parent {
            self.parents.insert(track.id, parent);
        }
        Ok(())
    }

    fn slice(&mut self, slice: &Slice<'_>) -> io::Result<()> {
        if collective_name(slice.name).is_some() {
            let group = self.parents.get(&slice.track).copied().unwrap_or(0);
            self.ends.entry(group).or_default().push(slice.end);
        }
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn export(files: &[Vec<u8>], corrected: bool) -> Collect {
    let mut timeline = Timeline::new(Collect::default());
    if corrected {
        for h in job(files).collective_alignment().hosts {
            timeline.correct(&h.host, &h.boot_id, h.correction);
        }
    }
    for (i, f) in files.iter().enumerate() {
        assert!(timeline.read(i as u32, &f[..]).expect("sink").is_empty());
    }
    timeline.finish().expect("sink")
}

/// The largest spread of the first collective's end over the groups.
fn first_end_spread(c: &Collect) -> u64 {
    let firsts: Vec<u64> = c
        .ends
        .values()
        .map(|v| *v.iter().min().expect("one"))
        .collect();
    firsts.iter().max().unwrap() - firsts.iter().min().unwrap()
}

#[test]
fn the_export_has_a_group_per_host_and_rank_on_the_collectives_clock() {
    let files = fixture_files();
    let anchors = export(&files, false);
    let aligned = export(&files, true);
    assert_eq!(aligned.ends.len(), 8, "a GPU group per rank");
    // On the anchors alone the hosts' collectives end up to 600 µs apart (h1 +412.3 µs, h2 -187.6 µs); on the
    // collectives within the end jitter.
    assert!(
        first_end_spread(&anchors) > 590_000,
        "{}",
        first_end_spread(&anchors)
    );
    assert!(
        first_end_spread(&aligned) <= 1_500,
        "{}",
        first_end_spread(&aligned)
    );
    assert!(
        aligned
            .groups
            .contains(&"h2 rank 5 (local 1): process 1005 python train.py --rank 5".to_string()),
        "{:#?}",
        aligned.groups
    );
    assert!(
        aligned
            .groups
            .contains(&"GPU 0 (h2 rank 5, pid 1005)".to_string())
    );
}

/// A stream of `host` whose process has rank `rank` (its `RANK`), with one launch.
fn ranked_stream(pid: u32, host: &str, rank: u32) -> Vec<u8> {
    use gpu_tools_trace::{Encoder, ProcessInfo, Record, StreamHeader, TimestampClock};
    let mut e = Encoder::new(&StreamHeader::new(pid, 0, TimestampClock::Monotonic));
    e.push(&Record::ProcessInfo(ProcessInfo {
        host: host.into(),
        boot_id: format!("boot-{host}"),
        labels: vec![("RANK".into(), rank.to_string())],
    }));
    // A call (its host thread's track is in the process's group) and the kernel it launched (its GPU's group).
    e.push(&gpu_tools_testing::records::api(
        "cudaLaunchKernel",
        900,
        950,
        1,
        1,
    ));
    e.push(&kernel("k", 1_000, 2_000, 1));
    e.bytes().to_vec()
}

/// Group names by their places.
#[derive(Default)]
struct Places(Vec<(i64, String)>);

impl TimelineSink for Places {
    fn track(&mut self, track: &Track) -> io::Result<()> {
        if let Some(p) = &track.process {
            self.0.push((track.sort, p.name.clone()));
        }
        Ok(())
    }
    fn slice(&mut self, _: &Slice<'_>) -> io::Result<()> {
        Ok(())
    }
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn group_order(files: &[Vec<u8>], ordered: bool) -> Vec<String> {
    let mut timeline = Timeline::new(Places::default());
    if ordered {
        timeline.order_ranks(job(files).process_ranks());
    }
    for (i, f) in files.iter().enumerate() {
        assert!(timeline.read(i as u32, &f[..]).expect("sink").is_empty());
    }
    let mut places = timeline.finish().expect("sink").0;
    places.sort();
    places.retain(|(_, n)| !n.starts_with("GPU"));
    assert!(
        places
            .iter()
            .all(|(p, _)| *p < 0 && *p >= i64::from(i32::MIN))
    );
    places.into_iter().map(|(_, n)| n).collect()
}

#[test]
fn the_export_orders_ranks_by_host_then_rank_numbers_in_names_as_numbers() {
    // Ranks dealt round-robin over the hosts (rank 0 on h10, rank 1 on h2, ...), the files in no order.
    let files = [
        ranked_stream(10, "h10", 0),
        ranked_stream(21, "h2", 3),
        ranked_stream(11, "h10", 2),
        ranked_stream(20, "h2", 1),
    ];
    assert_eq!(
        group_order(&files, true),
        [
            "h2 rank 1: process 20",
            "h2 rank 3: process 21",
            "h10 rank 0: process 10",
            "h10 rank 2: process 11"
        ]
    );
    // Without a first reading (standard input): hosts in the order met, then rank.
    assert_eq!(
        group_order(&files, false),
        [
            "h10 rank 0: process 10",
            "h10 rank 2: process 11",
            "h2 rank 1: process 20",
            "h2 rank 3: process 21"
        ]
    );
}

/// A stream of a process with `RANK` and `WORLD_SIZE` labels, holding `records`.
fn labelled_stream(
    pid: u32,
    host: &str,
    rank: u32,
    world: u32,
    records: &[gpu_tools_trace::Record],
) -> Vec<u8> {
    use gpu_tools_trace::{Encoder, ProcessInfo, Record, StreamHeader, TimestampClock};
    let mut e = Encoder::new(&StreamHeader::new(pid, 0, TimestampClock::Monotonic));
    e.push(&Record::ProcessInfo(ProcessInfo {
        host: host.into(),
        boot_id: format!("boot-{host}"),
        labels: vec![
            ("RANK".into(), rank.to_string()),
            ("WORLD_SIZE".into(), world.to_string()),
        ],
    }));
    for r in records {
        e.push(r);
    }
    e.bytes().to_vec()
}

#[test]
fn a_rank_traced_without_device_work_is_not_called_untraced() {
    // Rank 0 was reached (its launch call is in the trace) but no kernel record came; rank 2 was not traced at all.
    let launch = gpu_tools_testing::records::api("cudaLaunchKernel", 900, 950, 1, 1);
    let r0 = labelled_stream(1398, "vm", 0, 3, &[launch]);
    let r1 = labelled_stream(1399, "vm", 1, 3, &[allreduce(1_000, 2_000, 1)]);
    let t = stragglers(&[r0, r1]);
    assert!(
        has_note(
            &t,
            "missing: rank 2 of 0-2 has no trace (WORLD_SIZE 3); rank 0 (pid 1398 on vm) was traced but its trace \
             holds no device work (no kernel, copy or set record: CUPTI gave none, or it ran none in the window); \
             the report covers the 1 traced"
        ),
        "{:#?}",
        t.notes
    );
    // Only rank 1 has a row.
    assert_eq!(t.rows.len(), 1);
}
