//! [`TraceFileWriter`]: the streams of several traced processes into one file, chunk by chunk as their bytes
//! arrive, packed where they parse as frames, with the final chunk at the end.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::*;
use crate::packed::{History, pack};
use crate::wire::MAGIC as STREAM_MAGIC;

/// What the writer keeps of one stream: the bytes of a frame not complete yet, and the packing history.
#[derive(Debug, Default)]
pub(super) struct Packer {
    pub(super) pending: Vec<u8>,
    pub(super) header_done: bool,
    /// The bytes did not parse as a stream: the rest goes as it is.
    pub(super) raw: bool,
    pub(super) history: History,
}

/// Writes the streams of several traced processes into one trace file, as their bytes arrive.
///
/// Nothing is decoded or held: each [`write`](Self::write) becomes one or more chunks right away (through the
/// writer given, which the caller may buffer). A tracer calls [`add_stream`](Self::add_stream) for each
/// connection, `write` with what it read from it, [`close`](Self::close) when it ends, and
/// [`finish`](Self::finish) at the end: a file without its final chunk reads as not finished by its writer.
#[derive(Debug)]
pub struct TraceFileWriter<W: Write> {
    pub(super) out: W,
    pub(super) packers: BTreeMap<u32, Packer>,
    pub(super) packed: Vec<u8>,
    pub(super) next_stream: u32,
    pub(super) bytes: u64,
    /// Chunks written.
    pub(super) chunks: u64,
    /// Per stream with a chunk: the frames written packed.
    pub(super) frames: BTreeMap<u32, u64>,
    /// A write failed: what reached the file is unknown, and it is not finished.
    pub(super) failed: bool,
}

impl<W: Write> TraceFileWriter<W> {
    /// Writes the file header (version [`FILE_VERSION`]) to `out`, created now.
    pub fn new(out: W) -> io::Result<Self> {
        Self::created_at(out, crate::record::ClockAnchor::now().realtime)
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

    pub(super) fn write_raw(&mut self, stream: u32, bytes: &[u8]) -> io::Result<()> {
        for piece in bytes.chunks(MAX_CHUNK as usize) {
            self.chunk(chunk::DATA, stream, piece)?;
        }
        Ok(())
    }

    pub(super) fn write_packed(
        &mut self,
        stream: u32,
        p: &mut Packer,
        bytes: &[u8],
    ) -> io::Result<()> {
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
        while p.pending.len() - at >= crate::wire::FRAME_HEADER_LEN {
            let h = &p.pending[at..];
            let len = u32::from_le_bytes([h[1], h[2], h[3], h[4]]);
            if len > crate::wire::MAX_FRAME {
                p.raw = true;
                break;
            }
            let end = at + crate::wire::FRAME_HEADER_LEN + len as usize;
            if p.pending.len() < end {
                break;
            }
            pack(
                &mut p.history,
                h[0],
                &p.pending[at + crate::wire::FRAME_HEADER_LEN..end],
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
    pub(super) fn packed_chunk(
        &mut self,
        stream: u32,
        payload: &[u8],
        frames: u64,
    ) -> io::Result<()> {
        self.chunk(chunk::PACKED, stream, payload)?;
        *self.frames.entry(stream).or_default() += frames;
        Ok(())
    }

    pub(super) fn chunk(&mut self, kind: u8, stream: u32, payload: &[u8]) -> io::Result<()> {
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

    pub(super) fn put_chunk(&mut self, kind: u8, stream: u32, payload: &[u8]) -> io::Result<()> {
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
        let end = crate::record::ClockAnchor::now().realtime;
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
