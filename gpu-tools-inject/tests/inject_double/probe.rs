//! The program's profiler while an attach looks for it (the probe), in the cycles child: recording through it, idle
//! with a kind on, its records waiting in CUPTI across it, and its session started meanwhile.

use std::io::Write;
use std::time::Duration;

use gpu_tools::trace::*;
use gpu_tools_injection::control::Control;

use crate::cycles::{
    cycles_child, cycles_child_logged, end_cycles_child, program_count, wait_for_line,
};
use crate::support::{attach, attach_in_background, kernels, library, notice_texts, scratch};

/// A profiler of the program recording while it launches, through an attach: CUPTI fills and completes the
/// profiler's small buffers, and asks for new ones, while the attach looks for the profiler's callbacks (before they
/// are known). Every kernel made during its session reaches it once; the window records every kernel of its time.
#[test]
fn a_profiler_recording_through_an_attach_loses_no_record_while_it_is_looked_for() {
    library();
    let (dir, socket) = scratch("looked-for");
    let (mut child, mut ask) = cycles_child();
    // Buffers of 4096 bytes: 18 kernel records each, full every 3.6 ms at the launcher's pace.
    assert_eq!(ask("buffers 4096", "buffers "), "set");
    for round in 0..3 {
        assert_eq!(ask("start", "started "), "0");
        assert_eq!(ask("busy", "busy"), "");
        let (done, mut control, reader, _) = attach(child.id(), &socket);
        assert_eq!(done.entry_result, 0, "round {round}: the window started");
        std::thread::sleep(Duration::from_millis(20));
        let busy: u32 = ask("idle", "idle ").parse().unwrap();
        assert_eq!(ask("stop", "stopped "), "0");
        let c = program_count(&mut ask);
        let answer = &c.answer;
        assert_eq!(
            c.repeats, 0,
            "round {round}: no record handed twice ({answer})"
        );
        assert_eq!(
            c.handed, c.made,
            "round {round}: every kernel of its session, of {busy} made ({answer})"
        );
        control.write_all(&[Control::Stop.byte()]).unwrap();
        let records = reader.join().unwrap();
        let mut ids: Vec<u32> = kernels(&records).iter().map(|k| k.correlation).collect();
        let n = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(
            ids.len(),
            n,
            "round {round}: the window's kernels once each"
        );
        assert!(
            n > 0,
            "round {round}: the window recorded the launcher's kernels"
        );
    }
    end_cycles_child(&mut ask, &mut child, &dir);
}

/// A profiler whose session was open across the attach while it had recorded nothing yet (so the attach could not
/// see its kinds): what it then lacks is said, when it ends its session inside the window, not left silent.
#[test]
fn a_profiler_found_idle_that_had_a_kind_on_is_said() {
    library();
    let (dir, socket) = scratch("unseen");
    let (mut child, mut ask) = cycles_child();
    assert_eq!(ask("start", "started "), "0");
    let (done, mut control, reader, _) = attach(child.id(), &socket);
    assert_eq!(done.entry_result, 0, "the window started");
    assert_eq!(ask("kernels 6 10", "recorded "), "5");
    assert_eq!(ask("stop", "stopped "), "0");
    let c = program_count(&mut ask);
    let (handed, answer) = (c.handed, &c.answer);
    assert_eq!(
        handed, 0,
        "those after the attach went to the trace ({answer})"
    );
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    let ids: Vec<u32> = kernels(&records).iter().map(|k| k.correlation).collect();
    assert_eq!(ids, (6..=10).collect::<Vec<_>>());
    assert!(
        records.iter().any(|r| matches!(r, Record::Notice(n)
            if n.text.contains("kind 10 on since before the attach") && n.text.contains("went to the trace"))),
        "the loss is said: {:?}",
        records.iter().filter(|r| matches!(r, Record::Notice(_))).collect::<Vec<_>>()
    );
    end_cycles_child(&mut ask, &mut child, &dir);
}

/// A profiler whose session was open across the attach, its records still in CUPTI's buffer while the program
/// launched nothing more: the probe makes no flush before it looks for the callbacks, so that buffer comes back
/// through the probe at its watch's end, which sees its kinds, and the profiler keeps every kernel of its session,
/// those of the window too. (Flushed before the probe, the buffer went straight to it, the probe saw nothing, and
/// the window's kernels went to the trace alone.)
#[test]
fn a_profiler_whose_records_wait_in_cupti_across_the_attach_keeps_its_kernels() {
    library();
    let (dir, socket) = scratch("waiting");
    let (mut child, mut ask) = cycles_child();
    assert_eq!(ask("start", "started "), "0");
    assert_eq!(ask("kernels 1 5", "recorded "), "5");
    let (done, mut control, reader, _) = attach(child.id(), &socket);
    assert_eq!(done.entry_result, 0, "the window started");
    assert_eq!(ask("kernels 6 10", "recorded "), "5");
    assert_eq!(ask("stop", "stopped "), "0");
    let c = program_count(&mut ask);
    assert_eq!(
        (c.handed, c.repeats),
        (10, 0),
        "every kernel of its session, once ({})",
        c.answer
    );
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    let ids: Vec<u32> = kernels(&records).iter().map(|k| k.correlation).collect();
    assert_eq!(ids, (6..=10).collect::<Vec<_>>(), "the window's kernels");
    end_cycles_child(&mut ask, &mut child, &dir);
}

/// A profiler of the program that starts its session while the attach looks for it (torch.profiler on a `schedule`
/// beginning a cycle then; on an H200 such cycles lost one or two steps of kernels to the trace): it made no record
/// the attach could see, but its calls were seen, and every kernel of its session reaches it, once.
#[test]
fn a_profiler_that_starts_while_the_attach_looks_for_it_gets_its_records() {
    library();
    let (dir, socket) = scratch("watched");
    let (mut child, mut ask, log) = cycles_child_logged();
    // A profiler that ran a session before the attach: its callbacks are registered, its kinds off.
    assert_eq!(ask("start", "started "), "0");
    assert_eq!(ask("stop", "stopped "), "0");
    let pid = child.id();
    let attaching = attach_in_background(pid, &socket);
    // Its next session starts while the attach watches its buffers, and makes no record then.
    wait_for_line(
        &log,
        "buffers are watched",
        "the attach never watched the program's buffers",
    );
    assert_eq!(ask("start", "started "), "0");
    let (done, mut control, reader, _) = attaching.join().unwrap();
    assert_eq!(done.entry_result, 0, "the window started");
    assert_eq!(ask("kernels 1 5", "recorded "), "5");
    assert_eq!(ask("stop", "stopped "), "0");
    let c = program_count(&mut ask);
    assert_eq!(
        (c.handed, c.repeats),
        (5, 0),
        "every kernel of its session, none twice ({})",
        c.answer
    );
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    let ids: Vec<u32> = kernels(&records).iter().map(|k| k.correlation).collect();
    assert_eq!(ids, (1..=5).collect::<Vec<_>>(), "the window's kernels");
    let notices = notice_texts(&records);
    assert!(
        notices
            .iter()
            .any(|n| n.contains("while the attach looked for it")),
        "the stream says what it enabled then: {notices:?}"
    );
    assert!(
        !notices
            .iter()
            .any(|n| n.contains("since before the attach")),
        "no kind of its went unseen: {notices:?}"
    );
    end_cycles_child(&mut ask, &mut child, &dir);
}
