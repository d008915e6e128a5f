//! CUPTI or the debugger, for the rest of a process's life (driver 580): what `trace --pid` and `profile --pid` say
//! before the first CUPTI attach to a process, and what `where` says and asks before the debugger's, against
//! sleepers that map libraries of the names the commands look for (`sleepers`). No process is attached to: each
//! command is run up to the point where it would attach, or is refused there.

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::sleepers::Mapping;

const INJECTED: &str = "libgpu_tools_inject-0123456789abcdef.so";
const TRACE_NOTE: &str = "has not run CUPTI for gpu-tools yet: from this attach on, the CUDA driver refuses the \
                          debugger (`gpu-tools where`) and its checkpoint (`gpu-tools freeze`) in it for the rest of \
                          its life";
const WHERE_NOTE: &str = "refuses CUPTI in it for the rest of its life: `gpu-tools trace --pid` and `profile --pid`, \
                          and the job's own profiler (a torch.profiler records nothing from then on)";

fn gpu_tools(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpu-tools"));
    c.args(args)
        .env("GPU_TOOLS_CUDA_DRIVER_LIB", "/nonexistent/libcuda.so.1")
        .stdin(Stdio::null());
    c
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `trace --pid` of a stopped sleeper that maps the CUDA driver (the double's path, so that the tool's own driver
/// check passes): the note comes before the attach, which a stopped process refuses untouched.
fn trace_stopped(target: &Mapping, extra: &[&str]) -> String {
    let pid = target.pid().to_string();
    target.stop();
    let mut args = vec!["trace", "--pid", &pid, "--duration", "1"];
    args.extend_from_slice(extra);
    let out = gpu_tools(&args)
        .env(
            "GPU_TOOLS_CUDA_DRIVER_LIB",
            gpu_tools_testing::double_path("cuda_driver"),
        )
        .output()
        .expect("run gpu-tools trace");
    target.resume();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("is stopped (state T)"), "refused there: {err}");
    target.assert_untouched();
    err
}

#[test]
fn trace_says_before_the_first_cupti_attach_what_the_driver_refuses_from_then_on() {
    let fresh = Mapping::start(&["libcuda.so.1"]);
    let err = trace_stopped(&fresh, &[]);
    let note = format!(
        "gpu-tools trace: note: process {} {TRACE_NOTE}; `where` will answer from the flight recorder this attach \
         leaves in it instead",
        fresh.pid()
    );
    assert!(err.contains(&note), "{err}");
    // The note comes before the attach's refusal.
    assert!(
        err.find("note:") < err.find("is stopped (state T)"),
        "{err}"
    );
    // PC sampling before the first trace: not tried where it cannot be told that no other tool holds the GPU's
    // counters (no CUPTI here), said with the reason, and then that PC sampling after this trace is refused.
    let pid = fresh.pid();
    let not_sampled = format!(
        "gpu-tools trace: process {pid}: not sampled before its first trace: whether another tool holds its GPU's \
         counters could not be told ("
    );
    let pc_note = format!(
        "gpu-tools trace: note: `gpu-tools profile --pid --pc-sampling` of process {pid} after this first attach \
         is refused"
    );
    assert!(
        err.contains(&not_sampled) && err.contains(&pc_note),
        "{err}"
    );
    assert!(
        err.find(&note) < err.find(&not_sampled) && err.find(&not_sampled) < err.find(&pc_note),
        "{err}"
    );
    // Told not to: not tried, and the note on PC sampling after the trace all the same.
    let err = trace_stopped(&fresh, &["--no-pc-primer"]);
    assert!(
        !err.contains(&format!("process {pid}: not sampled")) && err.contains(&pc_note),
        "{err}"
    );
    // Without a recorder: what is lost.
    let err = trace_stopped(&fresh, &["--no-flight-recorder"]);
    assert!(
        err.contains(
            "for the rest of its life; with --no-flight-recorder, `where` will not be able to say where a hang is"
        ),
        "{err}"
    );
    // --quiet: no note, but the PC sampling's outcome all the same: it is done to the process beyond the trace
    // asked for, and where it was not done, later PC sampling windows give nothing.
    let err = trace_stopped(&fresh, &["--quiet"]);
    assert!(
        !err.contains("note:") && err.contains(&not_sampled),
        "{err}"
    );
    // A process an attach traced before has run CUPTI already: nothing to say.
    let traced = Mapping::start(&["libcuda.so.1", INJECTED]);
    let err = trace_stopped(&traced, &[]);
    assert!(
        !err.contains("has not run CUPTI")
            && !err.contains("sampled")
            && !err.contains("PC sampling"),
        "{err}"
    );
}

/// A process in a mount namespace of its own (a container's) is PC-sampled before its first trace as any other:
/// the sampling's socket is placed in its own `/tmp`. Here the sampling's first check (whether another tool holds
/// the GPU's counters, which cannot be told without CUPTI) is what stops it, as it stops it for a process outside.
#[test]
fn a_process_in_a_container_is_sampled_before_its_first_trace_as_any_other() {
    let Some(contained) = Mapping::start_in_container(&["libcuda.so.1"]) else {
        return;
    };
    let err = trace_stopped(&contained, &[]);
    assert!(
        err.contains(&format!(
            "gpu-tools trace: process {}: not sampled before its first trace: whether another tool holds its GPU's \
             counters could not be told (",
            contained.pid()
        )),
        "{err}"
    );
    assert!(!err.contains("namespace"), "{err}");
}

#[test]
fn no_flight_recorder_is_for_attaches_alone_and_said_in_the_help() {
    for (args, says) in [
        (
            &["trace", "--no-flight-recorder", "--", "true"][..],
            "--no-flight-recorder applies only with --pid, --pid-tree or --job",
        ),
        (
            &["profile", "--no-flight-recorder", "--", "true"][..],
            "--no-flight-recorder applies only with --pid",
        ),
        (
            &["trace", "--no-pc-primer", "--", "true"][..],
            "--no-pc-primer applies only with --pid, --pid-tree or --job",
        ),
        (
            &["profile", "--no-pc-primer", "--", "true"][..],
            "--no-pc-primer applies only with --pid",
        ),
    ] {
        let out = gpu_tools(args).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{err}");
    }
    for command in ["trace", "profile"] {
        let out = gpu_tools(&[command, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        for says in [
            "--no-flight-recorder",
            "CUPTI's callback at each kernel launch and synchronisation call of the process",
            "can no longer say where",
        ] {
            assert!(help.contains(says), "{command}: {says:?} in {help}");
        }
    }
}

/// `where` of a process that maps a profiler library of its own, with no terminal and no `--yes`: the note, then
/// the refusal naming the library, and nothing touched.
#[test]
fn where_refuses_without_yes_where_the_jobs_profiler_is_loaded() {
    for profiler in ["libcupti.so.13", "libtorch_cpu.so", "libkineto.so"] {
        let target = Mapping::start(&["libcuda.so.1", profiler]);
        let pid = target.pid();
        let started = Instant::now();
        let out = gpu_tools(&["where", &pid.to_string()]).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!(
                "gpu-tools where: note: after the CUDA debugger's attach to process {pid}, the driver {WHERE_NOTE}"
            )),
            "{err}"
        );
        assert!(
            err.contains(&format!(
                "process {pid} maps {profiler}, the library of a profiler of the job's own"
            )),
            "{err}"
        );
        assert!(
            err.contains("Not attached without --yes (there is no terminal to ask on): nothing was touched; pass --yes"),
            "{err}"
        );
        assert!(out.stdout.is_empty(), "nothing examined");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "refused at once"
        );
        target.assert_untouched();
    }
}

