//! The site-packages folders of `python3` (or `$GPU_TOOLS_PYTHON`), where NVIDIA wheels are looked for.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;

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
            log::trace!(target: super::LOG_TARGET, "no Python wheel folders: {}: {p}", python.to_string_lossy());
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
    log::trace!(target: super::LOG_TARGET, "site-packages of {}: {sites:?}", python.to_string_lossy());
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
