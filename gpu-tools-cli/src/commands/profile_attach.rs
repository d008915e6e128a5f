//! `gpu-tools profile --pid PID [--pc-sampling | --metrics ... | --set basic] [--duration S]`: stall reasons per
//! function, or per-kernel metrics, of a running process.
//!
//! The injection library is loaded into the process and waits: the attach (the socket, the injection, the one
//! connection, the control bytes and the stop) is `gpu_tools_injection::attach`'s, as for `trace --pid`; this file
//! holds the profiling handshake around it. CUPTI 13.0's PC-sampling calls deadlock a program whose threads launch
//! meanwhile (see `pc_attach` in the injection library), so every start and finish goes the same way: every thread
//! of the process is stopped (`gpu_tools::linux::quiesce`) but the library's, the driver's, and those the driver or
//! CUPTI started (told by where their stacks begin: CUPTI's workers need not have names of their own); a thread
//! inside the driver, CUPTI or the profiler host library (its program counter, or a live frame found by unwinding
//! its stack with the code's call-frame information) runs alone, in turn, until it has left them; when none is
//! inside, the library is told to make its calls, and the threads go on once it has answered. A target that keeps a
//! thread in the driver at every stop (a long synchronisation, a hang) is refused at the start after a few stops,
//! with the thread named (`stuck`); one whose threads pass through the driver is tried for a bounded time, then
//! left as it was, with the threads named.
//!
//! Kernel metrics that end on the program's thread (before its first CUDA graph launch or stream capture) end the
//! window there: it is finished at once, and the time left is the caller's ([`Collected::ended_early`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use gpu_tools::linux::quiesce::{self, StoppedThreads};
use gpu_tools::trace::{KernelMetricsRecord, NoticeLevel, ProfileLoss, Record, StallRecord};
use gpu_tools_injection::attach::{
    AfterStop, AttachError, Attached, Listening, Placement, Sockets,
};
use gpu_tools_injection::collect::{AcceptOptions, Delivery};
use gpu_tools_injection::control::Control;
use gpu_tools_injection::message::Message;
use gpu_tools_injection::profile::ProfileRequest;
use gpu_tools_injection::profile::notice::PcCounts;
use gpu_tools_injection::settings::{Destination, Settings};

use crate::failure::Failure;

mod stuck;
#[cfg(test)]
mod tests;

/// How long one stop may take, and how long the search for a moment with no thread in the vendor libraries goes
/// on before it gives up.
const STOP_LIMIT: Duration = Duration::from_secs(5);
pub const SEARCH_LIMIT: Duration = Duration::from_secs(20);
/// The search at the finish, where giving up leaves the profiling on: with 8 and 16 jobs on one H200, a finish of
/// kernel metrics (then replaying every launch) found no moment in 20 s, and the range profiler stayed on.
const FINISH_SEARCH_LIMIT: Duration = Duration::from_secs(90);
/// How long, in one stop, the threads found inside the vendor libraries run alone, in turn, to leave them (the
/// others stay stopped meanwhile), and how long one such run may take.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);
const RUN_OUT_LIMIT: Duration = Duration::from_millis(200);
/// How long the library may take to start or finish sampling while the program is stopped.
const CALL_LIMIT: Duration = Duration::from_secs(30);
/// The libraries no stopped thread may be inside when the library makes its calls.
const VENDOR: [&str; 3] = ["libcuda.so", "libcupti.so", "libnvperf"];

/// What the run collected.
#[derive(Default)]
pub struct Collected {
    pub stalls: Vec<StallRecord>,
    /// Kernel-metrics records (ranges named after their launches).
    pub metrics: Vec<KernelMetricsRecord>,
    pub losses: Vec<ProfileLoss>,
    pub notices: Vec<(NoticeLevel, String)>,
    /// The library's messages (the coded notices among `notices`), read by their values.
    pub messages: Vec<Message>,
    /// Stops until a moment with no thread inside the vendor libraries, and the times a thread ran alone to leave
    /// them, at start and at finish.
    pub tries: [(u32, u32); 2],
    pub sampled: Duration,
    /// The contexts profiling started in, as the start's answer said.
    pub contexts: Option<usize>,
    /// Kernel metrics ended on the program's thread (at its first CUDA graph launch or stream capture) this long
    /// after the start: the window was finished then, its rest left to the caller.
    pub ended_early: Option<Duration>,
}

impl Collected {
    /// Where the library said PC sampling stayed on in process `pid` (its finish failed), notes the holder for
    /// whoever is refused the GPU's counters next (`pc_left_on`).
    pub fn note_pc_left_on(&self, pid: u32) {
        if self.pc_left_on() {
            crate::pc_left_on::note(pid);
        }
    }

    /// CUPTI's PC sampling counts over every context (`None` where no count came).
    pub fn pc_counts(&self) -> Option<PcCounts> {
        pc_counts_of(&self.messages)
    }

