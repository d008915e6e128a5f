//! `cuda::process::ProcessCheckpoint` on a real GPU (feature `nvidia-hw-tests`; one GPU, CUDA 12.8+ driver).
//! The targets are the `debuggee_memory` example; memory is measured from outside, by `nvidia-smi`.
//!
//! Run with `--test-threads=1 --nocapture` to see the states, times and memory figures each test prints.
//! `GPU_TOOLS_FREEZE_GIB` sets the size of the round trip (default 2 GiB).
#![cfg(feature = "nvidia-hw-tests")]

use gpu_tools_testing::cudbg as cudbg_common;

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use gpu_tools::cuda::Driver;
use gpu_tools::cuda::process::{
    GpuPair, ProcessCheckpoint, ProcessCheckpointError as E, ProcessState,
};
use gpu_tools::sys::cuda_driver as sys;
use gpu_tools_testing::gpu_memory::{DeviceMemory, GpuMemory, ProcessMemory, mib};
use gpu_tools_testing::process::{Debuggee, OrPanic, Target, vanished_pid};

const GIB: u64 = 1 << 30;
const LOCK_TIMEOUT: Duration = Duration::from_secs(10);

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn debuggee(args: &[&str]) -> Debuggee {
    Debuggee::start(&cudbg_common::example("debuggee_memory"), args)
}

