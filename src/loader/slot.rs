//! The process-wide slot a loaded library lives in, and the check that a second request names the same file.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::error::{LoadError, Rejection};
use super::search::LibrarySpec;

/// A process-wide slot for one loaded library: filled once, shared by every thread, never unloaded.
/// Failures are not cached, so a caller may retry with another path.
pub(crate) struct Slot<T: 'static> {
    cell: OnceLock<(T, PathBuf)>,
    lock: std::sync::Mutex<()>,
}

impl<T: 'static> Slot<T> {
    pub(crate) const fn new() -> Self {
        Slot {
            cell: OnceLock::new(),
            lock: std::sync::Mutex::new(()),
        }
    }

    /// The loaded library, if any, without loading.
    pub(crate) fn get(&'static self) -> Option<&'static T> {
        self.cell.get().map(|(t, _)| t)
    }

    /// The path it was loaded from.
    pub(crate) fn path(&'static self) -> Option<&'static Path> {
        self.cell.get().map(|(_, p)| p.as_path())
    }

    /// Loads with `spec` (searching, or only `explicit`), once per process.
    pub(crate) fn load(
        &'static self,
        spec: &LibrarySpec,
        explicit: Option<&Path>,
        bind: impl FnMut(&Path) -> Result<T, Rejection>,
    ) -> Result<&'static T, LoadError> {
        self.load_in(spec, explicit, &[], bind)
    }

    /// [`load`](Self::load), searching the folders of `first` early ([`LibrarySpec::candidates_in`]).
    pub(crate) fn load_in(
        &'static self,
        spec: &LibrarySpec,
        explicit: Option<&Path>,
        first: &[(PathBuf, &'static str)],
        bind: impl FnMut(&Path) -> Result<T, Rejection>,
    ) -> Result<&'static T, LoadError> {
        if let Some((t, loaded)) = self.cell.get() {
            return check_same(spec, loaded, explicit).map(|()| t);
        }
        // A poisoned lock only means another loader panicked; the cell is still consistent.
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((t, loaded)) = self.cell.get() {
            return check_same(spec, loaded, explicit).map(|()| t);
        }
        let loaded = spec.open_in(explicit, first, bind)?;
        let (t, _) = self.cell.get_or_init(|| loaded);
        Ok(t)
    }
}

fn check_same(spec: &LibrarySpec, loaded: &Path, explicit: Option<&Path>) -> Result<(), LoadError> {
    match explicit {
        None => Ok(()),
        Some(req) => {
            let same = req == loaded
                || matches!((std::fs::canonicalize(req), std::fs::canonicalize(loaded)), (Ok(a), Ok(b)) if a == b);
            if same {
                Ok(())
            } else {
                log::debug!(target: super::LOG_TARGET,
                    "{}: already loaded from {}, refused {}",
                    spec.name,
                    loaded.display(),
                    req.display()
                );
                Err(LoadError::AlreadyLoaded {
                    library: spec.name,
                    loaded: loaded.to_path_buf(),
                    requested: req.to_path_buf(),
                })
            }
        }
    }
}
