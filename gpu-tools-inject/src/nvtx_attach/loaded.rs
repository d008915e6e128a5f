//! What a loaded module's segments allow at an address, for NVTX routing: the module list itself is
//! `crate::loaded_modules`.

use super::elf::{PF_W, PF_X, PT_LOAD};
use super::state::Segments;
pub(super) use crate::loaded_modules::{Hold, LoadedModule, loaded_modules, module_at};

/// `PT_GNU_RELRO`: the part of a writable segment the loader makes read-only after relocation.
const PT_GNU_RELRO: u32 = 0x6474_e552;

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
