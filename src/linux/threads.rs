//! What each thread of a process is doing, as `/proc` shows it without stopping anything: its name, its state, the
//! system call it is blocked in and where in the address space it made it (`/proc/<pid>/task/<tid>/syscall`).
//!
//! This is the view that still works when a process cannot be attached to: a thread blocked inside a driver call
//! holds what a debugger attach needs, so `gpu-tools where` falls back to it. Reading `syscall` needs the same
//! permission as ptrace (the kernel checks `PTRACE_MODE_ATTACH`), but the process is never stopped or changed.
//!
//! ```
//! use gpu_tools::linux::threads::process_threads;
//!
//! for t in process_threads(std::process::id())? {
//!     let call = t.system_call.and_then(|c| c.name()).unwrap_or("-");
//!     println!("{} {:?} {} {call} in {:?}", t.tid, t.name, t.state, t.library);
//! }
//! # Ok::<(), std::io::Error>(())
//! ```

use std::ffi::OsString;
use std::io;

use super::procfs::{Mapping, Process};

/// What `/proc/<pid>/task/<tid>/syscall` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SystemCall {
    /// The thread is running (on a CPU or runnable).
    Running,
    /// Blocked, in system call `number` (or, `number` `None`, blocked outside a system call, for example in a page
    /// fault), with its stack pointer and the user-space address it made the call from.
    Blocked {
        /// The system call's number, for this architecture.
        number: Option<u64>,
        /// The user stack pointer.
        stack: u64,
        /// The user-space instruction address.
        pc: u64,
    },
}

impl SystemCall {
    /// The name of the system call where this architecture's number is one of the common blocking calls
    /// (`futex`, `ioctl`, `poll`, ...); `None` otherwise.
    pub fn name(&self) -> Option<&'static str> {
        match self {
            SystemCall::Blocked {
                number: Some(n), ..
            } => syscall_name(*n),
            _ => None,
        }
    }
}

/// Parses the contents of a `syscall` file: `running`, `-1 SP PC`, or `NR ARG1..ARG6 SP PC` (hexadecimal but
/// the number). `None` for anything else.
pub fn parse_system_call(text: &[u8]) -> Option<SystemCall> {
    let text = std::str::from_utf8(text).ok()?.trim();
    if text == "running" {
        return Some(SystemCall::Running);
    }
    let fields: Vec<&str> = text.split_ascii_whitespace().collect();
    let hex = |s: &str| u64::from_str_radix(s.strip_prefix("0x")?, 16).ok();
    let (number, rest) = match fields.split_first()? {
        (&"-1", rest) if rest.len() == 2 => (None, rest),
        (n, rest) if rest.len() == 8 => (Some(n.parse().ok()?), &rest[6..]),
        _ => return None,
    };
    Some(SystemCall::Blocked {
        number,
        stack: hex(rest[0])?,
        pc: hex(rest[1])?,
    })
}

/// One thread of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ThreadState {
    /// The thread id.
    pub tid: u32,
    /// The thread's name (`comm`).
    pub name: OsString,
    /// Its state letter (`R`, `S`, `D`, ...; see `proc(5)`).
    pub state: char,
    /// Its system call, `None` where it could not be read (no permission, or the thread ended).
    pub system_call: Option<SystemCall>,
    /// The file mapped where the thread made its system call, when it is blocked in one.
    pub library: Option<OsString>,
}

/// Every thread of process `pid`, read one by one (a thread that ends meanwhile is left out).
pub fn process_threads(pid: u32) -> io::Result<Vec<ThreadState>> {
    let process = Process::new(pid);
    let maps = process.maps().unwrap_or_default();
    let mut out = Vec::new();
    for tid in process.thread_ids()? {
        let dir = process.path().join("task").join(tid.to_string());
        let Ok(stat) = std::fs::read(dir.join("stat")) else {
            continue;
        };
        let Some(stat) = super::procfs::parse_stat(&stat) else {
            continue;
        };
        let system_call = std::fs::read(dir.join("syscall"))
            .ok()
            .and_then(|t| parse_system_call(&t));
        let library = match system_call {
            Some(SystemCall::Blocked { pc, .. }) => library_at(&maps, pc),
            _ => None,
        };
        out.push(ThreadState {
            tid,
            name: stat.command,
            state: stat.state,
            system_call,
            library,
        });
    }
    Ok(out)
}

