//! The cycles child (a program whose profiler's sessions the test starts and stops, as `torch.profiler`'s `schedule`
//! does) and what drives it, which the probe, Kineto and lagging tests share; its sessions beside attached windows
//! each get their kernels once.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use gpu_tools::trace::*;
use gpu_tools_injection::control::Control;
use gpu_tools_injection::env;

use crate::common;
use crate::program_profiler::program_profiler;
use crate::support::{
    CONCURRENT_KERNEL, MEMSET, OVERHEAD, SCENARIO, attach, attach_recording, attached_child, end,
    kernels, library, notice_texts, scratch,
};

/// The child of the profiler-cycles test: a stand-in program whose own profiler's sessions the test starts and stops
/// from the program's thread, as `torch.profiler`'s `schedule` does at `prof.step()`. `kernels A B` makes the CUPTI
/// double emit kernels A..=B, each starting now, and prints how many CUPTI recorded; `busy` starts a second thread
/// that launches a kernel every 200 us (correlation ids from [`BUSY_FIRST`]) and `idle` stops it and prints how many
/// it made; `memsets A B` makes sets A..=B; `start` and `stop` begin and end a session of the profiler (of kernels
/// only); `buffers N` sets the size of the buffers the profiler lends CUPTI from then on (4096 bytes at first);
/// `overhead` makes its sessions record CUPTI's overhead too, with CUPTI's own thread's buffer of overhead records
/// completed ahead of the program's at each flush; `count` prints the kernel records the profiler was handed so far,
/// how many of them twice, how many kernels were made while a session was open, and the sets it was handed.
/// Each launch and each start or stop holds one lock, so that what a session spans is exact.
#[test]
#[ignore = "the child process of a_profiler_in_cycles_gets_each_record_of_its_sessions_once_beside_windows"]
fn attach_child_cycles() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    if std::env::var(SCENARIO).as_deref() != Ok("cycles") {
        return;
    }
    /// Whether a session is open, and the kernels made while one was.
    #[derive(Default)]
    struct Program {
        open: bool,
        made_in_sessions: u64,
        /// Each kernel recorded: its correlation id, its start and whether a session was open at its launch (for a
        /// failure's message: the kernels handed that were not made in a session, and the other way round).
        recorded: Vec<(u32, u64, bool)>,
    }
    let profiler = Arc::new(program_profiler());
    // Its kernels are stamped as CUPTI stamps them, with the clock registered as they are written: the test asks
    // whether each reached the profiler on its own clock.
    common::double().set_stamp_at_write(true);
    let state = Arc::new(Mutex::new(Program::default()));
    let launch = {
        let state = Arc::clone(&state);
        move |correlation: u32| -> i32 {
            let d = common::double();
            let mut st = state.lock().unwrap();
            let start = d.now();
            let code = d.kernel(
                CONCURRENT_KERNEL,
                start,
                start + 100,
                (0, 1, 7),
                correlation,
                c"_Z4stepv",
                (1, 1, 1),
                (32, 1, 1),
            );
            if code == 1 && st.open {
                st.made_in_sessions += 1;
            }
            if code == 1 {
                let open = st.open;
                st.recorded.push((correlation, start, open));
            }
            code
        }
    };
    let mut kinds = vec![CONCURRENT_KERNEL];
    let busy = Arc::new(AtomicBool::new(false));
    let mut launcher: Option<std::thread::JoinHandle<u32>> = None;
    println!("READY");
    std::io::stdout().flush().unwrap();
    for line in std::io::stdin().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["kernels", a, b] => {
                let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                let recorded = (a..=b).filter(|&c| launch(c) == 1).count();
                println!("recorded {recorded}");
            }
            ["buffers", bytes] => {
                profiler.buffer_bytes(bytes.parse().unwrap());
                println!("buffers set");
            }
            ["kineto"] => {
                // CUPTI keeping an empty buffer across forced flushes, and a profiler that flushes only while a
                // buffer of its own is out.
                common::double().set_empty_buffer_kept(true);
                profiler.kineto();
                println!("kineto on");
            }
            ["overhead"] => {
                // Its sessions record CUPTI's overhead too (as Kineto's do), and CUPTI completes its own thread's
                // buffer of overhead records at each flush, ahead of the program's.
                common::double().set_flush_overhead(true);
                kinds.push(OVERHEAD);
                println!("overhead on");
            }
            ["unknown"] => println!("unknown buffers {}", profiler.unknown()),
            ["incomplete"] => println!("incomplete kernels {}", profiler.incomplete()),
            ["foreign"] => println!("foreign clock {}", profiler.foreign_clock()),
            ["stuck", id] => {
                // One kernel that runs on (until `land after`): the buffer CUPTI writes it into is held back by
                // every flush without force.
                let d = common::double();
                d.set_in_flight(true);
                let code = launch(id.parse().unwrap());
                d.set_in_flight(false);
                println!("stuck {code}");
            }
            ["land", "after", ms] => {
                common::double().land_after(ms.parse().unwrap());
                println!("landing");
            }
            ["memsets", a, b] => {
                let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                let d = common::double();
                let _held = state.lock().unwrap();
                let recorded = (a..=b)
                    .filter(|&c| {
                        let start = d.now();
                        d.memset(0x5a, 4096, start, start + 50, 7, c) == 1
                    })
                    .count();
                println!("recorded {recorded}");
            }
            ["busy"] | ["busy", "lossy" | "lagging"] => {
                // `busy lossy`: CUPTI may drop some of its records (said in the stream), which are not counted as
                // made in a session. `busy lagging`: the GPU runs behind the launches, as in a training step: each
                // kernel still runs until the next launch, a launch every 100 us, and every twentieth launch the GPU
                // drains (a synchronize) for 3 ms.
                let lossy = words.get(1) == Some(&"lossy");
                let lagging = words.get(1) == Some(&"lagging");
                busy.store(true, Ordering::SeqCst);
                let (busy, launch) = (Arc::clone(&busy), launch.clone());
                launcher = Some(std::thread::spawn(move || {
                    // Ids go on from the last busy period: each launch has its own.
                    static NEXT: std::sync::atomic::AtomicU32 =
                        std::sync::atomic::AtomicU32::new(BUSY_FIRST);
                    let d = common::double();
                    let first = NEXT.load(Ordering::SeqCst);
                    let mut next = first;
                    while busy.load(Ordering::SeqCst) {
                        if lagging {
                            d.land();
                            d.set_in_flight(true);
                        }
                        let code = launch(next);
                        if lagging {
                            d.set_in_flight(false);
                        }
                        // Lagging, the test may stop and start sessions meanwhile: between two, with no window
                        // open, no kind records (-1).
                        assert!(
                            code == 1 || (lossy && code == 0) || (lagging && code == -1),
                            "the launcher's kernel {next} recorded ({code})"
                        );
                        next += 1;
                        if lagging && next % 20 == 0 {
                            // Longer than the 2 ms between the library's flushes, so that one of them falls in it
                            // (a drain shorter than that, at a steady period, can miss every one).
                            d.land();
                            std::thread::sleep(Duration::from_millis(3));
                        }
                        std::thread::sleep(Duration::from_micros(if lagging { 100 } else { 200 }));
                    }
                    if lagging {
                        d.land();
                    }
                    NEXT.store(next, Ordering::SeqCst);
                    next - first
                }));
                println!("busy");
            }
            ["idle"] => {
                busy.store(false, Ordering::SeqCst);
                let made = launcher.take().map_or(0, |t| t.join().unwrap());
                println!("idle {made}");
            }
            ["start"] => {
                let mut st = state.lock().unwrap();
                st.open = true;
                println!("started {}", profiler.start(&kinds));
            }
            ["stop"] | ["stop", "drained"] => {
                let mut st = state.lock().unwrap();
                if words.len() == 2 {
                    // Its GPU drained first (a synchronize at the step's end): its own forced flush then hands out
                    // no running kernel.
                    common::double().land();
                }
                st.open = false;
                println!("stopped {}", profiler.stop(&kinds));
            }
            ["count"] => {
                let st = state.lock().unwrap();
                // Kernels handed though launched outside a session, or made in one and not handed: the first few.
                let differ: Vec<String> = st
                    .recorded
                    .iter()
                    .filter(|&&(id, _, open)| profiler.seen(id) != open)
                    .take(8)
                    .map(|&(id, start, open)| {
                        let what = if open { "not-handed" } else { "handed-outside" };
                        format!("{id}:{what}@{start}")
                    })
                    .collect();
                println!(
                    "program kernels {} repeats {} made {} memsets {} differ [{}]",
                    profiler.count(CONCURRENT_KERNEL),
                    profiler.repeats(),
                    st.made_in_sessions,
                    profiler.count(MEMSET),
                    differ.join(" ")
                )
            }
            ["exit"] => {
                println!("bye");
                return;
            }
            other => panic!("unknown command {other:?}"),
        }
        std::io::stdout().flush().unwrap();
    }
}

