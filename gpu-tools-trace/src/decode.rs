//! Reading a stream back. The bytes come from another process: every length is checked, nothing panics, and an
//! error says which frame it concerns.

use std::collections::HashMap;
use std::io::Read;
use std::sync::Arc;

use super::record::*;
use super::wire::{
    Cursor, FRAME_HEADER_LEN, HEADER_LEN, MAGIC, MAX_FRAME, MAX_NAME_BYTES, MAX_NAMES,
    StreamHeader, ThreadIds, TimestampClock, VERSION, min_payload, tag,
};

/// A stream could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The stream does not start with `GPUTRACE`.
    #[error("not a gpu-tools trace stream (magic {found:02x?})")]
    BadMagic {
        /// The first bytes found.
        found: [u8; 8],
    },
    /// The stream's format version is not one this crate reads.
    #[error("trace stream format version {version} is not supported (this crate reads {VERSION})")]
    UnsupportedVersion {
        /// The version found.
        version: u16,
    },
    /// The header announces a length shorter than version 1's.
    #[error("trace stream header length {len} is too short")]
    BadHeaderLength {
        /// The length found.
        len: u16,
    },
    /// A frame announces more bytes than any frame may hold: the stream is corrupt from here on.
    #[error("frame (tag {tag}) announces {len} bytes, more than the {MAX_FRAME} allowed")]
    FrameTooLarge {
        /// The frame's tag.
        tag: u8,
        /// The announced payload length.
        len: u32,
    },
    /// A frame's payload is shorter than its layout; the frame was skipped.
    #[error("frame (tag {tag}) holds {have} bytes, its layout needs {need}; skipped")]
    ShortFrame {
        /// The frame's tag.
        tag: u8,
        /// Bytes the layout needs.
        need: usize,
        /// Bytes the frame holds.
        have: usize,
    },
    /// A frame of a tag this crate does not know; skipped.
    #[error("frame of unknown tag {tag} ({len} bytes) skipped")]
    UnknownFrame {
        /// The tag.
        tag: u8,
        /// Its payload length.
        len: u32,
    },
    /// A record refers to a name id no name frame defined; the record was skipped.
    #[error("frame (tag {tag}) refers to undefined name id {id}; skipped")]
    UndefinedName {
        /// The frame's tag.
        tag: u8,
        /// The id.
        id: u32,
    },
    /// A name frame defines an id that is 0 or already defined; skipped.
    #[error("name id {id} defined twice or reserved; skipped")]
    BadNameId {
        /// The id.
        id: u32,
    },
    /// A frame's text (a name, a message, a label) is not UTF-8, which the encoder always writes: the frame is
    /// damaged and was skipped.
    #[error("frame (tag {tag}) holds text that is not UTF-8; skipped")]
    BadText {
        /// The frame's tag.
        tag: u8,
    },
    /// The stream defines more names, or more bytes of names, than a stream may; the name was skipped.
    #[error("name table full ({MAX_NAMES} names or {MAX_NAME_BYTES} bytes); name {id} skipped")]
    NameTableFull {
        /// The id of the name that did not fit.
        id: u32,
    },
    /// The stream ended inside the header or a frame.
    #[error("stream ended inside a frame ({pending} bytes of it received)")]
    TruncatedStream {
        /// Bytes of the incomplete header or frame.
        pending: usize,
    },
    /// The stream ended before its header was complete (a sender that never sent anything, or not a trace).
    #[error("stream ended before its header ({received} bytes received)")]
    NoHeader {
        /// Bytes received.
        received: usize,
    },
    /// Reading the underlying source failed.
    #[error("reading the trace stream failed: {0}")]
    Io(String),
    /// An earlier fatal error left the stream out of step; nothing more is read.
    #[error("trace stream unreadable after an earlier error")]
    Poisoned,
}

impl WireError {
    /// True when nothing after this error can be read (the decoder is poisoned); other errors concern one frame,
    /// and decoding goes on with the next.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            WireError::BadMagic { .. }
                | WireError::UnsupportedVersion { .. }
                | WireError::BadHeaderLength { .. }
                | WireError::FrameTooLarge { .. }
                | WireError::TruncatedStream { .. }
                | WireError::NoHeader { .. }
                | WireError::Io(_)
                | WireError::Poisoned
        )
    }
}

/// Incremental decoder: [`feed`](Decoder::feed) bytes as they arrive, take records with
/// [`next_record`](Decoder::next_record) until it returns `Ok(None)` (more bytes needed).
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
    pos: usize,
    header: Option<StreamHeader>,
    names: HashMap<u32, Arc<str>>,
    name_bytes: usize,
    poisoned: bool,
}

