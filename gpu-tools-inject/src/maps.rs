//! Libraries already mapped into this process. Inside a program that loaded its own `libcupti.so` (PyTorch does,
//! from its wheel) or its own `libcuda.so.1`, the library must use those copies: a second copy of CUPTI or of the
//! driver in one process would not share their state.

use std::path::PathBuf;

use gpu_tools::linux::procfs::{Mapping, Process};

/// The path of the first mapped file whose name starts with `prefix` (for example `libcupti.so`), from
/// `/proc/self/maps`.
pub fn mapped_library(prefix: &str) -> Option<PathBuf> {
    find(&Process::current().maps().ok()?, prefix)
}

fn find(maps: &[Mapping], prefix: &str) -> Option<PathBuf> {
    maps.iter()
        .filter(|m| {
            m.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .find_map(|m| m.path().map(PathBuf::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_mapped_library_by_name_prefix() {
        let maps = b"\
7f0000000000-7f0000001000 r--p 00000000 08:01 123   /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000001000-7f0000002000 r-xp 00000000 08:01 456   /opt/py/site-packages/nvidia/cu13/lib/libcupti.so.13
7f0000002000-7f0000003000 rw-p 00000000 00:00 0
7f0000003000-7f0000004000 r--p 00000000 08:01 789   /usr/lib/my libcuda dir/libcuda.so.1
";
        let maps: Vec<Mapping> = gpu_tools::linux::procfs::parse_maps(maps).collect();
        assert_eq!(
            find(&maps, "libcupti.so"),
            Some(PathBuf::from(
                "/opt/py/site-packages/nvidia/cu13/lib/libcupti.so.13"
            ))
        );
        assert_eq!(
            find(&maps, "libcuda.so"),
            Some(PathBuf::from("/usr/lib/my libcuda dir/libcuda.so.1"))
        );
        assert_eq!(find(&maps, "libnothing"), None);
    }

    #[test]
    fn this_process_maps_libc() {
        let libc = mapped_library("libc.so").expect("libc is mapped");
        assert!(libc.exists(), "{}", libc.display());
    }
}
