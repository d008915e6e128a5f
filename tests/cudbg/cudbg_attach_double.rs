//! The attach route end to end without a GPU: the session attaches to a real process (ptrace, the variables, the
//! call of `cudbgApiAttach` inside it) whose `libcuda.so.1` is the C double `gpu-tools-testing/doubles/cudbg_attach.c`, which
//! also plays the driver's debugger side in this process. The debuggee is this test binary run again; its
//! `/dev/nvidiactl` is a file on a tmpfs in a mount namespace of its own (`unshare`), since the attach requires the
//! driver's control device to be open. Skipped, with a message, where `unshare` or ptrace is not permitted.
#![cfg(feature = "cudbg")]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gpu_tools::cudbg::{
    AttachError, AttachProtocol, AttachStep, DebugSession, DebuggerLibrary, DetachProcedure, Event,
    NoCudaReason, SessionError,
};
use gpu_tools::sys::cudbg::CUDBGAPI_st;
use gpu_tools_testing::skip_unless_ci;

const TARGET: &str = "GPU_TOOLS_ATTACH_DOUBLE_TARGET";

pub(super) fn double_copy() -> PathBuf {
    // The attach finds libcuda by its file name: the double is copied under that name.
    let dir = std::env::temp_dir().join(format!("gpu-tools-attach-double-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("libcuda.so.1");
    if !copy.exists() {
        let built = gpu_tools_testing::double_path("cudbg_attach");
        std::fs::copy(&built, &copy).unwrap_or_else(|e| panic!("{}: {e}", built.display()));
    }
    copy
}

fn release_file(pid: u32) -> PathBuf {
    std::env::temp_dir().join(format!("gpu-tools-attach-double-release.{pid}"))
}

/// The debuggee: loads the double, holds a "control device" open, says READY, waits to be released, then prints
/// the double's variables as they ended up.
fn be_the_target(lib: &str) {
    // SAFETY: the double has no initialisers; its symbols are read as the plain integers it defines.
    let lib = unsafe { libloading::Library::new(lib) }.expect("load the double");
    let _ctl = std::fs::File::open("/dev/nvidiactl").expect("the namespace's control device");
    println!("READY");
    std::io::stdout().flush().unwrap();
    let release = release_file(std::process::id());
    let deadline = Instant::now() + Duration::from_secs(60);
    while !release.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = std::fs::remove_file(&release);
    let var = |name: &str| -> u64 {
        let mut symbol = name.as_bytes().to_vec();
        symbol.push(0);
        // SAFETY: the double defines these as uint32_t (the error code as uint64_t).
        unsafe {
            let p = *lib.get::<*const u32>(&symbol).expect(name);
            if name == "cudbgReportedDriverInternalErrorCode" {
                p.cast::<u64>().read_volatile()
            } else {
                u64::from(p.read_volatile())
            }
        }
    };
    let names = [
        "cudbgApiClientPid",
        "cudbgApiClientRevision",
        "cudbgSessionId",
        "cudbgRpcEnabled",
        "cudbgIpcFlag",
        "cudbgDebuggerInitialized",
        "cudbgDebuggerCapabilities",
        "cudbgReportedDriverInternalErrorCode",
    ];
    let vars: Vec<String> = names.iter().map(|n| format!("{n}={}", var(n))).collect();
    println!("VARS {}", vars.join(" "));
}

struct Target {
    shell: Child,
    pid: u32,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Target {
    /// This test binary as the debuggee, in a mount namespace of its own, as a grandchild (not a child).
    /// `env`: variables for the double in the debuggee (`DBL_CUDBG_REFUSE`, `DBL_CUDBG_FD_ATTACH`).
    fn start(lib: &Path, env: &[(&str, &str)]) -> Option<Self> {
        let exe = std::env::current_exe().unwrap();
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "sh", "-c"])
            .arg(
                r#"mount -t tmpfs tmpfs /dev && mknod -m 666 /dev/null c 1 3 && : > /dev/nvidiactl && { "$0" "$@" & echo "PID $!"; wait $!; }"#,
            )
            .arg(exe)
            .args([
                "cudbg_attach_double::the_target",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(TARGET, lib)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd.envs(env.iter().copied());
        let mut shell = match cmd.spawn() {
            Ok(shell) => shell,
            Err(e) => {
                skip_unless_ci(&format!("unshare cannot run here: {e}"));
                return None;
            }
        };
        let out = shell.stdout.take().unwrap();
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                eprintln!("target> {line}");
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        // The shell's "PID N", which the debuggee's own first output (the test harness's) can come before, even on
        // the same line: it starts in the background before the shell echoes its pid.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut before = Vec::new();
        let mut pid = None;
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            let Ok(line) = lines.recv_timeout(left) else {
                break;
            };
            // Anywhere in the line: the harness's "test ... " may have come first on it, without its newline.
            let pid_here = line
                .find("PID ")
                .and_then(|at| line[at + 4..].split_whitespace().next())
                .and_then(|p| p.parse().ok());
            if let Some(p) = pid_here {
                pid = Some(p);
                break;
            }
            before.push(line);
        }
        let first = before.first().cloned();
        let Some(pid) = pid else {
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(shell.stderr.as_mut().unwrap(), &mut err);
            skip_unless_ci(&format!(
                "cannot make a mount namespace here ({first:?}, {err})"
            ));
            let _ = shell.kill();
            let _ = shell.wait();
            return None;
        };
        let target = Target { shell, pid, lines };
        // Its READY may have come before the pid too.
        if !before.iter().any(|l| l.contains("READY")) {
            target.line_starting("READY");
        }
        Some(target)
    }

    fn line_starting(&self, prefix: &str) -> String {
        loop {
            let l = self
                .lines
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|e| panic!("no {prefix} line: {e}"));
            // The test harness may have printed "test the_target ... " on the same line.
            if let Some(at) = l.find(prefix) {
                return l[at..].to_owned();
            }
        }
    }

    /// Lets the debuggee end and returns its variables and exit code.
    fn finish(mut self) -> (String, Option<i32>) {
        std::fs::write(release_file(self.pid), b"").unwrap();
        let vars = self.line_starting("VARS");
        let status = self.shell.wait().unwrap();
        (vars, status.code())
    }
}

fn tracer_of(pid: u32) -> u32 {
    let field = |id: u32, name: &str| -> Option<u32> {
        std::fs::read_to_string(format!("/proc/{id}/status"))
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))?
            .trim()
            .parse()
            .ok()
    };
    match field(pid, "TracerPid") {
        Some(0) | None => 0,
        Some(thread) => field(thread, "Tgid").unwrap_or(thread),
    }
}