impl Decoder {
    /// A decoder expecting a stream header first.
    pub fn new() -> Self {
        Self::default()
    }

    /// The stream header, once it has been read.
    pub fn header(&self) -> Option<&StreamHeader> {
        self.header.as_ref()
    }

    /// Appends received bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        // Drop what was consumed before growing, so a long stream does not accumulate.
        if self.pos > 0 && self.pos >= self.buf.len() / 2 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received but not yet decoded (part of a header or frame).
    pub fn pending(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Checks that the stream ended at a frame boundary (call at the end of the input).
    pub fn finish(&self) -> Result<(), WireError> {
        if self.poisoned {
            return Err(WireError::Poisoned);
        }
        match (self.header.is_some(), self.pending()) {
            (true, 0) => Ok(()),
            (true, pending) => Err(WireError::TruncatedStream { pending }),
            (false, received) => Err(WireError::NoHeader { received }),
        }
    }

    /// The next record: `Ok(Some)`, `Ok(None)` when more bytes are needed, or an error. After an error for which
    /// [`WireError::is_fatal`] holds, every later call returns [`WireError::Poisoned`].
    pub fn next_record(&mut self) -> Result<Option<Record>, WireError> {
        if self.poisoned {
            return Err(WireError::Poisoned);
        }
        if self.header.is_none() {
            match self.read_header() {
                Ok(Some(())) => {}
                Ok(None) => return Ok(None),
                Err(e) => {
                    self.poisoned = true;
                    return Err(e);
                }
            }
        }
        loop {
            let rest = &self.buf[self.pos..];
            if rest.len() < FRAME_HEADER_LEN {
                return Ok(None);
            }
            let t = rest[0];
            let len = u32::from_le_bytes([rest[1], rest[2], rest[3], rest[4]]);
            if len > MAX_FRAME {
                self.poisoned = true;
                return Err(WireError::FrameTooLarge { tag: t, len });
            }
            let total = FRAME_HEADER_LEN + len as usize;
            if rest.len() < total {
                return Ok(None);
            }
            let start = self.pos + FRAME_HEADER_LEN;
            self.pos += total;
            // Copy the range out of `self.buf` so `parse` may update the name table.
            let (a, b) = (start, start + len as usize);
            let result = {
                let payload = &self.buf[a..b];
                parse(t, payload, &self.names)
            };
            match result {
                Parsed::Record(r) => return Ok(Some(r)),
                Parsed::Name(id, text) => self.define(id, text)?,
                Parsed::Error(e) => return Err(e),
            }
        }
    }

    fn read_header(&mut self) -> Result<Option<()>, WireError> {
        let rest = &self.buf[self.pos..];
        if rest.len() < 12 {
            // Reject a wrong magic as soon as its bytes are in.
            if !MAGIC.starts_with(&rest[..rest.len().min(8)]) {
                let mut found = [0; 8];
                found[..rest.len().min(8)].copy_from_slice(&rest[..rest.len().min(8)]);
                return Err(WireError::BadMagic { found });
            }
            return Ok(None);
        }
        let mut c = Cursor::new(rest);
        let mut magic = [0u8; 8];
        for m in &mut magic {
            *m = c.u8().unwrap_or(0);
        }
        if magic != MAGIC {
            return Err(WireError::BadMagic { found: magic });
        }
        let version = c.u16().unwrap_or(0);
        let header_len = c.u16().unwrap_or(0);
        if version != VERSION {
            return Err(WireError::UnsupportedVersion { version });
        }
        if usize::from(header_len) < HEADER_LEN {
            return Err(WireError::BadHeaderLength { len: header_len });
        }
        if rest.len() < usize::from(header_len) {
            return Ok(None);
        }
        let pid = c.u32().unwrap_or(0);
        let vendor_version = c.u32().unwrap_or(0);
        let clock = TimestampClock::from_code(c.u32().unwrap_or(0));
        let thread_ids = ThreadIds::from_code(c.u32().unwrap_or(0));
        self.header = Some(StreamHeader {
            version,
            pid,
            vendor_version,
            clock,
            thread_ids,
        });
        self.pos += usize::from(header_len);
        Ok(Some(()))
    }

    fn define(&mut self, id: u32, text: Arc<str>) -> Result<(), WireError> {
        if id == 0 || self.names.contains_key(&id) {
            return Err(WireError::BadNameId { id });
        }
        if self.names.len() >= MAX_NAMES || self.name_bytes + text.len() > MAX_NAME_BYTES {
            return Err(WireError::NameTableFull { id });
        }
        self.name_bytes += text.len();
        self.names.insert(id, text);
        Ok(())
    }
}

enum Parsed {
    Record(Record),
    Name(u32, Arc<str>),
    Error(WireError),
}

/// A frame's text: bytes that are not UTF-8 are damage, an error for the frame, never text with replacement
/// characters (another name).
fn text(tag: u8, bytes: &[u8]) -> Result<String, WireError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| WireError::BadText { tag })
}

