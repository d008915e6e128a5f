//! `gpu-tools doctor`: what gpu-tools can use on this machine.

use std::path::Path;

use gpu_tools::LoadError;
use serde::Serialize;

use crate::failure::{Failure, Outcome};
use crate::stdout::outln;

/// Report which GPU tool APIs gpu-tools can load on this machine.
///
/// For each vendor API: whether its library was found, where, and its version; then the GPUs the drivers see, and
/// the injection library `trace` would use. Exits 0 whatever is installed. `RUST_LOG=gpu_tools=debug` adds the
/// library's log: each path tried, each version read, each vendor call that failed.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// For each library not found, list every candidate tried and why it was rejected.
    #[arg(short, long)]
    verbose: bool,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

struct Row {
    api: &'static str,
    library: &'static str,
    outcome: Result<(Option<&'static Path>, String), Missing>,
}

/// Why a row's library cannot be used: the loader's error, or a library found that the crate cannot use (an SDK of
/// another major version).
enum Missing {
    Load(LoadError),
    Unusable(String),
}

impl Missing {
    fn attempts(&self) -> &[gpu_tools::loader::Attempt] {
        match self {
            Missing::Load(e) => e.attempts(),
            Missing::Unusable(_) => &[],
        }
    }

    fn fix(&self) -> Option<String> {
        match self {
            Missing::Load(e) => e.fix(),
            Missing::Unusable(_) => None,
        }
    }
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Missing::Load(e) => e.fmt(f),
            Missing::Unusable(why) => f.write_str(why),
        }
    }
}

/// One row of the JSON report.
#[derive(Serialize)]
struct JsonRow<'a> {
    api: &'a str,
    library: &'a str,
    found: bool,
    path: Option<String>,
    version: Option<&'a str>,
    /// The loader's error (its `Display` text, which lists the candidates), when not found.
    error: Option<String>,
    /// Every candidate tried, when not found.
    attempts: Vec<JsonAttempt>,
}

#[derive(Serialize)]
struct JsonAttempt {
    path: String,
    origin: String,
    rejection: String,
}

#[derive(Serialize)]
struct JsonReport<'a> {
    gpu_tools: &'static str,
    libraries: Vec<JsonRow<'a>>,
    gpus: &'a [String],
    injection_library: JsonInjection<'a>,
    /// The AMD tool library `trace --backend rocm` uses.
    amd_tool_library: JsonInjection<'a>,
}

/// The injection library `trace --backend cupti` uses.
#[derive(Serialize)]
struct JsonInjection<'a> {
    found: bool,
    /// Its path and where it came from, or why there is none.
    detail: &'a str,
}

pub fn run(args: Args) -> Outcome {
    let mut rows = Vec::new();
    let mut gpus = Vec::new();

    nvidia(&mut rows, &mut gpus);
    amd(&mut rows, &mut gpus);
    let injection = crate::inject_lib::describe();
    let rocm_tool = crate::inject_lib::describe_rocm();

    if args.json {
        print_json(&rows, &gpus, &injection, &rocm_tool)?;
    } else {
        print_table(&rows, &gpus, &injection, &rocm_tool, args.verbose)?;
    }
    Ok(0)
}

fn print_json(
    rows: &[Row],
    gpus: &[String],
    injection: &(bool, String),
    rocm_tool: &(bool, String),
) -> Result<(), Failure> {
    let libraries = rows
        .iter()
        .map(|row| match &row.outcome {
            Ok((path, version)) => JsonRow {
                api: row.api,
                library: row.library,
                found: true,
                path: path.map(|p| p.display().to_string()),
                version: Some(version),
                error: None,
                attempts: Vec::new(),
            },
            Err(e) => JsonRow {
                api: row.api,
                library: row.library,
                found: false,
                path: None,
                version: None,
                error: Some(e.to_string()),
                attempts: e
                    .attempts()
                    .iter()
                    .map(|a| JsonAttempt {
                        path: a.path.display().to_string(),
                        origin: a.origin.to_string(),
                        rejection: a.rejection.to_string(),
                    })
                    .collect(),
            },
        })
        .collect();
    let report = JsonReport {
        gpu_tools: env!("CARGO_PKG_VERSION"),
        libraries,
        gpus,
        injection_library: JsonInjection {
            found: injection.0,
            detail: &injection.1,
        },
        amd_tool_library: JsonInjection {
            found: rocm_tool.0,
            detail: &rocm_tool.1,
        },
    };
    let json = serde_json::to_string_pretty(&report)
        .map_err(|e| Failure::error(format!("cannot write the report as JSON: {e}")))?;
    outln!("{json}")
}

