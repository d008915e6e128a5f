//! A profiler of the cycles child whose GPU runs behind its launches, through windows' ends and starts: every kernel
//! of its sessions reaches it once and whole, and the attach makes no forced flush that hands it a running kernel.

use std::io::Write;
use std::time::Duration;

use gpu_tools_injection::control::Control;

use crate::cycles::{
    Ask, cycles_child, cycles_child_logged, end_busy_round, end_cycles_child, sessions_whole,
    sessions_whole_and_complete, wait_for_line,
};
use crate::support::{attach, attach_in_background, kernels, library, scratch};

/// A profiler whose program's GPU runs behind its launches (the last kernel still running, the GPU drained every
/// twentieth launch) through ten windows' ends, its session open: every kernel of its sessions reaches it once and
/// complete. The stop that keeps its kinds, and the return of its callbacks inside that stop, flush without force
/// until the buffers come back whole; a forced flush hands out a running kernel's record without a start or an end,
/// which CUPTI never completes (on an H200, a torch.profiler cycle so lost 44 kernels at a window's end).
#[test]
fn a_profiler_gets_its_kernels_whole_when_windows_end_while_they_run() {
    library();
    let (dir, socket) = scratch("lagging");
    let (mut child, mut ask) = cycles_child();
    assert_eq!(ask("buffers 65536", "buffers "), "set");
    // Its callbacks registered by a session before the attach.
    assert_eq!(ask("start", "started "), "0");
    assert_eq!(ask("stop", "stopped "), "0");
    for round in 0..10 {
        let (done, mut control, reader, _) = attach(child.id(), &socket);
        assert_eq!(done.entry_result, 0, "round {round}: the window started");
        assert_eq!(ask("start", "started "), "0");
        assert_eq!(ask("busy lagging", "busy"), "");
        std::thread::sleep(Duration::from_millis(100));
        control.write_all(&[Control::Stop.byte()]).unwrap();
        let records = reader.join().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        end_busy_round(&mut ask, round, "stop", &records);
    }
    sessions_whole_and_complete(&mut ask);
    end_cycles_child(&mut ask, &mut child, &dir);
}

