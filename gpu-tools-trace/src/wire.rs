//! The binary stream format of [`Record`](super::Record)s, version 1.
//!
//! Everything is little-endian. A stream is a header, then frames until the end of the stream.
//!
//! **Header** (32 bytes in version 1; `header_len` says how many, so later versions can append fields):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `GPUTRACE` |
//! | 8 | 2 | format version (1) |
//! | 10 | 2 | header_len (32) |
//! | 12 | 4 | pid of the sending process |
//! | 16 | 4 | vendor tool version (CUPTI's `cuptiGetVersion`, 0 if none) |
//! | 20 | 4 | clock of every timestamp ([`TimestampClock`]) |
//! | 24 | 4 | what the thread fields of its records hold ([`ThreadIds`]; 0 in streams written before it existed) |
//! | 28 | 4 | reserved (0) |
//!
//! **Frame**: tag (u8), payload length (u32), payload. A payload longer than its layout below holds fields of a
//! later version and the rest is skipped; a shorter one is an error for that frame only, and a frame of an unknown
//! tag is skipped. Payload lengths above [`MAX_FRAME`] are refused (the stream is then out of step and ends).
//!
//! **Timed records** (tags 2–7, 12, 18, 19) share one header, the first 16 bytes of their payload: start u64, end
//! u64 (the record's time span); their rows below list it first.
//!
//! | tag | frame | payload |
//! |---|---|---|
//! | 1 | name | id u32, UTF-8 text (rest of the payload) |
//! | 2 | kernel | start u64, end u64, grid_id u64, device u32, context u32, stream u32, correlation u32, name id u32, grid 3×u32, block 3×u32, static shared u32, dynamic shared u32, graph id u32, registers u16; then, optional, graph node id u64 |
//! | 3 | memcpy | start u64, end u64, bytes u64, device u32, context u32, stream u32, correlation u32, copy kind u8, src kind u8, dst kind u8, flags u8 (bit 0: async) |
//! | 4 | memset | start u64, end u64, bytes u64, device u32, context u32, stream u32, correlation u32, value u32, memory kind u8, flags u8 (bit 0: async) |
//! | 5 | API call | start u64, end u64, domain u8, pad u8×3, cbid u32, name id u32, correlation u32, process u32, thread u32, return value u32 |
//! | 6 | synchronization | start u64, end u64, context u32, stream u32, event u32, correlation u32, kind u8 |
//! | 7 | overhead | start u64, end u64, object id u64, kind u32, object kind u32 |
//! | 8 | dropped | count u64, context u32, stream u32 |
//! | 9 | process start | time u64, pid u32, parent pid u32, command (UTF-8, rest) |
//! | 10 | process end | time u64, records u64, dropped u64, skipped u64, callback panics u64, reason u8 (1 exit, 2 stopped, 0x80 + N signal N) |
//! | 11 | notice | level u8, text (UTF-8, rest) |
//! | 12 | graph launch | start u64, end u64, device u32, context u32, stream u32, correlation u32, graph id u32, end device u32, end context u32 |
//! | 13 | graph | time u64, graph id u32, exec id u32, node count u32 |
//! | 14 | NVTX marker | time u64, id u32, process u32, thread u32, domain name id u32, kind u8, message (UTF-8, rest) |
//! | 15 | NVTX marker data | id u32, colour u32, category u32, payload u64, flags u8 (bit 0: has colour), payload kind u8 |
//! | 16 | clock anchor | monotonic u64, realtime u64, uncertainty u32 |
//! | 17 | process info | host, boot id (each u16 length, UTF-8), label count u16, then per label name and value (each u16 length, UTF-8) |
//! | 18 | counter sample | start u64, end u64, device u32, count u16, count × (metric name id u32, value f64) |
//! | 19 | counter gap | start u64, end u64, device u32, samples lost u64 (0: a span without samples) |
//! | 20 | kernel metrics | device u32, context u32, correlation u32, launch u32, kernel name id u32, count u16, count × (metric name id u32, value f64) |
//! | 21 | stall | context u32, function name id u32, PC offset u64, count u16, count × (reason name id u32, samples u32) |
//! | 22 | profile loss | count u64, context u32, kind u8 (1 ranges, 2 PC samples) |
//! | 28 | coded notice | level u8, code u16, value count u8, values u64 × count, detail (u16 length, UTF-8), text (UTF-8, rest) |
//!
//! Tags 12–19 are this format's; 20–23 are kept for per-kernel metrics and PC samples, 24–27 for records of
//! rocprofiler-sdk; 28 is the coded notice (a notice a program acts on, added after the others: a reader of an
//! earlier release skips it). A field marked optional may be missing from a frame written before it existed: the reader then
//! gives it its "none" value (0). A reader that does not know a tag skips its frame ([`WireError::UnknownFrame`],
//! not fatal), so streams with newer record kinds stay readable.
//!
//! [`WireError::UnknownFrame`]: super::WireError::UnknownFrame
//!
//! Names (kernel names, API function names) are sent once per stream in a name frame and then referred to by id;
//! id 0 is the empty name. A name frame precedes the first frame that uses its id.

