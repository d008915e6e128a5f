use std::ffi::{c_int, c_void};
use std::sync::Mutex;

use gpu_tools::cupti::activity::{ActivityBatch, RecordLayout};

use super::*;
use crate::imports;

/// The tests below share the process's one sharing state.
pub(super) static SERIAL: Mutex<()> = Mutex::new(());

extern "C" fn fake_getppid() -> libc::pid_t {
    4242
}

#[test]
fn an_import_slot_is_redirected_and_restored() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: getppid has no preconditions.
    let before = unsafe { libc::getppid() };
    assert_ne!(before, 4242);
    // The C library defines it; every other object (this test binary first) imports it.
    let skip = |object: &str| object.contains("libc.so");
    // SAFETY: the replacement has getppid's signature and lives as long as the process.
    let redirects =
        unsafe { imports::redirect(&[("getppid", fake_getppid as *const () as usize)], &skip) };
    assert!(
        !redirects.is_empty(),
        "this test binary imports getppid through a slot"
    );
    assert!(redirects.iter().all(|r| r.symbol() == "getppid"));
    // SAFETY: as above.
    assert_eq!(unsafe { libc::getppid() }, 4242, "the call comes to us");
    imports::restore(redirects);
    // SAFETY: as above.
    assert_eq!(unsafe { libc::getppid() }, before, "and goes back");
}

#[test]
fn the_loaders_lock_is_free_while_objects_are_scanned() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    unsafe extern "C" fn none(_: *mut libc::dl_phdr_info, _: usize, _: *mut c_void) -> c_int {
        0
    }
    let free = std::cell::Cell::new(None);
    // Asked of each object before its scan: another thread walks the loader's list meanwhile, which waits while
    // this one holds the loader's lock.
    let skip = |_: &str| {
        if free.get().is_none() {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                // SAFETY: a callback that does nothing.
                unsafe { libc::dl_iterate_phdr(Some(none), std::ptr::null_mut()) };
                let _ = tx.send(());
            });
            free.set(Some(rx.recv_timeout(Duration::from_secs(5)).is_ok()));
        }
        true
    };
    // SAFETY: nothing is rewritten (every object is skipped).
    let redirects =
        unsafe { imports::redirect(&[("getppid", fake_getppid as *const () as usize)], &skip) };
    assert!(redirects.is_empty());
    assert_eq!(
        free.get(),
        Some(true),
        "the loader's list was walked meanwhile"
    );
}

#[test]
fn a_skipped_object_keeps_its_slots() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: as above; nothing is rewritten.
    let redirects = unsafe {
        imports::redirect(&[("getppid", fake_getppid as *const () as usize)], &|_| {
            true
        })
    };
    assert!(redirects.is_empty());
    // SAFETY: getppid has no preconditions.
    assert_ne!(unsafe { libc::getppid() }, 4242);
}

/// What the stand-in program profiler was handed: each buffer's valid bytes.
static HANDED: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
/// Its buffers hold this many bytes, and at most `MAX_RECORDS` records.
static BUFFER_BYTES: Mutex<(usize, usize)> = Mutex::new((0, 0));

/// Calls of the stand-in program profiler's request callback.
static REQUESTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

unsafe extern "C" fn program_request(buffer: *mut *mut u8, size: *mut usize, max: *mut usize) {
    REQUESTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let (bytes, max_records) = *BUFFER_BYTES.lock().unwrap_or_else(|p| p.into_inner());
    let layout = std::alloc::Layout::from_size_align(bytes, 8).expect("a valid layout");
    // SAFETY: a non-zero size; the out-pointers are valid (the caller's contract).
    unsafe {
        *buffer = std::alloc::alloc(layout);
        *size = bytes;
        *max = max_records;
    }
}

unsafe extern "C" fn program_complete(
    _ctx: sys::CUcontext,
    _stream: u32,
    buffer: *mut u8,
    size: usize,
    valid: usize,
) {
    // SAFETY: a buffer of `size` bytes from `program_request`, `valid` of them written.
    let bytes = unsafe { std::slice::from_raw_parts(buffer, valid) }.to_vec();
    HANDED.lock().unwrap_or_else(|p| p.into_inner()).push(bytes);
    let layout = std::alloc::Layout::from_size_align(size, 8).expect("a valid layout");
    // SAFETY: allocated by `program_request` with this layout.
    unsafe { std::alloc::dealloc(buffer, layout) };
}

/// A record of `kind` as CUPTI 13.0 sizes it, with `tag` in its second word (the API records' callback id).
fn record(kind: u32, tag: u32) -> Vec<u8> {
    let size = RecordLayout::Cupti13_0
        .record_size(kind)
        .expect("a sized kind");
    let mut r = vec![0u8; size];
    r[0..4].copy_from_slice(&kind.to_ne_bytes());
    r[4..8].copy_from_slice(&tag.to_ne_bytes());
    r
}

/// 8-aligned storage for a batch.
fn aligned(bytes: &[u8]) -> Vec<u64> {
    let mut v = vec![0u64; bytes.len().div_ceil(8)];
    // SAFETY: `v` has at least `bytes.len()` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr().cast::<u8>(), bytes.len())
    };
    v
}

/// Records in 8-aligned storage, as CUPTI fills its buffers, and the batch the tracer would hand over of them.
struct Buffer {
    storage: Vec<u64>,
    len: usize,
}

