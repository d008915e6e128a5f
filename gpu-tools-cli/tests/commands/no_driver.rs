//! Every subcommand that needs a GPU, on a machine without a GPU driver, as a pip wheel installed there would run
//! them: exit 1, nothing run or attached, nothing on stdout, and a message on stderr that names what is missing and
//! its fix. CI has no GPU; the vendor libraries are named by files that do not exist, so that a machine which has
//! some gives the same answers.

use std::path::Path;
use std::process::{Command, Output};

use gpu_tools_testing::process::Target;

/// The fix of a missing CUDA driver, as the loader words it.
const DRIVER_FIX: &str = "install the NVIDIA driver";
/// The fix of a missing CUPTI.
const CUPTI_FIX: &str = "pip install nvidia-cuda-cupti";

fn no_driver(args: &[&str], dir: &Path) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(args)
        .current_dir(dir)
        .env("GPU_TOOLS_CUDA_DRIVER_LIB", "/nonexistent/libcuda.so.1")
        .env("GPU_TOOLS_CUPTI_LIB", "/nonexistent/libcupti.so.13")
        .env("GPU_TOOLS_CHECKPOINT_LIB", "/nonexistent/libcheckpoint.so")
        .env(
            "GPU_TOOLS_ROCPROFILER_LIB",
            "/nonexistent/librocprofiler64.so.2",
        )
        .env(
            gpu_tools::rocprofiler_sdk::ENV_VAR,
            "/nonexistent/librocprofiler-sdk.so.1",
        )
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env_remove("GPU_TOOLS_INJECT_LIB")
        .env_remove("GPU_TOOLS_INJECT_ROCM_LIB")
        .output()
        .expect("run gpu-tools");
    println!(
        "{args:?}: {}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn every_gpu_subcommand_exits_1_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let touch = marker.to_str().unwrap();
    let mut target = Target::sleeper();
    let pid = target.pid().to_string();
    let amd_driver = gpu_tools::rocprofiler::amd_gpus().is_ok();
    let mut cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["trace", "--", "touch", touch],
            vec![DRIVER_FIX, CUPTI_FIX],
        ),
        (
            vec!["trace", "--backend", "cupti", "--", "touch", touch],
            vec![DRIVER_FIX],
        ),
        (
            vec!["trace", "--backend", "debugger", "--", "touch", touch],
            vec![DRIVER_FIX],
        ),
        // An option that needs CUPTI: both missing pieces are named, not only the first.
        (
            vec!["trace", "-o", "t.gputrace", "--", "touch", touch],
            vec![CUPTI_FIX, DRIVER_FIX],
        ),
        (
            vec!["trace", "--pid", &pid, "--duration", "1"],
            vec![DRIVER_FIX, "nothing was attached"],
        ),
        (vec!["profile", "--", "touch", touch], vec![DRIVER_FIX]),
        (vec!["top", "--duration", "1"], vec![DRIVER_FIX]),
        (
            vec!["top", "--source", "cupti", "--duration", "1"],
            vec![DRIVER_FIX],
        ),
        (vec!["where", &pid], vec![DRIVER_FIX]),
        (vec!["where", "--pid-tree", &pid], vec![DRIVER_FIX]),
        (vec!["freeze", &pid, "--seconds", "1"], vec![DRIVER_FIX]),
        (vec!["freeze", &pid, "--resume"], vec![DRIVER_FIX]),
        // The catalogue needs CUPTI's host libraries only.
        (vec!["metrics", "--chip", "GH100"], vec![CUPTI_FIX]),
        (vec!["metrics", "--chips"], vec![CUPTI_FIX]),
        (
            vec!["top", "--source", "rocprofiler", "--duration", "1"],
            vec!["Install ROCm"],
        ),
    ];
    if !amd_driver {
        cases.push((
            vec!["trace", "--backend", "rocm", "--", "touch", touch],
            vec!["install the amdgpu driver", "Install ROCm 7.0"],
        ));
    }
    for (args, fixes) in &cases {
        let out = no_driver(args, dir.path());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.starts_with(&format!("gpu-tools {}: ", args[0])),
            "{args:?}: {err}"
        );
        for fix in fixes {
            assert!(err.contains(fix), "{args:?} names {fix:?}: {err}");
        }
        assert!(
            out.stdout.is_empty(),
            "{args:?}: nothing on stdout: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(!marker.exists(), "{args:?}: the program did not run");
        assert!(target.running(), "{args:?}: the process runs on");
    }
    // Nothing was written: no trace, no report, no fixture folder.
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert!(left.iter().all(|n| n == "cache"), "{left:?}");
}

#[test]
fn doctor_says_what_is_missing_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let out = no_driver(&["doctor"], dir.path());
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("NVIDIA: no CUDA driver (libcuda.so.1 not found). The CUDA driver comes with the NVIDIA kernel driver"),
        "{text}"
    );
    assert!(text.contains(DRIVER_FIX), "{text}");
    let out = no_driver(&["doctor", "--verbose"], dir.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("fix: CUPTI comes with") && l.contains(CUPTI_FIX)),
        "{text}"
    );
}
