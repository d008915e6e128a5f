//! The ELF reader on the NVTX module double and on bytes broken in every way a seeded generator finds, the layout
//! check and the routing on states built in memory (intact and corrupt), and the whole routing in this process on
//! copies of the double (a module initialised without a tool, one before its first call, one whose state was
//! corrupted), with a stand-in tool. With `GPU_TOOLS_NVTX_INCLUDE` (the include folder of the `nvidia-nvtx` wheel),
//! the same on a module built with NVTX's real headers.

use std::ffi::{CStr, c_char, c_int, c_uint};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use gpu_tools_testing::nvtx_module::{self, NvtxModule};

use super::elf::{ElfFile, FileBytes, ReadAt, Search};
use super::state::{GetExportTable, Invalid, NotRouted, NvtxState, Segments};
use super::*;

/// Routing reaches every module of this process: one test at a time.
static ROUTING: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ROUTING.lock().unwrap_or_else(|p| p.into_inner())
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nvtx_attach-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A copy of the NVTX module double under `name`: a module of its own once loaded.
fn module_copy(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::copy(gpu_tools_testing::double_path("nvtx_module"), &path).unwrap();
    path
}

// ---- The stand-in tool: takes nvtxMarkA, nvtxRangePushA and nvtxRangePop of a module, as CUPTI would. ----

static TOOL_CALLS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn tool_push(_message: *const c_char) -> c_int {
    TOOL_CALLS.fetch_add(1, Ordering::SeqCst);
    7
}

extern "C" fn tool_pop() -> c_int {
    TOOL_CALLS.fetch_add(1, Ordering::SeqCst);
    7
}

extern "C" fn tool_mark(_message: *const c_char) {
    TOOL_CALLS.fetch_add(1, Ordering::SeqCst);
}

type GetModuleFunctionTable =
    unsafe extern "C" fn(c_int, *mut *mut *mut usize, *mut c_uint) -> c_int;

/// `InitializeInjectionNvtx2` of the stand-in tool, through the module's own `GetModuleFunctionTable`.
unsafe extern "C" fn tool_init(get: GetExportTable) -> c_int {
    // SAFETY: NVTX's protocol: id 1 is the module's callbacks table {struct_size, GetModuleFunctionTable}, whose
    // CORE table lists the addresses of its slots by callback id.
    unsafe {
        let callbacks = get(1).cast::<usize>();
        if callbacks.is_null() || *callbacks < 16 {
            return 0;
        }
        let f: GetModuleFunctionTable = std::mem::transmute(*callbacks.add(1));
        let (mut table, mut size) = (std::ptr::null_mut(), 0);
        if f(1, &mut table, &mut size) == 0 || table.is_null() || size <= 11 {
            return 0;
        }
        **table.add(2) = tool_mark as *const () as usize;
        **table.add(9) = tool_push as *const () as usize;
        **table.add(11) = tool_pop as *const () as usize;
    }
    1
}

/// The stand-in tool's calls so far.
fn tool_calls() -> usize {
    TOOL_CALLS.load(Ordering::SeqCst)
}

// ---- The ELF reader. ----

#[test]
fn the_state_is_found_in_the_symbol_table_of_the_double_and_its_loader_in_its_read_only_data() {
    let elf =
        ElfFile::parse(FileBytes::open(&gpu_tools_testing::double_path("nvtx_module")).unwrap())
            .unwrap();
    let found = elf
        .local_objects(STATE_PREFIX)
        .unwrap()
        .expect("a symbol table");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (found[0].name.as_str(), found[0].size),
        (STATE_SYMBOL, 1168)
    );
    assert_eq!(
        elf.read_only_data_contains(NVTX_LOADER_STRING, READ_ONLY_LIMIT),
        Ok(Search::Found)
    );
    assert!(matches!(
        elf.read_only_data_contains(NVTX_LOADER_STRING, 16),
        Ok(Search::TooLarge(n)) if n > 16
    ));
    // A module without NVTX: a symbol table without the state, and no loader.
    let cupti =
        ElfFile::parse(FileBytes::open(&gpu_tools_testing::double_path("cupti_activity")).unwrap())
            .unwrap();
    assert_eq!(cupti.local_objects(STATE_PREFIX).unwrap(), Some(Vec::new()));
    assert_eq!(
        cupti.read_only_data_contains(NVTX_LOADER_STRING, READ_ONLY_LIMIT),
        Ok(Search::Absent)
    );
}

