//! Benchmark of the debugger API's cost: one program doing N launch-and-synchronise steps, timed natively, under
//! `gpu-tools trace --backend debugger`, and under `cuda-gdb -batch -ex run`, in one run; then a probe that shows
//! where a synchronous round trip's time goes. Exits 1 when the native run or every traced run measured nothing.
//!
//! `cudbg_bench [--debuggee PATH] [--gpu-tools PATH] [--steps 10000] [--runs 3] [--cuda-gdb PATH] [--mode launch-raw]`
//! (`trace_bench` compares the debugger backend with the cupti backend)
//! `cudbg_bench --probe --debuggee PATH [--steps N] [--mode M] [--spin-us N]` (one in-process session)
//!
//! The debuggee (`debuggee_kernels launch N`) reports its own loop time (`loop_ms`); the table shows the best loop
//! time and the best whole-process time of each mode, and their ratio to native. With `--mode launch-raw` the
//! debuggee also reports how the loop splits between the launch and the synchronize calls and how often its thread
//! slept (a step that waits for the debugger process sleeps; a native step does not), from the best run.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpu_tools::cudbg::{DebugSession, Event, KernelType};

/// The debugger API's cost, measured in one run (or, with --probe, where one round trip's time goes).
#[derive(clap::Parser)]
struct Args {
    /// The debuggee program (default: `debuggee_kernels` beside this program, or staged as
    /// `example-debuggee_kernels`).
    #[arg(long)]
    debuggee: Option<String>,
    /// The `gpu-tools` executable (default: the one built beside this program, or staged as `bin-gpu-tools`).
    #[arg(long)]
    gpu_tools: Option<String>,
    /// cuda-gdb.
    #[arg(long, default_value = "cuda-gdb")]
    cuda_gdb: String,
    /// Launch+synchronize steps.
    #[arg(long, default_value_t = 10_000)]
    steps: u64,
    /// Debuggee mode.
    #[arg(long, default_value = "launch")]
    mode: String,
    /// Runs of each mode; the best is shown.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// One in-process session instead: where a synchronous round trip's time goes.
    #[arg(long)]
    probe: bool,
    /// Busy-wait window of the probe's session, microseconds.
    #[arg(long, default_value_t = 200)]
    spin_us: u64,
}

/// The number after `key` in the debuggee's report line.
fn field(text: &str, key: &str) -> Option<f64> {
    text.split_whitespace()
        .skip_while(|w| *w != key)
        .nth(1)
        .and_then(|v| v.parse().ok())
}

fn loop_ms(text: &str) -> Option<f64> {
    field(text, "loop_ms")
}

/// "launch ms | synchronize ms | sleeps per step" cells from the report of `launch-raw`; blanks for other modes.
fn split_cells(text: &str, steps: f64) -> String {
    let cell = |v: Option<f64>, per_step: bool| {
        v.map_or_else(String::new, |v| {
            if per_step {
                format!("{:.2}", v / steps)
            } else {
                format!("{v:.1}")
            }
        })
    };
    format!(
        "{} | {} | {}",
        cell(field(text, "launch_ms"), false),
        cell(field(text, "sync_ms"), false),
        cell(field(text, "voluntary_switches"), true)
    )
}

