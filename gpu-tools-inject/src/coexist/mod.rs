//! Sharing CUPTI with a profiler inside the traced program (PyTorch's Kineto behind `torch.profiler`).
//!
//! CUPTI's activity API is the process's, not a subscriber's: one pair of buffer callbacks, one set of enabled
//! kinds. Without care, whoever registers last takes every record: a `torch.profiler` session that starts while
//! the trace runs takes the trace's records (and loses the ones in buffers the trace lent), and when it stops it
//! disables the kinds the trace still records. So while a session runs, the program's own calls of the activity
//! API come here instead of to CUPTI (their import slots are redirected, see `crate::imports`), and the trace shares:
//!
//! - `cuptiActivityRegisterCallbacks`: the program's callbacks are kept; CUPTI keeps the trace's. Records made
//!   before are delivered first (a forced flush), so the program gets none from before its session.
//! - `cuptiActivityEnable`/`Disable`: a kind the trace records stays enabled in CUPTI; one only the program wants is
//!   enabled and disabled for it (the trace leaves its records out). A kind the program disables still reaches it
//!   until its next forced flush, which is how Kineto collects the end of its session.
//! - `cuptiActivityEnableRuntimeApi`/`DriverApi`: the program's choices filter its copies only.
//! - `cuptiActivityFlushAll`: CUPTI flushes; the program's records reach it before the call returns, as without
//!   the trace.
//! - `cuptiSubscribe` (CUPTI 13.0 allows one subscriber): when the trace holds it and can do without it (a trace,
//!   not a range profile), the trace lets go of it and the program subscribes; the stream says so. The range
//!   profiler cannot let go (it sees launches and contexts through it): the program gets CUPTI's refusal, and the
//!   stream says that too. (Handing the session's callbacks on to the program's subscriber crashed a PyTorch
//!   program under the range profiler on an H200 — `free(): invalid pointer` at its first launch — and is not
//!   done.)
//! - `cuptiActivityRegisterTimestampCallback`: CUPTI keeps the trace's clock; the program's copies are converted
//!   to its own (`clock`).
//!
//! Every completed buffer of the trace is walked once more: the records of the program's kinds are copied, as
//! CUPTI wrote them, into buffers that the program's own request callback gives, and handed to its completion
//! callback. When the session ends, the program's registration and kinds go back to CUPTI and the import slots
//! are restored: the program is left calling CUPTI directly, as before.
//!
//! Calls made through `dlsym` pointers (a profiler that loads CUPTI itself) are not seen; nor are objects loaded
//! after the session started. Attached while the program's profiler records (its session open across the attach),
//! its callbacks are found where CUPTI keeps them and the kinds it records are watched for a moment (`probe`); it is
//! then shared with as if it had registered and enabled them during the trace. Its import slots are redirected before
//! that moment, so that what it enables, disables or registers from then on until the sharing starts is known too
//! (`watch`: a torch.profiler on a `schedule` that began a cycle right after the moment lost steps of that cycle).
//! The watch waits for a buffer of the program's work: one of CUPTI's own overhead records alone (CUPTI 13.0 keeps a
//! buffer per thread) says nothing of its kinds. A kind it had on that the watch did not see is still learned where its
//! records made after the watch come back before the trace's clock went in (the tracer's forced flush before its start,
//! or a buffer of its CUPTI held then), unless its own calls decided that kind meanwhile; it is then its, and given
//! back at the end (`Mux::learn_program_kinds`). A kind that recorded nothing then cannot be seen: it is not given back
//! at the end, and its records of the window go to the trace alone (where the program ends its session inside the
//! window, the stream says which kind it lacked). The buffer of its that CUPTI holds when the
//! tracer starts is completed to the tracer later: the records in it made since then are the trace's too, and the
//! trace reads them from a copy before the buffer goes on to the program (`trace_reads`; without that, a window's
//! first records beside an open torch.profiler session were the program's alone). At the stop, the program's
//! callbacks go back to CUPTI only once such a buffer came back (flushed without force, 50 ms at most): completed
//! after, it reached the program as CUPTI wrote it, with none of the window's records in it read for the trace and
//! all of them on the trace's clock.

mod clock;
mod flush;
mod gap;
mod handover;
mod hooks;
mod probe;
mod watch;

pub use handover::dispatch;

