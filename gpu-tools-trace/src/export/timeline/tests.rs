use std::io;
use std::sync::Arc;

use super::ranks::natural_order;
use super::state::MAX_OPEN;
use super::tracks::MAX_COMMAND;
use super::*;
use crate::record::*;

/// Counts slices and flow ends, keeps track names.
#[derive(Default)]
struct Count {
    tracks: Vec<String>,
    slices: usize,
    starts: usize,
    ends: usize,
}

impl TimelineSink for Count {
    fn track(&mut self, track: &Track) -> io::Result<()> {
        self.tracks.push(track.name.clone());
        Ok(())
    }
    fn slice(&mut self, slice: &Slice<'_>) -> io::Result<()> {
        self.slices += 1;
        self.starts += usize::from(slice.flow_out.is_some());
        self.ends += usize::from(slice.flow_in.is_some());
        Ok(())
    }
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn kernel(correlation: u32) -> Record {
    Record::Kernel(KernelRecord {
        start: u64::from(correlation) * 10,
        end: u64::from(correlation) * 10 + 5,
        device: 0,
        context: 1,
        stream: 7,
        correlation,
        grid_id: 0,
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

#[test]
fn work_waiting_for_its_call_is_bounded_and_written_at_the_end() {
    // Kernels whose calls were not recorded (`--api none`): each waits, the oldest go out past the bound.
    let n = MAX_OPEN as u32 + 1000;
    let mut t = Timeline::new(Count::default());
    for c in 1..=n {
        t.add((0, 0), &kernel(c)).unwrap();
    }
    assert_eq!(t.sink.slices, 1000, "written once past the bound");
    assert_eq!(t.streams[&(0, 0)].held, MAX_OPEN);
    let count = t.finish().unwrap();
    assert_eq!(count.slices, n as usize);
    assert_eq!((count.starts, count.ends), (0, 0));
}

#[test]
fn a_stream_that_ends_lets_go_of_what_it_held() {
    let mut t = Timeline::new(Count::default());
    t.add((0, 0), &kernel(1)).unwrap();
    assert_eq!(t.sink.slices, 0, "held for its call");
    t.add(
        (0, 0),
        &Record::ProcessEnd(ProcessEnd {
            time: 100,
            reason: EndReason::Exit,
            records: 1,
            dropped: 0,
            skipped: 0,
            callback_panics: 0,
        }),
    )
    .unwrap();
    assert_eq!(t.sink.slices, 1);
    assert_eq!(t.streams[&(0, 0)].held, 0);
}

#[test]
fn host_names_sort_with_their_numbers_as_numbers() {
    let mut hosts = vec![
        "h10", "h2", "node-10", "node-9", "h02", "h1a", "h1", "gpu", "h",
    ];
    hosts.sort_by(|a, b| natural_order(a, b));
    assert_eq!(
        hosts,
        [
            "gpu", "h", "h1", "h1a", "h02", "h2", "h10", "node-9", "node-10"
        ]
    );
}

#[test]
fn a_long_command_line_is_cut_with_an_ellipsis() {
    let mut t = Timeline::new(Count::default());
    for (stream, command) in [(0, "x".repeat(200)), (1, "python3 train.py".to_string())] {
        let pid = 100 + stream;
        let start = ProcessStart {
            pid,
            parent_pid: 1,
            time: 0,
            command,
        };
        // A call on a host thread makes the process's group.
        let call = ApiRecord {
            start: 0,
            end: 1,
            domain: ApiDomain::Runtime,
            cbid: 1,
            name: Arc::from("cudaFree"),
            correlation: 0,
            process: pid,
            thread: 1,
            return_value: 0,
        };
        t.add((0, stream), &Record::ProcessStart(start)).unwrap();
        t.add((0, stream), &Record::Api(call)).unwrap();
    }
    let tracks = t.finish().unwrap().tracks;
    let cut = format!("process 100 {}…", "x".repeat(MAX_COMMAND - 1));
    assert!(tracks.contains(&cut), "{tracks:?}");
    assert!(
        tracks.iter().any(|t| t == "process 101 python3 train.py"),
        "{tracks:?}"
    );
}

#[test]
fn groups_of_processes_that_share_a_pid_and_command_are_told_apart_by_their_stream() {
    // Two containers on one host each run `python train.py` as pid 1, without rank variables.
    let mut t = Timeline::new(Count::default());
    for stream in 0..2 {
        let start = ProcessStart {
            pid: 1,
            parent_pid: 0,
            time: 0,
            command: "python train.py".into(),
        };
        let call = ApiRecord {
            start: 0,
            end: 1,
            domain: ApiDomain::Runtime,
            cbid: 1,
            name: Arc::from("cudaFree"),
            correlation: 0,
            process: 1,
            thread: 1,
            return_value: 0,
        };
        t.add((0, stream), &Record::ProcessStart(start)).unwrap();
        t.add((0, stream), &Record::Api(call)).unwrap();
        t.add((0, stream), &kernel(0)).unwrap();
    }
    let tracks = t.finish().unwrap().tracks;
    for name in [
        "process 1 python train.py",
        "process 1 python train.py (file 0 stream 1)",
        "GPU 0 (pid 1)",
        "GPU 0 (pid 1) (file 0 stream 1)",
    ] {
        assert!(tracks.iter().any(|t| t == name), "{name}: {tracks:?}");
    }
}