impl Buffer {
    fn of(bytes: &[u8]) -> Buffer {
        Buffer {
            storage: aligned(bytes),
            len: bytes.len(),
        }
    }

    fn batch(&self) -> ActivityBatch<'_> {
        // SAFETY: the storage holds `len` bytes.
        let view =
            unsafe { std::slice::from_raw_parts(self.storage.as_ptr().cast::<u8>(), self.len) };
        ActivityBatch::from_bytes(view, RecordLayout::Cupti13_0)
    }
}

/// Registrations of buffer callbacks the sharing made in CUPTI (tests that read it hold `SERIAL`).
static REGISTERED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Registrations counted in [`REGISTERED`] when CUPTI's next enable came (`usize::MAX` arms it; tests that read it
/// hold `SERIAL`).
static GIVEN_BEFORE_ENABLE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Kinds the sharing disabled in CUPTI (tests that read it hold `SERIAL`).
static DISABLED: Mutex<Vec<sys::CUpti_ActivityKind>> = Mutex::new(Vec::new());

/// Kinds the sharing enabled in CUPTI (tests that read it hold `SERIAL`).
static ENABLED: Mutex<Vec<sys::CUpti_ActivityKind>> = Mutex::new(Vec::new());

/// Timestamp sources the sharing registered in CUPTI, as addresses (tests that read it hold `SERIAL`).
static CLOCKS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// CUPTI's functions as the sharing calls them at its end: each does nothing and succeeds.
pub(super) fn no_cupti() -> Real {
    unsafe extern "C" fn register(
        _: sys::CUpti_BuffersCallbackRequestFunc,
        _: sys::CUpti_BuffersCallbackCompleteFunc,
    ) -> sys::CUptiResult {
        REGISTERED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        sys::CUPTI_SUCCESS
    }
    unsafe extern "C" fn kind(kind: sys::CUpti_ActivityKind) -> sys::CUptiResult {
        let _ = GIVEN_BEFORE_ENABLE.compare_exchange(
            usize::MAX,
            REGISTERED.load(std::sync::atomic::Ordering::SeqCst),
            std::sync::atomic::Ordering::SeqCst,
            std::sync::atomic::Ordering::SeqCst,
        );
        ENABLED.lock().unwrap_or_else(|p| p.into_inner()).push(kind);
        sys::CUPTI_SUCCESS
    }
    unsafe extern "C" fn disable(kind: sys::CUpti_ActivityKind) -> sys::CUptiResult {
        DISABLED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(kind);
        sys::CUPTI_SUCCESS
    }
    unsafe extern "C" fn flush(_: u32) -> sys::CUptiResult {
        sys::CUPTI_SUCCESS
    }
    unsafe extern "C" fn subscribe(
        _: *mut sys::CUpti_SubscriberHandle,
        _: sys::CUpti_CallbackFunc,
        _: *mut std::ffi::c_void,
    ) -> sys::CUptiResult {
        sys::CUPTI_SUCCESS
    }
    unsafe extern "C" fn register_timestamp(
        source: sys::CUpti_TimestampCallbackFunc,
    ) -> sys::CUptiResult {
        CLOCKS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(source.map_or(0, |f| f as usize));
        sys::CUPTI_SUCCESS
    }
    Real {
        register_callbacks: register,
        enable: kind,
        disable,
        flush_all: flush,
        enable_runtime_api: None,
        enable_driver_api: None,
        subscribe,
        register_timestamp: Some(register_timestamp),
        get_timestamp: None,
        get_next_record: None,
    }
}

/// A session's stream into a file of the test's, for what the sharing tells it.
fn link() -> SessionLink {
    let path = std::env::temp_dir().join(format!("coexist-tests-{}.raw", std::process::id()));
    let sink = crate::sink::Sink::create_file(&path).expect("a file for the stream");
    SessionLink {
        writer: Arc::new(Writer::new(
            sink,
            &gpu_tools::trace::StreamHeader::new(
                std::process::id(),
                0,
                gpu_tools::trace::TimestampClock::Monotonic,
            ),
            crate::writer::Filter::default(),
        )),
        subscriber: Arc::default(),
    }
}

