//! NVTX on attach: the NVTX calls of a program that was started without a tool, recorded for an attached trace's
//! window, then left as they were.
//!
//! NVTX v3 is header-only: every module (the executable or a shared object) built with it carries its own state, a
//! static `nvtxGlobals_v3` (hidden or static, so a local object of the module's full symbol table `.symtab`, not of
//! `.dynsym`). At the module's first NVTX call it reads `NVTX_INJECTION64_PATH` once; with none set it makes every
//! function a no-op and marks itself initialised, for good. A launched trace sets the variable (`nvtx` module); an
//! attach comes too late for it, so at the start of an attached session (after its tracer started with the
//! MARKER kinds) [`route`] finds that state in each loaded module and hands it to CUPTI's NVTX implementation,
//! and at the window's end, before the tracer stops (so that ranges closed until then are recorded),
//! [`Routing::unroute`] puts it back.
//!
//! # The layout relied on (NVTX v3's `nvtxDetail/nvtxImpl.h`, `nvtxTypes.h`, `nvtxInit.h`, `nvtxInitDefs.h`)
//!
//! `nvtxGlobals_t`, 8-aligned, 1,168 bytes with current headers (as in torch 2.11's `libtorch_python.so` and
//! `libtorch_cuda.so`):
//!
//! | offset | field |
//! |---|---|
//! | 0 | `volatile unsigned int initState`: 0 FRESH, 1 STARTED, 2 COMPLETE |
//! | 8 | `NvtxExportTableCallbacks etblCallbacks`: `size_t struct_size` (16), `GetModuleFunctionTable` |
//! | 24 | `NvtxExportTableVersionInfo etblVersionInfo`: `size_t struct_size` (24), `uint32_t version` (3), `uint32_t reserved0`, `SetInjectionNvtxVersion` |
//! | 48 | the implementation function pointers ("slots"; 64 now), each first holding its `*_impl_init` |
//! | after them | one table per callback module (CORE, CUDA, OPENCL, CUDART, CORE2, SYNC): a NULL, the addresses of that module's slots, a NULL |
//!
//! Each NVTX function calls through its slot and does nothing where the slot is NULL. A tool is handed the
//! module's `nvtxGetExportTable` (id 1: the callbacks table, id 3: the version table) through its
//! `InitializeInjectionNvtx2` (CUPTI exports one), asks `GetModuleFunctionTable` for each callback module's table
//! and writes its functions into the slots. At a module's first call (FRESH to STARTED by compare-and-swap) the
//! slots the tool did not take, still holding their `*_impl_init`, become NULL, and the state COMPLETE.
//!
//! # How
//!
//! 1. **Finding the state** (`loaded`, `elf`): each module the loader lists (`dl_iterate_phdr`: name, load bias,
//!    program headers), its file read with positioned, bounds-checked reads (the executable's through
//!    `/proc/self/exe`): a file whose program headers differ from those mapped is not the one loaded and is left
//!    alone; the local objects named `nvtxGlobals_v*` in `.symtab` are the candidates, at bias + value.
//! 2. **Checking it** (`state::NvtxState::check`), reading only: aligned, inside a writable segment and outside
//!    its read-only-after-relocation part, the init state 0, 1 or 2, both export tables' sizes, the version 3,
//!    their functions in the module's code, and the slots: the words the function tables point at, which must be
//!    the words from offset 48 on, each listed once, with the tables after them. Bytes that fail are never
//!    written, and the module is named in the stream.
//! 3. **Routing** (`state::NvtxState::route`), with the module held loaded (`dlopen` with `RTLD_NOLOAD`) for the
//!    window: CUPTI's `InitializeInjectionNvtx2` gets a getter of this state's tables. Its getter takes no module
//!    argument, so the library has a fixed set of 64 (`getters`), each bound to one state for the process's
//!    life. A COMPLETE state (every slot NULL) gets CUPTI's functions in the slots CUPTI takes; a FRESH one is
//!    initialised as its own first call would with CUPTI in its environment; one that stays STARTED, one whose
//!    slots already go to a tool (left to it; said as recorded where that tool is the CUPTI traced with), and one
//!    CUPTI refuses are named. Every write is an aligned 8-byte (4 for the init state) atomic store: the
//!    program's threads call through the slots meanwhile.
//! 4. **Unrouting**, at the window's end and before the tracer stops: every slot written back word by word, to
//!    its value before the window (NULL); a state that was FRESH stays COMPLETE with NULL slots, what it would
//!    have become at its first call on its own (`state.rs` says why not FRESH). No slot points at CUPTI after
//!    the window. The same on the exit path (the process exits while attached): the exit handler's stop puts the
//!    slots back first, since after the exit handlers the loader runs CUPTI's destructors while other threads
//!    may still call NVTX, and a slot left pointing into CUPTI would then call into a library torn down; the
//!    modules held then stay held (closing one would run its destructors on this thread during the exit).
//!
//! What the stream says (notices, [`Routing::notices`]): the modules whose NVTX is recorded; each module whose
//! state was found and not routed, and why; "NVTX calls from X are not recorded (no symbol table)" for a module
//! without a full symbol table whose read-only data holds NVTX's loader (the string `NVTX_INJECTION64_PATH`;
//! searched in its `.rodata`, up to 64 MiB a module, beyond which it says so); and that no NVTX is recorded
//! where nothing was routed. Not reached: modules loaded during the window (they initialise without a tool), and
//! NVTX handles (domains, registered strings) made before the attach, which NVTX's no-ops returned as NULL.

