//! Programs run as a container runs them, for the attach tests: in a mount namespace of their own whose `/tmp` is
//! a fresh, empty tmpfs, so that nothing this machine puts in its `/tmp` (an attach's private socket folder among
//! them) is seen there. The test's build folders stay where they are, so that the program and the doubles it loads
//! are found at the same paths.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The shell that sets the namespace up, then runs the program: this machine's `/tmp` is bound under a tmpfs on
/// `/mnt` (private to the namespace, as every mount made here is: `unshare` makes them so), a tmpfs is mounted on
/// `/tmp`, and each folder to keep that lies under `/tmp` is made again there and bound to the original; then
/// [`PRELOAD`] becomes the program's `LD_PRELOAD`. Its arguments: the folders to keep, `--`, the program and its
/// arguments.
const SET_UP: &str = r#"set -e
mount -t tmpfs gpu-tools-test /mnt
mkdir /mnt/host-tmp
mount --bind /tmp /mnt/host-tmp
mount -t tmpfs gpu-tools-test /tmp
while [ "$1" != -- ]; do
    case $1 in
        /tmp/*) mkdir -p "$1"; mount --bind "/mnt/host-tmp/${1#/tmp/}" "$1";;
    esac
    shift
done
shift
if [ -n "${GPU_TOOLS_TEST_CONTAINED_PRELOAD-}" ]; then export LD_PRELOAD="$GPU_TOOLS_TEST_CONTAINED_PRELOAD"; fi
exec "$@""#;

/// Variable whose value the contained program gets as `LD_PRELOAD` (the set-up's own programs do not: the files it
/// names may lie in a folder the set-up has not bound yet).
pub const PRELOAD: &str = "GPU_TOOLS_TEST_CONTAINED_PRELOAD";

/// The folders a contained program of this repository's tests needs: the build folder of the running test
/// binary (`target/<profile>`: the binaries, the injection library, the doubles' default place) and the doubles'.
fn folders_to_keep() -> Vec<PathBuf> {
    let mut keep = vec![crate::doubles_dir()];
    if let Some(profile) = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.to_path_buf()))
    {
        keep.push(profile);
    }
    keep
}

/// A command that runs `program` in a container of its own (see the module), where `keep` (absolute folders) are
/// seen as here too, besides the build folders. The process it starts is `program` itself (`unshare` and the
/// shell exec it), so its pid is the contained program's. Add the program's arguments to it as to any command.
pub fn command(program: impl AsRef<OsStr>, keep: &[&Path]) -> Command {
    let mut c = Command::new("unshare");
    c.args(["--mount", "sh", "-c", SET_UP, "sh"])
        .args(folders_to_keep())
        .args(keep)
        .arg("--")
        .arg(program);
    c
}

/// As [`command`], the program also in a PID namespace of its own (as a container's processes are: it is pid 1
/// there, and its `/proc` is the namespace's). The process the command starts is `unshare`, which waits for the
/// program: [`program_of`] finds the program's pid.
pub fn command_in_pid_namespace(program: impl AsRef<OsStr>, keep: &[&Path]) -> Command {
    let mut c = Command::new("unshare");
    c.args([
        "--mount",
        "--pid",
        "--fork",
        "--mount-proc",
        "sh",
        "-c",
        SET_UP,
        "sh",
    ])
    .args(folders_to_keep())
    .args(keep)
    .arg("--")
    .arg(program);
    c
}

/// The pid (as this process sees it) of the program that [`command_in_pid_namespace`]'s `unshare`, process
/// `launcher`, started: its one child, once there (up to 10 s).
pub fn program_of(launcher: u32) -> Option<u32> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        let children =
            std::fs::read_to_string(format!("/proc/{launcher}/task/{launcher}/children")).ok()?;
        if let Some(pid) = children
            .split_whitespace()
            .next()
            .and_then(|p| p.parse().ok())
        {
            return Some(pid);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    None
}

/// Whether a container can be made here: a namespace set up as [`command`] sets it up, running `true`. Where it
/// cannot, says why and returns `false` (a failure in CI, whose machine can: [`crate::skip_unless_ci`]).
pub fn available() -> bool {
    let out = command("true", &[])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output();
    let why = match out {
        Ok(o) if o.status.success() => return true,
        Ok(o) => format!(
            "a mount namespace with a /tmp of its own cannot be made here ({}: {})",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => format!("unshare cannot run here: {e}"),
    };
    crate::skip_unless_ci(&why);
    false
}

/// Where this process reaches the file that process `pid` names `path` (absolute): through its root.
pub fn seen_from_here(pid: u32, path: &Path) -> PathBuf {
    Path::new(&format!("/proc/{pid}/root")).join(path.strip_prefix("/").unwrap_or(path))
}