/// Shares CUPTI with `program` as a session would; returns the session's stream, which the sharing tells the kinds
/// the program records alone.
fn share(program: Program) -> Arc<Writer> {
    let link = link();
    let writer = Arc::clone(&link.writer);
    *lock() = Some(Mux {
        real: no_cupti(),
        link,
        session_kinds: bit(sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
        program,
        // Records of these tests carry no timestamps: the clock is left alone.
        clock: clock::ClockMap::new(clock::ProgramClock::Unknown),
        clock_before: clock::ProgramClock::Unknown,
        redirects: Vec::new(),
        handed: Handed::default(),
        callbacks_given: false,
        clock_given: None,
        layout: None,
        tracer_holds_buffer: false,
        tracer_done: false,
    });
    with_mux(|_| ());
    handover::begin();
    writer
}

#[test]
fn the_program_gets_copies_of_its_kinds_only_in_its_own_buffers() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let kernel = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    let runtime = sys::CUPTI_ACTIVITY_KIND_RUNTIME;
    let memset = sys::CUPTI_ACTIVITY_KIND_MEMSET;
    let records = [
        record(kernel, 1),
        record(memset, 2),
        record(runtime, 77),
        record(kernel, 3),
        record(runtime, 78),
        record(kernel, 4),
    ];
    let bytes: Vec<u8> = records.concat();
    let buffer = Buffer::of(&bytes);
    let batch = buffer.batch();
    // Room for two kernel records per buffer: three buffers for the three kernels and one API call.
    let kernel_size = records[0].len();
    *BUFFER_BYTES.lock().unwrap_or_else(|p| p.into_inner()) = (2 * kernel_size, 0);
    HANDED.lock().unwrap_or_else(|p| p.into_inner()).clear();
    let writer = share(Program {
        request: Some(program_request),
        complete: Some(program_complete),
        registered: true,
        enabled: bit(kernel) | bit(runtime),
        only_program: bit(runtime),
        // It asked CUPTI to leave callback id 78 out.
        skip_runtime: vec![78],
        ..Program::default()
    });
    assert_eq!(
        writer.foreign_kinds(),
        bit(runtime),
        "the writer leaves its kind out"
    );
    dispatch(&batch);
    // As CUPTI does, the last buffer stays open until a forced flush or the end.
    let open = HANDED.lock().unwrap_or_else(|p| p.into_inner()).len();
    assert_eq!(
        program_kinds().bits(),
        bit(kernel) | bit(runtime),
        "the kinds the tracer leaves enabled when it stops"
    );
    let state = uninstall(false, ActivityKinds::empty()).expect("shared");
    let handed = HANDED.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert_eq!(
        handed.len(),
        open + 1,
        "the open buffer went back at the end"
    );
    let got: Vec<u8> = handed.concat();
    let want: Vec<u8> = [&records[0], &records[2], &records[3], &records[5]]
        .iter()
        .flat_map(|r| r.iter().copied())
        .collect();
    assert_eq!(
        got, want,
        "its kinds, byte for byte, in order, without id 78"
    );
    assert!(handed.iter().all(|b| b.len() <= 2 * kernel_size));
    assert_eq!(state.handed.records, 4);
    assert_eq!(state.handed.buffers, handed.len() as u64);
    assert_eq!(state.handed.lost, 0);
    assert_eq!(
        writer.foreign_kinds(),
        0,
        "the sharing's end told the writer: nothing is left out"
    );
}

#[test]
fn the_program_limit_of_records_per_buffer_holds_and_a_kind_it_drains_still_reaches_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let kernel = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    let records: Vec<Vec<u8>> = (0..5).map(|i| record(kernel, i)).collect();
    let bytes = records.concat();
    let buffer = Buffer::of(&bytes);
    let batch = buffer.batch();
    *BUFFER_BYTES.lock().unwrap_or_else(|p| p.into_inner()) = (1 << 16, 2);
    HANDED.lock().unwrap_or_else(|p| p.into_inner()).clear();
    // Disabled, not flushed yet: its records still go to it.
    share(Program {
        request: Some(program_request),
        complete: Some(program_complete),
        registered: true,
        draining: bit(kernel),
        ..Program::default()
    });
    assert!(
        program_kinds().is_empty(),
        "a kind it disabled is turned off at the tracer's stop"
    );
    dispatch(&batch);
    uninstall(false, ActivityKinds::empty());
    let handed = HANDED.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert_eq!(
        handed.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![2 * records[0].len(), 2 * records[0].len(), records[0].len()],
        "two records a buffer, as it asked"
    );
    assert_eq!(handed.concat(), bytes);
}

/// `record(kind, 0)` with its start and correlation id set, at CUPTI 13.0's offsets.
fn timed(kind: u32, start: u64, correlation: u32) -> Vec<u8> {
    use std::mem::offset_of;
    let (start_at, correlation_at) = match kind {
        sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL => (
            offset_of!(sys::CUpti_ActivityKernel10, start),
            offset_of!(sys::CUpti_ActivityKernel10, correlationId),
        ),
        _ => (
            offset_of!(sys::CUpti_ActivityAPI, start),
            offset_of!(sys::CUpti_ActivityAPI, correlationId),
        ),
    };
    let mut r = record(kind, 0);
    r[start_at..start_at + 8].copy_from_slice(&start.to_ne_bytes());
    r[correlation_at..correlation_at + 4].copy_from_slice(&correlation.to_ne_bytes());
    r
}

/// A kernel launched between two of the program's sessions, while the trace alone recorded kernels, whose record
/// comes after the program enabled kernels again (it ran on): not the program's, which CUPTI would not have recorded
/// it for. Its session's own kernels are.
#[test]
fn a_kernel_that_started_before_the_program_enabled_kernels_is_not_handed_to_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let kernel = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    *BUFFER_BYTES.lock().unwrap_or_else(|p| p.into_inner()) = (1 << 16, 0);
    HANDED.lock().unwrap_or_else(|p| p.into_inner()).clear();
    share(Program {
        enabled: 0,
        ..kernel_recording_program()
    });
    // Its next session begins: kernels on.
    // SAFETY: the hook with a kind, as the program calls it.
    assert_eq!(unsafe { hooks::enable(kernel) }, sys::CUPTI_SUCCESS);
    let on = with_mux(|m| m.program.enabled_at[0].at).expect("shared");
    let batch = [timed(kernel, on - 2_000, 7), timed(kernel, on + 1_000, 8)].concat();
    let buffer = Buffer::of(&batch);
    dispatch(&buffer.batch());
    uninstall(false, ActivityKinds::empty());
    let handed = HANDED.lock().unwrap_or_else(|p| p.into_inner()).concat();
    assert_eq!(
        handed,
        timed(kernel, on + 1_000, 8),
        "kernel 8 of its session, not 7 from before it"
    );
}