use std::ffi::{CString, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use gpu_tools::cupti::activity::{ActivityBatch, ActivityKinds, RecordLayout};
use gpu_tools::cupti::callback::Subscriber;
use gpu_tools::sys::cupti as sys;
use gpu_tools::trace::NoticeLevel;

use crate::writer::Writer;

type RegisterFn = unsafe extern "C" fn(
    sys::CUpti_BuffersCallbackRequestFunc,
    sys::CUpti_BuffersCallbackCompleteFunc,
) -> sys::CUptiResult;
type KindFn = unsafe extern "C" fn(sys::CUpti_ActivityKind) -> sys::CUptiResult;
type FlushFn = unsafe extern "C" fn(u32) -> sys::CUptiResult;
type ApiChoiceFn = unsafe extern "C" fn(sys::CUpti_CallbackId, u8) -> sys::CUptiResult;
type RegisterTimestampFn =
    unsafe extern "C" fn(sys::CUpti_TimestampCallbackFunc) -> sys::CUptiResult;
type GetTimestampFn = unsafe extern "C" fn(*mut u64) -> sys::CUptiResult;
type NextRecordFn =
    unsafe extern "C" fn(*mut u8, usize, *mut *mut sys::CUpti_Activity) -> sys::CUptiResult;
type SubscribeFn = unsafe extern "C" fn(
    *mut sys::CUpti_SubscriberHandle,
    sys::CUpti_CallbackFunc,
    *mut c_void,
) -> sys::CUptiResult;

/// The real CUPTI functions, resolved in the CUPTI the tracer uses (never through an import slot).
#[derive(Clone, Copy)]
struct Real {
    register_callbacks: RegisterFn,
    enable: KindFn,
    disable: KindFn,
    flush_all: FlushFn,
    /// Not in every release (CUDA 12.5+).
    enable_runtime_api: Option<ApiChoiceFn>,
    enable_driver_api: Option<ApiChoiceFn>,
    subscribe: SubscribeFn,
    register_timestamp: Option<RegisterTimestampFn>,
    get_timestamp: Option<GetTimestampFn>,
    get_next_record: Option<NextRecordFn>,
}

impl Real {
    /// `cuptiGetTimestamp` now: CUPTI's clock, the program's until the trace registers its own (`None`: not in this
    /// CUPTI, or it failed).
    fn timestamp(&self) -> Option<u64> {
        let get = self.get_timestamp?;
        let mut t = 0u64;
        // SAFETY: the real cuptiGetTimestamp with a valid out-pointer.
        (unsafe { get(&mut t) } == sys::CUPTI_SUCCESS && t != 0).then_some(t)
    }
}

/// What the program asked of the activity API during the session.
#[derive(Debug, Default)]
struct Program {
    request: sys::CUpti_BuffersCallbackRequestFunc,
    complete: sys::CUpti_BuffersCallbackCompleteFunc,
    /// It registered callbacks during the session (they go back to CUPTI at its end).
    registered: bool,
    /// Kinds it has enabled now.
    enabled: u64,
    /// Kinds it disabled whose records still reach it, until its next forced flush.
    draining: u64,
    /// When it disabled each draining kind: records that start later are not its, unless launched before.
    disabled_at: Vec<handover::Disabled>,
    /// When it last enabled each kind through the sharing: records that started before are not its.
    enabled_at: Vec<handover::Enabled>,
    /// Kinds enabled for it alone: the trace leaves their records out.
    only_program: u64,
    /// API records it asked CUPTI to leave out, per domain.
    skip_runtime: Vec<u32>,
    skip_driver: Vec<u32>,
    /// The timestamp source it registered during the session.
    timestamp: Option<clock::TimestampFn>,
    /// Its kinds are what the probe saw it record at the attach, not what it enabled (cleared when it registers
    /// during the session): a kind it disables that is not among them was on, unseen.
    probed: bool,
    /// Kinds it disabled while on unseen, already said in the stream.
    unseen_said: u64,
    /// Kinds it enabled or disabled itself while watched, before the sharing: whether they are on is what its calls
    /// said, not what records were seen.
    called_while_watched: u64,
}

impl Program {
    /// Kinds whose records it gets.
    fn receives(&self) -> u64 {
        self.enabled | self.draining
    }
}

/// Counts for the end of the session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Handed {
    /// Records copied to the program.
    pub records: u64,
    /// Its buffers filled and handed back.
    pub buffers: u64,
    /// Records it should have had but did not get (its request callback gave no buffer, or one too small).
    pub lost: u64,
}

struct Mux {
    /// The real CUPTI functions, resolved at [`install`]. A hook called without a session (a slot a thread read
    /// just before the session ended) resolves them again (`hooks::guarded`).
    real: Real,
    /// What the session gave the sharing.
    link: SessionLink,
    /// Kinds the session's tracer enabled.
    session_kinds: u64,
    program: Program,
    /// From the trace's clock to the one the program expects.
    clock: clock::ClockMap,
    /// The clock CUPTI was on when the session began, if recognised.
    clock_before: clock::ProgramClock,
    redirects: Vec<crate::imports::Redirect>,
    handed: Handed,
    /// The program's callbacks are in CUPTI again ([`give_back_callbacks`], or its own registration once the tracer
    /// stopped, which goes to CUPTI at once): [`uninstall`] does not register them again.
    callbacks_given: bool,
    /// The same for its clock (and whether it went back). Once it is back, a clock the program registers goes to
    /// CUPTI at once (`hooks::register_timestamp`), so the end registers none in the middle of its next session.
    clock_given: Option<bool>,
    /// The record layout of the session's tracer, once it runs: the trace reads the program's buffers CUPTI held
    /// when the tracer started ([`unlent_to_program`]).
    layout: Option<RecordLayout>,
    /// The tracer stopped with a buffer of its still held by CUPTI ([`tracer_kept_a_buffer`]).
    tracer_holds_buffer: bool,
    /// The session's tracer has stopped ([`tracer_stopped`]): the program's registrations go to CUPTI at once.
    tracer_done: bool,
}

impl Mux {
    /// Kinds of the program's records made before the trace's clock went in, seen after the probe's watch (`seen`
    /// says where): on since before the attach, though the watch saw none of them. Where the program has neither
    /// enabled nor disabled them itself since (its calls say better), they are its from now on: it gets their
    /// records, and they stay enabled for it at the end. Taken for the trace's alone, they were disabled at the
    /// window's end for the rest of the job: on an H200 a torch.profiler open across eight windows kept 116,125 of
    /// its 481,785 kernels so. `late`: the tracer has run meanwhile, and their records until now went to the trace
    /// alone.
    fn learn_program_kinds(&mut self, kinds: u64, seen: &str, late: bool) -> u64 {
        let program = &mut self.program;
        if !program.probed {
            return 0;
        }
        let decided = program.disabled_at.iter().fold(
            program.enabled | program.draining | program.unseen_said | program.called_while_watched,
            |a, d| a | bit(d.kind),
        );
        let learned = kinds & !decided;
        if learned == 0 {
            return 0;
        }
        program.enabled |= learned;
        program.only_program = program.enabled & !self.session_kinds;
        let more = ActivityKinds::from_bits_retain(learned);
        log::debug!("the program's profiler records {more:?} too, seen in {seen}");
        self.link.writer.notice(
            if late {
                NoticeLevel::Warning
            } else {
                NoticeLevel::Info
            },
            format!(
                "the program's own profiler also records CUPTI activity kinds {more:?}, which the attach's watch did \
                 not see (seen in {seen}): they are its from now on and stay enabled for it at the end{}",
                if late {
                    "; its records of them in this window until now went to the trace alone"
                } else {
                    ""
                }
            ),
        );
        learned
    }
}

static MUX: Mutex<Option<Mux>> = Mutex::new(None);
/// The program receives some kind: batches are walked for it.
static DISPATCHING: AtomicBool = AtomicBool::new(false);

fn lock() -> MutexGuard<'static, Option<Mux>> {
    MUX.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `f` on the session's state, if a session shares CUPTI now.
fn with_mux<T>(f: impl FnOnce(&mut Mux) -> T) -> Option<T> {
    let mut guard = lock();
    let mux = guard.as_mut()?;
    let out = f(mux);
    DISPATCHING.store(mux.program.receives() != 0, Ordering::Release);
    mux.link.writer.set_foreign_kinds(mux.program.only_program);
    Some(out)
}

