//! The messages an injected library sends that the tool acts on, typed: each is a
//! `gpu_tools_trace::CodedNotice` on the stream (its code and values, and the text a person reads,
//! rendered here from the same), written by the library with [`Message::record`] and read back by the tool with
//! [`Message::read`]. The tool never reads a message's text; rewording one changes no protocol.
//!
//! ```
//! use gpu_tools_injection::message::Message;
//! use gpu_tools_trace::Record;
//!
//! let sent = Message::ProfileReady { contexts: 2, thread: 4242 };
//! let Record::CodedNotice(notice) = sent.record() else { unreachable!() };
//! assert_eq!(notice.text, "profiling ready: 2 context(s), this thread is 4242");
//! assert_eq!(Message::read(&notice), Some(sent));
//! ```

use std::fmt;

use gpu_tools_trace::{CodedNotice, NoticeLevel, Record};

use crate::profile::notice::{MetricsEnd, MetricsEnded, PcCounts};

/// A message of an injected library that the tool acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// An attached trace started: records start now (the attach's window opens).
    Attached {
        /// Whether the program mapped CUPTI already (else the library loaded one for the trace).
        cupti_mapped: bool,
    },
    /// Records CUPTI gave at a forced flush without an end time (work still queued or running when an attached
    /// trace's window closed, or when a fatal signal ended the process), left out of the trace; the tool counts them
    /// as the trace's edge.
    UnfinishedLeftOut {
        /// How many.
        records: u64,
    },
    /// An attached profiling (`profile --pid`) found the program's contexts: ready for
    /// [`Control::ProfileStart`](crate::control::Control::ProfileStart).
    ProfileReady {
        /// Contexts found.
        contexts: u64,
        /// The library's thread (`gettid`), which the tool leaves running while it stops the others.
        thread: u64,
    },
    /// Profiling started (the answer to [`Control::ProfileStart`](crate::control::Control::ProfileStart)).
    ProfileStarted {
        /// Contexts profiled.
        contexts: u64,
        /// Kernel metrics whose ranges are named after their launches (else numbered, or PC sampling).
        ranges_named: bool,
    },
    /// Profiling finished, what it collected sent before this (the answer to
    /// [`Control::ProfileFinish`](crate::control::Control::ProfileFinish)).
    ProfileFinished {
        /// Launches profiled where `ranges_named`, else the stall records or ranges sent.
        count: u64,
        /// As in [`Message::ProfileStarted`].
        ranges_named: bool,
    },
    /// Nothing can be profiled in this process (the stream ends after this).
    ProfileRefused {
        /// Why, in words.
        reason: String,
    },
    /// What CUPTI counted in one context's PC sampling, sent whatever came of it: a window without stall records
    /// is judged by it.
    PcCounts(PcCounts),
    /// Attached kernel metrics ended on the program's thread (before its first CUDA graph launch or stream
    /// capture), the range profiler off, the launches profiled until then sent before this.
    MetricsEnded(MetricsEnded),
    /// PC sampling of a context could not be turned off (`cuptiPCSamplingDisable` failed): CUPTI keeps it on in
    /// the process, and the GPU's performance counters held, until the process ends.
    PcLeftOn {
        /// The context, as [`PcCounts::context`] numbers it.
        context: u32,
    },
    /// The process's first PC sampling window had no stall record, and the program was nearly idle in it (its
    /// threads' CPU time below [`program::RAN_FRACTION`](crate::program::RAN_FRACTION) of the window): every later
    /// window after such a start was blind, traced or not, and PC sampling is refused in the process from now on.
    PcSampledIdle {
        /// The program's CPU time in the window, in milliseconds (the library's threads left out).
        cpu_ms: u64,
        /// The window's length, in milliseconds.
        window_ms: u64,
    },
}

/// The codes of the messages, as [`Message::code`] gives them (a code is never given to another message).
mod code {
    pub const ATTACHED: u16 = 1;
    pub const UNFINISHED_LEFT_OUT: u16 = 2;
    pub const PROFILE_READY: u16 = 3;
    pub const PROFILE_STARTED: u16 = 4;
    pub const PROFILE_FINISHED: u16 = 5;
    pub const PROFILE_REFUSED: u16 = 6;
    pub const PC_COUNTS: u16 = 7;
    pub const METRICS_ENDED: u16 = 8;
    // 9 was the ranges numbered in launch order of kernel metrics without CUPTI's subscriber: such metrics are no
    // longer taken (see `MetricsEnd::NoSubscriber`).
    // 10 and 11 said that PC sampling started after CUPTI's range profiler, or after a first attach that traced:
    // such PC sampling is refused now (`ProfileRefused`), its reason in `profile::notice`.
    pub const PC_LEFT_ON: u16 = 12;
    pub const PC_SAMPLED_IDLE: u16 = 13;
}

