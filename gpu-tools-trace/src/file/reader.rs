//! [`TraceReader`]: a trace file (or a single stream) read back, stream by stream, every chunk checked; and
//! [`rewrite`], which copies a file into the current version.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};

use super::*;
use crate::decode::Decoder;
use crate::packed::{History, unpack};
use crate::record::Record;
use crate::wire::{MAGIC as STREAM_MAGIC, StreamHeader};

/// What the reader yields: a record of one stream, or a stream's header when it is first read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TraceItem {
    /// A stream's header was read (before its first record).
    Header {
        /// The stream's number in the file.
        stream: u32,
        /// Its header.
        header: StreamHeader,
    },
    /// A record of a stream.
    Record {
        /// The stream's number in the file.
        stream: u32,
        /// The record.
        record: Record,
    },
    /// A stream's connection closed (files only; a stream that did not end with its end record was cut off).
    Closed {
        /// The stream's number in the file.
        stream: u32,
    },
}

/// Whether the input is a file of several streams or one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    Unknown,
    File,
    Stream,
}

pub(super) struct StreamState {
    pub(super) decoder: Decoder,
    pub(super) header_sent: bool,
    /// A fatal stream error was reported: the rest of the stream is skipped.
    pub(super) dead: bool,
    /// Packing history, for packed chunks.
    pub(super) history: History,
    /// A packed chunk could not be expanded: the history is lost, the rest of the stream is not read.
    pub(super) unpack_failed: bool,
    /// Frames expanded from packed chunks (files only), for the final chunk's check.
    pub(super) frames: u64,
}

impl StreamState {
    pub(super) fn new() -> Self {
        StreamState {
            decoder: Decoder::new(),
            header_sent: false,
            dead: false,
            history: History::default(),
            unpack_failed: false,
            frames: 0,
        }
    }
}

/// Reads a trace file ([`TraceFileWriter`]'s) or a single trace stream, from any byte source, in one pass:
/// records are yielded as they are decoded, nothing is held beyond the stream decoders' pending bytes.
///
/// Errors come in order with the records. A stream's frame error ([`TraceFileError::Stream`]) does not end the
/// reading; a fatal one ([`TraceFileError::is_fatal`]) is yielded once and ends it: everything before it was
/// yielded.
pub struct TraceReader<R> {
    pub(super) source: R,
    pub(super) shape: Shape,
    /// The file format version (files only).
    pub(super) version: u16,
    pub(super) buf: Vec<u8>,
    pub(super) pos: usize,
    /// Offset in the input of `buf[0]`.
    pub(super) base: u64,
    pub(super) eof: bool,
    pub(super) done: bool,
    pub(super) streams: BTreeMap<u32, StreamState>,
    pub(super) pending: std::collections::VecDeque<Result<TraceItem, TraceFileError>>,
    pub(super) chunk: Vec<u8>,
    /// The file header's creation time (files only).
    pub(super) created: u64,
    /// Chunks read before the final chunk (files only).
    pub(super) chunks: u64,
    /// The final chunk, once read: its offset and the writer's end time.
    pub(super) finished: Option<(u64, u64)>,
    /// Each stream's bytes as read (expanded where packed), and its closing, in file order: what [`rewrite`]
    /// copies. `None` unless asked for.
    pub(super) tap: Option<Vec<Tapped>>,
}

/// What [`TraceReader`] passes on to [`rewrite`]: bytes of a stream, or its closing.
#[derive(Debug)]
pub(super) enum Tapped {
    Bytes(u32, Vec<u8>),
    Closed(u32),
}

impl<R> std::fmt::Debug for TraceReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceReader")
            .field("shape", &self.shape)
            .field("offset", &(self.base + self.pos as u64))
            .field("streams", &self.streams.len())
            .finish_non_exhaustive()
    }
}