    /// The program's CPU time and the window's, in ms, where the library said the program was idle in a PC sampling
    /// window without stall records (`Message::PcSampledIdle`).
    pub fn sampled_idle(&self) -> Option<(u64, u64)> {
        self.messages.iter().find_map(|m| match m {
            Message::PcSampledIdle { cpu_ms, window_ms } => Some((*cpu_ms, *window_ms)),
            _ => None,
        })
    }

    /// Whether the library said PC sampling stays on in a context (its stop or disable failed).
    pub fn pc_left_on(&self) -> bool {
        self.messages
            .iter()
            .any(|m| matches!(m, Message::PcLeftOn { .. }))
    }
}

/// CUPTI's PC sampling counts in `messages`, summed over every context (`None` where no count came).
pub fn pc_counts_of(messages: &[Message]) -> Option<PcCounts> {
    let mut all: Option<PcCounts> = None;
    for c in messages.iter().filter_map(|m| match m {
        Message::PcCounts(c) => Some(*c),
        _ => None,
    }) {
        let sum = all.get_or_insert_with(PcCounts::default);
        sum.samples += c.samples;
        sum.records += c.records;
        sum.dropped += c.dropped;
        sum.non_user += c.non_user;
        sum.truncated_pcs += c.truncated_pcs;
        sum.full_buffer_reads += c.full_buffer_reads;
    }
    all
}

/// Threads left running while the program is stopped, by name: the library's own (and those its calls start, which
/// take its name) and the driver's. The vendor libraries' threads are told by where they began (`quiet_moment`).
fn spared(name: &std::ffi::OsStr) -> bool {
    let name = name.to_string_lossy();
    name.starts_with("gpu-tools") || name.starts_with("cuda")
}

/// The records of the library's stream, as they arrive: what else its connection delivers is passed over (its
/// bytes, its header, a damaged frame), and its close ends them, as the end of the channel does.
struct Records {
    rx: mpsc::Receiver<Delivery>,
    closed: bool,
}

impl Records {
    /// The next record within `limit`.
    fn recv_timeout(&mut self, limit: Duration) -> Result<Record, RecvTimeoutError> {
        let until = Instant::now() + limit;
        while !self.closed {
            let left = until.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left)? {
                Delivery::Item(_, Ok(record)) => return Ok(record),
                Delivery::Closed(_) => self.closed = true,
                _ => {}
            }
        }
        Err(RecvTimeoutError::Disconnected)
    }

    /// The next record already there.
    fn try_recv(&mut self) -> Option<Record> {
        while !self.closed {
            match self.rx.try_recv().ok()? {
                Delivery::Item(_, Ok(record)) => return Some(record),
                Delivery::Closed(_) => self.closed = true,
                _ => {}
            }
        }
        None
    }
}

/// How a wait for the library's message ended. A closed connection is not a timeout: a process that dies takes the
/// library's connection with it, and the wait ends then, not at its limit (a CuPy graph job that died of SIGSEGV
/// 2.7 s into a finish was said not to have answered "within 30 s").
#[derive(Debug)]
enum Waited {
    /// The message waited for.
    Got(Message),
    /// The limit passed, the connection still open: the library is slow, or stuck.
    TimedOut,
    /// The connection closed (the library ended, or its process did) this long into the wait, with no such message.
    Closed { after: Duration },
}

