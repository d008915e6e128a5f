//! Writes small CUDA core dumps in the layout `cudacoredump.h` documents, for tests of the reader that run without
//! a GPU: a section builder, and one dump with a known device, grid, blocks, warps and lanes.

pub const SHT_LOUSER: u32 = 0x8000_0000;
pub const GLOBAL_MEM: u32 = SHT_LOUSER + 2;
pub const LOCAL_MEM: u32 = SHT_LOUSER + 3;
pub const SHARED_MEM: u32 = SHT_LOUSER + 4;
pub const DEV_REGS: u32 = SHT_LOUSER + 5;
pub const ELF_IMG: u32 = SHT_LOUSER + 6;
pub const RELF_IMG: u32 = SHT_LOUSER + 7;
pub const BT: u32 = SHT_LOUSER + 8;
pub const DEV_TABLE: u32 = SHT_LOUSER + 9;
pub const CTX_TABLE: u32 = SHT_LOUSER + 10;
pub const SM_TABLE: u32 = SHT_LOUSER + 11;
pub const GRID_TABLE: u32 = SHT_LOUSER + 12;
pub const CTA_TABLE: u32 = SHT_LOUSER + 13;
pub const WP_TABLE: u32 = SHT_LOUSER + 14;
pub const LN_TABLE: u32 = SHT_LOUSER + 15;
pub const MOD_TABLE: u32 = SHT_LOUSER + 16;
pub const DEV_PRED: u32 = SHT_LOUSER + 17;
pub const PARAM_MEM: u32 = SHT_LOUSER + 18;
pub const DEV_UREGS: u32 = SHT_LOUSER + 19;
pub const DEV_UPRED: u32 = SHT_LOUSER + 20;
pub const CB_TABLE: u32 = SHT_LOUSER + 21;
pub const META_DATA: u32 = SHT_LOUSER + 22;
pub const CBU_BAR: u32 = SHT_LOUSER + 23;

/// Entry sizes of the r580 layout and of the oldest (r346) one.
pub const DEV_SIZE: (usize, usize) = (88, 72);
pub const GRID_SIZE: (usize, usize) = (136, 104);
pub const SM_SIZE: (usize, usize) = (48, 8);
pub const CTA_SIZE: (usize, usize) = (56, 24);
pub const WARP_SIZE: (usize, usize) = (64, 32);
pub const LANE_SIZE: (usize, usize) = (56, 48);

/// Little-endian field writer for one table entry.
#[derive(Default, Clone)]
pub struct Fields(pub Vec<u8>);