#[test]
fn a_stripped_module_has_no_symbol_table_and_still_shows_its_loader() {
    let dir = scratch("stripped");
    let out = dir.join("libstripped.so");
    let source = gpu_tools_testing::double_source("nvtx_module");
    gpu_tools_testing::cc(&[
        "-shared",
        "-fPIC",
        "-s",
        "-o",
        out.to_str().unwrap(),
        source.to_str().unwrap(),
    ]);
    let elf = ElfFile::parse(FileBytes::open(&out).unwrap()).unwrap();
    assert_eq!(elf.local_objects(STATE_PREFIX).unwrap(), None);
    assert_eq!(
        elf.read_only_data_contains(NVTX_LOADER_STRING, READ_ONLY_LIMIT),
        Ok(Search::Found)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_string_across_two_chunks_is_found() {
    // A file of read-only data only (no section headers: its read-only segment is searched), the string across
    // the first chunk's end.
    let needle = NVTX_LOADER_STRING;
    let data_at = 4096usize;
    let data_len = (1 << 20) + 4096;
    let mut bytes = vec![0u8; data_at + data_len];
    bytes[..4].copy_from_slice(b"\x7fELF");
    bytes[4] = 2;
    bytes[5] = 1;
    bytes[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
    bytes[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
    bytes[56..58].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
    let ph = 64;
    bytes[ph..ph + 4].copy_from_slice(&1u32.to_le_bytes()); // PT_LOAD, flags 0 (read-only)
    bytes[ph + 8..ph + 16].copy_from_slice(&(data_at as u64).to_le_bytes());
    bytes[ph + 32..ph + 40].copy_from_slice(&(data_len as u64).to_le_bytes());
    bytes[ph + 40..ph + 48].copy_from_slice(&(data_len as u64).to_le_bytes());
    let at = data_at + (1 << 20) - 10;
    bytes[at..at + needle.len()].copy_from_slice(needle);
    let elf = ElfFile::parse(bytes).unwrap();
    assert_eq!(
        elf.read_only_data_contains(needle, READ_ONLY_LIMIT),
        Ok(Search::Found)
    );
    assert_eq!(
        elf.read_only_data_contains(b"NVTX_INJECTION32_PATH", READ_ONLY_LIMIT),
        Ok(Search::Absent)
    );
}

/// A seeded xorshift: the same broken files on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[test]
fn broken_files_are_errors_or_plain_answers_never_panics() {
    let original = std::fs::read(gpu_tools_testing::double_path("nvtx_module")).unwrap();
    // Where the headers that steer the reader are: the ELF header, and the section headers it points at.
    let shoff = u64::from_le_bytes(original[40..48].try_into().unwrap()) as usize;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut parsed, mut failed) = (0, 0);
    for round in 0..3000 {
        let mut bytes = original.clone();
        match round % 4 {
            0 => bytes.truncate(rng.below(original.len())),
            1 => {
                let at = rng.below(64);
                bytes[at] = rng.next() as u8;
            }
            2 => {
                let at = shoff + rng.below(original.len() - shoff);
                for b in bytes.iter_mut().skip(at).take(8) {
                    *b = rng.next() as u8;
                }
            }
            _ => {
                for _ in 0..16 {
                    let at = rng.below(bytes.len());
                    bytes[at] = rng.next() as u8;
                }
            }
        }
        match ElfFile::parse(bytes) {
            Ok(elf) => {
                parsed += 1;
                let _ = elf.local_objects(STATE_PREFIX);
                let _ = elf.read_only_data_contains(NVTX_LOADER_STRING, READ_ONLY_LIMIT);
            }
            Err(_) => failed += 1,
        }
    }
    assert!(
        parsed > 0 && failed > 0,
        "{parsed} parsed, {failed} refused"
    );
}

#[test]
fn reads_past_the_end_are_refused() {
    let bytes = vec![1u8, 2, 3];
    let mut buf = [0u8; 2];
    assert!(bytes.read_exact_at(&mut buf, 2).is_err());
    assert!(bytes.read_exact_at(&mut buf, u64::MAX).is_err());
    assert!(bytes.read_exact_at(&mut buf, 1).is_ok());
    assert_eq!(buf, [2, 3]);
}

// ---- The layout check and the routing, on states built in memory. ----

/// Code addresses of the fake module (no code runs there).
const CODE: std::ops::Range<u64> = 0x1000..0x2000;

/// NVTX v3's state laid out in memory as the header lays it out, in a module whose code is [`CODE`].
struct FakeState {
    words: Box<[AtomicUsize]>,
}

impl FakeState {
    /// `state`: the init state; FRESH slots hold (fake) `*_impl_init` functions, COMPLETE ones NULL.
    fn new(state: u32) -> FakeState {
        let words: Box<[AtomicUsize]> = (0..146).map(|_| AtomicUsize::new(0)).collect();
        let base = words.as_ptr() as usize;
        let set = |i: usize, v: usize| words[i].store(v, Ordering::SeqCst);
        set(0, state as usize);
        set(1, 16);
        set(2, 0x1100);
        set(3, 24);
        set(4, 3);
        set(5, 0x1200);
        for slot in 0..64 {
            set(6 + slot, if state == 0 { 0x1300 + slot } else { 0 });
        }
        let mut at = 6 + 64;
        let mut slot = 0;
        for count in [15, 8, 14, 6, 15, 6] {
            at += 1; // the leading NULL
            for _ in 0..count {
                set(at, base + 48 + 8 * slot);
                at += 1;
                slot += 1;
            }
            at += 1; // the trailing NULL
        }
        assert_eq!(at, 146);
        FakeState { words }
    }
    fn address(&self) -> usize {
        self.words.as_ptr() as usize
    }
    fn word(&self, i: usize) -> usize {
        self.words[i].load(Ordering::SeqCst)
    }
    fn set(&self, i: usize, v: usize) {
        self.words[i].store(v, Ordering::SeqCst)
    }
    fn snapshot(&self) -> Vec<usize> {
        (0..self.words.len()).map(|i| self.word(i)).collect()
    }
    fn check(&self) -> Result<NvtxState, Invalid> {
        // SAFETY: the state's bytes are this box, alive for the call; `FakeModule` says they are writable.
        unsafe { NvtxState::check(&FakeModule(self), self.address(), 1168) }
    }
}

struct FakeModule<'a>(&'a FakeState);

impl Segments for FakeModule<'_> {
    fn executes(&self, address: u64) -> bool {
        CODE.contains(&address)
    }
    fn writable(&self, address: u64, len: u64) -> bool {
        let start = self.0.address() as u64;
        address >= start && address + len <= start + 1168
    }
}

/// A stand-in tool for fake states: writes slot 8 (nvtxRangePushA) through the callbacks table's address.
unsafe extern "C" fn fake_tool_init(get: GetExportTable) -> c_int {
    // SAFETY: the getter returns the callbacks table at offset 8 of a live fake state.
    let state = unsafe { get(1) } as usize - 8;
    // SAFETY: slot 8 of that state, 8-aligned.
    unsafe { &*((state + 48 + 8 * 8) as *const AtomicUsize) }.store(0x1f00, Ordering::SeqCst);
    1
}

unsafe extern "C" fn refusing_tool_init(get: GetExportTable) -> c_int {
    // SAFETY: as above: it writes a slot, then refuses.
    unsafe { fake_tool_init(get) };
    0
}

unsafe extern "C" fn idle_tool_init(_get: GetExportTable) -> c_int {
    1
}

#[test]
fn an_intact_state_is_checked_and_its_slots_counted() {
    assert_eq!(FakeState::new(2).check().map(|s| s.slots()), Ok(64));
    assert_eq!(FakeState::new(0).check().map(|s| s.slots()), Ok(64));
}

#[test]
fn a_corrupt_or_mismatched_state_is_refused_and_left_as_it_was() {
    type Break = fn(&FakeState);
    type Expected = fn(&Invalid) -> bool;
    let cases: [(&str, Break, Expected); 10] = [
        (
            "init state",
            |s| s.set(0, 7),
            |e| *e == Invalid::InitState(7),
        ),
        (
            "callbacks size",
            |s| s.set(1, 24),
            |e| matches!(e, Invalid::Callbacks(_)),
        ),
        (
            "callbacks function",
            |s| s.set(2, 0x9000),
            |e| matches!(e, Invalid::Callbacks(_)),
        ),
        (
            "version size",
            |s| s.set(3, 16),
            |e| matches!(e, Invalid::VersionInfo(_)),
        ),
        (
            "version",
            |s| s.set(4, 4),
            |e| matches!(e, Invalid::VersionInfo(_)),
        ),
        (
            "version function",
            |s| s.set(5, 0),
            |e| matches!(e, Invalid::VersionInfo(_)),
        ),
        (
            "a slot listed twice",
            |s| s.set(72, s.word(71)),
            |e| matches!(e, Invalid::Slots(_)),
        ),
        (
            "a table entry among the slots",
            |s| s.set(20, s.address() + 48),
            |e| matches!(e, Invalid::Slots(_)),
        ),
        (
            "too few slots listed",
            |s| (71..146).for_each(|i| s.set(i, 0)),
            |e| matches!(e, Invalid::Slots(_)),
        ),
        (
            "a FRESH slot outside the module's code",
            |s| {
                s.set(0, 0);
                (6..70).for_each(|i| s.set(i, 0x1300));
                s.set(9, 0x9999);
            },
            |e| matches!(e, Invalid::Slots(_)),
        ),
    ];
    for (what, break_it, expected) in cases {
        let state = FakeState::new(2);
        break_it(&state);
        let before = state.snapshot();
        let checked = state.check();
        assert!(checked.as_ref().is_err_and(expected), "{what}: {checked:?}");
        assert_eq!(state.snapshot(), before, "{what}: nothing written");
    }
    // Too small, unaligned, outside the module's writable memory.
    let state = FakeState::new(2);
    let module = FakeModule(&state);
    // SAFETY: every address checked lies in the live box, or is refused before any read.
    unsafe {
        assert_eq!(
            NvtxState::check(&module, state.address(), 100),
            Err(Invalid::Size(100))
        );
        assert_eq!(
            NvtxState::check(&module, state.address() + 4, 1160),
            Err(Invalid::Unaligned)
        );
        assert_eq!(
            NvtxState::check(&module, state.address() + 8, 1168),
            Err(Invalid::NotWritable)
        );
    }
}

#[test]
fn a_complete_state_is_routed_and_put_back() {
    let state = FakeState::new(2);
    let checked = state.check().unwrap();
    let getter = getters::getter_for(state.address()).unwrap();
    // SAFETY: a checked state in a live box; the fake tool writes one of its slots.
    let routed = unsafe { checked.route(fake_tool_init, getter) }.unwrap();
    assert_eq!((routed.was_fresh, routed.taken), (false, 1));
    assert_eq!(state.word(6 + 8), 0x1f00);
    routed.restore();
    assert_eq!(state.word(6 + 8), 0);
    assert_eq!(
        state.snapshot(),
        FakeState::new(2).snapshot_at(state.address())
    );
}

impl FakeState {
    /// What a fresh state of this layout at `address` holds (its tables point into it).
    fn snapshot_at(&self, address: usize) -> Vec<usize> {
        let moved = address as isize - self.address() as isize;
        self.snapshot()
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                if i >= 70 && v != 0 {
                    (v as isize + moved) as usize
                } else {
                    v
                }
            })
            .collect()
    }
}

