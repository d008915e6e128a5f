//! The flag Ctrl-C (and SIGTERM) sets for a command that runs until it is told to stop: the command ends its work
//! cleanly instead of dying mid-way (a target process must be left as it was).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// The one flag of this process, and whether its handler is installed.
static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// A flag that Ctrl-C and SIGTERM set from now on. The handler is installed at the first call; later calls return
/// the same flag (a wait before an attach, then the attach, both see one Ctrl-C). Where no handler can be
/// installed (another one is), that is logged and the flag is never set.
pub fn stop_flag() -> Arc<AtomicBool> {
    Arc::clone(FLAG.get_or_init(|| {
        let stop = Arc::new(AtomicBool::new(false));
        let set = Arc::clone(&stop);
        if let Err(e) = ctrlc::set_handler(move || set.store(true, Ordering::SeqCst)) {
            log::warn!("no Ctrl-C handler: {e}");
        }
        stop
    }))
}