fn bit(kind: u32) -> u64 {
    1u64.checked_shl(kind).unwrap_or(0)
}

/// The session's callback subscriber, as the sharing may give it up to a profiler of the program that asks for it
/// (CUPTI 13.0 gives one). The session fills it once it subscribes.
#[derive(Default)]
pub struct SubscriberSlot {
    /// The subscriber, while the session holds it.
    pub subscriber: Option<Subscriber>,
    /// It serves the range profiler, which cannot do without it: it is never given up.
    pub kept: bool,
}

/// What the tracing session gives the sharing at [`install`]: where the sharing says things (the session's stream,
/// which also learns the kinds the program records alone, [`Writer::set_foreign_kinds`]) and the session's
/// subscriber slot. Values passed down: the sharing runs inside the program's CUPTI calls and never reaches back
/// into the session's module.
pub struct SessionLink {
    /// The session's stream.
    pub writer: Arc<Writer>,
    /// The session's callback subscriber.
    pub subscriber: Arc<Mutex<SubscriberSlot>>,
}

/// Gives the session's subscriber up to the program's profiler, which asked for it: true when the session held it
/// and could do without it (a trace's flush at context destruction; not the range profiler). Said in the stream.
fn step_aside(link_writer: &Writer, slot: &Mutex<SubscriberSlot>) -> bool {
    let subscriber = {
        let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
        if slot.kept {
            return false;
        }
        slot.subscriber.take()
    };
    let Some(subscriber) = subscriber else {
        return false;
    };
    // Unsubscribed outside the slot's lock (CUPTI's call).
    if let Err(e) = subscriber.unsubscribe() {
        log::warn!("unsubscribe for the program's profiler: {e}");
        return false;
    }
    link_writer.notice(
        NoticeLevel::Info,
        "the program's own profiler asked for CUPTI's callback subscriber, which this CUPTI gives to one: the \
         trace gave it up (its records are unaffected; buffers are no longer flushed when a context is \
         destroyed, only periodically and at exit)"
            .into(),
    );
    true
}

/// The CUPTI functions redirected, with their hooks.
fn wanted() -> [(&'static str, usize); 8] {
    [
        (
            "cuptiActivityRegisterCallbacks",
            hooks::register_callbacks as *const () as usize,
        ),
        ("cuptiActivityEnable", hooks::enable as *const () as usize),
        ("cuptiActivityDisable", hooks::disable as *const () as usize),
        (
            "cuptiActivityFlushAll",
            hooks::flush_all as *const () as usize,
        ),
        (
            "cuptiActivityEnableRuntimeApi",
            hooks::enable_runtime_api as *const () as usize,
        ),
        (
            "cuptiActivityEnableDriverApi",
            hooks::enable_driver_api as *const () as usize,
        ),
        ("cuptiSubscribe", hooks::subscribe as *const () as usize),
        (
            "cuptiActivityRegisterTimestampCallback",
            hooks::register_timestamp as *const () as usize,
        ),
    ]
}

/// Resolves the real functions in the CUPTI the program maps.
fn resolve() -> Result<Real, String> {
    real_in(&cupti_path()?)
}

/// The CUPTI the tracer uses, which is the one the program maps (or the one loaded for the trace).
fn cupti_path() -> Result<std::path::PathBuf, String> {
    gpu_tools::cupti::CuptiLibrary::get()
        .and_then(|l| l.path())
        .map(std::path::Path::to_path_buf)
        .or_else(|| gpu_tools::linux::procfs::Process::current().mapped_library("libcupti.so"))
        .ok_or_else(|| "no CUPTI is loaded".to_string())
}

/// The CUPTI functions of the library at `path`, which must be loaded already.
fn real_in(path: &std::path::Path) -> Result<Real, String> {
    let c_path = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
    let lib = crate::mapped_library::MappedLibrary::find(&c_path)
        .ok_or_else(|| format!("{} is not loaded", path.display()))?;
    let symbol = |name: &str| -> Result<usize, String> {
        let c = CString::new(name).map_err(|e| e.to_string())?;
        lib.symbol(&c)
            .map(|p| p as usize)
            .ok_or_else(|| format!("{} has no {name}", path.display()))
    };
    // SAFETY: each transmute takes the address of the named CUPTI function, whose C signature (cupti_activity.h,
    // cupti_callbacks.h) the type states.
    let real = unsafe {
        Real {
            register_callbacks: std::mem::transmute::<usize, RegisterFn>(symbol(
                "cuptiActivityRegisterCallbacks",
            )?),
            enable: std::mem::transmute::<usize, KindFn>(symbol("cuptiActivityEnable")?),
            disable: std::mem::transmute::<usize, KindFn>(symbol("cuptiActivityDisable")?),
            flush_all: std::mem::transmute::<usize, FlushFn>(symbol("cuptiActivityFlushAll")?),
            enable_runtime_api: symbol("cuptiActivityEnableRuntimeApi")
                .ok()
                .map(|p| std::mem::transmute::<usize, ApiChoiceFn>(p)),
            enable_driver_api: symbol("cuptiActivityEnableDriverApi")
                .ok()
                .map(|p| std::mem::transmute::<usize, ApiChoiceFn>(p)),
            subscribe: std::mem::transmute::<usize, SubscribeFn>(symbol("cuptiSubscribe")?),
            register_timestamp: symbol("cuptiActivityRegisterTimestampCallback")
                .ok()
                .map(|p| std::mem::transmute::<usize, RegisterTimestampFn>(p)),
            get_timestamp: symbol("cuptiGetTimestamp")
                .ok()
                .map(|p| std::mem::transmute::<usize, GetTimestampFn>(p)),
            get_next_record: symbol("cuptiActivityGetNextRecord")
                .ok()
                .map(|p| std::mem::transmute::<usize, NextRecordFn>(p)),
        }
    };
    Ok(real)
}

/// What a session learns of the program's CUPTI before it shares it: the clock CUPTI was on
/// ([`read_clock_before_trace`]) and, attached, a profiler of the program found recording ([`probe_program`]).
/// Handed back to [`install`].
pub struct Before {
    clock: clock::ProgramClock,
    found: Option<probe::Found>,
    /// The program's import slots, redirected before the probe so that its calls from then on are seen (`watch`);
    /// [`install`] takes them over. Restored if no sharing starts.
    redirects: Vec<crate::imports::Redirect>,
}

impl Drop for Before {
    fn drop(&mut self) {
        if !self.redirects.is_empty() {
            // No sharing took them: the program calls CUPTI directly again, as before the attach.
            watch::end();
            crate::imports::restore(std::mem::take(&mut self.redirects));
        }
    }
}

/// Redirects the program's CUPTI calls to the hooks (which share CUPTI once a sharing is installed, and until then
/// pass them on).
fn redirect_program_calls() -> Vec<crate::imports::Redirect> {
    // SAFETY: each hook has the C signature of the CUPTI function it stands for, and stays valid for the
    // process's life (the library is pinned).
    unsafe { crate::imports::redirect(&wanted(), &crate::imports::not_cupti_or_this_library) }
}

/// Reads which clock CUPTI is on now: call it before the session's tracer registers the trace's clock, so that
/// the program's copies, and CUPTI at the session's end, get the program's clock.
pub fn read_clock_before_trace() -> Before {
    // A reading of 0 is no clock's: recognised as none, as an unread one is.
    let recognised = resolve()
        .ok()
        .and_then(|real| real.timestamp())
        .map(clock::ProgramClock::recognise)
        .unwrap_or(clock::ProgramClock::Unknown);
    log::debug!("CUPTI's clock before the trace: {recognised:?}");
    Before {
        clock: recognised,
        found: None,
        redirects: Vec::new(),
    }
}

/// How long the program's buffers are watched for the kinds its profiler records.
const WATCH: Duration = Duration::from_millis(200);

/// What the program's own profiler was doing when the trace attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramProfiler {
    /// It had never registered buffer callbacks.
    None,
    /// Its callbacks were registered; nothing recorded while they were watched (a session that ended, or a
    /// program that launched nothing meanwhile). `asked`: CUPTI asked it for a buffer all the same.
    Idle { asked: bool },
    /// It records these kinds.
    Recording(ActivityKinds),
}

