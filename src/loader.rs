//! Finding and opening vendor libraries at run time.
//!
//! Every library is looked for in this order; the first candidate that opens and exports every symbol the crate
//! requires wins, and the rest are not tried:
//!
//! 1. **An explicit path given in code** (`load_from`: `CheckpointLibrary::load_from(path)`,
//!    `Driver::load_from(path)`, ...): only that path is tried.
//! 2. **The library's environment variable**: only that path is tried.
//!
//!    | library | variable |
//!    |---|---|
//!    | `libcheckpoint.so` (CUPTI checkpoint) | `GPU_TOOLS_CHECKPOINT_LIB` |
//!    | `libcupti.so.13`, `.12` (CUPTI) | `GPU_TOOLS_CUPTI_LIB` |
//!    | `libcuda.so.1` (CUDA driver, debugger API) | `GPU_TOOLS_CUDA_DRIVER_LIB` |
//!    | `librocprofiler64.so.2` (rocprofiler v2) | `GPU_TOOLS_ROCPROFILER_LIB` |
//!
//! 3. **Root variables**: under `$CUDA_HOME` and `$CUDA_PATH`: `extras/CUPTI/lib64`, `targets/x86_64-linux/lib`,
//!    `lib64` (CUPTI); under `$ROCM_PATH`: `lib`, `lib64`. The driver is not looked for under toolkit roots: they
//!    hold only `lib64/stubs` (every call fails) and `compat` (a forward-compatibility driver that fails next to a
//!    newer system driver).
//! 4. **Standard install folders**: `/usr/local/cuda/extras/CUPTI/lib64`, `/usr/local/cuda/targets/x86_64-linux/lib`,
//!    `/usr/local/cuda/lib64` (CUPTI); `/usr/local/nvidia/lib64`, `/usr/lib/x86_64-linux-gnu`, `/usr/lib64`,
//!    `/usr/lib/wsl/lib` (driver); `/opt/rocm/lib`, `/opt/rocm/lib64` (rocprofiler).
//! 5. **NVIDIA Python wheels** of the machine's `python3` (or of `$GPU_TOOLS_PYTHON`): `nvidia/cu13/lib` and
//!    `nvidia/cuda_cupti/lib` in each of its site-packages folders (CUPTI libraries only). A `$GPU_TOOLS_PYTHON`
//!    that does not run as a Python is not ignored: it is an attempt of its own ([`Rejection::BadPython`]).
//! 6. **The system loader**: `dlopen` of the bare file name (`LD_LIBRARY_PATH`, the `ld.so` cache).
//!
//! A candidate that opens but lacks a required symbol (the wrong library, or one too old) is closed again and the
//! search goes on; the final [`LoadError`] lists every candidate and why it was rejected (`{:#}` prints them one
//! per line). A bare name the system loader has no file for is "not found", like a missing path: only a file that
//! was found and then rejected is "refused". Where nothing was found, the message ends with the usual fix
//! ([`LoadError::fix`]: for CUPTI the `nvidia-cuda-cupti` wheel, `CUDA_HOME`, `GPU_TOOLS_PYTHON`). A library is loaded at most once per process and shared by all threads; asking for it again from
//! another explicit path is [`LoadError::AlreadyLoaded`], naming both paths.
//!
//! Trust: a file found this way, or named by `load_from` or an environment variable, is taken to be the vendor
//! library. Opening it runs its initialisers, and its symbols are called with the signatures of the vendor
//! headers the bindings were generated from. Like any run-time loader of a C API, the crate cannot check more
//! than the symbol names, so point these paths only at the vendor's libraries.

