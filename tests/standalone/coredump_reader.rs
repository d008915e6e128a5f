//! The core-dump reader against dumps written by `gpu_tools_testing::coredump_writer` in the documented layout: every
//! field lands where it belongs, older (shorter) entries read as absent fields, and every kind of bad file is a
//! typed error.
#![cfg(feature = "coredump")]

use gpu_tools_testing::coredump_writer as writer;

use gpu_tools::coredump::{
    CoreDump, CoreDumpError, Dim3, Exception, GenerationFlags, GridStatus, KernelOrigin, KernelType,
};
use writer::{Builder, Fields, Layout, expect::*};

fn dim(x: u32, y: u32, z: u32) -> Dim3 {
    Dim3 { x, y, z }
}

fn read(bytes: Vec<u8>) -> Result<CoreDump, CoreDumpError> {
    CoreDump::from_bytes(bytes)
}

#[test]
fn every_table_is_read_into_its_place() {
    let dump = read(writer::sample(Layout::Current)).expect("sample dump");
    assert_eq!(dump.abi_version(), 7);
    let meta = dump.metadata().expect("metadata");
    assert_eq!(meta.generator, "UD");
    assert_eq!(meta.driver_version, (580, 159));
    assert_eq!(meta.cuda_version, (13, 0));
    assert_eq!(
        meta.flags,
        GenerationFlags::SKIP_NONRELOCATED_ELF_IMAGES | GenerationFlags::SKIP_CONSTBANK_MEMORY
    );
    assert_eq!(meta.timestamp, 1_795_419_286);

    let [d] = dump.devices() else {
        panic!("one device: {:?}", dump.devices().len())
    };
    assert_eq!(
        (
            d.index,
            d.id,
            d.name.as_str(),
            d.device_type.as_str(),
            d.sm_type.as_str()
        ),
        (0, 0, DEVICE_NAME, DEVICE_TYPE, SM_TYPE)
    );
    assert_eq!(
        (
            d.sm_count,
            d.warps_per_sm,
            d.lanes_per_warp,
            d.registers_per_lane
        ),
        (SMS, 64, 32, 255)
    );
    assert_eq!((d.pci_bus, d.pci_device, d.sm_version), (0x17, 0, (9, 0)));
    assert_eq!((d.predicates_per_lane, d.instruction_size), (8, 16));
    assert!(d.status.is_ok());
    assert_eq!(d.uniform_registers_per_warp, Some(63));
    assert_eq!(d.uniform_predicates_per_warp, Some(8));
    assert_eq!(d.convergence_barriers_per_warp, Some(16));

    let [c] = d.contexts.as_slice() else {
        panic!("one context")
    };
    assert_eq!((c.id, c.host_tid, c.device_index), (CONTEXT, 0x251, 0));
    assert_eq!(c.global_window_base, 0x1000);
    assert_eq!(c.modules.len(), 2);
    let m = d.module(MODULE).expect("kernel module");
    assert!(
        m.relocated_image
            .as_ref()
            .unwrap()
            .bytes()
            .starts_with(b"\x7fELF")
    );
    assert!(m.unrelocated_image.is_some());
    assert!(d.module(OTHER_MODULE).unwrap().unrelocated_image.is_none());
    let names: Vec<_> = m.functions.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, [KERNEL, HELPER]);

    let g = d.grid(GRID).expect("grid 7");
    assert_eq!(g.kernel_name.as_deref(), Some(KERNEL));
    assert_eq!(
        (g.function_entry, g.module, g.context),
        (KERNEL_ENTRY, MODULE, CONTEXT)
    );
    assert_eq!((g.grid_dim, g.block_dim), (dim(2, 1, 1), dim(64, 1, 1)));
    assert_eq!(g.kernel_type, KernelType::Application);
    assert_eq!(g.origin, KernelOrigin::Cpu);
    assert_eq!(g.status, GridStatus::Active);
    assert_eq!(
        (g.registers, g.launch_blocking, g.host_tid),
        (16, true, 0x251)
    );
    assert_eq!(g.params_offset, 0x210);
    assert_eq!(g.cluster_dim, Some(dim(1, 1, 1)));
    assert_eq!(g.preferred_cluster_dim, Some(dim(2, 1, 1)));
    let params = g.params.as_ref().expect("parameters");
    assert_eq!(params.address(), 0x7f24_c228_0210);
    assert_eq!(params.bytes(), 0x7f24_b5e0_0000u64.to_le_bytes());
    let banks: Vec<_> = g.const_banks.iter().map(|b| (b.bank, b.size)).collect();
    assert_eq!(banks, [(0, 0x300), (1, 0x900)]);

    assert_eq!(d.sms.len(), SMS as usize);
    let sm = &d.sms[FAULT_SM as usize];
    assert_eq!(sm.id, FAULT_SM);
    assert_eq!(sm.exception, Some(Exception::WarpMisalignedAddress));
    assert_eq!(sm.error_pc, Some(ERROR_PC));
    assert_eq!(sm.exception_string.as_deref(), Some("misaligned store"));
    assert_eq!(d.sms[0].exception, Some(Exception::None));
    assert_eq!(d.sms[0].error_pc, None);
    assert_eq!(d.sms[0].exception_string, None);

    let [block] = sm.blocks.as_slice() else {
        panic!("one block on SM 5")
    };
    assert_eq!((block.grid_id, block.block_idx), (GRID, dim(1, 0, 0)));
    assert_eq!(block.cluster_idx, Some(dim(1, 0, 0)));
    let shared = block.shared_memory.as_ref().expect("shared memory");
    assert_eq!(shared.len(), 256);
    assert_eq!(
        shared.read(SHARED_BASE + 4 * 37, 4),
        Some(&(0x5125u32.to_le_bytes())[..])
    );
    assert_eq!(shared.read(SHARED_BASE + 254, 4), None, "past the end");

    let [w2, w3] = block.warps.as_slice() else {
        panic!("two warps")
    };
    assert_eq!((w2.id, w2.valid_lanes, w2.active_lanes), (2, !0, 0xffff));
    assert!(w2.is_active(3) && !w2.is_active(20) && w2.is_valid(20));
    assert_eq!(w2.error_pc, None);
    assert_eq!(w2.registers, Some(16));
    assert_eq!(w2.shared_memory_size, Some(0x400));
    assert_eq!(w2.uniform_registers.as_deref(), Some(&[2, 0xabcd][..]));
    assert_eq!(w2.uniform_predicates.as_deref(), Some(&[false, true][..]));
    assert_eq!(w2.convergence_barriers.as_ref().map(Vec::len), Some(16));
    assert_eq!(w2.lanes.len(), 32);
    assert_eq!(w2.lanes[20].call_depth, 1);
    let bt = w2.lanes[20].backtrace.as_ref().expect("call stack");
    assert_eq!((bt[0].level, bt[0].return_offset), (1, 0x70));
    assert_eq!(bt[0].return_address, KERNEL_ENTRY + 0x70);
    assert_eq!(w2.lanes[3].backtrace, None);

    assert_eq!((w3.id, w3.error_pc), (FAULT_WARP, Some(ERROR_PC)));
    let cbu = w3.cbu.expect("CBU masks");
    assert_eq!(
        (cbu.active, cbu.exited),
        (1 << FAULT_LANE, !(1 << FAULT_LANE))
    );
    let [lane] = w3.lanes.as_slice() else {
        panic!("one lane in warp 3")
    };
    assert_eq!(
        (lane.id, lane.pc, lane.function_offset),
        (FAULT_LANE, FAULT_PC, 0xa0)
    );
    assert_eq!(lane.thread_idx, dim(37, 0, 0));
    assert_eq!(lane.exception, Exception::WarpMisalignedAddress);
    assert_eq!(lane.cbu_thread_state, Some(1));
    assert_eq!(
        lane.registers.as_deref(),
        Some(&[1, 0x00ff_fdc0, 0xb5e0_0000, 0x7f24, 0, 7][..])
    );
    let preds = lane.predicates.as_ref().expect("predicates");
    assert_eq!(
        (preds.len(), preds[0], preds[1], preds[7]),
        (8, true, false, true)
    );
    assert_eq!(lane.backtrace.as_deref(), Some(&[][..]));
    let local = lane.local_memory.as_ref().expect("local memory");
    assert_eq!(local.address(), LOCAL_BASE);
    assert_eq!(
        local.read(LOCAL_BASE + 4, 4),
        Some(&(0x5126u32.to_le_bytes())[..])
    );

    let [global] = dump.global_memory() else {
        panic!("one global section")
    };
    assert_eq!((global.address(), global.len()), (GLOBAL_BASE, 256));
    assert_eq!(
        dump.read_global(GLOBAL_BASE + 16, 3),
        Some(&[16u8, 17, 18][..])
    );
    assert_eq!(dump.read_global(GLOBAL_BASE + 255, 2), None);
    assert!(dump.managed_memory().is_empty());
}

