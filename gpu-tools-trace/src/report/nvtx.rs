//! The NVTX reports: ranges by name (`nvtx_sum`) and the device work launched inside them (`nvtx_gpu_proj_sum`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::stats::Values;
use super::stream::Range;
use super::{Analysis, Cell, StreamKey, Table, count};

impl Analysis {
    /// Ranges of every stream with their style, nesting level and direct children.
    fn ranges_with_levels(&self) -> Vec<(StreamKey, &Range, &'static str, u32, u32)> {
        let mut out = Vec::new();
        for (key, s) in &self.streams {
            let mut by_thread: BTreeMap<u32, Vec<&Range>> = BTreeMap::new();
            for r in &s.ranges {
                by_thread.entry(r.thread).or_default().push(r);
            }
            for (_, mut rs) in by_thread {
                // Outer ranges first at equal starts.
                rs.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
                let mut stack: Vec<usize> = Vec::new();
                let mut level = vec![0u32; rs.len()];
                let mut children = vec![0u32; rs.len()];
                let mut nested = vec![true; rs.len()];
                for i in 0..rs.len() {
                    while let Some(&top) = stack.last() {
                        if rs[top].end <= rs[i].start {
                            stack.pop();
                        } else {
                            break;
                        }
                    }
                    if let Some(&top) = stack.last() {
                        if rs[i].end <= rs[top].end {
                            children[top] += 1;
                            level[i] = level[top] + 1;
                        } else {
                            // Overlaps its neighbour without nesting: a start/end range.
                            nested[i] = false;
                            nested[top] = false;
                        }
                    }
                    stack.push(i);
                }
                for i in 0..rs.len() {
                    // NVTX records do not say which API made a range; one that nests on its thread is shown as
                    // push/pop, one that overlaps another as start/end.
                    let style = if nested[i] { "PushPop" } else { "StartEnd" };
                    out.push((*key, rs[i], style, level[i], children[i]));
                }
            }
        }
        out
    }

