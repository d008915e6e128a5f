//! Why a GPU was idle: each idle gap gets one cause ([`IdleCause`]), decided at the instant the GPU ran out of
//! work, from what the host thread that issued the next operation was doing at that instant.
//!
//! - The next operation's call had **returned** before the GPU ran out (the work was issued): it waited on the
//!   device's side (`queued`).
//! - Else the host thread was late. If it was then in a synchronisation call (or a synchronisation record spans
//!   the instant), the cause is the synchronisation, unless the call right before it on that thread was a copy
//!   that explains it: a device-to-host read of at most [`ITEM_BYTES`] (`.item()`, `.cpu()` of a scalar: still
//!   `sync`), a copy under [`SMALL_COPY`] (`small_copy`), a copy of pageable memory (`pageable_copy`). A blocking
//!   copy call in progress is judged the same way, and so is an asynchronous copy of pageable memory (the host
//!   waits in it while the bytes are staged).
//! - Else the host was launching or doing its own work: `between_steps` where the next operation starts a step
//!   and the host was not in a launch call, `launch` otherwise.
//! - Without API records nothing can be said: `unknown`.

use super::collect::{CallClass, Op, What};
use super::finding::IdleCause;
use super::host::Host;
use crate::record::CopyKind;

/// A device-to-host copy of at most this many bytes, followed by a synchronisation, reads a result the host needs
/// now (`.item()`, `.cpu()` of a loss, a flag): what to fix is the read, not the copy.
pub const ITEM_BYTES: u64 = 1024;

/// A copy under this many bytes costs more in its fixed part (the call, the DMA set-up: 5 to 10 µs) than in its
/// transfer (64 KiB take about 5 µs at the 12 GB/s of PCIe 4 x16): batching such copies is what helps.
pub const SMALL_COPY: u64 = 64 * 1024;

/// One idle gap, classified.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Gap {
    /// The part of the gap inside the window analysed.
    pub start: u64,
    pub end: u64,
    /// The operation that ended it (index into the process's ops).
    pub next: usize,
    pub cause: IdleCause,
    /// The call the launching thread was in when the GPU ran out of work, where one was (index into the calls).
    pub call: Option<usize>,
    /// The copy that explains the cause, where one does (index into the ops).
    pub copy: Option<usize>,
}

impl Gap {
    /// Its length in the window.
    pub(crate) fn len(&self) -> u64 {
        self.end - self.start
    }
}

/// The cause of a copy op, where its size or memory explains a stall.
fn copy_cause(op: &Op) -> Option<IdleCause> {
    let What::Copy { kind, bytes, .. } = op.what else {
        return None;
    };
    if kind == CopyKind::DtoH && bytes <= ITEM_BYTES {
        Some(IdleCause::Sync)
    } else if bytes < SMALL_COPY {
        Some(IdleCause::SmallCopy)
    } else if op.what.pageable() {
        Some(IdleCause::PageableCopy)
    } else {
        None
    }
}

/// The cause of a stall in call `call` (the copy op that explains it, if any): a copy call is judged by its copy,
/// a synchronisation by the copy call just before it.
fn held_by(host: &Host<'_>, ops: &[Op], call: usize) -> (IdleCause, Option<usize>, bool) {
    let by_copy = |c: usize| {
        let op = host.op_of(c)?;
        copy_cause(&ops[op]).map(|cause| (cause, Some(op)))
    };
    let c = &host.calls[call];
    match c.class {
        CallClass::Sync => {
            let prior = host.before(call).filter(|&b| {
                matches!(
                    host.calls[b].class,
                    CallClass::Copy | CallClass::BlockingCopy
                )
            });
            let (cause, copy) = prior.and_then(by_copy).unwrap_or((IdleCause::Sync, None));
            (cause, copy, true)
        }
        CallClass::BlockingCopy => {
            let (cause, copy) = by_copy(call).unwrap_or((IdleCause::Sync, host.op_of(call)));
            (cause, copy, true)
        }
        CallClass::Copy => match host.op_of(call) {
            Some(op) if ops[op].what.pageable() => {
                let cause = copy_cause(&ops[op]).unwrap_or(IdleCause::PageableCopy);
                (cause, Some(op), true)
            }
            _ => (IdleCause::Launch, None, false),
        },
        _ => (IdleCause::Launch, None, false),
    }
}

/// The cause of the idle gap that began at `from` and ended with operation `next`, which starts a step where
/// `boundary`: (cause, the call held in, the copy that explains it).
pub(crate) fn classify(
    host: &Host<'_>,
    ops: &[Op],
    from: u64,
    next: usize,
    boundary: bool,
) -> (IdleCause, Option<usize>, Option<usize>) {
    let Some(launch) = host.launch_of(&ops[next]) else {
        return (IdleCause::Unknown, None, None);
    };
    let thread = host.calls[launch].thread;
    // Issued (its call had returned) before the GPU ran out: it waited on the device's side.
    if host.calls[launch].end <= from {
        return (IdleCause::Queued, None, None);
    }
    let held = host
        .at(thread, from)
        .or_else(|| host.sync_record_at(from).flatten());
    let waiting = match held {
        Some(call) => {
            let (cause, copy, waits) = held_by(host, ops, call);
            waits.then_some((cause, Some(call), copy))
        }
        // A synchronisation record whose call is not known.
        None if host.sync_record_at(from).is_some() => Some((IdleCause::Sync, None, None)),
        None => None,
    };
    let launching =
        held.is_some_and(|c| matches!(host.calls[c].class, CallClass::Launch | CallClass::Copy));
    match waiting {
        Some(w) => w,
        None if boundary && !launching => (IdleCause::BetweenSteps, held, None),
        None => (IdleCause::Launch, held, None),
    }
}