#[test]
fn lane_views_name_their_kernel_function_and_state() {
    let dump = read(writer::sample(Layout::Current)).unwrap();
    assert_eq!(dump.lanes().count(), 1 + 32 + 1);
    let faults: Vec<_> = dump.faulting_lanes().collect();
    let [f] = faults.as_slice() else {
        panic!("one faulting lane, got {}", faults.len())
    };
    assert_eq!(
        (f.device.index, f.sm.id, f.warp.id, f.lane.id),
        (0, FAULT_SM, FAULT_WARP, FAULT_LANE)
    );
    assert_eq!(f.block.block_idx, dim(1, 0, 0));
    assert_eq!(
        f.grid().and_then(|g| g.kernel_name.as_deref()),
        Some(KERNEL)
    );
    let func = f.function().expect("function at the PC");
    assert_eq!((func.name.as_str(), f.lane.pc - func.value), (KERNEL, 0xa0));
    assert!(f.is_active());
    // A lane that diverged into a device function: the function is the helper, the kernel is still fault().
    let helper = dump
        .lanes()
        .find(|l| l.warp.id == 2 && l.lane.id == 20)
        .unwrap();
    assert!(!helper.is_active());
    assert_eq!(helper.function().map(|f| f.name.as_str()), Some(HELPER));
    assert_eq!(
        helper.lane.pc - helper.function().unwrap().value,
        helper.lane.function_offset
    );
    assert_eq!(helper.grid().unwrap().kernel_name.as_deref(), Some(KERNEL));
}