fn library_at(maps: &[Mapping], pc: u64) -> Option<OsString> {
    maps.iter()
        .find(|m| m.contains(pc))
        .and_then(|m| m.file_name().map(|n| n.to_owned()))
}

/// Names of the system calls a blocked thread is usually found in.
#[cfg(target_arch = "x86_64")]
fn syscall_name(n: u64) -> Option<&'static str> {
    Some(match n {
        0 => "read",
        1 => "write",
        7 => "poll",
        16 => "ioctl",
        23 => "select",
        24 => "sched_yield",
        35 => "nanosleep",
        43 => "accept",
        45 => "recvfrom",
        47 => "recvmsg",
        61 => "wait4",
        202 => "futex",
        230 => "clock_nanosleep",
        232 => "epoll_wait",
        247 => "waitid",
        270 => "pselect6",
        271 => "ppoll",
        281 => "epoll_pwait",
        288 => "accept4",
        _ => return None,
    })
}

/// Names of the system calls a blocked thread is usually found in.
#[cfg(target_arch = "aarch64")]
fn syscall_name(n: u64) -> Option<&'static str> {
    Some(match n {
        29 => "ioctl",
        63 => "read",
        64 => "write",
        73 => "ppoll",
        72 => "pselect6",
        22 => "epoll_pwait",
        98 => "futex",
        101 => "nanosleep",
        115 => "clock_nanosleep",
        124 => "sched_yield",
        202 => "accept",
        207 => "recvfrom",
        212 => "recvmsg",
        242 => "accept4",
        260 => "wait4",
        95 => "waitid",
        _ => return None,
    })
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn syscall_name(_: u64) -> Option<&'static str> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syscall_lines_parse() {
        assert_eq!(parse_system_call(b"running\n"), Some(SystemCall::Running));
        assert_eq!(
            parse_system_call(b"-1 0x7ffc1000 0x7f0000001234\n"),
            Some(SystemCall::Blocked {
                number: None,
                stack: 0x7ffc_1000,
                pc: 0x7f00_0000_1234
            })
        );
        let futex = parse_system_call(b"202 0x7f1 0x80 0x0 0x0 0x0 0x0 0x7ffe5d0 0x7f3a9c0a2117\n")
            .unwrap();
        assert_eq!(
            futex,
            SystemCall::Blocked {
                number: Some(202),
                stack: 0x7ffe5d0,
                pc: 0x7f3a_9c0a_2117
            }
        );
        #[cfg(target_arch = "x86_64")]
        assert_eq!(futex.name(), Some("futex"));
        for bad in [
            &b""[..],
            b"202 0x1",
            b"x 0 0 0 0 0 0 0 0",
            b"-1 zz 0x1",
            b"\xff",
        ] {
            assert_eq!(parse_system_call(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_sleeping_thread_is_seen_in_its_call() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let sleeper = std::thread::Builder::new()
            .name("sleeper".into())
            .spawn(move || rx.recv())
            .unwrap();
        // Wait until the thread has blocked.
        let mine = || process_threads(std::process::id()).unwrap();
        let mut seen = None;
        for _ in 0..200 {
            seen = mine()
                .into_iter()
                .find(|t| t.name == "sleeper" && t.state == 'S');
            if seen.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let t = seen.expect("the sleeping thread is listed");
        match t.system_call {
            Some(SystemCall::Blocked { pc, .. }) => assert!(pc != 0),
            other => panic!("{other:?}"),
        }
        #[cfg(target_arch = "x86_64")]
        assert_eq!(t.system_call.and_then(|s| s.name()), Some("futex"));
        assert!(
            t.library
                .is_some_and(|l| l.to_string_lossy().starts_with("libc"))
        );
        tx.send(()).unwrap();
        sleeper.join().unwrap().unwrap();
    }
}
