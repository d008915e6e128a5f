//! Attaches in series into one running child: PC sampling after a trace, the flight recorder across windows, the
//! API functions a trace turned off given back, PC sampling that could not be turned off, and never read beside
//! CUPTI's decoding worker.

use std::path::Path;

use gpu_tools::trace::*;
use gpu_tools_injection::control::Control;
use gpu_tools_injection::env;
use gpu_tools_injection::message::Message;
use gpu_tools_injection::settings::{Destination, Settings};

use crate::support::{AttachChild, double, fresh_dir, message};

/// One attach of a series into the same child (`order` tests): injects the library with `request` (`None`: a trace)
/// on a socket of its own, plays the tracer's side (a trace: stop once attached; PC sampling: start, finish,
/// stop) and returns the stream's messages once the library ended it.
fn attach_in_order(
    pid: u32,
    dir: &Path,
    n: usize,
    request: Option<gpu_tools_injection::profile::ProfileRequest>,
) -> Vec<Message> {
    attach_in_order_with_notices(pid, dir, n, request, |_| {}).0
}

/// [`attach_in_order`], with the texts of the plain notices too, and the attach's settings changed by `tweak`.
fn attach_in_order_with_notices(
    pid: u32,
    dir: &Path,
    n: usize,
    request: Option<gpu_tools_injection::profile::ProfileRequest>,
    tweak: impl Fn(&mut Settings),
) -> (Vec<Message>, Vec<String>) {
    use std::io::Write;
    use std::os::unix::net::UnixListener;
    use std::time::Duration;

    let socket = dir.join(format!("s{n}"));
    let listener = UnixListener::bind(&socket).unwrap();
    let trace = request.is_none();
    let mut settings = Settings {
        cupti: Some(double("cupti_full")),
        profile: request,
        ..Settings::new(Destination::Socket(socket))
    };
    tweak(&mut settings);
    let settings = settings.attach_argument().unwrap();
    // The previous attach's thread ends right after its stream: until then the library answers busy.
    gpu_tools_testing::inject_until_started(
        pid,
        &gpu_tools_testing::inject_lib(),
        env::ATTACH_ENTRY,
        &settings,
        Duration::from_secs(30),
        &format!("attach {n}"),
    );
    let conn = gpu_tools_testing::accept_within(
        &listener,
        Duration::from_secs(30),
        "the attached library",
    );
    let mut control = conn.try_clone().unwrap();
    let mut messages = Vec::new();
    let notices = std::cell::RefCell::new(Vec::new());
    let mut reader = StreamReader::new(conn);
    let mut next = |what: &str| -> Option<Record> {
        let r = reader
            .next()
            .map(|r| r.unwrap_or_else(|e| panic!("attach {n}, waiting for {what}: {e}")));
        if let Some(Record::Notice(notice)) = &r {
            notices.borrow_mut().push(notice.text.clone());
        }
        // Where the finish's answer came among the notices (the tracer lets the program go on at it).
        if matches!(
            r.as_ref().and_then(message),
            Some(Message::ProfileFinished { .. })
        ) {
            notices.borrow_mut().push(FINISHED.into());
        }
        r
    };
    let mut until = |what: &str, wanted: &dyn Fn(&Message) -> bool, messages: &mut Vec<Message>| loop {
        let Some(r) = next(what) else {
            panic!("attach {n}: the stream ended before {what}: {messages:?}")
        };
        if let Some(m) = message(&r) {
            let hit = wanted(&m);
            messages.push(m);
            if hit {
                return;
            }
        }
    };
    if trace {
        until(
            "attached",
            &|m| matches!(m, Message::Attached { .. }),
            &mut messages,
        );
    } else {
        until(
            "ready or refused",
            &|m| {
                matches!(
                    m,
                    Message::ProfileReady { .. } | Message::ProfileRefused { .. }
                )
            },
            &mut messages,
        );
        if matches!(messages.last(), Some(Message::ProfileRefused { .. })) {
            while next("the stream's end").is_some() {}
            return (messages, notices.into_inner());
        }
        control.write_all(&[Control::ProfileStart.byte()]).unwrap();
        until(
            "started",
            &|m| matches!(m, Message::ProfileStarted { .. }),
            &mut messages,
        );
        // A window of some length: the library judges whether the program ran in it by its CPU time, counted in
        // ticks of 10 ms.
        std::thread::sleep(Duration::from_millis(150));
        control.write_all(&[Control::ProfileFinish.byte()]).unwrap();
        until(
            "finished",
            &|m| matches!(m, Message::ProfileFinished { .. }),
            &mut messages,
        );
    }
    control.write_all(&[Control::Stop.byte()]).unwrap();
    while let Some(r) = next("the stream's end") {
        messages.extend(message(&r));
    }
    (messages, notices.into_inner())
}