#[test]
#[ignore = "the debuggee, run by attach_and_detach_through_the_double"]
fn the_target() {
    // Only the re-run debuggee does anything here.
    if let Ok(lib) = std::env::var(TARGET) {
        be_the_target(&lib);
    }
}

#[test]
fn attach_and_detach_through_the_double() {
    if std::env::var_os(TARGET).is_some() {
        return;
    }
    let lib = double_copy();
    DebuggerLibrary::load_from(&lib).expect("the double loads as the driver");
    // The double's debugger table: the slots the session uses, by their offset in the 13.0 layout.
    let slots: [u64; 9] = [
        std::mem::offset_of!(CUDBGAPI_st, initialize),
        std::mem::offset_of!(CUDBGAPI_st, finalize),
        std::mem::offset_of!(CUDBGAPI_st, setNotifyNewEventCallback),
        std::mem::offset_of!(CUDBGAPI_st, getNextEvent),
        std::mem::offset_of!(CUDBGAPI_st, acknowledgeSyncEvents),
        std::mem::offset_of!(CUDBGAPI_st, requestCleanupOnDetach),
        std::mem::offset_of!(CUDBGAPI_st, getNumDevices),
        std::mem::offset_of!(CUDBGAPI_st, clearAttachState),
        std::mem::offset_of!(CUDBGAPI_st, setKernelLaunchNotificationMode),
    ]
    .map(|o| (o / 8) as u64);
    // SAFETY: the same file the crate loaded (dlopen returns that copy); `dbl_cudbg_install` reads 9 integers.
    unsafe {
        let handle = libloading::Library::new(&lib).unwrap();
        let install = handle
            .get::<unsafe extern "C" fn(*const u64)>(b"dbl_cudbg_install\0")
            .unwrap();
        install(slots.as_ptr());
        std::mem::forget(handle);
    }
    let me = std::process::id();
    remove_markers();

    // The driver refuses: the error names its code, and the variables written are put back.
    let Some(refused) = Target::start(&lib, &[("DBL_CUDBG_REFUSE", "0x29")]) else {
        return;
    };
    // The double publishes no attach-procedure descriptor here (-1, as a driver that is not initialised yet
    // does): the inferior call is asked for explicitly.
    match DebugSession::attach_builder(refused.pid)
        .protocol(AttachProtocol::InferiorCall)
        .start()
    {
        Err(gpu_tools::Error::Session(SessionError::Attach(AttachError::DriverRefused {
            code,
            ..
        }))) => assert_eq!(code, 0x29),
        Err(gpu_tools::Error::Session(SessionError::Attach(AttachError::PermissionDenied {
            detail,
            ..
        }))) => {
            skip_unless_ci(&format!("ptrace is not permitted here ({detail})"));
            return;
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("the refusing double was attached"),
    }
    assert_eq!(tracer_of(refused.pid), 0, "let go");
    let (vars, code) = refused.finish();
    assert_eq!(code, Some(0), "{vars}");
    assert!(
        vars.contains("cudbgApiClientPid=0 ") && vars.contains("cudbgRpcEnabled=0 "),
        "put back: {vars}"
    );
    // Every variable the attach wrote is back, the driver's error code (41 after the call) included.
    assert!(
        vars.contains("cudbgReportedDriverInternalErrorCode=0"),
        "{vars}"
    );

    // The driver accepts.
    let target = Target::start(&lib, &[]).expect("a namespace was made before");
    let steps = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&steps);
    let mut session = DebugSession::attach_builder(target.pid)
        .protocol(AttachProtocol::InferiorCall)
        .capabilities(8)
        .progress(move |s| {
            eprintln!("attach step: {s}");
            record.lock().unwrap().push(s.clone());
        })
        .start()
        .expect("attach");
    assert!(session.is_attached());
    assert_eq!(session.pid(), target.pid);
    assert_eq!(tracer_of(target.pid), me, "traced while attached");
    assert_eq!(session.device_count().unwrap(), 1);
    {
        let steps = steps.lock().unwrap();
        let has = |f: &dyn Fn(&AttachStep) -> bool| steps.iter().any(f);
        assert!(has(
            &|s| matches!(s, AttachStep::Stopped { threads } if *threads >= 1)
        ));
        assert!(has(
            &|s| matches!(s, AttachStep::Wrote { name: "cudbgApiClientPid", new, .. } if *new == u64::from(me))
        ));
        assert!(has(&|s| matches!(
            s,
            AttachStep::AttachCalled {
                attempt: 1,
                internal_error: 0
            }
        )));
        assert!(has(&|s| matches!(s, AttachStep::ResumeFlag(1))));
        assert!(has(
            &|s| matches!(s, AttachStep::Events(e) if e == &vec![Event::AttachComplete])
        ));
        assert!(
            matches!(steps.last(), Some(AttachStep::Attached { .. })),
            "{steps:?}"
        );
    }
    // The event that completed the attach is handed out like any other.
    let batch = session
        .next_batch(Some(Duration::from_secs(5)))
        .expect("events")
        .expect("running");
    assert_eq!(batch.events().len(), 1);
    assert_eq!(batch.events()[0].1, Event::AttachComplete);
    drop(batch);
    // What the debuggee's cudbgApiAttach saw: this client, as written before the call.
    let seen = std::fs::read_to_string(Path::new("/tmp").join(format!("attached.{me}"))).unwrap();
    eprintln!("the debuggee's cudbgApiAttach saw: {seen}");
    assert!(
        // The capabilities asked for (8: no push/pop events) and those every attach announces (1 and 4); the RPC
        // flag left at 0 (driver 580 accepted an attach with these and completed it).
        seen.contains("revision 163")
            && seen.contains("capabilities 13")
            && seen.contains("rpc 0")
            && seen.contains("via call"),
        "{seen}"
    );

    // An acknowledgement that fails leaves the event unacknowledged (the debuggee stays held), and the next wait
    // acknowledges it again before it waits for more, once.
    // SAFETY: the double the crate loaded; these take and return plain integers.
    let (acks, fail_acks, queue_event) = unsafe {
        let handle = libloading::Library::new(&lib).unwrap();
        let f = (
            *handle
                .get::<unsafe extern "C" fn() -> i32>(b"dbl_cudbg_acknowledged\0")
                .unwrap(),
            *handle
                .get::<unsafe extern "C" fn(i32)>(b"dbl_cudbg_fail_acks\0")
                .unwrap(),
            *handle
                .get::<unsafe extern "C" fn(u32)>(b"dbl_cudbg_queue_event\0")
                .unwrap(),
        );
        std::mem::forget(handle);
        f
    };
    let count = || {
        // SAFETY: a function of the double, which stays loaded (its handle was forgotten); it takes nothing.
        unsafe { acks() }
    };
    let before = count();
    // SAFETY: functions of the double, which stays loaded; they take plain integers.
    unsafe {
        fail_acks(1);
        queue_event(gpu_tools::sys::cudbg::CUDBG_EVENT_KERNEL_READY);
    }
    let batch = session
        .next_batch(Some(Duration::from_secs(5)))
        .expect("events")
        .expect("running");
    assert!(
        matches!(batch.events()[..], [(_, Event::KernelReady(_))]),
        "{:?}",
        batch.events()
    );
    drop(batch);
    assert_eq!(count(), before, "the acknowledgement failed");
    let r = session
        .next_batch(Some(Duration::from_millis(100)))
        .map(|b| b.map(|b| b.events().to_vec()));
    assert!(
        matches!(r, Err(gpu_tools::Error::Session(SessionError::Timeout(_)))),
        "{r:?}"
    );
    assert_eq!(count(), before + 1, "acknowledged again");
    let r = session
        .next_batch(Some(Duration::from_millis(100)))
        .map(|b| b.is_some());
    assert!(r.is_err(), "nothing new: {r:?}");
    assert_eq!(count(), before + 1, "and only once");

    // A second session in this process is refused.
    assert!(matches!(
        DebugSession::attach(target.pid),
        Err(gpu_tools::Error::Session(SessionError::AlreadyActive))
    ));

    let closed = session.close().expect("detach");
    assert!(closed.exit.is_none(), "still running");
    // The debugger side was told once that a detach begins (`clearAttachState`, as cuda-gdb does).
    // SAFETY: the double the crate loaded; the functions take nothing and return a counter.
    let counter = |name: &[u8]| unsafe {
        let handle = libloading::Library::new(&lib).unwrap();
        let f = handle.get::<unsafe extern "C" fn() -> i32>(name).unwrap();
        let n = f();
        std::mem::forget(handle);
        n
    };
    assert_eq!(counter(b"dbl_cudbg_attach_state_cleared\0"), 1);
    // Before the detach, launches stopped raising events (CUDBG_KNL_LAUNCH_NOTIFY_DEFER), so that no launch holds
    // the process in the driver while it detaches.
    assert_eq!(
        counter(b"dbl_cudbg_launch_mode\0"),
        gpu_tools::sys::cudbg::CUDBG_KNL_LAUNCH_NOTIFY_DEFER as i32
    );
    {
        let steps = steps.lock().unwrap();
        // By default the detach leaves out the call of cudbgApiDetach() in the process (DetachProcedure).
        assert!(
            steps
                .iter()
                .any(|s| matches!(s, AttachStep::DetachCallLeftOut { resume_flag: 1 })),
            "{steps:?}"
        );
        assert!(
            !steps
                .iter()
                .any(|s| matches!(s, AttachStep::DetachCalled { .. })),
            "{steps:?}"
        );
        assert!(
            matches!(steps.last(), Some(AttachStep::Detached)),
            "{steps:?}"
        );
    }
    assert!(
        !Path::new("/tmp").join(format!("detached.{me}")).exists(),
        "cudbgApiDetach() did not run in the process"
    );
    assert_eq!(tracer_of(target.pid), 0, "let go");
    let (vars, code) = target.finish();
    assert_eq!(code, Some(0), "{vars}");
    assert!(vars.contains(&format!("cudbgApiClientPid={me} ")), "{vars}");
    assert!(
        vars.contains("cudbgIpcFlag=0 ") && vars.contains("cudbgDebuggerInitialized=0 "),
        "{vars}"
    );
    assert!(
        vars.contains("cudbgDebuggerCapabilities=0 ") && vars.contains("cudbgRpcEnabled=0 "),
        "{vars}"
    );
    remove_markers();

    // A debuggee killed while stopped, before the attach call: a typed error with its status; nothing had
    // connected, so the driver's debugger side stays usable.
    descriptor_route(&lib);
    documented_detach(&lib);

    let doomed = Target::start(&lib, &[]).expect("a namespace was made before");
    let (err, code) = attach_and_kill(doomed, |s| matches!(s, AttachStep::Stopped { .. }));
    assert!(exited_by_sigkill(&err), "{err}");
    assert_eq!(code, Some(128 + 9));
    // Killed after the driver accepted: the session makes no further driver call, and none later.
    let doomed = Target::start(&lib, &[]).expect("a namespace was made before");
    let (err, code) = attach_and_kill_late(doomed, |s| {
        matches!(
            s,
            AttachStep::AttachCalled {
                internal_error: 0,
                ..
            }
        )
    });
    // The rest of the attach may finish before the kernel has torn the process down (seen under load): then the
    // session is made and the process is found dead right after. Either way it died of the kill.
    if let Some(err) = &err {
        assert!(exited_by_sigkill(err), "{err}");
    }
    assert_eq!(code, Some(128 + 9));
    let next = Target::start(&lib, &[]).expect("a namespace was made before");
    assert!(matches!(
        DebugSession::attach(next.pid),
        Err(gpu_tools::Error::Session(SessionError::DebuggerUnusable))
    ));
    assert_eq!(next.finish().1, Some(0), "left alone");
    remove_markers();
    let _ = std::fs::remove_dir_all(lib.parent().unwrap());
}

