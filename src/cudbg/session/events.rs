//! Events: draining the driver's queues, handing them out in batches, acknowledging them, and waiting for one.

use std::time::{Duration, Instant};

use super::batch::{BatchTiming, EventBatch};
use super::{ASYNC_EVERY, DebugSession, POLL};
use crate::cudbg::api::api_call;
use crate::cudbg::event::{Event, Queue};
use crate::cudbg::notify::NOTIFIER;
use crate::cudbg::{CudbgError, SessionError};
use crate::sys::cudbg as sys;

impl DebugSession {
    /// Whether events were fetched but not handed out, or handed out but not acknowledged.
    pub(crate) fn has_events(&self) -> bool {
        !self.pending.is_empty() || self.unacknowledged.get()
    }

    /// Moves the events now in the driver's queues into `pending`; true when the sync queue had any. Without
    /// `full`, the async queue is skipped when the sync queue had events and was looked at less than
    /// [`ASYNC_EVERY`] ago.
    pub(crate) fn drain(&mut self, full: bool) -> Result<bool, crate::Error> {
        let mut had_sync = false;
        // After a death from a signal nothing more can be fetched (see `live_api`).
        if self.death_signal().is_some() {
            return Ok(false);
        }
        for queue in [Queue::Sync, Queue::Async] {
            // Each getNextEvent is a round trip to the driver (about 12 us on driver 580). While synchronous events
            // stream, the async queue is looked at every ASYNC_EVERY only; it needs no acknowledgement, so only its
            // latency grows.
            if queue == Queue::Async && had_sync && !full && self.async_at.elapsed() < ASYNC_EVERY {
                continue;
            }
            if queue == Queue::Async {
                self.async_at = Instant::now();
            }
            loop {
                let mut raw = sys::CUDBGEvent::default();
                // SAFETY: a valid queue type and a writable event of the 13.0 layout, which the negotiated
                // table's getNextEvent fills in.
                match api_call!(*self.live_api()?, getNextEvent(queue.raw(), &mut raw)) {
                    Ok(()) => {
                        if queue == Queue::Sync {
                            had_sync = true;
                            // Marked at once: a later fetch of this drain may fail, and the event still holds
                            // the debuggee.
                            self.unacknowledged.set(true);
                        }
                        self.pending.push_back((queue, Event::from_raw(&raw)));
                    }
                    Err(crate::Error::Cudbg(CudbgError::NoEventAvailable)) => break,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(had_sync)
    }

    /// Drains events into `pending`, acknowledging synchronous ones, until one matches `until` (true), or the
    /// debuggee ends or `timeout` passes (false).
    pub(super) fn await_event(
        &mut self,
        until: &dyn Fn(&Event) -> bool,
        timeout: Duration,
    ) -> Result<bool, crate::Error> {
        let deadline = Instant::now().checked_add(timeout);
        let mut seen = NOTIFIER.seen();
        loop {
            let before = self.pending.len();
            if self.drain(true)? {
                self.acknowledge()?;
            }
            // Each new event is shown to `until` once.
            if self.pending.iter().skip(before).any(|(_, e)| until(e)) {
                return Ok(true);
            }
            if self.exit_status()?.is_some() || deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(false);
            }
            seen = NOTIFIER.wait_past(seen, Duration::ZERO, Duration::from_millis(5));
        }
    }

    pub(super) fn await_open(
        &mut self,
        mut seen: u64,
        timeout: Duration,
    ) -> Result<(), crate::Error> {
        // A timeout too large for an `Instant` never passes.
        let deadline = Instant::now().checked_add(timeout);
        loop {
            self.drain(true)?;
            if !self.pending.is_empty() {
                self.opened = true;
                return Ok(());
            }
            if let Some(status) = self.exit_status()? {
                return Err(SessionError::NoCuda { status }.into());
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                // Stopped now; the teardown (the session is dropped with this error) finalises, then kills it.
                self.stop_child();
                return Err(SessionError::HandshakeTimeout {
                    waited: timeout,
                    pid: self.pid,
                }
                .into());
            }
            let slice = deadline.map_or(POLL, |d| POLL.min(d - now));
            seen = NOTIFIER.wait_past(seen, Duration::ZERO, slice);
        }
    }

    /// Waits for the next events and returns them as a batch, or `Ok(None)` once the debuggee has exited and no
    /// event is left (or it died from a signal: see [`DebugSession`]). `timeout` bounds the wait (`None`: until
    /// events come or the debuggee exits).
    ///
    /// The wait spins for the builder's [`SessionBuilder::spin`](super::SessionBuilder::spin) window, then sleeps until the driver's callback
    /// wakes it. Whether the debuggee has exited is checked only when a wait passed without a notification, so
    /// its exit is noticed within about 20 ms.
    pub fn next_batch(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<Option<EventBatch<'_>>, crate::Error> {
        let start = Instant::now();
        let mut seen = NOTIFIER.seen();
        let mut woke = start;
        let mut quiet = false;
        loop {
            if self.death_signal().is_some() {
                // Events the driver still holds cannot be fetched without crashing this process (see
                // `live_api`); what was drained before is handed out first.
                if self.pending.is_empty() {
                    self.exit_status()?;
                    return Ok(None);
                }
            }
            self.settle()?;
            let notified = NOTIFIER.last_notified();
            let had_sync = self.drain(false)?;
            if !self.pending.is_empty() {
                let events: Vec<_> = self.pending.drain(..).collect();
                // Sync events drained earlier (while waiting for the handshake) may still hold the debuggee.
                let needs_ack = had_sync || self.unacknowledged.get();
                return Ok(Some(EventBatch {
                    session: self,
                    events,
                    needs_ack,
                    timing: BatchTiming {
                        notified,
                        woke,
                        drained: Instant::now(),
                    },
                }));
            }
            if quiet && self.exit_status()?.is_some() {
                // One last look: the queues may have filled between the drain and the exit check.
                self.drain(true)?;
                if self.pending.is_empty() {
                    return Ok(None);
                }
                continue;
            }
            let slice = match timeout {
                Some(t) => {
                    let spent = start.elapsed();
                    if spent >= t {
                        return Err(SessionError::Timeout(t).into());
                    }
                    POLL.min(t - spent)
                }
                None => POLL,
            };
            let now = NOTIFIER.wait_past(seen, self.spin, slice);
            woke = Instant::now();
            quiet = now == seen;
            seen = now;
        }
    }

    /// Releases the debuggee threads blocked on synchronous events; nothing to release once it died.
    pub(crate) fn acknowledge(&self) -> Result<(), crate::Error> {
        if self.death_signal().is_some() {
            return Ok(());
        }
        // SAFETY: no arguments.
        let r = api_call!(self.api, acknowledgeSyncEvents());
        // A failed acknowledgement leaves the debuggee held: the flag stays, and the next wait tries again.
        if r.is_ok() {
            self.unacknowledged.set(false);
        }
        r
    }

    /// Acknowledges again when events already handed out are still unacknowledged (their acknowledgement failed,
    /// or their batch was forgotten): they hold the debuggee, so nothing new would come while waiting.
    pub(crate) fn settle(&self) -> Result<(), crate::Error> {
        if self.pending.is_empty() && self.unacknowledged.get() {
            self.acknowledge()
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};
    use std::collections::{BTreeSet, VecDeque};
    use std::marker::PhantomData;
    use std::time::{Duration, Instant};

    use super::super::{Claim, DebugSession, OnDrop};
    use crate::cudbg::api::Api;
    use crate::cudbg::{ApiVersion, CudbgError};
    use crate::sys::cudbg as sys;

    thread_local! {
        /// What the stand-in `getNextEvent` answers, call by call, per queue (then: no event).
        static SYNC: RefCell<VecDeque<sys::CUDBGResult>> = const { RefCell::new(VecDeque::new()) };
        static ASYNC: RefCell<VecDeque<sys::CUDBGResult>> = const { RefCell::new(VecDeque::new()) };
        static ACKS: Cell<u32> = const { Cell::new(0) };
    }

    unsafe extern "C" fn next_event(
        queue: sys::CUDBGEventQueueType,
        event: *mut sys::CUDBGEvent,
    ) -> sys::CUDBGResult {
        let script = if queue == sys::CUDBG_EVENT_QUEUE_TYPE_SYNC {
            &SYNC
        } else {
            &ASYNC
        };
        let r = script
            .with(|s| s.borrow_mut().pop_front())
            .unwrap_or(sys::CUDBG_ERROR_NO_EVENT_AVAILABLE);
        if r == sys::CUDBG_SUCCESS {
            // SAFETY: the session passes a writable event.
            unsafe { (*event).kind = sys::CUDBG_EVENT_CTX_CREATE };
        }
        r
    }

    unsafe extern "C" fn acknowledge() -> sys::CUDBGResult {
        ACKS.with(|a| a.set(a.get() + 1));
        sys::CUDBG_SUCCESS
    }

    /// A session over a stand-in table, with no debuggee.
    fn session(table: &sys::CUDBGAPI_st) -> DebugSession {
        let claim = loop {
            match Claim::take() {
                Ok(c) => break c,
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        };
        // SAFETY: the stand-in table is complete and outlives the session in each test.
        let api = unsafe { Api::from_raw(table, ApiVersion::HEADER) };
        DebugSession {
            api,
            child: RefCell::new(None),
            pid: 0,
            exit: Cell::new(None),
            watch: None,
            killed_here: Cell::new(false),
            opened: false,
            on_drop: OnDrop::Kill,
            pending: VecDeque::new(),
            breakpoints: RefCell::new(BTreeSet::new()),
            suspended: Cell::new(0),
            spin: Duration::ZERO,
            async_at: Instant::now(),
            finalized: true,
            handshake: None,
            attached: false,
            unacknowledged: Cell::new(false),
            _claim: claim,
            _not_sync: PhantomData,
        }
    }

    #[test]
    fn sync_events_drained_before_a_failed_fetch_still_need_their_acknowledgement() {
        let table = sys::CUDBGAPI_st {
            getNextEvent: Some(next_event),
            acknowledgeSyncEvents: Some(acknowledge),
            ..Default::default()
        };
        let mut s = session(&table);
        SYNC.with(|q| *q.borrow_mut() = VecDeque::from([sys::CUDBG_SUCCESS]));
        ASYNC.with(|q| *q.borrow_mut() = VecDeque::from([sys::CUDBG_ERROR_INTERNAL]));
        let r = s.drain(true);
        assert!(
            matches!(r, Err(crate::Error::Cudbg(CudbgError::Internal))),
            "{r:?}"
        );
        ACKS.with(|a| a.set(0));
        let batch = s
            .next_batch(Some(Duration::from_secs(1)))
            .expect("a batch")
            .expect("the event drained before the failure");
        assert_eq!(batch.events().len(), 1);
        assert!(
            batch.needs_acknowledge(),
            "a synchronous event holds the debuggee until it is acknowledged"
        );
        drop(batch);
        assert_eq!(ACKS.with(|a| a.get()), 1, "dropping the batch acknowledged");
    }
}
