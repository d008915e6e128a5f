//! What a timeline is made of, as its sink gets it: tracks (and the processes of groups), slices and their
//! arguments, counter tracks and their values; and the sink they are written to.

use std::io;

/// The process a track stands for (its group in the viewer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackProcess {
    /// A process number unique in the export: a process group's pid where no group before it took that number
    /// (processes in two PID namespaces, on two hosts or a pid used again share one), else, as for every GPU and
    /// counter group, a number of the export's own, from 2^30 up (below 2^31: Perfetto's pid is an `int32`).
    pub pid: u32,
    /// The group's name.
    pub name: String,
}

/// A track: a row of slices, possibly under a parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Track {
    /// Unique id (never 0).
    pub id: u64,
    /// The parent track.
    pub parent: Option<u64>,
    /// Name.
    pub name: String,
    /// For a group: the process it stands for, with a number of its own ([`TrackProcess::pid`]).
    pub process: Option<TrackProcess>,
    /// Place among its siblings; for a group, among the groups (lowest first). The groups of ranks lie in
    /// `i32::MIN..0` (host, then rank, each rank's GPUs after it), other groups above, by file and pid, GPU and
    /// counter groups after every process: formats
    /// that take a 32-bit place (Perfetto's `sibling_order_rank`, Chrome's `process_sort_index`) take a value
    /// beyond it as the nearest end.
    pub sort: i64,
}

/// A value of a slice's arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    /// Unsigned number.
    U(u64),
    /// Signed number.
    I(i64),
    /// Text.
    S(String),
    /// Float.
    F(f64),
}

/// A slice (or, with `start == end` and `instant`, an instant) on a track. An instant on a group's track (one with
/// a [`Track::process`]) is the process's own: how its stream ended (`ended at signal 11 (SIGSEGV)`).
#[derive(Debug, Clone, PartialEq)]
pub struct Slice<'a> {
    /// The track ([`Track::id`]).
    pub track: u64,
    /// Name.
    pub name: &'a str,
    /// Category, as torch.profiler names them (`kernel`, `gpu_memcpy`, `cuda_runtime`, ...).
    pub category: &'static str,
    /// Start, ns, on the common timeline.
    pub start: u64,
    /// End, ns.
    pub end: u64,
    /// An instant event (no duration).
    pub instant: bool,
    /// Arguments.
    pub args: Vec<(&'static str, Arg)>,
    /// A flow starts here (from an API call).
    pub flow_out: Option<u64>,
    /// A flow ends here (at device work).
    pub flow_in: Option<u64>,
    /// ARGB colour, where the record gave one (NVTX).
    pub color: Option<u32>,
}

/// A counter track: the values of one metric of one device over time, under the device's counter group (a
/// [`Track`] with a process).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterTrack {
    /// Unique id among tracks and counter tracks (never 0).
    pub id: u64,
    /// The group ([`Track::id`]).
    pub parent: u64,
    /// Name, with its unit: `SM active (%)`.
    pub name: String,
    /// The unit of the values (`%`, `B/s`; empty when the metric's name says none).
    pub unit: &'static str,
    /// The metric, as sampled.
    pub metric: String,
    /// Place among its siblings.
    pub sort: i64,
}

/// A value of a counter track, from `time` until the track's next value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CounterValue {
    /// The track ([`CounterTrack::id`]).
    pub track: u64,
    /// ns, on the common timeline.
    pub time: u64,
    /// The value (always finite).
    pub value: f64,
}

/// What a timeline is written to.
pub trait TimelineSink {
    /// A new track (called before its first slice, parents before children).
    fn track(&mut self, track: &Track) -> io::Result<()>;
    /// A group's track given again, renamed, after its [`track`](Self::track): its name (and its process's) now
    /// says that its process crashed (`... (crashed: signal 11 (SIGSEGV))`), learnt from its stream's end record.
    /// By default given to [`track`](Self::track) again: Chrome's and Perfetto's viewers take a group's last name.
    fn renamed(&mut self, track: &Track) -> io::Result<()> {
        self.track(track)
    }
    /// A slice or instant.
    fn slice(&mut self, slice: &Slice<'_>) -> io::Result<()>;
    /// A new counter track (called after its group's [`track`](Self::track), before its first value). A sink that
    /// shows no counters leaves this and [`counter`](Self::counter) as they are: they ignore what they get.
    fn counter_track(&mut self, track: &CounterTrack) -> io::Result<()> {
        let _ = track;
        Ok(())
    }
    /// A value of a counter track.
    fn counter(&mut self, value: &CounterValue) -> io::Result<()> {
        let _ = value;
        Ok(())
    }
    /// The end of the export.
    fn finish(&mut self) -> io::Result<()>;
}
