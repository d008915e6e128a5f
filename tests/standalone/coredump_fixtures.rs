//! The reader against real CUDA core dumps, checked against cuda-gdb's view of the same files.
//!
//! The fixtures live in `tests/fixtures/coredump/` (or the folder `GPU_TOOLS_COREDUMP_FIXTURES` names): dumps made
//! on a GPU host from this crate's `debuggee_kernels` by `make.sh` there, each `NAME.cudacore` with
//! `NAME.cuda-gdb.txt`, cuda-gdb's `info cuda devices/kernels/lanes/warps` of it. `MANIFEST` lists the files; a
//! missing `MANIFEST`, or a listed file that is missing, fails these tests.
#![cfg(feature = "coredump")]

mod cuda_gdb_view;
use gpu_tools_testing::coredump_writer as writer;

use std::path::{Path, PathBuf};

use cuda_gdb_view::View;
use gpu_tools::coredump::{CoreDump, Device, Dim3, Exception};

fn fixture_dir() -> PathBuf {
    std::env::var_os("GPU_TOOLS_COREDUMP_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/coredump"))
}

/// The files `MANIFEST` lists, after checking each is there. Panics without a `MANIFEST`: the repository's
/// fixtures have one.
fn manifest() -> Vec<PathBuf> {
    let dir = fixture_dir();
    let text = std::fs::read_to_string(dir.join("MANIFEST"))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.join("MANIFEST").display()));
    let files: Vec<PathBuf> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| dir.join(l))
        .collect();
    assert!(!files.is_empty(), "MANIFEST lists nothing");
    for f in &files {
        let len = std::fs::metadata(f)
            .unwrap_or_else(|e| panic!("{} is listed in MANIFEST: {e}", f.display()))
            .len();
        assert!(len > 0, "{} is empty", f.display());
    }
    files
}

/// The dumps of the manifest with cuda-gdb's view of each.
fn fixtures() -> Vec<(PathBuf, CoreDump, View)> {
    let files = manifest();
    files
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "cudacore"))
        .map(|p| {
            let view_path = p.with_extension("cuda-gdb.txt");
            assert!(
                files.contains(&view_path),
                "MANIFEST lists {} without {}",
                p.display(),
                view_path.display()
            );
            let dump = CoreDump::open(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let text = std::fs::read_to_string(&view_path).unwrap();
            (p.clone(), dump, cuda_gdb_view::parse(&text))
        })
        .collect()
}

fn name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

fn demangle(s: &str) -> String {
    cpp_demangle::Symbol::new(s)
        .ok()
        .and_then(|s| s.demangle().ok())
        .unwrap_or_else(|| s.to_string())
}

/// The part of a function signature before its parameter list (`misaligned` of `misaligned(int*)`).
fn base_name(s: &str) -> &str {
    s.split('(').next().unwrap_or(s).trim()
}

