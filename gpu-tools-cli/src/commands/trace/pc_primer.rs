//! PC sampling before a process's first trace, so that PC sampling after it keeps its stall records.
//!
//! What one H200 showed (driver 580, CUPTI 13.0; `docs/driver-notes.md`, "Several tools on one running job"): once
//! a process's first CUPTI use was a trace (the activity records turned on and off while its threads launch), every
//! later PC sampling window there, the program's own included, counted all its samples outside the program's kernels
//! and gave no stall record; nothing done around the trace kept it from doing so. A process whose first CUPTI use was
//! a PC sampling window with launches in it gave stall records in every later window, traces between them
//! (`gpu-host/scripts/pc_order_probe.sh`: 8,192, and 7,467 and 7,167, after a trace). So before the first trace of a
//! process, `trace --pid` samples its PCs for the shortest window known not to hang a job (1 s) and keeps nothing of
//! it, unless `--no-pc-primer` says not to. It is sampled once: the process's first PC sampling window decides for
//! its life. One of an idle program (waiting for its child: no launch, no stall record) left every later window
//! blind, a window with launches in it right after included (`pc_order_probe.sh` SET=5, an H100), so sampling again
//! would only hold the trace back.
//!
//! Where that cannot be done safely it is not done, and the trace goes on with the note that PC sampling after it
//! gives nothing:
//! - another tool holds the GPU's counters (PC sampling beside one has crashed CUDA-graph jobs), or whether one does
//!   cannot be told;
//! - the program has a profiler of its own that ever registered with CUPTI: a session of it may start during the
//!   sampling, and PC sampling beside a recording one left CUPTI delivering no activity record in the process
//!   afterwards (`ProfileRequest::primer` has the library refuse it);
//! - the process keeps a thread inside the driver: the sampling's start and finish need a moment with none, and the
//!   start looks for 3 s here, not `profile`'s 20, so that a job in a long synchronisation or under NCCL's watchdog
//!   is not held back.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

use gpu_tools_injection::profile::ProfileRequest;
use gpu_tools_injection::profile::notice::PcCounts;

use crate::failure::Failure;

/// How long the sampling's start looks for a moment with no thread of the process inside the CUDA driver or CUPTI
/// (`profile --pid` looks for 20 s): a job that keeps a thread there (a long synchronisation, NCCL's watchdog) would
/// otherwise hold its trace back that long. Past it the process is left as it was, not sampled first.
const START_SEARCH: std::time::Duration = std::time::Duration::from_secs(3);

/// What the PC sampling before a first trace came to, for each process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Primed {
    /// Sampled (later PC sampling windows were seen to keep their stall records); the stall records of the window,
    /// not kept.
    Yes { stall_records: usize },
    /// Sampled with no stall record while the program was idle (`cpu_ms` of CPU time in `window_ms`): every later PC
    /// sampling window in the process is blind, and the library refuses them. With CUPTI's counts, where they came.
    Empty {
        cpu_ms: u64,
        window_ms: u64,
        counted: Option<Counted>,
    },
    /// Sampled with no stall record while the program ran, by its CPU time (a busy GPU's sparse sampling can miss a
    /// small job's kernels): whether later windows keep their stall records is not known; they run and say what
    /// they counted. With CUPTI's counts, where they came: a job busy on the CPU that launched nothing (one waiting
    /// for its children) was judged running so, and its PC window after the trace was blind (the matrix's
    /// fork-child, an H200); what such a primer counts is what could tell it apart.
    EmptyWhileRunning { counted: Option<Counted> },
    /// Not sampled, and why: PC sampling after the trace gives nothing.
    No(String),
    /// Sampled, and its sampling could not be turned off (its disable failed): CUPTI keeps it on, and the GPU's
    /// counters held, until the process ends; a trace of it is refused (`refuse_pc_left_on`).
    LeftOn,
}

/// What CUPTI counted in a primer without stall records, over every context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    pub samples: u64,
    /// Of them, in kernels CUPTI gives no records for (outside the program's kernels).
    pub outside: u64,
}

