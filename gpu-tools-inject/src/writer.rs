//! Turns CUPTI batches into the trace stream and sends it: one lock around the converter, the encoder and the
//! sink, so that a name frame always precedes its first use in the bytes sent.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use gpu_tools::cupti::activity::{Activity, ActivityBatch};
use gpu_tools::cupti::{ApiCbid, DriverCbid, RuntimeCbid};
use gpu_tools::trace::{
    ApiDomain, DroppedRecords, Encoder, EndReason, Notice, NoticeLevel, ProcessEnd, Record,
    StreamHeader,
};
use gpu_tools_injection::env::Stage;
use gpu_tools_injection::message::Message;

use crate::convert::TraceConverter;
use crate::graph_fold::GraphFold;
use crate::sink::{SendError, Sink};

struct State {
    encoder: Encoder,
    converter: TraceConverter,
    /// Records not carried (kinds the format has no record for, or records that did not decode).
    skipped: u64,
    /// Dropped records already sent with their batch.
    dropped_sent: u64,
    /// The stream failed: nothing more is sent.
    failed: bool,
    /// Graph mode: kernels of graphs are left out (CUPTI may still deliver them).
    drop_graph_nodes: bool,
    /// Graph-node kernels left out in graph mode.
    graph_nodes_dropped: u64,
    /// API functions left out here, by (domain code, callback id), where CUPTI could not filter them.
    skip: FunctionBits,
    /// API records left out by `skip`.
    skipped_api: u64,
    stage: Stage,
    /// Attached: records of work that ended before this instant (the trace's clock) are not the window's.
    window_start: Option<u64>,
    /// Records left out by `window_start`.
    before_window: u64,
    /// Records of work that had not finished when a forced flush handed them over (no end time), left out.
    unfinished: u64,
    /// Attached in graph mode: graph launches built from their kernels (`graph_fold`).
    fold: Option<GraphFold>,
    /// Kernels outside graphs were enabled only to fold graphs: not the trace's.
    drop_plain_kernels: bool,
    /// Records CUPTI delivered, by activity kind, before any is left out (the debug log's account at the end).
    received: KindCounts,
    /// Records of kinds the program's own profiler alone enabled, left to it.
    foreign_left: u64,
    /// What came after the end record, not sent (see [`Writer::leave_out_after_end`]).
    after_end: AfterEnd,
}

/// What came after the stream's end record: not sent, counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct AfterEnd {
    /// Records: CUPTI's (decoded or not, of any kind) and the library's own (notices, counter records).
    pub records: u64,
    /// Records CUPTI reported dropped with those batches.
    pub dropped: u64,
}

/// What the writer leaves out, and how far records travel.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Leave out kernels that ran as graph nodes (graph mode).
    pub drop_graph_nodes: bool,
    /// API functions to leave out, by (domain code, callback id).
    pub skip: HashSet<(u8, u32)>,
    /// How far records travel.
    pub stage: Stage,
    /// Leave out records of work that ended before this instant, on the trace's clock (an attached trace's start).
    pub window_start: Option<u64>,
    /// Build graph launches from the kernels of graph nodes (an attached trace in graph mode, where CUPTI's
    /// graph-level records are not enabled).
    pub fold_graphs: bool,
    /// Leave out kernels that ran outside graphs (their kind is on only for `fold_graphs`).
    pub drop_plain_kernels: bool,
}

impl Filter {
    /// Leaves out the API records of host-side bookkeeping ([`ApiCbid::is_bookkeeping`]) of the driver's and the
    /// runtime's functions, as asked: the default trace's essential calls.
    pub fn leave_out_bookkeeping(&mut self, driver: bool, runtime: bool) {
        let drivers = DriverCbid::all().map(ApiCbid::Driver).filter(|_| driver);
        let runtimes = RuntimeCbid::all().map(ApiCbid::Runtime).filter(|_| runtime);
        self.skip.extend(
            drivers
                .chain(runtimes)
                .filter(|c| c.is_bookkeeping())
                .map(|c| skip_key(&c)),
        );
    }
}

