//! NVTX v3's state in a module's memory (`nvtxGlobals_t`, the layout in the parent module's doc): its layout
//! checked before anything is touched, then routed to a tool's NVTX implementation and put back, with aligned
//! atomic loads and stores only, since the program's threads call through its slots meanwhile.

use std::ffi::{c_int, c_void};
use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering, fence};
use std::time::{Duration, Instant};

/// `initState`: before the module's first NVTX call.
pub(super) const FRESH: u32 = 0;
/// ... while its first call initialises (the other threads wait).
pub(super) const STARTED: u32 = 1;
/// ... initialised: every call goes through its slot, a NULL slot doing nothing.
pub(super) const COMPLETE: u32 = 2;
/// Export table ids (`NVTX_ETID_CALLBACKS`, `NVTX_ETID_VERSIONINFO`) and where those tables are in the state.
pub(super) const ETID_CALLBACKS: u32 = 1;
pub(super) const ETID_VERSIONINFO: u32 = 3;
pub(super) const CALLBACKS: usize = 8;
pub(super) const VERSION_INFO: usize = 24;
/// The tables' `struct_size`, and the version the version table holds.
const CALLBACKS_SIZE: usize = 16;
const VERSION_INFO_SIZE: usize = 24;
const VERSION: u32 = 3;
/// Where the implementation function pointers (the slots) begin.
pub(super) const FIRST_SLOT: usize = 48;
/// Fewer slots than the CORE functions (15) is not NVTX v3; a state past 64 KiB is not either (1,168 bytes now).
const MIN_SLOTS: usize = 15;
const MAX_SIZE: u64 = 64 << 10;
/// How long a module that is initialising its NVTX (STARTED) is waited for: without a tool in its environment
/// its initialisation is a `getenv` and some stores.
const STARTED_WAIT: Duration = Duration::from_millis(200);

/// NVTX's `nvtxGetExportTable` type: a module's getter of its export tables.
pub(super) type GetExportTable = unsafe extern "C" fn(u32) -> *const c_void;
/// A tool's `InitializeInjectionNvtx2`: takes a module's function slots through its getter; non-zero on success.
pub(super) type InitializeInjection = unsafe extern "C" fn(GetExportTable) -> c_int;

/// What the module's segments allow at an address.
pub(super) trait Segments {
    /// `address` is in the module's code.
    fn executes(&self, address: u64) -> bool;
    /// `[address, address + len)` is inside one writable segment, outside the part made read-only after
    /// relocation.
    fn writable(&self, address: u64, len: u64) -> bool;
}

/// Why bytes named `nvtxGlobals_v3` are not taken for NVTX v3's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Invalid {
    Unaligned,
    Size(u64),
    NotWritable,
    InitState(u32),
    Callbacks(String),
    VersionInfo(String),
    Slots(String),
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invalid::Unaligned => f.write_str("not 8-byte aligned"),
            Invalid::Size(n) => write!(f, "{n} bytes"),
            Invalid::NotWritable => f.write_str("not in a writable segment of the module"),
            Invalid::InitState(s) => write!(f, "init state {s}, not 0, 1 or 2"),
            Invalid::Callbacks(why) => write!(f, "its callbacks table: {why}"),
            Invalid::VersionInfo(why) => write!(f, "its version table: {why}"),
            Invalid::Slots(why) => write!(f, "its function slots: {why}"),
        }
    }
}

/// Why a checked state was not routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NotRouted {
    /// It stayed STARTED throughout [`STARTED_WAIT`].
    Initialising,
    /// COMPLETE with a slot that is not NULL: a tool took it at the module's start (the slot's value).
    AlreadyRouted(usize),
    /// The tool's `InitializeInjectionNvtx2` returned 0.
    Refused,
    /// The tool accepted the module and took none of its slots.
    TookNothing,
}

/// A module's NVTX state whose layout was checked: where it is, and how many slots it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NvtxState {
    address: usize,
    slots: usize,
}

