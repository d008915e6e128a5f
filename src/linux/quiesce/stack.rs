//! Whether a stopped thread is inside given code: its program counter in one of the ranges, or any aligned word of
//! its live stack. The reasons this scan is conservative, and where it can be wrong, are in the
//! [module](super) documentation.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use super::{QuiesceError, StoppedThread};
use crate::linux::inject::symbols::LoadedLibrary;
use crate::linux::inject::{C_LIBRARY, TargetFilesystem, mapping_named};
use crate::linux::memory;
use crate::linux::procfs::{Mapping, Process};

/// How much of a thread's stack is scanned, from its stack pointer up (8 MiB, glibc's default stack size): a live
/// stack deeper than this is reported as [`Evidence::StackTooDeep`] rather than scanned in part and passed.
pub const STACK_SCAN_LIMIT: u64 = 8 << 20;

/// The most read from another process at once.
const CHUNK: usize = 1 << 20;

/// An executable address range of a mapped library (one line of `/proc/<pid>/maps`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct CodeRange {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// The file mapped there, as the kernel names it.
    pub path: PathBuf,
}

impl CodeRange {
    /// The range `start..end` of `path`'s code.
    pub fn new(start: u64, end: u64, path: impl Into<PathBuf>) -> Self {
        CodeRange {
            start,
            end,
            path: path.into(),
        }
    }

    /// Whether `addr` lies inside the range.
    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }
}

/// The executable mappings in `maps` of every file whose name starts with one of `prefixes` (`"libcuda.so"`,
/// `"libcupti.so"`, `"libnvperf"`), in address order.
pub fn code_ranges(maps: &[Mapping], prefixes: &[&str]) -> Vec<CodeRange> {
    maps.iter()
        .filter(|m| m.is_executable())
        .filter_map(|m| {
            let name = m.file_name()?.as_bytes();
            let path = m.path()?;
            prefixes
                .iter()
                .any(|p| name.starts_with(p.as_bytes()))
                .then(|| CodeRange::new(m.start, m.end, path))
        })
        .collect()
}

/// [`code_ranges`] of process `pid`'s memory map as it is now.
pub fn library_code_ranges(pid: u32, prefixes: &[&str]) -> Result<Vec<CodeRange>, QuiesceError> {
    match Process::new(pid).maps() {
        Ok(maps) => Ok(code_ranges(&maps, prefixes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(QuiesceError::NoSuchProcess(pid)),
        Err(e) => Err(QuiesceError::Trace {
            pid,
            detail: format!("/proc/{pid}/maps: {e}"),
        }),
    }
}

/// The C library's functions that make a `fork`: `fork` itself, which runs the handlers libraries registered with
/// `pthread_atfork` before and after the copy, and `_Fork`, the copy (its other names, `__fork` and `__libc_fork`,
/// are the same code). A thread inside them may hold what a library's prepare handler took until the parent's
/// handler gives it back: the CUDA driver's locks among them. Its live frames show no driver code then (the
/// handler returned), so the driver's ranges alone find it outside: the fork matrix row's job died that way, its
/// main thread held in a fork while CUPTI's PC sampling waited for the driver's lock (see `profile_attach`).
///
/// As process `pid` maps them, read from its C library's dynamic symbols as the attach reads them
/// ([`TargetFilesystem`](crate::linux::inject::TargetFilesystem): a container's own C library, through
/// `/proc/<pid>/root`). A process that maps no C library by those names (a static program) has none.
pub fn fork_code_ranges(pid: u32) -> Result<Vec<CodeRange>, QuiesceError> {
    const NAMES: [&str; 4] = ["fork", "_Fork", "__fork", "__libc_fork"];
    let maps = match Process::new(pid).maps() {
        Ok(maps) => maps,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(QuiesceError::NoSuchProcess(pid));
        }
        Err(e) => {
            return Err(QuiesceError::Trace {
                pid,
                detail: format!("/proc/{pid}/maps: {e}"),
            });
        }
    };
    let Some(libc) = mapping_named(&maps, &C_LIBRARY) else {
        return Ok(Vec::new());
    };
    let Some(path) = libc.path() else {
        return Ok(Vec::new());
    };
    let same: Vec<&Mapping> = maps.iter().filter(|m| m.same_file(libc)).collect();
    let file = TargetFilesystem::for_process(pid)
        .map_err(|e| QuiesceError::Trace {
            pid,
            detail: format!("its C library's fork functions: {e}"),
        })?
        .host_path(path);
    let symbols = LoadedLibrary::read(&file, &same).map_err(|detail| QuiesceError::Trace {
        pid,
        detail: format!("its C library's fork functions: {detail}"),
    })?;
    let mut ranges: Vec<CodeRange> = NAMES
        .iter()
        .filter_map(|name| symbols.symbol(name))
        .filter(|f| f.size > 0)
        .map(|f| CodeRange::new(f.address, f.address.saturating_add(f.size), path))
        .collect();
    ranges.sort_by_key(|r| (r.start, r.end));
    ranges.dedup();
    Ok(ranges)
}

/// A stopped thread that may be inside the given code, and why it is taken to be.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Inside {
    /// The thread.
    pub tid: u32,
    /// Its name (`comm`).
    pub name: OsString,
    /// What placed it there.
    pub evidence: Evidence,
}

