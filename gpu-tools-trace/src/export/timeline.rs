//! From records to tracks and slices, for any timeline format.

mod counters;
mod findings;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{self, Read};

use crate::file::{TraceFileError, TraceItem, TraceReader};
use crate::record::*;
use crate::report::Alignment;
use crate::wire::{StreamHeader, ThreadIds};

/// The process a track stands for (its group in the viewer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackProcess {
    /// A process number unique in the export (the real pid for the first file; see [`Track`]).
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
    /// For a group: the process it stands for. A GPU group has a pseudo process number above every real pid.
    pub process: Option<TrackProcess>,
    /// Place among its siblings; for a group, among the groups (lowest first). The groups of ranks lie in
    /// `i32::MIN..0` (host, then rank, each rank's GPUs after it), other groups above, by process number: formats
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

/// A slice (or, with `start == end` and `instant`, an instant) on a track.
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

/// Rows of a process's host threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Row {
    Runtime,
    Driver,
    OtherApi,
    Nvtx,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Gpu(u32),
    Stream(u32, u32),
    Thread(u32, Row),
    Sync,
    Overhead,
}

/// Lanes of one row: the end of the last slice of each.
#[derive(Debug, Default)]
struct Lanes {
    ends: Vec<u64>,
    ids: Vec<u64>,
}

/// Most lanes of one row; past it slices go to the last lane (and may nest wrongly there).
const MAX_LANES: usize = 32;
/// Most characters of a command line in a process group's name.
const MAX_COMMAND: usize = 120;
/// Where the groups of ranks sort: before every process numbered by its pid, from the lowest 32-bit place up.
const RANK_SORT: i64 = i32::MIN as i64;
/// Places of one rank's groups: its process, then its GPUs.
const RANK_SLOTS: i64 = 64;
/// Most rank places: `RANK_SORT + RANK_PLACES * RANK_SLOTS` is 0.
const RANK_PLACES: i64 = 1 << 25;
/// Most open NVTX ranges and pending marker data kept per stream.
const MAX_OPEN: usize = 1 << 16;

#[derive(Debug, Default)]
struct StreamState {
    pid: u32,
    /// What its thread fields hold (from its header).
    thread_ids: ThreadIds,
    command: String,
    info: Option<ProcessInfo>,
    /// Its place among the ranks ([`Timeline::rank_place`]), once its first group is made.
    place: Option<i64>,
    process_track: Option<u64>,
    rows: HashMap<Key, Lanes>,
    groups: HashMap<Key, u64>,
    /// Slices held until the other end of their flow arrives, by correlation id.
    waiting: BTreeMap<u32, Waiting>,
    /// Slices in `waiting`.
    held: usize,
    /// Correlation ids whose flow was drawn (more device work of the same call gets none).
    paired: HashSet<u32>,
    open: HashMap<u32, (u32, u64, String, String)>,
    data: HashMap<u32, MarkerData>,
}

/// A slice kept back (its track already chosen) until its flow can be drawn.
#[derive(Debug)]
struct Held {
    track: u64,
    name: String,
    category: &'static str,
    start: u64,
    end: u64,
    args: Vec<(&'static str, Arg)>,
}

impl Held {
    fn slice(&self, flow_out: Option<u64>, flow_in: Option<u64>) -> Slice<'_> {
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
enum Waiting {
    Call(Held),
    Work(Vec<Held>),
}

impl Waiting {
    fn len(&self) -> usize {
        match self {
            Waiting::Call(_) => 1,
            Waiting::Work(w) => w.len(),
        }
    }
}

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
}

impl<S: TimelineSink> std::fmt::Debug for Timeline<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timeline")
            .field("streams", &self.streams.len())
            .field("tracks", &self.next_track)
            .finish_non_exhaustive()
    }
}

/// Whether an API function issues device work (its calls get flow arrows).
fn issues_work(name: &str) -> bool {
    ["Launch", "Memcpy", "Memset", "memcpy", "memset"]
        .iter()
        .any(|w| name.contains(w))
}

