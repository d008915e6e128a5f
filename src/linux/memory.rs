//! Another process's memory, read and written with `process_vm_readv`/`process_vm_writev` (no ptrace stop
//! needed; the kernel checks this process may trace the other), and the place a variable of a shared library lies
//! at in another process that maps the same file.
//!
//! Both processes map the same library file, so a variable lies at the same distance from the start of the
//! library's loaded image in each. The other process's copy is found through its memory map (same device and
//! inode; a mapping of the file as data, a symbolizer's, is not the image).

use super::procfs::{Mapping, Process};

/// The file mapped at `addr` in `maps` and the start of its loaded image that holds `addr`. An address in the
/// anonymous mapping right after a file's last mapping (its `.bss`) belongs to that file.
fn file_at(maps: &[Mapping], addr: u64) -> Option<(&Mapping, u64)> {
    let at = maps.iter().position(|m| m.contains(addr))?;
    let hit = &maps[at];
    let file = match (hit.inode, at.checked_sub(1).map(|p| &maps[p])) {
        (0, Some(prev)) if prev.end == hit.start && prev.inode != 0 => prev,
        (0, _) => return None,
        _ => hit,
    };
    let base = loaded(maps, file)
        .into_iter()
        .take_while(|&start| start <= addr)
        .last()?;
    Some((file, base))
}

/// The starts of the images of `file`'s file (device, inode) the loader mapped in `maps`, ascending: not the file
/// mapped as data, which a symbolizer does (see `procfs::loaded_at`).
fn loaded(maps: &[Mapping], file: &Mapping) -> Vec<u64> {
    let same: Vec<&Mapping> = maps.iter().filter(|m| m.same_file(file)).collect();
    super::procfs::loaded_at(&same, 0)
}

/// The start of the first image of `file`'s file the loader mapped in `maps`.
fn lowest(maps: &[Mapping], file: &Mapping) -> Option<u64> {
    loaded(maps, file).first().copied()
}

/// Where this process's variable at `local` lies in process `pid`, if `pid` maps the same library file yet.
pub(crate) fn remote_address(pid: u32, local: *const u32) -> std::io::Result<Option<u64>> {
    let own = Process::current().maps()?;
    let Some((file, base)) = file_at(&own, local as u64) else {
        return Ok(None);
    };
    let theirs = Process::new(pid).maps()?;
    Ok(lowest(&theirs, file).map(|remote| remote + (local as u64 - base)))
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

/// Reads `bytes.len()` bytes at `addr` in process `pid`.
pub(crate) fn read_bytes(pid: u32, addr: u64, bytes: &mut [u8]) -> std::io::Result<()> {
    transfer(pid, addr, bytes, Direction::Read)
}

/// Writes `bytes` at `addr` in process `pid`.
pub(crate) fn write_bytes(pid: u32, addr: u64, bytes: &[u8]) -> std::io::Result<()> {
    let mut copy = bytes.to_vec();
    transfer(pid, addr, &mut copy, Direction::Write)
}

/// Reads the NUL-terminated string at `addr` in process `pid`, at most `limit` bytes of it (a string cut there is
/// returned cut). Reads in small pieces so that a string near the end of a mapping is still read.
pub(crate) fn read_c_string(pid: u32, addr: u64, limit: usize) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    while out.len() < limit {
        // Up to the next 256-byte boundary: never across a page boundary the string does not reach.
        let at = addr + out.len() as u64;
        let piece = (256 - (at % 256) as usize).min(limit - out.len());
        let mut buf = vec![0u8; piece];
        transfer(pid, at, &mut buf, Direction::Read)?;
        match buf.iter().position(|&c| c == 0) {
            Some(end) => {
                out.extend_from_slice(&buf[..end]);
                return Ok(out);
            }
            None => out.extend_from_slice(&buf),
        }
    }
    Ok(out)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Read,
    Write,
}

/// Copies `bytes.len()` bytes between `bytes` and `addr` in process `pid`, in either direction.
fn transfer(pid: u32, addr: u64, bytes: &mut [u8], direction: Direction) -> std::io::Result<()> {
    let local = libc::iovec {
        iov_base: bytes.as_mut_ptr().cast(),
        iov_len: bytes.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let n = match direction {
        // SAFETY: one local iovec over the live buffer and one remote iovec; the kernel checks the remote range and
        // writes only into `bytes`.
        Direction::Read => unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) },
        // SAFETY: as above; the kernel also checks our permission to write there, and reads only `bytes` here.
        Direction::Write => unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) },
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

    const MAPS: &[u8] = b"\
55d0a0000000-55d0a0001000 r--p 00000000 08:01 100 /usr/bin/x
55d0a0001000-55d0a0002000 r-xp 00001000 08:01 100 /usr/bin/x
7e0000000000-7e0000300000 r--p 00000000 08:01 4242 /usr/lib/libcuda.so.1
7f0000000000-7f0000100000 r--p 00000000 08:01 4242 /usr/lib/libcuda.so.1
7f0000100000-7f0000200000 r-xp 00100000 08:01 4242 /usr/lib/libcuda.so.1
7f0000200000-7f0000210000 rw-p 00200000 08:01 4242 /usr/lib/libcuda.so.1
7f0000210000-7f0000220000 rw-p 00000000 00:00 0
7f0000300000-7f0000310000 r--p 00000000 08:02 4242 /mnt/other/libcuda.so.1
7f0000310000-7f0000320000 r-xp 00010000 08:02 4242 /mnt/other/libcuda.so.1
";

    #[test]
    fn finds_the_file_and_its_base() {
        let maps: Vec<Mapping> = crate::linux::procfs::parse_maps(MAPS).collect();
        let found = |addr| file_at(&maps, addr).map(|(m, base)| (m.device, m.inode, base));
        assert_eq!(found(0x7f0000200010), Some(((8, 1), 4242, 0x7f0000000000)));
        assert_eq!(
            found(0x7f0000210010),
            Some(((8, 1), 4242, 0x7f0000000000)),
            "the library's .bss right after its last file mapping"
        );
        assert_eq!(found(0x55d0a0000010).map(|f| f.1), Some(100));
        assert_eq!(found(0x10), None, "unmapped");
        assert_eq!(
            found(0x7f0000300010),
            Some(((8, 2), 4242, 0x7f0000300000)),
            "the same inode on another device is another file"
        );
        // The library's file mapped whole as data, lower down (a symbolizer's): not its image, and no variable's.
        assert_eq!(found(0x7e0000000010), None, "inside the data mapping");
        assert_eq!(lowest(&maps, &maps[2]), Some(0x7f0000000000));
    }

    #[test]
    fn writes_into_a_process() {
        // Our own address space stands in for the debuggee: a write to self through the same system call.
        let mut target = Box::new(0u32);
        let ptr = &raw mut *target;
        match write_u32(std::process::id(), ptr as u64, 0xfeed) {
            Ok(()) => {
                // SAFETY: `ptr` points to the live box; volatile because the kernel, not Rust, wrote it.
                let written = unsafe { ptr.read_volatile() };
                assert_eq!(written, 0xfeed);
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
        let in_libc = libc::process_vm_readv as *const u32;
        assert_eq!(
            remote_address(std::process::id(), in_libc).unwrap(),
            Some(in_libc as u64)
        );
    }
}
