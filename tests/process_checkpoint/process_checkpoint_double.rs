//! `cuda::process::ProcessCheckpoint` against the driver double with the process-checkpoint calls
//! (`gpu-tools-testing/doubles/cuda_driver_checkpointing.c`). The targets are real child processes (`sleep`), registered in
//! the double, so that what the crate reads in `/proc` agrees with what the double answers.
#![cfg(feature = "cupti")]

use gpu_tools_testing::process as common;

use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use common::{Target, vanished_pid};
use gpu_tools::cuda::process::{
    Adopted, Failed, GpuPair, ProcessCheckpoint, ProcessCheckpointError as E, ProcessState,
};
use gpu_tools::cuda::{Driver, GpuUuid};

const GIB: usize = 1 << 30;
const CUDA: i32 = 0;
const NOT_CUDA: i32 = 1;
const BUSY: i32 = 2;
const FAILS_CHECKPOINT: i32 = 3;
const FAILS_RESTORE_ONCE: i32 = 4;

/// Layout of `struct dbl_proc_info`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct Info {
    state: u32,
    last_timeout_ms: u32,
    last_pairs: u32,
    restores: u32,
    device_bytes: usize,
    host_bytes: usize,
}

struct Hooks {
    add: unsafe extern "C" fn(i32, i32, usize) -> i32,
    remove: unsafe extern "C" fn(i32) -> i32,
    set_state: unsafe extern "C" fn(i32, u32) -> i32,
    set_kind: unsafe extern "C" fn(i32, i32) -> i32,
    info: unsafe extern "C" fn(i32, *mut Info) -> i32,
    calls: unsafe extern "C" fn() -> u64,
    _lib: libloading::Library,
}

fn hooks() -> &'static Hooks {
    static HOOKS: OnceLock<Hooks> = OnceLock::new();
    HOOKS.get_or_init(|| {
        let path = gpu_tools_testing::double_path("cuda_driver_checkpointing");
        Driver::load_from(&path).expect("driver double with process checkpoint loads");
        // SAFETY: the double has no initialisers; opening it again returns the copy the crate loaded, and each
        // symbol has the signature written here (cuda_driver_checkpointing.c).
        unsafe {
            let lib = libloading::Library::new(&path).expect("open double");
            Hooks {
                add: *lib.get(b"dbl_proc_add\0").unwrap(),
                remove: *lib.get(b"dbl_proc_remove\0").unwrap(),
                set_state: *lib.get(b"dbl_proc_set_state\0").unwrap(),
                set_kind: *lib.get(b"dbl_proc_set_kind\0").unwrap(),
                info: *lib.get(b"dbl_proc_info\0").unwrap(),
                calls: *lib.get(b"dbl_proc_calls\0").unwrap(),
                _lib: lib,
            }
        }
    })
}

/// The call counter is shared: tests run one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    let g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    hooks();
    g
}

/// A sleeping child registered in the double as a process of `kind` holding `bytes` of device memory.
fn target(kind: i32, bytes: usize) -> Target {
    let t = Target::sleeper();
    // SAFETY: hook signature as declared.
    assert_eq!(unsafe { (hooks().add)(t.pid() as i32, kind, bytes) }, 0);
    t
}

fn info(pid: u32) -> Info {
    let mut out = Info::default();
    // SAFETY: hook signature as declared; `out` has the C layout.
    let found = unsafe { (hooks().info)(pid as i32, &mut out) };
    assert_eq!(found, 0, "pid {pid} registered");
    out
}

fn set_state(pid: u32, state: ProcessState) {
    // SAFETY: hook signature as declared.
    let set = unsafe { (hooks().set_state)(pid as i32, state.as_raw()) };
    assert_eq!(set, 0);
}

fn set_kind(pid: u32, kind: i32) {
    // SAFETY: hook signature as declared.
    assert_eq!(unsafe { (hooks().set_kind)(pid as i32, kind) }, 0);
}

fn calls() -> u64 {
    // SAFETY: hook signature as declared.
    unsafe { (hooks().calls)() }
}

fn state(pid: u32) -> ProcessState {
    ProcessCheckpoint::state(pid).expect("state")
}

fn code(e: &E) -> Option<u32> {
    e.cuda_error().map(|c| c.code)
}

