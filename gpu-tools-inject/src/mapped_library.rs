//! A library the process maps already, found without loading anything (`RTLD_NOLOAD`: no constructor runs), and
//! its symbols: how the library reaches the driver's and CUPTI's functions that the crate's tables lack.

use std::ffi::{CStr, c_void};

/// A handle of a library that was mapped when it was found; kept (never `dlclose`d), as the crate keeps the
/// vendor libraries for the process.
pub(crate) struct MappedLibrary(*mut c_void);

impl MappedLibrary {
    /// The library at `path`, if the process maps it.
    pub(crate) fn find(path: &CStr) -> Option<MappedLibrary> {
        // SAFETY: a NUL-terminated path; RTLD_NOLOAD only returns a copy already mapped, so nothing is loaded and no
        // constructor runs.
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        (!handle.is_null()).then_some(MappedLibrary(handle))
    }

    /// The address of `name` in it.
    pub(crate) fn symbol(&self, name: &CStr) -> Option<*mut c_void> {
        // SAFETY: a live handle (never closed) and a NUL-terminated name.
        let p = unsafe { libc::dlsym(self.0, name.as_ptr()) };
        (!p.is_null()).then_some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapped_library_gives_its_symbols_and_an_unmapped_one_is_not_loaded() {
        let libc_so = MappedLibrary::find(c"libc.so.6").expect("libc is mapped");
        assert!(libc_so.symbol(c"getpid").is_some());
        assert!(libc_so.symbol(c"no_such_symbol_here").is_none());
        assert!(MappedLibrary::find(c"libgpu_tools_never_mapped.so").is_none());
    }
}