/// Checks a whole file header against its version's rules: a version 3 or 4 header's checksum; a version 2
/// header's reserved bytes (0). A header whose checksum holds only once the version field says another checked
/// version is a header of that version with a damaged version field.
pub(super) fn check_file_header(
    h: &[u8; FILE_HEADER_LEN],
    version: u16,
) -> Result<(), TraceFileError> {
    let stored = u32::from_le_bytes([h[24], h[25], h[26], h[27]]);
    let checked = (CHECKED_VERSION..=FILE_VERSION).contains(&version);
    if checked && stored == file_header_crc(h) {
        return Ok(());
    }
    for other in (CHECKED_VERSION..=FILE_VERSION).filter(|&v| v != version) {
        let mut as_other = *h;
        as_other[8..10].copy_from_slice(&other.to_le_bytes());
        if stored != 0 && stored == file_header_crc(&as_other) {
            return Err(TraceFileError::BadFileHeader {
                detail: if other == CHECKED_VERSION {
                    "the version field is damaged (the checksum holds for version 3)"
                } else {
                    "the version field is damaged (the checksum holds for version 4)"
                },
            });
        }
    }
    if checked {
        return Err(TraceFileError::BadFileHeader {
            detail: "its checksum does not match its bytes",
        });
    }
    if version == 2 && h[24..].iter().any(|&b| b != 0) {
        return Err(TraceFileError::BadFileHeader {
            detail: "a version 2 header has 0 in bytes 24 to 31, this one does not",
        });
    }
    Ok(())
}

impl<R: Read> TraceReader<R> {
    /// Reads from `source` (buffer it if it is a file: the reader asks for 64 KiB at a time).
    pub fn new(source: R) -> Self {
        TraceReader {
            source,
            shape: Shape::Unknown,
            version: 0,
            buf: Vec::new(),
            pos: 0,
            base: 0,
            eof: false,
            done: false,
            streams: BTreeMap::new(),
            pending: Default::default(),
            chunk: vec![0; 64 << 10],
            created: 0,
            chunks: 0,
            finished: None,
            tap: None,
        }
    }

    /// When the file was created (`CLOCK_REALTIME`, ns), once its header is read; `None` for a single stream.
    pub fn created(&self) -> Option<u64> {
        (self.shape == Shape::File).then_some(self.created)
    }

    /// When the writer finished the file (`CLOCK_REALTIME`, ns), once its final chunk is read (version 4).
    pub fn finished(&self) -> Option<u64> {
        self.finished.map(|(_, end)| end)
    }

    /// The header of a stream, once read.
    pub fn header(&self, stream: u32) -> Option<&StreamHeader> {
        self.streams.get(&stream)?.decoder.header()
    }

    /// The file format version of a trace file, once its header is read; `None` for a single stream or before.
    pub fn file_version(&self) -> Option<u16> {
        (self.shape == Shape::File).then_some(self.version)
    }