/// Waits for a message that `wanted` accepts, at most `limit`; keeps what arrives meanwhile.
fn wait_for(
    rx: &mut Records,
    out: &mut Collected,
    wanted: fn(&Message) -> bool,
    limit: Duration,
) -> Waited {
    let began = Instant::now();
    let until = began + limit;
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(record) => {
                if let Some(message) = keep(record, out) {
                    if wanted(&message) {
                        return Waited::Got(message);
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => return Waited::TimedOut,
            Err(RecvTimeoutError::Disconnected) => {
                return Waited::Closed {
                    after: began.elapsed(),
                };
            }
        }
    }
    Waited::TimedOut
}

/// How long a closed connection waits for its process to end before the process is said to run on: a dying
/// process closes its files (the library's socket among them) before it ends, and a GPU program's exit (its
/// driver's files closed too) may take a while.
const EXIT_GRACE: Duration = Duration::from_secs(1);

/// Whether process `pid` has ended (gone, or a zombie waiting for its parent) within `grace`.
fn ends_within(pid: u32, grace: Duration) -> bool {
    let until = Instant::now() + grace;
    loop {
        let process = gpu_tools::linux::procfs::Process::new(pid);
        if !process.exists() || process.stat().is_ok_and(|s| s.has_ended()) {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A closed connection said as such, never as a timeout: how long after `since` it closed, and whether the process
/// ended (then its death is the likeliest cause, `died` says when: a crash closes the library's connection with
/// the rest of its files) or runs on (the library ended its connection, or lost it: its log may say why).
/// `seen_before`: what is known to have killed processes in such a call, said when this one ended.
fn closed_connection(
    pid: u32,
    after: Duration,
    (since, died): (&str, &str),
    seen_before: Option<&str>,
) -> String {
    let fate = if ends_within(pid, EXIT_GRACE) {
        let seen = seen_before.map(|s| format!(" ({s})")).unwrap_or_default();
        format!("process {pid} ended, most likely it died {died}{seen}")
    } else {
        format!(
            "process {pid} is still running (set {}=debug to see the library's log in the process's stderr)",
            gpu_tools_injection::env::LOG
        )
    };
    format!(
        "process {pid}: the injection library's connection closed {} ms after {since}, with no answer: {fate}",
        after.as_millis()
    )
}

/// Keeps a record (a notice's text among the notices shown, a message's too); returns the message it carries, if
/// it carries one.
fn keep(record: Record, out: &mut Collected) -> Option<Message> {
    match record {
        Record::Stall(s) => out.stalls.push(s),
        Record::KernelMetrics(m) => out.metrics.push(m),
        Record::ProfileLoss(l) => out.losses.push(l),
        Record::Notice(n) => out.notices.push((n.level, n.text)),
        Record::CodedNotice(n) => {
            let message = Message::read(&n);
            out.notices.push((n.level, n.text));
            if let Some(m) = &message {
                out.messages.push(m.clone());
            }
            return message;
        }
        _ => {}
    }
    None
}

/// Which call of the library a quiet moment is for.
#[derive(Clone, Copy)]
enum Moment<'a> {
    /// The start: nothing is started yet, so a thread stuck inside the vendor libraries refuses the profile at once
    /// (`stuck`). `flight_recorder`: whether the attach leaves a recorder, for the refusal's advice; `search`: how
    /// long the search for a moment goes on before the process is left as it was.
    Start {
        flight_recorder: bool,
        search: Duration,
    },
    /// The finish: the threads there before sampling (of those that appeared since, CUPTI's are left running and
    /// the program's held: `new_vendor_threads`), and what stays on in the process if no moment is found.
    Finish {
        before: &'a BTreeSet<u32>,
        left_on: LeftOn,
    },
}

impl Moment<'_> {
    fn before(&self) -> Option<&BTreeSet<u32>> {
        match self {
            Moment::Start { .. } => None,
            Moment::Finish { before, .. } => Some(before),
        }
    }

    /// How long the search goes on: at the start nothing is on yet, and giving up leaves the process as it was; at
    /// the finish, giving up leaves the profiling on, so the search is longer.
    fn search_limit(&self) -> Duration {
        match self {
            Moment::Start { search, .. } => *search,
            Moment::Finish { .. } => FINISH_SEARCH_LIMIT,
        }
    }

    /// What an unanswered call leaves: the library goes on with it while the program runs again.
    fn unanswered(&self) -> &'static str {
        match self {
            Moment::Start { .. } => {
                "the process runs on; if the library starts the profile later, it ends it itself once it finds this \
                 tool gone"
            }
            Moment::Finish { .. } => {
                "the library goes on finishing (decoding what was profiled and ending CUPTI's profiler or sampler) \
                 while the program runs again; until it ends, it holds the GPU's performance counters, and other \
                 tools' counters and PC sampling on this GPU are refused"
            }
        }
    }

    /// What is known to have killed processes in this call: PC sampling's finish (CUPTI 13.0's readout), four
    /// times on GPUs shared by 11 to 16 profiled jobs (docs/driver-notes.md).
    fn seen_to_kill(&self) -> Option<&'static str> {
        match self {
            Moment::Finish {
                left_on: LeftOn::PcSampling,
                ..
            } => Some(
                "CUPTI 13.0 has killed jobs with SIGSEGV while reading PC samples out at a finish; its backtrace, if \
                 the process printed one, would show cuptiPCSamplingGetData or cuptiPCSamplingDisable",
            ),
            _ => None,
        }
    }

    /// The call, for the line of a connection that closed before its answer.
    fn call(&self) -> &'static str {
        match self {
            Moment::Start { .. } => "the call to start profiling was sent",
            Moment::Finish { .. } => "the call to finish profiling was sent",
        }
    }

    /// What giving up leaves, in a sentence.
    fn given_up(&self) -> &'static str {
        match self {
            Moment::Start { .. } => "the process was left as it was",
            Moment::Finish { left_on, .. } => left_on.text(),
        }
    }
}

/// What stays on in the process when the finish finds no moment to end it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LeftOn {
    /// PC sampling: ended by nothing (the library cannot end it safely while the program launches).
    PcSampling,
    /// The range profiler with named ranges: the program's next kernel launch ends it, on its own thread.
    RangeProfiler,
    /// Nothing: the range profiler ended on the program's thread, or never started.
    Nothing,
}

