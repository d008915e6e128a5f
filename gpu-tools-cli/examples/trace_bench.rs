//! What tracing costs, in one run: N launch+synchronize steps natively, under `gpu-tools trace --backend cupti`
//! (with and without API records, and kernels only), under `gpu-tools trace --backend debugger` and under
//! `cuda-gdb -batch -ex run`; then a short PyTorch training loop natively, under `gpu-tools trace`, and under
//! torch.profiler on its own. Prints the device and two tables, and whether each bar is met:
//! the cupti backend at most 1.5x native on the launch loop; on the PyTorch loop, the time of its CUDA part under
//! `gpu-tools trace` within 5% of native and the same kernel, memcpy and memset counts as torch.profiler's.
//! Exits 1 when a bar is not met, which includes a row that measured nothing.
//!
//! `trace_bench [--steps 10000] [--runs 3] [--debuggee PATH] [--trace PATH] [--cuda-gdb PATH] [--mode launch-raw]
//!  [--python python3] [--torch-script PATH] [--torch-steps 5] [--skip-torch] [--skip-launch]`
//!
//! The debuggee (`debuggee_kernels launch-raw N`) reports its own loop time (`loop_ms`), the training script its
//! CUDA part's (`cuda_ms`); the tables show the best of `--runs` runs of each and the best whole-process time.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use clap::Parser;

/// Costs of tracing a CUDA program, measured in one run.
#[derive(Parser)]
struct Args {
    /// Launch+synchronize steps of the launch loop.
    #[arg(long, default_value_t = 10_000)]
    steps: u64,
    /// Runs of each mode; the best is shown.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// The debuggee (default: `debuggee_kernels` next to this program).
    #[arg(long)]
    debuggee: Option<PathBuf>,
    /// The `gpu-tools` executable (default: the one built beside this program, or staged as `bin-gpu-tools`).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// cuda-gdb.
    #[arg(long, default_value = "cuda-gdb")]
    cuda_gdb: String,
    /// Debuggee mode of the launch loop (`launch-raw`: context current once, as a runtime-API program).
    #[arg(long, default_value = "launch-raw")]
    mode: String,
    /// Python with PyTorch.
    #[arg(long, default_value = "python3")]
    python: String,
    /// The training script (default: `gpu-host/python/torch_train.py` of this checkout, or next to this program).
    #[arg(long)]
    torch_script: Option<PathBuf>,
    /// Training steps.
    #[arg(long, default_value_t = 5)]
    torch_steps: u32,
    /// Leave out the PyTorch part.
    #[arg(long)]
    skip_torch: bool,
    /// Leave out the launch loop.
    #[arg(long)]
    skip_launch: bool,
}

