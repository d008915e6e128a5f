//! Per-kernel metrics of a whole program: what a profiled program's streams held ([`ProfileRun`], filled by
//! [`collect`]), and the reports a profiler prints: one row per kernel name with each metric's mean, minimum and
//! maximum ([`KernelTable`]), and the top stall reasons per function with their PC offsets ([`StallTable`]), as
//! text, CSV or JSON. The request a profiled program is run with, and running it, are `gpu-tools-injection`'s
//! (`gpu_tools_injection::profile`); this module spawns nothing and knows no injection variable.
//!
//! Vendor-neutral like the rest of the crate: it reads the trace stream's counter records, whatever collected
//! them.
//!
//! ```
//! use gpu_tools_trace::profile::KernelTable;
//!
//! let table = KernelTable::from_records(&[]);
//! table.write_text(&mut std::io::stdout(), |name| name.to_string()).unwrap();
//! ```

use std::collections::HashMap;
use std::io::{self, Write};
use std::process::ExitStatus;
use std::sync::Arc;

use crate::{
    KernelMetricsRecord, KernelRecord, Notice, ProfileLoss, Record, StallRecord, StreamReader,
};

mod combine;

pub use combine::{Combine, combine_values};

/// What a profiled program's streams held: [`collect`] fills it (`gpu_tools_injection::profile::run` from each process's
/// stream).
#[derive(Debug, Default)]
pub struct ProfileRun {
    /// How the program ended (`None` only if waiting for it failed).
    pub status: Option<ExitStatus>,
    /// Processes that sent a stream.
    pub processes: usize,
    /// Processes whose stream held no kernel, kernel-metrics or stall record: they loaded CUDA and ran no kernel (a
    /// compile worker, for example).
    pub idle_processes: usize,
    /// Kernel records (their durations, natively timed by the activity API).
    pub kernels: Vec<KernelRecord>,
    /// Per-kernel metric values, in launch order per process.
    pub metrics: Vec<KernelMetricsRecord>,
    /// PC-sampling records.
    pub stalls: Vec<StallRecord>,
    /// Profiling data lost.
    pub losses: Vec<ProfileLoss>,
    /// Notices the injection library sent (why profiling could not start, for example).
    pub notices: Vec<Notice>,
    /// Frames that could not be read.
    pub wire_errors: usize,
    /// Streams that ended with their end record.
    pub ended: usize,
    /// Runs of the program: 2 when metrics and PC sampling were both asked for (see `gpu_tools_injection::profile::run`).
    pub runs: usize,
    /// Activity records (the kernel records) that CUPTI reported dropped, from the streams' end records. Metrics
    /// are not affected; durations and launch order of those kernels are.
    pub dropped_records: u64,
}

/// Sorts a stream's records into `out`, and counts the stream as an idle process when it held no kernel,
/// kernel-metrics or stall record.
pub fn collect<R: io::Read>(reader: StreamReader<R>, out: &mut ProfileRun) {
    let before = out.kernels.len() + out.metrics.len() + out.stalls.len();
    for item in reader {
        match item {
            Ok(Record::Kernel(k)) => out.kernels.push(k),
            Ok(Record::KernelMetrics(m)) => out.metrics.push(m),
            Ok(Record::Stall(s)) => out.stalls.push(s),
            Ok(Record::ProfileLoss(l)) => out.losses.push(l),
            Ok(Record::Notice(n)) => out.notices.push(n),
            // Shown as any notice; what it means is for its sender's protocol.
            Ok(Record::CodedNotice(n)) => out.notices.push(Notice {
                level: n.level,
                text: n.text,
            }),
            Ok(Record::ProcessEnd(end)) => {
                out.ended += 1;
                out.dropped_records += end.dropped;
            }
            Ok(_) => {}
            Err(_) => out.wire_errors += 1,
        }
    }
    if out.kernels.len() + out.metrics.len() + out.stalls.len() == before {
        out.idle_processes += 1;
    }
}