/// Host names in the order an operator reads them: as text, but a run of digits as its number (`h2` before `h10`,
/// `node-9` before `node-10`); equal numbers with more leading zeros first, then as text.
fn natural_order(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let n = x.iter().take_while(|c| c.is_ascii_digit()).count();
                let m = y.iter().take_while(|c| c.is_ascii_digit()).count();
                let (p, q) = (&x[..n], &y[..m]);
                let strip = |s: &[u8]| -> usize { s.iter().take_while(|&&c| c == b'0').count() };
                let (p0, q0) = (&p[strip(p)..], &q[strip(q)..]);
                let by_value = p0.len().cmp(&q0.len()).then_with(|| p0.cmp(q0));
                if by_value != Ordering::Equal {
                    return by_value;
                }
                x = &x[n..];
                y = &y[m..];
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(d);
                }
                x = &x[1..];
                y = &y[1..];
            }
        }
    }
}

/// Notes that the flow of `correlation` was drawn (a bounded set: forgotten wholesale when full).
fn remember(paired: &mut HashSet<u32>, correlation: u32) {
    if paired.len() >= MAX_OPEN {
        paired.clear();
    }
    paired.insert(correlation);
}

/// Writes held slices without a flow.
fn write_unpaired(sink: &mut impl TimelineSink, waiting: Waiting) -> io::Result<()> {
    match waiting {
        Waiting::Call(call) => sink.slice(&call.slice(None, None)),
        Waiting::Work(work) => work
            .iter()
            .try_for_each(|w| sink.slice(&w.slice(None, None))),
    }
}

fn flow_id(key: (u32, u32), correlation: u32) -> u64 {
    (u64::from(key.0 & 0xffff) << 48) | (u64::from(key.1 & 0xffff) << 32) | u64::from(correlation)
}

impl<S: TimelineSink> Timeline<S> {
    /// A timeline written to `sink`.
    pub fn new(sink: S) -> Self {
        Timeline {
            sink,
            streams: HashMap::new(),
            alignment: Alignment::new(),
            next_track: 1,
            misnested: 0,
            records: HashMap::new(),
            versions: HashMap::new(),
            counters: HashMap::new(),
            rank_order: HashMap::new(),
            hosts_met: Vec::new(),
        }
    }

    /// Orders the groups of ranks by host, then rank: `ranks` are the (host, rank) pairs of the processes about to
    /// be read, from a first reading of the same files ([`Job::process_ranks`](crate::report::Job::process_ranks)).
    /// Hosts sort by name, the numbers in a name as numbers (`h2` before `h10`). Without it, and for a rank not
    /// given, ranks sort by host in the order the hosts are met, then by rank.
    pub fn order_ranks(&mut self, ranks: impl IntoIterator<Item = (String, u32)>) {
        let mut ranks: Vec<(String, u32)> = ranks.into_iter().collect();
        ranks.sort_by(|a, b| natural_order(&a.0, &b.0).then(a.1.cmp(&b.1)));
        ranks.dedup();
        self.rank_order = ranks
            .into_iter()
            .enumerate()
            .map(|(i, r)| (r, i64::try_from(i).unwrap_or(i64::MAX)))
            .collect();
    }

    /// The place of a rank among the ranks' groups: as [`order_ranks`](Self::order_ranks) gave it, else after those
    /// given, by the host's order met (up to 512), then rank (up to 65,535).
    fn rank_place(&mut self, host: &str, rank: u32) -> i64 {
        if let Some(&place) = self.rank_order.get(&(host.to_string(), rank)) {
            return place.min(RANK_PLACES - 1);
        }
        let h = match self.hosts_met.iter().position(|m| m == host) {
            Some(h) => h,
            None => {
                self.hosts_met.push(host.to_string());
                self.hosts_met.len() - 1
            }
        };
        let met =
            (i64::try_from(h).unwrap_or(i64::MAX).min(511) << 16) | i64::from(rank.min(65_535));
        let given = i64::try_from(self.rank_order.len()).unwrap_or(i64::MAX);
        given.saturating_add(met).min(RANK_PLACES - 1)
    }

