//! Files a subcommand writes, checked before the work starts and put in place only when it succeeds:
//! a run that fails leaves nothing behind, and a run that cannot write its output fails before it touches
//! anything (a program, a process, a GPU).
//!
//! Each is built in a temporary file beside the destination (so that the final rename stays within one
//! file system, and creating it proves the destination's folder writable) and renamed onto it at the end.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
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
}
