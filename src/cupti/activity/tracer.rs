//! [`ActivityTracer`]: the process's one consumer of CUPTI activity buffers.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use super::batch::ActivityBatch;
use super::clock::{self, Clock};
use super::layout::{LayoutMatch, RecordLayout};
use super::pool;
use crate::cupti::activity_kind::ActivityKinds;
use crate::cupti::library::ActivityFns;
use crate::cupti::tracing_error::vendor;
use crate::cupti::{CuptiLibrary, TracingError};
use crate::delivery::{self, Delivery};
use crate::sys::cupti as sys;

/// The closure batches are delivered to.
type BatchFn = dyn for<'b> FnMut(&ActivityBatch<'b>) + Send;

/// Set while a tracer exists (from the start of `start` until its stop): one per process.
static CLAIMED: AtomicBool = AtomicBool::new(false);
/// The running tracer's state, where CUPTI's callbacks find it.
static ACTIVE: RwLock<Option<Arc<Shared>>> = RwLock::new(None);
/// The process's one tracer slot, held from the start of `start` until the tracer's shutdown.
struct Claim(());

impl Claim {
    fn acquire() -> Result<Self, TracingError> {
        CLAIMED
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| Claim(()))
            .map_err(|_| TracingError::TracerActive)
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        CLAIMED.store(false, Ordering::Release);
    }
}

/// Buffers CUPTI completed while no tracer ran, and their valid bytes (not delivered to anyone).
static ORPHAN_BATCHES: AtomicU64 = AtomicU64::new(0);
static ORPHAN_BYTES: AtomicU64 = AtomicU64::new(0);

/// How [`ActivityTracer::flush_all`] flushes (`cuptiActivityFlushAll`'s flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FlushMode {
    /// Buffers whose records are all complete (flag 0). Records of work still running stay with CUPTI.
    #[default]
    Completed,
    /// Every buffer, also partly filled ones with incomplete records (`CUPTI_ACTIVITY_FLAG_FLUSH_FORCED`).
    Forced,
}

impl FlushMode {
    /// `cuptiActivityFlushAll`'s flag for it.
    pub fn flag(self) -> u32 {
        match self {
            FlushMode::Completed => 0,
            FlushMode::Forced => sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED,
        }
    }
}

/// Records CUPTI dropped for lack of a buffer, for one context and stream.
///
/// Since CUDA 6.0 CUPTI keeps one global queue and hands every completed buffer over with a NULL context and
/// stream 0, so drops are reported for that queue: `context_id` `None`, `stream_id` 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DroppedRecords {
    /// The context, `None` for the global queue.
    pub context_id: Option<u32>,
    /// The stream (0 for the global queue).
    pub stream_id: u32,
    /// Records dropped.
    pub count: u64,
}

/// What a tracer delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TracerStats {
    /// Batches handed to the closure (empty buffers are not handed over).
    pub batches: u64,
    /// Records in them, as the walk counts them (decoding errors included).
    pub records: u64,
    /// Valid bytes in them.
    pub bytes: u64,
    /// Calls of the closure that panicked.
    pub callback_panics: u64,
    /// Records CUPTI reported dropped.
    pub dropped_records: u64,
    /// Buffers the pool allocated.
    pub buffers_made: u64,
    /// Requests the pool refused because `max_buffers` were lent out (CUPTI then drops records).
    pub buffers_refused: u64,
    /// Buffers CUPTI holds now.
    pub buffers_in_use: usize,
}

/// What [`ActivityTracer::stop`] reports.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TracerReport {
    /// Final counts.
    pub stats: TracerStats,
    /// Drops, per context and stream.
    pub dropped: Vec<DroppedRecords>,
    /// The first panic of the closure not reported by an earlier flush.
    pub panic: Option<String>,
    /// Records of the kinds [`ActivityTracer::stop_keeping`] left enabled that CUPTI dropped after the tracer's
    /// pool closed (it had no buffer for them until another consumer registered its callbacks): work after the
    /// tracer's end, not counted in `stats` or `dropped`. Zero for [`ActivityTracer::stop`].
    pub dropped_after_stop: u64,
    /// Records CUPTI had dropped before the tracer started, while another consumer (or none) held CUPTI: not the
    /// tracer's, not counted in `stats` or `dropped` ([`ActivityTracer::dropped_before_start`]).
    pub dropped_before_start: u64,
}

/// State shared by the tracer handle and CUPTI's callbacks.
struct Shared {
    fns: ActivityFns,
    layout: RecordLayout,
    /// The vendor's walk, for a release whose layouts the crate does not know exactly.
    vendor_step: Option<crate::cupti::library::NextRecordFn>,
    delivery: Delivery<BatchFn>,
    dropped: Mutex<Vec<DroppedRecords>>,
    dropped_total: AtomicU64,
    /// The pool closed while kinds stay enabled (`stop_keeping`): drops from now on are of work after the end.
    closed_keeping: AtomicBool,
    dropped_after_stop: AtomicU64,
    dropped_before_start: u64,
}