    /// The place of stream `key`'s rank, where it has one (kept, so that its process and GPU groups agree).
    fn stream_place(&mut self, key: (u32, u32)) -> Option<i64> {
        let s = self.streams.get(&key)?;
        if let Some(place) = s.place {
            return Some(place);
        }
        let info = s.info.as_ref()?;
        let rank = info.rank()?;
        let host = info.host.clone();
        let place = self.rank_place(&host, rank);
        self.streams.entry(key).or_default().place = Some(place);
        Some(place)
    }

    /// Moves the streams of a host (and boot) by `ns` beyond what their clock anchors say, before they are read:
    /// the [`HostAlignment::correction`](crate::report::HostAlignment::correction) that
    /// [`Job::collective_alignment`](crate::report::Job::collective_alignment) found for it on a first reading of
    /// the same files, in the same order.
    pub fn correct(&mut self, host: &str, boot_id: &str, ns: i64) {
        self.alignment.correct(host, boot_id, ns);
    }

    /// Reads a whole trace file or stream as file number `file` (numbers keep the streams of several files apart)
    /// and returns the reading errors met; an error of the sink ends the export.
    pub fn read(&mut self, file: u32, source: impl Read) -> io::Result<Vec<TraceFileError>> {
        let mut errors = Vec::new();
        let mut reader = TraceReader::new(source);
        for item in reader.by_ref() {
            match item {
                Ok(TraceItem::Record { stream, record }) => {
                    *self.records.entry(file).or_default() += 1;
                    self.add((file, stream), &record)?;
                }
                Ok(TraceItem::Header { stream, header }) => self.header((file, stream), &header),
                Ok(_) => {}
                Err(e) => errors.push(e),
            }
        }
        if let Some(version) = reader.file_version() {
            self.versions.insert(file, version);
        }
        // Nothing of this file can pair with what it left waiting.
        let mut keys: Vec<(u32, u32)> = self
            .streams
            .keys()
            .filter(|k| k.0 == file)
            .copied()
            .collect();
        keys.sort_unstable();
        for key in keys {
            self.release(key)?;
        }
        Ok(errors)
    }

    /// The records [`read`](Self::read) took from file number `file`: 0 for a file that holds none (or none
    /// before an error that ended its reading).
    pub fn records(&self, file: u32) -> u64 {
        self.records.get(&file).copied().unwrap_or(0)
    }

    /// The format version of file number `file`, once read; `None` for a single stream (or an input whose header
    /// could not be read). [`format_limits`](crate::file::format_limits) says what an older version cannot show.
    pub fn file_version(&self, file: u32) -> Option<u16> {
        self.versions.get(&file).copied()
    }

    /// Slices that had to go to an overfull track's last lane (they may nest wrongly there).
    pub fn misnested(&self) -> u64 {
        self.misnested
    }

    /// Ends the export and returns the sink.
    pub fn finish(mut self) -> io::Result<S> {
        let mut keys: Vec<(u32, u32)> = self.streams.keys().copied().collect();
        keys.sort_unstable();
        for key in keys {
            self.release(key)?;
        }
        self.end_counters()?;
        self.sink.finish()?;
        Ok(self.sink)
    }

    fn new_track(&mut self) -> u64 {
        let id = self.next_track;
        self.next_track += 1;
        id
    }

