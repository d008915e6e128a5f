//! `gpu-tools metrics`: the metric catalogue of an NVIDIA chip (CUPTI's profiler host). Needs no GPU for a named
//! chip: `libcupti` and `libnvperf_host.so` answer (the PyPI wheel `nvidia-cuda-cupti` has both).

use std::io::Write;

use gpu_tools::cupti::profiler::host::{
    Catalog, ConfigImage, Methods, MetricNames, supported_chips,
};
use gpu_tools::cupti::profiler::{Method, MetricKind};
use gpu_tools::profile::json_str;

use crate::failure::{Failure, Outcome};
use crate::stdout::outln;

/// List an NVIDIA chip's metrics: name, kind, unit, which collection method supports it, description.
///
/// `gpu-tools metrics --chip GH100 [--method pm|range] [FILTER]` needs no GPU (CUPTI's profiler host reads the
/// catalogue from libcupti and libnvperf_host.so); `--device N` reads the chip of a CUDA device (needs the driver).
/// `--chips` lists the chips this CUPTI knows; `--check a,b` checks full metric names for the method and
/// suggests close names for unknown ones. Exit code: 0; 1 when the catalogue cannot be read or a name is
/// unknown; 2 for a usage error.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The chip (`GH100`, `GA100`, ...; any case; see --chips) [default: the chip of device 0].
    #[arg(long, conflicts_with = "device")]
    chip: Option<String>,
    /// The chip of this CUDA device instead (needs the CUDA driver).
    #[arg(long, value_name = "N")]
    device: Option<usize>,
    /// Only metrics this method collects: `pm` (PM sampling, as `top` uses) or `range` (the range profiler, as
    /// `profile` uses).
    #[arg(long, value_name = "METHOD", value_parser = parse_method)]
    method: Option<Method>,
    /// Also list each metric's submetric suffixes (for --method, else the range profiler's).
    #[arg(long)]
    submetrics: bool,
    /// One JSON object per metric and line instead of a table.
    #[arg(long)]
    json: bool,
    /// List the chips this CUPTI supports and exit.
    // The list is plain names: a method, JSON or submetrics asked for with it would be dropped without a word.
    #[arg(
        long,
        conflicts_with_all = ["chip", "device", "check", "filter", "method", "json", "submetrics"]
    )]
    chips: bool,
    /// Check full metric names (comma-separated) for the method [default method: range], say how many passes
    /// they take together, and exit.
    // Its answer is two lines of text and no listing: JSON, submetrics or a filter would be dropped.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "NAMES",
        conflicts_with_all = ["json", "submetrics", "filter"]
    )]
    check: Vec<String>,
    /// Only metrics whose name or description contains this text (any case).
    filter: Option<String>,
}

/// The chip `given` as CUPTI names it (`gh100` is `GH100`); as given where CUPTI knows no such chip (its error
/// then lists those it knows).
fn known_chip(given: &str) -> String {
    let known = supported_chips().unwrap_or_default();
    known
        .into_iter()
        .find(|c| c.eq_ignore_ascii_case(given.trim()))
        .unwrap_or_else(|| given.to_string())
}

fn parse_method(s: &str) -> Result<Method, String> {
    s.parse()
}

pub fn run(args: Args) -> Outcome {
    catalogue(args).map_err(|f| with_hint(f, crate::driverless_cupti()))
}

/// A failure's message with the hint appended.
fn with_hint(failure: Failure, hint: Option<&str>) -> Failure {
    match (failure, hint) {
        (Failure::Message { code, message }, Some(hint)) => Failure::Message {
            code,
            message: format!("{message} ({hint})"),
        },
        (failure, _) => failure,
    }
}

fn catalogue(args: Args) -> Outcome {
    if args.chips {
        let chips = supported_chips()?;
        let mut out = std::io::stdout().lock();
        for c in chips {
            writeln!(out, "{c}").map_err(Failure::stdout)?;
        }
        return Ok(0);
    }
    let catalog = match (&args.chip, args.device) {
        (Some(chip), _) => Catalog::for_chip(&known_chip(chip))?,
        (None, d) => Catalog::for_device(d.unwrap_or(0))?,
    };
    if !args.check.is_empty() {
        let method = args.method.unwrap_or(Method::RangeProfiler);
        for name in &args.check {
            catalog.resolve(name, method).map_err(Failure::error)?;
            outln!("{name}: collectable by the {method} on {}", catalog.chip())?;
        }
        // Together: how many passes over the work they take (PM sampling collects in one).
        let names = MetricNames::new(&args.check).map_err(gpu_tools::Error::from)?;
        let config = ConfigImage::build(catalog.chip(), method, None, &names)?;
        outln!(
            "together: {} pass{} on {}",
            config.passes(),
            if config.passes() == 1 { "" } else { "es" },
            catalog.chip()
        )?;
        return Ok(0);
    }
    // A closed pipe (`| head`) ends the listing quietly (`Failure::stdout`).
    match list(&args, &catalog) {
        Ok(()) => Ok(0),
        Err(Listing::Output(e)) => Err(Failure::stdout(e)),
        Err(Listing::Library(e)) => Err(Failure::from(e)),
    }
}

