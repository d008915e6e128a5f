//! Trace files: the streams of every traced process of a run in one file, written as the bytes arrive.
//!
//! A tracer receives one stream ([`wire`](super::wire)) per traced process, each over its own connection. A
//! [`TraceFileWriter`] puts them into one file without decoding them: each piece of a stream, as it was read, goes
//! into a chunk naming its stream. [`TraceReader`] reads such a file back, and also a single stream written
//! directly (the injection library's `GPU_TOOLS_TRACE_FILE`), so either can be given to the reports.
//!
//! **File header** (32 bytes; `header_len` says how many):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `GPUTFILE` |
//! | 8 | 2 | file format version (3) |
//! | 10 | 2 | header_len (32) |
//! | 12 | 4 | flags (0) |
//! | 16 | 8 | `CLOCK_REALTIME` when the file was created, ns |
//! | 24 | 4 | CRC32 of bytes 0–23 and 28–31 (version 2: reserved, 0) |
//! | 28 | 4 | reserved (0) |
//!
//! **Chunk** (version 3): a 17-byte header, then the payload.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | kind |
//! | 1 | 4 | stream number |
//! | 5 | 4 | payload length |
//! | 9 | 4 | CRC32 of bytes 0–8 of this header and of the payload |
//! | 13 | 4 | CRC32 of bytes 0–12 of this header |
//!
//! Kind 1: bytes of the stream, in order; kind 2: the stream's connection closed (empty payload); kind 3: whole
//! frames of the stream in their packed form (the `packed` module: per-tag differences as varints, about a third
//! of the wire size), which the reader expands back into the stream's bytes. The writer sends a stream's header,
//! and anything that does not parse as frames, as kind 1. Chunk kinds this crate does not know are skipped. A
//! payload above [`MAX_CHUNK`] means the file is corrupt from there on.
//!
//! **Checksums** (CRC32, IEEE polynomial, as zlib and gzip compute it). Every byte of a version 3 file is covered:
//! a changed byte is an error that names where ([`TraceFileError::BadFileHeader`],
//! [`TraceFileError::ChunkHeaderChecksum`], [`TraceFileError::ChunkChecksum`], each fatal), never a different
//! number. The chunk header has a check of its own so that the reader trusts a length before it waits for the
//! payload: a file that ends inside a chunk whose header holds (a tracer killed while writing) is
//! [`TraceFileError::Truncated`], with everything before it read, while a changed length is a checksum error. A
//! header whose version field is not 3 but whose checksum holds for version 3 is a damaged version field, not
//! another format.
//!
//! **Versions.** Version 3 added the checksums; it is also the first version whose streams may carry the
//! counter records (tags 18 and 19, the [`counters`](super::counters) module's counter stream). Version 2 files
//! (the same layout without checksums: a 9-byte chunk header of kind, stream and length; the header's bytes 24–31
//! reserved, 0) still read, with nothing to check; a version 2 header whose reserved bytes are not 0 is refused as
//! damaged. Version 1 files (no packed chunks) are refused with [`TraceFileError::UnsupportedVersion`], like
//! newer ones. The writer writes version 3 only.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};

use super::decode::{Decoder, WireError};
use super::packed::{History, pack, unpack};
use super::record::Record;
use super::wire::{MAGIC as STREAM_MAGIC, StreamHeader};

/// The first 8 bytes of a trace file.
pub const FILE_MAGIC: [u8; 8] = *b"GPUTFILE";
/// The file format version this crate writes (and the newest it reads).
pub const FILE_VERSION: u16 = 3;
/// The oldest file format version this crate reads: version 2, the same layout without checksums.
pub const OLDEST_FILE_VERSION: u16 = 2;
/// Length of the file header.
pub const FILE_HEADER_LEN: usize = 32;
/// Largest chunk payload written or accepted.
pub const MAX_CHUNK: u32 = 1 << 24;
/// Chunk header of version 3: kind, stream, length, the chunk's CRC32, the header's CRC32.
pub const CHUNK_HEADER_LEN: usize = 17;
/// Chunk header of version 2: kind, stream, length.
const V2_CHUNK_HEADER_LEN: usize = 9;
/// Where the file header's CRC32 lies (version 3).
const HEADER_CRC_AT: usize = 24;
/// The first version with checksums.
const CHECKED_VERSION: u16 = 3;

