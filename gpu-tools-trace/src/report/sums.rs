//! The time and size summaries by name: kernels (`cuda_gpu_kern_sum`), API calls (`cuda_api_sum`), graph
//! launches (`cuda_gpu_graph_sum`) and memory operations (`cuda_gpu_mem_time_sum`, `cuda_gpu_mem_size_sum`).

use super::stats;
use super::{Analysis, Cell, Table, count};

impl Analysis {
    /// `Time (%)` and the time columns of a summary by name, rows sorted by total time.
    pub(super) fn time_table<K: AsRef<str>>(
        name: &'static str,
        title: &str,
        last: &'static str,
        rows: impl Iterator<Item = (K, Vec<Cell>, stats::Summary)>,
    ) -> Table {
        let mut t = Table::new(
            name,
            title,
            vec![
                "Time (%)",
                "Total Time (ns)",
                "Instances",
                "Avg (ns)",
                "Med (ns)",
                "Min (ns)",
                "Max (ns)",
                "StdDev (ns)",
                last,
            ],
        );
        let mut rows: Vec<(K, Vec<Cell>, stats::Summary)> = rows.collect();
        // Wide enough that the totals of every row add up without wrapping; a row whose own total overflowed
        // (saturated) adds no more than u64::MAX.
        let all: u128 = rows.iter().map(|r| u128::from(r.2.total)).sum();
        let overflowed = rows.iter().filter(|r| r.2.overflow).count();
        rows.sort_by(|a, b| {
            b.2.total
                .cmp(&a.2.total)
                .then_with(|| a.0.as_ref().cmp(b.0.as_ref()))
        });
        for (key, extra, s) in rows {
            let pct = if all == 0 {
                0.0
            } else {
                100.0 * s.total as f64 / all as f64
            };
            let mut row = vec![
                if overflowed > 0 {
                    Cell::Missing
                } else {
                    Cell::Float(pct)
                },
                if s.overflow {
                    Cell::Missing
                } else {
                    Cell::Int(s.total)
                },
                Cell::Int(s.count),
                Cell::Float(s.mean),
                Cell::Float(s.median),
                Cell::Int(s.min),
                Cell::Int(s.max),
                Cell::Float(s.stddev),
            ];
            if extra.is_empty() {
                row.push(Cell::Text(key.as_ref().to_string()));
            } else {
                row.extend(extra);
            }
            t.rows.push(row);
        }
        if overflowed > 0 {
            t.notes.push(format!(
                "{} a total time too large for 64 bits of nanoseconds (records whose times are corrupt): not shown, \
                 nor the shares of the total",
                count(overflowed as u64, "row has", "rows have")
            ));
        }
        t
    }

    /// `cuda_gpu_kern_sum`: kernels by name.
    pub fn kernel_sum(&self) -> Table {
        let mut t = Self::time_table(
            "cuda_gpu_kern_sum",
            "CUDA GPU Kernel Summary",
            "Name",
            self.kernels.iter().map(|(n, v)| (n, vec![], v.summary())),
        );
        if self.graph_kernels > 0 {
            t.notes.push(format!(
                "{} of the kernels ran as nodes of CUDA graphs (node mode)",
                self.graph_kernels
            ));
        }
        if !self.graphs.is_empty() {
            t.notes.push(
                "CUDA graphs were traced as whole launches (graph mode): their kernels are in cuda_gpu_graph_sum, \
                 not here"
                    .into(),
            );
        }
        t
    }

    /// `cuda_api_sum`: API calls by function.
    pub fn api_sum(&self) -> Table {
        Self::time_table(
            "cuda_api_sum",
            "CUDA API Summary",
            "Name",
            self.api.iter().map(|(n, v)| (n, vec![], v.summary())),
        )
    }

    /// `cuda_gpu_graph_sum`: graph launches (graph mode) by graph id, with the node count where known.
    pub fn graph_sum(&self) -> Table {
        let mut t = Self::time_table(
            "cuda_gpu_graph_sum",
            "CUDA Graph Launch Summary",
            "Graph",
            self.graphs.iter().map(|(id, v)| {
                let nodes = self.graph_nodes.get(id).map_or_else(
                    || "?".to_string(),
                    |n| {
                        n.iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join(" or ")
                    },
                );
                let key = format!("{id:>10}");
                (
                    key,
                    vec![Cell::Text(format!("graph {id} ({nodes} nodes)"))],
                    v.summary(),
                )
            }),
        );
        if self
            .graphs
            .keys()
            .any(|id| !self.graph_nodes.contains_key(id))
        {
            t.notes.push(
                "node counts are known for graphs instantiated while tracing ran (\"?\" otherwise)"
                    .into(),
            );
        }
        t
    }

    /// `cuda_gpu_mem_time_sum`: copies and sets by operation, time.
    pub fn mem_time_sum(&self) -> Table {
        Self::time_table(
            "cuda_gpu_mem_time_sum",
            "CUDA GPU MemOps Summary (by Time)",
            "Operation",
            self.copy_time.iter().map(|(n, v)| (n, vec![], v.summary())),
        )
    }

    /// `cuda_gpu_mem_size_sum`: copies and sets by operation, bytes (in MB of 10^6 bytes, as nsys).
    pub fn mem_size_sum(&self) -> Table {
        let mut t = Table::new(
            "cuda_gpu_mem_size_sum",
            "CUDA GPU MemOps Summary (by Size)",
            vec![
                "Total (MB)",
                "Count",
                "Avg (MB)",
                "Med (MB)",
                "Min (MB)",
                "Max (MB)",
                "StdDev (MB)",
                "Operation",
            ],
        );
        let mb = |b: f64| b / 1e6;
        let mut rows: Vec<(&String, stats::Summary)> = self
            .copy_size
            .iter()
            .map(|(n, v)| (n, v.summary()))
            .collect();
        rows.sort_by(|a, b| b.1.total.cmp(&a.1.total).then_with(|| a.0.cmp(b.0)));
        for (name, s) in rows {
            t.rows.push(vec![
                Cell::Float(mb(s.total as f64)),
                Cell::Int(s.count),
                Cell::Float(mb(s.mean)),
                Cell::Float(mb(s.median)),
                Cell::Float(mb(s.min as f64)),
                Cell::Float(mb(s.max as f64)),
                Cell::Float(mb(s.stddev)),
                Cell::Text(name.clone()),
            ]);
        }
        t
    }
}
