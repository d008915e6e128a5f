//! The live frames of a stopped thread, by the call-frame information (`.eh_frame`) of the code it runs.
//!
//! A stale word on a stack can point into any code: a scan of every word (`stack`) cannot tell it from a live
//! return address, and a thread that often calls into a library keeps such words. Unwinding walks the live
//! frames only: from the thread's registers, each frame's canonical frame address and return address follow from
//! the rules the compiler wrote for its function (x86-64: the stack pointer, the frame pointer and the return
//! address are the registers the rules here use). Where a rule cannot be followed (no call-frame information,
//! a rule on another register, an unreadable word), the walk stops and says where, so that the caller can fall
//! back to scanning the rest of the stack: never a silent pass.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, LittleEndian, ParsedEhFrameHdr, RegisterRule,
    UnwindContext, UnwindSection, X86_64,
};
use object::{Object, ObjectSection, ObjectSegment};

use crate::linux::procfs::Mapping;

/// The most frames walked: a deeper stack is not finished (said as a stop).
const MAX_FRAMES: usize = 1024;

/// One module's call-frame information, read from its file.
struct Module {
    eh_frame: Vec<u8>,
    eh_frame_address: u64,
    hdr: Option<(Vec<u8>, u64)>,
    /// Its loadable segments: (file offset, file size, virtual address), to place a mapping.
    segments: Vec<(u64, u64, u64)>,
}

/// The rules of one row: the frame address's register and offset, the return address's and the frame pointer's.
type Rules = (
    (gimli::Register, i64),
    RegisterRule<usize>,
    RegisterRule<usize>,
);

/// Where a walk ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalkEnd {
    /// At the outermost frame (its return address undefined, or zero).
    Complete,
    /// Not finished: the stack pointer of the frame it could not unwind, and why.
    Stopped {
        /// The stack pointer there: words above it were not walked.
        sp: u64,
        /// Why.
        why: String,
    },
}

/// Reads frames, keeping the modules it read.
#[derive(Default)]
pub struct Unwinder {
    modules: HashMap<PathBuf, Option<Module>>,
}

impl Unwinder {
    /// The program counters of the live frames of a thread stopped at `pc` with stack pointer `sp` and frame
    /// pointer `bp` (the innermost first), and where the walk ended. `read` reads a word of the process.
    pub fn frames(
        &mut self,
        pid: u32,
        maps: &[Mapping],
        (pc, sp, bp): (u64, u64, u64),
        read: &dyn Fn(u64) -> Option<u64>,
    ) -> (Vec<u64>, WalkEnd) {
        let (mut pc, mut sp, mut bp) = (pc, sp, bp);
        let mut pcs = vec![pc];
        let mut ctx = UnwindContext::new();
        for depth in 0..MAX_FRAMES {
            // A return address points after its call: look the caller up at the call.
            let lookup = if depth == 0 { pc } else { pc.wrapping_sub(1) };
            let stop = |why: String| WalkEnd::Stopped { sp, why };
            let Some(mapping) = maps
                .iter()
                .find(|m| m.contains(lookup) && m.is_executable())
            else {
                return (pcs, stop(format!("{lookup:#x} is in no code mapping")));
            };
            let Some(path) = mapping.path() else {
                return (pcs, stop(format!("{lookup:#x} is in anonymous code")));
            };
            let Some(module) = self.module(pid, path) else {
                return (
                    pcs,
                    stop(format!("{} has no call-frame information", path.display())),
                );
            };
            let Some(bias) = module.bias(mapping) else {
                return (pcs, stop(format!("{} is not placed", path.display())));
            };
            let rule = module.rule(lookup.wrapping_sub(bias), &mut ctx);
            let (cfa, ra, saved_bp) = match rule {
                Ok(r) => r,
                Err(e) => return (pcs, stop(format!("{}: {e}", path.display()))),
            };
            let base = match cfa.0 {
                r if r == X86_64::RSP => sp,
                r if r == X86_64::RBP => bp,
                other => {
                    return (
                        pcs,
                        stop(format!("a frame address on register {}", other.0)),
                    );
                }
            };
            let cfa = base.wrapping_add_signed(cfa.1);
            let ra = match ra {
                RegisterRule::Undefined => return (pcs, WalkEnd::Complete),
                RegisterRule::Offset(o) => match read(cfa.wrapping_add_signed(o)) {
                    Some(v) => v,
                    None => return (pcs, stop(format!("return address at {cfa:#x} unreadable"))),
                },
                other => return (pcs, stop(format!("return address rule {other:?}"))),
            };
            bp = match saved_bp {
                RegisterRule::Offset(o) => match read(cfa.wrapping_add_signed(o)) {
                    Some(v) => v,
                    None => {
                        return (
                            pcs,
                            stop(format!("saved frame pointer at {cfa:#x} unreadable")),
                        );
                    }
                },
                RegisterRule::Undefined | RegisterRule::SameValue => bp,
                other => return (pcs, stop(format!("frame pointer rule {other:?}"))),
            };
            if ra == 0 {
                return (pcs, WalkEnd::Complete);
            }
            if cfa <= sp {
                return (
                    pcs,
                    stop(format!("the frame address {cfa:#x} does not move up")),
                );
            }
            sp = cfa;
            pc = ra;
            pcs.push(pc);
        }
        let why = format!("deeper than {MAX_FRAMES} frames");
        (pcs, WalkEnd::Stopped { sp, why })
    }

