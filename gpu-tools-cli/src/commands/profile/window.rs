//! What a `profile --pid` window gave, judged as `trace --pid` judges its windows: a window that gave nothing is an
//! error naming what was enabled and what was seen (exit 1), never an empty table with exit 0; a PC-sampling window
//! that gave records but whose samples were mostly in kernels CUPTI does not expose says that share.
//!
//! What was seen comes from the injection library's messages (`gpu_tools_injection::message::Message`): CUPTI's
//! counts of the PC samples per context, the early end of kernel metrics (or that they were not started); their
//! values are read, never their words.

use std::time::Duration;

use gpu_tools::trace::analyze::words::count;
use gpu_tools_injection::message::Message;
use gpu_tools_injection::profile::notice::{MetricsEnd, MetricsEnded, PcCounts};

/// The share of samples in kernels CUPTI does not expose above which a window with stall records says it.
pub const NON_USER_SAID: f64 = 0.2;

/// The contexts a window started in, as said (`an unknown number of contexts` where the start's answer said none).
fn contexts(n: Option<usize>) -> String {
    n.map_or_else(
        || "an unknown number of contexts".to_string(),
        |n| count(n as u64, "context", "contexts"),
    )
}

/// A PC-sampling window of one process.
pub struct PcWindow<'a> {
    pub pid: u32,
    /// The contexts sampling started in.
    pub contexts: Option<usize>,
    pub sampled: Duration,
    /// Stall records received.
    pub records: usize,
    /// The library's messages.
    pub messages: &'a [Message],
    /// The library's error notices (a context it could not start sampling in, with CUPTI's reason).
    pub errors: Vec<&'a str>,
    /// The process maps JAX's XLA plugin for CUDA (`xla_cuda_plugin`).
    pub jax: bool,
}

impl PcWindow<'_> {
    /// CUPTI's counts over every context (`None` where no count came).
    fn counts(&self) -> Option<PcCounts> {
        crate::commands::profile_attach::pc_counts_of(self.messages)
    }

    /// The error of a window without a stall record; `None` where records came.
    pub fn empty_error(&self) -> Option<String> {
        if self.records > 0 {
            return None;
        }
        let secs = self.sampled.as_secs_f64();
        let mut m = format!(
            "process {}: no stall record from {secs:.1} s of PC sampling. Enabled: PC sampling in {} (continuous \
             mode) for {secs:.1} s. Seen: ",
            self.pid,
            contexts(self.contexts)
        );
        match self.counts() {
            // Sampling started nowhere: why is in the library's errors (on an H100, counters another tool held).
            None if self.contexts == Some(0) && !self.errors.is_empty() => {
                m.push_str("sampling started in no context: ");
                m.push_str(&self.errors.join("; "));
            }
            None => m.push_str(
                "no count of CUPTI's samples came from the injection library (its notices above say how its \
                 stream ended)",
            ),
            Some(c) => {
                m.push_str(&format!(
                    "CUPTI counted {} in {} ({} dropped, {} outside the program's kernels, {} PCs beyond the read \
                     buffer, {} reads with a full hardware buffer)",
                    count(c.samples, "sample", "samples"),
                    count(c.records, "PC record", "PC records"),
                    c.dropped,
                    c.non_user,
                    c.truncated_pcs,
                    c.full_buffer_reads
                ));
                m.push_str(&Self::why(&c));
                if self.jax && c.samples > 0 && c.non_user == c.samples {
                    m.push_str(
                        ". The process runs JAX: on an H200 (JAX 0.11.2) a JAX job with XLA's command buffers on had \
                         every sample counted so in some runs, and gave stall records with them off (start the job \
                         with `XLA_FLAGS=--xla_gpu_enable_command_buffer=`)",
                    );
                }
            }
        }
        if self
            .messages
            .iter()
            .any(|m| matches!(m, Message::PcLeftOn { .. }))
        {
            m.push_str(
                ". PC sampling could not be turned off: CUPTI keeps it on in this process, and the GPU's counters \
                 held, until the process ends; PC sampling and counters of other processes on the GPU are refused \
                 until then",
            );
        }
        Some(m)
    }

    /// What the counts of a window without records say.
    fn why(c: &PcCounts) -> String {
        if c.samples == 0 {
            ". CUPTI took no sample: no kernel of the sampled contexts ran on the GPU while it sampled (the job was \
             idle, or waited on the host)"
                .into()
        } else if c.non_user == c.samples {
            format!(
                ". CUPTI attributed all {} to kernels it does not expose (its non-user kernels; NVIDIA library \
                 kernels, such as cuBLAS's GEMMs, can be such): stall reasons per PC cannot be given for them. Work \
                 ran on the GPU in the window, though not necessarily the job's: on a GPU shared with other \
                 processes their kernels' samples are counted there too (a job waiting on the host for its child \
                 counted 17 million such samples in 1 s beside 15 busy jobs, H100, CUPTI 13.0)",
                count(c.samples, "sample", "samples"),
            )
        } else {
            ". The samples gave CUPTI no PC record".into()
        }
    }

    /// Where records came but most samples were in kernels CUPTI does not expose: that share, said.
    pub fn non_user_note(&self) -> Option<String> {
        let c = self.counts()?;
        if self.records == 0 || c.samples == 0 {
            return None;
        }
        let share = c.non_user as f64 / c.samples as f64;
        (share >= NON_USER_SAID).then(|| {
            format!(
                "process {}: {:.0}% of the samples ({} of {}) were in kernels CUPTI does not expose (its non-user \
                 kernels, such as NVIDIA library kernels): no stall reasons per PC for them; the table holds the \
                 rest",
                self.pid,
                100.0 * share,
                c.non_user,
                c.samples
            )
        })
    }
}

