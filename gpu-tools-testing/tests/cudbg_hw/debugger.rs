//! The debugger API on a real GPU (feature `nvidia-hw-tests`): debuggees are this crate's `debuggee_kernels`
//! example. Each test runs its body in a child process of its own (`gpu_tools_testing::own_process`): the driver serves one
//! debugger client per process, and on driver 580.159.04 sessions run one after another in one process did not
//! all pass (the detach test failed, and the process ended during the fault test).
#![cfg(feature = "nvidia-hw-tests")]

use gpu_tools_testing::cudbg as common;
use gpu_tools_testing::own_process;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::Duration;

use common::{collect_all, debuggee, one_session};
use gpu_tools::cudbg::{
    DebugSession, Dim3, Event, Exception, KernelReady, KernelType, OnDrop, Queue, SessionError, elf,
};

fn app_kernel(e: &Event) -> Option<KernelReady> {
    match e {
        Event::KernelReady(k) if k.kernel_type == KernelType::Application => Some(*k),
        _ => None,
    }
}

#[test]
fn events_arrive_in_order_with_dimensions_and_elf_images() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let mut cmd = debuggee(&["launch", "3"]);
    cmd.stdout(Stdio::piped());
    let mut s = DebugSession::start(cmd).expect("session");
    eprintln!("api version {}", s.api_version());
    let mut events = Vec::new();
    let mut user_images = Vec::new();
    while let Some(batch) = s.next_batch(Some(Duration::from_secs(60))).expect("events") {
        for (q, e) in &batch {
            if let Event::ElfImageLoaded(img) = e {
                let bytes = batch.session().elf_image(img).expect("elf image");
                assert_eq!(bytes.len() as u64, img.size);
                assert!(
                    elf::is_elf64(&bytes),
                    "image {:#x} is not ELF64",
                    img.handle
                );
                if !img.is_system() {
                    user_images.push((*img, elf::function_symbols(&bytes)));
                }
            }
            events.push((*q, *e));
        }
    }
    for (q, e) in events.iter().take(20) {
        eprintln!("{q:?} {e:?}");
    }
    let kinds: Vec<&str> = events.iter().map(|(_, e)| e.name()).collect();
    assert_eq!(kinds.first(), Some(&"context-create"), "{kinds:?}");
    // The crate's Context pushes and pops per call; without the capability each is an event.
    assert!(
        kinds.contains(&"context-push") && kinds.contains(&"context-pop"),
        "{kinds:?}"
    );
    let first_launch = events
        .iter()
        .position(|(_, e)| app_kernel(e).is_some())
        .expect("a launch");
    let user_elf = events
        .iter()
        .position(|(_, e)| matches!(e, Event::ElfImageLoaded(i) if !i.is_system()))
        .expect("the user module's image");
    assert!(user_elf < first_launch, "{kinds:?}");
    let launches: Vec<KernelReady> = events.iter().filter_map(|(_, e)| app_kernel(e)).collect();
    assert_eq!(launches.len(), 3);
    for k in &launches {
        assert_eq!(k.grid_dim, Dim3 { x: 2, y: 1, z: 1 });
        assert_eq!(k.block_dim, Dim3 { x: 32, y: 1, z: 1 });
    }
    assert!(launches.windows(2).all(|w| w[0].grid_id < w[1].grid_id));
    assert!(
        events
            .iter()
            .all(|(q, e)| *q == Queue::Async || !matches!(e, Event::Unknown { .. }))
    );
    assert_eq!(user_images.len(), 1);
    let (img, syms) = &user_images[0];
    eprintln!(
        "user image {img:?} symbols {syms:?} entry {:#x}",
        launches[0].function_entry
    );
    assert_eq!(launches[0].module, img.module);
    let names: Vec<&str> = syms.iter().map(|s| s.name.as_str()).collect();
    assert!(
        names.contains(&"add_one") && names.contains(&"fault"),
        "{names:?}"
    );
    assert_eq!(
        elf::function_at(syms, launches[0].function_entry),
        Some("add_one")
    );
    let mut out = String::new();
    s.take_stdout()
        .expect("pipe")
        .read_to_string(&mut out)
        .expect("stdout");
    let closed = s.close().expect("close");
    assert!(closed.exit.expect("exited").success(), "{out}");
    assert!(out.starts_with("ok 3"), "{out}");
}

