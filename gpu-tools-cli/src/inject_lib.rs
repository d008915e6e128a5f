//! The injection library (`libgpu_tools_inject.so`) that `trace --backend cupti` has CUDA load into the traced
//! program.
//!
//! It is found in this order:
//! 1. `--inject-lib PATH`;
//! 2. `$GPU_TOOLS_INJECT_LIB`;
//! 3. the copy embedded in this executable at build time (the build script builds the `gpu-tools-inject` crate),
//!    written once to a file named by its content's hash in the user's cache folder (`$XDG_CACHE_HOME/gpu-tools/`,
//!    else `~/.cache/gpu-tools/`, else a private folder in the temporary folder). An existing file is used only if
//!    its bytes are the embedded ones; otherwise it is written again (to a temporary file, then renamed, so that a
//!    concurrent run never loads a partial file).
//!
//! So `cargo install` gives a `gpu-tools` that traces with nothing else installed.
//!
//! The AMD tool library (`libgpu_tools_inject_rocm.so`) of `trace --backend rocm` is embedded and found the same
//! way ([`find_rocm`]: `--inject-lib`, `$GPU_TOOLS_INJECT_ROCM_LIB`, the embedded copy).

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Environment variable naming the library.
pub const ENV_VAR: &str = "GPU_TOOLS_INJECT_LIB";

/// The embedded library (empty in a build that embeds none: a docs.rs build).
static EMBEDDED: &[u8] = include_bytes!(env!("GPU_TOOLS_INJECT_EMBEDDED"));
/// SHA-256 of [`EMBEDDED`], in hex, computed by the build script.
const EMBEDDED_SHA256: &str = env!("GPU_TOOLS_INJECT_SHA256");
/// The embedded AMD tool library (empty in a build that embeds none).
static EMBEDDED_ROCM: &[u8] = include_bytes!(env!("GPU_TOOLS_INJECT_ROCM_EMBEDDED"));
/// SHA-256 of [`EMBEDDED_ROCM`], in hex.
const EMBEDDED_ROCM_SHA256: &str = env!("GPU_TOOLS_INJECT_ROCM_SHA256");

/// Where the library came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `--inject-lib`.
    Option,
    /// `$GPU_TOOLS_INJECT_LIB`.
    Environment,
    /// The copy embedded in this executable.
    Embedded,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Origin::Option => "--inject-lib",
            Origin::Environment => "$GPU_TOOLS_INJECT_LIB",
            Origin::Embedded => "embedded in gpu-tools",
        })
    }
}

/// The absolute path of the library and where it came from, or a message saying what went wrong.
pub fn find(explicit: Option<&Path>) -> Result<(PathBuf, Origin), String> {
    let absolute = |p: &Path, origin: Origin| -> Result<(PathBuf, Origin), String> {
        if !p.is_file() {
            return Err(match origin {
                Origin::Option => format!("the injection library {} does not exist", p.display()),
                _ => format!("${ENV_VAR} names {}, which does not exist", p.display()),
            });
        }
        // CUDA_INJECTION64_PATH must be absolute.
        std::fs::canonicalize(p)
            .map(|p| (p, origin))
            .map_err(|e| format!("the injection library {}: {e}", p.display()))
    };
    if let Some(p) = explicit {
        return absolute(p, Origin::Option);
    }
    if let Some(p) = std::env::var_os(ENV_VAR) {
        return absolute(Path::new(&p), Origin::Environment);
    }
    extract(&CUDA_EMBEDDED).map(|p| (p, Origin::Embedded))
}

/// An embedded library: its bytes, their hash, the file name's stem and the variable that names another.
struct EmbeddedLibrary {
    bytes: &'static [u8],
    sha256: &'static str,
    stem: &'static str,
    what: &'static str,
    env_var: &'static str,
}

static CUDA_EMBEDDED: EmbeddedLibrary = EmbeddedLibrary {
    bytes: EMBEDDED,
    sha256: EMBEDDED_SHA256,
    stem: "libgpu_tools_inject",
    what: "the injection library",
    env_var: ENV_VAR,
};

static ROCM_EMBEDDED: EmbeddedLibrary = EmbeddedLibrary {
    bytes: EMBEDDED_ROCM,
    sha256: EMBEDDED_ROCM_SHA256,
    stem: "libgpu_tools_inject_rocm",
    what: "the AMD tool library",
    env_var: ROCM_ENV_VAR,
};

/// Environment variable naming the AMD tool library.
pub const ROCM_ENV_VAR: &str = "GPU_TOOLS_INJECT_ROCM_LIB";