impl Shared {
    /// Reads (and so resets) CUPTI's drop count for a queue and adds it to the totals.
    fn read_dropped(&self, ctx: sys::CUcontext, stream_id: u32) -> u64 {
        let mut n: usize = 0;
        // SAFETY: a valid out-pointer; the context and stream are the ones CUPTI handed over (NULL/0 since 6.0).
        // Documented for use in the completion callback.
        if unsafe { (self.fns.get_num_dropped)(ctx, stream_id, &mut n) } != sys::CUPTI_SUCCESS
            || n == 0
        {
            return 0;
        }
        let count = n as u64;
        if self.closed_keeping.load(Ordering::Acquire) {
            self.dropped_after_stop.fetch_add(count, Ordering::Relaxed);
            log::debug!(
                "CUPTI dropped {count} records of kept kinds after the tracer's pool closed"
            );
            return 0;
        }
        let context_id = if ctx.is_null() {
            None
        } else {
            self.fns.get_context_id.and_then(|f| {
                let mut id = 0u32;
                // SAFETY: a context CUPTI named, and a valid out-pointer.
                (unsafe { f(ctx, &mut id) } == sys::CUPTI_SUCCESS).then_some(id)
            })
        };
        self.dropped_total.fetch_add(count, Ordering::Relaxed);
        let mut list = self.dropped.lock().unwrap_or_else(|p| p.into_inner());
        match list
            .iter_mut()
            .find(|d| d.context_id == context_id && d.stream_id == stream_id)
        {
            Some(d) => d.count += count,
            None => list.push(DroppedRecords {
                context_id,
                stream_id,
                count,
            }),
        }
        log::warn!(
            "CUPTI dropped {count} activity records (context {context_id:?}, stream {stream_id})"
        );
        count
    }

    /// Hands a completed buffer to the closure.
    ///
    /// # Safety
    /// `buffer` must hold `valid` readable bytes of records CUPTI wrote, unchanged until this returns.
    unsafe fn deliver(&self, ctx: sys::CUcontext, stream_id: u32, buffer: *const u8, valid: usize) {
        let dropped = self.read_dropped(ctx, stream_id);
        if valid == 0 && dropped == 0 {
            return;
        }
        // SAFETY: the caller's contract; string pointers in CUPTI's records point at CUPTI's own tables, valid
        // at least while the buffer is handed over.
        let batch = unsafe {
            ActivityBatch::delivered(buffer, valid, self.layout, self.vendor_step, dropped)
        };
        let records = batch.count() as u64;
        self.delivery
            .deliver(records, valid as u64, |callback| callback(&batch));
    }
}

/// The buffer-requested callback: a buffer from the pool, or none (CUPTI then drops records and counts them).
unsafe extern "C" fn on_buffer_requested(
    buffer: *mut *mut u8,
    size: *mut usize,
    max_records: *mut usize,
) {
    if buffer.is_null() || size.is_null() {
        return;
    }
    // SAFETY: CUPTI passes valid out-pointers (checked non-null above; `max_records` below).
    unsafe {
        *buffer = std::ptr::null_mut();
        *size = 0;
        if !max_records.is_null() {
            // 0: fill the buffer with as many records as fit.
            *max_records = 0;
        }
    }
    REQUESTS_IN_PROGRESS.fetch_add(1, Ordering::AcqRel);
    delivery::vendor_callback((), || {
        if let Some((ptr, len)) = pool::take() {
            // SAFETY: as above.
            unsafe {
                *buffer = ptr;
                *size = len;
            }
            return;
        }
        let lender = KEEPING_LENDER.load(Ordering::Acquire);
        // Also after the stop's end, while the lender is set: CUPTI may call the callback it read just before the
        // other consumer's went in (seen with the double's launching thread), and a buffer lent then goes to that
        // consumer, whose callbacks are CUPTI's by the time it comes back. Refused, its record was dropped.
        if lender != 0 {
            // The lender may write all three, as CUPTI's callbacks do: a null limit gets a place of its own.
            let mut unlimited = 0usize;
            let max_records = if max_records.is_null() {
                &mut unlimited as *mut usize
            } else {
                max_records
            };
            // SAFETY: a lender set through `set_keeping_lender`, whose contract makes it callable here with CUPTI's
            // request arguments; all three out-pointers are valid (checked non-null above, the limit just now); the
            // address was stored from a function of that type.
            unsafe {
                let f = std::mem::transmute::<usize, RequestBufferFn>(lender);
                f(buffer, size, max_records);
            }
            // Counted until CUPTI completes it: whoever gives the lender's consumer its callbacks back waits for it.
            // SAFETY: CUPTI's out-pointer, checked non-null above, which the lender has written.
            super::keeping_lent::lent(unsafe { *buffer } as usize);
        }
    });
    REQUESTS_IN_PROGRESS.fetch_sub(1, Ordering::AcqRel);
}

/// Requests inside [`on_buffer_requested`] now: clearing the keeping lender waits for them.
static REQUESTS_IN_PROGRESS: AtomicUsize = AtomicUsize::new(0);
/// How long clearing the keeping lender waits for the requests in progress.
const LENDER_CLEAR_WAIT: Duration = Duration::from_millis(100);

/// A stop's lending, from its pool's close to its end: what the keeping lender lends in it is counted until CUPTI
/// completes it (`keeping_lent`), and forgotten at its end however the stop ends (a hand-back that panics included).
struct Lending;