#[test]
fn round_trip_moves_memory_out_and_back() {
    let _s = serial();
    let t = target(CUDA, GIB);
    let pid = t.pid();
    assert_eq!(state(pid), ProcessState::Running);
    let running = ProcessCheckpoint::attach(pid).unwrap();
    assert_eq!(running.pid(), pid);
    let locked = running.lock(Duration::from_millis(2500)).unwrap();
    assert_eq!(info(pid).last_timeout_ms, 2500);
    assert_eq!(locked.current_state().unwrap(), ProcessState::Locked);
    let saved = locked.checkpoint().unwrap();
    let i = info(pid);
    assert_eq!(
        (i.device_bytes, i.host_bytes),
        (0, GIB),
        "device memory moved to host"
    );
    assert_eq!(saved.current_state().unwrap(), ProcessState::Checkpointed);
    assert_eq!(saved.restore_thread_id().unwrap(), pid + 2);
    let locked = saved.restore().unwrap();
    let i = info(pid);
    assert_eq!((i.device_bytes, i.host_bytes, i.last_pairs), (GIB, 0, 0));
    assert_eq!(state(pid), ProcessState::Locked);
    let running = locked.unlock().unwrap();
    assert_eq!(state(pid), ProcessState::Running);
    // A second cycle on the same handle.
    let running = running
        .lock(Duration::from_secs(1))
        .unwrap()
        .checkpoint()
        .unwrap()
        .restore()
        .unwrap()
        .unlock()
        .unwrap();
    assert_eq!(info(pid).restores, 2);
    let before = calls();
    running.finish().unwrap();
    assert_eq!(
        calls(),
        before,
        "finishing a running handle makes no driver call"
    );
}

#[test]
fn misuse_is_refused_before_any_driver_call() {
    let _s = serial();
    let t = target(CUDA, GIB);
    let before = calls();
    assert!(matches!(
        ProcessCheckpoint::attach(0),
        Err(E::InvalidPid { pid: 0 })
    ));
    assert!(matches!(
        ProcessCheckpoint::attach(u32::MAX),
        Err(E::InvalidPid { .. })
    ));
    let me = std::process::id();
    assert!(matches!(ProcessCheckpoint::attach(me), Err(E::OwnProcess { pid }) if pid == me));
    assert_eq!(calls(), before);

    let held = ProcessCheckpoint::attach(t.pid()).unwrap();
    let before = calls();
    let again = ProcessCheckpoint::attach(t.pid()).unwrap_err();
    assert!(matches!(again, E::AlreadyHeld { .. }), "{again:?}");
    assert!(matches!(
        ProcessCheckpoint::adopt(t.pid()),
        Err(E::AlreadyHeld { .. })
    ));
    let too_long = Duration::from_millis(u64::from(u32::MAX) + 1);
    let failed = held.lock(too_long).unwrap_err();
    assert!(
        matches!(failed.error(), E::InvalidTimeout { .. }),
        "{failed}"
    );
    assert_eq!(calls(), before, "none of these reached the driver");
    // The handle came back, still running, and works.
    let locked = failed.into_handle().lock(Duration::ZERO).unwrap();
    assert_eq!(
        info(t.pid()).last_timeout_ms,
        1,
        "a zero timeout is sent as 1 ms, not as 'for ever'"
    );
    drop(locked);
    assert_eq!(state(t.pid()), ProcessState::Running);
    // Released on drop: the pid can be held again.
    ProcessCheckpoint::attach(t.pid()).unwrap();
}

#[test]
fn bad_pids_are_typed_errors_naming_the_driver_code() {
    let _s = serial();
    let gone = vanished_pid();
    let e = ProcessCheckpoint::state(gone).unwrap_err();
    assert!(
        matches!(e, E::NoSuchProcess { pid, .. } if pid == gone),
        "{e:?}"
    );
    assert_eq!(code(&e), Some(304));
    assert!(e.to_string().contains("CUDA_ERROR_OPERATING_SYSTEM"), "{e}");
    assert!(matches!(
        ProcessCheckpoint::attach(gone),
        Err(E::NoSuchProcess { .. })
    ));

    let mut plain = target(NOT_CUDA, 0);
    for e in [
        ProcessCheckpoint::state(plain.pid()).unwrap_err(),
        ProcessCheckpoint::attach(plain.pid()).unwrap_err(),
    ] {
        assert!(matches!(e, E::NotCuda { .. }), "{e:?}");
        assert_eq!(code(&e), Some(3));
        assert_eq!(e.call(), Some("cuCheckpointProcessGetState"));
    }
    assert!(plain.running(), "the target is left running");
}

