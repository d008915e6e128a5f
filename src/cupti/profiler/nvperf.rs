//! `libnvperf_host.so`: the NVIDIA PerfWorks host library that CUPTI's counter APIs open by its bare name. Neither
//! the PyPI wheel's `libcupti` (no RUNPATH) nor a CUDA install's puts it on the system loader's path, so CUPTI
//! answers `CUPTI_ERROR_NOT_INITIALIZED` where it is not found. The crate opens it first, from the folder of the
//! loaded `libcupti` or the usual places; CUPTI's own `dlopen("libnvperf_host.so")` then finds the copy already
//! loaded (the dynamic loader matches loaded libraries by their soname).

use std::path::{Path, PathBuf};

use crate::loader::{self, LibrarySpec, LoadError, Rejection, Slot};

pub(crate) static SPEC: LibrarySpec = LibrarySpec {
    name: "NVIDIA PerfWorks host (libnvperf_host.so, opened by CUPTI's counter APIs)",
    file_names: &["libnvperf_host.so"],
    env_var: "GPU_TOOLS_NVPERF_HOST_LIB",
    roots: &["CUDA_HOME", "CUDA_PATH"],
    root_subdirs: &["extras/CUPTI/lib64", "targets/x86_64-linux/lib", "lib64"],
    standard_dirs: &[
        "/usr/local/cuda/extras/CUPTI/lib64",
        "/usr/local/cuda/targets/x86_64-linux/lib",
        "/usr/local/cuda/lib64",
    ],
    wheel_subdirs: &["nvidia/cu13/lib", "nvidia/cuda_cupti/lib"],
};

static NVPERF: Slot<NvperfHost> = Slot::new();

/// The loaded `libnvperf_host.so`, kept open for the life of the process.
pub struct NvperfHost {
    _lib: libloading::Library,
}

impl std::fmt::Debug for NvperfHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvperfHost")
            .field("path", &NVPERF.path())
            .finish()
    }
}

impl NvperfHost {
    /// Loads it once per process: `GPU_TOOLS_NVPERF_HOST_LIB` if set, else the folder of the loaded `libcupti`
    /// first (the program's own CUPTI), then the crate's usual search.
    pub fn load() -> Result<&'static Self, LoadError> {
        let beside: Vec<(PathBuf, &'static str)> = crate::cupti::CuptiLibrary::get()
            .and_then(|c| c.path())
            .and_then(cupti_folder)
            .map(|dir| vec![(dir, "the loaded libcupti")])
            .unwrap_or_default();
        NVPERF.load_in(&SPEC, None, &beside, bind)
    }

    /// Loads it from an explicit path (or returns the copy already loaded from that path).
    pub fn load_from(path: impl AsRef<Path>) -> Result<&'static Self, LoadError> {
        NVPERF.load(&SPEC, Some(path.as_ref()), bind)
    }

    /// The library if loaded; never loads.
    pub fn get() -> Option<&'static Self> {
        NVPERF.get()
    }

    /// Where it was loaded from.
    pub fn path(&self) -> Option<&'static Path> {
        NVPERF.path()
    }
}

/// The folder of a loaded library, resolved to an absolute path where it was found by bare name.
fn cupti_folder(path: &Path) -> Option<PathBuf> {
    if path.is_absolute() {
        return path.parent().map(Path::to_path_buf);
    }
    // Found by the system loader: where it is mapped.
    crate::linux::procfs::Process::current()
        .mapped_library("libcupti.so")?
        .parent()
        .map(Path::to_path_buf)
}

fn bind(path: &Path) -> Result<NvperfHost, Rejection> {
    let lib = loader::dlopen(path)?;
    // SAFETY: only looks the symbol up; it is never called through this pointer.
    let has = unsafe { lib.get::<unsafe extern "C" fn()>(b"NVPW_InitializeHost\0") }.is_ok();
    if !has {
        return Err(Rejection::MissingSymbol("NVPW_InitializeHost"));
    }
    Ok(NvperfHost { _lib: lib })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::Origin;

    #[test]
    fn the_cupti_folder_is_searched_first_and_a_miss_is_a_load_error() {
        let dir = PathBuf::from("/nonexistent/cupti/lib");
        let c = SPEC.candidates_in(None, &[(dir.clone(), "the loaded libcupti")]);
        assert_eq!(
            c[0],
            (
                dir.join("libnvperf_host.so"),
                Origin::BesideLibrary("the loaded libcupti")
            )
        );
        let err = SPEC
            .open_in(None, &[(dir, "x")], |_| {
                Err::<(), _>(Rejection::MissingSymbol("NVPW_InitializeHost"))
            })
            .unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.starts_with("NVIDIA PerfWorks host (libnvperf_host.so"),
            "{text}"
        );
        assert!(
            text.contains("/nonexistent/cupti/lib/libnvperf_host.so (beside x): no such file"),
            "{text}"
        );
    }
}
