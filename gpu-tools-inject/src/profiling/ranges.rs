//! Which launch each range of the range profiler is, and the kernel-metrics records of a decode.
//!
//! In auto-range mode CUPTI names a range by its launch's number in the context ("0", "1", ...), nothing more. The
//! profiler serialises launches, so range `k` of a decode is the `k`-th range expected since the previous decode:
//! one per eager kernel launch, and one per kernel node of a graph launch, in the order the graph runs them
//! ([`Expected`], queued by the launch callbacks). A graph launch whose kernels are not known has its ranges
//! isolated instead (decoded before it and after it): they are the ranges past the expected ones ([`Tail`]).
//!
//! With `--graph-profiling graph` the ranges of one graph launch make one record, named after the graph, their
//! values combined ([`gpu_tools::profile::combine_values`]).

use std::sync::Arc;

use gpu_tools::cupti::range_profiler::RangeResults;
use gpu_tools::profile::combine_values;
use gpu_tools::trace::{KernelMetricsRecord, Record};
use gpu_tools_injection::env::GraphMode;

/// One graph launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GraphRun {
    /// The graph's name (`graph 7 (12 kernels)`).
    pub name: Arc<str>,
    /// Tells one launch from the next (several launches of a graph may be in one decode).
    pub seq: u64,
}

/// A range expected from a launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Expected {
    /// Correlation id of the launch call (for a graph's kernels: of the graph launch).
    pub correlation: u32,
    /// The kernel's name.
    pub kernel: Arc<str>,
    /// The graph launch the kernel ran in.
    pub graph: Option<GraphRun>,
}

/// The graph launch whose ranges follow the expected ones, its kernels unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tail {
    /// Correlation id of the graph launch.
    pub correlation: u32,
    /// The launch.
    pub run: GraphRun,
}

/// Where a decode's records go: device, context, and the index of the first workload (a launch; with graphs
/// profiled whole, a graph launch counts once).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place {
    pub device: u32,
    pub context: u32,
    pub first: u32,
}

/// The kernel-metrics records of one decode, and the workloads they make (the next decode's first index).
/// Ranges past the expected ones belong to `tail` when given; otherwise they keep CUPTI's number, marked unknown.
pub(crate) fn kernel_records(
    results: &RangeResults,
    expected: &[Expected],
    tail: Option<&Tail>,
    metrics: &[Arc<str>],
    place: Place,
    mode: GraphMode,
) -> (Vec<Record>, u32) {
    // Each range's (correlation, kernel name, graph launch).
    let named: Vec<(u32, Arc<str>, Option<&GraphRun>)> = results
        .ranges
        .iter()
        .enumerate()
        .map(|(k, range)| match (expected.get(k), tail) {
            (Some(e), _) => (e.correlation, Arc::clone(&e.kernel), e.graph.as_ref()),
            (None, Some(t)) => (
                t.correlation,
                Arc::from(format!("{} kernel #{}", t.run.name, k - expected.len())),
                Some(&t.run),
            ),
            (None, None) => (
                0,
                Arc::from(format!("unknown kernel (range {})", range.name)),
                None,
            ),
        })
        .collect();
    let mut records = Vec::new();
    let mut k = 0;
    while k < named.len() {
        let (correlation, kernel, graph) = &named[k];
        // The ranges of this workload: one, or a graph launch's run of them.
        let mut end = k + 1;
        if let (GraphMode::Graph, Some(run)) = (mode, graph) {
            while end < named.len() && named[end].2.is_some_and(|g| g.seq == run.seq) {
                end += 1;
            }
        }
        let values: Vec<f64> = if end - k == 1 {
            results.ranges[k].values.clone()
        } else {
            let rows: Vec<&[f64]> = results.ranges[k..end]
                .iter()
                .map(|r| r.values.as_slice())
                .collect();
            combine_values(metrics, &rows)
        };
        let name = match (mode, graph) {
            (GraphMode::Graph, Some(run)) => Arc::clone(&run.name),
            _ => Arc::clone(kernel),
        };
        records.push(Record::KernelMetrics(KernelMetricsRecord {
            device: place.device,
            context: place.context,
            correlation: *correlation,
            launch: place.first + records.len() as u32,
            kernel: name,
            metrics: metrics.iter().cloned().zip(values).collect(),
        }));
        k = end;
    }
    // Expected ranges the decode lacks (dropped for room) still count as workloads; the rest of a graph launch cut
    // short is part of the one already recorded.
    let continuing = named.last().and_then(|n| n.2).map(|g| g.seq);
    let missing = workloads(expected.get(named.len()..).unwrap_or(&[]), mode, continuing);
    let next = place.first + records.len() as u32 + missing;
    (records, next)
}

