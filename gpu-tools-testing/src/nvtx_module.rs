//! A loaded copy of the NVTX module double (`doubles/nvtx_module.c`: a module with NVTX v3 compiled in, its state
//! in a static `nvtxGlobals_v3`) and its calls. Each file loaded is a module of its own with its own NVTX state: a
//! copy of the double under another name is a second module.

use std::ffi::{CStr, c_char};
use std::path::Path;

/// NVTX's state of a module: FRESH, before its first NVTX call.
pub const FRESH: u32 = 0;
/// ... COMPLETE: initialised (with a tool, or without one: every function a no-op).
pub const COMPLETE: u32 = 2;
/// What `nvtxRangePushA` and `nvtxRangePop` return where no tool took them (`NVTX_NO_PUSH_POP_TRACKING`).
pub const NO_PUSH_POP_TRACKING: i32 = -2;
/// How many function slots NVTX v3's state holds (the double's, as current headers).
pub const SLOTS: i32 = 64;

/// One loaded NVTX module double.
pub struct NvtxModule {
    lib: libloading::Library,
}

macro_rules! call {
    ($self:ident, $t:ty, $name:literal) => {
        // SAFETY: the symbol has this signature in nvtx_module.c.
        *unsafe { $self.lib.get::<$t>($name) }.unwrap_or_else(|e| panic!("{e}"))
    };
}

impl NvtxModule {
    /// Loads the module at `path` (the double, or a copy of it).
    pub fn open(path: &Path) -> Result<NvtxModule, libloading::Error> {
        // SAFETY: the double has no initialisers; its NVTX state starts FRESH.
        let lib = unsafe { libloading::Library::new(path) }?;
        Ok(NvtxModule { lib })
    }

    /// `nvtxRangePushA(name)` in the module: the range's level, or [`NO_PUSH_POP_TRACKING`].
    pub fn push(&self, name: &CStr) -> i32 {
        let f = call!(
            self,
            unsafe extern "C" fn(*const c_char) -> i32,
            b"nvtx_module_push\0"
        );
        // SAFETY: a NUL-terminated string valid for the call.
        unsafe { f(name.as_ptr()) }
    }

    /// `nvtxRangePop()` in the module.
    pub fn pop(&self) -> i32 {
        let f = call!(self, unsafe extern "C" fn() -> i32, b"nvtx_module_pop\0");
        // SAFETY: no arguments.
        unsafe { f() }
    }

    /// `nvtxMarkA(name)` in the module.
    pub fn mark(&self, name: &CStr) {
        let f = call!(
            self,
            unsafe extern "C" fn(*const c_char),
            b"nvtx_module_mark\0"
        );
        // SAFETY: a NUL-terminated string valid for the call.
        unsafe { f(name.as_ptr()) }
    }

    /// The module's NVTX init state ([`FRESH`], 1 STARTED, [`COMPLETE`]).
    pub fn init_state(&self) -> u32 {
        let f = call!(
            self,
            unsafe extern "C" fn() -> u32,
            b"nvtx_module_init_state\0"
        );
        // SAFETY: a plain getter.
        unsafe { f() }
    }

    /// How many of its function slots are not NULL ([`SLOTS`] while FRESH; 0 when every call is a no-op).
    pub fn live_slots(&self) -> i32 {
        let f = call!(
            self,
            unsafe extern "C" fn() -> i32,
            b"nvtx_module_live_slots\0"
        );
        // SAFETY: a plain getter.
        unsafe { f() }
    }
}
