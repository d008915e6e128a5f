//! The cache folders an embedded library is written to: `$XDG_CACHE_HOME/gpu-tools/`, else `~/.cache/gpu-tools/`,
//! else a private folder in the temporary folder, the first that takes it. [`extract_into`] writes it there;
//! [`check_folder`] says, without writing anything, whether a folder could take it (for `doctor`).

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::private_dir::{check as check_private, euid};

/// The folders tried, in order.
pub(super) fn cache_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    if let Some(cache) = std::env::var_os("XDG_CACHE_HOME").and_then(absolute) {
        dirs.push(cache.join("gpu-tools"));
    }
    if let Some(home) = std::env::var_os("HOME").and_then(absolute) {
        dirs.push(home.join(".cache").join("gpu-tools"));
    }
    dirs.push(std::env::temp_dir().join(format!("gpu-tools-{}", euid())));
    dirs.dedup();
    dirs
}

/// An I/O error in a few words: "permission denied", "read-only file system", "no space left on device".
pub(super) fn reason(e: &std::io::Error) -> String {
    let text = e.to_string();
    let text = match text.rfind(" (os error ") {
        Some(i) => &text[..i],
        None => &text,
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text.to_string(),
    }
}

/// The nearest of `dir` and the folders above it that exists, which must be a folder (`dir` is made below it).
fn nearest_existing(dir: &Path) -> std::io::Result<&Path> {
    let mut existing = dir;
    while !existing.exists() {
        existing = existing
            .parent()
            .ok_or_else(|| std::io::Error::other("no folder above it exists"))?;
    }
    if existing.is_dir() {
        Ok(existing)
    } else if existing == dir {
        Err(std::io::Error::other("not a folder"))
    } else {
        Err(std::io::Error::other(format!(
            "{} is not a folder",
            existing.display()
        )))
    }
}

/// Makes sure `dir/name` holds `bytes`, and returns its path.
pub(super) fn extract_into(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    nearest_existing(dir)?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    check_private(dir)?;
    let path = dir.join(name);
    if holds(&path, bytes) {
        return Ok(path);
    }
    let mut temp = tempfile::Builder::new()
        .prefix(".libgpu_tools_inject-")
        .suffix(".partial")
        .permissions(std::fs::Permissions::from_mode(0o644))
        .tempfile_in(dir)?;
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    temp.persist(&path).map_err(|e| e.error)?;
    log::debug!("wrote the embedded library to {}", path.display());
    Ok(path)
}

/// Whether `path` holds exactly `bytes`.
pub(super) fn holds(path: &Path, bytes: &[u8]) -> bool {
    std::fs::read(path).is_ok_and(|existing| existing == bytes)
}

/// Whether [`extract_into`] could write `size` bytes into `dir`, found out without writing anything: the folder
/// (or, where it does not exist yet, the nearest folder above it, where it would be made) must be a folder this
/// user may write into, on a file system with room for the library; an existing folder must also be private.
pub(super) fn check_folder(dir: &Path, size: u64) -> std::io::Result<()> {
    let existing = nearest_existing(dir)?;
    if existing == dir {
        check_private(dir)?;
    }
    let c = CString::new(existing.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("a NUL byte in the path"))?;
    // SAFETY: a NUL-terminated path; faccessat only checks the effective user's rights (and a read-only mount).
    if unsafe {
        libc::faccessat(
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::W_OK | libc::X_OK,
            libc::AT_EACCESS,
        )
    } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: a NUL-terminated path and a zeroed struct statvfs fills.
    if unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) } == 0 {
        // SAFETY: statvfs succeeded, so it filled the struct (zeroed before in any case).
        let st = unsafe { st.assume_init() };
        let free = st.f_bavail.saturating_mul(st.f_frsize);
        if free < size {
            return Err(std::io::Error::other(format!(
                "no space left on device ({free} bytes free, {size} needed)"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extraction_writes_once_and_repairs_a_changed_file() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache/gpu-tools");
        let path = extract_into(&cache, "lib.so", b"library bytes").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"library bytes");
        assert_eq!(
            std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let written = std::fs::metadata(&path).unwrap().modified().unwrap();
        // Present and right: used as it is.
        std::thread::sleep(std::time::Duration::from_millis(20));
        extract_into(&cache, "lib.so", b"library bytes").unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().modified().unwrap(),
            written
        );
        // Cut short or changed: written again.
        std::fs::write(&path, b"library").unwrap();
        extract_into(&cache, "lib.so", b"library bytes").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"library bytes");
        // No temporary file is left.
        let names: Vec<_> = std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["lib.so"]);
    }

    #[test]
    fn a_folder_others_can_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = extract_into(&open, "lib.so", b"x").unwrap_err();
        assert!(e.to_string().contains("not private"), "{e}");
        assert!(!open.join("lib.so").exists());
        let e = check_folder(&open, 1).unwrap_err();
        assert!(e.to_string().contains("not private"), "{e}");
    }

    #[test]
    fn a_folder_is_checked_without_writing_anything() {
        let dir = tempfile::tempdir().unwrap();
        // Not made yet: the folder above decides, and nothing appears.
        let cache = dir.path().join("a/b/gpu-tools");
        check_folder(&cache, 1 << 20).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // More than the file system holds.
        let e = check_folder(&cache, u64::MAX).unwrap_err();
        assert!(e.to_string().starts_with("no space left on device"), "{e}");
        // A file where a folder would be.
        let file = dir.path().join("file");
        std::fs::write(&file, b"").unwrap();
        let e = check_folder(&file.join("gpu-tools"), 1).unwrap_err();
        assert!(e.to_string().ends_with("is not a folder"), "{e}");
        let e = extract_into(&file, "lib.so", b"x").unwrap_err();
        assert_eq!(reason(&e), "not a folder");
        // A made private folder is fine.
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir.path().join("own"))
            .unwrap();
        check_folder(&dir.path().join("own"), 1).unwrap();
    }

    #[test]
    fn reasons_are_short() {
        let e = std::io::Error::from_raw_os_error(libc::EACCES);
        assert_eq!(reason(&e), "permission denied");
        let e = std::io::Error::from_raw_os_error(libc::EROFS);
        assert_eq!(reason(&e), "read-only file system");
    }
}