/// The first correlation id of the cycles child's launcher thread (the test's own kernels stay below it).
const BUSY_FIRST: u32 = 500_000;

/// A profiler of the program in cycles (`torch.profiler` on a `schedule`: a session started and stopped every few
/// steps, by the program's thread) beside attached windows: a session open across a window's start (the program
/// launching meanwhile, as a training job does), one that starts inside a window and ends after it, one inside a
/// window, and many short ones in a window. Each session gets exactly the kernels made while it was open, each once;
/// each window records every kernel made during it. Kineto keeps the records a session is handed (within its
/// time), so a record handed twice, late or not at all shows in the job's count.
#[test]
fn a_profiler_in_cycles_gets_each_record_of_its_sessions_once_beside_windows() {
    library();
    let (dir, socket) = scratch("cycles");
    let (mut child, mut ask) = cycles_child();
    let made = |a: u32, b: u32, ask: &mut dyn FnMut(&str, &str) -> String| {
        assert_eq!(
            ask(&format!("kernels {a} {b}"), "recorded "),
            (b - a + 1).to_string(),
            "kernels {a}..={b} recorded"
        );
    };
    // The program's records so far: each once, and as many as were made while its sessions were open.
    let handed = |ask: &mut dyn FnMut(&str, &str) -> String, when: &str| -> u64 {
        let c = program_count(ask);
        let answer = &c.answer;
        assert_eq!(c.repeats, 0, "{when}: no record handed twice ({answer})");
        assert_eq!(
            c.handed, c.made,
            "{when}: handed as many as made during its sessions ({answer})"
        );
        c.handed
    };
    let session = |ask: &mut dyn FnMut(&str, &str) -> String, start: bool| {
        let (command, prefix) = if start {
            ("start", "started ")
        } else {
            ("stop", "stopped ")
        };
        assert_eq!(ask(command, prefix), "0", "{command}");
    };
    // The window's kernels: the test's own exactly `want`, in order, and the launcher's each once.
    let stop_window = |mut control: std::os::unix::net::UnixStream,
                       reader: std::thread::JoinHandle<Vec<Record>>,
                       want: std::ops::RangeInclusive<u32>,
                       sets: usize,
                       window: &str| {
        control.write_all(&[Control::Stop.byte()]).unwrap();
        let records = reader.join().unwrap();
        assert_eq!(end(&records).map(|e| e.reason), Some(EndReason::Stopped));
        assert_eq!(
            records
                .iter()
                .filter(|r| matches!(r, Record::Memset(_)))
                .count(),
            sets,
            "{window}: its sets"
        );
        let ids: Vec<u32> = kernels(&records).iter().map(|k| k.correlation).collect();
        let own: Vec<u32> = ids.iter().copied().filter(|&c| c < BUSY_FIRST).collect();
        assert_eq!(
            own,
            want.collect::<Vec<_>>(),
            "{window}: every kernel made during it, once"
        );
        let mut launcher: Vec<u32> = ids.iter().copied().filter(|&c| c >= BUSY_FIRST).collect();
        let n = launcher.len();
        launcher.dedup();
        assert_eq!(
            launcher.len(),
            n,
            "{window}: the launcher's kernels once each"
        );
    };

    // As Kineto's: large enough that CUPTI still holds one of its buffers well after a trace started.
    assert_eq!(ask(&format!("buffers {}", 1 << 20), "buffers "), "set");
    // A session before any window: the profiler alone.
    session(&mut ask, true);
    made(1, 10, &mut ask);
    session(&mut ask, false);
    assert_eq!(handed(&mut ask, "before the windows"), 10);

    // A session open across the first window's start, the program launching, stopped inside the window.
    session(&mut ask, true);
    made(11, 20, &mut ask);
    assert_eq!(ask("busy", "busy"), "");
    let (done, control, reader, _) = attach_recording(
        child.id(),
        &socket,
        &[env::TraceKind::Kernel, env::TraceKind::Memset],
    );
    assert_eq!(done.entry_result, 0, "the first window started");
    let busy: u32 = ask("idle", "idle ").parse().unwrap();
    assert!(busy > 0, "the launcher ran during the attach");
    // Sets, which the trace records and the profiler does not: CUPTI writes them into the profiler's buffer it
    // holds, and the trace reads them there. (They reach the profiler too, in that buffer: the probe did not see it
    // record sets, which does not say it has them off.)
    assert_eq!(ask("memsets 1 5", "recorded "), "5");
    made(21, 30, &mut ask);
    session(&mut ask, false);
    let mut expected = 30 + u64::from(busy);
    assert_eq!(
        handed(&mut ask, "a session open across the window's start"),
        expected
    );
    // Then sessions inside the window, short ones, as a schedule's cycles come round.
    let mut next = 31;
    for cycle in 0..6u32 {
        made(next, next + 4, &mut ask); // wait steps: no session
        next += 5;
        session(&mut ask, true);
        let n = 3 + cycle;
        made(next, next + n - 1, &mut ask);
        next += n;
        expected += u64::from(n);
        session(&mut ask, false);
        assert_eq!(
            handed(&mut ask, &format!("cycle {cycle} inside the window")),
            expected
        );
    }
    // A session that starts inside the window and ends after it.
    session(&mut ask, true);
    made(next, next + 9, &mut ask);
    let window_last = next + 9;
    stop_window(control, reader, 21..=window_last, 5, "the first window");
    made(window_last + 1, window_last + 10, &mut ask);
    session(&mut ask, false);
    expected += 20;
    assert_eq!(
        handed(&mut ask, "a session that outlived the window"),
        expected
    );
    next = window_last + 11;

    // A second window, with a session wholly inside it and kernels on either side.
    let (done, control, reader, _) = attach(child.id(), &socket);
    assert_eq!(done.entry_result, 0, "the second window started");
    let first = next;
    made(next, next + 4, &mut ask);
    session(&mut ask, true);
    made(next + 5, next + 14, &mut ask);
    session(&mut ask, false);
    made(next + 15, next + 19, &mut ask);
    expected += 10;
    assert_eq!(
        handed(&mut ask, "a session inside the second window"),
        expected
    );
    stop_window(control, reader, first..=next + 19, 0, "the second window");
    next += 20;

    // After the windows: the profiler alone again, as before them.
    session(&mut ask, true);
    made(next, next + 9, &mut ask);
    session(&mut ask, false);
    expected += 10;
    assert_eq!(handed(&mut ask, "a session after the windows"), expected);

    end_cycles_child(&mut ask, &mut child, &dir);
}