mod elf;
mod getters;
mod loaded;
mod state;

use std::ffi::{CString, c_void};

use gpu_tools::cupti::CuptiLibrary;
use gpu_tools::trace::NoticeLevel;

use crate::mapped_library::MappedLibrary;

use elf::{ElfFile, FileBytes, Search};
use loaded::{Hold, LoadedModule};
use state::{InitializeInjection, NotRouted, NvtxState, Routed, Segments};

/// The state's symbol, and the prefix of any NVTX version's.
const STATE_SYMBOL: &str = "nvtxGlobals_v3";
const STATE_PREFIX: &[u8] = b"nvtxGlobals_v";
/// What NVTX's loader reads: a module whose read-only data holds it carries NVTX.
const NVTX_LOADER_STRING: &[u8] = b"NVTX_INJECTION64_PATH";
/// Read-only data searched for it, at most, in one module.
const READ_ONLY_LIMIT: u64 = 64 << 20;

/// The address of `symbol` in the `libcupti` the crate loaded (the one the session traces with).
pub(crate) fn cupti_symbol(symbol: &str) -> Result<*mut c_void, String> {
    let lib = CuptiLibrary::load().map_err(|e| format!("CUPTI did not load: {e}"))?;
    let path = lib.path().ok_or("CUPTI's file is not known")?;
    let path = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| "CUPTI's path holds a NUL")?;
    let name = CString::new(symbol).map_err(|_| "the symbol's name holds a NUL")?;
    // The copy the crate loaded, already mapped.
    let lib = MappedLibrary::find(&path).ok_or("CUPTI is not mapped")?;
    lib.symbol(&name)
        .ok_or_else(|| format!("this CUPTI has no {symbol}"))
}

/// The NVTX states routed for one window, and what the stream says of them. Dropping it puts every state back
/// ([`unroute`](Self::unroute) says when).
#[derive(Default)]
pub(crate) struct Routing {
    routed: Vec<RoutedState>,
    notices: Vec<(NoticeLevel, String)>,
}

/// One routed state and the hold on its module, dropped after the state is put back.
struct RoutedState {
    name: String,
    routed: Routed,
    hold: Option<Hold>,
}

impl Drop for RoutedState {
    fn drop(&mut self) {
        self.routed.restore();
        log::debug!("NVTX of {} put back", self.name);
    }
}

impl Routing {
    /// What the stream is told: the modules whose NVTX is recorded, and those that are not and why.
    pub(crate) fn notices(&self) -> &[(NoticeLevel, String)] {
        &self.notices
    }

    /// How many states are routed.
    pub(crate) fn routed(&self) -> usize {
        self.routed.len()
    }

    /// Puts every routed state back as it was (see the module doc), then lets go of the modules held; `exiting`
    /// (the process is ending), keeps them: closing one the program closed meanwhile would run its destructors
    /// on this thread while the exit runs everyone's.
    pub(crate) fn unroute(mut self, exiting: bool) {
        for mut state in self.routed.drain(..) {
            if exiting {
                std::mem::forget(state.hold.take());
            }
        }
    }
}

/// Routes the NVTX state of every loaded module to the NVTX implementation of the CUPTI the session uses.
pub(crate) fn route() -> Routing {
    match cupti_symbol("InitializeInjectionNvtx2") {
        Ok(f) => {
            // SAFETY: CUPTI's function of NVTX's injection signature `int (*)(NvtxGetExportTableFunc_t)`.
            let init: InitializeInjection = unsafe { std::mem::transmute(f) };
            route_with(init)
        }
        Err(e) => Routing {
            routed: Vec::new(),
            notices: vec![(NoticeLevel::Warning, format!("NVTX is not recorded: {e}"))],
        },
    }
}

