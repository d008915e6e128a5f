//! Builds the device tree from the dump's sections, following the relationships `cudacoredump.h` documents: a
//! child section's `sh_link` is the section index of its parent table and its `sh_info` the index of its entry in
//! that table. Section names (`.cudbg.wptbl.dev0.sm126.cta0`) repeat the same facts and are not relied on.
//!
//! Sections are handled kind by kind, parents before children, so every parent table is complete when its
//! children are attached. Sections of a kind this reader does not know are skipped (newer drivers add kinds).

use std::collections::HashMap;
use std::sync::Arc;

use super::container::{self, ElfFile, SectionHeader, section_data, string_at};
use super::elf::SymbolTable;
use super::error::{CoreDumpError, SectionId};
use super::layout::{
    Entry, WORD, cbank, cta, ctx, dev, frame, grid, lane, meta, module, sht, sm, warp,
};
use super::model::Source;
use super::model::{
    Block, CbuLanes, ConstBank, Context, Device, Frame, GenerationFlags, Grid, GridStatus, Lane,
    Metadata, Module, Region, Sm, Warp,
};
use super::{CudbgError, Exception, KernelOrigin, KernelType};
use crate::bytes::le_u32;

/// Everything read from a dump.
pub(super) struct Parts {
    pub abi_version: u8,
    pub metadata: Option<Metadata>,
    pub devices: Vec<Device>,
    pub global_memory: Vec<Region>,
    pub managed_memory: Vec<Region>,
}

/// The place a section fills, for finding two sections that claim the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Slot {
    kind: u32,
    path: [usize; 5],
}

struct Reader<'a> {
    /// The dump's bytes, shared with the regions cut from them.
    source: &'a Source,
    /// The same bytes, borrowed once.
    bytes: &'a [u8],
    sections: &'a [SectionHeader<'a>],
    strings: &'a [u8],
    claims: HashMap<Slot, usize>,
}