/// Sends the cycles child a command and returns the rest of its first answer line that starts with the given prefix.
pub(crate) type Ask = Box<dyn FnMut(&str, &str) -> String>;

/// The cycles child's `count`: the kernel records its profiler was handed, how many of them twice, and how many
/// kernels were made while a session was open; with the answer as printed, for messages.
pub(crate) struct ProgramCount {
    pub(crate) handed: u64,
    pub(crate) repeats: u64,
    pub(crate) made: u64,
    pub(crate) answer: String,
}

pub(crate) fn program_count(ask: &mut dyn FnMut(&str, &str) -> String) -> ProgramCount {
    let answer = ask("count", "program kernels ");
    let words: Vec<&str> = answer.split_whitespace().collect();
    let number = |at: usize| -> u64 { words[at].parse().unwrap() };
    ProgramCount {
        handed: number(0),
        repeats: number(2),
        made: number(4),
        answer: answer.clone(),
    }
}

/// The end of a busy round of the cycles child, after its window's stream ended: its launcher stops, having
/// launched (more than 100 kernels), its session ends (`stop`: the command that ends it), and the window's stream
/// says CUPTI dropped nothing.
pub(crate) fn end_busy_round(ask: &mut Ask, round: usize, stop: &str, records: &[Record]) {
    let made: u32 = ask("idle", "idle ").parse().unwrap();
    assert!(made > 100, "round {round}: the program launched ({made})");
    assert_eq!(ask(stop, "stopped "), "0");
    let notices = notice_texts(records);
    assert!(
        !notices.iter().any(|n| n.starts_with("CUPTI dropped ")),
        "round {round}: CUPTI had a buffer for each record: {notices:?}"
    );
}

