//! The flight recorder an attach leaves in the program: what `where` reads from it, through a second window, until
//! the program's own profiler takes CUPTI's subscriber.

use std::ffi::{CStr, CString};
use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{Child, ChildStdin, ChildStdout};
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
    let driver = DriverControls::open();
    let ctx = gpu_tools::cuda::Context::primary(0).expect("the driver double's context");
    let context = ctx.as_raw() as usize;
    // Fires `call`'s entry and exit callbacks with `params` as its parameter struct, the call returning `ret`: 1 when
    // a subscriber had them on.
    let fire = |call: &'static CStr,
                symbol: Option<&'static CStr>,
                params: &[u64],
                corr: u32,
                ret: i32| {
        let cbid = gpu_tools::cupti::DriverCbid::from_name(call.to_str().unwrap()).unwrap();
        // SAFETY: each command below passes its call's parameter layout (pointer-sized fields), alive for the call.
        let r = unsafe {
            d.api_callback_returning(
                1,
                cbid.id(),
                call,
                symbol,
                params.as_ptr().cast(),
                context,
                corr,
                ret,
            )
        };
        usize::from(r.is_some())
    };
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    println!("READY");
    std::io::stdout().flush().unwrap();
    for line in std::io::stdin().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["launch", s, a, b, name] => {
                let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                let name: &'static CStr =
                    Box::leak(CString::new(*name).unwrap().into_boxed_c_str());
                // cuLaunchKernel_params: the stream after the function and seven 32-bit dimensions.
                let mut params = [0u64; 8];
                params[5] = hex(s);
                let fired: usize = (a..=b)
                    .map(|corr| fire(c"cuLaunchKernel", Some(name), &params, corr, 0))
                    .sum();
                println!("fired {fired}");
            }
            // cuStreamSynchronize_params: the stream alone.
            ["sync", s] => println!(
                "fired {}",
                fire(c"cuStreamSynchronize", None, &[hex(s)], 999, 0)
            ),
            ["capture", s, "refused-begin"] => {
                // A begin the driver refuses (CUDA_ERROR_ILLEGAL_STATE: the stream captures already); the stream,
                // then the mode.
                println!(
                    "fired {}",
                    fire(c"cuStreamBeginCapture_v2", None, &[hex(s), 0], 902, 401)
                );
            }
            ["capture", s, how] => {
                // `on`/`off`: the program begins or ends a capture, its callbacks fired around the driver's change;
                // `unseen-on`/`unseen-off`: the capture was under way before the recorder started.
                let stream = hex(s);
                let (on, seen) = match *how {
                    "on" => (true, true),
                    "off" => (false, true),
                    "unseen-on" => (true, false),
                    "unseen-off" => (false, false),
                    other => panic!("capture {other}?"),
                };
                let mut fired = 0;
                if on {
                    if seen {
                        // cuStreamBeginCapture_v2_params: the stream, then the mode.
                        fired += fire(c"cuStreamBeginCapture_v2", None, &[stream, 0], 900, 0);
                    }
                    driver.capturing(stream, true);
                } else {
                    driver.capturing(stream, false);
                    if seen {
                        // cuStreamEndCapture_params: the stream, then the graph's out-pointer (not read).
                        fired += fire(c"cuStreamEndCapture", None, &[stream, 0], 901, 0);
                    }
                }
                println!("fired {fired}");
            }
            ["ended"] => println!("fired {}", driver.captures_ended()),
            ["subscribe"] => println!("subscribed {}", profiler.subscribe()),
            ["exit"] => return,
            other => panic!("unknown command {other:?}"),
        }
        std::io::stdout().flush().unwrap();
    }
}

/// The driver double's capture controls, in the copy the library loaded.
struct DriverControls(libloading::Library);

impl DriverControls {
    fn open() -> DriverControls {
        // SAFETY: the driver double, loaded already by `common::double()`: the same copy, whose initialisers ran.
        DriverControls(
            unsafe { libloading::Library::new(common::double_path("cuda_driver")) }.unwrap(),
        )
    }

    fn capturing(&self, stream: u64, on: bool) {
        // SAFETY: the double's control of this C signature.
        let f = unsafe {
            self.0
                .get::<unsafe extern "C" fn(*mut std::ffi::c_void, i32)>(b"dbl_set_capturing\0")
        }
        .unwrap();
        // SAFETY: an opaque handle value.
        unsafe { f(stream as *mut std::ffi::c_void, i32::from(on)) }
    }

    fn captures_ended(&self) -> i32 {
        // SAFETY: the double's control of this C signature.
        let f = unsafe {
            self.0
                .get::<unsafe extern "C" fn() -> i32>(b"dbl_captures_ended\0")
        }
        .unwrap();
        // SAFETY: a plain control.
        unsafe { f() }
    }
}

/// The flight child, running, and the lines it answers with.
struct FlightChild {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl FlightChild {
    fn spawn() -> FlightChild {
        let mut child = attached_child("flight::attach_child_flight", "flight")
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        FlightChild {
            child,
            stdin,
            lines,
        }
    }

    /// Sends `command`; its answer (`fired N` or `subscribed N`).
    fn answer(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
        loop {
            let line = self.lines.next().expect("the child answers").unwrap();
            if line.starts_with("fired ") || line.starts_with("subscribed ") {
                return line;
            }
        }
    }

    /// A trace window attached to it and stopped at once (which leaves the recorder): the window's records.
    fn window(&self, socket: &std::path::Path) -> Vec<Record> {
        let (done, mut control, reader, _) = attach(self.child.id(), socket);
        assert_eq!(done.entry_result, 0);
        control.write_all(&[Control::Stop.byte()]).unwrap();
        reader.join().unwrap()
    }