impl<'a> Reader<'a> {
    /// A reader of `sections`, with the string table (`.strtab`) that entries point into (device names,
    /// metadata); `.shstrtab` holds the section names.
    fn new(
        source: &'a Source,
        bytes: &'a [u8],
        sections: &'a [SectionHeader<'a>],
    ) -> Result<Reader<'a>, CoreDumpError> {
        const SHT_STRTAB: u32 = 3;
        let strings_section = sections
            .iter()
            .find(|s| s.kind == SHT_STRTAB && s.name == ".strtab");
        let strings = match strings_section {
            Some(s) => section_data(bytes, s)?,
            None => &[],
        };
        log::debug!(
            "core dump: {} sections, string table {}",
            sections.len(),
            strings_section.map_or("absent".into(), |s| s.id().to_string())
        );
        Ok(Reader {
            source,
            bytes,
            sections,
            strings,
            claims: HashMap::new(),
        })
    }

    /// Byte sections, each as a [`Region`] at its `sh_addr`.
    fn regions(&self, sections: &[&SectionHeader]) -> Result<Vec<Region>, CoreDumpError> {
        sections.iter().map(|s| self.region(s)).collect()
    }

    fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The entries of a table section; entries shorter than `baseline` or a size that is not a whole number of
    /// entries is an error. With `single`, an entry size of 0 means one entry spanning the section (the driver
    /// writes the metadata section that way).
    fn table(
        &self,
        s: &SectionHeader,
        (baseline, known): (usize, usize),
        single: bool,
    ) -> Result<Vec<Entry<'a>>, CoreDumpError> {
        let d = section_data(self.bytes(), s)?;
        if d.is_empty() {
            return Ok(Vec::new());
        }
        let bad = || CoreDumpError::BadEntrySize {
            section: s.id(),
            size: s.size,
            entsize: s.entsize,
            baseline,
        };
        let size = match usize::try_from(s.entsize) {
            Ok(0) if single => d.len(),
            Ok(n) if n >= baseline && d.len() % n == 0 => n,
            _ => return Err(bad()),
        };
        if size < baseline {
            return Err(bad());
        }
        if size > known {
            log::debug!(
                "{}: entries of {size} bytes, {} more than this reader knows (a newer driver); the rest is skipped",
                s.id(),
                size - known
            );
        }
        Ok(d.chunks_exact(size).map(Entry).collect())
    }

    /// A raw `uint32_t` section.
    fn words(&self, s: &SectionHeader) -> Result<Vec<u32>, CoreDumpError> {
        let d = section_data(self.bytes(), s)?;
        if d.len() % WORD != 0 {
            return Err(CoreDumpError::BadEntrySize {
                section: s.id(),
                size: s.size,
                entsize: s.entsize,
                baseline: WORD,
            });
        }
        Ok((0..d.len() / WORD)
            .map(|i| le_u32(d, i * WORD).unwrap_or(0))
            .collect())
    }

    /// A byte section as a [`Region`] at its `sh_addr`.
    fn region(&self, s: &SectionHeader) -> Result<Region, CoreDumpError> {
        let d = section_data(self.bytes(), s)?;
        // `section_data` checked the range; an empty NOBITS section maps to an empty range.
        let start = usize::try_from(s.offset).unwrap_or(0);
        let range = if d.is_empty() {
            0..0
        } else {
            start..start + d.len()
        };
        Ok(Region::new(s.addr, Arc::clone(self.source), range))
    }

    fn string(&self, s: &SectionHeader, index: u64) -> Result<String, CoreDumpError> {
        if index == 0 && self.strings.is_empty() {
            return Ok(String::new());
        }
        string_at(self.strings, index).ok_or_else(|| CoreDumpError::BadString {
            section: s.id(),
            index,
            len: self.strings.len(),
        })
    }

    fn claim(
        &mut self,
        s: &SectionHeader,
        kind: u32,
        path: [usize; 5],
    ) -> Result<(), CoreDumpError> {
        if let Some(&first) = self.claims.get(&Slot { kind, path }) {
            return Err(CoreDumpError::Duplicate {
                section: s.id(),
                first: self.id(first),
            });
        }
        self.claims.insert(Slot { kind, path }, s.index);
        Ok(())
    }

    fn id(&self, index: usize) -> SectionId {
        self.sections
            .get(index)
            .map(SectionHeader::id)
            .unwrap_or(SectionId {
                index,
                name: String::new(),
            })
    }
}

/// The parent recorded for section `s.link` in `parents`, or [`CoreDumpError::BadLink`].
fn parent<T: Copy>(
    s: &SectionHeader,
    parents: &HashMap<usize, T>,
    expected: &'static str,
) -> Result<T, CoreDumpError> {
    parents
        .get(&(s.link as usize))
        .copied()
        .ok_or(CoreDumpError::BadLink {
            section: s.id(),
            link: s.link,
            expected,
        })
}

/// `s.info` as an index below `count`, or [`CoreDumpError::BadIndex`].
fn child_index(s: &SectionHeader, count: usize) -> Result<usize, CoreDumpError> {
    let i = s.info as usize;
    if i < count {
        Ok(i)
    } else {
        Err(CoreDumpError::BadIndex {
            section: s.id(),
            info: s.info,
            count,
        })
    }
}

fn flag(v: u32) -> bool {
    v != 0
}

/// Reads every section of the dump in `source` (checked to be a CUDA core dump by [`container::parse`] first):
/// the device table, then each kind of child section, parents before children.
pub(super) fn assemble(source: &Source) -> Result<Parts, CoreDumpError> {
    // Borrowed once: every range is checked against these bytes, and regions later cut the same ranges.
    let bytes: &[u8] = (**source).as_ref();
    let ElfFile {
        abi_version,
        sections,
    } = container::parse(bytes)?;
    let kinds = Kinds::new(&sections);
    let mut r = Reader::new(source, bytes, &sections)?;
    let (mut devices, device_table) = read_devices(&mut r, &kinds)?;
    let metadata = read_metadata(&mut r, &kinds.of(sht::META_DATA))?;
    read_contexts(&mut r, &kinds, &device_table, &mut devices)?;
    read_grids(&mut r, &kinds, &device_table, &mut devices)?;
    let blocks = read_sms_and_blocks(&mut r, &kinds, &device_table, &mut devices)?;
    check_sm_counts(&kinds, &devices)?;
    let warps = read_warps(&mut r, &kinds, &blocks, &mut devices)?;
    read_lanes(&mut r, &kinds, &warps, &mut devices)?;
    let global_memory = r.regions(&kinds.of(sht::GLOBAL_MEM))?;
    let managed_memory = r.regions(&kinds.of(sht::MANAGED_MEM))?;
    name_kernels(&mut devices);
    Ok(Parts {
        abi_version,
        metadata,
        devices,
        global_memory,
        managed_memory,
    })
}

