//! An attach session without a CUDA process: the refusals before any process is touched, the outcome of a
//! process the injection refuses, and the session's connections (accepted, read, written to, stopped) with this
//! test standing in for an attached library.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use gpu_tools::linux::inject::InjectError;
use gpu_tools_trace::{Encoder, Record, StreamHeader, TimestampClock};

use super::argument;
use crate::attach::{AfterStop, AttachError, Attached, Listening, Placement, SetupError, Sockets};
use crate::collect::{AcceptOptions, Delivery};
use crate::control::Control;
use crate::env;
use crate::profile::ProfileRequest;
use crate::settings::{Destination, SeenAs, Settings};

const SOCKETS: Sockets<'static> = Sockets {
    prefix: "gpu-tools-injection-attach-test-",
    name: "test.sock",
    placement: Placement::PrivateFolder,
};

const LIBRARY: &str = "/nonexistent/libgpu_tools_inject.so";

fn settings() -> Settings {
    Settings::new(Destination::Socket(PathBuf::new()))
}

/// A session on this test's own process, which the injection refuses (a process cannot trace itself): the
/// sockets listen, nothing is started.
fn session(options: AcceptOptions) -> (Attached, PathBuf, mpsc::Receiver<Delivery>) {
    let me = std::process::id();
    let listening = Listening::new(&[me], &SOCKETS).unwrap();
    let socket = listening.sockets().next().unwrap().1.to_path_buf();
    let (tx, rx) = mpsc::channel();
    let mut seen = Vec::new();
    let attached = listening
        .attach(LIBRARY.as_ref(), &settings(), options, tx, |o| {
            seen.push(o.pid)
        })
        .unwrap();
    assert_eq!(seen, [me], "each outcome is handed on as it comes");
    (attached, socket, rx)
}

/// [`session`], with one library connected and accepted.
fn connected(options: AcceptOptions) -> (Attached, UnixStream, PathBuf, mpsc::Receiver<Delivery>) {
    let (attached, socket, rx) = session(options);
    let library = UnixStream::connect(&socket).unwrap();
    attached
        .wait_for_connections(1, Duration::from_secs(10))
        .unwrap();
    (attached, library, socket, rx)
}

#[test]
fn each_processs_argument_is_the_settings_with_its_socket_and_its_pids() {
    let settings = Settings {
        cupti: Some("/opt/libcupti.so.13".into()),
        profile: Some(ProfileRequest::new(vec!["sm__cycles_elapsed.avg".into()])),
        ..settings()
    };
    let me = std::process::id();
    let text = argument(&settings, me, std::path::Path::new("/tmp/a/b.sock")).unwrap();
    let back = Settings::from_attach_argument(&text).unwrap();
    assert_eq!(
        back.destination,
        Destination::Socket("/tmp/a/b.sock".into())
    );
    // The process as this one sees it: its pid and its parent's.
    assert_eq!(
        back.seen_as,
        Some(SeenAs {
            pid: me,
            parent: std::os::unix::process::parent_id()
        })
    );
    assert_eq!(
        Settings {
            seen_as: None,
            ..back.with_destination(settings.destination.clone())
        },
        settings
    );
    assert!(
        !text.contains(env::CUDA_INJECTION),
        "the library is loaded, not named: {text}"
    );
}

#[test]
fn a_setting_an_attach_cannot_carry_is_refused_before_any_process_is_touched() {
    let listening = Listening::new(&[std::process::id()], &SOCKETS).unwrap();
    let folder = listening
        .sockets()
        .next()
        .unwrap()
        .1
        .parent()
        .unwrap()
        .to_path_buf();
    let settings = Settings {
        api_skip: vec!["cudaGetLastError\nGPU_TOOLS_TRACE_KINDS=kernel".into()],
        ..settings()
    };
    let (tx, _rx) = mpsc::channel::<Delivery>();
    let mut outcomes = 0;
    let e = listening
        .attach(
            LIBRARY.as_ref(),
            &settings,
            AcceptOptions::default(),
            tx,
            |_| outcomes += 1,
        )
        .unwrap_err();
    assert!(
        matches!(&e, SetupError::Argument(s) if s.var == env::API_SKIP),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .ends_with("holds a newline or a NUL, which an attach cannot carry"),
        "{e}"
    );
    assert_eq!(outcomes, 0, "no process was touched");
    assert!(!folder.exists(), "the socket folder is removed");
}

