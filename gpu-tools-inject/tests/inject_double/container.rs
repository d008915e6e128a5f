//! A program in a container (mount and PID namespaces of its own): traced through a socket placed in its own `/tmp`,
//! and the flight recorder an attach leaves there, which `where` reaches.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::time::Duration;

use gpu_tools::trace::*;
use gpu_tools_injection::env;
use gpu_tools_injection::message::Message;
use gpu_tools_injection::settings::{Destination, Settings};

use crate::common;
use crate::support::{
    attached_child_through, end, exit_child, kernels, library, message, notice_texts, scratch,
};

/// A child of this binary (`test`, scenario `scenario`) run in a container (a mount namespace with a `/tmp` of its
/// own), with the driver double mapped from the start under the name an attach looks for in a CUDA program
/// (`libcuda.so`, a copy in `dir`, which the container sees); with `pid_namespace`, in a PID namespace of its own
/// too. The started process (the child itself, or `unshare` waiting for it) and the child's pid as this process
/// sees it. `None` where no container can be made here.
fn contained_child(
    test: &str,
    scenario: &str,
    dir: &std::path::Path,
    pid_namespace: bool,
) -> Option<(std::process::Child, u32)> {
    use gpu_tools_testing::container;
    if !container::available() {
        return None;
    }
    let driver = dir.join("libcuda.so.1");
    std::fs::copy(common::double_path("cuda_driver"), &driver).unwrap();
    let exe = std::env::current_exe().unwrap();
    let contained = if pid_namespace {
        container::command_in_pid_namespace(exe, &[dir])
    } else {
        container::command(exe, &[dir])
    };
    let child = attached_child_through(contained, test, scenario)
        .env("GPU_TOOLS_CUDA_DRIVER_LIB", &driver)
        .env(container::PRELOAD, &driver)
        .spawn()
        .unwrap();
    let pid = if pid_namespace {
        container::program_of(child.id()).expect("unshare starts the program")
    } else {
        child.id()
    };
    Some((child, pid))
}

/// An attach as `trace --pid` makes it (`Listening`, sockets placed per mount namespace), of the library into `pid`
/// with `settings`, its connection accepted and read until the library says it attached.
struct PlacedAttach {
    session: gpu_tools_injection::attach::Attached,
    rx: std::sync::mpsc::Receiver<gpu_tools_injection::collect::Delivery>,
    /// The socket as the process names it.
    in_target: PathBuf,
    /// The records until the library's word that it attached, then the rest once read.
    records: Vec<Record>,
    /// The stream's header, once read.
    header: Option<StreamHeader>,
}

impl PlacedAttach {
    /// Kernel records only, flushed every 50 ms, from the CUPTI double (which the children load).
    fn kernel_settings() -> Settings {
        Settings {
            kinds: vec![env::TraceKind::Kernel],
            flush_interval: Some(Duration::from_millis(50)),
            cupti: Some(common::double_path("cupti_activity")),
            ..Settings::new(Destination::Socket(PathBuf::new()))
        }
    }

    fn start(pid: u32, settings: &Settings) -> PlacedAttach {
        use gpu_tools_injection::attach::{Listening, Placement, Sockets};
        use gpu_tools_injection::collect::AcceptOptions;
        let sockets = Sockets {
            prefix: "gpu-tools-inject-test-",
            name: "test.sock",
            placement: Placement::PerMountNamespace,
        };
        let listening = Listening::new(&[pid], &sockets).unwrap();
        let in_target = listening.sockets().next().unwrap().1.to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        let session = listening
            .attach(&library(), settings, AcceptOptions::default(), tx, |_| {})
            .unwrap();
        assert!(
            session.outcomes()[0].result.is_ok(),
            "{:?}",
            session.outcomes()[0].result
        );
        session
            .wait_for_connections(1, Duration::from_secs(30))
            .expect("the library in the container connects");
        let mut attach = PlacedAttach {
            session,
            rx,
            in_target,
            records: Vec::new(),
            header: None,
        };
        while let Some(r) = attach.next() {
            let attached = matches!(message(&r), Some(Message::Attached { .. }));
            attach.records.push(r);
            if attached {
                break;
            }
        }
        attach
    }

    /// The stream's next record (its header kept on the way); `None` at its connection's close.
    fn next(&mut self) -> Option<Record> {
        use gpu_tools_injection::collect::Delivery;
        loop {
            match self.rx.recv_timeout(Duration::from_secs(30)) {
                Ok(Delivery::Item(_, r)) => return Some(r.expect("a readable stream")),
                Ok(Delivery::Closed(_)) => return None,
                Ok(Delivery::Header(_, h)) => self.header = Some(h),
                Ok(Delivery::Bytes(..)) => {}
                Err(e) => panic!("the stream: {e}"),
            }
        }
    }

    /// The stop byte, then the rest of the stream.
    fn stop(&mut self) {
        self.session
            .stop(gpu_tools_injection::attach::AfterStop::KeepOpen);
        while let Some(r) = self.next() {
            self.records.push(r);
        }
    }
}

