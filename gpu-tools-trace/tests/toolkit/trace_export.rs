//! The exports checked by reading them back: Perfetto's protobuf decoded with message types declared here with the
//! field numbers of Perfetto's published `.proto` files (`protos/perfetto/trace/`), Chrome JSON parsed.

use std::collections::HashMap;
use std::sync::Arc;

use gpu_tools_trace::export::{ChromeWriter, PerfettoWriter, Timeline};
use gpu_tools_trace::*;

use gpu_tools_testing::perfetto;

use perfetto::pb;

const SLICE_BEGIN: i32 = 1;
const SLICE_END: i32 = 2;

fn run() -> Vec<u8> {
    run_with(StreamHeader::new(100, 130001, TimestampClock::Monotonic))
}

/// The records of [`run`] after `header`.
fn run_with(header: StreamHeader) -> Vec<u8> {
    let mut e = Encoder::new(&header);
    let records = [
        Record::Marker(MarkerRecord {
            time: 1_000,
            kind: MarkerKind::Start,
            id: 1,
            process: 100,
            thread: 11,
            domain: Arc::from(""),
            name: "step".into(),
        }),
        Record::Api(ApiRecord {
            start: 1_100,
            end: 1_200,
            domain: ApiDomain::Runtime,
            cbid: 211,
            name: Arc::from("cudaLaunchKernel"),
            correlation: 1,
            process: 100,
            thread: 11,
            return_value: 0,
        }),
        Record::Marker(MarkerRecord {
            time: 2_000,
            kind: MarkerKind::End,
            id: 1,
            process: 100,
            thread: 11,
            domain: Arc::from(""),
            name: String::new(),
        }),
        Record::Kernel(KernelRecord {
            start: 1_500,
            end: 2_500,
            device: 0,
            context: 1,
            stream: 7,
            correlation: 1,
            grid_id: 1,
            grid: [1, 1, 1],
            block: [32, 1, 1],
            static_shared: 0,
            dynamic_shared: 0,
            registers: 8,
            graph_id: 0,
            graph_node_id: 0,
            name: Arc::from("gemm"),
        }),
    ];
    for r in &records {
        e.push(r);
    }
    e.bytes().to_vec()
}

#[test]
fn perfetto_output_decodes_with_perfettos_field_numbers() {
    let mut t = Timeline::new(PerfettoWriter::new(Vec::new()));
    assert_eq!(t.read(0, &run()[..]).unwrap(), vec![]);
    let bytes = t.finish().unwrap().into_inner().unwrap();
    let trace =
        <pb::Trace as prost::Message>::decode(&bytes[..]).expect("a valid perfetto.protos.Trace");
    assert!(!trace.packet.is_empty());

    let mut tracks: HashMap<u64, pb::TrackDescriptor> = HashMap::new();
    let mut names: HashMap<u64, String> = HashMap::new();
    // (name, type, timestamp, track name)
    let mut events: Vec<(String, i32, u64, String)> = Vec::new();
    for p in &trace.packet {
        if let Some(d) = &p.track_descriptor {
            let uuid = d.uuid.expect("a track has a uuid");
            if let Some(parent) = d.parent_uuid {
                assert!(
                    tracks.contains_key(&parent),
                    "parent track {parent} described first"
                );
            }
            tracks.insert(uuid, d.clone());
        }
        if let Some(i) = &p.interned_data {
            for n in &i.event_names {
                names.insert(n.iid.unwrap(), n.name.clone().unwrap());
            }
        }
        if let Some(ev) = &p.track_event {
            assert_eq!(p.trusted_packet_sequence_id, Some(1));
            let track = ev.track_uuid.expect("an event names its track");
            let track_name = tracks
                .get(&track)
                .expect("the track is described before its events");
            let name = match ev.name_iid {
                Some(iid) => names
                    .get(&iid)
                    .expect("the name is interned before use")
                    .clone(),
                None => String::new(),
            };
            events.push((
                name,
                ev.r#type.unwrap(),
                p.timestamp.unwrap(),
                track_name.name.clone().unwrap_or_default(),
            ));
        }
    }
    let find = |name: &str, kind: i32| -> Vec<u64> {
        events
            .iter()
            .filter(|e| e.0 == name && e.1 == kind)
            .map(|e| e.2)
            .collect()
    };
    assert_eq!(find("gemm", SLICE_BEGIN), vec![1_500]);
    assert_eq!(find("step", SLICE_BEGIN), vec![1_000]);
    assert_eq!(find("cudaLaunchKernel", SLICE_BEGIN), vec![1_100]);
    // Every begin has its end on the same track, and the ends come at the records' end times.
    let begins = events.iter().filter(|e| e.1 == SLICE_BEGIN).count();
    let ends: Vec<u64> = events
        .iter()
        .filter(|e| e.1 == SLICE_END)
        .map(|e| e.2)
        .collect();
    assert_eq!(begins, ends.len());
    for end in [2_500, 2_000, 1_200] {
        assert!(ends.contains(&end), "an end at {end} in {ends:?}");
    }
    // The kernel and the range are on different tracks; the process has a descriptor with its pid.
    let track_of = |name: &str| {
        events
            .iter()
            .find(|e| e.0 == name)
            .map(|e| e.3.clone())
            .unwrap()
    };
    assert_ne!(track_of("gemm"), track_of("step"));
    assert!(
        tracks
            .values()
            .any(|d| d.process.as_ref().and_then(|p| p.pid) == Some(100))
    );
}

