//! `where` for a process that an attach traced or profiled: the CUDA driver refuses the debugger there for the rest
//! of the process's life, so the answer comes from the flight recorder the injection library left in it
//! (`gpu_tools_injection::flight`): the launches not known to have finished, per stream, the oldest first (the one
//! a hung stream is stuck on), and the threads waiting in a synchronisation. Nothing is attached: the process is
//! asked over its recorder's socket and runs on untouched.

use std::time::Duration;

use gpu_tools_injection::flight::{self, FlightReport, Launch, StreamReport, StreamState};

use super::{Seen, out_line, short};
use crate::demangle::readable as demangle;
use crate::failure::Failure;

/// How long the recorder has to answer.
const ASK_LIMIT: Duration = Duration::from_secs(10);

/// Asks the process's recorder and prints its report. `Err` when none answers, with the reason the debugger is
/// not used either.
pub(super) fn examine(pid: u32) -> Result<Seen, Failure> {
    let report = flight::socket_of(pid)
        .map_err(|e| e.to_string())
        .and_then(|path| flight::ask(&path, ASK_LIMIT).map_err(|e| e.to_string()))
        .map_err(|e| {
            Failure::new(
                1,
                format!(
                    "process {pid} has run CUPTI for an earlier `gpu-tools trace --pid` or `profile --pid`: the CUDA \
                     driver (580) refuses the debugger in it for the rest of its life, and {e} (an attach made with \
                     --no-flight-recorder, or by a gpu-tools without one, leaves none). The process runs on as it was; \
                     do not attach a debugger to it either: `cuda-gdb -p` on such a job failed in the driver and the \
                     job died of SIGSEGV (H100, driver 580)"
                ),
            )
        })?;
    for line in render(pid, &report) {
        out_line(&line)?;
    }
    Ok(seen(&report))
}

fn ago(report: &FlightReport, at_ns: u64) -> String {
    let s = report.now_ns.saturating_sub(at_ns) as f64 / 1e9;
    format!("{s:.1} s ago")
}

fn launch_line(report: &FlightReport, l: &Launch) -> String {
    let what = if l.graph != 0 {
        format!("graph launch {:#x}: {}", l.graph, l.name)
    } else {
        demangle(&l.name)
    };
    format!(
        "    #{:<7} {:>10}  thread {:<8} {what}",
        l.seq,
        ago(report, l.at_ns),
        l.thread
    )
}

fn state(s: &StreamReport) -> String {
    match &s.state {
        StreamState::Busy => "busy (the driver says its work has not finished)".into(),
        StreamState::Idle => "idle".into(),
        StreamState::Destroyed => "destroyed".into(),
        StreamState::Unknown => "not asked".into(),
        StreamState::Answer(a) => format!("the driver's answer: {a}"),
        StreamState::NotAsked(why) => format!("not asked: {why}"),
    }
}

/// The report as lines: a head, each stream with launches not known to have finished (the oldest first), the
/// waiting threads, and a verdict line.
pub(super) fn render(pid: u32, r: &FlightReport) -> Vec<String> {
    let mut out = vec![format!(
        "process {pid}: from gpu-tools' flight recorder in the process (CUPTI has run here, so the CUDA driver \
         refuses the debugger; no warps or PCs): {} launches recorded since {}",
        r.launches,
        ago(r, r.since_ns)
    )];
    if let Some(why) = &r.stopped {
        out.push(format!(
            "  the recorder stopped: {why}; later launches are not in it"
        ));
    }
    let open: Vec<&StreamReport> = r
        .streams
        .iter()
        .filter(|s| s.unfinished_count > 0)
        .collect();
    for s in &open {
        out.push(format!(
            "  stream {:#x} (context {}): {}; {} launch{} not known to have finished{}",
            s.stream,
            s.context,
            state(s),
            s.unfinished_count,
            if s.unfinished_count == 1 { "" } else { "es" },
            if s.unfinished_count > s.unfinished.len() as u64 {
                format!(
                    " (the oldest {half} and the newest {half} shown)",
                    half = s.unfinished.len() / 2
                )
            } else {
                String::new()
            }
        ));
        let skipped = s.unfinished_count.saturating_sub(s.unfinished.len() as u64);
        for (i, l) in s.unfinished.iter().enumerate() {
            if skipped > 0 && i == s.unfinished.len() / 2 {
                out.push(format!("    ... {skipped} more ..."));
            }
            out.push(launch_line(r, l));
        }
        if let Some(l) = &s.last_finished {
            out.push(format!(
                "    last known finished: {}",
                launch_line(r, l).trim_start()
            ));
        }
    }
    let idle = r.streams.len() - open.len();
    if idle > 0 {
        out.push(format!(
            "  {idle} other stream{} with every launch finished",
            if idle == 1 { "" } else { "s" }
        ));
    }
    for w in &r.waits {
        out.push(format!(
            "  thread {} waits in {}{} since {}",
            w.thread,
            w.call,
            w.stream
                .map(|s| format!(" (stream {s:#x})"))
                .unwrap_or_default(),
            ago(r, w.since_ns)
        ));
    }
    out.push(verdict(r, &open));
    out
}