#[test]
fn device_properties() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let mut s = DebugSession::start(debuggee(&["launch", "1"])).expect("session");
    let n = s.device_count().expect("count");
    assert!(n >= 1);
    let p = s.device(0).expect("device 0");
    eprintln!("{p:?}");
    assert!(!p.name.is_empty() && p.sms > 0 && p.warps_per_sm > 0 && p.registers_per_lane > 0);
    assert_eq!(p.lanes_per_warp, 32);
    assert!(p.sm_type.starts_with("sm_"), "{}", p.sm_type);
    assert!(matches!(
        s.device(n),
        Err(gpu_tools::Error::Session(SessionError::OutOfRange {
            what: "device",
            ..
        }))
    ));
    collect_all(&mut s);
}

#[test]
fn memory_read_and_write_while_suspended() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let mut cmd = debuggee(&["memory"]);
    cmd.stdout(Stdio::piped());
    let mut s = DebugSession::start(cmd).expect("session");
    let mut stdout = BufReader::new(s.take_stdout().expect("pipe"));
    let mut checked = false;
    while let Some(batch) = s.next_batch(Some(Duration::from_secs(60))).expect("events") {
        let Some(k) = batch.events().iter().find_map(|(_, e)| app_kernel(e)) else {
            continue;
        };
        // The debuggee printed its buffer address before the launch that is now blocked.
        let mut line = String::new();
        stdout.read_line(&mut line).expect("address line");
        let addr = u64::from_str_radix(
            line.split_whitespace()
                .nth(1)
                .unwrap()
                .trim_start_matches("0x"),
            16,
        )
        .unwrap();
        let dev = batch.session().suspend(k.dev).expect("suspend");
        let mut bytes = vec![0u8; 64 * 4];
        dev.read_global(addr, &mut bytes).expect("read");
        let words: Vec<u32> = bytes
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(words, (0..64).map(|i| 0x1000 + i).collect::<Vec<u32>>());
        let new: Vec<u8> = (0..64u32)
            .flat_map(|i| (0x5000 + i).to_le_bytes())
            .collect();
        dev.write_global(addr, &new).expect("write");
        dev.resume().expect("resume");
        checked = true;
    }
    assert!(checked, "no application kernel seen");
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("stdout");
    let result: Vec<u32> = rest
        .split_whitespace()
        .skip_while(|w| *w != "RESULT")
        .skip(1)
        .map(|w| u32::from_str_radix(w.trim_start_matches("0x"), 16).unwrap())
        .collect();
    // The kernel added one to what the session wrote.
    assert_eq!(
        result,
        (0..64).map(|i| 0x5001 + i).collect::<Vec<u32>>(),
        "{rest}"
    );
}

