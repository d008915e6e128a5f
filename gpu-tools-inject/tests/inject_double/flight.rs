//! The flight recorder an attach leaves in the program: what `where` reads from it, through a second window, until
//! the program's own profiler takes CUPTI's subscriber.

use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use gpu_tools::trace::*;
use gpu_tools_injection::control::Control;

use crate::common;
use crate::program_profiler::program_profiler;
use crate::support::{SCENARIO, attach, attached_child, exit_child, library, scratch};

/// The child of the flight recorder test: a stand-in program with a profiler of its own loaded (not recording).
/// `launch S A B NAME` fires the launch callbacks of kernels A..=B named NAME on stream S (its context: the double's
/// primary context); `sync S` fires a `cuStreamSynchronize(S)` that returns success; `subscribe` has its
/// profiler ask for CUPTI's subscriber and prints CUPTI's answer; `exit` ends it.
#[test]
#[ignore = "the child process of an_attach_leaves_a_flight_recorder_that_where_reads"]
fn attach_child_flight() {
    if std::env::var(SCENARIO).as_deref() != Ok("flight") {
        return;
    }
    let profiler = program_profiler();
    let d = common::double();
    let ctx = gpu_tools::cuda::Context::primary(0).expect("the driver double's context");
    let context = ctx.as_raw() as usize;
    let id = |name: &str| gpu_tools::cupti::DriverCbid::from_name(name).unwrap().id();
    println!("READY");
    std::io::stdout().flush().unwrap();
    for line in std::io::stdin().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["launch", s, a, b, name] => {
                let stream = u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
                let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                let name = std::ffi::CString::new(*name).unwrap();
                // cuLaunchKernel_params: the stream after the function and seven 32-bit dimensions.
                let mut params = [0u64; 8];
                params[5] = stream;
                let mut fired = 0;
                for corr in a..=b {
                    // SAFETY: the array and the name live to the end of the call; the layout is cuLaunchKernel's.
                    let seen = unsafe {
                        d.api_callback_params(
                            1,
                            id("cuLaunchKernel"),
                            c"cuLaunchKernel",
                            Some(Box::leak(name.clone().into_boxed_c_str())),
                            params.as_ptr().cast(),
                            context,
                            corr,
                        )
                    };
                    fired += usize::from(seen.is_some());
                }
                println!("fired {fired}");
            }
            ["sync", s] => {
                let stream = u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
                let params = [stream];
                // SAFETY: cuStreamSynchronize_params is the stream alone.
                let seen = unsafe {
                    d.api_callback_params(
                        1,
                        id("cuStreamSynchronize"),
                        c"cuStreamSynchronize",
                        None,
                        params.as_ptr().cast(),
                        context,
                        999,
                    )
                };
                println!("fired {}", usize::from(seen.is_some()));
            }
            ["subscribe"] => println!("subscribed {}", profiler.subscribe()),
            ["exit"] => return,
            other => panic!("unknown command {other:?}"),
        }
        std::io::stdout().flush().unwrap();
    }
}

/// An attach leaves a flight recorder: after the window, the program's launches and synchronisations are kept in
/// account, and the recorder's socket answers with the launches not known to have finished (the oldest first) and
/// the driver's word on each stream; a second window leaves it running; a profiler of the program that asks for
/// CUPTI's subscriber gets it, and the recorder says it stopped.
#[test]
fn an_attach_leaves_a_flight_recorder_that_where_reads() {
    use gpu_tools_injection::flight::{self, StreamState};
    library();
    let (dir, socket) = scratch("flight");
    let mut child = attached_child("flight::attach_child_flight", "flight")
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answer = |command: &str| -> String {
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        loop {
            let line = lines.next().expect("the child answers").unwrap();
            if line.starts_with("fired ") || line.starts_with("subscribed ") {
                return line;
            }
        }
    };
    assert_eq!(
        answer("launch 0x11 1 1 _Z4stepv"),
        "fired 0",
        "no subscriber before the attach"
    );
    let recorder = flight::socket_of(child.id()).unwrap();
    assert!(
        flight::ask(&recorder, Duration::from_secs(5)).is_err(),
        "no recorder before the attach"
    );

    let (done, mut control, reader, _) = attach(child.id(), &socket);
    assert_eq!(done.entry_result, 0);
    control.write_all(&[Control::Stop.byte()]).unwrap();
    let records = reader.join().unwrap();
    assert!(
        records.iter().any(|r| matches!(r, Record::Notice(n) if n.text.starts_with("a flight recorder runs in the process"))),
        "{records:#?}"
    );
    assert_eq!(answer("launch 0x11 1 5 _Z4stepv"), "fired 5");
    assert_eq!(answer("sync 0x11"), "fired 1");
    assert_eq!(answer("launch 0x11 6 7 _Z9wait_flagPVi"), "fired 2");
    assert_eq!(answer("launch 0x20 8 9 _Z4stepv"), "fired 2");
    let report = flight::ask(&recorder, Duration::from_secs(5)).expect("the recorder answers");
    assert_eq!(report.launches, 9);
    assert_eq!(report.stopped, None);
    let s11 = report
        .streams
        .iter()
        .find(|s| s.stream == 0x11)
        .expect("stream 0x11");
    assert_eq!(
        s11.state,
        StreamState::Busy,
        "the driver double says an odd stream is busy"
    );
    assert_eq!(s11.unfinished_count, 2);
    assert_eq!(
        s11.unfinished
            .iter()
            .map(|l| (l.seq, l.correlation, l.name.as_str()))
            .collect::<Vec<_>>(),
        vec![(6, 6, "_Z9wait_flagPVi"), (7, 7, "_Z9wait_flagPVi")],
        "the oldest unfinished first"
    );
    assert_eq!(
        s11.last_finished.as_ref().map(|l| l.seq),
        Some(5),
        "up to the synchronisation"
    );
    let s20 = report
        .streams
        .iter()
        .find(|s| s.stream == 0x20)
        .expect("stream 0x20");
    assert_eq!(
        s20.state,
        StreamState::Idle,
        "the driver said it had no work left"
    );
    assert_eq!(s20.unfinished_count, 0);
    assert!(s20.unfinished.is_empty());

    // A second window: the recorder runs on through it and after it.
    let (done, mut control, reader, _) = attach(child.id(), &socket);
    assert_eq!(done.entry_result, 0);
    control.write_all(&[Control::Stop.byte()]).unwrap();
    reader.join().unwrap();
    assert_eq!(answer("launch 0x11 10 10 _Z4stepv"), "fired 1");
    let report = flight::ask(&recorder, Duration::from_secs(5)).unwrap();
    assert_eq!(report.launches, 10);

    // The program's profiler asks for the subscriber: it gets it, and the recorder stops, said.
    assert_eq!(answer("subscribe"), "subscribed 0");
    assert_eq!(
        answer("launch 0x11 11 11 _Z4stepv"),
        "fired 0",
        "the program's subscriber has no launch callbacks on"
    );
    let report = flight::ask(&recorder, Duration::from_secs(5)).unwrap();
    assert!(
        report.stopped.as_deref().is_some_and(
            |s| s.contains("the program's own profiler asked for CUPTI's callback subscriber")
        ),
        "{report:?}"
    );
    assert_eq!(report.launches, 10);

    exit_child(stdin, &mut child);
    assert!(
        !recorder.exists(),
        "the recorder's socket went with the process"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
