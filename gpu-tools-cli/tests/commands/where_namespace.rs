//! `gpu-tools where` refuses a process in another network namespace before anything is attached: on driver 580
//! the debugger's attach across namespaces never completed and left the job stuck. A process an attach traced is
//! never attached to: its flight recorder answers over its socket, or `where` says there is none.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn a_process_in_another_network_namespace_is_refused_untouched() {
    // A sleeper in a network namespace of its own (root, or a user namespace, is needed to make one).
    let mut child = match Command::new("unshare")
        .args(["--net", "sleep", "30"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            gpu_tools_testing::skip_unless_ci(&format!("unshare cannot run here: {e}"));
            return;
        }
    };
    // `unshare` execs `sleep` in the new namespace: wait until the process's namespace differs from ours.
    let pid = child.id();
    let ours = std::fs::read_link("/proc/self/ns/net").expect("our network namespace");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut moved = false;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            gpu_tools_testing::skip_unless_ci(&format!(
                "unshare --net is not permitted here ({status})"
            ));
            return;
        }
        if std::fs::read_link(format!("/proc/{pid}/ns/net")).is_ok_and(|n| n != ours) {
            moved = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(moved, "the sleeper reached a network namespace of its own");
    where_refuses_untouched(
        &mut child,
        &["is in another network namespace", "nsenter --target"],
    );
}

/// Runs `gpu-tools where` on the sleeper `child` and checks that it was refused at once (exit 1, naming each of
/// `says`) with nothing attached: the sleeper is not traced, and still sleeps. Ends the sleeper.
fn where_refuses_untouched(child: &mut std::process::Child, says: &[&str]) {
    let pid = child.id();
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["where", &pid.to_string()])
        .output()
        .expect("run gpu-tools where");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    assert!(
        status.lines().any(|l| l.starts_with("TracerPid:\t0")),
        "{status}"
    );
    assert!(
        child.try_wait().is_ok_and(|s| s.is_none()),
        "the sleeper lives"
    );
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for said in says {
        assert!(stderr.contains(said), "{stderr}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "refused at once"
    );
}

/// A sleeper that maps a library of the injection library's name (a C double, which does nothing when loaded), as
/// a process an attach traced does; and the folder that holds the copy.
fn traced_sleeper() -> (std::process::Child, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temporary folder");
    let lib = dir.path().join("libgpu_tools_inject-0123456789abcdef.so");
    std::fs::copy(gpu_tools_testing::double_path("cupti_activity"), &lib).expect("copy a double");
    let child = Command::new("sleep")
        .arg("30")
        .env("LD_PRELOAD", &lib)
        .stdin(Stdio::null())
        .spawn()
        .expect("start a sleeper");
    let pid = child.id();
    let maps_it = || {
        std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .is_ok_and(|m| m.contains("libgpu_tools_inject-"))
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline && !maps_it() {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(maps_it(), "the sleeper maps the library within 30 s");
    (child, dir)
}

/// `where` never attaches the debugger to a process into which an earlier attach loaded the injection library (so
/// CUPTI ran in it): the driver refuses that attach, and after such a refused attach the next CUPTI session crashed
/// jobs (driver 580). Without a flight recorder in it, that is said at once.
#[test]
fn a_process_that_ran_cupti_for_an_attach_without_a_recorder_is_refused_untouched() {
    let (mut child, _dir) = traced_sleeper();
    where_refuses_untouched(
        &mut child,
        &[
            "has run CUPTI for an earlier `gpu-tools trace --pid`",
            "refuses the debugger in it for the rest of its life",
            "no flight recorder answers at",
        ],
    );
}

/// With a recorder in it, `where` prints the recorder's report: the launches not known to have finished, the oldest
/// first, and the verdict; the process is not traced and runs on.
#[test]
fn a_traced_process_is_answered_by_its_flight_recorder() {
    use gpu_tools_injection::flight::{
        self, FlightReport, Launch, StreamReport, StreamState, Wait,
    };
    use std::io::{Read, Write};
    let (mut child, _dir) = traced_sleeper();
    let pid = child.id();
    // The recorder's socket, where the library would make it: this test serves one report there.
    let path = flight::socket_of(pid).expect("the sleeper's status");
    let _ = std::fs::remove_file(&path);
    let listener =
        std::os::unix::net::UnixListener::bind(&path).expect("bind the recorder's socket");
    let now = 50_000_000_000;
    let report = FlightReport {
        pid,
        now_ns: now,
        since_ns: now - 30_000_000_000,
        launches: 1234,
        stopped: None,
        streams: vec![StreamReport {
            stream: 0x5000,
            context: 1,
            state: StreamState::Busy,
            launched: 600,
            unfinished: vec![Launch {
                seq: 600,
                at_ns: now - 12_000_000_000,
                thread: pid,
                correlation: 9,
                graph: 0,
                name: "_Z9wait_flagPVi".into(),
            }],
            unfinished_count: 1,
            last_finished: None,
        }],
        waits: vec![Wait {
            thread: pid,
            call: "cuStreamSynchronize".into(),
            stream: Some(0x5000),
            since_ns: now - 11_900_000_000,
        }],
    };
    let text = report.encode();
    let server = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().expect("where connects");
        let mut b = [0u8; 1];
        c.read_exact(&mut b).expect("where asks");
        c.write_all(text.as_bytes()).expect("the report goes out");
    });
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["where", &pid.to_string()])
        .output()
        .expect("run gpu-tools where");
    // A `where` that never asked would leave the recorder waiting for ever: a connection of ours ends its wait,
    // and its "where asks" then fails the test.
    let _ = std::os::unix::net::UnixStream::connect(&path);
    server.join().expect("served");
    let _ = std::fs::remove_file(&path);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("from gpu-tools' flight recorder"),
        "{stdout}"
    );
    assert!(
        stdout.contains("stream 0x5000 (context 1): busy"),
        "{stdout}"
    );
    assert!(stdout.contains("wait_flag(int volatile*)"), "{stdout}");
    assert!(stdout.contains("12.0 s ago"), "{stdout}");
    assert!(
        stdout.contains("waits in cuStreamSynchronize (stream 0x5000)"),
        "{stdout}"
    );
    assert!(
        stdout
            .contains("=> running or next to run: wait_flag on stream 0x5000, launched 12.0 s ago"),
        "{stdout}"
    );
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    assert!(
        status.contains("TracerPid:\t0"),
        "nothing was attached: {status}"
    );
    let _ = child.kill();
    let _ = child.wait();
}
