//! `cuda_trace [OPTIONS] -- PROGRAM ARGS...`: traces a CUDA program's kernels, memory copies and sets, and the API
//! calls they came from, then prints a summary per kernel (count, total, mean, min, max time).
//!
//! Two backends take the same command line and print the same summary:
//! - `--backend cupti` (the default where libcupti is found): the program runs with the crate's injection library
//!   (`libgpu_tools_inject.so`, loaded by CUDA through `CUDA_INJECTION64_PATH`), which streams CUPTI activity
//!   records back over a Unix socket. Kernels with start, end, device, context, stream and the API call each came
//!   from; copies and sets with bytes, direction and duration. Costs little: see the README's table.
//! - `--backend debugger`: the CUDA debugger API, as cuda-gdb uses it. Launches only (kernel names from the
//!   modules' ELF symbols); times only with `--blocking-launches`; every launch costs tens of microseconds.
//!
//! Kernel names are demangled (`void at::native::...`). `--chrome-trace FILE` writes a trace that Perfetto opens,
//! one track per device and stream. The exit code is the program's (128 + N when signal N ended it); when the
//! program succeeded but the trace is incomplete (records dropped or lost), it is 3. Bad input (a program that
//! does not exist, one that never uses CUDA, a trace file that cannot be written) is a message and a non-zero
//! exit; a program that crashes still has what was received before the crash written out.

mod backend_cupti;
mod backend_debugger;
mod chrome;
#[path = "../common/chrome_trace.rs"]
mod chrome_trace;
mod cli;
mod inject_lib;
mod model;
mod report;

use std::io::{BufWriter, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitCode, ExitStatus};

use clap::{CommandFactory, Parser};

use cli::{Backend, Cli};
use model::{Demangler, Trace};

/// What a backend produced.
pub struct Outcome {
    pub trace: Trace,
    /// The program's exit status, where known.
    pub status: Option<ExitStatus>,
}

/// A run that could not produce a trace: a message for the user and an exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// Usage errors exit 2, as clap's own.
    pub fn usage(message: impl Into<String>) -> Self {
        Failure::new(2, message)
    }

    /// A program that could not be started: 127 when it does not exist, 126 when it cannot be run (as shells).
    pub fn spawn(program: &str, e: &std::io::Error) -> Self {
        let code = match e.kind() {
            std::io::ErrorKind::NotFound => 127,
            _ => 126,
        };
        Failure::new(code, format!("cannot start {program}: {e}"))
    }

    pub fn other(e: impl std::fmt::Display) -> Self {
        Failure::new(1, e.to_string())
    }

    pub fn output(e: std::io::Error) -> Self {
        Failure::new(1, format!("cannot write the output: {e}"))
    }
}

/// Exit code when the trace is incomplete although the program succeeded.
const INCOMPLETE: u8 = 3;

fn main() -> ExitCode {
    env_logger::init();
    let cli = Cli::parse();
    match run(&cli) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("cuda_trace: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

/// The backend asked for, or the default: cupti where libcupti loads.
fn choose_backend(cli: &Cli) -> Backend {
    // Only the debugger backend attaches to a running process.
    if cli.attach.is_some() && cli.backend.is_none() {
        return Backend::Debugger;
    }
    cli.backend
        .unwrap_or_else(|| match gpu_tools::cupti::CuptiLibrary::load() {
            Ok(_) => Backend::Cupti,
            Err(e) => {
                log::info!("no CUPTI, using the debugger backend: {e}");
                Backend::Debugger
            }
        })
}

/// The program must exist and be executable (127 and 126 otherwise, as shells), checked before any backend starts.
fn check_program(program: &str) -> Result<(), Failure> {
    use std::os::unix::fs::PermissionsExt;
    let candidates: Vec<std::path::PathBuf> = if program.contains('/') {
        vec![program.into()]
    } else {
        std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).map(|d| d.join(program)).collect())
            .unwrap_or_default()
    };
    let Some(found) = candidates.iter().find(|p| p.exists()) else {
        let where_ = if program.contains('/') {
            ""
        } else {
            " in PATH"
        };
        return Err(Failure::new(
            127,
            format!("cannot start {program}: not found{where_}"),
        ));
    };
    let meta = std::fs::metadata(found).map_err(|e| Failure::spawn(program, &e))?;
    if meta.is_dir() || meta.permissions().mode() & 0o111 == 0 {
        return Err(Failure::new(
            126,
            format!(
                "cannot start {program}: {} is not an executable file",
                found.display()
            ),
        ));
    }
    Ok(())
}

