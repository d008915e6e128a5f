//! Is an AMD GPU driver present? `rocprofiler_initialize` aborts the process when it is not, so the crate asks
//! before initialising: the KFD device node must exist and the KFD topology must list a GPU node (one with SIMD
//! units; CPU nodes have none).

use std::path::Path;

/// Checks for the AMD kernel driver (`/dev/kfd`) and a GPU in its topology
/// (`/sys/class/kfd/kfd/topology/nodes/*/properties` with `simd_count` above zero). `Err` says what is missing.
pub fn amd_gpu_driver_present() -> Result<(), String> {
    check(
        Path::new("/dev/kfd"),
        Path::new("/sys/class/kfd/kfd/topology/nodes"),
    )
}

pub(crate) fn check(kfd: &Path, nodes: &Path) -> Result<(), String> {
    if std::fs::metadata(kfd).is_err() {
        return Err(format!(
            "{} does not exist (amdgpu kernel driver not loaded)",
            kfd.display()
        ));
    }
    let entries = std::fs::read_dir(nodes)
        .map_err(|e| format!("cannot read the KFD topology {}: {e}", nodes.display()))?;
    for entry in entries.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path().join("properties")) else {
            continue;
        };
        let simds = text.lines().find_map(|l| {
            let mut parts = l.split_whitespace();
            (parts.next() == Some("simd_count")).then(|| parts.next()?.parse::<u64>().ok())?
        });
        if simds.is_some_and(|n| n > 0) {
            return Ok(());
        }
    }
    Err(format!("the KFD topology {} lists no GPU", nodes.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(root: &Path, name: &str, simds: u32) {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("properties"),
            format!("cpu_cores_count 8\nsimd_count {simds}\n"),
        )
        .unwrap();
    }

    #[test]
    fn needs_kfd_and_a_gpu_node() {
        let root = std::env::temp_dir().join(format!("gpu-tools-kfd-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let nodes = root.join("nodes");
        let kfd = root.join("kfd");
        std::fs::create_dir_all(&nodes).unwrap();
        assert!(check(&kfd, &nodes).unwrap_err().contains("does not exist"));
        std::fs::write(&kfd, b"").unwrap();
        node(&nodes, "0", 0);
        assert!(check(&kfd, &nodes).unwrap_err().contains("lists no GPU"));
        node(&nodes, "1", 304);
        assert_eq!(check(&kfd, &nodes), Ok(()));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
