//! Detecting an AMD GPU driver without touching rocprofiler or HSA: the amdgpu kernel driver exposes `/dev/kfd`
//! and a topology under `/sys/class/kfd/kfd/topology/nodes/`, where GPU nodes have a nonzero `simd_count`.
//! `rocprofiler_initialize` aborts the process when this is absent, so the crate checks it first.

use std::path::Path;

/// An AMD GPU seen in the kernel driver's topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmdGpu {
    /// Topology node number.
    pub node: u32,
    /// Node name (for example `gfx90a`), where the driver gives one.
    pub name: String,
    /// `gfx_target_version` (for example 90010 for gfx90a).
    pub gfx_target_version: u64,
    /// SIMD count (nonzero for GPUs).
    pub simd_count: u64,
}

impl std::fmt::Display for AmdGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "node {}: {} (gfx target {}, {} SIMDs)",
            self.node, self.name, self.gfx_target_version, self.simd_count
        )
    }
}

/// No usable AMD GPU driver on this machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no AMD GPU driver: {reason}")]
pub struct NoAmdDriver {
    /// What was missing.
    pub reason: String,
}

const KFD_DEVICE: &str = "/dev/kfd";
const TOPOLOGY: &str = "/sys/class/kfd/kfd/topology/nodes";

/// The AMD GPUs of this machine, or why there are none usable. Reads only `/dev/kfd` and sysfs.
pub fn amd_gpus() -> Result<Vec<AmdGpu>, NoAmdDriver> {
    amd_gpus_in(Path::new(KFD_DEVICE), Path::new(TOPOLOGY))
}

pub(crate) fn amd_gpus_in(device: &Path, topology: &Path) -> Result<Vec<AmdGpu>, NoAmdDriver> {
    let none = |reason: String| NoAmdDriver { reason };
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(device)
        .map_err(|e| none(format!("{}: {e}", device.display())))?;
    let entries =
        std::fs::read_dir(topology).map_err(|e| none(format!("{}: {e}", topology.display())))?;
    let mut gpus = Vec::new();
    for entry in entries.flatten() {
        let Some(node) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let path = entry.path().join("properties");
        // Only a node gone meanwhile is passed over: one that cannot be read (not text, no permission) may be a
        // GPU, and is an error.
        let props = match std::fs::read_to_string(&path) {
            Ok(props) => props,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(none(format!("{}: {e}", path.display()))),
        };
        // A value that is not a number is an error: read as absent, a GPU would pass for a CPU node (or its
        // target version for 0).
        let field = |key: &str| -> Result<Option<u64>, NoAmdDriver> {
            let Some(value) = props.lines().find_map(|l| {
                let mut it = l.split_whitespace();
                (it.next() == Some(key)).then(|| it.next())
            }) else {
                return Ok(None);
            };
            value
                .and_then(|v| v.parse::<u64>().ok())
                .map(Some)
                .ok_or_else(|| {
                    none(format!(
                        "{}: {key} {:?} is not a number",
                        path.display(),
                        value.unwrap_or_default()
                    ))
                })
        };
        let simd_count = field("simd_count")?.unwrap_or(0);
        if simd_count == 0 {
            continue; // a CPU node
        }
        let name = std::fs::read_to_string(entry.path().join("name"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        gpus.push(AmdGpu {
            node,
            name,
            gfx_target_version: field("gfx_target_version")?.unwrap_or(0),
            simd_count,
        });
    }
    gpus.sort_by_key(|g| g.node);
    if gpus.is_empty() {
        return Err(none(format!("{} lists no GPU node", topology.display())));
    }
    Ok(gpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_property_that_is_not_a_number_is_an_error_naming_its_file() {
        let dir = std::env::temp_dir().join(format!("gpu-tools-kfd-bad-{}", std::process::id()));
        let nodes = dir.join("nodes");
        let dev = dir.join("kfd");
        std::fs::create_dir_all(nodes.join("1")).unwrap();
        std::fs::write(&dev, b"").unwrap();
        for props in [
            "simd_count 44O\ngfx_target_version 90010\n",
            "simd_count 440\ngfx_target_version 9001O\n",
            "simd_count\ngfx_target_version 90010\n",
        ] {
            std::fs::write(nodes.join("1/properties"), props).unwrap();
            let got = amd_gpus_in(&dev, &nodes);
            let Err(err) = got else {
                panic!("{props:?} read as {got:?}");
            };
            assert!(
                err.reason
                    .starts_with(&nodes.join("1/properties").display().to_string()),
                "{props:?}: {err}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_properties_file_that_is_not_text_is_an_error_naming_it() {
        let dir = std::env::temp_dir().join(format!("gpu-tools-kfd-bytes-{}", std::process::id()));
        let nodes = dir.join("nodes");
        let dev = dir.join("kfd");
        std::fs::create_dir_all(nodes.join("1")).unwrap();
        std::fs::write(&dev, b"").unwrap();
        std::fs::write(
            nodes.join("1/properties"),
            b"simd_count 440\ngfx_target_version 90010\nname \xff\n",
        )
        .unwrap();
        let got = amd_gpus_in(&dev, &nodes);
        let Err(err) = got else {
            panic!("read as {got:?}");
        };
        assert!(
            err.reason
                .starts_with(&nodes.join("1/properties").display().to_string()),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn no_device_file_is_no_driver() {
        let err =
            amd_gpus_in(Path::new("/nonexistent/kfd"), Path::new("/nonexistent")).unwrap_err();
        assert!(err.reason.starts_with("/nonexistent/kfd: "), "{err}");
    }

    #[test]
    fn reads_gpu_nodes_and_skips_cpu_nodes() {
        let dir = std::env::temp_dir().join(format!("gpu-tools-kfd-{}", std::process::id()));
        let nodes = dir.join("nodes");
        for (n, simd, name) in [(0, 0, ""), (1, 440, "gfx90a"), (2, 304, "gfx942")] {
            let d = nodes.join(n.to_string());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join("properties"),
                format!("cpu_cores_count 0\nsimd_count {simd}\ngfx_target_version 90010\n"),
            )
            .unwrap();
            std::fs::write(d.join("name"), format!("{name}\n")).unwrap();
        }
        // Any readable and writable file stands in for /dev/kfd.
        let dev = dir.join("kfd");
        std::fs::write(&dev, b"").unwrap();
        let gpus = amd_gpus_in(&dev, &nodes).unwrap();
        assert_eq!(
            gpus.iter()
                .map(|g| (g.node, g.name.as_str(), g.simd_count))
                .collect::<Vec<_>>(),
            [(1, "gfx90a", 440), (2, "gfx942", 304)]
        );
        std::fs::remove_dir_all(nodes.join("1")).unwrap();
        std::fs::remove_dir_all(nodes.join("2")).unwrap();
        assert!(
            amd_gpus_in(&dev, &nodes)
                .unwrap_err()
                .reason
                .contains("lists no GPU node")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