impl ProgramProfiler {
    /// Whether it registered with CUPTI (recording or not): its activity API has run in the process.
    pub fn registered(&self) -> bool {
        !matches!(self, ProgramProfiler::None)
    }

    /// What the probe's finding says of the program's profiler.
    fn of(found: Option<&probe::Found>) -> ProgramProfiler {
        match found {
            None => ProgramProfiler::None,
            Some(f) if f.kinds == 0 => ProgramProfiler::Idle { asked: f.asked },
            Some(f) => ProgramProfiler::Recording(ActivityKinds::from_bits_retain(f.kinds)),
        }
    }
}

/// Before an attached trace's tracer starts: finds a profiler inside the program that records now, so that it
/// keeps its records ([`probe`]). Its records reach it either way. `Err`: it could not be
/// found, and the trace takes CUPTI's callbacks from it (said in the stream).
pub fn probe_program(before: &mut Before) -> Result<ProgramProfiler, String> {
    let real = resolve()?;
    let library = cupti_path()?;
    // From here on the program's activity calls are seen: kinds it enables after the probe's moment are its too.
    if before.redirects.is_empty() {
        watch::begin();
        before.redirects = redirect_program_calls();
        log::debug!(
            "{} import slots of the program's CUPTI calls watched from now on",
            before.redirects.len()
        );
    }
    let found = probe::probe(&real, &library, WATCH)?;
    let answer = ProgramProfiler::of(found.as_ref());
    if found.is_some() {
        // Buffers CUPTI took from the program before the tracer registered come back to the tracer: they go on to
        // the program.
        // SAFETY: `unlent_to_program` may be called from any thread with CUPTI's completion arguments, never
        // unwinds, and lives as long as the process (the library is pinned).
        unsafe { gpu_tools::cupti::activity::set_unlent_buffer_handler(Some(unlent_to_program)) };
    }
    before.found = found;
    Ok(answer)
}

/// The tracer's handler of buffers it did not lend: the program's, which CUPTI held when the trace's clock went in
/// and filled on (the program's profiler asks for large buffers: Kineto's held 0.2-0.3 s of an eager job's records
/// on two H200s). Records stamped after the switch are on the trace's clock: they are put on the program's before
/// the buffer goes back to it. Handed on raw, they lay outside its profiler's session, which left them out: the
/// first 0.2-0.3 s of every window were missing from torch.profiler's count.
///
/// # Safety
///
/// As [`probe::hand_to_program`]: `buffer` came from the program's request callback and holds `valid` bytes of
/// records.
unsafe extern "C" fn unlent_to_program(
    context: sys::CUcontext,
    stream: u32,
    buffer: *mut u8,
    size: usize,
    valid: usize,
) {
    let run = std::panic::catch_unwind(|| {
        let Some((map, next, layout, writer)) = with_mux(|m| {
            m.clock.read();
            (
                m.clock,
                m.real.get_next_record,
                m.layout,
                Arc::clone(&m.link.writer),
            )
        }) else {
            return valid;
        };
        let Some(next) = next else {
            return valid;
        };
        // Its records that started after the probe's watch and before the trace's clock went in are of kinds it
        // records (an older one may be of a session it ended before the watch); read before the conversion below
        // puts the trace's on its clock.
        let before = match probe::watch_ended() {
            // SAFETY: the caller's buffer of `valid` bytes of records; the walk is CUPTI's own.
            Some(since) => unsafe {
                clock::kinds_stamped_before_trace(buffer, valid, next, &map, since)
            },
            None => 0,
        };
        let learned = with_mux(|m| {
            m.learn_program_kinds(
                before,
                "a buffer of its that CUPTI held when the trace started",
                true,
            )
        });
        if learned.unwrap_or(0) != 0 {
            // CUPTI holds a buffer of the program's while it records for it (Kineto flushes only then).
            handover::ensure_open();
        }
        // The records made since the tracer started are the trace's too (of its kinds, in its window: the writer
        // keeps those), read before they go on; on an H200 the first 0.2-0.3 s of a window beside torch.profiler
        // were in such a buffer of Kineto's.
        match layout {
            // SAFETY: the caller's buffer of `valid` bytes of records; the walk is CUPTI's own.
            Some(layout) => unsafe { trace_reads(buffer, valid, next, &map, layout, &writer) },
            None => log::debug!(
                "a program's buffer came before the tracer's layout was known: not read"
            ),
        }
        if log::log_enabled!(log::Level::Debug) {
            // SAFETY: the caller's buffer of `valid` bytes of records; the walk is CUPTI's own.
            let stamps = unsafe { clock::describe_stamps(buffer, valid, next, &map) };
            log::debug!("a buffer CUPTI held for the program, before conversion: {stamps}");
        }
        // Records of the trace's kinds that the probe did not see the program record stay in its buffer: it may
        // have them enabled all the same (a copy or a set it made none of while watched), and a record taken out
        // would be lost to it, while one it did not ask for is one its profiler passes over.
        // SAFETY: the caller's buffer, now of `valid` bytes of records; the walk is CUPTI's own.
        let converted = unsafe { clock::convert_trace_stamped(buffer, valid, next, &map) };
        if converted > 0 {
            log::debug!(
                "{converted} records of a buffer CUPTI held for the program were on the trace's clock: put on its own"
            );
            if log::log_enabled!(log::Level::Debug) {
                // SAFETY: as above.
                let stamps = unsafe { clock::describe_stamps(buffer, valid, next, &map) };
                log::debug!("the same buffer after conversion: {stamps}");
            }
        }
        valid
    });
    let valid = match run {
        Ok(valid) => valid,
        Err(payload) => {
            std::mem::forget(payload);
            valid
        }
    };
    log::debug!(
        "a buffer CUPTI held for the program, {buffer:p} ({valid} of {size} bytes), goes on to it"
    );
    // SAFETY: the caller's promise.
    unsafe { probe::hand_to_program(context, stream, buffer, size, valid) }
}