/// A sibling executable: `NAME` or the staged `example-NAME` in this program's folder.
fn sibling(name: &str) -> PathBuf {
    let dir = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    [name.to_string(), format!("example-{name}")]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// The `gpu-tools` executable: staged beside this program as `bin-gpu-tools`, or built in the folder above
/// (`target/release/examples/` → `target/release/gpu-tools`), or else found in PATH.
fn gpu_tools() -> PathBuf {
    let dir = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    [
        dir.join("bin-gpu-tools"),
        dir.join("../gpu-tools"),
        dir.join("gpu-tools"),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .unwrap_or_else(|| PathBuf::from("gpu-tools"))
}

/// The number after `key` in whitespace-separated text.
fn field(text: &str, key: &str) -> Option<f64> {
    text.split_whitespace()
        .skip_while(|w| *w != key)
        .nth(1)
        .and_then(|v| v.trim_end_matches(',').parse().ok())
}

/// The number before `key` in `gpu-tools trace`'s summary line ("... 20001 kernels, 0 memcpys, ...").
fn summary_count(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("--- summary"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    words
        .windows(2)
        .find(|w| w[1].trim_end_matches(',') == key)
        .and_then(|w| w[0].parse().ok())
}

struct RunResult {
    /// The program's own time (`loop_ms` / `cuda_ms`).
    own_ms: f64,
    wall_ms: f64,
    stdout: String,
}

fn run_once(mut cmd: Command, key: &str) -> Result<RunResult, String> {
    let t0 = Instant::now();
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let own_ms = field(&stdout, key).ok_or_else(|| {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: String = err.lines().rev().take(4).collect::<Vec<_>>().join(" | ");
        format!("no {key} in the output ({}); stderr: {tail}", out.status)
    })?;
    Ok(RunResult {
        own_ms,
        wall_ms,
        stdout,
    })
}

/// Best of `runs` (by the program's own time; best process time separately), with progress on stderr.
fn best(
    label: &str,
    runs: usize,
    key: &str,
    make: &dyn Fn() -> Command,
) -> Result<(f64, f64, String), String> {
    let mut best: Option<(f64, f64, String)> = None;
    let mut failure = None;
    for r in 0..runs {
        eprint!("\r[trace_bench] {label}: run {}/{runs}   ", r + 1);
        match run_once(make(), key) {
            Ok(res) => {
                best = Some(match best {
                    None => (res.own_ms, res.wall_ms, res.stdout),
                    Some((o, w, _)) if res.own_ms < o => {
                        (res.own_ms, w.min(res.wall_ms), res.stdout)
                    }
                    Some((o, w, s)) => (o, w.min(res.wall_ms), s),
                });
            }
            Err(e) => failure = Some(e),
        }
    }
    eprintln!();
    best.ok_or_else(|| failure.unwrap_or_default())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let debuggee = args
        .debuggee
        .clone()
        .unwrap_or_else(|| sibling("debuggee_kernels"));
    let trace = args.trace.clone().unwrap_or_else(gpu_tools);
    let device = gpu_tools::cuda::Driver::load()
        .ok()
        .and_then(|d| d.device_info(0).ok())
        .map_or_else(|| "unknown device".into(), |i| i.name);
    let driver = gpu_tools::cuda::Driver::load()
        .ok()
        .and_then(|d| d.version().ok())
        .map_or_else(|| "?".into(), |v| format!("{}.{}", v / 1000, v % 1000 / 10));
    println!("device: {device} (CUDA driver API {driver})");
    let mut bars_met = true;
    if !args.skip_launch {
        bars_met &= launch_table(&args, &debuggee, &trace);
    }
    if !args.skip_torch {
        bars_met &= torch_table(&args, &trace);
    }
    if bars_met {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn launch_table(args: &Args, debuggee: &Path, trace: &Path) -> bool {
    let steps = args.steps.to_string();
    let program = |c: &mut Command| {
        c.arg("--").arg(debuggee).args([&args.mode, &steps]);
    };
    let native = || {
        let mut c = Command::new(debuggee);
        c.args([&args.mode, &steps]);
        c
    };
    let traced = |extra: &'static [&'static str]| {
        move || {
            let mut c = Command::new(trace);
            c.args(["trace", "--quiet"]).args(extra);
            program(&mut c);
            c
        }
    };
    let cupti = traced(&["--backend", "cupti"]);
    let cupti_no_api = traced(&["--backend", "cupti", "--no-api"]);
    let cupti_kernels = traced(&["--backend", "cupti", "--kinds", "kernel"]);
    let debugger = traced(&["--backend", "debugger"]);
    let gdb = || {
        let mut c = Command::new(&args.cuda_gdb);
        c.args(["-batch", "-ex", "run", "--args"])
            .arg(debuggee)
            .args([&args.mode, &steps]);
        c
    };
    let modes: [(&str, &dyn Fn() -> Command, bool); 6] = [
        ("native", &native, false),
        (
            "gpu-tools trace --backend cupti (kernels, copies, sets, API calls)",
            &cupti,
            true,
        ),
        (
            "gpu-tools trace --backend cupti --no-api",
            &cupti_no_api,
            true,
        ),
        (
            "gpu-tools trace --backend cupti --kinds kernel",
            &cupti_kernels,
            true,
        ),
        ("gpu-tools trace --backend debugger", &debugger, true),
        ("cuda-gdb -batch -ex run", &gdb, false),
    ];
    println!(
        "\n{} launch+synchronize steps (debuggee mode {}), best of {}",
        args.steps, args.mode, args.runs
    );
    println!("| mode | loop ms | process ms | loop / native | kernels in the trace |");
    println!("|---|---|---|---|---|");
    let mut base = None;
    let mut cupti_ratio = None;
    let mut counts_right = true;
    for (name, make, counted) in modes {
        match best(name, args.runs, "loop_ms", make) {
            Ok((l, w, out)) => {
                let b = *base.get_or_insert(l);
                let kernels = if counted {
                    let n = summary_count(&out, "kernels");
                    // The cupti backend must see every launch exactly once (the debugger one sees them too).
                    if n != Some(args.steps) {
                        counts_right = false;
                    }
                    n.map_or_else(|| "?".into(), |n| n.to_string())
                } else {
                    String::new()
                };
                if cupti_ratio.is_none() && name.contains("cupti") {
                    cupti_ratio = Some(l / b);
                }
                println!("| {name} | {l:.1} | {w:.1} | {:.2}x | {kernels} |", l / b);
            }
            Err(e) => {
                println!("| {name} | failed: {e} | | | |");
                if name.contains("cupti") {
                    counts_right = false;
                }
            }
        }
    }
    let ok = cupti_ratio.is_some_and(|r| r <= 1.5);
    println!(
        "bar: cupti backend at most 1.5x native on the launch loop: {} ({})",
        if ok { "met" } else { "NOT met" },
        cupti_ratio.map_or_else(|| "no figure".into(), |r| format!("{r:.2}x"))
    );
    println!(
        "check: every launch traced exactly once by each gpu-tools trace row: {}",
        if counts_right { "yes" } else { "NO" }
    );
    ok && counts_right
}

fn torch_script(args: &Args) -> PathBuf {
    if let Some(p) = &args.torch_script {
        return p.clone();
    }
    let candidates = [
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../gpu-host/python/torch_train.py"),
        PathBuf::from("gpu-host/python/torch_train.py"),
        sibling("torch_train.py"),
    ];
    candidates
        .iter()
        .find(|p| p.exists())
        .cloned()
        .unwrap_or_else(|| candidates[1].clone())
}

fn torch_table(args: &Args, trace: &Path) -> bool {
    let script = torch_script(args);
    let steps = args.torch_steps.to_string();
    let python = |extra: &'static [&'static str]| {
        let script = script.clone();
        let steps = steps.clone();
        move || {
            let mut c = Command::new(&args.python);
            c.arg(&script).args(["--steps", &steps]).args(extra);
            c
        }
    };
    let native = python(&[]);
    let profiled = python(&["--profile"]);
    let traced = || {
        let mut c = Command::new(trace);
        c.args(["trace", "--quiet", "--"])
            .arg(&args.python)
            .arg(&script)
            .args(["--steps", &steps]);
        c
    };
    println!(
        "\nPyTorch training loop ({} steps, {}), best of {}",
        args.torch_steps,
        script.display(),
        args.runs
    );
    println!(
        "| run | CUDA part ms | process ms | CUDA part / native | kernels | memcpys | memsets |"
    );
    println!("|---|---|---|---|---|---|---|");
    let native = best("torch native", args.runs, "cuda_ms", &native);
    let traced = best("torch under gpu-tools trace", args.runs, "cuda_ms", &traced);
    let profiled = best(
        "torch under torch.profiler",
        args.runs,
        "cuda_ms",
        &profiled,
    );
    let base = native.as_ref().ok().map(|n| n.0);
    let row = |name: &str,
               r: &Result<(f64, f64, String), String>,
               counts: Option<[Option<u64>; 3]>| match r {
        Ok((c, w, _)) => {
            let ratio = base.map_or_else(|| "?".into(), |b| format!("{:.3}x", c / b));
            let cell = |i: usize| {
                counts
                    .and_then(|c| c[i])
                    .map_or_else(String::new, |n| n.to_string())
            };
            println!(
                "| {name} | {c:.1} | {w:.1} | {ratio} | {} | {} | {} |",
                cell(0),
                cell(1),
                cell(2)
            );
        }
        Err(e) => println!("| {name} | failed: {e} | | | | | |"),
    };
    let trace_counts = traced
        .as_ref()
        .ok()
        .map(|(_, _, out)| ["kernels", "memcpys", "memsets"].map(|k| summary_count(out, k)));
    let profiler_counts = profiled.as_ref().ok().map(|(_, _, out)| {
        ["kernels", "memcpys", "memsets"].map(|k| field(out, k).map(|v| v as u64))
    });
    row("native", &native, None);
    row("gpu-tools trace", &traced, trace_counts);
    row("torch.profiler", &profiled, profiler_counts);
    let time_ok = match (&native, &traced) {
        (Ok(n), Ok(t)) => t.0 <= n.0 * 1.05,
        _ => false,
    };
    let counts_ok = trace_counts.is_some() && trace_counts == profiler_counts;
    println!(
        "bar: CUDA part under gpu-tools trace within 5% of native: {}",
        if time_ok { "met" } else { "NOT met" }
    );
    println!(
        "bar: kernel, memcpy and memset counts equal torch.profiler's: {}",
        if counts_ok { "met" } else { "NOT met" }
    );
    time_ok && counts_ok
}