fn gib() -> f64 {
    std::env::var("GPU_TOOLS_FREEZE_GIB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0)
}

fn nvml() -> GpuMemory {
    GpuMemory::open().unwrap_or_else(|e| panic!("device memory is measured by nvidia-smi: {e}"))
}

fn snapshot(mem: &GpuMemory, pid: u32, label: &str) -> Vec<DeviceMemory> {
    let s = mem.snapshot(pid).expect("nvidia-smi snapshot");
    for d in &s {
        eprintln!(
            "  memory {label}: GPU {} ({}) used {} of {} MiB; process {pid}: {}",
            d.index,
            d.name,
            mib(d.used),
            mib(d.total),
            match d.process {
                ProcessMemory::Absent => "not listed".to_string(),
                ProcessMemory::Used(b) => format!("{} MiB", mib(b)),
                ProcessMemory::Unknown => "listed, size unknown".to_string(),
            }
        );
    }
    s
}

/// nvidia-smi's entry of CUDA device `ordinal`, matched by UUID.
fn nvml_entry(s: &[DeviceMemory], ordinal: usize) -> &DeviceMemory {
    let uuid = Driver::load()
        .expect("driver")
        .device_uuid(ordinal)
        .expect("device uuid")
        .to_string();
    s.iter()
        .find(|d| d.uuid.eq_ignore_ascii_case(&uuid))
        .unwrap_or_else(|| panic!("nvidia-smi lists no device with {uuid}"))
}

/// A driver state read from outside, printed for the note.
fn state(pid: u32, when: &str) -> ProcessState {
    let s = ProcessCheckpoint::state(pid)
        .unwrap_or_else(|e| panic!("cuCheckpointProcessGetState {when}: {e}"));
    eprintln!("  state {when}: {s}");
    s
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Raw calls, as another tool on the same process would make them.
struct OtherActor(&'static Driver);

impl OtherActor {
    fn new() -> Self {
        let d = Driver::load().expect("driver");
        d.init().expect("cuInit");
        OtherActor(d)
    }

    fn lock(&self, pid: u32) -> u32 {
        let mut args = sys::CUcheckpointLockArgs {
            timeoutMs: 5000,
            ..Default::default()
        };
        let f = self
            .0
            .api()
            .cu_checkpoint_process_lock
            .expect("lock symbol");
        // SAFETY: header signature; a zeroed argument block with a timeout.
        unsafe { f(pid as i32, &mut args) }
    }

    fn checkpoint(&self, pid: u32) -> u32 {
        let mut args = sys::CUcheckpointCheckpointArgs::default();
        let f = self
            .0
            .api()
            .cu_checkpoint_process_checkpoint
            .expect("checkpoint symbol");
        // SAFETY: header signature; a zeroed argument block.
        unsafe { f(pid as i32, &mut args) }
    }

    fn restore(&self, pid: u32) -> u32 {
        let mut args = sys::CUcheckpointRestoreArgs::default();
        let f = self
            .0
            .api()
            .cu_checkpoint_process_restore
            .expect("restore symbol");
        // SAFETY: header signature; a zeroed argument block (no GPU pairs).
        unsafe { f(pid as i32, &mut args) }
    }

    fn unlock(&self, pid: u32) -> u32 {
        let mut args = sys::CUcheckpointUnlockArgs::default();
        let f = self
            .0
            .api()
            .cu_checkpoint_process_unlock
            .expect("unlock symbol");
        // SAFETY: header signature; a zeroed argument block.
        unsafe { f(pid as i32, &mut args) }
    }
}

fn code(e: &E) -> Option<u32> {
    e.cuda_error().map(|c| c.code)
}

#[test]
fn round_trip_releases_device_memory_and_keeps_every_byte() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _s = serial();
    let gib = gib();
    let bytes = (gib * GIB as f64) as u64;
    let mem = nvml();
    let mut d = debuggee(&["--gib", &gib.to_string(), "--interval-ms", "20"]);
    let pid = d.pid();
    d.wait_check_after(2, Duration::from_secs(60));
    eprintln!("target {pid} holds {gib} GiB on device 0");
    let before = snapshot(&mem, pid, "running");
    let held_before = match nvml_entry(&before, 0).process {
        ProcessMemory::Used(b) => b,
        other => panic!("nvidia-smi lists the target on device 0 before the checkpoint: {other:?}"),
    };
    assert!(
        held_before >= bytes,
        "the target holds at least its {bytes} bytes: {held_before}"
    );
    assert_eq!(state(pid, "before lock"), ProcessState::Running);

    let running = ProcessCheckpoint::attach(pid).unwrap_or_else(|e| panic!("attach: {e}"));
    let t = Instant::now();
    let locked = running
        .lock(LOCK_TIMEOUT)
        .unwrap_or_else(|f| panic!("lock refused: {f}"));
    let lock_ms = ms(t);
    eprintln!("  lock: {lock_ms:.1} ms");
    assert_eq!(state(pid, "after lock"), ProcessState::Locked);

    let t = Instant::now();
    let saved = locked
        .checkpoint()
        .unwrap_or_else(|f| panic!("checkpoint refused: {f}"));
    let checkpoint_ms = ms(t);
    eprintln!(
        "  checkpoint: {checkpoint_ms:.1} ms ({:.2} GB/s)",
        bytes as f64 / checkpoint_ms / 1e6
    );
    assert_eq!(state(pid, "after checkpoint"), ProcessState::Checkpointed);
    let after = snapshot(&mem, pid, "checkpointed");
    let (b0, a0) = (nvml_entry(&before, 0), nvml_entry(&after, 0));
    let freed = b0.used.saturating_sub(a0.used);
    eprintln!(
        "  device memory freed by the checkpoint: {} MiB (the target held {} MiB)",
        mib(freed),
        mib(held_before)
    );
    assert!(
        matches!(a0.process, ProcessMemory::Absent | ProcessMemory::Used(0)),
        "the checkpointed target no longer holds device memory: {:?}",
        a0.process
    );
    assert!(
        freed >= bytes * 9 / 10,
        "at least 90% of the target's {bytes} bytes freed: {freed}"
    );
    let tid = saved
        .restore_thread_id()
        .unwrap_or_else(|e| panic!("restore thread id: {e}"));
    eprintln!("  restore thread: {tid} (target pid {pid})");
    assert_ne!(tid, 0);
    // A check that ended just before the lock may print after it; none ends while checkpointed.
    let checks_locked = d.last_check();

    let t = Instant::now();
    let locked = saved
        .restore()
        .unwrap_or_else(|f| panic!("restore refused: {f}"));
    let restore_ms = ms(t);
    eprintln!(
        "  restore: {restore_ms:.1} ms ({:.2} GB/s)",
        bytes as f64 / restore_ms / 1e6
    );
    assert_eq!(state(pid, "after restore"), ProcessState::Locked);
    let restored = snapshot(&mem, pid, "restored");
    let held_after = match nvml_entry(&restored, 0).process {
        ProcessMemory::Used(b) => b,
        other => panic!("nvidia-smi lists the restored target on device 0: {other:?}"),
    };
    assert!(
        held_after >= bytes,
        "the restored target holds its memory again: {held_after}"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        d.last_check(),
        checks_locked,
        "no check completes while the target is locked"
    );

    let t = Instant::now();
    let running = locked
        .unlock()
        .unwrap_or_else(|f| panic!("unlock refused: {f}"));
    eprintln!("  unlock: {:.1} ms", ms(t));
    assert_eq!(state(pid, "after unlock"), ProcessState::Running);
    let resumed = d.wait_check_after(checks_locked + 1, Duration::from_secs(60));
    eprintln!("  the target resumed: check {resumed} completed after the unlock");
    running.finish().or_panic("finish");
    d.assert_intact();
    eprintln!(
        "summary: {gib} GiB, lock {lock_ms:.1} ms, checkpoint {checkpoint_ms:.1} ms, restore {restore_ms:.1} ms, \
         freed {} MiB of {} MiB",
        mib(freed),
        mib(held_before)
    );
}

#[test]
fn lock_times_out_while_the_target_is_inside_a_long_cuda_call() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _s = serial();
    let mut d = debuggee(&["--gib", "0.25", "--hold-ms", "8000"]);
    let pid = d.pid();
    d.wait_for("hold", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(300)); // inside cuCtxSynchronize of an 8 s kernel
    let timeout = Duration::from_millis(1000);
    let t = Instant::now();
    match ProcessCheckpoint::attach(pid)
        .or_panic("attach")
        .lock(timeout)
    {
        Err(failed) => {
            let took = ms(t);
            eprintln!(
                "  lock with {timeout:?} while the target waits for an 8 s kernel: {failed} (after {took:.0} ms)"
            );
            assert!(
                matches!(failed.error(), E::LockTimedOut { .. }),
                "{failed:?}"
            );
            assert!(took >= 900.0, "the lock waited for its timeout: {took} ms");
            assert_eq!(
                state(pid, "after the timed-out lock"),
                ProcessState::Running
            );
        }
        Ok(locked) => {
            let took = ms(t);
            let now = locked.current_state();
            locked.unlock().or_panic("unlock");
            panic!(
                "lock succeeded in {took:.0} ms while the target was inside cuCtxSynchronize of an 8 s kernel \
                 (state then {now:?}): the driver does not wait for a call in progress"
            );
        }
    }
    let held = d.wait_for("held", Duration::from_secs(30));
    eprintln!("  the target went on: {held}");
    d.assert_intact();
}

#[test]
fn second_lock_and_second_checkpoint_are_refused_and_the_target_left_running() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _s = serial();
    let other = OtherActor::new();
    let mut d = debuggee(&["--gib", "0.5"]);
    let pid = d.pid();

    let locked = ProcessCheckpoint::attach(pid)
        .or_panic("attach")
        .lock(LOCK_TIMEOUT)
        .or_panic("lock");
    let again = ProcessCheckpoint::attach(pid).unwrap_err();
    assert!(matches!(again, E::AlreadyHeld { .. }), "{again:?}");
    let second_lock = other.lock(pid);
    eprintln!("  second cuCheckpointProcessLock of a locked process: {second_lock}");
    assert_eq!(second_lock, sys::CUDA_ERROR_ILLEGAL_STATE);
    assert_eq!(
        state(pid, "after the refused second lock"),
        ProcessState::Locked
    );

    // Another tool checkpoints it behind the handle's back; the handle's own checkpoint is then the second one.
    assert_eq!(other.checkpoint(pid), 0, "the other tool's checkpoint");
    let failed = locked.checkpoint().unwrap_err();
    eprintln!("  second checkpoint through the crate: {failed}");
    assert!(
        matches!(
            failed.error(),
            E::IllegalState {
                state: Some(ProcessState::Checkpointed),
                ..
            }
        ),
        "{failed:?}"
    );
    assert_eq!(code(failed.error()), Some(sys::CUDA_ERROR_ILLEGAL_STATE));
    let raw_second = other.checkpoint(pid);
    eprintln!("  second raw cuCheckpointProcessCheckpoint: {raw_second}");
    assert_eq!(raw_second, sys::CUDA_ERROR_ILLEGAL_STATE);
    assert_eq!(
        state(pid, "after the refused second checkpoints"),
        ProcessState::Checkpointed
    );
    failed
        .into_handle()
        .finish()
        .unwrap_or_else(|e| panic!("finish: {e}"));
    assert_eq!(state(pid, "after finish"), ProcessState::Running);
    d.assert_intact();
}

