//! Embeds the tool libraries that `gpu-tools trace` has the traced program load, so that an installed `gpu-tools`
//! needs nothing else:
//! - `libgpu_tools_inject.so` (the `gpu-tools-inject` crate), which CUDA loads (`--backend cupti`, `profile`);
//! - `libgpu_tools_inject_rocm.so` (the `gpu-tools-inject-rocm` crate), which rocprofiler-sdk loads
//!   (`--backend rocm`).
//!
//! For each:
//! - `GPU_TOOLS_INJECT_LIB_EMBED=/path/to/libgpu_tools_inject.so` (`GPU_TOOLS_INJECT_ROCM_LIB_EMBED` for the AMD
//!   one) embeds that file (a prebuilt one) and builds nothing.
//! - Otherwise this script builds the crate, release profile, for the same target, with a nested `cargo build`
//!   into a target folder of its own (beside the outer one, so that every profile of the outer build shares it).
//!   Its sources are those of the dependency, found through its `links` metadata (`DEP_GPU_TOOLS_INJECT_ROOT`,
//!   `DEP_GPU_TOOLS_INJECT_ROCM_ROOT`): this workspace's, or a registry's copy. In this workspace it uses the
//!   workspace's `Cargo.lock`; cargo reaches the network only for a crate of that lock it has not downloaded yet
//!   (`cargo install --path` resolves afresh unless given `--locked`).
//! - On docs.rs (`DOCS_RS`) nothing is embedded; `trace` then asks for `--inject-lib`.
//!
//! The crate reads the files through `GPU_TOOLS_INJECT_EMBEDDED` and `GPU_TOOLS_INJECT_ROCM_EMBEDDED`, and their
//! SHA-256 through `GPU_TOOLS_INJECT_SHA256` and `GPU_TOOLS_INJECT_ROCM_SHA256`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// One library to embed.
struct Embedded {
    /// The shared object's file name.
    file: &'static str,
    /// The crate's library name (its dep-info file is `lib{lib_name}.d`).
    lib_name: &'static str,
    /// The variable naming a prebuilt file to embed instead.
    prebuilt_var: &'static str,
    /// The variable the dependency's build script sets to its sources (`links` metadata).
    root_var: &'static str,
    /// The prefix of the variables given to the crate (`{prefix}_EMBEDDED`, `{prefix}_SHA256`).
    prefix: &'static str,
}

const LIBRARIES: [Embedded; 2] = [
    Embedded {
        file: "libgpu_tools_inject.so",
        lib_name: "gpu_tools_inject",
        prebuilt_var: "GPU_TOOLS_INJECT_LIB_EMBED",
        root_var: "DEP_GPU_TOOLS_INJECT_ROOT",
        prefix: "GPU_TOOLS_INJECT",
    },
    Embedded {
        file: "libgpu_tools_inject_rocm.so",
        lib_name: "gpu_tools_inject_rocm",
        prebuilt_var: "GPU_TOOLS_INJECT_ROCM_LIB_EMBED",
        root_var: "DEP_GPU_TOOLS_INJECT_ROCM_ROOT",
        prefix: "GPU_TOOLS_INJECT_ROCM",
    },
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=DOCS_RS");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for lib in &LIBRARIES {
        embed(lib, &out);
    }
}

fn embed(lib: &Embedded, out: &Path) {
    println!("cargo:rerun-if-env-changed={}", lib.prebuilt_var);
    let bytes = if let Some(prebuilt) = env::var_os(lib.prebuilt_var) {
        let prebuilt = PathBuf::from(prebuilt);
        println!("cargo:rerun-if-changed={}", prebuilt.display());
        read(&prebuilt)
    } else if env::var_os("DOCS_RS").is_some() {
        Vec::new()
    } else {
        read(&build_library(lib, out))
    };
    let embedded = out.join(lib.file);
    // Written only when it changed, so that the crate is not rebuilt for nothing.
    if std::fs::read(&embedded).ok().as_deref() != Some(&bytes[..]) {
        std::fs::write(&embedded, &bytes)
            .unwrap_or_else(|e| panic!("write {}: {e}", embedded.display()));
    }
    let digest: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    println!(
        "cargo:rustc-env={}_EMBEDDED={}",
        lib.prefix,
        embedded.display()
    );
    println!("cargo:rustc-env={}_SHA256={digest}", lib.prefix);
}

fn read(path: &Path) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert!(
        bytes.starts_with(b"\x7fELF"),
        "{} is not a shared object",
        path.display()
    );
    bytes
}

/// Builds the library and returns the path of the shared object.
fn build_library(lib: &Embedded, out: &Path) -> PathBuf {
    let root = PathBuf::from(env::var_os(lib.root_var).unwrap_or_else(|| {
        panic!(
            "the dependency's build script names its sources ({}) for {}",
            lib.root_var, lib.file
        )
    }));
    let target = env::var("TARGET").expect("cargo sets TARGET");
    let target_dir = nested_target_dir(out);
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .args(["--lib", "--release", "--target", &target])
        .arg("--target-dir")
        .arg(&target_dir);
    // The outer build's settings that must not reach the nested one: its target folder, and clippy (which runs
    // as a wrapper of the workspace's crates and would lint the library a second time, here).
    for var in [
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET_DIR",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build {}: {e}", lib.file));
    assert!(
        status.success(),
        "building {} ({}) failed ({status}); its messages are above. Set {}=/path/to/{} to embed a prebuilt one \
         instead",
        lib.file,
        root.display(),
        lib.prebuilt_var,
        lib.file
    );
    let built = target_dir.join(&target).join("release");
    let library = built.join(lib.file);
    // Rebuild when any source of the library changes: cargo's dependency list of the shared object names them.
    let dep_info = built.join(format!("lib{}.d", lib.lib_name));
    for source in dependencies(&dep_info) {
        println!("cargo:rerun-if-changed={}", source.display());
    }
    for manifest in [
        root.join("Cargo.toml"),
        root.join("../Cargo.toml"),
        root.join("../Cargo.lock"),
    ] {
        if manifest.exists() {
            println!("cargo:rerun-if-changed={}", manifest.display());
        }
    }
    library
}

/// The nested build's target folder: `gpu-tools-inject-embed/` in the outer target folder (the ancestor of
/// OUT_DIR that holds cargo's `CACHEDIR.TAG`), shared by the outer build's profiles; OUT_DIR where there is none.
fn nested_target_dir(out: &Path) -> PathBuf {
    out.ancestors()
        .skip(1)
        .find(|d| d.join("CACHEDIR.TAG").is_file())
        .map_or_else(
            || out.join("inject-target"),
            |d| d.join("gpu-tools-inject-embed"),
        )
}

/// The files a cargo dep-info file (`target: dep dep ...`, spaces in names escaped) lists.
fn dependencies(dep_info: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(dep_info) else {
        return Vec::new();
    };
    let Some(line) = text.lines().next() else {
        return Vec::new();
    };
    let Some((_, deps)) = line.split_once(": ") else {
        return Vec::new();
    };
    let mut files = Vec::new();
    let mut current = String::new();
    let mut chars = deps.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    current.push(next);
                }
            }
            ' ' => {
                if !current.is_empty() {
                    files.push(PathBuf::from(std::mem::take(&mut current)));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        files.push(PathBuf::from(current));
    }
    files
}