/// The AMD tool library (`libgpu_tools_inject_rocm.so`, the `gpu-tools-inject-rocm` crate) that `trace --backend
/// rocm` names in `ROCP_TOOL_LIBRARIES`, absolute, and where it came from: `--inject-lib PATH`, then
/// `$GPU_TOOLS_INJECT_ROCM_LIB`, then the copy embedded in this executable (written to the cache as the CUDA one
/// is).
pub fn find_rocm(explicit: Option<&Path>) -> Result<(PathBuf, Origin), String> {
    let absolute = |p: &Path, origin: Origin| {
        if !p.is_file() {
            return Err(match origin {
                Origin::Option => format!("the AMD tool library {} does not exist", p.display()),
                _ => format!(
                    "${ROCM_ENV_VAR} names {}, which does not exist",
                    p.display()
                ),
            });
        }
        std::fs::canonicalize(p)
            .map(|p| (p, origin))
            .map_err(|e| format!("the AMD tool library {}: {e}", p.display()))
    };
    if let Some(p) = explicit {
        return absolute(p, Origin::Option);
    }
    if let Some(p) = std::env::var_os(ROCM_ENV_VAR) {
        return absolute(Path::new(&p), Origin::Environment);
    }
    extract(&ROCM_EMBEDDED).map(|p| (p, Origin::Embedded))
}

/// The embedded library, written to the cache if it is not there yet.
fn extract(lib: &EmbeddedLibrary) -> Result<PathBuf, String> {
    if lib.bytes.is_empty() {
        return Err(format!(
            "this gpu-tools was built without {}; name one with --inject-lib or ${}",
            lib.what, lib.env_var
        ));
    }
    let name = format!(
        "{}-{}.so",
        lib.stem,
        &lib.sha256[..lib.sha256.len().min(16)]
    );
    let mut tried = Vec::new();
    for dir in cache_dirs() {
        match extract_into(&dir, &name, lib.bytes) {
            Ok(path) => return Ok(path),
            Err(e) => tried.push(format!("{}: {e}", dir.display())),
        }
    }
    Err(format!(
        "cannot write the embedded {}: {}; name one with --inject-lib or ${}",
        lib.what.trim_start_matches("the "),
        tried.join("; "),
        lib.env_var
    ))
}

/// The folders tried, in order.
fn cache_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    if let Some(cache) = std::env::var_os("XDG_CACHE_HOME").and_then(absolute) {
        dirs.push(cache.join("gpu-tools"));
    }
    if let Some(home) = std::env::var_os("HOME").and_then(absolute) {
        dirs.push(home.join(".cache").join("gpu-tools"));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    dirs.push(std::env::temp_dir().join(format!("gpu-tools-{uid}")));
    dirs.dedup();
    dirs
}

/// Makes sure `dir/name` holds `bytes`, and returns its path.
fn extract_into(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // The folder must be ours and writable by nobody else: another user could otherwise put a library there
    // that the traced program would load.
    let meta = std::fs::metadata(dir)?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if meta.uid() != uid || meta.permissions().mode() & 0o022 != 0 {
        return Err(std::io::Error::other(format!(
            "owned by uid {} with mode {:o}, not private to uid {uid}",
            meta.uid(),
            meta.permissions().mode() & 0o7777
        )));
    }
    let path = dir.join(name);
    if std::fs::read(&path).is_ok_and(|existing| existing == bytes) {
        return Ok(path);
    }
    let mut temp = tempfile::Builder::new()
        .prefix(".libgpu_tools_inject-")
        .suffix(".partial")
        .permissions(std::fs::Permissions::from_mode(0o644))
        .tempfile_in(dir)?;
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    temp.persist(&path).map_err(|e| e.error)?;
    log::debug!("wrote the embedded injection library to {}", path.display());
    Ok(path)
}

/// What `doctor` reports: where the library would be taken from, or why none would be.
pub fn describe() -> (bool, String) {
    match find(None) {
        Ok((path, origin)) => (true, format!("{} ({origin})", path.display())),
        Err(e) => (false, e),
    }
}

/// What `doctor` reports for the AMD tool library.
pub fn describe_rocm() -> (bool, String) {
    match find_rocm(None) {
        Ok((path, origin)) => (true, format!("{} ({origin})", path.display())),
        Err(e) => (false, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_library_is_a_shared_object_with_its_hash() {
        assert!(EMBEDDED.starts_with(b"\x7fELF"), "an ELF file is embedded");
        assert_eq!(EMBEDDED_SHA256.len(), 64);
        assert!(
            EMBEDDED_ROCM.starts_with(b"\x7fELF"),
            "the AMD tool library is embedded"
        );
        assert_eq!(EMBEDDED_ROCM_SHA256.len(), 64);
        assert_ne!(EMBEDDED_SHA256, EMBEDDED_ROCM_SHA256);
    }

    #[test]
    fn extraction_writes_once_and_repairs_a_changed_file() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache/gpu-tools");
        let path = extract_into(&cache, "lib.so", b"library bytes").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"library bytes");
        assert_eq!(
            std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let written = std::fs::metadata(&path).unwrap().modified().unwrap();
        // Present and right: used as it is.
        std::thread::sleep(std::time::Duration::from_millis(20));
        extract_into(&cache, "lib.so", b"library bytes").unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().modified().unwrap(),
            written
        );
        // Cut short or changed: written again.
        std::fs::write(&path, b"library").unwrap();
        extract_into(&cache, "lib.so", b"library bytes").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"library bytes");
        // No temporary file is left.
        let names: Vec<_> = std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["lib.so"]);
    }

    #[test]
    fn a_folder_others_can_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = extract_into(&open, "lib.so", b"x").unwrap_err();
        assert!(e.to_string().contains("not private"), "{e}");
        assert!(!open.join("lib.so").exists());
    }
}