/// The CRC32 of a version 3 file header: of all its fixed bytes but the checksum's own four.
fn file_header_crc(h: &[u8; FILE_HEADER_LEN]) -> u32 {
    let mut c = crc32fast::Hasher::new();
    c.update(&h[..HEADER_CRC_AT]);
    c.update(&h[HEADER_CRC_AT + 4..]);
    c.finalize()
}

/// The CRC32 of a chunk: of its kind, stream and length (`h`, 9 bytes) and of its payload.
fn chunk_crc(h: &[u8], payload: &[u8]) -> u32 {
    let mut c = crc32fast::Hasher::new();
    c.update(h);
    c.update(payload);
    c.finalize()
}

mod chunk {
    pub const DATA: u8 = 1;
    pub const CLOSED: u8 = 2;
    pub const PACKED: u8 = 3;
}

/// What the writer keeps of one stream: the bytes of a frame not complete yet, and the packing history.
#[derive(Debug, Default)]
struct Packer {
    pending: Vec<u8>,
    header_done: bool,
    /// The bytes did not parse as a stream: the rest goes as it is.
    raw: bool,
    history: History,
}

/// Writes the streams of several traced processes into one trace file, as their bytes arrive.
///
/// Nothing is decoded or held: each [`write`](Self::write) becomes one or more chunks right away (through the
/// writer given, which the caller may buffer). A tracer calls [`add_stream`](Self::add_stream) for each
/// connection, `write` with what it read from it, and [`close`](Self::close) when it ends.
#[derive(Debug)]
pub struct TraceFileWriter<W: Write> {
    out: W,
    packers: BTreeMap<u32, Packer>,
    packed: Vec<u8>,
    next_stream: u32,
    bytes: u64,
}

impl<W: Write> TraceFileWriter<W> {
    /// Writes the file header (version [`FILE_VERSION`]) to `out`.
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut h = [0u8; FILE_HEADER_LEN];
        h[..8].copy_from_slice(&FILE_MAGIC);
        h[8..10].copy_from_slice(&FILE_VERSION.to_le_bytes());
        h[10..12].copy_from_slice(&(FILE_HEADER_LEN as u16).to_le_bytes());
        h[16..24].copy_from_slice(&super::record::ClockAnchor::now().realtime.to_le_bytes());
        let crc = file_header_crc(&h);
        h[HEADER_CRC_AT..HEADER_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        out.write_all(&h)?;
        Ok(TraceFileWriter {
            out,
            packers: BTreeMap::new(),
            packed: Vec::new(),
            next_stream: 0,
            bytes: FILE_HEADER_LEN as u64,
        })
    }

    /// A number for a new stream.
    pub fn add_stream(&mut self) -> u32 {
        let s = self.next_stream;
        self.next_stream = self.next_stream.wrapping_add(1);
        s
    }

    /// Appends bytes of `stream` (any split: chunk boundaries need not match frames). Whole frames are written
    /// packed right away; the bytes of a frame not complete yet wait for the next call (or [`close`](Self::close)).
    pub fn write(&mut self, stream: u32, bytes: &[u8]) -> io::Result<()> {
        let mut p = self.packers.remove(&stream).unwrap_or_default();
        let r = self.write_packed(stream, &mut p, bytes);
        self.packers.insert(stream, p);
        r
    }

    fn write_raw(&mut self, stream: u32, bytes: &[u8]) -> io::Result<()> {
        for piece in bytes.chunks(MAX_CHUNK as usize) {
            self.chunk(chunk::DATA, stream, piece)?;
        }
        Ok(())
    }

