//! What `/proc` tells about another process before and while a session attaches to it: whether it exists, its
//! parent, its tracer, its threads, its command line, and whether its CUDA driver is loaded and initialised.
//!
//! Every reader returns `None` or an error for a process that is gone or not readable; nothing here changes the
//! process.

use std::io;
use std::path::PathBuf;

fn read(pid: u32, file: &str) -> io::Result<String> {
    std::fs::read_to_string(format!("/proc/{pid}/{file}"))
}

/// Whether process `pid` exists (a zombie counts: it has not been reaped).
pub(crate) fn exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// The value of field `name` in `/proc/<pid>/status`.
fn status_field(pid: u32, name: &str) -> Option<String> {
    let text = read(pid, "status").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(|v| v.trim().to_owned())
}

/// The process tracing `pid` (0: none). The kernel names the tracing thread; this is its process.
pub(crate) fn tracer_of(pid: u32) -> Option<u32> {
    let thread: u32 = status_field(pid, "TracerPid")?.parse().ok()?;
    if thread == 0 {
        return Some(0);
    }
    Some(process_of(thread).unwrap_or(thread))
}

/// The process (thread group) that thread `tid` belongs to.
pub(crate) fn process_of(tid: u32) -> Option<u32> {
    status_field(tid, "Tgid")?.parse().ok()
}

/// The real user id of `pid`.
pub(crate) fn uid_of(pid: u32) -> Option<u32> {
    status_field(pid, "Uid")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Whether `pid` is a zombie (ended, not yet reaped).
pub(crate) fn is_zombie(pid: u32) -> bool {
    status_field(pid, "State").is_some_and(|s| s.starts_with('Z'))
}

/// The parent of process `pid`, from `/proc/<pid>/stat`.
pub(crate) fn parent_of(pid: u32) -> Option<u32> {
    parse_parent(&read(pid, "stat").ok()?)
}

fn parse_parent(stat: &str) -> Option<u32> {
    // The command name (field 2) may hold spaces and parentheses; the fields after its last ')' are plain.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The thread ids of process `pid`.
pub(crate) fn thread_ids(pid: u32) -> io::Result<Vec<u32>> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/task"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect())
}

/// The command line of `pid`, arguments joined by spaces (empty when not readable).
pub(crate) fn command_line(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// The value of environment variable `name` that process `pid` started with (`None` when unset or not readable).
pub(crate) fn environment_variable(pid: u32, name: &str) -> Option<String> {
    let bytes = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    parse_environment(&bytes, name)
}

fn parse_environment(bytes: &[u8], name: &str) -> Option<String> {
    bytes.split(|&c| c == 0).find_map(|entry| {
        let rest = entry.strip_prefix(name.as_bytes())?.strip_prefix(b"=")?;
        Some(String::from_utf8_lossy(rest).into_owned())
    })
}

/// Paths of the CUDA driver libraries process `pid` maps. The maps name the file the link resolved to: a driver
/// install's `libcuda.so.1` is a link to `libcuda.so.<driver version>` (`libcuda.so.580.159.04`), which is what
/// the maps show.
pub(crate) fn mapped_libcuda(pid: u32) -> io::Result<Vec<PathBuf>> {
    Ok(parse_mapped(&read(pid, "maps")?, is_libcuda))
}

/// `libcuda.so`, `libcuda.so.1`, `libcuda.so.580.159.04`: not `libcudart.so.13`, `libcudadebugger.so.1` nor
/// `libcuda.so.1.bak`.
fn is_libcuda(file_name: &std::ffi::OsStr) -> bool {
    let name = file_name.to_string_lossy();
    name == "libcuda.so"
        || name.strip_prefix("libcuda.so.").is_some_and(|v| {
            !v.is_empty()
                && v.split('.')
                    .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
        })
}

fn parse_mapped(maps: &str, wanted: fn(&std::ffi::OsStr) -> bool) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(PathBuf::from)
        .filter(|p| p.file_name().is_some_and(wanted))
        .collect();
    out.dedup();
    out
}

/// Devices a CUDA driver holds open from `cuInit` on: the NVIDIA control device, or WSL's GPU device.
const DRIVER_DEVICES: &[&str] = &["/dev/nvidiactl", "/dev/dxg"];

/// Whether process `pid` holds a GPU driver device open, which its CUDA driver does from `cuInit` on.
pub(crate) fn opened_nvidia_control(pid: u32) -> io::Result<bool> {
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
        let Ok(entry) = entry else { continue };
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        if DRIVER_DEVICES
            .iter()
            .any(|d| target == std::path::Path::new(d))
        {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        assert!(exists(me));
        assert_eq!(tracer_of(me), Some(0));
        assert_eq!(process_of(me), Some(me));
        assert_eq!(parent_of(me), Some(std::os::unix::process::parent_id()));
        assert!(thread_ids(me).unwrap().contains(&me));
        assert!(!command_line(me).is_empty());
        assert!(!is_zombie(me));
        assert!(uid_of(me).is_some());
        assert!(!opened_nvidia_control(me).unwrap());
        assert!(!exists(u32::MAX / 2));
        assert_eq!(tracer_of(u32::MAX / 2), None);
    }

    #[test]
    fn environment_variables_by_exact_name() {
        let env = b"A=1\0CUDBG_APICLIENT_PID=42\0CUDBG_APICLIENT_PID2=7\0EMPTY=\0";
        assert_eq!(
            parse_environment(env, "CUDBG_APICLIENT_PID").as_deref(),
            Some("42")
        );
        assert_eq!(parse_environment(env, "EMPTY").as_deref(), Some(""));
        assert_eq!(parse_environment(env, "CUDBG"), None);
        assert_eq!(parse_environment(b"", "A"), None);
        assert!(
            environment_variable(std::process::id(), "PATH").is_some()
                || std::env::var_os("PATH").is_none()
        );
    }

    #[test]
    fn parent_survives_odd_command_names() {
        assert_eq!(parse_parent("42 (a) b (c) S 17 42 42 0"), Some(17));
        assert_eq!(parse_parent("42 (x) R 1 2"), Some(1));
        assert_eq!(parse_parent("garbage"), None);
    }

    #[test]
    fn finds_the_mapped_driver_library_by_name() {
        let maps = "\
7f00-7f10 r--p 00000000 08:01 42 /usr/lib/x86_64-linux-gnu/libcuda.so.1
7f10-7f20 r-xp 00010000 08:01 42 /usr/lib/x86_64-linux-gnu/libcuda.so.1
7f20-7f30 rw-p 00000000 00:00 0
7f30-7f40 r--p 00000000 08:01 43 /opt/other/libcuda.so.1.bak
7f40-7f50 r--p 00000000 08:01 44 /usr/lib/libcudart.so.13.0.96
7f50-7f60 r--p 00000000 08:01 45 /usr/lib/libcudadebugger.so.1
";
        assert_eq!(
            parse_mapped(maps, is_libcuda),
            vec![PathBuf::from("/usr/lib/x86_64-linux-gnu/libcuda.so.1")]
        );
        // What a driver install's maps show: the file the libcuda.so.1 link resolves to.
        let installed =
            "7f00-7f10 r--p 00000000 fd:01 7 /usr/local/nvidia/lib64/libcuda.so.580.159.04\n";
        assert_eq!(
            parse_mapped(installed, is_libcuda),
            vec![PathBuf::from(
                "/usr/local/nvidia/lib64/libcuda.so.580.159.04"
            )]
        );
        assert!(parse_mapped("7f00-7f10 r--p 0 08:01 1 /lib/libc.so.6\n", is_libcuda).is_empty());
    }
}
