//! A fresh CUDA core dump against a live debug session of the same program (feature `nvidia-hw-tests`).
//!
//! Each test runs this crate's `debuggee_kernels` twice: once under a [`DebugSession`], reading the lanes that hit
//! an exception while the device is held, and once alone with `CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1` (the driver
//! does not dump a process a debugger is attached to). The reader must find the same faulting lanes: the same
//! exception, the same PC as an offset in the kernel (absolute addresses differ between runs), the same block and
//! thread indices. With `$OUT` set, the dump and both views are copied to `$OUT/coredump_hw/`.
#![cfg(feature = "nvidia-hw-tests")]

use gpu_tools_testing::cudbg as common;
use gpu_tools_testing::own_process;

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{debuggee, one_session};
use gpu_tools::cudbg::coredump::CoreDump;
use gpu_tools::cudbg::{DebugSession, Dim3, Event, Exception, KernelType, elf};

/// One faulting lane as (block, thread, exception, PC offset from the kernel's entry).
type Fault = (Dim3, Dim3, Exception, u64);

fn show(f: &Fault) -> String {
    format!(
        "block {} thread {} {} at kernel+{:#x}",
        f.0,
        f.1,
        f.2.description(),
        f.3
    )
}

/// Runs `args` under a debug session; returns the kernel's name and the faulting lanes seen while suspended.
fn live_faults(args: &[&str]) -> (String, HashSet<Fault>) {
    let _one = one_session();
    let mut cmd = debuggee(args);
    cmd.stdout(Stdio::null());
    let mut s = DebugSession::start(cmd).expect("start the debuggee under a session");
    let mut kernel = None;
    let mut images = Vec::new();
    while kernel.is_none() {
        let batch = s
            .next_batch(Some(Duration::from_secs(60)))
            .expect("events")
            .expect("the debuggee exited before its kernel ran");
        for (_, e) in batch.events() {
            match e {
                Event::ElfImageLoaded(img) => images.push(*img),
                Event::KernelReady(k) if k.kernel_type == KernelType::Application => {
                    kernel = Some(*k)
                }
                _ => {}
            }
        }
    }
    let k = kernel.unwrap();
    let name = images
        .iter()
        .filter(|i| i.module == k.module)
        .find_map(|i| {
            let bytes = s.elf_image(i).ok()?;
            elf::function_at(&elf::function_symbols(&bytes), k.function_entry).map(str::to_string)
        })
        .unwrap_or_default();
    println!(
        "live: kernel {name:?} grid {} entry {:#x} grid {} block {}",
        k.grid_id, k.function_entry, k.grid_dim, k.block_dim
    );
    let stopped = s
        .wait_for_stop(k.dev, Duration::from_secs(60), |_| {})
        .expect("poll the device")
        .stopped()
        .expect("a warp stops with the exception");
    let mut faults = HashSet::new();
    for (sm, warp, lane, e) in stopped.exceptions().expect("read the exceptions") {
        let pc = stopped.pc(sm, warp, lane).expect("readVirtualPC");
        let block = stopped.block_idx(sm, warp).expect("readBlockIdx");
        let thread = stopped.thread_idx(sm, warp, lane).expect("readThreadIdx");
        let grid = stopped.grid_id(sm, warp).expect("readGridId");
        println!(
            "live: sm {sm} warp {warp} lane {lane}: grid {grid} block {block} thread {thread} {e:?} pc {pc:#x}"
        );
        assert_eq!(grid, k.grid_id, "a faulting lane of another grid");
        faults.insert((block, thread, e, pc.wrapping_sub(k.function_entry)));
    }
    drop(stopped);
    drop(s);
    (name, faults)
}

