//! [`Checkpoint`]: save a CUDA context's device memory and restore it, with the vendor's preconditions checked
//! by the crate.
//!
//! The real `libcheckpoint.so` crashes the process when no CUDA driver is present and misbehaves when given a
//! null context, so every vendor call here is preceded by: the driver loaded and initialised (a [`Context`]
//! cannot exist otherwise), the context checked alive with the driver and pushed current, and the context passed
//! explicitly in the vendor struct.

use std::fmt;
use std::sync::{Mutex, PoisonError};

use super::{CheckpointError, CheckpointFn, CheckpointLibrary};
use crate::cuda::Context;
use crate::sys::cupti as sys;

type RawCheckpoint = sys::NV_Cupti_Checkpoint_CUpti_Checkpoint;

/// `CUpti_Checkpoint_STRUCT_SIZE`: offset of `pPriv` plus its size (48 on x86-64).
const STRUCT_SIZE: usize = std::mem::offset_of!(RawCheckpoint, pPriv) + size_of::<*mut ()>();

/// The vendor does not document whether its checkpoint calls may run concurrently, even on different handles;
/// the crate serialises them process-wide. A save or restore takes milliseconds; the lock costs nanoseconds.
static VENDOR_CALLS: Mutex<()> = Mutex::new(());

/// How much of one memory level (device or host) a checkpoint must leave free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Reserve {
    /// Keep nothing free: the checkpoint may use all of this level (vendor value 0).
    #[default]
    Nothing,
    /// Keep this many MiB free (values from `usize::MAX` up are clamped to `usize::MAX - 1`, which is not the
    /// vendor's "use none" value).
    MiB(usize),
    /// Keep everything free: do not use this level at all (the vendor's `(size_t)-1`).
    ///
    /// Documented by the vendor, but CUPTI 13.0 (driver 580, H200) answers a save with this value on either level
    /// with [`CuptiError::InvalidParameter`](crate::cupti::CuptiError::InvalidParameter). To keep a level
    /// free, reserve its size in MiB instead: the checkpoint then falls back to the next level, and past host
    /// memory to a file (seen under `/tmp`).
    Everything,
}

impl Reserve {
    /// The value of the vendor's `reserveDeviceMB` / `reserveHostMB` field.
    pub fn vendor_value(self) -> usize {
        match self {
            Reserve::Nothing => 0,
            Reserve::MiB(n) => n.min(usize::MAX - 1),
            Reserve::Everything => usize::MAX,
        }
    }
}

bitflags::bitflags! {
    /// `CUpti_CheckpointOptimizations` flags.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Optimizations: u8 {
        /// `CUPTI_CHECKPOINT_OPT_TRANSFER`: restore only the blocks that changed since the save. The vendor
        /// caches which blocks those are, so every restore must happen at the same point of the program.
        const TRANSFER = sys::CUPTI_CHECKPOINT_OPT_TRANSFER as u8;
    }
}

/// The options of a checkpoint, fixed when it is built (the vendor reads them on the first call only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CheckpointOptions {
    /// Device memory to leave free.
    pub reserve_device: Reserve,
    /// Host memory to leave free.
    pub reserve_host: Reserve,
    /// Whether a second [`Checkpoint::save`] may replace the first.
    pub allow_overwrite: bool,
    /// Optimisation flags.
    pub optimizations: Optimizations,
}

/// Builds a [`Checkpoint`] with options; from [`Checkpoint::builder`].
#[derive(Debug, Clone, Copy)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct CheckpointBuilder<'ctx> {
    ctx: &'ctx Context,
    options: CheckpointOptions,
}

impl<'ctx> CheckpointBuilder<'ctx> {
    /// Device memory the checkpoint must leave free (default [`Reserve::Nothing`]).
    pub fn reserve_device(mut self, reserve: Reserve) -> Self {
        self.options.reserve_device = reserve;
        self
    }

    /// Host memory the checkpoint must leave free (default [`Reserve::Nothing`]).
    pub fn reserve_host(mut self, reserve: Reserve) -> Self {
        self.options.reserve_host = reserve;
        self
    }

    /// Allow a later [`Checkpoint::save`] to replace an earlier one (default `false`).
    pub fn allow_overwrite(mut self, allow: bool) -> Self {
        self.options.allow_overwrite = allow;
        self
    }

    /// Optimisation flags (default none).
    pub fn optimizations(mut self, flags: Optimizations) -> Self {
        self.options.optimizations = flags;
        self
    }

