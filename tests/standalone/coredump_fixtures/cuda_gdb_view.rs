//! Reads cuda-gdb's text view of a core dump (`target cudacore` followed by `info cuda devices`, `kernels`, `lanes`
//! and `warps`), so that tests can compare the reader with what cuda-gdb saw in the same file.

use gpu_tools::coredump::Dim3;

/// `[Current focus set to CUDA kernel K, grid G, block B, thread T, device D, sm S, warp W, lane L]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Focus {
    pub kernel: u32,
    pub grid: u64,
    pub block: Dim3,
    pub thread: Dim3,
    pub device: u32,
    pub sm: u32,
    pub warp: u32,
    pub lane: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRow {
    pub device: u32,
    pub pci: String,
    pub name: String,
    pub description: String,
    pub sm_type: String,
    pub sms: u32,
    pub warps_per_sm: u32,
    pub lanes_per_warp: u32,
    pub max_regs: u32,
    pub active_sms_mask: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRow {
    pub kernel: u32,
    pub device: u32,
    pub grid: u64,
    pub status: String,
    pub sms_mask: String,
    pub grid_dim: Dim3,
    pub block_dim: Dim3,
    pub invocation: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneRow {
    pub device: u32,
    pub sm: u32,
    pub warp: u32,
    pub lane: u32,
    pub state: String,
    pub pc: u64,
    pub thread: Dim3,
    pub exception: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarpRow {
    pub device: u32,
    pub sm: u32,
    pub warp: u32,
    pub active_mask: u32,
    pub divergent_mask: u32,
    pub active_pc: u64,
    pub kernel: u32,
    pub block: Dim3,
    pub first_active_thread: Dim3,
}

/// What cuda-gdb printed.
#[derive(Debug, Default, Clone)]
pub struct View {
    pub focus: Option<Focus>,
    /// `CUDA Exception: NAME`.
    pub exception: Option<String>,
    /// `The exception was triggered at PC 0x.. FUNCTION`.
    pub error_pc: Option<(u64, String)>,
    /// `#0  0x.. in FUNCTION<<<..>>> ()`.
    pub frame0: Option<(u64, String)>,
    pub devices: Vec<DeviceRow>,
    pub kernels: Vec<KernelRow>,
    pub lanes: Vec<LaneRow>,
    pub warps: Vec<WarpRow>,
}

pub fn dim3(s: &str) -> Option<Dim3> {
    let inner = s.strip_prefix('(')?.strip_suffix(')')?;
    let mut it = inner.split(',').map(|v| v.trim().parse::<u32>());
    let d = Dim3 {
        x: it.next()?.ok()?,
        y: it.next()?.ok()?,
        z: it.next()?.ok()?,
    };
    it.next().is_none().then_some(d)
}

pub fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

/// The value after `key ` in a comma-separated focus line, e.g. `block` in `block (1,0,0)`.
fn focus_field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split(", ")
        .find_map(|part| part.trim().strip_prefix(key)?.strip_prefix(' '))
}

fn parse_focus(line: &str) -> Option<Focus> {
    let body = line
        .trim()
        .strip_prefix("[Current focus set to CUDA ")?
        .strip_suffix(']')?;
    let num = |k: &str| focus_field(body, k)?.parse().ok();
    Some(Focus {
        kernel: num("kernel")?,
        grid: focus_field(body, "grid")?.parse().ok()?,
        block: dim3(focus_field(body, "block")?)?,
        thread: dim3(focus_field(body, "thread")?)?,
        device: num("device")?,
        sm: num("sm")?,
        warp: num("warp")?,
        lane: num("lane")?,
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Table {
    None,
    Devices,
    Kernels,
    Lanes,
    Warps,
}

/// Parses cuda-gdb's output; lines it does not recognise are skipped.
pub fn parse(text: &str) -> View {
    let mut v = View::default();
    let mut table = Table::None;
    // (device, sm, warp) of the current group header.
    let mut group: (u32, u32, u32) = (0, 0, 0);
    for raw in text.lines() {
        let line = raw.trim();
        if let Some(f) = parse_focus(line) {
            v.focus = Some(f);
            continue;
        }
        if let Some(name) = line.strip_prefix("CUDA Exception: ") {
            v.exception = Some(name.trim().to_string());
            continue;
        }
        if let Some(rest) = line.strip_prefix("The exception was triggered at PC ") {
            let mut it = rest.splitn(2, ' ');
            if let Some(pc) = it.next().and_then(hex) {
                v.error_pc = Some((pc, it.next().unwrap_or("").trim().to_string()));
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("#0  ") {
            let mut it = rest.splitn(3, ' ');
            if let (Some(pc), Some("in"), Some(func)) =
                (it.next().and_then(hex), it.next(), it.next())
            {
                let func = func.split("<<<").next().unwrap_or(func).trim();
                v.frame0 = Some((pc, func.to_string()));
            }
            continue;
        }
        if line.starts_with("Dev PCI Bus/Dev ID") {
            table = Table::Devices;
            continue;
        }
        if line.starts_with("Kernel Parent Dev Grid Status") {
            table = Table::Kernels;
            continue;
        }
        if line.starts_with("Ln") && line.contains("ThreadIdx") && line.contains("Exception") {
            table = Table::Lanes;
            continue;
        }
        if line.starts_with("Wp Active Lanes Mask") {
            table = Table::Warps;
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if let ["Device", d, "SM", s, rest @ ..] = words.as_slice() {
            let w = match rest {
                ["Warp", w] => w.parse().unwrap_or(0),
                _ => 0,
            };
            group = (d.parse().unwrap_or(0), s.parse().unwrap_or(0), w);
            continue;
        }
        let words: Vec<&str> = line.trim_start_matches('*').split_whitespace().collect();
        match table {
            Table::Devices => {
                if let Some(row) = device_row(&words) {
                    v.devices.push(row);
                }
            }
            Table::Kernels => {
                if let Some(row) = kernel_row(&words) {
                    v.kernels.push(row);
                }
            }
            Table::Lanes => {
                if let Some(row) = lane_row(&words, group) {
                    v.lanes.push(row);
                }
            }
            Table::Warps => {
                if let Some(row) = warp_row(&words, group) {
                    v.warps.push(row);
                }
            }
            Table::None => {}
        }
    }
    v
}

fn device_row(w: &[&str]) -> Option<DeviceRow> {
    // Dev, PCI, then the name (several words), then seven one-word columns.
    if w.len() < 10 {
        return None;
    }
    let n = w.len();
    Some(DeviceRow {
        device: w[0].parse().ok()?,
        pci: w[1].to_string(),
        name: w[2..n - 7].join(" "),
        description: w[n - 7].to_string(),
        sm_type: w[n - 6].to_string(),
        sms: w[n - 5].parse().ok()?,
        warps_per_sm: w[n - 4].parse().ok()?,
        lanes_per_warp: w[n - 3].parse().ok()?,
        max_regs: w[n - 2].parse().ok()?,
        active_sms_mask: w[n - 1].to_string(),
    })
}

fn kernel_row(w: &[&str]) -> Option<KernelRow> {
    if w.len() < 9 {
        return None;
    }
    Some(KernelRow {
        kernel: w[0].parse().ok()?,
        device: w[2].parse().ok()?,
        grid: w[3].parse().ok()?,
        status: w[4].to_string(),
        sms_mask: w[5].to_string(),
        grid_dim: dim3(w[6])?,
        block_dim: dim3(w[7])?,
        invocation: w[8..].join(" "),
    })
}

fn lane_row(w: &[&str], (device, sm, warp): (u32, u32, u32)) -> Option<LaneRow> {
    if w.len() < 4 {
        return None;
    }
    Some(LaneRow {
        device,
        sm,
        warp,
        lane: w[0].parse().ok()?,
        state: w[1].to_string(),
        pc: hex(w[2])?,
        thread: dim3(w[3])?,
        exception: w[4..].join(" "),
    })
}

fn warp_row(w: &[&str], (device, sm, _): (u32, u32, u32)) -> Option<WarpRow> {
    if w.len() != 7 {
        return None;
    }
    Some(WarpRow {
        device,
        sm,
        warp: w[0].parse().ok()?,
        active_mask: hex(w[1])? as u32,
        divergent_mask: hex(w[2])? as u32,
        active_pc: hex(w[3])?,
        kernel: w[4].parse().ok()?,
        block: dim3(w[5])?,
        first_active_thread: dim3(w[6])?,
    })
}
