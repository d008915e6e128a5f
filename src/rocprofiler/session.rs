//! Profiling sessions: filters feeding buffers, started and terminated; destroyed (and flushed) on drop.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::batch::{Batch, LARGEST_RECORD};
use super::buffer::{self, Buffer, BufferOptions, Flusher, Shared, in_callback};
use super::filter::{Filter, PreparedFilter};
use super::library::sym;
use super::{ProfilerError, Rocprofiler, RocprofilerError, RocprofilerLibrary};
use crate::Result;
use crate::sys::rocprofiler as sys;

/// The active session's handle, 0 when none: rocprofiler allows one active session per process.
static ACTIVE: AtomicU64 = AtomicU64::new(0);

struct State {
    started: bool,
    active: bool,
    filters: Vec<PreparedFilter>,
    buffers: Vec<(u64, Arc<Shared>)>,
    flushers: Vec<Flusher>,
}

impl State {
    fn new() -> Self {
        State {
            started: false,
            active: false,
            filters: Vec::new(),
            buffers: Vec::new(),
            flushers: Vec::new(),
        }
    }
}

/// A rocprofiler profiling session (`rocprofiler_create_session`, no replay).
///
/// Every method takes `&self`; the session is `Send` and `Sync`. Dropping it stops interval flushing,
/// terminates it if active, flushes and destroys it: every record the vendor wrote reaches its buffer's callback
/// before the drop returns.
pub struct ProfilingSession<'g> {
    lib: &'static RocprofilerLibrary,
    handle: u64,
    state: Mutex<State>,
    /// `state.active`, readable without the lock: `terminate` holds the lock while the vendor runs the last
    /// callbacks, which may ask [`is_active`](Self::is_active).
    active: AtomicBool,
    _rocprofiler: PhantomData<&'g Rocprofiler>,
}

impl std::fmt::Debug for ProfilingSession<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfilingSession")
            .field("handle", &self.handle)
            .field("active", &self.is_active())
            .finish_non_exhaustive()
    }
}

impl<'g> ProfilingSession<'g> {
    /// Creates a session.
    pub fn new(rocprofiler: &'g Rocprofiler) -> Result<Self> {
        let lib = rocprofiler.library();
        let f = sym(
            &lib.t.rocprofiler_create_session,
            "rocprofiler_create_session",
        )?;
        let mut id = sys::rocprofiler_session_id_t::default();
        // SAFETY: the library is initialised (the guard is borrowed); `id` is a valid out-pointer.
        RocprofilerError::check(unsafe { f(sys::ROCPROFILER_NONE_REPLAY_MODE, &mut id) })?;
        Ok(ProfilingSession {
            lib,
            handle: id.handle,
            state: Mutex::new(State::new()),
            active: AtomicBool::new(false),
            _rocprofiler: PhantomData,
        })
    }

    /// The vendor's session id.
    pub fn id(&self) -> u64 {
        self.handle
    }

    /// Whether the session is started and not terminated.
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn sid(&self) -> sys::rocprofiler_session_id_t {
        sys::rocprofiler_session_id_t {
            handle: self.handle,
        }
    }