/// The first 8 bytes of every stream.
pub const MAGIC: [u8; 8] = *b"GPUTRACE";
/// The format version this crate writes and reads.
pub const VERSION: u16 = 1;
/// Length of the version 1 header.
pub const HEADER_LEN: usize = 32;
/// Largest payload accepted (a frame header announcing more means the stream is corrupt).
pub const MAX_FRAME: u32 = 1 << 20;
/// Longest name sent; longer names are cut at a character boundary.
pub const MAX_NAME: usize = 64 << 10;
/// Most names one stream may define.
pub const MAX_NAMES: usize = 1 << 20;
/// Most bytes of names one stream may define.
pub const MAX_NAME_BYTES: usize = 64 << 20;
/// Frame header: tag and payload length.
pub const FRAME_HEADER_LEN: usize = 5;

/// Frame tags.
pub(crate) mod tag {
    pub const NAME: u8 = 1;
    pub const KERNEL: u8 = 2;
    pub const MEMCPY: u8 = 3;
    pub const MEMSET: u8 = 4;
    pub const API: u8 = 5;
    pub const SYNC: u8 = 6;
    pub const OVERHEAD: u8 = 7;
    pub const DROPPED: u8 = 8;
    pub const PROCESS_START: u8 = 9;
    pub const PROCESS_END: u8 = 10;
    pub const NOTICE: u8 = 11;
    pub const GRAPH_LAUNCH: u8 = 12;
    pub const GRAPH: u8 = 13;
    pub const MARKER: u8 = 14;
    pub const MARKER_DATA: u8 = 15;
    pub const CLOCK_ANCHOR: u8 = 16;
    pub const PROCESS_INFO: u8 = 17;
    pub const COUNTER_SAMPLE: u8 = 18;
    pub const COUNTER_GAP: u8 = 19;
    pub const KERNEL_METRICS: u8 = 20;
    pub const STALL: u8 = 21;
    pub const PROFILE_LOSS: u8 = 22;
    pub const CODED_NOTICE: u8 = 28;

    /// Whether records of `tag` are timed: their payload starts with the header every timed record shares, its
    /// start and end times (u64 each), read and written in one place (`Encoder::timed`, the decoder, the packed
    /// file frames).
    pub const fn is_timed(tag: u8) -> bool {
        matches!(
            tag,
            KERNEL
                | MEMCPY
                | MEMSET
                | API
                | SYNC
                | OVERHEAD
                | GRAPH_LAUNCH
                | COUNTER_SAMPLE
                | COUNTER_GAP
        )
    }
}

/// Minimum payload length of each known tag (version 1 layout).
pub(crate) fn min_payload(tag: u8) -> Option<usize> {
    Some(match tag {
        tag::NAME => 4,
        tag::KERNEL => 24 + 4 * 5 + 12 + 12 + 12 + 2,
        tag::MEMCPY => 24 + 16 + 4,
        tag::MEMSET => 24 + 16 + 4 + 2,
        tag::API => 16 + 4 + 4 * 6,
        tag::SYNC => 16 + 16 + 1,
        tag::OVERHEAD => 24 + 8,
        tag::DROPPED => 16,
        tag::PROCESS_START => 16,
        tag::PROCESS_END => 40 + 1,
        tag::NOTICE => 1,
        tag::GRAPH_LAUNCH => 16 + 4 * 7,
        tag::GRAPH => 8 + 12,
        tag::MARKER => 8 + 16 + 1,
        tag::MARKER_DATA => 12 + 8 + 2,
        tag::CLOCK_ANCHOR => 16 + 4,
        tag::PROCESS_INFO => 6,
        tag::COUNTER_SAMPLE => 16 + 4 + 2,
        tag::COUNTER_GAP => 16 + 4 + 8,
        tag::KERNEL_METRICS => 4 * 5 + 2,
        tag::STALL => 4 + 4 + 8 + 2,
        tag::PROFILE_LOSS => 8 + 4 + 1,
        tag::CODED_NOTICE => 1 + 2 + 1 + 2,
        _ => return None,
    })
}