#[test]
fn breakpoint_at_kernel_entry_is_hit_and_released() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let mut cmd = debuggee(&["launch", "1"]);
    cmd.stdout(Stdio::piped());
    let mut s = DebugSession::start(cmd).expect("session");
    let mut entry = None;
    while entry.is_none() {
        let batch = s
            .next_batch(Some(Duration::from_secs(60)))
            .expect("events")
            .expect("not exited");
        if let Some(k) = batch.events().iter().find_map(|(_, e)| app_kernel(e)) {
            batch
                .session()
                .set_breakpoint(k.dev, k.function_entry)
                .expect("set breakpoint");
            entry = Some(k);
        }
    }
    let k = entry.unwrap();
    {
        let stopped = s
            .wait_for_stop(k.dev, Duration::from_secs(30), |_| {})
            .expect("poll")
            .stopped()
            .expect("a warp stops");
        let warps = stopped.warps().expect("warps");
        eprintln!("stopped warps: {warps:?}");
        let broken: Vec<_> = warps.iter().filter(|w| w.broken).collect();
        assert!(!broken.is_empty());
        for w in &broken {
            assert_eq!(w.pc, k.function_entry);
            assert_eq!(w.grid_id, k.grid_id);
        }
        stopped
            .session()
            .unset_breakpoint(k.dev, k.function_entry)
            .expect("unset");
        assert!(stopped.session().breakpoints().is_empty());
        stopped.resume().expect("resume");
    }
    collect_all(&mut s);
    let mut out = String::new();
    s.take_stdout().unwrap().read_to_string(&mut out).unwrap();
    assert!(s.exit_status().unwrap().expect("exited").success(), "{out}");
    assert!(out.starts_with("ok 1"), "{out}");
}

#[test]
fn out_of_bounds_kernel_reports_its_exception() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let mut cmd = debuggee(&["fault"]);
    cmd.stdout(Stdio::piped());
    let mut s = DebugSession::start(cmd).expect("session");
    let mut dev = None;
    while dev.is_none() {
        let batch = s
            .next_batch(Some(Duration::from_secs(60)))
            .expect("events")
            .expect("not exited");
        dev = batch
            .events()
            .iter()
            .find_map(|(_, e)| app_kernel(e))
            .map(|k| k.dev);
    }
    let stopped = s
        .wait_for_stop(dev.unwrap(), Duration::from_secs(30), |_| {})
        .expect("poll")
        .stopped()
        .expect("a warp stops");
    let exceptions = stopped.exceptions().expect("exceptions");
    eprintln!("exceptions: {exceptions:?}");
    assert!(!exceptions.is_empty());
    // The kernel's only fault is its misaligned 4-byte store.
    assert!(
        exceptions
            .iter()
            .all(|(_, _, _, e)| *e == Exception::WarpMisalignedAddress),
        "{exceptions:?}"
    );
}

#[test]
fn debuggee_exit_ends_the_session_and_cleans_up() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let mut s = DebugSession::start(debuggee(&["launch", "2"])).expect("session");
    let pid = s.pid();
    let events = collect_all(&mut s);
    assert!(events.iter().filter_map(|(_, e)| app_kernel(e)).count() == 2);
    assert!(s.exit_status().unwrap().unwrap().success());
    let closed = s.close().expect("close");
    assert!(closed.events.is_empty());
    let left = std::path::Path::new("/tmp/cuda-dbg").join(pid.to_string());
    assert!(!left.exists(), "{} is left", left.display());
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "debuggee not reaped"
    );
    // The claim is released: a new session can start.
    let mut again = DebugSession::start(debuggee(&["launch", "1"])).expect("second session");
    collect_all(&mut again);
}

#[test]
fn second_session_is_refused_while_one_is_active() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let mut s = DebugSession::start(debuggee(&["launch", "1"])).expect("session");
    let err = DebugSession::start(debuggee(&["launch", "1"])).unwrap_err();
    assert!(
        matches!(err, gpu_tools::Error::Session(SessionError::AlreadyActive)),
        "{err}"
    );
    collect_all(&mut s);
}

#[test]
fn drop_kills_a_running_debuggee() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let mut s = DebugSession::start(debuggee(&["launch", "100000"])).expect("session");
    let pid = s.pid();
    drop(s.next_batch(Some(Duration::from_secs(60))).expect("events"));
    drop(s);
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "debuggee still there"
    );
}

