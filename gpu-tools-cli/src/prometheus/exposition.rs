//! The text exposition format (version 0.0.4): the gauges and counters exported, their labels and numbers,
//! and [`exposition`], a scrape's body from the GPUs as it shows them.

use std::fmt::Write as _;

use gpu_tools::counters::top::{TopColumn, TopGpu, TopTotals};

/// The exposition format's content type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A gauge of the exposition: the column it reads (by the vendor's metric name) and its unit.
struct Gauge {
    name: &'static str,
    help: &'static str,
    metric: &'static str,
    /// What the column's value is divided by (100 for a percentage exported as a ratio).
    per: f64,
}

/// The gauges with a name of their own, dcgm-exporter's first. Columns named otherwise (`--metrics`,
/// `--counters`) go to `gpu_tools_device_metric`.
const GAUGES: [Gauge; 7] = [
    Gauge {
        name: "DCGM_FI_PROF_SM_ACTIVE",
        help: "Ratio of cycles an SM has at least one warp assigned, averaged over all SMs (PM sampling: \
               sm__cycles_active.avg.pct_of_peak_sustained_elapsed / 100).",
        metric: "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
        per: 100.0,
    },
    Gauge {
        name: "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        help: "Ratio of cycles the tensor pipe is active (PM sampling: \
               sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed / 100).",
        metric: "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
        per: 100.0,
    },
    Gauge {
        name: "DCGM_FI_PROF_DRAM_ACTIVE",
        help: "Ratio of cycles the device memory interface is active (PM sampling: \
               dram__cycles_active.avg.pct_of_peak_sustained_elapsed / 100).",
        metric: "dram__cycles_active.avg.pct_of_peak_sustained_elapsed",
        per: 100.0,
    },
    Gauge {
        name: "DCGM_FI_PROF_SM_OCCUPANCY",
        help: "Ratio of resident warps to the maximum per elapsed cycle, averaged over all SMs (PM sampling: \
               sm__warps_active.avg.pct_of_peak_sustained_elapsed / 100).",
        metric: "sm__warps_active.avg.pct_of_peak_sustained_elapsed",
        per: 100.0,
    },
    Gauge {
        name: "gpu_tools_sm_achieved_occupancy_ratio",
        help: "Ratio of resident warps to the maximum per active SM cycle, Nsight Compute's achieved occupancy \
               and the table's OCCUP% (PM sampling: sm__warps_active.avg.pct_of_peak_sustained_active / 100).",
        metric: "sm__warps_active.avg.pct_of_peak_sustained_active",
        per: 100.0,
    },
    Gauge {
        name: "gpu_tools_dram_read_bytes_per_second",
        help: "Bytes read from device memory per second (PM sampling: dram__bytes_read.sum.per_second).",
        metric: "dram__bytes_read.sum.per_second",
        per: 1.0,
    },
    Gauge {
        name: "gpu_tools_dram_write_bytes_per_second",
        help: "Bytes written to device memory per second (PM sampling: dram__bytes_write.sum.per_second).",
        metric: "dram__bytes_write.sum.per_second",
        per: 1.0,
    },
];

/// A counter of the exposition: a count of each GPU.
struct Counter {
    name: &'static str,
    help: &'static str,
    get: fn(&ExportGpu) -> u64,
}

/// The counters, every GPU's, stale or not.
const COUNTERS: [Counter; 5] = [
    Counter {
        name: "gpu_tools_samples_total",
        help: "Samples read from the GPU's counters.",
        get: |g| g.totals.samples,
    },
    Counter {
        name: "gpu_tools_samples_lost_total",
        help: "Samples lost, as the vendor reports it (NVIDIA: sampling periods missing next to a hardware-buffer \
               overflow).",
        get: |g| g.totals.lost,
    },
    Counter {
        name: "gpu_tools_sampling_gaps_total",
        help: "Sampling periods that passed without a sample while nothing reported a loss (an idle GPU shows \
               some); not losses.",
        get: |g| g.totals.gaps,
    },
    Counter {
        name: "gpu_tools_read_errors_total",
        help: "Refreshes whose read of the GPU's counters failed.",
        get: |g| g.totals.read_errors,
    },
    Counter {
        name: "gpu_tools_stale_scrapes_total",
        help: "Scrapes that left the GPU's gauges out because they were stale.",
        get: |g| g.stale_scrapes,
    },
];