/// The key of `c` in [`Filter::skip`].
pub fn skip_key(c: &ApiCbid) -> (u8, u32) {
    let domain = match c {
        ApiCbid::Driver(_) => ApiDomain::Driver,
        ApiCbid::Runtime(_) => ApiDomain::Runtime,
    };
    (domain.code(), c.id())
}

/// The stream of one traced process.
pub struct Writer {
    sink: Sink,
    state: Mutex<State>,
    /// The end record was sent (by the exit handler or a fatal signal): nothing more is.
    ended: AtomicBool,
    /// Bit `k` set: CUPTI activity kind `k` is enabled for the program's own profiler alone (`coexist` says so),
    /// and its records are the program's, not the trace's.
    foreign: AtomicU64,
}

/// What the stream's end record says, from the tracer's final report.
#[derive(Debug, Default, Clone, Copy)]
pub struct EndCounts {
    /// Records CUPTI reported dropped in all.
    pub dropped: u64,
    /// Batches lost to a panic while they were written.
    pub callback_panics: u64,
}

impl Writer {
    /// A stream to `sink` starting with `header` (sent with the first record).
    pub fn new(sink: Sink, header: &StreamHeader, filter: Filter) -> Writer {
        Writer {
            sink,
            state: Mutex::new(State {
                encoder: Encoder::new(header),
                converter: TraceConverter::new(),
                skipped: 0,
                dropped_sent: 0,
                failed: false,
                drop_graph_nodes: filter.drop_graph_nodes,
                graph_nodes_dropped: 0,
                skip: FunctionBits::new(&filter.skip),
                skipped_api: 0,
                stage: filter.stage,
                window_start: filter.window_start,
                before_window: 0,
                unfinished: 0,
                fold: filter.fold_graphs.then(GraphFold::default),
                drop_plain_kernels: filter.drop_plain_kernels,
                received: KindCounts::default(),
                foreign_left: 0,
                after_end: AfterEnd::default(),
            }),
            ended: AtomicBool::new(false),
            foreign: AtomicU64::new(0),
        }
    }

    /// The kinds enabled for the program's own profiler alone (0: none): the sharing of CUPTI (`coexist`) says
    /// them as they change, and batches leave their records out.
    pub fn set_foreign_kinds(&self, kinds: u64) {
        self.foreign.store(kinds, Ordering::Release);
    }

    /// The kinds [`set_foreign_kinds`](Self::set_foreign_kinds) said last.
    #[cfg(test)]
    pub fn foreign_kinds(&self) -> u64 {
        self.foreign.load(Ordering::Acquire)
    }

    /// Graph mode on or off (off when CUPTI lacks graph-level tracing).
    pub fn set_drop_graph_nodes(&self, on: bool) {
        if let Some(mut st) = self.lock() {
            st.drop_graph_nodes = on;
        }
    }

    /// API functions the writer leaves out.
    pub fn set_skip(&self, skip: HashSet<(u8, u32)>) {
        if let Some(mut st) = self.lock() {
            st.skip = FunctionBits::new(&skip);
        }
    }

    /// An attached window starts at `at` (the tracer's `clock_in_at`): records of work that ended before are left
    /// out. CUPTI writes the program's records of the moments before the tracer's clock went in on that clock when
    /// it writes them out after it (their times are right, on the trace's clock), and the trace reads those from
    /// the program's buffers; their kernels, which ran before, are the program's alone. On an H200 a window so began
    /// with 559 launches of the 35 ms before its tracer's start (made while the attach looked for the program's
    /// profiler), none with a kernel record, which the trace counted as kernels CUPTI had not recorded. A launched
    /// trace has no window start and gets none.
    pub fn window_starts_at(&self, at: u64) {
        if let Some(mut st) = self.lock() {
            if let Some(start) = st.window_start.as_mut() {
                *start = (*start).max(at);
            }
        }
    }