#[test]
fn a_kernel_launched_before_the_program_disabled_kernels_reaches_it_however_late_it_ran() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let kernel = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    let runtime = sys::CUPTI_ACTIVITY_KIND_RUNTIME;
    *BUFFER_BYTES.lock().unwrap_or_else(|p| p.into_inner()) = (1 << 16, 0);
    HANDED.lock().unwrap_or_else(|p| p.into_inner()).clear();
    share(kernel_recording_program());
    // Its cycle ends: kernels off (the trace records them: the sharing takes the call).
    // SAFETY: the hook with a kind, as the program calls it.
    assert_eq!(unsafe { hooks::disable(kernel) }, sys::CUPTI_SUCCESS);
    let off = with_mux(|m| m.program.disabled_at[0].at).expect("shared");
    let (before, after) = (off - 1_000, off + 1_000_000);
    // The trace's batches: launches 9 and 10 began before, 11 after; kernel 9 ran before, 10 and 11 after (10's
    // record in a later batch than its launch's).
    let first = [
        timed(runtime, before - 5_000, 9),
        timed(runtime, before, 10),
        timed(runtime, after, 11),
        timed(kernel, before + 500, 9),
    ]
    .concat();
    let second = [timed(kernel, after + 10, 10), timed(kernel, after + 20, 11)].concat();
    for bytes in [&first, &second] {
        let buffer = Buffer::of(bytes);
        dispatch(&buffer.batch());
    }
    uninstall(false, ActivityKinds::empty());
    let handed = HANDED.lock().unwrap_or_else(|p| p.into_inner()).concat();
    assert_eq!(
        handed,
        [
            timed(kernel, before + 500, 9),
            timed(kernel, after + 10, 10)
        ]
        .concat(),
        "kernels 9 and 10, not 11, nor the runtime records it never enabled"
    );
}

/// The trace's first buffer after an attach that found the program's session open: a kernel CUPTI stamped on the
/// program's clock (realtime, its default) before the trace's went in, and kernels on the trace's clock, before and
/// after the program disabled kernels. The first two are of its session, the first with its timestamps as CUPTI
/// wrote them, the second converted; not the third.
#[test]
fn a_kernel_stamped_on_the_programs_clock_before_the_trace_began_is_judged_and_kept_on_that_clock()
{
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let kernel = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    *BUFFER_BYTES.lock().unwrap_or_else(|p| p.into_inner()) = (1 << 16, 0);
    HANDED.lock().unwrap_or_else(|p| p.into_inner()).clear();
    share(kernel_recording_program());
    with_mux(|m| m.clock = clock::ClockMap::new(clock::ProgramClock::Realtime));
    let realtime_ns = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    };
    let theirs = realtime_ns() - 2_000_000;
    // SAFETY: the hook with a kind, as the program calls it.
    assert_eq!(unsafe { hooks::disable(kernel) }, sys::CUPTI_SUCCESS);
    let off = with_mux(|m| m.program.disabled_at[0].at).expect("shared");
    let batch = [
        timed(kernel, theirs, 5),
        timed(kernel, off - 1_000, 6),
        timed(kernel, off + 1_000_000, 7),
    ]
    .concat();
    let buffer = Buffer::of(&batch);
    dispatch(&buffer.batch());
    let map = with_mux(|m| m.clock).expect("shared");
    uninstall(false, ActivityKinds::empty());
    let handed = HANDED.lock().unwrap_or_else(|p| p.into_inner()).concat();
    let start_at = std::mem::offset_of!(sys::CUpti_ActivityKernel10, start);
    let correlation_at = std::mem::offset_of!(sys::CUpti_ActivityKernel10, correlationId);
    let size = timed(kernel, 0, 0).len();
    let word = |r: &[u8], at: usize, n: usize| {
        let mut w = [0u8; 8];
        w[..n].copy_from_slice(&r[at..at + n]);
        u64::from_ne_bytes(w)
    };
    let got: Vec<(u64, u64)> = handed
        .chunks(size)
        .map(|r| (word(r, correlation_at, 4), word(r, start_at, 8)))
        .collect();
    assert_eq!(got.len(), 2, "kernels 5 and 6, not 7: {got:?}");
    assert_eq!(got[0], (5, theirs), "kernel 5 as CUPTI stamped it");
    assert_eq!(got[1].0, 6);
    assert!(
        got[1].1.abs_diff(map.convert(off - 1_000)) < 1_000_000,
        "kernel 6 on the program's clock: {} against {}",
        got[1].1,
        map.convert(off - 1_000)
    );
}

#[test]
fn nothing_is_handed_without_a_program_session() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let bytes = record(sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 1);
    let buffer = Buffer::of(&bytes);
    let batch = buffer.batch();
    HANDED.lock().unwrap_or_else(|p| p.into_inner()).clear();
    // Kinds enabled but no callbacks registered (as before its first session): nothing to hand them to.
    share(Program {
        enabled: bit(sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
        ..Program::default()
    });
    dispatch(&batch);
    uninstall(false, ActivityKinds::empty());
    // And nothing shared at all.
    dispatch(&batch);
    assert!(HANDED.lock().unwrap_or_else(|p| p.into_inner()).is_empty());
}

