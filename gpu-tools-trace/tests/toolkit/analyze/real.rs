//! What the analysis says of the real traces of `tests/fixtures/traces/` (recorded on an H200 host), with the
//! exact figures of those recordings: an eager PyTorch loop that is launch-bound and reads its loss every step,
//! the same under `torch.compile` with CUDA graphs, a 2-rank DDP job, and the synthetic 8-rank job with a
//! straggler.

use std::path::PathBuf;

use gpu_tools_trace::analyze::{FindingKind, StepSource};

use super::{diagnose, finding, kinds, says};

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/traces")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_eager_loop_is_launch_bound_and_reads_its_loss_every_step() {
    let d = diagnose(&[fixture("torch_loop.gputrace")]);
    assert_eq!(
        kinds(&d),
        vec![
            (FindingKind::LaunchBound, 28_790_588),
            (FindingKind::SyncStall, 2_188_068),
            (FindingKind::SmallCopies, 1_047_393),
            (FindingKind::PageableCopies, 712_286),
        ]
    );
    let gpu = &d.gpus[0];
    // The step starts where its input arrives (`x.to(device)`, 768 KiB); the first step is warm-up (cuDNN's
    // autotuning), the 3.7 s before it start-up.
    assert_eq!(
        gpu.steps.source,
        StepSource::Pattern("[CUDA memcpy HtoD 786432 B]".into())
    );
    assert_eq!((gpu.steps.count, gpu.steps.warmup), (18, 1));
    assert_eq!(gpu.before, 3_671_520_397);
    assert_eq!((d.gpu_time, gpu.busy), (37_877_723, 5_342_454));
    let launch = &d.findings[0];
    assert!(says(
        launch,
        "972 kernels (54 a step), 2.2 µs each (median) against a launch call of 5.6 µs; 738 of them (76%) ran shorter than their launch call"
    ));
    assert!(says(
        launch,
        "the same 60 operations (54 kernels) run in the same order in 18 of 18 steps"
    ));
    let sync = finding(&d, FindingKind::SyncStall);
    assert!(sync.title.contains("`.item()`-style reads"));
    assert!(says(
        sync,
        "cudaStreamSynchronize: the host waited in it as the GPU ran out of work 18 times"
    ));
    assert!(says(
        finding(&d, FindingKind::PageableCopies),
        "18 copies HtoD (pageable -> device) (1.0 a step): 13.5 MiB in all, the largest 768.0 KiB"
    ));
    assert_eq!(
        d.lacks,
        vec![
            "no device counters: kernels bound by memory or by computation cannot be told (record them with \
              `gpu-tools trace --counters`)"
        ]
    );
}

#[test]
fn the_compiled_loop_steps_on_its_graph_and_is_still_launch_bound_outside_it() {
    let d = diagnose(&[fixture("torch_compile.gputrace")]);
    assert_eq!(
        kinds(&d),
        vec![
            (FindingKind::LaunchBound, 15_766_880),
            (FindingKind::BetweenSteps, 327_811)
        ]
    );
    let gpu = &d.gpus[0];
    assert_eq!(gpu.steps.source, StepSource::Graph("[CUDA graph 5]".into()));
    assert_eq!((gpu.steps.count, gpu.steps.warmup), (17, 1));
    let launch = &d.findings[0];
    assert!(says(
        launch,
        "steps already launch CUDA graphs (2 a step), and 9 kernels a step run outside them"
    ));
    assert!(launch.advice[0].contains("outside the CUDA graphs"));
    assert!(
        d.lacks
            .iter()
            .any(|l| l.starts_with("CUDA graphs traced as whole launches"))
    );
}

#[test]
fn the_ddp_job_waits_in_collectives_with_no_straggler() {
    let d = diagnose(&[fixture("ddp_2rank.gputrace")]);
    assert_eq!(
        kinds(&d),
        vec![
            (FindingKind::LaunchBound, 258_513_352),
            (FindingKind::CollectiveWait, 200_423_575),
            (FindingKind::BetweenSteps, 30_514_905),
            (FindingKind::ExposedCommunication, 10_110_428),
        ]
    );
    // The launcher ran no device work: two GPUs, one per rank, 198 steps each.
    assert_eq!(d.gpus.len(), 2);
    assert!(
        d.gpus
            .iter()
            .all(|g| g.steps.count == 198 && g.gpu.rank.is_some())
    );
    let wait = finding(&d, FindingKind::CollectiveWait);
    assert!(
        wait.evidence[0]
            .text
            .starts_with("no straggler by its work: rank 1 on vm")
    );
    assert!(says(
        wait,
        "rank 0 waits 150.52 ms in collectives for the last rank to enter (55% of its window)"
    ));
    let exposed = finding(&d, FindingKind::ExposedCommunication);
    assert!(says(
        exposed,
        "200.42 ms of it was waiting for the last rank to enter"
    ));
}

#[test]
fn the_committed_job_names_its_straggler() {
    let files: Vec<Vec<u8>> = (0..4)
        .map(|h| fixture(&format!("job-8rank/h{h}.gputrace")))
        .collect();
    let d = diagnose(&files);
    assert_eq!(kinds(&d), vec![(FindingKind::Straggler, 983_199_072)]);
    let f = &d.findings[0];
    assert_eq!(
        f.title,
        "Rank 5 on h2 is the straggler: the other ranks wait for it in collectives"
    );
    assert!(
        f.evidence[0]
            .text
            .starts_with("rank 5 on h2 enters collectives last (100% of them)")
    );
    assert!(says(
        f,
        "its own work a step 7.58 ms against the median rank's 4.36 ms"
    ));
    assert_eq!(d.gpus.len(), 8);
    assert!((f.share - 0.546).abs() < 0.001, "{}", f.share);
}
