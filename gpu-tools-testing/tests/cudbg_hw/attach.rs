//! Attaching the debugger API to running CUDA processes, on a real GPU (feature `nvidia-hw-tests`). Debuggees are
//! this crate's `debuggee_kernels` example, started through `sh` so that they are not children of the test (an
//! attached process usually is not). Each test runs in a child process of its own (`gpu_tools_testing::own_process`), and
//! prints every attach step, event and value it looks at, so one run on the GPU host tells what happened.
//!
//! The two-GPU tests are `#[ignore]`d: run them on a host with two GPUs with `--ignored`. On fewer GPUs they fail
//! with "needs 2 GPUs, found N".
#![cfg(feature = "nvidia-hw-tests")]

use gpu_tools_testing::cudbg as common;
use gpu_tools_testing::own_process;

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{example, one_session};
use gpu_tools::cudbg::{
    AttachError, AttachProtocol, AttachStep, DebugSession, Event, KernelReady, KernelType,
    NoCudaReason, SessionError,
};
use gpu_tools_testing::gpu_tools_cli;

/// A debuggee started by `sh`, its stdout lines arriving on a channel.
struct Debuggee {
    shell: Child,
    pid: u32,
    lines: mpsc::Receiver<String>,
}

impl Debuggee {
    fn start(args: &[&str]) -> Self {
        let mut shell = Command::new("sh")
            .arg("-c")
            .arg(r#""$0" "$@" & echo "PID $!"; wait $!"#)
            .arg(example("debuggee_kernels"))
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start sh");
        let out = shell.stdout.take().expect("pipe");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                eprintln!("debuggee> {line}");
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let first = lines
            .recv_timeout(Duration::from_secs(30))
            .expect("the shell prints the pid");
        let pid = first
            .strip_prefix("PID ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {first}"));
        Debuggee { shell, pid, lines }
    }

    /// The next line that starts with `prefix` (others are skipped).
    fn line_starting(&self, prefix: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => return l,
                Ok(_) => {}
                Err(e) => panic!("no line starting with {prefix:?}: {e}"),
            }
        }
    }

    /// Every line that has arrived so far.
    fn lines_so_far(&self) -> Vec<String> {
        self.lines.try_iter().collect()
    }

    /// Waits for the debuggee to end (the shell reports its status: 128 + N for signal N), at most 2 minutes: a
    /// test that went wrong must not wait for a long loop to run out (the debuggee is then killed, and the test
    /// fails).
    fn finish(mut self) -> (i32, Vec<String>) {
        let deadline = Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(status) = self.shell.try_wait().expect("wait for sh") {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "debuggee {} still runs after 2 minutes",
                self.pid
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let rest: Vec<String> = self.lines.iter().collect();
        (status.code().unwrap_or(-1), rest)
    }
}

impl Drop for Debuggee {
    fn drop(&mut self) {
        if self.shell.try_wait().ok().flatten().is_none() {
            let _ = Command::new("kill")
                .args(["-KILL", &self.pid.to_string()])
                .status();
            let _ = self.shell.wait();
        }
    }
}

/// `KEY value` fields of a debuggee line, hexadecimal or decimal.
fn field(line: &str, key: &str) -> u64 {
    let mut words = line.split_whitespace();
    while let Some(w) = words.next() {
        if w == key {
            let v = words.next().unwrap_or_else(|| panic!("{key} in {line}"));
            return match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
                None => v.parse().unwrap(),
            };
        }
    }
    panic!("no {key} in {line}")
}

fn app_kernel(e: &Event) -> Option<KernelReady> {
    match e {
        Event::KernelReady(k) if k.kernel_type == KernelType::Application => Some(*k),
        _ => None,
    }
}

/// Attach steps, recorded and printed as they come.
fn recorder() -> (
    Arc<Mutex<Vec<AttachStep>>>,
    impl FnMut(&AttachStep) + Send + 'static,
) {
    let steps = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&steps);
    (steps, move |s: &AttachStep| {
        eprintln!("attach step: {s}");
        record.lock().unwrap().push(s.clone());
    })
}

/// A field of `/proc/<id>/status`.
fn status_field(id: u32, name: &str) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{id}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(u32::MAX)
}

