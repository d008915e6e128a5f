//! The private folder (mode 0700, in the temporary folder, removed when dropped) that holds the socket an injected
//! library connects to: one launcher's ([`crate::launch`]) and one attach's (`crate::attach`).

use std::io;
use std::path::{Path, PathBuf};

/// A private folder (mode 0700) in the temporary folder, removed on drop.
#[derive(Debug)]
pub(crate) struct SocketFolder(PathBuf);

impl SocketFolder {
    /// A new folder whose name starts with `prefix`.
    pub(crate) fn new(prefix: &str) -> io::Result<SocketFolder> {
        use std::os::unix::fs::DirBuilderExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let base = format!("{prefix}{}-{nanos}", std::process::id());
        // A name taken already (another tracer of this process started in the same nanosecond) gets a suffix.
        let mut last = None;
        for n in 0..64 {
            let path = std::env::temp_dir().join(format!("{base}-{n}"));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(SocketFolder(path)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free name")))
    }

    /// The folder's path.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

/// A socket listening at `socket`, non-blocking (so that an accepting thread sees its stop between connections):
/// how a launch and an attach both listen.
pub(crate) fn listen_nonblocking(socket: &Path) -> io::Result<std::os::unix::net::UnixListener> {
    let listener = std::os::unix::net::UnixListener::bind(socket)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

impl Drop for SocketFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
