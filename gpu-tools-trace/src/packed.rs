//! The compact form of a stream's frames inside a trace file (chunk kind 3).
//!
//! A packed frame is: tag (u8), the wire payload's length (varint), then the payload transcoded. Frames that
//! carry text (names, process start, notices, process info) are copied as they are. Every other payload is
//! coded against the previous payload of the same tag in the same stream: where it starts with a start and an
//! end time (tags 2–7, 12, 18, 19), the start as the zigzag varint of its difference to the previous start and the end as
//! the zigzag varint of its difference to the start; then each following 4-byte word as the zigzag varint of its
//! (wrapping) difference to the word at the same offset of the previous payload (0 where that was shorter); the
//! last `len % 4` bytes as they are. Correlation ids, name ids, cbids, streams and devices mostly repeat or step
//! by a little, so most words take one byte. The transcoding is lossless for any payload bytes, so the reader
//! gives back exactly the stream the tracer received.

use super::wire::tag::is_timed;
use super::wire::{FRAME_HEADER_LEN, MAX_FRAME};

/// Tags copied as they are (their payloads are mostly text). Not the coded notice (28), though mostly text too: it
/// came after the readers of earlier releases, which unpack a frame of a tag they do not know as coded against
/// its previous payload; copied as it is, it would put them out of step for the rest of the stream.
fn is_text(tag: u8) -> bool {
    matches!(tag, 1 | 9 | 11 | 17)
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
        .unwrap_or(0)
}

/// Previous payloads by tag, of one stream: a table indexed by the tag (it grows to the highest tag seen), as
/// every frame looks its tag up here.
#[derive(Debug, Default)]
pub(crate) struct History(Vec<Vec<u8>>);

impl History {
    /// The previous payload of `tag` (empty before the first).
    fn of(&mut self, tag: u8) -> &mut Vec<u8> {
        let i = usize::from(tag);
        if self.0.len() <= i {
            self.0.resize_with(i + 1, Vec::new);
        }
        &mut self.0[i]
    }
}

/// Appends the packed form of one wire frame.
pub(crate) fn pack(history: &mut History, tag: u8, payload: &[u8], out: &mut Vec<u8>) {
    out.push(tag);
    put_varint(out, payload.len() as u64);
    if is_text(tag) {
        out.extend_from_slice(payload);
        return;
    }
    let prev = history.of(tag);
    let mut i = 0;
    if is_timed(tag) && payload.len() >= 16 {
        let (start, end) = (u64_at(payload, 0), u64_at(payload, 8));
        put_varint(out, zigzag(start.wrapping_sub(u64_at(prev, 0)) as i64));
        put_varint(out, zigzag(end.wrapping_sub(start) as i64));
        i = 16;
    }
    while i + 4 <= payload.len() {
        let d = u32_at(payload, i).wrapping_sub(u32_at(prev, i)) as i32;
        put_varint(out, zigzag(i64::from(d)));
        i += 4;
    }
    out.extend_from_slice(&payload[i..]);
    prev.clear();
    prev.extend_from_slice(payload);
}

/// Why a packed chunk could not be expanded.
pub(crate) type UnpackError = &'static str;

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn varint(&mut self) -> Result<u64, UnpackError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.at).ok_or("it ends inside a number")?;
            self.at += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("a number is longer than 10 bytes")
    }

    fn bytes(&mut self, n: usize) -> Result<&[u8], UnpackError> {
        let s = self
            .b
            .get(self.at..self.at.saturating_add(n))
            .ok_or("it ends inside a frame")?;
        self.at += n;
        Ok(s)
    }
}

/// Expands a packed chunk back into wire frames, appended to `out`; returns how many.
pub(crate) fn unpack(
    history: &mut History,
    chunk: &[u8],
    out: &mut Vec<u8>,
) -> Result<u64, UnpackError> {
    let mut c = Cursor { b: chunk, at: 0 };
    let mut frames = 0;
    while c.at < chunk.len() {
        frames += 1;
        let tag = c.bytes(1)?[0];
        let len = c.varint()?;
        if len > u64::from(MAX_FRAME) {
            return Err("a frame announces more than the largest frame");
        }
        let len = len as usize;
        out.reserve(FRAME_HEADER_LEN + len);
        out.push(tag);
        out.extend_from_slice(&(len as u32).to_le_bytes());
        let base = out.len();
        if is_text(tag) {
            out.extend_from_slice(c.bytes(len)?);
            continue;
        }
        let prev = history.of(tag);
        let mut i = 0;
        if is_timed(tag) && len >= 16 {
            let start = u64_at(prev, 0).wrapping_add(unzigzag(c.varint()?) as u64);
            let end = start.wrapping_add(unzigzag(c.varint()?) as u64);
            out.extend_from_slice(&start.to_le_bytes());
            out.extend_from_slice(&end.to_le_bytes());
            i = 16;
        }
        while i + 4 <= len {
            let d = unzigzag(c.varint()?);
            let d = i32::try_from(d).map_err(|_| "a word difference is out of range")?;
            out.extend_from_slice(&u32_at(prev, i).wrapping_add(d as u32).to_le_bytes());
            i += 4;
        }
        out.extend_from_slice(c.bytes(len - i)?);
        prev.clear();
        prev.extend_from_slice(&out[base..]);
    }
    Ok(frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_payloads_round_trip() {
        let frames: Vec<(u8, Vec<u8>)> = vec![
            (2, (0..90u8).collect()),
            (2, (0..90u8).rev().collect()),
            (5, vec![0xff; 17]),
            (1, b"name".to_vec()),
            (7, vec![1, 2, 3]),
            (5, (0..48u8).map(|b| b.wrapping_mul(91)).collect()),
        ];
        let (mut h, mut packed) = (History::default(), Vec::new());
        let mut wire = Vec::new();
        for (tag, p) in &frames {
            pack(&mut h, *tag, p, &mut packed);
            wire.push(*tag);
            wire.extend_from_slice(&(p.len() as u32).to_le_bytes());
            wire.extend_from_slice(p);
        }
        let mut back = Vec::new();
        assert_eq!(
            unpack(&mut History::default(), &packed, &mut back),
            Ok(frames.len() as u64)
        );
        assert_eq!(back, wire);
        for cut in 0..packed.len() {
            let mut b = Vec::new();
            let _ = unpack(&mut History::default(), &packed[..cut], &mut b);
        }
    }
}
