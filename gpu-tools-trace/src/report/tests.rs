//! Tests of the notes that the reports add, over several reports at once.

use std::sync::Arc;

use crate::record::{ApiDomain, ApiRecord, KernelRecord, MarkerKind, MarkerRecord, Record};

use super::*;

fn marker(kind: MarkerKind, id: u32, time: u64) -> Record {
    Record::Marker(MarkerRecord {
        time,
        kind,
        id,
        process: 1,
        thread: 1,
        domain: Arc::from(""),
        name: "step".into(),
    })
}

fn kernel(correlation: u32) -> Record {
    Record::Kernel(KernelRecord {
        start: 10,
        end: 20,
        device: 0,
        context: 1,
        stream: 7,
        correlation,
        grid_id: 1,
        grid: [1, 1, 1],
        block: [1, 1, 1],
        static_shared: 0,
        dynamic_shared: 0,
        registers: 8,
        graph_id: 0,
        graph_node_id: 0,
        name: Arc::from("k"),
    })
}

fn notes_of(a: &Analysis) -> Vec<String> {
    a.reports().into_iter().flat_map(|t| t.notes).collect()
}

#[test]
fn notes_count_one_in_the_singular() {
    let mut a = Analysis::new();
    a.add((0, 0), &marker(MarkerKind::Start, 1, 0));
    a.add((0, 0), &marker(MarkerKind::End, 1, 100));
    a.add((0, 0), &marker(MarkerKind::Start, 2, 0));
    a.add((0, 0), &marker(MarkerKind::End, 3, 100));
    a.add((0, 0), &marker(MarkerKind::Instant, 4, 50));
    a.add(
        (0, 0),
        &Record::Api(ApiRecord {
            start: 5,
            end: 6,
            domain: ApiDomain::Runtime,
            cbid: 1,
            name: Arc::from("cudaLaunchKernel"),
            correlation: 1,
            process: 1,
            thread: 1,
            return_value: 0,
        }),
    );
    a.add((0, 0), &kernel(1));
    a.add((0, 0), &kernel(2));
    a.errors = 1;
    let notes = notes_of(&a);
    for note in [
        "1 range was still open when its stream ended (not shown)",
        "1 range end had no start in the trace (not shown)",
        "1 NVTX mark (an instant)",
        "1 device operation had no API record (left out of the projection)",
        "1 error while reading (reported on stderr)",
    ] {
        assert!(notes.iter().any(|n| n == note), "{note:?} in {notes:#?}");
    }

    a.add((0, 0), &marker(MarkerKind::Start, 5, 0));
    a.add((0, 0), &marker(MarkerKind::End, 6, 100));
    a.add((0, 0), &marker(MarkerKind::Instant, 7, 50));
    a.add((0, 0), &kernel(3));
    a.errors = 2;
    let notes = notes_of(&a);
    for note in [
        "2 ranges were still open when their stream ended (not shown)",
        "2 range ends had no start in the trace (not shown)",
        "2 NVTX marks (instants)",
        "2 device operations had no API record (left out of the projection)",
        "2 errors while reading (reported on stderr)",
    ] {
        assert!(notes.iter().any(|n| n == note), "{note:?} in {notes:#?}");
    }
}

fn kernel_span(name: &str, start: u64, end: u64) -> Record {
    let Record::Kernel(mut k) = kernel(1) else {
        unreachable!()
    };
    (k.start, k.end, k.name) = (start, end, Arc::from(name));
    Record::Kernel(k)
}

#[test]
fn times_whose_sum_passes_u64_are_not_printed_as_a_number_and_shares_stay_within_a_hundred_percent()
{
    let mut a = Analysis::new();
    let half = 1u64 << 63;
    for name in ["a", "b"] {
        a.add((0, 0), &kernel_span(name, 0, half));
    }
    let t = a.kernel_sum();
    let shares: Vec<&Cell> = t.rows.iter().map(|r| &r[0]).collect();
    assert_eq!(shares, [&Cell::Float(50.0), &Cell::Float(50.0)], "{t:?}");

    // "a" now took 2^64 ns, which no u64 holds: neither its saturated total nor shares of a wrong sum.
    a.add((0, 0), &kernel_span("a", 0, half));
    let t = a.kernel_sum();
    let a_row = t.rows.iter().find(|r| r[8] == Cell::from("a")).unwrap();
    assert_eq!(
        (&a_row[0], &a_row[1]),
        (&Cell::Missing, &Cell::Missing),
        "{t:?}"
    );
    assert!(
        t.notes
            .iter()
            .any(|n| n.starts_with("1 row has a total time too large")),
        "{:?}",
        t.notes
    );
}