/// Runs `args` with core dumps on; returns the dump's path once the program has ended.
fn make_dump(args: &[&str], tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpu-tools-coredump-hw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{tag}.cudacore"));
    let _ = std::fs::remove_file(&file);
    let flags = "skip_nonrelocated_elf_images,skip_global_memory,skip_shared_memory,skip_local_memory,\
                 skip_constbank_memory,skip_abort";
    let mut cmd: Command = debuggee(args);
    cmd.env("CUDA_ENABLE_COREDUMP_ON_EXCEPTION", "1")
        .env("CUDA_COREDUMP_FILE", &file)
        .env("CUDA_COREDUMP_GENERATION_FLAGS", flags)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    println!(
        "dump: CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1 CUDA_COREDUMP_FILE={} CUDA_COREDUMP_GENERATION_FLAGS={flags} \
         debuggee_kernels {}",
        file.display(),
        args.join(" ")
    );
    let t0 = Instant::now();
    let out = cmd.output().expect("run the debuggee");
    println!(
        "dump: debuggee ended ({}) after {:.1} s: {}{}",
        out.status,
        t0.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stdout).trim(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let len = std::fs::metadata(&file)
        .unwrap_or_else(|e| panic!("no dump at {}: {e}", file.display()))
        .len();
    println!("dump: {} bytes", len);
    file
}

fn dump_faults(file: &PathBuf) -> (String, HashSet<Fault>) {
    let dump = CoreDump::open(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut name = String::new();
    let mut faults = HashSet::new();
    for l in dump.faulting_lanes() {
        let g = l.grid().expect("the faulting lane's grid is in the dump");
        name = g.kernel_name.clone().unwrap_or_default();
        println!(
            "dump: dev {} sm {} warp {} lane {}: grid {} block {} thread {} {:?} pc {:#x} (+{:#x} by the dump) error pc {:x?}",
            l.device.index,
            l.sm.id,
            l.warp.id,
            l.lane.id,
            g.id,
            l.block.block_idx,
            l.lane.thread_idx,
            l.lane.exception,
            l.lane.pc,
            l.lane.function_offset,
            l.warp.error_pc
        );
        assert_eq!(
            l.lane.pc.wrapping_sub(g.function_entry),
            l.lane.function_offset,
            "the dump's own PC offset and PC - entry disagree"
        );
        faults.insert((
            l.block.block_idx,
            l.lane.thread_idx,
            l.lane.exception,
            l.lane.pc.wrapping_sub(g.function_entry),
        ));
    }
    (name, faults)
}

fn save(file: &PathBuf, tag: &str, report: &str) {
    let Some(out) = std::env::var_os("OUT") else {
        return;
    };
    let dir = PathBuf::from(out).join("coredump_hw");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(file, dir.join(format!("{tag}.cudacore"))).unwrap();
    std::fs::write(dir.join(format!("{tag}.txt")), report).unwrap();
}

fn compare(args: &[&str], tag: &str, kernel: &str) {
    let (live_name, live) = live_faults(args);
    let file = make_dump(args, tag);
    let (dump_name, dumped) = dump_faults(&file);
    let mut report = format!(
        "debuggee_kernels {}\nlive kernel {live_name}, dump kernel {dump_name}\n",
        args.join(" ")
    );
    let sorted = |set: &HashSet<Fault>| {
        let mut v: Vec<String> = set.iter().map(show).collect();
        v.sort();
        v
    };
    for f in sorted(&live) {
        report += &format!("live: {f}\n");
    }
    for f in sorted(&dumped) {
        report += &format!("dump: {f}\n");
    }
    print!("{report}");
    save(&file, tag, &report);
    assert_eq!(live_name, kernel);
    assert_eq!(dump_name, kernel);
    assert!(!live.is_empty(), "the live session saw no faulting lane");
    assert_eq!(
        dumped, live,
        "the dump's faulting lanes differ from the live session's"
    );
    let _ = std::fs::remove_file(&file);
}

#[test]
fn fresh_dump_of_fault_at_matches_the_live_session() {
    if !own_process() {
        return;
    }
    compare(&["fault-at", "2", "37"], "fault_at", "fault_at");
}

#[test]
fn fresh_dump_of_fault_matches_the_live_session() {
    if !own_process() {
        return;
    }
    compare(&["fault"], "fault", "fault");
}