fn run(cli: &Cli) -> Result<u8, Failure> {
    if let Some(program) = cli.program.first() {
        check_program(program)?;
    }
    // Checked here: clap skips `requires` on an option whose requirement conflicts with the program given.
    if cli.attach_protocol.is_some() && cli.attach.is_none() {
        Cli::command()
            .error(
                clap::error::ErrorKind::MissingRequiredArgument,
                "--attach-protocol applies only with --attach PID",
            )
            .exit();
    }
    let backend = choose_backend(cli);
    if let Some(option) = cli.misplaced_option(backend) {
        let name = match backend {
            Backend::Cupti => "cupti",
            Backend::Debugger => "debugger",
        };
        Cli::command()
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                format!("{option} does not apply to the {name} backend"),
            )
            .exit();
    }
    // Fail before the program runs if the trace cannot be written.
    let chrome_file = match &cli.chrome_trace {
        Some(path) => Some(std::fs::File::create(path).map_err(|e| {
            Failure::new(
                1,
                format!("cannot write the Chrome trace {}: {e}", path.display()),
            )
        })?),
        None => None,
    };
    let mut demangler = Demangler::new(cli.raw_names);
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let result = match backend {
        Backend::Cupti => backend_cupti::run(cli, &mut demangler),
        Backend::Debugger => backend_debugger::run(cli, &mut demangler, &mut out),
    };
    let outcome = match result {
        Ok(o) => o,
        Err(f) => {
            let _ = out.flush();
            if let (Some(path), true) = (&cli.chrome_trace, chrome_file.is_some()) {
                // Nothing was traced: do not leave an empty, invalid file behind.
                let _ = std::fs::remove_file(path);
            }
            return Err(f);
        }
    };
    let trace = &outcome.trace;
    let backend_name = match backend {
        Backend::Cupti => "cupti",
        Backend::Debugger => "debugger",
    };
    if !cli.quiet && backend == Backend::Cupti {
        report::listing(trace, &mut out).map_err(Failure::output)?;
    }
    report::summary(trace, backend_name, &mut out).map_err(Failure::output)?;
    out.flush().map_err(Failure::output)?;
    drop(out);
    if let Some(file) = chrome_file {
        chrome::build(trace)
            .write_to(file)
            .map_err(|e| Failure::new(1, format!("cannot write the Chrome trace: {e}")))?;
    }
    for w in &trace.warnings {
        eprintln!("cuda_trace: {w}");
    }
    let dropped = trace.dropped_total();
    if dropped > 0 {
        eprintln!(
            "cuda_trace: {dropped} activity records were dropped (CUPTI's buffers were full); raise --buffer-size or \
             --max-buffers"
        );
    }
    let incomplete = dropped > 0
        || trace.processes.is_empty()
        || trace
            .processes
            .iter()
            .any(|p| !p.ended || p.stream_errors > 0);
    // The program's own exit code; 128 + N when signal N ended it, as shells report it. An attached process that
    // was left running has none: the trace ended as asked.
    let code = match outcome.status {
        None if cli.attach.is_some() => 0,
        Some(s) => match (s.code(), s.signal()) {
            (Some(code), _) => u8::try_from(code).unwrap_or(1),
            (None, Some(signal)) => {
                eprintln!("cuda_trace: the program was ended by signal {signal}");
                u8::try_from(128 + signal).unwrap_or(1)
            }
            (None, None) => 1,
        },
        None => 1,
    };
    if code == 0 && incomplete {
        if trace.processes.is_empty() {
            return Ok(1);
        }
        return Ok(INCOMPLETE);
    }
    Ok(code)
}