#[test]
fn baseline_entries_leave_later_fields_absent() {
    let dump = read(writer::sample(Layout::Baseline)).expect("r346-sized entries");
    let d = &dump.devices()[0];
    assert_eq!(d.uniform_registers_per_warp, None);
    assert_eq!(d.convergence_barriers_per_warp, None);
    assert_eq!(d.sm_count, SMS);
    let g = d.grid(GRID).unwrap();
    assert_eq!((g.cluster_dim, g.preferred_cluster_dim), (None, None));
    assert_eq!(g.grid_dim, dim(2, 1, 1));
    let sm = &d.sms[FAULT_SM as usize];
    assert_eq!(
        (sm.exception, sm.error_pc, sm.exception_string.as_deref()),
        (None, None, None)
    );
    let block = &sm.blocks[0];
    assert_eq!((block.cluster_idx, block.cluster_dim), (None, None));
    let w = &block.warps[1];
    assert_eq!(
        (w.registers, w.shared_memory_size, w.cbu),
        (None, None, None)
    );
    assert_eq!(w.error_pc, Some(ERROR_PC), "a baseline field");
    let lane = &w.lanes[0];
    assert_eq!(lane.cbu_thread_state, None);
    assert_eq!(lane.exception, Exception::WarpMisalignedAddress);
    assert_eq!(lane.pc, FAULT_PC);
}

#[test]
fn more_than_0xff00_sections_use_extended_numbering() {
    let mut b = Builder::new();
    let name = b.string("G");
    let dev = Fields::new(88).u64(0, name).u32(36, 1);
    let devtbl = b.table(".cudbg.devtbl", writer::DEV_TABLE, &[dev], 0, 0);
    // The device's one SM has its entry, as the format requires.
    let sm = Fields::new(writer::SM_SIZE.0);
    b.table(".cudbg.smtbl.dev0", writer::SM_TABLE, &[sm], devtbl, 0);
    for i in 0..0xff10u32 {
        // Sections of a kind the reader does not know are skipped.
        b.section("", writer::SHT_LOUSER + 0x100, Vec::new(), 0, i, 0, 0);
    }
    let bytes = b.finish();
    assert_eq!(
        &bytes[0x3c..0x40],
        &[0, 0, 0xff, 0xff],
        "e_shnum 0, e_shstrndx SHN_XINDEX"
    );
    let dump = read(bytes).expect("extended numbering");
    assert_eq!(dump.devices()[0].name, "G");
}

