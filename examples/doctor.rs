//! What gpu-tools can use on this machine: for each vendor API, whether its library was found, where, its
//! version, and the GPUs it sees. Exits 0 whatever is installed.
//!
//! ```text
//! cargo run --example doctor [-- --verbose]
//! ```
//! `--verbose` prints, for each library not found, every candidate tried and why it was rejected.

use std::path::Path;

use gpu_tools::LoadError;

struct Row {
    api: &'static str,
    library: &'static str,
    outcome: Result<(Option<&'static Path>, String), LoadError>,
}

fn main() {
    let verbose = std::env::args()
        .skip(1)
        .any(|a| a == "--verbose" || a == "-v");
    let mut rows = Vec::new();
    let mut gpus = Vec::new();

    nvidia(&mut rows, &mut gpus);
    amd(&mut rows, &mut gpus);

    println!("gpu-tools {} doctor", env!("CARGO_PKG_VERSION"));
    println!();
    println!(
        "{:<20} {:<24} {:<6} {:<28} location",
        "API", "library", "found", "version"
    );
    for row in &rows {
        let (found, version, location) = match &row.outcome {
            Ok((path, version)) => (
                "yes",
                version.clone(),
                path.map(|p| p.display().to_string()).unwrap_or_default(),
            ),
            Err(e) => (
                "no",
                "-".to_string(),
                format!("{} candidates tried", e.attempts().len()),
            ),
        };
        println!(
            "{:<20} {:<24} {:<6} {:<28} {}",
            row.api, row.library, found, version, location
        );
    }
    println!();
    println!("GPUs:");
    if gpus.is_empty() {
        println!("  none seen");
    }
    for g in &gpus {
        println!("  {g}");
    }
    let missing: Vec<&Row> = rows.iter().filter(|r| r.outcome.is_err()).collect();
    if !missing.is_empty() {
        println!();
        if verbose {
            for row in missing {
                if let Err(e) = &row.outcome {
                    println!(
                        "{} ({}): not loaded; candidates in search order:",
                        row.api, row.library
                    );
                    for a in e.attempts() {
                        println!("  {} [{}]: {}", a.path.display(), a.origin, a.rejection);
                    }
                    if e.attempts().is_empty() {
                        println!("  {e}");
                    }
                }
            }
        } else {
            println!("Run with --verbose to see where each missing library was looked for.");
        }
    }
}

#[cfg(any(feature = "cupti", feature = "cudbg"))]
fn nvidia(rows: &mut Vec<Row>, gpus: &mut Vec<String>) {
    use gpu_tools::cuda::Driver;

    #[cfg(feature = "cupti")]
    {
        use gpu_tools::cupti::{CheckpointLibrary, CuptiLibrary};
        rows.push(Row {
            api: "CUPTI checkpoint",
            library: "libcheckpoint.so",
            outcome: CheckpointLibrary::load().map(|l| (l.path(), "(no version call)".to_string())),
        });
        rows.push(Row {
            api: "CUPTI",
            library: "libcupti.so.13/.12",
            outcome: CuptiLibrary::load().map(|l| {
                let v = match l.version() {
                    // CUPTI_API_VERSION is major*10000 + minor*100 + patch since CUDA 12.
                    Ok(v) => format!("API {v} (CUDA {}.{})", v / 10_000, v / 100 % 100),
                    Err(e) => format!("error: {e}"),
                };
                (l.path(), v)
            }),
        });
    }
    #[cfg(feature = "cudbg")]
    {
        use gpu_tools::cudbg::DebuggerLibrary;
        rows.push(Row {
            api: "CUDA debugger API",
            library: "libcuda.so.1",
            outcome: DebuggerLibrary::load().map(|l| {
                let v = match l.api_version() {
                    Ok(v) => v.to_string(),
                    Err(e) => format!("error: {e}"),
                };
                (l.path(), v)
            }),
        });
    }
    let driver = Driver::load();
    rows.push(Row {
        api: "CUDA driver",
        library: "libcuda.so.1",
        outcome: driver.as_ref().map_err(Clone::clone).map(|d| {
            let v = match d.version() {
                Ok(v) => format!("CUDA {}.{}", v / 1000, v % 1000 / 10),
                Err(e) => format!("error: {e}"),
            };
            (d.path(), v)
        }),
    });
    let Ok(driver) = driver else {
        gpus.push("NVIDIA: no CUDA driver (libcuda.so.1 not found)".to_string());
        return;
    };
    match driver.device_count() {
        Ok(n) => {
            for i in 0..n {
                match driver.device_info(i) {
                    Ok(d) => gpus.push(format!(
                        "NVIDIA {}: {}, {:.0} GiB, compute capability {}.{}, {} SMs",
                        d.ordinal,
                        d.name,
                        d.total_memory as f64 / (1u64 << 30) as f64,
                        d.compute_capability.0,
                        d.compute_capability.1,
                        d.multiprocessors
                    )),
                    Err(e) => gpus.push(format!("NVIDIA {i}: {e}")),
                }
            }
        }
        Err(e) => gpus.push(format!("NVIDIA: driver found but no GPU usable: {e}")),
    }
}

#[cfg(not(any(feature = "cupti", feature = "cudbg")))]
fn nvidia(_rows: &mut Vec<Row>, _gpus: &mut Vec<String>) {}

#[cfg(feature = "rocprofiler")]
fn amd(rows: &mut Vec<Row>, gpus: &mut Vec<String>) {
    use gpu_tools::rocprofiler::RocprofilerLibrary;
    // Only version_* here: rocprofiler_initialize aborts the process on a machine without an AMD driver.
    rows.push(Row {
        api: "rocprofiler v2",
        library: "librocprofiler64.so.2",
        outcome: RocprofilerLibrary::load().map(|l| {
            let (major, minor) = l.version();
            (l.path(), format!("{major}.{minor}"))
        }),
    });
    match gpu_tools::rocprofiler::amd_gpus() {
        Ok(list) => {
            for g in list {
                gpus.push(format!("AMD {g}"));
            }
        }
        Err(e) => gpus.push(format!("AMD: {e}")),
    }
}

#[cfg(not(feature = "rocprofiler"))]
fn amd(_rows: &mut Vec<Row>, _gpus: &mut Vec<String>) {}
