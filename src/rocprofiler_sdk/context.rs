//! Contexts: the SDK's unit of services that start and stop together.

use super::library::sym;
use super::{SdkLibrary, check};
use crate::sys::rocprofiler_sdk as sys;

/// A context (`rocprofiler_create_context`), created in the tool's initialisation
/// ([`Setup::create_context`](super::Setup::create_context)), where its services are configured. It can be started
/// and stopped at any time after. The SDK has no call to destroy a context: dropping this handle stops it.
pub struct Context {
    lib: &'static SdkLibrary,
    id: u64,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("id", &self.id)
            .field("active", &self.is_active())
            .finish()
    }
}

impl Context {
    pub(crate) fn create(lib: &'static SdkLibrary) -> crate::Result<Context> {
        let f = sym(
            &lib.t.rocprofiler_create_context,
            "rocprofiler_create_context",
        )?;
        // The SDK requires the id it writes to start at zero (CONTEXT_ID_NOT_ZERO otherwise).
        let mut id = sys::rocprofiler_context_id_t { handle: 0 };
        // SAFETY: a valid out-pointer, zeroed as the SDK requires.
        check("rocprofiler_create_context", unsafe { f(&mut id) }).map_err(super::locked_or)?;
        super::tracked::track_context(id.handle);
        Ok(Context { lib, id: id.handle })
    }

    pub(crate) fn raw(&self) -> sys::rocprofiler_context_id_t {
        sys::rocprofiler_context_id_t { handle: self.id }
    }

    /// The SDK's context id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// `rocprofiler_start_context`: its services begin to deliver.
    pub fn start(&self) -> crate::Result<()> {
        let f = sym(
            &self.lib.t.rocprofiler_start_context,
            "rocprofiler_start_context",
        )?;
        // SAFETY: a context the SDK created.
        check("rocprofiler_start_context", unsafe { f(self.raw()) })?;
        Ok(())
    }

    /// `rocprofiler_stop_context`: its services stop; records already written stay in their buffers.
    pub fn stop(&self) -> crate::Result<()> {
        stop_raw(self.lib, self.id)
    }

    /// `rocprofiler_context_is_active`.
    pub fn is_active(&self) -> bool {
        let Ok(f) = sym(
            &self.lib.t.rocprofiler_context_is_active,
            "rocprofiler_context_is_active",
        ) else {
            return false;
        };
        let mut status = 0;
        // SAFETY: a context the SDK created; a valid out-pointer.
        let ok = check("rocprofiler_context_is_active", unsafe {
            f(self.raw(), &mut status)
        })
        .is_ok();
        ok && status != 0
    }
}

pub(crate) fn stop_raw(lib: &SdkLibrary, id: u64) -> crate::Result<()> {
    let f = sym(&lib.t.rocprofiler_stop_context, "rocprofiler_stop_context")?;
    // SAFETY: a context the SDK created.
    check("rocprofiler_stop_context", unsafe {
        f(sys::rocprofiler_context_id_t { handle: id })
    })?;
    Ok(())
}

impl Drop for Context {
    fn drop(&mut self) {
        if self.lib.is_finalized().unwrap_or(true) {
            return;
        }
        if self.is_active() {
            if let Err(e) = self.stop() {
                log::warn!("stopping rocprofiler-sdk context {}: {e}", self.id);
            }
        }
    }
}
