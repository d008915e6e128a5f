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

mod error;
mod reader;
#[cfg(test)]
mod tests;
mod writer;

pub use error::TraceFileError;
pub use reader::{TraceItem, TraceReader, rewrite};
pub use writer::TraceFileWriter;

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
