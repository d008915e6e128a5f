//! Libraries already mapped into this process. Inside a program that loaded its own `libcupti.so` (PyTorch does,
//! from its wheel) or its own `libcuda.so.1`, the library must use those copies: a second copy of CUPTI or of the
//! driver in one process would not share their state.

use std::path::PathBuf;

/// The path of the first mapped file whose name starts with `prefix` (for example `libcupti.so`), from
/// `/proc/self/maps`.
pub fn mapped_library(prefix: &str) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    find(&maps, prefix)
}

fn find(maps: &str, prefix: &str) -> Option<PathBuf> {
    maps.lines().find_map(|line| {
        // address perms offset dev inode path: the path is the sixth field and may contain spaces.
        let path = line.splitn(6, char::is_whitespace).nth(5)?.trim_start();
        let name = path.rsplit('/').next()?;
        (path.starts_with('/') && name.starts_with(prefix)).then(|| PathBuf::from(path))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_mapped_library_by_name_prefix() {
        let maps = "\
7f0000000000-7f0000001000 r--p 00000000 08:01 123   /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000001000-7f0000002000 r-xp 00000000 08:01 456   /opt/py/site-packages/nvidia/cu13/lib/libcupti.so.13
7f0000002000-7f0000003000 rw-p 00000000 00:00 0
7f0000003000-7f0000004000 r--p 00000000 08:01 789   /usr/lib/my libcuda dir/libcuda.so.1
";
        assert_eq!(
            find(maps, "libcupti.so"),
            Some(PathBuf::from(
                "/opt/py/site-packages/nvidia/cu13/lib/libcupti.so.13"
            ))
        );
        assert_eq!(
            find(maps, "libcuda.so"),
            Some(PathBuf::from("/usr/lib/my libcuda dir/libcuda.so.1"))
        );
        assert_eq!(find(maps, "libnothing"), None);
    }

    #[test]
    fn this_process_maps_libc() {
        let libc = mapped_library("libc.so").expect("libc is mapped");
        assert!(libc.exists(), "{}", libc.display());
    }
}
