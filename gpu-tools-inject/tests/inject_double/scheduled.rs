//! An attach beside a program's profiler on a schedule (a thread of its own starting and stopping its sessions):
//! every window keeps each kernel of its time.

use std::io::{BufRead, BufReader, Write};

use gpu_tools::trace::*;
use gpu_tools_injection::control::Control;

use crate::common;
use crate::program_profiler::program_profiler;
use crate::support::{
    CONCURRENT_KERNEL, SCENARIO, attach, attached_child, end, kernels, library, scratch,
    step_kernels,
};

/// The child of the scheduled-profiler attach test: a stand-in program whose own profiler runs on a schedule (a
/// thread that starts and stops its sessions over and over, registering its callbacks each time). `kernels A B`
/// makes the CUPTI double emit kernels A..=B and prints how many CUPTI recorded; `exit` stops the profiler and
/// prints how many sessions it ran and how many kernel records it got.
#[test]
#[ignore = "the child process of attach_beside_a_profiler_on_a_schedule_records_every_window"]
fn attach_child_scheduled() {
    if std::env::var(SCENARIO).as_deref() != Ok("scheduled") {
        return;
    }
    let profiler = program_profiler();
    let d = common::double();
    let kinds = [CONCURRENT_KERNEL];
    // SAFETY: `int pp_cycle_start(const uint32_t *kinds, int n)`, with a live slice.
    let started = unsafe {
        profiler
            .lib
            .get::<unsafe extern "C" fn(*const u32, i32) -> i32>(b"pp_cycle_start\0")
            .unwrap()(kinds.as_ptr(), 1)
    };
    assert_eq!(started, 0);
    println!("READY");
    std::io::stdout().flush().unwrap();
    for line in std::io::stdin().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["kernels", a, b] => {
                let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                let recorded = step_kernels(d, d.now(), a, b);
                println!("recorded {recorded}");
            }
            ["exit"] => {
                // SAFETY: `uint64_t pp_cycle_stop(void)`.
                let cycles = unsafe {
                    profiler
                        .lib
                        .get::<unsafe extern "C" fn() -> u64>(b"pp_cycle_stop\0")
                        .unwrap()()
                };
                println!(
                    "cycles {cycles} program kernels {} repeats {}",
                    profiler.count(CONCURRENT_KERNEL),
                    profiler.repeats()
                );
                return;
            }
            other => panic!("unknown command {other:?}"),
        }
        std::io::stdout().flush().unwrap();
    }
}

/// Attached beside a profiler that registers its callbacks again every few steps (torch.profiler on a `schedule`):
/// each window holds every kernel of its time. The program's calls reach CUPTI through the sharing from before the
/// tracer registers; when they were redirected only after it, a registration in between took CUPTI's buffers from
/// the tracer for the whole window (an H200 showed windows of 0 records beside such a job).
#[test]
fn attach_beside_a_profiler_on_a_schedule_records_every_window() {
    library();
    let (dir, socket) = scratch("scheduled");
    let mut child = attached_child("scheduled::attach_child_scheduled", "scheduled")
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answer = |command: &str, prefix: &str| -> String {
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        loop {
            let line = lines.next().expect("the child answers").unwrap();
            if line.starts_with(prefix) {
                return line;
            }
        }
    };
    assert_eq!(
        answer("kernels 0 0", "recorded "),
        "recorded 0",
        "nothing before the attach"
    );
    let mut first = 1;
    for window in 0..3 {
        let (done, mut control, reader, _) = attach(child.id(), &socket);
        assert_eq!(
            done.entry_result, 0,
            "window {window}: the attach thread started"
        );
        let last = first + 199;
        assert_eq!(
            answer(&format!("kernels {first} {last}"), "recorded "),
            "recorded 200",
            "window {window}: the trace keeps the kernels enabled through the program's stops"
        );
        control.write_all(&[Control::Stop.byte()]).unwrap();
        let records = reader.join().unwrap();
        assert_eq!(
            kernels(&records)
                .iter()
                .map(|k| k.correlation)
                .collect::<Vec<_>>(),
            (first..=last).collect::<Vec<_>>(),
            "window {window}: every kernel of the window, once"
        );
        assert_eq!(end(&records).map(|e| e.reason), Some(EndReason::Stopped));
        first = last + 1;
    }
    let bye = answer("exit", "cycles ");
    let words: Vec<&str> = bye.split_whitespace().collect();
    let cycles: u64 = words[1].parse().unwrap();
    assert!(
        cycles > 0,
        "the profiler ran its sessions throughout: {bye}"
    );
    // Its sessions came and went during the windows: what it got, it got once, and never more than was made.
    let (program_kernels, repeats): (u64, u64) =
        (words[4].parse().unwrap(), words[6].parse().unwrap());
    assert_eq!(
        repeats, 0,
        "no kernel record reached the program twice: {bye}"
    );
    assert!(program_kernels <= 601, "{bye}");
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "the program ran on and exited 0: {status}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
