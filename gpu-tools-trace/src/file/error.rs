//! [`TraceFileError`]: why a trace file or stream could not be read, with where.

use super::*;
use crate::decode::WireError;

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
