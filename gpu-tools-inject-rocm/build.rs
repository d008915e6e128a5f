//! Tells the crates that depend on this one where its sources are (`DEP_GPU_TOOLS_INJECT_ROCM_ROOT`): the
//! `gpu-tools` command-line tool builds this library from them to embed it. Nothing else is built here.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let root = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:root={root}");
}