impl Fields {
    pub fn new(size: usize) -> Self {
        Fields(vec![0; size])
    }
    pub fn u32(mut self, at: usize, v: u32) -> Self {
        if at + 4 <= self.0.len() {
            self.0[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        self
    }
    pub fn u64(mut self, at: usize, v: u64) -> Self {
        if at + 8 <= self.0.len() {
            self.0[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        self
    }
    pub fn dim(self, at: usize, d: (u32, u32, u32)) -> Self {
        self.u32(at, d.0).u32(at + 4, d.1).u32(at + 8, d.2)
    }
}

pub fn words(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|w| w.to_le_bytes()).collect()
}

struct Section {
    name: String,
    kind: u32,
    addr: u64,
    data: Vec<u8>,
    link: u32,
    info: u32,
    entsize: u64,
}

/// Builds an ELF64 file section by section. Section 0 is the null section; `.strtab` and `.shstrtab` are added
/// by [`Builder::finish`].
pub struct Builder {
    sections: Vec<Section>,
    strtab: Vec<u8>,
    pub abi_version: u8,
    pub os_abi: u8,
    pub e_type: u16,
    pub machine: u16,
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl Builder {
    pub fn new() -> Self {
        Builder {
            sections: vec![Section {
                name: String::new(),
                kind: 0,
                addr: 0,
                data: Vec::new(),
                link: 0,
                info: 0,
                entsize: 0,
            }],
            strtab: vec![0],
            abi_version: 7,
            os_abi: 0x33,
            e_type: 4,
            machine: 0xbe,
        }
    }

    /// Adds `s` to `.strtab`; returns its index.
    pub fn string(&mut self, s: &str) -> u64 {
        let at = self.strtab.len() as u64;
        self.strtab.extend_from_slice(s.as_bytes());
        self.strtab.push(0);
        at
    }

    /// Adds a section; returns its index.
    #[allow(clippy::too_many_arguments)]
    pub fn section(
        &mut self,
        name: &str,
        kind: u32,
        data: Vec<u8>,
        link: u32,
        info: u32,
        entsize: u64,
        addr: u64,
    ) -> u32 {
        self.sections.push(Section {
            name: name.to_string(),
            kind,
            addr,
            data,
            link,
            info,
            entsize,
        });
        (self.sections.len() - 1) as u32
    }

    /// A table of `entries`, each `entsize` bytes.
    pub fn table(
        &mut self,
        name: &str,
        kind: u32,
        entries: &[Fields],
        link: u32,
        info: u32,
    ) -> u32 {
        let entsize = entries.first().map_or(0, |e| e.0.len()) as u64;
        let data = entries.iter().flat_map(|e| e.0.clone()).collect();
        self.section(name, kind, data, link, info, entsize, 0)
    }

    /// The file: header, section data, then the section header table (extended numbering when there are more
    /// than 0xff00 sections).
    pub fn finish(mut self) -> Vec<u8> {
        let strtab = std::mem::take(&mut self.strtab);
        self.section(".strtab", 3, strtab, 0, 0, 0, 0);
        let mut names = vec![0u8];
        let mut name_at = Vec::new();
        for s in &self.sections {
            name_at.push(if s.name.is_empty() {
                0
            } else {
                let at = names.len() as u32;
                names.extend_from_slice(s.name.as_bytes());
                names.push(0);
                at
            });
        }
        let shstrtab_name = names.len() as u32;
        names.extend_from_slice(b".shstrtab\0");
        name_at.push(shstrtab_name);
        self.section("", 3, names, 0, 0, 0, 0);
        let count = self.sections.len();
        let mut out = vec![0u8; 64];
        let mut offsets = Vec::new();
        for s in &self.sections {
            offsets.push(out.len() as u64);
            out.extend_from_slice(&s.data);
        }
        while out.len() % 8 != 0 {
            out.push(0);
        }
        let shoff = out.len() as u64;
        let extended = count >= 0xff00;
        for (i, s) in self.sections.iter().enumerate() {
            let mut h = Fields::new(64)
                .u32(0, name_at[i])
                .u32(4, s.kind)
                .u64(0x10, s.addr)
                .u64(0x18, offsets[i])
                .u64(0x20, s.data.len() as u64)
                .u32(0x28, s.link)
                .u32(0x2c, s.info)
                .u64(0x38, s.entsize);
            if i == 0 && extended {
                h = h.u64(0x20, count as u64).u32(0x28, (count - 1) as u32);
            }
            out.extend_from_slice(&h.0);
        }
        out[..4].copy_from_slice(b"\x7fELF");
        out[4] = 2;
        out[5] = 1;
        out[6] = 1;
        out[7] = self.os_abi;
        out[8] = self.abi_version;
        out[0x10..0x12].copy_from_slice(&self.e_type.to_le_bytes());
        out[0x12..0x14].copy_from_slice(&self.machine.to_le_bytes());
        out[0x14..0x18].copy_from_slice(&1u32.to_le_bytes());
        out[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        out[0x34..0x36].copy_from_slice(&64u16.to_le_bytes());
        out[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        let (shnum, shstrndx) = if extended {
            (0u16, 0xffffu16)
        } else {
            (count as u16, (count - 1) as u16)
        };
        out[0x3c..0x3e].copy_from_slice(&shnum.to_le_bytes());
        out[0x3e..0x40].copy_from_slice(&shstrndx.to_le_bytes());
        out
    }
}

/// `dump` (one this writer made, normal section numbering) with the SM count (`numSMs`, byte 36 of the entry) of
/// device `device` of its device table set to `sms`: a forged count, for the reader's bound on it.
pub fn with_sm_count(mut dump: Vec<u8>, device: usize, sms: u32) -> Vec<u8> {
    let u64_at =
        |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize;
    let shoff = u64_at(&dump, 0x28);
    let count = u16::from_le_bytes([dump[0x3c], dump[0x3d]]) as usize;
    let header = (0..count)
        .map(|i| shoff + 64 * i)
        .find(|&h| u32::from_le_bytes(dump[h + 4..h + 8].try_into().unwrap()) == DEV_TABLE)
        .expect("a device table");
    let at = u64_at(&dump, header + 0x18) + device * u64_at(&dump, header + 0x38) + 36;
    dump[at..at + 4].copy_from_slice(&sms.to_le_bytes());
    dump
}

/// A relocated cubin stand-in: an ELF64 whose symbol table has `(name, address, size)` functions.
pub fn cubin(functions: &[(&str, u64, u64)]) -> Vec<u8> {
    let mut strtab = vec![0u8];
    let mut symtab = vec![0u8; 24];
    for (name, value, size) in functions {
        let off = strtab.len() as u32;
        strtab.extend_from_slice(name.as_bytes());
        strtab.push(0);
        let sym = Fields::new(24).u32(0, off).u64(8, *value).u64(16, *size);
        let mut sym = sym.0;
        sym[4] = 0x12; // STB_GLOBAL, STT_FUNC
        symtab.extend_from_slice(&sym);
    }
    let strtab_off = 64u64;
    let symtab_off = strtab_off + strtab.len() as u64;
    let shoff = symtab_off + symtab.len() as u64;
    let mut b = vec![0u8; 64];
    b[..4].copy_from_slice(b"\x7fELF");
    b[4] = 2;
    b[5] = 1;
    b[7] = 0x41;
    b[0x12..0x14].copy_from_slice(&0xbeu16.to_le_bytes());
    b[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
    b[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
    b[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
    b.extend_from_slice(&strtab);
    b.extend_from_slice(&symtab);
    let sh = |kind: u32, off: u64, size: u64, link: u32, entsize: u64| {
        Fields::new(64)
            .u32(4, kind)
            .u64(0x18, off)
            .u64(0x20, size)
            .u32(0x28, link)
            .u64(0x38, entsize)
            .0
    };
    b.extend_from_slice(&sh(0, 0, 0, 0, 0));
    b.extend_from_slice(&sh(3, strtab_off, strtab.len() as u64, 0, 0));
    b.extend_from_slice(&sh(2, symtab_off, symtab.len() as u64, 1, 24));
    b
}

/// What [`sample`] writes, for tests to compare against.
pub mod expect {
    pub const DEVICE_NAME: &str = "Test GPU 80GB";
    pub const DEVICE_TYPE: &str = "TG100-A";
    pub const SM_TYPE: &str = "sm_90";
    pub const SMS: u32 = 8;
    pub const CONTEXT: u64 = 0x5555_0000_1000;
    pub const MODULE: u64 = 0x5555_0000_2000;
    pub const OTHER_MODULE: u64 = 0x5555_0000_3000;
    pub const KERNEL: &str = "_Z5faultPi";
    pub const KERNEL_ENTRY: u64 = 0x7f00_0000_1000;
    pub const HELPER: &str = "_Z6helperv";
    pub const HELPER_ENTRY: u64 = 0x7f00_0000_1400;
    pub const GRID: u64 = 7;
    /// The faulting lane: SM 5, block (1,0,0), warp 3, lane 5, thread (37,0,0).
    pub const FAULT_SM: u32 = 5;
    pub const FAULT_WARP: u32 = 3;
    pub const FAULT_LANE: u32 = 5;
    pub const FAULT_PC: u64 = KERNEL_ENTRY + 0xa0;
    pub const ERROR_PC: u64 = KERNEL_ENTRY + 0x90;
    pub const SHARED_BASE: u64 = 0x0;
    pub const LOCAL_BASE: u64 = 0xfffc80;
    pub const GLOBAL_BASE: u64 = 0x7f00_1000_0000;
    /// A lane of warp 2 that is inside `helper`.
    pub const HELPER_PC: u64 = HELPER_ENTRY + 0x30;
}

/// Which layout to write the tables in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Driver r580 entries (every field).
    Current,
    /// The oldest entries (driver r346): later fields absent.
    Baseline,
}

/// A dump of one device running grid 7 (kernel `fault(int*)`, grid (2,1,1), block (64,1,1)) with two blocks on
/// SMs 2 and 5; block (1,0,0) on SM 5 has warps 2 and 3; lane 5 of warp 3 (thread 37) hit a misaligned address.
pub fn sample(layout: Layout) -> Vec<u8> {
    use expect::*;
    let pick = |sizes: (usize, usize)| match layout {
        Layout::Current => sizes.0,
        Layout::Baseline => sizes.1,
    };
    let mut b = Builder::new();
    let name = b.string(DEVICE_NAME);
    let dtype = b.string(DEVICE_TYPE);
    let smtype = b.string(SM_TYPE);
    let dev = Fields::new(pick(DEV_SIZE))
        .u64(0, name)
        .u64(8, dtype)
        .u64(16, smtype)
        .u32(24, 0)
        .u32(28, 0x17)
        .u32(32, 0)
        .u32(36, SMS)
        .u32(40, 64)
        .u32(44, 32)
        .u32(48, 255)
        .u32(52, 8)
        .u32(56, 9)
        .u32(60, 0)
        .u32(64, 16)
        .u32(68, 0)
        .u32(72, 63)
        .u32(76, 8)
        .u32(80, 16);
    let devtbl = b.table(".cudbg.devtbl", DEV_TABLE, &[dev], 0, 0);
    let ctx = Fields::new(40)
        .u64(0, CONTEXT)
        .u64(8, 0x7f25_0000_0000)
        .u64(16, 0x7f24_c500_0000)
        .u64(24, 0x1000)
        .u32(32, 0)
        .u32(36, 0x251);
    let ctxtbl = b.table(".cudbg.ctxtbl.dev0", CTX_TABLE, &[ctx], devtbl, 0);
    let modtbl = b.table(
        ".cudbg.modtbl.dev0.ctx0",
        MOD_TABLE,
        &[
            Fields::new(8).u64(0, OTHER_MODULE),
            Fields::new(8).u64(0, MODULE),
        ],
        ctxtbl,
        0,
    );
    b.section(
        ".cudbg.relfimg.dev0.ctx0",
        RELF_IMG,
        cubin(&[("_Z5otherv", 0x7f00_0000_8000, 0x100)]),
        modtbl,
        0,
        0,
        0,
    );
    b.section(
        ".cudbg.relfimg.dev0.ctx0",
        RELF_IMG,
        cubin(&[(KERNEL, KERNEL_ENTRY, 0x180), (HELPER, HELPER_ENTRY, 0x80)]),
        modtbl,
        1,
        0,
        0,
    );
    b.section(
        ".cudbg.elfimg.dev0.ctx0",
        ELF_IMG,
        cubin(&[(KERNEL, 0, 0x180)]),
        modtbl,
        1,
        0,
        0,
    );
    let grid = Fields::new(pick(GRID_SIZE))
        .u64(0, GRID)
        .u64(8, CONTEXT)
        .u64(16, 0x5555_0000_4000)
        .u64(24, KERNEL_ENTRY)
        .u64(32, MODULE)
        .u64(40, 0)
        .u64(48, 0x210)
        .u32(56, 2)
        .u32(60, 0)
        .u32(64, 2)
        .u32(68, 16)
        .dim(72, (2, 1, 1))
        .dim(84, (64, 1, 1))
        .u32(96, 1)
        .u32(100, 0x251)
        .dim(104, (1, 1, 1))
        .dim(120, (2, 1, 1));
    let gridtbl = b.table(".cudbg.gridtbl.dev0", GRID_TABLE, &[grid], devtbl, 0);
    b.section(
        ".cudbg.param.dev0.grid0",
        PARAM_MEM,
        0x7f24_b5e0_0000u64.to_le_bytes().to_vec(),
        gridtbl,
        0,
        0,
        0x7f24_c228_0210,
    );
    b.table(
        ".cudbg.cbankstbl.dev0.grid0",
        CB_TABLE,
        &[
            Fields::new(16)
                .u64(0, 0x7f24_c228_0000)
                .u32(8, 0x300)
                .u32(12, 0),
            Fields::new(16)
                .u64(0, 0x7f24_c201_0000)
                .u32(8, 0x900)
                .u32(12, 1),
        ],
        gridtbl,
        0,
    );
    let sms: Vec<Fields> = (0..SMS)
        .map(|sm| {
            let f = Fields::new(pick(SM_SIZE)).u32(0, sm);
            if sm == FAULT_SM {
                let msg = b.string("misaligned store");
                f.u32(8, 6).u32(12, 1).u64(16, ERROR_PC).u64(40, msg)
            } else {
                f
            }
        })
        .collect();
    let smtbl = b.table(".cudbg.smtbl.dev0", SM_TABLE, &sms, devtbl, 0);
    for sm in 0..SMS {
        let blocks: Vec<Fields> = match sm {
            2 => vec![Fields::new(pick(CTA_SIZE)).u64(0, GRID).dim(8, (0, 0, 0))],
            FAULT_SM => vec![
                Fields::new(pick(CTA_SIZE))
                    .u64(0, GRID)
                    .dim(8, (1, 0, 0))
                    .dim(24, (1, 0, 0))
                    .dim(40, (1, 1, 1)),
            ],
            _ => Vec::new(),
        };
        let entsize = pick(CTA_SIZE) as u64;
        let data: Vec<u8> = blocks.iter().flat_map(|e| e.0.clone()).collect();
        let ctatbl = b.section(
            &format!(".cudbg.ctatbl.dev0.sm{sm}"),
            CTA_TABLE,
            data,
            smtbl,
            sm,
            entsize,
            0,
        );
        if sm == 2 {
            // One warp, one valid lane, no registers: the minimum.
            let w = Fields::new(pick(WARP_SIZE)).u32(8, 0).u32(12, 1).u32(16, 1);
            let wptbl = b.table(".cudbg.wptbl.dev0.sm2.cta0", WP_TABLE, &[w], ctatbl, 0);
            let l = Fields::new(pick(LANE_SIZE))
                .u64(0, KERNEL_ENTRY + 0x40)
                .u64(8, 0x40)
                .u32(16, 0)
                .dim(20, (0, 0, 0));
            b.table(".cudbg.lntbl.dev0.sm2.cta0.wp0", LN_TABLE, &[l], wptbl, 0);
        }
        if sm != FAULT_SM {
            continue;
        }
        let shared: Vec<u32> = (0..64).map(|t| 0x5000 + 0x100 + t).collect();
        b.section(
            ".cudbg.shared.dev0.sm5.cta0",
            SHARED_MEM,
            words(&shared),
            ctatbl,
            0,
            0,
            SHARED_BASE,
        );
        // Warp 2: lanes 0..32 valid, lanes 16.. diverged into helper(). Warp 3: only lane 5 valid (it faulted).
        let warps = [
            Fields::new(pick(WARP_SIZE))
                .u32(8, 2)
                .u32(12, 0xffff_ffff)
                .u32(16, 0x0000_ffff)
                .u32(32, 16)
                .u32(40, 0x400)
                .u32(52, 0xffff_ffff),
            Fields::new(pick(WARP_SIZE))
                .u64(0, ERROR_PC)
                .u32(8, FAULT_WARP)
                .u32(12, 1 << FAULT_LANE)
                .u32(16, 1 << FAULT_LANE)
                .u32(24, 1)
                .u32(32, 16)
                .u32(40, 0x400)
                .u32(52, 1 << FAULT_LANE)
                .u32(56, !(1u32 << FAULT_LANE)),
        ];
        let wptbl = b.table(".cudbg.wptbl.dev0.sm5.cta0", WP_TABLE, &warps, ctatbl, 0);
        for (w, warp_id) in [(0u32, 2u32), (1, FAULT_WARP)] {
            b.section(
                &format!(".cudbg.uregs.dev0.sm5.cta0.wp{w}"),
                DEV_UREGS,
                words(&[warp_id, 0xabcd]),
                wptbl,
                w,
                4,
                0,
            );
            b.section(
                &format!(".cudbg.upred.dev0.sm5.cta0.wp{w}"),
                DEV_UPRED,
                words(&[0, 1]),
                wptbl,
                w,
                4,
                0,
            );
            b.section(
                &format!(".cudbg.cbu_bar.dev0.sm5.cta0.wp{w}"),
                CBU_BAR,
                words(&[0; 16]),
                wptbl,
                w,
                4,
                0,
            );
        }
        let lanes_of_warp2: Vec<Fields> = (0..32u32)
            .map(|ln| {
                let pc = if ln < 16 {
                    KERNEL_ENTRY + 0x60
                } else {
                    HELPER_PC
                };
                let entry = if ln < 16 { KERNEL_ENTRY } else { HELPER_ENTRY };
                Fields::new(pick(LANE_SIZE))
                    .u64(0, pc)
                    .u64(8, pc - entry)
                    .u32(16, ln)
                    .dim(20, (ln, 0, 0))
                    .u32(36, u32::from(ln >= 16))
                    .u32(48, 1)
            })
            .collect();
        let ln2 = b.table(
            ".cudbg.lntbl.dev0.sm5.cta0.wp0",
            LN_TABLE,
            &lanes_of_warp2,
            wptbl,
            0,
        );
        let fault = Fields::new(pick(LANE_SIZE))
            .u64(0, FAULT_PC)
            .u64(8, FAULT_PC - KERNEL_ENTRY)
            .u32(16, FAULT_LANE)
            .dim(20, (32 + FAULT_LANE, 0, 0))
            .u32(32, 6)
            .u32(48, 1);
        let ln3 = b.table(
            ".cudbg.lntbl.dev0.sm5.cta0.wp1",
            LN_TABLE,
            &[fault],
            wptbl,
            1,
        );
        // Lane 20 of warp 2 (in helper) has a call stack of one frame.
        b.table(
            ".cudbg.bt.dev0.sm5.cta0.wp0.ln20",
            BT,
            &[Fields::new(24)
                .u64(0, 0x70)
                .u64(8, KERNEL_ENTRY + 0x70)
                .u32(16, 1)],
            ln2,
            20,
        );
        b.section(
            ".cudbg.regs.dev0.sm5.cta0.wp1.ln0",
            DEV_REGS,
            words(&[1, 0x00ff_fdc0, 0xb5e0_0000, 0x7f24, 0, 7]),
            ln3,
            0,
            4,
            0,
        );
        b.section(
            ".cudbg.pred.dev0.sm5.cta0.wp1.ln0",
            DEV_PRED,
            words(&[1, 0, 0, 0, 0, 0, 0, 1]),
            ln3,
            0,
            4,
            0,
        );
        b.table(".cudbg.bt.dev0.sm5.cta0.wp1.ln0", BT, &[], ln3, 0);
        let v = 0x5000 + 0x100 + 32 + FAULT_LANE;
        let local: Vec<u32> = (0..16).map(|i| v + i).collect();
        b.section(
            ".cudbg.local.dev0.sm5.cta0.wp1.ln0",
            LOCAL_MEM,
            words(&local),
            ln3,
            0,
            0,
            LOCAL_BASE,
        );
    }
    b.section(
        ".cudbg.global.0",
        GLOBAL_MEM,
        (0u8..=255).collect(),
        0,
        0,
        0,
        GLOBAL_BASE,
    );
    let generator = b.string("UD");
    let meta = Fields::new(32)
        .u64(0, generator)
        .u32(8, 580)
        .u32(12, 159)
        .u32(16, 13)
        .u32(20, 0)
        .u32(24, 0x21)
        .u32(28, 1_795_419_286);
    b.section(".cudbg.meta", META_DATA, meta.0, 0, 0, 0, 0);
    b.finish()
}