#[test]
fn a_device_claiming_more_sms_than_the_dump_holds_is_refused_as_corrupt() {
    // numSMs sizes what readers keep per SM (cuda-gdb's SM mask): near u32::MAX it is 512 MiB of mask.
    for forged in [u32::MAX - 1, SMS + 1] {
        match err(writer::with_sm_count(
            writer::sample(Layout::Current),
            0,
            forged,
        )) {
            CoreDumpError::SmCountBeyondTable {
                section,
                device,
                sm_count,
                entries,
            } => {
                assert_eq!(section.name, ".cudbg.devtbl");
                assert_eq!((device, sm_count, entries), (0, forged, SMS as usize));
            }
            e => panic!("{forged} SMs: {e}"),
        }
    }
    let e = err(writer::with_sm_count(
        writer::sample(Layout::Current),
        0,
        u32::MAX - 1,
    ));
    assert_eq!(
        e.to_string(),
        format!(
            "section 1 (.cudbg.devtbl): device 0 claims {} SMs, but the dump holds SM-table entries for {SMS}: \
             corrupt",
            u32::MAX - 1
        )
    );
    // The count the SM table holds reads, in either layout.
    for layout in [Layout::Current, Layout::Baseline] {
        let dump = read(writer::with_sm_count(writer::sample(layout), 0, SMS)).expect("as written");
        assert_eq!(dump.devices()[0].sm_count, SMS);
    }
}

fn err(bytes: Vec<u8>) -> CoreDumpError {
    match read(bytes) {
        Ok(_) => panic!("read as a dump"),
        Err(e) => e,
    }
}

#[test]
fn files_of_other_formats_are_refused() {
    assert!(
        matches!(err(Vec::new()), CoreDumpError::NotElf),
        "empty file"
    );
    assert!(
        matches!(err(b"hello, world\n".to_vec()), CoreDumpError::NotElf),
        "text"
    );
    assert!(
        matches!(err(b"\x7fEL".to_vec()), CoreDumpError::NotElf),
        "three bytes"
    );
    assert!(
        matches!(
            err(b"\x7fELF\x02\x01".to_vec()),
            CoreDumpError::OutOfBounds { .. }
        ),
        "a cut ELF header"
    );
    // A host core file: ELF64 ET_CORE, but OS/ABI 0 and machine x86-64.
    let mut host = Builder::new();
    host.os_abi = 0;
    host.machine = 62;
    match err(host.finish()) {
        CoreDumpError::NotCudaCoreDump { field, found, .. } => {
            assert_eq!((field, found), ("OS/ABI", 0))
        }
        e => panic!("{e}"),
    }
    // A cubin: CUDA's OS/ABI 0x41 (newer toolkits), ET_EXEC.
    let cubin = writer::cubin(&[("k", 0, 4)]);
    assert!(matches!(
        err(cubin),
        CoreDumpError::NotCudaCoreDump {
            field: "OS/ABI",
            ..
        }
    ));
    let mut exec = Builder::new();
    exec.e_type = 2;
    match err(exec.finish()) {
        CoreDumpError::NotCudaCoreDump {
            field,
            found,
            expected,
            ..
        } => {
            assert_eq!((field, found, expected), ("type", 2, 4))
        }
        e => panic!("{e}"),
    }
    let mut arm = Builder::new();
    arm.machine = 183;
    assert!(matches!(
        err(arm.finish()),
        CoreDumpError::NotCudaCoreDump {
            field: "machine",
            ..
        }
    ));
    let mut b32 = writer::sample(Layout::Current);
    b32[4] = 1;
    assert!(matches!(
        err(b32),
        CoreDumpError::NotCudaCoreDump { field: "class", .. }
    ));
    let mut be = writer::sample(Layout::Current);
    be[5] = 2;
    assert!(matches!(
        err(be),
        CoreDumpError::NotCudaCoreDump {
            field: "data encoding",
            ..
        }
    ));
    let mut v8 = Builder::new();
    v8.abi_version = 8;
    assert!(matches!(
        err(v8.finish()),
        CoreDumpError::UnsupportedAbiVersion(8)
    ));
    // A CUDA core dump without a device table.
    assert!(matches!(
        err(Builder::new().finish()),
        CoreDumpError::MissingDeviceTable
    ));
}

#[test]
fn truncated_dumps_are_refused_at_every_length() {
    let full = writer::sample(Layout::Current);
    // Every cut removes part of the section header table (it is at the end) or of the data it describes.
    for len in (0..full.len()).step_by(7).chain([full.len() - 1]) {
        match read(full[..len].to_vec()) {
            Err(CoreDumpError::NotElf) => assert!(len < 4, "{len}"),
            Err(CoreDumpError::OutOfBounds { file_len, .. }) => assert_eq!(file_len, len as u64),
            Err(e) => panic!("cut at {len}: unexpected {e}"),
            Ok(_) => panic!("cut at {len} of {} read as a dump", full.len()),
        }
    }
}