/// A counter at two ticks a nanosecond of the trace's clock, from an arbitrary origin.
unsafe extern "C" fn double_speed_clock() -> u64 {
    clock::monotonic_ns() * 2 + 12_345
}

#[test]
fn copies_get_the_program_clock() {
    // CUPTI's default, the realtime clock: an offset.
    let map = clock::ClockMap::new(clock::ProgramClock::Realtime);
    assert!(map.converts());
    let now = clock::monotonic_ns();
    // SAFETY: no preconditions.
    let real = unsafe { clock::realtime_source() };
    assert!(map.convert(now).abs_diff(real) < 5_000_000, "within 5 ms");
    assert_eq!(map.on_trace_clock(map.convert(now)), now, "and back");
    // A counter of its own: its rate comes from two readings at least a millisecond apart.
    let mut map = clock::ClockMap::new(clock::ProgramClock::Callback(double_speed_clock));
    assert!(!map.converts(), "no rate from one reading");
    std::thread::sleep(std::time::Duration::from_millis(20));
    map.read();
    assert!(map.converts());
    let t = clock::monotonic_ns();
    // SAFETY: the test's clock.
    let want = unsafe { double_speed_clock() };
    assert!(
        map.convert(t).abs_diff(want) < 1_000_000,
        "{} against {want}",
        map.convert(t)
    );
    assert!(
        map.on_trace_clock(want).abs_diff(t) < 1_000_000,
        "and back: {} against {t}",
        map.on_trace_clock(want)
    );
    // In a kernel record: start and end converted, an uncollected field (0) left alone.
    let kind = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    let mut r = record(kind, 1);
    let [start, end, completed, ..] = clock::timestamp_offsets(kind) else {
        panic!("kernel records have timestamps");
    };
    r[*start..*start + 8].copy_from_slice(&t.to_ne_bytes());
    r[*end..*end + 8].copy_from_slice(&(t + 1000).to_ne_bytes());
    clock::convert_record(&mut r, kind, &map);
    let read = |at: usize| u64::from_ne_bytes(r[at..at + 8].try_into().expect("8 bytes"));
    assert_eq!(read(*start), map.convert(t));
    assert_eq!(
        read(*end) - read(*start),
        2000,
        "durations scale with the rate"
    );
    assert_eq!(read(*completed), 0);
}

#[test]
fn cupti_clocks_are_recognised() {
    // SAFETY: no preconditions.
    let (real, tsc, mono) = unsafe {
        (
            clock::realtime_source(),
            clock::tsc_source(),
            clock::monotonic_source(),
        )
    };
    assert!(matches!(
        clock::ProgramClock::recognise(real),
        clock::ProgramClock::Realtime
    ));
    assert!(matches!(
        clock::ProgramClock::recognise(mono),
        clock::ProgramClock::Monotonic
    ));
    assert!(matches!(
        clock::ProgramClock::recognise(tsc),
        clock::ProgramClock::Tsc
    ));
    assert!(matches!(
        clock::ProgramClock::recognise(7),
        clock::ProgramClock::Unknown
    ));
}

fn end_sharing() {
    uninstall(false, ActivityKinds::empty());
}

#[test]
fn a_batch_that_read_the_program_callbacks_before_the_end_takes_no_buffer_after_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let kernel = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    let bytes = record(kernel, 1);
    let buffer = Buffer::of(&bytes);
    let batch = buffer.batch();
    *BUFFER_BYTES.lock().unwrap_or_else(|p| p.into_inner()) = (1 << 16, 0);
    HANDED.lock().unwrap_or_else(|p| p.into_inner()).clear();
    share(Program {
        request: Some(program_request),
        complete: Some(program_complete),
        registered: true,
        enabled: bit(kernel),
        ..Program::default()
    });
    // The sharing ends (its callbacks go back to CUPTI) after the batch read them, before it takes the slot.
    *handover::BEFORE_OPEN
        .lock()
        .unwrap_or_else(|p| p.into_inner()) = Some(end_sharing);
    dispatch(&batch);
    *handover::BEFORE_OPEN
        .lock()
        .unwrap_or_else(|p| p.into_inner()) = None;
    assert!(
        HANDED.lock().unwrap_or_else(|p| p.into_inner()).is_empty(),
        "nothing reached the program after the end"
    );
    assert_eq!(
        handover::close().buffers,
        0,
        "no buffer of the program's was left open after the end"
    );
}