/// The dump's sections by kind (`sh_type`), in file order.
struct Kinds<'s>(HashMap<u32, Vec<&'s SectionHeader<'s>>>);

impl<'s> Kinds<'s> {
    fn new(sections: &'s [SectionHeader<'s>]) -> Kinds<'s> {
        let mut by_kind: HashMap<u32, Vec<&SectionHeader>> = HashMap::new();
        for s in sections {
            by_kind.entry(s.kind).or_default().push(s);
        }
        Kinds(by_kind)
    }

    /// The sections of `kind`, in file order.
    fn of(&self, kind: u32) -> Vec<&'s SectionHeader<'s>> {
        self.0.get(&kind).cloned().unwrap_or_default()
    }
}

/// The parent tables read so far: a table section's index -> where its entries went (device, context, ... indices).
type Tables<T> = HashMap<usize, T>;

/// The device table (exactly one) and its entries; the table's index, as the parent of the per-device tables.
fn read_devices(
    r: &mut Reader<'_>,
    kinds: &Kinds<'_>,
) -> Result<(Vec<Device>, Tables<()>), CoreDumpError> {
    // Devices: one table.
    let dev_tables = kinds.of(sht::DEV_TABLE);
    let devtbl = match dev_tables.as_slice() {
        [] => return Err(CoreDumpError::MissingDeviceTable),
        [one] => *one,
        [first, second, ..] => {
            return Err(CoreDumpError::Duplicate {
                section: second.id(),
                first: first.id(),
            });
        }
    };
    let mut devices = Vec::new();
    for (index, e) in r
        .table(devtbl, (dev::BASELINE, dev::SIZE), false)?
        .into_iter()
        .enumerate()
    {
        devices.push(Device {
            index: index as u32,
            id: e.u32(dev::ID),
            name: r.string(devtbl, e.u64(dev::NAME))?,
            device_type: r.string(devtbl, e.u64(dev::TYPE))?,
            sm_type: r.string(devtbl, e.u64(dev::SM_TYPE))?,
            pci_bus: e.u32(dev::PCI_BUS),
            pci_device: e.u32(dev::PCI_DEV),
            sm_count: e.u32(dev::SMS),
            warps_per_sm: e.u32(dev::WARPS_PER_SM),
            lanes_per_warp: e.u32(dev::LANES_PER_WARP),
            registers_per_lane: e.u32(dev::REGS_PER_LANE),
            predicates_per_lane: e.u32(dev::PREDS_PER_LANE),
            sm_version: (e.u32(dev::SM_MAJOR), e.u32(dev::SM_MINOR)),
            instruction_size: e.u32(dev::INSTRUCTION_SIZE),
            status: CudbgError::check(e.u32(dev::STATUS)),
            uniform_registers_per_warp: e.opt_u32(dev::UREGS_PER_WARP),
            uniform_predicates_per_warp: e.opt_u32(dev::UPREDS_PER_WARP),
            convergence_barriers_per_warp: e.opt_u32(dev::BARRIERS_PER_WARP),
            contexts: Vec::new(),
            grids: Vec::new(),
            sms: Vec::new(),
        });
    }
    Ok((devices, Tables::from([(devtbl.index, ())])))
}

