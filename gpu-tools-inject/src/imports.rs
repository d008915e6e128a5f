//! Redirecting other objects' calls of a few functions to ours: their import slots (GOT entries) are rewritten.
//!
//! A shared object calls a function of another one through a slot of its own global offset table, which the
//! loader fills with the function's address (at load time, or at the first call with lazy binding). Each loaded
//! object's dynamic section lists its relocations; those of type `JUMP_SLOT` (calls through the PLT) and
//! `GLOB_DAT` (calls without a PLT, `-fno-plt`) that name a wanted symbol give the slots. Writing our function's
//! address there sends that object's later calls to us; writing back what was there restores them exactly. The
//! slot may sit in a page the loader made read-only after relocation (RELRO); it is made writable for the write
//! and given its protection back. An 8-byte aligned store is atomic on x86-64: a thread calling meanwhile takes
//! either the old function or the new one.
//!
//! Objects loaded later keep their own slots (not redirected); the objects named by `skip` are left alone (the
//! library that defines the functions, and our own).

use std::ffi::{CStr, c_int, c_void};
use std::path::Path;

use crate::loaded_modules::LoadedModule;

/// `DT_*` tags of the dynamic section (ELF gABI).
const DT_NULL: i64 = 0;
const DT_PLTRELSZ: i64 = 2;
const DT_STRTAB: i64 = 5;
const DT_SYMTAB: i64 = 6;
const DT_RELA: i64 = 7;
const DT_RELASZ: i64 = 8;
const DT_STRSZ: i64 = 10;
const DT_JMPREL: i64 = 23;
/// x86-64 relocation types.
const R_X86_64_GLOB_DAT: u64 = 6;
const R_X86_64_JUMP_SLOT: u64 = 7;
/// `sizeof(Elf64_Rela)`, `sizeof(Elf64_Sym)`.
const RELA_SIZE: usize = 24;
const SYM_SIZE: usize = 24;
/// No dynamic section lists more entries than this; a longer walk means a damaged one.
const MAX_DYNAMIC_ENTRIES: usize = 4096;

/// One rewritten slot and what it held.
#[derive(Debug)]
pub struct Redirect {
    /// The slot's address.
    slot: usize,
    /// What the slot held before.
    original: usize,
    /// What was written.
    replacement: usize,
    /// The object the slot belongs to, and the symbol, for the log.
    object: String,
    symbol: &'static str,
}

impl Redirect {
    /// The object whose calls go to us now.
    pub fn object(&self) -> &str {
        &self.object
    }

    /// The function redirected.
    pub fn symbol(&self) -> &'static str {
        self.symbol
    }
}

/// A slot found in a loaded object: where, and which wanted function it imports.
struct Found {
    slot: usize,
    wanted: usize,
    object: String,
}

/// What the scan of the listed objects collects.
struct Walk<'a> {
    wanted: &'a [(&'static str, usize)],
    found: Vec<Found>,
}

