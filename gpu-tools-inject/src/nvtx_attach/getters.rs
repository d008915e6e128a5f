//! The export-table getters handed to the tool, one per NVTX state. NVTX's `InitializeInjectionNvtx2` takes a
//! getter without a module argument (each module passes its own `nvtxGetExportTable`), so this library has a
//! fixed set of them, each bound to one state's address for the life of the process: the tool may keep a getter
//! and call it again, and a later attach routes the same state through the same getter.

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::state::{CALLBACKS, ETID_CALLBACKS, ETID_VERSIONINFO, GetExportTable, VERSION_INFO};

/// How many states can be routed in one process's life.
pub(super) const GETTERS: usize = 64;

/// The state each getter is bound to (0: none yet).
static BOUND: [AtomicUsize; GETTERS] = [const { AtomicUsize::new(0) }; GETTERS];

/// What a module's own `nvtxGetExportTable` returns, for the state at `address`: its callbacks table, its
/// version table, or null.
fn export_table(address: usize, id: u32) -> *const c_void {
    if address == 0 {
        return std::ptr::null();
    }
    match id {
        ETID_CALLBACKS => address.wrapping_add(CALLBACKS) as *const c_void,
        ETID_VERSIONINFO => address.wrapping_add(VERSION_INFO) as *const c_void,
        _ => std::ptr::null(),
    }
}

/// Getter `I`: reads its binding and computes an address; nothing in it can panic or unwind into the tool.
extern "C" fn getter<const I: usize>(id: u32) -> *const c_void {
    let address = BOUND.get(I).map_or(0, |b| b.load(Ordering::Acquire));
    export_table(address, id)
}

macro_rules! getters {
    ($($i:literal)*) => {
        [$(getter::<$i> as GetExportTable,)*]
    };
}

static GETTER_FNS: [GetExportTable; GETTERS] = getters!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
    32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63
);

/// The getter bound to the state at `address`: the one bound to it already, else a free one, bound now. `None`
/// when every getter is bound to another state.
pub(super) fn getter_for(address: usize) -> Option<GetExportTable> {
    if address == 0 {
        return None;
    }
    if let Some((_, f)) = BOUND
        .iter()
        .zip(&GETTER_FNS)
        .find(|(b, _)| b.load(Ordering::Acquire) == address)
    {
        return Some(*f);
    }
    BOUND
        .iter()
        .zip(&GETTER_FNS)
        .find(|(b, _)| {
            b.compare_exchange(0, address, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        })
        .map(|(_, f)| *f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_state_keeps_its_own_getter_which_returns_its_tables() {
        let (a, b) = (0x7000_0000usize, 0x7000_1000usize);
        let ga = getter_for(a).unwrap();
        let gb = getter_for(b).unwrap();
        assert_ne!(ga as usize, gb as usize);
        assert_eq!(getter_for(a).map(|f| f as usize), Some(ga as usize));
        // SAFETY: the getters only compute addresses.
        unsafe {
            assert_eq!(ga(ETID_CALLBACKS) as usize, a + 8);
            assert_eq!(ga(ETID_VERSIONINFO) as usize, a + 24);
            assert!(ga(2).is_null());
            assert_eq!(gb(ETID_CALLBACKS) as usize, b + 8);
        }
        assert!(getter_for(0).is_none());
    }
}