/// Contexts (children of the device table), their modules and the modules' images.
fn read_contexts(
    r: &mut Reader<'_>,
    kinds: &Kinds<'_>,
    device_table: &Tables<()>,
    devices: &mut [Device],
) -> Result<(), CoreDumpError> {
    let mut ctx_tables = HashMap::new();
    for s in kinds.of(sht::CTX_TABLE) {
        parent(s, device_table, "device table")?;
        let d = child_index(s, devices.len())?;
        r.claim(s, sht::CTX_TABLE, [d, 0, 0, 0, 0])?;
        for e in r.table(s, (ctx::BASELINE, ctx::SIZE), false)? {
            devices[d].contexts.push(Context {
                id: e.u64(ctx::ID),
                shared_window_base: e.u64(ctx::SHARED_WINDOW),
                local_window_base: e.u64(ctx::LOCAL_WINDOW),
                global_window_base: e.u64(ctx::GLOBAL_WINDOW),
                device_index: e.u32(ctx::DEVICE_INDEX),
                host_tid: e.u32(ctx::TID),
                modules: Vec::new(),
            });
        }
        ctx_tables.insert(s.index, d);
    }
    let mut mod_tables = HashMap::new();
    for s in kinds.of(sht::MOD_TABLE) {
        let d = parent(s, &ctx_tables, "context table")?;
        let c = child_index(s, devices[d].contexts.len())?;
        r.claim(s, sht::MOD_TABLE, [d, c, 0, 0, 0])?;
        for e in r.table(s, (module::BASELINE, module::SIZE), false)? {
            devices[d].contexts[c].modules.push(Module {
                handle: e.u64(module::HANDLE),
                relocated_image: None,
                unrelocated_image: None,
                functions: SymbolTable::default(),
            });
        }
        mod_tables.insert(s.index, (d, c));
    }
    for kind in [sht::RELF_IMG, sht::ELF_IMG] {
        for s in kinds.of(kind) {
            let (d, c) = parent(s, &mod_tables, "module table")?;
            let m = child_index(s, devices[d].contexts[c].modules.len())?;
            r.claim(s, kind, [d, c, m, 0, 0])?;
            let image = r.region(s)?;
            let module = &mut devices[d].contexts[c].modules[m];
            if kind == sht::RELF_IMG {
                module.functions = SymbolTable::from_image(image.bytes());
                module.relocated_image = Some(image);
            } else {
                module.unrelocated_image = Some(image);
            }
        }
    }
    Ok(())
}

/// Grids (children of the device table), their parameters and constant banks.
fn read_grids(
    r: &mut Reader<'_>,
    kinds: &Kinds<'_>,
    device_table: &Tables<()>,
    devices: &mut [Device],
) -> Result<(), CoreDumpError> {
    let mut grid_tables = HashMap::new();
    for s in kinds.of(sht::GRID_TABLE) {
        parent(s, device_table, "device table")?;
        let d = child_index(s, devices.len())?;
        r.claim(s, sht::GRID_TABLE, [d, 0, 0, 0, 0])?;
        for e in r.table(s, (grid::BASELINE, grid::SIZE), false)? {
            devices[d].grids.push(Grid {
                id: e.u64(grid::ID),
                context: e.u64(grid::CONTEXT),
                function: e.u64(grid::FUNCTION),
                function_entry: e.u64(grid::FUNCTION_ENTRY),
                module: e.u64(grid::MODULE),
                parent_grid_id: e.u64(grid::PARENT),
                params_offset: e.u64(grid::PARAMS_OFFSET),
                kernel_type: KernelType::from_raw(e.u32(grid::KERNEL_TYPE)),
                origin: KernelOrigin::from_raw(e.u32(grid::ORIGIN)),
                status: GridStatus::from_raw(e.u32(grid::STATUS)),
                registers: e.u32(grid::REGS),
                grid_dim: e.dim3(grid::GRID_DIM),
                block_dim: e.dim3(grid::BLOCK_DIM),
                launch_blocking: flag(e.u32(grid::LAUNCH_BLOCKING)),
                host_tid: e.u32(grid::HOST_TID),
                cluster_dim: e.opt_dim3(grid::CLUSTER_DIM),
                preferred_cluster_dim: e.opt_dim3(grid::PREFERRED_CLUSTER_DIM),
                params: None,
                const_banks: Vec::new(),
                kernel_name: None,
            });
        }
        grid_tables.insert(s.index, d);
    }
    for s in kinds.of(sht::PARAM_MEM) {
        let d = parent(s, &grid_tables, "grid table")?;
        let g = child_index(s, devices[d].grids.len())?;
        r.claim(s, sht::PARAM_MEM, [d, g, 0, 0, 0])?;
        devices[d].grids[g].params = Some(r.region(s)?);
    }
    for s in kinds.of(sht::CB_TABLE) {
        let d = parent(s, &grid_tables, "grid table")?;
        let g = child_index(s, devices[d].grids.len())?;
        r.claim(s, sht::CB_TABLE, [d, g, 0, 0, 0])?;
        devices[d].grids[g].const_banks = r
            .table(s, (cbank::BASELINE, cbank::SIZE), false)?
            .into_iter()
            .map(|e| ConstBank {
                bank: e.u32(cbank::BANK),
                address: e.u64(cbank::ADDR),
                size: e.u32(cbank::SIZE_FIELD),
            })
            .collect();
    }
    Ok(())
}

