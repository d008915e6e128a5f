//! Where an injection library's trace stream goes: the tracer's Unix socket or a file (`%p`, `%h` and `%r`
//! expanded), written only by the process that opened it. Both injection libraries (CUDA and ROCm) write through it.
//!
//! A program that forks copies the library's state into the child, the open descriptor included. The child must
//! not write into its parent's stream, and must not keep the tracer's connection open after the parent is gone:
//! every write checks the process id first, and a fork handler closes the child's copies of every sink's
//! descriptor at once. An exec'd child does not inherit the descriptor (close-on-exec) and, if it uses CUDA,
//! connects anew.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// Descriptors of open sinks, closed in a forked child by [`close_in_child`]. Fixed slots: the fork handler must
/// not allocate or lock.
static OPEN_FDS: [AtomicI32; 16] = [const { AtomicI32::new(-1) }; 16];
static FORK_HANDLER: Once = Once::new();

extern "C" fn close_in_child() {
    for slot in &OPEN_FDS {
        let fd = slot.swap(-1, Ordering::SeqCst);
        if fd >= 0 {
            // SAFETY: close is async-signal-safe; the descriptor is this (child) process's copy of a sink's.
            unsafe { libc::close(fd) };
        }
    }
}

fn register(fd: RawFd) -> Option<usize> {
    FORK_HANDLER.call_once(|| {
        // SAFETY: registers a child handler that only closes descriptors (async-signal-safe).
        let rc = unsafe { libc::pthread_atfork(None, None, Some(close_in_child)) };
        if rc != 0 {
            log::warn!(
                "pthread_atfork failed ({rc}): a forked child keeps the stream's descriptor open"
            );
        }
    });
    OPEN_FDS.iter().position(|slot| {
        slot.compare_exchange(-1, fd, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    })
}

enum Target {
    Socket(UnixStream),
    File(File),
}

/// An open output of one process.
pub struct Sink {
    target: Target,
    owner: u32,
    slot: Option<usize>,
    broken: AtomicBool,
    /// Where it goes, for messages.
    describe: String,
}

/// Why a write did not happen.
#[derive(Debug)]
pub enum SendError {
    /// This is a forked child of the process that opened the sink: it writes nothing.
    ForkedChild,
    /// An earlier write failed; the sink is closed for good.
    Broken,
    /// The write failed now (the tracer went away, the disk is full).
    Io(io::Error),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::ForkedChild => {
                f.write_str("a forked child does not write into its parent's stream")
            }
            SendError::Broken => f.write_str("the stream failed earlier"),
            SendError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl Sink {
    /// Connects to a tracer's Unix socket.
    pub fn connect(path: &Path) -> io::Result<Sink> {
        let s = UnixStream::connect(path)?;
        let fd = s.as_raw_fd();
        Ok(Sink::new(
            Target::Socket(s),
            fd,
            format!("socket {}", path.display()),
        ))
    }

    /// Creates (or truncates) a file; `%p` in the path becomes this process's id, `%h` the host name, `%r` its
    /// rank (`RANK`, `OMPI_COMM_WORLD_RANK`, `PMI_RANK`, `SLURM_PROCID`; kept as `%r` where none is set).
    pub fn create_file(template: &Path) -> io::Result<Sink> {
        let rank = gpu_tools_trace::ProcessInfo::current()
            .rank()
            .map(|r| r.to_string());
        let host = gpu_tools_trace::host_name();
        // A path is bytes: each UTF-8 run is expanded and the other bytes kept, where a lossy conversion would
        // create another file than the one named.
        let mut path = Vec::with_capacity(template.as_os_str().len() + 16);
        for chunk in template.as_os_str().as_bytes().utf8_chunks() {
            let text = gpu_tools_trace::file::expand_output_name_with_rank(
                chunk.valid(),
                &host,
                std::process::id(),
                rank.as_deref(),
            );
            path.extend_from_slice(text.as_bytes());
            path.extend_from_slice(chunk.invalid());
        }
        let path = PathBuf::from(OsString::from_vec(path));
        let f = File::create(&path)?;
        let fd = f.as_raw_fd();
        Ok(Sink::new(
            Target::File(f),
            fd,
            format!("file {}", path.display()),
        ))
    }

    fn new(target: Target, fd: RawFd, describe: String) -> Sink {
        Sink {
            target,
            owner: std::process::id(),
            slot: register(fd),
            broken: AtomicBool::new(false),
            describe,
        }
    }

    /// A second handle on the socket, for reading what the tracer sends back (`None` for a file).
    pub fn control_stream(&self) -> Option<UnixStream> {
        match &self.target {
            Target::Socket(s) => s.try_clone().ok(),
            Target::File(_) => None,
        }
    }

    /// Where the sink writes, for messages.
    pub fn describe(&self) -> &str {
        &self.describe
    }

    /// True in the process that opened the sink, false in a forked child.
    pub fn is_owner(&self) -> bool {
        std::process::id() == self.owner
    }

    /// Writes all of `bytes`, or nothing in a forked child. A failure closes the sink for good (a tracer that went
    /// away is not written to again).
    pub fn send(&self, bytes: &[u8]) -> Result<(), SendError> {
        if !self.is_owner() {
            return Err(SendError::ForkedChild);
        }
        if self.broken.load(Ordering::Relaxed) {
            return Err(SendError::Broken);
        }
        let result = match &self.target {
            Target::Socket(s) => send_all(s.as_raw_fd(), bytes),
            Target::File(f) => (&*f).write_all(bytes),
        };
        result.map_err(|e| {
            self.broken.store(true, Ordering::Relaxed);
            SendError::Io(e)
        })
    }

    /// Ends the stream: a socket is shut down for writing (the tracer sees the end at once, even if a forked
    /// child still holds a copy of the descriptor); a file is synced.
    pub fn finish(&self) {
        if !self.is_owner() {
            return;
        }
        match &self.target {
            Target::Socket(s) => {
                let _ = s.shutdown(std::net::Shutdown::Write);
            }
            Target::File(f) => {
                let _ = f.sync_data();
            }
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            OPEN_FDS[i].store(-1, Ordering::SeqCst);
        }
    }
}

/// `send` with `MSG_NOSIGNAL` until everything is written: a tracer that closed its end must give an error
/// here, not a SIGPIPE that kills the traced program.
fn send_all(fd: RawFd, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: the pointer and length describe `bytes`; fd is the sink's open socket.
        let n = unsafe { libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        bytes = bytes.get(n as usize..).unwrap_or(&[]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixListener;

    /// Socket tests run one at a time: a test that forks copies every descriptor open in the process, and a copy
    /// of another test's peer would keep that peer's connection open.
    fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
        static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
        LOCK.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn socket_pair() -> (tempdir::Dir, UnixListener, PathBuf) {
        let dir = tempdir::Dir::new();
        let path = dir.path().join("s");
        let listener = UnixListener::bind(&path).unwrap();
        (dir, listener, path)
    }

    /// A private temporary folder, removed on drop.
    mod tempdir {
        pub struct Dir(std::path::PathBuf);
        impl Dir {
            pub fn new() -> Dir {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let p = std::env::temp_dir().join(format!(
                    "gpu-tools-inject-test-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
            pub fn path(&self) -> &std::path::Path {
                &self.0
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn a_socket_sink_delivers_bytes_and_its_end() {
        let _serial = one_at_a_time();
        let (_dir, listener, path) = socket_pair();
        let sink = Sink::connect(&path).unwrap();
        let (mut peer, _) = listener.accept().unwrap();
        sink.send(b"hello ").unwrap();
        sink.send(b"world").unwrap();
        sink.finish();
        let mut got = Vec::new();
        peer.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"hello world");
    }

    #[test]
    fn a_closed_tracer_is_an_error_not_a_signal() {
        let _serial = one_at_a_time();
        let (_dir, listener, path) = socket_pair();
        let sink = Sink::connect(&path).unwrap();
        let (peer, _) = listener.accept().unwrap();
        drop(peer);
        // The first write may still land in the socket buffer; a later one sees the closed peer.
        let mut failed = None;
        for _ in 0..100 {
            if let Err(e) = sink.send(&[0u8; 4096]) {
                failed = Some(e);
                break;
            }
        }
        assert!(matches!(failed, Some(SendError::Io(_))), "{failed:?}");
        assert!(matches!(sink.send(b"x"), Err(SendError::Broken)));
    }

    #[test]
    fn a_file_sink_writes_under_its_pid() {
        let _serial = one_at_a_time();
        let dir = tempdir::Dir::new();
        let sink = Sink::create_file(&dir.path().join("t-%p.bin")).unwrap();
        sink.send(b"abc").unwrap();
        sink.finish();
        let path = dir.path().join(format!("t-{}.bin", std::process::id()));
        assert_eq!(std::fs::read(path).unwrap(), b"abc");
        assert!(sink.describe().contains(&std::process::id().to_string()));
    }

    /// A path is bytes: one that is not UTF-8 (a folder named in Latin-1) is written as named, `%p` expanded.
    #[test]
    fn a_file_template_that_is_not_utf8_is_the_file_written() {
        use std::ffi::OsStr;
        use std::os::unix::ffi::OsStrExt;
        let _serial = one_at_a_time();
        let dir = tempdir::Dir::new();
        let template = dir.path().join(OsStr::from_bytes(b"r\xe9sultat-%p.bin"));
        let sink = Sink::create_file(&template).unwrap();
        sink.send(b"abc").unwrap();
        sink.finish();
        let pid = std::process::id().to_string();
        let name = [&b"r\xe9sultat-"[..], pid.as_bytes(), b".bin"].concat();
        let written: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(written, [OsStr::from_bytes(&name)]);
        assert_eq!(
            std::fs::read(dir.path().join(OsStr::from_bytes(&name))).unwrap(),
            b"abc"
        );
    }

    /// A forked child neither writes into the stream nor keeps it open: the parent's end reaches the tracer while
    /// the child still lives.
    #[test]
    fn a_forked_child_writes_nothing_and_does_not_hold_the_stream_open() {
        let _serial = one_at_a_time();
        let (_dir, listener, path) = socket_pair();
        let sink = Sink::connect(&path).unwrap();
        let (mut peer, _) = listener.accept().unwrap();
        sink.send(b"before|").unwrap();
        let (mut to_child, from_parent) = UnixStream::pair().unwrap();
        // SAFETY: the child only calls async-signal-safe functions and the sink's send (a getpid check, no
        // lock, no allocation), then _exit.
        let child = unsafe { libc::fork() };
        assert!(child >= 0, "fork");
        if child == 0 {
            let code = match sink.send(b"child|") {
                Err(SendError::ForkedChild) => 0,
                _ => 1,
            };
            // Wait until the parent has checked for the end of the stream, then leave without exit handlers.
            let mut b = [0u8; 1];
            // SAFETY: reads one byte from a descriptor of this process.
            unsafe {
                libc::read(from_parent.as_raw_fd(), b.as_mut_ptr().cast(), 1);
                libc::_exit(code)
            };
        }
        sink.send(b"after").unwrap();
        drop(sink);
        // The parent's copy is closed by the drop above; only the child's copy could keep the stream open.
        peer.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let mut got = Vec::new();
        let r = peer.read_to_end(&mut got);
        to_child.write_all(b"x").unwrap();
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        unsafe { libc::waitpid(child, &mut status, 0) };
        r.expect("the stream ends although the forked child is alive");
        assert_eq!(got, b"before|after");
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child saw {status:#x}"
        );
    }
}