/// What was seen of one module's NVTX.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Finding {
    Routed { name: String, fresh: bool },
    AlreadyThroughCupti { name: String },
    NotRouted { name: String, why: String },
    NoSymbolTable { name: String },
    OtherVersion { name: String, symbol: String },
    NotSearched { name: String, why: String },
}

/// Routes every loaded module's NVTX state to `init`, but this library's and the one of the module that
/// implements `init` (CUPTI's own).
fn route_with(init: InitializeInjection) -> Routing {
    let own = route_with as *const () as usize as u64;
    let tool = init as usize as u64;
    let mut routed = Vec::new();
    let mut findings = Vec::new();
    for module in loaded::loaded_modules() {
        if module.executes(own) || module.executes(tool) {
            continue;
        }
        examine(&module, init, &mut routed, &mut findings);
    }
    Routing {
        routed,
        notices: notices(&findings),
    }
}

/// Looks for NVTX state in `module`'s file and routes what it finds.
fn examine(
    module: &LoadedModule,
    init: InitializeInjection,
    routed: &mut Vec<RoutedState>,
    findings: &mut Vec<Finding>,
) {
    let name = module.short_name();
    let not_searched = |why: String| Finding::NotSearched {
        name: name.clone(),
        why,
    };
    let file = match FileBytes::open(&module.file()) {
        Ok(f) => f,
        Err(e) => {
            if module.has_file() {
                findings.push(not_searched(format!("its file cannot be read: {e}")));
            }
            return;
        }
    };
    let elf = match ElfFile::parse(file) {
        Ok(e) => e,
        Err(e) => return findings.push(not_searched(format!("its file: {e}"))),
    };
    let symbols = match elf.local_objects(STATE_PREFIX) {
        Ok(Some(s)) => s,
        Ok(None) => {
            match elf.read_only_data_contains(NVTX_LOADER_STRING, READ_ONLY_LIMIT) {
                Ok(Search::Found) => findings.push(Finding::NoSymbolTable { name }),
                Ok(Search::Absent) => {}
                Ok(Search::TooLarge(n)) => findings.push(not_searched(format!(
                    "{} MiB of read-only data, over the {} MiB searched",
                    n >> 20,
                    READ_ONLY_LIMIT >> 20
                ))),
                Err(e) => findings.push(not_searched(format!("its file: {e}"))),
            }
            return;
        }
        Err(e) => return findings.push(not_searched(format!("its symbol table: {e}"))),
    };
    if symbols.is_empty() {
        return;
    }
    if elf.program_headers() != module.program_headers.as_slice() {
        return findings.push(Finding::NotRouted {
            name,
            why: "its file is not the one loaded (replaced since?)".into(),
        });
    }
    for symbol in symbols {
        if symbol.name != STATE_SYMBOL {
            findings.push(Finding::OtherVersion {
                name: name.clone(),
                symbol: symbol.name,
            });
            continue;
        }
        findings.push(route_state(module, &name, &symbol, init, routed));
    }
}

/// Checks and routes the state `symbol` names in `module`.
fn route_state(
    module: &LoadedModule,
    name: &str,
    symbol: &elf::Symbol,
    init: InitializeInjection,
    routed: &mut Vec<RoutedState>,
) -> Finding {
    let not_routed = |why: String| Finding::NotRouted {
        name: name.to_string(),
        why,
    };
    let Some(address) = module
        .bias
        .checked_add(symbol.value)
        .and_then(|a| usize::try_from(a).ok())
    else {
        return not_routed("its state's address is out of range".into());
    };
    let hold = match module.hold() {
        Ok(h) => h,
        Err(e) => return not_routed(format!("it could not be held loaded: {e}")),
    };
    // SAFETY: `module` describes the module whose symbol placed `address` (its program headers are the file's),
    // held loaded for the call.
    let state = match unsafe { NvtxState::check(module, address, symbol.size) } {
        Ok(s) => s,
        Err(e) => {
            return not_routed(format!(
                "its {STATE_SYMBOL} is not laid out as NVTX v3's ({e}): left untouched"
            ));
        }
    };
    let Some(getter) = getters::getter_for(state.address()) else {
        return not_routed(format!(
            "more NVTX states in this process's life than the {} this library can route",
            getters::GETTERS
        ));
    };
    // SAFETY: a checked state of a module held until the routing is restored (`RoutedState` drops the hold
    // after restoring); `init` is CUPTI's entry point; `getter` returns this state's tables.
    match unsafe { state.route(init, getter) } {
        Ok(r) => {
            let fresh = r.was_fresh;
            log::debug!(
                "NVTX of {name}: {} of {} slots routed to CUPTI{}",
                r.taken,
                state.slots(),
                if fresh { " (it was FRESH)" } else { "" }
            );
            routed.push(RoutedState {
                name: name.to_string(),
                routed: r,
                hold: Some(hold),
            });
            Finding::Routed {
                name: name.to_string(),
                fresh,
            }
        }
        Err(NotRouted::AlreadyRouted(slot)) => already_routed(name, slot, init),
        Err(NotRouted::Initialising) => not_routed(format!(
            "it was initialising its NVTX throughout the attach's wait (init state {})",
            state::STARTED
        )),
        Err(NotRouted::Refused) => {
            not_routed("CUPTI refused it (its InitializeInjectionNvtx2 returned 0)".into())
        }
        Err(NotRouted::TookNothing) => not_routed("CUPTI took none of its NVTX functions".into()),
    }
}