/// The active-SMs mask as cuda-gdb prints it: one bit per SM holding a block (of `grid`, if given), whole bytes.
fn sm_mask(d: &Device, grid: Option<u64>) -> String {
    let bytes = d.sm_count.div_ceil(8).max(1) as usize;
    let mut mask = vec![0u8; bytes];
    for sm in &d.sms {
        if sm
            .blocks
            .iter()
            .any(|b| grid.is_none_or(|g| b.grid_id == g))
        {
            mask[bytes - 1 - (sm.id / 8) as usize] |= 1 << (sm.id % 8);
        }
    }
    format!(
        "0x{}",
        mask.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

/// Every difference between the reader's view of `dump` and cuda-gdb's `view`; the second value counts checks.
fn differences(dump: &CoreDump, view: &View) -> (Vec<String>, usize) {
    let mut diffs = Vec::new();
    let mut checks = 0;
    let mut check = |ok: bool, what: String| {
        checks += 1;
        if !ok {
            diffs.push(what);
        }
    };
    let lane_at = |dev: u32, sm: u32, warp: u32, lane: u32| {
        dump.lanes().find(|l| {
            l.device.index == dev && l.sm.id == sm && l.warp.id == warp && l.lane.id == lane
        })
    };
    match &view.focus {
        None => check(false, "cuda-gdb set no focus".into()),
        Some(f) => match lane_at(f.device, f.sm, f.warp, f.lane) {
            None => check(
                false,
                format!("the reader has no lane at cuda-gdb's focus {f:?}"),
            ),
            Some(l) => {
                check(
                    l.block.block_idx == f.block,
                    format!("focus block {} vs {}", l.block.block_idx, f.block),
                );
                check(
                    l.lane.thread_idx == f.thread,
                    format!("focus thread {} vs {}", l.lane.thread_idx, f.thread),
                );
                check(
                    l.block.grid_id == f.grid,
                    format!("focus grid {} vs {}", l.block.grid_id, f.grid),
                );
                if let Some(e) = &view.exception {
                    check(
                        l.lane.exception.description() == e,
                        format!("focus exception {:?} vs {e}", l.lane.exception),
                    );
                }
                if let Some((pc, func)) = &view.error_pc {
                    let ours = l.warp.error_pc.or(l.sm.error_pc);
                    check(ours == Some(*pc), format!("error PC {ours:x?} vs {pc:#x}"));
                    let f = l.device.function_at(*pc).map(|(_, f)| demangle(&f.name));
                    check(
                        f.as_deref() == Some(func.as_str()),
                        format!("error PC function {f:?} vs {func}"),
                    );
                }
                if let Some((pc, func)) = &view.frame0 {
                    check(
                        l.lane.pc == *pc,
                        format!("frame 0 PC {:#x} vs {pc:#x}", l.lane.pc),
                    );
                    let f = l.function().map(|f| demangle(&f.name));
                    check(
                        f.as_deref() == Some(func.as_str()),
                        format!("frame 0 function {f:?} vs {func}"),
                    );
                    let from_symbol = l.function().map(|f| l.lane.pc - f.value);
                    check(
                        from_symbol == Some(l.lane.function_offset),
                        format!(
                            "PC offset from the symbol {from_symbol:x?} vs the dump's {:#x}",
                            l.lane.function_offset
                        ),
                    );
                }
            }
        },
    }
    for row in &view.devices {
        match dump.devices().iter().find(|d| d.index == row.device) {
            None => check(false, format!("no device {}", row.device)),
            Some(d) => {
                check(
                    d.name == row.name,
                    format!("device name {:?} vs {:?}", d.name, row.name),
                );
                check(
                    d.device_type == row.description,
                    format!("device type {} vs {}", d.device_type, row.description),
                );
                check(
                    d.sm_type == row.sm_type,
                    format!("SM type {} vs {}", d.sm_type, row.sm_type),
                );
                check(
                    (
                        d.sm_count,
                        d.warps_per_sm,
                        d.lanes_per_warp,
                        d.registers_per_lane,
                    ) == (row.sms, row.warps_per_sm, row.lanes_per_warp, row.max_regs),
                    format!("device counts {d:?} vs {row:?}"),
                );
                check(
                    format!("{:02x}:{:02x}.0", d.pci_bus, d.pci_device) == row.pci,
                    format!("PCI {:x}:{:x} vs {}", d.pci_bus, d.pci_device, row.pci),
                );
                let mask = sm_mask(d, None);
                check(
                    mask == row.active_sms_mask,
                    format!("active SMs {mask} vs {}", row.active_sms_mask),
                );
            }
        }
    }
    for row in &view.kernels {
        let Some(d) = dump.devices().iter().find(|d| d.index == row.device) else {
            check(
                false,
                format!("kernel row on missing device {}", row.device),
            );
            continue;
        };
        match d.grid(row.grid) {
            None => check(
                false,
                format!("no grid {} on device {}", row.grid, row.device),
            ),
            Some(g) => {
                check(
                    format!("{:?}", g.status) == row.status,
                    format!("grid status {:?} vs {}", g.status, row.status),
                );
                check(
                    g.grid_dim == row.grid_dim,
                    format!("grid dim {} vs {}", g.grid_dim, row.grid_dim),
                );
                check(
                    g.block_dim == row.block_dim,
                    format!("block dim {} vs {}", g.block_dim, row.block_dim),
                );
                let ours = g.kernel_name.as_deref().map(demangle).unwrap_or_default();
                check(
                    base_name(&ours) == base_name(&row.invocation),
                    format!("kernel {ours} vs invocation {}", row.invocation),
                );
                let mask = sm_mask(d, Some(g.id));
                check(
                    mask == row.sms_mask,
                    format!("grid SMs {mask} vs {}", row.sms_mask),
                );
            }
        }
    }
    for row in &view.lanes {
        match lane_at(row.device, row.sm, row.warp, row.lane) {
            None => check(false, format!("no lane for {row:?}")),
            Some(l) => {
                check(
                    l.lane.pc == row.pc,
                    format!("lane PC {:#x} vs {row:?}", l.lane.pc),
                );
                check(
                    l.lane.thread_idx == row.thread,
                    format!("thread {} vs {row:?}", l.lane.thread_idx),
                );
                let expected = match l.lane.exception {
                    Exception::None => row.exception.is_empty() || row.exception == "None",
                    e => e.description() == row.exception,
                };
                check(
                    expected,
                    format!("exception {:?} vs {row:?}", l.lane.exception),
                );
                check(
                    l.is_active() == (row.state == "active"),
                    format!("state active={} vs {}", l.is_active(), row.state),
                );
            }
        }
    }
    for row in &view.warps {
        let warp = dump
            .devices()
            .iter()
            .filter(|d| d.index == row.device)
            .find_map(|d| {
                d.sms.iter().filter(|s| s.id == row.sm).find_map(|s| {
                    s.blocks
                        .iter()
                        .find_map(|b| b.warps.iter().find(|w| w.id == row.warp).map(|w| (b, w)))
                })
            });
        match warp {
            None => check(false, format!("no warp for {row:?}")),
            Some((b, w)) => {
                check(
                    w.active_lanes == row.active_mask,
                    format!("active {:#x} vs {row:?}", w.active_lanes),
                );
                check(
                    w.valid_lanes & !w.active_lanes == row.divergent_mask,
                    format!(
                        "divergent {:#x} vs {row:?}",
                        w.valid_lanes & !w.active_lanes
                    ),
                );
                check(
                    b.block_idx == row.block,
                    format!("block {} vs {row:?}", b.block_idx),
                );
                let first = w.lanes.iter().find(|l| w.is_active(l.id));
                check(
                    first.map(|l| l.pc) == Some(row.active_pc),
                    format!("active PC vs {row:?}"),
                );
                check(
                    first.map(|l| l.thread_idx) == Some(row.first_active_thread),
                    format!("first active thread vs {row:?}"),
                );
            }
        }
    }
    (diffs, checks)
}

#[test]
fn manifest_lists_files_that_are_there() {
    let files = manifest();
    let dumps = files
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "cudacore"))
        .count();
    assert!(dumps > 0, "MANIFEST lists no .cudacore");
    // Every dump in the folder is listed.
    for e in std::fs::read_dir(fixture_dir()).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "cudacore") {
            assert!(
                files.contains(&e.path()),
                "{} is not in MANIFEST",
                e.path().display()
            );
        }
    }
}