#[test]
fn chrome_output_is_json_with_the_slices() {
    let mut t = Timeline::new(ChromeWriter::new(Vec::new()));
    assert_eq!(t.read(0, &run()[..]).unwrap(), vec![]);
    let bytes = t.finish().unwrap().into_inner().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&bytes).expect("valid JSON");
    let events = v["traceEvents"].as_array().expect("traceEvents");
    let x = |name: &str| -> Vec<(f64, f64)> {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["name"] == name)
            .map(|e| (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap()))
            .collect()
    };
    // Chrome's timestamps are microseconds.
    assert_eq!(x("gemm"), vec![(1.5, 1.0)]);
    assert_eq!(x("step"), vec![(1.0, 1.0)]);
    assert_eq!(x("cudaLaunchKernel"), vec![(1.1, 0.1)]);
    assert!(
        events
            .iter()
            .any(|e| e["ph"] == "M" && e["name"] == "process_name" && e["pid"] == 100)
    );
    // The launch is tied to its kernel by a flow.
    assert_eq!(events.iter().filter(|e| e["ph"] == "s").count(), 1);
    assert_eq!(events.iter().filter(|e| e["ph"] == "f").count(), 1);
}

fn launch(name: &str, start: u64, correlation: u32) -> Record {
    Record::Api(ApiRecord {
        start,
        end: start + 100,
        domain: ApiDomain::Runtime,
        cbid: 211,
        name: Arc::from(name),
        correlation,
        process: 100,
        thread: 11,
        return_value: 0,
    })
}

fn gemm(name: &str, start: u64, correlation: u32) -> Record {
    Record::Kernel(KernelRecord {
        start,
        end: start + 1_000,
        device: 0,
        context: 1,
        stream: 7,
        correlation,
        grid_id: u64::from(correlation),
        grid: [1, 1, 1],
        block: [32, 1, 1],
        static_shared: 0,
        dynamic_shared: 0,
        registers: 8,
        graph_id: 0,
        graph_node_id: 0,
        name: Arc::from(name),
    })
}

/// The order of real CUPTI traces: device work comes before the API call that issued it. Also a call whose work
/// never comes, work with no call, and a call that does come first.
fn work_first() -> Vec<u8> {
    let mut e = Encoder::new(&StreamHeader::new(100, 130001, TimestampClock::Monotonic));
    let records = [
        gemm("k1", 1_500, 1),
        launch("cudaLaunchKernel", 1_100, 1),
        Record::Memcpy(MemcpyRecord {
            start: 3_000,
            end: 3_500,
            device: 0,
            context: 1,
            stream: 7,
            correlation: 2,
            bytes: 4096,
            kind: CopyKind::HtoD,
            src: MemoryKind::Pinned,
            dst: MemoryKind::Device,
            is_async: true,
        }),
        launch("cudaMemcpyAsync", 2_500, 2),
        // Its kernel was never recorded.
        launch("cudaLaunchKernel", 4_000, 3),
        // No call recorded for it.
        gemm("k4", 5_000, 4),
        // The call first.
        launch("cudaLaunchKernel", 6_000, 5),
        gemm("k5", 6_500, 5),
    ];
    for r in &records {
        e.push(r);
    }
    e.bytes().to_vec()
}