/// A kernel-metrics window of one process: the range profiler's part, and PM sampling attribution's where it ran.
pub struct MetricsWindow<'a> {
    pub pid: u32,
    pub contexts: Option<usize>,
    /// The whole window.
    pub window: Duration,
    pub metrics: &'a [String],
    pub launches_per_kernel: Option<u32>,
    /// Kernel-metrics records received (ranges named after their launches).
    pub named: usize,
    pub messages: &'a [Message],
    /// What PM sampling attribution gave, where it ran: its kernel names and a sentence of what it saw.
    pub attributed: Option<(usize, String)>,
}

impl MetricsWindow<'_> {
    /// The early end of the range profiler, where it ended before the tracer finished it.
    pub fn ended(&self) -> Option<MetricsEnded> {
        self.messages.iter().find_map(|m| match m {
            Message::MetricsEnded(e) => Some(*e),
            _ => None,
        })
    }

    /// The error of a window in which no kernel was profiled; `None` where some were.
    pub fn empty_error(&self) -> Option<String> {
        let attributed = self.attributed.as_ref().map_or(0, |a| a.0);
        if self.named > 0 || attributed > 0 {
            return None;
        }
        let mut m = format!(
            "process {}: no kernel was profiled in the {:.1} s window. Enabled: CUPTI's range profiler in {} ({}; at \
             most {} launches per kernel). Seen: ",
            self.pid,
            self.window.as_secs_f64(),
            contexts(self.contexts),
            self.metrics.join(", "),
            self.launches_per_kernel
                .map_or_else(|| "every".to_string(), |n| n.to_string())
        );
        match self.ended() {
            Some(e) if e.before == MetricsEnd::NoSubscriber => m.push_str(
                "the range profiler was not started: the program's own profiler holds CUPTI's callback subscriber, \
                 without which it would replay every launch of the window",
            ),
            Some(e) => m.push_str(&format!(
                "the range profiler ended before {} with {} profiled",
                e.before.what(),
                count(e.launches, "launch", "launches")
            )),
            None => m.push_str(
                "no kernel launch reached the range profiler (the process launched no kernel in the window, or \
                 waited on the host)",
            ),
        }
        if let Some((_, seen)) = &self.attributed {
            m.push_str("; then ");
            m.push_str(seen);
        }
        Some(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pc(records: usize, messages: &[Message]) -> PcWindow<'_> {
        PcWindow {
            pid: 7,
            contexts: Some(1),
            sampled: Duration::from_millis(2000),
            records,
            messages,
            errors: Vec::new(),
            jax: false,
        }
    }

    fn counted(samples: u64, non_user: u64) -> Message {
        Message::PcCounts(PcCounts {
            context: 1,
            samples,
            records: 0,
            non_user,
            ..PcCounts::default()
        })
    }

    #[test]
    fn a_pc_window_without_records_names_what_was_enabled_and_seen() {
        // The serving job of the H200 (driver 580, CUPTI 13.0): every sample outside the program's kernels.
        let notices = [counted(914_554, 914_554)];
        let m = pc(0, &notices).empty_error().expect("an error");
        assert!(
            m.starts_with(
                "process 7: no stall record from 2.0 s of PC sampling. Enabled: PC sampling in 1 context \
                 (continuous mode) for 2.0 s. Seen: CUPTI counted 914554 samples in 0 PC records (0 dropped, \
                 914554 outside the program's kernels"
            ),
            "{m}"
        );
        assert!(
            m.contains("CUPTI attributed all 914554 samples to kernels it does not expose")
                && m.contains("stall reasons per PC cannot be given for them"),
            "{m}"
        );
        assert!(!m.contains("range profiler"), "{m}");
        // Two contexts' counts add up; no sample at all is said as such.
        let notices = [counted(0, 0), counted(0, 0)];
        let m = pc(0, &notices).empty_error().unwrap();
        assert!(
            m.contains("counted 0 samples in 0 PC records") && m.contains("CUPTI took no sample"),
            "{m}"
        );
        // No count at all (the stream ended early).
        let m = pc(0, &[]).empty_error().unwrap();
        assert!(m.contains("no count of CUPTI's samples came"), "{m}");
        // Every sample outside the program's kernels.
        let notices = [counted(20_228_749, 20_228_749)];
        let m = pc(0, &notices).empty_error().unwrap();
        assert!(m.contains("CUPTI attributed all 20228749 samples"), "{m}");
        assert!(!m.contains("could not be turned off"), "{m}");
        // Sampling that could not be turned off: said, with what it holds.
        let notices = [counted(500, 500), Message::PcLeftOn { context: 1 }];
        let m = pc(0, &notices).empty_error().unwrap();
        assert!(
            m.contains("PC sampling could not be turned off")
                && m.contains("held, until the process ends"),
            "{m}"
        );
        // A JAX process with every sample outside: XLA's command buffers named, with the flag that turns them off;
        // not for one whose samples are not all outside.
        let notices = [counted(20_324_943, 20_324_943)];
        let jax = PcWindow {
            jax: true,
            ..pc(0, &notices)
        };
        let m = jax.empty_error().unwrap();
        assert!(
            m.contains("The process runs JAX")
                && m.contains("XLA_FLAGS=--xla_gpu_enable_command_buffer="),
            "{m}"
        );
        assert!(!pc(0, &notices).empty_error().unwrap().contains("JAX"));
        let notices = [counted(0, 0)];
        let idle = PcWindow {
            jax: true,
            ..pc(0, &notices)
        };
        assert!(!idle.empty_error().unwrap().contains("JAX"));
        // Records: no error.
        assert_eq!(pc(3, &[counted(10, 9)]).empty_error(), None);
    }

    #[test]
    fn a_window_started_in_no_context_says_why_from_the_librarys_errors() {
        let busy = "context 1: not profiled: cuptiPCSamplingStart: the GPU's performance counters are in use";
        let nowhere = PcWindow {
            contexts: Some(0),
            errors: vec![busy],
            ..pc(0, &[])
        };
        let m = nowhere.empty_error().unwrap();
        assert!(
            m.contains("Enabled: PC sampling in 0 contexts")
                && m.contains(&format!("Seen: sampling started in no context: {busy}"))
                && !m.contains("no count of CUPTI's samples"),
            "{m}"
        );
        // Started somewhere, with no count: the errors are not the reason given.
        let some = PcWindow {
            errors: vec![busy],
            ..pc(0, &[])
        };
        assert!(
            some.empty_error()
                .unwrap()
                .contains("no count of CUPTI's samples came"),
        );
    }

    #[test]
    fn a_large_share_outside_the_programs_kernels_is_said_beside_the_records() {
        let notices = [counted(1000, 620)];
        let note = pc(5, &notices).non_user_note().expect("said");
        assert!(
            note.starts_with(
                "process 7: 62% of the samples (620 of 1000) were in kernels CUPTI does not expose"
            ),
            "{note}"
        );
        assert_eq!(
            pc(5, &[counted(1000, 100)]).non_user_note(),
            None,
            "10% is not said"
        );
        assert_eq!(
            pc(0, &notices).non_user_note(),
            None,
            "no records: the error says it"
        );
    }

    fn metrics_window<'a>(
        named: usize,
        messages: &'a [Message],
        metrics: &'a [String],
        attributed: Option<(usize, String)>,
    ) -> MetricsWindow<'a> {
        MetricsWindow {
            pid: 7,
            contexts: Some(1),
            window: Duration::from_secs(2),
            metrics,
            launches_per_kernel: Some(10),
            named,
            messages,
            attributed,
        }
    }

    #[test]
    fn a_metrics_window_without_kernels_names_what_was_enabled_and_seen() {
        let metrics = vec!["dram__bytes_read.sum".to_string()];
        let ended = MetricsEnded {
            before: MetricsEnd::GraphLaunch,
            launches: 0,
        };
        let notices = [Message::MetricsEnded(ended)];
        let seen = "PM sampling attribution for 1.5 s: 0 kernel records".to_string();
        let w = metrics_window(0, &notices, &metrics, Some((0, seen)));
        assert_eq!(w.ended(), Some(ended));
        let m = w.empty_error().expect("an error");
        assert_eq!(
            m,
            "process 7: no kernel was profiled in the 2.0 s window. Enabled: CUPTI's range profiler in 1 context \
             (dram__bytes_read.sum; at most 10 launches per kernel). Seen: the range profiler ended before the \
             program's first CUDA graph launch with 0 launches profiled; then PM sampling attribution for 1.5 s: \
             0 kernel records"
        );
        let m = metrics_window(0, &[], &metrics, None)
            .empty_error()
            .unwrap();
        assert!(m.ends_with("Seen: no kernel launch reached the range profiler (the process launched no kernel in the window, or waited on the host)"), "{m}");
        // Kernels from either part: no error.
        assert_eq!(
            metrics_window(9, &notices, &metrics, None).empty_error(),
            None
        );
        assert_eq!(
            metrics_window(0, &notices, &metrics, Some((4, String::new()))).empty_error(),
            None
        );
        // Not started for want of CUPTI's subscriber, then attribution failed: said as such.
        let notices = [Message::MetricsEnded(MetricsEnded {
            before: MetricsEnd::NoSubscriber,
            launches: 0,
        })];
        let m = metrics_window(
            0,
            &notices,
            &metrics,
            Some((0, "PM sampling attribution failed: x".into())),
        )
        .empty_error()
        .unwrap();
        assert!(
            m.contains(
                "Seen: the range profiler was not started: the program's own profiler holds CUPTI's callback \
                 subscriber, without which it would replay every launch of the window; then PM sampling \
                 attribution failed: x"
            ),
            "{m}"
        );
    }
}
