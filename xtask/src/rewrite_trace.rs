//! `cargo xtask rewrite-trace IN OUT`: a trace file of an older format (2 or 3) written in the current one, with
//! [`gpu_tools::trace::file::rewrite`]: the same streams, the same bytes in each, the original's creation time,
//! checksums and a final chunk. How the committed fixtures of `tests/fixtures/traces/` were converted.
//!
//! Before OUT is kept, both files are read back: the conversion is refused unless IN reads with no error, OUT reads
//! with no error and the same items (headers, records, closings, in order), and the reports of both (`stats`, as
//! JSON) are the same bytes.

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;

use gpu_tools::trace::file::{FILE_VERSION, TraceItem, TraceReader, rewrite};
use gpu_tools::trace::report::{Analysis, Format, write_tables};

pub const USAGE: &str = "cargo run -p xtask -- rewrite-trace IN OUT";

/// The items of a file and its format version; an error for any reading error.
fn items(path: &Path) -> Result<(Vec<TraceItem>, Option<u16>), String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut reader = TraceReader::new(BufReader::new(file));
    let items = reader
        .by_ref()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((items, reader.file_version()))
}

/// The reports of a file, as `stats --format json` writes them.
fn reports(path: &Path) -> Result<Vec<u8>, String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut analysis = Analysis::new();
    if let Some(e) = analysis.read(0, BufReader::new(file)).first() {
        return Err(format!("{}: {e}", path.display()));
    }
    let mut out = Vec::new();
    write_tables(&analysis.reports(), Format::Json, &mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

pub fn run(input: &Path, output: &Path) -> Result<(), String> {
    if output.exists() {
        return Err(format!("{} exists: not written over", output.display()));
    }
    let (before, version) = items(input)?;
    let source = File::open(input).map_err(|e| format!("{}: {e}", input.display()))?;
    let sink = File::create(output).map_err(|e| format!("{}: {e}", output.display()))?;
    let written = rewrite(BufReader::new(source), BufWriter::new(sink))
        .and_then(|w| w.into_inner().map_err(|e| e.into_error()))
        .and_then(|f| f.sync_all());
    let checked = written
        .map_err(|e| format!("{} to {}: {e}", input.display(), output.display()))
        .and_then(|()| {
            let (after, new_version) = items(output)?;
            if new_version != Some(FILE_VERSION) {
                return Err(format!(
                    "{} is of version {new_version:?}",
                    output.display()
                ));
            }
            if after != before {
                return Err("the copy reads as other items".into());
            }
            if reports(output)? != reports(input)? {
                return Err("the copy's reports differ".into());
            }
            Ok(after.len())
        });
    match checked {
        Ok(n) => {
            println!(
                "{} (version {}) -> {} (version {FILE_VERSION}): {n} items and the reports the same",
                input.display(),
                version.map_or("none: a single stream".into(), |v| v.to_string()),
                output.display()
            );
            Ok(())
        }
        Err(e) => {
            let _ = std::fs::remove_file(output);
            Err(e)
        }
    }
}