/// Records CUPTI made while a probe looked for the program's profiler that could not reach it (since the process
/// started): the stream says how many a probe added.
pub fn probe_lost_records() -> u64 {
    probe::lost_records()
}

/// The session's tracer runs with `layout`: from now on the trace reads the program's buffers CUPTI completes to
/// it ([`unlent_to_program`]). Nothing without a sharing.
///
/// Also the moment the probe's callbacks have left CUPTI: the kinds of what they passed on to the program after its
/// watch (the tracer's forced flush before its start completes the program's buffers through them) are its.
pub fn set_trace_layout(layout: RecordLayout) {
    let seen = probe::kinds_since_watch();
    let learned = with_mux(|m| {
        m.layout = Some(layout);
        m.learn_program_kinds(
            seen,
            "its buffers CUPTI completed after the watch, before the trace started",
            false,
        )
    });
    if learned.unwrap_or(0) != 0 {
        // CUPTI holds a buffer of the program's while it records for it (Kineto flushes only then).
        handover::ensure_open();
    }
}

/// Writes the records of a program's buffer that are on the trace's clock to the trace, from a copy (the buffer
/// goes on to the program).
///
/// # Safety
///
/// `buffer` holds `valid` bytes of CUPTI records written with `layout`, whose string pointers are valid for the
/// call; `next` is CUPTI's `cuptiActivityGetNextRecord`.
unsafe fn trace_reads(
    buffer: *mut u8,
    valid: usize,
    next: NextRecordFn,
    map: &clock::ClockMap,
    layout: RecordLayout,
    writer: &Writer,
) {
    // SAFETY: the caller's promise.
    let spans = unsafe { clock::trace_stamped_spans(buffer, valid, next, map) };
    if spans.is_empty() {
        return;
    }
    let bytes: usize = spans.iter().map(|&(_, len)| len).sum();
    // 8-byte words: CUPTI's records are 8-byte aligned, and so is this copy.
    let mut copy = vec![0u64; bytes.div_ceil(8)];
    let mut at = 0;
    for &(from, len) in &spans {
        // SAFETY: `len` bytes of a record inside the buffer's valid bytes, into room counted above in a distinct
        // allocation; records' lengths are multiples of 8, so each copy starts aligned.
        unsafe {
            std::ptr::copy_nonoverlapping(
                buffer.add(from),
                copy.as_mut_ptr().cast::<u8>().add(at),
                len,
            )
        };
        at += len;
    }
    // SAFETY: the copy holds `bytes` bytes of whole records as CUPTI wrote them; their string pointers point at
    // CUPTI's own tables, valid for the call (the caller's promise).
    let batch = unsafe { ActivityBatch::from_raw(copy.as_ptr().cast::<u8>(), bytes, layout) };
    log::debug!(
        "{} records of a buffer CUPTI held for the program were made on the trace's clock: the trace reads them",
        spans.len()
    );
    writer.write_batch(&batch);
}

/// Before `profile --pid` profiles a running program: what its own profiler is doing now, found as
/// [`probe_program`] finds it, after which the program's callbacks are registered again, as they were (nothing of
/// the sharing is installed: a profile session takes no activity record). `Err`: it could not be found.
///
/// The program's calls are watched meanwhile, as before a trace's probe (its import slots redirected to the hooks,
/// given back at the end): CUPTI loses the records it has not written out when callbacks are registered, so the
/// program's pair goes back between two of its sessions where it ends them on a schedule (`gap`), and not at all
/// where the program registered it again itself while watched (a torch.profiler on a `schedule` does at each
/// session's start). Put back wherever its session was, two cycles of such a profiler held no kernel at a first
/// attach's PC sampling primer (an H100, the survival matrix's profiler-schedule row).
pub fn program_profiler_now() -> Result<ProgramProfiler, String> {
    let real = resolve()?;
    let library = cupti_path()?;
    watch::begin();
    let redirects = redirect_program_calls();
    let looked = look_and_give_back(&real, &library);
    watch::end();
    crate::imports::restore(redirects);
    looked
}