/// A string preceded by its u16 length.
/// (metric name id, value) pairs: count u16, then each id u32 and value f64 (kernel metrics, counter samples).
fn value_ids(c: &mut Cursor<'_>) -> Option<Vec<(u32, f64)>> {
    let count = usize::from(c.u16()?);
    let mut ids = Vec::with_capacity(count);
    for _ in 0..count {
        ids.push((c.u32()?, f64::from_bits(c.u64()?)));
    }
    Some(ids)
}

/// The pairs with their names; an id no name frame defined is an error.
fn named_values(
    ids: Vec<(u32, f64)>,
    name: &dyn Fn(u32) -> Result<Arc<str>, WireError>,
) -> Result<Vec<(Arc<str>, f64)>, WireError> {
    ids.into_iter().map(|(id, v)| Ok((name(id)?, v))).collect()
}

fn text16<'a>(c: &mut Cursor<'a>) -> Option<&'a [u8]> {
    let len = usize::from(c.u16()?);
    c.bytes(len)
}

/// Decodes one payload. `None` from the cursor cannot happen after the length check, but is still an error,
/// never a panic.
fn parse(t: u8, payload: &[u8], names: &HashMap<u32, Arc<str>>) -> Parsed {
    let Some(need) = min_payload(t) else {
        return Parsed::Error(WireError::UnknownFrame {
            tag: t,
            len: payload.len() as u32,
        });
    };
    let short = || WireError::ShortFrame {
        tag: t,
        need,
        have: payload.len(),
    };
    if payload.len() < need {
        return Parsed::Error(short());
    }
    match read_frame(t, payload, names) {
        Some(Ok(p)) => p,
        Some(Err(e)) => Parsed::Error(e),
        None => Parsed::Error(short()),
    }
}

/// What reading a frame's fields gives: `None` where the payload ends early, an error where a field names an id
/// no name frame defined.
type ReadOutcome<T> = Option<Result<T, WireError>>;

/// A payload being read: its cursor (past the timed header), the span of that header (0 for untimed frames) and
/// the names defined so far.
struct Fields<'p> {
    c: Cursor<'p>,
    tag: u8,
    start: u64,
    end: u64,
    names: &'p HashMap<u32, Arc<str>>,
}

impl Fields<'_> {
    /// The name of `id` (0: the empty name); an id no name frame defined is an error.
    fn name(&self, id: u32) -> Result<Arc<str>, WireError> {
        if id == 0 {
            return Ok(Arc::from(""));
        }
        self.names
            .get(&id)
            .cloned()
            .ok_or(WireError::UndefinedName { tag: self.tag, id })
    }
}

/// The frame of tag `t`: a name definition or one record, each kind read by the function named after it.
fn read_frame(t: u8, payload: &[u8], names: &HashMap<u32, Arc<str>>) -> ReadOutcome<Parsed> {
    let mut c = Cursor::new(payload);
    // The header every timed record shares.
    let (start, end) = if tag::is_timed(t) {
        (c.u64()?, c.u64()?)
    } else {
        (0, 0)
    };
    if t == tag::NAME {
        let id = c.u32()?;
        return Some(match std::str::from_utf8(c.rest()) {
            Ok(name) => Ok(Parsed::Name(id, Arc::from(name))),
            Err(_) => Err(WireError::BadText { tag: t }),
        });
    }
    let mut f = Fields {
        c,
        tag: t,
        start,
        end,
        names,
    };
    let record = match t {
        tag::KERNEL => kernel(&mut f),
        tag::MEMCPY => memcpy(&mut f),
        tag::MEMSET => memset(&mut f),
        tag::API => api(&mut f),
        tag::SYNC => sync(&mut f),
        tag::OVERHEAD => overhead(&mut f),
        tag::DROPPED => dropped(&mut f),
        tag::PROCESS_START => process_start(&mut f),
        tag::PROCESS_END => process_end(&mut f),
        tag::NOTICE => notice(&mut f),
        tag::CODED_NOTICE => coded_notice(&mut f),
        tag::GRAPH_LAUNCH => graph_launch(&mut f),
        tag::GRAPH => graph(&mut f),
        tag::MARKER => marker(&mut f),
        tag::MARKER_DATA => marker_data(&mut f),
        tag::CLOCK_ANCHOR => clock_anchor(&mut f),
        tag::PROCESS_INFO => process_info(&mut f),
        tag::KERNEL_METRICS => kernel_metrics(&mut f),
        tag::STALL => stall(&mut f),
        tag::COUNTER_SAMPLE => counter_sample(&mut f),
        tag::COUNTER_GAP => counter_gap(&mut f),
        tag::PROFILE_LOSS => profile_loss(&mut f),
        _ => return None,
    };
    Some(record?.map(Parsed::Record))
}