    /// Creates a buffer of `size` bytes per half whose batches go to `callback` (on the vendor's consumer
    /// thread). See [`create_buffer_with`](Self::create_buffer_with).
    pub fn create_buffer<F>(&self, size: usize, callback: F) -> Result<Buffer<'_>>
    where
        F: for<'b> FnMut(&Batch<'b>) + Send + 'static,
    {
        self.create_buffer_with(BufferOptions::new(size), callback)
    }

    /// Creates a buffer with options (size, interval flushing).
    ///
    /// The size must hold the largest record (288 bytes): the vendor only asserts that and overruns the half in
    /// a release build.
    pub fn create_buffer_with<F>(&self, options: BufferOptions, callback: F) -> Result<Buffer<'_>>
    where
        F: for<'b> FnMut(&Batch<'b>) + Send + 'static,
    {
        if in_callback() {
            return Err(ProfilerError::InsideCallback.into());
        }
        if options.size < LARGEST_RECORD {
            return Err(ProfilerError::BufferTooSmall {
                size: options.size,
                min: LARGEST_RECORD,
            }
            .into());
        }
        if options.flush_interval.is_some_and(|d| d.is_zero()) {
            return Err(ProfilerError::ZeroFlushInterval.into());
        }
        let mut state = self.lock();
        let f = sym(
            &self.lib.t.rocprofiler_create_buffer,
            "rocprofiler_create_buffer",
        )?;
        let mut id = sys::rocprofiler_buffer_id_t::default();
        // SAFETY: the session exists; `on_batch` stays valid for the process; `id` is a valid out-pointer. The
        // callback cannot run before a started filter feeds the buffer, which needs the id returned here.
        RocprofilerError::check(unsafe {
            f(self.sid(), Some(buffer::on_batch), options.size, &mut id)
        })?;
        let shared = Shared::new(options.size, Box::new(callback));
        buffer::register(self.handle, id.value, Arc::clone(&shared));
        state.buffers.push((id.value, Arc::clone(&shared)));
        if let Some(interval) = options.flush_interval {
            let flusher = Flusher::spawn(
                self.lib,
                self.handle,
                id.value,
                interval,
                Arc::clone(&shared),
            )
            .map_err(|e| ProfilerError::ThreadSpawn(e.to_string()))?;
            state.flushers.push(flusher);
        }
        Ok(Buffer {
            lib: self.lib,
            session: self.handle,
            id: id.value,
            shared,
            _session: PhantomData,
        })
    }

    /// Adds a filter whose records go to `buffer`. One filter per kind, before the session is first started.
    pub fn add_filter(&self, filter: Filter, buffer: &Buffer<'_>) -> Result<()> {
        if in_callback() {
            return Err(ProfilerError::InsideCallback.into());
        }
        if buffer.session != self.handle {
            return Err(ProfilerError::ForeignBuffer.into());
        }
        let mut state = self.lock();
        if state.started {
            return Err(ProfilerError::SessionStarted.into());
        }
        let prepared = filter.prepare()?;
        if state.filters.iter().any(|f| f.kind == prepared.kind) {
            return Err(ProfilerError::DuplicateFilter(filter.kind_name()).into());
        }
        let create = sym(
            &self.lib.t.rocprofiler_create_filter,
            "rocprofiler_create_filter",
        )?;
        let set_buffer = sym(
            &self.lib.t.rocprofiler_set_filter_buffer,
            "rocprofiler_set_filter_buffer",
        )?;
        let mut id = sys::rocprofiler_filter_id_t::default();
        // SAFETY: the session exists; the data and property point into `prepared`, which the session keeps
        // until it is destroyed; `id` is a valid out-pointer.
        RocprofilerError::check(unsafe {
            create(
                self.sid(),
                prepared.kind,
                prepared.data,
                prepared.data_count,
                &mut id,
                prepared.property,
            )
        })?;
        // SAFETY: session, filter and buffer exist.
        let attached = RocprofilerError::check(unsafe {
            set_buffer(
                self.sid(),
                id,
                sys::rocprofiler_buffer_id_t { value: buffer.id },
            )
        });
        if let Err(e) = attached {
            if let Ok(destroy) = sym(
                &self.lib.t.rocprofiler_destroy_filter,
                "rocprofiler_destroy_filter",
            ) {
                // SAFETY: the filter was just created in this session.
                let _ = unsafe { destroy(self.sid(), id) };
            }
            return Err(e.into());
        }
        state.filters.push(prepared);
        Ok(())
    }

    /// Starts collecting. Fails with [`ProfilerError::SessionAlreadyActive`] while another session is active.
    pub fn start(&self) -> Result<()> {
        if in_callback() {
            return Err(ProfilerError::InsideCallback.into());
        }
        let mut state = self.lock();
        if state.active {
            return Err(ProfilerError::SessionAlreadyActive {
                active: self.handle,
            }
            .into());
        }
        if state.filters.is_empty() {
            return Err(ProfilerError::NoFilter.into());
        }
        if let Err(active) =
            ACTIVE.compare_exchange(0, self.handle, Ordering::AcqRel, Ordering::Acquire)
        {
            return Err(ProfilerError::SessionAlreadyActive { active }.into());
        }
        let start = match sym(
            &self.lib.t.rocprofiler_start_session,
            "rocprofiler_start_session",
        ) {
            Ok(f) => f,
            Err(e) => {
                ACTIVE.store(0, Ordering::Release);
                return Err(e.into());
            }
        };
        // SAFETY: the session exists and has filters with buffers.
        if let Err(e) = RocprofilerError::check(unsafe { start(self.sid()) }) {
            ACTIVE.store(0, Ordering::Release);
            return Err(e.into());
        }
        state.started = true;
        state.active = true;
        self.active.store(true, Ordering::Release);
        Ok(())
    }

    /// Stops collecting; the vendor flushes the buffers (their callbacks have run when this returns).
    pub fn terminate(&self) -> Result<()> {
        if in_callback() {
            return Err(ProfilerError::InsideCallback.into());
        }
        let mut state = self.lock();
        if !state.active {
            return Err(ProfilerError::SessionNotActive.into());
        }
        let f = sym(
            &self.lib.t.rocprofiler_terminate_session,
            "rocprofiler_terminate_session",
        )?;
        // SAFETY: the session exists and is active; this thread is no consumer thread, so the flush inside
        // cannot wait for itself.
        RocprofilerError::check(unsafe { f(self.sid()) })?;
        state.active = false;
        self.active.store(false, Ordering::Release);
        let _ = ACTIVE.compare_exchange(self.handle, 0, Ordering::AcqRel, Ordering::Acquire);
        Ok(())
    }
}

