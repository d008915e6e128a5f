//! Starting a program whose processes stream to this one: the one launcher of `gpu-tools trace -- PROGRAM` and
//! `gpu-tools profile -- PROGRAM` ([`crate::profile::run`]). [`Launcher::new`] makes a private folder (mode 0700,
//! removed when the launch ends) with the socket listening in it; the caller gives the program its settings, which
//! name [`Launcher::socket`] ([`crate::settings::Settings`]); [`Launcher::launch`] starts
//! it and the thread that accepts its processes' connections ([`crate::collect::accept_streams`]), whose
//! deliveries go to the caller's channel, beside whatever else the caller sends there (counter samples, for one).
//!
//! ```no_run
//! use std::process::Command;
//! use std::sync::mpsc;
//! use gpu_tools_injection::collect::{AcceptOptions, Delivery};
//! use gpu_tools_injection::launch::Launcher;
//! use gpu_tools_injection::settings::{Destination, Library, Settings};
//!
//! let launcher = Launcher::new("my-tracer-")?;
//! let mut cmd = Command::new("./app");
//! let settings = Settings::new(Destination::Socket(launcher.socket().into()));
//! cmd.envs(settings.environment(Library::Cuda("/opt/libgpu_tools_inject.so".as_ref())));
//! let (tx, rx) = mpsc::channel::<Delivery>();
//! let mut launched = launcher.launch(&mut cmd, AcceptOptions::default(), tx)?;
//! while launched.try_wait()?.is_none() {
//!     while let Ok(delivery) = rx.try_recv() {
//!         println!("{delivery:?}");
//!     }
//!     std::thread::sleep(std::time::Duration::from_millis(20));
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::io;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;

use crate::collect::{AcceptOptions, Accepted, Delivery, accept_streams};
use crate::socket_folder::SocketFolder;

/// Why a program could not be launched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The private folder for the socket could not be made.
    #[error("cannot make a socket folder: {0}")]
    Folder(io::Error),
    /// The socket could not listen.
    #[error("cannot listen on {}: {error}", .socket.display())]
    Listen {
        /// The socket's path.
        socket: PathBuf,
        /// Why.
        error: io::Error,
    },
    /// The program could not be started.
    #[error("{0}")]
    Spawn(io::Error),
}

/// A socket listening in a private folder, before the program is started: what launches it. (Not
/// `attach::Listening`, the sockets an attach listens on before any process is touched.)
#[derive(Debug)]
pub struct Launcher {
    folder: SocketFolder,
    socket: PathBuf,
    listener: UnixListener,
}

impl Launcher {
    /// A private folder in the temporary folder, named after `prefix`, and a non-blocking socket listening in it.
    pub fn new(prefix: &str) -> Result<Launcher, LaunchError> {
        let folder = SocketFolder::new(prefix).map_err(LaunchError::Folder)?;
        let socket = folder.path().join("trace.sock");
        let listener = crate::socket_folder::listen_nonblocking(&socket).map_err(|error| {
            LaunchError::Listen {
                socket: socket.clone(),
                error,
            }
        })?;
        Ok(Launcher {
            folder,
            socket,
            listener,
        })
    }

    /// The socket's path: what the program's settings name ([`crate::env::SOCKET`]).
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Starts `command` (its settings given by the caller) and the thread that accepts its processes'
    /// connections, each read on a thread of its own, whose deliveries go to `tx`.
    pub fn launch<M>(
        self,
        command: &mut Command,
        options: AcceptOptions,
        tx: mpsc::Sender<M>,
    ) -> Result<Launched, LaunchError>
    where
        M: From<Delivery> + Send + 'static,
    {
        let child = command.spawn().map_err(LaunchError::Spawn)?;
        let stop = Arc::new(AtomicBool::new(false));
        let accepted: Accepted = Arc::default();
        let (s, a) = (Arc::clone(&stop), Arc::clone(&accepted));
        let listener = self.listener;
        let thread = std::thread::spawn(move || accept_streams(listener, tx, s, a, options));
        Ok(Launched {
            child,
            accepted,
            stop,
            thread: Some(thread),
            _folder: self.folder,
        })
    }
}

/// A launched program and the thread accepting its processes' connections. Dropping it stops accepting and
/// removes the socket's folder; the program itself is left as it is.
#[derive(Debug)]
pub struct Launched {
    child: Child,
    accepted: Accepted,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    _folder: SocketFolder,
}

impl Launched {
    /// How the program ended, if it has ([`Child::try_wait`]).
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// Connections accepted so far: one per process of the program that loaded the library.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Stops accepting connections (those accepted are read to their end).
    pub fn stop_accepting(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        // On every way out (a failed wait, an early return), the accepting thread ends.
        self.stop_accepting();
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;
    use std::sync::mpsc;

    use super::{LaunchError, Launcher};
    use crate::collect::{AcceptOptions, Delivery};

    #[test]
    fn a_launch_connects_its_program_and_removes_the_folder_at_its_end() {
        let launcher = Launcher::new("gpu-tools-injection-test-").unwrap();
        let socket = launcher.socket().to_path_buf();
        let folder = socket.parent().unwrap().to_path_buf();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&folder).unwrap().permissions().mode() & 0o777,
            0o700
        );
        // A program that connects and closes at once: one connection, without a stream.
        let mut cmd = Command::new("python3");
        cmd.args([
            "-c",
            "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.close()",
        ])
        .arg(&socket);
        let (tx, rx) = mpsc::channel::<Delivery>();
        let mut launched = match launcher.launch(&mut cmd, AcceptOptions::default(), tx) {
            Ok(l) => l,
            Err(LaunchError::Spawn(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                panic!("python3 is needed by this test: {e}")
            }
            Err(e) => panic!("{e}"),
        };
        let mut got = Vec::new();
        while !matches!(got.last(), Some(Delivery::Closed(_))) {
            got.push(
                rx.recv_timeout(std::time::Duration::from_secs(20))
                    .expect("a delivery"),
            );
        }
        // The connection's empty stream is said, then its close.
        assert!(
            matches!(
                got.as_slice(),
                [
                    Delivery::Item(0, Err(gpu_tools_trace::WireError::NoHeader { received: 0 })),
                    Delivery::Closed(0)
                ]
            ),
            "{got:?}"
        );
        assert_eq!(launched.accepted(), 1);
        let status = loop {
            if let Some(s) = launched.try_wait().unwrap() {
                break s;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert!(status.success());
        drop(launched);
        assert!(!folder.exists(), "the socket's folder is removed");
    }

    #[test]
    fn a_program_that_cannot_start_is_a_spawn_error_and_leaves_no_folder() {
        let launcher = Launcher::new("gpu-tools-injection-test-").unwrap();
        let folder = launcher.socket().parent().unwrap().to_path_buf();
        let (tx, _rx) = mpsc::channel::<Delivery>();
        let mut cmd = Command::new("/nonexistent/program");
        let e = launcher
            .launch(&mut cmd, AcceptOptions::default(), tx)
            .unwrap_err();
        assert!(
            matches!(&e, LaunchError::Spawn(io) if io.kind() == std::io::ErrorKind::NotFound),
            "{e:?}"
        );
        assert!(!folder.exists());
    }
}