/// Rewrites, in every loaded object that `skip` does not name, each import slot of a function in `wanted` (name,
/// replacement address) so that it holds the replacement. Returns the slots rewritten, to give to [`restore`].
///
/// # Safety
///
/// Each replacement must be a function with the same signature and calling convention as the one it replaces,
/// valid for as long as the slot holds it (until [`restore`], or for the process's life).
pub unsafe fn redirect(
    wanted: &[(&'static str, usize)],
    skip: &dyn Fn(&str) -> bool,
) -> Vec<Redirect> {
    // Listed under the loader's lock, scanned outside it: the relocation tables of a PyTorch process take
    // milliseconds to read (15-39 ms on an H200 host), and a thread of the program or of CUPTI that needs the loader
    // meanwhile would wait that long.
    let started = std::time::Instant::now();
    let listed = crate::loaded_modules::loaded_modules();
    let under_lock = started.elapsed();
    let mut walk = Walk {
        wanted,
        found: Vec::new(),
    };
    // Each scanned object is held loaded until its slots are written.
    let mut holds = Vec::new();
    for object in listed.iter().filter(|o| !skip(&o.name)) {
        match object.hold() {
            Ok(hold) => holds.push(hold),
            Err(e) => {
                log::debug!("{}: not scanned for import slots: {e}", object.name);
                continue;
            }
        }
        // SAFETY: the object is loaded (held just above), as listed.
        unsafe { scan_object(object, &mut walk) };
    }
    log::debug!(
        "{} loaded objects listed in {:.2} ms under the loader's lock, scanned in {:.2} ms",
        listed.len(),
        under_lock.as_secs_f64() * 1e3,
        started.elapsed().saturating_sub(under_lock).as_secs_f64() * 1e3
    );
    let mut done = Vec::new();
    for f in walk.found {
        let Some(&(symbol, replacement)) = wanted.get(f.wanted) else {
            continue;
        };
        // SAFETY: the slot is a GOT entry of a loaded object, found from its relocations.
        match unsafe { write_slot(f.slot, replacement) } {
            Ok(original) if original == replacement => {}
            Ok(original) => done.push(Redirect {
                slot: f.slot,
                original,
                replacement,
                object: f.object,
                symbol,
            }),
            Err(e) => log::warn!("{symbol} in {}: slot not rewritten: {e}", f.object),
        }
    }
    // Written: the objects may go now, as the program decides.
    drop(holds);
    done
}

/// Puts back what each slot held, where it still holds our replacement (the object may have been unloaded and
/// its memory reused, in which case nothing is written).
pub fn restore(redirects: Vec<Redirect>) {
    for r in redirects {
        if !slot_is_mapped(r.slot) {
            continue;
        }
        // SAFETY: a slot of a loaded object (checked mapped just above); an aligned 8-byte read.
        let now = unsafe { std::ptr::read_volatile(r.slot as *const usize) };
        if now != r.replacement {
            continue;
        }
        // SAFETY: as in `redirect`: the slot is a GOT entry, and the original a function of the right type.
        if let Err(e) = unsafe { write_slot(r.slot, r.original) } {
            log::warn!("{} in {}: slot not restored: {e}", r.symbol, r.object);
        }
    }
}

/// Collects the wanted slots of one object.
///
/// # Safety
///
/// `object` is loaded (held), at the bias and with the program headers it was listed with.
unsafe fn scan_object(object: &LoadedModule, walk: &mut Walk<'_>) {
    let (base, name) = (object.bias as usize, &object.name);
    let Some(dynamic) = object
        .program_headers
        .iter()
        .find(|h| h.p_type == libc::PT_DYNAMIC)
    else {
        return;
    };
    let dynamic = base.wrapping_add(dynamic.vaddr as usize) as *const [i64; 2];
    let (mut symtab, mut strtab, mut strsz) = (0usize, 0usize, 0usize);
    let (mut jmprel, mut pltrelsz, mut rela, mut relasz) = (0usize, 0usize, 0usize, 0usize);
    // The loader stores most addresses of the dynamic section relocated; a value below the base was not.
    let address = |v: i64| {
        let v = v as usize;
        if v < base { v.wrapping_add(base) } else { v }
    };
    for i in 0..MAX_DYNAMIC_ENTRIES {
        // SAFETY: inside the object's dynamic section, which ends with DT_NULL.
        let [tag, value] = unsafe { dynamic.add(i).read() };
        match tag {
            DT_NULL => break,
            DT_SYMTAB => symtab = address(value),
            DT_STRTAB => strtab = address(value),
            DT_STRSZ => strsz = value as usize,
            DT_JMPREL => jmprel = address(value),
            DT_PLTRELSZ => pltrelsz = value as usize,
            DT_RELA => rela = address(value),
            DT_RELASZ => relasz = value as usize,
            _ => {}
        }
    }
    if symtab == 0 || strtab == 0 {
        return;
    }
    for (table, size) in [(jmprel, pltrelsz), (rela, relasz)] {
        if table == 0 {
            continue;
        }
        for i in 0..size / RELA_SIZE {
            // SAFETY: the relocation table the dynamic section names, `size` bytes long.
            let [offset, rinfo, _addend] = unsafe { (table as *const [u64; 3]).add(i).read() };
            let kind = rinfo & 0xffff_ffff;
            if kind != R_X86_64_JUMP_SLOT && kind != R_X86_64_GLOB_DAT {
                continue;
            }
            let sym = (rinfo >> 32) as usize;
            // SAFETY: the symbol table entry the relocation names; st_name is its first 4 bytes.
            let st_name = unsafe {
                (symtab as *const u8)
                    .add(sym * SYM_SIZE)
                    .cast::<u32>()
                    .read_unaligned()
            } as usize;
            if st_name >= strsz {
                continue;
            }
            // SAFETY: a NUL-terminated name inside the string table (`st_name` < its size).
            let symbol = unsafe { CStr::from_ptr((strtab as *const libc::c_char).add(st_name)) };
            let Some(index) = walk
                .wanted
                .iter()
                .position(|(w, _)| w.as_bytes() == symbol.to_bytes())
            else {
                continue;
            };
            walk.found.push(Found {
                slot: base.wrapping_add(offset as usize),
                wanted: index,
                object: name.clone(),
            });
        }
    }
}

/// Writes `value` into the slot, making its page writable for the write if it is not; returns what it held.
///
/// # Safety
///
/// `slot` must be an aligned, mapped GOT entry.
unsafe fn write_slot(slot: usize, value: usize) -> std::io::Result<usize> {
    if slot % std::mem::align_of::<usize>() != 0 {
        return Err(std::io::Error::other("misaligned slot"));
    }
    let protection = page_protection(slot)?;
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let start = slot & !(page - 1);
    let writable = protection & libc::PROT_WRITE != 0;
    if !writable {
        // SAFETY: the page holds the slot and is mapped; only its protection changes.
        if unsafe { libc::mprotect(start as *mut c_void, page, protection | libc::PROT_WRITE) } != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    let cell = slot as *mut usize;
    // SAFETY: an aligned slot, writable now.
    let original = unsafe { std::ptr::read_volatile(cell) };
    // SAFETY: as above.
    unsafe { std::ptr::write_volatile(cell, value) };
    if !writable {
        // SAFETY: the same page; its protection as it was.
        unsafe { libc::mprotect(start as *mut c_void, page, protection) };
    }
    Ok(original)
}

/// The protection (`PROT_*`) of the mapping that holds `address`, from `/proc/self/maps`.
fn page_protection(address: usize) -> std::io::Result<c_int> {
    let maps = gpu_tools::linux::procfs::Process::current().maps()?;
    let m = maps
        .iter()
        .find(|m| m.contains(address as u64))
        .ok_or_else(|| std::io::Error::other("slot not mapped"))?;
    let mut prot = 0;
    if m.permissions[0] == b'r' {
        prot |= libc::PROT_READ;
    }
    if m.permissions[1] == b'w' {
        prot |= libc::PROT_WRITE;
    }
    if m.is_executable() {
        prot |= libc::PROT_EXEC;
    }
    Ok(prot)
}

fn slot_is_mapped(slot: usize) -> bool {
    page_protection(slot).is_ok_and(|p| p & libc::PROT_READ != 0)
}

/// Whether `object` (a loader's object name) is the file `path`, or the library of that file name.
pub fn same_object(object: &str, path: &Path) -> bool {
    let object = Path::new(object);
    object == path || (object.file_name().is_some() && object.file_name() == path.file_name())
}

/// The objects whose CUPTI calls are never redirected: CUPTI and the libraries it calls, the driver, the vDSO,
/// and this library. Given to [`redirect`] as its `skip`.
pub fn not_cupti_or_this_library(object: &str) -> bool {
    let name = Path::new(object)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.starts_with("libcupti")
        || name.starts_with("libnvperf")
        || name.starts_with("libcuda.so")
        || name.starts_with("linux-vdso")
        || own_object().is_some_and(|o| same_object(object, Path::new(&o)))
}

/// The file this library was loaded from, as the loader names it.
fn own_object() -> Option<String> {
    crate::loaded_modules::module_of(own_object as *const () as usize)
        .map(|(_, path)| path)
        .filter(|path| !path.is_empty())
}
