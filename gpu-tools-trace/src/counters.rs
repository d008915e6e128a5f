//! Device counters on the trace timeline: what a tracer samples beside the traced processes, and how it is kept.
//!
//! A **counter stream** is a stream of a trace file written by the tracer itself, not by a traced process: its
//! [`StreamHeader`](super::StreamHeader) has pid 0 and the host's `CLOCK_MONOTONIC` clock (the clock of the
//! injection libraries' streams), and it carries a [`ClockAnchor`](super::ClockAnchor), a
//! [`ProcessInfo`](super::ProcessInfo) naming the host, then [`CounterSample`](super::CounterSample),
//! [`CounterGap`](super::CounterGap) and [`Notice`](super::Notice) records; never a process start or end. Its
//! devices are numbered as the traced processes' kernel records number them.
//!
//! Rates (`….per_second`) and percentages are kept as the hardware reported them over each sample's interval;
//! amounts (bytes) follow from a rate times the time it covers.
//!
//! [`Attribution`] ties the samples to the kernels that ran while they were taken (its module, [`attribution`],
//! says how and with which limits); [`MetricKind`] and [`label`] read what a metric's name says.

pub mod attribution;
mod fit;
mod metric;
mod sweep;

pub use attribution::{
    Attribution, CounterAttribution, DeviceCounters, DeviceId, KernelCounters, MetricValue,
    SampleShares,
};
pub use metric::{MetricKind, label};

/// `sm__cycles_active`: the share of elapsed cycles in which SMs had work, in percent.
pub const SM_ACTIVE: &str = "sm__cycles_active.avg.pct_of_peak_sustained_elapsed";
/// `sm__pipe_tensor_cycles_active`: the share of elapsed cycles the tensor pipes were busy, in percent.
pub const TENSOR_ACTIVE: &str = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed";
/// Achieved occupancy: warps resident per active cycle against the most an SM can hold, in percent.
pub const OCCUPANCY: &str = "sm__warps_active.avg.pct_of_peak_sustained_active";
/// DRAM bytes read per second.
pub const DRAM_READ_PER_SECOND: &str = "dram__bytes_read.sum.per_second";
/// DRAM bytes written per second.
pub const DRAM_WRITE_PER_SECOND: &str = "dram__bytes_write.sum.per_second";

/// The `default` set of `trace --counters`: what the per-kernel counter report shows.
pub const DEFAULT_SET: [&str; 5] = [
    SM_ACTIVE,
    TENSOR_ACTIVE,
    OCCUPANCY,
    DRAM_READ_PER_SECOND,
    DRAM_WRITE_PER_SECOND,
];

/// The metrics of a named counter set (`default`).
pub fn named_set(name: &str) -> Option<&'static [&'static str]> {
    match name {
        "default" => Some(&DEFAULT_SET),
        _ => None,
    }
}

/// The pid in the header of a counter stream.
pub const COUNTER_STREAM_PID: u32 = 0;

/// Whether a stream with this header is a counter stream (written by the tracer, not by a traced process).
pub fn is_counter_stream(header: &super::StreamHeader) -> bool {
    header.pid == COUNTER_STREAM_PID
}