    fn module(&mut self, pid: u32, path: &Path) -> Option<&Module> {
        self.modules
            .entry(path.to_path_buf())
            .or_insert_with(|| Module::read(pid, path).ok())
            .as_ref()
    }
}

impl Module {
    /// Reads the module's call-frame sections from its file (seen through the process's root, for a container).
    fn read(pid: u32, path: &Path) -> Result<Module, String> {
        let rooted =
            Path::new(&format!("/proc/{pid}/root")).join(path.strip_prefix("/").unwrap_or(path));
        let file = std::fs::File::open(&rooted)
            .or_else(|_| std::fs::File::open(path))
            .map_err(|e| e.to_string())?;
        let cache = object::ReadCache::new(file);
        let elf = object::File::parse(&cache).map_err(|e| e.to_string())?;
        let section = |name: &str| -> Option<(Vec<u8>, u64)> {
            let s = elf.section_by_name(name)?;
            Some((s.data().ok()?.to_vec(), s.address()))
        };
        let (eh_frame, eh_frame_address) = section(".eh_frame").ok_or("no .eh_frame")?;
        let hdr = section(".eh_frame_hdr");
        let segments = elf
            .segments()
            .map(|s| {
                let (offset, size) = s.file_range();
                (offset, size, s.address())
            })
            .collect();
        Ok(Module {
            eh_frame,
            eh_frame_address,
            hdr,
            segments,
        })
    }

    /// The load bias of a mapping of this module: its address less the virtual address of what it maps.
    fn bias(&self, mapping: &Mapping) -> Option<u64> {
        let (offset, _, vaddr) = self
            .segments
            .iter()
            .find(|(off, size, _)| *off <= mapping.offset && mapping.offset < off + size.max(&1))?;
        Some(
            mapping
                .start
                .wrapping_sub(vaddr.wrapping_add(mapping.offset - offset)),
        )
    }

    /// The rules at `address` (the module's virtual address): the frame address's register and offset, and the
    /// rules of the return address and the frame pointer.
    fn rule(&self, address: u64, ctx: &mut UnwindContext<usize>) -> Result<Rules, String> {
        let eh_frame = EhFrame::new(&self.eh_frame, LittleEndian);
        let mut bases = BaseAddresses::default().set_eh_frame(self.eh_frame_address);
        let parsed: Option<ParsedEhFrameHdr<_>> = match &self.hdr {
            Some((data, at)) => {
                bases = bases.set_eh_frame_hdr(*at);
                EhFrameHdr::new(data, LittleEndian).parse(&bases, 8).ok()
            }
            None => None,
        };
        let fde = match parsed.as_ref().and_then(|p| p.table()) {
            Some(table) => table
                .fde_for_address(&eh_frame, &bases, address, EhFrame::cie_from_offset)
                .map_err(|e| format!("no frame description for {address:#x}: {e}"))?,
            None => eh_frame
                .fde_for_address(&bases, address, EhFrame::cie_from_offset)
                .map_err(|e| format!("no frame description for {address:#x}: {e}"))?,
        };
        let row = fde
            .unwind_info_for_address(&eh_frame, &bases, ctx, address)
            .map_err(|e| format!("no unwind row for {address:#x}: {e}"))?;
        let cfa = match row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } => (*register, *offset),
            CfaRule::Expression(_) => return Err("a frame address by expression".into()),
        };
        Ok((cfa, row.register(X86_64::RA), row.register(X86_64::RBP)))
    }
}