impl Counted {
    fn of(counts: Option<PcCounts>) -> Option<Counted> {
        counts.map(|c| Counted {
            samples: c.samples,
            outside: c.non_user,
        })
    }

    /// The sentence said after the outcome.
    fn said(counted: Option<Counted>) -> String {
        match counted {
            Some(c) => format!(
                " CUPTI counted {} samples in it, {} of them outside the program's kernels.",
                c.samples, c.outside
            ),
            None => String::new(),
        }
    }
}

/// Samples the PCs of each of `pids` (processes that have not run CUPTI for gpu-tools) for 1 s. Processes on
/// different GPUs are sampled at once, those that share a GPU one after the other (two PC samplings on one GPU at
/// once would find its counters held by the other): an 8-GPU node's ranks take one window, not eight. Said on
/// stderr unless `quiet`, in lines of command `who`. The outcomes come in the order of `pids`. A Ctrl-C meanwhile
/// ends the samplings under way and is the error: nothing is traced.
pub fn prime(
    who: &str,
    pids: &[u32],
    lib: &Path,
    cupti: Option<&Path>,
    flight_recorder: bool,
    quiet: bool,
) -> Result<Vec<(u32, Primed)>, Failure> {
    let stop = crate::interrupt::stop_flag();
    let how = How {
        who,
        lib,
        cupti,
        flight_recorder,
        quiet,
    };
    let mut outcomes: Vec<(u32, Primed)> = Vec::with_capacity(pids.len());
    let mut sampled: Vec<(u32, Vec<usize>)> = Vec::new();
    for &pid in pids {
        match super::devices_of(pid) {
            Ok(devices) => sampled.push((pid, devices)),
            Err(why) => outcomes.push((
                pid,
                Primed::No(format!("which GPUs it uses could not be told ({why})")),
            )),
        }
    }
    for wave in waves(&sampled) {
        let done: Vec<(u32, Primed)> = std::thread::scope(|scope| {
            let running: Vec<_> = wave
                .iter()
                .map(|&pid| (pid, scope.spawn(move || prime_one(&how, pid))))
                .collect();
            running
                .into_iter()
                .map(|(pid, thread)| {
                    let primed = thread.join().unwrap_or_else(|_| {
                        Primed::No("the thread that sampled it failed".to_string())
                    });
                    (pid, primed)
                })
                .collect()
        });
        outcomes.extend(done);
        if stop.load(Ordering::SeqCst) {
            let which: Vec<String> = wave.iter().map(u32::to_string).collect();
            return Err(Failure::new(
                1,
                format!(
                    "interrupted during the PC sampling before the first trace of process {}: nothing was traced",
                    which.join(", ")
                ),
            ));
        }
    }
    outcomes.sort_by_key(|(pid, _)| pids.iter().position(|p| p == pid));
    Ok(outcomes)
}

/// What every sampling of one [`prime`] goes with.
#[derive(Clone, Copy)]
struct How<'a> {
    who: &'a str,
    lib: &'a Path,
    cupti: Option<&'a Path>,
    flight_recorder: bool,
    quiet: bool,
}

/// The processes in waves: within a wave no two share a GPU (each goes into the first wave whose GPUs it does not
/// use); waves run one after the other.
fn waves(processes: &[(u32, Vec<usize>)]) -> Vec<Vec<u32>> {
    let mut waves: Vec<(BTreeSet<usize>, Vec<u32>)> = Vec::new();
    for (pid, devices) in processes {
        let free = waves
            .iter()
            .position(|(taken, _)| devices.iter().all(|d| !taken.contains(d)));
        let at = free.unwrap_or_else(|| {
            waves.push((BTreeSet::new(), Vec::new()));
            waves.len() - 1
        });
        if let Some((taken, pids)) = waves.get_mut(at) {
            taken.extend(devices.iter().copied());
            pids.push(*pid);
        }
    }
    waves.into_iter().map(|(_, pids)| pids).collect()
}

/// Samples the PCs of process `pid` for 1 s, where no other tool holds its GPUs' counters.
fn prime_one(how: &How<'_>, pid: u32) -> Primed {
    if let Err(why) = counters_free(pid) {
        return Primed::No(why);
    }
    sample(how, pid)
}

