//! Builds the C test doubles of the vendor libraries, `doubles/*.c` of this crate, into shared
//! libraries in OUT_DIR, and tells the crate where they are through `GPU_TOOLS_DOUBLES_DIR` (read by
//! `gpu_tools_testing::doubles_dir`).
//!
//! This crate is never published and nothing outside the repository depends on it, so the doubles (compiled with
//! `-Werror`) are built for this repository's tests only, never in a build of a crate that uses gpu-tools.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let manifest =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let src = manifest.join("doubles");
    println!("cargo:rerun-if-changed={}", src.display());
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("doubles");
    std::fs::create_dir_all(&out).expect("create OUT_DIR/doubles");
    // Sanitizer or valgrind flags for the doubles, e.g. GPU_TOOLS_DOUBLES_CFLAGS="-fsanitize=address".
    println!("cargo:rerun-if-env-changed=GPU_TOOLS_DOUBLES_CFLAGS");
    let extra = env::var("GPU_TOOLS_DOUBLES_CFLAGS").unwrap_or_default();
    let compiler = cc::Build::new().opt_level(2).get_compiler();
    for source in sources(&src) {
        println!("cargo:rerun-if-changed={}", source.display());
        let stem = source
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("a double's file name is UTF-8");
        let target = out.join(format!("lib{stem}.so"));
        let mut cmd: Command = compiler.to_command();
        cmd.args(["-shared", "-fPIC", "-pthread", "-Wall", "-Werror", "-g"])
            .args(extra.split_whitespace())
            .arg("-o")
            .arg(&target)
            .arg(&source)
            .arg("-lpthread");
        // The doubles are what the tests run against: one that does not build fails the build, with the
        // compiler's message above this one.
        match cmd.status() {
            Ok(s) if s.success() => {}
            Ok(s) => panic!("test double {} did not build ({s})", source.display()),
            Err(e) => panic!("no C compiler for test double {}: {e}", source.display()),
        }
    }
    println!("cargo:rustc-env=GPU_TOOLS_DOUBLES_DIR={}", out.display());
}

/// The doubles' C files, in a stable order.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("the test doubles' folder {}: {e}", dir.display()));
    let mut sources: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    sources.sort();
    sources
}
