//! Folders private to the user gpu-tools runs as: made with mode 0700, and checked to be owned by that user and
//! writable by nobody else before anything in them is trusted (another user could otherwise plant a library there
//! that a traced program would load, or a link that a write would follow).

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;

/// The effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// `dir` is a folder of ours that nobody else can write to.
pub fn check(dir: &Path) -> std::io::Result<()> {
    let meta = std::fs::metadata(dir)?;
    if !meta.is_dir() {
        return Err(std::io::Error::other("not a folder"));
    }
    let uid = euid();
    if meta.uid() != uid || meta.permissions().mode() & 0o022 != 0 {
        return Err(std::io::Error::other(format!(
            "owned by uid {} with mode {:o}, not private to uid {uid}",
            meta.uid(),
            meta.permissions().mode() & 0o7777
        )));
    }
    Ok(())
}

/// Makes `dir` (and the folders above it) with mode 0700 where missing, then [`check`]s it.
pub fn make(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    check(dir)
}
