//! Kernel metrics of a running program, attached to (`profile --pid`): launches named and limited per kernel, the
//! early ends at the program's first graph launch or stream capture, at the next launch when the profiler goes away,
//! and none started where the program holds CUPTI's subscriber.

use gpu_tools::trace::*;
use gpu_tools_injection::control::Control;
use gpu_tools_injection::env;
use gpu_tools_injection::message::Message;
use gpu_tools_injection::profile::notice::{MetricsEnd, MetricsEnded};
use gpu_tools_injection::settings::{Destination, Settings};

use crate::support::{
    AttachChild, METRICS, double, fresh_dir, message, metrics, names, notices, range,
};

/// `profile --pid`'s side of a running program: the library is injected into a child that already made its
/// context (as `gpu-tools profile --pid` does, without the stops, which the doubles do not need), starts on the
/// start byte, and finishes on the finish byte (with `vanish`, the connection ends instead). Returns the stream's
/// records and what the child printed after the finish (`after`: its launch once profiling ended).
fn run_attached(scenario: &str, limit: u32, vanish: bool) -> (Vec<Record>, String) {
    run_attached_with(scenario, limit, vanish, None)
}

/// [`run_attached`], with the child's command `before.1` (`graph 10`: a CUDA graph of two kernels launched;
/// `capture 10`: a stream capture begun) given before the launch at index `before.0` in the list.
fn run_attached_with(
    scenario: &str,
    limit: u32,
    vanish: bool,
    before: Option<(usize, &str)>,
) -> (Vec<Record>, String) {
    use std::io::Write;
    use std::os::unix::net::UnixListener;
    use std::time::Duration;

    let lib = gpu_tools_testing::inject_lib();
    let dir = fresh_dir(&format!("attach-{scenario}"));
    let socket = dir.join("s");
    let mut child = AttachChild::start(scenario);

    let listener = UnixListener::bind(&socket).unwrap();
    let mut request =
        gpu_tools_injection::profile::ProfileRequest::new(METRICS.map(String::from).to_vec());
    request.launches_per_kernel = Some(limit);
    let settings = Settings {
        log: Some(log::LevelFilter::Debug),
        cupti: Some(double("cupti_full")),
        profile: Some(request),
        // No recorder: its callbacks (it starts inside the finish) would count among the profiling's.
        flight_recorder: false,
        ..Settings::new(Destination::Socket(socket.clone()))
    }
    .attach_argument()
    .unwrap();
    let done = gpu_tools::linux::inject::Injection::new(child.id(), &lib, env::ATTACH_ENTRY)
        .argument(settings)
        .run()
        .expect("inject the library");
    assert_eq!(done.entry_result, 0, "the attach thread started");
    let conn = gpu_tools_testing::accept_within(
        &listener,
        Duration::from_secs(30),
        "the attached library",
    );
    let mut control = conn.try_clone().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for r in StreamReader::new(conn) {
            if tx.send(r.expect("a readable stream")).is_err() {
                return;
            }
        }
    });
    let mut records = Vec::new();
    // Takes records until the message `wanted` accepts, or the stream's end.
    let wait_for = |what: &str, wanted: fn(&Message) -> bool, records: &mut Vec<Record>| {
        loop {
            let r = rx
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|e| panic!("waiting for {what}: {e}; got {records:#?}"));
            let hit = message(&r).is_some_and(|m| wanted(&m));
            let end = matches!(&r, Record::ProcessEnd(_));
            records.push(r);
            if hit || end {
                return;
            }
        }
    };
    wait_for(
        "ready",
        |m| matches!(m, Message::ProfileReady { .. }),
        &mut records,
    );
    // Launches before the start are not profiled.
    assert_eq!(child.answer("launch copy 1"), "launched");
    control.write_all(&[Control::ProfileStart.byte()]).unwrap();
    wait_for(
        "started",
        |m| matches!(m, Message::ProfileStarted { .. }),
        &mut records,
    );
    // copy three times, gemm once, copy again: with a limit of 2, the third and fourth copies run unprofiled.
    for (i, (name, corr)) in [
        ("copy", 2),
        ("copy", 3),
        ("gemm", 4),
        ("copy", 5),
        ("copy", 6),
    ]
    .into_iter()
    .enumerate()
    {
        if let Some((_, command)) = before.filter(|b| b.0 == i) {
            assert_eq!(child.answer(command), "launched");
        }
        assert_eq!(child.answer(&format!("launch {name} {corr}")), "launched");
    }
    let after = if vanish {
        // The profiler goes away without finishing: the library sees its connection end.
        control.shutdown(std::net::Shutdown::Write).unwrap();
        wait_for("the stream's end", |_| false, &mut records);
        child.answer("after")
    } else {
        control.write_all(&[Control::ProfileFinish.byte()]).unwrap();
        wait_for(
            "finished",
            |m| matches!(m, Message::ProfileFinished { .. }),
            &mut records,
        );
        let after = child.answer("after");
        control.write_all(&[Control::Stop.byte()]).unwrap();
        wait_for("the stream's end", |_| false, &mut records);
        after
    };
    drop(rx);
    let _ = reader.join();
    child.exit();
    let _ = std::fs::remove_dir_all(&dir);
    (records, after)
}

