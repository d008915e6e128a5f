//! Kernel metrics of a program launched with the library: graph kernels named after their kernels, per-name
//! aggregation, one record per graph launch, the per-kernel limit, and silence without a context or a subscriber.

use gpu_tools::profile::{KernelTable, combine_values};
use gpu_tools::trace::*;
use gpu_tools_injection::env;

use crate::support::{METRICS, metrics, names, notices, range, run};

/// What the test plays, decode by decode (the double numbers the ranges of each decode from 0):
/// 1. `copy`; a launch into a capturing stream (no range); graph 7 (k_a -> memset -> k_b -> k_c -> child graph
///    {k_x}) launched twice; `copy`;
/// 2. graph 9, whose edges the driver cannot give (its kernels unknown): two ranges, isolated;
/// 3. `copy`.
const NODE_NAMES: [&str; 13] = [
    "copy",
    "k_a",
    "k_b",
    "k_c",
    "k_x",
    "k_a",
    "k_b",
    "k_c",
    "k_x",
    "copy",
    "graph 9 (kernels unknown) kernel #0",
    "graph 9 (kernels unknown) kernel #1",
    "copy",
];

#[test]
fn graph_kernels_are_named_after_their_kernels_and_aggregate_per_name() {
    let (records, _) = run("graphs", &[]);
    assert_eq!(names(&records), NODE_NAMES);
    let m = metrics(&records);
    // Each record keeps its range's values and its launch's correlation id and index.
    assert_eq!(
        m[6].metrics.iter().map(|x| x.1).collect::<Vec<_>>(),
        range(6)
    );
    assert_eq!(m[11].metrics[0].1, range(1)[0], "the second decode");
    assert_eq!(
        m.iter().map(|r| r.correlation).collect::<Vec<_>>(),
        vec![1, 3, 3, 3, 3, 4, 4, 4, 4, 5, 6, 6, 7]
    );
    assert_eq!(
        m.iter().map(|r| r.launch).collect::<Vec<_>>(),
        (0..13).collect::<Vec<u32>>()
    );
    let table = KernelTable::from_records(m.iter().copied());
    let rows: Vec<(String, u64)> = table
        .rows
        .iter()
        .map(|r| (r.kernel.to_string(), r.launches))
        .collect();
    for (name, launches) in [("copy", 3), ("k_a", 2), ("k_b", 2), ("k_c", 2), ("k_x", 2)] {
        assert!(
            rows.contains(&(name.to_string(), launches)),
            "{name} x{launches} in {rows:?}"
        );
    }
    assert!(
        rows.iter().all(|(n, _)| n.parse::<u64>().is_err()),
        "no range is named by its number: {rows:?}"
    );
    let warnings: Vec<&str> = notices(&records).iter().map(|n| n.text.as_str()).collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("graph 9: its kernels could not be read")),
        "{warnings:?}"
    );
    assert!(
        !warnings
            .iter()
            .any(|w| w.contains("launches were expected")),
        "every decode found the ranges expected: {warnings:?}"
    );
}

#[test]
fn graph_profiling_makes_one_record_per_graph_launch() {
    let (records, _) = run("graphs", &[(env::PROFILE_GRAPH, "graph")]);
    assert_eq!(
        names(&records),
        vec![
            "copy",
            "graph 7 (4 kernels)",
            "graph 7 (4 kernels)",
            "copy",
            "graph 9 (kernels unknown)",
            "copy"
        ]
    );
    let m = metrics(&records);
    // The first launch of graph 7 is ranges 1..=4 of the first decode; the second, ranges 5..=8.
    let first: Vec<Vec<f64>> = (1..=4).map(range).collect();
    let rows: Vec<&[f64]> = first.iter().map(Vec::as_slice).collect();
    let got: Vec<f64> = m[1].metrics.iter().map(|x| x.1).collect();
    assert_eq!(got, combine_values(&METRICS, &rows));
    assert_eq!(got[0], 200.0 + 300.0 + 400.0 + 500.0, "durations add");
    assert_eq!(got[1], 201.0 + 301.0 + 401.0 + 501.0, "bytes add");
    let weighted = (202.0 * 200.0 + 302.0 * 300.0 + 402.0 * 400.0 + 502.0 * 500.0) / 1400.0;
    assert!((got[2] - weighted).abs() < 1e-9, "{} {weighted}", got[2]);
    assert_eq!(m[2].metrics[0].1, 600.0 + 700.0 + 800.0 + 900.0);
    assert_eq!(
        m[4].metrics[0].1,
        100.0 + 200.0,
        "the unknown graph's two ranges"
    );
    assert_eq!(
        m.iter()
            .map(|r| (r.correlation, r.launch))
            .collect::<Vec<_>>(),
        vec![(1, 0), (3, 1), (4, 2), (5, 3), (6, 4), (7, 5)]
    );
    let table = KernelTable::from_records(m.iter().copied());
    let graph = table
        .rows
        .iter()
        .find(|r| &*r.kernel == "graph 7 (4 kernels)")
        .expect("a row for graph 7");
    assert_eq!(graph.launches, 2);
    assert_eq!(graph.metrics[0].sum, 1400.0 + 3000.0);
}

