//! What `/proc` shows about a process to attach to: whether it still runs, which CUDA driver library it maps, and
//! whether its driver is initialised.

use std::path::{Path, PathBuf};

use crate::linux::procfs::{Mapping, Process};

/// Whether process `pid` exists and has not ended (a zombie has).
pub(super) fn is_running(pid: u32) -> bool {
    let p = Process::new(pid);
    p.exists() && !p.stat().is_ok_and(|s| s.has_ended())
}

/// Devices a CUDA driver holds open from `cuInit` on: the NVIDIA control device, or WSL's GPU device.
pub(super) const DRIVER_DEVICES: &[&str] = &["/dev/nvidiactl", "/dev/dxg"];

/// The CUDA driver libraries a memory map shows. The maps name the file the link resolved to: a driver install's
/// `libcuda.so.1` is a link to `libcuda.so.<driver version>` (`libcuda.so.580.159.04`), which is what they show.
pub(super) fn libcuda_paths(maps: &[Mapping]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = maps
        .iter()
        .filter(|m| m.file_name().is_some_and(is_libcuda))
        .filter_map(|m| m.path().map(Path::to_path_buf))
        .collect();
    out.dedup();
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_mapped_driver_library_by_name() {
        let maps = b"\
7f00-7f10 r--p 00000000 08:01 42 /usr/lib/x86_64-linux-gnu/libcuda.so.1
7f10-7f20 r-xp 00010000 08:01 42 /usr/lib/x86_64-linux-gnu/libcuda.so.1
7f20-7f30 rw-p 00000000 00:00 0
7f30-7f40 r--p 00000000 08:01 43 /opt/other/libcuda.so.1.bak
7f40-7f50 r--p 00000000 08:01 44 /usr/lib/libcudart.so.13.0.96
7f50-7f60 r--p 00000000 08:01 45 /usr/lib/libcudadebugger.so.1
";
        let parse =
            |b: &[u8]| libcuda_paths(&crate::linux::procfs::parse_maps(b).collect::<Vec<_>>());
        assert_eq!(
            parse(maps),
            vec![PathBuf::from("/usr/lib/x86_64-linux-gnu/libcuda.so.1")]
        );
        // What a driver install's maps show: the file the libcuda.so.1 link resolves to.
        let installed =
            b"7f00-7f10 r--p 00000000 fd:01 7 /usr/local/nvidia/lib64/libcuda.so.580.159.04\n";
        assert_eq!(
            parse(installed),
            vec![PathBuf::from(
                "/usr/local/nvidia/lib64/libcuda.so.580.159.04"
            )]
        );
        assert!(parse(b"7f00-7f10 r--p 0 08:01 1 /lib/libc.so.6\n").is_empty());
        // A driver folder whose name holds a space.
        assert_eq!(
            parse(b"7f00-7f10 r--p 0 08:01 1 /opt/my driver/libcuda.so.1\n"),
            vec![PathBuf::from("/opt/my driver/libcuda.so.1")]
        );
    }
}