// Without a vendor feature nothing loads a library: only the public error types remain in use.
#![cfg_attr(
    not(any(
        feature = "cupti",
        feature = "cudbg",
        feature = "rocprofiler",
        feature = "rocprofiler-sdk"
    )),
    allow(dead_code)
)]

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where a candidate path came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// A path given in code.
    Explicit,
    /// The library's environment variable.
    EnvVar(&'static str),
    /// A folder under a root environment variable such as `CUDA_HOME`.
    Root(&'static str),
    /// A standard install folder.
    StandardFolder,
    /// A folder of an NVIDIA Python wheel in one of `python3`'s site-packages.
    PythonWheel,
    /// The system loader's own search (bare file name).
    SystemLoader,
    /// The folder of another library already loaded, which opens this one itself (for example the folder of
    /// `libcupti`, for the `libnvperf_host.so` CUPTI's profiling APIs open).
    BesideLibrary(&'static str),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Explicit => f.write_str("explicit path"),
            Origin::EnvVar(v) => write!(f, "${v}"),
            Origin::Root(v) => write!(f, "under ${v}"),
            Origin::StandardFolder => f.write_str("standard folder"),
            Origin::PythonWheel => f.write_str("Python wheel"),
            Origin::SystemLoader => f.write_str("system loader"),
            Origin::BesideLibrary(lib) => write!(f, "beside {lib}"),
        }
    }
}

/// Why a candidate was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    /// No file at that path.
    #[error("no such file")]
    NotFound,
    /// The path exists but is not a regular file (for example a folder).
    #[error("not a file")]
    NotAFile,
    /// `dlopen` refused it: not a shared library, wrong architecture, missing dependency.
    #[error("cannot be opened: {0}")]
    OpenFailed(String),
    /// It opened but does not export a symbol the crate requires: the wrong library, or one too old.
    #[error("missing required symbol `{0}`")]
    MissingSymbol(&'static str),
    /// It opened but reports a version the crate does not bind (the text says which).
    #[error("unsupported version {0}")]
    UnsupportedVersion(String),
    /// `$GPU_TOOLS_PYTHON` (the attempt's path) did not run as a Python that lists its site-packages folders, so
    /// no wheel folder could be searched (the text says why).
    #[error("not a usable Python: {0}")]
    BadPython(String),
}

/// One candidate that was tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The path (or, for the system loader, the bare file name) given to `dlopen`.
    pub path: PathBuf,
    /// Where it came from.
    pub origin: Origin,
    /// Why it was not used.
    pub rejection: Rejection,
}

/// A vendor library could not be loaded.
///
/// `Display` is a short summary: the library, how many candidates were tried, where the missing ones were looked
/// for, and the first candidate that was found but refused (the one that usually explains the failure). The
/// alternate form (`{:#}`, also through [`crate::Error`]) lists every candidate, one per line, in search order;
/// so does [`LoadError::attempts`].
///
/// ```
/// # use gpu_tools::LoadError;
/// # fn report(e: &LoadError) {
/// eprintln!("{e}"); // one line
/// eprintln!("{e:#}"); // every candidate, one per line
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadError {
    /// Every candidate failed; each is listed with its reason.
    NotFound {
        /// Human name of the library, for example `"CUPTI checkpoint (libcheckpoint.so)"`.
        library: &'static str,
        /// Every candidate in search order.
        attempts: Vec<Attempt>,
    },
    /// The library is already loaded in this process from another path; a process holds one copy.
    AlreadyLoaded {
        /// Human name of the library.
        library: &'static str,
        /// The path in use.
        loaded: PathBuf,
        /// The path asked for.
        requested: PathBuf,
    },
}

impl LoadError {
    /// How the library is usually installed or named, for a library that was not found at all (no candidate was
    /// a file that opened): for CUPTI, the `nvidia-cuda-cupti` wheel, `CUDA_HOME`, `GPU_TOOLS_PYTHON` or its
    /// variable. `None` where a candidate was found but refused (the refusal says more), or for a library this
    /// crate has no advice for.
    pub fn fix(&self) -> Option<String> {
        let LoadError::NotFound { library, attempts } = self else {
            return None;
        };
        let nothing_found = attempts
            .iter()
            .all(|a| matches!(a.rejection, Rejection::NotFound | Rejection::BadPython(_)));
        if !nothing_found {
            return None;
        }
        fix_for(library)
    }

    /// Every candidate tried, in order (empty for [`LoadError::AlreadyLoaded`]).
    pub fn attempts(&self) -> &[Attempt] {
        match self {
            LoadError::NotFound { attempts, .. } => attempts,
            LoadError::AlreadyLoaded { .. } => &[],
        }
    }
}