/// SMs (children of the device table), their blocks and the blocks' shared memory; the block tables, parents of
/// the warp tables.
fn read_sms_and_blocks(
    r: &mut Reader<'_>,
    kinds: &Kinds<'_>,
    device_table: &Tables<()>,
    devices: &mut [Device],
) -> Result<Tables<(usize, usize)>, CoreDumpError> {
    let mut sm_tables = HashMap::new();
    for s in kinds.of(sht::SM_TABLE) {
        parent(s, device_table, "device table")?;
        let d = child_index(s, devices.len())?;
        r.claim(s, sht::SM_TABLE, [d, 0, 0, 0, 0])?;
        for e in r.table(s, (sm::BASELINE, sm::SIZE), false)? {
            let exception_string = match e.opt_u64(sm::EXCEPTION_STRING) {
                Some(i) => Some(r.string(s, i)?).filter(|t| !t.is_empty()),
                None => None,
            };
            devices[d].sms.push(Sm {
                id: e.u32(sm::ID),
                exception: e.opt_u32(sm::EXCEPTION).map(Exception::from_raw),
                error_pc: e
                    .opt_u32(sm::ERROR_PC_VALID)
                    .filter(|&v| flag(v))
                    .and_then(|_| e.opt_u64(sm::ERROR_PC)),
                cluster_exception_target_block: e
                    .opt_u32(sm::CLUSTER_TARGET_VALID)
                    .filter(|&v| flag(v))
                    .and_then(|_| e.opt_dim3(sm::CLUSTER_TARGET)),
                exception_string,
                blocks: Vec::new(),
            });
        }
        sm_tables.insert(s.index, d);
    }
    let mut cta_tables = HashMap::new();
    for s in kinds.of(sht::CTA_TABLE) {
        let d = parent(s, &sm_tables, "SM table")?;
        let m = child_index(s, devices[d].sms.len())?;
        r.claim(s, sht::CTA_TABLE, [d, m, 0, 0, 0])?;
        for e in r.table(s, (cta::BASELINE, cta::SIZE), false)? {
            devices[d].sms[m].blocks.push(Block {
                grid_id: e.u64(cta::GRID_ID),
                block_idx: e.dim3(cta::BLOCK_IDX),
                cluster_idx: e.opt_dim3(cta::CLUSTER_IDX),
                cluster_dim: e.opt_dim3(cta::CLUSTER_DIM),
                shared_memory: None,
                warps: Vec::new(),
            });
        }
        cta_tables.insert(s.index, (d, m));
    }
    for s in kinds.of(sht::SHARED_MEM) {
        let (d, m) = parent(s, &cta_tables, "block table")?;
        let b = child_index(s, devices[d].sms[m].blocks.len())?;
        r.claim(s, sht::SHARED_MEM, [d, m, b, 0, 0])?;
        devices[d].sms[m].blocks[b].shared_memory = Some(r.region(s)?);
    }
    Ok(cta_tables)
}