    /// `nvtx_sum`: NVTX ranges by name.
    pub fn nvtx_sum(&self) -> Table {
        let mut groups: BTreeMap<(Arc<str>, &'static str), Values> = BTreeMap::new();
        for (_, r, style, _, _) in self.ranges_with_levels() {
            groups
                .entry((Arc::clone(&r.name), style))
                .or_default()
                .push(r.end.saturating_sub(r.start));
        }
        let mut t = Table::new(
            "nvtx_sum",
            "NVTX Range Summary",
            vec![
                "Time (%)",
                "Total Time (ns)",
                "Instances",
                "Avg (ns)",
                "Med (ns)",
                "Min (ns)",
                "Max (ns)",
                "StdDev (ns)",
                "Style",
                "Range",
            ],
        );
        let inner = Self::time_table(
            "nvtx_sum",
            "",
            "Range",
            groups.iter().map(|((name, style), v)| {
                (
                    format!("{name}\u{0}{style}"),
                    vec![Cell::Text(style.to_string()), Cell::Text(name.to_string())],
                    v.summary(),
                )
            }),
        );
        t.rows = inner.rows;
        t.notes = inner.notes;
        let (open, unpaired, marks) = self.streams.values().fold((0, 0, 0), |a, s| {
            (a.0 + s.open.len(), a.1 + s.unpaired_ends, a.2 + s.marks)
        });
        if open > 0 {
            t.notes.push(format!(
                "{} still open when {} stream ended (not shown)",
                count(open as u64, "range was", "ranges were"),
                if open == 1 { "its" } else { "their" }
            ));
        }
        if unpaired > 0 {
            t.notes.push(format!(
                "{} no start in the trace (not shown)",
                count(unpaired, "range end had", "range ends had")
            ));
        }
        if marks > 0 {
            t.notes.push(format!(
                "{} ({})",
                count(marks, "NVTX mark", "NVTX marks"),
                if marks == 1 { "an instant" } else { "instants" }
            ));
        }
        t
    }

    /// `nvtx_gpu_proj_sum`: for each NVTX range, the device work launched from its thread while it was open:
    /// from the start of the first operation to the end of the last (the projection), and how many.
    pub fn nvtx_gpu_proj_sum(&self) -> Table {
        // Per stream and thread: device operations by the start of the call that launched them.
        // (call start, operation start, operation end) per (stream, thread).
        type Launches = Vec<(u64, u64, u64)>;
        let mut launched: HashMap<(StreamKey, u32), Launches> = HashMap::new();
        let mut unattributed = 0u64;
        let has_ranges = self.streams.values().any(|s| !s.ranges.is_empty());
        if has_ranges {
            for (key, s) in &self.streams {
                for op in &s.ops {
                    // Correlation id 0 is none: any call that also carries none did not launch it.
                    let call = (op.correlation != 0)
                        .then(|| s.calls.get(&op.correlation))
                        .flatten();
                    match call {
                        Some(&(thread, call)) => launched
                            .entry((*key, thread))
                            .or_default()
                            .push((call, op.start, op.end)),
                        None => unattributed += 1,
                    }
                }
            }
            for v in launched.values_mut() {
                v.sort_unstable();
            }
        }
        #[derive(Default)]
        struct Group {
            proj: Values,
            /// Wide enough for any sum of ranges; one past u64 is not printed as a number.
            range_total: u128,
            instances: u64,
            ops: u64,
            levels: u64,
            children: u64,
        }
        let mut groups: BTreeMap<(Arc<str>, &'static str), Group> = BTreeMap::new();
        for (key, r, style, level, children) in self.ranges_with_levels() {
            let Some(ops) = launched.get(&(key, r.thread)) else {
                continue;
            };
            let from = ops.partition_point(|o| o.0 < r.start);
            let to = ops.partition_point(|o| o.0 <= r.end);
            if from >= to {
                continue;
            }
            let inside = &ops[from..to];
            let first = inside.iter().map(|o| o.1).min().unwrap_or(0);
            let last = inside.iter().map(|o| o.2).max().unwrap_or(0);
            let g = groups.entry((Arc::clone(&r.name), style)).or_default();
            g.proj.push(last.saturating_sub(first));
            g.range_total += u128::from(r.end.saturating_sub(r.start));
            g.instances += 1;
            g.ops += inside.len() as u64;
            g.levels += u64::from(level);
            g.children += u64::from(children);
        }
        let mut t = Table::new(
            "nvtx_gpu_proj_sum",
            "NVTX GPU Projection Summary",
            vec![
                "Range",
                "Style",
                "Total Proj Time (ns)",
                "Total Range Time (ns)",
                "Range Instances",
                "Proj Avg (ns)",
                "Proj Med (ns)",
                "Proj Min (ns)",
                "Proj Max (ns)",
                "Proj StdDev (ns)",
                "Total GPU Ops",
                "Avg GPU Ops",
                "Avg Range Lvl",
                "Avg Num Child",
            ],
        );
        let mut rows: Vec<_> = groups.into_iter().collect();
        rows.sort_by(|a, b| b.1.proj.total().cmp(&a.1.proj.total()).then(a.0.cmp(&b.0)));
        let mut too_large = 0u64;
        for ((name, style), g) in rows {
            let s = g.proj.summary();
            let n = g.instances.max(1) as f64;
            let mut total = |fits: Option<u64>| {
                fits.map_or_else(
                    || {
                        too_large += 1;
                        Cell::Missing
                    },
                    Cell::Int,
                )
            };
            let proj_total = total((!s.overflow).then_some(s.total));
            let range_total = total(u64::try_from(g.range_total).ok());
            t.rows.push(vec![
                Cell::Text(name.to_string()),
                Cell::Text(style.to_string()),
                proj_total,
                range_total,
                Cell::Int(g.instances),
                Cell::Float(s.mean),
                Cell::Float(s.median),
                Cell::Int(s.min),
                Cell::Int(s.max),
                Cell::Float(s.stddev),
                Cell::Int(g.ops),
                Cell::Float(g.ops as f64 / n),
                Cell::Float(g.levels as f64 / n),
                Cell::Float(g.children as f64 / n),
            ]);
        }
        if too_large > 0 {
            t.notes.push(format!(
                "{} too large for 64 bits of nanoseconds (records whose times are corrupt): not shown",
                count(too_large, "total time is", "total times are")
            ));
        }
        if has_ranges && self.streams.values().all(|s| s.calls.is_empty()) {
            t.notes.push(
                "no API records in the trace: device work cannot be tied to the ranges that launched it (record \
                 with API records on)"
                    .into(),
            );
        } else if unattributed > 0 {
            t.notes.push(format!(
                "{} no API record (left out of the projection)",
                count(
                    unattributed,
                    "device operation had",
                    "device operations had"
                )
            ));
        }
        t
    }
}