#[test]
fn a_lock_refused_because_another_tool_holds_the_process_leaves_that_tool_s_state() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _s = serial();
    let other = OtherActor::new();
    let mut d = debuggee(&["--gib", "0.5"]);
    let pid = d.pid();

    // Another tool locks the process between the crate's attach (which found it running) and its lock; the
    // crate's lock is refused and its handle dropped: the lock stays that tool's, and its unlock still works.
    let held = ProcessCheckpoint::attach(pid).or_panic("attach");
    assert_eq!(other.lock(pid), 0, "the other tool's lock");
    let refused = held.lock(LOCK_TIMEOUT).map(|_| ()).unwrap_err();
    eprintln!("  lock of a process another tool locked: {refused}");
    assert_eq!(code(refused.error()), Some(sys::CUDA_ERROR_ILLEGAL_STATE));
    drop(refused);
    assert_eq!(
        state(pid, "after the refused handle's drop"),
        ProcessState::Locked
    );

    // The same with the process checkpointed by the other tool: the drop restores nothing.
    assert_eq!(other.unlock(pid), 0, "the other tool's unlock");
    let held = ProcessCheckpoint::attach(pid).or_panic("attach again");
    assert_eq!(other.lock(pid), 0, "the other tool's second lock");
    assert_eq!(other.checkpoint(pid), 0, "the other tool's checkpoint");
    let refused = held.lock(LOCK_TIMEOUT).map(|_| ()).unwrap_err();
    eprintln!("  lock of a process another tool checkpointed: {refused}");
    drop(refused);
    assert_eq!(
        state(pid, "after the second refused handle's drop"),
        ProcessState::Checkpointed
    );
    assert_eq!(other.restore(pid), 0, "the other tool's restore");
    assert_eq!(other.unlock(pid), 0, "the other tool's unlock");
    assert_eq!(
        state(pid, "after the other tool's unlock"),
        ProcessState::Running
    );
    d.assert_intact();
}