/// The sample with one section header field overwritten.
fn patched(section: &str, nth: usize, field: usize, value: &[u8]) -> Vec<u8> {
    let mut b = writer::sample(Layout::Current);
    let at = section_header(&b, section, nth);
    b[at + field..at + field + value.len()].copy_from_slice(value);
    b
}

/// Offset of the header of the `nth` section named `name`.
fn section_header(b: &[u8], name: &str, nth: usize) -> usize {
    let u16_at = |at: usize| u16::from_le_bytes([b[at], b[at + 1]]) as usize;
    let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
    let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize;
    let shoff = u64_at(0x28);
    let (count, names) = (u16_at(0x3c), u16_at(0x3e));
    let names_off = u64_at(shoff + names * 64 + 0x18);
    (0..count)
        .map(|i| shoff + i * 64)
        .filter(|&h| {
            let at = names_off + u32_at(h);
            let end = at + b[at..].iter().position(|&c| c == 0).unwrap();
            &b[at..end] == name.as_bytes()
        })
        .nth(nth)
        .unwrap_or_else(|| panic!("no section {name} #{nth}"))
}

#[test]
fn entries_pointing_outside_the_file_are_refused() {
    let far = 1u64 << 40;
    match err(patched(
        ".cudbg.lntbl.dev0.sm5.cta0.wp1",
        0,
        0x18,
        &far.to_le_bytes(),
    )) {
        CoreDumpError::OutOfBounds { what, offset, .. } => {
            assert!(what.contains(".cudbg.lntbl.dev0.sm5.cta0.wp1"), "{what}");
            assert_eq!(offset, far);
        }
        e => panic!("{e}"),
    }
    // A size that wraps around the address space.
    let e = err(patched(
        ".cudbg.shared.dev0.sm5.cta0",
        0,
        0x20,
        &u64::MAX.to_le_bytes(),
    ));
    assert!(matches!(e, CoreDumpError::OutOfBounds { .. }), "{e}");
    // The section header table itself outside the file.
    let mut b = writer::sample(Layout::Current);
    let near_end = b.len() as u64 - 10;
    b[0x28..0x30].copy_from_slice(&near_end.to_le_bytes());
    assert!(matches!(err(b), CoreDumpError::OutOfBounds { .. }));
    let mut b = writer::sample(Layout::Current);
    b[0x28..0x30].copy_from_slice(&0u64.to_le_bytes());
    assert!(matches!(err(b), CoreDumpError::BadSectionTable(_)));
    let mut b = writer::sample(Layout::Current);
    b[0x3a..0x3c].copy_from_slice(&40u16.to_le_bytes());
    assert!(matches!(err(b), CoreDumpError::BadSectionTable(_)));
    // A device name past the end of the string table.
    let mut b = writer::sample(Layout::Current);
    let devtbl = section_header(&b, ".cudbg.devtbl", 0);
    let off = u64::from_le_bytes(b[devtbl + 0x18..devtbl + 0x20].try_into().unwrap()) as usize;
    b[off..off + 8].copy_from_slice(&0xffff_ffffu64.to_le_bytes());
    match err(b) {
        CoreDumpError::BadString { index, .. } => assert_eq!(index, 0xffff_ffff),
        e => panic!("{e}"),
    }
}