#[test]
fn a_fresh_state_is_initialised_as_its_first_call_would_and_stays_complete() {
    let state = FakeState::new(0);
    let checked = state.check().unwrap();
    let getter = getters::getter_for(state.address()).unwrap();
    // SAFETY: as above.
    let routed = unsafe { checked.route(fake_tool_init, getter) }.unwrap();
    assert_eq!((routed.was_fresh, routed.taken), (true, 1));
    assert_eq!(state.word(0), 2, "COMPLETE");
    let live: Vec<usize> = (6..70).filter(|&i| state.word(i) != 0).collect();
    assert_eq!(
        live,
        vec![6 + 8],
        "only the tool's slot; every *_impl_init became NULL"
    );
    routed.restore();
    assert!((6..70).all(|i| state.word(i) == 0));
    assert_eq!(
        state.word(0),
        2,
        "left COMPLETE, as its own first call would have"
    );
}

#[test]
fn a_state_a_tool_took_at_start_a_refusal_and_a_tool_taking_nothing_are_said() {
    let state = FakeState::new(2);
    state.set(6 + 8, 0x1abc);
    let getter = getters::getter_for(state.address()).unwrap();
    let checked = state.check().unwrap();
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            checked.route(fake_tool_init, getter).err(),
            Some(NotRouted::AlreadyRouted(0x1abc))
        );
    }
    state.set(6 + 8, 0);
    let before = state.snapshot();
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            checked.route(refusing_tool_init, getter).err(),
            Some(NotRouted::Refused)
        );
        assert_eq!(
            state.snapshot(),
            before,
            "what a refusing tool wrote is undone"
        );
        assert_eq!(
            checked.route(idle_tool_init, getter).err(),
            Some(NotRouted::TookNothing)
        );
    }
    // A FRESH state a tool refuses ends as without a tool: COMPLETE, every slot NULL.
    let fresh = FakeState::new(0);
    let getter = getters::getter_for(fresh.address()).unwrap();
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            fresh
                .check()
                .unwrap()
                .route(refusing_tool_init, getter)
                .err(),
            Some(NotRouted::Refused)
        );
    }
    assert_eq!(fresh.word(0), 2);
    assert!((6..70).all(|i| fresh.word(i) == 0));
}

