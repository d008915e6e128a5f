//! The search for a quiet moment against a real program, no GPU: a C program whose second thread either blocks for
//! good inside a library named `libcuda.so.1` (a hang in the driver) or passes through it every few milliseconds
//! (a busy job), compiled with the system's `cc` next to the test binary. Where ptrace is not permitted the tests say
//! so and stop, unless `CI` is set: then that is a failure.

use super::*;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

const DRIVER: &str = r#"
#include <unistd.h>
/* A call that never returns: a hang inside the driver. It says that it is inside. */
void stand_in_block(volatile int *inside) { *inside = 1; for (;;) pause(); }
/* A call that returns after 2 ms: a synchronisation of a busy job. */
void stand_in_nap(void) { usleep(2000); }
"#;

const PROGRAM: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
void stand_in_block(volatile int *inside);
void stand_in_nap(void);
static volatile int inside;
static void *blocked(void *arg) { (void)arg; stand_in_block(&inside); return NULL; }
static void *napping(void *arg) {
    (void)arg;
    for (;;) {
        stand_in_nap();
        for (volatile int i = 0; i < 10000; i++) {}
    }
    return NULL;
}
int main(int argc, char **argv) {
    pthread_t t;
    int block = argc > 1 && strcmp(argv[1], "block") == 0;
    pthread_create(&t, NULL, block ? blocked : napping, NULL);
    /* Ready once the blocked thread is inside the driver (under load it may not have got there yet). */
    while (block && !inside) usleep(1000);
    if (block) usleep(10000);
    printf("ready\n");
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0) {}
    return 0;
}
"#;

/// Compiles the stand-in driver (`libcuda.so.1`, no optimisation: every call keeps its frame) and the program once
/// per test binary; returns the program.
fn built() -> &'static std::path::Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().unwrap().join("profile-attach-stuck");
        std::fs::create_dir_all(&dir).unwrap();
        let path = |f: &str| dir.join(f).to_string_lossy().into_owned();
        std::fs::write(path("driver.c"), DRIVER).unwrap();
        std::fs::write(path("program.c"), PROGRAM).unwrap();
        let (driver_c, driver) = (path("driver.c"), path("libcuda.so.1"));
        gpu_tools_testing::cc(&[
            "-O0",
            "-g",
            "-shared",
            "-fPIC",
            "-Wl,-soname,libcuda.so.1",
            &driver_c,
            "-o",
            &driver,
        ]);
        let (program_c, program) = (path("program.c"), path("stuck_target"));
        let search = format!("-L{}", dir.display());
        let rpath = format!("-Wl,-rpath,{}", dir.display());
        gpu_tools_testing::cc(&[
            "-O0",
            "-g",
            "-pthread",
            &program_c,
            "-o",
            &program,
            &search,
            "-l:libcuda.so.1",
            &rpath,
        ]);
        PathBuf::from(program)
    })
}

/// The running program, its second thread in place; ended when dropped.
struct Target {
    child: Child,
}

impl Target {
    fn start(mode: &str) -> Target {
        let mut child = Command::new(built())
            .arg(mode)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "ready\n");
        Target { child }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The second thread.
    fn thread(&self) -> u32 {
        let tids = gpu_tools::linux::procfs::Process::new(self.pid())
            .thread_ids()
            .unwrap();
        tids.into_iter().find(|&t| t != self.pid()).unwrap()
    }

