//! The flag Ctrl-C (and SIGTERM) sets for a command that runs until it is told to stop: the command ends its work
//! cleanly instead of dying mid-way (a target process must be left as it was).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A flag that Ctrl-C and SIGTERM set from now on. Where no handler can be installed (one is already), that is
/// logged and the flag is never set.
pub fn stop_flag() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let set = Arc::clone(&stop);
    if let Err(e) = ctrlc::set_handler(move || set.store(true, Ordering::SeqCst)) {
        log::warn!("no Ctrl-C handler: {e}");
    }
    stop
}