/// [`program_profiler_now`]'s look, while the program's calls are watched.
fn look_and_give_back(real: &Real, library: &std::path::Path) -> Result<ProgramProfiler, String> {
    let Some(f) = probe::probe(real, library, WATCH)? else {
        return Ok(ProgramProfiler::None);
    };
    let left = probe::flush_back_lent(real);
    if left > 0 {
        log::debug!(
            "{left} buffers the probe lent are still in CUPTI: they go to the program's profiler when CUPTI completes them"
        );
    }
    let answer = ProgramProfiler::of(Some(&f));
    if !watch::program_registered() {
        // Between two of its sessions, where it ends them on a schedule (a second at most).
        let gap = gap::wait_for_gap(gap::GAP_WAIT_CAP, f.kinds != 0);
        log::debug!("the look gives the program's callbacks back after {gap:?}");
    }
    if watch::program_registered() {
        // Its own registration, made after the probe had found its pair, is in CUPTI: nothing to put back.
        log::debug!(
            "the program registered its callbacks again while looked at: they are in CUPTI"
        );
        return Ok(answer);
    }
    // SAFETY: the program's own pair, found where CUPTI keeps its callbacks and checked to be code; registering it
    // again puts CUPTI back as the program left it.
    let code = unsafe { (real.register_callbacks)(Some(f.request), Some(f.complete)) };
    if code != sys::CUPTI_SUCCESS {
        return Err(format!(
            "registering the program's callbacks again returned {code}"
        ));
    }
    Ok(answer)
}

/// What [`install`] did.
#[derive(Debug)]
pub struct Installed {
    /// The objects whose CUPTI calls come here now (each once).
    pub objects: Vec<String>,
    /// Import slots redirected.
    pub slots: usize,
    /// Kinds the program's profiler enabled while the attach looked for it, before the sharing (`watch`): its own,
    /// though the probe may not have seen them record.
    pub enabled_while_watched: ActivityKinds,
    /// The import slots were redirected just now, not by the watch before the probe: a program thread that read one
    /// just before may still call CUPTI itself once.
    pub redirected_now: bool,
}

/// Starts sharing CUPTI with the program: called before the session's tracer registers its callbacks, with the
/// kinds it will enable (`session_kinds`), so that from the tracer's first buffer on, the program's calls reach
/// CUPTI only through the sharing.
pub fn install(
    session_kinds: ActivityKinds,
    mut before: Before,
    link: SessionLink,
) -> Result<Installed, String> {
    let mut guard = lock();
    if guard.is_some() {
        return Err("CUPTI is shared already".into());
    }
    let real = resolve()?;
    let redirected_now = before.redirects.is_empty();
    let redirects = match std::mem::take(&mut before.redirects) {
        none if none.is_empty() => redirect_program_calls(),
        watched => watched,
    };
    // Under the sharing's lock: a call of the program's is noted before this, or shared after it.
    let watched = watch::end();
    let mut objects: Vec<String> = redirects.iter().map(|r| r.object().to_owned()).collect();
    objects.dedup();
    let installed = Installed {
        objects,
        slots: redirects.len(),
        enabled_while_watched: ActivityKinds::from_bits_retain(
            watched.as_ref().map_or(0, |w| w.on),
        ),
        redirected_now,
    };
    for r in &redirects {
        log::debug!("{} in {} comes to the trace", r.symbol(), r.object());
    }
    let clock_before = before.clock;
    // A profiler found recording at the attach is shared with as one that registered and enabled its kinds now.
    let mut program = Program::default();
    if let Some(found) = before.found.take() {
        program.request = Some(found.request);
        program.complete = Some(found.complete);
        program.registered = true;
        program.probed = true;
        program.enabled = found.kinds;
    }
    // And so are what it did while watched, from before the probe to now.
    if let Some(w) = watched {
        log::debug!(
            "while watched, the program enabled {:#x}, disabled {:#x}, registered callbacks: {}",
            w.on,
            w.off,
            w.callbacks.is_some()
        );
        if let Some((request, complete)) = w.callbacks {
            program.request = request;
            program.complete = complete;
            program.registered = true;
        }
        program.enabled = (program.enabled | w.on) & !w.off;
        program.called_while_watched = w.on | w.off;
    }
    program.only_program = program.enabled & !session_kinds.bits();
    let receiving = program.receives() != 0;
    DISPATCHING.store(receiving, Ordering::Release);
    link.writer.set_foreign_kinds(program.only_program);
    *guard = Some(Mux {
        real,
        link,
        session_kinds: session_kinds.bits(),
        program,
        clock: clock::ClockMap::new(clock_before),
        clock_before,
        redirects,
        handed: Handed::default(),
        callbacks_given: false,
        clock_given: None,
        layout: None,
        tracer_holds_buffer: false,
        tracer_done: false,
    });
    drop(guard);
    // Outside the sharing's lock: the slot's lock is never taken under it (a buffer handed back under the slot's
    // lock calls the program, whose CUPTI calls come to hooks that take the sharing's). No tracer runs yet, so no
    // batch comes before this.
    handover::begin();
    // Read again: the program may have registered and enabled since the lock was let go.
    if with_mux(|m| m.program.receives() != 0).unwrap_or(false) {
        // CUPTI holds a buffer of the program's while it records for it (Kineto flushes only then).
        handover::ensure_open();
    }
    Ok(installed)
}

/// The kinds the session's tracer enabled, where they differ from those [`install`] was given (graph-level records
/// refused, the tracer started node by node).
pub fn set_session_kinds(kinds: ActivityKinds) {
    with_mux(|m| {
        m.session_kinds = kinds.bits();
        m.program.only_program = m.program.enabled & !m.session_kinds;
    });
}

/// Whether a profiler of the program shares CUPTI with the trace (it registered its buffer callbacks, found by the
/// probe or while watched): the tracer then starts with what CUPTI holds for it flushed to it first
/// (`ActivityTracerBuilder::flush_before_start`), so that its records made before the trace's clock goes in reach it
/// on its own clock. Kernel records CUPTI had not written out when the tracer registered were lost to it.
pub fn program_profiler_shared() -> bool {
    with_mux(|m| m.program.registered).unwrap_or(false)
}

pub use gap::Gap;

/// Before an attached window shares CUPTI and starts its tracer (`moment`: "start") and before it stops ("stop"),
/// beside a profiler of the program's that ends its sessions on a schedule: waits for its next session end (`gap`),
/// so that the window's forced flushes fall where none of its kinds records. No wait when the profiler
/// ended no session in the last 2 s (session ends are the program's forced flushes made with its kinds off, seen
/// while the attach watches its calls or shares CUPTI with it), unless `before` (the attach's probe, at a start)
/// found it recording: then its session's end is waited for, up to the same second.
pub fn wait_for_session_gap(moment: &str, before: Option<&Before>) -> Gap {
    let recording = before.is_some_and(|b| {
        matches!(
            ProgramProfiler::of(b.found.as_ref()),
            ProgramProfiler::Recording(_)
        )
    });
    let gap = gap::wait_for_gap(gap::GAP_WAIT_CAP, recording);
    match gap {
        Gap::NotCycling => {}
        Gap::Found(w) => log::debug!(
            "the window's {moment} waited {:.1} ms for the end of the program's profiler session",
            w.as_secs_f64() * 1e3
        ),
        Gap::Missed(w) => log::debug!(
            "the window's {moment} waited {:.1} ms and the program's profiler session did not end: it goes on",
            w.as_secs_f64() * 1e3
        ),
        Gap::StillOpen => log::debug!(
            "the window's {moment} does not wait: the program's profiler session has been open since an earlier \
             wait for its end"
        ),
    }
    gap
}

