//! Files a subcommand writes, checked before the work starts and put in place only when it succeeds:
//! a run that fails leaves nothing behind, and a run that cannot write its output fails before it touches
//! anything (a program, a process, a GPU).
//!
//! What the destination is decides how it is written, as `cp`, `tar` and `nsys` do:
//! - `-` is standard output, written in order as the work goes.
//! - A regular file, or a name where nothing is yet: built in a temporary file (`.gt-XXXXXX.tmp`, short, so
//!   that a destination whose name is as long as a name can be still has one) in the destination's folder (so
//!   that the final rename stays within one file system, and creating it proves the folder writable), and
//!   renamed onto the destination at the end.
//! - A symbolic link is followed, through a chain of them too: the temporary file and the rename go into the
//!   folder of the link's final target, and the link stays a link.
//! - A FIFO, a character device (a terminal, `/dev/null`) or a socket is written directly, in order, with no
//!   temporary file: a reader of it gets the bytes as they come, and it stays what it was. So does whatever is
//!   this process's standard output or error (`/dev/stdout`, `/proc/self/fd/1`).
//! - A folder is refused.
//!
//! The destination's folder is opened once and everything else is done from its descriptor (`openat`,
//! `renameat`): the working folder may lie deeper than `PATH_MAX`, which a full path could not name.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io::{BufWriter, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::failure::Failure;

/// Most symbolic links followed from a destination to the file it names (Linux's own limit).
const MAX_LINKS: usize = 40;

/// A file that will be written to `path` when the run succeeds.
pub struct OutputFile {
    /// The destination as the user named it, for messages.
    path: PathBuf,
    what: &'static str,
    /// Where the bytes go: the temporary file, or the destination itself.
    file: File,
    target: Target,
}

/// How the bytes reach the destination.
enum Target {
    /// Through the temporary file `temp` of the folder `dir`, renamed onto `name` there by
    /// [`OutputFile::commit`]; `temp` is `None` once it was renamed (or removed).
    Replace {
        dir: OwnedFd,
        name: CString,
        temp: Option<CString>,
    },
    /// Directly: standard output when `stdout`, else a FIFO, a device or a socket.
    Direct { stdout: bool },
}

/// What a destination turned out to be.
enum Found {
    /// A name in a folder where nothing is, or a regular file: replaced.
    Replace { dir: OwnedFd, name: CString },
    /// Written directly through this descriptor.
    Direct { file: File, stdout: bool },
}

/// The last OS error.
fn os_error() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// `name` as a C string (a file name holds no NUL byte; one that does cannot name a file).
fn c_name(name: &OsStr) -> std::io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))
}

/// Opens `name` in the folder `dir` (`None`: the working folder) with `flags`.
fn open_at(dir: Option<BorrowedFd<'_>>, name: &CString, flags: i32) -> std::io::Result<OwnedFd> {
    let dir = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: `name` is NUL-terminated; `dir` is an open descriptor or AT_FDCWD; the mode is read only with
    // O_CREAT.
    let fd = unsafe { libc::openat(dir, name.as_ptr(), flags | libc::O_CLOEXEC, 0o666) };
    if fd < 0 {
        return Err(os_error());
    }
    // SAFETY: `fd` was just opened here and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A folder, for the `*at` calls only (`O_PATH`: a folder that can be searched but not read will do).
fn open_folder_at(dir: Option<BorrowedFd<'_>>, name: &CString) -> std::io::Result<OwnedFd> {
    open_at(dir, name, libc::O_PATH | libc::O_DIRECTORY)
}

/// `fstatat`: the file `name` of `dir`, or what it links to when `follow`.
fn stat_at(dir: BorrowedFd<'_>, name: &CString, follow: bool) -> std::io::Result<libc::stat> {
    let flags = if follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW };
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: `name` is NUL-terminated, `dir` open, and `st` has room for a `stat`.
    let rc = unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), st.as_mut_ptr(), flags) };
    if rc != 0 {
        return Err(os_error());
    }
    // SAFETY: fstatat succeeded and filled it in (and zeroed is a valid `stat` anyway).
    Ok(unsafe { st.assume_init() })
}

/// `fstat` of an open descriptor.
fn stat_fd(fd: BorrowedFd<'_>) -> std::io::Result<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: `fd` is open and `st` has room for a `stat`.
    if unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) } != 0 {
        return Err(os_error());
    }
    // SAFETY: fstat succeeded and filled it in.
    Ok(unsafe { st.assume_init() })
}

