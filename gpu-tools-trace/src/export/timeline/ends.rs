//! How each process's stream ended, marked at its end as Nsight Systems marks a process that crashed: a stream that
//! ended at a fatal signal gets an instant on its process group, `ended at signal 11 (SIGSEGV)`, and its group's
//! name says so (`process 100 python train.py (crashed: signal 11 (SIGSEGV))`); a stream with a start record but
//! no end record (the process killed, the trace cut short) gets an instant at the end of its last slice, `trace
//! ends with no end record`, on its process group, or where it has none (no host-side slice) on each of its GPU
//! groups. A normal end (exit, tracing stopped) is not marked.

use std::io;

use super::{Arg, Slice, Timeline, TimelineSink};
use crate::record::{EndReason, ProcessEnd};

/// What a crashed process's group name gains: ` (crashed: signal 11 (SIGSEGV))`; nothing for another end.
pub(super) fn suffix(reason: EndReason) -> String {
    match reason {
        EndReason::Signal(_) => format!(" (crashed: {reason})"),
        _ => String::new(),
    }
}

impl<S: TimelineSink> Timeline<S> {
    /// Takes the end record of stream `key` (its first: another is ignored): a fatal signal renames its process
    /// group and is marked there at the end's time.
    pub(super) fn process_end(&mut self, key: (u32, u32), end: &ProcessEnd) -> io::Result<()> {
        let s = self.streams.entry(key).or_default();
        if s.end.is_some() {
            return Ok(());
        }
        s.end = Some(end.reason);
        let EndReason::Signal(signal) = end.reason else {
            return Ok(());
        };
        let group = match s.process_track.as_mut() {
            Some(track) => {
                track.name.push_str(&suffix(end.reason));
                if let Some(p) = track.process.as_mut() {
                    p.name.clone_from(&track.name);
                }
                let (id, track) = (track.id, track.clone());
                self.sink.renamed(&track)?;
                id
            }
            // Made now, its name saying the end.
            None => self.process_track(key)?,
        };
        let time = self.alignment.apply(key.0, key.1, end.time);
        let reason = end.reason.to_string();
        self.sink.slice(&Slice {
            track: group,
            name: &format!("ended at {reason}"),
            category: "process",
            start: time,
            end: time,
            instant: true,
            args: vec![
                ("end", Arg::S(reason)),
                ("signal", Arg::U(u64::from(signal))),
                (
                    "note",
                    Arg::S(
                        "the process was ending at this signal: what it had recorded was flushed, but its work \
                         still in flight (kernels queued or running, calls not yet returned) has no record"
                            .into(),
                    ),
                ),
            ],
            flow_out: None,
            flow_in: None,
            color: None,
        })
    }

    /// Marks stream `key` at the end of its last slice if it started but has no end record (called at the export's
    /// end): on its process group, else on each of its GPU groups, else on a process group made for it.
    pub(super) fn cut_off(&mut self, key: (u32, u32)) -> io::Result<()> {
        let Some(s) = self.streams.get(&key) else {
            return Ok(());
        };
        let (Some(start), None) = (s.started, s.end) else {
            return Ok(());
        };
        let time = if s.last > 0 {
            s.last
        } else {
            self.alignment.apply(key.0, key.1, start)
        };
        let mut groups: Vec<u64> = match &s.process_track {
            Some(track) => vec![track.id],
            None => s.groups.values().copied().collect(),
        };
        groups.sort_unstable();
        if groups.is_empty() {
            groups.push(self.process_track(key)?);
        }
        for group in groups {
            self.cut_off_mark(group, time)?;
        }
        Ok(())
    }

    fn cut_off_mark(&mut self, group: u64, time: u64) -> io::Result<()> {
        self.sink.slice(&Slice {
            track: group,
            name: "trace ends with no end record",
            category: "process",
            start: time,
            end: time,
            instant: true,
            args: vec![
                ("end", Arg::S("none".into())),
                (
                    "note",
                    Arg::S(
                        "the stream has no end record (the process was killed, e.g. by SIGKILL, or the trace was \
                         cut short): its last records may be missing"
                            .into(),
                    ),
                ),
            ],
            flow_out: None,
            flow_in: None,
            color: None,
        })
    }
}
