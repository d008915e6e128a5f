//! Tracks, made on first use and named: a process group per stream, a group per GPU, and under them the lanes of
//! each row (a host thread's API or NVTX, a device stream, synchronization, the vendor's overhead).

use std::io;

use super::ranks::{RANK_SLOTS, RANK_SORT};
use super::state::{Key, Row};
use super::{Timeline, TimelineSink, Track, TrackProcess};
use super::{ends, numbers};
use crate::wire::ThreadIds;

/// Most lanes of one row; past it slices go to the last lane (and may nest wrongly there).
const MAX_LANES: usize = 32;
/// Most characters of a command line in a process group's name.
pub(super) const MAX_COMMAND: usize = 120;

impl<S: TimelineSink> Timeline<S> {
    /// Slices that had to go to an overfull track's last lane (they may nest wrongly there).
    pub fn misnested(&self) -> u64 {
        self.misnested
    }

    pub(super) fn new_track(&mut self) -> u64 {
        let id = self.next_track;
        self.next_track += 1;
        id
    }

    /// The process group of a stream, made on first use: its process's pid as its number unless a group before it
    /// took that number ([`numbers`](super::numbers)), its name told apart from an earlier group's of the same name.
    pub(super) fn process_track(&mut self, key: (u32, u32)) -> io::Result<u64> {
        if let Some(t) = self
            .streams
            .get(&key)
            .and_then(|s| s.process_track.as_ref())
        {
            return Ok(t.id);
        }
        let place = self.stream_place(key);
        let s = self.streams.entry(key).or_default();
        let real = s.pid;
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
        let pid = self.numbers.number(Some(real))?;
        let mut name = self.numbers.name(name, key);
        // Made after its end record (its first slice came after it): said at once.
        if let Some(reason) = self.streams.get(&key).and_then(|s| s.end) {
            name.push_str(&ends::suffix(reason));
        }
        let id = self.new_track();
        // Ranks first, by host then rank, each followed by its GPUs ([`Self::group_track`]); other processes by
        // file, then pid.
        let sort = match place {
            Some(place) => RANK_SORT + place * RANK_SLOTS,
            None => numbers::place(key.0, real, None),
        };
        let track = Track {
            id,
            parent: None,
            name: name.clone(),
            process: Some(TrackProcess { pid, name }),
            sort,
        };
        self.sink.track(&track)?;
        self.streams.entry(key).or_default().process_track = Some(track);
        Ok(id)
    }

    /// The group track of `group` (a GPU), made on first use: a process number of the export's own.
    pub(super) fn group_track(&mut self, key: (u32, u32), group: Key) -> io::Result<u64> {
        if let Some(&t) = self.streams.get(&key).and_then(|s| s.groups.get(&group)) {
            return Ok(t);
        }
        let id = self.new_track();
        let pid = self.streams.get(&key).map_or(0, |s| s.pid);
        let Key::Gpu(device) = group else {
            return Ok(id);
        };
        // GPU groups sort after every process. A rank's sort right after its process group, named with its host and
        // rank.
        let place = self.stream_place(key);
        let info = self.streams.get(&key).and_then(|s| s.info.as_ref());
        let (name, sort) = match info.and_then(|i| Some((i, i.rank()?, place?))) {
            Some((i, rank, place)) => (
                format!("GPU {device} ({} rank {rank}, pid {pid})", i.host),
                RANK_SORT + place * RANK_SLOTS + 1 + i64::from(device & 0x3f).min(RANK_SLOTS - 2),
            ),
            None => (
                format!("GPU {device} (pid {pid})"),
                numbers::place(key.0, pid, Some(device)),
            ),
        };
        let number = self.numbers.number(None)?;
        let name = self.numbers.name(name, key);
        self.sink.track(&Track {
            id,
            parent: None,
            name: name.clone(),
            process: Some(TrackProcess { pid: number, name }),
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
    pub(super) fn lane(
        &mut self,
        key: (u32, u32),
        row: Key,
        start: u64,
        end: u64,
    ) -> io::Result<u64> {
        let s = self.streams.entry(key).or_default();
        s.last = s.last.max(end);
        let lanes = s.rows.entry(row.clone()).or_default();
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
}