/// The stand-in profiler, registered and recording kernels.
fn kernel_recording_program() -> Program {
    Program {
        request: Some(program_request),
        complete: Some(program_complete),
        registered: true,
        enabled: bit(sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
        ..Program::default()
    }
}

#[test]
fn callbacks_given_back_inside_the_stop_are_not_registered_again_at_the_end() {
    use std::sync::atomic::Ordering::SeqCst;
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let program = kernel_recording_program;
    // Given back inside the tracer's stop, while its kinds record: once, and not again at the end.
    share(program());
    REGISTERED.store(0, SeqCst);
    give_back_callbacks();
    assert_eq!(REGISTERED.load(SeqCst), 1, "given back");
    let end = uninstall(false, ActivityKinds::empty()).expect("shared");
    assert_eq!(REGISTERED.load(SeqCst), 1, "not registered again");
    assert!(end.registered);
    // Not given back before (a stop that kept no kind): the end gives them back.
    share(program());
    REGISTERED.store(0, SeqCst);
    uninstall(false, ActivityKinds::empty()).expect("shared");
    assert_eq!(REGISTERED.load(SeqCst), 1, "given back at the end");
    // While the tracer runs, a registration of the program's is kept by the sharing and goes to CUPTI at the end.
    share(program());
    REGISTERED.store(0, SeqCst);
    // SAFETY: the hook with the program's own functions, as its redirected call would pass them.
    let code = unsafe { hooks::register_callbacks(Some(program_request), Some(program_complete)) };
    assert_eq!(code, sys::CUPTI_SUCCESS);
    assert_eq!(REGISTERED.load(SeqCst), 0, "kept by the sharing");
    uninstall(false, ActivityKinds::empty()).expect("shared");
    assert_eq!(REGISTERED.load(SeqCst), 1, "registered at the end");
    // Given back, then the program registers others (its next session): those go to CUPTI at once, and the end
    // registers none in the middle of that session.
    share(program());
    give_back_callbacks();
    REGISTERED.store(0, SeqCst);
    // SAFETY: as above.
    let code = unsafe { hooks::register_callbacks(Some(program_request), Some(program_complete)) };
    assert_eq!(code, sys::CUPTI_SUCCESS);
    assert_eq!(REGISTERED.load(SeqCst), 1, "to CUPTI at once");
    uninstall(false, ActivityKinds::empty()).expect("shared");
    assert_eq!(
        REGISTERED.load(SeqCst),
        1,
        "not registered again at the end"
    );
}

#[test]
fn after_a_stop_that_kept_no_kind_the_program_finds_its_callbacks_in_cupti_before_its_first_enable()
{
    use std::sync::atomic::Ordering::SeqCst;
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let kernel = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    let enabled = || ENABLED.lock().unwrap_or_else(|p| p.into_inner()).clone();
    // Between two sessions of the program's at the tracer's stop: no kind kept, its callbacks still the trace's.
    share(Program {
        enabled: 0,
        ..kernel_recording_program()
    });
    set_trace_layout(RecordLayout::Cupti13_0);
    tracer_stopped();
    REGISTERED.store(0, SeqCst);
    ENABLED.lock().unwrap_or_else(|p| p.into_inner()).clear();
    // Its next session begins before the end: its enable reaches CUPTI with its callbacks registered first.
    GIVEN_BEFORE_ENABLE.store(usize::MAX, SeqCst);
    // SAFETY: the hook with a kind, as the program calls it.
    assert_eq!(unsafe { hooks::enable(kernel) }, sys::CUPTI_SUCCESS);
    assert_eq!(enabled(), vec![kernel], "enabled in CUPTI");
    assert_eq!(
        GIVEN_BEFORE_ENABLE.load(SeqCst),
        1,
        "its callbacks were registered before the enable"
    );
    let end = uninstall(false, ActivityKinds::empty()).expect("shared");
    assert_eq!(REGISTERED.load(SeqCst), 1, "and not again at the end");
    assert_eq!(enabled(), vec![kernel, kernel], "its kind on, as it was");
    assert!(end.registered);
    // The same end with no enable before it: the end gives the callbacks back as its first step, once.
    share(Program {
        enabled: 0,
        ..kernel_recording_program()
    });
    tracer_stopped();
    REGISTERED.store(0, SeqCst);
    uninstall(false, ActivityKinds::empty()).expect("shared");
    assert_eq!(REGISTERED.load(SeqCst), 1, "given back at the end");
    // At the process's exit nothing is given back.
    share(kernel_recording_program());
    tracer_stopped();
    REGISTERED.store(0, SeqCst);
    uninstall(true, ActivityKinds::empty()).expect("shared");
    assert_eq!(REGISTERED.load(SeqCst), 0, "nothing at the exit");
}

/// A program's timestamp source, as Kineto registers one.
unsafe extern "C" fn program_clock() -> u64 {
    7
}

#[test]
fn a_clock_the_program_registers_after_its_own_went_back_goes_to_cupti_at_once_and_not_again_at_the_end()
 {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let clocks = || CLOCKS.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let ours = program_clock as unsafe extern "C" fn() -> u64 as usize;
    // During the trace: kept by the sharing (CUPTI stays on the trace's clock) and registered at the end.
    share(kernel_recording_program());
    CLOCKS.lock().unwrap_or_else(|p| p.into_inner()).clear();
    // SAFETY: the hook with a timestamp callback, as the program's redirected call passes one.
    let code = unsafe { hooks::register_timestamp(Some(program_clock)) };
    assert_eq!(code, sys::CUPTI_SUCCESS);
    assert!(
        clocks().is_empty(),
        "kept while the trace's clock is in CUPTI"
    );
    let end = uninstall(false, ActivityKinds::empty()).expect("shared");
    assert_eq!(clocks(), vec![ours], "registered at the end");
    assert!(end.clock.is_some());
    // After the tracer's stop gave the program's clock back: the next cycle's registration (torch.profiler makes
    // one at each cycle's start) goes to CUPTI then, and the end, which may come in the middle of that cycle,
    // registers none.
    share(kernel_recording_program());
    // SAFETY: as above.
    unsafe { hooks::register_timestamp(Some(program_clock)) };
    give_back_callbacks();
    CLOCKS.lock().unwrap_or_else(|p| p.into_inner()).clear();
    // SAFETY: as above.
    let code = unsafe { hooks::register_timestamp(Some(program_clock)) };
    assert_eq!(code, sys::CUPTI_SUCCESS);
    assert_eq!(clocks(), vec![ours], "to CUPTI at once");
    let end = uninstall(false, ActivityKinds::empty()).expect("shared");
    assert_eq!(clocks(), vec![ours], "not registered again at the end");
    assert!(end.clock.is_some(), "said as given back");
}

#[test]
fn a_kind_kept_for_the_program_that_it_turned_off_since_is_turned_off_at_the_end() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let kernel = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    let runtime = sys::CUPTI_ACTIVITY_KIND_RUNTIME;
    // The tracer stopped keeping kernel and runtime records on for the program; the program then disabled runtime.
    share(Program {
        request: Some(program_request),
        complete: Some(program_complete),
        registered: true,
        enabled: bit(kernel),
        ..Program::default()
    });
    DISABLED.lock().unwrap_or_else(|p| p.into_inner()).clear();
    let kept = ActivityKinds::from_bits_retain(bit(kernel) | bit(runtime));
    uninstall(false, kept).expect("shared");
    assert_eq!(
        *DISABLED.lock().unwrap_or_else(|p| p.into_inner()),
        vec![runtime],
        "runtime off, kernel left on"
    );
}