/// Count, mean, minimum and maximum of one metric over a kernel's launches (`NaN` values left out).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricStats {
    /// Launches with a value.
    pub count: u64,
    /// Sum of the values.
    pub sum: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl Default for MetricStats {
    fn default() -> Self {
        MetricStats {
            count: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

impl MetricStats {
    fn add(&mut self, v: f64) {
        if v.is_nan() {
            return;
        }
        self.count += 1;
        self.sum += v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// The mean (`NaN` without values).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            f64::NAN
        } else {
            self.sum / self.count as f64
        }
    }
}

/// One kernel name's launches.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelRow {
    /// The kernel's name as recorded (mangled).
    pub kernel: Arc<str>,
    /// Launches profiled.
    pub launches: u64,
    /// One entry per metric of the table.
    pub metrics: Vec<MetricStats>,
}

/// Per-kernel-name statistics of every metric, rows sorted by the first metric's total (largest first).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KernelTable {
    /// The metrics, in the order first seen.
    pub metrics: Vec<Arc<str>>,
    /// The rows.
    pub rows: Vec<KernelRow>,
}

impl KernelTable {
    /// Aggregates kernel-metric records.
    pub fn from_records<'a>(records: impl IntoIterator<Item = &'a KernelMetricsRecord>) -> Self {
        let mut metrics: Vec<Arc<str>> = Vec::new();
        let mut rows: Vec<KernelRow> = Vec::new();
        let mut by_name: HashMap<Arc<str>, usize> = HashMap::new();
        for r in records {
            let row = *by_name.entry(Arc::clone(&r.kernel)).or_insert_with(|| {
                rows.push(KernelRow {
                    kernel: Arc::clone(&r.kernel),
                    launches: 0,
                    metrics: Vec::new(),
                });
                rows.len() - 1
            });
            rows[row].launches += 1;
            for (m, v) in &r.metrics {
                let i = match metrics.iter().position(|x| x == m) {
                    Some(i) => i,
                    None => {
                        metrics.push(Arc::clone(m));
                        metrics.len() - 1
                    }
                };
                let stats = &mut rows[row].metrics;
                if stats.len() <= i {
                    stats.resize(i + 1, MetricStats::default());
                }
                stats[i].add(*v);
            }
        }
        for r in &mut rows {
            r.metrics.resize(metrics.len(), MetricStats::default());
        }
        rows.sort_by(|a, b| {
            let key = |r: &KernelRow| r.metrics.first().map_or(0.0, |m| m.sum);
            key(b)
                .total_cmp(&key(a))
                .then_with(|| a.kernel.cmp(&b.kernel))
        });
        KernelTable { metrics, rows }
    }

    /// A text table: kernel, launches, and mean / min / max of each metric. `name` turns a recorded name into the
    /// one shown (a demangler; the library does not demangle).
    pub fn write_text(
        &self,
        out: &mut impl Write,
        name: impl Fn(&str) -> String,
    ) -> io::Result<()> {
        for (i, m) in self.metrics.iter().enumerate() {
            writeln!(out, "[{}] {m}", i + 1)?;
        }
        write!(out, "{:>8}", "launches")?;
        for i in 0..self.metrics.len() {
            write!(
                out,
                " {:>12} {:>12} {:>12}",
                format!("[{}] mean", i + 1),
                "min",
                "max"
            )?;
        }
        writeln!(out, "  kernel")?;
        for r in &self.rows {
            write!(out, "{:>8}", r.launches)?;
            for m in &r.metrics {
                write!(
                    out,
                    " {:>12} {:>12} {:>12}",
                    value_text(m.mean()),
                    value_text(m.min),
                    value_text(m.max)
                )?;
            }
            writeln!(out, "  {}", name(&r.kernel))?;
        }
        Ok(())
    }

    /// CSV: `kernel,launches,metric,mean,min,max` per kernel and metric.
    pub fn write_csv(&self, out: &mut impl Write, name: impl Fn(&str) -> String) -> io::Result<()> {
        writeln!(out, "kernel,launches,metric,mean,min,max")?;
        for r in &self.rows {
            for (m, s) in self.metrics.iter().zip(&r.metrics) {
                writeln!(
                    out,
                    "{},{},{},{},{},{}",
                    csv(&name(&r.kernel)),
                    r.launches,
                    csv(m),
                    s.mean(),
                    s.min,
                    s.max
                )?;
            }
        }
        Ok(())
    }

    /// JSON: an array of `{"kernel", "launches", "metrics": {name: {"mean", "min", "max"}}}` (`null` for a metric
    /// without values).
    pub fn write_json(
        &self,
        out: &mut impl Write,
        name: impl Fn(&str) -> String,
    ) -> io::Result<()> {
        write!(out, "[")?;
        for (i, r) in self.rows.iter().enumerate() {
            if i > 0 {
                write!(out, ",")?;
            }
            write!(
                out,
                "{{\"kernel\":{},\"launches\":{},\"metrics\":{{",
                json_str(&name(&r.kernel)),
                r.launches
            )?;
            for (j, (m, s)) in self.metrics.iter().zip(&r.metrics).enumerate() {
                if j > 0 {
                    write!(out, ",")?;
                }
                write!(
                    out,
                    "{}:{{\"mean\":{},\"min\":{},\"max\":{}}}",
                    json_str(m),
                    json_num(s.mean()),
                    json_num(if s.count > 0 { s.min } else { f64::NAN }),
                    json_num(if s.count > 0 { s.max } else { f64::NAN })
                )?;
            }
            write!(out, "}}}}")?;
        }
        writeln!(out, "]")
    }
}