#[test]
fn lock_timeout_leaves_the_target_running_and_the_handle_usable() {
    let _s = serial();
    let mut t = target(BUSY, GIB);
    let pid = t.pid();
    let running = ProcessCheckpoint::attach(pid).unwrap();
    let failed: Failed<ProcessCheckpoint> = running.lock(Duration::from_millis(300)).unwrap_err();
    let e = failed.error();
    assert!(
        matches!(e, E::LockTimedOut { timeout, .. } if *timeout == Duration::from_millis(300)),
        "{e:?}"
    );
    assert_eq!(code(e), Some(600));
    assert!(
        failed.to_string().contains("timed out after 300ms"),
        "{failed}"
    );
    assert_eq!(state(pid), ProcessState::Running);
    assert!(t.running());
    set_kind(pid, CUDA);
    let locked = failed
        .into_handle()
        .lock(Duration::from_millis(300))
        .unwrap();
    locked.unlock().unwrap();
}

#[test]
fn a_lock_refused_because_another_tool_holds_the_target_leaves_that_tool_s_state_alone() {
    let _s = serial();
    let t = target(CUDA, GIB);
    let pid = t.pid();
    let running = ProcessCheckpoint::attach(pid).unwrap();
    // Another tool locks and checkpoints the process between attach and lock.
    set_state(pid, ProcessState::Checkpointed);
    let failed = running.lock(Duration::from_secs(1)).unwrap_err();
    assert!(
        matches!(failed.error(), E::IllegalState { .. }),
        "{failed:?}"
    );
    let restores = info(pid).restores;
    drop(failed);
    assert_eq!(
        state(pid),
        ProcessState::Checkpointed,
        "the other tool's checkpoint is not undone"
    );
    assert_eq!(info(pid).restores, restores);
    set_state(pid, ProcessState::Running);
}

#[test]
fn a_second_checkpoint_by_another_actor_is_an_illegal_state_and_drop_recovers() {
    let _s = serial();
    let t = target(CUDA, GIB);
    let pid = t.pid();
    let locked = ProcessCheckpoint::attach(pid)
        .unwrap()
        .lock(Duration::from_secs(1))
        .unwrap();
    // Another tool checkpoints the process behind the handle's back.
    set_state(pid, ProcessState::Checkpointed);
    let failed = locked.checkpoint().unwrap_err();
    match failed.error() {
        E::IllegalState {
            call, state, error, ..
        } => {
            assert_eq!(*call, "cuCheckpointProcessCheckpoint");
            assert_eq!(*state, Some(ProcessState::Checkpointed));
            assert_eq!(error.code, 401);
            assert_eq!(error.name, "CUDA_ERROR_ILLEGAL_STATE");
        }
        other => panic!("{other:?}"),
    }
    let restores = info(pid).restores;
    drop(failed); // the handle drops: restore, then unlock
    assert_eq!(state(pid), ProcessState::Running);
    assert_eq!(info(pid).restores, restores + 1);
}

#[test]
fn restore_of_a_process_no_longer_checkpointed_is_refused_and_finish_is_ok() {
    let _s = serial();
    let t = target(CUDA, GIB);
    let pid = t.pid();
    let saved = ProcessCheckpoint::attach(pid)
        .unwrap()
        .lock(Duration::from_secs(1))
        .unwrap()
        .checkpoint()
        .unwrap();
    set_state(pid, ProcessState::Running);
    let failed = saved.restore().unwrap_err();
    assert!(
        matches!(
            failed.error(),
            E::IllegalState {
                state: Some(ProcessState::Running),
                ..
            }
        ),
        "{failed:?}"
    );
    assert_eq!(
        failed.handle().current_state().unwrap(),
        ProcessState::Running
    );
    let before = calls();
    failed.into_handle().finish().unwrap();
    assert_eq!(
        calls(),
        before + 1,
        "finish only read the state: the process was running"
    );
    assert_eq!(state(pid), ProcessState::Running);
}

