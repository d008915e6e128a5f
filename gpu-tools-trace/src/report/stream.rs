//! What is kept of each stream read: its process, its API calls and device operations, its NVTX ranges, its
//! kernels and counter records, and whether it was read to its end.

use std::collections::HashMap;
use std::sync::Arc;

use crate::record::{ProcessEnd, ProcessInfo};
use crate::{CounterGap, CounterSample};

/// A device operation of a stream, for the GPU projection.
#[derive(Debug, Clone, Copy)]
pub(super) struct DeviceOp {
    pub(super) correlation: u32,
    pub(super) start: u64,
    pub(super) end: u64,
}

/// An NVTX range, paired from its start and end markers.
#[derive(Debug, Clone)]
pub(super) struct Range {
    pub(super) thread: u32,
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) name: Arc<str>,
}

/// A kernel's span, for the counters per kernel (times as the stream has them).
#[derive(Debug, Clone)]
pub(super) struct KernelSpan {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) device: u32,
    pub(super) name: Arc<str>,
}

/// What is known of one stream.
#[derive(Debug, Default)]
pub(super) struct StreamInfo {
    pub(super) pid: u32,
    /// The pid of the stream's header, where it was read.
    pub(super) header_pid: Option<u32>,
    /// A process start was read.
    pub(super) started: bool,
    pub(super) command: String,
    pub(super) info: Option<ProcessInfo>,
    pub(super) records: u64,
    pub(super) ended: Option<ProcessEnd>,
    /// [`records`](Self::records) when the end record was read, itself counted: those after it (of a process
    /// that ran on past the signal its stream ended at) are not the end record's to count.
    pub(super) records_at_end: u64,
    pub(super) dropped: u64,
    /// API calls by correlation id: (thread, start).
    pub(super) calls: HashMap<u32, (u32, u64)>,
    pub(super) ops: Vec<DeviceOp>,
    /// Open NVTX ranges by marker id: (thread, start, name).
    pub(super) open: HashMap<u32, (u32, u64, Arc<str>)>,
    pub(super) ranges: Vec<Range>,
    pub(super) marks: u64,
    pub(super) unpaired_ends: u64,
    /// Why the rest of the stream could not be read (the file cut short or damaged), where that happened.
    pub(super) unread: Option<&'static str>,
    /// The file says the stream's connection closed: all of it was read.
    pub(super) closed: bool,
    pub(super) kernels: Vec<KernelSpan>,
    pub(super) samples: Vec<CounterSample>,
    pub(super) gaps: Vec<CounterGap>,
    /// It holds counter records (kept in `samples` and `gaps` unless only job-wide reports are collected).
    pub(super) counter_records: bool,
}

impl StreamInfo {
    /// The stream's end record was read.
    pub(super) fn end(&mut self, e: &ProcessEnd) {
        self.ended = Some(e.clone());
        self.records_at_end = self.records;
    }

    /// Records read after the end record (0 where none was read).
    pub(super) fn after_end(&self) -> u64 {
        if self.ended.is_some() {
            self.records.saturating_sub(self.records_at_end)
        } else {
            0
        }
    }

    /// Whether the stream is a counter stream, not a traced process's: its header says so, or (read without a
    /// header) it holds counter records and no process start.
    pub(super) fn is_counters(&self) -> bool {
        !self.started
            && (self.header_pid == Some(crate::counters::COUNTER_STREAM_PID)
                || self.counter_records)
    }
}
