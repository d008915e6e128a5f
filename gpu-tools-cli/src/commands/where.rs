//! `gpu-tools where PID`: where is my hung CUDA job?

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use clap::builder::{PossibleValuesParser, TypedValueParser};
use gpu_tools::cudbg::elf::{self, FunctionSymbol};
use gpu_tools::cudbg::{
    AttachProtocol, DebugSession, DetachProcedure, Event, SessionError, WarpInfo,
};

use crate::demangle::readable as demangle;
use crate::failure::Outcome;

/// Print where the warps of a running CUDA process are, then let it go on.
///
/// Attaches to the CUDA process PID with the CUDA debugger API, suspends each GPU it uses, prints every running
/// kernel (device, grid id, demangled name, grid and block dimensions) with its warps' PCs and the function each
/// PC lies in (from the module's ELF symbols), resumes, and detaches: the process runs on as before, also when
/// this command fails on the way. Needs the right to trace the process (its owner, or root; see
/// /proc/sys/kernel/yama/ptrace_scope). Exits 0 when the process was examined (or had ended), 1 otherwise.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Process id of the CUDA program.
    pid: u32,
    /// Print each step of the attach and the detach.
    #[arg(long)]
    verbose: bool,
    /// Warps to print per kernel (the rest are counted).
    #[arg(long, default_value_t = 8)]
    max_warps: usize,
    /// How the process's driver is asked to start its debugger back end: `auto` (the driver's attach
    /// descriptor where it has one, CUDA 13.1 on), `call` (call cudbgApiAttach in the process), `descriptor`.
    #[arg(
        long,
        default_value = "auto",
        value_parser = PossibleValuesParser::new(AttachProtocol::NAMES)
            .map(|s| s.parse::<AttachProtocol>().unwrap_or_default())
    )]
    protocol: AttachProtocol,
    /// How the process is let go: `default` (the documented steps without calling cudbgApiDetach in the process:
    /// with that call, driver 580 crashes at exit a process that destroyed its last CUDA context first) or
    /// `documented` (NVIDIA's procedure as written).
    #[arg(
        long,
        default_value = "default",
        value_parser = PossibleValuesParser::new(DetachProcedure::NAMES)
            .map(|s| s.parse::<DetachProcedure>().unwrap_or_default())
    )]
    detach: DetachProcedure,
}

pub fn run(args: Args) -> Outcome {
    crate::pid::check(args.pid)?;
    examine(&args)?;
    Ok(0)
}

fn examine(args: &Args) -> Result<(), gpu_tools::Error> {
    let mut builder = DebugSession::attach_builder(args.pid)
        .protocol(args.protocol)
        .detach_procedure(args.detach)
        .capabilities(gpu_tools::sys::cudbg::CUDBG_DEBUGGER_CAPABILITY_NO_CONTEXT_PUSH_POP_EVENTS);
    if args.verbose {
        builder = builder.progress(|step| eprintln!("attach: {step}"));
    }
    let mut session = builder.start()?;
    // The driver reports the modules already loaded while it attaches; their symbols name the kernels. A process
    // that keeps launching never goes quiet, so the events are taken for a bounded time only.
    let mut symbols: HashMap<u64, Vec<FunctionSymbol>> = HashMap::new();
    let deadline = Instant::now() + Duration::from_millis(300);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let batch = match session.next_batch(Some(left)) {
            Ok(Some(batch)) => batch,
            Ok(None) => break,
            Err(gpu_tools::Error::Session(SessionError::Timeout(_))) => break,
            Err(e) => return Err(e),
        };
        for (_, event) in &batch {
            if let Event::ElfImageLoaded(img) = event {
                let bytes = batch.session().elf_image(img)?;
                symbols.insert(img.module, elf::function_symbols(&bytes));
            }
        }
    }
    if let Some(status) = session.exit_status()? {
        println!(
            "process {} ended ({status}) before it could be examined",
            args.pid
        );
        return Ok(());
    }
    let name_at = |module: u64, pc: u64| -> String {
        symbols
            .get(&module)
            .and_then(|s| elf::function_at(s, pc))
            .map_or_else(|| format!("?@{pc:#x}"), demangle)
    };
    let devices = session.devices()?;
    println!(
        "process {}: {} CUDA devices, {} modules",
        args.pid,
        devices.len(),
        symbols.len()
    );
    for props in &devices {
        let dev = session.suspend(props.index)?;
        let mut grids: BTreeMap<u64, Vec<WarpInfo>> = BTreeMap::new();
        for w in dev.warps()? {
            grids.entry(w.grid_id).or_default().push(w);
        }
        println!(
            "device {} {} ({}, {} SMs): {} kernels running",
            props.index,
            props.name,
            props.sm_type,
            props.sms,
            grids.len()
        );
        for (grid, warps) in &grids {
            match dev.grid(*grid) {
                Ok(info) => println!(
                    "  kernel grid {grid} {} grid {} block {} ({} warps resident)",
                    name_at(info.module, info.function_entry),
                    info.grid_dim,
                    info.block_dim,
                    warps.len()
                ),
                Err(e) => println!(
                    "  kernel grid {grid} (no grid info: {e}), {} warps",
                    warps.len()
                ),
            }
            let module = dev.grid(*grid).map_or(0, |g| g.module);
            for w in warps.iter().take(args.max_warps) {
                println!(
                    "    sm {:>3} warp {:>2} block {} pc {:#x} in {} lanes {:#010x}{}",
                    w.sm,
                    w.warp,
                    w.block_idx,
                    w.pc,
                    name_at(module, w.pc),
                    w.valid_lanes,
                    if w.broken { " (at a breakpoint)" } else { "" }
                );
            }
            if warps.len() > args.max_warps {
                println!("    ... {} more warps", warps.len() - args.max_warps);
            }
        }
        dev.resume()?;
    }
    session.close()?;
    println!("detached; process {} runs on", args.pid);
    Ok(())
}