    /// Whether the end record was sent.
    pub fn has_ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }

    /// The state, or `None` in a forked child: it must not touch a lock another thread of its parent may have
    /// held at the fork.
    fn lock(&self) -> Option<MutexGuard<'_, State>> {
        if !self.sink.is_owner() {
            return None;
        }
        Some(self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Converts and sends one batch of CUPTI records (on CUPTI's thread, or the one that flushes).
    pub fn write_batch(&self, batch: &ActivityBatch<'_>) {
        if log::log_enabled!(log::Level::Debug) {
            log::debug!("a tracer batch: {}", describe_batch(batch));
        }
        let Some(mut st) = self.lock() else { return };
        let st = &mut *st;
        // Read under the lock that `end` holds while it sends the end record.
        if self.ended.load(Ordering::SeqCst) {
            let records = batch.records().count() as u64;
            Self::leave_out_after_end(st, records, batch.dropped_records());
            return;
        }
        match st.stage {
            Stage::NoDecode => {}
            Stage::NoConvert => {
                let walked = batch.records().filter(Result::is_ok).count();
                std::hint::black_box(walked);
            }
            _ => {
                // Kinds enabled for the program's own profiler alone (`coexist`) are not the trace's.
                let foreign = self.foreign.load(std::sync::atomic::Ordering::Acquire);
                for record in batch.records() {
                    match record {
                        Ok(activity) => {
                            st.received.add(activity.kind().0);
                            if is_foreign(foreign, activity.kind().0) {
                                st.foreign_left += 1;
                                continue;
                            }
                            if let Activity::Api(a) = &activity {
                                let domain = match a.domain() {
                                    gpu_tools::cupti::ApiDomain::Driver => ApiDomain::Driver,
                                    gpu_tools::cupti::ApiDomain::Runtime => ApiDomain::Runtime,
                                };
                                if st.skip.contains(domain.code(), a.cbid().id()) {
                                    st.skipped_api += 1;
                                    continue;
                                }
                            }
                            let converted = st.converter.convert_ref(&activity);
                            if let Some((_, end)) = converted.and_then(Record::span) {
                                // CUPTI's forced flush hands over records of work that had not finished, with no
                                // end time (seen at an attached window's end: as many as the launches still
                                // queued; a launched trace's flush at a fatal signal is forced too). Sent, they
                                // would end before they start.
                                if end == 0 {
                                    st.unfinished += 1;
                                    continue;
                                }
                                if st.window_start.is_some_and(|start| end < start) {
                                    st.before_window += 1;
                                    continue;
                                }
                            }
                            match converted {
                                Some(Record::Kernel(k)) if k.graph_id != 0 && st.fold.is_some() => {
                                    if let Some(fold) = st.fold.as_mut() {
                                        fold.add(k);
                                    }
                                }
                                Some(Record::Kernel(_)) if st.drop_plain_kernels => {}
                                Some(Record::Kernel(k))
                                    if st.drop_graph_nodes && k.graph_id != 0 =>
                                {
                                    st.graph_nodes_dropped += 1;
                                }
                                Some(r) if st.stage == Stage::NoEncode => {
                                    std::hint::black_box(r);
                                }
                                Some(r) => st.encoder.push(r),
                                None => st.skipped += 1,
                            }
                        }
                        Err(e) => {
                            st.skipped += 1;
                            log::debug!("activity record skipped: {e}");
                        }
                    }
                }
                if let Some(fold) = st.fold.as_mut() {
                    for launch in fold.end_batch() {
                        st.encoder.push(&Record::GraphLaunch(launch));
                    }
                }
            }
        }
        let dropped = batch.dropped_records();
        if dropped > 0 {
            st.dropped_sent += dropped;
            // CUPTI reports drops for its global queue: no context, stream 0.
            st.encoder.push(&Record::Dropped(DroppedRecords {
                context: u32::MAX,
                stream: 0,
                count: dropped,
            }));
        }
        if st.stage == Stage::NoSend {
            // Measurement: encoded, not written (the stream's own start, notices and end still are).
            st.encoder.clear();
            return;
        }
        self.send(st);
    }

    /// Sends one record of the library's own (start, notice).
    pub fn push(&self, record: &Record) {
        let Some(mut st) = self.lock() else { return };
        if self.ended.load(Ordering::SeqCst) {
            Self::leave_out_after_end(&mut st, 1, 0);
            return;
        }
        st.encoder.push(record);
        self.send(&mut st);
    }

    /// Sends a notice (and logs it).
    pub fn notice(&self, level: NoticeLevel, text: String) {
        match level {
            NoticeLevel::Error => log::error!("{text}"),
            NoticeLevel::Warning => log::warn!("{text}"),
            _ => log::info!("{text}"),
        }
        self.push(&Record::Notice(Notice { level, text }));
    }

    /// Sends a message the tool acts on (and logs it, as a notice).
    pub fn message(&self, message: &Message) {
        match message.level() {
            NoticeLevel::Error => log::error!("{message}"),
            NoticeLevel::Warning => log::warn!("{message}"),
            _ => log::info!("{message}"),
        }
        self.push(&message.record());
    }

    /// Sends the end record with the counts, and ends the stream; once (a later call does nothing).
    pub fn end(&self, reason: EndReason, counts: EndCounts, time: u64) {
        let Some(mut st) = self.lock() else { return };
        if self.ended.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(mut fold) = st.fold.take() {
            for launch in fold.finish() {
                st.encoder.push(&Record::GraphLaunch(launch));
            }
            let (kernels, launches) = fold.counts();
            let late = fold.late();
            if late > 0 {
                st.encoder.push(&Record::Notice(Notice {
                    level: NoticeLevel::Warning,
                    text: format!(
                        "graph mode, attached: {late} kernel records arrived after the record of their graph \
                         launch was sent (CUPTI completed their buffers out of order) and were left out: those \
                         launches may end early"
                    ),
                }));
            }
            if kernels > 0 {
                st.encoder.push(&Record::Notice(Notice {
                    level: NoticeLevel::Info,
                    text: format!(
                        "graph mode, attached: {launches} graph launches built from the records of their {kernels} \
                         kernels (graph id and launch correlation); CUPTI's graph-level records are not enabled in \
                         a running program, whose graphs may predate CUPTI (enabling them there crashes the next \
                         launch of such a graph with CUPTI 13.0)"
                    ),
                }));
            }
        }
        if st.before_window > 0 {
            let n = st.before_window;
            st.encoder.push(&Record::Notice(Notice {
                level: NoticeLevel::Info,
                text: format!(
                    "{n} records of work that ended before the attach left out (CUPTI delivered them late, some in \
                     buffers of the program's own profiler)"
                ),
            }));
        }
        if st.unfinished > 0 {
            let records = st.unfinished;
            st.encoder
                .push(&Message::UnfinishedLeftOut { records }.record());
        }
        let (nodes, api) = (st.graph_nodes_dropped, st.skipped_api);
        if nodes > 0 {
            st.encoder.push(&Record::Notice(Notice {
                level: NoticeLevel::Info,
                text: format!(
                    "graph mode: CUPTI delivered {nodes} kernel records of graph nodes, left out"
                ),
            }));
        }
        if api > 0 {
            st.encoder.push(&Record::Notice(Notice {
                level: NoticeLevel::Info,
                text: format!(
                    "{api} API records of skipped functions left out (host-side bookkeeping or `--api-skip`; \
                     `--api all` keeps the bookkeeping)"
                ),
            }));
        }
        // Drops CUPTI reported after the last batch (its final count at stop).
        let late = counts.dropped.saturating_sub(st.dropped_sent);
        if late > 0 {
            st.dropped_sent += late;
            st.encoder.push(&Record::Dropped(DroppedRecords {
                context: u32::MAX,
                stream: 0,
                count: late,
            }));
        }
        let records = st.encoder.records();
        let end = ProcessEnd {
            time,
            reason,
            records,
            dropped: st.dropped_sent,
            skipped: st.skipped,
            callback_panics: counts.callback_panics,
        };
        st.encoder.push(&Record::ProcessEnd(end));
        self.send(&mut st);
        self.sink.finish();
        log::debug!(
            "stream ended: {records} records, {} dropped, {} skipped; CUPTI delivered (kind: count) {:?}, of which \
             {} left to the program's profiler, {} before the window, {} unfinished, {} graph nodes left out; the \
             timestamp callback was called {} times",
            st.dropped_sent,
            st.skipped,
            st.received.by_kind(),
            st.foreign_left,
            st.before_window,
            st.unfinished,
            st.graph_nodes_dropped,
            gpu_tools::cupti::activity::timestamp_calls()
                .map_or_else(|| "an uncounted number of".to_string(), |n| n.to_string())
        );
    }

    /// Leaves out records that come after the end record. A reader takes the end record as the stream's last and
    /// counts the records before it against it (`processes`' "Complete" column; the trace's "sent N records, M
    /// arrived"), and a socket's writing side is shut at the end: nothing may follow it. Such records come where the
    /// program lives on after its stream ended: after a fatal signal's early end (its own handler recovers from a
    /// fault), or from a late batch or notice after an attached window's end. The tool, whose stream has ended,
    /// cannot be told: they are counted ([`after_end`](Self::after_end)) and said in the log, the first at warning
    /// level.
    fn leave_out_after_end(st: &mut State, records: u64, dropped: u64) {
        let first = st.after_end == AfterEnd::default();
        st.after_end.records += records;
        st.after_end.dropped += dropped;
        let AfterEnd { records, dropped } = st.after_end;
        if first {
            log::warn!(
                "records after the stream's end record are not sent (it ended while the program lives on: a fatal \
                 signal it survived, an attached window's end): {records} so far, and {dropped} CUPTI reported \
                 dropped"
            );
        } else {
            log::debug!(
                "records after the stream's end record, not sent: {records} so far, and {dropped} CUPTI reported \
                 dropped"
            );
        }
    }

    /// What came after the end record, not sent.
    pub fn after_end(&self) -> AfterEnd {
        self.lock()
            .map_or_else(AfterEnd::default, |st| st.after_end)
    }

    fn send(&self, st: &mut State) {
        if !st.failed && !st.encoder.bytes().is_empty() {
            match self.sink.send(st.encoder.bytes()) {
                Ok(()) => {}
                Err(SendError::ForkedChild) => {}
                Err(e) => {
                    st.failed = true;
                    log::error!(
                        "writing the trace to {} failed, nothing more is sent: {e}",
                        self.sink.describe()
                    );
                }
            }
        }
        st.encoder.clear();
    }
}

/// The API functions the writer leaves out: a bit for each (domain code, callback id) of ids under
/// [`FunctionBits::IDS`], a set for any past it. The default trace leaves out the bookkeeping, so every API record
/// is looked up here (a hashed set's lookup was a third of the record path's time on a launch's records).
#[derive(Debug, Default)]
struct FunctionBits {
    /// Bit `id * 4 + domain` (domain codes under 4), in words of 64.
    bits: Vec<u64>,
    beyond: HashSet<(u8, u32)>,
}

impl FunctionBits {
    /// Callback ids given a bit; CUPTI 13.0's highest is 806.
    const IDS: u32 = 1 << 12;

    fn new(set: &HashSet<(u8, u32)>) -> Self {
        let mut bits = FunctionBits::default();
        for &(domain, id) in set {
            match Self::bit(domain, id) {
                Some(bit) => {
                    if bit / 64 >= bits.bits.len() {
                        bits.bits.resize(bit / 64 + 1, 0);
                    }
                    bits.bits[bit / 64] |= 1 << (bit % 64);
                }
                None => {
                    bits.beyond.insert((domain, id));
                }
            }
        }
        bits
    }

    fn bit(domain: u8, id: u32) -> Option<usize> {
        (domain < 4 && id < Self::IDS).then(|| id as usize * 4 + usize::from(domain))
    }

    #[inline]
    fn contains(&self, domain: u8, id: u32) -> bool {
        match Self::bit(domain, id) {
            Some(bit) => self
                .bits
                .get(bit / 64)
                .is_some_and(|w| w >> (bit % 64) & 1 == 1),
            None => !self.beyond.is_empty() && self.beyond.contains(&(domain, id)),
        }
    }
}

/// Records counted by CUPTI activity kind: an array for the kinds CUPTI has (a map lookup per record cost as much
/// as encoding one), a map for any past it.
#[derive(Debug)]
struct KindCounts {
    low: [u64; 64],
    high: BTreeMap<u32, u64>,
}

impl Default for KindCounts {
    fn default() -> Self {
        KindCounts {
            low: [0; 64],
            high: BTreeMap::new(),
        }
    }
}

impl KindCounts {
    fn add(&mut self, kind: u32) {
        match self.low.get_mut(kind as usize) {
            Some(n) => *n += 1,
            None => *self.high.entry(kind).or_default() += 1,
        }
    }

    /// The kinds seen, with their counts, in order.
    fn by_kind(&self) -> BTreeMap<u32, u64> {
        let low = (0u32..).zip(self.low).filter(|&(_, n)| n > 0);
        low.chain(self.high.iter().map(|(&k, &n)| (k, n))).collect()
    }
}

/// Whether a record of CUPTI activity kind `kind` belongs to the program alone.
fn is_foreign(foreign: u64, kind: u32) -> bool {
    foreign != 0 && 1u64.checked_shl(kind).unwrap_or(0) & foreign != 0
}

/// A batch's kernel and API records for the debug log: how many, their correlation ids and starts (first and
/// last), so that a window's records can be followed from CUPTI to the file.
fn describe_batch(batch: &ActivityBatch<'_>) -> String {
    #[derive(Default)]
    struct Span {
        n: u64,
        ids: Option<(u32, u32)>,
        starts: Option<(u64, u64)>,
        unfinished: u64,
    }
    impl Span {
        fn add(&mut self, id: u32, start: u64, end: u64) {
            self.n += 1;
            self.unfinished += u64::from(end == 0);
            let (lo, hi) = self.ids.unwrap_or((id, id));
            self.ids = Some((lo.min(id), hi.max(id)));
            let (first, last) = self.starts.unwrap_or((start, start));
            self.starts = Some((first.min(start), last.max(start)));
        }
    }
    impl std::fmt::Display for Span {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}", self.n)?;
            if let (Some((lo, hi)), Some((first, last))) = (self.ids, self.starts) {
                write!(f, " (correlation {lo}-{hi}, starts {first}-{last}")?;
                if self.unfinished > 0 {
                    write!(f, ", {} without an end", self.unfinished)?;
                }
                write!(f, ")")?;
            }
            Ok(())
        }
    }
    let (mut kernels, mut api, mut other) = (Span::default(), Span::default(), 0u64);
    for activity in batch.records().flatten() {
        match (&activity, activity.time()) {
            (Activity::Kernel(k), Some(t)) => kernels.add(k.correlation_id(), t.start, t.end),
            (Activity::Api(a), Some(t)) => api.add(a.correlation_id(), t.start, t.end),
            _ => other += 1,
        }
    }
    format!("kernels {kernels}; API calls {api}; {other} others")
}

