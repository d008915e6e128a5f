//! `gpu-tools coredump FILE...`: what CUDA core dumps say about the lanes that faulted.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use gpu_tools::cudbg::coredump::{CoreDump, Device, Grid, LaneView};
use serde_json::{Value, json};

use crate::demangle::readable as demangle;
use crate::failure::{Failure, Outcome};

/// Print what CUDA core dumps say about the lanes that faulted.
///
/// Like cuda-gdb's `target cudacore FILE` followed by `info cuda lanes`: the kernel, the PC (absolute and as an
/// offset in its function), the exception, and the block and thread indices of each faulting lane; the options add
/// the devices, kernels, warps and every lane. No NVIDIA library is needed. Make a dump with
/// `CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1 CUDA_COREDUMP_FILE=core.cudacore ./program`.
///
/// Several files are read one after the other; one that cannot be read is reported and the others are still
/// printed; the exit code is then 1. With `--json`, one file gives one JSON object, several a JSON array of them.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The core dumps (ELF files with OS/ABI ELFOSABI_CUDA).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Print every lane the dump holds, not only those with an exception.
    #[arg(long)]
    all_lanes: bool,
    /// Print the devices (like `info cuda devices`).
    #[arg(long)]
    devices: bool,
    /// Print the kernels (like `info cuda kernels`).
    #[arg(long)]
    kernels: bool,
    /// Print the warps (like `info cuda warps`).
    // The JSON has no warps: asked for with it, they would be left out without a word.
    #[arg(long, conflicts_with = "json")]
    warps: bool,
    /// Write JSON instead of text: devices, kernels, and the lanes selected.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Outcome {
    // Every file must at least be there and readable before any is printed.
    for file in &args.files {
        std::fs::File::open(file)
            .map_err(|e| Failure::error(format!("{}: {e}", file.display())))?;
    }
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let several = args.files.len() > 1;
    let mut failed = 0;
    let mut printed = 0;
    if args.json && several {
        out.write_all(b"[\n").map_err(Failure::stdout)?;
    }
    for file in &args.files {
        let dump = match CoreDump::open(file) {
            Ok(d) => d,
            Err(e) => {
                // What was printed so far is whole; the message goes between the files.
                out.flush().map_err(Failure::stdout)?;
                eprintln!("gpu-tools coredump: {}: {e}", file.display());
                failed += 1;
                continue;
            }
        };
        let written = if args.json {
            if printed > 0 {
                out.write_all(b",\n").map_err(Failure::stdout)?;
            }
            serde_json::to_writer_pretty(&mut out, &to_json(&dump, file, &args))
                .map_err(io::Error::from)
        } else {
            if printed > 0 {
                out.write_all(b"\n").map_err(Failure::stdout)?;
            }
            write_text(&mut out, &dump, file, &args)
        };
        written.map_err(Failure::stdout)?;
        printed += 1;
    }
    if args.json && (several || printed > 0) {
        out.write_all(if several { b"\n]\n" } else { b"\n" })
            .map_err(Failure::stdout)?;
    }
    out.flush().map_err(Failure::stdout)?;
    Ok(if failed > 0 { 1 } else { 0 })
}

fn kernel_name(grid: Option<&Grid>) -> String {
    grid.and_then(|g| g.kernel_name.as_deref())
        .map_or_else(|| "??".to_string(), demangle)
}

/// `function+0xoffset` for a device address, from the function symbols of the device's modules.
fn function_offset(device: &Device, pc: u64) -> String {
    match device.function_at(pc) {
        Some((_, f)) => format!("{}+{:#x}", demangle(&f.name), pc.wrapping_sub(f.value)),
        None => "??".to_string(),
    }
}

/// The grids of every device in one list; cuda-gdb numbers kernels in this order.
fn kernels(dump: &CoreDump) -> Vec<(&Device, &Grid)> {
    dump.devices()
        .iter()
        .flat_map(|d| d.grids.iter().map(move |g| (d, g)))
        .collect()
}

fn selected<'a>(dump: &'a CoreDump, args: &Args) -> Vec<LaneView<'a>> {
    if args.all_lanes {
        dump.lanes().collect()
    } else {
        dump.faulting_lanes().collect()
    }
}

