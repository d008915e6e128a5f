//! Writing a `uint32_t` of this process's libcuda into the same variable of a debuggee's libcuda.
//!
//! Both processes map the same `libcuda.so.1` file, so a variable lies at the same distance from the library's
//! lowest mapping in each. The debuggee's copy is found through `/proc/<pid>/maps` (same device and inode) and
//! written with `process_vm_writev`, which needs no ptrace stop.

use std::ffi::c_void;

/// `struct iovec` of `<sys/uio.h>`.
#[repr(C)]
struct IoVec {
    base: *mut c_void,
    len: usize,
}

unsafe extern "C" {
    /// glibc's wrapper of the `process_vm_readv` system call.
    fn process_vm_readv(
        pid: i32,
        local: *const IoVec,
        liovcnt: u64,
        remote: *const IoVec,
        riovcnt: u64,
        flags: u64,
    ) -> isize;
    /// glibc's wrapper of the `process_vm_writev` system call.
    fn process_vm_writev(
        pid: i32,
        local: *const IoVec,
        liovcnt: u64,
        remote: *const IoVec,
        riovcnt: u64,
        flags: u64,
    ) -> isize;
}

/// One line of a maps file: address range, file offset, device and inode.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mapping {
    start: u64,
    end: u64,
    device: String,
    inode: u64,
}

fn parse_maps(text: &str) -> impl Iterator<Item = Mapping> + '_ {
    text.lines().filter_map(|line| {
        let mut f = line.split_whitespace();
        let (range, _perms, _offset, device, inode) =
            (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
        let (a, b) = range.split_once('-')?;
        Some(Mapping {
            start: u64::from_str_radix(a, 16).ok()?,
            end: u64::from_str_radix(b, 16).ok()?,
            device: device.to_owned(),
            inode: inode.parse().ok()?,
        })
    })
}

/// The file (device, inode) mapped at `addr` and that file's lowest mapped address, in `maps`. An address in
/// the anonymous mapping right after a file's last mapping (its `.bss`) belongs to that file.
fn file_at(maps: &str, addr: u64) -> Option<(String, u64, u64)> {
    let mut prev: Option<Mapping> = None;
    let mut hit = None;
    for m in parse_maps(maps) {
        if m.start <= addr && addr < m.end {
            hit = match (m.inode, prev) {
                (0, Some(p)) if p.end == m.start && p.inode != 0 => Some(p),
                (0, _) => None,
                _ => Some(m),
            };
            break;
        }
        prev = Some(m);
    }
    let hit = hit?;
    let base = lowest(maps, &hit.device, hit.inode)?;
    Some((hit.device, hit.inode, base))
}

/// The lowest address at which the file (device, inode) is mapped, in `maps`.
fn lowest(maps: &str, device: &str, inode: u64) -> Option<u64> {
    parse_maps(maps)
        .filter(|m| m.inode == inode && m.device == device)
        .map(|m| m.start)
        .min()
}

/// Where this process's variable at `local` lies in process `pid`, if `pid` maps the same library file yet.
pub(crate) fn remote_address(pid: u32, local: *const u32) -> std::io::Result<Option<u64>> {
    let own = std::fs::read_to_string("/proc/self/maps")?;
    let Some((device, inode, base)) = file_at(&own, local as u64) else {
        return Ok(None);
    };
    let theirs = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    Ok(lowest(&theirs, &device, inode).map(|remote| remote + (local as u64 - base)))
}

/// Reads the `u32` at `addr` in process `pid`.
pub(crate) fn read_u32(pid: u32, addr: u64) -> std::io::Result<u32> {
    let mut v = [0u8; 4];
    transfer(pid, addr, &mut v, Direction::Read)?;
    Ok(u32::from_ne_bytes(v))
}

/// Reads the `u64` at `addr` in process `pid`.
pub(crate) fn read_u64(pid: u32, addr: u64) -> std::io::Result<u64> {
    let mut v = [0u8; 8];
    transfer(pid, addr, &mut v, Direction::Read)?;
    Ok(u64::from_ne_bytes(v))
}

/// Writes `value` at `addr` in process `pid`.
pub(crate) fn write_u32(pid: u32, addr: u64, value: u32) -> std::io::Result<()> {
    transfer(pid, addr, &mut value.to_ne_bytes(), Direction::Write)
}