/// Each device's SM count against the SM-table entries the dump holds for it. `cudacoredump.h` says a device's SM
/// table holds all its SMs, one entry each (the dumps of driver 580 hold 132 for 132), and NVIDIA's reader
/// (libcudacore's `readDeviceExceptionState`) looks up an entry for every SM below the count. A count past the
/// entries is corrupt: it would size what readers keep per SM (an SM mask) from a number the file does not back.
fn check_sm_counts(kinds: &Kinds<'_>, devices: &[Device]) -> Result<(), CoreDumpError> {
    // `read_devices` found exactly one device table.
    let Some(devtbl) = kinds.of(sht::DEV_TABLE).first().copied() else {
        return Err(CoreDumpError::MissingDeviceTable);
    };
    for d in devices {
        let entries = d.sms.len();
        if usize::try_from(d.sm_count).map_or(true, |n| n > entries) {
            return Err(CoreDumpError::SmCountBeyondTable {
                section: devtbl.id(),
                device: d.index,
                sm_count: d.sm_count,
                entries,
            });
        }
    }
    Ok(())
}

/// Warps (children of the block tables) and their uniform registers, uniform predicates and convergence barriers;
/// the warp tables, parents of the lane tables.
fn read_warps(
    r: &mut Reader<'_>,
    kinds: &Kinds<'_>,
    cta_tables: &Tables<(usize, usize)>,
    devices: &mut [Device],
) -> Result<Tables<(usize, usize, usize)>, CoreDumpError> {
    let mut warp_tables = HashMap::new();
    for s in kinds.of(sht::WP_TABLE) {
        let (d, m) = parent(s, cta_tables, "block table")?;
        let b = child_index(s, devices[d].sms[m].blocks.len())?;
        r.claim(s, sht::WP_TABLE, [d, m, b, 0, 0])?;
        for e in r.table(s, (warp::BASELINE, warp::SIZE), false)? {
            let cbu = match (
                e.opt_u32(warp::CBU_ACTIVE_LANES),
                e.opt_u32(warp::CBU_EXITED_LANES),
                e.opt_u32(warp::CBU_COLLECTIVE_LANES),
            ) {
                (Some(active), Some(exited), Some(collective)) => Some(CbuLanes {
                    active,
                    exited,
                    collective,
                }),
                _ => None,
            };
            devices[d].sms[m].blocks[b].warps.push(Warp {
                id: e.u32(warp::ID),
                valid_lanes: e.u32(warp::VALID_LANES),
                active_lanes: e.u32(warp::ACTIVE_LANES),
                broken: flag(e.u32(warp::BROKEN)),
                error_pc: flag(e.u32(warp::ERROR_PC_VALID)).then(|| e.u64(warp::ERROR_PC)),
                registers: e.opt_u32(warp::REGS),
                shared_memory_size: e.opt_u32(warp::SHARED_MEM_SIZE),
                in_syscall_lanes: e.opt_u32(warp::IN_SYSCALL_LANES),
                cbu,
                uniform_registers: None,
                uniform_predicates: None,
                convergence_barriers: None,
                lanes: Vec::new(),
            });
        }
        warp_tables.insert(s.index, (d, m, b));
    }
    for kind in [sht::DEV_UREGS, sht::DEV_UPRED, sht::CBU_BAR] {
        for s in kinds.of(kind) {
            let (d, m, b) = parent(s, &warp_tables, "warp table")?;
            let w = child_index(s, devices[d].sms[m].blocks[b].warps.len())?;
            r.claim(s, kind, [d, m, b, w, 0])?;
            let words = r.words(s)?;
            let warp = &mut devices[d].sms[m].blocks[b].warps[w];
            match kind {
                sht::DEV_UREGS => warp.uniform_registers = Some(words),
                sht::DEV_UPRED => {
                    warp.uniform_predicates = Some(words.into_iter().map(flag).collect())
                }
                _ => warp.convergence_barriers = Some(words),
            }
        }
    }
    Ok(warp_tables)
}