fn kernel(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let grid_id = f.c.u64()?;
    let (device, context, stream, correlation) = (f.c.u32()?, f.c.u32()?, f.c.u32()?, f.c.u32()?);
    let name_id = f.c.u32()?;
    let grid = [f.c.u32()?, f.c.u32()?, f.c.u32()?];
    let block = [f.c.u32()?, f.c.u32()?, f.c.u32()?];
    let (static_shared, dynamic_shared, graph_id) = (f.c.u32()?, f.c.u32()?, f.c.u32()?);
    let registers = f.c.u16()?;
    // Optional: absent from frames written before graph node ids were carried. Part of one is damage, not 0: a
    // later version's frame carries the whole id before any field it adds.
    let graph_node_id = match f.c.remaining() {
        0 => 0,
        extra @ 1..8 => {
            // The fixed fields above are the frame's minimum, all read.
            let fixed = min_payload(f.tag).unwrap_or(0);
            return Some(Err(WireError::ShortFrame {
                tag: f.tag,
                need: fixed + 8,
                have: fixed + extra,
            }));
        }
        _ => f.c.u64()?,
    };
    let name = match f.name(name_id) {
        Ok(n) => n,
        Err(e) => return Some(Err(e)),
    };
    Some(Ok(Record::Kernel(KernelRecord {
        start: f.start,
        end: f.end,
        device,
        context,
        stream,
        correlation,
        grid_id,
        grid,
        block,
        static_shared,
        dynamic_shared,
        registers,
        graph_id,
        graph_node_id,
        name,
    })))
}

fn memcpy(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let bytes = f.c.u64()?;
    let (device, context, stream, correlation) = (f.c.u32()?, f.c.u32()?, f.c.u32()?, f.c.u32()?);
    let (kind, src, dst, flags) = (f.c.u8()?, f.c.u8()?, f.c.u8()?, f.c.u8()?);
    Some(Ok(Record::Memcpy(MemcpyRecord {
        start: f.start,
        end: f.end,
        device,
        context,
        stream,
        correlation,
        bytes,
        kind: CopyKind::from_code(kind),
        src: MemoryKind::from_code(src),
        dst: MemoryKind::from_code(dst),
        is_async: flags & 1 != 0,
    })))
}

fn memset(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let bytes = f.c.u64()?;
    let (device, context, stream, correlation) = (f.c.u32()?, f.c.u32()?, f.c.u32()?, f.c.u32()?);
    let value = f.c.u32()?;
    let (memory, flags) = (f.c.u8()?, f.c.u8()?);
    Some(Ok(Record::Memset(MemsetRecord {
        start: f.start,
        end: f.end,
        device,
        context,
        stream,
        correlation,
        bytes,
        value,
        memory: MemoryKind::from_code(memory),
        is_async: flags & 1 != 0,
    })))
}

fn api(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let domain = ApiDomain::from_code(f.c.u8()?);
    f.c.skip(3)?;
    let (cbid, name_id, correlation) = (f.c.u32()?, f.c.u32()?, f.c.u32()?);
    let (process, thread, return_value) = (f.c.u32()?, f.c.u32()?, f.c.u32()?);
    let name = match f.name(name_id) {
        Ok(n) => n,
        Err(e) => return Some(Err(e)),
    };
    Some(Ok(Record::Api(ApiRecord {
        start: f.start,
        end: f.end,
        domain,
        cbid,
        name,
        correlation,
        process,
        thread,
        return_value,
    })))
}