/// NVIDIA's documented detach: `cudbgApiDetach()` runs inside the process, then the clean-up.
fn documented_detach(lib: &Path) {
    let me = std::process::id();
    remove_markers();
    let target = Target::start(lib, &[]).expect("a namespace was made before");
    let steps = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&steps);
    let session = DebugSession::attach_builder(target.pid)
        .protocol(AttachProtocol::InferiorCall)
        .detach_procedure(DetachProcedure::Documented)
        .progress(move |s| {
            eprintln!("attach step: {s}");
            record.lock().unwrap().push(s.clone());
        })
        .start()
        .expect("attach");
    let closed = session.close().expect("detach");
    assert!(closed.exit.is_none(), "still running");
    let steps = steps.lock().unwrap().clone();
    assert!(
        steps.iter().any(|s| matches!(
            s,
            AttachStep::DetachCalled {
                internal_error: 0,
                resume_flag: 1
            }
        )),
        "{steps:?}"
    );
    assert!(
        !steps
            .iter()
            .any(|s| matches!(s, AttachStep::DetachCallLeftOut { .. })),
        "{steps:?}"
    );
    assert!(
        matches!(steps.last(), Some(AttachStep::Detached)),
        "{steps:?}"
    );
    assert!(
        Path::new("/tmp").join(format!("detached.{me}")).exists(),
        "cudbgApiDetach() ran in the process"
    );
    assert_eq!(tracer_of(target.pid), 0, "let go");
    let (vars, code) = target.finish();
    assert_eq!(code, Some(0), "{vars}");
    remove_markers();
}