    /// The process group of a stream, made on first use.
    fn process_track(&mut self, key: (u32, u32)) -> io::Result<u64> {
        if let Some(t) = self.streams.get(&key).and_then(|s| s.process_track) {
            return Ok(t);
        }
        let id = self.new_track();
        let place = self.stream_place(key);
        let s = self.streams.entry(key).or_default();
        s.process_track = Some(id);
        let pid = s.pid | (key.0 << 22);
        // A rank's group leads with its host and rank, so that a job's groups read (and sort) as its ranks.
        let ranked = s
            .info
            .as_ref()
            .filter(|i| i.rank().is_some())
            .map(|i| format!("{} {}: ", i.host, i.rank_label()));
        let mut name = format!("{}process {}", ranked.as_deref().unwrap_or(""), s.pid);
        if !s.command.is_empty() {
            name.push(' ');
            // A long command line is cut, the cut marked.
            if s.command.chars().count() > MAX_COMMAND {
                name.extend(s.command.chars().take(MAX_COMMAND - 1));
                name.push('…');
            } else {
                name.push_str(&s.command);
            }
        }
        if let (Some(info), None) = (&s.info, &ranked) {
            let rank = info.rank_label();
            name.push_str(&format!(" [{}", info.host));
            if !rank.is_empty() {
                name.push_str(&format!(", {rank}"));
            }
            name.push(']');
        }
        // Ranks first, by host then rank, each followed by its GPUs ([`Self::group_track`]); other processes by
        // pid.
        let sort = match place {
            Some(place) => RANK_SORT + place * RANK_SLOTS,
            None => i64::from(pid),
        };
        self.sink.track(&Track {
            id,
            parent: None,
            name: name.clone(),
            process: Some(TrackProcess { pid, name }),
            sort,
        })?;
        Ok(id)
    }

    /// The group track of `group` (a GPU), made on first use.
    fn group_track(&mut self, key: (u32, u32), group: Key) -> io::Result<u64> {
        if let Some(&t) = self.streams.get(&key).and_then(|s| s.groups.get(&group)) {
            return Ok(t);
        }
        let id = self.new_track();
        let pid = self.streams.get(&key).map_or(0, |s| s.pid);
        let Key::Gpu(device) = group else {
            return Ok(id);
        };
        // GPU groups sort after every process; their pseudo process numbers lie above any real pid. A rank's sort
        // right after its process group, named with its host and rank.
        let pseudo = (1 << 30) | (key.0 << 22) | ((pid & 0xffff) << 6) | (device & 0x3f);
        let place = self.stream_place(key);
        let info = self.streams.get(&key).and_then(|s| s.info.as_ref());
        let (name, sort) = match info.and_then(|i| Some((i, i.rank()?, place?))) {
            Some((i, rank, place)) => (
                format!("GPU {device} ({} rank {rank}, pid {pid})", i.host),
                RANK_SORT + place * RANK_SLOTS + 1 + i64::from(device & 0x3f).min(RANK_SLOTS - 2),
            ),
            None => (format!("GPU {device} (pid {pid})"), i64::from(pseudo)),
        };
        self.sink.track(&Track {
            id,
            parent: None,
            name: name.clone(),
            process: Some(TrackProcess { pid: pseudo, name }),
            sort,
        })?;
        self.streams
            .entry(key)
            .or_default()
            .groups
            .insert(group, id);
        Ok(id)
    }

