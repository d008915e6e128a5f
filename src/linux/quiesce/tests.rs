//! Stopping a real program, no GPU: `tests/quiesce/target.c`, with a library one of its threads spins in and another
//! blocks in (`busy.c`) and a library it maps but never runs (`idle.c`), compiled with the system's `cc` next to
//! the test binary. Where ptrace is not permitted the tests that need it say so and stop, unless `CI` is set: then
//! that is a failure.

use super::*;
use crate::linux::memory;
use crate::linux::wait::{WALL, WEXITED, wait_id};
use gpu_tools_testing::{cc, skip_unless_ci};
use nix::sys::ptrace;
use nix::unistd::Pid;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::OnceLock;

/// Compiles the program and its libraries once per test binary; returns their folder.
fn built() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/quiesce");
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().unwrap().join("quiesce-doubles");
        std::fs::create_dir_all(&dir).unwrap();
        let s = |f: &str| src.join(f).to_string_lossy().into_owned();
        let o = |f: &str| dir.join(f).to_string_lossy().into_owned();
        let warn = ["-O1", "-g", "-Wall", "-Werror"];
        let lib = |source: &str, out: &str, extra: &[&str]| {
            let mut args = warn.to_vec();
            args.extend(["-shared", "-fPIC"]);
            args.extend(extra);
            let (source, out) = (s(source), o(out));
            args.extend([source.as_str(), "-o", out.as_str()]);
            cc(&args);
        };
        lib("busy.c", "libquiesce_busy.so", &[]);
        // No start files: the loader finds no code of it to run.
        lib("idle.c", "libquiesce_idle.so", &["-nostartfiles"]);
        let (target, out) = (s("target.c"), o("quiesce_target"));
        let search = format!("-L{}", dir.display());
        let rpath = format!("-Wl,-rpath,{}", dir.display());
        let mut args = warn.to_vec();
        args.extend([
            "-pthread",
            target.as_str(),
            "-o",
            out.as_str(),
            search.as_str(),
            "-lquiesce_busy",
            rpath.as_str(),
            "-ldl",
        ]);
        cc(&args);
        dir
    })
}

fn ptrace_allowed() -> bool {
    // Sandboxes may forbid ptrace outright; the tests then say so instead of failing for the wrong reason.
    let mut child = Command::new("sleep").arg("5").spawn().unwrap();
    let pid = child.id();
    let seized = ptrace::seize(Pid::from_raw(pid as i32), ptrace::Options::empty());
    let _ = child.kill();
    if seized.is_ok() {
        // This thread is its tracer: it collects the death.
        let _ = wait_id(pid, WEXITED | WALL);
    }
    let _ = child.wait();
    match seized {
        Ok(()) => true,
        Err(e) => {
            skip_unless_ci(&format!("ptrace is not permitted here ({e})"));
            false
        }
    }
}

/// The running program, once every thread is in place.
struct Target {
    child: Child,
    stdout: BufReader<ChildStdout>,
    pid: u32,
    spinner: u32,
    blocker: u32,
    worker: u32,
    /// The worker's counter.
    progress: u64,
    /// The spinner's counter.
    spins: u64,
    /// How many SIGRTMIN+1 the program handled.
    handled: u64,
    /// With "libthread": the thread libquiesce_busy.so started; with "fork": the thread held inside fork().
    fifth_thread: Option<u32>,
}

impl Target {
    fn start(extra: &[&str]) -> Target {
        let dir = built();
        let mut child = Command::new(dir.join("quiesce_target"))
            .arg(dir.join("libquiesce_idle.so"))
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let f: Vec<&str> = line.split_whitespace().collect();
        assert!(
            (f.len() == 8 || f.len() == 9) && f[0] == "ready",
            "{line:?}"
        );
        let n = |i: usize| f[i].parse::<u32>().unwrap();
        let hex = |i: usize| u64::from_str_radix(f[i], 16).unwrap();
        assert_eq!(n(1), child.id());
        Target {
            pid: child.id(),
            spinner: n(2),
            blocker: n(3),
            worker: n(4),
            progress: hex(5),
            spins: hex(6),
            handled: hex(7),
            fifth_thread: f.get(8).map(|_| n(8)),
            child,
            stdout,
        }
    }

    fn read(&self, addr: u64) -> u64 {
        memory::read_u64(self.pid, addr).unwrap()
    }

    /// Waits (up to 10 s) for the counter at `addr` to move from `from`.
    fn moves(&self, addr: u64, from: u64) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.read(addr) != from {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    }

    fn state(&self, tid: u32) -> char {
        Process::new(self.pid).thread(tid).stat().unwrap().state
    }

