//! The injection library embedded in `gpu-tools`: written to the user's cache folder once and handed to the
//! program, or, where no cache folder can be written, the ways to give it named.

use std::path::PathBuf;
use std::process::Command;

use gpu_tools_injection::env;

use super::{STANDIN, entries, gpu_tools_trace, text};

/// With nothing named, the library embedded in `gpu-tools` is written to the user's cache folder once and handed
/// to the program.
#[test]
fn the_embedded_injection_library_is_written_to_the_cache_and_used() {
    let cache = tempfile::tempdir().unwrap();
    let me = std::env::current_exe().unwrap();
    let run = || {
        let out = gpu_tools_trace()
            .args(["--backend", "cupti", "--"])
            .arg(&me)
            .args(super::STANDIN_TEST)
            .env(STANDIN, "environment")
            .env("XDG_CACHE_HOME", cache.path())
            .output()
            .unwrap();
        let stdout = text(&out.stdout);
        let line = stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{}=", env::CUDA_INJECTION)))
            .unwrap_or_else(|| panic!("the program saw no injection library: {stdout}"))
            .to_string();
        PathBuf::from(line)
    };
    let lib = run();
    assert!(
        lib.starts_with(cache.path().join("gpu-tools")),
        "{}",
        lib.display()
    );
    let bytes = std::fs::read(&lib).unwrap();
    assert!(bytes.starts_with(b"\x7fELF"), "a shared object");
    // A damaged copy is replaced before use; an intact one is used as it is.
    std::fs::write(&lib, b"damaged").unwrap();
    assert_eq!(run(), lib);
    assert_eq!(std::fs::read(&lib).unwrap(), bytes);
    assert_eq!(entries(&cache.path().join("gpu-tools")).len(), 1);
}

/// A `gpu-tools` whose embedded library cannot be written to any cache folder (a read-only home, a full disk) says
/// so, names `--inject-lib` and `$GPU_TOOLS_INJECT_LIB`, and runs nothing; `doctor` says the same.
#[test]
fn an_unwritable_cache_names_the_ways_to_give_the_library() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    // XDG_CACHE_HOME: a read-only folder (for root, who may write anywhere, a file where the folder should be).
    let cache = dir.path().join("cache");
    if root {
        std::fs::write(&cache, b"").unwrap();
    } else {
        std::fs::create_dir(&cache).unwrap();
        std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o500)).unwrap();
    }
    // HOME has a file where ~/.cache is; the temporary folder a file where its private folder would be.
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join(".cache"), b"").unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    // SAFETY: as above.
    let uid = unsafe { libc::geteuid() };
    std::fs::write(tmp.join(format!("gpu-tools-{uid}")), b"").unwrap();
    let marker = dir.path().join("ran");
    let run = |args: &[&str]| {
        gpu_tools_trace()
            .args(args)
            .env("XDG_CACHE_HOME", &cache)
            .env("HOME", &home)
            .env("TMPDIR", &tmp)
            .output()
            .unwrap()
    };
    let out = run(&[
        "--backend",
        "cupti",
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with(
            "gpu-tools trace: the injection library embedded in gpu-tools cannot be written to a cache folder ("
        ),
        "{err}"
    );
    let why = if root {
        format!("{} is not a folder", cache.display())
    } else {
        "permission denied".to_string()
    };
    assert!(
        err.contains(&format!("{}/gpu-tools: {why}", cache.display())),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{}/.cache/gpu-tools: {}/.cache is not a folder",
            home.display(),
            home.display()
        )),
        "{err}"
    );
    assert!(
        err.contains(
            "): name a copy of libgpu_tools_inject.so with --inject-lib PATH or $GPU_TOOLS_INJECT_LIB, or set \
             XDG_CACHE_HOME to a folder this user can write (the program was not run)"
        ),
        "{err}"
    );
    assert!(!marker.exists(), "the program did not run");
    // The same for the AMD tool library.
    let out = gpu_tools_trace()
        .args(["--backend", "rocm", "--", "touch", marker.to_str().unwrap()])
        .env("XDG_CACHE_HOME", &cache)
        .env("HOME", &home)
        .env("TMPDIR", &tmp)
        .env(
            gpu_tools::rocprofiler_sdk::ENV_VAR,
            gpu_tools_testing::double_path("rocprofiler_sdk"),
        )
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--inject-lib PATH or $GPU_TOOLS_INJECT_ROCM_LIB"),
        "{err}"
    );
    assert!(!marker.exists(), "the program did not run");
    // doctor says it too, and writes nothing.
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["doctor", "--json"])
        .env("XDG_CACHE_HOME", &cache)
        .env("HOME", &home)
        .env("TMPDIR", &tmp)
        .env_remove("GPU_TOOLS_INJECT_LIB")
        .output()
        .unwrap();
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["injection_library"]["found"], false);
    assert!(
        report["injection_library"]["detail"]
            .as_str()
            .unwrap()
            .contains("--inject-lib PATH or $GPU_TOOLS_INJECT_LIB"),
        "{report}"
    );
    if !root {
        std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
}
