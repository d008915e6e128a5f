//! CUPTI given back after a window: where nothing in the process uses CUPTI any more (no flight recorder, no
//! profiler of the program's), the window's end finalises CUPTI at the program's next CUDA call, inside the
//! callback at that call's exit, with every kind disabled; the next attach traces as before and says so. Where the
//! recorder runs, or the program's profiler registered with CUPTI, CUPTI stays.

use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{Child, ChildStdin, ChildStdout};
use std::time::{Duration, Instant};

use gpu_tools_injection::control::Control;
use gpu_tools_injection::env::TraceKind;

use crate::common;
use crate::program_profiler::program_profiler;
use crate::support::{
    CONCURRENT_KERNEL, SCENARIO, attach_with, attached_child, exit_child, kernels, library,
    notice_texts, scratch, step_kernels,
};

/// The child of the release tests: a stand-in CUDA program on the doubles. `profiler` has a profiler of its own
/// register with CUPTI and end its session (registered, recording nothing); `kernels A B` makes the CUPTI double
/// emit kernels with correlation ids A..=B and prints how many it recorded; `call` makes one CUDA driver call
/// (`cuCtxSynchronize`: its API callbacks, where enabled) and prints `called`; `stats` prints the double's
/// `cuptiFinalize` counts and its subscriber; `exit` ends it.
#[test]
#[ignore = "the child process of the release tests"]
fn attach_child_release() {
    if std::env::var(SCENARIO).as_deref() != Ok("release") {
        return;
    }
    let profiler = program_profiler();
    let d = common::double();
    let id = gpu_tools::cupti::DriverCbid::from_name("cuCtxSynchronize")
        .unwrap()
        .id();
    println!("READY");
    std::io::stdout().flush().unwrap();
    for line in std::io::stdin().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["profiler"] => {
                assert_eq!(profiler.start(&[CONCURRENT_KERNEL]), 0);
                assert_eq!(profiler.stop(&[CONCURRENT_KERNEL]), 0);
                println!("profiler registered");
            }
            ["kernels", a, b] => {
                let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                let recorded = step_kernels(d, d.now(), a, b);
                println!("recorded {recorded}");
            }
            ["call"] => {
                // SAFETY: cuCtxSynchronize has no parameters.
                let _ = unsafe {
                    d.api_callback_params(1, id, c"cuCtxSynchronize", None, std::ptr::null(), 0, 7)
                };
                println!("called");
            }
            ["stats"] => {
                let s = d.stats();
                println!(
                    "stats finalizes {} at-exit {} recording {} subscriber {:?}",
                    s.finalizes,
                    s.finalizes_at_api_exit,
                    s.finalizes_recording,
                    d.subscriber_name()
                );
            }
            ["exit"] => return,
            other => panic!("unknown command {other:?}"),
        }
        std::io::stdout().flush().unwrap();
    }
}

/// The release child and its pipes.
struct Program {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Program {
    fn start() -> Program {
        library();
        let mut child = attached_child("release::attach_child_release", "release")
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut p = Program {
            child,
            stdin,
            lines,
        };
        // The harness's "test ... " begins the child's first line.
        loop {
            let line = p.lines.next().expect("the child starts").unwrap();
            if line.ends_with("READY") {
                break;
            }
        }
        p
    }

    fn wait_for(&mut self, start: &str) -> String {
        loop {
            let line = self.lines.next().expect("the child answers").unwrap();
            if line.starts_with(start) {
                return line;
            }
        }
    }

    fn ask(&mut self, command: &str, answer: &str) -> String {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        self.wait_for(answer)
    }

