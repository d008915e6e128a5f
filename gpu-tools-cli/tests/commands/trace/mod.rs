//! `gpu-tools trace --backend cupti` end to end without a GPU: the traced program is this test binary run again as
//! a stand-in for a CUDA program with the injection library (`program`). It connects to the socket `gpu-tools
//! trace` names in `GPU_TOOLS_TRACE_SOCKET` and streams records in the crate's format, as the library does, for each
//! scenario of the `STANDIN` variable. One module per concern:
//! - `scenarios`: the listing, the summary, the Chrome trace and the exit code of each scenario (a normal run,
//!   dropped records, a crash, a program that never uses CUDA, two processes, a forked child that keeps the
//!   connection open, a corrupt stream);
//! - `before_run`: the checks made before the program runs (the program, the driver, CUPTI, the trace file, the
//!   options of the other backend, attaching);
//! - `embedded_library`: the injection library embedded in `gpu-tools`, written to the cache and handed over;
//! - `options_and_outputs`: what the options set for the injection library, the progress line, the trace file and
//!   standard output.

mod before_run;
mod embedded_library;
mod options_and_outputs;
mod program;
mod scenarios;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Instant;

/// The variable that tells the stand-in which scenario to play.
const STANDIN: &str = "GPU_TOOLS_TEST_STANDIN";

/// `gpu-tools trace` with the CUDA driver double, so that the cupti backend's driver check passes here.
fn gpu_tools_trace() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpu-tools"));
    c.arg("trace")
        .env(
            "GPU_TOOLS_CUDA_DRIVER_LIB",
            gpu_tools_testing::double_path("cuda_driver"),
        )
        .env_remove("GPU_TOOLS_INJECT_LIB");
    c
}

/// Runs `gpu-tools trace ARGS -- <this binary as stand-in> SCENARIO`.
fn trace(scenario: &str, args: &[&str]) -> Output {
    trace_with(scenario, args, &[])
}

/// Variable that makes the stand-in wait this many milliseconds after it sent everything.
const LINGER: &str = "GPU_TOOLS_TEST_LINGER_MS";

/// The arguments that make this test binary run the stand-in program (`standin`, which reads [`STANDIN`]).
const STANDIN_TEST: [&str; 5] = [
    "trace::standin",
    "--exact",
    "--ignored",
    "--nocapture",
    "--test-threads=1",
];

/// [`trace`], with variables for the stand-in.
fn trace_with(scenario: &str, args: &[&str], vars: &[(&str, &str)]) -> Output {
    let me = std::env::current_exe().unwrap();
    let t0 = Instant::now();
    let out = gpu_tools_trace()
        .envs(vars.iter().copied())
        .args(["--backend", "cupti", "--inject-lib"])
        .arg(&me)
        .args(args)
        .arg("--")
        .arg(&me)
        .args(STANDIN_TEST)
        .env(STANDIN, scenario)
        .output()
        .expect("run gpu-tools trace");
    println!(
        "scenario {scenario}: {} in {:.2} s\n--- stdout\n{}--- stderr\n{}",
        out.status,
        t0.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The names in a folder, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Runs `gpu-tools trace ARGS` on the stand-in's "environment" scenario and returns what it saw.
fn environment(args: &[&str]) -> String {
    let me = std::env::current_exe().unwrap();
    let out = gpu_tools_trace()
        .args(["--backend", "cupti", "--inject-lib"])
        .arg(&me)
        .args(args)
        .arg("--")
        .arg(&me)
        .args(STANDIN_TEST)
        .env(STANDIN, "environment")
        .output()
        .unwrap();
    text(&out.stdout)
}

/// The stand-in program (run only by the tests of this module's children, through `gpu-tools trace`).
#[test]
#[ignore = "a stand-in traced program, run by the other tests"]
fn standin() {
    if let Ok(scenario) = std::env::var(STANDIN) {
        program::play(&scenario);
    }
}