#[cfg(test)]
mod tests {
    use super::is_foreign;

    #[test]
    fn the_functions_left_out_are_those_of_the_set_and_no_other() {
        let set: std::collections::HashSet<(u8, u32)> = [
            (1, 0),
            (2, 0),
            (1, 63),
            (2, 64),
            (1, 806),
            (3, 4095),
            (1, 4096),
            (9, 5),
            (2, u32::MAX),
        ]
        .into_iter()
        .collect();
        let bits = super::FunctionBits::new(&set);
        for domain in 0..12u8 {
            for id in (0..4200).chain([u32::MAX - 1, u32::MAX]) {
                assert_eq!(
                    bits.contains(domain, id),
                    set.contains(&(domain, id)),
                    "({domain}, {id})"
                );
            }
        }
        assert!(!super::FunctionBits::new(&Default::default()).contains(1, 0));
    }

    #[test]
    fn kinds_are_counted_in_order_however_large() {
        let mut counts = super::KindCounts::default();
        for kind in [10, 5, 10, 63, 64, 1000, 64] {
            counts.add(kind);
        }
        let seen: Vec<_> = counts.by_kind().into_iter().collect();
        assert_eq!(seen, [(5, 1), (10, 2), (63, 1), (64, 2), (1000, 1)]);
    }