#[test]
fn chrome_flows_close_when_the_work_comes_before_its_call() {
    let mut t = Timeline::new(ChromeWriter::new(Vec::new()));
    assert_eq!(t.read(0, &work_first()[..]).unwrap(), vec![]);
    let bytes = t.finish().unwrap().into_inner().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&bytes).expect("valid JSON");
    let events = v["traceEvents"].as_array().expect("traceEvents");
    let ids = |ph: &str| -> Vec<u64> {
        let mut ids: Vec<u64> = events
            .iter()
            .filter(|e| e["ph"] == ph)
            .map(|e| e["id"].as_u64().unwrap())
            .collect();
        ids.sort_unstable();
        ids
    };
    // Three calls with their work: three arrows, each started and ended, none left dangling.
    assert_eq!(ids("s").len(), 3, "{v}");
    assert_eq!(ids("s"), ids("f"));
    // Each arrow starts at its call and ends at its work.
    let at = |ph: &str, ts: f64| {
        events
            .iter()
            .any(|e| e["ph"] == ph && e["ts"].as_f64() == Some(ts))
    };
    for (call, work) in [(1.1, 1.5), (2.5, 3.0), (6.0, 6.5)] {
        assert!(at("s", call) && at("f", work), "{call} -> {work}: {v}");
    }
    // Every slice is written once, paired or not.
    let mut names: Vec<&str> = events
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "Memcpy HtoD (pinned -> device)",
            "cudaLaunchKernel",
            "cudaLaunchKernel",
            "cudaLaunchKernel",
            "cudaMemcpyAsync",
            "k1",
            "k4",
            "k5"
        ]
    );
}

#[test]
fn perfetto_flows_close_when_the_work_comes_before_its_call() {
    let mut t = Timeline::new(PerfettoWriter::new(Vec::new()));
    assert_eq!(t.read(0, &work_first()[..]).unwrap(), vec![]);
    let bytes = t.finish().unwrap().into_inner().unwrap();
    let trace =
        <pb::Trace as prost::Message>::decode(&bytes[..]).expect("a valid perfetto.protos.Trace");
    let mut names: HashMap<u64, String> = HashMap::new();
    // (slice name, flow ids started, flow ids ended)
    let mut begins: Vec<(String, Vec<u64>, Vec<u64>)> = Vec::new();
    for p in &trace.packet {
        if let Some(i) = &p.interned_data {
            for n in &i.event_names {
                names.insert(n.iid.unwrap(), n.name.clone().unwrap());
            }
        }
        if let Some(ev) = &p.track_event {
            if ev.r#type == Some(SLICE_BEGIN) {
                let name = names[&ev.name_iid.unwrap()].clone();
                begins.push((name, ev.flow_ids.clone(), ev.terminating_flow_ids.clone()));
            }
        }
    }
    assert_eq!(begins.len(), 8, "every slice once: {begins:?}");
    let mut started: Vec<u64> = begins.iter().flat_map(|b| b.1.clone()).collect();
    let mut ended: Vec<u64> = begins.iter().flat_map(|b| b.2.clone()).collect();
    started.sort_unstable();
    ended.sort_unstable();
    assert_eq!(started.len(), 3, "{begins:?}");
    assert_eq!(started, ended, "every flow started is ended");
    let flows_of = |name: &str| -> (usize, usize) {
        begins
            .iter()
            .filter(|b| b.0 == name)
            .fold((0, 0), |(s, e), b| (s + b.1.len(), e + b.2.len()))
    };
    assert_eq!(flows_of("cudaLaunchKernel"), (2, 0));
    assert_eq!(flows_of("cudaMemcpyAsync"), (1, 0));
    assert_eq!(flows_of("k1"), (0, 1));
    assert_eq!(flows_of("k5"), (0, 1));
    assert_eq!(flows_of("k4"), (0, 0));
    assert_eq!(flows_of("Memcpy HtoD (pinned -> device)"), (0, 1));
}

#[test]
fn records_are_counted_per_file() {
    let whole = run();
    let mut t = Timeline::new(ChromeWriter::new(Vec::new()));
    assert_eq!(t.read(0, &whole[..]).unwrap(), vec![]);
    assert!(!t.read(1, &whole[..10]).unwrap().is_empty(), "cut short");
    assert_eq!((t.records(0), t.records(1), t.records(2)), (4, 0, 0));

    let mut a = gpu_tools_trace::report::Analysis::new();
    assert_eq!(a.read(0, &whole[..]), vec![]);
    assert!(!a.read(1, &whole[..10]).is_empty());
    assert_eq!((a.records(0), a.records(1), a.records(2)), (4, 0, 0));
}