#[test]
fn records_that_end_before_they_start_are_counted_as_0_ns_and_said() {
    let mut a = Analysis::new();
    a.add((0, 0), &kernel_span("k", 100, 40));
    a.add((0, 0), &kernel_span("k", 100, 150));
    let t = a.kernel_sum();
    assert_eq!(t.rows[0][1], Cell::Int(50), "{t:?}");
    let notes = a.processes().notes;
    assert!(
        notes.iter().any(|n| n.starts_with(
            "1 record ended before it started (a kernel, copy, set, graph launch, call or synchronisation): \
             counted as 0 ns"
        )),
        "{notes:?}"
    );
    let mut fine = Analysis::new();
    fine.add((0, 0), &kernel_span("k", 100, 150));
    assert!(
        !fine
            .processes()
            .notes
            .iter()
            .any(|n| n.contains("ended before")),
        "{:?}",
        fine.processes().notes
    );
}

#[test]
fn range_times_whose_sum_passes_u64_are_not_printed_as_a_number() {
    let mut a = Analysis::new();
    let half = 1u64 << 63;
    // Three ranges named alike of 2^63 ns each (their sum passes 2^64), open at once, with a launch and its
    // kernel inside.
    for i in 1..=3u32 {
        a.add((0, 0), &marker(MarkerKind::Start, i, 0));
    }
    a.add(
        (0, 0),
        &Record::Api(ApiRecord {
            start: 1,
            end: 2,
            domain: ApiDomain::Runtime,
            cbid: 1,
            name: Arc::from("cudaLaunchKernel"),
            correlation: 1,
            process: 1,
            thread: 1,
            return_value: 0,
        }),
    );
    for i in 1..=3u32 {
        a.add((0, 0), &marker(MarkerKind::End, i, half));
    }
    a.add((0, 0), &kernel(1));
    let t = a.nvtx_gpu_proj_sum();
    assert_eq!(t.rows.len(), 1, "{t:?}");
    // The projections (10 ns each) add up; the ranges' 3 * 2^63 ns do not fit.
    assert_eq!(
        (&t.rows[0][2], &t.rows[0][3]),
        (&Cell::Int(30), &Cell::Missing)
    );
    assert!(
        t.notes
            .iter()
            .any(|n| n.starts_with("1 total time is too large")),
        "{:?}",
        t.notes
    );
}

#[test]
fn device_work_without_a_correlation_id_is_not_projected_into_a_range() {
    let mut a = Analysis::new();
    a.add((0, 0), &marker(MarkerKind::Start, 1, 0));
    // A call that carries no correlation id (0: none), inside the range.
    a.add(
        (0, 0),
        &Record::Api(ApiRecord {
            start: 5,
            end: 6,
            domain: ApiDomain::Runtime,
            cbid: 1,
            name: Arc::from("cudaGetDevice"),
            correlation: 0,
            process: 1,
            thread: 1,
            return_value: 0,
        }),
    );
    a.add((0, 0), &marker(MarkerKind::End, 1, 100));
    // Device work whose launch is not known.
    a.add((0, 0), &kernel(0));
    let t = a.nvtx_gpu_proj_sum();
    assert!(t.rows.is_empty(), "{t:?}");
    assert!(
        t.notes
            .iter()
            .any(|n| n == "1 device operation had no API record (left out of the projection)"),
        "{:?}",
        t.notes
    );
}

#[test]
fn a_graph_id_of_two_processes_with_different_node_counts_shows_both() {
    use crate::record::{GraphInfo, GraphLaunchRecord};
    let mut a = Analysis::new();
    for (stream, nodes) in [(0, 3), (1, 5)] {
        a.add(
            (0, stream),
            &Record::Graph(GraphInfo {
                time: 1,
                graph_id: 1,
                exec_id: 0,
                node_count: nodes,
            }),
        );
        a.add(
            (0, stream),
            &Record::GraphLaunch(GraphLaunchRecord {
                start: 10,
                end: 20,
                device: 0,
                context: 1,
                stream: 7,
                correlation: 1,
                graph_id: 1,
                end_device: 0,
                end_context: 1,
            }),
        );
    }
    let t = a.graph_sum();
    assert_eq!(t.rows.len(), 1, "{t:?}");
    assert_eq!(t.rows[0][8], Cell::from("graph 1 (3 or 5 nodes)"));
}

