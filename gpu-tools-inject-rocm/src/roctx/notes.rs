//! The arguments of ROCTx calls, taken in their callbacks on the calling threads and kept, by correlation id, for
//! the buffer records that need them: a range's name, the id a start returned or a stop was given.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use gpu_tools::rocprofiler_sdk::{CallbackEvent, Payload, Phase, RangeOperation, SdkLibrary};

use super::Source;

/// Notes kept at most: a program's open ranges and the calls of one buffer's worth of records are far fewer. A
/// note past it is not kept, and counted ([`Notes::lost`]), rather than let a program that never closes its
/// ranges grow the tool without bound.
const MAX_NOTES: usize = 1 << 20;

/// What the callbacks of one call said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Note {
    /// The message: the range's name, or the mark's.
    pub message: Option<String>,
    /// The range id a start returned, or a stop was given.
    pub range_id: Option<u64>,
    /// For a range record's callback: when and on which thread the range opened, so that a range never closed can
    /// be written at the end (the SDK writes nothing for it).
    pub opened: Option<(u64, u64)>,
}

/// The notes, shared by the callbacks (any thread) and the buffer's conversion. A lock of its own, held only to
/// insert or take one note: a ROCTx call never waits for a batch being written.
pub struct Notes {
    lib: &'static SdkLibrary,
    /// The callback kind kept ([`Source::callback_kind`]); 0 before one is chosen.
    followed: AtomicU32,
    notes: Mutex<HashMap<u64, Note>>,
    lost: AtomicU64,
}

impl Notes {
    pub fn new(lib: &'static SdkLibrary) -> Notes {
        Notes {
            lib,
            followed: AtomicU32::new(0),
            notes: Mutex::new(HashMap::new()),
            lost: AtomicU64::new(0),
        }
    }

    /// Keeps `source`'s callbacks from now on, and no other kind's.
    pub fn follow(&self, source: Source) {
        self.followed
            .store(source.callback_kind(), Ordering::Release);
    }

    /// Keeps what a callback of the followed kind says.
    pub fn note(&self, e: &CallbackEvent<'_>) {
        let Payload::Marker(args) = e.payload() else {
            return;
        };
        if e.kind() != self.followed.load(Ordering::Acquire) {
            return;
        }
        let enter = e.phase() == Phase::Enter;
        let message = args.message().map(|m| m.to_string_lossy().into_owned());
        let range_id = args.started_range_id().or(args.stopped_range_id());
        let opens = matches!(
            args.range_operation(),
            Some(RangeOperation::ThreadRange | RangeOperation::ProcessRange)
        ) && enter;
        if message.is_none() && range_id.is_none() && !opens {
            return;
        }
        // The SDK's clock, as its records' (0 where it cannot be read: the range then opens at the trace's start).
        let opened = opens.then(|| (self.lib.timestamp().unwrap_or(0), e.thread_id()));
        let mut notes = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        let correlation = e.correlation_id();
        if notes.len() >= MAX_NOTES && !notes.contains_key(&correlation) {
            self.lost.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let note = notes.entry(correlation).or_default();
        note.message = message.or(note.message.take());
        note.range_id = range_id.or(note.range_id);
        note.opened = opened.or(note.opened);
    }

    /// The note of a call, taken: each record reads its note once.
    pub fn take(&self, correlation: u64) -> Option<Note> {
        self.notes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&correlation)
    }

    /// Every note left, taken: at the end, those of ranges that never closed (and of records the SDK dropped).
    pub fn take_all(&self) -> Vec<Note> {
        let mut notes = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        notes.drain().map(|(_, n)| n).collect()
    }

    /// Notes not kept because [`MAX_NOTES`] were held: their ranges come out without names.
    pub fn lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }
}