#[test]
fn dropping_a_locked_or_checkpointed_handle_returns_the_target_to_running() {
    let _s = serial();
    let t = target(CUDA, GIB);
    let pid = t.pid();
    let locked = ProcessCheckpoint::attach(pid)
        .unwrap()
        .lock(Duration::from_secs(1))
        .unwrap();
    drop(locked);
    assert_eq!(state(pid), ProcessState::Running);

    let saved = ProcessCheckpoint::attach(pid)
        .unwrap()
        .lock(Duration::from_secs(1))
        .unwrap()
        .checkpoint()
        .unwrap();
    assert_eq!(info(pid).device_bytes, 0);
    drop(saved);
    assert_eq!(state(pid), ProcessState::Running);
    assert_eq!(info(pid).device_bytes, GIB, "restored on drop");
}

#[test]
fn a_target_that_exits_while_locked_is_reported_by_finish() {
    let _s = serial();
    let mut t = target(CUDA, GIB);
    let pid = t.pid();
    let locked = ProcessCheckpoint::attach(pid)
        .unwrap()
        .lock(Duration::from_secs(1))
        .unwrap();
    t.kill();
    // SAFETY: hook signature as declared.
    unsafe { (hooks().remove)(pid as i32) };
    let failed = locked.unlock().unwrap_err();
    assert!(
        matches!(failed.error(), E::Exited { pid: p, .. } if *p == pid),
        "{failed:?}"
    );
    let e = failed.into_handle().finish().unwrap_err();
    assert!(matches!(e, E::Exited { .. }), "{e:?}");
    assert!(e.to_string().contains("exited while held"), "{e}");
}

#[test]
fn a_step_refused_because_the_target_exited_names_the_call_and_keeps_the_driver_code() {
    let _s = serial();
    let mut t = target(CUDA, GIB);
    let pid = t.pid();
    let saved = ProcessCheckpoint::attach(pid)
        .unwrap()
        .lock(Duration::from_secs(1))
        .unwrap()
        .checkpoint()
        .unwrap();
    t.kill();
    // SAFETY: hook signature as declared.
    unsafe { (hooks().remove)(pid as i32) };
    let e = saved.restore_thread_id().unwrap_err();
    assert!(matches!(e, E::Exited { .. }), "{e:?}");
    assert_eq!(e.call(), Some("cuCheckpointProcessGetRestoreThreadId"));
    assert_eq!(code(&e), Some(304));
    let e = saved.current_state().unwrap_err();
    assert!(matches!(e, E::Exited { .. }), "{e:?}");
    assert_eq!(e.call(), Some("cuCheckpointProcessGetState"));
    assert_eq!(code(&e), Some(304));
    let failed = saved.restore().unwrap_err();
    let e = failed.error();
    assert!(matches!(e, E::Exited { .. }), "{e:?}");
    assert_eq!(e.call(), Some("cuCheckpointProcessRestore"));
    assert_eq!(code(e), Some(304));
    assert!(
        e.to_string()
            .contains("cuCheckpointProcessRestore answered CUDA_ERROR_OPERATING_SYSTEM"),
        "{e}"
    );
}

#[test]
fn a_failed_checkpoint_that_breaks_the_process_is_reported_by_finish() {
    let _s = serial();
    let t = target(FAILS_CHECKPOINT, GIB);
    let pid = t.pid();
    let failed = ProcessCheckpoint::attach(pid)
        .unwrap()
        .lock(Duration::from_secs(1))
        .unwrap()
        .checkpoint()
        .unwrap_err();
    assert!(
        matches!(failed.error(), E::Driver { call: "cuCheckpointProcessCheckpoint", error, .. } if error.code == 2),
        "{failed:?}"
    );
    assert_eq!(state(pid), ProcessState::Failed);
    let e = failed.into_handle().finish().unwrap_err();
    assert!(matches!(e, E::ProcessFailed { .. }), "{e:?}");
    assert!(matches!(
        ProcessCheckpoint::adopt(pid),
        Err(E::ProcessFailed { .. })
    ));
    assert!(matches!(
        ProcessCheckpoint::attach(pid),
        Err(E::WrongState {
            state: ProcessState::Failed,
            ..
        })
    ));
}

