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
//! | 8 | 2 | file format version (4) |
//! | 10 | 2 | header_len (32) |
//! | 12 | 4 | flags (0) |
//! | 16 | 8 | `CLOCK_REALTIME` when the file was created, ns |
//! | 24 | 4 | CRC32 of bytes 0–23 and 28–31 (version 2: reserved, 0) |
//! | 28 | 4 | reserved (0) |
//!
//! **Chunk** (versions 3 and 4): a 17-byte header, then the payload.
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
//! of the wire size), which the reader expands back into the stream's bytes; kind 4: the final chunk (below). The
//! writer sends a stream's header, and anything that does not parse as frames, as kind 1. Chunk kinds this crate
//! does not know are skipped. A payload above [`MAX_CHUNK`] means the file is corrupt from there on.
//!
//! **Final chunk** (version 4): the writer ends every file with a chunk of kind 4 (stream number `0xffffffff`)
//! that says what it wrote before it; nothing follows it. Its payload, little-endian:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | `CLOCK_REALTIME` when the writer finished, ns |
//! | 8 | 8 | bytes of the file before this chunk (its offset) |
//! | 16 | 8 | chunks before this one |
//! | 24 | 4 | streams: n, the streams that have a chunk |
//! | 28 | 12 × n | per stream, in increasing number: stream number (4), frames written packed (8) |
//!
//! A version 4 file that ends without it was not finished by its writer (cut short, or the tracer was killed):
//! [`TraceFileError::Unfinished`], or [`TraceFileError::Truncated`] where it ends inside a chunk, with everything
//! before read. A traced program that crashed is another thing: its stream has no end record (and its connection
//! closed), but the file has its final chunk. A final chunk whose counts disagree with what was read (chunks left
//! out, repeated or moved between files, each whole) is [`TraceFileError::FinalChunkMismatch`], which says what
//! differs; bytes after it are [`TraceFileError::AfterFinalChunk`].
//!
//! **Checksums** (CRC32, IEEE polynomial, as zlib and gzip compute it). Every byte of a version 3 or 4 file is
//! covered: a changed byte is an error that names where ([`TraceFileError::BadFileHeader`],
//! [`TraceFileError::ChunkHeaderChecksum`], [`TraceFileError::ChunkChecksum`], each fatal), never a different
//! number. The chunk header has a check of its own so that the reader trusts a length before it waits for the
//! payload: a file that ends inside a chunk whose header holds (a tracer killed while writing) is
//! [`TraceFileError::Truncated`], with everything before it read, while a changed length is a checksum error. A
//! header whose version field says another version than the one its checksum holds for is a damaged version
//! field, not another format.
//!
//! **Versions.** Version 4 added the final chunk. Version 3 added the checksums; it is also the first version
//! whose streams may carry the counter records (tags 18 and 19, the [`counters`](super::counters) module's counter
//! stream). Version 3 files (no final chunk) still read as they did: a file of them cut at a chunk boundary reads
//! as complete. Version 2 files (the same layout without checksums: a 9-byte chunk header of kind, stream and
//! length; the header's bytes 24–31 reserved, 0) still read, with nothing to check; a version 2 header whose
//! reserved bytes are not 0 is refused as damaged. [`format_limits`] says what a file of an older version cannot
//! show. Version 1 files (no packed chunks) are refused with [`TraceFileError::UnsupportedVersion`], like newer
//! ones. The writer writes version 4 only; [`rewrite`] copies a file of an older version into version 4.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};

use super::decode::{Decoder, WireError};
use super::packed::{History, pack, unpack};
use super::record::Record;
use super::wire::{MAGIC as STREAM_MAGIC, StreamHeader};

