//! Files and folders a subcommand writes, checked before the work starts and put in place only when it succeeds:
//! a run that fails leaves nothing behind, and a run that cannot write its output fails before it touches
//! anything (a program, a process, a GPU).
//!
//! Both are built in a temporary file or folder beside the destination (so that the final rename stays within one
//! file system, and creating it proves the destination's folder writable) and renamed onto it at the end.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::failure::Failure;

/// The folder a destination path lies in (`.` for a bare file name).
fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Why making a temporary file or folder failed, without its name (`tempfile` adds `at path "/d/.x.partial"`):
/// messages name the destination the user gave, not the temporary file.
fn reason(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.split_once(" at path ") {
        Some((why, _)) => why.to_string(),
        None => text,
    }
}

/// A file that will be written to `path` when the run succeeds.
pub struct OutputFile {
    path: PathBuf,
    what: &'static str,
    temp: tempfile::NamedTempFile,
}

impl OutputFile {
    /// Checks that `path` can be written (`what` names it in messages: "the Chrome trace") and reserves a
    /// temporary file beside it. Nothing exists at `path` until [`OutputFile::commit`].
    pub fn create(path: &Path, what: &'static str) -> Result<Self, Failure> {
        let cannot =
            |why: String| Failure::new(1, format!("cannot write {what} {}: {why}", path.display()));
        if path.as_os_str().is_empty() {
            return Err(Failure::new(
                1,
                format!("cannot write {what}: the path is empty"),
            ));
        }
        if path.is_dir() {
            return Err(cannot("it is a folder".into()));
        }
        let dir = parent_of(path);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // The permissions of a file made by `File::create` (0666 less the umask), not a temporary file's 0600.
        let temp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".partial")
            .permissions(std::fs::Permissions::from_mode(0o666))
            .tempfile_in(dir)
            .map_err(|e| cannot(reason(&e)))?;
        Ok(OutputFile {
            path: path.to_path_buf(),
            what,
            temp,
        })
    }

    /// The destination.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A buffered writer into the temporary file.
    pub fn writer(&self) -> BufWriter<&File> {
        BufWriter::new(self.temp.as_file())
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
        result.map_err(|e| self.failed(e))?;
        self.commit()
    }

    /// Puts the file in place (a rename: readers see the old file or the whole new one).
    pub fn commit(self) -> Result<(), Failure> {
        if let Err(e) = self.temp.as_file().sync_all() {
            return Err(self.failed(e));
        }
        let OutputFile { path, what, temp } = self;
        temp.persist(&path).map_err(|e| {
            Failure::new(
                1,
                format!("cannot write {what} {}: {}", path.display(), e.error),
            )
        })?;
        Ok(())
    }

    fn failed(&self, e: std::io::Error) -> Failure {
        Failure::new(
            1,
            format!("cannot write {} {}: {e}", self.what, self.path.display()),
        )
    }
}

/// A folder that will be at `path`, with what was written into it, when the run succeeds. `path` must be absent
/// or an empty folder.
pub struct OutputDir {
    path: PathBuf,
    what: &'static str,
    temp: tempfile::TempDir,
}

impl OutputDir {
    /// Checks that `path` is absent or an empty folder and that its parent can be written, and makes a temporary
    /// folder beside it to write into.
    pub fn create(path: &Path, what: &'static str) -> Result<Self, Failure> {
        let cannot =
            |why: String| Failure::new(1, format!("cannot write {what} {}: {why}", path.display()));
        match std::fs::read_dir(path) {
            Ok(mut entries) => {
                if entries.next().is_some() {
                    return Err(cannot("the folder is not empty".into()));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) if path.exists() && !path.is_dir() => {
                return Err(cannot(format!("it is not a folder ({e})")));
            }
            Err(e) => return Err(cannot(e.to_string())),
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let temp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".partial")
            .tempdir_in(parent_of(path))
            .map_err(|e| cannot(reason(&e)))?;
        // A folder made by `create_dir` (0777 less the umask), not a temporary folder's 0700.
        let mode = 0o777 & !umask_of(temp.path());
        std::fs::set_permissions(temp.path(), std::fs::Permissions::from_mode(mode))
            .map_err(|e| cannot(e.to_string()))?;
        Ok(OutputDir {
            path: path.to_path_buf(),
            what,
            temp,
        })
    }

    /// The destination.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where a file `name` of the folder is written until the folder is put in place.
    pub fn file(&self, name: &str) -> PathBuf {
        self.temp.path().join(name)
    }

    /// Puts the folder in place (a rename, onto an empty folder if one is there).
    pub fn commit(self) -> Result<(), Failure> {
        let OutputDir { path, what, temp } = self;
        let staged = temp.keep();
        std::fs::rename(&staged, &path).map_err(|e| {
            let _ = std::fs::remove_dir_all(&staged);
            Failure::new(1, format!("cannot write {what} {}: {e}", path.display()))
        })
    }
}

/// The process's umask, read from a file made with mode 0777 (reading the umask any other way also sets it, which
/// races with other threads).
fn umask_of(dir: &Path) -> u32 {
    let probe = dir.join(".umask-probe");
    let mode = std::fs::DirBuilder::new()
        .mode(0o777)
        .create(&probe)
        .and_then(|()| std::fs::metadata(&probe))
        .map(|m| m.permissions().mode() & 0o777);
    let _ = std::fs::remove_dir(&probe);
    mode.map_or(0o022, |m| 0o777 & !m)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["out.json"]);
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
    fn a_folder_must_be_absent_or_empty_and_appears_whole() {
        let dir = tempfile::tempdir().unwrap();
        let full = dir.path().join("full");
        std::fs::create_dir(&full).unwrap();
        std::fs::write(full.join("x"), b"x").unwrap();
        assert!(OutputDir::create(&full, "the recording").is_err());
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        assert!(OutputDir::create(&file, "the recording").is_err());
        let missing = dir.path().join("missing/sub");
        let Err(Failure::Message { message, .. }) = OutputDir::create(&missing, "the recording")
        else {
            panic!("a missing parent folder is an error")
        };
        assert_eq!(
            message,
            format!(
                "cannot write the recording {}: No such file or directory (os error 2)",
                missing.display()
            )
        );
        for target in [dir.path().join("absent"), {
            let empty = dir.path().join("empty");
            std::fs::create_dir(&empty).unwrap();
            empty
        }] {
            let out = OutputDir::create(&target, "the recording").unwrap();
            std::fs::write(out.file("a.bin"), b"a").unwrap();
            out.commit().unwrap();
            assert_eq!(std::fs::read(target.join("a.bin")).unwrap(), b"a");
        }
        // Dropped without commit: no trace of it.
        let never = dir.path().join("never");
        let out = OutputDir::create(&never, "the recording").unwrap();
        std::fs::write(out.file("a.bin"), b"a").unwrap();
        drop(out);
        assert!(!never.exists());
        assert!(std::fs::read_dir(dir.path()).unwrap().all(|e| {
            !e.unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".partial")
        }));
    }
}
