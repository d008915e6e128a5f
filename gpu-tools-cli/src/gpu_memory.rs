//! Device memory seen from outside a process, through NVML: what each GPU has in use and what one process holds
//! on it, for `freeze`.

use nvml_wrapper::Nvml;
use nvml_wrapper::enums::device::UsedGpuMemory;

/// What NVML lists for one process on one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessMemory {
    /// Not among the GPU's compute processes.
    Absent,
    /// Listed, holding this many bytes.
    Used(u64),
    /// Listed, but NVML cannot tell how much it holds.
    Unknown,
}

/// One GPU's memory at one moment.
#[derive(Debug, Clone)]
pub struct DeviceMemory {
    /// NVML's index.
    pub index: u32,
    /// `GPU-...`, as `GpuUuid`'s `Display` writes it.
    pub uuid: String,
    pub name: String,
    pub used: u64,
    /// The process asked about.
    pub process: ProcessMemory,
}

/// An initialised NVML.
pub struct GpuMemory {
    nvml: Nvml,
}

impl GpuMemory {
    /// Loads `libnvidia-ml.so.1` through the system loader, or else from the folder the CUDA driver was loaded
    /// from (drivers installed outside the loader's path, e.g. `/usr/local/nvidia/lib64`).
    pub fn open() -> Result<Self, String> {
        let first = match Nvml::init() {
            Ok(nvml) => return Ok(GpuMemory { nvml }),
            Err(e) => e,
        };
        let beside_driver = gpu_tools::cuda::Driver::load()
            .ok()
            .and_then(|d| d.path())
            .and_then(|p| p.parent())
            .map(|dir| dir.join("libnvidia-ml.so.1"));
        if let Some(path) = beside_driver {
            if let Ok(nvml) = Nvml::builder().lib_path(path.as_os_str()).init() {
                return Ok(GpuMemory { nvml });
            }
        }
        Err(format!("NVML: {first}"))
    }

    /// Every GPU's memory, and what `pid` holds on each.
    pub fn snapshot(&self, pid: u32) -> Result<Vec<DeviceMemory>, String> {
        let n = self
            .nvml
            .device_count()
            .map_err(|e| format!("NVML device count: {e}"))?;
        (0..n)
            .map(|index| {
                let dev = self
                    .nvml
                    .device_by_index(index)
                    .map_err(|e| format!("NVML device {index}: {e}"))?;
                let mem = dev
                    .memory_info()
                    .map_err(|e| format!("NVML memory of device {index}: {e}"))?;
                let listed = dev
                    .running_compute_processes()
                    .map_err(|e| format!("NVML processes of device {index}: {e}"))?;
                let process =
                    listed
                        .iter()
                        .find(|p| p.pid == pid)
                        .map_or(ProcessMemory::Absent, |p| match p.used_gpu_memory {
                            UsedGpuMemory::Used(b) => ProcessMemory::Used(b),
                            UsedGpuMemory::Unavailable => ProcessMemory::Unknown,
                        });
                Ok(DeviceMemory {
                    index,
                    uuid: dev.uuid().unwrap_or_default(),
                    name: dev.name().unwrap_or_default(),
                    used: mem.used,
                    process,
                })
            })
            .collect()
    }
}

impl GpuMemory {
    /// The processes that hold a CUDA context on any GPU (NVML's compute processes), by the pids NVML reports
    /// (the host's, in a container with a pid namespace of its own).
    pub fn compute_processes(&self) -> Result<std::collections::HashSet<u32>, String> {
        let n = self
            .nvml
            .device_count()
            .map_err(|e| format!("NVML device count: {e}"))?;
        let mut out = std::collections::HashSet::new();
        for index in 0..n {
            let dev = self
                .nvml
                .device_by_index(index)
                .map_err(|e| format!("NVML device {index}: {e}"))?;
            let listed = dev
                .running_compute_processes()
                .map_err(|e| format!("NVML processes of device {index}: {e}"))?;
            out.extend(listed.iter().map(|p| p.pid));
        }
        Ok(out)
    }
}

impl GpuMemory {
    /// The UUIDs (`GPU-...`) of the GPUs on which one of `pids` is a compute process (holds a context).
    pub fn devices_of(&self, pids: &[u32]) -> Result<std::collections::HashSet<String>, String> {
        let n = self
            .nvml
            .device_count()
            .map_err(|e| format!("NVML device count: {e}"))?;
        let mut out = std::collections::HashSet::new();
        for index in 0..n {
            let dev = self
                .nvml
                .device_by_index(index)
                .map_err(|e| format!("NVML device {index}: {e}"))?;
            let listed = dev
                .running_compute_processes()
                .map_err(|e| format!("NVML processes of device {index}: {e}"))?;
            if listed.iter().any(|p| pids.contains(&p.pid)) {
                out.insert(
                    dev.uuid()
                        .map_err(|e| format!("NVML UUID of device {index}: {e}"))?,
                );
            }
        }
        Ok(out)
    }
}

/// Bytes as MiB, for printing.
pub fn mib(bytes: u64) -> u64 {
    bytes >> 20
}