    /// The lane of row `row` of a stream that can take a slice `[start, end]`, made on first use.
    fn lane(&mut self, key: (u32, u32), row: Key, start: u64, end: u64) -> io::Result<u64> {
        let lanes = self
            .streams
            .entry(key)
            .or_default()
            .rows
            .entry(row.clone())
            .or_default();
        if let Some(i) = lanes.ends.iter().position(|&e| e <= start) {
            lanes.ends[i] = end;
            return Ok(lanes.ids[i]);
        }
        if lanes.ends.len() >= MAX_LANES {
            self.misnested += 1;
            let last = lanes.ends.len() - 1;
            lanes.ends[last] = lanes.ends[last].max(end);
            return Ok(lanes.ids[last]);
        }
        let n = lanes.ends.len();
        let parent = match row {
            Key::Stream(device, _) => self.group_track(key, Key::Gpu(device))?,
            _ => self.process_track(key)?,
        };
        let (name, sort) = match &row {
            Key::Stream(_, stream) => (format!("stream {stream}"), i64::from(*stream)),
            Key::Thread(thread, r) => {
                let what = match r {
                    Row::Runtime => "CUDA runtime",
                    Row::Driver => "CUDA driver",
                    Row::OtherApi => "API",
                    Row::Nvtx => "NVTX",
                };
                let order = match r {
                    Row::Nvtx => 0,
                    Row::Runtime => 1,
                    Row::Driver => 2,
                    Row::OtherApi => 3,
                };
                let linux = self
                    .streams
                    .get(&key)
                    .is_some_and(|s| s.thread_ids == ThreadIds::Linux);
                let label = if linux { "TID" } else { "thread" };
                (
                    format!("{label} {thread} {what}"),
                    (i64::from(*thread) << 3) | order,
                )
            }
            Key::Sync => ("synchronization".to_string(), i64::MAX - 1),
            Key::Overhead => ("CUPTI overhead".to_string(), i64::MAX),
            Key::Gpu(_) => (String::new(), 0),
        };
        let name = if n == 0 {
            name
        } else {
            format!("{name} ({})", n + 1)
        };
        let id = self.new_track();
        self.sink.track(&Track {
            id,
            parent: Some(parent),
            name,
            process: None,
            sort: sort.saturating_mul(64).saturating_add(n as i64),
        })?;
        let lanes = self
            .streams
            .entry(key)
            .or_default()
            .rows
            .entry(row)
            .or_default();
        lanes.ends.push(end);
        lanes.ids.push(id);
        Ok(id)
    }

    /// Takes the header of stream `key` (file number, stream number), before its records: its process id, and
    /// whether its thread fields are Linux thread ids (their tracks are then named `TID N`; other streams' tracks,
    /// those of traces written before the header said so included, keep `thread N`).
    pub fn header(&mut self, key: (u32, u32), header: &StreamHeader) {
        let s = self.streams.entry(key).or_default();
        s.pid = header.pid;
        s.thread_ids = header.thread_ids;
    }

    /// Takes one record of stream `key` (file number, stream number).
    pub fn add(&mut self, key: (u32, u32), record: &Record) -> io::Result<()> {
        match record {
            Record::ProcessStart(p) => {
                let s = self.streams.entry(key).or_default();
                s.pid = p.pid;
                s.command = p.command.clone();
            }
            Record::ProcessInfo(i) => {
                self.alignment.process_info(key.0, key.1, i);
                self.streams.entry(key).or_default().info = Some(i.clone());
            }
            Record::ClockAnchor(a) => self.alignment.anchor(key.0, key.1, a),
            Record::Kernel(k) => self.kernel(key, k)?,
            Record::Memcpy(m) => self.memcpy(key, m)?,
            Record::Memset(m) => self.memset(key, m)?,
            Record::GraphLaunch(g) => self.graph_launch(key, g)?,
            Record::Api(a) => self.api(key, a)?,
            Record::Synchronization(y) => self.synchronization(key, y)?,
            Record::Overhead(o) => self.overhead(key, o)?,
            Record::MarkerData(d) => {
                let s = self.streams.entry(key).or_default();
                if s.data.len() < MAX_OPEN {
                    s.data.insert(d.id, d.clone());
                }
            }
            Record::Marker(m) => self.marker(key, m)?,
            // The stream is complete: nothing more can pair with what it left waiting.
            Record::ProcessEnd(_) => self.release(key)?,
            Record::CounterSample(c) => self.counter_sample(key, c)?,
            Record::CounterGap(g) => self.counter_gap(key, g)?,
            _ => {}
        }
        Ok(())
    }