/// A state routed to a tool: what its slots go back to. Put back by [`Routed::restore`].
#[derive(Debug)]
pub(super) struct Routed {
    address: usize,
    restore: Vec<usize>,
    /// It was FRESH: the routing also ended its initialisation.
    pub(super) was_fresh: bool,
    /// How many slots the tool took.
    pub(super) taken: usize,
}

/// Word `i` of the state at `address`.
///
/// # Safety
/// `address + 8 * i` must be 8-aligned and inside a mapped, readable part of a module held loaded.
unsafe fn word(address: usize, i: usize) -> &'static AtomicUsize {
    // SAFETY: the caller's contract; AtomicUsize has usize's size and alignment, and the bytes are shared with
    // the program's threads, which is what atomics are for.
    unsafe { &*(address as *const AtomicUsize).add(i) }
}

/// The init state of the state at `address` (a `volatile unsigned int` at offset 0).
///
/// # Safety
/// As for [`word`].
unsafe fn init_state(address: usize) -> &'static AtomicU32 {
    // SAFETY: the caller's contract; offset 0 of an 8-aligned state.
    unsafe { &*(address as *const AtomicU32) }
}

impl NvtxState {
    /// Checks the `size` bytes at `address` (where a module's symbol table places `nvtxGlobals_v3`) against NVTX
    /// v3's layout, reading only: the address and size; the init state; each export table's size, version and
    /// functions (in the module's code); and the slots, found from the function tables that follow them (each
    /// slot listed once, every table entry after the last slot). A FRESH state's slots must all hold functions
    /// of the module (its `*_impl_init`).
    ///
    /// # Safety
    /// `module` must describe the module whose symbol placed `address`, and that module must stay loaded for the
    /// call: bytes that the check finds inside one of its writable segments are then mapped.
    pub(super) unsafe fn check(
        module: &impl Segments,
        address: usize,
        size: u64,
    ) -> Result<NvtxState, Invalid> {
        if address % 8 != 0 {
            return Err(Invalid::Unaligned);
        }
        if size < (FIRST_SLOT + 8 * MIN_SLOTS) as u64 || size > MAX_SIZE {
            return Err(Invalid::Size(size));
        }
        if !module.writable(address as u64, size) {
            return Err(Invalid::NotWritable);
        }
        let words = (size / 8) as usize;
        // SAFETY: every word read is below `size`, inside the writable (so mapped) segment just checked.
        let read = |i: usize| unsafe { word(address, i) }.load(Ordering::SeqCst);
        // SAFETY: as above.
        let state = unsafe { init_state(address) }.load(Ordering::SeqCst);
        if state > COMPLETE {
            return Err(Invalid::InitState(state));
        }
        check_table(
            module,
            read(CALLBACKS / 8),
            CALLBACKS_SIZE,
            read(CALLBACKS / 8 + 1),
            "GetModuleFunctionTable",
        )
        .map_err(Invalid::Callbacks)?;
        check_table(
            module,
            read(VERSION_INFO / 8),
            VERSION_INFO_SIZE,
            read(VERSION_INFO / 8 + 2),
            "SetInjectionNvtxVersion",
        )
        .map_err(Invalid::VersionInfo)?;
        // `uint32_t version` at offset 32, the low half of the word on this little-endian machine.
        let version = read(VERSION_INFO / 8 + 1) as u32;
        if version != VERSION {
            return Err(Invalid::VersionInfo(format!("version {version}, not 3")));
        }
        let slots = slot_count(address, words, &read).map_err(Invalid::Slots)?;
        if state == FRESH {
            let first = FIRST_SLOT / 8;
            if let Some(i) = (first..first + slots).find(|&i| !module.executes(read(i) as u64)) {
                return Err(Invalid::Slots(format!(
                    "slot {} of a module before its first NVTX call is not one of its functions",
                    i - first
                )));
            }
        }
        Ok(NvtxState { address, slots })
    }

    /// Where the state is.
    pub(super) fn address(&self) -> usize {
        self.address
    }

