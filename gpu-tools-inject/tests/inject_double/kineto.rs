//! A profiler of the cycles child that, as Kineto, flushes only while a buffer of its own is out: it goes on after a
//! window that left a buffer of the tracer's in CUPTI, and keeps its records when the program launches through the
//! window's end.

use std::io::Write;
use std::time::Duration;

use gpu_tools_injection::control::Control;

use crate::cycles::{Ask, ProgramCount, cycles_child, end_cycles_child, program_count};
use crate::support::{attach, kernels, library, notice_texts, scratch};

/// A window that ends while the program's profiler records, with CUPTI holding an empty buffer of the tracer's (CUPTI
/// asks for one right after a flush and keeps it across forced flushes), beside a profiler that, as Kineto, flushes
/// only while a buffer of its own is out and passes over buffers it did not lend: on an H200 such a torch.profiler
/// recorded nothing more after the window. One of its buffers is kept out, so it flushes and its next sessions get
/// their kernels; the records CUPTI wrote into the tracer's buffer are lost to it, and the stream says so.
#[test]
fn a_profiler_that_flushes_only_with_a_buffer_out_goes_on_after_a_window_that_left_one_in_cupti() {
    library();
    let (dir, socket) = scratch("kept");
    let (mut child, mut ask) = cycles_child();
    assert_eq!(ask("kineto", "kineto "), "on");
    // Its callbacks registered by a session before the attach.
    assert_eq!(ask("start", "started "), "0");
    assert_eq!(ask("stop", "stopped "), "0");
    let (done, mut control, reader, _) = attach(child.id(), &socket);
    assert_eq!(done.entry_result, 0, "the window started");
    assert_eq!(ask("start", "started "), "0");
    assert_eq!(ask("kernels 1 5", "recorded "), "5");
    // The window ends with its session open.
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    assert_eq!(
        kernels(&records)
            .iter()
            .map(|k| k.correlation)
            .collect::<Vec<_>>(),
        (1..=5).collect::<Vec<_>>()
    );
    let notices = notice_texts(&records);
    assert!(
        notices
            .iter()
            .any(|n| n.contains("still held a buffer of the trace's")),
        "the stream says CUPTI kept a buffer of the trace's: {notices:?}"
    );
    // Its session goes on after the window, into the tracer's buffer CUPTI holds, and ends.
    assert_eq!(ask("kernels 6 10", "recorded "), "5");
    assert_eq!(ask("stop", "stopped "), "0");
    let count = |ask: &mut Ask| -> u64 { program_count(ask).handed };
    let after_first = count(&mut ask);
    // Its next session gets every kernel.
    assert_eq!(ask("start", "started "), "0");
    assert_eq!(ask("kernels 11 15", "recorded "), "5");
    assert_eq!(ask("stop", "stopped "), "0");
    assert_eq!(
        count(&mut ask),
        after_first + 5,
        "the session after the window got its kernels"
    );
    assert!(
        after_first >= 5,
        "the window's kernels reached it: {after_first}"
    );
    let unknown: u64 = ask("unknown", "unknown buffers ").parse().unwrap();
    assert_eq!(
        unknown, 1,
        "the tracer's buffer came to it, and it passed over it"
    );
    end_cycles_child(&mut ask, &mut child, &dir);
}

/// The same profiler, its program launching through the window's end (every 200 us): no buffer of the tracer's is
/// left in CUPTI (one CUPTI holds empty fills and comes back at one of the stop's flushes: the library's
/// `a_stop_keeping_kinds_takes_back_the_empty_buffer_cupti_held_once_it_fills` tests that apart), CUPTI drops
/// nothing between the tracer's last buffer and its callbacks' return (it has the profiler's buffers then), and
/// every kernel CUPTI recorded in its session reaches it once.
#[test]
fn a_profiler_that_flushes_only_with_a_buffer_out_keeps_its_records_when_the_program_launches_through_the_end()
 {
    library();
    let (dir, socket) = scratch("busy-end");
    let (mut child, mut ask) = cycles_child();
    assert_eq!(ask("kineto", "kineto "), "on");
    assert_eq!(ask("start", "started "), "0");
    assert_eq!(ask("stop", "stopped "), "0");
    let (done, mut control, reader, _) = attach(child.id(), &socket);
    assert_eq!(done.entry_result, 0, "the window started");
    assert_eq!(ask("start", "started "), "0");
    assert_eq!(ask("busy lossy", "busy"), "");
    std::thread::sleep(Duration::from_millis(100));
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let _made: u32 = ask("idle", "idle ").parse().unwrap();
    assert_eq!(ask("stop", "stopped "), "0");
    let notices = notice_texts(&records);
    assert!(
        !notices
            .iter()
            .any(|n| n.contains("still held a buffer of the trace's")),
        "no buffer of the trace's left in CUPTI: {notices:?}"
    );
    let dropped: u64 = notices
        .iter()
        .find_map(|n| {
            n.strip_prefix("CUPTI dropped ")
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0);
    let ProgramCount {
        handed,
        repeats,
        made,
        answer,
    } = program_count(&mut ask);
    assert_eq!(repeats, 0, "none twice ({answer})");
    assert_eq!(
        dropped, 0,
        "CUPTI had a buffer for each record: {notices:?}"
    );
    assert_eq!(
        handed, made,
        "every kernel of its session CUPTI recorded ({answer})"
    );
    let unknown: u64 = ask("unknown", "unknown buffers ").parse().unwrap();
    assert_eq!(unknown, 0, "no buffer of the trace's came to it");
    end_cycles_child(&mut ask, &mut child, &dir);
}