/// Runs once; returns (loop ms reported by the debuggee, wall ms, stdout), or why it failed.
fn run_once(mut cmd: Command) -> Result<(f64, f64, String), String> {
    let t0 = Instant::now();
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .output()
        .map_err(|e| e.to_string())?;
    let wall = t0.elapsed().as_secs_f64() * 1e3;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let l = loop_ms(&text).ok_or_else(|| {
        let tail: String = text
            .chars()
            .rev()
            .take(300)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!(
            "no loop_ms in output ({}): {tail}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    Ok((l, wall, text))
}

/// Median and 90th percentile in microseconds.
fn stats(v: &mut [Duration]) -> String {
    if v.is_empty() {
        return "n/a".into();
    }
    v.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    format!(
        "median {:.1} us, p90 {:.1} us (n={})",
        us(v[v.len() / 2]),
        us(v[v.len() * 9 / 10]),
        v.len()
    )
}

/// One session in this process: per synchronous round trip, the time from the driver's callback to the session
/// waking, the drain, the acknowledgement, and the time from the acknowledgement to the next callback (the
/// driver's transport plus the debuggee's own work).
fn probe(
    debuggee: &str,
    mode: &str,
    steps: &str,
    spin: Duration,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut cmd = Command::new(debuggee);
    cmd.args([mode, steps]).stdout(Stdio::piped());
    let mut session = DebugSession::builder(cmd).spin(spin).start()?;
    let mut stdout = session.take_stdout().ok_or("no stdout pipe")?;
    let (mut wake, mut drain, mut handle, mut ack, mut away) =
        (vec![], vec![], vec![], vec![], vec![]);
    let mut batches = 0u64;
    let mut events = 0u64;
    let mut launches = 0u64;
    let mut last_ack: Option<Instant> = None;
    while let Some(batch) = session.next_batch(Some(Duration::from_secs(60)))? {
        batches += 1;
        events += batch.events().len() as u64;
        launches += batch
            .events()
            .iter()
            .filter(|(_, e)| matches!(e, Event::KernelReady(k) if k.kernel_type == KernelType::Application))
            .count() as u64;
        let t = batch.timing();
        if let Some(n) = t.notified {
            wake.push(t.woke.saturating_duration_since(n));
            if let Some(a) = last_ack {
                if n > a {
                    away.push(n - a);
                }
            }
        }
        drain.push(t.drained - t.woke);
        let a0 = Instant::now();
        handle.push(a0 - t.drained);
        let sync = batch.needs_acknowledge();
        batch.acknowledge()?;
        let a1 = Instant::now();
        if sync {
            ack.push(a1 - a0);
        }
        last_ack = Some(a1);
    }
    let mut out = String::new();
    stdout.read_to_string(&mut out)?;
    drop(session);
    println!(
        "probe mode {mode}, spin {} us: {batches} batches, {events} events, {launches} launches; debuggee loop_ms {}",
        spin.as_micros(),
        loop_ms(&out).map_or_else(|| "?".into(), |v| format!("{v:.1}"))
    );
    println!("  callback -> session awake : {}", stats(&mut wake));
    println!("  drain both queues         : {}", stats(&mut drain));
    println!("  batch returned -> ack call: {}", stats(&mut handle));
    println!("  acknowledgeSyncEvents     : {}", stats(&mut ack));
    println!("  ack done -> next callback : {}", stats(&mut away));
    Ok(())
}

fn main() -> std::process::ExitCode {
    let args = <Args as clap::Parser>::parse();
    match run(&args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cudbg_bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// An executable beside this program: `names[0]` or another of `names`, else `fallback` (found in PATH).
fn beside(names: &[&str], fallback: &str) -> String {
    let dir = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(std::path::Path::to_path_buf))
        .unwrap_or_default();
    names
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
        .map_or_else(|| fallback.to_string(), |p| p.display().to_string())
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let (debuggee, trace, gdb, mode, runs) = (
        args.debuggee.clone().unwrap_or_else(|| {
            beside(
                &["debuggee_kernels", "example-debuggee_kernels"],
                "debuggee_kernels",
            )
        }),
        args.gpu_tools
            .clone()
            .unwrap_or_else(|| beside(&["bin-gpu-tools", "../gpu-tools"], "gpu-tools")),
        args.cuda_gdb.clone(),
        args.mode.clone(),
        args.runs,
    );
    let steps = args.steps.to_string();
    if args.probe {
        return probe(
            &debuggee,
            &mode,
            &steps,
            Duration::from_micros(args.spin_us),
        );
    }
    let device = gpu_tools::cuda::Driver::load()
        .ok()
        .and_then(|d| d.device_info(0).ok())
        .map_or_else(|| "unknown device".into(), |i| i.name);

    let traced = |extra: &'static [&'static str]| {
        let (trace, debuggee, mode, steps) =
            (trace.clone(), debuggee.clone(), mode.clone(), steps.clone());
        move || {
            let mut c = Command::new(&trace);
            c.args(["trace", "--quiet", "--backend", "debugger"])
                .args(extra)
                .args(["--", &debuggee, &mode, &steps]);
            c
        }
    };
    let native = || {
        let mut c = Command::new(&debuggee);
        c.args([&mode, &steps]);
        c
    };
    let gdbrun = || {
        let mut c = Command::new(&gdb);
        c.args(["-batch", "-ex", "run", "--args", &debuggee, &mode, &steps]);
        c
    };
    let default = traced(&[]);
    let no_spin = traced(&["--spin-us", "0"]);
    let push_pop = traced(&["--push-pop"]);
    let no_launch = traced(&["--defer-launches"]);
    let blocking = traced(&["--blocking-launches"]);
    let modes: [(&str, &dyn Fn() -> Command); 7] = [
        ("native", &native),
        ("trace (spin 200 us, no push/pop events)", &default),
        ("trace --spin-us 0", &no_spin),
        ("trace --push-pop", &push_pop),
        (
            "trace --defer-launches (no launch events: floor of an attached session)",
            &no_launch,
        ),
        (
            "trace --blocking-launches (kernel ends reported too)",
            &blocking,
        ),
        ("cuda-gdb -batch -ex run", &gdbrun),
    ];
    println!(
        "device: {device}; {steps} launch+synchronize steps (debuggee mode {mode}); best of {runs}"
    );
    println!(
        "| mode | loop ms | in launch ms | in synchronize ms | sleeps per step | process ms | loop / native |"
    );
    println!("|---|---|---|---|---|---|---|");
    let step_count: f64 = steps.parse().unwrap_or(1.0);
    let mut base = None;
    let mut measured = Vec::new();
    for (name, make) in modes {
        let mut best: Option<(f64, f64)> = None;
        let mut failure = None;
        let mut last_out = String::new();
        let mut best_out = String::new();
        for _ in 0..runs {
            match run_once(make()) {
                Ok((l, w, out)) => {
                    if best.is_none_or(|(bl, _)| l < bl) {
                        best_out.clone_from(&out);
                    }
                    best = Some(best.map_or((l, w), |(bl, bw)| (bl.min(l), bw.min(w))));
                    last_out = out;
                }
                Err(e) => failure = Some(e),
            }
        }
        match best {
            Some((l, w)) => {
                measured.push(name);
                let b = *base.get_or_insert(l);
                println!(
                    "| {name} | {l:.1} | {} | {w:.1} | {:.2}x |",
                    split_cells(&best_out, step_count),
                    l / b
                );
                if let Some(events) = last_out.lines().find(|l| l.starts_with("--- events")) {
                    println!("|  ({events}) | | | | | | |");
                }
            }
            None => println!(
                "| {name} | failed: {} | | | | | |",
                failure.unwrap_or_default()
            ),
        }
    }
    // A table without its baseline, or without any traced row, measured nothing.
    if !measured.contains(&"native") {
        return Err("the native run measured nothing: no baseline".into());
    }
    if !measured.iter().any(|m| m.starts_with("trace")) {
        return Err("no traced run measured anything".into());
    }
    Ok(())
}