/// Why a thread is taken to be inside the given code.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Evidence {
    /// Its program counter is in the code: it runs there.
    ProgramCounter {
        /// The program counter.
        pc: u64,
        /// The file the code belongs to.
        library: PathBuf,
    },
    /// A word of its live stack points into the code: most likely the return address of a frame of that code
    /// below which the thread runs now (a stale word left in a frame can point there too).
    StackWord {
        /// The word's distance in bytes from the stack pointer (rounded down to 8 bytes).
        offset: u64,
        /// The word.
        value: u64,
        /// The file it points into.
        library: PathBuf,
    },
    /// Its stack could not be read, so it cannot be shown to be outside.
    StackUnreadable {
        /// Why.
        detail: String,
    },
    /// A live frame, found by unwinding, returns into the code.
    Frame {
        /// How many frames out from the innermost (1: its caller).
        depth: usize,
        /// The return address.
        pc: u64,
        /// The file it points into.
        library: PathBuf,
    },
    /// Its live stack is deeper than [`STACK_SCAN_LIMIT`]; no word of the part scanned points into the code, but
    /// the rest was not looked at.
    StackTooDeep {
        /// Bytes scanned.
        scanned: u64,
        /// Bytes from the stack pointer to the end of its mapping.
        depth: u64,
    },
}

/// The ranges, with their lowest and highest address to turn most words away at once.
pub(super) struct Ranges<'a> {
    ranges: &'a [CodeRange],
    low: u64,
    high: u64,
}

impl<'a> Ranges<'a> {
    pub(super) fn new(ranges: &'a [CodeRange]) -> Self {
        Ranges {
            ranges,
            low: ranges.iter().map(|r| r.start).min().unwrap_or(u64::MAX),
            high: ranges.iter().map(|r| r.end).max().unwrap_or(0),
        }
    }

    pub(super) fn find(&self, addr: u64) -> Option<&'a CodeRange> {
        if addr < self.low || addr >= self.high {
            return None;
        }
        self.ranges.iter().find(|r| r.contains(addr))
    }
}

/// The first 8-byte word of `bytes` (read from an 8-byte-aligned address) that points into `ranges`: its byte
/// offset, its value and the range.
pub(super) fn first_word_in<'a>(
    bytes: &[u8],
    ranges: &Ranges<'a>,
) -> Option<(usize, u64, &'a CodeRange)> {
    bytes.chunks_exact(8).enumerate().find_map(|(i, word)| {
        let value = u64::from_ne_bytes(word.try_into().ok()?);
        ranges.find(value).map(|r| (i * 8, value, r))
    })
}

/// Whether `thread`'s program counter is in `ranges`.
pub(super) fn pc_inside(thread: &StoppedThread, ranges: &Ranges<'_>) -> Option<Evidence> {
    ranges.find(thread.pc).map(|r| Evidence::ProgramCounter {
        pc: thread.pc,
        library: r.path.clone(),
    })
}