impl Lending {
    fn start() -> Self {
        super::keeping_lent::forget();
        Lending
    }
}

impl Drop for Lending {
    fn drop(&mut self) {
        super::keeping_lent::forget();
    }
}

/// A buffer-requested callback as CUPTI takes it.
pub type RequestBufferFn = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);

/// The lender of buffers the pool does not give (0: none).
static KEEPING_LENDER: AtomicUsize = AtomicUsize::new(0);

/// Where CUPTI's buffers come from when the pool gives none, until the lender is cleared: in a stop that keeps kinds
/// (`ActivityTracer::stop_keeping_then`), once the pool has closed, and after the stop for a request that reaches the
/// tracer's callback late: from `lender`, the request callback of the consumer that takes the kept kinds over
/// (`None`: nowhere, the default; CUPTI then drops the kept kinds' records until that consumer registers its own
/// callbacks, and the stop reports them). A buffer so lent comes back to the handler of unlent buffers
/// ([`set_unlent_buffer_handler`]) when CUPTI completes it before that consumer's callbacks are back, to it
/// directly after. On an H200, a stop without a lender dropped 16 records of a torch.profiler session's kept kinds
/// in the 1.5 ms before its callbacks went back. Clearing it (`None`) waits for the requests already inside the
/// tracer's callback to end (100 ms at most).
///
/// # Safety
///
/// `lender` must be safe to call from any thread with CUPTI's request arguments, for as long as it is set; it must
/// not unwind, and every buffer it lends must be one the handler of unlent buffers can take.
pub unsafe fn set_keeping_lender(lender: Option<RequestBufferFn>) {
    if lender.is_none() {
        // A request already inside the tracer's callback may still turn to the lender: one that began allocating a
        // buffer of the pool before the stop and found the pool closed when the allocation ended (3 ms in a debug
        // build beside the double, which then dropped the record). It is let finish first, for 100 ms at most.
        let t0 = std::time::Instant::now();
        while REQUESTS_IN_PROGRESS.load(Ordering::Acquire) > 0 && t0.elapsed() < LENDER_CLEAR_WAIT {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    KEEPING_LENDER.store(lender.map_or(0, |f| f as usize), Ordering::Release);
}

/// Where a buffer the tracer did not lend goes: CUPTI completes every buffer to the callbacks registered *now*, so a
/// buffer another consumer (a profiler inside the program) was given before the tracer registered comes here.
pub type UnlentBufferFn = unsafe extern "C" fn(sys::CUcontext, u32, *mut u8, usize, usize);

/// The handler of unlent buffers, as a function address (0: none; such buffers are left alone).
static UNLENT: AtomicUsize = AtomicUsize::new(0);

/// Hands buffers that CUPTI completes to the tracer but that the tracer did not lend to `handler`, which then owns
/// them (`None`: they are left alone and logged, the default). A tool attached to a running program gives the
/// program's own completion callback here, so that a buffer CUPTI took from the program before the tracer started
/// still reaches it.
///
/// # Safety
///
/// `handler` must be safe to call from any thread, with CUPTI's completion arguments, for as long as it is set, and
/// must not unwind.
pub unsafe fn set_unlent_buffer_handler(handler: Option<UnlentBufferFn>) {
    UNLENT.store(handler.map_or(0, |f| f as usize), Ordering::Release);
}

/// The buffer-completed callback, on a CUPTI worker thread or the thread that flushes.
unsafe extern "C" fn on_buffer_completed(
    ctx: sys::CUcontext,
    stream_id: u32,
    buffer: *mut u8,
    size: usize,
    valid: usize,
) {
    // Counted from here: a consumer waiting for the completions under way on other threads sees this one.
    let _completing = super::completing::CompletionUnderWay::enter();
    delivery::vendor_callback((), || {
        // Only buffers the pool lent are read, and never past their real size.
        let Some(len) = pool::lent_size(buffer) else {
            super::keeping_lent::completed(buffer as usize);
            let handler = UNLENT.load(Ordering::Acquire);
            if handler == 0 {
                log::warn!("CUPTI completed a buffer the tracer did not lend; left alone");
            } else {
                log::debug!("CUPTI completed a buffer the tracer did not lend: handed on");
                // SAFETY: a handler set through `set_unlent_buffer_handler`, whose contract makes it callable here
                // with CUPTI's own arguments; the address was stored from a function of that type.
                unsafe {
                    let f = std::mem::transmute::<usize, UnlentBufferFn>(handler);
                    f(ctx, stream_id, buffer, size, valid);
                }
            }
            return;
        };
        let valid = valid.min(len);
        let shared = ACTIVE
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(Arc::clone);
        match shared {
            Some(s) => {
                let t0 = std::time::Instant::now();
                // SAFETY: the pool's buffer of `len` bytes, which CUPTI handed back with `valid` bytes written.
                unsafe { s.deliver(ctx, stream_id, buffer, valid) };
                // How long CUPTI waited on the closure: records made meanwhile may find no room (a diagnostic).
                log::debug!(
                    "buffer of {valid} bytes delivered in {:.2} ms",
                    t0.elapsed().as_secs_f64() * 1e3
                );
            }
            None => {
                ORPHAN_BATCHES.fetch_add(1, Ordering::Relaxed);
                ORPHAN_BYTES.fetch_add(valid as u64, Ordering::Relaxed);
                log::warn!("CUPTI completed a buffer of {valid} bytes after its tracer stopped");
            }
        }
        pool::give_back(buffer);
    });
}

/// Builds and starts an [`ActivityTracer`]; from [`ActivityTracer::builder`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `start` is called"]
pub struct ActivityTracerBuilder {
    kinds: ActivityKinds,
    buffer_size: usize,
    max_buffers: usize,
    clock: Clock,
    flush_period: Option<Duration>,
    flush_first: bool,
    library: Option<PathBuf>,
}

impl Default for ActivityTracerBuilder {
    fn default() -> Self {
        ActivityTracerBuilder {
            kinds: ActivityKinds::gpu_trace(),
            buffer_size: 8 << 20,
            max_buffers: 32,
            clock: Clock::Monotonic,
            flush_period: None,
            flush_first: false,
            library: None,
        }
    }
}

impl ActivityTracerBuilder {
    /// The kinds to record (default [`ActivityKinds::gpu_trace`]).
    pub fn kinds(mut self, kinds: ActivityKinds) -> Self {
        self.kinds = kinds;
        self
    }

    /// Bytes per vendor buffer (default 8 MiB): a multiple of 8, at least the largest record.
    pub fn buffer_size(mut self, bytes: usize) -> Self {
        self.buffer_size = bytes;
        self
    }

    /// How many buffers CUPTI may hold at once (default 32). Past that CUPTI drops records, which the tracer
    /// reports ([`ActivityTracer::dropped`]).
    pub fn max_buffers(mut self, n: usize) -> Self {
        self.max_buffers = n;
        self
    }

    /// The clock of every timestamp (default [`Clock::Monotonic`]).
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Lets CUPTI's worker thread deliver full buffers at this period (`cuptiActivityFlushPeriod`); by default
    /// CUPTI decides. Partly filled buffers still need [`ActivityTracer::flush_all`].
    pub fn flush_period(mut self, period: Duration) -> Self {
        self.flush_period = Some(period);
        self
    }

    /// Has CUPTI write out and complete what it holds for another consumer before the tracer registers its clock
    /// and callbacks (default off): those records then reach that consumer through its own callbacks, on the clock
    /// they were made on. Kernel records CUPTI had not written out when a tracer registered were lost (an H200,
    /// CUPTI 13.0: a torch.profiler cycle running across an attach's start kept only the kernels that ran after it,
    /// 0-78 of its 141, in 5 of 9 windows over three runs; with the flush none did, in 3 of 3). Off by default:
    /// beside a profiler whose session was open throughout, the one window started so held no kernel record for its
    /// first 130 ms (1,437 of 4,191 launches), which the window without it had.
    pub fn flush_before_start(mut self, on: bool) -> Self {
        self.flush_first = on;
        self
    }

    /// Loads `libcupti` from this path instead of the crate's search.
    pub fn library_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.library = Some(path.into());
        self
    }

    /// Starts recording; every filled buffer is decoded and handed to `callback`, on a CUPTI thread or on the
    /// thread that calls [`ActivityTracer::flush_all`].
    ///
    /// Checked before any CUPTI call: that no other tracer runs ([`TracingError::TracerActive`]), that the CUDA
    /// driver library is present and loads ([`crate::cuda::Driver::load`], which does not call `cuInit`, so this
    /// works inside `InitializeInjection`), that `libcupti` loads and has the Activity API, and the options.
    /// Enabling activity is normally done before the program's first `cuInit`.
    pub fn start<F>(self, callback: F) -> crate::Result<ActivityTracer>
    where
        F: for<'b> FnMut(&ActivityBatch<'b>) + Send + 'static,
    {
        if delivery::in_callback() {
            return Err(TracingError::InsideCallback.into());
        }
        if self.kinds.is_empty() {
            return Err(TracingError::NoKinds.into());
        }
        if self.max_buffers == 0 {
            return Err(TracingError::NoBuffers.into());
        }
        let claim = Claim::acquire()?;
        self.start_claimed(claim, Box::new(callback))
    }

    /// Starts with the process's tracer slot held; an early error releases it with `claim`, a later one through
    /// the tracer's shutdown.
    fn start_claimed(self, claim: Claim, callback: Box<BatchFn>) -> crate::Result<ActivityTracer> {
        crate::cuda::Driver::load()?;
        let lib = match &self.library {
            Some(path) => CuptiLibrary::load_from(path)?,
            None => CuptiLibrary::load()?,
        };
        let fns = lib.activity.map_err(TracingError::MissingSymbol)?;
        let version = lib.version()?;
        let layout_match = RecordLayout::for_version(version);
        let layout = layout_match.layout();
        let min = layout.largest_decoded_record();
        if self.buffer_size < min || self.buffer_size % 8 != 0 {
            return Err(TracingError::BufferSize {
                size: self.buffer_size,
                min,
            }
            .into());
        }
        let flush_period = match self.flush_period {
            Some(p) => Some((
                fns.flush_period
                    .ok_or(TracingError::MissingSymbol("cuptiActivityFlushPeriod"))?,
                u32::try_from(p.as_millis()).unwrap_or(u32::MAX).max(1),
            )),
            None => None,
        };
        if self.flush_first {
            // What CUPTI holds for another consumer is written out and goes to it now (`flush_before_start`).
            // SAFETY: the flush has no precondition; this thread runs no completion callback.
            let flushed = vendor("cuptiActivityFlushAll", unsafe {
                (fns.flush_all)(sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)
            });
            // An error here (no consumer ever registered) only means nothing was held: the start goes on.
            match flushed {
                Ok(()) => {
                    log::debug!("records CUPTI held for another consumer flushed to it first")
                }
                Err(e) => log::debug!("nothing flushed before the tracer's start: {e}"),
            }
        }
        // The clock before any kind is enabled, as CUPTI requires.
        clock::set_current(self.clock);
        match fns.register_timestamp_callback {
            // SAFETY: a function valid for the process that only reads a clock.
            Some(register) => vendor("cuptiActivityRegisterTimestampCallback", unsafe {
                register(Some(clock::timestamp_callback))
            })?,
            None if self.clock == Clock::Monotonic => {
                return Err(TracingError::ClockUnavailable.into());
            }
            None => {}
        }
        let clock_in_at = self.clock.now_ns();
        // CUPTI's count of drops so far is read (and so reset) before the tracer's callbacks go in: drops of another
        // consumer's, or of an earlier tracer's hand-back, must not be reported as this tracer's at its first buffer.
        let mut before: usize = 0;
        // SAFETY: a valid out-pointer; NULL and 0 name the global queue.
        let dropped_before_start =
            if unsafe { (fns.get_num_dropped)(std::ptr::null_mut(), 0, &mut before) }
                == sys::CUPTI_SUCCESS
            {
                before as u64
            } else {
                0
            };
        if dropped_before_start > 0 {
            log::debug!(
                "CUPTI had dropped {dropped_before_start} records before the tracer started"
            );
        }
        let shared = Arc::new(Shared {
            fns,
            layout,
            vendor_step: match layout_match {
                LayoutMatch::Exact(_) => None,
                LayoutMatch::Nearest(_) => Some(fns.get_next_record),
            },
            delivery: Delivery::new(callback),
            dropped: Mutex::new(Vec::new()),
            dropped_total: AtomicU64::new(0),
            closed_keeping: AtomicBool::new(false),
            dropped_after_stop: AtomicU64::new(0),
            dropped_before_start,
        });
        pool::configure(self.buffer_size, self.max_buffers);
        *ACTIVE.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&shared));
        let mut tracer = ActivityTracer {
            shared,
            lib,
            version,
            clock: self.clock,
            clock_in_at,
            enabled: ActivityKinds::empty(),
            stopped: false,
            claim: Some(claim),
        };
        // From here on a failure unwinds through the tracer's own shutdown (Drop).
        // SAFETY: both functions stay valid for the process and never unwind.
        vendor("cuptiActivityRegisterCallbacks", unsafe {
            (fns.register_callbacks)(Some(on_buffer_requested), Some(on_buffer_completed))
        })?;
        if let Some((set_period, ms)) = flush_period {
            // SAFETY: a plain setting.
            vendor("cuptiActivityFlushPeriod", unsafe { set_period(ms) })?;
        }
        for kind in self.kinds.kinds() {
            // SAFETY: a kind value; CUPTI checks it.
            if let Err(error) = crate::cupti::CuptiError::check(unsafe { (fns.enable)(kind.0) }) {
                return Err(TracingError::EnableKind { kind, error }.into());
            }
            tracer.enabled |= ActivityKinds::from_kind(kind);
        }
        log::debug!(
            "activity tracer started: CUPTI {version}, {layout:?}, kinds {:?}",
            tracer.enabled
        );
        Ok(tracer)
    }
}