#[test]
fn broken_relationships_are_refused() {
    // A warp table whose sh_link names the device table instead of a block table.
    match err(patched(
        ".cudbg.wptbl.dev0.sm5.cta0",
        0,
        0x28,
        &1u32.to_le_bytes(),
    )) {
        CoreDumpError::BadLink { link, expected, .. } => {
            assert_eq!((link, expected), (1, "block table"))
        }
        e => panic!("{e}"),
    }
    // A lane table for warp 9 of a block with two warps.
    match err(patched(
        ".cudbg.lntbl.dev0.sm5.cta0.wp1",
        0,
        0x2c,
        &9u32.to_le_bytes(),
    )) {
        CoreDumpError::BadIndex { info, count, .. } => assert_eq!((info, count), (9, 2)),
        e => panic!("{e}"),
    }
    // Two lane tables for the same warp.
    let e = err(patched(
        ".cudbg.lntbl.dev0.sm5.cta0.wp1",
        0,
        0x2c,
        &0u32.to_le_bytes(),
    ));
    assert!(matches!(e, CoreDumpError::Duplicate { .. }), "{e}");
    // A sh_link past the section table.
    let e = err(patched(
        ".cudbg.regs.dev0.sm5.cta0.wp1.ln0",
        0,
        0x28,
        &u32::MAX.to_le_bytes(),
    ));
    assert!(matches!(e, CoreDumpError::BadLink { .. }), "{e}");
    // A second device table.
    let e = err(patched(
        ".cudbg.ctxtbl.dev0",
        0,
        4,
        &writer::DEV_TABLE.to_le_bytes(),
    ));
    assert!(matches!(e, CoreDumpError::Duplicate { .. }), "{e}");
}

#[test]
fn entry_sizes_below_the_oldest_layout_are_refused() {
    match err(patched(
        ".cudbg.lntbl.dev0.sm5.cta0.wp0",
        0,
        0x38,
        &40u64.to_le_bytes(),
    )) {
        CoreDumpError::BadEntrySize {
            entsize, baseline, ..
        } => assert_eq!((entsize, baseline), (40, 48)),
        e => panic!("{e}"),
    }
    // An entry size that does not divide the table.
    let e = err(patched(
        ".cudbg.wptbl.dev0.sm5.cta0",
        0,
        0x38,
        &48u64.to_le_bytes(),
    ));
    assert!(matches!(e, CoreDumpError::BadEntrySize { .. }), "{e}");
    let e = err(patched(".cudbg.devtbl", 0, 0x38, &0u64.to_le_bytes()));
    assert!(matches!(e, CoreDumpError::BadEntrySize { .. }), "{e}");
    // Registers are 32-bit words.
    let e = err(patched(
        ".cudbg.regs.dev0.sm5.cta0.wp1.ln0",
        0,
        0x20,
        &6u64.to_le_bytes(),
    ));
    assert!(matches!(e, CoreDumpError::BadEntrySize { .. }), "{e}");
}

#[test]
fn errors_read_as_sentences() {
    let e = err(b"text".to_vec());
    assert_eq!(
        e.to_string(),
        "not an ELF file (a CUDA core dump is an ELF file)"
    );
    let mut host = Builder::new();
    host.os_abi = 0;
    assert_eq!(
        err(host.finish()).to_string(),
        "not a CUDA core dump: ELF OS/ABI is 0x0, a CUDA core dump has 0x33 (ELFOSABI_CUDA)"
    );
    let e = err(patched(
        ".cudbg.wptbl.dev0.sm5.cta0",
        0,
        0x28,
        &1u32.to_le_bytes(),
    ));
    let text = e.to_string();
    assert!(
        text.contains(
            "(.cudbg.wptbl.dev0.sm5.cta0): sh_link 1 does not name a block table section"
        ),
        "{text}"
    );
}

#[test]
fn open_reads_a_file_and_leaves_it_unchanged() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("gpu-tools-coredump-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sample.cudacore");
    let bytes = writer::sample(Layout::Current);
    std::fs::write(&path, &bytes).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    let before = std::fs::metadata(&path).unwrap().modified().unwrap();
    let dump = CoreDump::open(&path).expect("a read-only file opens");
    assert_eq!(dump.faulting_lanes().count(), 1);
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        before
    );
    // A truncated copy is refused and left as it was.
    let cut = dir.join("cut.cudacore");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    assert!(matches!(
        CoreDump::open(&cut),
        Err(CoreDumpError::OutOfBounds { .. })
    ));
    assert_eq!(std::fs::read(&cut).unwrap().len(), bytes.len() / 2);
    match CoreDump::open(dir.join("missing.cudacore")) {
        Err(CoreDumpError::Io { path, source }) => {
            assert!(path.ends_with("missing.cudacore"));
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("{other:?}"),
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn dumps_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<CoreDump>();
    send_sync::<gpu_tools::coredump::Region>();
    send_sync::<gpu_tools::coredump::LaneView<'static>>();
    send_sync::<CoreDumpError>();
    // A dump read on one thread is used on another.
    let dump = read(writer::sample(Layout::Current)).unwrap();
    let n = std::thread::spawn(move || dump.lanes().count())
        .join()
        .unwrap();
    assert_eq!(n, 34);
}