    /// A kernel: a slice on its device stream's track, its flow from the launch call.
    fn kernel(&mut self, key: (u32, u32), k: &KernelRecord) -> io::Result<()> {
        let shift = |a: &Alignment, t: u64| a.apply(key.0, key.1, t);
        let (start, end) = (
            shift(&self.alignment, k.start),
            shift(&self.alignment, k.end),
        );
        let track = self.lane(key, Key::Stream(k.device, k.stream), start, end)?;
        let mut args = vec![
            ("correlation", Arg::U(u64::from(k.correlation))),
            (
                "grid",
                Arg::S(format!("{},{},{}", k.grid[0], k.grid[1], k.grid[2])),
            ),
            (
                "block",
                Arg::S(format!("{},{},{}", k.block[0], k.block[1], k.block[2])),
            ),
            ("registers per thread", Arg::U(u64::from(k.registers))),
            (
                "shared memory",
                Arg::U(u64::from(k.static_shared) + u64::from(k.dynamic_shared)),
            ),
        ];
        if k.graph_id != 0 {
            args.push(("graph", Arg::U(u64::from(k.graph_id))));
            args.push(("graph node", Arg::U(k.graph_node_id)));
        }
        let work = Held {
            track,
            name: k.name.to_string(),
            category: "kernel",
            start,
            end,
            args,
        };
        self.work(key, k.correlation, work)?;
        Ok(())
    }

    /// A memory copy: a slice on its device stream's track, its flow from the call.
    fn memcpy(&mut self, key: (u32, u32), m: &MemcpyRecord) -> io::Result<()> {
        let shift = |a: &Alignment, t: u64| a.apply(key.0, key.1, t);
        let (start, end) = (
            shift(&self.alignment, m.start),
            shift(&self.alignment, m.end),
        );
        let track = self.lane(key, Key::Stream(m.device, m.stream), start, end)?;
        let name = format!(
            "Memcpy {} ({} -> {})",
            m.kind.name(),
            m.src.name(),
            m.dst.name()
        );
        let work = Held {
            track,
            name,
            category: "gpu_memcpy",
            start,
            end,
            args: vec![
                ("bytes", Arg::U(m.bytes)),
                ("correlation", Arg::U(u64::from(m.correlation))),
            ],
        };
        self.work(key, m.correlation, work)?;
        Ok(())
    }

    /// A memory set: a slice on its device stream's track, its flow from the call.
    fn memset(&mut self, key: (u32, u32), m: &MemsetRecord) -> io::Result<()> {
        let shift = |a: &Alignment, t: u64| a.apply(key.0, key.1, t);
        let (start, end) = (
            shift(&self.alignment, m.start),
            shift(&self.alignment, m.end),
        );
        let track = self.lane(key, Key::Stream(m.device, m.stream), start, end)?;
        let work = Held {
            track,
            name: "Memset".to_string(),
            category: "gpu_memset",
            start,
            end,
            args: vec![
                ("bytes", Arg::U(m.bytes)),
                ("value", Arg::U(u64::from(m.value))),
                ("correlation", Arg::U(u64::from(m.correlation))),
            ],
        };
        self.work(key, m.correlation, work)?;
        Ok(())
    }

    /// A CUDA graph launch: a slice on its device stream's track, its flow from the call.
    fn graph_launch(&mut self, key: (u32, u32), g: &GraphLaunchRecord) -> io::Result<()> {
        let shift = |a: &Alignment, t: u64| a.apply(key.0, key.1, t);
        let (start, end) = (
            shift(&self.alignment, g.start),
            shift(&self.alignment, g.end),
        );
        let track = self.lane(key, Key::Stream(g.device, g.stream), start, end)?;
        let work = Held {
            track,
            name: format!("CUDA graph {}", g.graph_id),
            category: "cuda_graph",
            start,
            end,
            args: vec![
                ("graph", Arg::U(u64::from(g.graph_id))),
                ("correlation", Arg::U(u64::from(g.correlation))),
            ],
        };
        self.work(key, g.correlation, work)?;
        Ok(())
    }

