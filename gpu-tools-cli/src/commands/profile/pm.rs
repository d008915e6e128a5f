//! Per-kernel values of a running process from PM sampling attribution: where CUPTI's range profiler ended at the
//! program's first CUDA graph launch (or stream capture), `profile --pid` gives the rest of its window to a
//! `trace --pid --counters` window (`trace::counter_window`: device-wide PM sampling in this process and a trace
//! of the process's kernels) and attributes the samples to the kernels that ran
//! (`gpu_tools::trace::counters::attribution`). This file says which of the asked metrics PM sampling can give
//! ([`Plan`]) and makes the table of the values per kernel name ([`AttributedTable`]).
//!
//! A metric the range profiler measures per launch is given here as what PM sampling saw of it: the kernel's
//! duration from its trace records (`gpu__time_duration`), an amount (`dram__bytes_read.sum`) as the part of each
//! sample's amount that fell in the kernel's time, per launch (over the covered part of its time, scaled to the
//! whole), and a level or a percentage as the time-weighted mean of the samples it ran in (a share of elapsed time
//! fitted over every sample where the kernel's samples went mostly to others). A metric PM sampling cannot collect
//! on the chip is named, with why, and left out.

use std::io::{self, Write};

use gpu_tools::cupti::profiler::host::{Catalog, ConfigImage};
use gpu_tools::cupti::profiler::{self, Method};
use gpu_tools::profile::value_text;
use gpu_tools::trace::counters::{CounterAttribution, KernelCounters, MetricKind};
use gpu_tools::trace::report::csv_field;

/// The range profiler's metric of a kernel's duration: here, from the trace's kernel records.
const DURATION: &str = "gpu__time_duration";

/// Where a column's values come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Each launch's duration, from the kernel trace (ns).
    Duration,
    /// A metric PM sampling collects, attributed to the kernels.
    Sampled(String),
}

impl Source {
    /// The source as one word, for CSV and JSON.
    pub fn word(&self) -> &'static str {
        match self {
            Source::Duration => "trace-duration",
            Source::Sampled(_) => "pm-sampling",
        }
    }
}

/// One asked metric that PM sampling attribution can give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The metric as asked (`dram__bytes_read.sum`).
    pub asked: String,
    pub source: Source,
}

/// The asked metrics: those PM sampling attribution can give, and those it cannot, with why.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    pub columns: Vec<Column>,
    pub absent: Vec<(String, String)>,
}

impl Plan {
    /// The plan for `asked`, in order; `fits` says whether PM sampling collects a set of metrics on the chip, in
    /// its one pass (`Err`: why not). A duration comes from the trace; an amount (`….sum`) that does not fit is
    /// tried as its rate (`….sum.per_second`), integrated back into the amount; a metric that fits neither way,
    /// beside those before it, is left out with why.
    pub fn new(asked: &[String], fits: impl Fn(&[String]) -> Result<(), String>) -> Plan {
        let mut plan = Plan::default();
        for m in asked {
            if m.split('.').next() == Some(DURATION) {
                plan.columns.push(Column {
                    asked: m.clone(),
                    source: Source::Duration,
                });
                continue;
            }
            let with = |name: &str| {
                let mut set = plan.sampled();
                if !set.iter().any(|s| s == name) {
                    set.push(name.to_string());
                }
                fits(&set)
            };
            let rate = format!("{m}.per_second");
            let source = match with(m) {
                Ok(()) => Ok(m.clone()),
                Err(why) if m.ends_with(".sum") && with(&rate).is_ok() => {
                    log::info!("PM sampling: {m} as {rate} ({why})");
                    Ok(rate)
                }
                Err(why) => Err(why),
            };
            match source {
                Ok(pm) => plan.columns.push(Column {
                    asked: m.clone(),
                    source: Source::Sampled(pm),
                }),
                Err(why) => plan.absent.push((m.clone(), why)),
            }
        }
        plan
    }

    /// The metrics PM sampling samples, each once, in order.
    pub fn sampled(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for c in &self.columns {
            if let Source::Sampled(m) = &c.source {
                if !out.contains(m) {
                    out.push(m.clone());
                }
            }
        }
        out
    }
}