impl LeftOn {
    fn text(self) -> &'static str {
        match self {
            LeftOn::PcSampling => {
                "PC sampling stays on in the process for the rest of its life (ending it while a thread is inside \
                 the driver could deadlock the program): it holds the GPU's sampling hardware, and other tools' PC \
                 sampling and counters on this GPU may fail meanwhile"
            }
            LeftOn::RangeProfiler => {
                "the range profiler stays on until the program's next kernel launch ends it, on the launching thread"
            }
            LeftOn::Nothing => {
                "nothing of the profile stays on in the process (the range profiler had ended)"
            }
        }
    }
}

/// Where a thread still inside the vendor libraries at the end of a stop was found, for `stuck`.
fn sighting(i: &quiesce::Inside) -> stuck::Sighting {
    let file = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let place = match &i.evidence {
        quiesce::Evidence::ProgramCounter { library, .. } => stuck::Place::Runs(file(library)),
        quiesce::Evidence::Frame { library, .. } | quiesce::Evidence::StackWord { library, .. } => {
            stuck::Place::Waits(file(library))
        }
        quiesce::Evidence::StackUnreadable { detail } => {
            stuck::Place::Unknown(format!("its stack could not be read: {detail}"))
        }
        other => stuck::Place::Unknown(format!("{other:?}")),
    };
    stuck::Sighting {
        tid: i.tid,
        name: i.name.to_string_lossy().into_owned(),
        place,
    }
}

/// At the finish, the threads that appeared since the start and are not yet told apart: those whose walk shows the
/// program started them join `held` (a program thread made during the window is held outside the driver as the
/// others are: CUPTI reads out its samples and disables the sampling at the finish, and a thread loading code then
/// is what the hold keeps out); the others join `vendor_owned`, left running from the next stop on, and are
/// returned. CUPTI's PC-sampling threads appear during the window, named after the program's thread that enabled
/// them; a launching thread waits for them (seen on an H100: stopped, the launching thread never left CUPTI), so a
/// thread whose walk stops short is left running as they are.
fn new_vendor_threads(
    stopped: &StoppedThreads,
    before: &BTreeSet<u32>,
    ranges: &[quiesce::CodeRange],
    unwinder: &mut quiesce::Unwinder,
    vendor_owned: &mut BTreeSet<u32>,
    held: &mut BTreeSet<u32>,
) -> Vec<u32> {
    let unknown: Vec<u32> = stopped
        .threads()
        .iter()
        .map(|t| t.tid)
        .filter(|t| !before.contains(t) && !vendor_owned.contains(t) && !held.contains(t))
        .collect();
    if unknown.is_empty() {
        return Vec::new();
    }
    let program = stopped.started_outside(ranges, unwinder);
    let mut left = Vec::new();
    for tid in unknown {
        if program.contains(&tid) {
            log::info!(
                "thread {tid} appeared during the window and the program started it: held at the finish"
            );
            held.insert(tid);
        } else if vendor_owned.insert(tid) {
            left.push(tid);
        }
    }
    left
}

