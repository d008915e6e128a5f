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
//! So `cargo install` gives a `gpu-tools` that traces with nothing else installed. Where no cache folder takes the
//! library (a read-only home, a full disk), the error names each folder with its reason and the ways out:
//! `--inject-lib PATH`, `$GPU_TOOLS_INJECT_LIB`, a writable `XDG_CACHE_HOME`. `doctor` ([`describe`]) writes
//! nothing: it says where the library is, or where it would be written on first use and whether that folder could
//! take it.
//!
//! The AMD tool library (`libgpu_tools_inject_rocm.so`) of `trace --backend rocm` is embedded and found the same
//! way ([`find_rocm`]: `--inject-lib`, `$GPU_TOOLS_INJECT_ROCM_LIB`, the embedded copy).

use std::path::{Path, PathBuf};

mod cache;

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
    /// The environment variable (`$GPU_TOOLS_INJECT_LIB`, `$GPU_TOOLS_INJECT_ROCM_LIB`).
    Environment(&'static str),
    /// The copy embedded in this executable.
    Embedded,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Option => f.write_str("--inject-lib"),
            Origin::Environment(var) => write!(f, "${var}"),
            Origin::Embedded => f.write_str("embedded in gpu-tools"),
        }
    }
}

/// The absolute path of the library and where it came from, or a message saying what went wrong.
pub fn find(explicit: Option<&Path>) -> Result<(PathBuf, Origin), String> {
    match named(explicit, &CUDA_EMBEDDED)? {
        Some(found) => Ok(found),
        None => extract(&CUDA_EMBEDDED).map(|p| (p, Origin::Embedded)),
    }
}

/// The library named by `--inject-lib` or the library's variable, absolute (`CUDA_INJECTION64_PATH` must be), or
/// `None` where neither names one.
fn named(
    explicit: Option<&Path>,
    lib: &EmbeddedLibrary,
) -> Result<Option<(PathBuf, Origin)>, String> {
    let (path, origin) = match (explicit, std::env::var_os(lib.env_var)) {
        (Some(p), _) => (p.to_path_buf(), Origin::Option),
        (None, Some(v)) => (PathBuf::from(v), Origin::Environment(lib.env_var)),
        (None, None) => return Ok(None),
    };
    if !path.is_file() {
        return Err(match origin {
            Origin::Option => format!("{} {} does not exist", lib.what, path.display()),
            _ => format!(
                "${} names {}, which does not exist",
                lib.env_var,
                path.display()
            ),
        });
    }
    std::fs::canonicalize(&path)
        .map(|p| Some((p, origin)))
        .map_err(|e| format!("{} {}: {e}", lib.what, path.display()))
}

/// An embedded library: its bytes, their hash, the file name's stem and the variable that names another.
struct EmbeddedLibrary {
    bytes: &'static [u8],
    sha256: &'static str,
    stem: &'static str,
    what: &'static str,
    env_var: &'static str,
}

/// How the CUDA injection library's file names begin: the cached copy of the embedded one
/// (`libgpu_tools_inject-HASH.so`) and the one the workspace builds (`libgpu_tools_inject.so`).
pub const CUDA_STEM: &str = "libgpu_tools_inject";

static CUDA_EMBEDDED: EmbeddedLibrary = EmbeddedLibrary {
    bytes: EMBEDDED,
    sha256: EMBEDDED_SHA256,
    stem: CUDA_STEM,
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
    match named(explicit, &ROCM_EMBEDDED)? {
        Some(found) => Ok(found),
        None => extract(&ROCM_EMBEDDED).map(|p| (p, Origin::Embedded)),
    }
}

/// The embedded library's file name in a cache folder: its stem and the start of its hash.
fn file_name(lib: &EmbeddedLibrary) -> String {
    format!(
        "{}-{}.so",
        lib.stem,
        &lib.sha256[..lib.sha256.len().min(16)]
    )
}

/// Why a build without the library has none.
fn not_embedded(lib: &EmbeddedLibrary) -> String {
    format!(
        "this gpu-tools was built without {}; name one with --inject-lib PATH or ${}",
        lib.what, lib.env_var
    )
}

/// That no cache folder can take the library (read-only home, full disk), with what each said and the ways out.
fn unwritable(lib: &EmbeddedLibrary, tried: &[String]) -> String {
    format!(
        "{} embedded in gpu-tools cannot be written to a cache folder ({}): name a copy of {}.so with --inject-lib \
         PATH or ${}, or set XDG_CACHE_HOME to a folder this user can write",
        lib.what,
        tried.join("; "),
        lib.stem,
        lib.env_var
    )
}

/// The embedded library, written to the cache if it is not there yet.
fn extract(lib: &EmbeddedLibrary) -> Result<PathBuf, String> {
    if lib.bytes.is_empty() {
        return Err(not_embedded(lib));
    }
    let name = file_name(lib);
    let mut tried = Vec::new();
    for dir in cache::cache_dirs() {
        match cache::extract_into(&dir, &name, lib.bytes) {
            Ok(path) => return Ok(path),
            Err(e) => tried.push(format!("{}: {}", dir.display(), cache::reason(&e))),
        }
    }
    Err(unwritable(lib, &tried))
}

/// Where the embedded library is, or would be written on first use, found out without writing anything (`doctor`
/// is a diagnostic): the first cache folder that holds it already or could take it.
fn locate(lib: &EmbeddedLibrary) -> Result<String, String> {
    if lib.bytes.is_empty() {
        return Err(not_embedded(lib));
    }
    let name = file_name(lib);
    let size = lib.bytes.len() as u64;
    let mut tried = Vec::new();
    for dir in cache::cache_dirs() {
        let path = dir.join(&name);
        if cache::holds(&path, lib.bytes) {
            return Ok(format!(
                "{} (embedded in gpu-tools, written there already)",
                path.display()
            ));
        }
        match cache::check_folder(&dir, size) {
            Ok(()) => {
                return Ok(format!(
                    "embedded in gpu-tools ({:.1} MB), written to {} on first use (that folder can take it)",
                    size as f64 / 1e6,
                    path.display()
                ));
            }
            Err(e) => tried.push(format!("{}: {}", dir.display(), cache::reason(&e))),
        }
    }
    Err(unwritable(lib, &tried))
}

/// What `doctor` reports for `find`'s library, without writing anything.
fn describe_with(
    explicit: Result<Option<(PathBuf, Origin)>, String>,
    lib: &EmbeddedLibrary,
) -> (bool, String) {
    match explicit {
        Ok(Some((path, origin))) => (true, format!("{} ({origin})", path.display())),
        Ok(None) => match locate(lib) {
            Ok(text) => (true, text),
            Err(e) => (false, e),
        },
        Err(e) => (false, e),
    }
}

/// What `doctor` reports: where the library would be taken from, or why none would be. Nothing is written: the
/// embedded copy is looked for in the cache, and where it is not there yet, the folder it would go to is checked.
pub fn describe() -> (bool, String) {
    describe_with(named(None, &CUDA_EMBEDDED), &CUDA_EMBEDDED)
}

/// What `doctor` reports for the AMD tool library.
pub fn describe_rocm() -> (bool, String) {
    describe_with(named(None, &ROCM_EMBEDDED), &ROCM_EMBEDDED)
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
}
