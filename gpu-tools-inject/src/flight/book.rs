//! The flight recorder's account: per stream, the launches made on it and the last one the program's own
//! synchronisation says has finished; the synchronisation calls in progress; the events recorded (which stream's
//! launches each marks). Plain data, fed by the launch and synchronisation callbacks (`super::on_event`) and read
//! into a report (`super::service`); nothing here calls the driver.

use std::collections::{HashMap, VecDeque};
use std::ffi::CStr;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use gpu_tools_injection::flight::{
    FlightReport, LISTED_PER_STREAM, Launch, StreamReport, StreamState, Wait,
};

/// The most launches kept per stream: a stream with more launches not known to have finished keeps the newest,
/// and counts the rest.
pub(crate) const KEPT_PER_STREAM: usize = 4096;

/// A hasher for the account's keys, which are addresses (streams, events, graphs, name strings): one multiply, not
/// SipHash, since every launch looks two up while the program waits in its launch call.
#[derive(Default)]
pub(crate) struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type ByAddress<V> = HashMap<usize, V, BuildHasherDefault<AddressHasher>>;

/// One launch as recorded.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub seq: u64,
    pub at_ns: u64,
    pub thread: u32,
    pub correlation: u32,
    /// The executable graph of a graph launch (0 for a kernel).
    pub graph: usize,
    pub name: Arc<str>,
}

impl Entry {
    fn launch(&self) -> Launch {
        Launch {
            seq: self.seq,
            at_ns: self.at_ns,
            thread: self.thread,
            correlation: self.correlation,
            graph: self.graph as u64,
            name: self.name.to_string(),
        }
    }
}

/// One stream's launches.
#[derive(Debug, Default)]
struct StreamLog {
    /// The context it belongs to, and CUPTI's id of it.
    context: usize,
    context_id: u32,
    /// Launches made on it (the last one's number).
    launched: u64,
    /// The number of the last launch known to have finished.
    done: u64,
    /// Launches after `done`, oldest first (at most [`KEPT_PER_STREAM`]), and the last one known finished.
    kept: VecDeque<Entry>,
    last_done: Option<Entry>,
    destroyed: bool,
}

impl StreamLog {
    /// Launches up to `seq` have finished.
    fn finished_up_to(&mut self, seq: u64) {
        if seq <= self.done {
            return;
        }
        self.done = seq.min(self.launched);
        while self.kept.front().is_some_and(|e| e.seq <= self.done) {
            self.last_done = self.kept.pop_front();
        }
    }
}

/// What a synchronisation call in progress waits for, with the launch numbers it covers (taken at its entry).
#[derive(Debug, Clone)]
struct Pending {
    call: &'static str,
    /// The stream it names (or the event's stream), for the report.
    stream: Option<usize>,
    since_ns: u64,
    /// (stream, launch number) pairs its success says have finished.
    covers: Vec<(usize, u64)>,
    /// A query: only its success says anything (a synchronisation's success always does).
    query: bool,
}

/// The recorder's account of one process.
#[derive(Debug, Default)]
pub(crate) struct Book {
    pub since_ns: u64,
    launches: u64,
    streams: ByAddress<StreamLog>,
    /// Event → (stream, launch number it marks).
    events: ByAddress<(usize, u64)>,
    /// Thread → the synchronisation call it is inside.
    pending: HashMap<u32, Pending>,
    /// Executable graph → its kernels' names.
    graphs: ByAddress<Arc<str>>,
    /// Names interned by content (the driver's strings are valid during a callback only).
    names: HashMap<Box<str>, Arc<str>>,
    /// The name last seen at each string address, checked byte for byte before it is used again (the address of a
    /// kernel's name is the same at each of its launches; were it a buffer the driver reuses, the check finds the
    /// other name).
    by_address: ByAddress<Arc<str>>,
    /// Why the recorder stopped, if it did.
    pub stopped: Option<String>,
}

/// Whom a synchronisation call concerns, as read at its entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyncTarget {
    Stream(usize),
    Event(usize),
    /// Every stream of the context.
    Context(usize),
}

impl Book {
    pub fn new(since_ns: u64) -> Book {
        Book {
            since_ns,
            ..Book::default()
        }
    }

    fn intern(&mut self, name: &str) -> Arc<str> {
        if let Some(n) = self.names.get(name) {
            return Arc::clone(n);
        }
        let n: Arc<str> = Arc::from(name);
        self.names.insert(name.into(), Arc::clone(&n));
        n
    }

