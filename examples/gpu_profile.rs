//! `gpu_profile`: per-kernel metrics of a program, collected inside it by the injection library (CUPTI's range
//! profiler, one range per kernel, kernel replay), as `gpu-tools profile` prints them: a row per kernel name with the
//! launch count and each metric's mean, minimum and maximum; with `--pc-sampling`, the top stall reasons per
//! function with their PC offsets.
//!
//!     gpu_profile [--metrics a,b,c | --set basic] [--pc-sampling] [--csv | --json] -- PROGRAM [ARGS...]
//!
//! Metric names are checked against device 0's catalogue before the program starts (unknown names get close ones).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::Parser;
use gpu_tools::cupti::profiler::Method;
use gpu_tools::cupti::profiler::host::Catalog;
use gpu_tools::profile::{self, KernelTable, ProfileRequest, StallTable};
use gpu_tools::trace::NoticeLevel;

#[derive(Parser, Debug)]
#[command(
    about = "Per-kernel metrics of a CUDA program (CUPTI range profiler, inside the program)"
)]
struct Cli {
    /// Metrics, full names separated by commas (`dram__bytes_read.sum,...`).
    #[arg(long, conflicts_with = "set")]
    metrics: Option<String>,
    /// A named set of metrics: `basic` (time, DRAM read and write bytes, SM throughput).
    #[arg(long)]
    set: Option<String>,
    /// Also sample PCs: top stall reasons per function, with PC offsets.
    #[arg(long)]
    pc_sampling: bool,
    /// Kernel launches between two decodes of the counter data.
    #[arg(long, default_value_t = profile::DEFAULT_MAX_RANGES)]
    max_ranges: usize,
    /// CSV instead of a table.
    #[arg(long, conflicts_with = "json")]
    csv: bool,
    /// JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Show kernel names as recorded (mangled).
    #[arg(long)]
    mangled: bool,
    /// Write the report to this file instead of stdout (where the program's own output goes too).
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// The injection library (default: $GPU_TOOLS_INJECT_LIB, then next to this program and its parent folder).
    #[arg(long)]
    inject_lib: Option<PathBuf>,
    /// Skip the check of metric names against device 0's catalogue.
    #[arg(long)]
    no_check: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    program: Vec<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gpu_profile: {e}");
            ExitCode::FAILURE
        }
    }
}

fn inject_lib(explicit: Option<&Path>) -> Result<PathBuf, String> {
    const FILE: &str = "libgpu_tools_inject.so";
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("GPU_TOOLS_INJECT_LIB") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut tried = Vec::new();
    for dir in exe.ancestors().skip(1).take(2) {
        let p = dir.join(FILE);
        if p.is_file() {
            return Ok(p);
        }
        tried.push(p.display().to_string());
    }
    Err(format!(
        "the injection library {FILE} was not found (tried {}); build it with `cargo build --release -p gpu-tools-inject` or name it with --inject-lib",
        tried.join(", ")
    ))
}

fn demangle(name: &str) -> String {
    cpp_demangle::Symbol::new(name)
        .ok()
        .and_then(|s| s.demangle().ok())
        .unwrap_or_else(|| name.to_owned())
}

fn run(cli: &Cli) -> gpu_tools::Result<ExitCode> {
    let spec = match (&cli.metrics, &cli.set) {
        (Some(m), _) => m.clone(),
        (None, Some(s)) => {
            if profile::named_set(s).is_none() {
                return Err(profile::ProfileError::Request(format!(
                    "unknown set {s:?}; known: basic"
                ))
                .into());
            }
            s.clone()
        }
        (None, None) if cli.pc_sampling => String::new(),
        (None, None) => "basic".to_string(),
    };
    let metrics = ProfileRequest::parse_metrics(&spec).map_err(profile::ProfileError::Request)?;
    if !metrics.is_empty() && !cli.no_check {
        match Catalog::for_device(0) {
            Ok(catalog) => {
                catalog.resolve_all(&metrics, Method::RangeProfiler)?;
            }
            // No driver or no device here: the program's own attempt reports why.
            Err(gpu_tools::Error::Load(e)) => {
                eprintln!("gpu_profile: metric names not checked: {e}")
            }
            Err(gpu_tools::Error::Cuda(e)) => {
                eprintln!("gpu_profile: metric names not checked: {e}")
            }
            Err(e) => return Err(e),
        }
    }
    let request = ProfileRequest {
        metrics,
        pc_sampling: cli.pc_sampling,
        max_ranges: cli.max_ranges,
    };
    let lib = inject_lib(cli.inject_lib.as_deref()).map_err(profile::ProfileError::Request)?;
    let mut cmd = Command::new(&cli.program[0]);
    cmd.args(&cli.program[1..]);
    let run = profile::run(cmd, &lib, &request)?;
    let name = |n: &str| {
        if cli.mangled {
            n.to_string()
        } else {
            demangle(n)
        }
    };
    let mut out: Box<dyn Write> = match &cli.output {
        Some(p) => Box::new(
            std::fs::File::create(p)
                .map_err(|e| profile::ProfileError::Io(format!("{}: {e}", p.display())))?,
        ),
        None => Box::new(std::io::stdout().lock()),
    };
    let table = KernelTable::from_records(&run.metrics);
    let written = if cli.json {
        table.write_json(&mut out, name)
    } else if cli.csv {
        table.write_csv(&mut out, name)
    } else {
        table.write_text(&mut out, name)
    };
    written.map_err(|e| profile::ProfileError::Io(e.to_string()))?;
    if cli.pc_sampling && !cli.json && !cli.csv {
        let stalls = StallTable::from_records(&run.stalls);
        let _ = writeln!(out, "\nPC sampling: top stall reasons per function");
        stalls
            .write_text(&mut out, name, 3)
            .map_err(|e| profile::ProfileError::Io(e.to_string()))?;
    }
    let mut failed = false;
    for n in &run.notices {
        failed |= n.level == NoticeLevel::Error;
        eprintln!("gpu_profile: {}", n.text);
    }
    for l in &run.losses {
        eprintln!(
            "gpu_profile: context {}: {} {:?} lost",
            l.context, l.count, l.kind
        );
    }
    eprintln!(
        "gpu_profile: {} processes, {} kernel launches profiled ({} kernel records), {} stall records, {} unreadable frames",
        run.processes,
        run.metrics.len(),
        run.kernels.len(),
        run.stalls.len(),
        run.wire_errors
    );
    let status = run.status.and_then(|s| s.code()).unwrap_or(1);
    if status != 0 {
        return Ok(ExitCode::from(u8::try_from(status).unwrap_or(1)));
    }
    Ok(if failed && run.metrics.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