    /// Bytes of the input consumed so far.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Reads more input; false at its end.
    pub(super) fn fill(&mut self) -> Result<bool, TraceFileError> {
        if self.eof {
            return Ok(false);
        }
        if self.pos > 0 && self.pos >= self.buf.len() / 2 {
            self.buf.drain(..self.pos);
            self.base += self.pos as u64;
            self.pos = 0;
        }
        loop {
            match self.source.read(&mut self.chunk) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.buf.extend_from_slice(&self.chunk[..n]);
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(TraceFileError::Io(e.to_string())),
            }
        }
    }

    /// Decides the input's shape from its first 8 bytes and reads a file header.
    pub(super) fn start(&mut self) -> Result<bool, TraceFileError> {
        while self.buf.len() - self.pos < FILE_HEADER_LEN {
            if !self.fill()? {
                break;
            }
        }
        let rest = &self.buf[self.pos..];
        if rest.is_empty() {
            return Err(TraceFileError::Empty);
        }
        let magic = &rest[..rest.len().min(8)];
        if magic.len() < 8 && (STREAM_MAGIC.starts_with(magic) || FILE_MAGIC.starts_with(magic)) {
            return Err(TraceFileError::Truncated {
                offset: 0,
                pending: magic.len(),
            });
        }
        if magic == STREAM_MAGIC {
            self.shape = Shape::Stream;
            self.streams.insert(0, StreamState::new());
            return Ok(true);
        }
        if magic != FILE_MAGIC {
            return Err(TraceFileError::NotATrace {
                found: magic.to_vec(),
            });
        }
        if rest.len() < 12 {
            return Err(TraceFileError::Truncated {
                offset: 0,
                pending: rest.len(),
            });
        }
        let version = u16::from_le_bytes([rest[8], rest[9]]);
        let header_len = u16::from_le_bytes([rest[10], rest[11]]);
        let whole = rest
            .get(..FILE_HEADER_LEN)
            .and_then(|h| <[u8; FILE_HEADER_LEN]>::try_from(h).ok());
        if let Some(h) = whole {
            check_file_header(&h, version)?;
        } else if (CHECKED_VERSION..=FILE_VERSION).contains(&version) {
            // A version 3 or 4 header is checked whole before anything in it is trusted.
            return Err(TraceFileError::Truncated {
                offset: 0,
                pending: rest.len(),
            });
        }
        if !(OLDEST_FILE_VERSION..=FILE_VERSION).contains(&version) {
            return Err(TraceFileError::UnsupportedVersion { version });
        }
        if usize::from(header_len) < FILE_HEADER_LEN {
            return Err(TraceFileError::BadHeaderLength { len: header_len });
        }
        while self.buf.len() - self.pos < usize::from(header_len) {
            if !self.fill()? {
                return Err(TraceFileError::Truncated {
                    offset: 0,
                    pending: self.buf.len() - self.pos,
                });
            }
        }
        self.version = version;
        self.created = self
            .buf
            .get(self.pos + 16..self.pos + 24)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map_or(0, u64::from_le_bytes);
        self.pos += usize::from(header_len);
        self.shape = Shape::File;
        Ok(true)
    }

    /// Feeds `bytes` to `stream`'s decoder and queues what it decodes.
    pub(super) fn feed(&mut self, stream: u32, bytes: &[u8]) {
        let s = self.streams.entry(stream).or_insert_with(StreamState::new);
        if s.dead {
            return;
        }
        s.decoder.feed(bytes);
        Self::drain(stream, s, &mut self.pending);
    }

    pub(super) fn drain(
        stream: u32,
        s: &mut StreamState,
        out: &mut std::collections::VecDeque<Result<TraceItem, TraceFileError>>,
    ) {
        loop {
            let next = s.decoder.next_record();
            if !s.header_sent {
                if let Some(h) = s.decoder.header() {
                    s.header_sent = true;
                    out.push_back(Ok(TraceItem::Header { stream, header: *h }));
                }
            }
            match next {
                Ok(Some(record)) => out.push_back(Ok(TraceItem::Record { stream, record })),
                Ok(None) => return,
                Err(error) => {
                    let fatal = error.is_fatal();
                    out.push_back(Err(TraceFileError::Stream { stream, error }));
                    if fatal {
                        s.dead = true;
                        return;
                    }
                }
            }
        }
    }

    /// At the end of the input: streams that stopped inside a frame are reported.
    pub(super) fn finish_streams(&mut self) {
        for (&stream, s) in &mut self.streams {
            if s.dead {
                continue;
            }
            if let Err(error) = s.decoder.finish() {
                self.pending
                    .push_back(Err(TraceFileError::Stream { stream, error }));
            }
        }
    }

    /// Reads the next chunk of a file, or the next bytes of a stream; false at the end of the input.
    pub(super) fn step(&mut self) -> Result<bool, TraceFileError> {
        match self.shape {
            Shape::Unknown => self.start(),
            Shape::Stream => {
                if self.pos < self.buf.len() {
                    let bytes = std::mem::take(&mut self.buf);
                    self.base += bytes.len() as u64;
                    self.pos = 0;
                    if let Some(tap) = self.tap.as_mut() {
                        tap.push(Tapped::Bytes(0, bytes.clone()));
                    }
                    self.feed(0, &bytes[..]);
                    return Ok(true);
                }
                if self.fill()? {
                    return Ok(true);
                }
                self.finish_streams();
                Ok(false)
            }
            Shape::File => self.step_file(),
        }
    }

    /// Reads the next chunk of a file; false at its end.
    pub(super) fn step_file(&mut self) -> Result<bool, TraceFileError> {
        if let Some((offset, _)) = self.finished {
            // Nothing may follow the final chunk.
            while self.pos == self.buf.len() {
                if !self.fill()? {
                    self.finish_streams();
                    return Ok(false);
                }
            }
            self.finish_streams();
            return Err(TraceFileError::AfterFinalChunk { offset });
        }
        let checked = self.version >= CHECKED_VERSION;
        let header_len = if checked {
            CHUNK_HEADER_LEN
        } else {
            V2_CHUNK_HEADER_LEN
        };
        while self.buf.len() - self.pos < header_len {
            if !self.fill()? {
                let pending = self.buf.len() - self.pos;
                self.finish_streams();
                if pending > 0 {
                    return Err(TraceFileError::Truncated {
                        offset: self.offset(),
                        pending,
                    });
                }
                if self.version >= FINAL_CHUNK_VERSION {
                    return Err(TraceFileError::Unfinished {
                        offset: self.offset(),
                    });
                }
                return Ok(false);
            }
        }
        let h = &self.buf[self.pos..self.pos + header_len];
        let kind = h[0];
        let stream = u32::from_le_bytes([h[1], h[2], h[3], h[4]]);
        let len = u32::from_le_bytes([h[5], h[6], h[7], h[8]]);
        let crc = if checked {
            // The header is checked before its length is trusted: a changed length is corruption, not a file cut
            // short.
            let stored = u32::from_le_bytes([h[13], h[14], h[15], h[16]]);
            if crc32fast::hash(&h[..13]) != stored {
                return Err(TraceFileError::ChunkHeaderChecksum {
                    offset: self.offset(),
                });
            }
            Some(u32::from_le_bytes([h[9], h[10], h[11], h[12]]))
        } else {
            None
        };
        if len > MAX_CHUNK {
            return Err(TraceFileError::Corrupt {
                offset: self.offset(),
                kind,
                len,
            });
        }
        let total = header_len + len as usize;
        while self.buf.len() - self.pos < total {
            if !self.fill()? {
                let pending = self.buf.len() - self.pos;
                let offset = self.offset();
                // What the streams received before the cut is still decoded.
                self.finish_streams();
                return Err(TraceFileError::Truncated { offset, pending });
            }
        }
        let start = self.pos + header_len;
        let payload = &self.buf[start..start + len as usize];
        if let Some(crc) = crc {
            if chunk_crc(&self.buf[self.pos..self.pos + 9], payload) != crc {
                return Err(TraceFileError::ChunkChecksum {
                    offset: self.offset(),
                    stream,
                    len,
                });
            }
        }
        let payload = payload.to_vec();
        let offset = self.offset();
        self.pos += total;
        if kind == chunk::FINAL && self.version >= FINAL_CHUNK_VERSION {
            let end = self.check_final(offset, &payload)?;
            self.finished = Some((offset, end));
            return Ok(true);
        }
        self.chunks += 1;
        match kind {
            chunk::DATA => {
                if let Some(tap) = self.tap.as_mut() {
                    tap.push(Tapped::Bytes(stream, payload.clone()));
                }
                self.feed(stream, &payload)
            }
            chunk::PACKED => {
                let s = self.streams.entry(stream).or_insert_with(StreamState::new);
                // A stream whose decoding failed is still expanded (its history holds), so that its frames are
                // counted; one whose expansion failed is not.
                if !s.unpack_failed {
                    let mut wire = Vec::with_capacity(payload.len() * 3);
                    match unpack(&mut s.history, &payload, &mut wire) {
                        Ok(frames) => {
                            s.frames += frames;
                            if let Some(tap) = self.tap.as_mut() {
                                tap.push(Tapped::Bytes(stream, wire.clone()));
                            }
                            self.feed(stream, &wire)
                        }
                        Err(detail) => {
                            s.unpack_failed = true;
                            s.dead = true;
                            self.pending.push_back(Err(TraceFileError::BadPackedChunk {
                                stream,
                                offset,
                                detail,
                            }));
                        }
                    }
                }
            }
            chunk::CLOSED => {
                self.streams.entry(stream).or_insert_with(StreamState::new);
                if let Some(tap) = self.tap.as_mut() {
                    tap.push(Tapped::Closed(stream));
                }
                self.pending.push_back(Ok(TraceItem::Closed { stream }));
            }
            _ => log::debug!("trace file chunk of unknown kind {kind} skipped"),
        }
        Ok(true)
    }

    /// Checks the final chunk (at `offset`) against what was read before it; returns the writer's end time.
    pub(super) fn check_final(&self, offset: u64, p: &[u8]) -> Result<u64, TraceFileError> {
        let mismatch = |detail: String| TraceFileError::FinalChunkMismatch { offset, detail };
        let u64_at = |at: usize| {
            p.get(at..at + 8)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(u64::from_le_bytes)
        };
        let u32_at = |at: usize| {
            p.get(at..at + 4)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(u32::from_le_bytes)
        };
        let (Some(end), Some(bytes), Some(chunks), Some(n)) =
            (u64_at(0), u64_at(8), u64_at(16), u32_at(24))
        else {
            return Err(mismatch(format!(
                "has {} bytes, fewer than its {FINAL_FIXED_LEN} fixed ones",
                p.len()
            )));
        };
        let want_len = (n as usize)
            .checked_mul(FINAL_ENTRY_LEN)
            .and_then(|l| l.checked_add(FINAL_FIXED_LEN));
        if want_len != Some(p.len()) {
            return Err(mismatch(format!(
                "lists {n} streams in {} bytes",
                p.len() - FINAL_FIXED_LEN
            )));
        }
        if bytes != offset {
            return Err(mismatch(format!(
                "says {bytes} bytes come before it, but it is at byte {offset}"
            )));
        }
        if chunks != self.chunks {
            return Err(mismatch(format!(
                "says {chunks} chunks come before it, {} were read",
                self.chunks
            )));
        }
        let mut listed = BTreeMap::new();
        for i in 0..n as usize {
            let at = FINAL_FIXED_LEN + i * FINAL_ENTRY_LEN;
            if let (Some(stream), Some(frames)) = (u32_at(at), u64_at(at + 4)) {
                listed.insert(stream, frames);
            }
        }
        if listed.len() != n as usize {
            return Err(mismatch(format!("lists a stream twice among its {n}")));
        }
        for (&stream, &frames) in &listed {
            match self.streams.get(&stream) {
                None => {
                    return Err(mismatch(format!(
                        "lists stream {stream}, of which no chunk was read"
                    )));
                }
                Some(s) if !s.unpack_failed && s.frames != frames => {
                    return Err(mismatch(format!(
                        "says stream {stream} has {frames} frames, {} were read",
                        s.frames
                    )));
                }
                Some(_) => {}
            }
        }
        if let Some(stream) = self.streams.keys().find(|s| !listed.contains_key(s)) {
            return Err(mismatch(format!(
                "does not list stream {stream}, of which chunks were read"
            )));
        }
        Ok(end)
    }
}