fn sync(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let (context, stream, event, correlation) = (f.c.u32()?, f.c.u32()?, f.c.u32()?, f.c.u32()?);
    let kind = SyncKind::from_code(f.c.u8()?);
    Some(Ok(Record::Synchronization(SyncRecord {
        start: f.start,
        end: f.end,
        kind,
        context,
        stream,
        event,
        correlation,
    })))
}

fn overhead(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let object_id = f.c.u64()?;
    let (kind, object_kind) = (f.c.u32()?, f.c.u32()?);
    Some(Ok(Record::Overhead(OverheadRecord {
        start: f.start,
        end: f.end,
        kind,
        object_kind,
        object_id,
    })))
}

fn dropped(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let count = f.c.u64()?;
    let (context, stream) = (f.c.u32()?, f.c.u32()?);
    Some(Ok(Record::Dropped(DroppedRecords {
        context,
        stream,
        count,
    })))
}

fn process_start(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let time = f.c.u64()?;
    let (pid, parent_pid) = (f.c.u32()?, f.c.u32()?);
    Some(text(f.tag, f.c.rest()).map(|command| {
        Record::ProcessStart(ProcessStart {
            pid,
            parent_pid,
            time,
            command,
        })
    }))
}

fn process_end(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let (time, records, dropped, skipped, callback_panics) =
        (f.c.u64()?, f.c.u64()?, f.c.u64()?, f.c.u64()?, f.c.u64()?);
    let reason = EndReason::from_code(f.c.u8()?);
    Some(Ok(Record::ProcessEnd(ProcessEnd {
        time,
        reason,
        records,
        dropped,
        skipped,
        callback_panics,
    })))
}

fn notice(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let level = NoticeLevel::from_code(f.c.u8()?);
    Some(text(f.tag, f.c.rest()).map(|text| Record::Notice(Notice { level, text })))
}

fn coded_notice(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let level = NoticeLevel::from_code(f.c.u8()?);
    let code = f.c.u16()?;
    let count = f.c.u8()?;
    let values = (0..count)
        .map(|_| f.c.u64())
        .collect::<Option<Vec<u64>>>()?;
    let detail = text16(&mut f.c)?;
    let read = || -> Result<Record, WireError> {
        Ok(Record::CodedNotice(CodedNotice {
            level,
            code,
            values,
            detail: text(f.tag, detail)?,
            text: text(f.tag, f.c.rest())?,
        }))
    };
    Some(read())
}

fn graph_launch(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let (device, context, stream, correlation) = (f.c.u32()?, f.c.u32()?, f.c.u32()?, f.c.u32()?);
    let (graph_id, end_device, end_context) = (f.c.u32()?, f.c.u32()?, f.c.u32()?);
    Some(Ok(Record::GraphLaunch(GraphLaunchRecord {
        start: f.start,
        end: f.end,
        device,
        context,
        stream,
        correlation,
        graph_id,
        end_device,
        end_context,
    })))
}

fn graph(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let time = f.c.u64()?;
    let (graph_id, exec_id, node_count) = (f.c.u32()?, f.c.u32()?, f.c.u32()?);
    Some(Ok(Record::Graph(GraphInfo {
        time,
        graph_id,
        exec_id,
        node_count,
    })))
}

fn marker(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let time = f.c.u64()?;
    let (id, process, thread, domain_id) = (f.c.u32()?, f.c.u32()?, f.c.u32()?, f.c.u32()?);
    let kind = MarkerKind::from_code(f.c.u8()?);
    let domain = match f.name(domain_id) {
        Ok(n) => n,
        Err(e) => return Some(Err(e)),
    };
    Some(text(f.tag, f.c.rest()).map(|name| {
        Record::Marker(MarkerRecord {
            time,
            kind,
            id,
            process,
            thread,
            domain,
            name,
        })
    }))
}

fn marker_data(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let (id, color, category, bits) = (f.c.u32()?, f.c.u32()?, f.c.u32()?, f.c.u64()?);
    let (flags, kind) = (f.c.u8()?, f.c.u8()?);
    Some(Ok(Record::MarkerData(MarkerData {
        id,
        color: (flags & 1 != 0).then_some(color),
        category,
        payload: MarkerPayload::from_wire(kind, bits),
    })))
}

fn clock_anchor(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let (monotonic, realtime, uncertainty) = (f.c.u64()?, f.c.u64()?, f.c.u32()?);
    Some(Ok(Record::ClockAnchor(ClockAnchor {
        monotonic,
        realtime,
        uncertainty,
    })))
}