#[test]
fn a_failed_restore_gives_the_handle_back_for_another_try() {
    let _s = serial();
    let t = target(FAILS_RESTORE_ONCE, GIB);
    let pid = t.pid();
    let saved = ProcessCheckpoint::attach(pid)
        .unwrap()
        .lock(Duration::from_secs(1))
        .unwrap()
        .checkpoint()
        .unwrap();
    let failed = saved.restore().unwrap_err();
    assert_eq!(code(failed.error()), Some(2));
    assert_eq!(state(pid), ProcessState::Checkpointed);
    let (handle, _) = failed.into_parts();
    handle.restore().unwrap().unlock().unwrap();
    assert_eq!(info(pid).device_bytes, GIB);
}

#[test]
fn restore_onto_maps_gpus_by_uuid() {
    let _s = serial();
    let t = target(CUDA, GIB);
    let pid = t.pid();
    let driver = Driver::get().unwrap();
    let uuid = driver.device_uuid(0).unwrap();
    assert!(uuid.to_string().starts_with("GPU-6e762d64-"), "{uuid}");
    let saved = ProcessCheckpoint::attach(pid)
        .unwrap()
        .lock(Duration::from_secs(1))
        .unwrap()
        .checkpoint()
        .unwrap();
    // A map that leaves out the checkpointed GPU is refused by the driver; the handle stays checkpointed.
    let other = GpuUuid([7; 16]);
    let failed = saved
        .restore_onto(&[GpuPair {
            checkpointed: other,
            restore_on: uuid,
        }])
        .unwrap_err();
    assert_eq!(code(failed.error()), Some(1), "{failed}");
    let locked = failed
        .into_handle()
        .restore_onto(&[GpuPair {
            checkpointed: uuid,
            restore_on: uuid,
        }])
        .unwrap();
    assert_eq!(info(pid).last_pairs, 1);
    locked.unlock().unwrap();
}

#[test]
fn adopt_takes_a_process_left_locked_or_checkpointed() {
    let _s = serial();
    let t = target(CUDA, GIB);
    let pid = t.pid();
    for left in [
        ProcessState::Locked,
        ProcessState::Checkpointed,
        ProcessState::Running,
    ] {
        set_state(pid, left);
        let adopted = ProcessCheckpoint::adopt(pid).unwrap();
        assert_eq!(adopted.state(), left);
        match &adopted {
            Adopted::Running(h) => assert_eq!(h.pid(), pid),
            Adopted::Locked(h) => assert_eq!(h.pid(), pid),
            Adopted::Checkpointed(h) => assert_eq!(h.pid(), pid),
        }
        adopted.finish().unwrap();
        assert_eq!(state(pid), ProcessState::Running, "from {left}");
    }
    set_state(pid, ProcessState::Locked);
    assert!(matches!(
        ProcessCheckpoint::attach(pid),
        Err(E::WrongState {
            state: ProcessState::Locked,
            expected: ProcessState::Running,
            ..
        })
    ));
    set_state(pid, ProcessState::Running);
}

#[test]
fn failed_steps_convert_into_the_crate_error_and_recover() {
    let _s = serial();
    let t = target(CUDA, GIB);
    let pid = t.pid();
    fn freeze_and_fail(pid: u32) -> gpu_tools::Result<()> {
        let locked = ProcessCheckpoint::attach(pid)?.lock(Duration::from_secs(1))?;
        set_state(pid, ProcessState::Checkpointed);
        locked.checkpoint()?; // refused; `?` drops the handle, which restores and unlocks
        Ok(())
    }
    let e = freeze_and_fail(pid).unwrap_err();
    assert!(
        matches!(
            e,
            gpu_tools::Error::ProcessCheckpoint(E::IllegalState { .. })
        ),
        "{e:?}"
    );
    assert_eq!(state(pid), ProcessState::Running);
}

#[test]
fn handles_and_errors_are_send_and_sync() {
    fn both<T: Send + Sync>() {}
    both::<ProcessCheckpoint>();
    both::<ProcessCheckpoint<gpu_tools::cuda::process::Locked>>();
    both::<ProcessCheckpoint<gpu_tools::cuda::process::Checkpointed>>();
    both::<Failed<ProcessCheckpoint>>();
    both::<E>();
}