    fn write_packed(&mut self, stream: u32, p: &mut Packer, bytes: &[u8]) -> io::Result<()> {
        if p.raw {
            return self.write_raw(stream, bytes);
        }
        p.pending.extend_from_slice(bytes);
        let mut at = 0;
        if !p.header_done {
            if p.pending.len() < 12 {
                return Ok(());
            }
            let len = usize::from(u16::from_le_bytes([p.pending[10], p.pending[11]]));
            if p.pending[..8] != STREAM_MAGIC || len < 12 {
                // Not a stream this writer understands: kept as it came, for the reader to judge.
                p.raw = true;
                let rest = std::mem::take(&mut p.pending);
                return self.write_raw(stream, &rest);
            }
            if p.pending.len() < len {
                return Ok(());
            }
            self.write_raw(stream, &p.pending[..len])?;
            p.header_done = true;
            at = len;
        }
        self.packed.clear();
        while p.pending.len() - at >= super::wire::FRAME_HEADER_LEN {
            let h = &p.pending[at..];
            let len = u32::from_le_bytes([h[1], h[2], h[3], h[4]]);
            if len > super::wire::MAX_FRAME {
                p.raw = true;
                break;
            }
            let end = at + super::wire::FRAME_HEADER_LEN + len as usize;
            if p.pending.len() < end {
                break;
            }
            pack(
                &mut p.history,
                h[0],
                &p.pending[at + super::wire::FRAME_HEADER_LEN..end],
                &mut self.packed,
            );
            at = end;
            if self.packed.len() >= MAX_CHUNK as usize / 2 {
                let packed = std::mem::take(&mut self.packed);
                self.chunk(chunk::PACKED, stream, &packed)?;
                self.packed = packed;
                self.packed.clear();
            }
        }
        if !self.packed.is_empty() {
            let packed = std::mem::take(&mut self.packed);
            self.chunk(chunk::PACKED, stream, &packed)?;
            self.packed = packed;
        }
        p.pending.drain(..at);
        if p.raw {
            let rest = std::mem::take(&mut p.pending);
            self.write_raw(stream, &rest)?;
        }
        Ok(())
    }

    /// Notes that `stream`'s connection closed (after the bytes of an incomplete last frame, as they came).
    pub fn close(&mut self, stream: u32) -> io::Result<()> {
        if let Some(p) = self.packers.remove(&stream) {
            self.write_raw(stream, &p.pending)?;
        }
        self.chunk(chunk::CLOSED, stream, &[])
    }

