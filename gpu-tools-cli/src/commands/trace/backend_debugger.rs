//! The debugger backend: runs the program under a [`DebugSession`] (or, with `--attach PID`, attaches to a running
//! one) and records its launches (kernel names from the module's ELF symbols). It sees no copies or sets; kernels
//! get times only with `--blocking-launches` (ready to finished as the session saw them: the kernel plus the
//! driver's round trips, an upper bound). An attached process is traced until it exits or the user presses
//! Ctrl-C; the session then detaches and the process runs on.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gpu_tools::cudbg::elf::{self, FunctionSymbol};
use gpu_tools::cudbg::{DebugSession, Event, KernelType, SessionError};

use super::cli::Args;
use super::model::{Demangler, Kernel, Process, Trace};
use super::{Traced, spawn_failure};
use crate::failure::Failure;

/// Set by Ctrl-C while an attached process is traced.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_signal: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Attaches to `pid`; Ctrl-C from then on ends the trace (the session detaches) instead of this program.
fn attach(cli: &Args, pid: u32) -> Result<DebugSession, Failure> {
    let mut builder = DebugSession::attach_builder(pid);
    if let Some(protocol) = cli.attach_protocol {
        builder = builder.protocol(protocol);
    }
    if let Some(us) = cli.spin_us {
        builder = builder.spin(Duration::from_micros(us));
    }
    if !cli.push_pop {
        builder = builder.capabilities(
            gpu_tools::sys::cudbg::CUDBG_DEBUGGER_CAPABILITY_NO_CONTEXT_PUSH_POP_EVENTS,
        );
    }
    let session = builder
        .blocking_launches(cli.blocking_launches)
        .start()
        .map_err(Failure::error)?;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_interrupt as *const () as libc::sighandler_t,
        )
    };
    eprintln!("gpu-tools trace: attached to process {pid}; Ctrl-C detaches");
    Ok(session)
}

/// The command line of process `pid`, for the summary.
fn command_of(pid: u32) -> String {
    gpu_tools::linux::procfs::Process::new(pid)
        .command_line_text()
        .unwrap_or_else(|_| format!("process {pid}"))
}