/// A program in a container (mount and PID namespaces of its own, with a `/tmp` of its own) is traced through a
/// socket placed in its own `/tmp` (`Placement::PerMountNamespace`, as `trace --pid` places it), with the library
/// copied there: the attach's private folder, which it cannot see, would not have reached it. Its stream names it
/// by the pid the tool attached to, not its own (1, there), and says both.
#[test]
fn attach_traces_a_program_in_a_container_through_a_socket_in_its_own_tmp() {
    use gpu_tools_injection::attach::{Listening, Placement, Sockets};
    use gpu_tools_testing::container;

    library();
    let (dir, _) = scratch("container");
    let Some((mut child, pid)) = contained_child("attach::attach_child", "attach", &dir, true)
    else {
        return;
    };
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answer = |command: &str| -> String {
        writeln!(stdin, "{command}").unwrap();
        loop {
            let line = lines.next().expect("the child answers").unwrap();
            if line.starts_with("recorded ") {
                return line;
            }
        }
    };
    assert_eq!(answer("kernels 0 0"), "recorded 0", "the child runs");
    // The premise: the private folder's socket is not seen from inside.
    let private = Listening::new(
        &[pid],
        &Sockets {
            prefix: "gpu-tools-inject-test-",
            name: "test.sock",
            placement: Placement::PrivateFolder,
        },
    )
    .unwrap();
    let (_, in_folder) = private.sockets().next().unwrap();
    assert!(in_folder.exists());
    assert!(
        !container::seen_from_here(pid, in_folder).exists(),
        "the container does not see this machine's {}",
        in_folder.display()
    );
    drop(private);
    let mut attach = PlacedAttach::start(pid, &PlacedAttach::kernel_settings());
    let from_here = container::seen_from_here(pid, &attach.in_target);
    assert!(
        attach.in_target.starts_with("/tmp") && from_here.exists() && !attach.in_target.exists(),
        "the socket is in the container's /tmp, not this machine's: {}",
        attach.in_target.display()
    );
    assert_eq!(answer("kernels 1 20"), "recorded 20");
    attach.stop();
    let records = std::mem::take(&mut attach.records);
    assert_eq!(
        attach.header.map(|h| h.pid),
        Some(pid),
        "the header names the process as the tool sees it"
    );
    assert_eq!(
        kernels(&records)
            .iter()
            .map(|k| k.correlation)
            .collect::<Vec<_>>(),
        (1..=20).collect::<Vec<_>>(),
        "{records:#?}"
    );
    assert_eq!(end(&records).map(|e| e.reason), Some(EndReason::Stopped));
    let start = records
        .iter()
        .find_map(|r| match r {
            Record::ProcessStart(p) => Some(p),
            _ => None,
        })
        .expect("the process's start");
    assert_eq!(
        (start.pid, start.parent_pid),
        (pid, child.id()),
        "named as the tool sees it: its parent is unshare"
    );
    assert!(
        notice_texts(&records).contains(
            &"pid 1 in a PID namespace of its own (a container's); the trace names the process by the pid the tool \
              attached to"
        ),
        "{records:#?}"
    );
    // The library was copied into the container's /tmp; the socket placed there goes with the session.
    let copies = std::fs::read_dir(container::seen_from_here(pid, "/tmp".as_ref()))
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("libgpu_tools_inject-")
        })
        .count();
    assert_eq!(copies, 1, "the library's copy in the container's /tmp");
    drop(attach);
    assert!(!from_here.exists(), "the placed socket is removed");
    exit_child(stdin, &mut child);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The flight recorder an attach leaves in a program in a container (mount and PID namespaces of its own, as
/// Docker's and Kubernetes' are) listens in the container's own `/tmp`, named after the program's pid there (1),
/// where `where` reaches it through the process's root (`flight::socket_of`, from the last `NSpid`), and not in
/// this machine's `/tmp`.
#[test]
fn a_program_in_a_container_keeps_a_flight_recorder_that_where_reaches() {
    use gpu_tools_injection::flight;
    library();
    let (dir, _) = scratch("container-flight");
    let Some((mut child, pid)) =
        contained_child("flight::attach_child_flight", "flight", &dir, true)
    else {
        return;
    };
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answer = |command: &str| -> String {
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        loop {
            let line = lines.next().expect("the child answers").unwrap();
            if line.starts_with("fired ") {
                return line;
            }
        }
    };
    assert_eq!(
        answer("launch 0x11 1 1 _Z4stepv"),
        "fired 0",
        "the child runs"
    );
    let mut attach = PlacedAttach::start(pid, &PlacedAttach::kernel_settings());
    attach.stop();
    assert!(
        attach.records.iter().any(|r| matches!(r, Record::Notice(n)
            if n.text.starts_with("a flight recorder runs in the process"))),
        "{:#?}",
        attach.records
    );
    drop(attach);
    assert_eq!(answer("launch 0x11 1 5 _Z4stepv"), "fired 5");
    let recorder = flight::socket_of(pid).unwrap();
    assert_eq!(
        recorder,
        PathBuf::from(format!("/proc/{pid}/root/tmp/gpu-tools-flight-1.sock")),
        "pid 1 in its namespace"
    );
    assert!(
        !std::path::Path::new("/tmp/gpu-tools-flight-1.sock").exists()
            && !std::path::Path::new(&format!("/tmp/gpu-tools-flight-{pid}.sock")).exists(),
        "not in this machine's /tmp"
    );
    let report = flight::ask(&recorder, Duration::from_secs(5)).expect("the recorder answers");
    assert_eq!(report.launches, 5);
    exit_child(stdin, &mut child);
    let _ = std::fs::remove_dir_all(&dir);
}
