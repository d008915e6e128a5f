//! `gpu_metrics`: the metric catalogue of an NVIDIA chip, as `gpu-tools metrics` prints it. Needs no GPU: CUPTI's
//! profiler host reads it from `libcupti` and `libnvperf_host.so` (the PyPI wheel `nvidia-cuda-cupti` has both).
//!
//!     gpu_metrics --chip GH100 [--method pm|range] [--submetrics] [--json] [FILTER]
//!     gpu_metrics --device 0 ...        (the chip of a CUDA device; needs the driver)
//!     gpu_metrics --chips               (the chips this CUPTI knows)
//!     gpu_metrics --check NAME[,NAME]   (checks full names for the method; unknown ones get close names)

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use gpu_tools::cupti::profiler::host::{Catalog, Methods, supported_chips};
use gpu_tools::cupti::profiler::{Method, MetricKind};
use gpu_tools::profile::json_str;

#[derive(Parser, Debug)]
#[command(about = "List an NVIDIA chip's metrics (CUPTI's profiler host; no GPU needed)")]
struct Cli {
    /// The chip (`GH100`, `GA100`, ...; see --chips).
    #[arg(long, conflicts_with = "device")]
    chip: Option<String>,
    /// The chip of this CUDA device instead.
    #[arg(long)]
    device: Option<usize>,
    /// Only metrics this method collects: `pm` (PM sampling) or `range` (range profiler).
    #[arg(long)]
    method: Option<Method>,
    /// Also list each metric's submetric suffixes (for --method, or the range profiler).
    #[arg(long)]
    submetrics: bool,
    /// JSON lines instead of a table.
    #[arg(long)]
    json: bool,
    /// List the supported chips and exit.
    #[arg(long)]
    chips: bool,
    /// Check full metric names (comma-separated) for the method and exit.
    #[arg(long, value_delimiter = ',')]
    check: Vec<String>,
    /// Only metrics whose name or description contains this text (any case).
    filter: Option<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpu_metrics: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> gpu_tools::Result<()> {
    if cli.chips {
        for c in supported_chips()? {
            println!("{c}");
        }
        return Ok(());
    }
    let catalog = match (&cli.chip, cli.device) {
        (Some(chip), _) => Catalog::for_chip(chip)?,
        (None, Some(d)) => Catalog::for_device(d)?,
        (None, None) => Catalog::for_device(0)?,
    };
    if !cli.check.is_empty() {
        let method = cli.method.unwrap_or(Method::RangeProfiler);
        for name in &cli.check {
            catalog.resolve(name, method)?;
            println!("{name}: collectable by the {method} on {}", catalog.chip());
        }
        return Ok(());
    }
    let filter = cli.filter.as_deref().unwrap_or("");
    let sub_method = cli.method.unwrap_or(Method::RangeProfiler);
    let mut shown = 0usize;
    // A closed pipe (`| head`) ends the listing quietly.
    let mut out = std::io::stdout().lock();
    if !cli.json
        && writeln!(
            out,
            "{:<56} {:<10} {:<12} {:<8} DESCRIPTION",
            "METRIC", "KIND", "UNIT", "METHODS"
        )
        .is_err()
    {
        return Ok(());
    }
    for m in catalog.filter(cli.method, filter) {
        shown += 1;
        let subs = if cli.submetrics && m.methods.contains(Methods::of(sub_method)) {
            catalog.submetrics(&m.name, sub_method)?
        } else {
            Vec::new()
        };
        let written = if cli.json {
            let subs_json: Vec<String> = subs.iter().map(|s| json_str(s)).collect();
            writeln!(
                out,
                "{{\"chip\":{},\"name\":{},\"kind\":{},\"unit\":{},\"hw_unit\":{},\"methods\":{},\"description\":{},\"submetrics\":[{}]}}",
                json_str(catalog.chip()),
                json_str(&m.name),
                json_str(m.kind.name()),
                json_str(&m.unit),
                json_str(&m.hw_unit),
                json_str(&m.methods.names()),
                json_str(&m.description),
                subs_json.join(",")
            )
        } else {
            writeln!(
                out,
                "{:<56} {:<10} {:<12} {:<8} {}",
                m.name,
                m.kind.name(),
                m.unit,
                m.methods.names(),
                m.description
            )
            .and_then(|()| {
                if subs.is_empty() {
                    Ok(())
                } else {
                    writeln!(out, "    {}", subs.join(" "))
                }
            })
        };
        if written.is_err() {
            return Ok(());
        }
    }
    if !cli.json {
        let kinds: Vec<String> = MetricKind::ALL
            .iter()
            .map(|k| {
                format!(
                    "{} {}",
                    catalog
                        .filter(cli.method, filter)
                        .filter(|m| m.kind == *k)
                        .count(),
                    k.name()
                )
            })
            .collect();
        eprintln!(
            "{}: {shown} base metrics ({}); a name to collect adds a submetric, e.g. .sum",
            catalog.chip(),
            kinds.join(", ")
        );
    }
    Ok(())
}