/// What the symbolic link `name` of `dir` holds.
fn read_link_at(dir: BorrowedFd<'_>, name: &CString) -> std::io::Result<PathBuf> {
    let mut buf = vec![0u8; 256];
    loop {
        // SAFETY: `name` is NUL-terminated, `dir` open, and `buf` has `buf.len()` writable bytes.
        let n = unsafe {
            libc::readlinkat(
                dir.as_raw_fd(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        let n = usize::try_from(n).map_err(|_| os_error())?;
        if n < buf.len() {
            buf.truncate(n);
            return Ok(PathBuf::from(OsStr::from_bytes(&buf)));
        }
        // Perhaps cut short: again with more room.
        buf.resize(buf.len() * 2, 0);
    }
}

fn kind(st: &libc::stat) -> libc::mode_t {
    st.st_mode & libc::S_IFMT
}

fn same_file(a: &libc::stat, b: &libc::stat) -> bool {
    a.st_dev == b.st_dev && a.st_ino == b.st_ino
}

/// The folder that holds `path` (opened, walking its names one by one from `base`, or from the working folder
/// where `base` is `None`, or from `/`) and the last name of `path`. Each name is opened on its own: the path may
/// be longer than `PATH_MAX`, and the folders it crosses may be links. `None` for the name when `path` ends in a
/// folder's name (`.`, `..`, `/`).
fn split(base: Option<BorrowedFd<'_>>, path: &Path) -> std::io::Result<(OwnedFd, Option<CString>)> {
    let mut components: Vec<Component<'_>> = path.components().collect();
    // `components` drops a trailing `/` and `.`, which make the path name a folder (as the kernel reads it).
    let bytes = path.as_os_str().as_bytes();
    let folder = bytes.ends_with(b"/") || bytes.ends_with(b"/.");
    let last = match components.last() {
        Some(Component::Normal(n)) if !folder => {
            let n = c_name(n)?;
            components.pop();
            Some(n)
        }
        _ => None,
    };
    let dot = c_name(OsStr::new("."))?;
    let mut dir = match (components.first(), base) {
        (Some(Component::RootDir), _) => open_folder_at(None, &c_name(OsStr::new("/"))?)?,
        (_, Some(base)) => open_folder_at(Some(base), &dot)?,
        (_, None) => open_folder_at(None, &dot)?,
    };
    for c in components {
        let name = match c {
            Component::Normal(n) => c_name(n)?,
            Component::ParentDir => c_name(OsStr::new(".."))?,
            Component::RootDir | Component::CurDir | Component::Prefix(_) => continue,
        };
        dir = open_folder_at(Some(dir.as_fd()), &name)?;
    }
    Ok((dir, last))
}

/// A descriptor of standard output (`fd` 1) or error (2), duplicated so that it can be closed on its own.
fn duplicate(fd: i32) -> std::io::Result<File> {
    let owned = if fd == 1 {
        std::io::stdout().as_fd().try_clone_to_owned()?
    } else {
        std::io::stderr().as_fd().try_clone_to_owned()?
    };
    Ok(File::from(owned))
}

/// Standard output (`Some(1)`) or error (`Some(2)`) where `st` is the file it writes to.
fn standard_stream(st: &libc::stat) -> Option<i32> {
    let out = stat_fd(std::io::stdout().as_fd()).ok();
    let err = stat_fd(std::io::stderr().as_fd()).ok();
    if out.is_some_and(|o| same_file(&o, st)) {
        Some(1)
    } else if err.is_some_and(|e| same_file(&e, st)) {
        Some(2)
    } else {
        None
    }
}

/// Finds what `path` is and how it is to be written (see the module's documentation).
fn find(path: &Path) -> std::io::Result<Found> {
    if path.as_os_str() == "-" {
        return Ok(Found::Direct {
            file: duplicate(1)?,
            stdout: true,
        });
    }
    let (dir, name) = split(None, path)?;
    let Some(name) = name else {
        return Err(std::io::Error::from_raw_os_error(libc::EISDIR));
    };
    // What the path names in the end, links followed by the kernel (also `/proc`'s, which name no path).
    let followed = match stat_at(dir.as_fd(), &name, true) {
        Ok(st) => Some(st),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
        Err(e) => return Err(e),
    };
    if let Some(st) = &followed {
        match kind(st) {
            libc::S_IFDIR => return Err(std::io::Error::from_raw_os_error(libc::EISDIR)),
            libc::S_IFREG => {}
            _ => return direct(dir.as_fd(), &name, path, st),
        }
    }
    // A regular file, or nothing yet: the links are followed here, to the folder the file is (or will be) in.
    let (mut dir, mut name) = (dir, name);
    for _ in 0..MAX_LINKS {
        let here = match stat_at(dir.as_fd(), &name, false) {
            Ok(st) => st,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                return match &followed {
                    // A link of `/proc` (`/dev/stdout` where standard output is a file), whose text names no
                    // path: written through the link.
                    Some(st) => direct_regular(path, st),
                    None => Ok(Found::Replace { dir, name }),
                };
            }
            Err(e) => return Err(e),
        };
        if kind(&here) != libc::S_IFLNK {
            return match &followed {
                Some(st) if !same_file(st, &here) => direct_regular(path, st),
                _ => Ok(Found::Replace { dir, name }),
            };
        }
        let target = read_link_at(dir.as_fd(), &name)?;
        let (next, last) = split(Some(dir.as_fd()), &target)?;
        let Some(last) = last else {
            return Err(std::io::Error::from_raw_os_error(libc::EISDIR));
        };
        (dir, name) = (next, last);
    }
    Err(std::io::Error::from_raw_os_error(libc::ELOOP))
}

/// A FIFO, a device or a socket (`st`, named `name` in `dir`), opened to be written directly.
fn direct(
    dir: BorrowedFd<'_>,
    name: &CString,
    path: &Path,
    st: &libc::stat,
) -> std::io::Result<Found> {
    if let Some(fd) = standard_stream(st) {
        // A device (a terminal, `/dev/null`) is written through the same descriptor, but is not taken for standard
        // output: `--chrome-trace /dev/null` where standard output is `/dev/null` too leaves the listing there.
        return Ok(Found::Direct {
            file: duplicate(fd)?,
            stdout: fd == 1 && kind(st) != libc::S_IFCHR,
        });
    }
    let file = if kind(st) == libc::S_IFSOCK {
        // A socket is not opened but connected to.
        let stream = std::os::unix::net::UnixStream::connect(path)?;
        File::from(OwnedFd::from(stream))
    } else {
        // A FIFO waits here for its reader.
        File::from(open_at(Some(dir), name, libc::O_WRONLY | libc::O_NOCTTY)?)
    };
    Ok(Found::Direct {
        file,
        stdout: false,
    })
}

/// A regular file reached through a link that names no path (`/proc/self/fd/N`): this process's standard output
/// or error, or else the file opened through the link and emptied, as a shell's `>` does.
fn direct_regular(path: &Path, st: &libc::stat) -> std::io::Result<Found> {
    if let Some(fd) = standard_stream(st) {
        return Ok(Found::Direct {
            file: duplicate(fd)?,
            stdout: fd == 1,
        });
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)?;
    Ok(Found::Direct {
        file,
        stdout: false,
    })
}

/// A temporary file in `dir`: `.gt-XXXXXX.tmp`, made with the permissions of a file made by `File::create` (0666
/// less the umask).
fn temporary(dir: BorrowedFd<'_>) -> std::io::Result<(CString, File)> {
    const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let seed = std::collections::hash_map::RandomState::new();
    let mut last = None;
    for attempt in 0u32..100 {
        let mut h = seed.build_hasher();
        h.write_u32(std::process::id());
        h.write_u32(attempt);
        let mut bits = h.finish();
        let mut name = String::from(".gt-");
        for _ in 0..6 {
            let i = usize::try_from(bits % 62).unwrap_or(0);
            name.push(char::from(LETTERS[i]));
            bits /= 62;
        }
        name.push_str(".tmp");
        let name = c_name(OsStr::new(&name))?;
        match open_at(
            Some(dir),
            &name,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
        ) {
            Ok(fd) => return Ok((name, File::from(fd))),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::from_raw_os_error(libc::EEXIST)))
}

impl OutputFile {
    /// Checks that `path` can be written (`what` names it in messages: "the Chrome trace") and reserves a
    /// temporary file beside it. Nothing exists at `path` until [`OutputFile::commit`]; a FIFO, a device, a socket
    /// or standard output (`-`) is opened now and written as the work goes.
    pub fn create(path: &Path, what: &'static str) -> Result<Self, Failure> {
        let cannot =
            |why: String| Failure::new(1, format!("cannot write {what} {}: {why}", path.display()));
        if path.as_os_str().is_empty() {
            return Err(Failure::new(
                1,
                format!("cannot write {what}: the path is empty"),
            ));
        }
        let found = find(path).map_err(|e| match e.raw_os_error() {
            Some(libc::EISDIR) => cannot("it is a folder".into()),
            _ => cannot(e.to_string()),
        })?;
        let (file, target) = match found {
            Found::Direct { file, stdout } => (file, Target::Direct { stdout }),
            Found::Replace { dir, name } => {
                let (temp, file) = temporary(dir.as_fd()).map_err(|e| cannot(e.to_string()))?;
                let target = Target::Replace {
                    dir,
                    name,
                    temp: Some(temp),
                };
                (file, target)
            }
        };
        Ok(OutputFile {
            path: path.to_path_buf(),
            what,
            file,
            target,
        })
    }

    /// The destination.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the output is standard output (`-`, or a name of it).
    pub fn is_stdout(&self) -> bool {
        matches!(self.target, Target::Direct { stdout: true })
    }

    /// A buffered writer into the temporary file (or into the destination, where it is written directly).
    pub fn writer(&self) -> BufWriter<&File> {
        BufWriter::new(&self.file)
    }

    /// Writes everything `write` writes, then puts the file in place.
    pub fn write_with(
        self,
        write: impl FnOnce(&mut BufWriter<&File>) -> std::io::Result<()>,
    ) -> Result<(), Failure> {
        let result = {
            let mut w = self.writer();
            write(&mut w).and_then(|()| w.flush())
        };
        result.map_err(|e| self.error(e))?;
        self.commit()
    }

    /// Puts the file in place (a rename: readers see the old file or the whole new one). Nothing to do for a
    /// destination written directly.
    pub fn commit(mut self) -> Result<(), Failure> {
        let Target::Replace { dir, name, temp } = &mut self.target else {
            return Ok(());
        };
        if let Err(e) = self.file.sync_all() {
            return Err(self.error(e));
        }
        let Some(from) = temp.take() else {
            return Ok(());
        };
        // SAFETY: both names are NUL-terminated and `dir` is open.
        let rc = unsafe {
            libc::renameat(
                dir.as_raw_fd(),
                from.as_ptr(),
                dir.as_raw_fd(),
                name.as_ptr(),
            )
        };
        if rc != 0 {
            let e = os_error();
            // SAFETY: as above; the temporary file is removed, as a drop would have.
            unsafe { libc::unlinkat(dir.as_raw_fd(), from.as_ptr(), 0) };
            return Err(self.error(e));
        }
        Ok(())
    }

    /// The failure of a write to this output (a closed standard output is [`Failure::BrokenPipe`]).
    pub fn error(&self, e: std::io::Error) -> Failure {
        if self.is_stdout() && e.kind() == std::io::ErrorKind::BrokenPipe {
            return Failure::stdout(e);
        }
        Failure::new(
            1,
            format!("cannot write {} {}: {e}", self.what, self.path.display()),
        )
    }
}

impl Drop for OutputFile {
    /// An output that was never committed leaves nothing behind: its temporary file is removed.
    fn drop(&mut self) {
        if let Target::Replace {
            dir,
            temp: Some(temp),
            ..
        } = &self.target
        {
            // SAFETY: `temp` is NUL-terminated and `dir` is open.
            unsafe { libc::unlinkat(dir.as_raw_fd(), temp.as_ptr(), 0) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_file_appears_only_when_committed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        let out = OutputFile::create(&path, "the report").unwrap();
        assert!(!path.exists());
        out.write_with(|w| w.write_all(b"{}\n")).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{}\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_ne!(
            mode & 0o044,
            0,
            "readable as File::create makes it: {mode:o}"
        );
        // Dropped without commit: nothing is left, not even the temporary file.
        let other = dir.path().join("other.json");
        drop(OutputFile::create(&other, "the report").unwrap());
        assert_eq!(names_in(dir.path()), ["out.json"]);
    }

    #[test]
    fn unwritable_destinations_fail_before_any_work() {
        let dir = tempfile::tempdir().unwrap();
        let Err(Failure::Message { code, message }) =
            OutputFile::create(&dir.path().join("missing/out.json"), "the trace")
        else {
            panic!("a missing folder is an error")
        };
        assert_eq!(code, 1);
        // The destination is named, not the temporary file beside it.
        assert_eq!(
            message,
            format!(
                "cannot write the trace {}: No such file or directory (os error 2)",
                dir.path().join("missing/out.json").display()
            )
        );
        assert!(
            OutputFile::create(dir.path(), "the trace").is_err(),
            "a folder"
        );
        assert!(
            OutputFile::create(Path::new(""), "the trace").is_err(),
            "empty"
        );
    }

    #[test]
    fn a_folder_is_refused_by_any_name() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::os::unix::fs::symlink("sub", dir.path().join("to-sub")).unwrap();
        for path in [
            sub.clone(),
            dir.path().join("to-sub"),
            sub.join(".."),
            sub.join("."),
        ] {
            let Err(Failure::Message { message, .. }) = OutputFile::create(&path, "the trace")
            else {
                panic!("{} is a folder", path.display())
            };
            assert_eq!(
                message,
                format!("cannot write the trace {}: it is a folder", path.display())
            );
        }
    }

    #[test]
    fn a_name_ending_in_a_slash_is_written_as_no_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file.json"), "old").unwrap();
        for name in ["new/", "new/.", "file.json/", "file.json/."] {
            let path = dir.path().join(name);
            let made = OutputFile::create(&path, "the trace").and_then(|o| o.commit());
            assert!(made.is_err(), "{name} was written as a file");
            assert_eq!(names_in(dir.path()), ["file.json"], "{name}");
            assert_eq!(
                std::fs::read_to_string(dir.path().join("file.json")).unwrap(),
                "old"
            );
        }
    }

    #[test]
    fn links_are_followed_to_the_folder_of_their_target() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("a/b")).unwrap();
        std::fs::write(d.join("a/b/real.json"), "old").unwrap();
        // A chain: first -> a/second -> b/real.json (relative to each link's own folder).
        std::os::unix::fs::symlink("a/second", d.join("first")).unwrap();
        std::os::unix::fs::symlink("b/real.json", d.join("a/second")).unwrap();
        let out = OutputFile::create(&d.join("first"), "the report").unwrap();
        // The temporary file is in the target's folder.
        assert_eq!(
            names_in(&d.join("a/b")).len(),
            2,
            "{:?}",
            names_in(&d.join("a/b"))
        );
        out.write_with(|w| w.write_all(b"new")).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join("a/b/real.json")).unwrap(),
            "new"
        );
        for link in ["first", "a/second"] {
            assert!(
                std::fs::symlink_metadata(d.join(link))
                    .unwrap()
                    .file_type()
                    .is_symlink(),
                "{link} is still a link"
            );
        }
        assert_eq!(names_in(&d.join("a/b")), ["real.json"]);
        // A dangling link: its target is made.
        std::os::unix::fs::symlink("a/made.json", d.join("dangling")).unwrap();
        OutputFile::create(&d.join("dangling"), "the report")
            .unwrap()
            .write_with(|w| w.write_all(b"made"))
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join("a/made.json")).unwrap(),
            "made"
        );
        assert!(
            std::fs::symlink_metadata(d.join("dangling"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        // A loop is an error, not a hang.
        std::os::unix::fs::symlink("loop2", d.join("loop1")).unwrap();
        std::os::unix::fs::symlink("loop1", d.join("loop2")).unwrap();
        assert!(OutputFile::create(&d.join("loop1"), "the report").is_err());
    }

    #[test]
    fn a_name_as_long_as_names_can_be_works() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n".repeat(255));
        OutputFile::create(&path, "the report")
            .unwrap()
            .write_with(|w| w.write_all(b"x"))
            .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"x");
    }

    #[test]
    fn devices_are_written_directly() {
        use std::os::unix::fs::FileTypeExt;
        let out = OutputFile::create(Path::new("/dev/null"), "the report").unwrap();
        assert!(!out.is_stdout());
        out.write_with(|w| w.write_all(b"gone")).unwrap();
        assert!(
            std::fs::metadata("/dev/null")
                .unwrap()
                .file_type()
                .is_char_device(),
            "still a device"
        );
    }

    #[test]
    fn a_dash_is_standard_output() {
        let out = OutputFile::create(Path::new("-"), "the report").unwrap();
        assert!(out.is_stdout());
    }
}