    fn exit(mut self) {
        exit_child(self.stdin, &mut self.child);
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
    let mut c = FlightChild::spawn();
    assert_eq!(
        c.answer("launch 0x11 1 1 _Z4stepv"),
        "fired 0",
        "no subscriber before the attach"
    );
    let recorder = flight::socket_of(c.child.id()).unwrap();
    assert!(
        flight::ask(&recorder, Duration::from_secs(5)).is_err(),
        "no recorder before the attach"
    );

    let records = c.window(&socket);
    assert!(
        records.iter().any(|r| matches!(r, Record::Notice(n) if n.text.starts_with("a flight recorder runs in the process"))),
        "{records:#?}"
    );
    assert_eq!(c.answer("launch 0x11 1 5 _Z4stepv"), "fired 5");
    assert_eq!(c.answer("sync 0x11"), "fired 1");
    assert_eq!(c.answer("launch 0x11 6 7 _Z9wait_flagPVi"), "fired 2");
    assert_eq!(c.answer("launch 0x20 8 9 _Z4stepv"), "fired 2");
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
    c.window(&socket);
    assert_eq!(c.answer("launch 0x11 10 10 _Z4stepv"), "fired 1");
    let report = flight::ask(&recorder, Duration::from_secs(5)).unwrap();
    assert_eq!(report.launches, 10);

    // The program's profiler asks for the subscriber: it gets it, and the recorder stops, said.
    assert_eq!(c.answer("subscribe"), "subscribed 0");
    assert_eq!(
        c.answer("launch 0x11 11 11 _Z4stepv"),
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

    c.exit();
    assert!(
        !recorder.exists(),
        "the recorder's socket went with the process"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `where` while the program captures a CUDA graph asks the driver nothing that would end the capture (on an H100 a
/// `where` during a `torch.cuda.graph` capture ended the job: `cuStreamQuery` of the capturing stream, asked in the
/// default capture mode): no stream is asked while a capture the recorder saw begin is under way, and the report
/// says which; after its end the streams are asked again; a capture that began before the recorder started is found
/// by asking the stream whether it captures, and the other streams are asked in the relaxed mode, which the driver
/// allows beside a capture.
#[test]
fn a_where_during_a_graph_capture_asks_nothing_that_would_end_it() {
    use gpu_tools_injection::flight::{self, StreamState};
    library();
    let (dir, socket) = scratch("flight-capture");
    let mut c = FlightChild::spawn();
    assert_eq!(
        c.answer("launch 0x11 1 1 _Z4stepv"),
        "fired 0",
        "the child is ready; no subscriber before the attach"
    );
    let recorder = flight::socket_of(c.child.id()).unwrap();
    c.window(&socket);
    assert_eq!(c.answer("launch 0x11 1 2 _Z4stepv"), "fired 2");
    assert_eq!(c.answer("launch 0x20 3 3 _Z4stepv"), "fired 1");
    let state = |stream: u64| {
        let report = flight::ask(&recorder, Duration::from_secs(5)).expect("the recorder answers");
        report
            .streams
            .iter()
            .find(|s| s.stream == stream)
            .unwrap_or_else(|| panic!("stream {stream:#x} in {report:?}"))
            .state
            .clone()
    };

    // A capture the recorder saw begin: nothing is asked until it ends.
    assert_eq!(c.answer("capture 0x20 on"), "fired 1");
    for stream in [0x11, 0x20] {
        assert!(
            matches!(state(stream), StreamState::NotAsked(ref a)
                if a.contains("capturing a CUDA graph on stream 0x20")),
            "stream {stream:#x}"
        );
    }
    assert_eq!(c.answer("launch 0x20 5 6 _Z4stepv"), "fired 2");
    // A second begin on the capturing stream, refused: the capture under way is still in the account.
    assert_eq!(c.answer("capture 0x20 refused-begin"), "fired 1");
    assert!(
        matches!(state(0x11), StreamState::NotAsked(ref a) if a.contains("on stream 0x20")),
        "{:?}",
        state(0x11)
    );
    assert_eq!(c.answer("ended"), "fired 0", "the capture went on");
    assert_eq!(c.answer("capture 0x20 off"), "fired 1");
    let report = flight::ask(&recorder, Duration::from_secs(5)).unwrap();
    assert_eq!(
        report.launches, 3,
        "the launches captured into a graph are not launches of work"
    );
    assert_eq!(
        state(0x11),
        StreamState::Busy,
        "asked again after the capture"
    );
    assert_eq!(state(0x20), StreamState::Idle);

    // A capture under way before the recorder started: its stream is found capturing and not asked; the other is
    // asked, in the relaxed mode.
    assert_eq!(c.answer("launch 0x20 4 4 _Z4stepv"), "fired 1");
    assert_eq!(c.answer("capture 0x11 unseen-on"), "fired 0");
    assert!(
        matches!(state(0x11), StreamState::NotAsked(ref a) if a.contains("the stream is capturing a CUDA graph")),
        "{:?}",
        state(0x11)
    );
    assert_eq!(state(0x20), StreamState::Idle);
    assert_eq!(
        c.answer("ended"),
        "fired 0",
        "no question ended the capture"
    );
    assert_eq!(c.answer("capture 0x11 unseen-off"), "fired 0");
    assert_eq!(state(0x11), StreamState::Busy);

    c.exit();
    let _ = std::fs::remove_dir_all(&dir);
}