    fn chunk(&mut self, kind: u8, stream: u32, payload: &[u8]) -> io::Result<()> {
        let mut h = [0u8; CHUNK_HEADER_LEN];
        h[0] = kind;
        h[1..5].copy_from_slice(&stream.to_le_bytes());
        h[5..9].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        let crc = chunk_crc(&h[..9], payload);
        h[9..13].copy_from_slice(&crc.to_le_bytes());
        let header_crc = crc32fast::hash(&h[..13]);
        h[13..17].copy_from_slice(&header_crc.to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(payload)?;
        self.bytes += (CHUNK_HEADER_LEN + payload.len()) as u64;
        Ok(())
    }

    /// Bytes written so far, header included.
    pub fn bytes_written(&self) -> u64 {
        self.bytes
    }

    /// Flushes the writer given.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flushes and returns the writer given.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A trace file or stream could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TraceFileError {
    /// The input is empty.
    #[error("the file is empty: not a gpu-tools trace")]
    Empty,
    /// The input starts with neither a trace file's nor a trace stream's magic.
    #[error(
        "not a gpu-tools trace (it starts with {found:02x?}, a trace starts with \"GPUTFILE\" or \"GPUTRACE\")"
    )]
    NotATrace {
        /// Its first bytes (fewer than 8 where the input is shorter).
        found: Vec<u8>,
    },
    /// The file was written by another format version: a newer one (use a newer gpu-tools), or an older one
    /// (version 1, from before frames were packed; 0 is no version at all).
    #[error(
        "trace file format version {version} is not one this build reads ({OLDEST_FILE_VERSION} to {FILE_VERSION}): {}",
        if *version > FILE_VERSION { "it is newer, use a newer gpu-tools" } else { "it is older, read it with the gpu-tools that wrote it" }
    )]
    UnsupportedVersion {
        /// The version found.
        version: u16,
    },
    /// The file header (bytes 0 to 31) was damaged: in version 3, its checksum does not match its bytes (or holds
    /// only for version 3 where the version field says another); in version 2, its reserved bytes are not 0.
    #[error("the file header (bytes 0 to 31) is corrupt: {detail}")]
    BadFileHeader {
        /// What does not match.
        detail: &'static str,
    },
    /// A chunk header fails its checksum (version 3): a byte of its kind, stream or length changed, so nothing
    /// from `offset` on can be trusted.
    #[error("the file is corrupt at byte {offset}: the chunk header there fails its checksum")]
    ChunkHeaderChecksum {
        /// Offset of the chunk.
        offset: u64,
    },
    /// A chunk fails its checksum (version 3): a byte of its payload (or of the checksum) changed. Nothing of
    /// the chunk is used, and the reading ends there.
    #[error(
        "the file is corrupt at byte {offset}: the chunk of stream {stream} there ({len} bytes) fails its checksum"
    )]
    ChunkChecksum {
        /// Offset of the chunk.
        offset: u64,
        /// The stream it belongs to.
        stream: u32,
        /// Its payload length.
        len: u32,
    },
    /// The file header announces a length shorter than version 1's.
    #[error("trace file header length {len} is too short: the file is corrupt")]
    BadHeaderLength {
        /// The length found.
        len: u16,
    },
    /// The file ends inside its header or a chunk: it was cut short (a tracer killed while writing, a copy that
    /// did not finish). Everything before `offset` was read.
    #[error(
        "the file is truncated: it ends inside {} ({pending} bytes of it present)",
        if *offset == 0 { "its header".to_string() } else { format!("the chunk at byte {offset}") }
    )]
    Truncated {
        /// Offset of the incomplete chunk (0: the file header).
        offset: u64,
        /// Its bytes present.
        pending: usize,
    },
    /// A chunk header makes no sense (a length above [`MAX_CHUNK`]): the file is corrupt from `offset` on.
    #[error("the file is corrupt at byte {offset}: a chunk of kind {kind} announces {len} bytes")]
    Corrupt {
        /// Offset of the chunk.
        offset: u64,
        /// Its kind byte.
        kind: u8,
        /// Its announced length.
        len: u32,
    },
    /// One stream of the file could not be read at this point; [`WireError::is_fatal`] says whether that stream
    /// goes on. The file's other streams are not affected.
    #[error("stream {stream}: {error}")]
    Stream {
        /// The stream's number in the file (0 for a single stream).
        stream: u32,
        /// What went wrong.
        error: WireError,
    },
    /// Reading failed.
    #[error("reading the trace failed: {0}")]
    Io(String),
    /// A packed chunk of one stream could not be expanded: that stream is corrupt from `offset` on and the rest
    /// of it is skipped; the file's other streams go on.
    #[error(
        "stream {stream}: the packed chunk at byte {offset} is corrupt ({detail}); the rest of the stream is skipped"
    )]
    BadPackedChunk {
        /// The stream's number in the file.
        stream: u32,
        /// Offset of the chunk.
        offset: u64,
        /// What is wrong with it.
        detail: &'static str,
    },
}

impl TraceFileError {
    /// True when nothing more of the input can be read; false for an error that concerns one frame or one stream.
    pub fn is_fatal(&self) -> bool {
        !matches!(
            self,
            TraceFileError::Stream { .. } | TraceFileError::BadPackedChunk { .. }
        )
    }
}

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
enum Shape {
    Unknown,
    File,
    Stream,
}

struct StreamState {
    decoder: Decoder,
    header_sent: bool,
    /// A fatal stream error was reported: the rest of the stream is skipped.
    dead: bool,
    /// Packing history, for packed chunks.
    history: History,
}