/// Stops the program where no thread is inside the vendor libraries: a thread found inside runs alone, in turn,
/// until it has left them (a launch holds the driver's lock for microseconds); when that takes too long, the
/// program goes on a moment and is stopped again, until the moment's limit. At the start, a thread found inside at the
/// end of every stop refuses the profile after a few (`stuck`). Returns the stopped program, the stops and the times
/// a thread ran alone.
fn quiet_moment(pid: u32, moment: Moment<'_>) -> Result<(StoppedThreads, u32, u32), Failure> {
    let before = moment.before();
    let started = Instant::now();
    let mut tries = 0;
    let mut nudges = 0;
    // The modules' call-frame information, read once: the live frames are walked, not every stack word.
    let mut unwinder = quiesce::Unwinder::default();
    // What kept it busy: thread, and where (program counter, or a stack word and its depth), by count.
    let mut seen: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
    // Threads the vendor libraries started, found at a stop: left running from the next stop on.
    let mut vendor_owned: BTreeSet<u32> = BTreeSet::new();
    // At the finish: threads the program started since the start, held as the others are.
    let mut held_new: BTreeSet<u32> = BTreeSet::new();
    // The threads found inside at the end of the last stops (at the start only).
    let mut watch = matches!(moment, Moment::Start { .. }).then(stuck::Watch::default);
    let limit = moment.search_limit();
    // A thread inside a fork may hold what the driver's fork handler took, with no driver frame to show for it.
    let fork = quiesce::fork_code_ranges(pid).map_err(|e| {
        Failure::new(
            1,
            format!(
                "process {pid}: its C library's fork functions could not be read, so a thread inside a fork (which \
                 may hold the CUDA driver's locks) could not be told; nothing was sampled: {e}"
            ),
        )
    })?;
    let mut said_still = false;
    while started.elapsed() < limit {
        if !said_still && started.elapsed() >= SEARCH_LIMIT {
            said_still = true;
            eprintln!(
                "gpu-tools profile: process {pid}: still looking for a moment with no thread inside the CUDA driver \
                 or CUPTI to finish (for up to {} s more): until then the profiling stays on",
                (limit - SEARCH_LIMIT).as_secs()
            );
        }
        tries += 1;
        let stop_began = started.elapsed();
        let ended = || Failure::new(1, format!("process {pid} ended before it could be sampled"));
        let ranges = quiesce::library_code_ranges(pid, &VENDOR).map_err(|_| ended())?;
        // Where no stopped thread may be: the vendor libraries, and a fork.
        let busy: Vec<quiesce::CodeRange> = ranges.iter().chain(&fork).cloned().collect();
        let spare = |tid: u32, name: &std::ffi::OsStr| spared(name) || vendor_owned.contains(&tid);
        let mut stopped = match StoppedThreads::stop(pid, &spare, STOP_LIMIT) {
            Ok(s) => s,
            Err(_) if !Path::new(&format!("/proc/{pid}")).exists() => return Err(ended()),
            Err(e) => return Err(Failure::error(e)),
        };
        // CUPTI's workers (a `torch.profiler` session leaves some behind, and the rule by name does not spare
        // them): stopped, they are inside CUPTI for good, or hold what a program thread there waits for.
        let mut new: Vec<u32> = stopped
            .started_in(&ranges, &mut unwinder)
            .into_iter()
            .filter(|tid| vendor_owned.insert(*tid))
            .collect();
        if let Some(before) = before {
            new.extend(new_vendor_threads(
                &stopped,
                before,
                &ranges,
                &mut unwinder,
                &mut vendor_owned,
                &mut held_new,
            ));
        }
        if !new.is_empty() {
            log::info!("threads started by the driver or CUPTI, left running from now on: {new:?}");
            drop(stopped);
            continue;
        }
        let draining = Instant::now();
        let inside = loop {
            let inside = stopped.frames_inside(&busy, &mut unwinder);
            if inside.is_empty() {
                log::info!("quiet after {tries} stops and {nudges} runs alone: {seen:?}");
                return Ok((stopped, tries, nudges));
            }
            // Threads found inside at the end of the stop before had the whole drain then: a short one now.
            let drain = match &watch {
                Some(w) if w.all_seen_before(inside.iter().map(|i| i.tid)) => stuck::SHORT_DRAIN,
                _ => DRAIN_LIMIT,
            };
            if draining.elapsed() >= drain || inside.iter().any(|i| in_fork(i, &fork)) {
                // A thread in a fork is not run alone: the breakpoint that ends its run would be copied into the
                // child, which returns to the same address. The program goes on a moment instead.
                break inside;
            }
            // A thread running in the vendor code first: it may hold a lock that one deeper inside waits for
            // (seen with Kineto's callbacks on: the main thread waited in CUPTI for the autograd thread).
            let mut tids: Vec<(bool, u32)> = inside
                .iter()
                .map(|i| {
                    let running = matches!(i.evidence, quiesce::Evidence::ProgramCounter { .. });
                    (!running, i.tid)
                })
                .collect();
            tids.sort_unstable();
            let mut seen = BTreeSet::new();
            tids.retain(|t| seen.insert(t.1));
            let forking = run_out(
                &mut stopped,
                &tids,
                (&busy, &fork),
                &mut unwinder,
                &mut nudges,
            );
            if forking {
                break stopped.frames_inside(&busy, &mut unwinder);
            }
        };
        drop(stopped);
        if let (
            Some(w),
            Moment::Start {
                flight_recorder, ..
            },
        ) = (watch.as_mut(), moment)
        {
            let sightings = inside.iter().map(sighting).collect();
            if let Some(found) = w.stop_ended(stop_began, started.elapsed(), sightings) {
                log::info!("stuck after {tries} stops and {nudges} runs alone: {seen:?}");
                return Err(Failure::new(1, found.refusal(pid, flight_recorder)));
            }
        }
        note_seen(&mut seen, &inside);
        // Let it run a moment: a launch takes microseconds, a synchronise longer.
        std::thread::sleep(Duration::from_millis(if tries < 50 { 1 } else { 10 }));
    }
    Err(no_moment(pid, &moment, (tries, nudges), seen))
}

/// Runs each thread of `tids` alone out of the outermost frame it has in `busy` (to that frame's return address),
/// the others stopped; returns true, having run none after it, at the first found inside a fork (`fork`).
fn run_out(
    stopped: &mut StoppedThreads,
    tids: &[(bool, u32)],
    (busy, fork): (&[quiesce::CodeRange], &[quiesce::CodeRange]),
    unwinder: &mut quiesce::Unwinder,
    nudges: &mut u32,
) -> bool {
    for &(_, tid) in tids {
        let frames = stopped.frames(tid, unwinder);
        // Inside a fork (a driver's fork handler, say): not run alone. The breakpoint that ends its run would be
        // copied into the child, which returns to the same address.
        if frames
            .as_ref()
            .is_some_and(|(pcs, _)| pcs.iter().any(|pc| fork.iter().any(|r| r.contains(*pc))))
        {
            return true;
        }
        *nudges += 1;
        let out = frames.and_then(|(pcs, _)| {
            let outer = pcs
                .iter()
                .rposition(|pc| busy.iter().any(|r| r.contains(*pc)))?;
            pcs.get(outer + 1).copied()
        });
        let ran = match out {
            Some(address) => stopped.run_to(tid, address, RUN_OUT_LIMIT).map(|_| ()),
            None => stopped.nudge(tid, Duration::ZERO).map(|_| ()),
        };
        // One that could not leave stays stopped where it was; it is tried again once the others left (it may
        // have waited for one of them), until the drain's time is up.
        if let Err(e) = ran {
            log::debug!("thread {tid} did not leave the vendor code: {e}");
        }
    }
    false
}

