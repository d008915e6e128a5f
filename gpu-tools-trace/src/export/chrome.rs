//! The Chrome trace JSON format (`{"traceEvents": [...]}`), written event by event: complete events (`"ph": "X"`,
//! microseconds), instants (`"i"`; one on a group's track process-scoped, `"s":"p"`), metadata naming processes and threads (`"M"`), flow arrows (`"s"`/`"f"`), and
//! counters (`"C"`: one counter per track, named as the track, its value under `value`, in its group's process).
//! Opens in Perfetto and `chrome://tracing`.

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

use super::timeline::{Arg, CounterTrack, CounterValue, Slice, TimelineSink, Track};
use crate::report::json_string;

/// Writes a Chrome trace to any `io::Write`, one event at a time (gzip it by wrapping the writer).
#[derive(Debug)]
pub struct ChromeWriter<W: Write> {
    out: W,
    /// The process number of each track's group.
    pids: HashMap<u64, u32>,
    /// The tracks of groups: an instant there is the process's own (process-scoped, `"s":"p"`).
    groups: HashSet<u64>,
    /// The process number and JSON-quoted name of each counter track.
    counters: HashMap<u64, (u32, String)>,
    started: bool,
    events: u64,
}

/// Nanoseconds as the format's microseconds, exactly (three decimals).
fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

impl<W: Write> ChromeWriter<W> {
    /// Writes to `out` (buffer it).
    pub fn new(out: W) -> Self {
        ChromeWriter {
            out,
            pids: HashMap::new(),
            groups: HashSet::new(),
            counters: HashMap::new(),
            started: false,
            events: 0,
        }
    }

    /// Events written so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Flushes and returns the writer (after [`TimelineSink::finish`]).
    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }

    fn event(&mut self, body: &str) -> io::Result<()> {
        if !self.started {
            self.started = true;
            self.out.write_all(b"{\"traceEvents\":[\n")?;
        } else {
            self.out.write_all(b",\n")?;
        }
        self.events += 1;
        self.out.write_all(body.as_bytes())
    }
}

/// A place as the viewers read `sort_index`: a 32-bit integer (a value beyond taken as the nearest end).
fn sort_index(sort: i64) -> i64 {
    sort.clamp(i64::from(i32::MIN), i64::from(i32::MAX))
}

fn args_json(args: &[(&'static str, Arg)]) -> String {
    let mut s = String::from("{");
    for (i, (k, v)) in args.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&json_string(k));
        s.push(':');
        match v {
            Arg::U(v) => s.push_str(&v.to_string()),
            Arg::I(v) => s.push_str(&v.to_string()),
            Arg::F(v) if v.is_finite() => s.push_str(&v.to_string()),
            Arg::F(_) => s.push_str("null"),
            Arg::S(t) => s.push_str(&json_string(t)),
        }
    }
    s.push('}');
    s
}

impl<W: Write> TimelineSink for ChromeWriter<W> {
    fn track(&mut self, track: &Track) -> io::Result<()> {
        if let Some(p) = &track.process {
            self.pids.insert(track.id, p.pid);
            self.groups.insert(track.id);
            self.event(&format!(
                "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"args\":{{\"name\":{}}}}}",
                p.pid,
                json_string(&p.name)
            ))?;
            return self.event(&format!(
                "{{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":{},\"args\":{{\"sort_index\":{}}}}}",
                p.pid,
                sort_index(track.sort)
            ));
        }
        let pid = track
            .parent
            .and_then(|p| self.pids.get(&p).copied())
            .unwrap_or(0);
        self.pids.insert(track.id, pid);
        self.event(&format!(
            "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{},\"args\":{{\"name\":{}}}}}",
            track.id,
            json_string(&track.name)
        ))?;
        self.event(&format!(
            "{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{},\"args\":{{\"sort_index\":{}}}}}",
            track.id,
            sort_index(track.sort)
        ))
    }

    fn slice(&mut self, slice: &Slice<'_>) -> io::Result<()> {
        let pid = self.pids.get(&slice.track).copied().unwrap_or(0);
        let (tid, name, cat) = (slice.track, json_string(slice.name), slice.category);
        let args = args_json(&slice.args);
        if slice.instant && self.groups.contains(&slice.track) {
            self.event(&format!(
                "{{\"name\":{name},\"cat\":\"{cat}\",\"ph\":\"i\",\"s\":\"p\",\"pid\":{pid},\"ts\":{},\"args\":{args}}}",
                us(slice.start)
            ))?;
        } else if slice.instant {
            self.event(&format!(
                "{{\"name\":{name},\"cat\":\"{cat}\",\"ph\":\"i\",\"s\":\"t\",\"pid\":{pid},\"tid\":{tid},\"ts\":{},\"args\":{args}}}",
                us(slice.start)
            ))?;
        } else {
            self.event(&format!(
                "{{\"name\":{name},\"cat\":\"{cat}\",\"ph\":\"X\",\"pid\":{pid},\"tid\":{tid},\"ts\":{},\"dur\":{},\"args\":{args}}}",
                us(slice.start),
                us(slice.end.saturating_sub(slice.start))
            ))?;
        }
        if let Some(id) = slice.flow_out {
            self.event(&format!(
                "{{\"name\":\"ac2g\",\"cat\":\"ac2g\",\"ph\":\"s\",\"id\":{id},\"pid\":{pid},\"tid\":{tid},\"ts\":{}}}",
                us(slice.start)
            ))?;
        }
        if let Some(id) = slice.flow_in {
            self.event(&format!(
                "{{\"name\":\"ac2g\",\"cat\":\"ac2g\",\"ph\":\"f\",\"bp\":\"e\",\"id\":{id},\"pid\":{pid},\"tid\":{tid},\"ts\":{}}}",
                us(slice.start)
            ))?;
        }
        Ok(())
    }

    fn counter_track(&mut self, track: &CounterTrack) -> io::Result<()> {
        let pid = self.pids.get(&track.parent).copied().unwrap_or(0);
        self.counters
            .insert(track.id, (pid, json_string(&track.name)));
        Ok(())
    }

    fn counter(&mut self, value: &CounterValue) -> io::Result<()> {
        let Some((pid, name)) = self.counters.get(&value.track) else {
            return Ok(());
        };
        let v = if value.value.is_finite() {
            value.value
        } else {
            0.0
        };
        let body = format!(
            "{{\"name\":{name},\"ph\":\"C\",\"pid\":{pid},\"ts\":{},\"args\":{{\"value\":{v}}}}}",
            us(value.time)
        );
        self.event(&body)
    }

    fn finish(&mut self) -> io::Result<()> {
        if !self.started {
            self.started = true;
            self.out.write_all(b"{\"traceEvents\":[\n")?;
        }
        self.out.write_all(b"\n],\"displayTimeUnit\":\"ns\"}\n")?;
        self.out.flush()
    }
}
