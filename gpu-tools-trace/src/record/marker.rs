//! NVTX markers: marks and range ends on host threads, and the colour, category and payload given to them.

use std::sync::Arc;

/// What an NVTX marker record marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum MarkerKind {
    /// An instantaneous mark (`nvtxMark`).
    Instant,
    /// A range starts (`nvtxRangePush`, `nvtxRangeStart`).
    Start,
    /// A range ends (`nvtxRangePop`, `nvtxRangeEnd`); its name is empty.
    End,
    /// A code newer than this crate.
    Other(u8),
}

impl MarkerKind {
    /// Wire code.
    pub fn code(self) -> u8 {
        match self {
            MarkerKind::Instant => 1,
            MarkerKind::Start => 2,
            MarkerKind::End => 3,
            MarkerKind::Other(c) => c,
        }
    }

    /// From the wire code.
    pub fn from_code(code: u8) -> Self {
        match code {
            1 => MarkerKind::Instant,
            2 => MarkerKind::Start,
            3 => MarkerKind::End,
            c => MarkerKind::Other(c),
        }
    }
}

/// An NVTX mark, or one end of an NVTX range, on a host thread. A range's start and end share `id`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MarkerRecord {
    /// When, ns.
    pub time: u64,
    /// Mark, start or end.
    pub kind: MarkerKind,
    /// The marker id: a range's start and end carry the same; the [`MarkerData`] of the marker too.
    pub id: u32,
    /// Process id.
    pub process: u32,
    /// Thread id (0 where the vendor tied the marker to the process only).
    pub thread: u32,
    /// The NVTX domain (empty for the default domain).
    #[cfg_attr(feature = "serde", serde(serialize_with = "ser_arc"))]
    pub domain: Arc<str>,
    /// The message (empty for a range's end).
    pub name: String,
}

/// The payload of an NVTX marker.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum MarkerPayload {
    /// No payload.
    None,
    /// An unsigned integer.
    Unsigned(u64),
    /// A signed integer.
    Signed(i64),
    /// A floating-point number.
    Float(f64),
    /// A kind this crate does not know, with its code and raw 64 bits.
    Other(u8, u64),
}

impl Eq for MarkerPayload {}

impl MarkerPayload {
    /// Wire code and 64 bits.
    pub fn to_wire(self) -> (u8, u64) {
        match self {
            MarkerPayload::None => (0, 0),
            MarkerPayload::Unsigned(v) => (1, v),
            MarkerPayload::Signed(v) => (2, v as u64),
            MarkerPayload::Float(v) => (3, v.to_bits()),
            MarkerPayload::Other(c, v) => (c, v),
        }
    }

    /// From the wire code and 64 bits.
    pub fn from_wire(code: u8, bits: u64) -> Self {
        match code {
            0 => MarkerPayload::None,
            1 => MarkerPayload::Unsigned(bits),
            2 => MarkerPayload::Signed(bits as i64),
            3 => MarkerPayload::Float(f64::from_bits(bits)),
            c => MarkerPayload::Other(c, bits),
        }
    }
}

impl std::fmt::Display for MarkerPayload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MarkerPayload::None => Ok(()),
            MarkerPayload::Unsigned(v) => write!(f, "{v}"),
            MarkerPayload::Signed(v) => write!(f, "{v}"),
            MarkerPayload::Float(v) => write!(f, "{v}"),
            MarkerPayload::Other(c, v) => write!(f, "kind {c}: {v:#x}"),
        }
    }
}

/// The colour, category and payload given to an NVTX marker (`nvtxEventAttributes_t`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MarkerData {
    /// The marker's id ([`MarkerRecord::id`]).
    pub id: u32,
    /// ARGB colour, `None` where none was given.
    pub color: Option<u32>,
    /// Category (0: none).
    pub category: u32,
    /// Payload.
    pub payload: MarkerPayload,
}

#[cfg(feature = "serde")]
pub(crate) fn ser_arc<S: serde::Serializer>(v: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v)
}