/// The process's consumer of CUPTI activity buffers: enables kinds, lends CUPTI buffers from a crate-owned pool,
/// decodes each completed buffer and hands it to a closure as a borrowed [`ActivityBatch`].
///
/// ```no_run
/// use gpu_tools::cupti::activity::{Activity, ActivityKinds, ActivityTracer, FlushMode};
/// # fn main() -> gpu_tools::Result<()> {
/// let tracer = ActivityTracer::builder()
///     .kinds(ActivityKinds::CONCURRENT_KERNEL | ActivityKinds::MEMCPY)
///     .start(|batch| {
///         for record in batch.records().flatten() {
///             if let Activity::Kernel(k) = record {
///                 println!("{:?} ran {} ns", k.name(), k.time().duration_ns());
///             }
///         }
///     })?;
/// // ... run CUDA work ...
/// tracer.flush_all(FlushMode::Forced)?;
/// let report = tracer.stop()?;
/// assert!(report.dropped.is_empty());
/// # Ok(()) }
/// ```
///
/// Every record CUPTI hands over is delivered once: [`stop`](Self::stop) (and `Drop`) disables the kinds and
/// forces a flush, on the calling thread, before the tracer is gone. A panic in the closure is caught and counted,
/// the buffer still goes back to the pool, and the next [`flush_all`](Self::flush_all) or `stop` reports it.
///
/// `Send` and `Sync`: every method takes `&self` except `stop`, so a thread may flush periodically while another
/// owns the tracer.
pub struct ActivityTracer {
    shared: Arc<Shared>,
    lib: &'static CuptiLibrary,
    version: u32,
    clock: Clock,
    /// When its clock went into CUPTI, on that clock.
    clock_in_at: u64,
    enabled: ActivityKinds,
    stopped: bool,
    /// Released when the tracer is shut down.
    claim: Option<Claim>,
}

