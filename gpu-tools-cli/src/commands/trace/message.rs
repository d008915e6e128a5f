//! What the threads of the receiving end send to the one thread that writes the outputs: the bytes and records of
//! each traced process's stream, and of the counter stream (`--counters`). A module of its own, below both the
//! receiving end and the counter sampler.

use gpu_tools::trace::{Record, StreamHeader, WireError};

/// One message to the writing thread; streams are numbered by connection.
pub(super) enum Msg {
    /// Bytes of a stream as they were read (for the trace file).
    Bytes(usize, Vec<u8>),
    Header(usize, StreamHeader),
    Item(usize, Result<Record, WireError>),
    Closed(usize),
    /// Bytes of the counter stream (`--counters`), and the records they hold.
    Counters(Vec<u8>, Vec<Record>),
    /// The counter stream ended.
    CountersClosed,
}