/// One 1 s sampling of process `pid` for its primer.
fn sample(how: &How<'_>, pid: u32) -> Primed {
    let window = super::super::profile_attach::MIN_PC_WINDOW;
    if !how.quiet {
        eprintln!(
            "gpu-tools {}: process {pid}: PC sampling for {} s before its first trace, so that PC sampling after the \
             trace keeps its stall records (--no-pc-primer: none)",
            how.who,
            window.as_secs()
        );
    }
    let request = ProfileRequest {
        pc_sampling: true,
        primer: true,
        ..ProfileRequest::new(Vec::new())
    };
    let began = Instant::now();
    let sampled = super::super::profile_attach::run(
        pid,
        how.lib,
        how.cupti,
        &request,
        &super::super::profile_attach::Window {
            who: how.who,
            duration: Some(window.as_secs_f64()),
            flight_recorder: how.flight_recorder,
            start_search: START_SEARCH,
        },
    );
    log::info!(
        "process {pid}: PC sampling before the first trace took {:.0} ms",
        began.elapsed().as_secs_f64() * 1e3
    );
    match sampled {
        Ok(got) => {
            for (_, text) in &got.notices {
                log::info!("process {pid}: {text}");
            }
            got.note_pc_left_on(pid);
            if got.pc_left_on() {
                return Primed::LeftOn;
            }
            primed_by(
                got.stalls.len(),
                got.sampled_idle(),
                Counted::of(got.pc_counts()),
            )
        }
        Err(e) => Primed::No(e.text()),
    }
}

/// What a sampling with `stall_records` came to, `idle` what the library said of a window without any (the
/// program's CPU time and the window's, in ms, where it was idle). Only one with launches in it was seen to keep
/// later windows' stall records (`pc_order_probe.sh`); one of an idle program (waiting for a child, say) is no
/// primer, and is said as such (the matrix's fork-child job: 0 stall records before its first trace, and 0 of
/// 11,781,101 samples in a PC sampling window after it).
fn primed_by(stall_records: usize, idle: Option<(u64, u64)>, counted: Option<Counted>) -> Primed {
    match (stall_records, idle) {
        (0, Some((cpu_ms, window_ms))) => Primed::Empty {
            cpu_ms,
            window_ms,
            counted,
        },
        (0, None) => Primed::EmptyWhileRunning { counted },
        (stall_records, _) => Primed::Yes { stall_records },
    }
}

/// Whether the counters of the GPUs process `pid` uses are free: PC sampling beside a holder fails in CUPTI and
/// has crashed CUDA-graph jobs. Where that cannot be told, they are taken as held (a trace never risks the job for
/// a later window's sake).
fn counters_free(pid: u32) -> Result<(), String> {
    match super::held_elsewhere(pid) {
        Ok(held) if held.is_empty() => Ok(()),
        Ok(held) => Err(format!(
            "the performance counters of {} are held by another tool",
            super::held_devices(&held)
        )),
        Err(why) => Err(format!(
            "whether another tool holds its GPU's counters could not be told ({why})"
        )),
    }
}