impl StreamState {
    fn new() -> Self {
        StreamState {
            decoder: Decoder::new(),
            header_sent: false,
            dead: false,
            history: History::default(),
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
    source: R,
    shape: Shape,
    /// The file format version (files only).
    version: u16,
    buf: Vec<u8>,
    pos: usize,
    /// Offset in the input of `buf[0]`.
    base: u64,
    eof: bool,
    done: bool,
    streams: BTreeMap<u32, StreamState>,
    pending: std::collections::VecDeque<Result<TraceItem, TraceFileError>>,
    chunk: Vec<u8>,
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

/// Checks a whole file header against its version's rules: a version 3 header's checksum; a version 2 header's
/// reserved bytes (0). A header of another version whose checksum holds once the version field says 3 is a
/// version 3 header with a damaged version field.
fn check_file_header(h: &[u8; FILE_HEADER_LEN], version: u16) -> Result<(), TraceFileError> {
    let stored = u32::from_le_bytes([h[24], h[25], h[26], h[27]]);
    if version == CHECKED_VERSION {
        if stored != file_header_crc(h) {
            return Err(TraceFileError::BadFileHeader {
                detail: "its checksum does not match its bytes",
            });
        }
        return Ok(());
    }
    let mut as_v3 = *h;
    as_v3[8..10].copy_from_slice(&CHECKED_VERSION.to_le_bytes());
    if stored != 0 && stored == file_header_crc(&as_v3) {
        return Err(TraceFileError::BadFileHeader {
            detail: "the version field is damaged (the checksum holds for version 3)",
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
        }
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
    fn fill(&mut self) -> Result<bool, TraceFileError> {
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
    fn start(&mut self) -> Result<bool, TraceFileError> {
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
        } else if version == CHECKED_VERSION {
            // A version 3 header is checked whole before anything in it is trusted.
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
        self.pos += usize::from(header_len);
        self.shape = Shape::File;
        Ok(true)
    }

    /// Feeds `bytes` to `stream`'s decoder and queues what it decodes.
    fn feed(&mut self, stream: u32, bytes: &[u8]) {
        let s = self.streams.entry(stream).or_insert_with(StreamState::new);
        if s.dead {
            return;
        }
        s.decoder.feed(bytes);
        Self::drain(stream, s, &mut self.pending);
    }

    fn drain(
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
    fn finish_streams(&mut self) {
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
    fn step(&mut self) -> Result<bool, TraceFileError> {
        match self.shape {
            Shape::Unknown => self.start(),
            Shape::Stream => {
                if self.pos < self.buf.len() {
                    let bytes = std::mem::take(&mut self.buf);
                    self.base += bytes.len() as u64;
                    self.pos = 0;
                    self.feed(0, &bytes[..]);
                    return Ok(true);
                }
                if self.fill()? {
                    return Ok(true);
                }
                self.finish_streams();
                Ok(false)
            }
            Shape::File => {
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
                        return Ok(false);
                    }
                }
                let h = &self.buf[self.pos..self.pos + header_len];
                let kind = h[0];
                let stream = u32::from_le_bytes([h[1], h[2], h[3], h[4]]);
                let len = u32::from_le_bytes([h[5], h[6], h[7], h[8]]);
                let crc = if checked {
                    // The header is checked before its length is trusted: a changed length is corruption, not
                    // a file cut short.
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
                self.pos += total;
                match kind {
                    chunk::DATA => self.feed(stream, &payload),
                    chunk::PACKED => {
                        let offset = self.offset() - total as u64;
                        let s = self.streams.entry(stream).or_insert_with(StreamState::new);
                        if !s.dead {
                            let mut wire = Vec::with_capacity(payload.len() * 3);
                            match unpack(&mut s.history, &payload, &mut wire) {
                                Ok(()) => self.feed(stream, &wire),
                                Err(detail) => {
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
                        self.pending.push_back(Ok(TraceItem::Closed { stream }));
                    }
                    _ => log::debug!("trace file chunk of unknown kind {kind} skipped"),
                }
                Ok(true)
            }
        }
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

/// The name of an output file from a template: `%h` becomes the host name, `%p` the process id, `%%` a `%`.
pub fn expand_output_name(template: &str, host: &str, pid: u32) -> String {
    let mut out = String::with_capacity(template.len() + 16);
    let mut chars = template.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('h') => out.push_str(host),
            Some('p') => out.push_str(&pid.to_string()),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_names_expand_host_and_pid() {
        assert_eq!(
            expand_output_name("t-%h-%p.gputrace", "node7", 42),
            "t-node7-42.gputrace"
        );
        assert_eq!(expand_output_name("100%%-%x%", "h", 1), "100%-%x%");
    }
}
