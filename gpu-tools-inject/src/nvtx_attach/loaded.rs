//! The modules loaded in this process as the dynamic loader lists them (`dl_iterate_phdr`): each one's name, load
//! bias and program headers as mapped; what its segments allow at an address; and a hold that keeps it loaded
//! while its NVTX state is routed.

use std::ffi::{CStr, c_int, c_void};
use std::path::{Path, PathBuf};

use super::elf::{PF_W, PF_X, PT_LOAD, ProgramHeader};
use super::state::Segments;
pub(super) use crate::module_hold::Hold;

/// `PT_GNU_RELRO`: the part of a writable segment the loader makes read-only after relocation.
const PT_GNU_RELRO: u32 = 0x6474_e552;

/// One loaded module (the executable or a shared object), as the loader had it when listed.
#[derive(Debug, Clone)]
pub(super) struct LoadedModule {
    /// The loader's name for it: the path it was loaded from; empty for the executable.
    pub(super) name: String,
    /// What its addresses in the file's layout are moved by.
    pub(super) bias: u64,
    /// Its program headers as mapped.
    pub(super) program_headers: Vec<ProgramHeader>,
}

/// Every module loaded now, the executable first.
pub(super) fn loaded_modules() -> Vec<LoadedModule> {
    let mut out: Vec<LoadedModule> = Vec::new();
    // SAFETY: `collect` only reads the entry the loader passes for each call and pushes to `out`, which outlives
    // the call.
    unsafe { libc::dl_iterate_phdr(Some(collect), (&raw mut out).cast()) };
    out
}

/// `dl_iterate_phdr`'s callback: copies one entry. Called under the loader's lock; it takes no lock of its own
/// and never unwinds into the loader.
unsafe extern "C" fn collect(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    data: *mut c_void,
) -> c_int {
    let copied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: the loader passes a valid entry for the call; `data` is the vector `loaded_modules` passed.
        let (info, out) = unsafe { (&*info, &mut *data.cast::<Vec<LoadedModule>>()) };
        let name = if info.dlpi_name.is_null() {
            String::new()
        } else {
            // SAFETY: the loader's NUL-terminated name of the module, valid for the call.
            unsafe { CStr::from_ptr(info.dlpi_name) }
                .to_string_lossy()
                .into_owned()
        };
        let headers = if info.dlpi_phdr.is_null() {
            &[][..]
        } else {
            // SAFETY: the loader's array of `dlpi_phnum` program headers of the mapped module.
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
        };
        out.push(LoadedModule {
            name,
            bias: info.dlpi_addr,
            program_headers: headers
                .iter()
                .map(|p| ProgramHeader {
                    p_type: p.p_type,
                    flags: p.p_flags,
                    offset: p.p_offset,
                    vaddr: p.p_vaddr,
                    filesz: p.p_filesz,
                    memsz: p.p_memsz,
                })
                .collect(),
        });
    }));
    match copied {
        Ok(()) => 0,
        Err(payload) => {
            // Dropping a panic payload could panic again, here inside the loader.
            std::mem::forget(payload);
            1
        }
    }
}

impl LoadedModule {
    /// The file it was loaded from; the executable's through `/proc/self/exe` (its name is empty).
    pub(super) fn file(&self) -> PathBuf {
        if self.name.is_empty() {
            PathBuf::from("/proc/self/exe")
        } else {
            PathBuf::from(&self.name)
        }
    }

    /// Whether a file is expected behind it: not for the kernel's vDSO, named without a path.
    pub(super) fn has_file(&self) -> bool {
        self.name.is_empty() || self.name.contains('/')
    }

    /// Its file name, as a notice names it.
    pub(super) fn short_name(&self) -> String {
        let path = if self.name.is_empty() {
            std::fs::read_link("/proc/self/exe").unwrap_or_else(|_| PathBuf::from("the executable"))
        } else {
            PathBuf::from(&self.name)
        };
        path.file_name()
            .unwrap_or(path.as_os_str())
            .to_string_lossy()
            .into_owned()
    }

    /// The process's address range `[start, end)` of a program header.
    fn range(&self, p: &ProgramHeader) -> (u64, u64) {
        let start = self.bias.wrapping_add(p.vaddr);
        (start, start.saturating_add(p.memsz))
    }

    /// Keeps the module loaded until the hold is dropped (`dlopen` of the loaded copy, checked to be this one).
    pub(super) fn hold(&self) -> Result<Hold, String> {
        crate::module_hold::hold(&self.name, self.bias)
    }
}

impl Segments for LoadedModule {
    fn executes(&self, address: u64) -> bool {
        self.program_headers.iter().any(|p| {
            let (start, end) = self.range(p);
            p.p_type == PT_LOAD && p.flags & PF_X != 0 && (start..end).contains(&address)
        })
    }

    fn writable(&self, address: u64, len: u64) -> bool {
        let Some(last) = address.checked_add(len) else {
            return false;
        };
        let inside = self.program_headers.iter().any(|p| {
            let (start, end) = self.range(p);
            p.p_type == PT_LOAD && p.flags & PF_W != 0 && start <= address && last <= end
        });
        let relro = self.program_headers.iter().any(|p| {
            let (start, end) = self.range(p);
            p.p_type == PT_GNU_RELRO && address < end && start < last
        });
        inside && !relro
    }
}

/// The file name and the load address of the module that holds `address`, as the loader says (`dladdr`).
pub(super) fn module_at(address: usize) -> Option<(usize, String)> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only looks the address up and fills `info`.
    if unsafe { libc::dladdr(address as *const c_void, info.as_mut_ptr()) } == 0 {
        return None;
    }
    // SAFETY: a successful dladdr filled the struct.
    let info = unsafe { info.assume_init() };
    let name = if info.dli_fname.is_null() {
        String::new()
    } else {
        // SAFETY: the loader's NUL-terminated path of a loaded module.
        let path = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy();
        Path::new(path.as_ref())
            .file_name()
            .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned())
    };
    Some((info.dli_fbase as usize, name))
}
