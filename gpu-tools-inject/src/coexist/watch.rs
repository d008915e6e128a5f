//! The program's activity calls between the attach's first look at CUPTI and the start of the sharing.
//!
//! Attached, the probe (`probe`) learns which kinds a profiler of the program records from the records it sees in a
//! moment, and the sharing starts after that moment. A profiler that enabled its kinds after the moment's last record
//! and before the sharing went unseen: its records of the window went to the trace alone. On an H200, a
//! torch.profiler on a `schedule` that began its warm-up then lost one or two steps of kernels from its cycle (9 of
//! 466 cycles short, over four windows), and the stream said the kinds "had been on since before the attach". So
//! the program's import slots are redirected before the probe, and its calls reach CUPTI as they would without the
//! trace while the enables, disables and registrations among them are noted here for the sharing.

use std::sync::{Mutex, MutexGuard};

use gpu_tools::sys::cupti as sys;

use super::bit;

/// What the program did through its activity calls while watched.
#[derive(Debug, Default)]
pub(super) struct Watched {
    /// Kinds it enabled and has not disabled since.
    pub on: u64,
    /// Kinds it disabled and has not enabled since.
    pub off: u64,
    /// The buffer callbacks it registered last, if it registered.
    pub callbacks: Option<(
        sys::CUpti_BuffersCallbackRequestFunc,
        sys::CUpti_BuffersCallbackCompleteFunc,
    )>,
    /// It made a forced flush of its own.
    pub flushed: bool,
}

impl Watched {
    pub(super) fn enabled(&mut self, kind: u32) {
        self.on |= bit(kind);
        self.off &= !bit(kind);
    }

    pub(super) fn disabled(&mut self, kind: u32) {
        self.off |= bit(kind);
        self.on &= !bit(kind);
    }
}

static WATCHED: Mutex<Option<Watched>> = Mutex::new(None);

fn watched() -> MutexGuard<'static, Option<Watched>> {
    WATCHED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Starts noting the program's calls (before its import slots are redirected).
pub(super) fn begin() {
    *watched() = Some(Watched::default());
}

/// Stops noting, and returns what was noted (`None` when nothing was watched). The sharing calls it under its own
/// lock, so that a call comes either before (noted) or after (shared).
pub(super) fn end() -> Option<Watched> {
    watched().take()
}

/// Whether the program, while watched, registered its buffer callbacks again or forced a flush of its own: either
/// way its buffers went back without a flush of the attach's (through the probe's callbacks, or its own now in
/// CUPTI, which the probe's flush would not pass through). `false` when nothing is watched.
pub(super) fn program_flushed_or_registered() -> bool {
    watched()
        .as_ref()
        .is_some_and(|w| w.flushed || w.callbacks.is_some())
}

/// While watching: whether the program registered its buffer callbacks (`false` when nothing is watched).
pub(super) fn program_registered() -> bool {
    watched().as_ref().is_some_and(|w| w.callbacks.is_some())
}

/// While watching: whether none of the kinds the program enabled while watched is still on (`None`: nothing is
/// watched). Kinds it enabled before the watch are not known here.
pub(super) fn no_kind_on() -> Option<bool> {
    watched().as_ref().map(|w| w.on == 0)
}

/// While watching: notes that the program forced a flush of its own (after the call: the flush runs completion
/// callbacks, which must not wait on this lock).
pub(super) fn note_forced_flush() {
    if let Some(w) = watched().as_mut() {
        w.flushed = true;
    }
}

/// While watching: makes the program's `call` (to CUPTI itself) and, when it succeeds, notes what it did; `None` when
/// nothing is watched (the hook goes on to the sharing). The lock is held across the call, so that [`end`] never
/// returns while a call it would miss is on its way.
pub(super) fn pass(
    call: impl FnOnce() -> sys::CUptiResult,
    note: impl FnOnce(&mut Watched),
) -> Option<sys::CUptiResult> {
    let mut guard = watched();
    let w = guard.as_mut()?;
    let code = call();
    if code == sys::CUPTI_SUCCESS {
        note(w);
    }
    Some(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_call_of_a_kind_decides_it_and_a_failed_call_is_not_noted() {
        let _serial = super::super::tests::SERIAL
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        assert_eq!(pass(|| sys::CUPTI_SUCCESS, |w| w.enabled(10)), None);
        begin();
        pass(|| sys::CUPTI_SUCCESS, |w| w.enabled(10));
        pass(|| sys::CUPTI_SUCCESS, |w| w.enabled(5));
        pass(|| sys::CUPTI_SUCCESS, |w| w.disabled(5));
        pass(|| sys::CUPTI_ERROR_UNKNOWN, |w| w.enabled(1));
        pass(|| sys::CUPTI_SUCCESS, |w| w.disabled(2));
        pass(|| sys::CUPTI_SUCCESS, |w| w.enabled(2));
        let w = end().expect("watched");
        assert_eq!(w.on, bit(10) | bit(2));
        assert_eq!(w.off, bit(5));
        assert!(w.callbacks.is_none());
        assert!(!w.flushed);
        assert!(end().is_none(), "once");
    }

    #[test]
    fn a_forced_flush_or_a_registration_of_the_programs_is_noted_only_while_watched() {
        let _serial = super::super::tests::SERIAL
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        end();
        note_forced_flush();
        assert!(!program_flushed_or_registered(), "nothing watched");
        begin();
        assert!(!program_flushed_or_registered());
        note_forced_flush();
        assert!(program_flushed_or_registered());
        assert!(end().expect("watched").flushed);
        assert!(!program_registered());
        begin();
        assert!(!program_registered());
        pass(
            || sys::CUPTI_ERROR_UNKNOWN,
            |w| w.callbacks = Some((None, None)),
        );
        assert!(!program_registered(), "a failed registration is not noted");
        pass(|| sys::CUPTI_SUCCESS, |w| w.callbacks = Some((None, None)));
        assert!(program_registered());
        assert!(program_flushed_or_registered());
        end();
    }
}