impl Drop for ProfilingSession<'_> {
    fn drop(&mut self) {
        if in_callback() {
            // Destroying would join the consumer thread this code runs on. Leak the vendor session instead, and
            // with it everything it uses: its filters stay allocated, its buffers registered and delivering, its
            // flushers running (joining one here could wait for this very thread).
            let state = std::mem::replace(
                self.state.get_mut().unwrap_or_else(|p| p.into_inner()),
                State::new(),
            );
            std::mem::forget(state);
            return;
        }
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        for flusher in &mut state.flushers {
            flusher.stop();
        }
        let sid = sys::rocprofiler_session_id_t {
            handle: self.handle,
        };
        if state.active {
            if let Ok(f) = sym(
                &self.lib.t.rocprofiler_terminate_session,
                "rocprofiler_terminate_session",
            ) {
                // SAFETY: the session exists and is active; not on a consumer thread.
                let _ = unsafe { f(sid) };
            }
        }
        for (id, _) in &state.buffers {
            // Destroy flushes too; flushing first does not depend on that.
            let _ = buffer::flush_raw(self.lib, self.handle, *id);
        }
        let destroyed = match sym(
            &self.lib.t.rocprofiler_destroy_session,
            "rocprofiler_destroy_session",
        ) {
            // SAFETY: the session exists; no flusher runs; the vendor flushes and joins its consumer threads.
            Ok(f) => RocprofilerError::check(unsafe { f(sid) }).is_ok(),
            Err(_) => false,
        };
        if state.active {
            let _ = ACTIVE.compare_exchange(self.handle, 0, Ordering::AcqRel, Ordering::Acquire);
        }
        if destroyed {
            // No callback can come any more; a failed destroy keeps the routes so that late batches still
            // find their closure.
            buffer::unregister_session(self.handle);
        }
    }
}