    #[test]
    fn a_kind_is_foreign_only_where_its_bit_is_set() {
        assert!(is_foreign(1 << 10, 10));
        assert!(!is_foreign(1 << 10, 5));
        assert!(!is_foreign(0, 10));
        // A kind past the mask's width is nobody's.
        assert!(!is_foreign(u64::MAX, 64));
    }
}

#[cfg(test)]
mod window_tests {
    use std::mem::offset_of;

    use gpu_tools::cupti::activity::{ActivityBatch, Clock, RecordLayout};
    use gpu_tools::sys::cupti as sys;

    use super::{Filter, Writer};

    /// A runtime API record of `cudaLaunchKernel` that ran from `start` to `end`, as CUPTI 13.0 writes it.
    fn launch(start: u64, end: u64, correlation: u32) -> Vec<u8> {
        let kind = sys::CUPTI_ACTIVITY_KIND_RUNTIME;
        let size = RecordLayout::Cupti13_0
            .record_size(kind)
            .expect("a sized kind");
        let mut r = vec![0u8; size];
        let mut put = |at: usize, bytes: &[u8]| r[at..at + bytes.len()].copy_from_slice(bytes);
        put(
            offset_of!(sys::CUpti_ActivityAPI, kind),
            &kind.to_ne_bytes(),
        );
        put(
            offset_of!(sys::CUpti_ActivityAPI, cbid),
            &sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000.to_ne_bytes(),
        );
        put(
            offset_of!(sys::CUpti_ActivityAPI, start),
            &start.to_ne_bytes(),
        );
        put(offset_of!(sys::CUpti_ActivityAPI, end), &end.to_ne_bytes());
        put(
            offset_of!(sys::CUpti_ActivityAPI, correlationId),
            &correlation.to_ne_bytes(),
        );
        r
    }