    /// An API call: a slice on its thread's track; one that issues work held for its flow.
    fn api(&mut self, key: (u32, u32), a: &ApiRecord) -> io::Result<()> {
        let shift = |a: &Alignment, t: u64| a.apply(key.0, key.1, t);
        let (start, end) = (
            shift(&self.alignment, a.start),
            shift(&self.alignment, a.end),
        );
        let row = match a.domain {
            ApiDomain::Runtime => Row::Runtime,
            ApiDomain::Driver => Row::Driver,
            _ => Row::OtherApi,
        };
        let track = self.lane(key, Key::Thread(a.thread, row), start, end)?;
        let unnamed;
        let name: &str = if a.name.is_empty() {
            unnamed = format!("{} cbid {}", a.domain.name(), a.cbid);
            &unnamed
        } else {
            &a.name
        };
        let call = Held {
            track,
            name: name.to_string(),
            category: match row {
                Row::Runtime => "cuda_runtime",
                _ => "cuda_driver",
            },
            start,
            end,
            args: vec![("correlation", Arg::U(u64::from(a.correlation)))],
        };
        if a.correlation != 0 && issues_work(name) {
            self.call(key, a.correlation, call)?;
        } else {
            self.sink.slice(&call.slice(None, None))?;
        }
        Ok(())
    }

    /// A synchronization: a slice on the process's synchronization track.
    fn synchronization(&mut self, key: (u32, u32), y: &SyncRecord) -> io::Result<()> {
        let shift = |a: &Alignment, t: u64| a.apply(key.0, key.1, t);
        let (start, end) = (
            shift(&self.alignment, y.start),
            shift(&self.alignment, y.end),
        );
        let track = self.lane(key, Key::Sync, start, end)?;
        self.sink.slice(&Slice {
            track,
            name: y.kind.name(),
            category: "cuda_sync",
            start,
            end,
            instant: false,
            args: vec![
                ("stream", Arg::U(u64::from(y.stream))),
                ("correlation", Arg::U(u64::from(y.correlation))),
            ],
            flow_out: None,
            flow_in: None,
            color: None,
        })?;
        Ok(())
    }

    /// The vendor's overhead: a slice on the process's overhead track.
    fn overhead(&mut self, key: (u32, u32), o: &OverheadRecord) -> io::Result<()> {
        let shift = |a: &Alignment, t: u64| a.apply(key.0, key.1, t);
        let (start, end) = (
            shift(&self.alignment, o.start),
            shift(&self.alignment, o.end),
        );
        let track = self.lane(key, Key::Overhead, start, end)?;
        self.sink.slice(&Slice {
            track,
            name: "CUPTI overhead",
            category: "overhead",
            start,
            end,
            instant: false,
            args: vec![("kind", Arg::U(u64::from(o.kind)))],
            flow_out: None,
            flow_in: None,
            color: None,
        })?;
        Ok(())
    }

    /// A launch or copy call of `correlation`: written with the flow to its work if that came first, else held.
    fn call(&mut self, key: (u32, u32), correlation: u32, call: Held) -> io::Result<()> {
        let s = self.streams.entry(key).or_default();
        match s.waiting.remove(&correlation) {
            Some(Waiting::Work(work)) => {
                s.held -= work.len();
                remember(&mut s.paired, correlation);
                let id = flow_id(key, correlation);
                self.sink.slice(&call.slice(Some(id), None))?;
                for (i, w) in work.iter().enumerate() {
                    self.sink.slice(&w.slice(None, (i == 0).then_some(id)))?;
                }
                Ok(())
            }
            Some(Waiting::Call(earlier)) => {
                // The same id twice: the earlier call will get no work.
                s.held -= 1;
                self.sink.slice(&earlier.slice(None, None))?;
                self.hold(key, correlation, Waiting::Call(call))
            }
            None => self.hold(key, correlation, Waiting::Call(call)),
        }
    }

    /// Device work of `correlation`: written with the flow from its call if that came first, else held.
    fn work(&mut self, key: (u32, u32), correlation: u32, work: Held) -> io::Result<()> {
        if correlation == 0 {
            return self.sink.slice(&work.slice(None, None));
        }
        let s = self.streams.entry(key).or_default();
        match s.waiting.remove(&correlation) {
            Some(Waiting::Call(call)) => {
                s.held -= 1;
                remember(&mut s.paired, correlation);
                let id = flow_id(key, correlation);
                self.sink.slice(&call.slice(Some(id), None))?;
                self.sink.slice(&work.slice(None, Some(id)))
            }
            Some(Waiting::Work(mut earlier)) => {
                s.held -= earlier.len();
                earlier.push(work);
                self.hold(key, correlation, Waiting::Work(earlier))
            }
            // More work of a call whose flow is drawn (the kernels of a graph's nodes).
            None if s.paired.contains(&correlation) => self.sink.slice(&work.slice(None, None)),
            None => self.hold(key, correlation, Waiting::Work(vec![work])),
        }
    }