enum Listing {
    Output(std::io::Error),
    Library(gpu_tools::Error),
}

impl From<std::io::Error> for Listing {
    fn from(e: std::io::Error) -> Self {
        Listing::Output(e)
    }
}

fn list(args: &Args, catalog: &Catalog) -> Result<(), Listing> {
    let filter = args.filter.as_deref().map_or("", catalogue_text);
    let sub_method = args.method.unwrap_or(Method::RangeProfiler);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if !args.json {
        writeln!(
            out,
            "{:<56} {:<10} {:<12} {:<8} DESCRIPTION",
            "METRIC", "KIND", "UNIT", "METHODS"
        )?;
    }
    let mut shown = 0usize;
    let mut kinds = [0usize; MetricKind::ALL.len()];
    for m in catalog.filter(args.method, filter) {
        shown += 1;
        if let Some(i) = MetricKind::ALL.iter().position(|k| *k == m.kind) {
            kinds[i] += 1;
        }
        let subs = if args.submetrics && m.methods.contains(Methods::of(sub_method)) {
            catalog
                .submetrics(&m.name, sub_method)
                .map_err(|e| Listing::Library(e.into()))?
        } else {
            Vec::new()
        };
        if args.json {
            let subs: Vec<String> = subs.iter().map(|s| json_str(s)).collect();
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
                subs.join(",")
            )?;
        } else {
            writeln!(
                out,
                "{:<56} {:<10} {:<12} {:<8} {}",
                m.name,
                m.kind.name(),
                m.unit,
                m.methods.names(),
                m.description
            )?;
            if !subs.is_empty() {
                writeln!(out, "    {}", subs.join(" "))?;
            }
        }
    }
    out.flush()?;
    if !args.json {
        let kinds: Vec<String> = MetricKind::ALL
            .iter()
            .zip(kinds)
            .map(|(k, n)| format!("{n} {}", k.name()))
            .collect();
        eprintln!(
            "{}: {shown} base metrics ({}); a name to collect adds a submetric, e.g. .sum",
            catalog.chip(),
            kinds.join(", ")
        );
    }
    Ok(())
}

/// The text the catalogue is searched for. A full name (`sm__cycles_active.avg.pct_of_peak_sustained_elapsed`)
/// finds its base metric: the catalogue lists base names, and a submetric is what a name to collect adds. Other
/// text is searched as given: cut at a dot, `e.g.` or `0.5` would be `e` or `0` and find nearly every metric.
fn catalogue_text(filter: &str) -> &str {
    match filter.split_once('.') {
        // Every metric's base name joins its unit and its counter with a double underscore.
        Some((base, _)) if base.contains("__") => base,
        _ => filter,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_metric_name_is_searched_by_its_base_and_other_text_whole() {
        assert_eq!(
            catalogue_text("sm__cycles_active.avg.pct_of_peak_sustained_elapsed"),
            "sm__cycles_active"
        );
        assert_eq!(catalogue_text("dram__bytes"), "dram__bytes");
        assert_eq!(catalogue_text("e.g."), "e.g.");
        assert_eq!(catalogue_text("0.5"), "0.5");
        assert_eq!(catalogue_text("per cycle."), "per cycle.");
        assert_eq!(catalogue_text(""), "");
    }

    #[test]
    fn a_hint_is_appended_to_a_message_only() {
        let hinted = with_hint(
            Failure::new(1, "cuptiProfilerHostInitialize failed"),
            Some("why"),
        );
        assert!(
            matches!(&hinted, Failure::Message { code: 1, message } if message == "cuptiProfilerHostInitialize failed (why)"),
            "{hinted:?}"
        );
        let plain = with_hint(Failure::new(1, "no such chip"), None);
        assert!(
            matches!(&plain, Failure::Message { message, .. } if message == "no such chip"),
            "{plain:?}"
        );
        assert!(matches!(
            with_hint(Failure::BrokenPipe, Some("why")),
            Failure::BrokenPipe
        ));
    }
}
