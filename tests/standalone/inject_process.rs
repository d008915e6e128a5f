//! `linux::inject` against plain C programs, no GPU: a library is loaded into a running program and its entry point
//! called, twice; the program runs on and ends with its own result. And each refusal that can be made to happen
//! here: no such process, a static binary, a process another tracer holds, a stopped process, a zombie, another
//! user's process, a required library not mapped, an entry point the library lacks, a library the process cannot
//! load.
//!
//! The C sources are in `tests/inject/`; they are compiled with the system's `cc` into Cargo's test scratch folder.

#![cfg(feature = "inject")]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use gpu_tools::linux::inject::{InjectError, Injection};
use gpu_tools_testing::cc;

const ENTRY: &str = "test_agent_entry";

struct Built {
    dir: PathBuf,
}

/// Compiles the C programs and libraries once per test binary.
fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/inject");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("inject_process");
        std::fs::create_dir_all(&dir).unwrap();
        let s = |f: &str| src.join(f).to_string_lossy().into_owned();
        let o = |f: &str| dir.join(f).to_string_lossy().into_owned();
        cc(&["-O1", "-pthread", &s("target.c"), "-o", &o("target")]);
        cc(&[
            "-O1",
            "-static",
            "-pthread",
            &s("target.c"),
            "-o",
            &o("target-static"),
        ]);
        cc(&[
            "-O1",
            "-shared",
            "-fPIC",
            &s("agent.c"),
            "-o",
            &o("libagent.so"),
        ]);
        cc(&["-O1", &s("tracer.c"), "-o", &o("tracer")]);
        // A library that links against one that is then removed: the target's dlopen must fail.
        std::fs::write(
            dir.join("missing.c"),
            "int missing_function(void) { return 1; }\n",
        )
        .unwrap();
        cc(&[
            "-shared",
            "-fPIC",
            &o("missing.c"),
            "-o",
            &o("libmissing.so"),
        ]);
        cc(&[
            "-shared",
            "-fPIC",
            &s("needs_missing.c"),
            "-o",
            &o("libneeds_missing.so"),
            &format!("-L{}", dir.display()),
            "-lmissing",
        ]);
        std::fs::remove_file(dir.join("libmissing.so")).unwrap();
        Built { dir }
    })
}

/// Starts `program` with `iterations` and waits for its first line ("ready PID").
fn start(program: &str, iterations: u32) -> Child {
    start_with(program, iterations, &[])
}

/// [`start`], with environment variables.
fn start_with(program: &str, iterations: u32, vars: &[(&str, &str)]) -> Child {
    let mut child = Command::new(built().dir.join(program))
        .arg(iterations.to_string())
        .envs(vars.iter().copied())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("ready "), "{line:?}");
    child
}

/// The program's last line and exit code.
fn finish(mut child: Child) -> (String, Option<i32>) {
    let mut rest = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut rest).unwrap();
    let status = child.wait().unwrap();
    (rest.trim().to_owned(), status.code())
}

/// The sum the target prints for `iterations`, computed as it does.
fn expected_sum(iterations: u32) -> String {
    let sum: u64 = (0..u64::from(iterations)).map(|i| i % 256).sum();
    format!("sum {sum}")
}

#[test]
fn loads_a_library_twice_and_the_program_runs_on() {
    let iterations = 1500;
    let child = start("target", iterations);
    let pid = child.id();
    let out = built().dir.join(format!("agent-{pid}.txt"));
    let _ = std::fs::remove_file(&out);
    let lib = built().dir.join("libagent.so");

    let first = Injection::new(pid, &lib, ENTRY)
        .argument(out.to_str().unwrap())
        .run()
        .expect("first injection");
    assert_eq!(first.entry_result, 42);
    assert!(!first.already_loaded);
    assert!(first.looks >= 1);
    let second = Injection::new(pid, &lib, ENTRY)
        .argument(out.to_str().unwrap())
        .run()
        .expect("second injection");
    assert_eq!(second.entry_result, 42);
    assert!(second.already_loaded, "dlopen found the loaded copy");

    let written = std::fs::read_to_string(&out).unwrap();
    assert_eq!(
        written,
        format!("pid {pid} constructed 1 entered 1\npid {pid} constructed 1 entered 2\n"),
        "one load, two calls, in the target"
    );
    // Untraced again.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.contains("TracerPid:\t0"), "{status}");
    assert_eq!(
        finish(child),
        (expected_sum(iterations), Some(0)),
        "the program ran to its end with its own result"
    );
}