#[test]
fn a_kind_of_the_trace_the_program_enables_before_the_tracer_starts_is_enabled_in_cupti() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let kernel = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    share(Program::default());
    ENABLED.lock().unwrap_or_else(|p| p.into_inner()).clear();
    // SAFETY: the hook with a kind, as the program calls it.
    assert_eq!(unsafe { hooks::enable(kernel) }, sys::CUPTI_SUCCESS);
    assert_eq!(
        *ENABLED.lock().unwrap_or_else(|p| p.into_inner()),
        vec![kernel],
        "no tracer enabled it yet: CUPTI enables it for the program"
    );
    assert_eq!(program_kinds().bits(), bit(kernel));
    set_trace_layout(RecordLayout::Cupti13_0);
    // SAFETY: as above.
    assert_eq!(unsafe { hooks::enable(kernel) }, sys::CUPTI_SUCCESS);
    assert_eq!(
        ENABLED.lock().unwrap_or_else(|p| p.into_inner()).len(),
        1,
        "the tracer records it: CUPTI is not called again"
    );
    end_sharing();
}

#[test]
fn the_tracer_flushes_first_beside_any_profiler_of_the_program() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    assert!(!program_profiler_shared(), "nothing shared");
    // A profiler with one session open throughout (found by the probe) and one that starts and stops its sessions
    // alike: on an H200 what looked like a loss the flush caused beside the first was the window's start read
    // from the program's buffers (`Writer::window_starts_now`).
    share(kernel_recording_program());
    assert!(program_profiler_shared());
    end_sharing();
    share(Program::default());
    assert!(!program_profiler_shared(), "no profiler registered");
    // SAFETY: the hook with the program's own functions, as its redirected call would pass them.
    let code = unsafe { hooks::register_callbacks(Some(program_request), Some(program_complete)) };
    assert_eq!(code, sys::CUPTI_SUCCESS);
    assert!(program_profiler_shared(), "it registered during the trace");
    end_sharing();
}

/// Buffers the stand-in program profiler's request callback gave (tests that read it hold `SERIAL`).
fn requested() -> usize {
    REQUESTS.load(std::sync::atomic::Ordering::SeqCst)
}

#[test]
fn a_buffer_of_the_tracer_left_in_cupti_keeps_one_of_the_program_outstanding() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    *BUFFER_BYTES.lock().unwrap_or_else(|p| p.into_inner()) = (4096, 0);
    let program = kernel_recording_program;
    // The tracer held no buffer at its stop: every buffer taken from the program goes back to it.
    share(program());
    HANDED.lock().unwrap_or_else(|p| p.into_inner()).clear();
    let before = requested();
    let end = uninstall(false, ActivityKinds::empty()).expect("shared");
    assert!(!end.kept_outstanding);
    assert_eq!(
        requested() - before,
        HANDED.lock().unwrap_or_else(|p| p.into_inner()).len(),
        "none outstanding"
    );
    // It held one: one more is taken from the program than goes back, and the end says so.
    share(program());
    HANDED.lock().unwrap_or_else(|p| p.into_inner()).clear();
    let before = requested();
    tracer_kept_a_buffer();
    let end = uninstall(false, ActivityKinds::empty()).expect("shared");
    assert!(end.kept_outstanding);
    assert_eq!(
        requested() - before,
        HANDED.lock().unwrap_or_else(|p| p.into_inner()).len() + 1,
        "one outstanding"
    );
}