#[test]
fn restore_of_a_process_that_is_not_checkpointed_is_refused() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _s = serial();
    let other = OtherActor::new();
    let mut d = debuggee(&["--gib", "0.5"]);
    let pid = d.pid();
    let raw = other.restore(pid);
    eprintln!("  raw restore of a running process: {raw}");
    assert_eq!(raw, sys::CUDA_ERROR_ILLEGAL_STATE);

    let saved = ProcessCheckpoint::attach(pid)
        .or_panic("attach")
        .lock(LOCK_TIMEOUT)
        .or_panic("lock")
        .checkpoint()
        .or_panic("checkpoint");
    // Another tool restores and unlocks it: for the handle, the process is no longer checkpointed.
    assert_eq!(other.restore(pid), 0);
    assert_eq!(other.unlock(pid), 0);
    let failed = saved.restore().unwrap_err();
    eprintln!("  restore through the crate of a running process: {failed}");
    assert!(
        matches!(
            failed.error(),
            E::IllegalState {
                call: "cuCheckpointProcessRestore",
                state: Some(ProcessState::Running),
                ..
            }
        ),
        "{failed:?}"
    );
    failed.into_handle().finish().or_panic("finish");
    assert_eq!(state(pid, "after finish"), ProcessState::Running);
    d.assert_intact();
}