/// The process tracing `pid` (0: none); the kernel names the tracing thread.
fn tracer_of(pid: u32) -> u32 {
    match status_field(pid, "TracerPid") {
        0 => 0,
        thread => status_field(thread, "Tgid"),
    }
}

/// Each thread of `pid`: its state letter and where in the kernel it waits (for a failure's message).
fn thread_states(pid: u32) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return vec!["gone".into()];
    };
    tasks
        .flatten()
        .map(|t| {
            let read = |f: &str| std::fs::read_to_string(t.path().join(f)).unwrap_or_default();
            let stat = read("stat");
            let state = stat
                .rsplit(") ")
                .next()
                .and_then(|r| r.split(' ').next())
                .unwrap_or("?");
            format!(
                "{}:{}:{}:{}",
                t.file_name().to_string_lossy(),
                read("comm").trim(),
                state,
                read("wchan")
            )
        })
        .collect()
}

fn cuda_where(pid: u32) -> (i32, String, String) {
    let out = Command::new(gpu_tools_cli())
        .args(["where", &pid.to_string(), "--verbose"])
        .output()
        .expect("run gpu-tools where");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    eprintln!(
        "gpu-tools where {pid} exited {:?}\n--- stdout\n{stdout}--- stderr\n{stderr}---",
        out.status
    );
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

#[test]
fn attach_mid_loop_sees_launches_reads_memory_sets_a_breakpoint_and_detaches() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    const ROUNDS: u64 = 400;
    let debuggee = Debuggee::start(&["loop", &ROUNDS.to_string(), "25"]);
    let pid = debuggee.pid;
    let first = debuggee.line_starting("ITER 20 ", Duration::from_secs(60));
    let addr = field(&first, "ADDR");
    let (steps, record) = recorder();
    let t0 = Instant::now();
    let mut s = DebugSession::attach_builder(pid)
        .progress(record)
        .start()
        .unwrap_or_else(|e| panic!("attach to {pid}: {e}"));
    eprintln!("attached in {:?}; api {}", t0.elapsed(), s.api_version());
    assert!(s.is_attached());
    assert_eq!(tracer_of(pid), std::process::id(), "traced by this process");
    {
        let steps = steps.lock().unwrap();
        // The inferior call on drivers without the attach descriptor (580), the descriptor on those with it.
        assert!(
            steps.iter().any(|s| matches!(
                s,
                AttachStep::AttachCalled {
                    internal_error: 0,
                    ..
                } | AttachStep::AttachProcedureFinished {
                    internal_error: 0,
                    ..
                }
            )),
            "{steps:?}"
        );
        assert!(
            matches!(steps.last(), Some(AttachStep::Attached { .. })),
            "{steps:?}"
        );
    }
    let devices = s.devices().expect("devices");
    eprintln!("devices: {devices:?}");
    assert!(!devices.is_empty());

    // A second session in this process is refused; so is a second debugger from another process.
    let again = DebugSession::attach(pid).unwrap_err();
    eprintln!("second attach here: {again}");
    assert!(
        matches!(
            again,
            gpu_tools::Error::Session(SessionError::AlreadyActive)
        ),
        "{again}"
    );
    let (code, _, stderr) = cuda_where(pid);
    assert_eq!(code, 1);
    assert!(
        stderr.contains(&format!("already traced by process {}", std::process::id())),
        "{stderr}"
    );

    // The next launches arrive as events, each held until acknowledged; the buffer holds what the debuggee said.
    let mut launches: Vec<KernelReady> = Vec::new();
    let mut all = Vec::new();
    let mut checked_memory = false;
    let mut breakpoint: Option<KernelReady> = None;
    while launches.len() < 5 {
        let batch = s
            .next_batch(Some(Duration::from_secs(30)))
            .expect("events")
            .expect("the debuggee runs");
        all.extend(batch.events().iter().copied());
        let Some((queue, k)) = batch
            .events()
            .iter()
            .find_map(|(q, e)| app_kernel(e).map(|k| (*q, k)))
        else {
            continue;
        };
        launches.push(k);
        if launches.len() == 3 {
            // The launch is held: the line the debuggee printed just before it tells what the buffer holds.
            std::thread::sleep(Duration::from_millis(200));
            let printed = debuggee
                .lines_so_far()
                .into_iter()
                .rfind(|l| l.starts_with("ITER "))
                .expect("an ITER line before the held launch");
            let expect = field(&printed, "VALUE") as u32;
            let dev = batch.session().suspend(k.dev).expect("suspend");
            let mut word = [0u8; 4];
            dev.read_global(addr, &mut word).expect("read");
            let seen = u32::from_le_bytes(word);
            eprintln!(
                "held launch grid {} after {printed:?}: buffer[0] = {seen:#x}",
                k.grid_id
            );
            assert_eq!(seen, expect, "{printed}");
            dev.resume().expect("resume");
            checked_memory = true;
        }
        if launches.len() == 4 {
            batch
                .session()
                .set_breakpoint(k.dev, k.function_entry)
                .expect("set breakpoint");
            breakpoint = Some(k);
            drop(batch);
            // Events before the stop (the launch's context pop) are taken and acknowledged as they come.
            let Some(stopped) = s
                .wait_for_stop(k.dev, Duration::from_secs(30), |b| {
                    all.extend(b.events().iter().copied())
                })
                .expect("poll")
                .stopped()
            else {
                // Say what the driver reported instead, and where the warps stand.
                let later: Vec<_> = match s.next_batch(Some(Duration::from_secs(3))) {
                    Ok(Some(b)) => b.events().iter().map(|(_, e)| e.name()).collect(),
                    other => vec![if other.is_ok() { "ended" } else { "no event" }],
                };
                let warps = s.suspend(k.dev).and_then(|d| d.warps());
                panic!(
                    "no warp stopped at the breakpoint at {:#x} within 30 s; events since: {later:?}; warps: {warps:?}; \
                     threads: {:?}; last line: {:?}",
                    k.function_entry,
                    thread_states(pid),
                    debuggee.lines_so_far().last()
                );
            };
            let warps = stopped.warps().expect("warps");
            eprintln!("stopped warps: {warps:?}");
            let broken: Vec<_> = warps.iter().filter(|w| w.broken).collect();
            assert!(!broken.is_empty(), "{warps:?}");
            // In an attached session driver 580 applied the breakpoint from the launch after the held one (its
            // KERNEL_READY came on the sync queue; seen on an H100 and an H200), where a launched session's
            // breakpoint stops the held launch itself.
            eprintln!(
                "breakpoint set at the KERNEL_READY of grid {} ({queue:?} queue)",
                k.grid_id
            );
            for w in &broken {
                assert_eq!(w.pc, k.function_entry);
                assert!((k.grid_id..=k.grid_id + 1).contains(&w.grid_id), "{w:?}");
            }
            let info = stopped.grid(broken[0].grid_id).expect("grid info");
            eprintln!("grid info: {info:?}");
            assert_eq!((info.dev, info.function_entry), (k.dev, k.function_entry));
            stopped
                .session()
                .unset_breakpoint(k.dev, k.function_entry)
                .expect("unset");
            stopped.resume().expect("resume");
        }
    }
    let names: Vec<&str> = all.iter().map(|(_, e)| e.name()).collect();
    eprintln!("events after the attach: {names:?}");
    assert!(checked_memory && breakpoint.is_some());
    for k in &launches {
        assert_eq!((k.grid_dim.x, k.block_dim.x), (2, 32), "{k:?}");
    }
    assert!(launches.windows(2).all(|w| w[0].grid_id < w[1].grid_id));

    let closed = s.close().expect("detach");
    eprintln!(
        "closed: {} events left, exit {:?}",
        closed.events.len(),
        closed.exit
    );
    assert!(closed.exit.is_none(), "still running after the detach");
    {
        let steps = steps.lock().unwrap();
        // The default detach leaves out the in-process cudbgApiDetach() call (driver 580 crashes a process at
        // exit after it when the process released its last context, as this debuggee does).
        assert!(
            steps
                .iter()
                .any(|s| matches!(s, AttachStep::DetachCallLeftOut { .. })),
            "{steps:?}"
        );
        assert!(
            matches!(steps.last(), Some(AttachStep::Detached)),
            "{steps:?}"
        );
    }
    assert_eq!(tracer_of(pid), 0, "no longer traced");
    let (code, rest) = debuggee.finish();
    let result = rest
        .iter()
        .find(|l| l.starts_with("ok "))
        .unwrap_or_else(|| panic!("no result line in {rest:?}"));
    assert_eq!(code, 0, "{rest:?}");
    assert_eq!(field(result, "RESULT"), 0x1000 + ROUNDS, "{result}");
}

