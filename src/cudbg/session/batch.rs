//! [`EventBatch`]: the events of one drain, and the acknowledgement that releases the debuggee.

use std::time::Instant;

use super::DebugSession;
use crate::cudbg::event::{Event, Queue};

/// When a batch's events were signalled, noticed and drained: the session's share of a synchronous round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchTiming {
    /// When the driver's callback last fired before the drain (`None` if it has never fired: the events were
    /// found by polling).
    pub notified: Option<Instant>,
    /// When the session stopped waiting and began to drain the queues.
    pub woke: Instant,
    /// When the queues were empty again.
    pub drained: Instant,
}

/// Events drained from the driver in one go. Dropping it (or [`EventBatch::acknowledge`]) acknowledges the
/// synchronous ones, which releases the debuggee threads that raised them; until then the debuggee stays where it
/// is and the session can inspect it through [`EventBatch::session`].
#[derive(Debug)]
pub struct EventBatch<'s> {
    pub(crate) session: &'s mut DebugSession,
    pub(crate) events: Vec<(Queue, Event)>,
    pub(crate) needs_ack: bool,
    pub(crate) timing: BatchTiming,
}

impl<'s> EventBatch<'s> {
    /// The events, in the order the driver queued them (sync queue first).
    pub fn events(&self) -> &[(Queue, Event)] {
        &self.events
    }

    /// The session, for inspecting or changing the debuggee before it is released.
    pub fn session(&self) -> &DebugSession {
        self.session
    }

    /// Whether the batch holds synchronous events that still wait for an acknowledgement.
    pub fn needs_acknowledge(&self) -> bool {
        self.needs_ack
    }

    /// When the events were signalled, noticed and drained.
    pub fn timing(&self) -> BatchTiming {
        self.timing
    }

    /// Acknowledges now, reporting a failure (dropping the batch does the same but cannot report).
    pub fn acknowledge(mut self) -> Result<(), crate::Error> {
        self.release()
    }

    /// Acknowledges now and keeps the events readable: the debuggee runs on while the caller looks at them. Use
    /// it as early as the debuggee need not be held (it shortens every synchronous round trip). A second call,
    /// or dropping the batch afterwards, does nothing.
    pub fn release(&mut self) -> Result<(), crate::Error> {
        if !self.needs_ack {
            return Ok(());
        }
        self.needs_ack = false;
        self.session.acknowledge()
    }
}

impl<'b> IntoIterator for &'b EventBatch<'_> {
    type Item = &'b (Queue, Event);
    type IntoIter = std::slice::Iter<'b, (Queue, Event)>;
    fn into_iter(self) -> Self::IntoIter {
        self.events.iter()
    }
}

impl Drop for EventBatch<'_> {
    fn drop(&mut self) {
        if self.needs_ack {
            let _ = self.session.acknowledge();
        }
    }
}