/// Whether PM sampling collects a set of metrics on device 0's chip in one pass, from the chip's catalogue and the
/// configuration image the set makes. Where the catalogue cannot be had, every set passes: the samplers, opened
/// next, refuse what they cannot collect, with its names.
pub fn fits_on_device_0() -> impl Fn(&[String]) -> Result<(), String> {
    let catalog = profiler::chip_name(0)
        .and_then(|chip| Ok((Catalog::for_chip(&chip)?, chip)))
        .map_err(|e| log::info!("PM sampling's catalogue not read: {e}"))
        .ok();
    move |set: &[String]| {
        let Some((catalog, chip)) = &catalog else {
            return Ok(());
        };
        let names = catalog
            .resolve_all(set, Method::PmSampling)
            .map_err(|e| e.to_string())?;
        let image = ConfigImage::build(chip, Method::PmSampling, None, &names)
            .map_err(|e| e.to_string())?;
        match image.passes() {
            1 => Ok(()),
            n => Err(format!(
                "PM sampling collects in one pass, and {} would need {n}",
                set.join(", ")
            )),
        }
    }
}

/// One kernel name's values.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The name as recorded.
    pub kernel: String,
    pub launches: u64,
    /// The share of its time that samples covered, 0 to 1.
    pub covered: f64,
    /// A value per column (`None`: its samples did not hold the metric).
    pub values: Vec<Option<f64>>,
    /// `direct`, `statistical` (most of its samples' time went to other kernels or idle time), `fitted` (a share of
    /// elapsed time fitted over every sample) or `none` (no sample covered it).
    pub attribution: &'static str,
}

/// The per-kernel values of a window, with what they rest on.
#[derive(Debug, Clone, PartialEq)]
pub struct AttributedTable {
    pub columns: Vec<Column>,
    pub absent: Vec<(String, String)>,
    pub rows: Vec<Row>,
}

/// One column's value of one kernel name, per launch.
fn value(k: &KernelCounters, source: &Source) -> Option<f64> {
    match source {
        Source::Duration => (k.launches > 0).then(|| k.gpu_time as f64 / k.launches as f64),
        Source::Sampled(metric) => {
            let m = k.metrics.iter().find(|m| &*m.metric == metric)?;
            match m.kind {
                // What the samples saw, over the covered part of its time, scaled to the whole, per launch.
                MetricKind::Amount | MetricKind::Rate => {
                    let covered = k.covered();
                    (covered > 0.0 && k.launches > 0).then(|| m.value / covered / k.launches as f64)
                }
                MetricKind::Share if k.statistical() => m.fitted.or(Some(m.value)),
                MetricKind::Share | MetricKind::Level => Some(m.value),
            }
        }
    }
}

impl AttributedTable {
    /// The table of `plan`'s columns over what `attribution` gave, a row per kernel name (the longest total time
    /// first, as the attribution orders them).
    pub fn new(plan: &Plan, attribution: &CounterAttribution) -> AttributedTable {
        let fitted_share = |k: &KernelCounters| {
            k.statistical()
                && plan.columns.iter().any(|c| match &c.source {
                    Source::Sampled(m) => {
                        MetricKind::of(m) == MetricKind::Share && k.fitted(m).is_some()
                    }
                    Source::Duration => false,
                })
        };
        let rows = attribution
            .kernels
            .iter()
            .map(|k| Row {
                kernel: k.name.to_string(),
                launches: k.launches,
                covered: k.covered(),
                values: plan.columns.iter().map(|c| value(k, &c.source)).collect(),
                attribution: if k.samples == 0 {
                    "none"
                } else if fitted_share(k) {
                    "fitted"
                } else if k.statistical() {
                    "statistical"
                } else {
                    "direct"
                },
            })
            .collect();
        AttributedTable {
            columns: plan.columns.clone(),
            absent: plan.absent.clone(),
            rows,
        }
    }

    /// CSV: `kernel,launches,covered,attribution,metric,source,mean` per kernel and column (`mean` empty where the
    /// samples did not hold the metric).
    pub fn write_csv(&self, out: &mut dyn Write, name: impl Fn(&str) -> String) -> io::Result<()> {
        writeln!(
            out,
            "kernel,launches,covered,attribution,metric,source,mean"
        )?;
        for r in &self.rows {
            for (c, v) in self.columns.iter().zip(&r.values) {
                writeln!(
                    out,
                    "{},{},{},{},{},{},{}",
                    csv_field(&name(&r.kernel)),
                    r.launches,
                    r.covered,
                    r.attribution,
                    csv_field(&c.asked),
                    c.source.word(),
                    v.map(|v| v.to_string()).unwrap_or_default()
                )?;
            }
        }
        Ok(())
    }