#[test]
fn refused_attaches_leave_the_process_as_it_was() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let refusal = |pid: u32| -> AttachError {
        match DebugSession::attach(pid) {
            Err(gpu_tools::Error::Session(SessionError::Attach(e))) => {
                eprintln!("attach {pid}: {e}");
                e
            }
            Err(other) => panic!("attach {pid}: not an attach error: {other}"),
            Ok(_) => panic!("attach {pid} succeeded"),
        }
    };
    assert!(matches!(
        refusal(std::process::id()),
        AttachError::OwnProcess
    ));
    // Beyond the largest pid Linux hands out.
    assert!(matches!(
        refusal(0x7fff_fff0),
        AttachError::NoSuchProcess(_)
    ));
    let mut child = common::debuggee(&["nocuda", "10"]).spawn().unwrap();
    assert!(matches!(refusal(child.id()), AttachError::OwnChild(_)));
    child.kill().unwrap();
    child.wait().unwrap();

    let plain = Debuggee::start(&["nocuda", "3"]);
    plain.line_starting("no cuda", Duration::from_secs(30));
    let e = refusal(plain.pid);
    assert!(
        matches!(
            e,
            AttachError::NoCuda {
                why: NoCudaReason::LibcudaNotMapped,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(tracer_of(plain.pid), 0);
    assert_eq!(plain.finish().0, 0, "ran on to its end");

    let loaded = Debuggee::start(&["loaded", "3"]);
    loaded.line_starting("loaded", Duration::from_secs(30));
    let e = refusal(loaded.pid);
    assert!(
        matches!(
            e,
            AttachError::NoCuda {
                why: NoCudaReason::DriverNotInitialised,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(loaded.finish().0, 0, "ran on to its end");

    // A program that runs under a session of this process already has a debugger client: another process's
    // attach is refused before it changes anything.
    let mut launched =
        DebugSession::start(common::debuggee(&["loop", "60", "20"])).expect("launch");
    let pid = launched.pid();
    drop(
        launched
            .next_batch(Some(Duration::from_secs(60)))
            .expect("events"),
    );
    let (code, _, stderr) = cuda_where(pid);
    assert_eq!(code, 1);
    assert!(
        stderr.contains(&format!(
            "already has a CUDA debugger client (process {})",
            std::process::id()
        )),
        "{stderr}"
    );
    let events = common::collect_all(&mut launched);
    assert!(events.iter().filter_map(|(_, e)| app_kernel(e)).count() > 0);
    assert!(launched.exit_status().unwrap().expect("ended").success());
    drop(launched);

    // After all that, attaching works in this process.
    let fine = Debuggee::start(&["loop", "200", "20"]);
    fine.line_starting("ITER 5 ", Duration::from_secs(60));
    let s = DebugSession::attach(fine.pid).expect("attach after the refusals");
    s.close().expect("detach");
    assert_eq!(fine.finish().0, 0);
}

/// Attaches to a looping debuggee and kills it with SIGKILL when the attach reaches `step`.
fn attach_and_kill_at(step: fn(&AttachStep) -> bool) -> (gpu_tools::Error, i32) {
    let debuggee = Debuggee::start(&["loop", "100000", "5"]);
    debuggee.line_starting("ITER 10 ", Duration::from_secs(60));
    let pid = debuggee.pid;
    let err = DebugSession::attach_builder(pid)
        .progress(move |s| {
            eprintln!("attach step: {s}");
            if step(s) {
                eprintln!("killing {pid}");
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
        })
        .start()
        .map(|_| ())
        .expect_err("the process died during the attach");
    eprintln!("attach error: {err}");
    // Killed at the step, it has ended; if the attach failed before that step, it still runs: end it (the
    // caller's assertions on the error and the exit status then fail and say why).
    let _ = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
    let (code, _) = debuggee.finish();
    (err, code)
}

#[test]
fn a_process_killed_before_the_attach_call_is_a_typed_error_and_the_driver_stays_usable() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let (err, code) = attach_and_kill_at(|s| matches!(s, AttachStep::Stopped { .. }));
    match &err {
        gpu_tools::Error::Session(SessionError::Attach(AttachError::Exited { status, .. })) => {
            assert_eq!(status.and_then(|s| s.signal()), Some(9), "{err}");
        }
        other => panic!("{other}"),
    }
    assert_eq!(code, 128 + 9);
    // Nothing had connected to the driver: another session can attach.
    let fine = Debuggee::start(&["loop", "200", "20"]);
    fine.line_starting("ITER 5 ", Duration::from_secs(60));
    DebugSession::attach(fine.pid)
        .expect("attach after the failed one")
        .close()
        .expect("detach");
    assert_eq!(fine.finish().0, 0);
}

#[test]
fn a_process_killed_after_the_attach_call_is_a_typed_error_without_further_driver_calls() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let (err, code) = attach_and_kill_at(|s| matches!(s, AttachStep::AttachCalled { .. }));
    assert!(
        matches!(
            err,
            gpu_tools::Error::Session(SessionError::Attach(AttachError::Exited { .. }))
        ),
        "{err}"
    );
    assert_eq!(code, 128 + 9);
    // Its driver side had connected: as for a launched program that dies from a signal, the driver's debugger
    // side is not called again in this process.
    let next = Debuggee::start(&["loop", "50", "20"]);
    next.line_starting("ITER 1 ", Duration::from_secs(60));
    let e = DebugSession::attach(next.pid).unwrap_err();
    assert!(
        matches!(e, gpu_tools::Error::Session(SessionError::DebuggerUnusable)),
        "{e}"
    );
    assert_eq!(next.finish().0, 0, "left alone");
}

#[test]
fn cuda_where_shows_a_hung_kernel_and_leaves_it_running() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let debuggee = Debuggee::start(&["spin", "15"]);
    debuggee.line_starting("SPIN FLAG", Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(1));
    let (code, stdout, _) = cuda_where(debuggee.pid);
    assert_eq!(code, 0);
    assert!(stdout.contains("kernels running"), "{stdout}");
    assert!(
        stdout.contains("spin_wait(unsigned int*, unsigned long long) grid (2,1,1) block (64,1,1)"),
        "{stdout}"
    );
    let warp_lines: Vec<&str> = stdout.lines().filter(|l| l.contains(" pc 0x")).collect();
    assert!(!warp_lines.is_empty(), "{stdout}");
    assert!(
        warp_lines
            .iter()
            .all(|l| l.contains("in spin_wait(unsigned int*, unsigned long long)")),
        "{stdout}"
    );
    assert!(stdout.contains("detached"), "{stdout}");
    let (code, rest) = debuggee.finish();
    assert_eq!(code, 0, "{rest:?}");
    assert!(rest.iter().any(|l| l == "ok spin"), "{rest:?}");
}

/// The driver's attach descriptor (drivers of CUDA 13.1 on). Without it: a typed `Unsupported` before anything in
/// the process changed, and the process runs on. With it: attached without a call into the process, and after
/// the detach the program finishes with exit code 0.
#[test]
fn the_drivers_attach_descriptor_where_it_has_one() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let debuggee = Debuggee::start(&["loop", "200", "20"]);
    let pid = debuggee.pid;
    debuggee.line_starting("ITER 10 ", Duration::from_secs(60));
    let (steps, record) = recorder();
    let attached = DebugSession::attach_builder(pid)
        .protocol(AttachProtocol::Descriptor)
        .progress(record)
        .start();
    let steps = steps.lock().unwrap().clone();
    match attached {
        Err(gpu_tools::Error::Session(SessionError::Attach(AttachError::Unsupported(why)))) => {
            eprintln!("this driver has no attach descriptor: {why}");
            assert!(
                !steps.iter().any(|s| matches!(s, AttachStep::Wrote { .. })),
                "nothing written: {steps:?}"
            );
            assert_eq!(tracer_of(pid), 0, "let go");
        }
        Err(e) => panic!("attach to {pid} by the descriptor: {e}"),
        Ok(mut s) => {
            assert!(
                steps.iter().any(|s| matches!(
                    s,
                    AttachStep::AttachProcedureFinished {
                        internal_error: 0,
                        ..
                    }
                )),
                "{steps:?}"
            );
            assert!(
                !steps
                    .iter()
                    .any(|s| matches!(s, AttachStep::AttachCalled { .. })),
                "{steps:?}"
            );
            let batch = s
                .next_batch(Some(Duration::from_secs(10)))
                .expect("events")
                .expect("running");
            eprintln!("{} events after the attach", batch.events().len());
            drop(batch);
            let closed = s.close().expect("detach");
            assert!(closed.exit.is_none(), "still running");
        }
    }
    let (code, rest) = debuggee.finish();
    assert_eq!(code, 0, "{rest:?}");
    assert!(rest.iter().any(|l| l.starts_with("ok ")), "{rest:?}");
}

fn need_two_gpus() {
    let found = gpu_tools::cuda::Driver::load()
        .ok()
        .and_then(|d| d.device_count().ok())
        .unwrap_or(0);
    assert!(found >= 2, "needs 2 GPUs, found {found}");
}

#[test]
#[ignore = "needs 2 GPUs: run with --ignored on a two-GPU host"]
fn two_gpus_launch_events_carry_their_device() {
    if !own_process() {
        return;
    }
    need_two_gpus();
    let _one = one_session();
    let mut s = DebugSession::start(common::debuggee(&["two-gpus", "3"])).expect("session");
    let devices = s.devices().expect("devices");
    eprintln!("devices: {devices:?}");
    assert!(devices.len() >= 2);
    let events = common::collect_all(&mut s);
    let launches: Vec<KernelReady> = events.iter().filter_map(|(_, e)| app_kernel(e)).collect();
    eprintln!("launches: {launches:?}");
    let mut devs: Vec<u32> = launches.iter().map(|k| k.dev).collect();
    devs.sort();
    assert_eq!(devs, vec![0, 1], "one spin_wait per device");
    assert!(s.exit_status().unwrap().expect("ended").success());
}

#[test]
#[ignore = "needs 2 GPUs: run with --ignored on a two-GPU host"]
fn two_gpus_attached_warps_and_memory_belong_to_their_device() {
    if !own_process() {
        return;
    }
    need_two_gpus();
    let _one = one_session();
    let debuggee = Debuggee::start(&["two-gpus", "20"]);
    let a = debuggee.line_starting("DEV ", Duration::from_secs(60));
    let b = debuggee.line_starting("DEV ", Duration::from_secs(60));
    let buffers: Vec<(u64, u64, u64)> = [a, b]
        .iter()
        .map(|l| (field(l, "DEV"), field(l, "ADDR"), field(l, "PATTERN")))
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    let (_steps, record) = recorder();
    let mut s = DebugSession::attach_builder(debuggee.pid)
        .progress(record)
        .start()
        .expect("attach");
    let mut replayed = Vec::new();
    while let Ok(Some(batch)) = s.next_batch(Some(Duration::from_millis(500))) {
        replayed.extend(batch.events().iter().map(|(_, e)| *e));
    }
    eprintln!("events while attaching: {replayed:?}");
    let devices = s.devices().expect("devices");
    eprintln!("devices: {devices:?}");
    assert!(devices.len() >= 2);
    let mut contexts = Vec::new();
    for dev in 0..2u32 {
        let guard = s.suspend(dev).expect("suspend");
        let warps = guard.warps().expect("warps");
        let mut grids: Vec<u64> = warps.iter().map(|w| w.grid_id).collect();
        grids.sort();
        grids.dedup();
        eprintln!("device {dev}: {} warps, grids {grids:?}", warps.len());
        assert!(!warps.is_empty(), "device {dev} runs a kernel");
        for g in &grids {
            let info = guard.grid(*g).expect("grid info");
            eprintln!("device {dev} grid {g}: {info:?}");
            assert_eq!(info.dev, dev, "grid {g} is reported on its own device");
            contexts.push((dev, info.context));
        }
        // Each device's buffer holds that device's pattern.
        for (d, addr, pattern) in &buffers {
            let mut word = [0u8; 4];
            guard.read_global(*addr, &mut word).expect("read");
            let seen = u32::from_le_bytes(word);
            eprintln!("via device {dev}: buffer of device {d} at {addr:#x} = {seen:#x}");
            assert_eq!(u64::from(seen), *pattern, "device {d}'s buffer");
        }
        guard.resume().expect("resume");
    }
    // Two threads, two contexts: the grids of device 0 and device 1 belong to different contexts.
    let on = |d: u32| {
        contexts
            .iter()
            .filter(move |(dev, _)| *dev == d)
            .map(|(_, c)| *c)
    };
    assert!(on(0).all(|c| on(1).all(|c1| c1 != c)), "{contexts:x?}");
    s.close().expect("detach");
    let (code, rest) = debuggee.finish();
    assert_eq!(code, 0, "{rest:?}");
    assert!(rest.iter().any(|l| l == "ok two-gpus"), "{rest:?}");
}

/// Runs `gpu-tools trace --list --attach PID` (the debugger backend; every launch listed) with its output on a
/// channel.
fn cuda_trace_attached(pid: u32) -> (Child, mpsc::Receiver<String>) {
    let mut trace = Command::new(gpu_tools_cli())
        .args(["trace", "--list", "--attach", &pid.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run gpu-tools trace");
    let out = trace.stdout.take().expect("pipe");
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            eprintln!("cuda_trace> {line}");
            if send.send(line).is_err() {
                break;
            }
        }
    });
    (trace, lines)
}

#[test]
fn cuda_trace_attach_prints_launches_and_detaches_on_ctrl_c() {
    if !own_process() {
        return;
    }
    let debuggee = Debuggee::start(&["loop", "300", "20"]);
    debuggee.line_starting("ITER 10 ", Duration::from_secs(60));
    let (mut trace, lines) = cuda_trace_attached(debuggee.pid);
    let mut launches = 0;
    while launches < 5 {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("cuda_trace prints launches");
        launches += usize::from(line.starts_with("launch grid") && line.contains("add_one"));
    }
    let _ = Command::new("kill")
        .args(["-INT", &trace.id().to_string()])
        .status();
    let status = trace.wait().expect("cuda_trace ends");
    let rest: Vec<String> = lines.iter().collect();
    assert_eq!(status.code(), Some(0), "{rest:?}");
    assert!(
        rest.iter().any(|l| l.starts_with("--- summary")),
        "{rest:?}"
    );
    assert!(rest.iter().any(|l| l.contains("add_one")), "{rest:?}");
    assert_eq!(tracer_of(debuggee.pid), 0, "detached");
    let (code, out) = debuggee.finish();
    assert_eq!(code, 0, "{out:?}");
    assert!(out.iter().any(|l| l.starts_with("ok 300 ")), "{out:?}");
}

#[test]
fn cuda_trace_attach_ends_with_the_process_and_its_exit_code() {
    if !own_process() {
        return;
    }
    let debuggee = Debuggee::start(&["loop", "150", "20"]);
    debuggee.line_starting("ITER 10 ", Duration::from_secs(60));
    let (mut trace, lines) = cuda_trace_attached(debuggee.pid);
    let status = trace.wait().expect("cuda_trace ends");
    let all: Vec<String> = lines.iter().collect();
    assert_eq!(status.code(), Some(0), "{all:?}");
    let launched = all
        .iter()
        .filter(|l| l.starts_with("launch grid") && l.contains("add_one"))
        .count();
    eprintln!("{launched} launches traced after the attach");
    assert!(launched > 0 && launched < 150, "{all:?}");
    assert!(all.iter().any(|l| l.starts_with("--- summary")), "{all:?}");
    let (code, out) = debuggee.finish();
    assert_eq!(code, 0, "{out:?}");
}