// Counter streams on the timeline: a process and its host's counter stream, and another host's counter stream
// whose clock reads 8 ms more at the same wall-clock time.

const WALL: u64 = 1_700_000_000_000_000_000;

fn stream(pid: u32, host: &str, monotonic: u64, records: &[Record]) -> Vec<u8> {
    let mut e = Encoder::new(&StreamHeader::new(pid, 0, TimestampClock::Monotonic));
    e.push(&Record::ClockAnchor(ClockAnchor {
        monotonic,
        realtime: WALL,
        uncertainty: 40,
    }));
    e.push(&Record::ProcessInfo(ProcessInfo {
        host: host.into(),
        boot_id: format!("boot-{host}"),
        labels: vec![("RANK".into(), "0".into())],
    }));
    for r in records {
        e.push(r);
    }
    e.bytes().to_vec()
}

fn sample(start: u64, values: &[(&str, f64)]) -> Record {
    Record::CounterSample(CounterSample {
        start,
        end: start + 100_000,
        device: 0,
        values: values.iter().map(|(m, v)| (Arc::from(*m), *v)).collect(),
    })
}

fn with_counters() -> Vec<u8> {
    use gpu_tools_trace::counters::{DRAM_READ_PER_SECOND as READ, SM_ACTIVE as SM};
    let process = stream(
        100,
        "a",
        1_000_000,
        &[
            Record::ProcessStart(ProcessStart {
                pid: 100,
                parent_pid: 1,
                time: 1_000_000,
                command: "app".into(),
            }),
            gemm("gemm", 1_500_000, 0),
        ],
    );
    let counters_a = stream(
        0,
        "a",
        1_000_000,
        &[
            sample(1_000_000, &[(SM, 50.0), (READ, 1e9)]),
            sample(1_100_000, &[(SM, 60.0), (READ, 2e9)]),
            Record::CounterGap(CounterGap {
                start: 1_200_000,
                end: 1_400_000,
                device: 0,
                samples: 3,
            }),
            // No DRAM value in this one.
            sample(1_400_000, &[(SM, 70.0)]),
            Record::Notice(Notice {
                level: NoticeLevel::Info,
                text: "sampling ended".into(),
            }),
        ],
    );
    let counters_b = stream(0, "b", 9_000_000, &[sample(9_000_000, &[(SM, 10.0)])]);
    let mut w = gpu_tools_trace::file::TraceFileWriter::new(Vec::new()).unwrap();
    for bytes in [process, counters_a, counters_b] {
        let s = w.add_stream();
        w.write(s, &bytes).unwrap();
        w.close(s).unwrap();
    }
    w.finish().unwrap()
}

#[test]
fn perfetto_has_a_counter_track_per_device_and_metric_on_the_kernels_time_base() {
    let mut t = Timeline::new(PerfettoWriter::new(Vec::new()));
    assert_eq!(t.read(0, &with_counters()[..]).unwrap(), vec![]);
    let bytes = t.finish().unwrap().into_inner().unwrap();
    let counters = perfetto::counters(&bytes);
    let list: Vec<(&str, &str, &str)> = counters
        .iter()
        .map(|c| (c.group.as_str(), c.name.as_str(), c.unit.as_str()))
        .collect();
    assert_eq!(
        list,
        [
            ("GPU 0 counters [a]", "SM active (%)", "%"),
            ("GPU 0 counters [a]", "DRAM read (B/s)", "B/s"),
            ("GPU 0 counters [b]", "SM active (%)", "%"),
        ]
    );
    // Each value from its sample's start; 0 from a gap's start, where a sample lacks the metric, and after the
    // last sample.
    assert_eq!(
        counters[0].values,
        [
            (1_000_000, 50.0),
            (1_100_000, 60.0),
            (1_200_000, 0.0),
            (1_400_000, 70.0),
            (1_500_000, 0.0)
        ]
    );
    assert_eq!(
        counters[1].values,
        [
            (1_000_000, 1e9),
            (1_100_000, 2e9),
            (1_200_000, 0.0),
            (1_400_000, 0.0),
            (1_500_000, 0.0)
        ]
    );
    // Host b's samples shifted onto host a's clock, as its processes would be.
    assert_eq!(counters[2].values, [(1_000_000, 10.0), (1_100_000, 0.0)]);

    let trace = <pb::Trace as prost::Message>::decode(&bytes[..]).unwrap();
    let mut names: HashMap<u64, String> = HashMap::new();
    let mut processes: Vec<String> = Vec::new();
    let mut begins: Vec<(String, u64)> = Vec::new();
    for p in &trace.packet {
        if let Some(d) = &p.track_descriptor {
            if let Some(name) = d.process.as_ref().and_then(|p| p.process_name.clone()) {
                processes.push(name);
            }
        }
        if let Some(i) = &p.interned_data {
            for n in &i.event_names {
                names.insert(n.iid.unwrap(), n.name.clone().unwrap());
            }
        }
        if let Some(ev) = &p.track_event {
            if ev.r#type == Some(SLICE_BEGIN) {
                begins.push((names[&ev.name_iid.unwrap()].clone(), p.timestamp.unwrap()));
            }
        }
    }
    // The counter streams are no processes: groups for the process, its GPU (named with its host and rank), and the
    // two counter groups.
    assert_eq!(
        processes,
        [
            "GPU 0 (a rank 0, pid 100)",
            "GPU 0 counters [a]",
            "GPU 0 counters [b]"
        ],
        "no group for a counter stream as a process"
    );
    assert!(begins.contains(&("gemm".to_string(), 1_500_000)));
    assert!(begins.contains(&("3 samples lost".to_string(), 1_200_000)));
}

