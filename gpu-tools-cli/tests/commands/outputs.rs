//! Where an output option writes (`export --chrome/--perfetto`, and the same code for `trace -o`,
//! `--chrome-trace`, `profile -o`, `freeze --json`): a symbolic link is followed and stays a link, a FIFO is
//! written in order and stays a FIFO, `-` and a link to this process's standard output are standard output, a
//! folder is refused, a name of 255 bytes works, and so does a working folder deeper than `PATH_MAX`.

use std::ffi::CString;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/traces/torch_compile.gputrace")
}

fn gpu_tools(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run gpu-tools");
    report(args, &out);
    out
}

fn report(args: &[&str], out: &Output) {
    println!(
        "{args:?}: {}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The text is a Chrome trace of the fixture (JSON, with its kernels).
fn assert_chrome(text: &[u8]) {
    let doc: serde_json::Value = serde_json::from_slice(text).expect("Chrome JSON");
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    assert!(events.iter().any(|e| e["cat"] == "kernel"), "kernel slices");
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn an_export_through_links_keeps_them_and_writes_their_target() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("real")).unwrap();
    std::fs::write(d.join("real/t.json"), "old").unwrap();
    // link.json -> hop -> real/t.json
    std::os::unix::fs::symlink("hop", d.join("link.json")).unwrap();
    std::os::unix::fs::symlink("real/t.json", d.join("hop")).unwrap();
    let out = gpu_tools(&["export", s(&fixture()), "--chrome", s(&d.join("link.json"))]);
    assert_eq!(out.status.code(), Some(0));
    for link in ["link.json", "hop"] {
        let meta = std::fs::symlink_metadata(d.join(link)).unwrap();
        assert!(meta.file_type().is_symlink(), "{link} is still a link");
    }
    assert_chrome(&std::fs::read(d.join("real/t.json")).unwrap());
    // No temporary file left beside the link or the target.
    assert_eq!(names_in(d), ["hop", "link.json", "real"]);
    assert_eq!(names_in(&d.join("real")), ["t.json"]);
}

#[test]
fn an_export_into_a_fifo_keeps_it_and_delivers_the_json_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("t.fifo");
    let name = CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: `name` is a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    // The reader: what it read comes through a channel, so that a writer that never opens the FIFO (and leaves
    // the reader waiting) fails the test instead of hanging it.
    let (tx, rx) = std::sync::mpsc::channel();
    {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let read = std::fs::File::open(&fifo).and_then(|mut f| f.read_to_end(&mut bytes));
            let _ = tx.send(read.map(|_| bytes));
        });
    }
    let out = gpu_tools(&["export", s(&fixture()), "--chrome", s(&fifo)]);
    assert_eq!(out.status.code(), Some(0));
    let bytes = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the reader got to the end of the FIFO")
        .unwrap();
    assert_chrome(&bytes);
    let meta = std::fs::symlink_metadata(&fifo).unwrap();
    assert!(meta.file_type().is_fifo(), "still a FIFO");
    assert_eq!(names_in(dir.path()), ["t.fifo"]);
}

#[test]
fn a_dash_is_standard_output() {
    let out = gpu_tools(&["export", s(&fixture()), "--chrome", "-"]);
    assert_eq!(out.status.code(), Some(0));
    assert_chrome(&out.stdout);
    let out = gpu_tools(&["export", s(&fixture()), "--perfetto", "-"]);
    assert_eq!(out.status.code(), Some(0));
    let (starts, ends) = gpu_tools_testing::perfetto::flows(&out.stdout);
    assert!(!starts.is_empty(), "a Perfetto trace with its flows");
    assert_eq!(starts.len(), ends.len());
}

#[test]
fn a_link_to_standard_output_writes_to_it() {
    // As /dev/stdout is (a link to /proc/self/fd/1), made here so that nothing of the system can be replaced.
    let dir = tempfile::tempdir().unwrap();
    let stdout = dir.path().join("stdout");
    std::os::unix::fs::symlink("/proc/self/fd/1", &stdout).unwrap();
    let out = gpu_tools(&["export", s(&fixture()), "--chrome", s(&stdout)]);
    assert_eq!(out.status.code(), Some(0));
    assert_chrome(&out.stdout);
    assert!(
        std::fs::symlink_metadata(&stdout)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // Standard output a file: written there, where the shell's `>` left it.
    let file = dir.path().join("redirected.json");
    let status = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["export", s(&fixture()), "--chrome", s(&stdout)])
        .stdout(std::fs::File::create(&file).unwrap())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert_chrome(&std::fs::read(&file).unwrap());
}

#[test]
fn a_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(".", dir.path().join("here")).unwrap();
    for out_path in [dir.path().to_path_buf(), dir.path().join("here")] {
        let out = gpu_tools(&["export", s(&fixture()), "--chrome", s(&out_path)]);
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!(
                "gpu-tools export: cannot write the Chrome trace {}: it is a folder\n",
                out_path.display()
            )
        );
    }
}

#[test]
fn names_up_to_255_bytes_work() {
    let dir = tempfile::tempdir().unwrap();
    for len in [240, 250, 255] {
        let path = dir.path().join(format!("{}.json", "t".repeat(len - 5)));
        let out = gpu_tools(&["export", s(&fixture()), "--chrome", s(&path)]);
        assert_eq!(out.status.code(), Some(0), "a name of {len} bytes");
        assert_chrome(&std::fs::read(&path).unwrap());
    }
}

#[test]
fn a_working_folder_deeper_than_path_max_works() {
    let top = tempfile::tempdir().unwrap();
    // 20 folders of 250 bytes: 5000 bytes below the temporary folder, past PATH_MAX (4096).
    let component = "d".repeat(250);
    let cname = CString::new(component.as_bytes()).unwrap();
    let root = CString::new(top.path().as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path; the descriptor is owned below.
    let mut fd = unsafe {
        libc::open(
            root.as_ptr(),
            libc::O_DIRECTORY | libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    assert!(fd >= 0);
    for _ in 0..20 {
        // SAFETY: `fd` is an open folder, `cname` NUL-terminated.
        assert_eq!(unsafe { libc::mkdirat(fd, cname.as_ptr(), 0o755) }, 0);
        // SAFETY: as above.
        let next = unsafe {
            libc::openat(
                fd,
                cname.as_ptr(),
                libc::O_DIRECTORY | libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        assert!(next >= 0);
        // SAFETY: `fd` was opened here and is not used again.
        unsafe { libc::close(fd) };
        fd = next;
    }
    let trace = fixture();
    let args = ["export", s(&trace), "--chrome", "deep.json"];
    let mut command = Command::new(env!("CARGO_BIN_EXE_gpu-tools"));
    command.args(args);
    // SAFETY: fchdir is async-signal-safe; `fd` stays open in the parent until the child has started.
    unsafe {
        command.pre_exec(move || {
            if libc::fchdir(fd) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = command.output().unwrap();
    report(&args, &out);
    assert_eq!(out.status.code(), Some(0));
    let name = CString::new("deep.json").unwrap();
    // SAFETY: `fd` is the deepest folder, `name` NUL-terminated.
    let file = unsafe { libc::openat(fd, name.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    assert!(file >= 0, "deep.json was written");
    // SAFETY: both were opened here; `file` is owned by the File from now on.
    let mut file = unsafe {
        libc::close(fd);
        <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(file)
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).unwrap();
    assert_chrome(&bytes);
}