    /// The name of a kernel whose driver string is `name`: the one interned for its address when the bytes are
    /// the same, else interned anew.
    fn kernel_name(&mut self, name: &CStr) -> Arc<str> {
        let address = name.as_ptr() as usize;
        if let Some(n) = self.by_address.get(&address) {
            if n.as_bytes() == name.to_bytes() {
                return Arc::clone(n);
            }
        }
        let n = self.intern(&name.to_string_lossy());
        self.by_address.insert(address, Arc::clone(&n));
        n
    }

    /// A kernel launch (`graph` 0) or a graph launch on `stream`.
    #[allow(clippy::too_many_arguments)]
    pub fn launch(
        &mut self,
        stream: usize,
        context: usize,
        context_id: u32,
        thread: u32,
        correlation: u32,
        at_ns: u64,
        graph: usize,
        kernel: Option<&CStr>,
    ) {
        let name = match (graph, kernel) {
            (0, Some(k)) => self.kernel_name(k),
            (0, None) => self.intern("(kernel name unknown)"),
            (g, _) => match self.graphs.get(&g) {
                Some(n) => Arc::clone(n),
                None => {
                    self.intern("graph (its kernels unknown: made before the recorder started)")
                }
            },
        };
        self.launches += 1;
        let log = self.streams.entry(stream).or_default();
        log.context = context;
        log.context_id = context_id;
        log.destroyed = false;
        log.launched += 1;
        let entry = Entry {
            seq: log.launched,
            at_ns,
            thread,
            correlation,
            graph,
            name,
        };
        if log.kept.len() == KEPT_PER_STREAM {
            log.kept.pop_front();
        }
        log.kept.push_back(entry);
    }

    /// An event recorded on `stream`: it marks the stream's launches so far.
    pub fn event_recorded(&mut self, event: usize, stream: usize) {
        let seq = self.streams.get(&stream).map_or(0, |s| s.launched);
        self.events.insert(event, (stream, seq));
    }

    /// A thread enters a synchronisation call (`query`: one whose success alone says the work finished).
    pub fn sync_enter(
        &mut self,
        thread: u32,
        call: &'static str,
        target: SyncTarget,
        query: bool,
        at_ns: u64,
    ) {
        let (stream, covers) = match target {
            SyncTarget::Stream(s) => (
                Some(s),
                vec![(s, self.streams.get(&s).map_or(0, |l| l.launched))],
            ),
            SyncTarget::Event(e) => match self.events.get(&e) {
                Some(&(s, seq)) => (Some(s), vec![(s, seq)]),
                None => (None, Vec::new()),
            },
            SyncTarget::Context(c) => (
                None,
                self.streams
                    .iter()
                    .filter(|(_, l)| l.context == c)
                    .map(|(&s, l)| (s, l.launched))
                    .collect(),
            ),
        };
        self.pending.insert(
            thread,
            Pending {
                call,
                stream,
                since_ns: at_ns,
                covers,
                query,
            },
        );
    }

    /// The thread's synchronisation call returned `ok` (`CUDA_SUCCESS`).
    pub fn sync_exit(&mut self, thread: u32, ok: bool) {
        let Some(p) = self.pending.remove(&thread) else {
            return;
        };
        if !ok {
            return;
        }
        for (stream, seq) in p.covers {
            if let Some(log) = self.streams.get_mut(&stream) {
                log.finished_up_to(seq);
            }
        }
    }

    /// The driver said `stream` had no work left when its launches numbered up to `seq` had been made.
    pub fn idle_at(&mut self, stream: usize, seq: u64) {
        if let Some(log) = self.streams.get_mut(&stream) {
            log.finished_up_to(seq);
        }
    }

    pub fn stream_destroyed(&mut self, stream: usize) {
        if let Some(log) = self.streams.get_mut(&stream) {
            log.destroyed = true;
        }
        self.events.retain(|_, (s, _)| *s != stream);
    }

    /// A context is being destroyed: its streams with it (the default stream included, which no stream
    /// destruction names), so that no report makes the dead context current to ask about them.
    pub fn context_destroyed(&mut self, context: usize) {
        let gone: Vec<usize> = self
            .streams
            .iter_mut()
            .filter(|(_, log)| log.context == context)
            .map(|(&stream, log)| {
                log.destroyed = true;
                stream
            })
            .collect();
        self.events.retain(|_, (s, _)| !gone.contains(s));
    }

    /// The kernels of an executable graph made while recording, for its launches' names.
    pub fn graph_made(&mut self, exec: usize, kernels: &str) {
        let n = self.intern(kernels);
        self.graphs.insert(exec, n);
    }

    pub fn graph_destroyed(&mut self, exec: usize) {
        self.graphs.remove(&exec);
    }

