//! [`ProcessCheckpoint`]: the driver's checkpoint cycle of another process as a typestate, `Running` →
//! `Locked` → `Checkpointed` → `Locked` → `Running`.

use std::ffi::{c_int, c_uint};
use std::fmt;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use super::error::{
    CHECKPOINT, GET_STATE, LOCK, RESTORE, RESTORE_THREAD, Refusal, UNLOCK, diagnose,
};
use super::target::{self, Hold};
use super::{Failed, ProcessCheckpointError, ProcessState};
use crate::cuda::{CudaError, Driver, GpuUuid};
use crate::sys::cuda_driver as sys;

type E = ProcessCheckpointError;
type CuResult = sys::CUresult;

mod sealed {
    pub trait Sealed {}
}

/// A stage of a [`ProcessCheckpoint`]: [`Running`], [`Locked`] or [`Checkpointed`]. Sealed.
pub trait Stage: sealed::Sealed {
    /// The driver state a handle of this stage stands for.
    const STATE: ProcessState;
}

/// Stage of a process whose CUDA calls run: it can be locked.
#[derive(Debug)]
pub enum Running {}
/// Stage of a locked process (its CUDA calls block): it can be checkpointed or unlocked.
#[derive(Debug)]
pub enum Locked {}
/// Stage of a checkpointed process (device memory in host memory, GPUs released): it can be restored.
#[derive(Debug)]
pub enum Checkpointed {}

impl sealed::Sealed for Running {}
impl sealed::Sealed for Locked {}
impl sealed::Sealed for Checkpointed {}
impl Stage for Running {
    const STATE: ProcessState = ProcessState::Running;
}
impl Stage for Locked {
    const STATE: ProcessState = ProcessState::Locked;
}
impl Stage for Checkpointed {
    const STATE: ProcessState = ProcessState::Checkpointed;
}

/// How a checkpointed GPU maps onto the GPU to restore it on (`CUcheckpointGpuPair`).
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GpuPair {
    /// The GPU the process used when it was checkpointed.
    pub checkpointed: GpuUuid,
    /// The GPU to restore it on: same chip, enough memory.
    pub restore_on: GpuUuid,
}

/// The six driver calls, checked present once.
#[derive(Clone, Copy)]
struct ProcessApi {
    get_state: unsafe extern "C" fn(c_int, *mut sys::CUprocessState) -> CuResult,
    lock: unsafe extern "C" fn(c_int, *mut sys::CUcheckpointLockArgs) -> CuResult,
    checkpoint: unsafe extern "C" fn(c_int, *mut sys::CUcheckpointCheckpointArgs) -> CuResult,
    restore: unsafe extern "C" fn(c_int, *mut sys::CUcheckpointRestoreArgs) -> CuResult,
    unlock: unsafe extern "C" fn(c_int, *mut sys::CUcheckpointUnlockArgs) -> CuResult,
    restore_thread: unsafe extern "C" fn(c_int, *mut c_int) -> CuResult,
}

impl ProcessApi {
    fn of(driver: &Driver) -> Result<Self, E> {
        let a = driver.api();
        let missing = |call| E::Unsupported { call };
        Ok(ProcessApi {
            get_state: a
                .cu_checkpoint_process_get_state
                .ok_or(missing(GET_STATE))?,
            lock: a.cu_checkpoint_process_lock.ok_or(missing(LOCK))?,
            checkpoint: a
                .cu_checkpoint_process_checkpoint
                .ok_or(missing(CHECKPOINT))?,
            restore: a.cu_checkpoint_process_restore.ok_or(missing(RESTORE))?,
            unlock: a.cu_checkpoint_process_unlock.ok_or(missing(UNLOCK))?,
            restore_thread: a
                .cu_checkpoint_process_get_restore_thread_id
                .ok_or(missing(RESTORE_THREAD))?,
        })
    }

    /// `cuCheckpointProcessGetState` with the error diagnosed.
    fn state(&self, driver: &Driver, pid: c_int, held: bool) -> Result<ProcessState, E> {
        let mut raw: sys::CUprocessState = 0;
        // SAFETY: the symbol has the header's signature; a valid out-pointer; the call only reads the state of
        // `pid` (a positive pid, checked) and changes nothing.
        let code = unsafe { (self.get_state)(pid, &mut raw) };
        if code == sys::CUDA_SUCCESS {
            return Ok(ProcessState::from_raw(raw));
        }
        Err(diagnose(
            refusal(driver, GET_STATE, pid, code, held, None),
            || None,
        ))
    }
}

