//! Taking records in: whole files, or the headers and records of single streams, each record dispatched by its
//! kind; and the export's end.

use std::io::{self, Read};

use super::state::MAX_OPEN;
use super::{Timeline, TimelineSink};
use crate::file::{TraceFileError, TraceItem, TraceReader};
use crate::record::Record;
use crate::wire::StreamHeader;

impl<S: TimelineSink> Timeline<S> {
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

    /// Ends the export and returns the sink.
    pub fn finish(mut self) -> io::Result<S> {
        let mut keys: Vec<(u32, u32)> = self.streams.keys().copied().collect();
        keys.sort_unstable();
        for key in &keys {
            self.release(*key)?;
        }
        for key in keys {
            self.cut_off(key)?;
        }
        self.end_counters()?;
        self.sink.finish()?;
        Ok(self.sink)
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
                s.started = Some(p.time);
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
            // The stream is complete: nothing more can pair with what it left waiting; a fatal signal is marked.
            Record::ProcessEnd(e) => {
                self.release(key)?;
                self.process_end(key, e)?;
            }
            Record::CounterSample(c) => self.counter_sample(key, c)?,
            Record::CounterGap(g) => self.counter_gap(key, g)?,
            _ => {}
        }
        Ok(())
    }
}
