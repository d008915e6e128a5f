//! `GPU_TOOLS_PYTHON` names the Python whose wheels are searched for CUPTI: a value that is not a working Python,
//! or a Python without the `nvidia-cuda-cupti` wheel, is reported in the `LoadError`, not ignored. The variable is
//! read once per process, so each case runs in a child process of this binary (`case`, named by `CASE`).
#![cfg(feature = "cupti")]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use gpu_tools::loader::{Origin, Rejection};

const CASE: &str = "GPU_TOOLS_TEST_PYTHON_CASE";

/// Runs the `case` test of this binary in a child with `GPU_TOOLS_PYTHON=python` and no other CUPTI location.
fn run_case(case: &str, python: &Path) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "loading_python::case",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(CASE, case)
        .env("GPU_TOOLS_PYTHON", python)
        .env_remove("GPU_TOOLS_CUPTI_LIB")
        .env_remove("CUDA_HOME")
        .env_remove("CUDA_PATH")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    println!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "case {case} failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.contains("nothing to check") {
        gpu_tools_testing::skip_unless_ci(&format!(
            "case {case}: CUPTI loads here without GPU_TOOLS_PYTHON, so the case checks nothing"
        ));
        return;
    }
    assert!(
        stdout.contains(&format!("{case}: ")),
        "case {case} did not run: {stdout}"
    );
}

#[test]
fn a_bad_gpu_tools_python_is_reported() {
    let dir = std::env::temp_dir().join(format!("gpu-tools-loading-python-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Not there at all.
    run_case("bad", &dir.join("no-python"));
    // A file that runs, but as no Python.
    let failing = dir.join("failing-python");
    std::fs::write(&failing, "#!/bin/sh\nexit 3\n").unwrap();
    std::fs::set_permissions(&failing, std::fs::Permissions::from_mode(0o755)).unwrap();
    run_case("failing", &failing);
    // A "Python" whose one site-packages folder has no NVIDIA wheel.
    let site = dir.join("site-packages");
    std::fs::create_dir(&site).unwrap();
    let no_wheel = dir.join("python-without-wheel");
    std::fs::write(&no_wheel, format!("#!/bin/sh\necho {}\n", site.display())).unwrap();
    std::fs::set_permissions(&no_wheel, std::fs::Permissions::from_mode(0o755)).unwrap();
    run_case("no-wheel", &no_wheel);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "run by a_bad_gpu_tools_python_is_reported in a child process"]
fn case() {
    let Ok(case) = std::env::var(CASE) else {
        return;
    };
    let python = std::env::var("GPU_TOOLS_PYTHON").unwrap();
    let err = match gpu_tools::cupti::CuptiLibrary::load() {
        Ok(cupti) => {
            println!(
                "CUPTI loaded from {:?} here: nothing to check",
                cupti.path()
            );
            return;
        }
        Err(e) => e,
    };
    let text = err.to_string();
    println!("{case}: {text}");
    let bad: Vec<_> = err
        .attempts()
        .iter()
        .filter(|a| matches!(a.rejection, Rejection::BadPython(_)))
        .collect();
    match case.as_str() {
        "bad" | "failing" => {
            assert_eq!(bad.len(), 1, "{err:#}");
            assert_eq!(bad[0].path, Path::new(&python));
            assert_eq!(bad[0].origin, Origin::EnvVar("GPU_TOOLS_PYTHON"));
            let why = if case == "bad" {
                "cannot be run"
            } else {
                "fails to run a Python script"
            };
            assert!(
                text.contains(&format!(
                    "{python} ($GPU_TOOLS_PYTHON): not a usable Python: {why}"
                )),
                "{text}"
            );
            assert!(
                text.contains(&format!("$GPU_TOOLS_PYTHON names {python}, which {why}")),
                "{text}"
            );
        }
        "no-wheel" => {
            assert!(bad.is_empty(), "{err:#}");
            assert!(
                err.attempts()
                    .iter()
                    .any(|a| a.origin == Origin::PythonWheel
                        && a.path
                            .ends_with("site-packages/nvidia/cu13/lib/libcupti.so.13")),
                "{err:#}"
            );
            assert!(
                text.contains(&format!(
                    "$GPU_TOOLS_PYTHON names {python}, which has no `nvidia-cuda-cupti` wheel: `{python} -m pip \
                     install nvidia-cuda-cupti`"
                )),
                "{text}"
            );
        }
        other => panic!("unknown case {other}"),
    }
    assert!(
        !text.contains("refused"),
        "nothing was found to refuse: {text}"
    );
}