/// A state whose slots went to a tool at the module's start: recorded where that tool is the CUPTI traced with.
fn already_routed(name: &str, slot: usize, init: InitializeInjection) -> Finding {
    let tool = loaded::module_at(slot);
    let cupti = loaded::module_at(init as usize);
    match (tool, cupti) {
        (Some((base, _)), Some((cupti_base, _))) if base == cupti_base => {
            Finding::AlreadyThroughCupti {
                name: name.to_string(),
            }
        }
        (tool, _) => Finding::NotRouted {
            name: name.to_string(),
            why: format!(
                "its NVTX already goes to {} (a tool named at its start): left to it",
                tool.map_or_else(|| format!("code at {slot:#x}"), |(_, n)| n)
            ),
        },
    }
}

/// What the stream is told of `findings`.
fn notices(findings: &[Finding]) -> Vec<(NoticeLevel, String)> {
    let mut out = Vec::new();
    let recorded: Vec<String> = findings
        .iter()
        .filter_map(|f| match f {
            Finding::Routed { name, fresh: false } => Some(name.clone()),
            Finding::Routed { name, fresh: true } => {
                Some(format!("{name} (no NVTX call before the attach)"))
            }
            _ => None,
        })
        .collect();
    if !recorded.is_empty() {
        out.push((
            NoticeLevel::Info,
            format!(
                "NVTX is recorded from {}: their NVTX state goes to CUPTI for the trace and back at its end \
                 (modules loaded during the trace are not reached)",
                recorded.join(", ")
            ),
        ));
    }
    let mut not_searched = Vec::new();
    for f in findings {
        match f {
            Finding::Routed { .. } => {}
            Finding::AlreadyThroughCupti { name } => out.push((
                NoticeLevel::Info,
                format!(
                    "NVTX of {name} already goes to CUPTI (NVTX_INJECTION64_PATH was set at its start): \
                     recorded through it"
                ),
            )),
            Finding::NotRouted { name, why } => out.push((
                NoticeLevel::Warning,
                format!("NVTX of {name} is not recorded: {why}"),
            )),
            Finding::NoSymbolTable { name } => out.push((
                NoticeLevel::Warning,
                format!("NVTX calls from {name} are not recorded (no symbol table)"),
            )),
            Finding::OtherVersion { name, symbol } => out.push((
                NoticeLevel::Warning,
                format!(
                    "NVTX calls from {name} are not recorded: its NVTX state is {symbol}, not {STATE_SYMBOL}"
                ),
            )),
            Finding::NotSearched { name, why } => not_searched.push(format!("{name} ({why})")),
        }
    }
    if !not_searched.is_empty() {
        // Not known to carry NVTX: a note, not a warning.
        out.push((
            NoticeLevel::Info,
            format!(
                "NVTX not looked for in {}: their NVTX calls, if any, are not recorded",
                not_searched.join(", ")
            ),
        ));
    }
    let through_cupti = findings
        .iter()
        .any(|f| matches!(f, Finding::AlreadyThroughCupti { .. }));
    if recorded.is_empty() && !through_cupti {
        out.push((
            NoticeLevel::Info,
            "no NVTX is recorded: no module of the program holds NVTX v3 state that the trace can reach".into(),
        ));
    }
    out
}

#[cfg(test)]
mod tests;