fn exited_by_sigkill(e: &gpu_tools::Error) -> bool {
    use std::os::unix::process::ExitStatusExt;
    matches!(
        e,
        gpu_tools::Error::Session(SessionError::Attach(AttachError::Exited { status: Some(s), .. }))
            if s.signal() == Some(9)
    )
}

/// As [`attach_and_kill`], for a kill so late in the attach that the attach may complete first: the error, if the
/// attach failed, and the exit code its shell reported.
fn attach_and_kill_late(
    target: Target,
    when: fn(&AttachStep) -> bool,
) -> (Option<gpu_tools::Error>, Option<i32>) {
    let pid = target.pid;
    let result = DebugSession::attach_builder(pid)
        .protocol(AttachProtocol::InferiorCall)
        .progress(move |s| {
            eprintln!("attach step: {s}");
            if when(s) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
        })
        .start()
        .map(drop);
    let err = result.err();
    if let Some(e) = &err {
        eprintln!("attach error: {e}");
    }
    let mut shell = target.shell;
    (err, shell.wait().unwrap().code())
}

/// Attaches to `target` and kills it with SIGKILL at the first step `when` accepts; returns the attach error and
/// the exit code its shell reported.
fn attach_and_kill(
    target: Target,
    when: fn(&AttachStep) -> bool,
) -> (gpu_tools::Error, Option<i32>) {
    let pid = target.pid;
    let err = DebugSession::attach_builder(pid)
        .protocol(AttachProtocol::InferiorCall)
        .progress(move |s| {
            eprintln!("attach step: {s}");
            if when(s) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
        })
        .start()
        .map(|_| ())
        .expect_err("the debuggee died during the attach");
    eprintln!("attach error: {err}");
    let mut shell = target.shell;
    (err, shell.wait().unwrap().code())
}

