//! From records to tracks and slices, for any timeline format.

mod counters;
mod ends;
mod findings;
mod flows;
mod input;
mod model;
mod numbers;
mod nvtx;
mod ranks;
mod slices;
mod state;
mod tracks;

use std::collections::HashMap;

pub use model::{Arg, CounterTrack, CounterValue, Slice, TimelineSink, Track, TrackProcess};
use state::{Key, StreamState};

use crate::report::Alignment;

/// Turns the records of one or more traces into tracks and slices for a [`TimelineSink`], streaming.
///
/// A launch or copy call and the device work it issued are tied by a flow whichever of them comes first: the
/// first is held (per stream and correlation id, at most 65,536 slices per stream) until the other
/// arrives, and what is still held when its stream ends, its file has been read or the export finishes is
/// written without a flow.
pub struct Timeline<S: TimelineSink> {
    sink: S,
    streams: HashMap<(u32, u32), StreamState>,
    alignment: Alignment,
    next_track: u64,
    /// Flows drawn so far: the last flow's id.
    flows_drawn: u64,
    misnested: u64,
    /// Records read by [`Timeline::read`], by file number.
    records: HashMap<u32, u64>,
    /// The format version of each file read (not of a single stream).
    versions: HashMap<u32, u16>,
    /// The counter tracks of each device of each counter stream: (file, stream, device).
    counters: HashMap<(u32, u32, u32), counters::DeviceTracks>,
    /// The place of each (host, rank) given to [`Timeline::order_ranks`].
    rank_order: HashMap<(String, u32), i64>,
    /// Hosts in the order met, for ranks not given to [`Timeline::order_ranks`].
    hosts_met: Vec<String>,
    /// The process numbers and names of the groups made so far.
    numbers: numbers::ProcessNumbers,
}

impl<S: TimelineSink> std::fmt::Debug for Timeline<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timeline")
            .field("streams", &self.streams.len())
            .field("tracks", &self.next_track)
            .finish_non_exhaustive()
    }
}

impl<S: TimelineSink> Timeline<S> {
    /// A timeline written to `sink`.
    pub fn new(sink: S) -> Self {
        Timeline {
            sink,
            streams: HashMap::new(),
            alignment: Alignment::new(),
            next_track: 1,
            flows_drawn: 0,
            misnested: 0,
            records: HashMap::new(),
            versions: HashMap::new(),
            counters: HashMap::new(),
            rank_order: HashMap::new(),
            hosts_met: Vec::new(),
            numbers: numbers::ProcessNumbers::default(),
        }
    }
}

#[cfg(test)]
mod tests;