/// Which clock the timestamps of a stream are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TimestampClock {
    /// Not specified: the vendor's own clock.
    Unspecified,
    /// `CLOCK_MONOTONIC` nanoseconds (what `std::time::Instant` reads on Linux).
    Monotonic,
    /// A code newer than this crate.
    Other(u32),
}

impl TimestampClock {
    /// Wire code.
    pub fn code(self) -> u32 {
        match self {
            TimestampClock::Unspecified => 0,
            TimestampClock::Monotonic => 1,
            TimestampClock::Other(c) => c,
        }
    }

    /// From the wire code.
    pub fn from_code(code: u32) -> Self {
        match code {
            0 => TimestampClock::Unspecified,
            1 => TimestampClock::Monotonic,
            c => TimestampClock::Other(c),
        }
    }
}

/// What the thread fields of a stream's records hold (API calls, NVTX marks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ThreadIds {
    /// The vendor library's own thread id: for CUPTI's default, `pthread_self()` cut to 32 bits, which no tool
    /// outside the process shows. Streams written before the header said it have this.
    #[default]
    Vendor,
    /// The kernel's thread id (`gettid()`): what `top -H`, `ps -L`, `/proc/PID/task/` and py-spy show.
    Linux,
    /// A code newer than this crate.
    Other(u32),
}

impl ThreadIds {
    /// Wire code.
    pub fn code(self) -> u32 {
        match self {
            ThreadIds::Vendor => 0,
            ThreadIds::Linux => 1,
            ThreadIds::Other(c) => c,
        }
    }

    /// From the wire code.
    pub fn from_code(code: u32) -> Self {
        match code {
            0 => ThreadIds::Vendor,
            1 => ThreadIds::Linux,
            c => ThreadIds::Other(c),
        }
    }
}

/// The header of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamHeader {
    /// Format version of the stream.
    pub version: u16,
    /// Pid of the sending process.
    pub pid: u32,
    /// Vendor tool version (CUPTI's `cuptiGetVersion`), 0 if none.
    pub vendor_version: u32,
    /// Clock of every timestamp in the stream.
    pub clock: TimestampClock,
    /// What the thread fields of its records hold.
    pub thread_ids: ThreadIds,
}

impl StreamHeader {
    /// A version-1 header.
    pub fn new(pid: u32, vendor_version: u32, clock: TimestampClock) -> Self {
        StreamHeader {
            version: VERSION,
            pid,
            vendor_version,
            clock,
            thread_ids: ThreadIds::Vendor,
        }
    }

    /// The same header, saying that the stream's thread fields hold `ids`.
    pub fn with_thread_ids(self, ids: ThreadIds) -> Self {
        StreamHeader {
            thread_ids: ids,
            ..self
        }
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(HEADER_LEN as u16).to_le_bytes());
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.extend_from_slice(&self.vendor_version.to_le_bytes());
        out.extend_from_slice(&self.clock.code().to_le_bytes());
        out.extend_from_slice(&self.thread_ids.code().to_le_bytes());
        out.extend_from_slice(&[0; 4]);
    }
}

/// A bounds-checked little-endian reader over one payload.
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0 }
    }

    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let end = self.pos.checked_add(N)?;
        let out: [u8; N] = self.bytes.get(self.pos..end)?.try_into().ok()?;
        self.pos += N;
        Some(out)
    }

    pub(crate) fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|b| b[0])
    }

    pub(crate) fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_le_bytes)
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }

    pub(crate) fn skip(&mut self, n: usize) -> Option<()> {
        let end = self.pos.checked_add(n)?;
        if end > self.bytes.len() {
            return None;
        }
        self.pos = end;
        Some(())
    }

    /// The next `n` bytes.
    pub(crate) fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let out = self.bytes.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    /// How many bytes are left.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    /// The rest of the payload.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let r = self.bytes.get(self.pos..).unwrap_or(&[]);
        self.pos = self.bytes.len();
        r
    }
}