/// Whether a word of `thread`'s live stack points into `ranges`, or its stack cannot be shown not to. `maps` is
/// process `pid`'s memory map, or why it could not be read.
pub(super) fn stack_inside(
    pid: u32,
    thread: &StoppedThread,
    maps: &Result<Vec<Mapping>, String>,
    ranges: &Ranges<'_>,
) -> Option<Evidence> {
    if ranges.ranges.is_empty() {
        return None;
    }
    let maps = match maps {
        Ok(maps) => maps,
        Err(why) => {
            return Some(Evidence::StackUnreadable {
                detail: why.clone(),
            });
        }
    };
    let Some(stack) = maps.iter().find(|m| m.contains(thread.sp)) else {
        return Some(Evidence::StackUnreadable {
            detail: format!("the stack pointer {:#x} is in no mapping", thread.sp),
        });
    };
    let from = thread.sp & !7;
    let depth = stack.end - from;
    let scanned = depth.min(STACK_SCAN_LIMIT);
    let mut buf = vec![0u8; (scanned as usize).min(CHUNK)];
    let mut done = 0u64;
    while done < scanned {
        let n = ((scanned - done) as usize).min(CHUNK);
        let chunk = &mut buf[..n];
        let at = from + done;
        if let Err(e) = read_memory(pid, at, chunk) {
            return Some(Evidence::StackUnreadable {
                detail: format!("reading {n} bytes of the stack at {at:#x}: {e}"),
            });
        }
        if let Some((i, value, r)) = first_word_in(chunk, ranges) {
            return Some(Evidence::StackWord {
                offset: done + i as u64,
                value,
                library: r.path.clone(),
            });
        }
        done += n as u64;
    }
    (depth > scanned).then_some(Evidence::StackTooDeep { scanned, depth })
}

/// Reads `bytes.len()` bytes at `addr` of process `pid`: `process_vm_readv`, else `/proc/<pid>/mem` (which
/// container seccomp profiles that forbid the former still let a tracer read).
pub(super) fn read_memory(pid: u32, addr: u64, bytes: &mut [u8]) -> std::io::Result<()> {
    match memory::read_bytes(pid, addr, bytes) {
        Ok(()) => Ok(()),
        Err(first) => {
            let mem = std::fs::File::open(format!("/proc/{pid}/mem"))
                .map_err(|e| std::io::Error::other(format!("{first}; /proc/{pid}/mem: {e}")))?;
            mem.read_exact_at(bytes, addr)
                .map_err(|e| std::io::Error::other(format!("{first}; /proc/{pid}/mem: {e}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::procfs::parse_maps;

    const MAPS: &[u8] = b"\
555500000000-555500001000 r-xp 00000000 08:01 10 /usr/bin/python3
7f0000000000-7f0000001000 r--p 00000000 08:01 20 /usr/lib/libcuda.so.1
7f0000001000-7f0000100000 r-xp 00001000 08:01 20 /usr/lib/libcuda.so.1
7f0000200000-7f0000210000 r-xp 00001000 08:01 30 /opt/cu13/lib/libcupti.so.13
7f0000300000-7f0000310000 r-xp 00001000 08:01 40 /opt/cu13/lib/libnvperf_host.so
7f0000400000-7f0000410000 r-xp 00001000 08:01 50 /usr/lib/libcudart.so.13
7f0000500000-7f0000510000 rwxp 00000000 00:00 0
";

    #[test]
    fn ranges_are_the_executable_mappings_of_the_named_libraries() {
        let maps: Vec<Mapping> = parse_maps(MAPS).collect();
        let r = code_ranges(&maps, &["libcuda.so", "libcupti.so", "libnvperf"]);
        let starts: Vec<u64> = r.iter().map(|r| r.start).collect();
        // Not libcuda's read-only header, not libcudart (another prefix), not anonymous code.
        assert_eq!(starts, [0x7f0000001000, 0x7f0000200000, 0x7f0000300000]);
        assert_eq!(r[0].path, PathBuf::from("/usr/lib/libcuda.so.1"));
        assert!(r[0].contains(0x7f0000001000) && !r[0].contains(0x7f0000100000));
        assert!(code_ranges(&maps, &["libnothing"]).is_empty());
        assert!(code_ranges(&maps, &[]).is_empty());
    }

    #[test]
    fn the_first_word_inside_is_found_at_its_offset() {
        let ranges = [
            CodeRange::new(0x7000, 0x8000, "/a.so"),
            CodeRange::new(0x9000, 0x9100, "/b.so"),
        ];
        let ranges = Ranges::new(&ranges);
        let words: [u64; 6] = [0, 0x6fff, 0x8000, 0x90ff, 0x7000, u64::MAX];
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let (offset, value, r) = first_word_in(&bytes, &ranges).unwrap();
        assert_eq!((offset, value), (24, 0x90ff));
        assert_eq!(r.path, PathBuf::from("/b.so"));
        assert!(first_word_in(&bytes[..24], &ranges).is_none());
        // A trailing part shorter than a word is not a word.
        assert!(first_word_in(&bytes[27..31], &ranges).is_none());
        assert!(first_word_in(&bytes, &Ranges::new(&[])).is_none());
    }
}