fn print_table(
    rows: &[Row],
    gpus: &[String],
    injection: &(bool, String),
    rocm_tool: &(bool, String),
    verbose: bool,
) -> Result<(), Failure> {
    outln!("gpu-tools {} doctor", env!("CARGO_PKG_VERSION"))?;
    outln!()?;
    outln!(
        "{:<20} {:<24} {:<6} {:<28} location",
        "API",
        "library",
        "found",
        "version"
    )?;
    for row in rows {
        let (found, version, location) = match &row.outcome {
            Ok((path, version)) => (
                "yes",
                version.clone(),
                path.map(|p| p.display().to_string()).unwrap_or_default(),
            ),
            Err(Missing::Unusable(why)) => {
                ("no", "-".to_string(), format!("found, not usable: {why}"))
            }
            Err(e) => (
                "no",
                "-".to_string(),
                format!("{} candidates tried", e.attempts().len()),
            ),
        };
        outln!(
            "{:<20} {:<24} {:<6} {:<28} {}",
            row.api,
            row.library,
            found,
            version,
            location
        )?;
    }
    outln!()?;
    outln!("GPUs:")?;
    if gpus.is_empty() {
        outln!("  none seen")?;
    }
    for g in gpus {
        outln!("  {g}")?;
    }
    outln!()?;
    outln!("Injection library (trace --backend cupti): {}", injection.1)?;
    outln!("AMD tool library (trace --backend rocm): {}", rocm_tool.1)?;
    let missing: Vec<&Row> = rows.iter().filter(|r| r.outcome.is_err()).collect();
    if !missing.is_empty() {
        outln!()?;
        if verbose {
            for row in missing {
                if let Err(e) = &row.outcome {
                    outln!(
                        "{} ({}): not loaded; candidates in search order:",
                        row.api,
                        row.library
                    )?;
                    for a in e.attempts() {
                        outln!("  {} [{}]: {}", a.path.display(), a.origin, a.rejection)?;
                    }
                    if e.attempts().is_empty() {
                        outln!("  {e}")?;
                    }
                    if let Some(fix) = e.fix() {
                        outln!("  fix: {fix}")?;
                    }
                }
            }
        } else {
            outln!("Run with --verbose to see where each missing library was looked for.")?;
        }
    }
    Ok(())
}

fn nvidia(rows: &mut Vec<Row>, gpus: &mut Vec<String>) {
    use gpu_tools::cuda::Driver;

    {
        use gpu_tools::cupti::{CheckpointLibrary, CuptiLibrary};
        rows.push(Row {
            api: "CUPTI checkpoint",
            library: "libcheckpoint.so",
            outcome: CheckpointLibrary::load()
                .map(|l| (l.path(), "(no version call)".to_string()))
                .map_err(Missing::Load),
        });
        rows.push(Row {
            api: "CUPTI",
            library: "libcupti.so.13/.12",
            outcome: CuptiLibrary::load()
                .map(|l| {
                    let v = match l.api_version() {
                        // CUDA 12 and 13 number the CUPTI API differently; CuptiVersion decodes both.
                        Ok(v) => v.to_string(),
                        Err(e) => format!("error: {e}"),
                    };
                    (l.path(), v)
                })
                .map_err(Missing::Load),
        });
        // Opened beside the CUPTI just loaded, as the counter APIs open it.
        rows.push(Row {
            api: "CUPTI counters",
            library: "libnvperf_host.so",
            outcome: gpu_tools::cupti::profiler::NvperfHost::load()
                .map(|l| (l.path(), "(no version call)".to_string()))
                .map_err(Missing::Load),
        });
    }
    {
        use gpu_tools::cudbg::{DebuggerLibrary, api::Api};
        rows.push(Row {
            api: "CUDA debugger API",
            library: "libcuda.so.1",
            outcome: DebuggerLibrary::load()
                .map(|l| {
                    // The driver's version, and the one the crate negotiates (cudbgGetAPI needs no debuggee).
                    let v = match (l.api_version(), Api::load(l)) {
                        (Ok(driver), Ok(api)) => format!("{driver} (uses {})", api.version()),
                        (Ok(driver), Err(e)) => format!("{driver} (not usable: {e})"),
                        (Err(e), _) => format!("error: {e}"),
                    };
                    (l.path(), v)
                })
                .map_err(Missing::Load),
        });
    }
    let driver = Driver::load();
    rows.push(Row {
        api: "CUDA driver",
        library: "libcuda.so.1",
        outcome: driver
            .as_ref()
            .map_err(|e| Missing::Load(e.clone()))
            .map(|d| {
                let v = match d.version() {
                    Ok(v) => format!("CUDA {}.{}", v / 1000, v % 1000 / 10),
                    Err(e) => format!("error: {e}"),
                };
                (d.path(), v)
            }),
    });
    let driver = match driver {
        Ok(d) => d,
        Err(e) => {
            // What is missing, and the fix, where a wheel was installed on a machine without the driver.
            let fix = e.fix().map(|f| format!(". {f}")).unwrap_or_default();
            gpus.push(format!(
                "NVIDIA: no CUDA driver (libcuda.so.1 not found){fix}"
            ));
            return;
        }
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

fn amd(rows: &mut Vec<Row>, gpus: &mut Vec<String>) {
    use gpu_tools::rocprofiler::RocprofilerLibrary;
    use gpu_tools::rocprofiler_sdk::SdkLibrary;
    // Loading runs only the library's constructors; nothing is registered with the SDK.
    rows.push(Row {
        api: "rocprofiler-sdk",
        library: "librocprofiler-sdk.so.1",
        outcome: match SdkLibrary::load() {
            Ok(l) => {
                let (major, minor, patch) = l.version();
                Ok((l.path(), format!("{major}.{minor}.{patch}")))
            }
            Err(gpu_tools::Error::Load(e)) => Err(Missing::Load(e)),
            Err(e) => Err(Missing::Unusable(e.to_string())),
        },
    });
    // Only version_* here: rocprofiler_initialize aborts the process on a machine without an AMD driver.
    rows.push(Row {
        api: "rocprofiler v2",
        library: "librocprofiler64.so.2",
        outcome: RocprofilerLibrary::load()
            .map(|l| {
                let (major, minor) = l.version();
                (l.path(), format!("{major}.{minor}"))
            })
            .map_err(Missing::Load),
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