/// One attach of [`attaches_in_order`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Window {
    /// A trace.
    Trace,
    /// PC sampling while a kernel of the program's runs: one stall record.
    Pc,
    /// PC sampling while the program runs nothing on the GPU: no stall record (a job waiting for its child).
    PcIdle,
    /// PC sampling while the program is busy on the CPU, with no stall record (a busy GPU's sampling missed it).
    PcBusy,
    /// PC sampling with no kernel of the program's, the program idle, while a thread the sampling started is busy
    /// on the CPU.
    PcIdleBusyWorker,
}

/// Attaches to one child in the order `windows` gives; returns each attach's messages.
fn attaches_in_order(windows: &[Window]) -> Vec<Vec<Message>> {
    let dir = fresh_dir("order");
    let mut child = AttachChild::start("attach");
    let mut out = Vec::new();
    for (n, window) in windows.iter().enumerate() {
        if *window == Window::Pc {
            assert_eq!(child.answer("pc kernels"), "pc kernels 0");
        }
        if *window == Window::PcBusy {
            assert_eq!(child.answer("spin on"), "spin on");
        }
        if *window == Window::PcIdleBusyWorker {
            assert_eq!(child.answer("pc worker"), "pc worker on");
        }
        let request = (*window != Window::Trace).then(|| {
            let mut r = gpu_tools_injection::profile::ProfileRequest::new(Vec::new());
            r.pc_sampling = true;
            r
        });
        out.push(attach_in_order(child.id(), &dir, n, request));
        if *window == Window::PcBusy {
            assert_eq!(child.answer("spin off"), "spin off");
        }
        assert_eq!(child.answer(&format!("launch copy {}", n + 1)), "launched");
    }
    child.exit();
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// Whether an attach's messages say PC sampling started in the child's one context.
fn started(m: &[Message]) -> bool {
    m.iter()
        .any(|m| matches!(m, Message::ProfileStarted { contexts: 1, .. }))
}

/// Whether an attach's messages say PC sampling finished with `count` stall records.
fn finished_with(m: &[Message], count: u64) -> bool {
    m.iter()
        .any(|m| matches!(m, Message::ProfileFinished { count: c, .. } if *c == count))
}

/// PC sampling after a first attach that traced is refused before it starts, with what to do instead (on H200s and
/// H100s every sample then fell outside the program's kernels); after a first attach that sampled PCs it runs,
/// traces between them or not.
#[test]
fn pc_sampling_is_refused_when_the_first_attach_traced() {
    use Window::*;
    let refused = |m: &[Message]| {
        m.iter().any(|m| {
            matches!(m, Message::ProfileRefused { reason }
                if reason.starts_with("this process's first gpu-tools attach traced it")
                    && reason.contains("sample a process's PCs before they first trace it"))
        })
    };
    let traced_first = attaches_in_order(&[Trace, Pc, Pc]);
    assert!(!refused(&traced_first[0]), "{:?}", traced_first[0]);
    for later in &traced_first[1..] {
        assert!(refused(later), "every later window: {later:?}");
        assert!(!started(later), "nothing sampled: {later:?}");
    }
    let sampled_first = attaches_in_order(&[Pc, Trace, Pc]);
    assert!(started(&sampled_first[0]), "{:?}", sampled_first[0]);
    assert!(
        finished_with(&sampled_first[0], 1),
        "{:?}",
        sampled_first[0]
    );
    assert!(started(&sampled_first[2]), "{:?}", sampled_first[2]);
    assert!(
        finished_with(&sampled_first[2], 1),
        "{:?}",
        sampled_first[2]
    );
    assert!(
        sampled_first.iter().all(|m| !refused(m)),
        "{sampled_first:?}"
    );
}

/// A process's first PC sampling window, while the program is idle (no stall record, little CPU time: the matrix's
/// fork-child waiting for its child), leaves every later window blind: on an H100 a window of the running job after
/// a trace counted 11,781,101 samples, all outside its kernels, and one right after the idle window, the job
/// launching again, 2,740,546 so (`pc_order_probe.sh` SET=5). The idle window says so, and PC sampling after it is
/// refused with the reason, traced between or not, never run blind; a later idle window, after a first with stall
/// records, changes nothing.
#[test]
fn pc_sampling_is_refused_for_the_life_of_a_process_whose_first_window_found_it_idle() {
    use Window::*;
    let refused = |m: &[Message]| {
        m.iter().any(|m| {
            matches!(m, Message::ProfileRefused { reason }
                if reason.starts_with("this process's first PC sampling window had no stall record"))
        })
    };
    let said_idle = |m: &[Message]| m.iter().any(|m| matches!(m, Message::PcSampledIdle { .. }));
    let idle_first = attaches_in_order(&[PcIdle, Trace, Pc, Pc]);
    assert!(started(&idle_first[0]), "{:?}", idle_first[0]);
    assert!(finished_with(&idle_first[0], 0), "{:?}", idle_first[0]);
    assert!(said_idle(&idle_first[0]), "{:?}", idle_first[0]);
    for later in &idle_first[2..] {
        assert!(refused(later), "every later window: {later:?}");
        assert!(!started(later), "nothing sampled: {later:?}");
    }
    let untraced = attaches_in_order(&[PcIdle, Pc, Trace, Pc]);
    assert!(said_idle(&untraced[0]), "{:?}", untraced[0]);
    for later in [&untraced[1], &untraced[3]] {
        assert!(refused(later), "before the trace and after it: {later:?}");
        assert!(!started(later), "nothing sampled: {later:?}");
    }
    let idle_later = attaches_in_order(&[Pc, PcIdle, Trace, Pc]);
    assert!(finished_with(&idle_later[1], 0), "{:?}", idle_later[1]);
    assert!(
        !said_idle(&idle_later[1]),
        "only the first window decides: {:?}",
        idle_later[1]
    );
    assert!(started(&idle_later[3]), "{:?}", idle_later[3]);
    assert!(finished_with(&idle_later[3], 1), "{:?}", idle_later[3]);
    assert!(idle_later.iter().all(|m| !refused(m)), "{idle_later:?}");
    // A window without stall records while the program ran is not refused for: whether it keeps later windows' is
    // not known, and the window after the trace runs and says what it counted.
    let busy_first = attaches_in_order(&[PcBusy, Trace, Pc]);
    assert!(finished_with(&busy_first[0], 0), "{:?}", busy_first[0]);
    assert!(
        !said_idle(&busy_first[0]),
        "the program ran: {:?}",
        busy_first[0]
    );
    assert!(started(&busy_first[2]), "{:?}", busy_first[2]);
    assert!(!refused(&busy_first[2]), "{:?}", busy_first[2]);
}

/// The threads a PC sampling starts (CUPTI's and the driver's) are not the program: an idle program's window while
/// one of them is busy on the CPU is judged idle, and PC sampling after the trace is refused as after any idle
/// start. (Counted with the program, such threads made the survival matrix's fork-child, waiting for its child
/// beside 16 jobs on an H200, look busy in its primer; the trace right after found it idle, and its PC sampling
/// window after that trace was blind.)
#[test]
fn the_threads_a_pc_sampling_starts_are_not_the_programs_cpu_time() {
    use Window::*;
    let windows = attaches_in_order(&[PcIdleBusyWorker, Trace, Pc]);
    let said_idle = windows[0].iter().find_map(|m| match m {
        Message::PcSampledIdle { cpu_ms, window_ms } => Some((*cpu_ms, *window_ms)),
        _ => None,
    });
    let (cpu_ms, window_ms) = said_idle.unwrap_or_else(|| {
        panic!(
            "an idle program's window was not judged idle with the sampling's thread spinning: {:?}",
            windows[0]
        )
    });
    assert!(
        cpu_ms * 5 < window_ms,
        "the program's CPU time is not the worker's: {cpu_ms} ms in {window_ms} ms"
    );
    assert!(
        windows[2]
            .iter()
            .any(|m| matches!(m, Message::ProfileRefused { reason }
            if reason.starts_with("this process's first PC sampling window had no stall record"))),
        "PC sampling after the trace is refused: {:?}",
        windows[2]
    );
}

/// Among an attach's notices: where the finish's answer came.
const FINISHED: &str = "(the finish's answer)";

/// The flight recorder starts inside the finish of a PC sampling window, before its answer (while the tracer holds
/// the program's threads outside the driver: enabled after it, its callbacks crashed a launching job on an H200),
/// and one an earlier attach left stays on through the window (stopping it did not keep PC sampling after a trace
/// from being blind).
#[test]
fn the_recorder_starts_inside_the_finish_of_pc_sampling() {
    let dir = fresh_dir("recorder");
    let mut child = AttachChild::start("attach");
    // A kernel of the program's in the first window: PC sampling after the trace then runs.
    assert_eq!(child.answer("pc kernels"), "pc kernels 0");
    let pc = || {
        let mut r = gpu_tools_injection::profile::ProfileRequest::new(Vec::new());
        r.pc_sampling = true;
        Some(r)
    };
    let stops = |notices: &[String]| {
        notices
            .iter()
            .filter(|t| t.starts_with("the flight recorder stops"))
            .count()
    };
    let runs = |notices: &[String]| {
        notices
            .iter()
            .position(|t| t.starts_with("a flight recorder runs in the process from now on"))
    };
    let finished = |notices: &[String]| notices.iter().position(|t| t == FINISHED);
    // The first attach samples: its own recorder starts before the finish's answer.
    let (first, notices) = attach_in_order_with_notices(child.id(), &dir, 0, pc(), |_| {});
    assert_eq!(stops(&notices), 0, "{notices:?}");
    let (Some(run), Some(done)) = (runs(&notices), finished(&notices)) else {
        panic!("a recorder and a finish: {notices:?}");
    };
    assert!(
        run < done,
        "the recorder starts before the answer: {notices:?}"
    );
    assert!(
        first
            .iter()
            .any(|m| matches!(m, Message::ProfileFinished { .. })),
        "{first:?}"
    );
    // A trace, then PC sampling: the recorder is not stopped for the window.
    attach_in_order(child.id(), &dir, 1, None);
    let (_, notices) = attach_in_order_with_notices(child.id(), &dir, 2, pc(), |_| {});
    assert_eq!(stops(&notices), 0, "{notices:?}");
    assert!(finished(&notices).is_some(), "{notices:?}");
    child.exit();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A trace after a PC sampling window that left no recorder (`--no-flight-recorder`) starts none: it could only
/// enable the recorder's callbacks while the program launches, which after a PC sampling window crashed a job on an
/// H200. The stream says why; a later PC sampling window starts one inside its finish.
#[test]
fn a_trace_after_pc_sampling_starts_no_recorder_while_the_program_runs() {
    let dir = fresh_dir("no-recorder-after-pc");
    let mut child = AttachChild::start("attach");
    // A kernel of the program's in the first window: PC sampling after the trace then runs.
    assert_eq!(child.answer("pc kernels"), "pc kernels 0");
    let pc = || {
        let mut r = gpu_tools_injection::profile::ProfileRequest::new(Vec::new());
        r.pc_sampling = true;
        Some(r)
    };
    let says = |notices: &[String], start: &str| notices.iter().any(|t| t.starts_with(start));
    let (_, notices) = attach_in_order_with_notices(child.id(), &dir, 0, pc(), |s| {
        s.flight_recorder = false;
    });
    assert!(
        !says(&notices, "a flight recorder runs"),
        "none asked: {notices:?}"
    );
    let (_, notices) = attach_in_order_with_notices(child.id(), &dir, 1, None, |_| {});
    assert!(
        says(
            &notices,
            "no flight recorder: PC sampling has run in this process"
        ),
        "{notices:?}"
    );
    assert!(!says(&notices, "a flight recorder runs"), "{notices:?}");
    let (_, notices) = attach_in_order_with_notices(child.id(), &dir, 2, pc(), |_| {});
    let runs = notices
        .iter()
        .position(|t| t.starts_with("a flight recorder runs"));
    let done = notices.iter().position(|t| t == FINISHED);
    assert!(
        matches!((runs, done), (Some(r), Some(d)) if r < d),
        "started inside the finish: {notices:?}"
    );
    child.exit();
    let _ = std::fs::remove_dir_all(&dir);
}

/// API functions a trace turned off in CUPTI (`--api-skip`) are on again once its window ends: CUPTI's choice is
/// process-wide, and the program (its own profiler) lives on.
#[test]
fn an_attached_trace_gives_back_the_api_functions_it_turned_off() {
    let dir = fresh_dir("api-give-back");
    let mut child = AttachChild::start("attach");
    assert_eq!(child.answer("api"), "api choices 0 off 0");
    attach_in_order_with_notices(child.id(), &dir, 0, None, |s| {
        s.api_skip = vec!["cuLaunchKernel".into(), "cudaGetLastError".into()];
    });
    // Two turned off as the window began, two on again at its end.
    assert_eq!(child.answer("api"), "api choices 4 off 0");
    child.exit();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The PC sampling before a first trace samples sparsely: it keeps nothing, and its samples only fill the ring
/// whose overflow fails CUPTI's disable and leaves the GPU's counters held.
#[test]
fn the_pc_sampling_before_a_first_trace_samples_sparsely() {
    let dir = fresh_dir("primer-period");
    let mut child = AttachChild::start("attach");
    let mut request = gpu_tools_injection::profile::ProfileRequest::new(Vec::new());
    request.pc_sampling = true;
    request.primer = true;
    let got = attach_in_order(child.id(), &dir, 0, Some(request));
    assert!(
        got.iter()
            .any(|m| matches!(m, Message::ProfileStarted { contexts: 1, .. })),
        "{got:?}"
    );
    assert_eq!(child.answer("pc"), "pc reads while decoding 0, period 22");
    child.exit();
    let _ = std::fs::remove_dir_all(&dir);
}

/// One attached PC sampling window into a fresh attach child whose CUPTI double fails `fail` (`CALL=CODE`, if any):
/// the window's messages, the child (still running) and the scratch directory.
fn pc_window(name: &str, fail: Option<&str>) -> (Vec<Message>, AttachChild, std::path::PathBuf) {
    let dir = fresh_dir(name);
    let child = match fail {
        Some(f) => AttachChild::start_with("attach", &[("GPU_TOOLS_DOUBLE_FAIL", f)]),
        None => AttachChild::start("attach"),
    };
    let mut request = gpu_tools_injection::profile::ProfileRequest::new(Vec::new());
    request.pc_sampling = true;
    let got = attach_in_order(child.id(), &dir, 0, Some(request));
    (got, child, dir)
}

/// PC sampling that CUPTI could not turn off is said (`PcLeftOn`: CUPTI then keeps it on, and the GPU's counters
/// held, for the process's life; on an H200 every other process's PC sampling was refused meanwhile), and what was
/// read before still comes.
#[test]
fn pc_sampling_that_could_not_be_turned_off_is_said() {
    // CUPTI_ERROR_INVALID_PARAMETER, as the H200 answered.
    let (got, child, dir) = pc_window("left-on", Some("cuptiPCSamplingDisable=1"));
    child.exit();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        got.iter().any(|m| matches!(m, Message::PcLeftOn { .. })),
        "{got:?}"
    );
    assert!(
        got.iter().any(|m| matches!(m, Message::PcCounts(_))),
        "the counts are sent after the failed disable too (before, a failed finish sent none): {got:?}"
    );
}

/// An attached PC sampling window never reads beside CUPTI's decoding worker: its finish stops sampling first (CUPTI
/// 13.0's `cuptiPCSamplingGetData` copies a PC the worker adds during the read with a null name, which killed five
/// jobs in `strdup`); and a stop that fails is said as sampling left on, with the counts, and nothing more is asked
/// of CUPTI.
#[test]
fn attached_pc_sampling_is_never_read_beside_the_decoding_worker() {
    let (got, mut child, dir) = pc_window("pc-stopped-first", None);
    assert!(
        got.iter().any(|m| matches!(m, Message::PcCounts(_))),
        "{got:?}"
    );
    assert!(
        !got.iter().any(|m| matches!(m, Message::PcLeftOn { .. })),
        "{got:?}"
    );
    assert_eq!(
        child.answer("pc"),
        "pc reads while decoding 0, period 0",
        "a window asked for by name samples at CUPTI's period"
    );
    child.exit();
    let _ = std::fs::remove_dir_all(&dir);

    let (got, mut child, dir) = pc_window("pc-stop-failed", Some("cuptiPCSamplingStop=1"));
    assert!(
        got.iter().any(|m| matches!(m, Message::PcLeftOn { .. })),
        "a failed stop leaves sampling on, said: {got:?}"
    );
    assert!(
        got.iter().any(|m| matches!(m, Message::PcCounts(_))),
        "the counts come after the failed stop too: {got:?}"
    );
    assert!(
        child.answer("pc").starts_with("pc reads while decoding 0,"),
        "no read after the failed stop"
    );
    child.exit();
    let _ = std::fs::remove_dir_all(&dir);
}
