//! Device memory seen from outside a process, for the hardware tests: what each GPU has in use and what one
//! process holds on it, as `nvidia-smi` (which comes with the driver) reports it. An observer apart from the code
//! under test: `gpu-tools freeze` reads the same figures through NVML in the CLI.

use std::process::Command;

/// What the driver lists for one process on one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessMemory {
    /// Not among the GPU's compute processes.
    Absent,
    /// Listed, holding this many bytes.
    Used(u64),
    /// Listed, but the driver cannot tell how much it holds.
    Unknown,
}

/// One GPU's memory at one moment.
#[derive(Debug, Clone)]
pub struct DeviceMemory {
    /// nvidia-smi's index (NVML's).
    pub index: u32,
    /// `GPU-...`.
    pub uuid: String,
    pub name: String,
    pub used: u64,
    pub total: u64,
    /// The process asked about.
    pub process: ProcessMemory,
}

/// The `nvidia-smi` of this machine.
pub struct GpuMemory {
    program: String,
}

const MIB: u64 = 1 << 20;

impl GpuMemory {
    /// Checks that `nvidia-smi` runs (`$NVIDIA_SMI`, else `nvidia-smi` on the PATH).
    pub fn open() -> Result<Self, String> {
        let program = std::env::var("NVIDIA_SMI").unwrap_or_else(|_| "nvidia-smi".into());
        let me = GpuMemory { program };
        me.query(&["-L"])?;
        Ok(me)
    }

    fn query(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(&self.program)
            .args(args)
            .output()
            .map_err(|e| format!("{} cannot be run: {e}", self.program))?;
        if !out.status.success() {
            return Err(format!(
                "{} {}: {}: {}",
                self.program,
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        String::from_utf8(out.stdout).map_err(|e| format!("{}: {e}", self.program))
    }

    /// Every GPU's memory, and what `pid` holds on each (to the MiB: nvidia-smi's unit).
    pub fn snapshot(&self, pid: u32) -> Result<Vec<DeviceMemory>, String> {
        let gpus = self.query(&[
            "--query-gpu=index,uuid,name,memory.used,memory.total",
            "--format=csv,noheader,nounits",
        ])?;
        let apps = self.query(&[
            "--query-compute-apps=pid,gpu_uuid,used_memory",
            "--format=csv,noheader,nounits",
        ])?;
        let apps: Vec<Vec<&str>> = apps.lines().map(fields).collect();
        gpus.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|line| {
                let f = fields(line);
                let [index, uuid, name, used, total] = f[..] else {
                    return Err(format!("nvidia-smi: unexpected line {line:?}"));
                };
                let process = apps
                    .iter()
                    .find(|a| a.len() == 3 && a[0] == pid.to_string() && a[1] == uuid)
                    .map_or(ProcessMemory::Absent, |a| {
                        a[2].parse::<u64>()
                            .map_or(ProcessMemory::Unknown, |m| ProcessMemory::Used(m * MIB))
                    });
                Ok(DeviceMemory {
                    index: number(index, line)? as u32,
                    uuid: uuid.to_string(),
                    name: name.to_string(),
                    used: number(used, line)? * MIB,
                    total: number(total, line)? * MIB,
                    process,
                })
            })
            .collect()
    }
}

fn fields(line: &str) -> Vec<&str> {
    line.split(',').map(str::trim).collect()
}

fn number(field: &str, line: &str) -> Result<u64, String> {
    field
        .parse()
        .map_err(|_| format!("nvidia-smi: {field:?} is not a number in {line:?}"))
}

/// Bytes as MiB, for printing.
pub fn mib(bytes: u64) -> u64 {
    bytes >> 20
}