impl Message {
    /// The message's code on the stream.
    pub fn code(&self) -> u16 {
        match self {
            Message::Attached { .. } => code::ATTACHED,
            Message::UnfinishedLeftOut { .. } => code::UNFINISHED_LEFT_OUT,
            Message::ProfileReady { .. } => code::PROFILE_READY,
            Message::ProfileStarted { .. } => code::PROFILE_STARTED,
            Message::ProfileFinished { .. } => code::PROFILE_FINISHED,
            Message::ProfileRefused { .. } => code::PROFILE_REFUSED,
            Message::PcCounts(_) => code::PC_COUNTS,
            Message::MetricsEnded(_) => code::METRICS_ENDED,
            Message::PcLeftOn { .. } => code::PC_LEFT_ON,
            Message::PcSampledIdle { .. } => code::PC_SAMPLED_IDLE,
        }
    }

    /// How grave it is, for whoever shows it.
    pub fn level(&self) -> NoticeLevel {
        match self {
            Message::ProfileRefused { .. } | Message::PcLeftOn { .. } => NoticeLevel::Error,
            Message::MetricsEnded(_) => NoticeLevel::Warning,
            _ => NoticeLevel::Info,
        }
    }

    /// Its values, in the order the code defines.
    fn values(&self) -> Vec<u64> {
        match self {
            Message::Attached { cupti_mapped } => vec![u64::from(*cupti_mapped)],
            Message::UnfinishedLeftOut { records } => vec![*records],
            Message::PcLeftOn { context } => vec![u64::from(*context)],
            Message::PcSampledIdle { cpu_ms, window_ms } => vec![*cpu_ms, *window_ms],
            Message::ProfileReady { contexts, thread } => vec![*contexts, *thread],
            Message::ProfileStarted {
                contexts: n,
                ranges_named,
            }
            | Message::ProfileFinished {
                count: n,
                ranges_named,
            } => vec![*n, u64::from(*ranges_named)],
            Message::ProfileRefused { .. } => Vec::new(),
            Message::PcCounts(c) => vec![
                u64::from(c.context),
                c.samples,
                c.records,
                c.dropped,
                c.non_user,
                c.truncated_pcs,
                c.full_buffer_reads,
            ],
            Message::MetricsEnded(e) => vec![
                match e.before {
                    MetricsEnd::GraphLaunch => 0,
                    MetricsEnd::CaptureBegin => 1,
                    MetricsEnd::NoSubscriber => 2,
                },
                e.launches,
            ],
        }
    }

    /// The record that carries it.
    pub fn record(&self) -> Record {
        Record::CodedNotice(CodedNotice {
            level: self.level(),
            code: self.code(),
            values: self.values(),
            detail: match self {
                Message::ProfileRefused { reason } => reason.clone(),
                _ => String::new(),
            },
            text: self.to_string(),
        })
    }

    /// The message a coded notice carries; `None` for a code this crate does not know (a library of another
    /// release), or values that are not the code's (a damaged notice, never taken for another message).
    pub fn read(notice: &CodedNotice) -> Option<Message> {
        let flag = |v: u64| match v {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        };
        let m = match (notice.code, &notice.values[..]) {
            (code::ATTACHED, &[mapped]) => Message::Attached {
                cupti_mapped: flag(mapped)?,
            },
            (code::UNFINISHED_LEFT_OUT, &[records]) => Message::UnfinishedLeftOut { records },
            (code::PROFILE_READY, &[contexts, thread]) => {
                Message::ProfileReady { contexts, thread }
            }
            (code::PROFILE_STARTED, &[contexts, named]) => Message::ProfileStarted {
                contexts,
                ranges_named: flag(named)?,
            },
            (code::PROFILE_FINISHED, &[count, named]) => Message::ProfileFinished {
                count,
                ranges_named: flag(named)?,
            },
            (code::PROFILE_REFUSED, &[]) => Message::ProfileRefused {
                reason: notice.detail.clone(),
            },
            (
                code::PC_COUNTS,
                &[
                    context,
                    samples,
                    records,
                    dropped,
                    non_user,
                    truncated_pcs,
                    full_buffer_reads,
                ],
            ) => Message::PcCounts(PcCounts {
                context: u32::try_from(context).ok()?,
                samples,
                records,
                dropped,
                non_user,
                truncated_pcs,
                full_buffer_reads,
            }),
            (code::METRICS_ENDED, &[before, launches]) => Message::MetricsEnded(MetricsEnded {
                before: match before {
                    0 => MetricsEnd::GraphLaunch,
                    1 => MetricsEnd::CaptureBegin,
                    2 => MetricsEnd::NoSubscriber,
                    _ => return None,
                },
                launches,
            }),
            (code::PC_LEFT_ON, &[context]) => Message::PcLeftOn {
                context: u32::try_from(context).ok()?,
            },
            (code::PC_SAMPLED_IDLE, &[cpu_ms, window_ms]) => {
                Message::PcSampledIdle { cpu_ms, window_ms }
            }
            _ => return None,
        };
        Some(m)
    }
}

