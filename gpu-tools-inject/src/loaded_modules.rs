//! The modules loaded in this process as the dynamic loader lists them (`dl_iterate_phdr`): each one's name, load
//! bias and program headers as mapped, listed under the loader's lock and read outside it; and a hold that keeps a
//! module loaded while this library reads or writes its memory (its NVTX state, its import slots).

use std::ffi::{CStr, CString, c_int, c_void};
use std::path::{Path, PathBuf};

/// A program header (`Elf64_Phdr`) without its physical address and alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProgramHeader {
    pub(crate) p_type: u32,
    pub(crate) flags: u32,
    pub(crate) offset: u64,
    pub(crate) vaddr: u64,
    pub(crate) filesz: u64,
    pub(crate) memsz: u64,
}

/// One loaded module (the executable or a shared object), as the loader had it when listed.
#[derive(Debug, Clone)]
pub(crate) struct LoadedModule {
    /// The loader's name for it: the path it was loaded from; empty for the executable.
    pub(crate) name: String,
    /// What its addresses in the file's layout are moved by.
    pub(crate) bias: u64,
    /// Its program headers as mapped.
    pub(crate) program_headers: Vec<ProgramHeader>,
}

/// Every module loaded now, the executable first.
pub(crate) fn loaded_modules() -> Vec<LoadedModule> {
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
    pub(crate) fn file(&self) -> PathBuf {
        if self.name.is_empty() {
            PathBuf::from("/proc/self/exe")
        } else {
            PathBuf::from(&self.name)
        }
    }

    /// Whether a file is expected behind it: not for the kernel's vDSO, named without a path.
    pub(crate) fn has_file(&self) -> bool {
        self.name.is_empty() || self.name.contains('/')
    }

    /// Its file name, as a notice names it.
    pub(crate) fn short_name(&self) -> String {
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
    pub(crate) fn range(&self, p: &ProgramHeader) -> (u64, u64) {
        let start = self.bias.wrapping_add(p.vaddr);
        (start, start.saturating_add(p.memsz))
    }

    /// Keeps the module loaded until the hold is dropped (`dlopen` of the loaded copy, checked to be this one).
    pub(crate) fn hold(&self) -> Result<Hold, String> {
        if self.name.is_empty() {
            // The executable is never unloaded.
            return Ok(Hold(std::ptr::null_mut()));
        }
        let name = CString::new(self.name.as_bytes()).map_err(|_| "its name holds a NUL")?;
        // SAFETY: RTLD_NOLOAD only adds a reference to a module already loaded, running no initialiser.
        let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if handle.is_null() {
            return Err("it was unloaded meanwhile".into());
        }
        let hold = Hold(handle);
        let mut map: *mut c_void = std::ptr::null_mut();
        // SAFETY: RTLD_DI_LINKMAP writes the module's `struct link_map *` through a pointer to a pointer.
        let found = unsafe { libc::dlinfo(handle, libc::RTLD_DI_LINKMAP, (&raw mut map).cast()) };
        if found != 0 || map.is_null() {
            return Err("the loader does not describe it".into());
        }
        // SAFETY: `struct link_map` begins with `ElfW(Addr) l_addr`, the load bias (link.h), of a module held.
        let bias = unsafe { map.cast::<u64>().read() };
        if bias != self.bias {
            return Err("another module of the same name was loaded meanwhile".into());
        }
        Ok(hold)
    }
}

/// A reference on a loaded module; dropping it lets the module go (`dlclose`), when the program closed it
/// meanwhile. Null for the executable.
#[derive(Debug)]
pub(crate) struct Hold(*mut c_void);

// SAFETY: a loader handle may be closed from any thread.
unsafe impl Send for Hold {}

impl Drop for Hold {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: a handle of our own dlopen, closed once.
            unsafe { libc::dlclose(self.0) };
        }
    }
}

/// The load address and the loader's path of the module that holds `address` (`dladdr`).
pub(crate) fn module_of(address: usize) -> Option<(usize, String)> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only looks the address up and fills `info`.
    if unsafe { libc::dladdr(address as *const c_void, info.as_mut_ptr()) } == 0 {
        return None;
    }
    // SAFETY: a successful dladdr filled the struct.
    let info = unsafe { info.assume_init() };
    let path = if info.dli_fname.is_null() {
        String::new()
    } else {
        // SAFETY: the loader's NUL-terminated path of a loaded module.
        unsafe { CStr::from_ptr(info.dli_fname) }
            .to_string_lossy()
            .into_owned()
    };
    Some((info.dli_fbase as usize, path))
}

/// The file name and the load address of the module that holds `address`, as the loader says (`dladdr`).
pub(crate) fn module_at(address: usize) -> Option<(usize, String)> {
    let (base, path) = module_of(address)?;
    let name = Path::new(&path)
        .file_name()
        .map_or_else(|| path.clone(), |n| n.to_string_lossy().into_owned());
    Some((base, name))
}
