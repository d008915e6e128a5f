//! Reports of a recorded trace, as Nsight Systems' `nsys stats` computes them: per-kernel, API, memory-copy time
//! and size summaries, NVTX range summary and NVTX GPU projection, CUDA graph launches, and the processes; and,
//! where the trace holds device counter samples, the counters per kernel (`cuda_gpu_kern_counters_sum`, from
//! [`counters::attribution`](crate::counters::attribution)).
//!
//! [`Analysis`] takes the records of one or more trace files (each stream keyed by file and stream number) in one
//! pass; [`Analysis::reports`] then builds the [`Table`]s, which render as text, CSV or JSON.
//!
//! ```no_run
//! use gpu_tools_trace::report::{Analysis, Format, write_tables};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut analysis = Analysis::new();
//! let file = std::io::BufReader::new(std::fs::File::open("run.gputrace")?);
//! for error in analysis.read(0, file) {
//!     eprintln!("{error}");
//! }
//! write_tables(&analysis.reports(), Format::Text, &mut std::io::stdout())?;
//! # Ok(()) }
//! ```
//!
//! Held in memory: a duration per kernel, copy, set, API call and NVTX range (for medians), and for the GPU
//! projection the thread and time of every API call and the span of every device operation. About 40 bytes per
//! record: 200,000 launches with 7 API calls each take some 60 MB. For the counters per kernel, each kernel's span
//! (about 40 bytes more) and every counter sample and gap are kept too.
//!
//! A counter stream ([`counters`](crate::counters)) is not a traced process: it has no row in `processes`.
//!
//! The job-wide report `stragglers` ([`Job`]: per rank its steps, NCCL time and waits, and the rank the others wait
//! for, on hosts aligned by their NCCL collectives) is made only when asked for, with
//! [`Analysis::for_reports`]; asked alone, it holds a summary of each rank rather than the records' durations, so
//! that a job of hundreds of ranks fits in memory.

mod align;
mod collect;
mod counters;
mod job;
mod nvtx;
mod processes;
mod stats;
mod stream;
mod sums;
mod table;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

pub use align::{Alignment, ClockDomain};
pub use job::{
    CollectiveAlignment, DuplicateRank, HostAlignment, Job, STRAGGLERS, collective_name,
};
pub(crate) use table::json_string;
pub use table::{Cell, Format, Table, csv_field, write_tables};

use self::stats::Values;
use self::stream::StreamInfo;

/// A stream of the analysis: file number (order given) and stream number in that file.
pub type StreamKey = (u32, u32);

/// Collects the records of one or more traces and computes the reports.
#[derive(Debug, Default)]
pub struct Analysis {
    streams: BTreeMap<StreamKey, StreamInfo>,
    kernels: HashMap<Arc<str>, Values>,
    api: HashMap<Arc<str>, Values>,
    copy_time: BTreeMap<String, Values>,
    copy_size: BTreeMap<String, Values>,
    graphs: BTreeMap<u32, Values>,
    /// Node counts by graph id: several where processes (or instantiations) of one id differ.
    graph_nodes: HashMap<u32, BTreeSet<u32>>,
    graph_kernels: u64,
    names: HashMap<String, Arc<str>>,
    alignment: Alignment,
    errors: u64,
    /// Timed records whose end came before their start: every report counts them as 0 ns.
    inverted: u64,
    /// The format version of each file read (not of a single stream).
    versions: BTreeMap<u32, u16>,
    /// The job-wide collector, where a job-wide report was asked for.
    job: Option<Job>,
    /// Only the job-wide reports (and `processes`) were asked for: nothing else of a record is kept.
    job_only: bool,
}

/// `n` and the noun (with its verb) that goes with it: "1 error", "2 errors".
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

impl Analysis {
    /// Every report collected, in the order `nsys stats` prints them, then the graph and process tables; the
    /// counters per kernel (`cuda_gpu_kern_counters_sum`) after the kernels where the trace holds counter samples;
    /// `stragglers` last where [`for_reports`](Self::for_reports) asked for it.
    pub fn reports(&self) -> Vec<Table> {
        Self::REPORT_NAMES
            .iter()
            .filter(|name| **name != counters::REPORT || self.has_counter_samples())
            .filter_map(|name| self.report(name))
            .collect()
    }

    /// One report by its name (one of [`REPORT_NAMES`](Self::REPORT_NAMES)), whatever the trace holds (a report of
    /// nothing has no rows); `None` for a name not known, or a report this analysis did not collect
    /// ([`for_reports`](Self::for_reports): `stragglers` only when asked for, the others not when it was asked
    /// for alone).
    pub fn report(&self, name: &str) -> Option<Table> {
        if name == STRAGGLERS {
            return self.job.as_ref().map(Job::stragglers);
        }
        if self.job_only && name != "processes" {
            return None;
        }
        Some(match name {
            "nvtx_sum" => self.nvtx_sum(),
            "nvtx_gpu_proj_sum" => self.nvtx_gpu_proj_sum(),
            "cuda_api_sum" => self.api_sum(),
            "cuda_gpu_kern_sum" => self.kernel_sum(),
            counters::REPORT => self.kernel_counters_sum(),
            "cuda_gpu_graph_sum" => self.graph_sum(),
            "cuda_gpu_mem_time_sum" => self.mem_time_sum(),
            "cuda_gpu_mem_size_sum" => self.mem_size_sum(),
            "processes" => self.processes(),
            _ => return None,
        })
    }

    /// The names of the reports, in the order [`reports`](Self::reports) returns them.
    pub const REPORT_NAMES: [&'static str; 10] = [
        "nvtx_sum",
        "nvtx_gpu_proj_sum",
        "cuda_api_sum",
        "cuda_gpu_kern_sum",
        counters::REPORT,
        "cuda_gpu_graph_sum",
        "cuda_gpu_mem_time_sum",
        "cuda_gpu_mem_size_sum",
        "processes",
        STRAGGLERS,
    ];
}