#[test]
fn a_process_that_never_makes_a_context_says_nothing() {
    let (records, _) = run("no-context", &[]);
    assert!(metrics(&records).is_empty());
    let said: Vec<&Notice> = notices(&records)
        .into_iter()
        .filter(|n| n.level != NoticeLevel::Info)
        .collect();
    assert!(said.is_empty(), "{said:?}");
}

#[test]
fn without_a_callback_subscriber_the_stream_says_nothing_is_profiled() {
    let (records, _) = run("other-subscriber", &[]);
    let texts: Vec<&str> = notices(&records)
        .iter()
        .filter(|n| n.level == NoticeLevel::Error)
        .map(|n| n.text.as_str())
        .collect();
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("nothing is profiled") && t.contains("callback subscriber")),
        "{texts:?}"
    );
}

#[test]
fn a_graph_launch_counts_once_for_the_per_kernel_limit() {
    let (records, _) = run("graphs", &[(env::PROFILE_LAUNCHES_PER_KERNEL, "1")]);
    // One copy, one launch of each graph: the second launch of graph 7 and the later copies run unprofiled.
    let got = names(&records);
    assert_eq!(
        got,
        vec![
            "copy",
            "k_a",
            "k_b",
            "k_c",
            "k_x",
            "graph 9 (kernels unknown) kernel #0",
            "graph 9 (kernels unknown) kernel #1",
        ]
    );
}

/// The profile-loss records of a stream, by kind and count.
fn losses(records: &[Record]) -> Vec<(ProfileLossKind, u64)> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::ProfileLoss(l) => Some((l.kind, l.count)),
            _ => None,
        })
        .collect()
}

/// The texts of a stream's error notices.
fn errors(records: &[Record]) -> Vec<String> {
    notices(records)
        .iter()
        .filter(|n| n.level == NoticeLevel::Error)
        .map(|n| n.text.clone())
        .collect()
}

#[test]
fn ranges_lost_to_a_failed_stop_at_the_per_kernel_limit_are_a_loss_record() {
    // The second launch of graph 7 passes the limit: the profiler is stopped there, and its stop fails. The ranges
    // queued until then (the copy and graph 7's four kernels), not decoded, are lost with the profiler.
    let (records, _) = run(
        "graphs",
        &[
            (env::PROFILE_LAUNCHES_PER_KERNEL, "1"),
            ("GPU_TOOLS_DOUBLE_FAIL", "cuptiRangeProfilerStop=1"),
        ],
    );
    assert!(names(&records).is_empty(), "{:?}", names(&records));
    let errors = errors(&records);
    assert!(
        errors
            .iter()
            .any(|t| t.contains("kernel metrics stop here")),
        "{errors:?}"
    );
    assert_eq!(
        losses(&records),
        [(ProfileLossKind::Ranges, 5)],
        "the five ranges queued before the failed stop, counted lost"
    );
}

#[test]
fn ranges_lost_to_a_failed_decode_are_a_loss_record() {
    // The first decode comes before graph 9's launch, whose kernels are unknown: the ten ranges queued until then
    // (both copies and graph 7's four kernels twice) are lost when the decode fails.
    let (records, _) = run(
        "graphs",
        &[("GPU_TOOLS_DOUBLE_FAIL", "cuptiRangeProfilerDecodeData=1")],
    );
    assert!(names(&records).is_empty(), "{:?}", names(&records));
    let errors = errors(&records);
    assert!(
        errors.iter().any(|t| t.contains("decoding kernel metrics")),
        "{errors:?}"
    );
    assert_eq!(
        losses(&records),
        [(ProfileLossKind::Ranges, 10)],
        "the ten ranges the failed decode held, counted lost"
    );
}