/// The session's tracer has stopped (after its last flush): from now on the program's enables and disables of any
/// kind go to CUPTI, as without the trace. Until [`uninstall`], a kind the trace had recorded was otherwise enabled
/// for the program only in the sharing's state: on an H200, a torch.profiler cycle begun in those milliseconds after a
/// window kept 4 of its 141 kernels.
pub fn tracer_stopped() {
    set_session_kinds(ActivityKinds::empty());
    with_mux(|m| m.tracer_done = true);
}

/// The kinds the program's profiler has enabled now, which the session's tracer leaves enabled when it stops (see
/// `ActivityTracer::stop_keeping`): empty when nothing is shared.
pub fn program_kinds() -> ActivityKinds {
    with_mux(|m| ActivityKinds::from_bits_retain(m.program.enabled))
        .unwrap_or(ActivityKinds::empty())
}

/// The session's tracer stopped with a buffer of its still held by CUPTI (`TracerStats::buffers_in_use`): CUPTI
/// will complete it to the program's callbacks, and [`uninstall`] keeps one of the program's buffers outstanding so
/// that its profiler goes on flushing (`handover::end_keeping_one`).
pub fn tracer_kept_a_buffer() {
    with_mux(|m| m.tracer_holds_buffer = true);
}

/// What [`uninstall`] reports.
#[derive(Debug, Default)]
pub struct Uninstalled {
    /// One of the program's buffers was kept outstanding ([`tracer_kept_a_buffer`]).
    pub kept_outstanding: bool,
    /// What the program was given.
    pub handed: Handed,
    /// It registered buffer callbacks during the session (given back to CUPTI now).
    pub registered: bool,
    /// Kinds it had enabled at the end (enabled in CUPTI again for it).
    pub enabled: ActivityKinds,
    /// The timestamp source given back to CUPTI; `None` where the one before the session was not recognised.
    pub clock: Option<clock::ProgramClock>,
    /// The process was exiting: nothing was given back.
    pub exiting: bool,
}

/// Before a stop that keeps the program's kinds (`ActivityTracer::stop_keeping_then`): once the tracer's pool has
/// closed, CUPTI's buffers come from the program's request callback until its callbacks are back
/// (`set_keeping_lender`), and CUPTI completes them through [`unlent_to_program`], which puts their records on the
/// program's clock. Without a lender CUPTI had no buffer in those milliseconds: on an H200 it dropped 16 records of
/// a torch.profiler session, 3 of its kernels, at a window's end.
pub fn lend_program_buffers_at_stop() {
    let Some(request) = with_mux(|m| m.program.request).flatten() else {
        return;
    };
    // SAFETY: `unlent_to_program` may be called from any thread with CUPTI's completion arguments, never unwinds,
    // and lives as long as the process; the program's request callback is CUPTI's own kind of callback, which
    // CUPTI calls from any thread, and every buffer it lends is one `unlent_to_program` hands on to the program.
    unsafe {
        gpu_tools::cupti::activity::set_unlent_buffer_handler(Some(unlent_to_program));
        gpu_tools::cupti::activity::set_keeping_lender(Some(request));
    }
}

/// Gives the program's clock and buffer callbacks back to CUPTI at once, each unless it is back already: from inside
/// the tracer's stop (`ActivityTracer::stop_keeping_then`) after its last flush, when kinds the program records stay
/// enabled (until its callbacks are back CUPTI has no buffer for them and drops their records: on two H200s 1.7-2.0
/// thousand drops a window between one window's end and the next one's start); otherwise before the program's first
/// enable after the stop ([`hooks::enable`]) or as [`uninstall`]'s first step, while the program's calls still come
/// to the sharing. Given back later, once the program's calls went to CUPTI directly, they came in the middle of its
/// next session: on an H200 a torch.profiler cycle begun 4 ms before the end's registration lost its first 32
/// kernels. Registering callbacks again while CUPTI fills a buffer of the program's is a call no profiler makes.
pub fn give_back_callbacks() {
    // One giving back at a time: the program's thread (its first enable after the stop) and the session's may both
    // come here, and each registration must happen once.
    static GIVING: Mutex<()> = Mutex::new(());
    let _one = GIVING.lock().unwrap_or_else(|p| p.into_inner());
    // Read under the sharing's lock, called without it: CUPTI's thread takes that lock to hand the program its
    // records (`handover`), and CUPTI may wait for that thread inside these calls.
    let given = {
        let guard = lock();
        let Some(mux) = guard.as_ref() else { return };
        if !mux.program.registered || mux.callbacks_given {
            return;
        }
        let clock = mux
            .program
            .timestamp
            .map(clock::ProgramClock::Callback)
            .unwrap_or(mux.clock_before);
        (
            mux.real,
            clock,
            mux.clock_given,
            mux.program.request,
            mux.program.complete,
        )
    };
    let (real, clock, clock_given, request, complete) = given;
    log::debug!(
        "the program's callbacks go back to CUPTI (its clock back already: {clock_given:?})"
    );
    // The buffers of the program's that CUPTI took since the pool closed, up to now.
    let mark = gpu_tools::cupti::activity::keeping_mark();
    // The clock first, so that the records its buffers get from now on carry it.
    let clock_restored = match (clock_given, real.register_timestamp, clock.source()) {
        (Some(restored), _, _) => restored,
        (None, Some(register), Some(source)) => {
            // SAFETY: the real function, with the program's own clock.
            let code = unsafe { register(Some(source)) };
            code == sys::CUPTI_SUCCESS
        }
        _ => false,
    };
    // Such a buffer holds records on the trace's clock: completed now, it comes to `unlent_to_program`, which puts
    // them on the program's; completed after its callbacks are back, it would reach the program as it is. It comes
    // back with its records complete where its kernels end within the bound (`flush`); the next one CUPTI takes is
    // the program's too, and holds records on its clock only.
    let flushed = flush::complete_first(&real, || {
        gpu_tools::cupti::activity::held_for_keeping(mark) == 0
    });
    log::debug!(
        "the program's buffers CUPTI took during the stop came back after {} waits{}",
        flushed.waits,
        if flushed.forced {
            ", forced out (kernels still running are handed out incomplete)"
        } else {
            ""
        }
    );
    // The buffers of the program's that CUPTI took through the probe, before the tracer's callbacks went in, hold
    // the window's records where a kernel still ran at the tracer's last flush: they come back through the tracer's
    // callbacks too, which read those records for the trace and put them on the program's clock (`probe`'s
    // `HELD_FOR_PROGRAM`). Not forced: such a buffer may be one CUPTI keeps empty across forced flushes.
    if probe::program_buffers_held() > 0 {
        match flush::until_back_unforced(&real, || probe::program_buffers_held() == 0) {
            Some(waits) => log::debug!(
                "the program's buffers CUPTI held since before the trace came back after {waits} waits"
            ),
            None => log::debug!(
                "{} buffers of the program's that CUPTI held since before the trace did not come back in {} ms \
                 (empty, or a kernel still runs): they go to it directly",
                probe::program_buffers_held(),
                (gpu_tools::cupti::activity::COMPLETE_WAIT
                    * gpu_tools::cupti::activity::COMPLETE_WAITS)
                    .as_millis()
            ),
        }
    }
    probe::forget_program_buffers_held();
    // SAFETY: the real function, with the program's own callbacks.
    unsafe { (real.register_callbacks)(request, complete) };
    with_mux(|m| {
        m.callbacks_given = true;
        m.clock_given = Some(clock_restored);
    });
}

