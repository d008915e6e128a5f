//! ROCTx through the tool library, as NVTX comes on NVIDIA: each range a named start and an end sharing an id,
//! nested per thread, a range started on one thread and stopped on another, a mark an instant, a range never closed
//! a start alone; each once, whether the SDK writes range records (rocprofiler-sdk 1.0) or only the calls (an SDK
//! from before `MARKER_CORE_RANGE_API`, `RPSDK_DOUBLE_NO_CORE_RANGE=1`), and whether the calls are asked for too.

mod common;

use std::collections::BTreeMap;

use common::trace_python;
use gpu_tools::trace::{ApiDomain, MarkerKind, Record};

/// Ranges pushed and popped on two threads, popped on one while the other's is open; a mark; a range started on
/// the main thread and stopped on another; a range never closed.
const PROGRAM: &str = r#"
import threading
d.rpsdk_roctx_start.restype = ctypes.c_uint64
d.rpsdk_roctx_stop.argtypes = [ctypes.c_uint64]
pushed, popped = threading.Event(), threading.Event()
def worker():
    d.rpsdk_roctx_push(b"worker")
    pushed.set()
    popped.wait()
    d.rpsdk_roctx_pop()
d.rpsdk_start_runtime()
d.rpsdk_roctx_push(b"outer")
d.rpsdk_roctx_push(b"inner")
d.rpsdk_roctx_mark(b"here")
d.rpsdk_roctx_pop()
w = threading.Thread(target=worker)
w.start()
pushed.wait()
d.rpsdk_roctx_pop()
popped.set()
w.join()
rid = d.rpsdk_roctx_start(b"across threads")
s = threading.Thread(target=d.rpsdk_roctx_stop, args=(rid,))
s.start()
s.join()
d.rpsdk_roctx_push(b"never closed")
d.rpsdk_finalize()
"#;

/// The ROCTx calls `PROGRAM` makes: 4 pushes, 3 pops, a mark, a start, a stop.
const CALLS: usize = 10;

/// A range as the trace gives it: thread, start, end (`None` for one never closed).
type Range = (u32, u64, Option<u64>);

/// The program's ranges by name, and its marks, checking that each id starts once and ends at most once, after
/// its start, and that nothing ends that did not start.
fn ranges(records: &[Record]) -> (BTreeMap<String, Range>, Vec<(String, u32)>) {
    let mut by_id: BTreeMap<u32, (String, Range)> = BTreeMap::new();
    let mut marks = Vec::new();
    for r in records {
        let Record::Marker(m) = r else { continue };
        assert!(m.domain.is_empty(), "{m:?}");
        match m.kind {
            MarkerKind::Start => {
                let old = by_id.insert(m.id, (m.name.clone(), (m.thread, m.time, None)));
                assert!(old.is_none(), "id {} started twice", m.id);
            }
            MarkerKind::End => {
                let (name, range) = by_id.get_mut(&m.id).expect("an end after its start");
                assert!(range.2.is_none(), "{name} ended twice");
                assert!(m.time >= range.1, "{name} ends before it starts");
                assert!(m.name.is_empty());
                range.2 = Some(m.time);
            }
            MarkerKind::Instant => marks.push((m.name.clone(), m.thread)),
            other => panic!("{other:?}"),
        }
    }
    let mut named = BTreeMap::new();
    for (name, range) in by_id.into_values() {
        assert!(named.insert(name.clone(), range).is_none(), "{name} twice");
    }
    (named, marks)
}

fn check(records: &[Record], calls: usize) {
    let (named, marks) = ranges(records);
    let names: Vec<&str> = named.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        ["across threads", "inner", "never closed", "outer", "worker"]
    );
    let [across, inner, never, outer, worker] =
        ["across threads", "inner", "never closed", "outer", "worker"].map(|n| named[n]);
    let main = outer.0;
    assert_eq!(marks, [("here".to_string(), main)]);
    // Nesting on the main thread; the worker's range on its own thread, open while the outer one ended.
    assert!(
        outer.1 <= inner.1 && inner.2 <= outer.2,
        "{outer:?} {inner:?}"
    );
    assert_eq!((inner.0, across.0, never.0), (main, main, main));
    assert_ne!(worker.0, main);
    assert!(worker.1 <= outer.2.unwrap() && outer.2 <= worker.2);
    // Closed in order; the last never.
    assert!(outer.2 <= Some(across.1) && across.2 <= Some(never.1));
    assert!(across.2.is_some() && never.2.is_none());
    // Within the process's start and end.
    let start = records.iter().find_map(|r| match r {
        Record::ProcessStart(s) => Some(s.time),
        _ => None,
    });
    let Some(Record::ProcessEnd(end)) = records.last() else {
        panic!("the stream ends with its end record")
    };
    assert!(start <= Some(outer.1) && across.2 <= Some(end.time));
    assert_eq!((end.dropped, end.callback_panics), (0, 0));
    let marker_calls = records
        .iter()
        .filter(|r| matches!(r, Record::Api(a) if a.domain == ApiDomain::Marker))
        .count();
    assert_eq!(marker_calls, calls);
}

#[test]
fn roctx_ranges_come_as_named_nested_ranges() {
    let records = trace_python("ranges", PROGRAM, "nvtx", &[]);
    check(&records, 0);
}

#[test]
fn roctx_calls_come_beside_the_ranges_with_the_runtime_kind() {
    let records = trace_python("ranges-calls", PROGRAM, "nvtx,runtime", &[]);
    check(&records, CALLS);
}

#[test]
fn an_sdk_without_range_records_gives_the_same_ranges_from_the_calls() {
    let old = [("RPSDK_DOUBLE_NO_CORE_RANGE", "1")];
    let records = trace_python("calls", PROGRAM, "nvtx", &old);
    check(&records, 0);
    let records = trace_python("calls-runtime", PROGRAM, "nvtx,runtime", &old);
    check(&records, CALLS);
}

#[test]
fn an_sdk_that_refuses_range_records_gives_the_same_ranges_from_the_calls() {
    // Kind 32 named but refused after the range callbacks were configured: those stay, and are not read.
    let refused = [("RPSDK_DOUBLE_REFUSE_BUFFER_KIND", "32")];
    let records = trace_python("refused", PROGRAM, "nvtx", &refused);
    check(&records, 0);
}
