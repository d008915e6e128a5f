//! Finding the injection library: `--inject-lib`, then `$GPU_TOOLS_INJECT_LIB`, then next to this program and in
//! its parent folder (which covers `target/release/examples/` → `target/release/`, and a staged `.gpu/bin/`).

use std::path::{Path, PathBuf};

/// The library's file name as cargo builds it.
pub const FILE_NAME: &str = "libgpu_tools_inject.so";
/// Environment variable naming the library.
pub const ENV_VAR: &str = "GPU_TOOLS_INJECT_LIB";

/// The absolute path of the library, or a message naming every place searched.
pub fn find(explicit: Option<&Path>) -> Result<PathBuf, String> {
    let mut tried: Vec<String> = Vec::new();
    let mut check = |p: PathBuf, origin: &str| -> Option<PathBuf> {
        if p.is_file() {
            // CUDA_INJECTION64_PATH must be absolute.
            return std::fs::canonicalize(&p).ok();
        }
        tried.push(format!("{} ({origin})", p.display()));
        None
    };
    if let Some(p) = explicit {
        return check(p.to_path_buf(), "--inject-lib")
            .ok_or_else(|| format!("the injection library {} does not exist", p.display()));
    }
    if let Some(p) = std::env::var_os(ENV_VAR) {
        let p = PathBuf::from(p);
        return check(p.clone(), ENV_VAR)
            .ok_or_else(|| format!("${ENV_VAR} names {}, which does not exist", p.display()));
    }
    if let Ok(exe) = std::env::current_exe() {
        let mut dir = exe.parent();
        for origin in ["next to cuda_trace", "parent folder of cuda_trace"] {
            let Some(d) = dir else { break };
            if let Some(found) = check(d.join(FILE_NAME), origin) {
                return Ok(found);
            }
            dir = d.parent();
        }
    }
    Err(format!(
        "the injection library {FILE_NAME} was not found; tried {}. Build it with `cargo build --release -p \
         gpu-tools-inject`, or name it with --inject-lib or ${ENV_VAR}",
        tried.join(", ")
    ))
}