fn refusal(
    driver: &Driver,
    call: &'static str,
    pid: c_int,
    code: CuResult,
    held: bool,
    lock_timeout: Option<Duration>,
) -> Refusal {
    Refusal {
        call,
        pid: pid.unsigned_abs(),
        error: CudaError::from_code(driver, code),
        held,
        lock_timeout,
        proc: target::proc_status(pid),
        own_uid: target::own_uid(),
    }
}

/// Whole milliseconds for the driver, rounded up, at least 1 (0 would mean "wait for ever").
fn lock_timeout_ms(timeout: Duration) -> Result<c_uint, E> {
    let ms = timeout.as_nanos().div_ceil(1_000_000).max(1);
    c_uint::try_from(ms).map_err(|_| E::InvalidTimeout { timeout })
}

/// The state behind every stage; its `Drop` brings the process back to running.
struct Inner {
    pid: u32,
    raw_pid: c_int,
    driver: &'static Driver,
    api: ProcessApi,
    /// Start time of the process when it was taken, to tell a reused pid apart.
    start_time: Option<u64>,
    /// The state the last successful step left.
    believed: ProcessState,
    /// A step failed since: the driver's state may differ from `believed`.
    uncertain: bool,
    _hold: Hold,
}

impl Inner {
    fn take(pid: u32) -> Result<Self, E> {
        let raw_pid = target::checked_pid(pid, false)?;
        let driver = Driver::load()?;
        let api = ProcessApi::of(driver)?;
        let hold = Hold::take(raw_pid)?;
        Ok(Inner {
            pid,
            raw_pid,
            driver,
            api,
            start_time: target::start_time(raw_pid),
            believed: ProcessState::Running,
            uncertain: false,
            _hold: hold,
        })
    }

    /// The pid names another process than the one taken (it exited and the pid was reused, or it is gone).
    fn gone(&self) -> bool {
        self.start_time
            .is_some_and(|t| target::start_time(self.raw_pid) != Some(t))
    }

    fn exited(&self) -> E {
        E::Exited {
            pid: self.pid,
            call: None,
            error: None,
        }
    }

    /// [`exited`](Self::exited) for a driver call that failed: the call and its code are kept.
    fn exited_after(&self, call: &'static str, code: CuResult) -> E {
        E::Exited {
            pid: self.pid,
            call: Some(call),
            error: Some(CudaError::from_code(self.driver, code)),
        }
    }

    /// The driver's state; a failure is an exit where the pid names another process now.
    fn state(&self) -> Result<ProcessState, E> {
        self.api
            .state(self.driver, self.raw_pid, true)
            .map_err(|e| {
                if !self.gone() {
                    return e;
                }
                e.cuda_error()
                    .map_or_else(|| self.exited(), |c| self.exited_after(GET_STATE, c.code))
            })
    }

    /// One state-changing call. On success the handle believes `to`; on failure it is uncertain and the error
    /// is diagnosed.
    fn step(
        &mut self,
        call: &'static str,
        to: ProcessState,
        lock_timeout: Option<Duration>,
        f: impl FnOnce(c_int) -> CuResult,
    ) -> Result<(), E> {
        let started = Instant::now();
        let code = f(self.raw_pid);
        let elapsed = started.elapsed();
        if code == sys::CUDA_SUCCESS {
            log::debug!(
                "process {}: {} -> {to} ({call}, {:.3} ms)",
                self.pid,
                self.believed,
                elapsed.as_secs_f64() * 1e3
            );
            self.believed = to;
            self.uncertain = false;
            return Ok(());
        }
        self.uncertain = true;
        if self.gone() {
            return Err(self.exited_after(call, code));
        }
        let error = diagnose(
            refusal(self.driver, call, self.raw_pid, code, true, lock_timeout),
            || self.api.state(self.driver, self.raw_pid, true).ok(),
        );
        log::debug!(
            "process {}: {call} failed after {:.3} ms: {error}",
            self.pid,
            elapsed.as_secs_f64() * 1e3
        );
        Err(error)
    }

