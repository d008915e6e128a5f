//! What the tracing side says of itself: the time its tool layer spent, the records it dropped, and its messages
//! (plain notices, and coded notices a program acts on).

/// Time the vendor's tool layer spent.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverheadRecord {
    /// Start, ns.
    pub start: u64,
    /// End, ns.
    pub end: u64,
    /// The vendor's overhead kind code.
    pub kind: u32,
    /// The vendor's object kind code (process, thread, device, context, stream).
    pub object_kind: u32,
    /// The object's id (a thread id, device ordinal, ...).
    pub object_id: u64,
}

/// Records the vendor dropped.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedRecords {
    /// Context id (`u32::MAX` when not tied to one).
    pub context: u32,
    /// Stream id (`u32::MAX` when not tied to one).
    pub stream: u32,
    /// How many.
    pub count: u64,
}

/// Severity of a [`Notice`].
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum NoticeLevel {
    /// Tracing failed or lost data.
    Error,
    /// Something the user should know.
    Warning,
    /// Informational.
    Info,
    /// A code newer than this crate.
    Other(u8),
}

impl NoticeLevel {
    /// Wire code.
    pub fn code(self) -> u8 {
        match self {
            NoticeLevel::Error => 1,
            NoticeLevel::Warning => 2,
            NoticeLevel::Info => 3,
            NoticeLevel::Other(c) => c,
        }
    }

    /// From the wire code.
    pub fn from_code(code: u8) -> Self {
        match code {
            1 => NoticeLevel::Error,
            2 => NoticeLevel::Warning,
            3 => NoticeLevel::Info,
            c => NoticeLevel::Other(c),
        }
    }
}

/// A message from the tracing side.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// Severity.
    pub level: NoticeLevel,
    /// The message.
    pub text: String,
}

/// A notice that a program acts on: what it means, as a code and values defined by the protocol of whoever sent it
/// (the injection libraries' messages are `gpu_tools_injection::message`'s), beside the text a person reads,
/// rendered by the sender from the same. A reader that does not know the code shows the text, as for a [`Notice`];
/// one that acts on it reads the code and values, never the text.
///
/// A record kind of its own rather than more fields of [`Notice`]: a notice's frame ends with its text, so a reader
/// of an earlier release would have taken any field after it for text, where it skips a frame of a tag it does not
/// know; and files written before hold plain notices, which read as they did.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodedNotice {
    /// Severity.
    pub level: NoticeLevel,
    /// What the notice says, in the sender's protocol.
    pub code: u16,
    /// Its numbers (counts, ids, flags), in the order the code defines; at most 255 are sent.
    pub values: Vec<u64>,
    /// Its words, where the code has some (a reason, a name); empty otherwise. At most 4 KiB are sent.
    pub detail: String,
    /// The text a person reads.
    pub text: String,
}
