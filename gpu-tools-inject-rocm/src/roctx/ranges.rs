//! ROCTx records as the format's marker records: a range's start (named) and end sharing an id, a mark as an
//! instant. Ids are this process's, numbered here from 1.

use std::collections::HashMap;
use std::sync::Arc;

use gpu_tools::rocprofiler_sdk::{ApiCall, MarkerCall, MarkerRange, RangeOperation};
use gpu_tools::trace::{MarkerKind, MarkerRecord, Record};

use super::notes::Note;

/// The marker ids given, and the ranges the calls opened and have not closed.
pub struct Ranges {
    pid: u32,
    /// ROCTx has no domains: the format's default one.
    domain: Arc<str>,
    next: u32,
    /// Per thread, the ids of its pushed ranges, innermost last.
    pushed: HashMap<u64, Vec<u32>>,
    /// The id of each range started and not stopped, by the id `roctxRangeStartA` returned.
    started: HashMap<u64, u32>,
}

impl Ranges {
    pub fn new(pid: u32, domain: Arc<str>) -> Ranges {
        Ranges {
            pid,
            domain,
            next: 0,
            pushed: HashMap::new(),
            started: HashMap::new(),
        }
    }

    fn id(&mut self) -> u32 {
        self.next = self.next.wrapping_add(1);
        self.next
    }

    fn marker(&self, kind: MarkerKind, id: u32, time: u64, thread: u64, name: String) -> Record {
        Record::Marker(MarkerRecord {
            time,
            kind,
            id,
            process: self.pid,
            thread: thread as u32,
            domain: Arc::clone(&self.domain),
            name,
        })
    }

    /// A range record (`MARKER_CORE_RANGE_API`): its start and end, or a mark. False for another operation.
    pub fn range(
        &mut self,
        r: &MarkerRange<'_>,
        note: Option<Note>,
        emit: &mut dyn FnMut(Record),
    ) -> bool {
        let name = note.and_then(|n| n.message).unwrap_or_default();
        let (t, thread) = (r.time(), r.thread_id());
        match r.operation() {
            RangeOperation::Mark => {
                let id = self.id();
                emit(self.marker(MarkerKind::Instant, id, t.start, thread, name));
            }
            RangeOperation::ThreadRange | RangeOperation::ProcessRange => {
                let id = self.id();
                emit(self.marker(MarkerKind::Start, id, t.start, thread, name));
                emit(self.marker(MarkerKind::End, id, t.end, thread, String::new()));
            }
            _ => return false,
        }
        true
    }

    /// A ROCTx call (`MARKER_CORE_API`), for an SDK without range records: a push or start opens a range, a pop
    /// closes its thread's innermost, a stop the range of its id. False for a call that opens or closes nothing
    /// (a pop without a push, a stop of an unknown id, another call).
    pub fn call(
        &mut self,
        a: &ApiCall<'_>,
        note: Option<Note>,
        emit: &mut dyn FnMut(Record),
    ) -> bool {
        let (t, thread) = (a.time(), a.thread_id());
        let (name, range_id) = match note {
            Some(n) => (n.message.unwrap_or_default(), n.range_id),
            None => (String::new(), None),
        };
        let (kind, id, time, name) = match a.marker_call() {
            Some(MarkerCall::Mark) => (MarkerKind::Instant, self.id(), t.start, name),
            Some(MarkerCall::RangePush) => {
                let id = self.id();
                self.pushed.entry(thread).or_default().push(id);
                (MarkerKind::Start, id, t.start, name)
            }
            Some(MarkerCall::RangeStart) => {
                let id = self.id();
                if let Some(r) = range_id {
                    self.started.insert(r, id);
                }
                (MarkerKind::Start, id, t.start, name)
            }
            Some(MarkerCall::RangePop) => match self.pushed.get_mut(&thread).and_then(Vec::pop) {
                Some(id) => (MarkerKind::End, id, t.end, String::new()),
                None => return false,
            },
            Some(MarkerCall::RangeStop) => match range_id.and_then(|r| self.started.remove(&r)) {
                Some(id) => (MarkerKind::End, id, t.end, String::new()),
                None => return false,
            },
            _ => return false,
        };
        emit(self.marker(kind, id, time, thread, name));
        true
    }

    /// At the end, for range records: the start of each range that opened and never closed (the SDK writes no
    /// record for it), in the order they opened, as a start without an end, as an NVTX range left open.
    pub fn never_closed(&mut self, notes: Vec<Note>, emit: &mut dyn FnMut(Record)) {
        let mut open: Vec<(u64, u64, String)> = notes
            .into_iter()
            .filter_map(|n| {
                n.opened
                    .map(|(time, thread)| (time, thread, n.message.unwrap_or_default()))
            })
            .collect();
        open.sort();
        for (time, thread, name) in open {
            let id = self.id();
            emit(self.marker(MarkerKind::Start, id, time, thread, name));
        }
    }
}