    fn lock(&mut self, timeout: Duration) -> Result<(), E> {
        let mut args = sys::CUcheckpointLockArgs {
            timeoutMs: lock_timeout_ms(timeout)?,
            ..Default::default()
        };
        let lock = self.api.lock;
        // SAFETY: header signature; the argument block is complete, its reserved fields zeroed as the header
        // requires, and it outlives the call. The pid is positive and not this process's.
        let locked = self.step(LOCK, ProcessState::Locked, Some(timeout), |pid| unsafe {
            lock(pid, &mut args)
        });
        // A refused lock took nothing (the driver: a timeout leaves the process running; a second lock or a lock
        // of a checkpointed process is refused whole). A state found afterwards is another tool's, and recovering
        // it would undo that tool's lock or checkpoint: nothing is left to undo.
        if locked.is_err() && !self.gone() {
            self.uncertain = false;
        }
        locked
    }

    fn checkpoint(&mut self) -> Result<(), E> {
        let mut args = sys::CUcheckpointCheckpointArgs::default();
        let checkpoint = self.api.checkpoint;
        // SAFETY: as for lock: a zeroed argument block that outlives the call.
        self.step(CHECKPOINT, ProcessState::Checkpointed, None, |pid| unsafe {
            checkpoint(pid, &mut args)
        })
    }

    fn restore(&mut self, pairs: &[GpuPair]) -> Result<(), E> {
        let count =
            c_uint::try_from(pairs.len()).map_err(|_| E::TooManyGpuPairs { count: pairs.len() })?;
        // The header: restore needs persistence mode or cuInit in the calling process. Where cuInit fails the
        // driver's own answer to the restore says more.
        if let Err(e) = self.driver.init() {
            log::debug!("cuInit before restoring process {}: {e}", self.pid);
        }
        let mut raw_pairs: Vec<sys::CUcheckpointGpuPair> = pairs
            .iter()
            .map(|p| sys::CUcheckpointGpuPair {
                oldUuid: p.checkpointed.to_raw(),
                newUuid: p.restore_on.to_raw(),
            })
            .collect();
        let mut args = sys::CUcheckpointRestoreArgs::default();
        if count > 0 {
            args.gpuPairs = raw_pairs.as_mut_ptr();
            args.gpuPairsCount = count;
        }
        let restore = self.api.restore;
        // SAFETY: as for lock; `gpuPairs` is null with a count of 0, or points to `count` pairs in `raw_pairs`,
        // which outlives the call.
        self.step(RESTORE, ProcessState::Locked, None, |pid| unsafe {
            restore(pid, &mut args)
        })
    }

    fn unlock(&mut self) -> Result<(), E> {
        let mut args = sys::CUcheckpointUnlockArgs::default();
        let unlock = self.api.unlock;
        // SAFETY: as for lock: a zeroed argument block that outlives the call.
        self.step(UNLOCK, ProcessState::Running, None, |pid| unsafe {
            unlock(pid, &mut args)
        })
    }

    fn needs_recovery(&self) -> bool {
        self.believed != ProcessState::Running || self.uncertain
    }

    /// Brings the process back to running from whatever state the driver reports: restore if checkpointed,
    /// unlock if locked. Afterwards nothing is left for `Drop` to do, whatever the outcome.
    fn recover(&mut self) -> Result<(), E> {
        let result = self.recover_steps();
        self.believed = ProcessState::Running;
        self.uncertain = false;
        result
    }

    fn recover_steps(&mut self) -> Result<(), E> {
        // Never restore or unlock a process that merely inherited the pid.
        if self.gone() {
            return Err(self.exited());
        }
        // At most checkpointed -> locked -> running; a third look only confirms.
        for _ in 0..3 {
            match self.state()? {
                ProcessState::Running => {
                    log::debug!("process {}: running", self.pid);
                    return Ok(());
                }
                ProcessState::Checkpointed => self.restore(&[])?,
                ProcessState::Locked => self.unlock()?,
                ProcessState::Failed => return Err(E::ProcessFailed { pid: self.pid }),
                state @ ProcessState::Unknown(_) => {
                    return Err(E::WrongState {
                        pid: self.pid,
                        expected: ProcessState::Running,
                        state,
                    });
                }
            }
        }
        let state = self.state()?;
        Err(E::WrongState {
            pid: self.pid,
            expected: ProcessState::Running,
            state,
        })
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.needs_recovery() {
            if let Err(e) = self.recover() {
                log::warn!(
                    "process {} could not be brought back to running on drop: {e}",
                    self.pid
                );
            }
        }
    }
}

