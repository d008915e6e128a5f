//! Where a thread may call the loader without deadlocking or corrupting it.
//!
//! The call runs on one thread while every other thread runs too, so a lock another thread holds is only waited
//! for. The danger is a lock the *calling* thread holds: `dlopen` allocates, so a thread stopped inside `malloc`
//! (holding its arena's lock, which is not recursive) would wait for itself forever, and a thread stopped inside
//! the loader would re-enter it with its state half-changed. A thread is taken only where it cannot be in either:
//!
//! - in code outside the C library, the loader and any allocator library (the program, an interpreter, the CUDA
//!   driver, JIT code): glibc holds its allocator locks only while its own code runs;
//! - or blocked in a system call made from the C library that waits for something else (sleep, poll, read, a
//!   futex), except a futex wait inside glibc's internal lock (`__lll_lock_wait_private`, which the allocator
//!   uses).
//!
//! A thread running inside the C library itself is never taken: with only the exported symbols at hand, code of
//! `malloc` cannot be told apart from the code around it. When no thread qualifies, the process runs a moment and
//! is looked at again.

use crate::linux::procfs::Mapping;
use crate::linux::ptrace::ThreadRegisters;

use super::symbols::LoadedLibrary;

/// What a stopped thread is doing, as far as calling the loader on it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The loader may be called on it.
    Safe,
    /// Not now, and why.
    NotNow(String),
}

/// Blocking system calls (x86-64 numbers) during which a thread holds no lock of the C library's own.
const WAITING_CALLS: &[u64] = &[
    0,   // read
    7,   // poll
    19,  // readv
    23,  // select
    24,  // sched_yield
    34,  // pause
    35,  // nanosleep
    43,  // accept
    45,  // recvfrom
    47,  // recvmsg
    61,  // wait4
    128, // rt_sigtimedwait
    130, // rt_sigsuspend
    202, // futex
    230, // clock_nanosleep
    232, // epoll_wait
    247, // waitid
    270, // pselect6
    271, // ppoll
    281, // epoll_pwait
    288, // accept4
    299, // recvmmsg
    441, // epoll_pwait2
];

/// glibc's internal lock waits: a thread there may be inside `malloc`.
const LOCK_WAITS: &[&str] = &["__lll_lock_wait_private", "__lll_lock_wait"];

/// What is mapped where the thread runs.
pub(crate) struct Places<'a> {
    pub(crate) maps: &'a [Mapping],
    /// The C library's mappings and its symbols.
    pub(crate) libc: (&'a Mapping, &'a LoadedLibrary),
}

fn is_loader(name: &str) -> bool {
    name.starts_with("ld-linux") || name.starts_with("ld64.so") || name.starts_with("ld-musl")
}

fn is_allocator(name: &str) -> bool {
    ["jemalloc", "tcmalloc", "mimalloc", "hoard", "libmalloc"]
        .iter()
        .any(|a| name.contains(a))
}

/// Decides whether `thread` may call the loader now.
pub(crate) fn classify(thread: &ThreadRegisters, places: &Places<'_>) -> Verdict {
    let Some(mapping) = places.maps.iter().find(|m| m.contains(thread.pc)) else {
        return Verdict::NotNow(format!("pc {:#x} in no mapping", thread.pc));
    };
    let name = mapping
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.is_empty() {
        // Anonymous executable memory: JIT code, which holds no C-library lock.
        return Verdict::Safe;
    }
    if is_loader(&name) {
        return Verdict::NotNow(format!("in the dynamic loader ({name})"));
    }
    if is_allocator(&name) {
        return Verdict::NotNow(format!("in the allocator library {name}"));
    }
    let (libc_map, libc) = places.libc;
    if !mapping.same_file(libc_map) {
        return Verdict::Safe;
    }
    let function = libc
        .nearest_below(thread.pc)
        .map_or("?", |s| s.name.as_str());
    match thread.syscall {
        Some(nr) if WAITING_CALLS.contains(&nr) => {
            if LOCK_WAITS.contains(&function) {
                Verdict::NotNow(format!("waiting for a C-library lock ({function})"))
            } else {
                Verdict::Safe
            }
        }
        Some(nr) => Verdict::NotNow(format!("in system call {nr} inside the C library")),
        None => Verdict::NotNow(format!("running inside the C library (near {function})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::procfs::parse_maps;

    const MAPS: &[u8] = b"\
555500000000-555500001000 r-xp 00000000 08:01 10 /usr/bin/python3
7f0000000000-7f0000100000 r-xp 00000000 08:01 20 /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000200000-7f0000210000 r-xp 00000000 08:01 30 /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
7f0000300000-7f0000310000 r-xp 00000000 08:01 40 /usr/lib/libjemalloc.so.2
7f0000400000-7f0000410000 rwxp 00000000 00:00 0
";

    fn thread(pc: u64, syscall: Option<u64>) -> ThreadRegisters {
        ThreadRegisters {
            tid: 1,
            pc,
            sp: 0,
            syscall,
        }
    }

    #[test]
    fn verdicts() {
        let maps: Vec<Mapping> = parse_maps(MAPS).collect();
        let libc = LoadedLibrary::for_tests(&[
            ("nanosleep", 0x7f0000001000, 0x100),
            ("__lll_lock_wait_private", 0x7f0000002000, 0x80),
            ("malloc", 0x7f0000003000, 0x400),
        ]);
        let places = Places {
            maps: &maps,
            libc: (&maps[1], &libc),
        };
        assert_eq!(
            classify(&thread(0x555500000100, None), &places),
            Verdict::Safe
        );
        assert_eq!(
            classify(&thread(0x7f0000400100, None), &places),
            Verdict::Safe,
            "JIT code"
        );
        assert_eq!(
            classify(&thread(0x7f0000001010, Some(35)), &places),
            Verdict::Safe,
            "asleep in nanosleep"
        );
        let not_now = |t| matches!(classify(&t, &places), Verdict::NotNow(_));
        assert!(
            not_now(thread(0x7f0000002010, Some(202))),
            "a malloc lock wait"
        );
        assert!(not_now(thread(0x7f0000003010, None)), "running in malloc");
        assert!(not_now(thread(0x7f0000003010, Some(9))), "mmap from malloc");
        assert!(not_now(thread(0x7f0000200010, None)), "in the loader");
        assert!(not_now(thread(0x7f0000300010, None)), "in jemalloc");
        assert!(not_now(thread(0x10, None)), "unmapped");
    }
}