#[test]
fn chrome_has_counter_events_in_their_device_group() {
    let mut t = Timeline::new(ChromeWriter::new(Vec::new()));
    assert_eq!(t.read(0, &with_counters()[..]).unwrap(), vec![]);
    let bytes = t.finish().unwrap().into_inner().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&bytes).expect("valid JSON");
    let events = v["traceEvents"].as_array().unwrap();
    let pid_of = |group: &str| {
        events
            .iter()
            .find(|e| e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == group)
            .map(|e| e["pid"].as_u64().unwrap())
            .unwrap_or_else(|| panic!("a group {group}: {v}"))
    };
    let (a, b) = (pid_of("GPU 0 counters [a]"), pid_of("GPU 0 counters [b]"));
    assert_ne!(a, b);
    let counter = |pid: u64, name: &str| -> Vec<(f64, f64)> {
        events
            .iter()
            .filter(|e| e["ph"] == "C" && e["pid"] == pid && e["name"] == name)
            .map(|e| {
                (
                    e["ts"].as_f64().unwrap(),
                    e["args"]["value"].as_f64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(
        counter(a, "SM active (%)"),
        [
            (1000.0, 50.0),
            (1100.0, 60.0),
            (1200.0, 0.0),
            (1400.0, 70.0),
            (1500.0, 0.0)
        ]
    );
    assert_eq!(counter(b, "SM active (%)"), [(1000.0, 10.0), (1100.0, 0.0)]);
    assert_eq!(counter(a, "DRAM read (B/s)")[1], (1100.0, 2e9));
    // The kernel on the same time base.
    assert!(
        events
            .iter()
            .any(|e| e["ph"] == "X" && e["name"] == "gemm" && e["ts"].as_f64() == Some(1500.0))
    );
    let gaps: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["cat"] == "counter_gap")
        .collect();
    assert_eq!(gaps.len(), 1);
    assert_eq!(
        (gaps[0]["ts"].as_f64(), gaps[0]["dur"].as_f64()),
        (Some(1200.0), Some(200.0))
    );
    assert_eq!(gaps[0]["pid"].as_u64(), Some(a));
}

/// The names of a Chrome export's tracks (`thread_name` metadata).
fn chrome_track_names(trace: &[u8]) -> Vec<String> {
    let mut t = Timeline::new(ChromeWriter::new(Vec::new()));
    assert_eq!(t.read(0, trace).unwrap(), vec![]);
    let bytes = t.finish().unwrap().into_inner().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&bytes).expect("valid JSON");
    v["traceEvents"]
        .as_array()
        .expect("traceEvents")
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .filter_map(|e| e["args"]["name"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn thread_tracks_say_the_linux_thread_id_where_the_stream_has_it() {
    // The injection library's streams say that their thread fields are Linux thread ids (`top -H`, py-spy).
    let linux = chrome_track_names(&run_with(
        StreamHeader::new(100, 130001, TimestampClock::Monotonic).with_thread_ids(ThreadIds::Linux),
    ));
    assert!(
        linux.iter().any(|n| n == "TID 11 CUDA runtime"),
        "{linux:?}"
    );
    assert!(linux.iter().any(|n| n == "TID 11 NVTX"), "{linux:?}");
    assert!(!linux.iter().any(|n| n.starts_with("thread ")), "{linux:?}");
    // A stream written before the header said it (CUPTI's own pthread-based ids): labelled as before.
    let older = chrome_track_names(&run());
    assert!(
        older.iter().any(|n| n == "thread 11 CUDA runtime"),
        "{older:?}"
    );
    assert!(older.iter().any(|n| n == "thread 11 NVTX"), "{older:?}");
    assert!(!older.iter().any(|n| n.starts_with("TID ")), "{older:?}");

    // Perfetto names its tracks the same way.
    let mut t = Timeline::new(PerfettoWriter::new(Vec::new()));
    let trace = run_with(
        StreamHeader::new(100, 130001, TimestampClock::Monotonic).with_thread_ids(ThreadIds::Linux),
    );
    assert_eq!(t.read(0, &trace[..]).unwrap(), vec![]);
    let bytes = t.finish().unwrap().into_inner().unwrap();
    let trace = <pb::Trace as prost::Message>::decode(&bytes[..]).expect("a Perfetto trace");
    let names: Vec<String> = trace
        .packet
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref()?.name.clone())
        .collect();
    assert!(
        names.iter().any(|n| n == "TID 11 CUDA runtime"),
        "{names:?}"
    );
}

// Processes that share a pid: two streams of one file (two PID namespaces, or a pid used again), and pids whose bits
// met those of another file's or of a GPU group's number.

/// A stream of process `pid` running `tag` (its command): a call `call_TAG` and a kernel `kernel_TAG` on GPU 0.
fn tagged(pid: u32, tag: &str) -> Vec<u8> {
    tagged_ending(pid, tag, None)
}

/// [`tagged`], its stream ended at 9,000 ns for `end` (none: no end record).
fn tagged_ending(pid: u32, tag: &str, end: Option<EndReason>) -> Vec<u8> {
    let mut e = Encoder::new(&StreamHeader::new(pid, 0, TimestampClock::Monotonic));
    e.push(&Record::ProcessStart(ProcessStart {
        pid,
        parent_pid: 1,
        time: 1_000,
        command: tag.into(),
    }));
    e.push(&Record::Api(ApiRecord {
        start: 1_100,
        end: 1_200,
        domain: ApiDomain::Runtime,
        cbid: 1,
        name: Arc::from(format!("call_{tag}")),
        correlation: 0,
        process: pid,
        thread: 1,
        return_value: 0,
    }));
    e.push(&gemm(&format!("kernel_{tag}"), 1_500, 0));
    if let Some(reason) = end {
        let records = e.records();
        e.push(&Record::ProcessEnd(ProcessEnd {
            time: 9_000,
            reason,
            records,
            dropped: 0,
            skipped: 0,
            callback_panics: 0,
        }));
    }
    e.bytes().to_vec()
}

/// A trace file of the streams of `processes` (pid, tag), in order.
fn file_of(processes: &[(u32, &str)]) -> Vec<u8> {
    let mut w = gpu_tools_trace::file::TraceFileWriter::new(Vec::new()).unwrap();
    for (pid, tag) in processes {
        let s = w.add_stream();
        w.write(s, &tagged(*pid, tag)).unwrap();
        w.close(s).unwrap();
    }
    w.finish().unwrap()
}

/// File 0: pid 100 twice, pid 65636 (100 + 2^16) and pid 4194404 (100 + 2^22); file 1: pid 100.
fn shared_pids() -> [Vec<u8>; 2] {
    [
        file_of(&[(100, "a"), (100, "b"), (65_636, "c"), (4_194_404, "d")]),
        file_of(&[(100, "e")]),
    ]
}

const TAGS: [&str; 5] = ["a", "b", "c", "d", "e"];

#[test]
fn chrome_gives_every_process_and_gpu_group_a_pid_of_its_own() {
    let mut t = Timeline::new(ChromeWriter::new(Vec::new()));
    for (i, file) in shared_pids().iter().enumerate() {
        assert_eq!(t.read(i as u32, &file[..]).unwrap(), vec![]);
    }
    let bytes = t.finish().unwrap().into_inner().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&bytes).expect("valid JSON");
    let events = v["traceEvents"].as_array().expect("traceEvents");
    // A viewer's processes: one per pid, named by the last `process_name` of that pid.
    let mut groups: HashMap<u64, String> = HashMap::new();
    for e in events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
    {
        let name = e["args"]["name"].as_str().unwrap().to_string();
        groups.insert(e["pid"].as_u64().unwrap(), name);
    }
    let pid_of = |slice: &str| -> u64 {
        events
            .iter()
            .find(|e| e["ph"] == "X" && e["name"] == slice)
            .and_then(|e| e["pid"].as_u64())
            .unwrap_or_else(|| panic!("a slice {slice}"))
    };
    let mut processes = Vec::new();
    let mut gpus = Vec::new();
    for tag in TAGS {
        let (call, kernel) = (
            pid_of(&format!("call_{tag}")),
            pid_of(&format!("kernel_{tag}")),
        );
        // Each call in its own process's group, named with its command; each kernel in a GPU group.
        let group = &groups[&call];
        assert!(
            group.starts_with("process ") && group.contains(&format!(" {tag}")),
            "call_{tag} is in the group {group:?}: {groups:?}"
        );
        assert!(groups[&kernel].starts_with("GPU 0 (pid "), "{groups:?}");
        processes.push(call);
        gpus.push(kernel);
    }
    let mut all: Vec<u64> = processes.iter().chain(&gpus).copied().collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(
        all.len(),
        10,
        "5 process groups and 5 GPU groups, each its own pid: processes {processes:?}, GPUs {gpus:?}"
    );
    assert_eq!(groups.len(), 10, "{groups:?}");
    // The first process of a pid keeps it.
    assert_eq!(processes[0], 100);
}

#[test]
fn perfetto_gives_every_process_and_gpu_group_a_pid_of_its_own() {
    let mut t = Timeline::new(PerfettoWriter::new(Vec::new()));
    for (i, file) in shared_pids().iter().enumerate() {
        assert_eq!(t.read(i as u32, &file[..]).unwrap(), vec![]);
    }
    let bytes = t.finish().unwrap().into_inner().unwrap();
    let trace = <pb::Trace as prost::Message>::decode(&bytes[..]).expect("a Perfetto trace");
    let groups: Vec<(i32, String)> = trace
        .packet
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref()?.process.clone())
        .map(|p| (p.pid.unwrap(), p.process_name.unwrap_or_default()))
        .collect();
    assert_eq!(groups.len(), 10, "{groups:?}");
    let mut pids: Vec<i32> = groups.iter().map(|g| g.0).collect();
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(pids.len(), 10, "each group its own pid: {groups:?}");
    assert!(pids.iter().all(|&p| p > 0), "{groups:?}");
}

#[test]
fn ranks_in_containers_of_their_own_are_each_a_group_of_their_own() {
    // Two hosts of two ranks, each rank in a PID namespace of its own: every rank is pid 1.
    let spec = gpu_tools_testing::job::JobSpec {
        hosts: 2,
        ranks_per_host: 2,
        steps: 3,
        pid_namespaces: true,
        ..gpu_tools_testing::job::JobSpec::fixture()
    };
    let mut t = Timeline::new(ChromeWriter::new(Vec::new()));
    for h in 0..2 {
        assert_eq!(t.read(h, &spec.host_file(h)[..]).unwrap(), vec![]);
    }
    let bytes = t.finish().unwrap().into_inner().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&bytes).expect("valid JSON");
    // A viewer's processes: one per pid, named by the last `process_name` of that pid.
    let mut groups: HashMap<u64, String> = HashMap::new();
    for e in v["traceEvents"]
        .as_array()
        .expect("traceEvents")
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
    {
        groups.insert(
            e["pid"].as_u64().unwrap(),
            e["args"]["name"].as_str().unwrap().to_string(),
        );
    }
    let mut names: Vec<&str> = groups.values().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "GPU 0 (h0 rank 0, pid 1)",
            "GPU 0 (h0 rank 1, pid 1)",
            "GPU 0 (h1 rank 2, pid 1)",
            "GPU 0 (h1 rank 3, pid 1)",
            "h0 rank 0 (local 0): process 1 python train.py --rank 0",
            "h0 rank 1 (local 1): process 1 python train.py --rank 1",
            "h1 rank 2 (local 0): process 1 python train.py --rank 2",
            "h1 rank 3 (local 1): process 1 python train.py --rank 3",
        ]
    );
}