    fn tracer(&self, tid: u32) -> Option<u32> {
        Process::new(self.pid).thread(tid).tracer().unwrap()
    }

    /// Tells the program to finish; its output after that and its exit code.
    fn finish(mut self) -> (String, Option<i32>) {
        self.child
            .stdin
            .as_mut()
            .unwrap()
            .write_all(b"go\n")
            .unwrap();
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).unwrap();
        let status = self.child.wait().unwrap();
        (rest.trim().to_owned(), status.code())
    }
}

#[test]
fn stops_every_thread_and_finds_those_inside_the_library() {
    if !ptrace_allowed() {
        return;
    }
    let t = Target::start(&[]);
    let mut stopped =
        StoppedThreads::stop(t.pid, &|_, _| false, Duration::from_secs(10)).expect("stop");
    let tids: BTreeSet<u32> = stopped.threads().iter().map(|s| s.tid).collect();
    assert_eq!(
        tids,
        BTreeSet::from([t.pid, t.spinner, t.blocker, t.worker])
    );
    assert_eq!(stopped.threads()[0].tid, t.pid, "the main thread first");
    assert!(stopped.spared().is_empty());
    for s in stopped.threads() {
        assert_eq!(t.state(s.tid), 't', "thread {} in a tracing stop", s.tid);
        assert_eq!(t.tracer(s.tid), Some(std::process::id()));
        assert_eq!(s.pending_signal, None);
    }
    let name = |tid| {
        stopped
            .threads()
            .iter()
            .find(|s| s.tid == tid)
            .map(|s| s.name.clone())
    };
    assert_eq!(name(t.spinner).as_deref(), Some(OsStr::new("spinner")));
    assert_eq!(name(t.worker).as_deref(), Some(OsStr::new("worker")));
    // Stopped for real: the spinner's counter stands still.
    let spins = t.read(t.spins);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(t.read(t.spins), spins);

    let busy = library_code_ranges(t.pid, &["libquiesce_busy"]).unwrap();
    assert!(!busy.is_empty());
    let all = stopped.all_inside(&busy);
    let evidence = |tid| all.iter().find(|i| i.tid == tid).map(|i| &i.evidence);
    // The spinner runs in the library; the blocker waits in read() of the C library, called from the library, so
    // only its stack shows it; the worker never entered it. (The main thread's stack is not asserted on: the
    // loader resolved the library's symbols there at start-up, and stale words of that may remain.)
    match evidence(t.spinner) {
        Some(Evidence::ProgramCounter { pc, library }) => {
            assert!(busy.iter().any(|r| r.contains(*pc)), "{all:?}");
            assert!(library.ends_with("libquiesce_busy.so"));
        }
        other => panic!("{other:?} in {all:?}"),
    }
    match evidence(t.blocker) {
        Some(Evidence::StackWord {
            offset,
            value,
            library,
        }) => {
            assert!(busy.iter().any(|r| r.contains(*value)), "{all:?}");
            assert!(*offset < 4096, "a return address near the top: {all:?}");
            assert!(library.ends_with("libquiesce_busy.so"));
        }
        other => panic!("{other:?} in {all:?}"),
    }
    assert_eq!(evidence(t.worker), None, "{all:?}");
    let first = stopped.find_inside(&busy).expect("a thread is inside");
    assert_eq!(first.tid, t.spinner, "a program counter inside comes first");
    assert_eq!(first.name, "spinner");

    // A library that is mapped but whose code never ran: nobody is inside.
    let idle = library_code_ranges(t.pid, &["libquiesce_idle"]).unwrap();
    assert!(!idle.is_empty());
    assert_eq!(stopped.find_inside(&idle), None);
    assert!(stopped.all_inside(&idle).is_empty());
    assert_eq!(stopped.find_inside(&[]), None);

    // By the live frames: the same two, the blocker by its frame in the library (a return address its read()
    // returns to), and no one else, the main thread included (stale words on its stack do not count here).
    let mut unwinder = Unwinder::default();
    let framed = stopped.frames_inside(&busy, &mut unwinder);
    let by_frame = |tid| framed.iter().find(|i| i.tid == tid).map(|i| &i.evidence);
    assert!(
        matches!(by_frame(t.spinner), Some(Evidence::ProgramCounter { .. })),
        "{framed:?}"
    );
    match by_frame(t.blocker) {
        Some(Evidence::Frame { depth, pc, library }) => {
            assert!(*depth >= 1, "{framed:?}");
            assert!(busy.iter().any(|r| r.contains(*pc)), "{framed:?}");
            assert!(library.ends_with("libquiesce_busy.so"));
        }
        other => panic!("{other:?} in {framed:?}"),
    }
    assert_eq!(framed.len(), 2, "{framed:?}");
    assert!(stopped.frames_inside(&idle, &mut unwinder).is_empty());

    // Run to an address: the spinner to where it is (it traps at once), the blocker to the return address of its
    // frame in the library, which it cannot reach while it waits in read(): a timeout. Each time the code is put
    // back as it was and the thread is stopped again.
    let word_at = |addr: u64| {
        let mut w = [0u8; 8];
        memory::read_bytes(t.pid, addr, &mut w).expect("read code");
        u64::from_ne_bytes(w)
    };
    let at = stopped
        .threads()
        .iter()
        .find(|s| s.tid == t.spinner)
        .map(|s| s.pc)
        .expect("spinner");
    let code = word_at(at);
    assert!(
        stopped
            .run_to(t.spinner, at, Duration::from_secs(2))
            .expect("run to")
    );
    assert_eq!(word_at(at), code, "the breakpoint taken out");
    assert_eq!(t.state(t.spinner), 't');
    let (frames, _) = stopped
        .frames(t.blocker, &mut unwinder)
        .expect("the blocker's frames");
    let outer = frames
        .iter()
        .rposition(|pc| busy.iter().any(|r| r.contains(*pc)))
        .expect("a library frame");
    let back = *frames.get(outer + 1).expect("its caller");
    let code = word_at(back);
    let timed_out = stopped.run_to(t.blocker, back, Duration::from_millis(100));
    assert!(
        matches!(timed_out, Err(QuiesceError::Timeout { .. })),
        "{timed_out:?}"
    );
    assert_eq!(
        word_at(back),
        code,
        "the breakpoint taken out after the timeout"
    );
    assert_eq!(t.state(t.blocker), 't');

    // Run alone a moment: the spinner spins, the others stay stopped, and it is stopped again after.
    let spins = t.read(t.spins);
    // On a loaded machine a 20 ms run may pass before the scheduler gives the thread a core: a few tries.
    let mut after = spins;
    for _ in 0..50 {
        assert!(
            stopped
                .nudge(t.spinner, Duration::from_millis(20))
                .expect("nudge")
        );
        after = t.read(t.spins);
        if after > spins {
            break;
        }
    }
    assert!(after > spins, "it ran: {spins} -> {after}");
    for tid in [t.pid, t.spinner, t.blocker, t.worker] {
        assert_eq!(t.state(tid), 't', "thread {tid} stopped after the nudge");
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(t.read(t.spins), after, "and stopped again");
    let spinner = stopped.threads().iter().find(|s| s.tid == t.spinner);
    assert!(spinner.is_some_and(|s| busy.iter().any(|r| r.contains(s.pc))));
    let spins = after;

    drop(stopped);
    for tid in [t.pid, t.spinner, t.blocker, t.worker] {
        assert_eq!(t.tracer(tid), None, "thread {tid} let go");
    }
    assert!(t.moves(t.spins, spins), "the spinner runs again");
    let (out, code) = t.finish();
    assert_eq!(out, "done");
    assert_eq!(code, Some(0));
}

#[test]
fn a_thread_is_told_by_the_library_it_started_in() {
    if !ptrace_allowed() {
        return;
    }
    let t = Target::start(&["libthread"]);
    let library_thread = t.fifth_thread.expect("its id on the ready line");
    let stopped =
        StoppedThreads::stop(t.pid, &|_, _| false, Duration::from_secs(10)).expect("stop");
    assert_eq!(stopped.threads().len(), 5);
    let busy = library_code_ranges(t.pid, &["libquiesce_busy"]).unwrap();
    let idle = library_code_ranges(t.pid, &["libquiesce_idle"]).unwrap();
    let mut unwinder = Unwinder::default();
    // The spinner and the blocker are inside the library too, but the program started them.
    assert_eq!(stopped.started_in(&busy, &mut unwinder), [library_thread]);
    assert!(stopped.started_in(&idle, &mut unwinder).is_empty());
    assert!(stopped.started_in(&[], &mut unwinder).is_empty());
    // Every other thread began in the program: the main thread, the spinner, the blocker and the worker.
    let mut program = stopped.started_outside(&busy, &mut unwinder);
    program.sort_unstable();
    let mut expected = vec![t.pid, t.spinner, t.blocker, t.worker];
    expected.sort_unstable();
    assert_eq!(program, expected);
    drop(stopped);
    let (out, code) = t.finish();
    assert_eq!(out, "done");
    assert_eq!(code, Some(0));
}

/// A thread held inside `fork` (in a prepare handler, where a library's handler holds its locks) shows no frame of
/// that library: only the C library's fork functions find it.
#[test]
fn a_thread_inside_fork_is_found_by_the_fork_functions_alone() {
    if !ptrace_allowed() {
        return;
    }
    let t = Target::start(&["fork"]);
    let forker = t.fifth_thread.expect("its id on the ready line");
    let stopped =
        StoppedThreads::stop(t.pid, &|_, _| false, Duration::from_secs(10)).expect("stop");
    assert_eq!(stopped.threads().len(), 5);
    let mut unwinder = Unwinder::default();
    // The library's ranges find the spinner and the blocker, not the thread in the fork.
    let busy = library_code_ranges(t.pid, &["libquiesce_busy"]).unwrap();
    let by_library: BTreeSet<u32> = stopped
        .frames_inside(&busy, &mut unwinder)
        .iter()
        .map(|i| i.tid)
        .collect();
    assert_eq!(by_library, BTreeSet::from([t.spinner, t.blocker]));
    let fork = fork_code_ranges(t.pid).expect("the C library's fork functions");
    assert!(!fork.is_empty(), "no fork function found in the C library");
    let in_fork = stopped.frames_inside(&fork, &mut unwinder);
    assert_eq!(
        in_fork.iter().map(|i| i.tid).collect::<Vec<_>>(),
        [forker],
        "{in_fork:?}"
    );
    assert!(
        matches!(in_fork[0].evidence, Evidence::Frame { .. }),
        "found by a frame of fork, not its program counter: {:?}",
        in_fork[0].evidence
    );
    drop(stopped);
    let (out, code) = t.finish();
    assert_eq!(out, "done");
    assert_eq!(code, Some(0));
}

/// The fork functions of this process's C library cover `fork` itself, as the process maps it.
#[test]
fn the_fork_functions_cover_fork_as_mapped() {
    let mut child = Command::new("sleep").arg("5").spawn().unwrap();
    // Until the loader mapped its C library (just after the spawn it may not have).
    let deadline = Instant::now() + Duration::from_secs(5);
    let ranges = loop {
        let r = fork_code_ranges(child.id());
        if !matches!(&r, Ok(v) if v.is_empty()) || Instant::now() >= deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let _ = child.kill();
    let _ = child.wait();
    let ranges = ranges.expect("sleep's C library");
    assert!(!ranges.is_empty());
    assert!(
        ranges
            .iter()
            .all(|r| r.start < r.end && r.end - r.start < 1 << 16),
        "{ranges:?}"
    );
    assert!(
        ranges
            .iter()
            .all(|r| r.path.to_string_lossy().contains("libc")),
        "{ranges:?}"
    );
    assert!(matches!(
        fork_code_ranges(u32::MAX),
        Err(QuiesceError::NoSuchProcess(_))
    ));
}

#[test]
fn a_spared_thread_keeps_running_while_the_others_are_stopped() {
    if !ptrace_allowed() {
        return;
    }
    let t = Target::start(&[]);
    let stopped = StoppedThreads::stop(t.pid, &|_, name| name == "worker", Duration::from_secs(10))
        .expect("stop");
    assert_eq!(stopped.spared(), [t.worker]);
    let tids: BTreeSet<u32> = stopped.threads().iter().map(|s| s.tid).collect();
    assert_eq!(tids, BTreeSet::from([t.pid, t.spinner, t.blocker]));
    assert_eq!(t.tracer(t.worker), None);
    let spins = t.read(t.spins);
    let progress = t.read(t.progress);
    assert!(t.moves(t.progress, progress), "the spared worker counts on");
    assert_ne!(t.state(t.worker), 't');
    assert_eq!(t.read(t.spins), spins, "the spinner stays stopped");
    stopped.resume().expect("resume");
    assert!(t.moves(t.spins, spins), "the spinner runs again");

    // Spared by id, the same.
    let stopped =
        StoppedThreads::stop_all_but(t.pid, &[t.spinner], Duration::from_secs(10)).expect("stop");
    assert_eq!(stopped.spared(), [t.spinner]);
    assert_eq!(stopped.threads().len(), 3);
    let spins = t.read(t.spins);
    assert!(t.moves(t.spins, spins), "the spared spinner spins on");
    drop(stopped);

    let (out, code) = t.finish();
    assert_eq!(out, "done");
    assert_eq!(code, Some(0));
}

#[test]
fn no_signal_is_lost_across_stops() {
    if !ptrace_allowed() {
        return;
    }
    let t = Target::start(&[]);
    let (pid, worker) = (t.pid, t.worker);
    let signal = libc::SIGRTMIN() + 1;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Real-time signals at the worker, counted when queued, while the process is stopped and let go again and
    // again: some arrive while it is stopped, and some between the seize and the interrupt, a moment widened here
    // so that they do, where they stop the thread for their delivery.
    *worker::SEIZE_PAUSE.lock().unwrap() = Some((pid, Duration::from_millis(2)));
    let sender = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut sent = 0u64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                // SAFETY: a plain system call with integer arguments.
                let rc = unsafe {
                    libc::syscall(
                        libc::SYS_tgkill,
                        pid as libc::c_long,
                        worker as libc::c_long,
                        signal,
                    )
                };
                if rc == 0 {
                    sent += 1;
                }
                std::thread::sleep(Duration::from_micros(20));
            }
            sent
        })
    };
    let mut held = 0;
    for _ in 0..40 {
        let stopped =
            StoppedThreads::stop(pid, &|_, _| false, Duration::from_secs(10)).expect("stop");
        held += stopped
            .threads()
            .iter()
            .filter(|s| s.pending_signal.is_some())
            .count();
        std::thread::sleep(Duration::from_millis(1));
        stopped.resume().expect("resume");
        std::thread::sleep(Duration::from_millis(1));
    }
    *worker::SEIZE_PAUSE.lock().unwrap() = None;
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = sender.join().unwrap();
    assert!(sent > 0);
    assert!(held > 0, "no signal-delivery stop in {sent} signals");
    let deadline = Instant::now() + Duration::from_secs(10);
    while t.read(t.handled) < sent && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    eprintln!("{sent} signals sent; {held} stops were signal-delivery stops");
    assert_eq!(t.read(t.handled), sent, "every signal handled once");
    let (out, code) = t.finish();
    assert_eq!(out, "done");
    assert_eq!(code, Some(0));
}

