//! The Chrome trace (JSON) writer of `rocprof`, which times its own HIP workload with rocprofiler v2 and holds
//! those few events in memory. (`trace` and `export` stream theirs through the library's
//! `gpu_tools::trace::export::ChromeWriter`.) The output opens in Perfetto (<https://ui.perfetto.dev>) and
//! `chrome://tracing`.
//!
//! The format: `{"traceEvents": [...]}` with complete events (`"ph": "X"`, `ts` and `dur` in microseconds),
//! metadata events (`"ph": "M"`) that name processes and threads (the tracks) and set their order, and flow events
//! (`"ph": "s"` / `"f"`) that draw an arrow from a host call to the device work it caused.

use std::io::Write;

use serde::Serialize;
use serde_json::{Map, Value};

/// One trace event.
#[derive(Debug, Clone, Serialize)]
struct Event {
    name: String,
    ph: &'static str,
    pid: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    tid: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cat: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bp: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    args: Map<String, Value>,
}

impl Event {
    fn new(name: impl Into<String>, ph: &'static str, pid: u64) -> Self {
        Event {
            name: name.into(),
            ph,
            pid,
            tid: None,
            cat: None,
            ts: None,
            dur: None,
            id: None,
            bp: None,
            s: None,
            args: Map::new(),
        }
    }
}

/// A track: a process id and a thread id as the trace viewer groups them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Track {
    /// Process (a group of tracks, e.g. one GPU).
    pub pid: u64,
    /// Thread (one track, e.g. one stream).
    pub tid: u64,
}

/// Collects events and writes them as one JSON document.
#[derive(Debug, Default)]
pub struct ChromeTrace {
    events: Vec<Event>,
    /// Subtracted from every timestamp, so the numbers stay small (nanoseconds).
    origin_ns: u64,
}

/// Nanoseconds to the format's microseconds.
fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

impl ChromeTrace {
    /// An empty trace whose time 0 is `origin_ns`.
    pub fn new(origin_ns: u64) -> Self {
        ChromeTrace {
            events: Vec::new(),
            origin_ns,
        }
    }

    fn rel(&self, ns: u64) -> f64 {
        us(ns.saturating_sub(self.origin_ns))
    }

    /// Names a process group (`"GPU 0"`) and sets its place in the list.
    pub fn name_process(&mut self, pid: u64, name: &str, sort_index: i64) {
        let mut e = Event::new("process_name", "M", pid);
        e.args.insert("name".into(), name.into());
        self.events.push(e);
        let mut e = Event::new("process_sort_index", "M", pid);
        e.args.insert("sort_index".into(), sort_index.into());
        self.events.push(e);
    }

    /// Names a track (`"stream 7"`) and sets its place within its process.
    pub fn name_track(&mut self, track: Track, name: &str, sort_index: i64) {
        let mut e = Event::new("thread_name", "M", track.pid);
        e.tid = Some(track.tid);
        e.args.insert("name".into(), name.into());
        self.events.push(e);
        let mut e = Event::new("thread_sort_index", "M", track.pid);
        e.tid = Some(track.tid);
        e.args.insert("sort_index".into(), sort_index.into());
        self.events.push(e);
    }

    /// A complete event (`"ph": "X"`) from `start_ns` to `end_ns` (an end before the start gives duration 0).
    pub fn complete(
        &mut self,
        track: Track,
        name: &str,
        category: &'static str,
        start_ns: u64,
        end_ns: u64,
        args: Map<String, Value>,
    ) {
        let mut e = Event::new(name, "X", track.pid);
        e.tid = Some(track.tid);
        e.cat = Some(category);
        e.ts = Some(self.rel(start_ns));
        e.dur = Some(us(end_ns.saturating_sub(start_ns)));
        e.args = args;
        self.events.push(e);
    }

    /// Writes `{"traceEvents": [...], "displayTimeUnit": "ns"}`.
    pub fn write_to(&self, out: impl Write) -> std::io::Result<()> {
        #[derive(Serialize)]
        struct Document<'a> {
            #[serde(rename = "traceEvents")]
            trace_events: &'a [Event],
            #[serde(rename = "displayTimeUnit")]
            display_time_unit: &'static str,
        }
        let mut out = std::io::BufWriter::new(out);
        serde_json::to_writer(
            &mut out,
            &Document {
                trace_events: &self.events,
                display_time_unit: "ns",
            },
        )?;
        out.write_all(b"\n")?;
        out.flush()
    }
}
