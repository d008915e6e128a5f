//! The listing (every kernel, copy and set) and the summary, in the same shape for both backends.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

use super::model::{CounterSummary, ProcessKey, Trace, TransferKind};

/// Nanoseconds as microseconds with three decimals.
fn us(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e3)
}

/// A context as the backend knows it: CUPTI's small id in decimal, the debugger's handle in hex.
fn context(c: u64) -> String {
    if c > u64::from(u32::MAX) {
        format!("{c:#x}")
    } else {
        c.to_string()
    }
}

/// One line per kernel, copy and set, in start order, with times relative to the first record.
pub fn listing(trace: &Trace, out: &mut impl Write) -> io::Result<()> {
    let origin = trace.origin();
    let api = trace.api_by_correlation();
    // The call of the kernel's or copy's own process (its stream): another process may have its pid.
    let from = |process: ProcessKey, corr: Option<u32>| -> String {
        corr.and_then(|c| api.get(&(process, c)))
            .map_or_else(String::new, |a| format!("  from {}", a.name))
    };
    enum Line<'a> {
        Kernel(&'a super::model::Kernel),
        Transfer(&'a super::model::Transfer),
    }
    let mut lines: Vec<(u64, Line<'_>)> = trace
        .kernels
        .iter()
        .map(|k| (k.start.unwrap_or(0), Line::Kernel(k)))
        .chain(trace.transfers.iter().map(|t| (t.start, Line::Transfer(t))))
        .collect();
    lines.sort_by_key(|(t, _)| *t);
    for (_, line) in lines {
        match line {
            Line::Kernel(k) => {
                let when = match (k.start, k.duration()) {
                    (Some(s), Some(d)) => format!(
                        "start {} us  dur {} us",
                        us(s.saturating_sub(origin)),
                        us(d)
                    ),
                    _ => "(not timed)".to_string(),
                };
                let stream = k
                    .stream
                    .map_or_else(|| "stream ?".to_string(), |s| format!("stream {s}"));
                writeln!(
                    out,
                    "kernel  {}  dev {} ctx {} {stream}  {when}  grid ({},{},{}) block ({},{},{}){}",
                    k.name,
                    k.device,
                    context(k.context),
                    k.grid[0],
                    k.grid[1],
                    k.grid[2],
                    k.block[0],
                    k.block[1],
                    k.block[2],
                    from(k.process, k.correlation)
                )?;
            }
            Line::Transfer(t) => {
                let what = match t.kind {
                    TransferKind::Memcpy(dir) => format!("memcpy  {dir}"),
                    TransferKind::Memset => "memset".to_string(),
                };
                writeln!(
                    out,
                    "{what}  {} bytes  dev {} ctx {} stream {}  start {} us  dur {} us  {}{}",
                    t.bytes,
                    t.device,
                    context(t.context),
                    t.stream,
                    us(t.start.saturating_sub(origin)),
                    us(t.duration()),
                    t.detail,
                    from(t.process, Some(t.correlation))
                )?;
            }
        }
    }
    Ok(())
}

#[derive(Default)]
struct Times {
    count: u64,
    timed: u64,
    total: u64,
    min: u64,
    max: u64,
    bytes: u64,
}

impl Times {
    fn add(&mut self, ns: Option<u64>, bytes: u64) {
        self.count += 1;
        self.bytes += bytes;
        if let Some(ns) = ns {
            self.min = if self.timed == 0 {
                ns
            } else {
                self.min.min(ns)
            };
            self.max = self.max.max(ns);
            self.timed += 1;
            self.total += ns;
        }
    }

    /// `total mean min max` columns in us, or dashes where nothing was timed.
    fn columns(&self) -> String {
        if self.timed == 0 {
            return format!("{:>12} {:>10} {:>10} {:>10}", "-", "-", "-", "-");
        }
        format!(
            "{:>12} {:>10} {:>10} {:>10}",
            us(self.total),
            us(self.total / self.timed),
            us(self.min),
            us(self.max)
        )
    }
}

/// `counters: 2950 samples on GPU 0 every 1 ms, 0 lost, 3 gaps (4.0 ms without samples)`.
pub fn counter_line(c: &CounterSummary) -> String {
    let mut line = format!(
        "counters: {} samples on GPU {} every {}, {} lost, {} gaps",
        c.samples, c.device, c.every, c.lost, c.gaps
    );
    if c.gaps > 0 {
        line.push_str(&format!(
            " ({:.1} ms without samples)",
            c.gap_ns as f64 / 1e6
        ));
    }
    if c.error.is_some() {
        line.push_str(" (sampling failed)");
    }
    line
}

/// The summary: counts, then per kernel name count/total/mean/min/max, per copy direction and for sets.
pub fn summary(trace: &Trace, backend: &str, out: &mut impl Write) -> io::Result<()> {
    let memcpys = trace
        .transfers
        .iter()
        .filter(|t| matches!(t.kind, TransferKind::Memcpy(_)))
        .count();
    let memsets = trace.transfers.len() - memcpys;
    let transfers = |n: usize| {
        if trace.sees_transfers {
            n.to_string()
        } else {
            "-".to_string()
        }
    };
    writeln!(
        out,
        "--- summary (backend {backend}): {} process{}, {} kernels, {} memcpys, {} memsets, {} API calls, {} dropped records",
        trace.processes.len(),
        if trace.processes.len() == 1 { "" } else { "es" },
        trace.kernels.len(),
        transfers(memcpys),
        transfers(memsets),
        if trace.sees_api {
            trace.api.len().to_string()
        } else {
            "-".to_string()
        },
        trace.dropped_total()
    )?;
    if trace.nvtx > 0 {
        writeln!(out, "    {} NVTX ranges and marks", trace.nvtx)?;
    }
    if trace.graph_launches > 0 {
        writeln!(
            out,
            "    {} CUDA graph launches, each recorded as a whole (their kernels are not counted above; \
             --cuda-graph-trace node lists them)",
            trace.graph_launches
        )?;
    }
    // Each process's job labels (its rank), where its launcher set them.
    if trace.processes.iter().any(|p| !p.label.is_empty()) {
        for p in &trace.processes {
            let label = if p.label.is_empty() { "-" } else { &p.label };
            writeln!(out, "    process {} ({}): {label}", p.pid, p.command)?;
        }
    }
    for c in &trace.counters {
        writeln!(out, "{}", counter_line(c))?;
    }
    let mut by_name: BTreeMap<&str, Times> = BTreeMap::new();
    for k in &trace.kernels {
        by_name.entry(&k.name).or_default().add(k.duration(), 0);
    }
    writeln!(out, "--- kernels: time in us")?;
    writeln!(
        out,
        "{:>8} {:>12} {:>10} {:>10} {:>10}  name",
        "count", "total", "mean", "min", "max"
    )?;
    let mut rows: Vec<(&str, &Times)> = by_name.iter().map(|(n, t)| (*n, t)).collect();
    rows.sort_by(|a, b| b.1.total.cmp(&a.1.total).then(b.1.count.cmp(&a.1.count)));
    for (name, t) in rows {
        writeln!(out, "{:>8} {}  {name}", t.count, t.columns())?;
    }
    if !trace.kernel_times && !trace.kernels.is_empty() {
        writeln!(
            out,
            "          (no kernel times: the debugger backend times kernels only with --blocking-launches)"
        )?;
    }
    writeln!(out, "--- memcpy and memset: time in us")?;
    if !trace.sees_transfers {
        writeln!(out, "          (not seen by the {backend} backend)")?;
        return Ok(());
    }
    writeln!(
        out,
        "{:>8} {:>14} {:>12} {:>10} {:>10} {:>10}  kind",
        "count", "bytes", "total", "mean", "min", "max"
    )?;
    let mut by_kind: BTreeMap<TransferKind, Times> = BTreeMap::new();
    for t in &trace.transfers {
        by_kind
            .entry(t.kind)
            .or_default()
            .add(Some(t.duration()), t.bytes);
    }
    for (kind, t) in &by_kind {
        let name = match kind {
            TransferKind::Memcpy(dir) => format!("memcpy {dir}"),
            TransferKind::Memset => "memset".to_string(),
        };
        writeln!(
            out,
            "{:>8} {:>14} {}  {name}",
            t.count,
            t.bytes,
            t.columns()
        )?;
    }
    if trace.sees_api && !trace.api.is_empty() {
        let mut calls: HashMap<&str, Times> = HashMap::new();
        for a in &trace.api {
            calls
                .entry(&a.name)
                .or_default()
                .add(Some(a.end.saturating_sub(a.start)), 0);
        }
        let mut rows: Vec<(&str, &Times)> = calls.iter().map(|(n, t)| (*n, t)).collect();
        rows.sort_by(|a, b| b.1.total.cmp(&a.1.total).then(a.0.cmp(b.0)));
        writeln!(out, "--- API calls (top 15 by time): time in us")?;
        for (name, t) in rows.iter().take(15) {
            writeln!(out, "{:>8} {}  {name}", t.count, t.columns())?;
        }
    }
    Ok(())
}
