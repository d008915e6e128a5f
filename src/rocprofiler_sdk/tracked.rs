//! The buffers and contexts created in this process, which the tool's finalisation stops and flushes
//! ([`registration`](super::registration)): buffers and contexts add themselves as they are created, without
//! knowing about registration.

use std::sync::{Mutex, MutexGuard};

struct Tracked {
    buffers: Vec<u64>,
    contexts: Vec<u64>,
}

static TRACKED: Mutex<Tracked> = Mutex::new(Tracked {
    buffers: Vec::new(),
    contexts: Vec::new(),
});

fn tracked() -> MutexGuard<'static, Tracked> {
    TRACKED.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn track_buffer(id: u64) {
    tracked().buffers.push(id);
}

pub(crate) fn untrack_buffer(id: u64) {
    tracked().buffers.retain(|b| *b != id);
}

pub(crate) fn track_context(id: u64) {
    tracked().contexts.push(id);
}

/// The contexts and the buffers live now (copies).
pub(crate) fn contexts_and_buffers() -> (Vec<u64>, Vec<u64>) {
    let t = tracked();
    (t.contexts.clone(), t.buffers.clone())
}