/// With `--yes`, or without a profiler library, `where` goes on to the debugger (here the driver is missing, which
/// it says): the note is said all the same.
#[test]
fn where_goes_on_with_yes_or_without_a_profiler_library() {
    let with = Mapping::start(&["libcuda.so.1", "libcupti.so.13"]);
    let without = Mapping::start(&["libcuda.so.1"]);
    for (target, extra) in [(&with, "--yes"), (&with, "-y"), (&without, "--verbose")] {
        let out = gpu_tools(&["where", &target.pid().to_string(), extra])
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(WHERE_NOTE), "{err}");
        assert!(!err.contains("pass --yes"), "{extra}: {err}");
        assert!(
            err.contains("CUDA driver (libcuda.so.1) not loaded"),
            "it went on to the debugger: {err}"
        );
        target.assert_untouched();
    }
    // A process an attach traced is answered by its recorder (none here): no note, no question.
    let traced = Mapping::start(&["libcuda.so.1", "libcupti.so.13", INJECTED]);
    let out = gpu_tools(&["where", &traced.pid().to_string()])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(
        !err.contains("note:") && !err.contains("pass --yes"),
        "{err}"
    );
    assert!(err.contains("no flight recorder answers"), "{err}");
    traced.assert_untouched();
}

/// `where` over several processes says the note once and asks once, for all: refused before any part runs; with
/// `--yes`, each part runs with it (and says no note of its own).
#[test]
fn where_over_several_processes_asks_once_for_all() {
    let profiled = Mapping::start(&["libcuda.so.1", "libtorch_cpu.so"]);
    let plain = Mapping::start(&["libcuda.so.1"]);
    let pids = format!("{},{}", profiled.pid(), plain.pid());
    let out = gpu_tools(&["where", "--pid", &pids]).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "note: after the CUDA debugger's attach to processes {}, {}, the driver refuses CUPTI in them",
            profiled.pid(),
            plain.pid()
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("process {} maps libtorch_cpu.so", profiled.pid())),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "no part ran: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = gpu_tools(&["where", "--pid", &pids, "--yes"])
        .output()
        .unwrap();
    let err = stderr(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{err}");
    assert_eq!(err.matches("note:").count(), 1, "one note for all: {err}");
    assert!(!err.contains("pass --yes"), "the parts got --yes: {err}");
    for t in [&profiled, &plain] {
        assert!(
            stdout.contains(&format!("=== process {}", t.pid())),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!("(pid {}): not examined (", t.pid())),
            "{stdout}"
        );
    }
    profiled.assert_untouched();
    plain.assert_untouched();
}

