//! What an attached profile (`gpu-tools profile --pid`) tells the tool beside its records: the values that
//! [`Message`](crate::message::Message)s carry (`PcCounts`, `MetricsEnded`) and the words a person
//! reads of them. The tool reads the messages' values, never these words.

/// What CUPTI counted in one context's PC sampling, said whatever came of it: a window without stall records is
/// judged by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PcCounts {
    /// CUPTI's id of the context.
    pub context: u32,
    /// Samples CUPTI counted, in every kernel and reason.
    pub samples: u64,
    /// PC records it gave (one per function and PC).
    pub records: u64,
    /// Samples the hardware dropped.
    pub dropped: u64,
    /// Samples in kernels CUPTI does not give records for (its "non-user kernels").
    pub non_user: u64,
    /// PCs beyond the sampler's read buffer (read again later).
    pub truncated_pcs: u64,
    /// Reads during which the hardware buffer was full.
    pub full_buffer_reads: u64,
}

impl PcCounts {
    /// The notice's text.
    pub fn text(&self) -> String {
        format!(
            "context {}: PC sampling counted {} samples in {} PC records ({} dropped, {} outside the program's \
             kernels, {} PCs beyond the read buffer, {} reads with a full hardware buffer)",
            self.context,
            self.samples,
            self.records,
            self.dropped,
            self.non_user,
            self.truncated_pcs,
            self.full_buffer_reads
        )
    }
}

/// What made attached kernel metrics end before the tracer finished them, on the program's thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsEnd {
    /// The program's first CUDA graph launch.
    GraphLaunch,
    /// The program's first stream capture.
    CaptureBegin,
    /// Its start: the program's own profiler holds CUPTI's callback subscriber, so the range profiler is not
    /// started at all (without the subscriber nothing limits its replays; see `pc_attach` in the injection
    /// library).
    NoSubscriber,
}

impl MetricsEnd {
    /// What it is, in a sentence.
    pub fn what(self) -> &'static str {
        match self {
            MetricsEnd::GraphLaunch => "the program's first CUDA graph launch",
            MetricsEnd::CaptureBegin => "the program's first stream capture",
            MetricsEnd::NoSubscriber => {
                "its start (the program's own profiler holds CUPTI's callback subscriber, without which the range \
                 profiler would replay every launch of the window)"
            }
        }
    }
}

/// Attached kernel metrics ended before `before`, with `launches` profiled until then (sent before it): said once
/// the range profiler is off, so that the counters are free for another tool from then on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsEnded {
    /// What ended them.
    pub before: MetricsEnd,
    /// Launches profiled until then.
    pub launches: u64,
}

impl MetricsEnded {
    /// The notice's text.
    pub fn text(&self) -> String {
        if self.before == MetricsEnd::NoSubscriber {
            return format!(
                "kernel metrics not started: the program's own profiler holds CUPTI's callback subscriber, without \
                 which the range profiler would replay every launch of the window (and the tracer could find no \
                 moment to end it); the range profiler off: {} launches profiled",
                self.launches
            );
        }
        format!(
            "kernel metrics ended before {}, the range profiler off: {} launches profiled",
            self.before.what(),
            self.launches
        )
    }
}

/// Why PC sampling is refused in a process in which CUPTI's range profiler ran before (a kernel-metrics attach of an
/// earlier `profile --pid --kernel-replay`): PC sampling after it gave no stall records.
pub const PC_AFTER_RANGE_PROFILER: &str = "CUPTI's range profiler ran in this process before (an earlier \
     kernel-metrics `profile --pid`), and PC sampling after it gave no stall records; nothing was sampled: sample a \
     process that has had no kernel-metrics window";