/// The text a person reads (the GPU-host scripts' logs are searched for some of these words).
impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Message::Attached { cupti_mapped } => write!(
                f,
                "attached to the running process: records start now; CUPTI {}",
                if *cupti_mapped {
                    "already mapped by the program"
                } else {
                    "loaded for the trace"
                }
            ),
            Message::UnfinishedLeftOut { records } => write!(
                f,
                "{records} records of work that had not finished at CUPTI's last flush (a window's \
                 end, a fatal signal) left out (CUPTI gave them without an end time)"
            ),
            Message::ProfileReady { contexts, thread } => write!(
                f,
                "profiling ready: {contexts} context(s), this thread is {thread}"
            ),
            Message::ProfileStarted {
                contexts,
                ranges_named,
            } => write!(
                f,
                "profiling started: {contexts} context(s){}",
                if *ranges_named { ", ranges named" } else { "" }
            ),
            Message::ProfileFinished {
                count,
                ranges_named: true,
            } => write!(f, "profiling finished: {count} launches profiled"),
            Message::ProfileFinished {
                count,
                ranges_named: false,
            } => write!(f, "profiling finished: {count} stall records or ranges"),
            Message::ProfileRefused { reason } => write!(f, "profiling not possible: {reason}"),
            Message::PcCounts(c) => f.write_str(&c.text()),
            Message::MetricsEnded(e) => f.write_str(&e.text()),
            Message::PcLeftOn { context } => write!(
                f,
                "context {context}: PC sampling could not be turned off: CUPTI keeps it on in this process, and the \
                 GPU's performance counters held, until the process ends (other processes' PC sampling and counters \
                 on this GPU are refused meanwhile)"
            ),
            Message::PcSampledIdle { cpu_ms, window_ms } => write!(
                f,
                "no stall record, and the program was nearly idle in the window ({cpu_ms} ms of CPU time in \
                 {window_ms} ms): nothing of its ran to be sampled; a first PC sampling window of an idle program \
                 leaves every later one in the process blind, so PC sampling is refused in it from now on"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One of each message (a message added to [`Message`] is added here: its code is then checked below).
    fn every_message() -> Vec<Message> {
        vec![
            Message::Attached { cupti_mapped: true },
            Message::Attached {
                cupti_mapped: false,
            },
            Message::UnfinishedLeftOut { records: 760 },
            Message::ProfileReady {
                contexts: 2,
                thread: 4242,
            },
            Message::ProfileStarted {
                contexts: 1,
                ranges_named: true,
            },
            Message::ProfileStarted {
                contexts: 3,
                ranges_named: false,
            },
            Message::ProfileFinished {
                count: 3,
                ranges_named: true,
            },
            Message::ProfileFinished {
                count: u64::MAX,
                ranges_named: false,
            },
            Message::ProfileRefused {
                reason: "no device has an active context in this process".into(),
            },
            Message::PcCounts(PcCounts {
                context: 1,
                samples: 914_554,
                records: 0,
                dropped: 2,
                non_user: 914_554,
                truncated_pcs: 3,
                full_buffer_reads: 4,
            }),
            Message::MetricsEnded(MetricsEnded {
                before: MetricsEnd::GraphLaunch,
                launches: 9,
            }),
            Message::MetricsEnded(MetricsEnded {
                before: MetricsEnd::CaptureBegin,
                launches: 0,
            }),
            Message::MetricsEnded(MetricsEnded {
                before: MetricsEnd::NoSubscriber,
                launches: 0,
            }),
            Message::PcLeftOn { context: 2 },
            Message::PcSampledIdle {
                cpu_ms: 30,
                window_ms: 1002,
            },
        ]
    }

    fn notice(m: &Message) -> CodedNotice {
        match m.record() {
            Record::CodedNotice(n) => n,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_message_reads_back_from_its_record_and_through_the_wire() {
        let messages = every_message();
        let mut codes: Vec<u16> = messages.iter().map(Message::code).collect();
        codes.dedup();
        assert_eq!(
            codes,
            [1, 2, 3, 4, 5, 6, 7, 8, 12, 13],
            "each code once, none missing"
        );
        let mut e = gpu_tools_trace::Encoder::new(&gpu_tools_trace::StreamHeader::new(
            1,
            0,
            gpu_tools_trace::TimestampClock::Monotonic,
        ));
        for m in &messages {
            let n = notice(m);
            assert_eq!((n.level, n.text.clone()), (m.level(), m.to_string()));
            assert_eq!(Message::read(&n).as_ref(), Some(m));
            e.push(&m.record());
        }
        let read: Vec<Message> = gpu_tools_trace::StreamReader::new(e.bytes())
            .map(|r| match r {
                Ok(Record::CodedNotice(n)) => Message::read(&n).unwrap(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(read, messages);
    }

    #[test]
    fn the_texts_are_the_words_the_notices_had() {
        let texts: Vec<String> = every_message().iter().map(Message::to_string).collect();
        assert_eq!(
            texts,
            [
                "attached to the running process: records start now; CUPTI already mapped by the program",
                "attached to the running process: records start now; CUPTI loaded for the trace",
                "760 records of work that had not finished at CUPTI's last flush (a window's \
                 end, a fatal signal) left out (CUPTI gave them without an end time)",
                "profiling ready: 2 context(s), this thread is 4242",
                "profiling started: 1 context(s), ranges named",
                "profiling started: 3 context(s)",
                "profiling finished: 3 launches profiled",
                "profiling finished: 18446744073709551615 stall records or ranges",
                "profiling not possible: no device has an active context in this process",
                "context 1: PC sampling counted 914554 samples in 0 PC records (2 dropped, 914554 outside the \
                 program's kernels, 3 PCs beyond the read buffer, 4 reads with a full hardware buffer)",
                "kernel metrics ended before the program's first CUDA graph launch, the range profiler off: 9 \
                 launches profiled",
                "kernel metrics ended before the program's first stream capture, the range profiler off: 0 \
                 launches profiled",
                "kernel metrics not started: the program's own profiler holds CUPTI's callback subscriber, \
                 without which the range profiler would replay every launch of the window (and the tracer could \
                 find no moment to end it); the range profiler off: 0 launches profiled",
                "context 2: PC sampling could not be turned off: CUPTI keeps it on in this process, and the GPU's \
                 performance counters held, until the process ends (other processes' PC sampling and counters on \
                 this GPU are refused meanwhile)",
                "no stall record, and the program was nearly idle in the window (30 ms of CPU time in 1002 ms): \
                 nothing of its ran to be sampled; a first PC sampling window of an idle program leaves every \
                 later one in the process blind, so PC sampling is refused in it from now on",
            ]
        );
        assert_eq!(
            Message::ProfileRefused {
                reason: String::new()
            }
            .level(),
            NoticeLevel::Error
        );
    }

    #[test]
    fn an_unknown_code_or_values_not_the_codes_are_no_message() {
        let mut n = notice(&Message::UnfinishedLeftOut { records: 5 });
        n.code = 99;
        assert_eq!(Message::read(&n), None, "a code of another release");
        let mut n = notice(&Message::UnfinishedLeftOut { records: 5 });
        n.values.push(6);
        assert_eq!(Message::read(&n), None, "two counts where the code has one");
        let mut n = notice(&Message::Attached { cupti_mapped: true });
        n.values = vec![2];
        assert_eq!(Message::read(&n), None, "a flag is 0 or 1");
        // The text is never read: a reworded notice is the same message.
        let mut n = notice(&Message::UnfinishedLeftOut { records: 5 });
        n.text = "anything".into();
        assert_eq!(
            Message::read(&n),
            Some(Message::UnfinishedLeftOut { records: 5 })
        );
    }
}