#[test]
fn detach_lets_the_debuggee_run_to_its_end() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let mut cmd = debuggee(&["launch", "50"]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut s = DebugSession::builder(cmd)
        .on_drop(OnDrop::Detach)
        .start()
        .expect("session");
    let mut stdout = s.take_stdout().unwrap();
    let mut stderr = s.take_stderr().unwrap();
    drop(s.next_batch(Some(Duration::from_secs(60))).expect("events"));
    drop(s);
    let mut out = String::new();
    stdout.read_to_string(&mut out).unwrap();
    let mut err = String::new();
    stderr.read_to_string(&mut err).unwrap();
    assert!(out.starts_with("ok 50"), "stdout: {out}\nstderr: {err}");
}

#[test]
fn missing_program_is_a_typed_error() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let err =
        DebugSession::start(std::process::Command::new("/nonexistent/cuda-program")).unwrap_err();
    assert!(
        matches!(err, gpu_tools::Error::Session(SessionError::Spawn { .. })),
        "{err}"
    );
}

#[test]
fn program_without_cuda_is_a_typed_error() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let err = DebugSession::start(debuggee(&["nocuda"])).unwrap_err();
    match err {
        gpu_tools::Error::Session(SessionError::NoCuda { status }) => assert!(status.success()),
        other => panic!("{other}"),
    }
}

#[test]
fn handshake_timeout_kills_the_debuggee() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let t0 = std::time::Instant::now();
    let err = DebugSession::builder(debuggee(&["wait", "60"]))
        .handshake_timeout(Duration::from_secs(1))
        .start()
        .unwrap_err();
    let gpu_tools::Error::Session(SessionError::HandshakeTimeout { pid, .. }) = err else {
        panic!("{err}")
    };
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "debuggee not reaped"
    );
}

#[test]
fn no_push_pop_capability_removes_context_push_and_pop_events() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let mut s = DebugSession::builder(debuggee(&["launch", "2"]))
        .capabilities(gpu_tools::sys::cudbg::CUDBG_DEBUGGER_CAPABILITY_NO_CONTEXT_PUSH_POP_EVENTS)
        .start()
        .expect("session");
    let events = collect_all(&mut s);
    let names: Vec<&str> = events.iter().map(|(_, e)| e.name()).collect();
    assert_eq!(
        events.iter().filter_map(|(_, e)| app_kernel(e)).count(),
        2,
        "{names:?}"
    );
    assert!(
        !events
            .iter()
            .any(|(_, e)| matches!(e, Event::ContextPush(_) | Event::ContextPop(_))),
        "{names:?}"
    );
    assert!(s.exit_status().unwrap().expect("exited").success());
}

#[test]
fn blocking_launches_report_each_kernels_end() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let mut s = DebugSession::builder(debuggee(&["launch", "3"]))
        .blocking_launches(true)
        .start()
        .expect("session");
    let events = collect_all(&mut s);
    let names: Vec<&str> = events.iter().map(|(_, e)| e.name()).collect();
    let launches: Vec<KernelReady> = events.iter().filter_map(|(_, e)| app_kernel(e)).collect();
    assert_eq!(launches.len(), 3, "{names:?}");
    // Each launch's end comes after its ready event and before the next launch.
    for (i, k) in launches.iter().enumerate() {
        let ready = events
            .iter()
            .position(|(_, e)| app_kernel(e).is_some_and(|r| r.grid_id == k.grid_id))
            .expect("ready");
        let finished = events
            .iter()
            .position(|(_, e)| matches!(e, Event::KernelFinished(f) if f.grid_id == k.grid_id))
            .unwrap_or_else(|| panic!("no finished event for grid {}: {names:?}", k.grid_id));
        assert!(ready < finished, "{names:?}");
        if let Some(next) = launches.get(i + 1) {
            let next_ready = events
                .iter()
                .position(|(_, e)| app_kernel(e).is_some_and(|r| r.grid_id == next.grid_id))
                .expect("ready");
            assert!(finished < next_ready, "{names:?}");
        }
        let Some((_, Event::KernelFinished(f))) = events.get(finished) else {
            unreachable!()
        };
        assert_eq!(f.function_entry, k.function_entry);
        assert_eq!(f.module, k.module);
    }
    assert!(s.exit_status().unwrap().expect("exited").success());
    assert!(matches!(
        s.set_blocking_launches(false),
        Err(SessionError::DebuggeeVariable { .. })
    ));
}