impl std::fmt::Debug for ActivityTracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActivityTracer")
            .field("version", &self.version)
            .field("layout", &self.shared.layout)
            .field("kinds", &self.enabled)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl ActivityTracer {
    /// A builder with the defaults: [`ActivityKinds::gpu_trace`], 8 MiB buffers, at most 32, monotonic clock.
    pub fn builder() -> ActivityTracerBuilder {
        ActivityTracerBuilder::default()
    }

    /// The kinds enabled.
    pub fn kinds(&self) -> ActivityKinds {
        self.enabled
    }

    /// The loaded library's CUPTI API version.
    pub fn cupti_version(&self) -> u32 {
        self.version
    }

    /// The layout buffers are read with.
    pub fn layout(&self) -> RecordLayout {
        self.shared.layout
    }

    /// The clock of the records' timestamps.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// When the tracer's clock went into CUPTI, read on that clock just after. Beside another consumer that CUPTI
    /// records for, records of the moments before can still come stamped on the tracer's clock: CUPTI puts a record
    /// it held on the clock in use when it writes it out (seen on an H200, CUPTI 13.0: API calls up to 35 ms before
    /// the start, written out after it), while the kernels that ran then were already on the earlier clock. Work
    /// that ended before this moment is not the tracer's.
    pub fn clock_in_at(&self) -> u64 {
        self.clock_in_at
    }

    /// The library in use.
    pub fn library(&self) -> &'static CuptiLibrary {
        self.lib
    }

    /// Now, on the records' clock: `cuptiGetTimestamp` where the library has it, else the clock read directly.
    pub fn timestamp(&self) -> u64 {
        if let Some(f) = self.shared.fns.get_timestamp {
            let mut t = 0;
            // SAFETY: a valid out-pointer.
            if unsafe { f(&mut t) } == sys::CUPTI_SUCCESS {
                return t;
            }
        }
        self.clock.now_ns()
    }

    /// Hands buffers CUPTI holds to the closure (`cuptiActivityFlushAll`) and waits until it ran; then reports a
    /// panic of the closure since the last report. CUPTI synchronises nothing: records of GPU work still running
    /// stay incomplete ([`FlushMode::Forced`] delivers them anyway, with end 0).
    pub fn flush_all(&self, mode: FlushMode) -> crate::Result<()> {
        if delivery::in_callback() {
            return Err(TracingError::InsideCallback.into());
        }
        self.flush_raw(mode)?;
        match self.shared.delivery.take_panic() {
            Some(msg) => Err(TracingError::CallbackPanicked(msg).into()),
            None => Ok(()),
        }
    }

    fn flush_raw(&self, mode: FlushMode) -> Result<(), TracingError> {
        let flag = mode.flag();
        // SAFETY: callbacks are registered; this thread runs no completion callback, so waiting for them cannot
        // wait for itself.
        vendor("cuptiActivityFlushAll", unsafe {
            (self.shared.fns.flush_all)(flag)
        })
    }

    /// Turns API records of one function on or off (`cuptiActivityEnableDriverApi` /
    /// `cuptiActivityEnableRuntimeApi`), so that CUPTI does not even record calls nobody wants. With the
    /// `DRIVER`/`RUNTIME` kind enabled this removes single functions; without it, it adds single functions (the
    /// cheap way to record only launches and copies). Enabling the kind again later overrides these settings.
    pub fn set_api_records(&self, cbid: crate::cupti::ApiCbid, enable: bool) -> crate::Result<()> {
        use crate::cupti::ApiCbid;
        let (f, name) = match cbid {
            ApiCbid::Driver(_) => (
                self.shared.fns.enable_driver_api,
                "cuptiActivityEnableDriverApi",
            ),
            ApiCbid::Runtime(_) => (
                self.shared.fns.enable_runtime_api,
                "cuptiActivityEnableRuntimeApi",
            ),
        };
        let f = f.ok_or(TracingError::MissingSymbol(name))?;
        // SAFETY: a plain setting; CUPTI checks the id.
        vendor(name, unsafe { f(cbid.id(), u8::from(enable)) })?;
        Ok(())
    }

    /// Drops CUPTI reported so far, per context and stream.
    pub fn dropped(&self) -> Vec<DroppedRecords> {
        self.shared
            .dropped
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Delivery counts so far.
    pub fn stats(&self) -> TracerStats {
        let d = self.shared.delivery.counts();
        let p = pool::counts();
        TracerStats {
            batches: d.batches,
            records: d.records,
            bytes: d.bytes,
            callback_panics: d.panics,
            dropped_records: self.shared.dropped_total.load(Ordering::Relaxed),
            buffers_made: p.made,
            buffers_refused: p.refused,
            buffers_in_use: p.lent,
        }
    }

    /// Buffers CUPTI completed, in this process, while no tracer ran, and their valid bytes: never delivered.
    /// Zero unless CUPTI holds buffers past a tracer's final forced flush.
    pub fn orphans() -> (u64, u64) {
        (
            ORPHAN_BATCHES.load(Ordering::Relaxed),
            ORPHAN_BYTES.load(Ordering::Relaxed),
        )
    }

    /// Disables the kinds, forces a flush so that every record reaches the closure, and reports. The first
    /// vendor error is returned after the rest of the shutdown ran.
    pub fn stop(self) -> crate::Result<TracerReport> {
        self.stop_keeping(ActivityKinds::empty())
    }

    /// Stops as [`stop`](Self::stop) does, but leaves the kinds in `keep` enabled in CUPTI: for a consumer that
    /// records them too (a profiler inside the program) and registers its own callbacks right after. Turning a kind
    /// off and on again under another consumer's enabled kinds is what CUPTI 13.0 does not survive (it stopped
    /// kernel records for everyone in the process after a few such turns, on driver 580).
    ///
    /// Every record made before the call is delivered (a forced flush); then the pool closes and a second forced
    /// flush hands over the few records made meanwhile, so that no buffer of the tracer stays lent: CUPTI completes a
    /// buffer to the callbacks registered when it completes it, which would be the other consumer's. Until that
    /// consumer registers, CUPTI gets no buffer for the kept kinds and drops their records: those drops are of work
    /// after the tracer's end, reported apart ([`TracerReport::dropped_after_stop`]).
    pub fn stop_keeping(self, keep: ActivityKinds) -> crate::Result<TracerReport> {
        self.stop_keeping_then(keep, || {})
    }

    /// Stops as [`stop_keeping`](Self::stop_keeping) does, and calls `hand_back` as soon as the tracer holds no
    /// buffer any more (after its last flush): where the other consumer's callbacks go back to CUPTI, so that the
    /// kept kinds find its buffers at once. The drops counted until then, `hand_back` included, are
    /// [`TracerReport::dropped_after_stop`]. `hand_back` must not call into this tracer.
    pub fn stop_keeping_then(
        mut self,
        keep: ActivityKinds,
        hand_back: impl FnOnce(),
    ) -> crate::Result<TracerReport> {
        if delivery::in_callback() {
            return Err(TracingError::InsideCallback.into());
        }
        self.shutdown(keep, Some(Box::new(hand_back)))?;
        let dropped = self.dropped();
        Ok(TracerReport {
            stats: self.stats(),
            dropped,
            panic: self.shared.delivery.take_panic(),
            dropped_after_stop: self.shared.dropped_after_stop.load(Ordering::Relaxed),
            dropped_before_start: self.shared.dropped_before_start,
        })
    }

    /// Records CUPTI had dropped before this tracer started (read, and so reset, as it started): another
    /// consumer's, or of the time before any, never this tracer's.
    pub fn dropped_before_start(&self) -> u64 {
        self.shared.dropped_before_start
    }

    /// Disable (all but `keep`), flush, hand back, last drop count, unroute; once.
    fn shutdown(
        &mut self,
        keep: ActivityKinds,
        hand_back: Option<Box<dyn FnOnce() + '_>>,
    ) -> Result<(), TracingError> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        let mut first: Option<TracingError> = None;
        let keep = keep & self.enabled;
        for kind in (self.enabled - keep).kinds() {
            // SAFETY: a kind this tracer enabled.
            let code = unsafe { (self.shared.fns.disable)(kind.0) };
            if let Err(e) = vendor("cuptiActivityDisable", code) {
                first.get_or_insert(e);
            }
        }
        let t0 = std::time::Instant::now();
        // Kinds kept for another consumer: its records in CUPTI's buffers go to it through this tracer, so kernels
        // still running are let end first. A forced flush hands their records out incomplete, and CUPTI writes no
        // complete one later (on an H200 a torch.profiler cycle lost the 44 kernels running at a window's end); a
        // default flush returns only buffers whose records are all complete.
        let mode = if keep.is_empty() {
            FlushMode::Forced
        } else {
            FlushMode::Completed
        };
        if let Err(e) = self.flush_raw(mode) {
            first.get_or_insert(e);
        }
        if keep.is_empty() && first.is_none() && pool::counts().lent > 0 {
            // A record under way as the kinds went off: CUPTI had taken a buffer for it, and wrote it after the
            // flush, which had none to return. Left with CUPTI, the buffer went to the callbacks registered when it
            // completed it: a program's profiler's after a window, which was handed a kernel launched between its
            // sessions (the CUPTI double, about one run in twenty of its scheduled-profiler test).
            match super::flush_forced_until(|m| self.flush_raw(m), || pool::counts().lent == 0) {
                Ok(flushes) => log::debug!(
                    "a buffer of the pool still lent after the final flush: {} after {flushes} more flushes",
                    if pool::counts().lent == 0 {
                        "back"
                    } else {
                        "still lent"
                    }
                ),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        log::debug!(
            "final flush ({mode:?}) in {:.2} ms ({} kinds kept enabled)",
            t0.elapsed().as_secs_f64() * 1e3,
            keep.kinds().count()
        );
        let mut lending = None;
        if !keep.is_empty() {
            // Kept kinds go on recording: no buffer of the pool is lent from now on.
            self.shared.read_dropped(std::ptr::null_mut(), 0);
            self.shared.closed_keeping.store(true, Ordering::Release);
            pool::close();
            lending = Some(Lending::start());
            // The buffers still lent come back once their records are all complete: those holding kernels that
            // still run, and the one CUPTI took since the flush. CUPTI asks for a buffer right after it completes
            // one while kinds record, and keeps one it has written nothing into across forced flushes (CUPTI 13.0,
            // driver 580): such a buffer of the pool, still lent, would be completed to the other consumer, which
            // may pass over a buffer it did not lend and, as Kineto does, flush only while one of its own is out (it
            // then recorded nothing more). A kept kind that records fills it soon. At the bound, what is left is
            // forced out, once.
            // (`flush_complete_first`: 2 ms apart, 50 ms at most.)
            match super::flush_complete_first(|m| self.flush_raw(m), || pool::counts().lent == 0) {
                Ok(ended) if ended.waits > 0 => log::debug!(
                    "{} buffers of the pool still lent after {} waits (last flush {:?}, {:.2} ms in all)",
                    pool::counts().lent,
                    ended.waits,
                    if ended.forced {
                        FlushMode::Forced
                    } else {
                        FlushMode::Completed
                    },
                    t0.elapsed().as_secs_f64() * 1e3
                ),
                Ok(_) => {}
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        // No buffer of the pool is lent now: the other consumer's callbacks can take over (the kept kinds).
        if let Some(hand_back) = hand_back {
            hand_back();
        }
        drop(lending);
        // Drops after the last buffer.
        self.shared.read_dropped(std::ptr::null_mut(), 0);
        *ACTIVE.write().unwrap_or_else(|p| p.into_inner()) = None;
        pool::close();
        self.claim = None;
        log::debug!("activity tracer stopped: {:?}", self.stats());
        match first {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Drop for ActivityTracer {
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        if delivery::in_callback() {
            // Flushing here would wait for this very callback. The tracer stays registered and active for the
            // rest of the process; its closure keeps receiving buffers.
            log::warn!("activity tracer dropped inside a CUPTI callback: left running");
            if let Some(claim) = self.claim.take() {
                std::mem::forget(claim);
            }
            return;
        }
        if let Err(e) = self.shutdown(ActivityKinds::empty(), None) {
            log::warn!("activity tracer shutdown: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of the stand-in lender's buffers.
    const LENT_BYTES: usize = 256;
    /// Buffers the stand-in lender lent.
    static LENDS: AtomicUsize = AtomicUsize::new(0);
    /// The thread that clears the lender while a request allocates.
    static CLEARING: Mutex<Option<std::thread::JoinHandle<()>>> = Mutex::new(None);

    unsafe extern "C" fn stand_in_lender(buffer: *mut *mut u8, size: *mut usize, _: *mut usize) {
        let block: &'static mut [u64] = Box::leak(vec![0u64; LENT_BYTES / 8].into_boxed_slice());
        LENDS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: the caller's valid out-pointers.
        unsafe {
            *buffer = block.as_mut_ptr().cast::<u8>();
            *size = LENT_BYTES;
        }
    }

    /// While the request allocates a buffer of the pool: the stop closes the pool, and the sharing's end clears
    /// the lender on its own thread, given time to.
    fn stop_and_clear() {
        pool::close();
        let clearing = std::thread::spawn(|| {
            // SAFETY: clearing has no precondition.
            unsafe { set_keeping_lender(None) };
        });
        *CLEARING.lock().unwrap_or_else(|p| p.into_inner()) = Some(clearing);
        std::thread::sleep(Duration::from_millis(20));
    }

    #[test]
    fn a_request_still_allocating_when_the_lender_is_cleared_gets_the_lenders_buffer() {
        let _serial = pool::tests::SERIAL
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        pool::configure(64, 4);
        // SAFETY: the stand-in may be called from any thread with CUPTI's request arguments and never unwinds.
        unsafe { set_keeping_lender(Some(stand_in_lender)) };
        LENDS.store(0, Ordering::SeqCst);
        *pool::BETWEEN.lock().unwrap_or_else(|p| p.into_inner()) = Some(stop_and_clear);
        let (mut buffer, mut size, mut max) = (std::ptr::null_mut::<u8>(), 0usize, 0usize);
        // SAFETY: the request callback, called as CUPTI calls it, with valid out-pointers.
        unsafe { on_buffer_requested(&mut buffer, &mut size, &mut max) };
        *pool::BETWEEN.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let clearing = CLEARING.lock().unwrap_or_else(|p| p.into_inner()).take();
        clearing.expect("the lender was cleared").join().unwrap();
        assert_eq!(
            (buffer.is_null(), size, LENDS.load(Ordering::SeqCst)),
            (false, LENT_BYTES, 1),
            "lent by the lender"
        );
        assert_eq!(KEEPING_LENDER.load(Ordering::SeqCst), 0, "then cleared");
    }
}