    fn writer(window_start: Option<u64>) -> Writer {
        let path = std::env::temp_dir().join(format!(
            "writer-window-{}-{}.raw",
            std::process::id(),
            window_start.is_some()
        ));
        let sink = crate::sink::Sink::create_file(&path).expect("a file for the stream");
        Writer::new(
            sink,
            &gpu_tools::trace::StreamHeader::new(
                std::process::id(),
                0,
                gpu_tools::trace::TimestampClock::Monotonic,
            ),
            Filter {
                window_start,
                ..Filter::default()
            },
        )
    }

    /// A program that lives on after a fatal signal's early end (its own handler recovers from a fault) goes on
    /// making records: none may follow the end record, which a reader takes as the stream's last, counting the
    /// records before it against it.
    #[test]
    fn nothing_follows_an_early_end_record() {
        let path =
            std::env::temp_dir().join(format!("writer-early-end-{}.raw", std::process::id()));
        let sink = crate::sink::Sink::create_file(&path).expect("a file for the stream");
        let header = gpu_tools::trace::StreamHeader::new(
            std::process::id(),
            0,
            gpu_tools::trace::TimestampClock::Monotonic,
        );
        let w = Writer::new(sink, &header, Filter::default());
        let before = [launch(10, 20, 1), launch(30, 40, 2)].concat();
        let after = [launch(50, 60, 3), launch(70, 80, 4)].concat();
        for (bytes, end) in [(&before, true), (&after, false)] {
            write_records(&w, bytes);
            if end {
                // What the signal thread does at a fatal signal.
                w.end(
                    gpu_tools::trace::EndReason::Signal(11),
                    super::EndCounts::default(),
                    100,
                );
            }
        }
        // What the exit handler or a later flush might still send.
        w.push(&gpu_tools::trace::Record::Notice(
            gpu_tools::trace::Notice {
                level: gpu_tools::trace::NoticeLevel::Info,
                text: "after the end".into(),
            },
        ));
        let bytes = std::fs::read(&path).expect("the stream's file");
        let _ = std::fs::remove_file(&path);
        let records: Vec<gpu_tools::trace::Record> =
            gpu_tools::trace::StreamReader::new(&bytes[..])
                .map(|r| r.expect("a readable stream"))
                .collect();
        let at = records
            .iter()
            .position(|r| matches!(r, gpu_tools::trace::Record::ProcessEnd(_)))
            .expect("the end record");
        assert_eq!(
            at + 1,
            records.len(),
            "the end record is the stream's last: {:?}",
            &records[at..]
        );
        let gpu_tools::trace::Record::ProcessEnd(end) = &records[at] else {
            unreachable!()
        };
        assert_eq!(
            end.records + 1,
            records.len() as u64,
            "its count is the stream's"
        );
        assert_eq!(
            w.after_end(),
            super::AfterEnd {
                records: 3,
                dropped: 0
            },
            "the two launches and the notice after the end, counted"
        );
    }