/// One function's PC samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StallRow {
    /// The function's name as recorded (mangled).
    pub function: Arc<str>,
    /// Samples, all PCs and reasons.
    pub samples: u64,
    /// Samples per stall reason, most first.
    pub reasons: Vec<(Arc<str>, u64)>,
    /// Its hottest PCs: (offset, samples, the reason with most samples there), most first (at most 5).
    pub hot_pcs: Vec<(u64, u64, Arc<str>)>,
}

/// PC samples per function, most first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StallTable {
    /// The rows.
    pub rows: Vec<StallRow>,
}

impl StallTable {
    /// Aggregates stall records.
    pub fn from_records<'a>(records: impl IntoIterator<Item = &'a StallRecord>) -> Self {
        type Acc = (
            u64,
            HashMap<Arc<str>, u64>,
            HashMap<u64, (u64, HashMap<Arc<str>, u64>)>,
        );
        let mut by: HashMap<Arc<str>, Acc> = HashMap::new();
        for r in records {
            let e = by.entry(Arc::clone(&r.function)).or_default();
            for (reason, n) in &r.stalls {
                let n = u64::from(*n);
                e.0 += n;
                *e.1.entry(Arc::clone(reason)).or_default() += n;
                let pc = e.2.entry(r.pc_offset).or_default();
                pc.0 += n;
                *pc.1.entry(Arc::clone(reason)).or_default() += n;
            }
        }
        let top = |m: HashMap<Arc<str>, u64>| {
            let mut v: Vec<(Arc<str>, u64)> = m.into_iter().collect();
            v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            v
        };
        let mut rows: Vec<StallRow> = by
            .into_iter()
            .map(|(function, (samples, reasons, pcs))| {
                let mut hot: Vec<(u64, u64, Arc<str>)> = pcs
                    .into_iter()
                    .map(|(pc, (n, r))| {
                        (
                            pc,
                            n,
                            top(r)
                                .into_iter()
                                .next()
                                .map_or_else(|| Arc::from(""), |x| x.0),
                        )
                    })
                    .collect();
                hot.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                hot.truncate(5);
                StallRow {
                    function,
                    samples,
                    reasons: top(reasons),
                    hot_pcs: hot,
                }
            })
            .collect();
        rows.sort_by(|a, b| {
            b.samples
                .cmp(&a.samples)
                .then_with(|| a.function.cmp(&b.function))
        });
        StallTable { rows }
    }

    /// A text report: per function, its samples, its top stall reasons, and its hottest PCs.
    pub fn write_text(
        &self,
        out: &mut impl Write,
        name: impl Fn(&str) -> String,
        reasons: usize,
    ) -> io::Result<()> {
        for r in &self.rows {
            writeln!(out, "{:>10} samples  {}", r.samples, name(&r.function))?;
            for (reason, n) in r.reasons.iter().take(reasons) {
                let pct = 100.0 * *n as f64 / r.samples.max(1) as f64;
                writeln!(out, "{:>10} {pct:5.1}%  {reason}", n)?;
            }
            for (pc, n, reason) in &r.hot_pcs {
                writeln!(out, "{:>10}         pc +{pc:#06x}  {reason}", n)?;
            }
        }
        Ok(())
    }
}

