//! What the threads of the receiving end send to the one thread that writes the outputs: the bytes and records of
//! each traced process's stream, and of the counter stream (`--counters`). A module of its own, below both the
//! receiving end and the counter sampler.

use gpu_tools::trace::Record;
use gpu_tools_injection::collect::Delivery;

/// One message to the writing thread.
pub(super) enum Msg {
    /// From a traced process's connection (`gpu_tools_injection::collect`), numbered by connection.
    Stream(Delivery),
    /// Bytes of the counter stream (`--counters`), and the records they hold.
    Counters(Vec<u8>, Vec<Record>),
    /// The counter stream ended.
    CountersClosed,
}

impl From<Delivery> for Msg {
    fn from(d: Delivery) -> Msg {
        Msg::Stream(d)
    }
}