#[test]
fn attached_kernel_metrics_are_named_after_their_launches_and_limited_per_kernel() {
    let (records, after) = run_attached("attach", 2, false);
    assert_eq!(names(&records), vec!["copy", "copy", "gemm"]);
    let m = metrics(&records);
    assert_eq!(
        m.iter().map(|r| r.correlation).collect::<Vec<_>>(),
        vec![2, 3, 4],
        "the launches after the start, each once"
    );
    assert_eq!(
        m[2].metrics.iter().map(|x| x.1).collect::<Vec<_>>(),
        range(2)
    );
    let texts: Vec<&str> = notices(&records).iter().map(|n| n.text.as_str()).collect();
    let said: Vec<Message> = records.iter().filter_map(message).collect();
    assert!(
        said.contains(&Message::ProfileStarted {
            contexts: 1,
            ranges_named: true
        }),
        "{said:?}"
    );
    assert!(
        texts.iter().any(|t| t
            .contains("3 launches profiled, 2 more ran unprofiled (at most 2 per kernel name)")),
        "{texts:?}"
    );
    assert!(
        said.contains(&Message::ProfileFinished {
            count: 3,
            ranges_named: true
        }),
        "{said:?}"
    );
    assert!(
        !texts.iter().any(|t| t.contains("launches were expected")),
        "every range was expected: {texts:?}"
    );
    // Finished: the subscriber is gone (no launch callback is delivered), the profiler counts nothing.
    assert_eq!(after, "callbacks 0, ranges 0, range profilers enabled 1");
}

#[test]
fn attached_kernel_metrics_end_before_the_programs_first_graph_launch() {
    // In a running program, graph launches made while the range profiler was on lost their work (H200, driver
    // 580): the profiling ends before the first one is made, and nothing after it is profiled.
    let (records, after) = run_attached_with("attach", 2, false, Some((2, "graph 10")));
    assert_eq!(
        names(&records),
        vec!["copy", "copy"],
        "only the launches before the graph"
    );
    let texts: Vec<&str> = notices(&records).iter().map(|n| n.text.as_str()).collect();
    assert!(
        texts.iter().any(|t| t.starts_with(
            "kernel metrics end at the program's first CUDA graph launch: in a running program"
        )),
        "{texts:?}"
    );
    assert!(
        !texts.iter().any(|t| t.contains("graph exec")),
        "the graph's launch made no range: {texts:?}"
    );
    // The launches profiled until then are sent, then said once the profiler is off, and counted by the finish's
    // answer (`profile --pid` reads both: the counters are free from the first, and the table is not empty).
    ended_early_is_said_and_counted(&records, MetricsEnd::GraphLaunch, 2);
    // Ended: no launch callback is delivered any more and the profiler counts nothing.
    assert_eq!(after, "callbacks 0, ranges 0, range profilers enabled 1");
}