/// [`sessions_whole`], and no kernel handed to the program's profiler while it ran (without its start or end).
pub(crate) fn sessions_whole_and_complete(ask: &mut Ask) {
    let (count, incomplete) = sessions_whole(ask);
    assert_eq!(
        incomplete, 0,
        "none handed out while it ran ({})",
        count.answer
    );
}

/// The cycles child's profiler at the end: it was handed no kernel twice, every kernel of its sessions, and each on
/// its own clock (Kineto drops a record whose time is outside its session's). Returns
/// its count and the kernels it was handed without a start.
pub(crate) fn sessions_whole(ask: &mut Ask) -> (ProgramCount, u64) {
    let count = program_count(ask);
    let incomplete: u64 = ask("incomplete", "incomplete kernels ").parse().unwrap();
    let foreign: u64 = ask("foreign", "foreign clock ").parse().unwrap();
    let answer = &count.answer;
    assert_eq!(count.repeats, 0, "none twice ({answer})");
    assert_eq!(
        foreign, 0,
        "every kernel on its own clock, none on the trace's ({answer})"
    );
    assert_eq!(
        count.handed, count.made,
        "every kernel of its sessions ({answer})"
    );
    (count, incomplete)
}

/// The first line of the child's log that holds `needle`, waiting for it up to 30 s (`what`: what it says, for the
/// failure).
pub(crate) fn wait_for_line(
    log: &std::sync::mpsc::Receiver<String>,
    needle: &str,
    what: &str,
) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match log.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return line,
            Ok(_) => {}
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