    /// Writes `bytes` (whole CUPTI records) to `w` as one batch, from 8-byte-aligned storage as CUPTI's buffers are.
    fn write_records(w: &Writer, bytes: &[u8]) {
        let storage: Vec<u64> = bytes
            .chunks(8)
            .map(|c| u64::from_ne_bytes(c.try_into().expect("records are 8-byte multiples")))
            .collect();
        // SAFETY: `storage` holds `bytes.len()` bytes.
        let view =
            unsafe { std::slice::from_raw_parts(storage.as_ptr().cast::<u8>(), bytes.len()) };
        w.write_batch(&ActivityBatch::from_bytes(view, RecordLayout::Cupti13_0));
    }

    /// Calls of the program made while the attach looked for its profiler (after the session began, before the
    /// tracer's start) that reach the trace from the program's buffers are not the window's.
    #[test]
    fn an_attached_window_begins_at_the_tracers_start() {
        let session_began = Clock::Monotonic.now_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let while_probing = Clock::Monotonic.now_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let clock_in_at = Clock::Monotonic.now_ns();
        let bytes = [
            launch(while_probing, while_probing + 10, 1),
            launch(u64::MAX / 2, u64::MAX / 2 + 10, 2),
        ]
        .concat();
        let attached = writer(Some(session_began));
        attached.window_starts_at(clock_in_at);
        write_records(&attached, &bytes);
        let st = attached.lock().expect("the owner");
        assert_eq!(
            st.before_window, 1,
            "the call made before the tracer's start"
        );
        drop(st);

        // Before the change of start, the same call was the window's.
        let unchanged = writer(Some(session_began));
        write_records(&unchanged, &bytes);
        assert_eq!(unchanged.lock().expect("the owner").before_window, 0);

        // A launched trace has no window start, and gets none.
        let launched = writer(None);
        launched.window_starts_at(clock_in_at);
        write_records(&launched, &bytes);
        assert_eq!(launched.lock().expect("the owner").before_window, 0);
    }

    /// Work a forced flush hands over unfinished (no end time) is counted and left out of a launched trace too: a
    /// fatal signal's flush forces it. Sent, it ended before it started, and reports summed it as 0 ns.
    #[test]
    fn unfinished_work_is_left_out_of_a_launched_trace_too() {
        let launched = writer(None);
        write_records(
            &launched,
            &[launch(100, 0, 1), launch(100, 200, 2)].concat(),
        );
        let st = launched.lock().expect("the owner");
        assert_eq!(st.unfinished, 1, "the record without an end time");
        assert_eq!(st.before_window, 0);
    }
}