    /// Checks the options and the context and loads `libcheckpoint.so`. Nothing is saved yet and no vendor call
    /// is made. Both levels [`Reserve::Everything`] is [`CheckpointError::NoMemoryAllowed`].
    pub fn build(self) -> crate::Result<Checkpoint<'ctx>> {
        if self.options.reserve_device == Reserve::Everything
            && self.options.reserve_host == Reserve::Everything
        {
            return Err(CheckpointError::NoMemoryAllowed.into());
        }
        // The context first: the driver must be usable before the checkpoint library is even opened.
        self.ctx.driver().init()?;
        self.ctx.check_valid()?;
        let lib = CheckpointLibrary::load()?;
        let handle = Box::new(RawCheckpoint {
            structSize: STRUCT_SIZE,
            ctx: self.ctx.as_raw(),
            reserveDeviceMB: self.options.reserve_device.vendor_value(),
            reserveHostMB: self.options.reserve_host.vendor_value(),
            allowOverwrite: u8::from(self.options.allow_overwrite),
            optimizations: self.options.optimizations.bits(),
            pPriv: std::ptr::null_mut(),
        });
        Ok(Checkpoint {
            ctx: self.ctx,
            lib,
            handle,
            options: self.options,
            state: State::Empty,
        })
    }
}

/// Where a checkpoint stands; the crate checks it before each vendor call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No save has succeeded yet.
    Empty,
    /// The last save succeeded: restore is allowed.
    Saved,
    /// A save succeeded once, but a later overwrite failed: the contents are unknown, restore is refused.
    Stale,
    /// Freed (or the free could not be done): no further vendor call.
    Released,
}

/// A checkpoint of one CUDA context's device memory: [`save`](Self::save) it, run kernels,
/// [`restore`](Self::restore) it, as many times as needed.
///
/// The checkpoint borrows its [`Context`], so the context outlives it. Options are fixed by the
/// [`builder`](Self::builder). Misuse is a typed error reported before any vendor call: restore before a successful
/// save is [`CheckpointError::NotSaved`], a second save without `allow_overwrite` is
/// [`CheckpointError::AlreadySaved`]. [`free`](Self::free) consumes the checkpoint, so use after free does not
/// compile:
///
/// ```compile_fail
/// # fn f(ctx: &gpu_tools::cuda::Context) -> gpu_tools::Result<()> {
/// let mut cp = gpu_tools::cupti::Checkpoint::new(ctx)?;
/// cp.save()?;
/// cp.free()?;
/// cp.restore()?; // error: use of moved value
/// # Ok(()) }
/// ```
///
/// and the context cannot be dropped while a checkpoint uses it:
///
/// ```compile_fail
/// # fn f() -> gpu_tools::Result<()> {
/// let ctx = gpu_tools::cuda::Context::primary(0)?;
/// let mut cp = gpu_tools::cupti::Checkpoint::new(&ctx)?;
/// drop(ctx); // error: cannot move out of `ctx` because it is borrowed
/// cp.save()?;
/// # Ok(()) }
/// ```
///
/// `Send` and `Sync`: the vendor handle is tied to its context, not to a thread (the context is passed explicitly
/// and pushed current for each call), so a checkpoint may be saved on one thread and restored on another.
/// Every method that calls the vendor takes `&mut self`, so one checkpoint is never used by two threads at once,
/// and calls on different checkpoints are serialised by the crate.
pub struct Checkpoint<'ctx> {
    ctx: &'ctx Context,
    lib: &'static CheckpointLibrary,
    /// Boxed so that its address stays fixed while the vendor holds private state in `pPriv`.
    handle: Box<RawCheckpoint>,
    options: CheckpointOptions,
    state: State,
}

// SAFETY: the vendor state behind `pPriv` belongs to the context, not to the creating thread; the context is a
// `Sync` handle; vendor calls need `&mut self` and are serialised process-wide, so moving the value to another
// thread cannot race with a call in progress.
unsafe impl Send for Checkpoint<'_> {}
// SAFETY: `&Checkpoint` only reads plain fields (options, state); it gives no way to call the vendor.
unsafe impl Sync for Checkpoint<'_> {}