/// The line said for a process after its PC sampling before the first trace (or without it).
pub fn said(pid: u32, primed: &Primed) -> String {
    match primed {
        Primed::Yes { stall_records } => format!(
            "process {pid}: sampled before its first trace ({stall_records} stall records, not kept): PC sampling \
             after the trace keeps its stall records"
        ),
        Primed::Empty {
            cpu_ms,
            window_ms,
            counted,
        } => format!(
            "process {pid}: sampled before its first trace, with no stall record while it was idle ({cpu_ms} ms of \
             CPU time in {window_ms} ms): a first sampling of an idle program left every later window blind, so PC \
             sampling is refused in it from now on.{}",
            Counted::said(*counted)
        ),
        Primed::EmptyWhileRunning { counted } => format!(
            "process {pid}: sampled before its first trace, with no stall record although it ran (a busy GPU's \
             sparse sampling can miss a small job's kernels): PC sampling after the trace runs, and says what it \
             counted.{}",
            Counted::said(*counted)
        ),
        Primed::No(why) => format!("process {pid}: not sampled before its first trace: {why}"),
        Primed::LeftOn => format!(
            "process {pid}: sampled before its first trace, and its PC sampling could not be turned off \
             (cuptiPCSamplingDisable failed): CUPTI keeps it on, and the GPU's counters held, until the process ends"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_tools_injection::message::Message;

    #[test]
    fn processes_on_different_gpus_share_a_wave_and_those_on_one_gpu_do_not() {
        // Eight ranks, one GPU each: one wave.
        let ranks: Vec<(u32, Vec<usize>)> = (0..8).map(|r| (100 + r, vec![r as usize])).collect();
        assert_eq!(waves(&ranks), vec![(100..108).collect::<Vec<u32>>()]);
        // Two processes on GPU 0, one on 1, one on 0 and 1, one on none known: 0 and 1 can go with the third and
        // the fifth; the fourth waits for both GPUs.
        let mixed = vec![
            (1, vec![0]),
            (2, vec![0]),
            (3, vec![1]),
            (4, vec![0, 1]),
            (5, vec![]),
        ];
        assert_eq!(waves(&mixed), vec![vec![1, 3, 5], vec![2], vec![4]]);
        assert!(waves(&[]).is_empty());
    }

    #[test]
    fn a_sampling_without_stall_records_is_no_primer() {
        assert_eq!(primed_by(3, None, None), Primed::Yes { stall_records: 3 });
        assert_eq!(
            primed_by(3, Some((0, 1000)), None),
            Primed::Yes { stall_records: 3 }
        );
        let idle = primed_by(0, Some((10, 1001)), None);
        assert_eq!(
            idle,
            Primed::Empty {
                cpu_ms: 10,
                window_ms: 1001,
                counted: None
            }
        );
        assert!(
            said(7, &idle).starts_with(
                "process 7: sampled before its first trace, with no stall record while it was idle (10 ms of CPU \
                 time in 1001 ms)"
            ),
            "{}",
            said(7, &idle)
        );
        let running = primed_by(0, None, None);
        assert_eq!(running, Primed::EmptyWhileRunning { counted: None });
        assert!(said(7, &running).contains("PC sampling after the trace runs"));
        assert!(said(7, &running).ends_with("says what it counted."));
        // CUPTI's counts, summed over the contexts, are said after the outcome; the outcome's words stay as they
        // were (the survival matrix reads them).
        let counts = |samples, non_user| PcCounts {
            samples,
            non_user,
            ..PcCounts::default()
        };
        let counted = Counted::of(crate::commands::profile_attach::pc_counts_of(&[
            Message::PcCounts(counts(900, 700)),
            Message::PcCounts(counts(100, 100)),
        ]));
        let running = primed_by(0, None, counted);
        assert_eq!(
            said(7, &running),
            "process 7: sampled before its first trace, with no stall record although it ran (a busy GPU's sparse \
             sampling can miss a small job's kernels): PC sampling after the trace runs, and says what it counted. \
             CUPTI counted 1000 samples in it, 800 of them outside the program's kernels."
        );
        let idle = primed_by(0, Some((10, 1001)), Counted::of(Some(counts(0, 0))));
        assert!(
            said(7, &idle)
                .contains("with no stall record while it was idle (10 ms of CPU time in 1001 ms)")
                && said(7, &idle).ends_with(
                    " CUPTI counted 0 samples in it, 0 of them outside the program's kernels."
                ),
            "{}",
            said(7, &idle)
        );
    }

    #[test]
    fn each_outcome_is_said_with_the_process_and_the_reason() {
        assert_eq!(
            said(7, &Primed::Yes { stall_records: 12 }),
            "process 7: sampled before its first trace (12 stall records, not kept): PC sampling after the trace \
             keeps its stall records"
        );
        assert_eq!(
            said(7, &Primed::No("it is stopped".into())),
            "process 7: not sampled before its first trace: it is stopped"
        );
    }
}