/// Ends the cycles child (`exit`), checks it exited 0, and removes the test's scratch folder.
pub(crate) fn end_cycles_child(
    ask: &mut Ask,
    child: &mut std::process::Child,
    dir: &std::path::Path,
) {
    assert_eq!(ask("exit", "bye"), "");
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "the program ran on and exited 0: {status}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The cycles child, started, and its [`Ask`].
pub(crate) fn cycles_child() -> (std::process::Child, Ask) {
    cycles_child_from(attached_child("cycles::attach_child_cycles", "cycles"))
}

/// The cycles child, with each line of its standard error (the injected library's debug log among them) also sent
/// to the receiver.
pub(crate) fn cycles_child_logged() -> (std::process::Child, Ask, std::sync::mpsc::Receiver<String>)
{
    let mut command = attached_child("cycles::attach_child_cycles", "cycles");
    command.stderr(Stdio::piped());
    let (mut child, ask) = cycles_child_from(command);
    let stderr = child.stderr.take().unwrap();
    let (lines, log) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
            let _ = lines.send(line);
        }
    });
    (child, ask, log)
}

fn cycles_child_from(mut command: Command) -> (std::process::Child, Ask) {
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ask = move |command: &str, prefix: &str| -> String {
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        loop {
            let line = lines.next().expect("the child answers").unwrap();
            if let Some(rest) = line.strip_prefix(prefix) {
                return rest.to_string();
            }
        }
    };
    (child, Box::new(ask))
}