    /// The streams to ask the driver about: (stream, context, launches made so far) of those with launches not
    /// known to have finished.
    pub fn to_ask(&self) -> Vec<(usize, usize, u64)> {
        self.streams
            .iter()
            .filter(|(_, l)| !l.destroyed && l.launched > l.done)
            .map(|(&s, l)| (s, l.context, l.launched))
            .collect()
    }

    /// The report, with the driver's answers for the streams asked (`states`).
    pub fn report(
        &self,
        pid: u32,
        now_ns: u64,
        states: &HashMap<usize, StreamState>,
    ) -> FlightReport {
        let mut streams: Vec<StreamReport> = self
            .streams
            .iter()
            .map(|(&s, l)| {
                let unfinished = l.launched - l.done;
                StreamReport {
                    stream: s as u64,
                    context: l.context_id,
                    state: if l.destroyed {
                        StreamState::Destroyed
                    } else if unfinished == 0 {
                        StreamState::Idle
                    } else {
                        states.get(&s).cloned().unwrap_or_default()
                    },
                    launched: l.launched,
                    unfinished: listed(&l.kept),
                    unfinished_count: unfinished,
                    last_finished: l.last_done.as_ref().map(Entry::launch),
                }
            })
            .collect();
        // The streams with work left first, then by handle.
        streams.sort_by_key(|s| (s.unfinished_count == 0, s.stream));
        let mut waits: Vec<Wait> = self
            .pending
            .iter()
            .filter(|(_, p)| !p.query)
            .map(|(&thread, p)| Wait {
                thread,
                call: p.call.to_string(),
                stream: p.stream.map(|s| s as u64),
                since_ns: p.since_ns,
            })
            .collect();
        waits.sort_by_key(|w| (w.since_ns, w.thread));
        FlightReport {
            pid,
            now_ns,
            since_ns: self.since_ns,
            launches: self.launches,
            stopped: self.stopped.clone(),
            streams,
            waits,
        }
    }
}