/// The early end's notice comes after the records of the launches profiled until then, with their count, and the
/// finish's answer counts them too.
fn ended_early_is_said_and_counted(records: &[Record], before: MetricsEnd, launches: u64) {
    let ended = MetricsEnded { before, launches };
    let at = records
        .iter()
        .position(|r| message(r) == Some(Message::MetricsEnded(ended)))
        .unwrap_or_else(|| panic!("no {ended:?} in {records:#?}"));
    let sent_before = records[..at]
        .iter()
        .filter(|r| matches!(r, Record::KernelMetrics(_)))
        .count();
    assert_eq!(sent_before as u64, launches, "the records come first");
    assert!(
        records.iter().any(|r| matches!(r, Record::CodedNotice(n)
            if matches!(Message::read(n), Some(Message::ProfileFinished { count, .. }) if count == launches))),
        "the finish counts {launches} launches: {records:#?}"
    );
}

#[test]
fn attached_kernel_metrics_end_before_the_programs_first_stream_capture() {
    // In a running program, a capture begun while the range profiler was on failed (capture-late, H200, driver 580:
    // a cuBLAS launch into the capturing stream failed and the capture was invalidated): the profiling ends before
    // the capture begins, and nothing after it is profiled.
    let (records, after) = run_attached_with("attach", 2, false, Some((2, "capture 10")));
    assert_eq!(
        names(&records),
        vec!["copy", "copy"],
        "only the launches before the capture"
    );
    let texts: Vec<&str> = notices(&records).iter().map(|n| n.text.as_str()).collect();
    assert!(
        texts.iter().any(|t| t.starts_with(
            "kernel metrics end at the program's first stream capture: in a running program"
        )),
        "{texts:?}"
    );
    ended_early_is_said_and_counted(&records, MetricsEnd::CaptureBegin, 2);
    assert_eq!(after, "callbacks 0, ranges 0, range profilers enabled 1");
}

#[test]
fn attached_kernel_metrics_end_at_the_next_launch_when_the_profiler_goes_away() {
    let (records, after) = run_attached("attach", 2, true);
    let texts: Vec<&str> = notices(&records).iter().map(|n| n.text.as_str()).collect();
    assert!(
        texts.contains(
            &"kernel metrics end at the program's next launch: the tracer ended before finishing them"
        ),
        "{texts:?}"
    );
    assert!(
        records
            .iter()
            .any(|r| matches!(r, Record::ProcessEnd(e) if e.reason == EndReason::Stopped)),
        "the stream ends: {records:#?}"
    );
    // The subscriber stays (its callbacks idle); the launch ended the profiler, so nothing is replayed or counted.
    assert_eq!(after, "callbacks 1, ranges 0, range profilers enabled 1");
}

#[test]
fn attached_kernel_metrics_are_not_started_where_the_program_holds_the_subscriber() {
    // Without the subscriber nothing limits the range profiler's replays, and on an H200 with 8 and 16 jobs the
    // tracer then found no moment to finish it: it stayed on for the process's life, holding the GPU's counters.
    // So it is never enabled; the window ends at its start, said by a message.
    let (records, after) = run_attached("attach-other-subscriber", 2, false);
    assert!(metrics(&records).is_empty(), "nothing profiled");
    let texts: Vec<&str> = notices(&records).iter().map(|n| n.text.as_str()).collect();
    assert!(
        texts.iter().any(|t| t.starts_with(
            "kernel metrics not started in the process: CUPTI's callback subscriber could not be had"
        )),
        "{texts:?}"
    );
    let messages: Vec<Message> = records.iter().filter_map(message).collect();
    assert!(
        messages.contains(&Message::ProfileStarted {
            contexts: 0,
            ranges_named: false
        }),
        "{messages:?}"
    );
    assert!(
        messages.contains(&Message::MetricsEnded(MetricsEnded {
            before: MetricsEnd::NoSubscriber,
            launches: 0
        })),
        "{messages:?}"
    );
    assert_eq!(after, "callbacks 0, ranges 0, range profilers enabled 0");
}