/// The first 8 bytes of a trace file.
pub const FILE_MAGIC: [u8; 8] = *b"GPUTFILE";
/// The file format version this crate writes (and the newest it reads).
pub const FILE_VERSION: u16 = 4;
/// The oldest file format version this crate reads: version 2, the same layout without checksums.
pub const OLDEST_FILE_VERSION: u16 = 2;
/// Length of the file header.
pub const FILE_HEADER_LEN: usize = 32;
/// Largest chunk payload written or accepted.
pub const MAX_CHUNK: u32 = 1 << 24;
/// Chunk header of versions 3 and 4: kind, stream, length, the chunk's CRC32, the header's CRC32.
pub const CHUNK_HEADER_LEN: usize = 17;
/// Chunk header of version 2: kind, stream, length.
const V2_CHUNK_HEADER_LEN: usize = 9;
/// Where the file header's CRC32 lies (versions 3 and 4).
const HEADER_CRC_AT: usize = 24;
/// The first version with checksums.
const CHECKED_VERSION: u16 = 3;
/// The first version whose files end with a final chunk.
const FINAL_CHUNK_VERSION: u16 = 4;
/// The stream number in the final chunk's header (it belongs to no stream).
const FINAL_STREAM: u32 = u32::MAX;
/// The final chunk's fixed fields: end time, bytes before it, chunks before it, streams.
const FINAL_FIXED_LEN: usize = 28;
/// One stream's entry in the final chunk: stream number, frames.
const FINAL_ENTRY_LEN: usize = 12;

/// What a file of format `version` cannot show, as a note for whoever reads it: `None` for the current format,
/// where a changed byte and a file cut short are each an error; for version 3 (no final chunk), that a file cut
/// at a chunk boundary reads as complete; for version 2, that and that a changed byte may read as another number.
pub fn format_limits(version: u16) -> Option<&'static str> {
    match version {
        2 => Some(
            "trace file format 2 has no checksums and no final chunk: a changed byte, or a file cut short, cannot \
             be told from what was written (rewrite it in the current format to check it from now on)",
        ),
        3 => Some(
            "trace file format 3 has no final chunk: the file cannot be checked for completeness (one cut short \
             at a chunk boundary reads as whole)",
        ),
        _ => None,
    }
}

/// The CRC32 of a version 3 or 4 file header: of all its fixed bytes but the checksum's own four.
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
    pub const FINAL: u8 = 4;
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
/// connection, `write` with what it read from it, [`close`](Self::close) when it ends, and
/// [`finish`](Self::finish) at the end: a file without its final chunk reads as not finished by its writer.
#[derive(Debug)]
pub struct TraceFileWriter<W: Write> {
    out: W,
    packers: BTreeMap<u32, Packer>,
    packed: Vec<u8>,
    next_stream: u32,
    bytes: u64,
    /// Chunks written.
    chunks: u64,
    /// Per stream with a chunk: the frames written packed.
    frames: BTreeMap<u32, u64>,
    /// A write failed: what reached the file is unknown, and it is not finished.
    failed: bool,
}

impl<W: Write> TraceFileWriter<W> {
    /// Writes the file header (version [`FILE_VERSION`]) to `out`, created now.
    pub fn new(out: W) -> io::Result<Self> {
        Self::created_at(out, super::record::ClockAnchor::now().realtime)
    }

