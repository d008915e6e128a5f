//! A reference that keeps a loaded module (a shared object) loaded while this library reads or writes its memory
//! outside the loader's lock.

use std::ffi::{CString, c_void};

/// A reference on a loaded module; dropping it lets the module go (`dlclose`), when the program closed it
/// meanwhile. Null for the executable, which is never unloaded.
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

/// Keeps the module the loader named `name` (empty: the executable), loaded at `bias`, loaded until the hold is
/// dropped: `dlopen` of the loaded copy, checked to be the one at that bias.
pub(crate) fn hold(name: &str, bias: u64) -> Result<Hold, String> {
    if name.is_empty() {
        return Ok(Hold(std::ptr::null_mut()));
    }
    let name = CString::new(name.as_bytes()).map_err(|_| "its name holds a NUL")?;
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
    let loaded_at = unsafe { map.cast::<u64>().read() };
    if loaded_at != bias {
        return Err("another module of the same name was loaded meanwhile".into());
    }
    Ok(hold)
}
