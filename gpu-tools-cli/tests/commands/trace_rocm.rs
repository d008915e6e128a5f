//! `gpu-tools trace --backend rocm` on a fake HIP program: `python3` loading the rocprofiler-sdk double and
//! running its fake program (the runtime starts, a code object loads, kernels run, copies, HIP API calls, markers)
//! with the AMD tool library named in `ROCP_TOOL_LIBRARIES`, streaming to the tracer. The listing and the summary
//! are those of a CUDA run: demangled kernel names, copies, HIP API calls.

use std::process::{Command, Output};

fn hip_program() -> String {
    format!(
        "import ctypes\nd = ctypes.CDLL({:?}, mode=ctypes.RTLD_GLOBAL)\nd.rpsdk_fake_hip_program(6)\nprint('fake HIP program done')",
        gpu_tools_testing::double_path("rocprofiler_sdk")
            .display()
            .to_string()
    )
}

/// `gpu-tools trace --backend rocm ARGS` with nothing beside the executable: the AMD tool library is the one
/// embedded in it, written to a cache folder of its own.
fn trace_rocm(args: &[&str]) -> Output {
    let cache = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["trace", "--backend", "rocm"])
        .args(args)
        .env_remove("GPU_TOOLS_INJECT_ROCM_LIB")
        .env("XDG_CACHE_HOME", cache.path())
        .args(["--", "python3", "-c", &hip_program()])
        .env(
            gpu_tools::rocprofiler_sdk::ENV_VAR,
            gpu_tools_testing::double_path("rocprofiler_sdk"),
        )
        .output()
        .expect("run gpu-tools trace");
    println!(
        "{}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The embedded library was written to the cache and used from there.
    let written: Vec<String> = std::fs::read_dir(cache.path().join("gpu-tools"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        written
            .iter()
            .any(|n| n.starts_with("libgpu_tools_inject_rocm-") && n.ends_with(".so")),
        "the embedded AMD tool library is in the cache: {written:?}"
    );
    out
}

#[test]
fn a_fake_hip_program_is_listed_and_summarised() {
    let dir = tempfile::tempdir().unwrap();
    let chrome = dir.path().join("hip.json");
    let file = dir.path().join("hip.gputrace");
    let out = trace_rocm(&[
        "--list",
        "--chrome-trace",
        chrome.to_str().unwrap(),
        "-o",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("fake HIP program done"), "{stdout}");
    let kernels: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("kernel  "))
        .collect();
    assert!(!kernels.is_empty(), "{stdout}");
    assert!(
        kernels.iter().any(|l| l.contains("from hip")),
        "kernels carry the HIP call that launched them: {stdout}"
    );
    assert!(
        stdout.contains("--- summary (backend rocm): 1 process"),
        "{stdout}"
    );
    assert!(stdout.contains("memcpy"), "{stdout}");
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&chrome).unwrap()).expect("Chrome JSON");
    let events = doc["traceEvents"].as_array().unwrap();
    assert!(events.iter().any(|e| e["cat"] == "kernel"));
    assert!(std::fs::metadata(&file).unwrap().len() > 0);
}

#[test]
fn cupti_options_do_not_apply_to_the_rocm_backend() {
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args([
            "trace",
            "--backend",
            "rocm",
            "--cuda-graph-trace",
            "graph",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not apply to the rocm backend"));
}

#[test]
fn a_program_that_never_starts_hip_is_named_as_such() {
    let cache = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args([
            "trace",
            "--backend",
            "rocm",
            "--drain-timeout-ms",
            "200",
            "--",
            "true",
        ])
        .env_remove("GPU_TOOLS_INJECT_ROCM_LIB")
        .env("XDG_CACHE_HOME", cache.path())
        // rocprofiler-sdk is found (the double), so the program runs; it never starts HIP.
        .env(
            gpu_tools::rocprofiler_sdk::ENV_VAR,
            gpu_tools_testing::double_path("rocprofiler_sdk"),
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no traced process connected: true did not initialise HIP, or rocprofiler-sdk could not load"),
        "{stderr}"
    );
    assert!(!stderr.contains("CUDA"), "{stderr}");
}

/// The AMD tool library writes a file of its own where `GPU_TOOLS_TRACE_FILE` names one, `%h` and `%p` expanded as
/// the CUDA library expands them (both write through `gpu_tools_injection::sink`).
#[test]
fn the_amd_tool_library_expands_host_and_pid_in_its_file_name() {
    // A trace run puts the embedded library in the cache; the program then runs with it alone.
    let cache = tempfile::tempdir().unwrap();
    let traced = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["trace", "--backend", "rocm", "-q", "--", "true"])
        .args(["--drain-timeout-ms", "100"])
        .env_remove("GPU_TOOLS_INJECT_ROCM_LIB")
        .env("XDG_CACHE_HOME", cache.path())
        // rocprofiler-sdk found (the double): the rocm backend's check passes on a machine without ROCm.
        .env(
            gpu_tools::rocprofiler_sdk::ENV_VAR,
            gpu_tools_testing::double_path("rocprofiler_sdk"),
        )
        .output()
        .unwrap();
    let lib = std::fs::read_dir(cache.path().join("gpu-tools"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libgpu_tools_inject_rocm-"))
        })
        .unwrap_or_else(|| panic!("no AMD tool library in the cache: {traced:?}"));
    let out_dir = tempfile::tempdir().unwrap();
    let program = Command::new("python3")
        .args(["-c", &hip_program()])
        .env("ROCP_TOOL_LIBRARIES", &lib)
        .env(
            gpu_tools_injection::env::FILE,
            out_dir.path().join("%h-%p.gputrace"),
        )
        .env(
            gpu_tools::rocprofiler_sdk::ENV_VAR,
            gpu_tools_testing::double_path("rocprofiler_sdk"),
        )
        .spawn()
        .unwrap();
    let pid = program.id();
    let status = program.wait_with_output().unwrap().status;
    assert!(status.success(), "{status}");
    let want = format!("{}-{pid}.gputrace", gpu_tools::trace::host_name());
    let names: Vec<String> = std::fs::read_dir(out_dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, std::slice::from_ref(&want));
    let stats = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["stats", "--report", "processes"])
        .arg(out_dir.path().join(&want))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&stats.stdout);
    assert!(stats.status.success(), "{text}");
    assert!(text.contains(&pid.to_string()), "{text}");
}