#[test]
fn launch_blocking_can_be_switched_on_while_running() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let mut s = DebugSession::start(debuggee(&["launch", "4"])).expect("session");
    let mut ready = Vec::new();
    let mut finished = Vec::new();
    while let Some(batch) = s.next_batch(Some(Duration::from_secs(60))).expect("events") {
        for (_, e) in &batch {
            match e {
                Event::KernelReady(k) if k.kernel_type == KernelType::Application => {
                    ready.push(k.grid_id);
                    // Switched on while the second launch is held: the driver read the variable when that
                    // launch began, so from the third launch on kernels end with an event.
                    if ready.len() == 2 {
                        batch.session().set_blocking_launches(true).expect("set");
                    }
                }
                Event::KernelFinished(f) => finished.push(f.grid_id),
                _ => {}
            }
        }
    }
    assert_eq!(ready.len(), 4);
    assert_eq!(finished, ready[2..], "launched grids {ready:?}");
}

#[test]
fn close_stops_then_kills_a_running_debuggee() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let mut s = DebugSession::start(debuggee(&["launch", "100000"])).expect("session");
    let pid = s.pid();
    drop(s.next_batch(Some(Duration::from_secs(60))).expect("events"));
    let closed = s.close().expect("close");
    // Killed by the session after finalize, not crashed on its own without its debugger.
    assert_eq!(closed.exit.and_then(|e| e.signal()), Some(9));
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
}

#[test]
fn a_debuggee_that_dies_from_a_signal_ends_the_session_without_driver_calls() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let mut s = DebugSession::start(debuggee(&["abort"])).expect("session");
    let events = collect_all(&mut s);
    let names: Vec<&str> = events.iter().map(|(_, e)| e.name()).collect();
    assert_eq!(
        events.iter().filter_map(|(_, e)| app_kernel(e)).count(),
        1,
        "{names:?}"
    );
    let status = s.exit_status().unwrap().expect("ended");
    assert_eq!(status.signal(), Some(6), "{status}");
    // Calls that would reach the driver's debugger side are refused with the signal.
    for err in [
        s.suspend(0).map(|_| ()).unwrap_err(),
        s.set_launch_events(true).unwrap_err(),
    ] {
        assert!(
            matches!(
                err,
                gpu_tools::Error::Session(SessionError::DebuggeeKilled { signal: 6 })
            ),
            "{err}"
        );
    }
    drop(s);
    // Not finalised, so no other session may start in this process; the process itself ends cleanly (the
    // parent test checks the child's exit).
    let err = DebugSession::start(debuggee(&["launch", "1"])).unwrap_err();
    assert!(
        matches!(
            err,
            gpu_tools::Error::Session(SessionError::DebuggerUnusable)
        ),
        "{err}"
    );
}

#[test]
fn a_debuggee_killed_from_outside_ends_the_session() {
    if !own_process() {
        return;
    }
    let _one = one_session();
    let mut s = DebugSession::start(debuggee(&["launch-raw", "1000000"])).expect("session");
    let pid = s.pid();
    let mut launches = 0;
    while launches < 20 {
        let batch = s
            .next_batch(Some(Duration::from_secs(60)))
            .expect("events")
            .expect("running");
        launches += batch
            .events()
            .iter()
            .filter(|(_, e)| app_kernel(e).is_some())
            .count();
    }
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(killed.success());
    let t0 = std::time::Instant::now();
    while s
        .next_batch(Some(Duration::from_secs(10)))
        .expect("no error after the death")
        .is_some()
    {}
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert_eq!(s.exit_status().unwrap().and_then(|e| e.signal()), Some(9));
    let closed = s.close().expect("close");
    assert!(closed.events.is_empty());
}
