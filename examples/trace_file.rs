//! Reads saved traces (what the injection library writes with `GPU_TOOLS_TRACE_FILE`, or a trace file of several
//! streams): the library calls a `gpu-tools stats` / `gpu-tools export` subcommand makes, until the CLI has them.
//!
//! `trace_file stats [--format text|csv|json] FILE...`
//! `trace_file export (--perfetto OUT | --chrome OUT) FILE...`
//!
//! Several files are merged on one timeline (hosts aligned on their wall clocks). Reading errors go to stderr;
//! the exit code is 1 when a file could not be read completely.

use std::io::{BufReader, BufWriter, Write};
use std::process::ExitCode;

use gpu_tools::trace::export::{ChromeWriter, PerfettoWriter, Timeline, TimelineSink};
use gpu_tools::trace::report::{Analysis, Format, write_tables};

fn usage() -> ExitCode {
    eprintln!(
        "usage: trace_file stats [--format text|csv|json] FILE...\n       trace_file export (--perfetto OUT | --chrome OUT) FILE..."
    );
    ExitCode::from(2)
}

fn open(path: &str) -> Result<BufReader<std::fs::File>, String> {
    std::fs::File::open(path)
        .map(BufReader::new)
        .map_err(|e| format!("cannot read {path}: {e}"))
}

fn export<S: TimelineSink>(sink: S, files: &[String]) -> Result<bool, String> {
    let mut timeline = Timeline::new(sink);
    let mut clean = true;
    for (i, f) in files.iter().enumerate() {
        for e in timeline
            .read(i as u32, open(f)?)
            .map_err(|e| format!("cannot write: {e}"))?
        {
            eprintln!("trace_file: {f}: {e}");
            clean &= !e.is_fatal();
        }
    }
    timeline
        .finish()
        .map_err(|e| format!("cannot write: {e}"))?;
    Ok(clean)
}

fn run(args: &[String]) -> Result<bool, String> {
    match args.first().map(String::as_str) {
        Some("stats") => {
            let mut format = Format::Text;
            let mut files = Vec::new();
            let mut it = args[1..].iter();
            while let Some(a) = it.next() {
                if a == "--format" {
                    format = it.next().ok_or("--format needs a value")?.parse()?;
                } else {
                    files.push(a.clone());
                }
            }
            if files.is_empty() {
                return Err("no trace file given".into());
            }
            let mut analysis = Analysis::new();
            let mut clean = true;
            for (i, f) in files.iter().enumerate() {
                for e in analysis.read(i as u32, open(f)?) {
                    eprintln!("trace_file: {f}: {e}");
                    clean &= !e.is_fatal();
                }
            }
            let stdout = std::io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            write_tables(&analysis.reports(), format, &mut out).map_err(|e| e.to_string())?;
            out.flush().map_err(|e| e.to_string())?;
            Ok(clean)
        }
        Some("export") => {
            let (mut perfetto, mut chrome, mut files) = (None, None, Vec::new());
            let mut it = args[1..].iter();
            while let Some(a) = it.next() {
                match a.as_str() {
                    "--perfetto" => perfetto = it.next().cloned(),
                    "--chrome" => chrome = it.next().cloned(),
                    _ => files.push(a.clone()),
                }
            }
            if files.is_empty() {
                return Err("no trace file given".into());
            }
            let create = |p: &str| {
                std::fs::File::create(p)
                    .map(BufWriter::new)
                    .map_err(|e| format!("cannot write {p}: {e}"))
            };
            match (perfetto, chrome) {
                (Some(p), None) => export(PerfettoWriter::new(create(&p)?), &files),
                (None, Some(c)) => export(ChromeWriter::new(create(&c)?), &files),
                _ => Err("give one of --perfetto OUT and --chrome OUT".into()),
            }
        }
        _ => Err(String::new()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) if e.is_empty() => usage(),
        Err(e) => {
            eprintln!("trace_file: {e}");
            ExitCode::from(1)
        }
    }
}