#[test]
fn every_fixture_reads_as_cuda_gdb_saw_it() {
    for (path, dump, view) in fixtures() {
        let (diffs, checks) = differences(&dump, &view);
        println!(
            "{}: {} checks against cuda-gdb ({} lane rows, {} warp rows, {} kernels, {} devices), {} differences",
            name(&path),
            checks,
            view.lanes.len(),
            view.warps.len(),
            view.kernels.len(),
            view.devices.len(),
            diffs.len()
        );
        assert!(
            !view.lanes.is_empty(),
            "{}: cuda-gdb's view has no lane rows",
            name(&path)
        );
        assert!(
            !view.devices.is_empty() && !view.kernels.is_empty(),
            "{}: view incomplete",
            name(&path)
        );
        assert!(diffs.is_empty(), "{}: {diffs:#?}", name(&path));
    }
}

fn dim(x: u32, y: u32, z: u32) -> Dim3 {
    Dim3 { x, y, z }
}

/// What `debuggee_kernels fault-at` writes for thread `t` of block `b`.
fn fault_at_value(b: u32, t: u32) -> u32 {
    0x5000 + 0x100 * b + t
}

#[test]
fn the_crates_kernels_fault_where_they_were_told() {
    for (path, dump, _) in fixtures() {
        let n = name(&path);
        let faults: Vec<_> = dump.faulting_lanes().collect();
        if n.starts_with("fault_at") {
            // make.sh runs `fault-at 2 37`: only thread 37 of block 2 (warp 1, lane 5) stores misaligned. The
            // exception is a warp exception: the driver reports it on every lane of that warp (threads 32 to 63,
            // as cuda-gdb shows them), all at the same PC.
            assert_eq!(faults.len(), 32, "{n}: {} faulting lanes", faults.len());
            let threads: std::collections::BTreeSet<u32> =
                faults.iter().map(|f| f.lane.thread_idx.x).collect();
            assert_eq!(threads, (32..64).collect(), "{n}");
            for f in &faults {
                assert_eq!(f.block.block_idx, dim(2, 0, 0), "{n}");
                assert_eq!(f.lane.exception, Exception::WarpMisalignedAddress, "{n}");
                assert_eq!(f.lane.thread_idx, dim(32 + f.lane.id, 0, 0), "{n}");
                assert_eq!(
                    f.lane.pc, faults[0].lane.pc,
                    "{n}: one faulting instruction"
                );
            }
            let Some(f) = faults.iter().find(|f| f.lane.thread_idx == dim(37, 0, 0)) else {
                panic!("{n}: thread 37 is not among the faulting lanes")
            };
            assert_eq!(f.lane.id, 5, "{n}");
            let g = f.grid().expect("grid");
            assert_eq!(g.kernel_name.as_deref(), Some("fault_at"), "{n}");
            assert_eq!(
                (g.grid_dim, g.block_dim),
                (dim(4, 1, 1), dim(64, 1, 1)),
                "{n}"
            );
            let blocks: std::collections::BTreeSet<u32> =
                dump.lanes().map(|l| l.block.block_idx.x).collect();
            println!(
                "{n}: fault at {:#x} (+{:#x}), blocks resident {blocks:?}",
                f.lane.pc, f.lane.function_offset
            );
            assert!(
                blocks.len() > 1,
                "{n}: only blocks {blocks:?} were resident"
            );
        } else if n.starts_with("fault") {
            // `fault`: one block of 32 threads, each storing to the same misaligned address.
            assert!(!faults.is_empty(), "{n}: no faulting lane");
            for f in &faults {
                assert_eq!(f.lane.exception, Exception::WarpMisalignedAddress, "{n}");
                assert_eq!(f.block.block_idx, dim(0, 0, 0), "{n}");
                assert_eq!(
                    f.grid().and_then(|g| g.kernel_name.as_deref()),
                    Some("fault"),
                    "{n}"
                );
                // One warp of 32 threads: lane n runs thread n.
                assert_eq!(f.lane.thread_idx, dim(f.lane.id, 0, 0), "{n}");
            }
            println!("{n}: {} faulting lanes", faults.len());
        }
    }
}

