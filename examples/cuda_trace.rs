//! `cuda_trace [--chrome-trace FILE] [--quiet] [--spin-us N] [--push-pop] [--defer-launches] [--blocking-launches]
//!  -- PROGRAM ARGS...`
//!
//! Runs a CUDA program under a [`DebugSession`] and prints its module loads and kernel launches (kernel name from
//! the module's ELF symbols where found, grid and block dimensions), then a summary per kernel. With
//! `--chrome-trace FILE` it also writes a Chrome trace (JSON) that Perfetto and chrome://tracing open.
//! `--spin-us N` sets how long the session busy-waits for events before it sleeps (default 200).
//! The session announces `NO_CONTEXT_PUSH_POP_EVENTS` (a program that pushes and pops its context per call would
//! otherwise stop twice more per call); `--push-pop` keeps those events. `--defer-launches` turns launch events off
//! (the driver then reports no launches at all; only for measuring what the events cost).
//!
//! `--blocking-launches` makes each launch wait for its kernel, as cuda-gdb's `set cuda launch_blocking on` does;
//! only then does the driver report kernel ends, so kernels get durations (in the Chrome trace, and a total per
//! kernel in the summary). A duration is the time between the session seeing the kernel's ready and finished
//! events: the kernel plus the driver's round trips, an upper bound of its run time.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufWriter, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitCode};
use std::time::Instant;

use gpu_tools::cudbg::elf::{self, FunctionSymbol};
use gpu_tools::cudbg::{DebugSession, Event, KernelType};

struct Args {
    chrome: Option<String>,
    quiet: bool,
    push_pop: bool,
    defer: bool,
    blocking: bool,
    spin_us: Option<u64>,
    program: Vec<String>,
}