fn remove_markers() {
    let me = std::process::id();
    for what in ["attached", "detached"] {
        let _ = std::fs::remove_file(Path::new("/tmp").join(format!("{what}.{me}")));
    }
}

/// Attaches with `protocol` and records the steps.
fn attach_recording(
    pid: u32,
    protocol: AttachProtocol,
) -> (Result<DebugSession, gpu_tools::Error>, Vec<AttachStep>) {
    let steps = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&steps);
    let r = DebugSession::attach_builder(pid)
        .protocol(protocol)
        .progress(move |s| {
            eprintln!("attach step: {s}");
            record.lock().unwrap().push(s.clone());
        })
        .start();
    let steps = steps.lock().unwrap().clone();
    (r, steps)
}

/// The attach procedure of drivers from CUDA 13.1: a byte to the driver's descriptor, the process runs until the
/// driver calls `cudbgReportAttachProcedureFinished`, and no function is called inside the process.
fn descriptor_route(lib: &Path) {
    let me = std::process::id();
    remove_markers();
    let target =
        Target::start(lib, &[("DBL_CUDBG_FD_ATTACH", "1")]).expect("a namespace was made before");
    let (session, steps) = attach_recording(target.pid, AttachProtocol::Auto);
    let session = session.expect("attach through the descriptor");
    let fd = steps.iter().find_map(|s| match s {
        AttachStep::AttachRequested { fd } => Some(*fd),
        _ => None,
    });
    assert!(fd.is_some_and(|fd| fd >= 0), "{steps:?}");
    assert!(
        steps.iter().any(|s| matches!(
            s,
            AttachStep::AttachProcedureFinished { internal_error: 0, thread, .. } if *thread != target.pid
        )),
        "the double's listening thread reported the end: {steps:?}"
    );
    assert!(
        !steps
            .iter()
            .any(|s| matches!(s, AttachStep::AttachCalled { .. })),
        "cudbgApiAttach was not called: {steps:?}"
    );
    assert!(steps.iter().any(|s| matches!(s, AttachStep::ResumeFlag(1))));
    let seen = std::fs::read_to_string(Path::new("/tmp").join(format!("attached.{me}"))).unwrap();
    assert!(
        seen.contains("via fd") && seen.contains("capabilities 5"),
        "{seen}"
    );
    assert_eq!(tracer_of(target.pid), me, "traced while attached");
    let closed = session.close().expect("detach");
    assert!(closed.exit.is_none(), "still running");
    assert_eq!(tracer_of(target.pid), 0, "let go");
    // The breakpoint left no trace: the listening thread and the program go on and end normally.
    let (vars, code) = target.finish();
    assert_eq!(code, Some(0), "{vars}");
    assert!(vars.contains("cudbgDebuggerInitialized=0 "), "{vars}");
    remove_markers();

    // A driver that publishes its descriptor late (after 1 s): the process runs until it has.
    let late = Target::start(lib, &[("DBL_CUDBG_FD_ATTACH", "late")])
        .expect("a namespace was made before");
    let (session, steps) = attach_recording(late.pid, AttachProtocol::Descriptor);
    let session = session.expect("attach once the descriptor is there");
    assert!(
        steps
            .iter()
            .any(|s| matches!(s, AttachStep::AttachRequested { fd } if *fd >= 0)),
        "{steps:?}"
    );
    drop(session);
    assert_eq!(late.finish().1, Some(0));
    remove_markers();

    // One that never does: a typed error after 5 s, and the process is left as it was.
    let never = Target::start(lib, &[("DBL_CUDBG_FD_ATTACH", "never")])
        .expect("a namespace was made before");
    let started = Instant::now();
    let (r, steps) = attach_recording(never.pid, AttachProtocol::Descriptor);
    match r {
        Err(gpu_tools::Error::Session(SessionError::Attach(AttachError::NoCuda {
            why: NoCudaReason::DriverNotInitialised,
            ..
        }))) => {}
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("attached without the driver's descriptor"),
    }
    assert!(started.elapsed() >= Duration::from_secs(5));
    assert!(
        !steps.iter().any(|s| matches!(s, AttachStep::Wrote { .. })),
        "nothing was written: {steps:?}"
    );
    assert_eq!(tracer_of(never.pid), 0, "let go");
    let (vars, code) = never.finish();
    assert_eq!(code, Some(0), "{vars}");
    assert!(vars.contains("cudbgApiClientPid=0 "), "{vars}");
    remove_markers();
}