/// Counts where each thread found inside at a stop's end was (thread name and place), for the message of a search
/// that gives up.
fn note_seen(seen: &mut std::collections::HashMap<String, u32>, inside: &[quiesce::Inside]) {
    for i in inside {
        let lib = |p: &Path| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let at = match &i.evidence {
            quiesce::Evidence::ProgramCounter { library, .. } => {
                format!("running in {}", lib(library))
            }
            quiesce::Evidence::StackWord {
                offset, library, ..
            } => {
                format!("{} on its stack at {} KiB", lib(library), offset / 1024)
            }
            quiesce::Evidence::Frame { depth, library, .. } => {
                format!("{} in its frame {depth}", lib(library))
            }
            other => format!("{other:?}"),
        };
        *seen
            .entry(format!("{} ({at})", i.name.to_string_lossy()))
            .or_default() += 1;
    }
}

/// Whether what placed a thread inside the code was in one of the C library's fork functions.
fn in_fork(inside: &quiesce::Inside, fork: &[quiesce::CodeRange]) -> bool {
    let at = match inside.evidence {
        quiesce::Evidence::ProgramCounter { pc, .. } | quiesce::Evidence::Frame { pc, .. } => pc,
        quiesce::Evidence::StackWord { value, .. } => value,
        _ => return false,
    };
    fork.iter().any(|r| r.contains(at))
}

/// The search for a quiet moment gave up: what kept the threads inside, the commonest first.
fn no_moment(
    pid: u32,
    moment: &Moment<'_>,
    (tries, nudges): (u32, u32),
    seen: std::collections::HashMap<String, u32>,
) -> Failure {
    let mut common: Vec<(String, u32)> = seen.into_iter().collect();
    common.sort_by_key(|c| std::cmp::Reverse(c.1));
    let common: Vec<String> = common
        .iter()
        .take(6)
        .map(|(k, n)| format!("{k} {n} times"))
        .collect();
    Failure::new(
        1,
        format!(
            "process {pid}: no moment without a thread inside the CUDA driver or CUPTI in {} s ({tries} stops, \
             {nudges} runs alone; still inside at the end of a stop: {}); {}",
            moment.search_limit().as_secs(),
            common.join(", "),
            moment.given_up()
        ),
    )
}

/// Sends `control` to the library while the program is stopped at a quiet moment, and waits for its answer.
fn call_stopped(
    pid: u32,
    session: &Attached,
    control: Control,
    answer: fn(&Message) -> bool,
    rx: &mut Records,
    out: &mut Collected,
    moment: Moment<'_>,
) -> Result<(Message, (u32, u32)), Failure> {
    let (stopped, tries, nudges) = quiet_moment(pid, moment)?;
    session
        .send(control)
        .map_err(|e| Failure::new(1, format!("process {pid}: the library's connection: {e}")))?;
    let waited = wait_for(rx, out, answer, CALL_LIMIT);
    // The program goes on whatever the answer.
    stopped.resume().map_err(Failure::error)?;
    answered(pid, &moment, waited).map(|message| (message, (tries, nudges)))
}

/// The answer to a call made at `moment`, or why none came: a timeout (the library may still answer, and goes on
/// meanwhile), or a closed connection (nothing more comes: said with how long it took and whether the process
/// ended, as a death during the call closes it at once).
fn answered(pid: u32, moment: &Moment<'_>, waited: Waited) -> Result<Message, Failure> {
    match waited {
        Waited::Got(message) => Ok(message),
        Waited::TimedOut => Err(Failure::new(
            1,
            format!(
                "process {pid}: the injection library did not answer within {} s: {}",
                CALL_LIMIT.as_secs(),
                moment.unanswered()
            ),
        )),
        Waited::Closed { after } => Err(Failure::new(
            1,
            closed_connection(
                pid,
                after,
                (moment.call(), "during the call"),
                moment.seen_to_kill(),
            ),
        )),
    }
}

/// The shortest PC sampling window of a running process. A 0.1 s window of an eager PyTorch job (H200, CUPTI 13.0,
/// driver 580) got no answer to its finish in 30 s, and the job made no progress after it; every window of 1 s or
/// more on that machine returned (docs/driver-notes.md).
pub const MIN_PC_WINDOW: Duration = Duration::from_secs(1);