/// Ends the sharing, after the session's tracer stopped: the program's callbacks and kinds go back to CUPTI and
/// its import slots are restored. `None` when nothing was shared. At the process's exit (`exiting`) nothing of the
/// program's is called: its profiler may be destroyed already (C++ statics made after the library's exit handler
/// was registered go before it), and CUPTI is not touched for a program that is going away. `kept`: the kinds the
/// tracer left enabled when it stopped ([`program_kinds`] then), which are not enabled again.
pub fn uninstall(exiting: bool, kept: ActivityKinds) -> Option<Uninstalled> {
    if !exiting {
        give_back_callbacks();
    }
    let mux = {
        let mut guard = lock();
        let mux = guard.take()?;
        log::debug!("the sharing's end begins: the program's calls go to CUPTI from now on");
        DISPATCHING.store(false, Ordering::Release);
        mux.link.writer.set_foreign_kinds(0);
        mux
    };
    // The open buffer of copies goes back while the program's calls still come here: a forced flush of its
    // profiler's that comes through a hook hands it back inside that flush, and one that comes after finds it
    // back. Handed back after the slots were restored, it could come after such a flush had gone to CUPTI
    // directly, once its profiler had taken the buffers it was handed: on an H200 a torch.profiler cycle at a
    // window's end so lost the 13-76 kernels the window had copied to it, in 2 of 6 window ends.
    let last = match (exiting, mux.tracer_holds_buffer && mux.program.registered) {
        (true, _) => {
            handover::forget();
            None
        }
        (false, true) => Some(handover::end_keeping_one(
            mux.program.request,
            mux.program.complete,
        )),
        (false, false) => Some((handover::end(), false)),
    };
    crate::imports::restore(mux.redirects);
    // SAFETY: clearing the handler and the lender has no precondition.
    unsafe {
        gpu_tools::cupti::activity::set_unlent_buffer_handler(None);
        gpu_tools::cupti::activity::set_keeping_lender(None);
    }
    let mut handed = mux.handed;
    let Some((last, kept_outstanding)) = last else {
        return Some(Uninstalled {
            handed,
            registered: mux.program.registered,
            enabled: ActivityKinds::from_bits_retain(mux.program.enabled),
            clock: None,
            exiting: true,
            kept_outstanding: false,
        });
    };
    handed.buffers += last.buffers;
    let program = mux.program;
    // The program's clock back in CUPTI: its own callback, or the one recognised at the start.
    let clock = program
        .timestamp
        .map(clock::ProgramClock::Callback)
        .unwrap_or(mux.clock_before);
    let real = mux.real;
    log::debug!(
        "the sharing ends: the program's kinds {:#x}, kept on by the tracer {:#x}, its clock given back {:?}, its \
         callbacks given back {}",
        program.enabled,
        kept.bits(),
        mux.clock_given,
        mux.callbacks_given
    );
    let clock_restored = match (mux.clock_given, real.register_timestamp, clock.source()) {
        (Some(restored), _, _) => restored,
        (None, Some(register), Some(source)) => {
            log::debug!("the program's clock registered at the sharing's end");
            // SAFETY: the real CUPTI function, with the program's own clock.
            (unsafe { register(Some(source)) }) == sys::CUPTI_SUCCESS
        }
        _ => false,
    };
    // SAFETY: each call is of the real CUPTI functions, with the program's own callbacks and values.
    unsafe {
        if program.registered && !mux.callbacks_given {
            log::debug!("the program's callbacks registered at the sharing's end");
            // First, so that buffers for the kinds enabled next come from the program.
            (real.register_callbacks)(program.request, program.complete);
        }
        let enabled = ActivityKinds::from_bits_retain(program.enabled);
        for kind in (enabled - kept).kinds() {
            (real.enable)(kind.0);
        }
        // Kept on at the tracer's stop for the program, which has turned them off since: off in CUPTI too.
        for kind in (kept - enabled).kinds() {
            (real.disable)(kind.0);
        }
        if let Some(f) = real.enable_runtime_api {
            for &cbid in &program.skip_runtime {
                f(cbid, 0);
            }
        }
        if let Some(f) = real.enable_driver_api {
            for &cbid in &program.skip_driver {
                f(cbid, 0);
            }
        }
    }
    Some(Uninstalled {
        kept_outstanding,
        exiting: false,
        clock: clock_restored.then_some(clock),
        handed,
        registered: program.registered,
        enabled: ActivityKinds::from_bits_retain(program.enabled),
    })
}

#[cfg(test)]
mod tests;
