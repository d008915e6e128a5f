//! The search for one vendor library: its candidates in order, each tried until one opens and binds.

use std::path::{Path, PathBuf};

use super::error::{Attempt, LoadError, Origin, Rejection};
use super::python::{PYTHON_VAR, python_problem, python_site_packages};

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
            log::trace!(target: super::LOG_TARGET,
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
                    log::debug!(target: super::LOG_TARGET, "{}: loaded {} ({origin})", self.name, path.display());
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
        log::debug!(target: super::LOG_TARGET,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::bind::dlopen;

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
    fn a_folder_is_not_a_library() {
        let err = SPEC.open(Some(Path::new("/tmp")), |_| Ok(())).unwrap_err();
        assert_eq!(err.attempts()[0].rejection, Rejection::NotAFile);
    }
}