/// Hex mask of the SMs holding blocks, one bit per SM, as cuda-gdb prints it (whole bytes, highest first).
fn sm_mask(device: &Device, grid: Option<u64>) -> String {
    // At most a bit per SM entry the file holds: the reader refuses a dump whose device claims more SMs.
    let bytes = device.sm_count.div_ceil(8).max(1) as usize;
    let mut mask = vec![0u8; bytes];
    for sm in &device.sms {
        let busy = sm
            .blocks
            .iter()
            .any(|b| grid.is_none_or(|g| b.grid_id == g));
        let byte = (sm.id / 8) as usize;
        if busy && byte < bytes {
            mask[bytes - 1 - byte] |= 1 << (sm.id % 8);
        }
    }
    let mut s = String::from("0x");
    for b in mask {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn write_text(o: &mut impl Write, dump: &CoreDump, file: &Path, args: &Args) -> io::Result<()> {
    write!(
        o,
        "CUDA core dump {}: ELF ABI {}",
        file.display(),
        dump.abi_version()
    )?;
    if let Some(m) = dump.metadata() {
        write!(
            o,
            ", driver {}.{}, CUDA {}.{}, written by {:?}, flags {:#x}",
            m.driver_version.0,
            m.driver_version.1,
            m.cuda_version.0,
            m.cuda_version.1,
            m.generator,
            m.flags.bits()
        )?;
    }
    o.write_all(b"\n")?;

    write_fault(o, dump)?;
    if args.devices {
        write_devices(o, dump)?;
    }
    if args.kernels {
        write_kernels(o, dump)?;
    }
    if args.warps {
        write_warps(o, dump)?;
    }
    write_lanes(o, dump, args)
}

/// The faulting lane (the first) where it stopped, as cuda-gdb says it; else the SMs' exceptions, if any.
fn write_fault(o: &mut impl Write, dump: &CoreDump) -> io::Result<()> {
    let faulting: Vec<LaneView<'_>> = dump.faulting_lanes().collect();
    match faulting.first() {
        Some(l) => {
            let grid = l.grid();
            writeln!(
                o,
                "[Faulting lane: kernel {}, grid {}, block {}, thread {}, device {}, sm {}, warp {}, lane {}]",
                kernel_name(grid),
                l.block.grid_id,
                l.block.block_idx,
                l.lane.thread_idx,
                l.device.index,
                l.sm.id,
                l.warp.id,
                l.lane.id
            )?;
            writeln!(o, "CUDA Exception: {}", l.lane.exception.description())?;
            if let Some(pc) = l.warp.error_pc.or(l.sm.error_pc) {
                writeln!(
                    o,
                    "The exception was triggered at PC {pc:#x}  {}",
                    function_offset(l.device, pc)
                )?;
            }
            let dims = grid.map_or_else(String::new, |g| {
                format!(" <<<{},{}>>>", g.grid_dim, g.block_dim)
            });
            writeln!(
                o,
                "#0  {:#018x} in {}{dims}",
                l.lane.pc,
                function_offset(l.device, l.lane.pc)
            )?;
        }
        None => {
            let sm_exceptions: Vec<String> = dump
                .devices()
                .iter()
                .flat_map(|d| {
                    d.sms.iter().filter_map(move |sm| {
                        sm.exception
                            .filter(|e| *e != gpu_tools::cudbg::Exception::None)
                            .map(|e| {
                                format!("device {} sm {}: {}", d.index, sm.id, e.description())
                            })
                    })
                })
                .collect();
            if sm_exceptions.is_empty() {
                o.write_all(b"No lane has an exception.\n")?;
            } else {
                writeln!(
                    o,
                    "No resident lane has an exception; SMs report: {}",
                    sm_exceptions.join("; ")
                )?;
            }
        }
    }

    Ok(())
}

/// The devices table (`--devices`).
fn write_devices(o: &mut impl Write, dump: &CoreDump) -> io::Result<()> {
    o.write_all(b"\n  Dev PCI Bus/Dev ID                  Name Description SM Type SMs Warps/SM Lanes/Warp Max Regs/Lane Active SMs Mask\n")?;
    for d in dump.devices() {
        writeln!(
            o,
            "  {:>3} {:>14} {:>21} {:>11} {:>7} {:>3} {:>8} {:>10} {:>13} {}",
            d.index,
            format!("{:02x}:{:02x}.0", d.pci_bus, d.pci_device),
            d.name,
            d.device_type,
            d.sm_type,
            d.sm_count,
            d.warps_per_sm,
            d.lanes_per_warp,
            d.registers_per_lane,
            sm_mask(d, None)
        )?;
    }
    Ok(())
}

/// The kernels table (`--kernels`).
fn write_kernels(o: &mut impl Write, dump: &CoreDump) -> io::Result<()> {
    o.write_all(
        b"\n  Kernel Dev     Grid Status       GridDim      BlockDim SMs Mask Invocation\n",
    )?;
    for (k, (d, g)) in kernels(dump).into_iter().enumerate() {
        writeln!(
            o,
            "  {k:>6} {:>3} {:>8} {:<8} {:>11} {:>13} {} {}",
            d.index,
            g.id,
            format!("{:?}", g.status),
            g.grid_dim.to_string(),
            g.block_dim.to_string(),
            sm_mask(d, Some(g.id)),
            kernel_name(Some(g))
        )?;
    }
    Ok(())
}

/// The warps of each SM with resident warps (`--warps`).
fn write_warps(o: &mut impl Write, dump: &CoreDump) -> io::Result<()> {
    o.write_all(b"\n  Wp Active Lanes Mask Divergent Lanes Mask          Active PC Kernel BlockIdx First Active ThreadIdx\n")?;
    for d in dump.devices() {
        for sm in &d.sms {
            if sm.blocks.iter().all(|b| b.warps.is_empty()) {
                continue;
            }
            writeln!(o, "Device {} SM {}", d.index, sm.id)?;
            for b in &sm.blocks {
                for w in &b.warps {
                    let first = w.lanes.iter().find(|l| w.is_active(l.id));
                    writeln!(
                        o,
                        "  {:>2}        {:#010x}           {:#010x} {:>18} {:>6} {:>8} {:>22}",
                        w.id,
                        w.active_lanes,
                        w.valid_lanes & !w.active_lanes,
                        first.map_or_else(|| "n/a".into(), |l| format!("{:#018x}", l.pc)),
                        kernels(dump)
                            .iter()
                            .position(|(kd, g)| kd.index == d.index && g.id == b.grid_id)
                            .map_or_else(|| "?".into(), |k| k.to_string()),
                        b.block_idx.to_string(),
                        first.map_or_else(|| "n/a".into(), |l| l.thread_idx.to_string())
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// The lanes selected (see `selected`), if any.
fn write_lanes(o: &mut impl Write, dump: &CoreDump, args: &Args) -> io::Result<()> {
    let lanes = selected(dump, args);
    if lanes.is_empty() {
        return Ok(());
    }
    o.write_all(b"\n  Dev  SM Wp Ln State                  PC Function+Offset                    BlockIdx ThreadIdx Exception\n")?;
    for l in lanes {
        writeln!(
            o,
            "  {:>3} {:>3} {:>2} {:>2} {:<6} {:#018x} {:<34} {:>8} {:>9} {}",
            l.device.index,
            l.sm.id,
            l.warp.id,
            l.lane.id,
            if l.is_active() { "active" } else { "diverg" },
            l.lane.pc,
            function_offset(l.device, l.lane.pc),
            l.block.block_idx.to_string(),
            l.lane.thread_idx.to_string(),
            l.lane.exception.description()
        )?;
    }
    Ok(())
}

fn dim(d: gpu_tools::cudbg::Dim3) -> Value {
    json!([d.x, d.y, d.z])
}

fn to_json(dump: &CoreDump, file: &Path, args: &Args) -> Value {
    let devices: Vec<Value> = dump
        .devices()
        .iter()
        .map(|d| {
            json!({
                "index": d.index,
                "id": d.id,
                "name": d.name,
                "type": d.device_type,
                "sm_type": d.sm_type,
                "pci": format!("{:02x}:{:02x}.0", d.pci_bus, d.pci_device),
                "sms": d.sm_count,
                "warps_per_sm": d.warps_per_sm,
                "lanes_per_warp": d.lanes_per_warp,
                "registers_per_lane": d.registers_per_lane,
                "active_sms_mask": sm_mask(d, None),
            })
        })
        .collect();
    let kernels: Vec<Value> = kernels(dump)
        .into_iter()
        .enumerate()
        .map(|(k, (d, g))| {
            json!({
                "kernel": k,
                "device": d.index,
                "grid": g.id,
                "status": format!("{:?}", g.status),
                "grid_dim": dim(g.grid_dim),
                "block_dim": dim(g.block_dim),
                "function_entry": format!("{:#x}", g.function_entry),
                "name": g.kernel_name,
                "demangled": g.kernel_name.as_deref().map(demangle),
                "registers": g.registers,
            })
        })
        .collect();
    let lanes: Vec<Value> = selected(dump, args)
        .into_iter()
        .map(|l| {
            let function = l.function();
            json!({
                "device": l.device.index,
                "sm": l.sm.id,
                "warp": l.warp.id,
                "lane": l.lane.id,
                "active": l.is_active(),
                "grid": l.block.grid_id,
                "kernel": l.grid().and_then(|g| g.kernel_name.as_deref()).map(demangle),
                "pc": format!("{:#x}", l.lane.pc),
                "function": function.map(|f| demangle(&f.name)),
                "function_offset": format!("{:#x}", l.lane.function_offset),
                "error_pc": l.warp.error_pc.map(|pc| format!("{pc:#x}")),
                "block_idx": dim(l.block.block_idx),
                "thread_idx": dim(l.lane.thread_idx),
                "exception": l.lane.exception.description(),
            })
        })
        .collect();
    json!({
        "file": file.display().to_string(),
        "abi_version": dump.abi_version(),
        "metadata": dump.metadata().map(|m| json!({
            "generator": m.generator,
            "driver_version": format!("{}.{}", m.driver_version.0, m.driver_version.1),
            "cuda_version": format!("{}.{}", m.cuda_version.0, m.cuda_version.1),
            "flags": m.flags.bits(),
            "timestamp": m.timestamp,
        })),
        "devices": devices,
        "kernels": kernels,
        "lanes": lanes,
    })
}