/// A program that maps its C library's file as data too, below the library (a symbolizer printing a backtrace does,
/// as a Rust program's panic with `RUST_BACKTRACE` set): `dlopen` is found in the image the loader mapped. Before,
/// the lowest mapping of the file at offset 0 was taken for it, and the call faulted inside the data mapping.
#[test]
fn loads_a_library_into_a_program_that_maps_its_c_library_as_data() {
    let iterations = 600;
    let child = start_with("target", iterations, &[("TARGET_LIBC_AS_DATA", "1")]);
    let pid = child.id();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let libc: Vec<&str> = maps.lines().filter(|l| l.contains("/libc.so")).collect();
    assert!(
        libc.iter().any(|l| l.contains(" r--p 00000000 ")) && libc.len() >= 2,
        "the C library mapped as data and as a library: {libc:#?}"
    );
    let out = built().dir.join(format!("agent-{pid}.txt"));
    let _ = std::fs::remove_file(&out);
    let done = Injection::new(pid, built().dir.join("libagent.so"), ENTRY)
        .argument(out.to_str().unwrap())
        .run()
        .expect("injection beside the data mapping");
    assert_eq!(done.entry_result, 42);
    assert_eq!(
        finish(child),
        (expected_sum(iterations), Some(0)),
        "the program ran to its end with its own result"
    );
}

#[test]
fn refusals_leave_the_process_running() {
    let lib = built().dir.join("libagent.so");

    // No such process: one that ended and was reaped.
    let mut gone = Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    let e = Injection::new(gone_pid, &lib, ENTRY).run().unwrap_err();
    assert!(
        matches!(e, InjectError::NoSuchProcess(p) if p == gone_pid),
        "{e}"
    );

    // This process itself.
    let e = Injection::new(std::process::id(), &lib, ENTRY)
        .run()
        .unwrap_err();
    assert!(matches!(e, InjectError::OwnProcess(_)), "{e}");

    // A static binary: no loader to call (said before any library requirement).
    let child = start("target-static", 300);
    let e = Injection::new(child.id(), &lib, ENTRY)
        .require_library("libcuda.so")
        .run()
        .unwrap_err();
    assert!(matches!(e, InjectError::NoDynamicLoader { .. }), "{e}");
    assert!(e.to_string().contains("statically linked"), "{e}");
    assert_eq!(finish(child), (expected_sum(300), Some(0)));

    let child = start("target", 1200);
    let pid = child.id();
    // Not a CUDA process.
    let e = Injection::new(pid, &lib, ENTRY)
        .require_library("libcuda.so")
        .run()
        .unwrap_err();
    assert!(
        matches!(&e, InjectError::LibraryNotMapped { library, .. } if library == "libcuda.so"),
        "{e}"
    );
    assert!(e.to_string().contains("not a CUDA process"), "{e}");
    // An entry point the library does not export: refused before the process is touched.
    let e = Injection::new(pid, &lib, "no_such_entry")
        .run()
        .unwrap_err();
    assert!(matches!(e, InjectError::BadLibrary { .. }), "{e}");
    assert!(e.to_string().contains("no_such_entry"), "{e}");
    // A library the process cannot load: the process's own dlerror text.
    let e = Injection::new(pid, built().dir.join("libneeds_missing.so"), ENTRY)
        .run()
        .unwrap_err();
    match &e {
        InjectError::LoadFailed { message, .. } => {
            assert!(message.contains("libmissing.so"), "{message}")
        }
        other => panic!("expected LoadFailed, got {other}"),
    }
    // Another tracer holds it.
    let mut tracer = Command::new(built().dir.join("tracer"))
        .args([&pid.to_string(), "2"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(tracer.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "seized");
    let e = Injection::new(pid, &lib, ENTRY).run().unwrap_err();
    match &e {
        InjectError::AlreadyTraced { tracer: t, .. } => assert_eq!(*t, tracer.id()),
        other => panic!("expected AlreadyTraced, got {other}"),
    }
    assert!(tracer.wait().unwrap().success());
    // The refused and failed attempts loaded nothing.
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    assert!(
        !maps.contains("libagent.so") && !maps.contains("libneeds_missing"),
        "{maps}"
    );
    // After every refusal the program still ends with its own result.
    assert_eq!(finish(child), (expected_sum(1200), Some(0)));
}

#[test]
fn a_stopped_process_and_a_zombie_are_refused_at_once_and_left_as_they_were() {
    let lib = built().dir.join("libagent.so");
    let child = start("target", 1500);
    let pid = child.id();
    let signal = |sig: libc::c_int| {
        // SAFETY: kill with a pid of this test's own child and a plain signal number.
        assert_eq!(unsafe { libc::kill(pid as libc::pid_t, sig) }, 0);
    };
    signal(libc::SIGSTOP);
    // The stop is seen in /proc once the kernel has delivered it.
    let state = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, r)| r.trim_start().chars().next())
            })
            .flatten()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while state() != Some('T') && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(state(), Some('T'));
    let asked = std::time::Instant::now();
    let e = Injection::new(pid, &lib, ENTRY)
        .require_library("libc.so")
        .run()
        .unwrap_err();
    let took = asked.elapsed();
    assert!(matches!(e, InjectError::Stopped(p) if p == pid), "{e}");
    assert!(
        e.to_string().contains(&format!(
            "continue it with SIGCONT first (kill -CONT {pid})"
        )),
        "{e}"
    );
    assert!(
        took < std::time::Duration::from_secs(1),
        "refused in {took:?}"
    );
    // Still stopped, untraced and without the library: nothing was done to it.
    assert_eq!(state(), Some('T'));
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.contains("TracerPid:\t0"), "{status}");
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    assert!(!maps.contains("libagent.so"), "{maps}");
    signal(libc::SIGCONT);
    assert_eq!(finish(child), (expected_sum(1500), Some(0)));

    // A zombie: a child of this process that ended and was not reaped yet.
    let mut zombie = Command::new("true").spawn().unwrap();
    let zpid = zombie.id();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let zstate = || {
        std::fs::read_to_string(format!("/proc/{zpid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, r)| r.trim_start().chars().next())
            })
            .flatten()
    };
    while zstate() != Some('Z') && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let asked = std::time::Instant::now();
    let e = Injection::new(zpid, &lib, ENTRY).run().unwrap_err();
    assert!(asked.elapsed() < std::time::Duration::from_secs(1));
    match &e {
        InjectError::Zombie { pid, parent } => {
            assert_eq!((*pid, *parent), (zpid, std::process::id()));
        }
        other => panic!("expected Zombie, got {other}"),
    }
    assert!(e.to_string().contains("is a zombie"), "{e}");
    zombie.wait().unwrap();
}