impl std::error::Error for LoadError {}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::AlreadyLoaded {
                library,
                loaded,
                requested,
            } => write!(
                f,
                "{library} is already loaded from {}; cannot also load {}",
                loaded.display(),
                requested.display()
            ),
            LoadError::NotFound { library, attempts } => {
                write!(f, "{library} not loaded; ")?;
                if f.alternate() {
                    list_attempts(f, attempts)?;
                } else {
                    summarize_attempts(f, attempts)?;
                }
                match self.fix() {
                    Some(fix) => write!(f, ". {fix}"),
                    None => Ok(()),
                }
            }
        }
    }
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.path.display(),
            self.origin,
            self.rejection
        )
    }
}

/// The usual fix for a library that was not found anywhere, by the library's name (`LibrarySpec::name`).
fn fix_for(library: &str) -> Option<String> {
    let python = match (std::env::var_os(PYTHON_VAR), python_problem()) {
        (Some(_), Some((p, problem))) => format!(
            "${PYTHON_VAR} names {}, which {problem}: name a Python with the `nvidia-cuda-cupti` wheel, or `pip \
             install nvidia-cuda-cupti`",
            p.display()
        ),
        (Some(p), None) => format!(
            "${PYTHON_VAR} names {}, which has no `nvidia-cuda-cupti` wheel: `{} -m pip install nvidia-cuda-cupti`",
            Path::new(&p).display(),
            Path::new(&p).display()
        ),
        (None, _) => "`pip install nvidia-cuda-cupti` (in the program's virtual environment, or name its Python \
                      with $GPU_TOOLS_PYTHON)"
            .to_string(),
    };
    let cupti = |var: &str| {
        format!(
            "CUPTI comes with the CUDA toolkit, not the driver: {python}, or set CUDA_HOME to a CUDA toolkit, or \
             name the file with ${var}"
        )
    };
    Some(if library.contains("libcupti") {
        cupti("GPU_TOOLS_CUPTI_LIB")
    } else if library.contains("libcheckpoint") {
        cupti("GPU_TOOLS_CHECKPOINT_LIB")
    } else if library.contains("libnvperf_host") {
        cupti("GPU_TOOLS_NVPERF_HOST_LIB")
    } else if library.contains("libcuda.so") {
        "The CUDA driver comes with the NVIDIA kernel driver, not the toolkit or a wheel: install the NVIDIA driver \
         (in a container, mount the host's: the NVIDIA container toolkit), or name libcuda.so.1 with \
         $GPU_TOOLS_CUDA_DRIVER_LIB"
            .to_string()
    } else if library.contains("librocprofiler-sdk") {
        "Install ROCm 7.0 or later (its rocprofiler-sdk), set ROCM_PATH, or name the file with \
         $GPU_TOOLS_ROCPROFILER_SDK_LIB"
            .to_string()
    } else if library.contains("librocprofiler64") {
        "Install ROCm 6.1 to 7.2 (its rocprofiler v2), set ROCM_PATH, or name the file with \
         $GPU_TOOLS_ROCPROFILER_LIB"
            .to_string()
    } else {
        return None;
    })
}

/// Every candidate, one per line.
fn list_attempts(f: &mut fmt::Formatter<'_>, attempts: &[Attempt]) -> fmt::Result {
    match attempts {
        [] => f.write_str("no candidates"),
        [one] => write!(f, "tried {one}"),
        many => {
            write!(f, "tried {} candidates, in search order:", many.len())?;
            for a in many {
                write!(f, "\n  {a}")?;
            }
            Ok(())
        }
    }
}

/// One line: how many candidates, where the missing ones were looked for, and the first one that was found but
/// refused.
fn summarize_attempts(f: &mut fmt::Formatter<'_>, attempts: &[Attempt]) -> fmt::Result {
    match attempts {
        [] => return f.write_str("no candidates"),
        [one] => return write!(f, "tried {one}"),
        _ => {}
    }
    let (missing, others): (Vec<&Attempt>, Vec<&Attempt>) = attempts
        .iter()
        .partition(|a| a.rejection == Rejection::NotFound);
    let (python, refused): (Vec<&Attempt>, Vec<&Attempt>) = others
        .into_iter()
        .partition(|a| matches!(a.rejection, Rejection::BadPython(_)));
    write!(f, "tried {} candidates", attempts.len())?;
    let mut sep = ": ";
    if !missing.is_empty() {
        // The places, each named once, in search order.
        let mut places: Vec<String> = Vec::new();
        for a in &missing {
            let place = a.origin.to_string();
            if !places.contains(&place) {
                places.push(place);
            }
        }
        write!(
            f,
            "{sep}{} not found ({})",
            missing.len(),
            places.join(", ")
        )?;
        sep = "; ";
    }
    for p in &python {
        write!(f, "{sep}{p}")?;
        sep = "; ";
    }
    if let Some(first) = refused.first() {
        write!(f, "{sep}{} found but refused, first {first}", refused.len())?;
    }
    Ok(())
}

