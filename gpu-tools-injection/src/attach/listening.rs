//! The first step of an attach: the sockets the processes will connect to, listening before any process is
//! touched. A process that sees this one's files connects to the socket in a private folder; with
//! [`Placement::PerMountNamespace`], one in another mount namespace (a container) gets a socket in its own `/tmp`,
//! made through `/proc/PID/root` and removed when the session ends.

use std::io;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use gpu_tools::linux::inject::{InjectError, TargetFilesystem};

use crate::socket_folder::SocketFolder;

/// Where the attached processes connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Placement {
    /// Each process's mount namespace is looked at: one that sees this process's files connects to the socket
    /// in the private folder, one in another (a container) to a socket in its own `/tmp`, named after the
    /// prefix, this process and it (`trace --pid`, `profile --pid`). A process whose namespace cannot be read is
    /// refused here, before any process is touched.
    PerMountNamespace,
    /// Every process connects to the socket in the private folder; their namespaces are not looked at (a process
    /// in a container cannot reach the socket, and does not connect).
    PrivateFolder,
}

/// How an attach names and places its sockets.
#[derive(Debug, Clone, Copy)]
pub struct Sockets<'a> {
    /// The start of the private folder's name (`gpu-tools-trace-`), and of a socket's placed in a process's
    /// `/tmp`.
    pub prefix: &'a str,
    /// The socket's name in the private folder (`trace.sock`).
    pub name: &'a str,
    /// Where each process connects.
    pub placement: Placement,
}

/// Why an attach could not be set up; no process was touched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// The private folder for the sockets could not be made.
    #[error("cannot make a socket folder: {0}")]
    Folder(io::Error),
    /// A socket could not listen.
    #[error("cannot listen on {}: {error}", .socket.display())]
    Listen {
        /// The socket's path (as this process reaches it).
        socket: PathBuf,
        /// Why.
        error: io::Error,
    },
    /// A process's mount namespace could not be read ([`Placement::PerMountNamespace`]).
    #[error("{error}")]
    Target {
        /// The process.
        pid: u32,
        /// Why.
        error: InjectError,
    },
    /// A setting holds what an attach argument cannot carry (a newline, a NUL, text that is not UTF-8).
    #[error("{0}")]
    Argument(crate::settings::SettingError),
}

/// Where one process connects.
#[derive(Debug)]
pub(super) struct Endpoint {
    pub(super) pid: u32,
    /// The socket as the process names it.
    pub(super) in_target: PathBuf,
}

/// The sockets of an attach, listening, before any process is touched ([`Listening::attach`] goes on).
#[derive(Debug)]
pub struct Listening {
    pub(super) endpoints: Vec<Endpoint>,
    /// The listeners, for the accepting threads (taken when they start).
    pub(super) accepting: Vec<UnixListener>,
    /// The same listeners, kept open until the session stops accepting: a thread that accepted its most
    /// ([`crate::collect::AcceptOptions::most`]) leaves the socket listening.
    pub(super) kept: Vec<UnixListener>,
    /// Sockets made in processes' `/tmp`, removed at the end.
    pub(super) placed: Vec<PathBuf>,
    /// Removed when the session ends (its socket with it).
    _folder: SocketFolder,
}

impl Listening {
    /// Makes the private folder and, for each of `pids` in turn, finds where it will connect and listens there
    /// (one socket for all that see the folder). Reads the processes' `/proc` entries and nothing more.
    pub fn new(pids: &[u32], sockets: &Sockets<'_>) -> Result<Listening, SetupError> {
        let folder = SocketFolder::new(sockets.prefix).map_err(SetupError::Folder)?;
        let in_folder = folder.path().join(sockets.name);
        let mut listening = Listening {
            endpoints: Vec::new(),
            accepting: Vec::new(),
            kept: Vec::new(),
            placed: Vec::new(),
            _folder: folder,
        };
        let mut folder_listening = false;
        for &pid in pids {
            let own = match sockets.placement {
                Placement::PrivateFolder => None,
                Placement::PerMountNamespace => Some(
                    TargetFilesystem::for_process(pid)
                        .map_err(|error| SetupError::Target { pid, error })?,
                )
                .filter(|fs| !fs.is_shared()),
            };
            let in_target = match own {
                None => {
                    if !folder_listening {
                        listening.listen(&in_folder)?;
                        folder_listening = true;
                    }
                    in_folder.clone()
                }
                Some(fs) => {
                    let in_target = PathBuf::from(format!(
                        "/tmp/{}{}-{pid}.sock",
                        sockets.prefix,
                        std::process::id()
                    ));
                    let here = fs.host_path(&in_target);
                    // One left by an earlier tracer of the same number.
                    let _ = std::fs::remove_file(&here);
                    listening.listen(&here)?;
                    listening.placed.push(here);
                    in_target
                }
            };
            listening.endpoints.push(Endpoint { pid, in_target });
        }
        Ok(listening)
    }

    /// A non-blocking socket listening at `socket` (`listen_nonblocking`), and a handle of it kept for the stop.
    fn listen(&mut self, socket: &Path) -> Result<(), SetupError> {
        let (listener, kept) = crate::socket_folder::listen_nonblocking(socket)
            .and_then(|l| l.try_clone().map(|kept| (l, kept)))
            .map_err(|error| SetupError::Listen {
                socket: socket.to_path_buf(),
                error,
            })?;
        self.accepting.push(listener);
        self.kept.push(kept);
        Ok(())
    }

    /// The sockets as the processes name them, in the order of the pids.
    pub fn sockets(&self) -> impl Iterator<Item = (u32, &Path)> {
        self.endpoints
            .iter()
            .map(|e| (e.pid, e.in_target.as_path()))
    }
}

impl Drop for Listening {
    /// The sockets placed in processes' `/tmp` are removed (the folder's go with it), on every way out.
    fn drop(&mut self) {
        for p in &self.placed {
            let _ = std::fs::remove_file(p);
        }
    }
}