fn process_info(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let host = text16(&mut f.c)?;
    let boot_id = text16(&mut f.c)?;
    let count = f.c.u16()?;
    let mut raw = Vec::with_capacity(usize::from(count).min(256));
    for _ in 0..count {
        raw.push((text16(&mut f.c)?, text16(&mut f.c)?));
    }
    let read = || -> Result<Record, WireError> {
        let labels = raw
            .into_iter()
            .map(|(k, v)| Ok((text(f.tag, k)?, text(f.tag, v)?)))
            .collect::<Result<_, WireError>>()?;
        Ok(Record::ProcessInfo(ProcessInfo {
            host: text(f.tag, host)?,
            boot_id: text(f.tag, boot_id)?,
            labels,
        }))
    };
    Some(read())
}

fn kernel_metrics(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let (device, context, correlation, launch) = (f.c.u32()?, f.c.u32()?, f.c.u32()?, f.c.u32()?);
    let kernel_id = f.c.u32()?;
    let ids = value_ids(&mut f.c)?;
    let named = || -> Result<Record, WireError> {
        let metrics = named_values(ids, &|id| f.name(id))?;
        Ok(Record::KernelMetrics(super::KernelMetricsRecord {
            device,
            context,
            correlation,
            launch,
            kernel: f.name(kernel_id)?,
            metrics,
        }))
    };
    Some(named())
}

fn stall(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let (context, function_id, pc_offset) = (f.c.u32()?, f.c.u32()?, f.c.u64()?);
    let count = usize::from(f.c.u16()?);
    let mut ids = Vec::with_capacity(count);
    for _ in 0..count {
        ids.push((f.c.u32()?, f.c.u32()?));
    }
    let named = || -> Result<Record, WireError> {
        let stalls = ids
            .into_iter()
            .map(|(id, n)| Ok((f.name(id)?, n)))
            .collect::<Result<_, _>>()?;
        Ok(Record::Stall(super::StallRecord {
            context,
            function: f.name(function_id)?,
            pc_offset,
            stalls,
        }))
    };
    Some(named())
}

fn counter_sample(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let device = f.c.u32()?;
    let ids = value_ids(&mut f.c)?;
    let values = named_values(ids, &|id| f.name(id));
    Some(values.map(|values| {
        Record::CounterSample(super::CounterSample {
            start: f.start,
            end: f.end,
            device,
            values,
        })
    }))
}

fn counter_gap(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let (device, samples) = (f.c.u32()?, f.c.u64()?);
    Some(Ok(Record::CounterGap(super::CounterGap {
        start: f.start,
        end: f.end,
        device,
        samples,
    })))
}

fn profile_loss(f: &mut Fields<'_>) -> ReadOutcome<Record> {
    let (count, context) = (f.c.u64()?, f.c.u32()?);
    let kind = super::ProfileLossKind::from_code(f.c.u8()?);
    Some(Ok(Record::ProfileLoss(super::ProfileLoss {
        kind,
        count,
        context,
    })))
}

/// Reads records from a byte source (a file, a socket) until its end.
///
/// Yields every record and every per-frame error in order; a fatal error (including an incomplete last frame,
/// [`WireError::TruncatedStream`]) is yielded once and ends the iteration.
#[derive(Debug)]
pub struct StreamReader<R> {
    source: R,
    decoder: Decoder,
    done: bool,
    chunk: Vec<u8>,
}

impl<R: Read> StreamReader<R> {
    /// Reads from `source`.
    pub fn new(source: R) -> Self {
        StreamReader {
            source,
            decoder: Decoder::new(),
            done: false,
            chunk: vec![0; 64 << 10],
        }
    }

    /// The stream header, once read.
    pub fn header(&self) -> Option<&StreamHeader> {
        self.decoder.header()
    }
}

impl<R: Read> Iterator for StreamReader<R> {
    type Item = Result<Record, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        loop {
            match self.decoder.next_record() {
                Ok(Some(r)) => return Some(Ok(r)),
                Ok(None) => {}
                Err(e) => {
                    if e.is_fatal() {
                        self.done = true;
                    }
                    return Some(Err(e));
                }
            }
            match self.source.read(&mut self.chunk) {
                Ok(0) => {
                    self.done = true;
                    return self.decoder.finish().err().map(Err);
                }
                Ok(n) => self.decoder.feed(&self.chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.done = true;
                    return Some(Err(WireError::Io(e.to_string())));
                }
            }
        }
    }
}