/// Another process's GPU state, held by this one through the CUDA driver's process-checkpoint calls
/// (`cuCheckpointProcess*`, CUDA 12.8 / driver r570 and later, Linux): lock its CUDA calls, move all its device
/// memory to host memory and release its GPUs, restore, unlock.
///
/// The stage `S` follows the driver's states, and each step consumes the handle and returns the next stage, so
/// only the transitions the driver allows can be written:
///
/// ```text
/// Running --lock(timeout)--> Locked --checkpoint()--> Checkpointed
///    ^                         | ^                         |
///    +-------- unlock() -------+ +------- restore() -------+
/// ```
///
/// A step that fails returns [`Failed`], which holds the error and the handle in its old stage. Calls the
/// driver would refuse do not compile:
///
/// ```compile_fail
/// # use gpu_tools::cuda::process::{ProcessCheckpoint, ProcessCheckpointError};
/// # fn f(pid: u32) -> Result<(), ProcessCheckpointError> {
/// let running = ProcessCheckpoint::attach(pid)?;
/// running.restore()?; // error: a running process was never checkpointed
/// # Ok(()) }
/// ```
///
/// ```compile_fail
/// # use gpu_tools::cuda::process::{ProcessCheckpoint, ProcessCheckpointError};
/// # use std::time::Duration;
/// # fn f(pid: u32) -> Result<(), ProcessCheckpointError> {
/// let saved = ProcessCheckpoint::attach(pid)?.lock(Duration::from_secs(5))?.checkpoint()?;
/// saved.checkpoint()?; // error: already checkpointed
/// # Ok(()) }
/// ```
///
/// ```compile_fail
/// # use gpu_tools::cuda::process::{ProcessCheckpoint, ProcessCheckpointError};
/// # use std::time::Duration;
/// # fn f(pid: u32) -> Result<(), ProcessCheckpointError> {
/// let running = ProcessCheckpoint::attach(pid)?;
/// let locked = running.lock(Duration::from_secs(5))?;
/// let again = running.lock(Duration::from_secs(5))?; // error: use of moved value
/// # Ok(()) }
/// ```
///
/// Checked before any driver call: the pid (0, above `i32::MAX`, or this process's own are typed errors), that
/// the driver has the calls ([`ProcessCheckpointError::Unsupported`] on older drivers), and that no other handle
/// of this process holds the pid. Driver refusals are diagnosed: a pid that does not exist, another user's
/// process, a process that never initialised CUDA, a lock timeout, a refusal in the wrong state, a process that
/// exited while held; each keeps the driver's code.
///
/// **Drop** of a `Locked` or `Checkpointed` handle (or of one whose last step failed) reads the driver's state
/// and brings the process back to running: restore if checkpointed, then unlock. A restore takes as long as
/// copying the process's device memory back. Where that is impossible (the process exited, or the driver put it
/// in its failed state), drop can only log it (`log::warn!`); call [`finish`](Self::finish) to get the error.
/// Drop of a `Running` handle makes no driver call.
///
/// `Send` and `Sync`: the driver calls name the target by pid and may be made from any thread; every step
/// consumes the handle, so no two steps of one handle run at once.
pub struct ProcessCheckpoint<S: Stage = Running> {
    inner: Inner,
    _stage: PhantomData<S>,
}

impl<S: Stage> fmt::Debug for ProcessCheckpoint<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessCheckpoint")
            .field("pid", &self.inner.pid)
            .field("stage", &S::STATE)
            .field("uncertain", &self.inner.uncertain)
            .finish()
    }
}

/// A handle to a process in whatever state the driver reported, from [`ProcessCheckpoint::adopt`].
#[derive(Debug)]
pub enum Adopted {
    /// The process was running.
    Running(ProcessCheckpoint<Running>),
    /// The process was locked (by another tool, or by a run of this one that ended early).
    Locked(ProcessCheckpoint<Locked>),
    /// The process was checkpointed.
    Checkpointed(ProcessCheckpoint<Checkpointed>),
}

impl Adopted {
    /// The state the driver reported.
    pub fn state(&self) -> ProcessState {
        match self {
            Adopted::Running(_) => ProcessState::Running,
            Adopted::Locked(_) => ProcessState::Locked,
            Adopted::Checkpointed(_) => ProcessState::Checkpointed,
        }
    }