/// Writes `value` at `addr` in process `pid`.
pub(crate) fn write_u64(pid: u32, addr: u64, value: u64) -> std::io::Result<()> {
    transfer(pid, addr, &mut value.to_ne_bytes(), Direction::Write)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Read,
    Write,
}

/// Copies `bytes.len()` bytes between `bytes` and `addr` in process `pid`, in either direction.
fn transfer(pid: u32, addr: u64, bytes: &mut [u8], direction: Direction) -> std::io::Result<()> {
    let local = IoVec {
        base: bytes.as_mut_ptr().cast(),
        len: bytes.len(),
    };
    let remote = IoVec {
        base: addr as *mut c_void,
        len: bytes.len(),
    };
    let pid =
        i32::try_from(pid).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let n = match direction {
        // SAFETY: one local iovec over the live buffer and one remote iovec; the kernel checks the remote range and
        // writes only into `bytes`.
        Direction::Read => unsafe { process_vm_readv(pid, &local, 1, &remote, 1, 0) },
        // SAFETY: as above; the kernel also checks our permission to write there, and reads only `bytes` here.
        Direction::Write => unsafe { process_vm_writev(pid, &local, 1, &remote, 1, 0) },
    };
    match n {
        n if n < 0 => Err(std::io::Error::last_os_error()),
        n if n as usize == bytes.len() => Ok(()),
        _ if direction == Direction::Read => {
            Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof))
        }
        _ => Err(std::io::Error::from(std::io::ErrorKind::WriteZero)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0a0000000-55d0a0001000 r--p 00000000 08:01 100 /usr/bin/x
7f0000000000-7f0000100000 r--p 00000000 08:01 4242 /usr/lib/libcuda.so.1
7f0000100000-7f0000200000 r-xp 00100000 08:01 4242 /usr/lib/libcuda.so.1
7f0000200000-7f0000210000 rw-p 00200000 08:01 4242 /usr/lib/libcuda.so.1
7f0000210000-7f0000220000 rw-p 00000000 00:00 0
";

    #[test]
    fn finds_the_file_and_its_base() {
        assert_eq!(
            file_at(MAPS, 0x7f0000200010),
            Some(("08:01".into(), 4242, 0x7f0000000000))
        );
        assert_eq!(
            file_at(MAPS, 0x7f0000210010),
            Some(("08:01".into(), 4242, 0x7f0000000000)),
            "the library's .bss right after its last file mapping"
        );
        assert_eq!(file_at(MAPS, 0x55d0a0000010).map(|f| f.1), Some(100));
        assert_eq!(file_at(MAPS, 0x10), None, "unmapped");
        assert_eq!(lowest(MAPS, "08:01", 4242), Some(0x7f0000000000));
        assert_eq!(lowest(MAPS, "08:02", 4242), None, "another device");
    }

    #[test]
    fn writes_into_a_process() {
        // Our own address space stands in for the debuggee: a write to self through the same system call.
        let mut target = Box::new(0u32);
        let ptr = &raw mut *target;
        match write_u32(std::process::id(), ptr as u64, 0xfeed) {
            // SAFETY: `ptr` points to the live box; volatile because the kernel, not Rust, wrote it.
            Ok(()) => {
                assert_eq!(unsafe { ptr.read_volatile() }, 0xfeed);
                assert_eq!(read_u32(std::process::id(), ptr as u64).unwrap(), 0xfeed);
                let mut wide = Box::new(0u64);
                let wptr = &raw mut *wide;
                write_u64(std::process::id(), wptr as u64, 0x1122_3344_5566_7788).unwrap();
                assert_eq!(
                    read_u64(std::process::id(), wptr as u64).unwrap(),
                    0x1122_3344_5566_7788
                );
            }
            // Some sandboxes forbid the system call; the error is reported, not hidden.
            Err(e) => assert_eq!(e.raw_os_error(), Some(1), "{e}"),
        }
    }

    #[test]
    fn own_library_maps_to_itself() {
        let v = Box::new(7u32);
        // A heap address is in no file mapping.
        assert_eq!(remote_address(std::process::id(), &*v).unwrap(), None);
        // An address inside a shared library (libc's code here) lies at the same place in the same process.
        let in_libc = process_vm_readv as *const u32;
        assert_eq!(
            remote_address(std::process::id(), in_libc).unwrap(),
            Some(in_libc as u64)
        );
    }
}