#[test]
fn a_thread_that_does_not_stop_is_a_timeout_and_the_others_go_on() {
    if !ptrace_allowed() {
        return;
    }
    // A thread waiting in vfork() for a child that sleeps 1.5 s: no stop request reaches it before.
    let t = Target::start(&["vfork", "1500"]);
    let vforker = Process::new(t.pid)
        .thread_ids()
        .unwrap()
        .into_iter()
        .find(|&tid| Process::new(t.pid).thread(tid).name().unwrap() == "vforker")
        .expect("the vforker");
    let started = Instant::now();
    let r = StoppedThreads::stop(t.pid, &|_, _| false, Duration::from_millis(300));
    let waited = started.elapsed();
    match r {
        Err(QuiesceError::Timeout { pid, threads, .. }) => {
            assert_eq!(pid, t.pid);
            assert_eq!(threads, [vforker]);
        }
        other => panic!("{other:?}"),
    }
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    // Every thread was let go, the one that never stopped included, and runs.
    for tid in [t.pid, t.spinner, t.blocker, t.worker, vforker] {
        assert_eq!(t.tracer(tid), None, "thread {tid} let go");
    }
    let spins = t.read(t.spins);
    assert!(t.moves(t.spins, spins), "the spinner runs again");
    // The vforker goes on once its child ends, without stopping for the interrupt it never took.
    let (out, code) = t.finish();
    assert_eq!(out, "done");
    assert_eq!(code, Some(0));
}