/// One GPU as a scrape shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportGpu {
    /// Its labels.
    pub gpu: TopGpu,
    /// One mean per column over its latest refresh with samples; `None` while it is stale.
    pub values: Option<Vec<f64>>,
    /// Its counts since the start.
    pub totals: TopTotals,
    /// Scrapes that found it stale, this one included.
    pub stale_scrapes: u64,
}

/// Escapes a label value (backslash, double quote, line feed).
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The labels of a GPU: `gpu`, `UUID` (where known), `model_name`, `Hostname`: dcgm-exporter's names, but for
/// its `modelName`, which promtool's lint refuses (label names in snake case).
fn labels(gpu: &TopGpu, hostname: &str) -> String {
    let mut l = format!("gpu=\"{}\"", gpu.index);
    if let Some(uuid) = &gpu.uuid {
        let _ = write!(l, ",UUID=\"{}\"", label_value(uuid));
    }
    let _ = write!(
        l,
        ",model_name=\"{}\",Hostname=\"{}\"",
        label_value(&gpu.name),
        label_value(hostname)
    );
    l
}

/// A sample value: integers without a fraction, other numbers as Rust writes them (shortest round trip).
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else {
        format!("{v}")
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(
        out,
        "# HELP {name} {}",
        help.replace('\\', "\\\\").replace('\n', "\\n")
    );
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// The exposition of `gpus`, whose values follow `columns`: a `# HELP` and `# TYPE` line and a sample per GPU for
/// each family. Gauges of a stale GPU, and values that are not numbers, are left out; a family none of whose
/// columns the view samples is left out whole.
pub fn exposition(hostname: &str, columns: &[TopColumn], gpus: &[ExportGpu]) -> String {
    let mut out = String::new();
    let value = |g: &ExportGpu, column: usize, per: f64| -> Option<f64> {
        let v = g.values.as_ref()?.get(column)? / per;
        v.is_finite().then_some(v)
    };
    for gauge in &GAUGES {
        let Some(column) = columns.iter().position(|c| c.counter == gauge.metric) else {
            continue;
        };
        family(&mut out, gauge.name, "gauge", gauge.help);
        for g in gpus {
            if let Some(v) = value(g, column, gauge.per) {
                let _ = writeln!(
                    out,
                    "{}{{{}}} {}",
                    gauge.name,
                    labels(&g.gpu, hostname),
                    number(v)
                );
            }
        }
    }
    let others: Vec<(usize, &TopColumn)> = columns
        .iter()
        .enumerate()
        .filter(|(_, c)| !GAUGES.iter().any(|g| g.metric == c.counter))
        // A counter named twice (`--counters A,A`) would give the same series twice, which Prometheus refuses.
        .filter(|(i, c)| !columns[..*i].iter().any(|e| e.counter == c.counter))
        .collect();
    if !others.is_empty() {
        family(
            &mut out,
            "gpu_tools_device_metric",
            "gauge",
            "A metric or counter named with --metrics or --counters, its mean over the latest refresh, in the \
             vendor's unit.",
        );
        for g in gpus {
            for (column, c) in &others {
                if let Some(v) = value(g, *column, 1.0) {
                    let _ = writeln!(
                        out,
                        "gpu_tools_device_metric{{{},metric=\"{}\"}} {}",
                        labels(&g.gpu, hostname),
                        label_value(&c.counter),
                        number(v)
                    );
                }
            }
        }
    }
    family(
        &mut out,
        "gpu_tools_gpu_up",
        "gauge",
        "1 while the GPU's gauges are current, 0 while they are left out (its last read failed, or no sample came \
         lately).",
    );
    for g in gpus {
        let up = u8::from(g.values.is_some());
        let _ = writeln!(out, "gpu_tools_gpu_up{{{}}} {up}", labels(&g.gpu, hostname));
    }
    for c in &COUNTERS {
        family(&mut out, c.name, "counter", c.help);
        for g in gpus {
            let _ = writeln!(
                out,
                "{}{{{}}} {}",
                c.name,
                labels(&g.gpu, hostname),
                (c.get)(g)
            );
        }
    }
    out
}