    /// Brings the process back to running ([`ProcessCheckpoint::finish`]).
    pub fn finish(self) -> Result<(), ProcessCheckpointError> {
        match self {
            Adopted::Running(h) => h.finish(),
            Adopted::Locked(h) => h.finish(),
            Adopted::Checkpointed(h) => h.finish(),
        }
    }
}

impl ProcessCheckpoint<Running> {
    /// Takes hold of a running CUDA process. Reads its state (`cuCheckpointProcessGetState`) and changes
    /// nothing; a process in another state is [`ProcessCheckpointError::WrongState`] (see [`adopt`](Self::adopt)).
    pub fn attach(pid: u32) -> Result<Self, ProcessCheckpointError> {
        let inner = Inner::take(pid)?;
        match inner.api.state(inner.driver, inner.raw_pid, false)? {
            ProcessState::Running => Ok(ProcessCheckpoint {
                inner,
                _stage: PhantomData,
            }),
            state => Err(E::WrongState {
                pid,
                expected: ProcessState::Running,
                state,
            }),
        }
    }

    /// Takes hold of a CUDA process in whatever state it is, for example one left locked or checkpointed by a
    /// tool that ended early. A process in the driver's failed state is [`ProcessCheckpointError::ProcessFailed`].
    pub fn adopt(pid: u32) -> Result<Adopted, ProcessCheckpointError> {
        let mut inner = Inner::take(pid)?;
        let state = inner.api.state(inner.driver, inner.raw_pid, false)?;
        inner.believed = state;
        match state {
            ProcessState::Running => Ok(Adopted::Running(ProcessCheckpoint::wrap(inner))),
            ProcessState::Locked => Ok(Adopted::Locked(ProcessCheckpoint::wrap(inner))),
            ProcessState::Checkpointed => Ok(Adopted::Checkpointed(ProcessCheckpoint::wrap(inner))),
            ProcessState::Failed | ProcessState::Unknown(_) => {
                // Nothing to undo: the handle must not try on drop.
                inner.believed = ProcessState::Running;
                if state == ProcessState::Failed {
                    Err(E::ProcessFailed { pid })
                } else {
                    Err(E::WrongState {
                        pid,
                        expected: ProcessState::Running,
                        state,
                    })
                }
            }
        }
    }

    /// The driver's state of process `pid` (`cuCheckpointProcessGetState`), without holding or changing it.
    /// Any pid may be asked about, this process's own included.
    pub fn state(pid: u32) -> Result<ProcessState, ProcessCheckpointError> {
        let raw_pid = target::checked_pid(pid, true)?;
        let driver = Driver::load()?;
        ProcessApi::of(driver)?.state(driver, raw_pid, false)
    }

    /// Locks the process's CUDA calls (`cuCheckpointProcessLock`): from now on they block. Waits at most
    /// `timeout` (rounded up to whole milliseconds, at least 1) for the calls in progress; on timeout the
    /// process keeps running and the error is [`ProcessCheckpointError::LockTimedOut`].
    pub fn lock(mut self, timeout: Duration) -> Result<ProcessCheckpoint<Locked>, Failed<Self>> {
        match self.inner.lock(timeout) {
            Ok(()) => Ok(self.into_stage()),
            Err(e) => Err(Failed::new(self, e)),
        }
    }
}

impl ProcessCheckpoint<Locked> {
    /// Waits for the process's submitted GPU work, copies all its device memory into host memory and releases
    /// its GPUs (`cuCheckpointProcessCheckpoint`). Takes about as long as copying the memory.
    pub fn checkpoint(mut self) -> Result<ProcessCheckpoint<Checkpointed>, Failed<Self>> {
        match self.inner.checkpoint() {
            Ok(()) => Ok(self.into_stage()),
            Err(e) => Err(Failed::new(self, e)),
        }
    }

    /// Lets the process's CUDA calls run again (`cuCheckpointProcessUnlock`).
    pub fn unlock(mut self) -> Result<ProcessCheckpoint<Running>, Failed<Self>> {
        match self.inner.unlock() {
            Ok(()) => Ok(self.into_stage()),
            Err(e) => Err(Failed::new(self, e)),
        }
    }
}