/// Why PC sampling is refused in a process whose own profiler (torch.profiler's Kineto, say) used CUPTI's activity
/// API before any PC sampling there: on an H100 (CUPTI 13.0, driver 580), a PyTorch job that ran one
/// torch.profiler session before any attach gave 0 stall records in each of two 2 s windows, all of their 40 and 47
/// million samples counted outside the program's kernels, where the same job without it gave 2,725 records in each
/// (`gpu-host/scripts/pc_own_profiler_probe.sh`); the PC sampling a first trace makes first cannot come before it.
pub const PC_AFTER_PROGRAM_PROFILER: &str = "the program's own profiler (such as torch.profiler) used CUPTI's \
     activity API in this process before any PC sampling, and PC sampling after that counted every sample outside \
     the program's kernels (no stall record) in every window tried (CUPTI 13.0, driver 580); nothing was sampled: PC \
     sampling works in a process whose own profiler had not run when it was first sampled";

/// Why PC sampling is refused in a process whose first gpu-tools attach was a trace (`trace --pid`, or `profile
/// --pid`'s kernel metrics, which trace) and not the PC sampling a first trace makes first: PC sampling after it
/// counted every sample outside the program's kernels in every window tried (docs/driver-notes.md).
pub const PC_AFTER_TRACE: &str = "this process's first gpu-tools attach traced it (`trace --pid`, or the kernel \
     metrics of `profile --pid`) without sampling its PCs first, and PC sampling after such a first attach counted \
     every sample outside the program's kernels (no stall record) in every window tried (CUPTI 13.0, driver 580), \
     while a process sampled before its first trace gave stall records before and after traces; nothing was \
     sampled: `trace --pid` and the kernel metrics of `profile --pid` sample a process's PCs before they first \
     trace it, except beside a profiler of the program's own or with `--no-pc-primer`";

/// Why PC sampling is refused in a process whose first PC sampling window found the program idle (no stall record,
/// little CPU time: the matrix's fork-child job waits seconds for a child it forks): every window after such a
/// start counted every sample outside the program's kernels, after a trace (11,781,101 in 2 s, an H100, CUPTI 13.0,
/// driver 580; `pc_order_probe.sh`'s SET=4) and without one (SET=5: 2,740,546 in the next 1 s window, the job
/// launching again), where a job sampled first while it ran kept its stall records.
pub const PC_AFTER_IDLE_SAMPLING: &str = "this process's first PC sampling window had no stall record while the \
     program was idle (little CPU time: waiting for a child, say), and every PC sampling window after such a start \
     counted every sample outside the program's kernels (no stall record; CUPTI 13.0, driver 580), with or without a \
     trace between, while a process first sampled while it ran kept its stall records; nothing was sampled: the \
     first PC sampling window of a process decides for its life, so sample PCs (or let `trace --pid` do it first) \
     while the job runs";

/// Why PC sampling is refused in a JAX process whose XLA runs its work in CUDA command buffers (the default): on
/// H100s and H200s (CUPTI 13.0, driver 580, JAX 0.11.2) every window in such a process since 2026-12-05 counted every
/// sample outside the program's kernels (no stall record), and one died in `cuptiPCSamplingStop` (SIGSEGV: CUPTI's
/// `strdup` of a null name, an H100, 2026-12-06); with command buffers off its windows gave stall records.
pub const PC_UNDER_XLA_COMMAND_BUFFERS: &str = "the process runs JAX with XLA's CUDA command buffers on (the \
     default), and PC sampling there counted every sample outside the program's kernels (no stall record) in every \
     window since 2026-12-05 (CUPTI 13.0, driver 580, JAX 0.11.2), and killed one such job inside CUPTI \
     (`cuptiPCSamplingStop`, SIGSEGV); nothing was sampled: start the job with \
     `XLA_FLAGS=--xla_gpu_enable_command_buffer=` (command buffers off) to sample it";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_early_end_says_what_ended_it_and_the_launches_profiled() {
        let m = MetricsEnded {
            before: MetricsEnd::GraphLaunch,
            launches: 9,
        };
        assert!(
            m.text()
                .contains("before the program's first CUDA graph launch")
        );
        assert!(m.text().ends_with("9 launches profiled"));
    }
}