    /// Writes the file header (version [`FILE_VERSION`]) to `out`, saying it was created at `realtime`
    /// (`CLOCK_REALTIME`, ns): for a copy of an older file ([`rewrite`]), which keeps the time of the original.
    pub fn created_at(mut out: W, realtime: u64) -> io::Result<Self> {
        let mut h = [0u8; FILE_HEADER_LEN];
        h[..8].copy_from_slice(&FILE_MAGIC);
        h[8..10].copy_from_slice(&FILE_VERSION.to_le_bytes());
        h[10..12].copy_from_slice(&(FILE_HEADER_LEN as u16).to_le_bytes());
        h[16..24].copy_from_slice(&realtime.to_le_bytes());
        let crc = file_header_crc(&h);
        h[HEADER_CRC_AT..HEADER_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        out.write_all(&h)?;
        Ok(TraceFileWriter {
            out,
            packers: BTreeMap::new(),
            packed: Vec::new(),
            next_stream: 0,
            bytes: FILE_HEADER_LEN as u64,
            chunks: 0,
            frames: BTreeMap::new(),
            failed: false,
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
        let mut frames = 0u64;
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
            frames += 1;
            at = end;
            if self.packed.len() >= MAX_CHUNK as usize / 2 {
                let packed = std::mem::take(&mut self.packed);
                self.packed_chunk(stream, &packed, std::mem::take(&mut frames))?;
                self.packed = packed;
                self.packed.clear();
            }
        }
        if !self.packed.is_empty() {
            let packed = std::mem::take(&mut self.packed);
            self.packed_chunk(stream, &packed, frames)?;
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

    /// A packed chunk of `frames` whole frames of `stream`.
    fn packed_chunk(&mut self, stream: u32, payload: &[u8], frames: u64) -> io::Result<()> {
        self.chunk(chunk::PACKED, stream, payload)?;
        *self.frames.entry(stream).or_default() += frames;
        Ok(())
    }

    fn chunk(&mut self, kind: u8, stream: u32, payload: &[u8]) -> io::Result<()> {
        if self.failed {
            return Err(io::Error::other(
                "an earlier write of the trace file failed",
            ));
        }
        self.frames.entry(stream).or_default();
        self.put_chunk(kind, stream, payload)?;
        self.chunks += 1;
        Ok(())
    }

    fn put_chunk(&mut self, kind: u8, stream: u32, payload: &[u8]) -> io::Result<()> {
        let mut h = [0u8; CHUNK_HEADER_LEN];
        h[0] = kind;
        h[1..5].copy_from_slice(&stream.to_le_bytes());
        h[5..9].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        let crc = chunk_crc(&h[..9], payload);
        h[9..13].copy_from_slice(&crc.to_le_bytes());
        let header_crc = crc32fast::hash(&h[..13]);
        h[13..17].copy_from_slice(&header_crc.to_le_bytes());
        let written = self
            .out
            .write_all(&h)
            .and_then(|()| self.out.write_all(payload));
        if written.is_err() {
            self.failed = true;
        }
        written?;
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

    /// Ends the file: writes its final chunk (the time now, the bytes and chunks before it, each stream's frames),
    /// flushes, and returns the writer given. Refused after a failed write (what reached the file is not known):
    /// the file is then left without its final chunk, and reads as not finished.
    pub fn finish(self) -> io::Result<W> {
        let end = super::record::ClockAnchor::now().realtime;
        self.finish_at(end)
    }

    /// [`finish`](Self::finish), with the end time given (`CLOCK_REALTIME`, ns).
    pub fn finish_at(mut self, realtime: u64) -> io::Result<W> {
        if self.failed {
            return Err(io::Error::other(
                "an earlier write of the trace file failed: it is left unfinished",
            ));
        }
        let n = self.frames.len();
        let len = n
            .checked_mul(FINAL_ENTRY_LEN)
            .and_then(|l| l.checked_add(FINAL_FIXED_LEN))
            .filter(|&l| l <= MAX_CHUNK as usize)
            .ok_or_else(|| io::Error::other(format!("{n} streams do not fit a final chunk")))?;
        let mut payload = Vec::with_capacity(len);
        payload.extend_from_slice(&realtime.to_le_bytes());
        payload.extend_from_slice(&self.bytes.to_le_bytes());
        payload.extend_from_slice(&self.chunks.to_le_bytes());
        payload.extend_from_slice(&(n as u32).to_le_bytes());
        for (stream, frames) in &self.frames {
            payload.extend_from_slice(&stream.to_le_bytes());
            payload.extend_from_slice(&frames.to_le_bytes());
        }
        self.put_chunk(chunk::FINAL, FINAL_STREAM, &payload)?;
        self.out.flush()?;
        Ok(self.out)
    }

    /// Flushes and returns the writer given without the final chunk: the file then reads as not finished by its
    /// writer, as one whose tracer was killed at this point does.
    pub fn into_unfinished(mut self) -> io::Result<W> {
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
    /// The file header (bytes 0 to 31) was damaged: in version 3 or 4, its checksum does not match its bytes (or
    /// holds only for another version than the version field says); in version 2, its reserved bytes are not 0.
    #[error("the file header (bytes 0 to 31) is corrupt: {detail}")]
    BadFileHeader {
        /// What does not match.
        detail: &'static str,
    },
    /// A chunk header fails its checksum (version 3 or 4): a byte of its kind, stream or length changed, so nothing
    /// from `offset` on can be trusted.
    #[error("the file is corrupt at byte {offset}: the chunk header there fails its checksum")]
    ChunkHeaderChecksum {
        /// Offset of the chunk.
        offset: u64,
    },
    /// A chunk fails its checksum (version 3 or 4): a byte of its payload (or of the checksum) changed. Nothing of
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
    /// A version 4 file ends after a whole chunk, without its final chunk: its writer did not finish it (the file
    /// was cut short at a chunk boundary, or the tracer was killed). Everything before `offset` was read.
    #[error(
        "the file was not finished by its writer (cut short, or the tracer was killed): it ends at byte {offset} \
         without its final chunk"
    )]
    Unfinished {
        /// Where the file ends.
        offset: u64,
    },
    /// The final chunk (at `offset`) disagrees with what was read before it: whole chunks were left out, repeated
    /// or put in from elsewhere. What was read is not the file that was written.
    #[error("the file is corrupt: its final chunk (at byte {offset}) {detail}")]
    FinalChunkMismatch {
        /// Offset of the final chunk.
        offset: u64,
        /// What differs, and in which stream.
        detail: String,
    },
    /// Bytes follow the final chunk (at `offset`): something was appended to a finished file. Everything up to the
    /// final chunk was read and checked; what follows it is not read.
    #[error("the file goes on after its final chunk (at byte {offset}): what follows is not read")]
    AfterFinalChunk {
        /// Offset of the final chunk.
        offset: u64,
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
    /// A packed chunk could not be expanded: the history is lost, the rest of the stream is not read.
    unpack_failed: bool,
    /// Frames expanded from packed chunks (files only), for the final chunk's check.
    frames: u64,
}

impl StreamState {
    fn new() -> Self {
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
    /// The file header's creation time (files only).
    created: u64,
    /// Chunks read before the final chunk (files only).
    chunks: u64,
    /// The final chunk, once read: its offset and the writer's end time.
    finished: Option<(u64, u64)>,
    /// Each stream's bytes as read (expanded where packed), and its closing, in file order: what [`rewrite`]
    /// copies. `None` unless asked for.
    tap: Option<Vec<Tapped>>,
}

/// What [`TraceReader`] passes on to [`rewrite`]: bytes of a stream, or its closing.
#[derive(Debug)]
enum Tapped {
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
fn check_file_header(h: &[u8; FILE_HEADER_LEN], version: u16) -> Result<(), TraceFileError> {
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
    fn step_file(&mut self) -> Result<bool, TraceFileError> {
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
    fn check_final(&self, offset: u64, p: &[u8]) -> Result<u64, TraceFileError> {
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
                .unwrap_or_else(|| super::record::ClockAnchor::now().realtime);
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

/// The name of an output file from a template: `%h` becomes the host name, `%p` the process id, `%%` a `%`.
/// `%r` (the rank, [`expand_output_name_with_rank`]) is kept as it is, as any other `%` sequence.
pub fn expand_output_name(template: &str, host: &str, pid: u32) -> String {
    expand_output_name_with_rank(template, host, pid, None)
}

/// [`expand_output_name`], and `%r` becomes `rank` (the rank of the traced process, as its launcher numbered it;
/// several, as the caller writes them); kept as `%r` where `rank` is `None`.
pub fn expand_output_name_with_rank(
    template: &str,
    host: &str,
    pid: u32,
    rank: Option<&str>,
) -> String {
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
            Some('r') if rank.is_some() => out.push_str(rank.unwrap_or_default()),
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
        assert_eq!(expand_output_name("t-%r", "h", 1), "t-%r");
    }

    #[test]
    fn output_names_expand_the_rank_where_known() {
        assert_eq!(
            expand_output_name_with_rank("run-%h-%r.gputrace", "node7", 42, Some("13")),
            "run-node7-13.gputrace"
        );
        assert_eq!(
            expand_output_name_with_rank("%%r-%r", "h", 1, Some("0-3")),
            "%r-0-3"
        );
        assert_eq!(expand_output_name_with_rank("t-%r", "h", 1, None), "t-%r");
    }
}