#[test]
fn a_process_whose_namespace_cannot_be_read_is_refused_while_setting_up() {
    let gone = gpu_tools_testing::process::vanished_pid();
    let sockets = Sockets {
        placement: Placement::PerMountNamespace,
        ..SOCKETS
    };
    let e = Listening::new(&[gone], &sockets).unwrap_err();
    assert!(
        matches!(&e, SetupError::Target { pid, error: InjectError::NoSuchProcess(p) } if *pid == gone && *p == gone),
        "{e:?}"
    );
    // This process sees its own files: the folder's socket; without looking, the same for one that is gone.
    let here = Listening::new(&[std::process::id()], &sockets).unwrap();
    let private = Listening::new(&[gone], &SOCKETS).unwrap();
    for l in [&here, &private] {
        let (_, socket) = l.sockets().next().unwrap();
        assert!(socket.ends_with("test.sock"), "{}", socket.display());
        assert!(socket.exists());
    }
}

#[test]
fn a_refused_process_is_an_outcome_and_the_others_are_not_kept_from_it() {
    let gone = gpu_tools_testing::process::vanished_pid();
    let me = std::process::id();
    let listening = Listening::new(&[me, gone], &SOCKETS).unwrap();
    let (tx, _rx) = mpsc::channel::<Delivery>();
    let attached = listening
        .attach(
            LIBRARY.as_ref(),
            &settings(),
            AcceptOptions::default(),
            tx,
            |_| {},
        )
        .unwrap();
    let outcomes = attached.outcomes();
    assert_eq!(outcomes.len(), 2);
    assert_eq!((outcomes[0].pid, outcomes[1].pid), (me, gone));
    assert!(
        matches!(&outcomes[0].result, Err(AttachError::Inject(InjectError::OwnProcess(p))) if *p == me),
        "{:?}",
        outcomes[0]
    );
    assert!(
        matches!(&outcomes[1].result, Err(AttachError::Inject(InjectError::NoSuchProcess(p))) if *p == gone),
        "{:?}",
        outcomes[1]
    );
    assert!(attached.started().is_empty());
}

#[test]
fn connections_are_read_written_to_and_stopped() {
    let (attached, mut library, socket, rx) = connected(AcceptOptions::default());
    assert_eq!(attached.accepted(), 1);
    // What the library sends arrives as deliveries.
    let mut e = Encoder::new(&StreamHeader::new(4242, 0, TimestampClock::Monotonic));
    e.push(&gpu_tools_testing::records::kernel("k", 1, 2, 3));
    library.write_all(e.bytes()).unwrap();
    let header = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        matches!(header, Delivery::Header(0, h) if h.pid == 4242),
        "{header:?}"
    );
    let item = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        matches!(item, Delivery::Item(0, Ok(Record::Kernel(_)))),
        "{item:?}"
    );
    // A control byte, then the stop byte with the writing half closed: the library reads both, then the end.
    attached.send(Control::ProfileStart).unwrap();
    attached.stop(AfterStop::CloseWrites);
    library
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    library.read_to_end(&mut got).unwrap();
    assert_eq!(got, [Control::ProfileStart.byte(), Control::Stop.byte()]);
    drop(library);
    let closed = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(matches!(closed, Delivery::Closed(0)), "{closed:?}");
    let folder = socket.parent().unwrap().to_path_buf();
    drop(attached);
    assert!(!folder.exists(), "the socket folder is removed");
}

#[test]
fn the_stop_byte_alone_leaves_the_connection_open() {
    let (attached, mut library, _socket, _rx) = connected(AcceptOptions::default());
    attached.stop(AfterStop::KeepOpen);
    library
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut byte = [0u8; 2];
    assert_eq!(library.read(&mut byte).unwrap(), 1);
    assert_eq!(byte[0], Control::Stop.byte());
    let more = library.read(&mut byte);
    assert!(
        more.as_ref()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
        "no end of stream: {more:?}"
    );
}

#[test]
fn with_most_one_a_second_connection_waits_unaccepted_on_a_listening_socket() {
    let options = AcceptOptions {
        most: Some(1),
        ..AcceptOptions::default()
    };
    let (attached, socket, _rx) = session(options);
    let _first = UnixStream::connect(&socket).unwrap();
    attached
        .wait_for_connections(1, Duration::from_secs(10))
        .unwrap();
    // The socket still listens: a second connection is queued, not refused, and not accepted.
    let _second = UnixStream::connect(&socket).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(attached.accepted(), 1);
    // Only the first gets control bytes.
    attached.send(Control::Stop).unwrap();
}

#[test]
fn no_connection_in_time_is_said_as_accepting_answered() {
    let (attached, _socket, _rx) = session(AcceptOptions::default());
    let e = attached
        .wait_for_connections(1, Duration::from_millis(50))
        .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EAGAIN), "{e}");
    // Nothing to write to yet is not an error.
    attached.send(Control::Stop).unwrap();
}
