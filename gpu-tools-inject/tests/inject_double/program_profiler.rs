//! The stand-in profiler inside the program (`gpu-tools-testing/doubles/program_profiler.c`), which the children of
//! the coexistence, scheduled, cycles and flight recorder tests load.

use crate::common;

/// The stand-in profiler inside the program (`gpu-tools-testing/doubles/program_profiler.c`), loaded before the library
/// starts, as PyTorch is loaded before its first `cuInit`.
pub(crate) struct ProgramProfiler {
    pub(crate) lib: libloading::Library,
}

impl ProgramProfiler {
    pub(crate) fn start(&self, kinds: &[u32]) -> i32 {
        // SAFETY: `int pp_start(const uint32_t *kinds, int n)`, with a live slice.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn(*const u32, i32) -> i32>(b"pp_start\0")
                .unwrap();
            f(kinds.as_ptr(), kinds.len() as i32)
        }
    }

    pub(crate) fn stop(&self, kinds: &[u32]) -> i32 {
        // SAFETY: `int pp_stop(const uint32_t *kinds, int n)`, with a live slice.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn(*const u32, i32) -> i32>(b"pp_stop\0")
                .unwrap();
            f(kinds.as_ptr(), kinds.len() as i32)
        }
    }

    pub(crate) fn subscribe(&self) -> i32 {
        // SAFETY: `int pp_subscribe(void)`.
        unsafe {
            self.lib
                .get::<unsafe extern "C" fn() -> i32>(b"pp_subscribe\0")
                .unwrap()()
        }
    }

    pub(crate) fn count(&self, kind: u32) -> u64 {
        // SAFETY: `uint64_t pp_count(uint32_t kind)`.
        unsafe {
            self.lib
                .get::<unsafe extern "C" fn(u32) -> u64>(b"pp_count\0")
                .unwrap()(kind)
        }
    }

    /// The size of the buffers it lends CUPTI from now on.
    pub(crate) fn buffer_bytes(&self, bytes: usize) {
        // SAFETY: `void pp_buffer_bytes(size_t bytes)`.
        unsafe {
            self.lib
                .get::<unsafe extern "C" fn(usize)>(b"pp_buffer_bytes\0")
                .unwrap()(bytes)
        }
    }

    /// Kernel records it was handed more than once.
    pub(crate) fn repeats(&self) -> u64 {
        // SAFETY: `uint64_t pp_repeats(void)`.
        unsafe {
            self.lib
                .get::<unsafe extern "C" fn() -> u64>(b"pp_repeats\0")
                .unwrap()()
        }
    }

    /// Whether it was handed a kernel record of correlation id `id`.
    pub(crate) fn seen(&self, id: u32) -> bool {
        // SAFETY: `int pp_seen(uint32_t id)`.
        unsafe {
            self.lib
                .get::<unsafe extern "C" fn(u32) -> i32>(b"pp_seen\0")
                .unwrap()(id)
                != 0
        }
    }

    /// From now on it behaves as Kineto does with its buffers (`pp_kineto`).
    pub(crate) fn kineto(&self) {
        // SAFETY: `void pp_kineto(int on)`.
        unsafe {
            self.lib
                .get::<unsafe extern "C" fn(i32)>(b"pp_kineto\0")
                .unwrap()(1)
        }
    }

    /// Kernel records it was handed without a start (handed out while they still ran).
    pub(crate) fn incomplete(&self) -> u64 {
        // SAFETY: `uint64_t pp_incomplete(void)`.
        unsafe {
            self.lib
                .get::<unsafe extern "C" fn() -> u64>(b"pp_incomplete\0")
                .unwrap()()
        }
    }

    /// Kernel records it was handed with a start on another clock than its own.
    pub(crate) fn foreign_clock(&self) -> u64 {
        // SAFETY: `uint64_t pp_foreign_clock(void)`.
        unsafe {
            self.lib
                .get::<unsafe extern "C" fn() -> u64>(b"pp_foreign_clock\0")
                .unwrap()()
        }
    }

    /// Completed buffers it passed over, not having lent them.
    pub(crate) fn unknown(&self) -> u64 {
        // SAFETY: `uint64_t pp_unknown(void)`.
        unsafe {
            self.lib
                .get::<unsafe extern "C" fn() -> u64>(b"pp_unknown\0")
                .unwrap()()
        }
    }

    pub(crate) fn buffers(&self) -> u64 {
        // SAFETY: `uint64_t pp_buffers(void)`.
        unsafe {
            self.lib
                .get::<unsafe extern "C" fn() -> u64>(b"pp_buffers\0")
                .unwrap()()
        }
    }
}

/// Loads the CUPTI double into the global scope, then the profiler, whose CUPTI imports bind to it.
pub(crate) fn program_profiler() -> ProgramProfiler {
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
    // SAFETY: the double's initialisers set up its own state only; kept loaded for the process.
    let cupti = unsafe {
        Library::open(
            Some(common::double_path("cupti_activity")),
            RTLD_NOW | RTLD_GLOBAL,
        )
    }
    .expect("the CUPTI double");
    std::mem::forget(cupti);
    // SAFETY: the profiler has no initialisers.
    let lib = unsafe { Library::open(Some(common::double_path("program_profiler")), RTLD_NOW) }
        .expect("the program profiler double");
    ProgramProfiler { lib: lib.into() }
}