#[test]
fn a_state_initialising_throughout_the_wait_is_left() {
    let state = FakeState::new(1);
    let getter = getters::getter_for(state.address()).unwrap();
    let checked = state.check().unwrap();
    let before = state.snapshot();
    // SAFETY: as above.
    let r = unsafe { checked.route(fake_tool_init, getter) };
    assert_eq!(r.err(), Some(NotRouted::Initialising));
    assert_eq!(state.snapshot(), before);
}

// ---- The whole routing in this process, on loaded copies of the NVTX module double. ----

fn notice_texts(routing: &Routing) -> Vec<String> {
    routing.notices().iter().map(|(_, t)| t.clone()).collect()
}

#[test]
fn loaded_modules_are_routed_to_the_tool_for_the_window_and_put_back() {
    let _serial = serial();
    let dir = scratch("route");
    let complete = NvtxModule::open(&module_copy(&dir, "libnvtx_complete.so")).unwrap();
    let fresh = NvtxModule::open(&module_copy(&dir, "libnvtx_fresh.so")).unwrap();
    // The first module's first NVTX call found no tool: COMPLETE, every call a no-op.
    assert_eq!(complete.push(c"before"), nvtx_module::NO_PUSH_POP_TRACKING);
    assert_eq!(
        (complete.init_state(), complete.live_slots()),
        (nvtx_module::COMPLETE, 0)
    );
    assert_eq!(
        (fresh.init_state(), fresh.live_slots()),
        (nvtx_module::FRESH, nvtx_module::SLOTS)
    );

    for window in 0..2 {
        let calls = tool_calls();
        let routing = route_with(tool_init);
        let texts = notice_texts(&routing);
        let recorded = texts
            .iter()
            .find(|t| t.starts_with("NVTX is recorded from"))
            .unwrap_or_else(|| panic!("{texts:?}"));
        assert!(recorded.contains("libnvtx_complete.so"), "{recorded}");
        assert!(recorded.contains("libnvtx_fresh.so"), "{recorded}");
        // Only the first window found it before its first call; the second finds it COMPLETE.
        assert_eq!(
            recorded.contains("libnvtx_fresh.so (no NVTX call before the attach)"),
            window == 0,
            "{recorded}"
        );
        assert!(routing.routed() >= 2);
        for m in [&complete, &fresh] {
            assert_eq!((m.init_state(), m.live_slots()), (nvtx_module::COMPLETE, 3));
            assert_eq!(m.push(c"step"), 7);
            m.mark(c"tick");
            assert_eq!(m.pop(), 7);
        }
        assert_eq!(tool_calls(), calls + 6);
        routing.unroute(false);
        for m in [&complete, &fresh] {
            assert_eq!((m.init_state(), m.live_slots()), (nvtx_module::COMPLETE, 0));
            assert_eq!(m.push(c"after"), nvtx_module::NO_PUSH_POP_TRACKING);
        }
        assert_eq!(
            tool_calls(),
            calls + 6,
            "nothing reaches the tool after the window"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Where the loaded module named `name` keeps its NVTX state, by the same reading the routing does.
fn state_address(name: &str) -> usize {
    let module = loaded::loaded_modules()
        .into_iter()
        .find(|m| m.name.ends_with(name))
        .unwrap();
    let elf = ElfFile::parse(FileBytes::open(&module.file()).unwrap()).unwrap();
    let symbol = elf.local_objects(STATE_PREFIX).unwrap().unwrap().remove(0);
    (module.bias + symbol.value) as usize
}

#[test]
fn a_module_whose_state_is_not_nvtx_v3_is_named_and_left_untouched() {
    let _serial = serial();
    let dir = scratch("corrupt");
    let module = NvtxModule::open(&module_copy(&dir, "libnvtx_corrupt.so")).unwrap();
    let address = state_address("libnvtx_corrupt.so");
    // SAFETY: the module's NVTX state (1,168 bytes, 8-aligned), loaded: its version becomes 4.
    let version = unsafe { &*((address + 32) as *const AtomicU32) };
    version.store(4, Ordering::SeqCst);
    let bytes = || -> Vec<u8> {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts(address as *const u8, 1168) }.to_vec()
    };
    let before = bytes();
    let calls = tool_calls();
    let routing = route_with(tool_init);
    let texts = notice_texts(&routing);
    assert!(
        texts.iter().any(
            |t| t.starts_with("NVTX of libnvtx_corrupt.so is not recorded")
                && t.contains("version 4, not 3")
                && t.contains("left untouched")
        ),
        "{texts:?}"
    );
    assert_eq!(bytes(), before, "nothing written");
    assert_eq!(
        (module.init_state(), module.live_slots()),
        (nvtx_module::FRESH, nvtx_module::SLOTS),
        "still before its first call"
    );
    assert_eq!(module.push(c"x"), nvtx_module::NO_PUSH_POP_TRACKING);
    routing.unroute(false);
    assert_eq!(tool_calls(), calls);
    version.store(3, Ordering::SeqCst);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- A module built with NVTX's real headers (`GPU_TOOLS_NVTX_INCLUDE`: the nvidia-nvtx wheel's include folder). ----

/// The variable naming the include folder that holds `nvtx3/nvToolsExt.h`.
const NVTX_INCLUDE: &str = "GPU_TOOLS_NVTX_INCLUDE";

#[test]
fn a_module_built_with_the_real_nvtx_headers_is_found_checked_routed_and_put_back() {
    let Some(include) = std::env::var_os(NVTX_INCLUDE) else {
        gpu_tools_testing::skip_unless_ci(&format!(
            "{NVTX_INCLUDE} is unset (the include folder of the nvidia-nvtx wheel): the real NVTX layout is not \
             tried"
        ));
        return;
    };
    let _serial = serial();
    let dir = scratch("real");
    let source = dir.join("real_nvtx.c");
    std::fs::write(
        &source,
        "#include <nvtx3/nvToolsExt.h>\n\
         int real_push(const char *m) { return nvtxRangePushA(m); }\n\
         int real_pop(void) { return nvtxRangePop(); }\n\
         void real_mark(const char *m) { nvtxMarkA(m); }\n",
    )
    .unwrap();
    let include = format!("-I{}", Path::new(&include).display());
    let built = |name: &str| {
        let out = dir.join(name);
        gpu_tools_testing::cc(&[
            "-shared",
            "-fPIC",
            "-g",
            "-O2",
            &include,
            "-o",
            out.to_str().unwrap(),
            source.to_str().unwrap(),
            "-ldl",
        ]);
        out
    };
    let (called, fresh) = (built("libreal_called.so"), built("libreal_fresh.so"));
    let elf = ElfFile::parse(FileBytes::open(&called).unwrap()).unwrap();
    let symbols = elf.local_objects(STATE_PREFIX).unwrap().unwrap();
    assert_eq!(symbols.len(), 1, "{symbols:?}");
    assert_eq!(symbols[0].name, STATE_SYMBOL);
    // SAFETY: the modules' constructors are NVTX's (none run code of the tests').
    let (called, fresh) = unsafe {
        (
            libloading::Library::new(&called).unwrap(),
            libloading::Library::new(&fresh).unwrap(),
        )
    };
    type Push = unsafe extern "C" fn(*const c_char) -> c_int;
    type Pop = unsafe extern "C" fn() -> c_int;
    // SAFETY: the functions the source above defines.
    let calls = |lib: &libloading::Library| unsafe {
        (
            *lib.get::<Push>(b"real_push\0").unwrap(),
            *lib.get::<Pop>(b"real_pop\0").unwrap(),
        )
    };
    let (push_called, pop_called) = calls(&called);
    let (push_fresh, pop_fresh) = calls(&fresh);
    let name: &CStr = c"range";
    // SAFETY: NVTX's functions, with a NUL-terminated name.
    unsafe {
        assert_eq!(
            push_called(name.as_ptr()),
            nvtx_module::NO_PUSH_POP_TRACKING
        );
    }
    let before = tool_calls();
    let routing = route_with(tool_init);
    let texts = notice_texts(&routing);
    assert!(
        texts.iter().any(|t| t.starts_with("NVTX is recorded from")
            && t.contains("libreal_called.so")
            && t.contains("libreal_fresh.so (no NVTX call before the attach)")),
        "{texts:?}"
    );
    // SAFETY: as above.
    unsafe {
        assert_eq!(push_called(name.as_ptr()), 7);
        assert_eq!(pop_called(), 7);
        assert_eq!(push_fresh(name.as_ptr()), 7);
        assert_eq!(pop_fresh(), 7);
    }
    assert_eq!(tool_calls(), before + 4);
    routing.unroute(false);
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            push_called(name.as_ptr()),
            nvtx_module::NO_PUSH_POP_TRACKING
        );
        assert_eq!(push_fresh(name.as_ptr()), nvtx_module::NO_PUSH_POP_TRACKING);
    }
    assert_eq!(tool_calls(), before + 4);
    let _ = std::fs::remove_dir_all(&dir);
}