/// A profiler on a schedule (sessions stopped with a forced flush and started with its callbacks registered again,
/// every few milliseconds) whose program's GPU runs behind its launches (as in
/// [`a_profiler_gets_its_kernels_whole_when_windows_end_while_they_run`]), through six windows' starts. The probe
/// makes no forced flush: it makes no flush before it looks for the callbacks, and at its watch's end the program's
/// buffers had gone back at its own flush. Forced there, each handed the profiler a running kernel without a start
/// or an end (on an H200, torch.profiler cycles lost 31 and 47 kernels so at windows' starts). Every kernel of its
/// sessions reaches it once. The program's own stops come after its GPU drained, so that only the attach's forced
/// flushes can hand out a running kernel: the one left before the tracer's start (which CUPTI needs, see
/// `ActivityTracerBuilder::flush_before_start`) may, so at most one per window is incomplete.
#[test]
fn a_scheduled_profiler_is_not_flushed_by_force_while_a_window_starts() {
    library();
    let (dir, socket) = scratch("lagging-start");
    let (mut child, mut ask, log) = cycles_child_logged();
    assert_eq!(ask("buffers 65536", "buffers "), "set");
    let rounds = 6;
    let mut left_to_program = 0;
    for round in 0..rounds {
        assert_eq!(ask("start", "started "), "0");
        assert_eq!(ask("busy lagging", "busy"), "");
        let pid = child.id();
        let attaching = attach_in_background(pid, &socket);
        // Its sessions cycle until three of its cycles fell in the probe's 200 ms watch, well before the watch ends:
        // stopped during the window, an incomplete record of a kernel launched after the stop would be the trace's,
        // outside this test's question.
        let (mut watching, mut cycled_in_watch) = (false, 0);
        loop {
            std::thread::sleep(Duration::from_millis(15));
            watching |= log
                .try_iter()
                .any(|line| line.contains("buffers are watched"));
            if cycled_in_watch == 3 || attaching.is_finished() {
                break;
            }
            assert_eq!(ask("stop drained", "stopped "), "0");
            assert_eq!(ask("start", "started "), "0");
            cycled_in_watch += usize::from(watching);
        }
        assert_eq!(cycled_in_watch, 3, "round {round}: it cycled while watched");
        // What the probe did at its watch's end (logged before the attach's answer).
        let end_of_watch = wait_for_line(
            &log,
            "at the watch's end",
            &format!("round {round}: no word of the watch's end"),
        );
        left_to_program += usize::from(end_of_watch.contains("no flush at the watch's end"));
        let (done, mut control, reader, _) = attaching.join().unwrap();
        assert_eq!(done.entry_result, 0, "round {round}: the window started");
        std::thread::sleep(Duration::from_millis(50));
        control.write_all(&[Control::Stop.byte()]).unwrap();
        let records = reader.join().unwrap();
        // With the debug log on, the stream's end says how often CUPTI read the clock through the library (the
        // double reads it at each launch).
        let ended = wait_for_line(
            &log,
            "stream ended:",
            &format!("round {round}: no word of the stream's end"),
        );
        let calls = ended
            .split("the timestamp callback was called ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse::<u64>().ok());
        assert!(calls.is_some_and(|n| n > 0), "round {round}: {ended}");
        end_busy_round(&mut ask, round, "stop drained", &records);
    }
    assert_eq!(
        left_to_program, rounds,
        "no forced flush at any watch's end"
    );
    let (count, incomplete) = sessions_whole(&mut ask);
    assert!(
        incomplete <= rounds as u64,
        "at most the tracer's start's forced flush hands one out: {incomplete} ({})",
        count.answer
    );
    end_cycles_child(&mut ask, &mut child, &dir);
}

/// A profiler on a schedule (sessions of 15 ms, stopped with a forced flush, one every 55 ms) whose program's GPU
/// runs behind its launches, through six whole windows, their starts and stops included: each window starts and
/// stops between two of its sessions, so the attach's forced flushes (before the tracer's start, at the stop) hand it
/// no running kernel, and every kernel of its sessions reaches it once and complete. Made inside a session, each
/// handed it a running kernel's record without a start or an end (on an H200: cycles of 94 of 141, and one of 1,598
/// of 2,350).
#[test]
fn a_scheduled_profiler_keeps_every_kernel_through_windows_that_start_and_stop_between_its_sessions()
 {
    library();
    let (dir, socket) = scratch("gaps");
    let (mut child, mut ask, log) = cycles_child_logged();
    assert_eq!(ask("buffers 65536", "buffers "), "set");
    let rounds = 6;
    // A session of 15 ms, then 40 ms without one (Kineto registers its callbacks again some tens of milliseconds
    // after its flush).
    let cycle = |ask: &mut Ask| {
        std::thread::sleep(Duration::from_millis(15));
        assert_eq!(ask("stop drained", "stopped "), "0");
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(ask("start", "started "), "0");
    };
    for round in 0..rounds {
        assert_eq!(ask("start", "started "), "0");
        assert_eq!(ask("busy lagging", "busy"), "");
        for _ in 0..3 {
            cycle(&mut ask);
        }
        let pid = child.id();
        let attaching = attach_in_background(pid, &socket);
        while !attaching.is_finished() {
            cycle(&mut ask);
        }
        let (done, mut control, reader, _) = attaching.join().unwrap();
        assert_eq!(done.entry_result, 0, "round {round}: the window started");
        for _ in 0..5 {
            cycle(&mut ask);
        }
        control.write_all(&[Control::Stop.byte()]).unwrap();
        while !reader.is_finished() {
            cycle(&mut ask);
        }
        let records = reader.join().unwrap();
        end_busy_round(&mut ask, round, "stop drained", &records);
        assert!(
            !kernels(&records).is_empty(),
            "round {round}: the window recorded the program's kernels"
        );
    }
    let lines: Vec<String> = log.try_iter().collect();
    let found = |moment: &str| {
        lines
            .iter()
            .filter(|l| {
                l.contains(&format!("the window's {moment} waited")) && l.contains("for the end")
            })
            .count()
    };
    assert_eq!(
        (found("start"), found("stop")),
        (rounds, rounds),
        "every window started and stopped between two sessions"
    );
    sessions_whole_and_complete(&mut ask);
    end_cycles_child(&mut ask, &mut child, &dir);
}

/// A profiler whose session stays open across the attach while its program's GPU runs behind its launches (as in
/// [`a_profiler_gets_its_kernels_whole_when_windows_end_while_they_run`]), so that it makes no flush while the probe
/// watches it: the buffer CUPTI holds of its goes back at the watch's end at a moment its records are whole (the GPU
/// drains every twentieth launch), not by force. Forced there, the flush handed it the running kernels without an end
/// (on an H100, torch.profiler cycles of 94 of 141). Every kernel of its sessions reaches it once; the one forced flush
/// left, before the tracer's start, may hand out one a window.
#[test]
fn a_profiler_recording_through_the_watch_is_flushed_back_whole() {
    library();
    let (dir, socket) = scratch("lagging-watch");
    let (mut child, mut ask, log) = cycles_child_logged();
    assert_eq!(ask("buffers 65536", "buffers "), "set");
    let rounds = 4;
    for round in 0..rounds {
        assert_eq!(ask("start", "started "), "0");
        assert_eq!(ask("busy lagging", "busy"), "");
        let (done, mut control, reader, _) = attach(child.id(), &socket);
        assert_eq!(done.entry_result, 0, "round {round}: the window started");
        let end_of_watch = wait_for_line(
            &log,
            "at the watch's end",
            &format!("round {round}: no word of the watch's end"),
        );
        assert!(
            end_of_watch.contains("flushed back at the watch's end after")
                && !end_of_watch.contains("forced"),
            "round {round}: back without force: {end_of_watch}"
        );
        std::thread::sleep(Duration::from_millis(50));
        control.write_all(&[Control::Stop.byte()]).unwrap();
        let records = reader.join().unwrap();
        end_busy_round(&mut ask, round, "stop drained", &records);
    }
    let (count, incomplete) = sessions_whole(&mut ask);
    assert!(
        incomplete <= rounds as u64,
        "at most the tracer's start's forced flush hands one out: {incomplete} ({})",
        count.answer
    );
    end_cycles_child(&mut ask, &mut child, &dir);
}

/// A profiler whose session stays open across six windows, recording CUPTI's overhead too, while its program's GPU
/// runs behind its launches, and whose CUPTI completes its own thread's buffer of overhead records at each flush ahead
/// of the program's buffer with a kernel still running (CUPTI 13.0 keeps a buffer per thread). Its buffers are large
/// (1 MiB), so that none fills in the probe's watch. The watch's end does not take CUPTI's buffer for the program's:
/// each window sees the profiler record kernels, and leaves their kind enabled for it at its end, so that its
/// kernels are still recorded after the windows. Taken for its, the window's end disabled the program's kernels for
/// the rest of the job (on an H200 a torch.profiler open across eight windows kept 116,125 of its 481,785 kernels).
#[test]
fn a_profiler_keeps_its_kernels_when_cuptis_own_buffer_comes_back_first_at_the_watchs_end() {
    library();
    let (dir, socket) = scratch("overhead-first");
    let (mut child, mut ask, log) = cycles_child_logged();
    assert_eq!(ask("buffers 1048576", "buffers "), "set");
    assert_eq!(ask("overhead", "overhead "), "on");
    assert_eq!(ask("start", "started "), "0");
    assert_eq!(ask("busy lagging", "busy"), "");
    for round in 0..6 {
        let (done, mut control, reader, _) = attach(child.id(), &socket);
        assert_eq!(done.entry_result, 0, "round {round}: the window started");
        let recording = wait_for_line(
            &log,
            "the program's own profiler is recording",
            &format!("round {round}: no word of the program's profiler"),
        );
        assert!(
            recording.contains("CONCURRENT_KERNEL"),
            "round {round}: the probe saw it record kernels: {recording}"
        );
        std::thread::sleep(Duration::from_millis(50));
        control.write_all(&[Control::Stop.byte()]).unwrap();
        // In a window this short the buffer CUPTI held for the program at the tracer's start may hold all of its
        // kernels at the stop: it comes back through the trace's callbacks all the same (see
        // `a_window_whose_records_stay_in_a_buffer_cupti_held_for_the_program_keeps_them`).
        let records = reader.join().unwrap();
        assert!(
            !kernels(&records).is_empty(),
            "round {round}: the window recorded the program's kernels"
        );
        std::thread::sleep(Duration::from_millis(30));
    }
    let made: u32 = ask("idle", "idle ").parse().unwrap();
    assert!(made > 100, "the program launched ({made})");
    // Its kernels are still recorded after the last window, and its session got each of them.
    assert_eq!(ask("kernels 1 10", "recorded "), "10");
    assert_eq!(ask("stop drained", "stopped "), "0");
    sessions_whole(&mut ask);
    end_cycles_child(&mut ask, &mut child, &dir);
}

/// A profiler whose session stays open across a window, and a kernel that runs from the window's start until just
/// after its stop. CUPTI asks for the next buffer right after it completes one while kinds record (CUPTI 13.0), so
/// the tracer's forced flush before its start leaves it holding a buffer of the program's, taken through the probe's
/// callbacks; the window's records go into it, and no flush without force returns it while the kernel runs. The
/// stop waits for it (without force) before the program's callbacks go back to CUPTI, so that it comes back through
/// the trace's: the trace reads the window's kernels in it, and the program gets them on its own clock. Given back
/// before, the buffer reached the program as CUPTI wrote it: the trace held no kernel of the window, and the
/// program's kernels of the window were on the trace's clock (Kineto drops a record whose time is outside its
/// session's).
#[test]
fn a_window_whose_records_stay_in_a_buffer_cupti_held_for_the_program_keeps_them() {
    library();
    let (dir, socket) = scratch("held-for-program");
    let (mut child, mut ask, log) = cycles_child_logged();
    assert_eq!(ask("buffers 1048576", "buffers "), "set");
    assert_eq!(ask("kineto", "kineto "), "on");
    assert_eq!(ask("start", "started "), "0");
    assert_eq!(ask("busy", "busy"), "");
    let (done, mut control, reader, _) = attach(child.id(), &socket);
    assert_eq!(done.entry_result, 0, "the window started");
    assert_eq!(ask("stuck 400000", "stuck "), "1");
    std::thread::sleep(Duration::from_millis(100));
    // It ends 30 ms from now: after the stop's last flush, within the wait for the program's buffer.
    assert_eq!(ask("land after 30", "landing"), "");
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    let made: u32 = ask("idle", "idle ").parse().unwrap();
    let window = kernels(&records).len();
    let lines: Vec<String> = log.try_iter().collect();
    let sharing: Vec<&String> = lines.iter().filter(|l| l.contains("coexist")).collect();
    assert!(
        window > 100,
        "the window's kernels are in the trace: {window} (of {made} the program launched): {sharing:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("held since before the trace came back after")),
        "the stop waited for the program's buffer: {sharing:#?}"
    );
    assert_eq!(ask("stop", "stopped "), "0");
    sessions_whole(&mut ask);
    end_cycles_child(&mut ask, &mut child, &dir);
}