impl ProcessCheckpoint<Checkpointed> {
    /// Reacquires the GPUs the process used and copies its memory back to the same device addresses
    /// (`cuCheckpointProcessRestore`). The process stays locked until [`unlock`](ProcessCheckpoint::unlock).
    /// Initialises the driver in this process first, which the driver requires unless persistence mode is on.
    pub fn restore(mut self) -> Result<ProcessCheckpoint<Locked>, Failed<Self>> {
        match self.inner.restore(&[]) {
            Ok(()) => Ok(self.into_stage()),
            Err(e) => Err(Failed::new(self, e)),
        }
    }

    /// Restores onto other GPUs: each pair maps a GPU the process used onto one to use now (same chip, enough
    /// memory; see [`Driver::device_uuid`]). The driver requires a pair for every GPU the process used, which on driver
    /// 580 means every GPU it sees: one pair for the only GPU a process worked on, on a two-GPU host, was refused
    /// with `CUDA_ERROR_INVALID_VALUE`. An empty slice is a plain [`restore`](Self::restore).
    pub fn restore_onto(
        mut self,
        pairs: &[GpuPair],
    ) -> Result<ProcessCheckpoint<Locked>, Failed<Self>> {
        match self.inner.restore(pairs) {
            Ok(()) => Ok(self.into_stage()),
            Err(e) => Err(Failed::new(self, e)),
        }
    }
}

impl<S: Stage> ProcessCheckpoint<S> {
    fn wrap(inner: Inner) -> Self {
        ProcessCheckpoint {
            inner,
            _stage: PhantomData,
        }
    }

    fn into_stage<T: Stage>(self) -> ProcessCheckpoint<T> {
        ProcessCheckpoint::wrap(self.inner)
    }

    /// The target's pid.
    pub fn pid(&self) -> u32 {
        self.inner.pid
    }

    /// The driver's state of the target now (`cuCheckpointProcessGetState`). It differs from `S` only when
    /// something other than this handle changed it, or the last step failed.
    pub fn current_state(&self) -> Result<ProcessState, ProcessCheckpointError> {
        self.inner.state()
    }

    /// The thread of the target that performs its restore (`cuCheckpointProcessGetRestoreThreadId`); CRIU needs
    /// it to restore the process's threads in order.
    pub fn restore_thread_id(&self) -> Result<u32, ProcessCheckpointError> {
        let mut tid: c_int = 0;
        // SAFETY: header signature; a valid out-pointer; the call only reads.
        let code = unsafe { (self.inner.api.restore_thread)(self.inner.raw_pid, &mut tid) };
        if code == sys::CUDA_SUCCESS {
            return Ok(tid.unsigned_abs());
        }
        if self.inner.gone() {
            return Err(self.inner.exited_after(RESTORE_THREAD, code));
        }
        Err(diagnose(
            refusal(
                self.inner.driver,
                RESTORE_THREAD,
                self.inner.raw_pid,
                code,
                true,
                None,
            ),
            || self.current_state().ok(),
        ))
    }

    /// Brings the target back to running, as drop does, and says whether that worked: restore if the driver
    /// reports it checkpointed, then unlock. Makes no driver call for a `Running` handle whose last step
    /// succeeded.
    pub fn finish(mut self) -> Result<(), ProcessCheckpointError> {
        if !self.inner.needs_recovery() {
            return Ok(());
        }
        self.inner.recover()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_round_up_to_whole_milliseconds() {
        assert_eq!(lock_timeout_ms(Duration::ZERO).ok(), Some(1));
        assert_eq!(lock_timeout_ms(Duration::from_micros(1)).ok(), Some(1));
        assert_eq!(lock_timeout_ms(Duration::from_micros(1500)).ok(), Some(2));
        assert_eq!(lock_timeout_ms(Duration::from_secs(5)).ok(), Some(5000));
        assert_eq!(
            lock_timeout_ms(Duration::from_millis(u64::from(u32::MAX))).ok(),
            Some(u32::MAX)
        );
        assert!(matches!(
            lock_timeout_ms(Duration::from_millis(u64::from(u32::MAX) + 1)),
            Err(E::InvalidTimeout { .. })
        ));
    }

    #[test]
    fn handles_are_send_and_sync() {
        fn both<T: Send + Sync>() {}
        both::<ProcessCheckpoint<Running>>();
        both::<ProcessCheckpoint<Locked>>();
        both::<ProcessCheckpoint<Checkpointed>>();
        both::<Failed<ProcessCheckpoint<Locked>>>();
        both::<Adopted>();
    }
}