/// The launches a report lists: all, or the oldest and the newest halves of [`LISTED_PER_STREAM`] (a stream stuck
/// on one kernel has it among the oldest; a thread that waits since its last launch has that among the newest).
fn listed(kept: &VecDeque<Entry>) -> Vec<Launch> {
    if kept.len() <= LISTED_PER_STREAM {
        return kept.iter().map(Entry::launch).collect();
    }
    let half = LISTED_PER_STREAM / 2;
    kept.iter()
        .take(half)
        .chain(kept.iter().skip(kept.len() - half))
        .map(Entry::launch)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book_with(stream: usize, n: u32) -> Book {
        let mut b = Book::new(10);
        for i in 1..=n {
            let name = std::ffi::CString::new(format!("k{i}")).unwrap();
            b.launch(stream, 0xc0, 1, 100, i, 1000 + u64::from(i), 0, Some(&name));
        }
        b
    }

    #[test]
    fn a_stream_synchronisation_marks_the_launches_before_it_finished() {
        let mut b = book_with(7, 5);
        b.sync_enter(
            100,
            "cuStreamSynchronize",
            SyncTarget::Stream(7),
            false,
            2000,
        );
        b.launch(7, 0xc0, 1, 101, 6, 2100, 0, Some(c"k6"));
        let r = b.report(1, 3000, &HashMap::new());
        assert_eq!(r.waits.len(), 1, "the thread waits");
        assert_eq!(r.streams[0].unfinished_count, 6);
        b.sync_exit(100, true);
        let r = b.report(1, 3000, &HashMap::new());
        let s = &r.streams[0];
        assert_eq!(
            s.unfinished_count, 1,
            "the launch made during the wait is not covered"
        );
        assert_eq!(s.unfinished[0].name, "k6");
        assert_eq!(
            s.last_finished.as_ref().map(|l| l.name.as_str()),
            Some("k5")
        );
        assert!(r.waits.is_empty());
    }

    #[test]
    fn a_failed_or_unanswered_query_says_nothing() {
        let mut b = book_with(7, 3);
        b.sync_enter(100, "cuStreamQuery", SyncTarget::Stream(7), true, 2000);
        b.sync_exit(100, false);
        assert_eq!(
            b.report(1, 0, &HashMap::new()).streams[0].unfinished_count,
            3
        );
        b.sync_enter(100, "cuStreamQuery", SyncTarget::Stream(7), true, 2000);
        assert!(
            b.report(1, 0, &HashMap::new()).waits.is_empty(),
            "a query is no wait"
        );
        b.sync_exit(100, true);
        assert_eq!(
            b.report(1, 0, &HashMap::new()).streams[0].unfinished_count,
            0
        );
    }

    #[test]
    fn events_and_contexts_cover_what_they_mark() {
        let mut b = book_with(7, 4);
        b.event_recorded(0xe, 7);
        b.launch(8, 0xc0, 1, 100, 9, 1500, 0, Some(c"other"));
        b.launch(7, 0xc0, 1, 100, 10, 1600, 0, Some(c"k5"));
        b.sync_enter(
            100,
            "cuEventSynchronize",
            SyncTarget::Event(0xe),
            false,
            2000,
        );
        b.sync_exit(100, true);
        let r = b.report(1, 0, &HashMap::new());
        let s7 = r.streams.iter().find(|s| s.stream == 7).unwrap();
        assert_eq!(
            s7.unfinished_count, 1,
            "the launch after the event's record"
        );
        b.sync_enter(
            100,
            "cuCtxSynchronize",
            SyncTarget::Context(0xc0),
            false,
            2000,
        );
        b.sync_exit(100, true);
        let r = b.report(1, 0, &HashMap::new());
        assert!(r.streams.iter().all(|s| s.unfinished_count == 0), "{r:?}");
        assert!(r.streams.iter().all(|s| s.state == StreamState::Idle));
    }

    #[test]
    fn the_newest_launches_are_kept_and_the_rest_counted() {
        let mut b = book_with(7, KEPT_PER_STREAM as u32 + 10);
        let r = b.report(1, 0, &HashMap::new());
        let s = &r.streams[0];
        assert_eq!(s.unfinished_count, KEPT_PER_STREAM as u64 + 10);
        assert_eq!(s.unfinished.len(), LISTED_PER_STREAM);
        assert_eq!(s.unfinished[0].seq, 11, "the oldest kept");
        let newest = s.unfinished.last().unwrap().seq;
        assert_eq!(newest, KEPT_PER_STREAM as u64 + 10, "and the newest");
        b.idle_at(7, 5);
        assert_eq!(
            b.report(1, 0, &HashMap::new()).streams[0].unfinished_count,
            KEPT_PER_STREAM as u64 + 5
        );
    }

    #[test]
    fn a_name_at_a_reused_address_is_read_again() {
        let mut b = Book::new(0);
        let mut buf = *b"ka\0\0";
        for (i, text) in [b"ka\0", b"kb\0", b"ka\0"].iter().enumerate() {
            buf[..3].copy_from_slice(&text[..]);
            let name = CStr::from_bytes_until_nul(&buf).unwrap();
            b.launch(7, 0xc0, 1, 100, i as u32, 1, 0, Some(name));
        }
        let r = b.report(1, 0, &HashMap::new());
        let names: Vec<&str> = r.streams[0]
            .unfinished
            .iter()
            .map(|l| l.name.as_str())
            .collect();
        assert_eq!(names, ["ka", "kb", "ka"]);
    }

    #[test]
    fn the_driver_answer_and_destroyed_streams_are_said() {
        let mut b = book_with(7, 2);
        b.launch(9, 0xc0, 1, 100, 3, 1, 0x99, None);
        b.graph_made(0x98, "a; b");
        b.launch(9, 0xc0, 1, 100, 4, 2, 0x98, None);
        let asked: Vec<usize> = b.to_ask().into_iter().map(|(s, _, _)| s).collect();
        assert_eq!(asked.len(), 2);
        let states = HashMap::from([(7, StreamState::Busy), (9, StreamState::Answer("x".into()))]);
        let r = b.report(1, 0, &states);
        assert_eq!(
            r.streams.iter().find(|s| s.stream == 7).unwrap().state,
            StreamState::Busy
        );
        let s9 = r.streams.iter().find(|s| s.stream == 9).unwrap();
        assert!(
            s9.unfinished[0]
                .name
                .contains("made before the recorder started")
        );
        assert_eq!(s9.unfinished[1].name, "a; b");
        b.stream_destroyed(7);
        let r = b.report(1, 0, &states);
        assert_eq!(
            r.streams.iter().find(|s| s.stream == 7).unwrap().state,
            StreamState::Destroyed
        );
        assert_eq!(b.to_ask().len(), 1);
    }

    #[test]
    fn a_destroyed_context_takes_its_streams_and_no_other() {
        let mut b = book_with(7, 2);
        b.launch(0, 0xc1, 2, 100, 3, 1, 0, None);
        b.context_destroyed(0xc1);
        let asked: Vec<usize> = b.to_ask().into_iter().map(|(s, _, _)| s).collect();
        assert_eq!(asked, [7], "only the live context's stream is asked");
        let r = b.report(1, 0, &HashMap::new());
        assert_eq!(
            r.streams.iter().find(|s| s.stream == 0).unwrap().state,
            StreamState::Destroyed
        );
    }
}