fn parse() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut args = Args {
        chrome: None,
        quiet: false,
        push_pop: false,
        defer: false,
        blocking: false,
        spin_us: None,
        program: Vec::new(),
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--chrome-trace" => args.chrome = Some(it.next().ok_or("--chrome-trace needs a file")?),
            "--quiet" => args.quiet = true,
            "--push-pop" => args.push_pop = true,
            "--defer-launches" => args.defer = true,
            "--blocking-launches" => args.blocking = true,
            "--spin-us" => {
                let v = it.next().ok_or("--spin-us needs a number")?;
                args.spin_us = Some(v.parse().map_err(|_| format!("bad --spin-us {v}"))?);
            }
            "--" => {
                args.program = it.collect();
                break;
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    if args.program.is_empty() {
        return Err(
            "usage: cuda_trace [--chrome-trace FILE] [--quiet] [--spin-us N] [--push-pop] [--defer-launches] \
             [--blocking-launches] -- PROGRAM ARGS..."
                .into(),
        );
    }
    Ok(args)
}

#[derive(Default)]
struct KernelStats {
    launches: u64,
    dims: BTreeMap<String, u64>,
    /// Kernels with a finished event, and their summed ready-to-finished time.
    finished: u64,
    busy_us: f64,
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cuda_trace: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(args: &Args) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let mut cmd = Command::new(&args.program[0]);
    cmd.args(&args.program[1..]);
    let t0 = Instant::now();
    let mut builder = DebugSession::builder(cmd);
    if let Some(us) = args.spin_us {
        builder = builder.spin(std::time::Duration::from_micros(us));
    }
    if !args.push_pop {
        builder = builder.capabilities(
            gpu_tools::sys::cudbg::CUDBG_DEBUGGER_CAPABILITY_NO_CONTEXT_PUSH_POP_EVENTS,
        );
    }
    let mut session = builder.blocking_launches(args.blocking).start()?;
    if args.defer {
        session.set_launch_events(false)?;
    }
    let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
    let out = std::io::stdout();
    let mut out = BufWriter::new(out.lock());
    let mut symbols: HashMap<u64, Vec<FunctionSymbol>> = HashMap::new();
    let mut stats: BTreeMap<String, KernelStats> = BTreeMap::new();
    let mut trace: Vec<String> = Vec::new();
    let mut open: HashMap<u64, (String, f64)> = HashMap::new();
    while let Some(mut batch) = session.next_batch(None)? {
        let us = t0.elapsed().as_secs_f64() * 1e6;
        // Only a user module's image is read while the program is held; otherwise let it go on at once.
        if !batch
            .events()
            .iter()
            .any(|(_, e)| matches!(e, Event::ElfImageLoaded(img) if !img.is_system()))
        {
            batch.release()?;
        }
        for (_, event) in &batch {
            *counts.entry(event.name()).or_default() += 1;
            match event {
                Event::ElfImageLoaded(img) if !img.is_system() => {
                    let bytes = batch.session().elf_image(img)?;
                    let syms = elf::function_symbols(&bytes);
                    if !args.quiet {
                        writeln!(
                            out,
                            "module loaded: module {:#x} handle {:#x} {} bytes, {} functions",
                            img.module,
                            img.handle,
                            img.size,
                            syms.len()
                        )?;
                    }
                    symbols.insert(img.module, syms);
                }
                Event::KernelReady(k) if k.kernel_type != KernelType::System => {
                    let name = symbols
                        .get(&k.module)
                        .and_then(|s| elf::function_at(s, k.function_entry))
                        .map_or_else(
                            || format!("function@{:#x}", k.function_entry),
                            str::to_owned,
                        );
                    if !args.quiet {
                        writeln!(
                            out,
                            "launch grid {} {name} grid {} block {}",
                            k.grid_id, k.grid_dim, k.block_dim
                        )?;
                    }
                    let s = stats.entry(name.clone()).or_default();
                    s.launches += 1;
                    *s.dims
                        .entry(format!("grid {} block {}", k.grid_dim, k.block_dim))
                        .or_default() += 1;
                    // Without finished events nothing would ever take a launch out again.
                    if args.chrome.is_some() || args.blocking {
                        open.insert(k.grid_id, (name, us));
                    }
                }
                Event::KernelFinished(k) => {
                    if let Some((name, start)) = open.remove(&k.grid_id) {
                        if let Some(s) = stats.get_mut(&name) {
                            s.finished += 1;
                            s.busy_us += (us - start).max(0.0);
                        }
                        trace.push(format!(
                            "{{\"name\":{},\"ph\":\"X\",\"ts\":{start:.1},\"dur\":{:.1},\"pid\":1,\"tid\":{}}}",
                            json_str(&name),
                            (us - start).max(0.0),
                            k.tid
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    // Kernels without a finish event become instant markers.
    for (grid, (name, start)) in open {
        trace.push(format!(
            "{{\"name\":{},\"ph\":\"i\",\"s\":\"t\",\"ts\":{start:.1},\"pid\":1,\"tid\":0,\"args\":{{\"grid\":{grid}}}}}",
            json_str(&name)
        ));
    }
    let status = session.close()?.exit;
    let counts: Vec<String> = counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
    writeln!(out, "--- events: {}", counts.join(", "))?;
    writeln!(out, "--- summary: {} kernels", stats.len())?;
    for (name, s) in &stats {
        writeln!(out, "{:>8}  {name}", s.launches)?;
        if s.finished > 0 {
            writeln!(
                out,
                "          {} finished, {:.1} us from ready to finished in all, {:.1} us each",
                s.finished,
                s.busy_us,
                s.busy_us / s.finished as f64
            )?;
        }
        for (dims, n) in &s.dims {
            writeln!(out, "          {n} x {dims}")?;
        }
    }
    out.flush()?;
    if let Some(path) = &args.chrome {
        std::fs::write(
            path,
            format!("{{\"traceEvents\":[{}]}}\n", trace.join(",\n")),
        )?;
    }
    // The program's own exit code; 128 + N when signal N ended it, as shells report it.
    let code = match status {
        Some(s) => match (s.code(), s.signal()) {
            (Some(code), _) => code,
            (None, Some(signal)) => {
                eprintln!(
                    "cuda_trace: the program was ended by signal {signal}; events the driver still held are lost"
                );
                128 + signal
            }
            (None, None) => 1,
        },
        None => 1,
    };
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}