/// Runs `where PID` with standard input and standard error on a terminal (a pseudo-terminal), answering `answer`;
/// returns its exit code and what it wrote on the terminal.
fn where_on_a_terminal(pid: u32, answer: &str) -> (Option<i32>, String) {
    let (mut master, slave) = pty();
    let mut child = gpu_tools(&["where", &pid.to_string()])
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .stdout(Stdio::piped())
        .spawn()
        .expect("run gpu-tools where");
    master.write_all(answer.as_bytes()).unwrap();
    let reader = {
        let mut master = master.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let mut buf = [0u8; 4096];
            // EIO once the last end of the terminal held by the child is closed.
            while let Ok(n) = master.read(&mut buf) {
                if n == 0 {
                    break;
                }
                text.extend_from_slice(&buf[..n]);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let status = child.wait().unwrap();
    drop(master);
    (status.code(), reader.join().unwrap())
}

/// A pseudo-terminal: its master end and its slave end.
fn pty() -> (std::fs::File, OwnedFd) {
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two descriptors into the integers given; the name, terminal settings and window size
    // are optional (null).
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened by openpty and are owned by nothing else.
    unsafe {
        (
            std::fs::File::from_raw_fd(master),
            OwnedFd::from_raw_fd(slave),
        )
    }
}

/// On a terminal, `where` asks first (y/N): no (or an empty answer) attaches nothing; yes goes on to the debugger.
#[test]
fn where_asks_on_a_terminal() {
    let target = Mapping::start(&["libcuda.so.1", "libcupti.so.13"]);
    let pid = target.pid();
    for answer in ["n\n", "\n"] {
        let (code, text) = where_on_a_terminal(pid, answer);
        assert_eq!(code, Some(1), "{text}");
        assert!(
            text.contains(&format!(
                "process {pid} maps libcupti.so.13, the library of a profiler of the job's own"
            )),
            "{text}"
        );
        assert!(text.contains("Attach the debugger? [y/N]"), "{text}");
        assert!(
            text.contains("Not attached, as answered: nothing was touched"),
            "{text}"
        );
        target.assert_untouched();
    }
    let (code, text) = where_on_a_terminal(pid, "y\n");
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("Attach the debugger? [y/N]"), "{text}");
    assert!(!text.contains("Not attached"), "{text}");
    assert!(
        text.contains("CUDA driver (libcuda.so.1) not loaded"),
        "it went on to the debugger: {text}"
    );
    target.assert_untouched();
}