/// The line that says where it is stuck: the busy streams' oldest unfinished launches, a collective named as such.
fn verdict(r: &FlightReport, open: &[&StreamReport]) -> String {
    let stuck: Vec<String> = open
        .iter()
        .filter(|s| s.state == StreamState::Busy)
        .filter_map(|s| Some((s, s.unfinished.first()?, s.unfinished.last()?)))
        .map(|(s, first, last)| {
            let collective = |name: &str| {
                if short(name).starts_with("nccl") {
                    " (an NCCL collective: it waits for every rank to join; look at the ranks not in it)"
                } else {
                    ""
                }
            };
            let name = demangle(&first.name);
            let mut text = format!(
                "{} on stream {:#x}, launched {}{}",
                short(&name),
                s.stream,
                ago(r, first.at_ns),
                collective(&name)
            );
            if last.seq != first.seq {
                let name = demangle(&last.name);
                text.push_str(&format!(
                    ", or one of the {} launched after it up to {} (the stream's last launch, {}{})",
                    s.unfinished_count - 1,
                    short(&name),
                    ago(r, last.at_ns),
                    collective(&name)
                ));
            }
            text
        })
        .collect();
    let not_asked: Vec<&str> = open
        .iter()
        .filter_map(|s| match &s.state {
            StreamState::NotAsked(why) => Some(why.as_str()),
            _ => None,
        })
        .collect();
    if stuck.is_empty() {
        if let Some(why) = not_asked.first() {
            return format!(
                "=> not known: the driver was not asked about {} stream{} with unfinished launches ({why}); ask again",
                not_asked.len(),
                if not_asked.len() == 1 { "" } else { "s" }
            );
        }
        return "=> no stream has work left that the driver reports running".into();
    }
    format!("=> running or next to run: {}", stuck.join("; "))
}

/// What the summary of a `where` over several processes reads: the busy streams' oldest unfinished launches.
fn seen(r: &FlightReport) -> Seen {
    Seen {
        kernels: r
            .streams
            .iter()
            .filter(|s| s.state == StreamState::Busy)
            .filter_map(|s| s.unfinished.first())
            .map(|l| (demangle(&l.name), 0))
            .collect(),
        ended: None,
        not_asked: r
            .streams
            .iter()
            .filter(|s| matches!(s.state, StreamState::NotAsked(_)))
            .count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_tools_injection::flight::Wait;

    #[test]
    fn the_oldest_unfinished_launch_of_a_busy_stream_is_named() {
        let launch = |seq, at_ns, name: &str| Launch {
            seq,
            at_ns,
            thread: 7,
            correlation: 1,
            graph: 0,
            name: name.into(),
        };
        let r = FlightReport {
            pid: 9,
            now_ns: 20_000_000_000,
            since_ns: 1_000_000_000,
            launches: 100,
            stopped: None,
            streams: vec![
                StreamReport {
                    stream: 0x10,
                    context: 1,
                    state: StreamState::Busy,
                    launched: 50,
                    unfinished: vec![
                        launch(49, 8_000_000_000, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
                        launch(50, 8_100_000_000, "_Z4stepv"),
                    ],
                    unfinished_count: 2,
                    last_finished: Some(launch(48, 7_900_000_000, "_Z4stepv")),
                },
                StreamReport {
                    stream: 0x20,
                    context: 1,
                    state: StreamState::Idle,
                    launched: 50,
                    ..StreamReport::default()
                },
            ],
            waits: vec![Wait {
                thread: 7,
                call: "cuStreamSynchronize".into(),
                stream: Some(0x10),
                since_ns: 8_200_000_000,
            }],
        };
        let lines = render(9, &r);
        let text = lines.join("\n");
        assert!(text.contains("stream 0x10 (context 1): busy"), "{text}");
        assert!(
            text.contains("2 launches not known to have finished"),
            "{text}"
        );
        assert!(text.contains("#49      12.0 s ago  thread 7"), "{text}");
        assert!(
            text.contains("thread 7 waits in cuStreamSynchronize (stream 0x10) since 11.8 s ago"),
            "{text}"
        );
        assert!(
            text.contains("1 other stream with every launch finished"),
            "{text}"
        );
        let last = lines.last().unwrap();
        assert!(
            last.starts_with(
                "=> running or next to run: ncclDevKernel_AllReduce_Sum_f32_RING_LL on stream 0x10"
            ),
            "{last}"
        );
        assert!(last.contains("an NCCL collective"), "{last}");
        assert!(
            last.contains("or one of the 1 launched after it up to step (the stream's last launch, 11.9 s ago)"),
            "{last}"
        );
        assert_eq!(
            seen(&r).kernels,
            vec![("ncclDevKernel_AllReduce_Sum_f32_RING_LL".to_string(), 0)]
        );
    }

    #[test]
    fn a_stream_not_asked_is_said_and_leaves_the_verdict_open() {
        let r = FlightReport {
            pid: 9,
            now_ns: 2_000_000_000,
            since_ns: 1_000_000_000,
            launches: 3,
            stopped: None,
            streams: vec![StreamReport {
                stream: 0x30,
                context: 1,
                state: StreamState::NotAsked(
                    "the program is capturing a CUDA graph on stream 0x30".into(),
                ),
                launched: 3,
                unfinished: vec![Launch {
                    seq: 3,
                    at_ns: 1_900_000_000,
                    thread: 7,
                    correlation: 3,
                    graph: 0,
                    name: "_Z4stepv".into(),
                }],
                unfinished_count: 1,
                last_finished: None,
            }],
            waits: vec![],
        };
        let lines = render(9, &r);
        let text = lines.join("\n");
        assert!(
            text.contains(
                "stream 0x30 (context 1): not asked: the program is capturing a CUDA graph on stream 0x30"
            ),
            "{text}"
        );
        assert_eq!(
            lines.last().unwrap(),
            "=> not known: the driver was not asked about 1 stream with unfinished launches (the program is \
             capturing a CUDA graph on stream 0x30); ask again"
        );
        assert!(seen(&r).kernels.is_empty());
        // The summary over processes says so too, not "no kernel running".
        assert_eq!(
            super::super::describe(&seen(&r)),
            "not known: 1 stream with unfinished launches not asked about"
        );
    }
}