/// How a profiling window of [`run`] goes.
#[derive(Debug, Clone, Copy)]
pub struct Window<'a> {
    /// The command its lines on stderr name (`profile`, or `trace` for the PC sampling before a first trace).
    pub who: &'a str,
    /// How long it profiles (`None`: until Ctrl-C).
    pub duration: Option<f64>,
    /// Whether the attach leaves a flight recorder in the process.
    pub flight_recorder: bool,
    /// How long the start looks for a moment with no thread inside the vendor libraries before it leaves the
    /// process as it was ([`SEARCH_LIMIT`] for `profile`).
    pub start_search: Duration,
}

/// Samples PCs of process `pid` for the window's duration (or until Ctrl-C); with metrics in `request` (and no PC
/// sampling), runs CUPTI's range profiler on its contexts instead (auto ranges, kernel replay).
pub fn run(
    pid: u32,
    lib: &Path,
    cupti: Option<&Path>,
    request: &ProfileRequest,
    window: &Window<'_>,
) -> Result<Collected, Failure> {
    let Window {
        who,
        duration,
        flight_recorder,
        start_search,
    } = *window;
    let metrics: &[String] = if request.pc_sampling {
        &[]
    } else {
        &request.metrics
    };
    let stop = crate::interrupt::stop_flag();
    let (session, mut rx) = attach(pid, lib, cupti, request, flight_recorder)?;
    let mut out = Collected::default();
    // Where the window ends before its start (refused by the library, or no moment to start found), the library's
    // attach thread is let end before the error returns: a later attach to the process (the trace after its PC
    // sampling primer) was refused as busy while it ran.
    let ended_early = |session: Attached, rx: &mut Records, out: &mut Collected, f: Failure| {
        session.stop(AfterStop::CloseWrites);
        read_to_end(rx, out);
        f
    };
    if let Err(f) = wait_ready(pid, &mut rx, &mut out) {
        return Err(ended_early(session, &mut rx, &mut out, f));
    }
    // The threads before sampling: of those that appear after it, CUPTI's are left running at the finish.
    let before: BTreeSet<u32> = gpu_tools::linux::procfs::Process::new(pid)
        .thread_ids()
        .map_err(|e| Failure::new(1, format!("process {pid}: {e}")))?
        .into_iter()
        .collect();
    let started = call_stopped(
        pid,
        &session,
        Control::ProfileStart,
        |m| matches!(m, Message::ProfileStarted { .. }),
        &mut rx,
        &mut out,
        Moment::Start {
            flight_recorder,
            search: start_search,
        },
    );
    let (started, tries) = match started {
        Ok(s) => s,
        Err(f) => return Err(ended_early(session, &mut rx, &mut out, f)),
    };
    out.tries[0] = tries;
    if let Message::ProfileStarted { contexts, .. } = &started {
        out.contexts = usize::try_from(*contexts).ok();
    }
    log::info!("{started} ({tries:?} stops and runs alone)");
    eprintln!(
        "gpu-tools {who}: {} process {pid} (Ctrl-C to stop{})",
        if metrics.is_empty() {
            "sampling PCs of"
        } else {
            "profiling the kernels of"
        },
        duration
            .map(|d| format!(", or after {d} s"))
            .unwrap_or_default()
    );
    let least = if request.pc_sampling {
        MIN_PC_WINDOW
    } else {
        Duration::ZERO
    };
    out.sampled = collect_until_stop(
        pid,
        duration,
        (!metrics.is_empty(), least),
        &stop,
        &mut rx,
        &mut out,
    );
    let left_on = if request.pc_sampling {
        LeftOn::PcSampling
    } else if out.ended_early.is_some() {
        LeftOn::Nothing
    } else {
        LeftOn::RangeProfiler
    };
    let finished = if Path::new(&format!("/proc/{pid}")).exists() {
        let (finished, tries) = call_stopped(
            pid,
            &session,
            Control::ProfileFinish,
            |m| matches!(m, Message::ProfileFinished { .. }),
            &mut rx,
            &mut out,
            Moment::Finish {
                before: &before,
                left_on,
            },
        )?;
        out.tries[1] = tries;
        Some(finished.to_string())
    } else {
        None
    };
    log::info!("{finished:?}");
    // The stop byte, then the connection's writing half closed.
    session.stop(AfterStop::CloseWrites);
    // The rest of the stream, until the library ends it; then its connection's close (the library's attach thread
    // ends right after it, and a later attach, such as the counters' window, is refused while it runs).
    read_to_end(&mut rx, &mut out);
    Ok(out)
}