    /// JSON: `{"source": "pm-sampling-attribution", "kernels": [{"kernel", "launches", "covered", "attribution",
    /// "metrics": {name: {"mean", "source"}}}], "absent": {name: why}}` (`mean` null where the samples did not hold
    /// the metric).
    pub fn write_json(&self, out: &mut dyn Write, name: impl Fn(&str) -> String) -> io::Result<()> {
        let kernels: Vec<serde_json::Value> = self
            .rows
            .iter()
            .map(|r| {
                let metrics: serde_json::Map<String, serde_json::Value> = self
                    .columns
                    .iter()
                    .zip(&r.values)
                    .map(|(c, v)| {
                        let mean = v
                            .filter(|v| v.is_finite())
                            .map_or(serde_json::Value::Null, |v| v.into());
                        (
                            c.asked.clone(),
                            serde_json::json!({"mean": mean, "source": c.source.word()}),
                        )
                    })
                    .collect();
                serde_json::json!({
                    "kernel": name(&r.kernel),
                    "launches": r.launches,
                    "covered": r.covered,
                    "attribution": r.attribution,
                    "metrics": metrics,
                })
            })
            .collect();
        let absent: serde_json::Map<String, serde_json::Value> = self
            .absent
            .iter()
            .map(|(m, why)| (m.clone(), why.clone().into()))
            .collect();
        let doc = serde_json::json!({
            "source": "pm-sampling-attribution",
            "kernels": kernels,
            "absent": absent,
        });
        serde_json::to_writer(&mut *out, &doc).map_err(io::Error::other)?;
        writeln!(out)
    }