#[test]
fn streams_of_one_pid_project_their_own_kernels_into_their_own_ranges() {
    use crate::record::ProcessStart;
    // Two files, each a process with pid 100 (two hosts, or two PID namespaces): each launched a kernel with
    // correlation id 1 inside a range of its own, at times the other's range does not hold.
    let mut a = Analysis::new();
    for (key, range, at) in [((0, 0), 1u32, 0u64), ((1, 0), 2, 1_000)] {
        a.add(
            key,
            &Record::ProcessStart(ProcessStart {
                pid: 100,
                parent_pid: 1,
                time: 0,
                command: "train".into(),
            }),
        );
        let Record::Marker(mut m) = marker(MarkerKind::Start, range, at) else {
            unreachable!()
        };
        m.name = format!("range {range}");
        a.add(key, &Record::Marker(m.clone()));
        a.add(
            key,
            &Record::Api(ApiRecord {
                start: at + 5,
                end: at + 6,
                domain: ApiDomain::Runtime,
                cbid: 1,
                name: Arc::from("cudaLaunchKernel"),
                correlation: 1,
                process: 100,
                thread: 1,
                return_value: 0,
            }),
        );
        (m.kind, m.time) = (MarkerKind::End, at + 100);
        a.add(key, &Record::Marker(m));
        a.add(
            key,
            &kernel_span("k", at + 10, at + 10 + u64::from(range) * 20),
        );
    }
    let t = a.nvtx_gpu_proj_sum();
    let rows: Vec<(&Cell, &Cell, &Cell)> = t.rows.iter().map(|r| (&r[0], &r[2], &r[10])).collect();
    assert_eq!(
        rows,
        [
            (&Cell::from("range 2"), &Cell::Int(40), &Cell::Int(1)),
            (&Cell::from("range 1"), &Cell::Int(20), &Cell::Int(1)),
        ],
        "{t:?}"
    );
}

#[test]
fn processes_say_how_each_stream_ended() {
    use crate::record::{EndReason, ProcessEnd, ProcessStart};
    let start = |pid: u32| {
        Record::ProcessStart(ProcessStart {
            pid,
            parent_pid: 1,
            time: 0,
            command: format!("prog{pid}"),
        })
    };
    let end = |records: u64, reason: EndReason| {
        Record::ProcessEnd(ProcessEnd {
            time: 100,
            reason,
            records,
            dropped: 0,
            skipped: 0,
            callback_panics: 0,
        })
    };
    let streams: [Vec<Record>; 7] = [
        // Crashed on SIGSEGV, its records flushed by the library's handler: whole, ended at the signal.
        vec![start(100), kernel(1), end(2, EndReason::Signal(11))],
        vec![start(200), end(1, EndReason::Exit)],
        // An attach's window ended; the process ran on.
        vec![start(300), end(1, EndReason::Stopped)],
        // Crashed before anything could be flushed: no end record.
        vec![start(400), kernel(1)],
        // SIGBUS handled by the program, which ran on: a record after the end record, which does not count it.
        vec![start(500), end(1, EndReason::Signal(7)), kernel(1)],
        // A signal without a standard name; a code newer than this crate.
        vec![start(600), end(1, EndReason::Signal(40))],
        vec![start(700), end(1, EndReason::Other(9))],
    ];
    let mut a = Analysis::new();
    for (i, records) in streams.iter().enumerate() {
        for r in records {
            a.add((0, u32::try_from(i).unwrap()), r);
        }
    }
    let t = a.processes();
    let column = |name: &str| -> Vec<String> {
        let at = t
            .columns
            .iter()
            .position(|c| *c == name)
            .unwrap_or_else(|| panic!("no column {name:?} in {:?}", t.columns));
        t.rows
            .iter()
            .map(|r| match &r[at] {
                Cell::Text(s) => s.clone(),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    assert_eq!(
        column("Complete"),
        [
            "yes",
            "yes",
            "yes",
            "no (no end record: crashed or killed?)",
            "yes",
            "yes",
            "yes"
        ]
    );
    assert_eq!(
        column("End"),
        [
            "signal 11 (SIGSEGV)",
            "exit",
            "tracing stopped",
            "",
            "signal 7 (SIGBUS), 1 record after it",
            "signal 40",
            "unknown (code 9)"
        ]
    );
    assert!(
        t.notes.iter().any(|n| n
            == "3 streams ended at a fatal signal (End): what each process recorded until then was flushed, but \
                its work still in flight (kernels queued or running, calls not yet returned) has no record"),
        "{:#?}",
        t.notes
    );
    assert!(
        t.notes.iter().any(|n| n
            == "1 stream has records after its end record (the process handled the signal and ran on): they \
                count in every report, but its end record does not count them"),
        "{:#?}",
        t.notes
    );
}