    /// Makes CUDA calls until the double counts a `cuptiFinalize` (or `limit` passes); returns its stats line.
    fn call_until_finalized(&mut self, limit: Duration) -> String {
        let started = Instant::now();
        loop {
            self.ask("call", "called");
            let stats = self.ask("stats", "stats ");
            if !stats.starts_with("stats finalizes 0 ") || started.elapsed() > limit {
                return stats;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// One window (`recorder`: the flight recorder asked for) with a CUDA call and kernels 1..=`n` in it (the call
    /// would finalise CUPTI under the window if an earlier window's release were still armed); returns its notices
    /// and how many kernel records it held.
    fn window(&mut self, socket: &std::path::Path, recorder: bool, n: u32) -> (Vec<String>, usize) {
        let (done, mut control, reader, _) =
            attach_with(self.child.id(), socket, &[TraceKind::Kernel], |s| {
                s.flight_recorder = recorder;
            });
        assert_eq!(done.entry_result, 0);
        self.ask("call", "called");
        assert_eq!(
            self.ask(&format!("kernels 1 {n}"), "recorded"),
            format!("recorded {n}")
        );
        control.write_all(&[Control::Stop.byte()]).unwrap();
        let records = reader.join().unwrap();
        let notices = notice_texts(&records)
            .into_iter()
            .map(str::to_string)
            .collect();
        (notices, kernels(&records).len())
    }

    fn exit(mut self) {
        let stdin = self.stdin.take().unwrap();
        exit_child(stdin, &mut self.child);
    }
}

const GIVES_BACK: &str = "nothing in the process uses CUPTI after this window";
const GAVE_BACK: &str = "the last window gave CUPTI back";

fn says(notices: &[String], start: &str) -> bool {
    notices.iter().any(|n| n.starts_with(start))
}

/// A window without the recorder, in a program that never used CUPTI: the stream says CUPTI goes, and the program's
/// next CUDA call finalises it, at the call's exit, with no kind enabled and the subscription gone. The next window
/// records every kernel again, says what the last one did, and gives CUPTI back in its turn. A window that leaves
/// the recorder keeps CUPTI, and the next says why.
#[test]
fn a_window_that_leaves_nothing_gives_cupti_back_at_the_next_cuda_call() {
    let (_dir, socket) = scratch("release");
    let mut p = Program::start();

    let (notices, kernels) = p.window(&socket, false, 5);
    assert_eq!(kernels, 5, "{notices:?}");
    assert!(says(&notices, GIVES_BACK), "{notices:?}");
    assert_eq!(
        p.call_until_finalized(Duration::from_secs(10)),
        "stats finalizes 1 at-exit 1 recording 0 subscriber \"\"",
        "finalised once, inside the callback at the call's exit, with no kind enabled"
    );

    let (notices, kernels) = p.window(&socket, false, 7);
    assert_eq!(kernels, 7, "CUPTI initialised again: {notices:?}");
    assert!(says(&notices, GAVE_BACK), "{notices:?}");
    assert_eq!(
        p.call_until_finalized(Duration::from_secs(10)),
        "stats finalizes 2 at-exit 2 recording 0 subscriber \"\""
    );

    let (notices, kernels) = p.window(&socket, true, 3);
    assert_eq!(kernels, 3);
    assert!(
        !says(&notices, GIVES_BACK),
        "the recorder keeps CUPTI: {notices:?}"
    );
    p.ask("call", "called");
    std::thread::sleep(Duration::from_millis(200));
    p.ask("call", "called");
    let stats = p.ask("stats", "stats ");
    assert!(
        stats.starts_with(
            "stats finalizes 2 at-exit 2 recording 0 subscriber \"CUPTI for gpu-tools-flight\""
        ),
        "{stats}"
    );
    let (notices, _) = p.window(&socket, false, 2);
    assert!(
        says(
            &notices,
            "the last window left CUPTI initialised in the process (the flight recorder holds"
        ),
        "{notices:?}"
    );
    p.exit();
}

/// An attach that comes before the program made a CUDA call finds CUPTI as the window left it (nothing finalised
/// under it), and says why the last window kept it.
#[test]
fn an_attach_right_after_a_window_cancels_its_release() {
    let (_dir, socket) = scratch("release-cancel");
    let mut p = Program::start();
    let (notices, _) = p.window(&socket, false, 2);
    assert!(says(&notices, GIVES_BACK), "{notices:?}");
    let (notices, kernels) = p.window(&socket, false, 4);
    assert_eq!(kernels, 4, "{notices:?}");
    // "another attach came", or, where the injection took longer than the wait, "no CUDA call".
    assert!(
        says(
            &notices,
            "the last window left CUPTI initialised in the process ("
        ),
        "{notices:?}"
    );
    let stats = p.ask("stats", "stats ");
    assert!(stats.starts_with("stats finalizes 0 "), "{stats}");
    p.exit();
}

/// Where the program's own profiler registered with CUPTI, a window without the recorder keeps CUPTI: its state
/// is the program's.
#[test]
fn a_program_that_used_cupti_keeps_it() {
    let (_dir, socket) = scratch("release-program");
    let mut p = Program::start();
    p.ask("profiler", "profiler registered");
    let (notices, _) = p.window(&socket, false, 3);
    assert!(!says(&notices, GIVES_BACK), "{notices:?}");
    p.ask("call", "called");
    std::thread::sleep(Duration::from_millis(200));
    p.ask("call", "called");
    let stats = p.ask("stats", "stats ");
    assert!(stats.starts_with("stats finalizes 0 "), "{stats}");
    let (notices, _) = p.window(&socket, false, 1);
    assert!(
        says(
            &notices,
            "the last window left CUPTI initialised in the process (the program uses CUPTI itself)"
        ),
        "{notices:?}"
    );
    p.exit();
}