impl fmt::Debug for Checkpoint<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Checkpoint")
            .field("ctx", &self.ctx.as_raw())
            .field("options", &self.options)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl<'ctx> Checkpoint<'ctx> {
    /// A builder for a checkpoint of `ctx` with default options.
    pub fn builder(ctx: &'ctx Context) -> CheckpointBuilder<'ctx> {
        CheckpointBuilder {
            ctx,
            options: CheckpointOptions::default(),
        }
    }

    /// A checkpoint of `ctx` with default options: no memory reserved, no overwrite, no optimisations.
    pub fn new(ctx: &'ctx Context) -> crate::Result<Self> {
        Self::builder(ctx).build()
    }

    /// The context this checkpoint saves.
    pub fn context(&self) -> &'ctx Context {
        self.ctx
    }

    /// The options it was built with.
    pub fn options(&self) -> &CheckpointOptions {
        &self.options
    }

    /// True when the last save succeeded, so [`restore`](Self::restore) is allowed.
    pub fn is_saved(&self) -> bool {
        self.state == State::Saved
    }

    /// The vendor struct this checkpoint passes to `libcheckpoint.so`, for callers that need the C API itself
    /// (benchmarks that compare against it, or vendor calls the crate does not wrap).
    ///
    /// Getting the pointer is safe; using it is not. A caller that passes it to a vendor function must: keep the
    /// context alive and current, not call `cuptiCheckpointFree` (the checkpoint frees on drop), not change the
    /// option fields, and not use the pointer after the checkpoint is dropped or while another thread uses the
    /// checkpoint. The crate's state tracking does not see such calls.
    pub fn as_mut_ptr(&mut self) -> *mut RawCheckpoint {
        &mut *self.handle
    }

    /// Saves the context's device memory (`cuptiCheckpointSave`).
    ///
    /// A second save needs `allow_overwrite`, else [`CheckpointError::AlreadySaved`]. If an overwriting save
    /// fails, the earlier contents are no longer trusted and restore reports [`CheckpointError::NotSaved`] until a
    /// save succeeds.
    pub fn save(&mut self) -> crate::Result<()> {
        match self.state {
            State::Saved | State::Stale if !self.options.allow_overwrite => {
                return Err(CheckpointError::AlreadySaved.into());
            }
            // `Released` is only reached inside `free(self)` and `drop`, after which no method can be called.
            _ => {}
        }
        let result = self.call(self.lib.save, "cuptiCheckpointSave");
        self.state = match (&result, self.state) {
            (Ok(()), _) => State::Saved,
            (Err(_), State::Empty) => State::Empty,
            (Err(_), _) => State::Stale,
        };
        result
    }

    /// Restores the device memory saved by the last successful [`save`](Self::save)
    /// (`cuptiCheckpointRestore`).
    pub fn restore(&mut self) -> crate::Result<()> {
        match self.state {
            State::Saved => self.call(self.lib.restore, "cuptiCheckpointRestore"),
            State::Empty | State::Stale | State::Released => Err(CheckpointError::NotSaved.into()),
        }
    }

    /// Frees the saved data (`cuptiCheckpointFree`) and reports the result; dropping frees too but cannot
    /// report. If the context is no longer valid the vendor is not called and the error is returned; the
    /// vendor's host-side copy is then lost.
    pub fn free(mut self) -> crate::Result<()> {
        self.release()
    }

    /// Frees the vendor state once, if there is any.
    fn release(&mut self) -> crate::Result<()> {
        let needed = self.state != State::Empty || !self.handle.pPriv.is_null();
        if self.state == State::Released || !needed {
            self.state = State::Released;
            return Ok(());
        }
        // Whatever happens, never call free again: a second free is an error for the vendor.
        let result = self.call(self.lib.free, "cuptiCheckpointFree");
        self.state = State::Released;
        result
    }

    /// One vendor call with the preconditions established.
    fn call(&mut self, f: CheckpointFn, name: &'static str) -> crate::Result<()> {
        self.ctx.driver().init()?;
        // make_current checks the context with the driver before pushing it.
        let _current = self.ctx.make_current()?;
        self.handle.ctx = self.ctx.as_raw();
        let _serial = VENDOR_CALLS.lock().unwrap_or_else(PoisonError::into_inner);
        // SAFETY: the driver is initialised, the context is alive and current, the struct is fully initialised
        // with the explicit context and the vendor's struct size, lives in a Box whose address never changes, and
        // `&mut self` plus the lock give the vendor exclusive access for the call.
        let code = unsafe { f(&mut *self.handle) };
        super::CuptiError::check_call(name, code).map_err(Into::into)
    }
}

impl Drop for Checkpoint<'_> {
    fn drop(&mut self) {
        // Errors cannot be reported from drop; `free` reports them.
        let _ = self.release();
    }
}