/// The workloads `expected` makes: its ranges, or with graphs profiled whole, each graph launch once (not the one
/// whose ranges `continuing` began before).
fn workloads(expected: &[Expected], mode: GraphMode, continuing: Option<u64>) -> u32 {
    let mut n = 0;
    let mut last = continuing;
    for e in expected {
        match (&e.graph, mode) {
            (Some(g), GraphMode::Graph) if last == Some(g.seq) => {}
            (Some(g), GraphMode::Graph) => {
                n += 1;
                last = Some(g.seq);
            }
            _ => {
                n += 1;
                last = None;
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_tools::cupti::range_profiler::RangeValues;

    fn results(n: usize) -> RangeResults {
        RangeResults {
            metrics: vec![
                "gpu__time_duration.sum".into(),
                "dram__bytes_read.sum".into(),
            ],
            ranges: (0..n)
                .map(|i| RangeValues {
                    name: i.to_string(),
                    values: vec![100.0 * (i + 1) as f64, 10.0 * (i + 1) as f64],
                })
                .collect(),
            dropped: 0,
            counter_data: None,
        }
    }

    fn metrics() -> Vec<Arc<str>> {
        vec![
            Arc::from("gpu__time_duration.sum"),
            Arc::from("dram__bytes_read.sum"),
        ]
    }

    fn eager(correlation: u32, kernel: &str) -> Expected {
        Expected {
            correlation,
            kernel: Arc::from(kernel),
            graph: None,
        }
    }

    fn node(correlation: u32, kernel: &str, seq: u64) -> Expected {
        Expected {
            correlation,
            kernel: Arc::from(kernel),
            graph: Some(GraphRun {
                name: Arc::from("graph 7 (2 kernels)"),
                seq,
            }),
        }
    }

    fn rows(records: &[Record]) -> Vec<(u32, u32, String, Vec<f64>)> {
        records
            .iter()
            .map(|r| match r {
                Record::KernelMetrics(k) => (
                    k.correlation,
                    k.launch,
                    k.kernel.to_string(),
                    k.metrics.iter().map(|m| m.1).collect(),
                ),
                other => panic!("not a kernel-metrics record: {other:?}"),
            })
            .collect()
    }

    const PLACE: Place = Place {
        device: 0,
        context: 5,
        first: 10,
    };

    /// An eager launch, a graph of two kernels launched twice, an eager launch.
    fn mixed() -> Vec<Expected> {
        vec![
            eager(1, "copy"),
            node(2, "a", 1),
            node(2, "b", 1),
            node(3, "a", 2),
            node(3, "b", 2),
            eager(4, "copy"),
        ]
    }

    #[test]
    fn node_mode_names_every_range_after_its_kernel() {
        let (records, next) = kernel_records(
            &results(6),
            &mixed(),
            None,
            &metrics(),
            PLACE,
            GraphMode::Node,
        );
        let got: Vec<(u32, u32, String)> = rows(&records)
            .into_iter()
            .map(|(c, l, k, _)| (c, l, k))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, 10, "copy".into()),
                (2, 11, "a".into()),
                (2, 12, "b".into()),
                (3, 13, "a".into()),
                (3, 14, "b".into()),
                (4, 15, "copy".into()),
            ]
        );
        assert_eq!(next, 16);
        assert_eq!(
            rows(&records)[3].3,
            vec![400.0, 40.0],
            "values stay the range's"
        );
    }

    #[test]
    fn graph_mode_makes_one_record_per_graph_launch() {
        let (records, next) = kernel_records(
            &results(6),
            &mixed(),
            None,
            &metrics(),
            PLACE,
            GraphMode::Graph,
        );
        assert_eq!(
            rows(&records),
            vec![
                (1, 10, "copy".into(), vec![100.0, 10.0]),
                (2, 11, "graph 7 (2 kernels)".into(), vec![500.0, 50.0]),
                (3, 12, "graph 7 (2 kernels)".into(), vec![900.0, 90.0]),
                (4, 13, "copy".into(), vec![600.0, 60.0]),
            ]
        );
        assert_eq!(next, 14);
    }

    #[test]
    fn ranges_past_the_expected_ones() {
        let tail = Tail {
            correlation: 9,
            run: GraphRun {
                name: Arc::from("graph 3 (kernels unknown)"),
                seq: 5,
            },
        };
        let expected = [eager(1, "copy")];
        let (records, _) = kernel_records(
            &results(3),
            &expected,
            Some(&tail),
            &metrics(),
            PLACE,
            GraphMode::Node,
        );
        let names: Vec<String> = rows(&records).into_iter().map(|r| r.2).collect();
        assert_eq!(
            names,
            vec![
                "copy",
                "graph 3 (kernels unknown) kernel #0",
                "graph 3 (kernels unknown) kernel #1"
            ]
        );
        let (records, _) = kernel_records(
            &results(3),
            &expected,
            Some(&tail),
            &metrics(),
            PLACE,
            GraphMode::Graph,
        );
        assert_eq!(
            rows(&records)[1],
            (9, 11, "graph 3 (kernels unknown)".into(), vec![500.0, 50.0])
        );
        // With no tail, they say they are unknown, with CUPTI's number: never a bare number.
        let (records, _) = kernel_records(
            &results(2),
            &expected,
            None,
            &metrics(),
            PLACE,
            GraphMode::Node,
        );
        assert_eq!(rows(&records)[1].2, "unknown kernel (range 1)");
    }

    #[test]
    fn dropped_ranges_still_count_as_workloads() {
        // Room for 2 ranges: the second graph launch and the last copy were dropped.
        let (records, next) = kernel_records(
            &results(2),
            &mixed(),
            None,
            &metrics(),
            PLACE,
            GraphMode::Graph,
        );
        assert_eq!(
            records.len(),
            2,
            "copy, then the first graph launch (one of its two ranges)"
        );
        assert_eq!(
            next,
            10 + 2 + 2,
            "the graph launch cut short, then another and a copy"
        );
        assert_eq!(workloads(&mixed(), GraphMode::Node, None), 6);
        assert_eq!(workloads(&mixed(), GraphMode::Graph, None), 4);
        let (_, next) = kernel_records(
            &results(2),
            &mixed(),
            None,
            &metrics(),
            PLACE,
            GraphMode::Node,
        );
        assert_eq!(next, 16, "node by node, every expected range is a launch");
    }
}