pub fn run(cli: &Args, demangler: &mut Demangler, out: &mut impl Write) -> Result<Traced, Failure> {
    let t0 = Instant::now();
    let (mut session, command) = match cli.attach {
        Some(pid) => (attach(cli, pid)?, command_of(pid)),
        None => (launch(cli)?, cli.program.join(" ")),
    };
    let pid = session.pid();
    if cli.defer_launches {
        session.set_launch_events(false).map_err(Failure::error)?;
    }
    let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut symbols: HashMap<u64, Vec<FunctionSymbol>> = HashMap::new();
    let mut names: HashMap<(u64, u64), Arc<str>> = HashMap::new();
    let mut trace = Trace {
        kernel_times: cli.blocking_launches,
        ..Trace::default()
    };
    let mut open: HashMap<u64, usize> = HashMap::new();
    let now = || t0.elapsed().as_nanos() as u64;
    // An attached process is watched for Ctrl-C between batches; a launched one runs to its end.
    let wait = cli.attach.map(|_| Duration::from_millis(200));
    loop {
        if STOP.load(Ordering::SeqCst) {
            eprintln!("gpu-tools trace: interrupted; detaching");
            break;
        }
        let mut batch = match session.next_batch(wait) {
            Ok(Some(batch)) => batch,
            Ok(None) => break,
            Err(gpu_tools::Error::Session(SessionError::Timeout(_))) => continue,
            Err(e) => return Err(Failure::error(e)),
        };
        let at = now();
        // Only a user module's image is read while the program is held; otherwise let it go on at once.
        if !batch
            .events()
            .iter()
            .any(|(_, e)| matches!(e, Event::ElfImageLoaded(img) if !img.is_system()))
        {
            batch.release().map_err(Failure::error)?;
        }
        for (_, event) in &batch {
            *counts.entry(event.name()).or_default() += 1;
            match event {
                Event::ElfImageLoaded(img) if !img.is_system() => {
                    let bytes = batch.session().elf_image(img).map_err(Failure::error)?;
                    let syms = elf::function_symbols(&bytes);
                    if cli.list {
                        writeln!(
                            out,
                            "module loaded: module {:#x} handle {:#x} {} bytes, {} functions",
                            img.module,
                            img.handle,
                            img.size,
                            syms.len()
                        )
                        .or_else(crate::stdout::unless_closed)?;
                    }
                    symbols.insert(img.module, syms);
                }
                Event::KernelReady(k) if k.kernel_type != KernelType::System => {
                    let name = names
                        .entry((k.module, k.function_entry))
                        .or_insert_with(|| {
                            let raw: Arc<str> = symbols
                                .get(&k.module)
                                .and_then(|s| elf::function_at(s, k.function_entry))
                                .map_or_else(
                                    || Arc::from(format!("function@{:#x}", k.function_entry)),
                                    Arc::from,
                                );
                            demangler.name(&raw)
                        })
                        .clone();
                    if cli.list {
                        writeln!(
                            out,
                            "launch grid {} {name} grid {} block {}",
                            k.grid_id, k.grid_dim, k.block_dim
                        )
                        .or_else(crate::stdout::unless_closed)?;
                    }
                    if cli.blocking_launches || cli.chrome_trace.is_some() {
                        open.insert(k.grid_id, trace.kernels.len());
                    }
                    trace.kernels.push(Kernel {
                        process: 0,
                        name,
                        start: Some(at),
                        end: None,
                        device: k.dev,
                        context: k.context,
                        stream: None,
                        grid: [k.grid_dim.x, k.grid_dim.y, k.grid_dim.z],
                        block: [k.block_dim.x, k.block_dim.y, k.block_dim.z],
                        correlation: None,
                        registers: None,
                        shared_memory: None,
                    });
                }
                Event::KernelFinished(k) => {
                    if let Some(i) = open.remove(&k.grid_id) {
                        if let Some(kernel) = trace.kernels.get_mut(i) {
                            kernel.end = Some(at);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let closed = session.close().map_err(Failure::error)?;
    if cli.attach.is_some() && closed.exit.is_none() {
        eprintln!("gpu-tools trace: detached from process {pid}; it runs on");
    }
    // Events still queued at the end: kernel ends among them still count.
    for (_, event) in &closed.events {
        *counts.entry(event.name()).or_default() += 1;
        if let Event::KernelFinished(k) = event {
            if let Some(kernel) = open
                .remove(&k.grid_id)
                .and_then(|i| trace.kernels.get_mut(i))
            {
                kernel.end = Some(now());
            }
        }
    }
    let counts: Vec<String> = counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
    writeln!(out, "--- events: {}", counts.join(", ")).or_else(crate::stdout::unless_closed)?;
    trace.processes.push(Process {
        pid,
        command,
        ended: true,
        ..Process::default()
    });
    let status = closed.exit;
    if let Some(signal) = status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s)) {
        trace.warnings.push(format!(
            "the program was ended by signal {signal}; events the driver still held are lost"
        ));
    }
    Ok(Traced {
        trace,
        status,
        empty_windows: Vec::new(),
    })
}

/// Starts the program under a session.
fn launch(cli: &Args) -> Result<DebugSession, Failure> {
    let mut cmd = Command::new(&cli.program[0]);
    cmd.args(&cli.program[1..])
        .stdout(crate::stdout::for_child());
    let mut builder = DebugSession::builder(cmd);
    if let Some(us) = cli.spin_us {
        builder = builder.spin(Duration::from_micros(us));
    }
    if !cli.push_pop {
        builder = builder.capabilities(
            gpu_tools::sys::cudbg::CUDBG_DEBUGGER_CAPABILITY_NO_CONTEXT_PUSH_POP_EVENTS,
        );
    }
    builder
        .blocking_launches(cli.blocking_launches)
        .start()
        .map_err(|e| match e {
            gpu_tools::Error::Session(SessionError::Spawn { ref source, .. }) => {
                spawn_failure(&cli.program[0], source)
            }
            gpu_tools::Error::Session(SessionError::NoCuda { .. }) => {
                Failure::new(1, format!("{} is not a CUDA program: {e}", cli.program[0]))
            }
            e => Failure::error(e),
        })
}