#[test]
fn bad_pids_are_typed_errors_and_the_target_keeps_running() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _s = serial();
    let mut plain = Target::sleeper();
    for e in [
        ProcessCheckpoint::state(plain.pid()).unwrap_err(),
        ProcessCheckpoint::attach(plain.pid()).unwrap_err(),
    ] {
        eprintln!("  a process without CUDA: {e}");
        assert!(matches!(e, E::NotCuda { .. }), "{e:?}");
    }
    assert!(plain.running());
    let gone = vanished_pid();
    let e = ProcessCheckpoint::state(gone).unwrap_err();
    eprintln!("  a pid that does not exist: {e}");
    assert!(matches!(e, E::NoSuchProcess { .. }), "{e:?}");
    assert!(matches!(
        ProcessCheckpoint::attach(0),
        Err(E::InvalidPid { .. })
    ));
    let me = std::process::id();
    assert!(matches!(
        ProcessCheckpoint::attach(me),
        Err(E::OwnProcess { .. })
    ));
    match ProcessCheckpoint::state(me) {
        Ok(s) => eprintln!("  this process (CUDA initialised, no context): {s}"),
        Err(e) => eprintln!("  this process: {e}"),
    }
}

/// The child half of `another_users_process_is_refused`: runs as another user.
const OTHER_USER_TARGET: &str = "GPU_TOOLS_OTHER_USER_TARGET";