    /// How many function slots it has.
    pub(super) fn slots(&self) -> usize {
        self.slots
    }

    fn slot(&self, i: usize) -> &'static AtomicUsize {
        // SAFETY: a checked state's slots are inside its module's writable segment, 8-aligned; the module is
        // held loaded while the state is used (`check`'s and `route`'s contracts).
        unsafe { word(self.address, FIRST_SLOT / 8 + i) }
    }

    fn slot_values(&self) -> Vec<usize> {
        (0..self.slots)
            .map(|i| self.slot(i).load(Ordering::SeqCst))
            .collect()
    }

    /// Routes the state to a tool: `init` (the tool's `InitializeInjectionNvtx2`) is given `getter`, which
    /// returns this state's export tables, and writes its functions into the slots.
    ///
    /// COMPLETE (the module's first NVTX call found no tool; every slot NULL): the tool's functions fill the
    /// slots it takes. A COMPLETE state with a slot that is not NULL already goes to a tool: left to it. FRESH
    /// (no NVTX call yet): done as the module's own first call would with the tool in its environment: the init
    /// state goes from FRESH to STARTED by compare-and-swap (the module's other threads then wait), the tool
    /// takes its slots, every slot still holding its `*_impl_init` becomes NULL, and the init state becomes
    /// COMPLETE with a full barrier either side (NVTX's `NVTX_ATOMIC_WRITE_32`). STARTED: waited for a moment,
    /// then taken as COMPLETE, or left.
    ///
    /// # Safety
    /// The state was checked in a module that stays loaded until the returned [`Routed`] is restored; `init` is a
    /// tool's `InitializeInjectionNvtx2`, and `getter` returns this state's export tables.
    pub(super) unsafe fn route(
        &self,
        init: InitializeInjection,
        getter: GetExportTable,
    ) -> Result<Routed, NotRouted> {
        // SAFETY: the state's first word, in the held module (the caller's contract).
        let state = unsafe { init_state(self.address) };
        let deadline = Instant::now() + STARTED_WAIT;
        loop {
            match state.load(Ordering::SeqCst) {
                // SAFETY: the caller's contract.
                COMPLETE => return unsafe { self.route_complete(init, getter) },
                FRESH => {
                    if state
                        .compare_exchange(FRESH, STARTED, Ordering::SeqCst, Ordering::SeqCst)
                        .is_ok()
                    {
                        // SAFETY: the caller's contract; the state is ours to initialise.
                        return unsafe { self.route_fresh(state, init, getter) };
                    }
                    // The module's first call began meanwhile: its initialisation is waited for.
                }
                _ if Instant::now() >= deadline => return Err(NotRouted::Initialising),
                _ => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    }

    /// # Safety
    /// As for [`route`](Self::route), with the state COMPLETE.
    unsafe fn route_complete(
        &self,
        init: InitializeInjection,
        getter: GetExportTable,
    ) -> Result<Routed, NotRouted> {
        let before = self.slot_values();
        if let Some(&taken) = before.iter().find(|&&v| v != 0) {
            return Err(NotRouted::AlreadyRouted(taken));
        }
        // SAFETY: the tool's entry point, given a getter of this state's tables (the caller's contract).
        let accepted = unsafe { init(getter) } != 0;
        let taken = self
            .slot_values()
            .iter()
            .zip(&before)
            .filter(|(now, was)| now != was)
            .count();
        let routed = Routed {
            address: self.address,
            restore: before,
            was_fresh: false,
            taken,
        };
        if !accepted {
            routed.restore();
            return Err(NotRouted::Refused);
        }
        if taken == 0 {
            return Err(NotRouted::TookNothing);
        }
        Ok(routed)
    }

    /// # Safety
    /// As for [`route`](Self::route), with the state moved from FRESH to STARTED by this call's caller.
    unsafe fn route_fresh(
        &self,
        state: &AtomicU32,
        init: InitializeInjection,
        getter: GetExportTable,
    ) -> Result<Routed, NotRouted> {
        let initial = self.slot_values();
        // SAFETY: the tool's entry point, given a getter of this state's tables (the caller's contract).
        let accepted = unsafe { init(getter) } != 0;
        for (i, first) in initial.iter().enumerate() {
            if accepted {
                // nvtxSetInitFunctionsToNoops: what the tool did not take does nothing.
                let _ =
                    self.slot(i)
                        .compare_exchange(*first, 0, Ordering::SeqCst, Ordering::SeqCst);
            } else {
                // A tool that failed leaves nothing: every function does nothing, as without a tool.
                self.slot(i).store(0, Ordering::SeqCst);
            }
        }
        fence(Ordering::SeqCst);
        state.store(COMPLETE, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let taken = self.slot_values().iter().filter(|&&v| v != 0).count();
        if !accepted {
            return Err(NotRouted::Refused);
        }
        if taken == 0 {
            return Err(NotRouted::TookNothing);
        }
        // Put back at the window's end to what the module would have become at its first NVTX call on its own
        // (no tool in its environment): COMPLETE with every slot NULL. Not to FRESH with its `*_impl_init`
        // functions: a thread that read COMPLETE before the init state went back would call a slot holding
        // `*_impl_init` again, which calls the slot again, for ever; and the module's own initialisation could
        // run while the slots are being written back. The one thing the module loses is a late look at its
        // environment, where nothing set since its start is read by NVTX anyway.
        Ok(Routed {
            address: self.address,
            restore: vec![0; self.slots],
            was_fresh: true,
            taken,
        })
    }
}

/// An export table's checks: its `struct_size` word and the function it points to, in the module's code.
fn check_table(
    module: &impl Segments,
    size: usize,
    expected: usize,
    function: usize,
    name: &str,
) -> Result<(), String> {
    if size != expected {
        return Err(format!("struct_size {size}, not {expected}"));
    }
    if !module.executes(function as u64) {
        return Err(format!(
            "{name} at {function:#x}, outside the module's code"
        ));
    }
    Ok(())
}

/// How many slots the state has: the words after the export tables that its function tables point at, which
/// must be the words right after the export tables, each listed once, with every table entry after them.
fn slot_count(
    address: usize,
    words: usize,
    read: &impl Fn(usize) -> usize,
) -> Result<usize, String> {
    let first = FIRST_SLOT / 8;
    let mut listed = vec![0u8; words];
    let mut first_entry = words;
    for i in first..words {
        let Some(offset) = read(i).checked_sub(address) else {
            continue;
        };
        if offset % 8 != 0 || offset < FIRST_SLOT || offset / 8 >= words {
            continue;
        }
        if let Some(n) = listed.get_mut(offset / 8) {
            *n = n.saturating_add(1);
        }
        first_entry = first_entry.min(i);
    }
    let slots = listed
        .get(first..)
        .unwrap_or_default()
        .iter()
        .take_while(|&&n| n == 1)
        .count();
    if slots < MIN_SLOTS {
        return Err(format!(
            "{slots} listed by its tables, fewer than {MIN_SLOTS}"
        ));
    }
    if listed
        .get(first + slots..)
        .unwrap_or_default()
        .iter()
        .any(|&n| n != 0)
    {
        return Err("its tables list words other than the slots, or a slot twice".into());
    }
    if first_entry < first + slots {
        return Err("a table entry among the slots".into());
    }
    Ok(slots)
}

impl Routed {
    /// Puts every slot back, word by word (an aligned atomic store each). A program thread that read a slot
    /// just before may still call the tool once: the tool stays loaded.
    pub(super) fn restore(&self) {
        for (i, value) in self.restore.iter().enumerate() {
            // SAFETY: the slots of a checked state, in a module held loaded until this routing is restored
            // (`NvtxState::route`'s contract).
            unsafe { word(self.address, FIRST_SLOT / 8 + i) }.store(*value, Ordering::SeqCst);
        }
    }
}