    /// Holds `waiting` until its other side comes; past the bound, the oldest held slices are written without a
    /// flow.
    fn hold(&mut self, key: (u32, u32), correlation: u32, waiting: Waiting) -> io::Result<()> {
        let s = self.streams.entry(key).or_default();
        s.held += waiting.len();
        s.waiting.insert(correlation, waiting);
        while s.held > MAX_OPEN {
            let Some((_, oldest)) = s.waiting.pop_first() else {
                break;
            };
            s.held -= oldest.len();
            write_unpaired(&mut self.sink, oldest)?;
        }
        Ok(())
    }

    /// Writes, without flows, every slice stream `key` holds.
    fn release(&mut self, key: (u32, u32)) -> io::Result<()> {
        let Some(s) = self.streams.get_mut(&key) else {
            return Ok(());
        };
        let waiting = std::mem::take(&mut s.waiting);
        s.held = 0;
        s.paired.clear();
        for w in waiting.into_values() {
            write_unpaired(&mut self.sink, w)?;
        }
        Ok(())
    }

    fn marker(&mut self, key: (u32, u32), m: &MarkerRecord) -> io::Result<()> {
        let time = self.alignment.apply(key.0, key.1, m.time);
        let s = self.streams.entry(key).or_default();
        match m.kind {
            MarkerKind::Start => {
                if s.open.len() < MAX_OPEN {
                    s.open
                        .insert(m.id, (m.thread, time, m.domain.to_string(), m.name.clone()));
                }
                Ok(())
            }
            MarkerKind::End => {
                let Some((thread, start, domain, name)) = s.open.remove(&m.id) else {
                    return Ok(());
                };
                let data = s.data.remove(&m.id);
                let track = self.lane(key, Key::Thread(thread, Row::Nvtx), start, time)?;
                self.nvtx_slice(track, &domain, &name, start, time, false, data)
            }
            MarkerKind::Instant => {
                let data = s.data.remove(&m.id);
                let track = self.lane(key, Key::Thread(m.thread, Row::Nvtx), time, time)?;
                let domain = m.domain.to_string();
                self.nvtx_slice(track, &domain, &m.name, time, time, true, data)
            }
            _ => Ok(()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn nvtx_slice(
        &mut self,
        track: u64,
        domain: &str,
        name: &str,
        start: u64,
        end: u64,
        instant: bool,
        data: Option<MarkerData>,
    ) -> io::Result<()> {
        let mut args = Vec::new();
        if !domain.is_empty() {
            args.push(("domain", Arg::S(domain.to_string())));
        }
        let mut color = None;
        if let Some(d) = data {
            color = d.color;
            if d.category != 0 {
                args.push(("category", Arg::U(u64::from(d.category))));
            }
            match d.payload {
                MarkerPayload::Unsigned(v) => args.push(("payload", Arg::U(v))),
                MarkerPayload::Signed(v) => args.push(("payload", Arg::I(v))),
                MarkerPayload::Float(v) => args.push(("payload", Arg::F(v))),
                MarkerPayload::Other(k, v) => {
                    args.push(("payload", Arg::S(format!("kind {k}: {v:#x}"))))
                }
                _ => {}
            }
            if let Some(c) = d.color {
                args.push(("color", Arg::S(format!("#{:06x}", c & 0xff_ffff))));
            }
        }
        self.sink.slice(&Slice {
            track,
            name,
            category: "nvtx",
            start,
            end,
            instant,
            args,
            flow_out: None,
            flow_in: None,
            color,
        })
    }
}

#[cfg(test)]
mod tests;