    /// The table as text, with what its values are; `name` turns a recorded name into the one shown.
    pub fn write_text(&self, out: &mut dyn Write, name: impl Fn(&str) -> String) -> io::Result<()> {
        writeln!(
            out,
            "Values from PM sampling attribution, not from the range profiler: the range profiler cannot run \
             beside CUDA graph launches in a running process"
        )?;
        for (i, c) in self.columns.iter().enumerate() {
            let from = match &c.source {
                Source::Duration => {
                    "each launch's duration, from the kernel trace (ns)".to_string()
                }
                Source::Sampled(m) if *m == c.asked => format!("PM sampling's {m}, attributed"),
                Source::Sampled(m) => format!("PM sampling's {m}, attributed and integrated"),
            };
            writeln!(out, "[{}] {}: {from}", i + 1, c.asked)?;
        }
        write!(out, "{:>8} {:>11}", "launches", "covered (%)")?;
        for i in 0..self.columns.len() {
            write!(out, " {:>12}", format!("[{}] mean", i + 1))?;
        }
        writeln!(out, "  {:<11}  kernel", "attribution")?;
        for r in &self.rows {
            write!(out, "{:>8} {:>11.1}", r.launches, 100.0 * r.covered)?;
            for v in &r.values {
                write!(
                    out,
                    " {:>12}",
                    v.map_or_else(|| "-".to_string(), value_text)
                )?;
            }
            writeln!(out, "  {:<11}  {}", r.attribution, name(&r.kernel))?;
        }
        for (m, why) in &self.absent {
            writeln!(out, "not given by PM sampling: {m} ({why})")?;
        }
        writeln!(
            out,
            "PM sampling is device-wide: its counters also count other processes' work on the GPU. Amounts per \
             launch are what the samples saw of the kernel's covered time, scaled to the whole launch; \
             statistical: most of the time of the row's samples went to other kernels or idle time, each sample \
             shared by overlap; fitted: its share of elapsed time fitted over every sample"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_tools::trace::CounterSample;
    use gpu_tools::trace::counters::Attribution;
    use std::sync::Arc;

    const MS: u64 = 1_000_000;
    const READ: &str = "dram__bytes_read.sum";
    const THROUGHPUT: &str = "sm__throughput.avg.pct_of_peak_sustained_elapsed";

    fn asked() -> Vec<String> {
        gpu_tools_injection::profile::BASIC_SET
            .iter()
            .map(|m| m.to_string())
            .collect()
    }

    #[test]
    fn durations_come_from_the_trace_and_uncollectable_metrics_are_named() {
        // A chip whose PM sampling has DRAM rates and SM throughput, not the DRAM amounts.
        let fits = |set: &[String]| match set
            .iter()
            .find(|m| !(m.ends_with(".per_second") || *m == THROUGHPUT))
        {
            Some(m) => Err(format!("{m} is not collected by PM sampling")),
            None => Ok(()),
        };
        let plan = Plan::new(&asked(), fits);
        assert_eq!(plan.columns[0].source, Source::Duration);
        assert_eq!(
            plan.columns[1].source,
            Source::Sampled("dram__bytes_read.sum.per_second".into())
        );
        assert_eq!(
            plan.sampled(),
            [
                "dram__bytes_read.sum.per_second",
                "dram__bytes_write.sum.per_second",
                THROUGHPUT
            ]
        );
        assert!(plan.absent.is_empty());
        // One whose pass holds two metrics: the third is left out, with why.
        let plan = Plan::new(&asked(), |set| {
            if set.len() <= 2 {
                Ok(())
            } else {
                Err(format!("{} would need 2 passes", set.join(", ")))
            }
        });
        assert_eq!(plan.sampled(), [READ, "dram__bytes_write.sum"]);
        assert_eq!(
            plan.absent,
            [(
                THROUGHPUT.to_string(),
                format!("{READ}, dram__bytes_write.sum, {THROUGHPUT} would need 2 passes")
            )]
        );
    }

    #[test]
    fn per_launch_values_rest_on_what_the_samples_saw() {
        // 10 samples of 1 ms: 2 MB read in each, SM throughput 60%. `gemm` runs 4 launches of 1 ms, each alone in a
        // sample; `small` runs 0.1 ms in each of 2 other samples (a tenth of each: statistical), and one launch
        // outside every sample (half of its time uncovered).
        let mut a = Attribution::new();
        for i in 0..10 {
            a.add_sample(
                "h",
                &CounterSample {
                    start: i * MS,
                    end: (i + 1) * MS,
                    device: 0,
                    values: vec![(Arc::from(READ), 2e6), (Arc::from(THROUGHPUT), 60.0)],
                },
            );
        }
        let gemm: Arc<str> = Arc::from("gemm");
        let small: Arc<str> = Arc::from("small");
        for i in 0..4 {
            a.add_kernel("h", 0, &gemm, i * MS, (i + 1) * MS);
        }
        for i in 5..7 {
            a.add_kernel("h", 0, &small, i * MS, i * MS + MS / 10);
        }
        a.add_kernel("h", 0, &small, 20 * MS, 20 * MS + MS / 5);
        let plan = Plan::new(&asked(), |_| Ok(()));
        let table = AttributedTable::new(&plan, &a.attribute());
        let row = |n: &str| table.rows.iter().find(|r| r.kernel == n).unwrap();
        let g = row("gemm");
        assert_eq!((g.launches, g.covered, g.attribution), (4, 1.0, "direct"));
        assert_eq!(g.values[0], Some(1e6), "1 ms a launch");
        assert_eq!(g.values[1], Some(2e6), "a whole sample's bytes a launch");
        assert_eq!(g.values[3], Some(60.0));
        let s = row("small");
        assert_eq!(s.launches, 3);
        assert!((s.covered - 0.5).abs() < 1e-9, "{}", s.covered);
        assert_eq!(s.attribution, "statistical");
        // 0.2 MB seen in each covered launch; over half the time, scaled: 0.4 MB seen over 0.2 ms, 0.4 MB / 0.5 / 3.
        let read = s.values[1].unwrap();
        assert!((read - 0.4e6 / 0.5 / 3.0).abs() < 1.0, "{read}");
        // Idle time does not dilute a share of elapsed time: the samples' 60% over their busy tenth, at most 100.
        assert_eq!(s.values[3], Some(100.0));
        let mut text = Vec::new();
        table.write_text(&mut text, |n| n.to_uppercase()).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.starts_with(
                "Values from PM sampling attribution, not from the range profiler: the range profiler cannot \
                 run beside CUDA graph launches in a running process\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("[1] gpu__time_duration.sum: each launch's duration"),
            "{text}"
        );
        let gemm_line = text.lines().find(|l| l.ends_with("GEMM")).unwrap();
        let cells: Vec<&str> = gemm_line.split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "4",
                "100.0",
                "1000000.00",
                "2000000.00",
                "-",
                "60.00",
                "direct",
                "GEMM"
            ],
            "{gemm_line}"
        );
        // The same values as CSV and JSON, each column named with its source; a value the samples lacked is empty
        // (CSV) or null (JSON), never 0.
        let mut csv = Vec::new();
        table.write_csv(&mut csv, |n| format!("{n}, x")).unwrap();
        let csv = String::from_utf8(csv).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "kernel,launches,covered,attribution,metric,source,mean"
        );
        assert!(
            lines.contains(&"\"gemm, x\",4,1,direct,gpu__time_duration.sum,trace-duration,1000000"),
            "{csv}"
        );
        assert!(
            lines.contains(&"\"gemm, x\",4,1,direct,dram__bytes_read.sum,pm-sampling,2000000"),
            "{csv}"
        );
        assert_eq!(lines.len(), 1 + 2 * 4, "{csv}");
        let mut json = Vec::new();
        table.write_json(&mut json, |n| n.to_string()).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(json["source"], "pm-sampling-attribution");
        let kernels = json["kernels"].as_array().unwrap();
        let g = kernels.iter().find(|k| k["kernel"] == "gemm").unwrap();
        assert_eq!(g["launches"], 4);
        assert_eq!(g["attribution"], "direct");
        assert_eq!(g["metrics"]["dram__bytes_read.sum"]["mean"], 2e6);
        let absent = g["metrics"]
            .as_object()
            .unwrap()
            .values()
            .filter(|m| m["mean"].is_null())
            .count();
        assert_eq!(absent, 1, "the one value the samples lacked: {g}");
    }

    /// Marks the stand-in program's run (through `trace`'s launcher) and names its scenario.
    const STANDIN: &str = "GPU_TOOLS_TEST_PM_STANDIN";

    /// The stand-in traced program of the test below (this test binary run again by `trace`'s launcher): it
    /// streams, as the injection library would, `gemm` on device 0 for 5 ms, then `copy` for 2 ms, timed on
    /// CLOCK_MONOTONIC, while the tracer's PM sampler (the profiling double) samples.
    #[test]
    #[ignore = "a stand-in traced program, run by the test below"]
    fn standin() {
        use gpu_tools::trace::{
            Encoder, EndReason, ProcessEnd, ProcessInfo, ProcessStart, Record, StreamHeader,
            TimestampClock,
        };
        if std::env::var(STANDIN).is_err() {
            return;
        }
        let socket = std::env::var_os(gpu_tools_injection::env::SOCKET).expect("the socket");
        let mut sock = std::os::unix::net::UnixStream::connect(socket).expect("connect");
        let now = gpu_tools::counters::host_monotonic_ns;
        let pid = std::process::id();
        let mut enc = Encoder::new(&StreamHeader::new(pid, 130001, TimestampClock::Monotonic));
        enc.push(&Record::ProcessStart(ProcessStart {
            pid,
            parent_pid: 1,
            time: now(),
            command: "standin".into(),
        }));
        // The host, as the injection library names it: kernels and samples meet on it.
        enc.push(&Record::ProcessInfo(ProcessInfo::current()));
        std::thread::sleep(std::time::Duration::from_millis(100));
        let start = now();
        enc.push(&gpu_tools_testing::records::kernel(
            "gemm",
            start,
            start + 5 * MS,
            1,
        ));
        enc.push(&gpu_tools_testing::records::kernel(
            "copy",
            start + 6 * MS,
            start + 8 * MS,
            2,
        ));
        std::thread::sleep(std::time::Duration::from_millis(150));
        let records = enc.records();
        enc.push(&Record::ProcessEnd(ProcessEnd {
            time: now(),
            reason: EndReason::Exit,
            records,
            dropped: 0,
            skipped: 0,
            callback_panics: 0,
        }));
        std::io::Write::write_all(&mut sock, enc.bytes()).expect("send");
    }

    /// The whole way of `profile --pid`'s attribution against the CUDA driver and CUPTI profiling doubles (one
    /// GPU, a PM sample per millisecond, metric `i` of a sample worth `40 + i`): the plan from the chip's
    /// catalogue, `trace`'s window with counters (here launching the stand-in: no process can be attached
    /// without a GPU), the trace file read back, the attribution and the table.
    #[test]
    fn a_window_of_the_doubles_is_attributed_per_kernel() {
        if !gpu_tools_testing::own_process() {
            return;
        }
        let double = |n: &str| gpu_tools_testing::double_path(n);
        // SAFETY: this test runs alone in its own process (own_process); no other thread reads the environment.
        unsafe {
            std::env::set_var("GPU_TOOLS_CUDA_DRIVER_LIB", double("cuda_driver"));
            std::env::set_var("GPU_TOOLS_CUPTI_LIB", double("cupti_profiling"));
            std::env::set_var("GPU_TOOLS_NVPERF_HOST_LIB", double("cupti_profiling"));
            std::env::set_var("GPU_TOOLS_DOUBLE_DEVICES", "1");
            std::env::set_var("GPU_TOOLS_DOUBLE_TOP_METRICS", "1");
            std::env::set_var("GPU_TOOLS_DOUBLE_PM_PATTERN", "1000:1");
            std::env::set_var(STANDIN, "1");
            std::env::remove_var("GPU_TOOLS_DOUBLE_PM_BUSY");
            std::env::remove_var("CUDA_VISIBLE_DEVICES");
        }
        // The double's PM sampling has the DRAM amounts and SM throughput, not the duration; SM throughput needs
        // passes of its own (3), and PM sampling collects in one: left out, with why.
        let plan = Plan::new(&asked(), fits_on_device_0());
        assert_eq!(plan.sampled(), [READ, "dram__bytes_write.sum"]);
        assert_eq!(plan.absent.len(), 1, "{:?}", plan.absent);
        assert_eq!(plan.absent[0].0, THROUGHPUT);
        assert!(
            plan.absent[0]
                .1
                .contains("PM sampling collects in one pass")
                && plan.absent[0].1.contains("need 3"),
            "{:?}",
            plan.absent
        );
        let refused = fits_on_device_0()(&["gpu__time_duration.sum".to_string()]).unwrap_err();
        assert!(refused.contains("gpu__time_duration"), "{refused}");

        let me = std::env::current_exe().unwrap();
        let program: Vec<String> = [
            me.to_str().unwrap(),
            "commands::profile::pm::tests::standin",
            "--exact",
            "--ignored",
            "--test-threads=1",
        ]
        .map(String::from)
        .to_vec();
        let sampled = plan.sampled();
        let run_window = || {
            crate::commands::trace::counter_window::run(
                crate::commands::trace::counter_window::Target::Program(&program),
                &me,
                None,
                &sampled,
                None,
                true,
            )
        };
        let window = run_window().unwrap_or_else(|f| panic!("{f:?}"));
        assert_eq!(window.kernels, 2);
        assert!(window.warnings.is_empty(), "{:?}", window.warnings);
        assert!(
            window.counter_lines[0].starts_with("counters: ")
                && window.counter_lines[0].contains(" on GPU 0 every 1 ms, 0 lost"),
            "{:?}",
            window.counter_lines
        );
        let table = AttributedTable::new(&plan, &window.analysis.counter_attribution());
        let names: Vec<&str> = table.rows.iter().map(|r| r.kernel.as_str()).collect();
        assert_eq!(names, ["gemm", "copy"], "the longest first");
        let gemm = &table.rows[0];
        assert_eq!((gemm.launches, gemm.covered), (1, 1.0));
        assert_eq!(gemm.attribution, "direct");
        assert_eq!(gemm.values[0], Some(5e6), "its duration, from the trace");
        // 40 bytes read and 41 written in each millisecond's sample: 5 ms of them.
        let read = gemm.values[1].unwrap();
        let written = gemm.values[2].unwrap();
        assert!((read - 200.0).abs() < 1e-6, "{read}");
        assert!((written - 205.0).abs() < 1e-6, "{written}");
        assert_eq!(gemm.values.len(), 3, "SM throughput is not a column");
        let mut text = Vec::new();
        table.write_text(&mut text, |n| n.to_string()).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains(&format!(
                "not given by PM sampling: {THROUGHPUT} (PM sampling collects in one pass"
            )),
            "{text}"
        );
        let copy = &table.rows[1];
        assert_eq!(copy.values[0], Some(2e6));
        assert!(
            (copy.values[1].unwrap() - 80.0).abs() < 1e-6,
            "{:?}",
            copy.values
        );

        // Counters held by another tool: refused before the program runs, in words for these metrics (there is no
        // "without --counters" to fall back on here).
        // SAFETY: as above.
        unsafe { std::env::set_var("GPU_TOOLS_DOUBLE_PM_BUSY", "0") };
        let refused = run_window().err().expect("refused").text();
        assert!(
            refused.starts_with("the performance counters of device 0 (")
                && refused.contains(
                    "are held by another tool, and the kernel metrics of `profile --pid`"
                )
                && refused.contains("Stop that tool, then profile again")
                && !refused.contains("--counters")
                && refused.ends_with("(the program was not run)"),
            "{refused}"
        );
    }
}
