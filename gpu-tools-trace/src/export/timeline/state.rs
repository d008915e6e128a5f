//! What the timeline keeps of each stream: its process, the rows and lanes of its tracks, its groups, the slices
//! held for their flows, and its open NVTX ranges.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{Arg, Slice, Track};
use crate::record::{EndReason, MarkerData, ProcessInfo};
use crate::wire::ThreadIds;

#[cfg(doc)]
use super::Timeline;

/// Rows of a process's host threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Row {
    Runtime,
    Driver,
    OtherApi,
    Nvtx,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Key {
    Gpu(u32),
    Stream(u32, u32),
    Thread(u32, Row),
    Sync,
    Overhead,
}

/// Lanes of one row: the end of the last slice of each.
#[derive(Debug, Default)]
pub(super) struct Lanes {
    pub(super) ends: Vec<u64>,
    pub(super) ids: Vec<u64>,
}

/// Most open NVTX ranges and pending marker data kept per stream.
pub(super) const MAX_OPEN: usize = 1 << 16;

#[derive(Debug, Default)]
pub(super) struct StreamState {
    pub(super) pid: u32,
    /// What its thread fields hold (from its header).
    pub(super) thread_ids: ThreadIds,
    pub(super) command: String,
    pub(super) info: Option<ProcessInfo>,
    /// Its start record was read, and when it began (on its own clock).
    pub(super) started: Option<u64>,
    /// How it ended, once its end record is read.
    pub(super) end: Option<EndReason>,
    /// The end of its last slice, on the common timeline.
    pub(super) last: u64,
    /// Its place among the ranks ([`Timeline::rank_place`]), once its first group is made.
    pub(super) place: Option<i64>,
    /// Its process group, as last given to the sink, once made.
    pub(super) process_track: Option<Track>,
    pub(super) rows: HashMap<Key, Lanes>,
    pub(super) groups: HashMap<Key, u64>,
    /// Slices held until the other end of their flow arrives, by correlation id.
    pub(super) waiting: BTreeMap<u32, Waiting>,
    /// Slices in `waiting`.
    pub(super) held: usize,
    /// Correlation ids whose flow was drawn (more device work of the same call gets none).
    pub(super) paired: HashSet<u32>,
    pub(super) open: HashMap<u32, (u32, u64, String, String)>,
    pub(super) data: HashMap<u32, MarkerData>,
}

/// A slice kept back (its track already chosen) until its flow can be drawn.
#[derive(Debug)]
pub(super) struct Held {
    pub(super) track: u64,
    pub(super) name: String,
    pub(super) category: &'static str,
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) args: Vec<(&'static str, Arg)>,
}

impl Held {
    pub(super) fn slice(&self, flow_out: Option<u64>, flow_in: Option<u64>) -> Slice<'_> {
        Slice {
            track: self.track,
            name: &self.name,
            category: self.category,
            start: self.start,
            end: self.end,
            instant: false,
            args: self.args.clone(),
            flow_out,
            flow_in,
            color: None,
        }
    }
}

/// One side of a flow that waits for the other: an API call for the device work it issued, or device work for
/// the call that issued it (CUPTI often delivers the work first).
#[derive(Debug)]
pub(super) enum Waiting {
    Call(Held),
    Work(Vec<Held>),
}

impl Waiting {
    pub(super) fn len(&self) -> usize {
        match self {
            Waiting::Call(_) => 1,
            Waiting::Work(w) => w.len(),
        }
    }
}