// How a process's stream ended: at a fatal signal (the mark Nsight Systems gives a crashed process), normally, or
// with no end record at all (cut off).

/// A file of three processes: pid 100 (`crash`) whose stream ended at signal 11 at 9,000 ns, pid 200 (`fine`) that
/// exited at 9,000 ns, pid 300 (`cut`) whose stream has no end record (its last record ends at 2,500 ns).
fn ends() -> Vec<u8> {
    let mut w = gpu_tools_trace::file::TraceFileWriter::new(Vec::new()).unwrap();
    for (pid, tag, reason) in [
        (100, "crash", Some(EndReason::Signal(11))),
        (200, "fine", Some(EndReason::Exit)),
        (300, "cut", None),
    ] {
        let s = w.add_stream();
        w.write(s, &tagged_ending(pid, tag, reason)).unwrap();
        w.close(s).unwrap();
    }
    w.finish().unwrap()
}

#[test]
fn chrome_marks_a_process_that_crashed_and_one_cut_off_at_their_end() {
    let mut t = Timeline::new(ChromeWriter::new(Vec::new()));
    assert_eq!(t.read(0, &ends()[..]).unwrap(), vec![]);
    let bytes = t.finish().unwrap().into_inner().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&bytes).expect("valid JSON");
    let events = v["traceEvents"].as_array().expect("traceEvents");
    // A viewer's processes: one per pid, named by the last `process_name` of that pid.
    let mut groups: HashMap<u64, String> = HashMap::new();
    for e in events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
    {
        groups.insert(
            e["pid"].as_u64().unwrap(),
            e["args"]["name"].as_str().unwrap().to_string(),
        );
    }
    assert_eq!(
        groups[&100], "process 100 crash (crashed: signal 11 (SIGSEGV))",
        "{groups:?}"
    );
    assert_eq!(groups[&200], "process 200 fine", "{groups:?}");
    assert_eq!(groups[&300], "process 300 cut", "{groups:?}");
    // Process-scoped instants (no thread of their own), at the end time, in the process's group.
    let marks: Vec<(u64, String, f64, String)> = events
        .iter()
        .filter(|e| e["ph"] == "i" && e["s"] == "p")
        .map(|e| {
            (
                e["pid"].as_u64().unwrap(),
                e["name"].as_str().unwrap().to_string(),
                e["ts"].as_f64().unwrap(),
                e["args"]["end"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        marks,
        [
            (
                100,
                "ended at signal 11 (SIGSEGV)".to_string(),
                9.0,
                "signal 11 (SIGSEGV)".to_string()
            ),
            (
                300,
                "trace ends with no end record".to_string(),
                2.5,
                "none".to_string()
            ),
        ],
        "{events:#?}"
    );
    // Nothing else is marked: the process that exited has no instant.
    assert_eq!(events.iter().filter(|e| e["ph"] == "i").count(), 2);
}

#[test]
fn perfetto_marks_a_process_that_crashed_and_one_cut_off_at_their_end() {
    let mut t = Timeline::new(PerfettoWriter::new(Vec::new()));
    assert_eq!(t.read(0, &ends()[..]).unwrap(), vec![]);
    let bytes = t.finish().unwrap().into_inner().unwrap();
    let trace = <pb::Trace as prost::Message>::decode(&bytes[..]).expect("a Perfetto trace");
    // Each process's name as last described, and its track.
    let mut processes: HashMap<i32, (u64, String)> = HashMap::new();
    let mut names: HashMap<u64, String> = HashMap::new();
    let mut instants: Vec<(u64, String, u64)> = Vec::new();
    for p in &trace.packet {
        if let Some(d) = &p.track_descriptor
            && let Some(process) = &d.process
        {
            processes.insert(
                process.pid.unwrap(),
                (
                    d.uuid.unwrap(),
                    process.process_name.clone().unwrap_or_default(),
                ),
            );
        }
        if let Some(i) = &p.interned_data {
            for n in &i.event_names {
                names.insert(n.iid.unwrap(), n.name.clone().unwrap());
            }
        }
        if let Some(ev) = &p.track_event
            && ev.r#type == Some(3)
        {
            instants.push((
                ev.track_uuid.unwrap(),
                names[&ev.name_iid.unwrap()].clone(),
                p.timestamp.unwrap(),
            ));
        }
    }
    assert_eq!(
        processes[&100].1, "process 100 crash (crashed: signal 11 (SIGSEGV))",
        "{processes:?}"
    );
    assert_eq!(processes[&200].1, "process 200 fine");
    assert_eq!(processes[&300].1, "process 300 cut");
    // On the process's own track, at the end time.
    assert_eq!(
        instants,
        [
            (
                processes[&100].0,
                "ended at signal 11 (SIGSEGV)".to_string(),
                9_000
            ),
            (
                processes[&300].0,
                "trace ends with no end record".to_string(),
                2_500
            ),
        ]
    );
}