/// Run again as a child of `another_users_process_is_refused_with_the_fix`: drops to uid 65534, injects into the
/// process the variable names, and prints the error.
#[test]
#[ignore = "the child process of another_users_process_is_refused_with_the_fix"]
fn as_nobody() {
    let Ok(pid) = std::env::var("GPU_TOOLS_TEST_INJECT_TARGET") else {
        return;
    };
    // SAFETY: plain system calls with integer arguments; this process only prints after them.
    unsafe {
        assert_eq!(libc::setgid(65534), 0);
        assert_eq!(libc::setuid(65534), 0);
    }
    let lib = std::env::var("GPU_TOOLS_TEST_INJECT_LIB").unwrap();
    let e = Injection::new(pid.parse().unwrap(), lib, ENTRY)
        .run()
        .unwrap_err();
    println!("ERROR {e:?}");
    println!("TEXT {e}");
}

#[test]
fn another_users_process_is_refused_with_the_fix() {
    // SAFETY: getuid has no preconditions.
    let root = unsafe { libc::getuid() } == 0;
    assert!(
        root,
        "this test drops from root to another user; run the tests as root (CI does)"
    );
    let child = start("target", 1000);
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "inject_process::as_nobody",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("GPU_TOOLS_TEST_INJECT_TARGET", child.id().to_string())
        .env("GPU_TOOLS_TEST_INJECT_LIB", built().dir.join("libagent.so"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ERROR PermissionDenied"), "{text}");
    assert!(
        text.contains("belongs to uid 0") && text.contains("run as that user, or as root"),
        "the refusal names the reason and the fix: {text}"
    );
    assert_eq!(finish(child), (expected_sum(1000), Some(0)));
}
