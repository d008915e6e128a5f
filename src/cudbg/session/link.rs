//! The session as a connection route sees it ([`DebuggeeLink`]) while it connects or disconnects the debuggee.

use std::process::Child;
use std::time::Duration;

use super::DebugSession;
use crate::cudbg::api::api_call;
use crate::cudbg::event::Event;
use crate::cudbg::handshake::{DebuggeeLink, EndWatch};

/// The session as a [`Handshake`](crate::cudbg::handshake::Handshake) sees it while connecting or disconnecting.
pub(super) struct Linked<'s>(pub(super) &'s mut DebugSession);

impl DebuggeeLink for Linked<'_> {
    fn pid(&self) -> u32 {
        self.0.pid
    }

    fn child(&mut self) -> Option<&mut Child> {
        self.0.child.get_mut().as_mut()
    }

    fn await_event(
        &mut self,
        until: &dyn Fn(&Event) -> bool,
        timeout: Duration,
    ) -> Result<bool, crate::Error> {
        self.0.await_event(until, timeout)
    }

    fn clean_up_on_detach(&mut self) -> Result<(), crate::Error> {
        self.0.clean_up_on_detach()
    }

    fn clear_attach_state(&mut self) -> Result<(), crate::Error> {
        // SAFETY: no arguments.
        api_call!(*self.0.live_api()?, clearAttachState())
    }

    fn request_cleanup_on_detach(&mut self, resume_flag: u32) -> Result<(), crate::Error> {
        // SAFETY: plain flag argument: the debuggee's `cudbgResumeForAttachDetach`, as the header asks.
        api_call!(*self.0.live_api()?, requestCleanupOnDetach(resume_flag))
    }

    fn mark_connected(&mut self) {
        self.0.opened = true;
    }

    fn watch_end(&mut self, watch: EndWatch) {
        self.0.watch = Some(watch.0);
    }
}