/// Attaches the library to process `pid`, profiling as `request` says, and waits for its connection: the session
/// and the records of the connection. A refused process is the error.
fn attach(
    pid: u32,
    lib: &Path,
    cupti: Option<&Path>,
    request: &ProfileRequest,
    flight_recorder: bool,
) -> Result<(Attached, Records), Failure> {
    // As a trace's: a process in a mount namespace of its own (a container) connects to a socket in its own /tmp.
    let sockets = Sockets {
        prefix: "gpu-tools-profile-",
        name: "profile.sock",
        placement: Placement::PerMountNamespace,
    };
    let listening = Listening::new(&[pid], &sockets).map_err(|e| Failure::new(1, e.to_string()))?;
    // The same settings as a launched profile's (the destination is the process's socket, written by the attach),
    // with the CUPTI the tracer found for a process that maps none, and the flight recorder asked for.
    let settings = Settings {
        cupti: cupti.map(Path::to_path_buf),
        flight_recorder,
        ..gpu_tools_injection::profile::settings(Destination::Socket(PathBuf::new()), request)
    };
    // The library's one connection is read; another (a forked child's) would wait unaccepted.
    let options = AcceptOptions {
        most: Some(1),
        ..AcceptOptions::default()
    };
    let (tx, rx) = mpsc::channel::<Delivery>();
    let session = listening
        .attach(lib, &settings, options, tx, |_| {})
        .map_err(|e| Failure::new(1, e.to_string()))?;
    match session.outcomes().first().map(|o| &o.result) {
        Some(Ok(_)) | None => {}
        Some(Err(AttachError::Inject(e))) => {
            return Err(Failure::new(1, super::trace::describe_inject_error(pid, e)));
        }
        Some(Err(refused)) => {
            return Err(Failure::new(
                1,
                format!("process {pid}: not profiled: {refused}"),
            ));
        }
    }
    session
        .wait_for_connections(1, Duration::from_secs(30))
        .map_err(|e| {
            Failure::new(
                1,
                format!("process {pid}: the injection library never connected: {e}"),
            )
        })?;
    Ok((session, Records { rx, closed: false }))
}

/// Waits for the library's word that it found the program's contexts; its refusal is the error.
fn wait_ready(pid: u32, rx: &mut Records, out: &mut Collected) -> Result<(), Failure> {
    let ready = wait_for(
        rx,
        out,
        |m| {
            matches!(
                m,
                Message::ProfileReady { .. } | Message::ProfileRefused { .. }
            )
        },
        CALL_LIMIT,
    );
    ready_or_not(pid, ready)
}

/// The library's word that it is ready, or why none came: its refusal, a timeout, or a closed connection (said as
/// such, with whether the process ended).
fn ready_or_not(pid: u32, waited: Waited) -> Result<(), Failure> {
    match waited {
        Waited::Got(Message::ProfileReady { .. }) => Ok(()),
        Waited::Got(refused) => Err(Failure::new(1, format!("process {pid}: {refused}"))),
        Waited::TimedOut => Err(Failure::new(
            1,
            format!(
                "process {pid}: the injection library did not get ready within {} s",
                CALL_LIMIT.as_secs()
            ),
        )),
        Waited::Closed { after } => Err(Failure::new(
            1,
            closed_connection(
                pid,
                after,
                ("it connected", "while the library got ready"),
                None,
            ),
        )),
    }
}

/// Keeps what arrives until Ctrl-C, `duration` (seconds), the process's end, or (`metrics`) the kernel metrics'
/// end on the program's thread; returns how long it was.
fn collect_until_stop(
    pid: u32,
    duration: Option<f64>,
    (metrics, least): (bool, Duration),
    stop: &AtomicBool,
    rx: &mut Records,
    out: &mut Collected,
) -> Duration {
    let from = Instant::now();
    // Ctrl-C before the shortest window waits for it: the finish comes no sooner.
    let asked_to_stop = || stop.load(Ordering::SeqCst) && from.elapsed() >= least;
    let until = duration.map(|s| from + Duration::from_secs_f64(s.max(0.0)));
    // Kernel metrics the library did not start (the program holds CUPTI's subscriber) end with the start's answer.
    if metrics
        && out
            .messages
            .iter()
            .any(|m| matches!(m, Message::MetricsEnded(_)))
    {
        out.ended_early = Some(Duration::ZERO);
        return Duration::ZERO;
    }
    while !asked_to_stop() && until.is_none_or(|u| Instant::now() < u) {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            break;
        }
        while let Some(record) = rx.try_recv() {
            // Kernel metrics that ended on the program's thread (the range profiler off): the window is finished
            // now, and its rest is the caller's (`profile --pid` gives it to PM sampling attribution).
            let message = keep(record, out);
            if metrics && matches!(message, Some(Message::MetricsEnded(_))) {
                out.ended_early = Some(from.elapsed());
            }
        }
        if out.ended_early.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    from.elapsed()
}

/// Keeps the rest of the stream, until the library ends it (at most 10 s).
fn read_to_end(rx: &mut Records, out: &mut Collected) {
    let ending = Instant::now();
    let mut ended = false;
    while ending.elapsed() < Duration::from_secs(10) {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(record) => {
                ended |= matches!(record, Record::ProcessEnd(_));
                keep(record, out);
            }
            Err(RecvTimeoutError::Timeout)
                if ended && ending.elapsed() > Duration::from_secs(2) =>
            {
                break;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
}
