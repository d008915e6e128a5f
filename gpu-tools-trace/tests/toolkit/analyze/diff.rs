//! `diff` of two traces: a simulated program before and after a change, and the two ranks of the real DDP job.

use std::path::PathBuf;

use gpu_tools_trace::analyze::Trace;
use gpu_tools_trace::diff::{Process, Profile, Select, SelectError, diff};

use super::program::{Program, compute};

fn trace(file: &[u8]) -> Trace {
    let mut t = Trace::new();
    assert!(t.read(0, file).is_empty());
    t
}

fn program(steps: usize, step: impl Fn(&mut Program)) -> Vec<u8> {
    let mut p = Program::new(7);
    for _ in 0..steps {
        step(&mut p);
    }
    p.sync("cudaDeviceSynchronize");
    p.file()
}

#[test]
fn a_changed_kernel_and_a_new_one_lead_the_lists() {
    let before = trace(&program(30, compute));
    // After: layer_05 runs twice as long and a new kernel joins each step; the run is longer (50 steps).
    let after = trace(&program(50, |p| {
        for k in 0..20 {
            let run = if k == 5 { 100_000 } else { 50_000 };
            p.kernel(&format!("layer_{k:02}"), 5_000, run);
        }
        p.kernel("extra", 5_000, 10_000);
    }));
    let (a, b) = (
        Profile::of(&before, Select::All).unwrap(),
        Profile::of(&after, Select::All).unwrap(),
    );
    assert_eq!((a.steps, b.steps), (29, 49));
    // 20 kernels of 50 µs, 1 µs apart; after, 50 µs more and the extra kernel's 10 µs and 1 µs.
    assert_eq!(
        (a.step_median, b.step_median),
        (20 * 51_000, 20 * 51_000 + 50_000 + 11_000)
    );
    let d = diff(&a, &b, 3);
    assert!(d.per_step);
    let top = &d.kernels_by_time[0];
    assert_eq!(top.name, "layer_05");
    assert_eq!((top.a.count, top.a.time), (29, 29 * 50_000));
    assert_eq!((top.b.count, top.b.time), (49, 49 * 100_000));
    // Per step the counts did not change: no kernel's count changed.
    assert!(d.kernels_by_count.is_empty(), "{:?}", d.kernels_by_count);
    assert_eq!(d.new_kernels.len(), 1);
    assert_eq!(
        (d.new_kernels[0].name.as_str(), d.new_kernels[0].b.time),
        ("extra", 49 * 10_000)
    );
    assert!(d.gone_kernels.is_empty());
    assert_eq!(d.api[0].name, "cudaLaunchKernel");
    assert_eq!((d.api[0].a.count, d.api[0].b.count), (29 * 20, 49 * 21));
}

#[test]
fn the_two_ranks_of_the_ddp_job_differ_in_their_collective() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/traces/ddp_2rank.gputrace");
    let t = trace(&std::fs::read(path).unwrap());
    let (a, b) = (
        Profile::of(&t, Select::Rank(0)).unwrap(),
        Profile::of(&t, Select::Rank(1)).unwrap(),
    );
    let who = |p: &Profile| -> Vec<(u32, Option<u32>)> {
        p.processes.iter().map(|p| (p.pid, p.rank)).collect()
    };
    assert_eq!(
        (who(&a), who(&b)),
        (vec![(1886, Some(0))], vec![(1887, Some(1))])
    );
    let d = diff(&a, &b, 5);
    // Rank 0 waits in its AllReduce for rank 1: 792.5 µs a step against 270.8 µs.
    let top = &d.kernels_by_time[0];
    assert!(
        top.name
            .starts_with("_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
        "{}",
        top.name
    );
    assert_eq!((top.a.count, top.b.count), (198, 198));
    assert_eq!(top.a.time / 198 / 100, 7925);
    assert!(d.new_kernels.is_empty() && d.gone_kernels.is_empty());
    assert_eq!(
        Profile::of(&t, Select::Rank(2)),
        Err(SelectError::Nothing(Select::Rank(2)))
    );
}

#[test]
fn processes_that_share_a_pid_are_two_and_a_pid_that_names_both_is_refused() {
    // Two programs with pid 100 in one file, without ranks (two containers, or the pid used again): the first
    // runs 20 kernels a step, the second 21.
    let mut first = Program::new(100);
    let mut second = Program::new(100);
    for _ in 0..30 {
        compute(&mut first);
        compute(&mut second);
        second.kernel("extra", 5_000, 10_000);
    }
    let t = trace(&super::program::file_of(&[
        first.stream(true),
        second.stream(true),
    ]));
    let all = Profile::of(&t, Select::All).unwrap();
    assert_eq!(all.processes.len(), 2, "{:?}", all.processes);
    // `pid=100` names two processes: their figures summed as one process's would be a wrong answer.
    let by_pid = Profile::of(&t, Select::Pid(100));
    assert!(by_pid.is_err(), "{:?}", by_pid.map(|p| p.processes));
    let process = |stream| Process {
        file: 0,
        stream,
        pid: 100,
        rank: None,
    };
    assert_eq!(all.processes, [process(0), process(1)]);
    let err = by_pid.unwrap_err();
    assert_eq!(
        err,
        SelectError::Several(Select::Pid(100), vec![process(0), process(1)])
    );
    assert_eq!(
        err.to_string(),
        "pid 100 is 2 traced processes with device work (file 0 stream 0, file 0 stream 1): select one by its \
         stream"
    );
    // Each by its stream: the second runs one kernel more a step.
    let (a, b) = (
        Profile::of(&t, Select::Stream { file: 0, stream: 0 }).unwrap(),
        Profile::of(&t, Select::Stream { file: 0, stream: 1 }).unwrap(),
    );
    assert_eq!(
        (a.processes.clone(), b.processes.clone()),
        (vec![process(0)], vec![process(1)])
    );
    let d = diff(&a, &b, 10);
    assert_eq!(d.new_kernels.len(), 1, "{:?}", d.new_kernels);
    assert_eq!(d.new_kernels[0].name, "extra");
    assert_eq!(
        Profile::of(&t, Select::Stream { file: 0, stream: 2 }),
        Err(SelectError::Nothing(Select::Stream { file: 0, stream: 2 }))
    );
}
