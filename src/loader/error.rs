//! The errors of a failed load (where each candidate came from, why it was rejected) and how they are printed.

use std::fmt;
use std::path::{Path, PathBuf};

use super::python::{PYTHON_VAR, python_problem};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