#[test]
fn another_users_process_is_refused() {
    if let Ok(pid) = std::env::var(OTHER_USER_TARGET) {
        let pid: u32 = pid.parse().unwrap();
        let state = ProcessCheckpoint::state(pid);
        println!("child: state of {pid}: {state:?}");
        match ProcessCheckpoint::attach(pid).map(|h| h.lock(LOCK_TIMEOUT)) {
            Ok(Ok(locked)) => {
                let _ = locked.unlock();
                panic!("another user locked process {pid}");
            }
            Ok(Err(failed)) => {
                println!("child: lock: {failed}");
                assert!(
                    matches!(failed.error(), E::NotPermitted { .. }),
                    "{failed:?}"
                );
            }
            Err(e) => {
                println!("child: attach: {e}");
                assert!(matches!(e, E::NotPermitted { .. }), "{e:?}");
            }
        }
        return;
    }
    // The copy run as another user (above) runs this body directly; this process runs it alone.
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _s = serial();
    let own = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
        .unwrap();
    assert_eq!(
        own, 0,
        "this test starts a copy of itself as user 65534 and needs root (the GPU host runs as root)"
    );
    let mut d = debuggee(&["--gib", "0.25"]);
    // A copy of this test binary that user 65534 can run.
    let dir = std::env::temp_dir().join(format!("gpu-tools-other-user-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("test");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    use std::os::unix::process::CommandExt;
    let out = std::process::Command::new(&exe)
        .args([
            "process_checkpoint::another_users_process_is_refused",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(OTHER_USER_TARGET, d.pid().to_string())
        .uid(65534)
        .gid(65534)
        .current_dir(&dir)
        .output()
        .expect("run the test as user 65534");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "the child as user 65534: {}",
        out.status
    );
    assert!(stdout.contains("1 passed"), "the child ran the test");
    assert_eq!(
        state(d.pid(), "after another user's attempt"),
        ProcessState::Running
    );
    d.assert_intact();
}

#[test]
fn a_target_that_exits_by_itself_while_locked() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _s = serial();
    let mut d = debuggee(&["--gib", "0.25", "--exit-after-ms", "1500"]);
    let pid = d.pid();
    let locked = ProcessCheckpoint::attach(pid)
        .or_panic("attach")
        .lock(LOCK_TIMEOUT)
        .or_panic("lock");
    let t = Instant::now();
    match d.target.wait_for(Duration::from_secs(10)) {
        Some(status) => {
            eprintln!(
                "  the locked target exited by itself after {:.0} ms: {status}",
                ms(t)
            );
            let failed = locked.unlock().unwrap_err();
            eprintln!("  unlock of the exited target: {failed}");
            assert!(matches!(failed.error(), E::Exited { .. }), "{failed:?}");
            let e = failed.into_handle().finish().unwrap_err();
            eprintln!("  finish: {e}");
            assert!(matches!(e, E::Exited { .. }), "{e:?}");
        }
        None => {
            eprintln!(
                "  the locked target called exit() and is still alive after 10 s (state {:?}): unlocking",
                ProcessCheckpoint::state(pid)
            );
            locked
                .unlock()
                .unwrap_or_else(|f| panic!("unlock of the exiting target: {f}"));
            let status = d
                .target
                .wait_for(Duration::from_secs(30))
                .expect("the target finishes exiting once unlocked");
            eprintln!("  after the unlock it exited: {status}");
            assert_eq!(status.code(), Some(3));
        }
    }
}

#[test]
fn a_target_killed_while_locked_or_checkpointed() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _s = serial();
    let mem = nvml();
    for checkpointed in [false, true] {
        let what = if checkpointed {
            "checkpointed"
        } else {
            "locked"
        };
        let mut d = debuggee(&["--gib", "0.5"]);
        let pid = d.pid();
        let locked = ProcessCheckpoint::attach(pid)
            .or_panic("attach")
            .lock(LOCK_TIMEOUT)
            .or_panic("lock");
        let handle_finish: Box<dyn FnOnce() -> Result<(), E>> = if checkpointed {
            let saved = locked.checkpoint().or_panic("checkpoint");
            Box::new(move || saved.finish())
        } else {
            Box::new(move || locked.finish())
        };
        let _ = d.target.child.kill();
        let t = Instant::now();
        let status = d
            .target
            .wait_for(Duration::from_secs(30))
            .unwrap_or_else(|| panic!("a SIGKILLed {what} target did not end within 30 s"));
        eprintln!(
            "  SIGKILL of the {what} target: ended after {:.0} ms ({status})",
            ms(t)
        );
        let e = handle_finish().unwrap_err();
        eprintln!("  finish of the handle: {e}");
        assert!(matches!(e, E::Exited { .. }), "{e:?}");
        let s = snapshot(&mem, pid, &format!("after the {what} target was killed"));
        assert_eq!(nvml_entry(&s, 0).process, ProcessMemory::Absent);
    }
    // The driver still serves a new target.
    let mut d = debuggee(&["--gib", "0.25"]);
    ProcessCheckpoint::attach(d.pid())
        .or_panic("attach")
        .lock(LOCK_TIMEOUT)
        .or_panic("lock")
        .checkpoint()
        .or_panic("checkpoint")
        .restore()
        .or_panic("restore")
        .unlock()
        .or_panic("unlock");
    d.assert_intact();
}

#[test]
fn dropping_a_checkpointed_handle_restores_the_target() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _s = serial();
    let mut d = debuggee(&["--gib", "1"]);
    let pid = d.pid();
    let saved = ProcessCheckpoint::attach(pid)
        .or_panic("attach")
        .lock(LOCK_TIMEOUT)
        .or_panic("lock")
        .checkpoint()
        .or_panic("checkpoint");
    let before = d.last_check();
    let t = Instant::now();
    drop(saved);
    eprintln!("  drop of a checkpointed handle: {:.0} ms", ms(t));
    assert_eq!(state(pid, "after drop"), ProcessState::Running);
    d.wait_check_after(before, Duration::from_secs(60));
    d.assert_intact();
}

#[test]
fn restore_onto_the_same_gpu_by_uuid() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _s = serial();
    let mut d = debuggee(&["--gib", "0.5"]);
    // The driver wants a pair for every GPU it checkpointed. On two H200s a single pair for device 0, the one the
    // debuggee works on, was refused (CUDA_ERROR_INVALID_VALUE): one pair for each GPU the process sees.
    let driver = Driver::load().unwrap();
    let pairs: Vec<GpuPair> = (0..driver.device_count().unwrap())
        .map(|i| {
            let uuid = driver.device_uuid(i).unwrap();
            eprintln!("  device {i}: {uuid}");
            GpuPair {
                checkpointed: uuid,
                restore_on: uuid,
            }
        })
        .collect();
    let saved = ProcessCheckpoint::attach(d.pid())
        .or_panic("attach")
        .lock(LOCK_TIMEOUT)
        .or_panic("lock")
        .checkpoint()
        .or_panic("checkpoint");
    let locked = saved
        .restore_onto(&pairs)
        .unwrap_or_else(|f| panic!("restore onto the same {} GPUs: {f}", pairs.len()));
    locked.unlock().or_panic("unlock");
    d.assert_intact();
}
