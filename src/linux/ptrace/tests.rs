//! The tracer against real processes: a shell's children, so that they are not this test's own children, as an
//! attached process usually is not. Where ptrace is not permitted, or python3 (which CI installs) is missing, the
//! tests that need it say so and stop, unless `CI` is set: then that is a failure.

use super::*;
use crate::linux::procfs::Process;
use crate::linux::wait::{WALL, WEXITED, wait_id};
use gpu_tools_testing::skip_unless_ci;
use nix::sys::ptrace;
use nix::unistd::Pid;
use std::process::{Command, Stdio};
use std::time::Instant;

/// A process that is not a child of the test (a shell's child), as an attached process usually is. Returns
/// the shell (reaped by the test) and the grandchild's pid.
fn grandchild(script: &str) -> (std::process::Child, u32) {
    let mut shell = Command::new("sh")
        .args(["-c", &format!("{script} & echo $!; wait $!")])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(shell.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    let pid: u32 = line.trim().parse().unwrap();
    // `$!` is known right after the fork: wait until the program is exec'd and its libraries are loaded, so
    // addresses computed now stay valid. The command line is read before the map: the forked shell maps libc
    // too, so a map read before the exec and a command line read after it would pass a program whose loader
    // has not mapped libc yet.
    let deadline = Instant::now() + Duration::from_secs(60);
    // The program may be found through a wrapper that execs the real one: compare the arguments.
    let args = |c: &str| c.split_once(' ').map(|(_, a)| a.to_owned());
    loop {
        let execd = args(&Process::new(pid).command_line_text().unwrap_or_default())
            == args(&script.replace('\'', ""));
        if execd
            && std::fs::read_to_string(format!("/proc/{pid}/maps"))
                .is_ok_and(|m| m.contains("libc.so"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "`{script}` was not running with libc mapped after 60 s"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    (shell, pid)
}

fn ptrace_allowed() -> bool {
    // Sandboxes may forbid ptrace outright; the tests then say so instead of failing for the wrong reason.
    let (mut shell, pid) = grandchild("sleep 5");
    let ok = ptrace::seize(Pid::from_raw(pid as i32), ptrace::Options::empty()).is_ok();
    let _ = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
    if ok {
        // This thread is its tracer: it must collect the death before the real parent can.
        let _ = wait_id(pid, WEXITED | WALL);
    }
    let _ = shell.wait();
    if !ok {
        skip_unless_ci("ptrace is not permitted here");
    }
    ok
}

/// Whether `python3` runs here (the tests' multi-threaded and libc-calling programs); where it does not, says so,
/// and fails under CI, which installs it.
fn python3_runs() -> bool {
    let runs = Command::new("python3").arg("-V").output().is_ok();
    if !runs {
        skip_unless_ci("python3 does not run here");
    }
    runs
}

#[test]
fn attach_stop_resume_and_see_the_exit_code() {
    if !ptrace_allowed() {
        return;
    }
    let (mut shell, pid) = grandchild("sh -c 'sleep 0.5; exit 7'");
    let (tracer, threads) = Tracer::attach(pid).expect("attach");
    assert_eq!(threads, 1);
    // Stopped: it shows as traced and stopped in /proc.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.contains("(tracing stop)"), "{status}");
    // The kernel names the worker thread as the tracer; it belongs to this process.
    assert_eq!(
        Process::new(pid).tracer().unwrap(),
        Some(std::process::id())
    );
    tracer.resume().unwrap();
    let watch = tracer.watch();
    let deadline = Instant::now() + Duration::from_secs(20);
    while watch.state() == ChildState::Running && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Its child (sleep) delivers SIGCHLD, which is forwarded; then it exits with its own code.
    assert_eq!(watch.state(), ChildState::Exited(7));
    assert_eq!(tracer.stop(), Err(TraceError::Ended(ChildState::Exited(7))));
    drop(tracer);
    // Released to its real parent, which sees the same status.
    assert_eq!(shell.wait().unwrap().code(), Some(7));
}

#[test]
fn threads_started_while_traced_run_and_the_exit_is_seen() {
    if !ptrace_allowed() || !python3_runs() {
        return;
    }
    let (mut shell, pid) = grandchild(
        "python3 -c 'import threading,time,sys;time.sleep(1);ts=[threading.Thread(target=time.sleep,args=(0.2,)) for _ in range(4)];[t.start() for t in ts];[t.join() for t in ts];sys.exit(5)'",
    );
    let (tracer, _) = Tracer::attach(pid).expect("attach");
    tracer.resume().unwrap();
    let watch = tracer.watch();
    let deadline = Instant::now() + Duration::from_secs(30);
    while watch.state() == ChildState::Running && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(watch.state(), ChildState::Exited(5));
    drop(tracer);
    assert_eq!(shell.wait().unwrap().code(), Some(5));
}

#[test]
fn a_job_control_stop_stays_a_stop_until_sigcont() {
    if !ptrace_allowed() {
        return;
    }
    let (mut shell, pid) = grandchild("sleep 1");
    let (tracer, _) = Tracer::attach(pid).expect("attach");
    tracer.resume().unwrap();
    let state = || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("State:").map(|v| v.trim().to_owned()))
            .unwrap_or_default()
    };
    let _ = Command::new("kill")
        .args(["-STOP", &pid.to_string()])
        .status();
    // Stopped, and held there (not resumed by the tracer) well past the sleep's own second.
    std::thread::sleep(Duration::from_millis(1500));
    let stopped = state();
    assert!(
        stopped.starts_with('T') || stopped.starts_with('t'),
        "{stopped}"
    );
    assert_eq!(tracer.watch().state(), ChildState::Running);
    let _ = Command::new("kill")
        .args(["-CONT", &pid.to_string()])
        .status();
    let watch = tracer.watch();
    let deadline = Instant::now() + Duration::from_secs(20);
    while watch.state() == ChildState::Running && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        watch.state(),
        ChildState::Exited(0),
        "it went on after SIGCONT"
    );
    drop(tracer);
    assert_eq!(shell.wait().unwrap().code(), Some(0));
}

#[test]
fn a_fatal_signal_is_forwarded_and_published() {
    if !ptrace_allowed() {
        return;
    }
    let (mut shell, pid) = grandchild("sleep 30");
    let (tracer, _) = Tracer::attach(pid).expect("attach");
    tracer.resume().unwrap();
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let watch = tracer.watch();
    let deadline = Instant::now() + Duration::from_secs(20);
    while watch.state() == ChildState::Running && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(watch.state(), ChildState::Signaled(libc::SIGTERM));
    drop(tracer);
    assert_eq!(shell.wait().unwrap().code(), Some(128 + libc::SIGTERM));
}

#[cfg(target_arch = "x86_64")]
#[test]
fn calls_a_function_in_the_process_and_puts_it_back() {
    if !ptrace_allowed() {
        return;
    }
    // `getppid` of the shared libc: the same library file is mapped in both processes, so the function lies
    // at the same offset from the library's base there.
    let (mut shell, pid) = grandchild("sleep 2");
    let local = libc::getppid as *const () as *const u32;
    let entry = crate::linux::memory::remote_address(pid, local)
        .unwrap()
        .expect("the process maps our libc");
    let (tracer, _) = Tracer::attach(pid).expect("attach");
    let before = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
    let parent = tracer
        .call(entry, [0; 6], Duration::from_secs(10))
        .expect("call");
    assert_eq!(parent as u32, shell.id(), "getppid ran inside the process");
    // Twice, to show the thread came back to a state from which a call works again.
    let again = tracer
        .call(entry, [0; 6], Duration::from_secs(10))
        .expect("second call");
    assert_eq!(again, parent);
    let after = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
    assert_eq!(before, after, "the same system call, at the same place");
    tracer.detach().expect("detach");
    // The interrupted sleep goes on to finish normally.
    assert_eq!(shell.wait().unwrap().code(), Some(0));
}

#[cfg(target_arch = "x86_64")]
#[test]
fn a_faulting_call_is_reported_and_the_process_survives() {
    if !ptrace_allowed() {
        return;
    }
    let (mut shell, pid) = grandchild("sleep 1");
    let (tracer, _) = Tracer::attach(pid).expect("attach");
    // Address 8: not mapped, so the "function" faults at its first instruction.
    let r = tracer.call(8, [0; 6], Duration::from_secs(10));
    assert_eq!(
        r,
        Err(TraceError::CallFaulted {
            signal: libc::SIGSEGV,
            pc: 8
        })
    );
    drop(tracer);
    assert_eq!(shell.wait().unwrap().code(), Some(0), "it was put back");
}

#[cfg(target_arch = "x86_64")]
#[test]
fn runs_to_a_breakpoint_whose_trap_never_reaches_the_process() {
    if !ptrace_allowed() || !python3_runs() {
        return;
    }
    // A program that calls libc's `getppid` every few milliseconds, then exits 0.
    let (mut shell, pid) = grandchild(
        "python3 -c 'import os,time;[(os.getppid(),time.sleep(0.002)) for _ in range(1000)]'",
    );
    let local = libc::getppid as *const () as *const u32;
    let entry = crate::linux::memory::remote_address(pid, local)
        .unwrap()
        .expect("the process maps our libc");
    let (tracer, _) = Tracer::attach(pid).expect("attach");
    let first = tracer
        .run_to(entry, Duration::from_secs(10))
        .expect("reached");
    assert_eq!(first, pid, "python calls getppid on its main thread");
    // Stopped right before the instruction, with the code intact: a second run gets there again.
    let second = tracer
        .run_to(entry, Duration::from_secs(10))
        .expect("reached again");
    assert_eq!(second, pid);
    tracer.detach().expect("detach");
    let status = shell.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "no trap reached the program: {status}"
    );
}

#[cfg(target_arch = "x86_64")]
#[test]
fn a_breakpoint_never_reached_times_out_and_is_removed() {
    if !ptrace_allowed() {
        return;
    }
    let (mut shell, pid) = grandchild("sleep 1");
    let local = libc::getppid as *const () as *const u32;
    let entry = crate::linux::memory::remote_address(pid, local)
        .unwrap()
        .expect("the process maps our libc");
    let (tracer, _) = Tracer::attach(pid).expect("attach");
    let code = crate::linux::memory::read_u64(pid, entry).expect("read the code");
    let started = Instant::now();
    let r = tracer.run_to(entry, Duration::from_millis(300));
    assert!(
        matches!(r, Err(TraceError::Timeout { .. })),
        "{r:?} after {:?}",
        started.elapsed()
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(
        crate::linux::memory::read_u64(pid, entry).expect("read the code again"),
        code,
        "the breakpoint was removed"
    );
    drop(tracer);
    assert_eq!(shell.wait().unwrap().code(), Some(0));
}

#[test]
fn a_missing_process_is_refused() {
    let r = Tracer::attach(u32::MAX / 2);
    assert!(matches!(r, Err(TraceError::System(_))), "{r:?}");
}