/// A metric's value as the tables write it: two decimals, scientific notation for the very large and the very
/// small, `-` for no value.
pub fn value_text(v: f64) -> String {
    if v.is_nan() || v.is_infinite() {
        "-".into()
    } else if v != 0.0 && (v.abs() >= 1e7 || v.abs() < 1e-2) {
        format!("{v:.4e}")
    } else {
        format!("{v:.2}")
    }
}

fn csv(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON number (`null` for NaN and infinities, which JSON lacks).
pub fn json_num(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kernel: &str, values: &[(&str, f64)]) -> KernelMetricsRecord {
        KernelMetricsRecord {
            device: 0,
            context: 1,
            correlation: 0,
            launch: 0,
            kernel: Arc::from(kernel),
            metrics: values.iter().map(|(m, v)| (Arc::from(*m), *v)).collect(),
        }
    }

    #[test]
    fn kernels_are_summarised_per_name() {
        let t = KernelTable::from_records(&[
            rec("small", &[("t", 1.0), ("b", 10.0)]),
            rec("big", &[("t", 5.0), ("b", f64::NAN)]),
            rec("big", &[("t", 7.0), ("b", 4.0)]),
        ]);
        assert_eq!(
            &*t.rows[0].kernel, "big",
            "sorted by the first metric's total"
        );
        assert_eq!(t.rows[0].launches, 2);
        assert_eq!(t.rows[0].metrics[0].mean(), 6.0);
        assert_eq!(
            (t.rows[0].metrics[1].count, t.rows[0].metrics[1].min),
            (1, 4.0)
        );
        let mut text = Vec::new();
        t.write_text(&mut text, |n| n.to_uppercase()).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("BIG") && text.contains("[2] b"), "{text}");
        let mut csv_out = Vec::new();
        t.write_csv(&mut csv_out, |n| n.to_string()).unwrap();
        assert!(
            String::from_utf8(csv_out)
                .unwrap()
                .contains("big,2,t,6,5,7")
        );
        let mut json = Vec::new();
        t.write_json(&mut json, |n| n.to_string()).unwrap();
        let json = String::from_utf8(json).unwrap();
        assert!(
            json.starts_with("[{\"kernel\":\"big\",\"launches\":2,\"metrics\":{\"t\":{\"mean\":6,"),
            "{json}"
        );
    }

    #[test]
    fn stalls_are_summarised_per_function() {
        let s = |f: &str, pc: u64, r: &[(&str, u32)]| StallRecord {
            context: 1,
            function: Arc::from(f),
            pc_offset: pc,
            stalls: r.iter().map(|(a, n)| (Arc::from(*a), *n)).collect(),
        };
        let t = StallTable::from_records(&[
            s("chase", 0x40, &[("long_scoreboard", 90), ("selected", 2)]),
            s("chase", 0x50, &[("long_scoreboard", 8)]),
            s("other", 0x10, &[("math", 50)]),
        ]);
        assert_eq!(&*t.rows[0].function, "chase");
        assert_eq!(t.rows[0].samples, 100);
        assert_eq!(&*t.rows[0].reasons[0].0, "long_scoreboard");
        assert_eq!(t.rows[0].hot_pcs[0].0, 0x40);
        let mut out = Vec::new();
        t.write_text(&mut out, |n| n.to_string(), 3).unwrap();
        assert!(
            String::from_utf8(out)
                .unwrap()
                .contains(" 98  98.0%  long_scoreboard")
        );
    }

    #[test]
    fn json_and_csv_escape() {
        assert_eq!(json_str("a\"b\\\n\u{1}"), "\"a\\\"b\\\\\\n\\u0001\"");
        assert_eq!(json_num(f64::NAN), "null");
        assert_eq!(csv("a,b"), "\"a,b\"");
    }
}