impl<R: Read> Iterator for TraceReader<R> {
    type Item = Result<TraceItem, TraceFileError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Some(item);
            }
            if self.done {
                return None;
            }
            match self.step() {
                Ok(true) => {}
                Ok(false) => self.done = true,
                Err(e) => {
                    self.done = true;
                    self.pending.push_back(Err(e));
                }
            }
        }
    }
}

/// Copies a trace file of any version this crate reads (or a single stream, as stream 0) into a file of the
/// current version written to `out`, which is returned: each stream's bytes as they were (expanded, then packed
/// anew), under the same stream numbers and in the same order, closed where they were closed, with the creation
/// time of the original and a final chunk of its own. The reports of the copy are those of the original.
///
/// Any reading error refuses the copy, whatever was written to `out` by then (an [`io::Error`] of kind
/// [`InvalidData`](io::ErrorKind::InvalidData) whose inner error is the [`TraceFileError`]): a damaged file is not
/// given checksums that would vouch for it. A file of version 2 or 3 cannot show that it was cut short at a chunk
/// boundary; its copy's final chunk vouches for what was read, so copy only files known whole (their processes
/// ended: `stats` says so).
pub fn rewrite<R: Read, W: Write>(source: R, out: W) -> io::Result<W> {
    let mut reader = TraceReader::new(source);
    reader.tap = Some(Vec::new());
    let mut out = Some(out);
    let mut writer = None;
    loop {
        let item = reader.next();
        if let Some(Err(e)) = item {
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
        if writer.is_none() && reader.shape != Shape::Unknown {
            let created = reader
                .created()
                .unwrap_or_else(|| crate::record::ClockAnchor::now().realtime);
            if let Some(out) = out.take() {
                writer = Some(TraceFileWriter::created_at(out, created)?);
            }
        }
        if let (Some(w), Some(tap)) = (writer.as_mut(), reader.tap.as_mut()) {
            for t in tap.drain(..) {
                match t {
                    Tapped::Bytes(stream, bytes) => w.write(stream, &bytes)?,
                    Tapped::Closed(stream) => w.close(stream)?,
                }
            }
        }
        if item.is_none() {
            break;
        }
    }
    match writer {
        Some(w) => w.finish(),
        None => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            TraceFileError::Empty,
        )),
    }
}