#[test]
fn a_process_traced_already_names_its_tracer() {
    if !ptrace_allowed() {
        return;
    }
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id();
    ptrace::seize(Pid::from_raw(pid as i32), ptrace::Options::empty()).unwrap();
    let r = StoppedThreads::stop(pid, &|_, _| false, Duration::from_secs(10));
    let _ = child.kill();
    let _ = wait_id(pid, WEXITED | WALL);
    let _ = child.wait();
    assert_eq!(
        r.map(|_| ()),
        Err(QuiesceError::AlreadyTraced {
            pid,
            tid: pid,
            tracer: std::process::id()
        })
    );
}

#[test]
fn a_missing_process_and_this_process_are_refused() {
    let missing = u32::MAX / 2;
    let r = StoppedThreads::stop(missing, &|_, _| false, Duration::from_secs(1));
    assert_eq!(r.map(|_| ()), Err(QuiesceError::NoSuchProcess(missing)));
    let e: crate::Error = QuiesceError::NoSuchProcess(missing).into();
    assert_eq!(e.to_string(), format!("no process {missing}"));
    assert_eq!(
        library_code_ranges(missing, &["libc.so"]),
        Err(QuiesceError::NoSuchProcess(missing))
    );
    let me = std::process::id();
    let r = StoppedThreads::stop_all_but(me, &[], Duration::from_secs(1));
    assert_eq!(r.map(|_| ()), Err(QuiesceError::OwnProcess(me)));
}
