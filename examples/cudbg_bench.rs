//! Benchmark of the debugger API's cost: one program doing N launch-and-synchronise steps, timed natively, under
//! `cuda_trace`, and under `cuda-gdb -batch -ex run`, in one run.
//!
//! `cudbg_bench --debuggee PATH --trace PATH [--steps 10000] [--runs 3] [--cuda-gdb PATH] [--mode launch-raw]`
//!
//! The debuggee (`debuggee_kernels launch N`) reports its own loop time (`loop_ms`); the table shows the best loop
//! time and the best whole-process time of each mode, and their ratio to native.

use std::process::{Command, Stdio};
use std::time::Instant;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// Runs once; returns (loop ms reported by the debuggee, wall ms), or why it failed.
fn run_once(mut cmd: Command) -> Result<(f64, f64), String> {
    let t0 = Instant::now();
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .output()
        .map_err(|e| e.to_string())?;
    let wall = t0.elapsed().as_secs_f64() * 1e3;
    let text = String::from_utf8_lossy(&out.stdout);
    let loop_ms = text
        .split_whitespace()
        .skip_while(|w| *w != "loop_ms")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| {
            format!(
                "no loop_ms in output ({}): {}{}",
                out.status,
                text.chars()
                    .rev()
                    .take(300)
                    .collect::<String>()
                    .chars()
                    .rev()
                    .collect::<String>(),
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
    Ok((loop_ms, wall))
}

fn main() {
    let debuggee = arg("--debuggee").unwrap_or_else(|| "debuggee_kernels".into());
    let trace = arg("--trace").unwrap_or_else(|| "cuda_trace".into());
    let gdb = arg("--cuda-gdb").unwrap_or_else(|| "cuda-gdb".into());
    let steps = arg("--steps").unwrap_or_else(|| "10000".into());
    let mode = arg("--mode").unwrap_or_else(|| "launch".into());
    let runs: usize = arg("--runs").and_then(|r| r.parse().ok()).unwrap_or(3);
    let device = gpu_tools::cuda::Driver::load()
        .ok()
        .and_then(|d| d.device_info(0).ok())
        .map_or_else(|| "unknown device".into(), |i| i.name);

    let native = || {
        let mut c = Command::new(&debuggee);
        c.args([&mode, &steps]);
        c
    };
    let traced = || {
        let mut c = Command::new(&trace);
        c.args(["--quiet", "--", &debuggee, &mode, &steps]);
        c
    };
    let traced_lean = || {
        let mut c = Command::new(&trace);
        c.args(["--quiet", "--no-push-pop", "--", &debuggee, &mode, &steps]);
        c
    };
    let traced_deferred = || {
        let mut c = Command::new(&trace);
        c.args([
            "--quiet",
            "--no-push-pop",
            "--defer-launches",
            "--",
            &debuggee,
            &mode,
            &steps,
        ]);
        c
    };
    let gdbrun = || {
        let mut c = Command::new(&gdb);
        c.args(["-batch", "-ex", "run", "--args", &debuggee, &mode, &steps]);
        c
    };
    let modes: [(&str, &dyn Fn() -> Command); 5] = [
        ("native", &native),
        ("cuda_trace", &traced),
        ("cuda_trace --no-push-pop", &traced_lean),
        (
            "cuda_trace --no-push-pop --defer-launches",
            &traced_deferred,
        ),
        ("cuda-gdb -batch -ex run", &gdbrun),
    ];
    println!(
        "device: {device}; {steps} launch+synchronize steps (debuggee mode {mode}); best of {runs}"
    );
    println!("| mode | loop ms | process ms | loop / native |");
    println!("|---|---|---|---|");
    let mut base = None;
    for (name, make) in modes {
        let mut best: Option<(f64, f64)> = None;
        let mut failure = None;
        for _ in 0..runs {
            match run_once(make()) {
                Ok((l, w)) => {
                    best = Some(best.map_or((l, w), |(bl, bw)| (bl.min(l), bw.min(w))));
                }
                Err(e) => failure = Some(e),
            }
        }
        match best {
            Some((l, w)) => {
                let b = *base.get_or_insert(l);
                println!("| {name} | {l:.1} | {w:.1} | {:.2}x |", l / b);
            }
            None => println!("| {name} | failed: {} | | |", failure.unwrap_or_default()),
        }
    }
}