    /// Whether it runs on: not stopped, traced by no one.
    fn runs_on(&self) -> bool {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status.contains("TracerPid:\t0") && !status.contains("State:\tt")
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where ptrace is refused (a sandbox), the failure says so: the test stops there, unless in CI.
fn ptrace_refused(message: &str) -> bool {
    let refused = message.contains("not permitted") || message.contains("ptrace_scope");
    if refused {
        gpu_tools_testing::skip_unless_ci(&format!("ptrace is not permitted here ({message})"));
    }
    refused
}

#[test]
fn a_thread_that_never_leaves_the_driver_is_refused_by_name_within_seconds() {
    let target = Target::start("block");
    let tid = target.thread();
    let began = Instant::now();
    let got = quiet_moment(
        target.pid(),
        Moment::Start {
            flight_recorder: true,
            search: SEARCH_LIMIT,
        },
    );
    let took = began.elapsed();
    let message = match got {
        Err(Failure::Message { code: 1, message }) => message,
        Err(other) => panic!("{other:?}"),
        Ok((stopped, tries, nudges)) => {
            let _ = stopped.resume();
            panic!("a quiet moment after {tries} stops and {nudges} runs alone")
        }
    };
    if ptrace_refused(&message) {
        return;
    }
    eprintln!("after {took:?}: {message}");
    assert!(
        message.contains(&format!(
            "process {}: thread {tid} (stuck_target) waits inside libcuda.so.1 at every stop (3 stops in",
            target.pid()
        )),
        "{message}"
    );
    assert!(
        message.contains("a long synchronisation or a hang"),
        "{message}"
    );
    assert!(
        message.contains(&format!("`gpu-tools where {}`", target.pid())),
        "{message}"
    );
    // The whole search is 20 s; the refusal comes after the first stop's drain (2 s) and two short ones.
    assert!(took < Duration::from_secs(8), "{took:?}");
    assert!(took >= stuck::STUCK_AFTER, "{took:?}");
    assert!(target.runs_on(), "the process was left as it was");
}

/// The PC sampling before a first trace looks for 3 s, not 20: a job that keeps a thread in the driver does not hold
/// its trace back, and is left as it was.
#[test]
fn a_short_start_search_gives_up_within_its_time_and_leaves_the_process() {
    let target = Target::start("block");
    let began = Instant::now();
    let got = quiet_moment(
        target.pid(),
        Moment::Start {
            flight_recorder: true,
            search: Duration::from_secs(1),
        },
    );
    let took = began.elapsed();
    match got {
        Err(Failure::Message { message, .. }) if ptrace_refused(&message) => return,
        Err(Failure::Message { code: 1, message }) => assert!(
            message.contains("no moment without a thread inside the CUDA driver or CUPTI in 1 s")
                && message.contains("was left as it was"),
            "{message}"
        ),
        Err(other) => panic!("{other:?}"),
        Ok((stopped, tries, nudges)) => {
            let _ = stopped.resume();
            panic!("a quiet moment after {tries} stops and {nudges} runs alone")
        }
    }
    // One stop's drain (2 s at most) past the second.
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert!(target.runs_on(), "the process was left as it was");
}

#[test]
fn a_thread_that_passes_through_the_driver_gets_its_quiet_moment() {
    let target = Target::start("nap");
    let got = quiet_moment(
        target.pid(),
        Moment::Start {
            flight_recorder: true,
            search: SEARCH_LIMIT,
        },
    );
    match got {
        Ok((stopped, tries, nudges)) => {
            stopped.resume().unwrap();
            assert!(tries >= 1, "{tries} stops, {nudges} runs alone");
        }
        Err(Failure::Message { message, .. }) if ptrace_refused(&message) => return,
        Err(other) => panic!("{other:?}"),
    }
    assert!(target.runs_on(), "the process runs on");
}

/// A thread the program started during the window is held at the finish like the others (it must not be inside the
/// driver while CUPTI reads out and disables the sampling), where only the threads there at the start once were.
#[test]
fn at_the_finish_a_thread_the_program_started_during_the_window_is_held() {
    let target = Target::start("nap");
    let napping = target.thread();
    // Only the main thread was there at the start: the napping thread appeared since, started by the program.
    let before = BTreeSet::from([target.pid()]);
    let got = quiet_moment(
        target.pid(),
        Moment::Finish {
            before: &before,
            left_on: LeftOn::PcSampling,
        },
    );
    match got {
        Ok((stopped, _, _)) => {
            let held: Vec<u32> = stopped.threads().iter().map(|t| t.tid).collect();
            stopped.resume().unwrap();
            assert!(held.contains(&napping), "held {held:?}, not {napping}");
        }
        Err(Failure::Message { message, .. }) if ptrace_refused(&message) => return,
        Err(other) => panic!("{other:?}"),
    }
    assert!(target.runs_on(), "the process runs on");
}

#[test]
fn a_finish_searches_longer_than_a_start_and_says_what_stays_on() {
    let before = BTreeSet::new();
    let start = Moment::Start {
        flight_recorder: true,
        search: SEARCH_LIMIT,
    };
    let finish = |left_on| Moment::Finish {
        before: &before,
        left_on,
    };
    // Giving up at the start leaves nothing; at the finish it leaves the profiling on, so the search goes on longer.
    assert!(finish(LeftOn::PcSampling).search_limit() > start.search_limit());
    assert_eq!(start.given_up(), "the process was left as it was");
    assert!(
        finish(LeftOn::PcSampling)
            .given_up()
            .starts_with("PC sampling stays on in the process for the rest of its life")
    );
    assert!(
        finish(LeftOn::RangeProfiler)
            .given_up()
            .contains("until the program's next kernel launch ends it")
    );
    assert!(
        finish(LeftOn::Nothing)
            .given_up()
            .starts_with("nothing of the profile stays on")
    );
}

#[test]
fn ctrl_c_before_the_shortest_pc_window_waits_for_it() {
    // The stop flag is set before the window begins: the finish comes no sooner than the shortest window.
    let (_tx, rx) = mpsc::channel::<Delivery>();
    let mut records = Records { rx, closed: false };
    let mut out = Collected::default();
    let stop = AtomicBool::new(true);
    let least = Duration::from_millis(300);
    let took = collect_until_stop(
        std::process::id(),
        None,
        (false, least),
        &stop,
        &mut records,
        &mut out,
    );
    assert!(
        took >= least,
        "the window ended after {took:?}, before {least:?}"
    );
    // Without a shortest window, Ctrl-C ends it at once.
    let took = collect_until_stop(
        std::process::id(),
        None,
        (false, Duration::ZERO),
        &stop,
        &mut records,
        &mut out,
    );
    assert!(took < least, "the window ran {took:?} after Ctrl-C");
}

/// A process that has ended: a child of the test's, reaped (its pid is gone from /proc).
fn ended_process() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// The text of a failure, for the assertions on it.
fn text<T: std::fmt::Debug>(got: Result<T, Failure>) -> String {
    match got {
        Err(Failure::Message { code: 1, message }) => message,
        other => panic!("{other:?}"),
    }
}

/// A connection that closes before the answer (a job that died of SIGSEGV 2.7 s into its finish was told the
/// library "did not answer within 30 s") ends the wait at once, and is said as a closed connection with the
/// process's end, never as a timeout.
#[test]
fn a_closed_connection_ends_the_wait_at_once_and_is_not_said_as_a_timeout() {
    let (tx, rx) = mpsc::channel::<Delivery>();
    tx.send(Delivery::Closed(0)).unwrap();
    let mut records = Records { rx, closed: false };
    let mut out = Collected::default();
    let began = Instant::now();
    let waited = wait_for(&mut records, &mut out, |_| true, Duration::from_secs(10));
    let took = began.elapsed();
    // The sender is still there: the connection's close ended the wait, not the channel's end.
    drop(tx);
    assert!(
        matches!(waited, Waited::Closed { after } if after < Duration::from_secs(1)),
        "{waited:?}"
    );
    assert!(took < Duration::from_secs(1), "the wait took {took:?}");
    let pid = ended_process();
    let before = BTreeSet::new();
    let finish = Moment::Finish {
        before: &before,
        left_on: LeftOn::PcSampling,
    };
    let message = text(answered(pid, &finish, waited));
    assert!(!message.contains("did not answer within"), "{message}");
    assert!(
        message.starts_with(&format!(
            "process {pid}: the injection library's connection closed "
        )) && message.contains(" ms after the call to finish profiling was sent, with no answer: ")
            && message.contains(&format!(
                "process {pid} ended, most likely it died during the call (CUPTI 13.0 has killed jobs"
            ))
            && message.ends_with("cuptiPCSamplingGetData or cuptiPCSamplingDisable)"),
        "{message}"
    );
    // A finish with nothing known to kill there says the death alone.
    let nothing = Moment::Finish {
        before: &before,
        left_on: LeftOn::Nothing,
    };
    let closed = Waited::Closed {
        after: Duration::from_millis(5),
    };
    let message = text(answered(pid, &nothing, closed));
    assert!(
        message.ends_with(&format!(
            "process {pid} ended, most likely it died during the call"
        )),
        "{message}"
    );
}

/// A connection that closes while the process runs on says so, and where the library's log is.
#[test]
fn a_closed_connection_of_a_process_that_runs_on_says_it_runs_on() {
    let pid = std::process::id();
    let closed = Waited::Closed {
        after: Duration::from_millis(2700),
    };
    let start = Moment::Start {
        flight_recorder: false,
        search: SEARCH_LIMIT,
    };
    let message = text(answered(pid, &start, closed));
    assert_eq!(
        message,
        format!(
            "process {pid}: the injection library's connection closed 2700 ms after the call to start profiling \
             was sent, with no answer: process {pid} is still running (set {}=debug to see the library's log in \
             the process's stderr)",
            gpu_tools_injection::env::LOG
        )
    );
    // The wait for the library's readiness says the same, after its connection.
    let pid = ended_process();
    let message = text(ready_or_not(
        pid,
        Waited::Closed {
            after: Duration::from_millis(15),
        },
    ));
    assert_eq!(
        message,
        format!(
            "process {pid}: the injection library's connection closed 15 ms after it connected, with no answer: \
             process {pid} ended, most likely it died while the library got ready"
        )
    );
}

/// A connection that stays open and silent times out at the wait's limit, said with the timeout's words.
#[test]
fn a_silent_open_connection_times_out_with_the_timeout_wording() {
    let (tx, rx) = mpsc::channel::<Delivery>();
    let mut records = Records { rx, closed: false };
    let mut out = Collected::default();
    let limit = Duration::from_millis(200);
    let began = Instant::now();
    let waited = wait_for(&mut records, &mut out, |_| true, limit);
    let took = began.elapsed();
    drop(tx);
    assert!(matches!(waited, Waited::TimedOut), "{waited:?}");
    assert!(
        took >= limit,
        "the wait ended after {took:?}, before its limit"
    );
    let pid = std::process::id();
    let start = Moment::Start {
        flight_recorder: false,
        search: SEARCH_LIMIT,
    };
    let message = text(answered(pid, &start, waited));
    assert!(
        message.starts_with(&format!(
            "process {pid}: the injection library did not answer within 30 s: the process runs on"
        )),
        "{message}"
    );
    assert!(!message.contains("connection closed"), "{message}");
    assert_eq!(
        text(ready_or_not(pid, Waited::TimedOut)),
        format!("process {pid}: the injection library did not get ready within 30 s")
    );
}