#[test]
fn after_the_tracer_stops_the_program_enables_and_disables_in_cupti() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let kernel = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    share(Program::default());
    set_trace_layout(RecordLayout::Cupti13_0);
    ENABLED.lock().unwrap_or_else(|p| p.into_inner()).clear();
    DISABLED.lock().unwrap_or_else(|p| p.into_inner()).clear();
    // SAFETY: each hook is given a kind, as the program calls it.
    assert_eq!(unsafe { hooks::enable(kernel) }, sys::CUPTI_SUCCESS);
    assert!(
        ENABLED.lock().unwrap_or_else(|p| p.into_inner()).is_empty(),
        "the tracer records it"
    );
    tracer_stopped();
    // SAFETY: as above.
    assert_eq!(unsafe { hooks::disable(kernel) }, sys::CUPTI_SUCCESS);
    // SAFETY: as above.
    assert_eq!(unsafe { hooks::enable(kernel) }, sys::CUPTI_SUCCESS);
    assert_eq!(
        *DISABLED.lock().unwrap_or_else(|p| p.into_inner()),
        vec![kernel],
        "disabled in CUPTI once the tracer stopped"
    );
    assert_eq!(
        *ENABLED.lock().unwrap_or_else(|p| p.into_inner()),
        vec![kernel],
        "and enabled again"
    );
    assert_eq!(program_kinds().bits(), bit(kernel));
    end_sharing();
}

#[test]
fn kinds_seen_after_the_watch_are_the_programs_unless_its_own_calls_decided_them() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let kernel = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    let runtime = sys::CUPTI_ACTIVITY_KIND_RUNTIME;
    let driver = sys::CUPTI_ACTIVITY_KIND_DRIVER;
    let memset = sys::CUPTI_ACTIVITY_KIND_MEMSET;
    let overhead = sys::CUPTI_ACTIVITY_KIND_OVERHEAD;
    // Found recording at the attach, its watch saw overhead alone; it disabled driver records itself while watched
    // and memsets during the window.
    share(Program {
        request: Some(program_request),
        complete: Some(program_complete),
        registered: true,
        probed: true,
        enabled: bit(overhead),
        called_while_watched: bit(driver),
        ..Program::default()
    });
    with_mux(|m| {
        m.program.disabled_at.push(handover::Disabled::now(memset));
        let seen = bit(kernel) | bit(runtime) | bit(driver) | bit(memset);
        assert_eq!(
            m.learn_program_kinds(seen, "a test's buffer", true),
            bit(kernel) | bit(runtime)
        );
        assert_eq!(
            m.program.enabled,
            bit(overhead) | bit(kernel) | bit(runtime),
            "kernels and runtime are its now; driver and memsets stay as its calls left them"
        );
        assert_eq!(
            m.program.only_program,
            bit(overhead) | bit(runtime),
            "the trace leaves out the kinds it does not record"
        );
    });
    assert_eq!(
        program_kinds(),
        ActivityKinds::from_bits_retain(bit(overhead) | bit(kernel) | bit(runtime)),
        "kept enabled for it at the tracer's stop"
    );
    end_sharing();
    // A profiler that registered during the session says its kinds by its calls: nothing is learned.
    share(Program {
        request: Some(program_request),
        complete: Some(program_complete),
        registered: true,
        enabled: bit(overhead),
        ..Program::default()
    });
    with_mux(|m| {
        assert_eq!(
            m.learn_program_kinds(bit(kernel), "a test's buffer", false),
            0
        );
        assert_eq!(m.program.enabled, bit(overhead));
    });
    end_sharing();
}

/// Set by [`slow_to_take_the_slot`] once its batch has read the program's state.
static SLOW_BATCH_INSIDE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A batch on another thread that is slow to take the slot, as CUPTI's threads and the trace's flusher can be.
fn slow_to_take_the_slot() {
    SLOW_BATCH_INSIDE.store(true, std::sync::atomic::Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(50));
}

#[test]
fn a_batch_handed_over_on_another_thread_reaches_the_forced_flush_that_came_meanwhile() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let kernel = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    *BUFFER_BYTES.lock().unwrap_or_else(|p| p.into_inner()) = (1 << 16, 0);
    HANDED.lock().unwrap_or_else(|p| p.into_inner()).clear();
    share(kernel_recording_program());
    SLOW_BATCH_INSIDE.store(false, std::sync::atomic::Ordering::SeqCst);
    *handover::BEFORE_OPEN
        .lock()
        .unwrap_or_else(|p| p.into_inner()) = Some(slow_to_take_the_slot);
    // The trace's flusher completes a buffer with a kernel of the program's cycle, and hands it over slowly...
    let other = std::thread::spawn(move || {
        let buffer = Buffer::of(&record(kernel, 7));
        dispatch(&buffer.batch());
    });
    let t0 = std::time::Instant::now();
    while !SLOW_BATCH_INSIDE.load(std::sync::atomic::Ordering::SeqCst) {
        assert!(t0.elapsed() < Duration::from_secs(10), "the batch began");
        std::thread::sleep(Duration::from_micros(100));
    }
    // ...while the program ends its cycle: kernels off, then its forced flush, after which it reads what it has.
    // SAFETY: the hooks with a kind and a flag, as the program calls them.
    assert_eq!(unsafe { hooks::disable(kernel) }, sys::CUPTI_SUCCESS);
    // SAFETY: as above.
    let code = unsafe { hooks::flush_all(sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) };
    assert_eq!(code, sys::CUPTI_SUCCESS);
    let at_its_flush = HANDED.lock().unwrap_or_else(|p| p.into_inner()).concat();
    other.join().expect("the other thread");
    *handover::BEFORE_OPEN
        .lock()
        .unwrap_or_else(|p| p.into_inner()) = None;
    end_sharing();
    assert_eq!(
        at_its_flush,
        record(kernel, 7),
        "the kernel reached the program by the end of its forced flush"
    );
}