#[test]
fn memory_fixture_holds_the_shared_and_local_memory_the_kernel_wrote() {
    let mut checked = 0;
    for (path, dump, _) in fixtures() {
        let n = name(&path);
        if !n.starts_with("fault_at_memory") {
            continue;
        }
        checked += 1;
        let words = |b: &[u8]| -> Vec<u32> {
            b.chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
        let find =
            |hay: &[u32], needle: &[u32]| hay.windows(needle.len()).position(|w| w == needle);
        let mut blocks = 0;
        for d in dump.devices() {
            for sm in &d.sms {
                for b in &sm.blocks {
                    let shared = b
                        .shared_memory
                        .as_ref()
                        .unwrap_or_else(|| panic!("{n}: no shared memory"));
                    let expect: Vec<u32> =
                        (0..64).map(|t| fault_at_value(b.block_idx.x, t)).collect();
                    let at = find(&words(shared.bytes()), &expect);
                    assert!(
                        at.is_some(),
                        "{n}: block {} shared memory lacks its tile",
                        b.block_idx
                    );
                    blocks += 1;
                }
            }
        }
        let mut lanes = 0;
        for l in dump.lanes() {
            let local = l
                .lane
                .local_memory
                .as_ref()
                .unwrap_or_else(|| panic!("{n}: no local memory"));
            let v = fault_at_value(l.block.block_idx.x, l.lane.thread_idx.x);
            let expect: Vec<u32> = (0..16).map(|i| v + i).collect();
            assert!(
                find(&words(local.bytes()), &expect).is_some(),
                "{n}: lane {} of block {} local memory ({} bytes at {:#x}) lacks its array",
                l.lane.thread_idx,
                l.block.block_idx,
                local.len(),
                local.address()
            );
            lanes += 1;
        }
        println!("{n}: shared tiles of {blocks} blocks and local arrays of {lanes} lanes found");
        assert!(blocks > 1 && lanes > 32);
    }
    assert!(checked > 0, "MANIFEST lists no fault_at_memory dump");
}

/// cuda-gdb's view of a dump of a small C++ program (H100, driver 580.159.04), as it printed it.
const CUDA_GDB_SAMPLE: &str = "\
Opening GPU coredump: /tmp/core.cuda
[Current focus set to CUDA kernel 0, grid 1, block (1,0,0), thread (5,0,0), device 0, sm 126, warp 0, lane 5]
CUDA Exception: Warp Misaligned Address
The exception was triggered at PC 0x7f24c37ac290  misaligned(int*)
#0  0x00007f24c37ac2a0 in misaligned(int*)<<<(2,1,1),(32,1,1)>>> ()
  Dev PCI Bus/Dev ID                  Name Description SM Type SMs Warps/SM Lanes/Warp Max Regs/Lane                      Active SMs Mask
*   0        00:06.0 NVIDIA H100 80GB HBM3   GH100GL-A   sm_90 132       64         32           255 0x0040000000000000000000000000000000
  Kernel Parent Dev Grid Status                             SMs Mask GridDim BlockDim Invocation
*      0      -   0    1 Active 0x0040000000000000000000000000000000 (2,1,1) (32,1,1) misaligned()
  Ln  State         PC         ThreadIdx        Exception
Device 0 SM 126 Warp 0
*  5 active 0x00007f24c37ac2a0   (5,0,0) Warp Misaligned Address
  Wp Active Lanes Mask Divergent Lanes Mask          Active PC Kernel BlockIdx First Active ThreadIdx
Device 0 SM 126
   0        0x00000020           0x00000000 0x00007f24c37ac2a0      0  (1,0,0)                (5,0,0)
";

#[test]
fn cuda_gdb_text_is_parsed() {
    let v = cuda_gdb_view::parse(CUDA_GDB_SAMPLE);
    let f = v.focus.expect("focus");
    assert_eq!(
        (f.kernel, f.grid, f.device, f.sm, f.warp, f.lane),
        (0, 1, 0, 126, 0, 5)
    );
    assert_eq!((f.block, f.thread), (dim(1, 0, 0), dim(5, 0, 0)));
    assert_eq!(v.exception.as_deref(), Some("Warp Misaligned Address"));
    assert_eq!(
        v.error_pc,
        Some((0x7f24c37ac290, "misaligned(int*)".to_string()))
    );
    assert_eq!(
        v.frame0,
        Some((0x7f24c37ac2a0, "misaligned(int*)".to_string()))
    );
    let [d] = v.devices.as_slice() else {
        panic!("{:?}", v.devices)
    };
    assert_eq!(
        (d.name.as_str(), d.description.as_str(), d.sm_type.as_str()),
        ("NVIDIA H100 80GB HBM3", "GH100GL-A", "sm_90")
    );
    assert_eq!(
        (d.sms, d.warps_per_sm, d.lanes_per_warp, d.max_regs),
        (132, 64, 32, 255)
    );
    assert_eq!(d.pci, "00:06.0");
    let [k] = v.kernels.as_slice() else {
        panic!("{:?}", v.kernels)
    };
    assert_eq!(
        (k.grid, k.status.as_str(), k.grid_dim, k.invocation.as_str()),
        (1, "Active", dim(2, 1, 1), "misaligned()")
    );
    let [l] = v.lanes.as_slice() else {
        panic!("{:?}", v.lanes)
    };
    assert_eq!(
        (l.device, l.sm, l.warp, l.lane, l.pc),
        (0, 126, 0, 5, 0x7f24c37ac2a0)
    );
    assert_eq!(
        (l.state.as_str(), l.exception.as_str()),
        ("active", "Warp Misaligned Address")
    );
    let [w] = v.warps.as_slice() else {
        panic!("{:?}", v.warps)
    };
    assert_eq!(
        (w.sm, w.warp, w.active_mask, w.divergent_mask, w.block),
        (126, 0, 0x20, 0, dim(1, 0, 0))
    );
}

/// cuda-gdb's view as it would print the writer's sample dump.
fn view_of_the_sample() -> String {
    use writer::expect::*;
    format!(
        "[Current focus set to CUDA kernel 0, grid {GRID}, block (1,0,0), thread (37,0,0), device 0, sm {FAULT_SM}, warp {FAULT_WARP}, lane {FAULT_LANE}]
CUDA Exception: Warp Misaligned Address
The exception was triggered at PC {ERROR_PC:#x}  fault(int*)
#0  {FAULT_PC:#018x} in fault(int*)<<<(2,1,1),(64,1,1)>>> ()
  Dev PCI Bus/Dev ID                  Name Description SM Type SMs Warps/SM Lanes/Warp Max Regs/Lane Active SMs Mask
*   0        17:00.0 {DEVICE_NAME} {DEVICE_TYPE} {SM_TYPE} {SMS} 64 32 255 0x24
  Kernel Parent Dev Grid Status SMs Mask GridDim BlockDim Invocation
*      0      -   0    {GRID} Active 0x24 (2,1,1) (64,1,1) fault()
  Ln  State         PC         ThreadIdx        Exception
Device 0 SM {FAULT_SM} Warp {FAULT_WARP}
*  {FAULT_LANE} active {FAULT_PC:#018x}   (37,0,0) Warp Misaligned Address
Device 0 SM {FAULT_SM} Warp 2
   3 active {:#018x}   (3,0,0) None
  20 divergent {HELPER_PC:#018x}   (20,0,0) None
  Wp Active Lanes Mask Divergent Lanes Mask          Active PC Kernel BlockIdx First Active ThreadIdx
Device 0 SM {FAULT_SM}
   2        0x0000ffff           0xffff0000 {:#018x}      0  (1,0,0)                (0,0,0)
   {FAULT_WARP}        0x00000020           0x00000000 {FAULT_PC:#018x}      0  (1,0,0)                (37,0,0)
",
        KERNEL_ENTRY + 0x60,
        KERNEL_ENTRY + 0x60
    )
}

#[test]
fn the_comparison_finds_every_kind_of_difference() {
    let dump = CoreDump::from_bytes(writer::sample(writer::Layout::Current)).unwrap();
    let text = view_of_the_sample();
    let (diffs, checks) = differences(&dump, &cuda_gdb_view::parse(&text));
    assert!(diffs.is_empty(), "{diffs:#?}");
    assert!(checks >= 40, "{checks} checks");
    // Each change to cuda-gdb's text is one difference.
    for (from, to) in [
        ("thread (37,0,0), device", "thread (36,0,0), device"),
        (
            "CUDA Exception: Warp Misaligned Address",
            "CUDA Exception: Warp Illegal Address",
        ),
        ("  fault(int*)\n#0", "  other(int*)\n#0"),
        ("Test GPU 80GB", "Test GPU 40GB"),
        (" 64 32 255 ", " 64 32 254 "),
        ("Active 0x24", "Active 0x20"),
        ("Active 0x24 (2,1,1)", "Terminated 0x24 (2,1,1)"),
        ("(64,1,1) fault()", "(64,1,1) misaligned()"),
        ("   (20,0,0) None", "   (21,0,0) None"),
        ("  20 divergent", "  20 active"),
        ("(3,0,0) None", "(3,0,0) Warp Assert"),
        (
            "0x0000ffff           0xffff0000",
            "0x0000ffff           0x7fff0000",
        ),
    ] {
        assert!(text.contains(from), "{from}");
        let changed = text.replacen(from, to, 1);
        let (diffs, _) = differences(&dump, &cuda_gdb_view::parse(&changed));
        assert_eq!(diffs.len(), 1, "{from} -> {to}: {diffs:#?}");
    }
    // A lane cuda-gdb shows that the dump lacks.
    let extra = text.replacen(
        &format!("Device 0 SM {} Warp 2", writer::expect::FAULT_SM),
        &format!(
            "Device 0 SM {} Warp 9\n   1 active 0x10 (1,0,0) None\nDevice 0 SM {} Warp 2",
            writer::expect::FAULT_SM,
            writer::expect::FAULT_SM
        ),
        1,
    );
    let (diffs, _) = differences(&dump, &cuda_gdb_view::parse(&extra));
    assert_eq!(diffs.len(), 1, "{diffs:#?}");
}