/// Lanes (children of the warp tables) and their registers, predicates, backtraces and local memory.
fn read_lanes(
    r: &mut Reader<'_>,
    kinds: &Kinds<'_>,
    warp_tables: &Tables<(usize, usize, usize)>,
    devices: &mut [Device],
) -> Result<(), CoreDumpError> {
    let mut lane_tables = HashMap::new();
    for s in kinds.of(sht::LN_TABLE) {
        let (d, m, b) = parent(s, warp_tables, "warp table")?;
        let w = child_index(s, devices[d].sms[m].blocks[b].warps.len())?;
        r.claim(s, sht::LN_TABLE, [d, m, b, w, 0])?;
        for e in r.table(s, (lane::BASELINE, lane::SIZE), false)? {
            devices[d].sms[m].blocks[b].warps[w].lanes.push(Lane {
                id: e.u32(lane::LN),
                pc: e.u64(lane::VIRTUAL_PC),
                function_offset: e.u64(lane::PHYS_PC),
                thread_idx: e.dim3(lane::THREAD_IDX),
                exception: Exception::from_raw(e.u32(lane::EXCEPTION)),
                call_depth: e.u32(lane::CALL_DEPTH),
                syscall_call_depth: e.u32(lane::SYSCALL_CALL_DEPTH),
                cc_register: e.u32(lane::CC_REGISTER),
                cbu_thread_state: e.opt_u32(lane::CBU_THREAD_STATE),
                registers: None,
                predicates: None,
                backtrace: None,
                local_memory: None,
            });
        }
        lane_tables.insert(s.index, (d, m, b, w));
    }
    for kind in [sht::DEV_REGS, sht::DEV_PRED, sht::BT, sht::LOCAL_MEM] {
        for s in kinds.of(kind) {
            let (d, m, b, w) = parent(s, &lane_tables, "lane table")?;
            let l = child_index(s, devices[d].sms[m].blocks[b].warps[w].lanes.len())?;
            r.claim(s, kind, [d, m, b, w, l])?;
            let lane = &mut devices[d].sms[m].blocks[b].warps[w].lanes[l];
            match kind {
                sht::DEV_REGS => lane.registers = Some(r.words(s)?),
                sht::DEV_PRED => {
                    lane.predicates = Some(r.words(s)?.into_iter().map(flag).collect())
                }
                sht::BT => {
                    lane.backtrace = Some(
                        r.table(s, (frame::BASELINE, frame::SIZE), false)?
                            .into_iter()
                            .map(|e| Frame {
                                level: e.u32(frame::LEVEL),
                                return_offset: e.u64(frame::RETURN_OFFSET),
                                return_address: e.u64(frame::RETURN_ADDRESS),
                            })
                            .collect(),
                    )
                }
                _ => lane.local_memory = Some(r.region(s)?),
            }
        }
    }
    Ok(())
}

/// Kernel names: the function symbol at each grid's entry, in the module the grid names.
fn name_kernels(devices: &mut [Device]) {
    for device in devices {
        let names: Vec<Option<String>> = device
            .grids
            .iter()
            .map(|g| {
                device
                    .module(g.module)
                    .and_then(|m| m.function_at(g.function_entry))
                    .or_else(|| device.function_at(g.function_entry).map(|(_, f)| f))
                    .map(|f| f.name.clone())
            })
            .collect();
        for (g, name) in device.grids.iter_mut().zip(names) {
            g.kernel_name = name;
        }
    }
}

fn read_metadata(
    r: &mut Reader<'_>,
    sections: &[&SectionHeader],
) -> Result<Option<Metadata>, CoreDumpError> {
    let s = match sections {
        [] => return Ok(None),
        [one] => *one,
        [first, second, ..] => {
            return Err(CoreDumpError::Duplicate {
                section: second.id(),
                first: first.id(),
            });
        }
    };
    let Some(e) = r
        .table(s, (meta::BASELINE, meta::SIZE), true)?
        .into_iter()
        .next()
    else {
        return Ok(None);
    };
    Ok(Some(Metadata {
        generator: r.string(s, e.u64(meta::GENERATOR))?,
        driver_version: (e.u32(meta::DRIVER_MAJOR), e.u32(meta::DRIVER_MINOR)),
        cuda_version: (e.u32(meta::CUDA_MAJOR), e.u32(meta::CUDA_MINOR)),
        flags: GenerationFlags::from_bits_retain(e.u32(meta::FLAGS)),
        timestamp: e.u32(meta::TIMESTAMP),
    }))
}