/// How to find one vendor library.
#[derive(Debug)]
pub(crate) struct LibrarySpec {
    /// Human name used in errors.
    pub name: &'static str,
    /// File names to look for in each folder, in order of preference.
    pub file_names: &'static [&'static str],
    /// Environment variable holding an explicit path.
    pub env_var: &'static str,
    /// Root variables (`CUDA_HOME`, ...) and the sub-folders under each root.
    pub roots: &'static [&'static str],
    pub root_subdirs: &'static [&'static str],
    /// Absolute standard folders.
    pub standard_dirs: &'static [&'static str],
    /// Sub-folders of a Python site-packages folder.
    pub wheel_subdirs: &'static [&'static str],
}

impl LibrarySpec {
    /// Candidates in search order, without touching the file system (except to ask `python3` once per process
    /// for its site-packages folders when the spec has wheel folders).
    #[allow(dead_code)] // kept for callers without early folders
    pub(crate) fn candidates(&self, explicit: Option<&Path>) -> Vec<(PathBuf, Origin)> {
        self.candidates_in(explicit, &[])
    }

    /// [`candidates`](Self::candidates), with the folders of `first` (each with the library it is the folder of)
    /// tried after the environment variable and before everything else.
    pub(crate) fn candidates_in(
        &self,
        explicit: Option<&Path>,
        first: &[(PathBuf, &'static str)],
    ) -> Vec<(PathBuf, Origin)> {
        if let Some(p) = explicit {
            return vec![(p.to_path_buf(), Origin::Explicit)];
        }
        if let Some(p) = std::env::var_os(self.env_var).filter(|v| !v.is_empty()) {
            return vec![(PathBuf::from(p), Origin::EnvVar(self.env_var))];
        }
        let mut out: Vec<(PathBuf, Origin)> = Vec::new();
        let mut push = |path: PathBuf, origin: Origin| {
            if !out.iter().any(|(p, _)| *p == path) {
                out.push((path, origin));
            }
        };
        for (dir, lib) in first {
            for name in self.file_names {
                push(dir.join(name), Origin::BesideLibrary(lib));
            }
        }
        for root in self.roots {
            if let Some(base) = std::env::var_os(root).filter(|v| !v.is_empty()) {
                for sub in self.root_subdirs {
                    for name in self.file_names {
                        push(Path::new(&base).join(sub).join(name), Origin::Root(root));
                    }
                }
            }
        }
        for dir in self.standard_dirs {
            for name in self.file_names {
                push(Path::new(dir).join(name), Origin::StandardFolder);
            }
        }
        if !self.wheel_subdirs.is_empty() {
            for site in python_site_packages() {
                for sub in self.wheel_subdirs {
                    for name in self.file_names {
                        push(site.join(sub).join(name), Origin::PythonWheel);
                    }
                }
            }
        }
        for name in self.file_names {
            push(PathBuf::from(name), Origin::SystemLoader);
        }
        out
    }

    /// Tries each candidate in order; `bind` resolves the symbols the crate needs from an opened library and
    /// names the first missing one. A rejected library is closed before the next candidate is tried.
    #[allow(dead_code)] // kept for callers without early folders
    pub(crate) fn open<T>(
        &self,
        explicit: Option<&Path>,
        bind: impl FnMut(&Path) -> Result<T, Rejection>,
    ) -> Result<(T, PathBuf), LoadError> {
        self.open_in(explicit, &[], bind)
    }

    /// [`open`](Self::open) over [`candidates_in`](Self::candidates_in).
    pub(crate) fn open_in<T>(
        &self,
        explicit: Option<&Path>,
        first: &[(PathBuf, &'static str)],
        mut bind: impl FnMut(&Path) -> Result<T, Rejection>,
    ) -> Result<(T, PathBuf), LoadError> {
        let mut attempts = Vec::new();
        let mut reject = |path: PathBuf, origin: Origin, rejection: Rejection| {
            log::trace!(
                "{}: rejected {} ({origin}): {rejection}",
                self.name,
                path.display()
            );
            attempts.push(Attempt {
                path,
                origin,
                rejection,
            });
        };
        let candidates = self.candidates_in(explicit, first);
        if !self.wheel_subdirs.is_empty()
            && candidates.iter().any(|(_, o)| *o == Origin::SystemLoader)
        {
            if let Some((python, problem)) = python_problem() {
                reject(
                    python.clone(),
                    Origin::EnvVar(PYTHON_VAR),
                    Rejection::BadPython(problem.clone()),
                );
            }
        }
        for (path, origin) in candidates {
            let bare = origin == Origin::SystemLoader;
            if !bare {
                match std::fs::metadata(&path) {
                    Err(_) => {
                        reject(path, origin, Rejection::NotFound);
                        continue;
                    }
                    Ok(m) if !m.is_file() => {
                        reject(path, origin, Rejection::NotAFile);
                        continue;
                    }
                    Ok(_) => {}
                }
            }
            match bind(&path) {
                Ok(v) => {
                    log::debug!("{}: loaded {} ({origin})", self.name, path.display());
                    return Ok((v, path));
                }
                Err(rejection) => {
                    let rejection = if bare && no_such_library(&path, &rejection) {
                        Rejection::NotFound
                    } else {
                        rejection
                    };
                    reject(path, origin, rejection)
                }
            }
        }
        log::debug!(
            "{}: not loaded, {} candidates rejected (trace level lists them)",
            self.name,
            attempts.len()
        );
        Err(LoadError::NotFound {
            library: self.name,
            attempts,
        })
    }
}

/// Whether `dlopen` of the bare name `path` failed because the system loader has no file of that name (rather
/// than one it found and refused, or a dependency of it that is missing, which glibc names first).
fn no_such_library(path: &Path, rejection: &Rejection) -> bool {
    let Rejection::OpenFailed(message) = rejection else {
        return false;
    };
    message.starts_with(&format!(
        "{}: cannot open shared object file: No such file or directory",
        path.display()
    ))
}

/// Opens a shared library, mapping a failure to a [`Rejection`].
pub(crate) fn dlopen(path: &Path) -> Result<libloading::Library, Rejection> {
    // SAFETY: opening a library runs its initialisers. The crate opens the vendor libraries its search specs
    // name, or a file the caller chose and so vouched for (module docs, "Trust"); the vendors' initialisers do
    // not depend on this process's state.
    unsafe { libloading::Library::new(path.as_os_str()) }
        .map_err(|e| Rejection::OpenFailed(e.to_string()))
}

/// Copies a required function pointer out of a bindgen table field.
pub(crate) fn required<F: Copy>(
    field: &Result<F, libloading::Error>,
    symbol: &'static str,
) -> Result<F, Rejection> {
    field
        .as_ref()
        .map(|f| *f)
        .map_err(|_| Rejection::MissingSymbol(symbol))
}

/// Copies an optional function pointer (one that only newer vendor releases export).
#[cfg(any(feature = "cupti", feature = "cudbg"))]
pub(crate) fn optional<F: Copy>(field: &Result<F, libloading::Error>) -> Option<F> {
    field.as_ref().ok().copied()
}

/// The variable naming the Python whose site-packages folders are searched for NVIDIA wheels.
pub(crate) const PYTHON_VAR: &str = "GPU_TOOLS_PYTHON";

/// What the Python asked for its site-packages folders answered: the folders, and, where `$GPU_TOOLS_PYTHON`
/// named it, why it gave none (it does not run, fails, or lists no folder).
struct PythonSites {
    sites: Vec<PathBuf>,
    problem: Option<(PathBuf, String)>,
}

fn python_sites() -> &'static PythonSites {
    static SITES: OnceLock<PythonSites> = OnceLock::new();
    SITES.get_or_init(|| {
        let named = std::env::var_os(PYTHON_VAR).filter(|v| !v.is_empty());
        let python: OsString = named.clone().unwrap_or_else(|| "python3".into());
        let result = ask_python(&python);
        let (sites, problem) = match result {
            Ok(sites) if !sites.is_empty() => (sites, None),
            Ok(_) => (
                Vec::new(),
                Some("lists no site-packages folder".to_string()),
            ),
            Err(e) => (Vec::new(), Some(e)),
        };
        if let Some(p) = &problem {
            log::trace!("no Python wheel folders: {}: {p}", python.to_string_lossy());
        }
        PythonSites {
            sites,
            // Only a Python the user named is a problem to report; a machine without python3 is not.
            problem: problem
                .filter(|_| named.is_some())
                .map(|p| (PathBuf::from(&python), p)),
        }
    })
}

/// Runs `python` to list its site-packages folders.
fn ask_python(python: &std::ffi::OsStr) -> Result<Vec<PathBuf>, String> {
    let script = "import site,sys\n\
        p=[]\n\
        try: p+=site.getsitepackages()\n\
        except Exception: pass\n\
        try: p.append(site.getusersitepackages())\n\
        except Exception: pass\n\
        p+=[x for x in sys.path if x.endswith('site-packages') or x.endswith('dist-packages')]\n\
        print('\\n'.join(dict.fromkeys(p)))";
    let out = std::process::Command::new(python)
        .args(["-I", "-c", script])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot be run: {e}"))?;
    if !out.status.success() {
        return Err(format!("fails to run a Python script ({})", out.status));
    }
    let sites: Vec<PathBuf> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .collect();
    log::trace!("site-packages of {}: {sites:?}", python.to_string_lossy());
    Ok(sites)
}

/// `python3`'s site-packages folders (system, user, virtualenv), asked once per process. Empty when there is no
/// `python3` or it fails; `GPU_TOOLS_PYTHON` names another interpreter.
pub(crate) fn python_site_packages() -> &'static [PathBuf] {
    &python_sites().sites
}

/// `$GPU_TOOLS_PYTHON` and why it gave no site-packages folder, where it names a Python that does not work.
pub(crate) fn python_problem() -> Option<&'static (PathBuf, String)> {
    python_sites().problem.as_ref()
}

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
                log::debug!(
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

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: LibrarySpec = LibrarySpec {
        name: "test library",
        file_names: &["libnothing.so.1"],
        env_var: "GPU_TOOLS_TEST_NOTHING_LIB",
        roots: &["GPU_TOOLS_TEST_NOTHING_ROOT"],
        root_subdirs: &["lib64", "lib"],
        standard_dirs: &["/nonexistent/gpu-tools"],
        wheel_subdirs: &[],
    };

    #[test]
    fn explicit_path_is_the_only_candidate() {
        let c = SPEC.candidates(Some(Path::new("/x/libfoo.so")));
        assert_eq!(c, vec![(PathBuf::from("/x/libfoo.so"), Origin::Explicit)]);
    }

    #[test]
    fn search_ends_with_system_loader_and_lists_every_attempt() {
        let err = SPEC
            .open(None, |_| Err::<(), _>(Rejection::MissingSymbol("x")))
            .unwrap_err();
        let attempts = err.attempts();
        assert_eq!(
            attempts.first().map(|a| &a.origin),
            Some(&Origin::StandardFolder)
        );
        assert_eq!(
            attempts.first().map(|a| &a.rejection),
            Some(&Rejection::NotFound)
        );
        let last = attempts.last().expect("at least one attempt");
        assert_eq!(last.origin, Origin::SystemLoader);
        assert_eq!(last.path, PathBuf::from("libnothing.so.1"));
        assert_eq!(last.rejection, Rejection::MissingSymbol("x"));
        let full = format!("{err:#}");
        assert!(
            full.contains(
                "\n  /nonexistent/gpu-tools/libnothing.so.1 (standard folder): no such file\n"
            ),
            "{full}"
        );
        assert_eq!(full.lines().count(), 1 + attempts.len(), "{full}");
        let summary = err.to_string();
        assert!(!summary.contains('\n'), "{summary}");
        assert!(
            summary.starts_with(&format!(
                "test library not loaded; tried {} candidates: ",
                attempts.len()
            )),
            "{summary}"
        );
        assert!(
            summary.ends_with(
                "1 found but refused, first libnothing.so.1 (system loader): missing required symbol `x`"
            ),
            "{summary}"
        );
    }

    fn attempt(path: &str, origin: Origin, rejection: Rejection) -> Attempt {
        Attempt {
            path: PathBuf::from(path),
            origin,
            rejection,
        }
    }

    #[test]
    fn the_summary_is_short_and_the_alternate_form_lists_everything() {
        let attempts: Vec<Attempt> = (0..40)
            .map(|i| {
                attempt(
                    &format!("/opt/folder{i}/libx.so.1"),
                    Origin::StandardFolder,
                    Rejection::NotFound,
                )
            })
            .chain([
                attempt(
                    "/venv/nvidia/lib/libx.so.1",
                    Origin::PythonWheel,
                    Rejection::MissingSymbol("xInit"),
                ),
                attempt(
                    "libx.so.1",
                    Origin::SystemLoader,
                    Rejection::OpenFailed("libx.so.1: cannot open".into()),
                ),
            ])
            .collect();
        let err = LoadError::NotFound {
            library: "X (libx.so.1)",
            attempts,
        };
        assert_eq!(
            err.to_string(),
            "X (libx.so.1) not loaded; tried 42 candidates: 40 not found (standard folder); 2 found but refused, \
             first /venv/nvidia/lib/libx.so.1 (Python wheel): missing required symbol `xInit`"
        );
        let full = format!("{err:#}");
        assert_eq!(full.lines().count(), 43, "{full}");
        assert!(
            full.starts_with(
                "X (libx.so.1) not loaded; tried 42 candidates, in search order:\n  /opt/folder0/"
            ),
            "{full}"
        );
        assert!(
            full.ends_with(
                "\n  libx.so.1 (system loader): cannot be opened: libx.so.1: cannot open"
            ),
            "{full}"
        );
        // Through the crate's error, both forms survive.
        let e = crate::Error::from(err.clone());
        assert_eq!(e.to_string(), err.to_string());
        assert_eq!(format!("{e:#}"), full);
        // Only missing files: where they were looked for.
        let missing = LoadError::NotFound {
            library: "Y",
            attempts: vec![
                attempt("/a/liby.so", Origin::Root("CUDA_HOME"), Rejection::NotFound),
                attempt("/b/liby.so", Origin::StandardFolder, Rejection::NotFound),
                attempt("/c/liby.so", Origin::StandardFolder, Rejection::NotFound),
            ],
        };
        assert_eq!(
            missing.to_string(),
            "Y not loaded; tried 3 candidates: 3 not found (under $CUDA_HOME, standard folder)"
        );
        // One candidate: the same in both forms.
        let one = LoadError::NotFound {
            library: "Z",
            attempts: vec![attempt("/z/libz.so", Origin::Explicit, Rejection::NotAFile)],
        };
        assert_eq!(
            one.to_string(),
            "Z not loaded; tried /z/libz.so (explicit path): not a file"
        );
        assert_eq!(format!("{one:#}"), one.to_string());
        let none = LoadError::NotFound {
            library: "W",
            attempts: vec![],
        };
        assert_eq!(none.to_string(), "W not loaded; no candidates");
    }

    #[test]
    fn folders_of_loaded_libraries_come_first() {
        let c = SPEC.candidates_in(None, &[(PathBuf::from("/opt/x"), "libx.so")]);
        assert_eq!(
            c.first(),
            Some(&(
                PathBuf::from("/opt/x/libnothing.so.1"),
                Origin::BesideLibrary("libx.so")
            ))
        );
        assert_eq!(
            Origin::BesideLibrary("libx.so").to_string(),
            "beside libx.so"
        );
    }

    #[test]
    fn a_bare_name_the_system_loader_has_no_file_for_is_not_found() {
        let err = SPEC.open(None, |p| dlopen(p).map(drop)).unwrap_err();
        let last = err.attempts().last().unwrap();
        assert_eq!(last.origin, Origin::SystemLoader);
        assert_eq!(last.rejection, Rejection::NotFound, "{err:#}");
        let summary = err.to_string();
        assert!(!summary.contains("refused"), "{summary}");
        assert!(
            summary.ends_with("not found (standard folder, system loader)"),
            "{summary}"
        );
        // A file the loader found and could not open is a refusal, with the loader's reason.
        let dir = tempfile_dir();
        let bogus = dir.join("libnothing.so.1");
        std::fs::write(&bogus, b"not an ELF file").unwrap();
        let err = SPEC
            .open(Some(&bogus), |p| dlopen(p).map(drop))
            .unwrap_err();
        assert!(
            matches!(&err.attempts()[0].rejection, Rejection::OpenFailed(_)),
            "{err:#}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gpu-tools-loader-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_missing_library_comes_with_its_fix_and_a_refused_one_without() {
        let missing = |library| LoadError::NotFound {
            library,
            attempts: vec![
                attempt("/a/lib.so", Origin::StandardFolder, Rejection::NotFound),
                attempt("lib.so", Origin::SystemLoader, Rejection::NotFound),
            ],
        };
        let cupti = missing("CUPTI (libcupti.so.13 or .12)");
        let fix = cupti.fix().expect("CUPTI has a fix");
        assert!(fix.contains("pip install nvidia-cuda-cupti"), "{fix}");
        assert!(fix.contains("CUDA_HOME"), "{fix}");
        assert!(fix.contains("$GPU_TOOLS_CUPTI_LIB"), "{fix}");
        assert!(
            cupti
                .to_string()
                .starts_with("CUPTI (libcupti.so.13 or .12) not loaded; tried 2 candidates: 2 not found (standard folder, system loader). CUPTI comes with the CUDA toolkit"),
            "{cupti}"
        );
        let driver = missing("CUDA driver (libcuda.so.1)").fix().unwrap();
        assert!(driver.contains("NVIDIA driver"), "{driver}");
        assert!(driver.contains("$GPU_TOOLS_CUDA_DRIVER_LIB"), "{driver}");
        assert!(
            missing("rocprofiler-sdk (librocprofiler-sdk.so.1)")
                .fix()
                .unwrap()
                .contains("ROCm 7.0")
        );
        assert!(
            missing("rocprofiler v2 (librocprofiler64.so.2)")
                .fix()
                .unwrap()
                .contains("ROCM_PATH")
        );
        assert_eq!(missing("X (libx.so.1)").fix(), None);
        // Found and refused: the refusal explains it, no install advice.
        let refused = LoadError::NotFound {
            library: "CUPTI (libcupti.so.13 or .12)",
            attempts: vec![attempt(
                "/a/libcupti.so.13",
                Origin::StandardFolder,
                Rejection::MissingSymbol("cuptiGetVersion"),
            )],
        };
        assert_eq!(refused.fix(), None);
        assert!(!refused.to_string().contains("pip"), "{refused}");
    }

    #[test]
    fn a_bad_python_is_listed_apart() {
        let err = LoadError::NotFound {
            library: "X (libx.so.1)",
            attempts: vec![
                attempt(
                    "/opt/py/bin/python",
                    Origin::EnvVar(PYTHON_VAR),
                    Rejection::BadPython(
                        "cannot be run: No such file or directory (os error 2)".into(),
                    ),
                ),
                attempt("/a/libx.so.1", Origin::StandardFolder, Rejection::NotFound),
                attempt("libx.so.1", Origin::SystemLoader, Rejection::NotFound),
            ],
        };
        assert_eq!(
            err.to_string(),
            "X (libx.so.1) not loaded; tried 3 candidates: 2 not found (standard folder, system loader); \
             /opt/py/bin/python ($GPU_TOOLS_PYTHON): not a usable Python: cannot be run: No such file or directory \
             (os error 2)"
        );
    }

    #[test]
    fn a_folder_is_not_a_library() {
        let err = SPEC.open(Some(Path::new("/tmp")), |_| Ok(())).unwrap_err();
        assert_eq!(err.attempts()[0].rejection, Rejection::NotAFile);
    }
}
