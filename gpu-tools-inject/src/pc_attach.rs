//! PC sampling of a program that already runs (`gpu-tools profile --pid`), started and finished on the tracer's
//! word.
//!
//! CUPTI 13.0's PC-sampling calls hold a CUPTI mutex and take the driver's lock in write mode; a program thread
//! inside a launch holds that lock for reading and waits for the same mutex. Made from this library's thread while
//! the program launches, they deadlock it (seen three times on a PyTorch job). So this thread makes them only when
//! the tracer says: the tracer first stops every thread of the program but this one and the driver's own, checks
//! that none of them is inside the driver, CUPTI or the profiler host library (every live frame's return address
//! is on the stack), and sends the byte that starts (or finishes) sampling; this thread answers with a notice when
//! it is done, and the tracer lets the program go on. The primary contexts sampled are retained for the session
//! and released at its end; no activity record and no signal handler of the program's is touched.
//!
//! Kernel metrics (CUPTI's range profiler, auto ranges, kernel replay) go through `profiling`, as in a launched
//! profile: a callback subscriber, held from the start to the finish, names each range after its launch and
//! keeps the per-kernel limit, and the ranges are sent as kernel-metrics records. Where the subscriber cannot be
//! had (CUPTI 13.0 gives one, and a profiler inside the program, such as Kineto once `torch.profiler` has run,
//! keeps it), the range profiler is not started, and a message says the window ended at its start (see
//! `no_subscriber`).

use std::path::Path;
use std::sync::Arc;

use gpu_tools::cuda::{Context, Driver};
use gpu_tools::cupti::CuptiVersion;
use gpu_tools::cupti::callback::{CallbackDomain, Subscriber};
use gpu_tools::cupti::pc_sampling::PcSampler;
use gpu_tools::trace::{
    ClockAnchor, EndReason, NoticeLevel, ProcessInfo, ProcessStart, Record, StreamHeader,
    ThreadIds, TimestampClock,
};
use gpu_tools_injection::control::{Control, ControlReader};
use gpu_tools_injection::message::Message;
use gpu_tools_injection::profile::ProfileRequest;
use gpu_tools_injection::profile::notice::{MetricsEnd, MetricsEnded};

use crate::first_attach::FirstUse;
use crate::program_cpu;
use crate::writer::{EndCounts, Filter, Writer};
use gpu_tools_injection::settings::Settings;

/// A primary context of the program, retained for the session (released when dropped, after its collector: the
/// fields drop in order).
struct Sampled {
    sampler: Option<PcSampler<'static>>,
    id: u32,
    ctx: Context,
}

/// The attach thread's work: PC sampling, or kernel metrics when `request` asks for metrics and not for PC
/// sampling. `cupti`: the CUPTI to load where the program maps none.
pub fn run(config: &Settings, cupti: Option<&Path>, request: &ProfileRequest) {
    let Some(sink) = crate::session::open_sink(config) else {
        return;
    };
    crate::session::use_mapped_libraries();
    let mapped = gpu_tools::linux::procfs::Process::current()
        .mapped_library("libcupti.so")
        .is_some();
    if let (false, Some(path)) = (mapped, cupti) {
        if let Err(e) = gpu_tools::cupti::CuptiLibrary::load_from(path) {
            log::warn!("CUPTI {} did not load: {e}", path.display());
        }
    }
    let Some(control) = sink.control_stream() else {
        return;
    };
    let named = crate::session::StreamPids::of(config);
    let writer = Arc::new(Writer::new(
        sink,
        &StreamHeader::new(named.pid, 0, TimestampClock::Monotonic)
            .with_thread_ids(ThreadIds::Vendor),
        Filter::default(),
    ));
    writer.push(&Record::ProcessStart(ProcessStart {
        pid: named.pid,
        parent_pid: named.parent,
        time: gpu_tools::cupti::activity::Clock::Monotonic.now_ns(),
        command: String::new(),
    }));
    writer.push(&Record::ProcessInfo(ProcessInfo::current()));
    if let Some(note) = named.note() {
        writer.notice(gpu_tools::trace::NoticeLevel::Info, note);
    }
    writer.push(&Record::ClockAnchor(ClockAnchor::now()));
    // Before anything of CUPTI's is touched, the look for the program's profiler included (it registers CUPTI's
    // buffer callbacks twice, which a profiler recording meanwhile may feel).
    if let Some(reason) = xla_refusal(request).or_else(|| blind_refusal(request)) {
        writer.message(&Message::ProfileRefused {
            reason: reason.to_string(),
        });
        return end(&writer);
    }
    if mapped {
        // PC sampling before any other in the process: where the program's own profiler used the activity API
        // before it, the window would count every sample outside the program's kernels.
        let first_pc = request.pc_sampling && !crate::first_attach::pc_sampled();
        if let Some(refusal) = program_profiler_refusal(request.primer, first_pc) {
            writer.message(&Message::ProfileRefused { reason: refusal });
            return end(&writer);
        }
    }
    let mut contexts = match primary_contexts() {
        Ok(c) if !c.is_empty() => c,
        Ok(_) => {
            writer.message(&Message::ProfileRefused {
                reason: "no device has an active context in this process".into(),
            });
            return end(&writer);
        }
        Err(e) => {
            writer.message(&Message::ProfileRefused { reason: e });
            return end(&writer);
        }
    };
    writer.message(&Message::ProfileReady {
        contexts: contexts.len() as u64,
        // SAFETY: gettid has no preconditions.
        thread: u64::try_from(unsafe { libc::gettid() }).unwrap_or(0),
    });
    // Kernel metrics trace: noted once the attach reaches CUPTI (one refused before does not count as the first).
    // PC sampling is noted once it started in a context: a window that sampled nothing primes nothing.
    if !request.pc_sampling {
        crate::first_attach::note(crate::first_attach::Kind::Trace);
    }
    // Kernel metrics take the callback subscriber for their window (named ranges): a recorder an earlier attach left
    // stops for it. PC sampling leaves a recorder on: stopping it for the window did not keep PC sampling after a
    // trace from being blind (docs/driver-notes.md). Either way the recorder starts (again) inside the finish.
    let mut recorder_stopped = false;
    let mut finished = false;
    let metrics: &[String] = if request.pc_sampling {
        &[]
    } else {
        &request.metrics
    };
    // Kernel metrics with named ranges: the subscriber, from start to finish.
    let mut named: Option<Subscriber> = None;
    // PC sampling: when it started in some context, and the program's CPU time then.
    let mut sampling_since: Option<program_cpu::Snapshot> = None;
    for asked in ControlReader::new(control) {
        match asked {
            Control::ProfileStart => {
                if named.is_some() || contexts.iter().any(|c| c.sampler.is_some()) {
                    continue;
                }
                if metrics.is_empty() {
                    sampling_since = start_sampling(&writer, &mut contexts, request.primer);
                } else {
                    recorder_stopped |= stop_recorder_for_metrics(&writer);
                    match start_named(&writer, &contexts, request) {
                        Ok(s) => named = Some(s),
                        Err(why) => no_subscriber(&writer, &why),
                    }
                }
            }
            Control::ProfileFinish => {
                let done = match named.take() {
                    Some(subscriber) => finish_named(&writer, subscriber),
                    None => finish_sampling(&writer, &mut contexts, sampling_since.take()),
                };
                // The recorder starts here, while the program's threads are held outside the driver, never after
                // the tracer has let them go: a C job launching without pause died of SIGSEGV inside CUPTI's launch
                // callback (from `cuLaunchKernel`, no frame of this library) right after the recorder's subscriber
                // and callbacks were enabled from this thread once its PC sampling window (after a trace) had ended
                // and the program ran again (3 of 4 such jobs on an H200, CUPTI 13.0, driver 580).
                if !finished && (config.flight_recorder || recorder_stopped) {
                    let (level, text) = crate::flight::notice(crate::flight::start());
                    writer.notice(level, text);
                }
                finished = true;
                // The tracer lets the program go on at this message.
                writer.message(&done);
            }
            Control::Stop => break,
        }
    }
    leave_unfinished(&writer, named.take(), &mut contexts);
    // The contexts are released as they drop.
    drop(contexts);
    if !finished && (config.flight_recorder || recorder_stopped) {
        writer.notice(NoticeLevel::Warning, RECORDER_NOT_STARTED.into());
    }
    end(&writer);
}

/// What the tracer left unfinished when it went away between a window's start and its finish (it found no moment
/// to finish, or was killed): nothing is stopped from this thread, which could deadlock the program; said for
/// whoever reads the stream.
fn leave_unfinished(writer: &Writer, named: Option<Subscriber>, contexts: &mut [Sampled]) {
    if let Some(subscriber) = named {
        // The program's next launch ends the profiling (on its own thread, where CUPTI's calls are safe); the
        // subscriber stays, its callbacks idle.
        crate::profiling::finish_at_next_launch();
        std::mem::forget(subscriber);
        writer.notice(
            NoticeLevel::Warning,
            "kernel metrics end at the program's next launch: the tracer ended before finishing them".into(),
        );
    }
    let running = contexts.iter().filter(|c| c.sampler.is_some()).count();
    if running > 0 {
        // The samplers are left as they are (the tracer says so itself where it gave up).
        writer.notice(
            NoticeLevel::Error,
            format!(
                "PC sampling left on in {running} context(s) for the rest of the process's life: the tracer ended \
                 before finishing it; it holds the GPU's sampling hardware meanwhile"
            ),
        );
        for c in contexts.iter_mut() {
            std::mem::forget(c.sampler.take());
        }
    }
}

/// Said when the tracer went away before the window's finish: the recorder is not started then.
const RECORDER_NOT_STARTED: &str = "no flight recorder: the tracer ended before the window's finish, and the \
     recorder's callbacks are enabled only while the program's threads are held outside the driver (enabled while a \
     program launched, after PC sampling, they crashed it); `gpu-tools where` cannot say where this process hangs \
     until an attach's window finishes";

fn end(writer: &Writer) {
    writer.push(&Record::ClockAnchor(ClockAnchor::now()));
    writer.end(
        EndReason::Stopped,
        EndCounts::default(),
        gpu_tools::cupti::activity::Clock::Monotonic.now_ns(),
    );
}

/// The active primary contexts, retained (plain driver calls: no CUPTI lock is involved).
fn primary_contexts() -> Result<Vec<Sampled>, String> {
    let driver = Driver::load().map_err(|e| e.to_string())?;
    let count = driver.device_count().map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for ordinal in 0..count {
        let ctx = match Context::active_primary(ordinal) {
            Ok(Some(ctx)) => ctx,
            Ok(None) => continue,
            Err(e) => return Err(format!("device {ordinal}: {e}")),
        };
        // CUPTI's id of the context (0 where the driver cannot say).
        let id = ctx.id().unwrap_or(0);
        out.push(Sampled {
            sampler: None,
            id: u32::try_from(id).unwrap_or(u32::MAX),
            ctx,
        });
    }
    Ok(out)
}

/// Why PC sampling would see none of the program's kernels in this process, if it would not: CUPTI's range profiler
/// ran in it, its first attach traced it without sampling its PCs first, or its first PC sampling window found the
/// program idle (seen in every window tried, on H200s and H100s with CUPTI 13.0: docs/driver-notes.md). Such a window held the GPU's counters for nothing, with every
/// risk of a PC sampling window, so it is refused before it starts. Kernel metrics are not refused so, nor PC
/// sampling with a CUPTI newer than any seen so (`SEEN_BLIND`): there the window runs, and an empty one says what
/// CUPTI counted.
fn blind_refusal(request: &ProfileRequest) -> Option<&'static str> {
    let version = gpu_tools::cupti::CuptiLibrary::get().and_then(|c| c.api_version().ok());
    blind_reason(
        request.pc_sampling,
        version,
        crate::profiling::range_profiler_ran(),
        crate::first_attach::program_profiler_first(),
        crate::first_attach::first_use(),
    )
}

/// Why PC sampling must not run in this process, if it must not: it runs JAX with XLA's command buffers on, where
/// windows were blind and one killed the job in CUPTI (`PC_UNDER_XLA_COMMAND_BUFFERS`). Read in the process, so that
/// flags the program set before XLA started count; not with a CUPTI newer than any seen so.
fn xla_refusal(request: &ProfileRequest) -> Option<&'static str> {
    let version = gpu_tools::cupti::CuptiLibrary::get().and_then(|c| c.api_version().ok());
    let newer = version.is_some_and(|v| v > SEEN_BLIND);
    let jax = gpu_tools::linux::procfs::Process::current()
        .mapped_library("xla_cuda_plugin")
        .is_some();
    let flags = std::env::var("XLA_FLAGS").ok();
    (request.pc_sampling && !newer && jax && xla_command_buffers_on(flags.as_deref()))
        .then_some(gpu_tools_injection::profile::notice::PC_UNDER_XLA_COMMAND_BUFFERS)
}

/// Whether XLA runs with command buffers, given its `XLA_FLAGS`: on unless `--xla_gpu_enable_command_buffer` is given
/// an empty list (the last such flag decides, as XLA's parser does).
fn xla_command_buffers_on(flags: Option<&str>) -> bool {
    const FLAG: &str = "--xla_gpu_enable_command_buffer";
    let Some(flags) = flags else {
        return true;
    };
    flags
        .split_whitespace()
        .filter_map(|word| word.strip_prefix(FLAG))
        .filter_map(|rest| rest.strip_prefix('='))
        .next_back()
        .is_none_or(|value| !value.trim_matches(['"', '\'']).is_empty())
}

/// The newest CUPTI API version with which PC sampling was seen blind after a trace or the range profiler (13.0
/// Update 1, the GPU hosts' build).
const SEEN_BLIND: CuptiVersion = CuptiVersion::from_api(130_001);

/// [`blind_refusal`]'s rule: `version` is the loaded CUPTI's API version (`None`: not known, taken as one seen);
/// `program_profiler_first`: an attach found the program's own profiler registered before any PC sampling here
/// (named first: the PC sampling a first trace makes first could not have helped); `first_use`: how the process's
/// CUPTI use began.
fn blind_reason(
    pc_sampling: bool,
    version: Option<CuptiVersion>,
    range_profiler_ran: bool,
    program_profiler_first: bool,
    first_use: FirstUse,
) -> Option<&'static str> {
    use gpu_tools_injection::profile::notice::{
        PC_AFTER_IDLE_SAMPLING, PC_AFTER_PROGRAM_PROFILER, PC_AFTER_RANGE_PROFILER, PC_AFTER_TRACE,
    };
    if !pc_sampling || version.is_some_and(|v| v > SEEN_BLIND) {
        return None;
    }
    if program_profiler_first {
        return Some(PC_AFTER_PROGRAM_PROFILER);
    }
    if range_profiler_ran {
        return Some(PC_AFTER_RANGE_PROFILER);
    }
    match first_use {
        FirstUse::Kept => None,
        FirstUse::TraceBeforeSampling => Some(PC_AFTER_TRACE),
        FirstUse::IdleSampling => Some(PC_AFTER_IDLE_SAMPLING),
    }
}

/// Why the program must not be profiled now, if it must not: its own profiler records. After CUPTI's range
/// profiler or PC sampling ran in a program whose `torch.profiler` session was open, CUPTI delivered no activity
/// record in that process again, to anyone (CUPTI 13.0, driver 580; the job's own kernel count ended 12% short), so
/// the profile is not made while such a session records. A profiler that only registered its callbacks (a session
/// that ended) does not stop it. Where the program's profiler cannot be found, the profile is not made either:
/// whether one records cannot be told. `primer`: the PC sampling before a first trace, which nobody asked for by
/// name, is refused beside a profiler that ever registered too: one of its sessions may start during the window
/// (a torch.profiler on a `schedule` starts one every few steps). `first_pc`: PC sampling before any other in this
/// process, refused beside a profiler that registered at all: its activity API came first, and PC sampling after
/// that counted every sample outside the program's kernels (`PC_AFTER_PROGRAM_PROFILER`).
fn program_profiler_refusal(primer: bool, first_pc: bool) -> Option<String> {
    let found = crate::coexist::program_profiler_now();
    if found
        .as_ref()
        .is_ok_and(crate::coexist::ProgramProfiler::registered)
    {
        crate::first_attach::note_program_profiler();
    }
    refusal(found, primer, first_pc)
}

/// [`program_profiler_refusal`]'s answer for what the look at the program's profiler found.
fn refusal(
    found: Result<crate::coexist::ProgramProfiler, String>,
    primer: bool,
    first_pc: bool,
) -> Option<String> {
    use crate::coexist::ProgramProfiler;
    match found {
        Ok(ProgramProfiler::None) => None,
        Ok(ProgramProfiler::Idle { .. }) if first_pc => Some(
            gpu_tools_injection::profile::notice::PC_AFTER_PROGRAM_PROFILER.to_string(),
        ),
        Ok(ProgramProfiler::Idle { .. }) if primer => Some(
            "the program has a profiler of its own (its callbacks are registered with CUPTI, no session records \
             now): one of its sessions may start during the sampling, and PC sampling beside a recording profiler \
             has left CUPTI delivering no activity record in the process afterwards"
                .to_string(),
        ),
        Ok(ProgramProfiler::Idle { .. }) => None,
        Ok(ProgramProfiler::Recording(kinds)) => Some(format!(
            "the program's own profiler is recording (kinds {kinds:?}), such as an open torch.profiler session: \
             profiling kernels beside it would leave CUPTI delivering no activity record in this process afterwards, \
             its profiler's included (seen with CUPTI 13.0); nothing was profiled: run it again once that session \
             has ended"
        )),
        Err(e) => Some(format!(
            "whether the program's own profiler records now could not be found ({e}); profiling beside a recording \
             profiler would stop its records, so nothing was profiled"
        )),
    }
}

/// Kernel metrics without CUPTI's callback subscriber (the program's own profiler holds it): the range profiler
/// is not started. Without the subscriber nothing limits its replays: every launch of the window was replayed (8
/// passes for an eager PyTorch job on an H200), the program's threads stayed inside the driver, and with 8 or 16
/// jobs on the GPU the tracer found no moment to finish it (an AMP job, a job whose torch.profiler runs on a
/// schedule). The range profiler then stayed on for the process's life: it held the GPU's counters (every other
/// process's counters, kernel metrics and PC sampling on the GPU failed; two jobs whose PC sampling failed so died
/// at their next graph launches), and the process's own traces failed (`CUPTI_ERROR_NOT_COMPATIBLE`). So the
/// window ends at its start, said by a message: the tool gives it to PM sampling attribution, which needs nothing
/// of CUPTI's in the process but a trace.
fn no_subscriber(writer: &Writer, why: &str) {
    writer.notice(
        NoticeLevel::Warning,
        format!("kernel metrics not started in the process: {why}"),
    );
    writer.message(&Message::ProfileStarted {
        contexts: 0,
        ranges_named: false,
    });
    writer.message(&Message::MetricsEnded(MetricsEnded {
        before: MetricsEnd::NoSubscriber,
        launches: 0,
    }));
}

/// How long CUPTI's PC sampling workers sleep between rounds in an attached window, where CUPTI's default is 100
/// ms. Read from libcupti 13.0.85's code: the gathering worker drains the ring of gathered records itself when it
/// finds it full, through the same code as the decoding worker and with no lock between them, and a worker that
/// fails ends the window's collection, after which `cuptiPCSamplingDisable` fails and leaves sampling and the GPU's
/// counters held for the process's life (seen four times, each time on a GPU crowded with profiled jobs, whose
/// CPUs were busy: docs/driver-notes.md). Every worker waits this span each round, the gathering one too, so ten
/// times shorter rounds leave a tenth as much in the ring at a time, and it fills less often (CUPTI stores the
/// value unchecked). A mitigation read from the code; in two 16-row runs of the survival matrix since (an H100), no
/// disable failed, where four of the five before had one.
const WORKER_SLEEP_MS: u32 = 10;

/// The sampling period of the PC sampling before a first trace: a sample every 2^22 cycles on each SM (by
/// arithmetic, about 60,000 a second on a busy H100's 132 SMs at 2 GHz; not measured), where CUPTI's default (chosen
/// by SM count) gave millions a window (2.6 to 47 million in the windows `docs/attach-sessions.md` counts). The
/// primer keeps nothing of its samples: it is there so that PC sampling comes first in the process (a sampling with
/// launches in it was what kept later windows' stall records). Its samples only fill the ring of gathered records
/// whose overflow fails CUPTI's workers and has the disable leave the GPU's counters held for the process's life
/// ([`WORKER_SLEEP_MS`]; one primer did so on an H100 beside 13 other jobs), and cost the program's kernels their
/// sampling. A kernel spread over every SM for a millisecond of the window still gets about 60 samples (by the same
/// arithmetic).
const PRIMER_PERIOD: u32 = 22;

/// Starts PC sampling ([`start`]); where it started in some context, notes the process's first PC sampling and
/// gives when, for [`finish_sampling`].
fn start_sampling(
    writer: &Writer,
    contexts: &mut [Sampled],
    primer: bool,
) -> Option<program_cpu::Snapshot> {
    // Before the start: the threads CUPTI and the driver start with it are then told apart from the program's.
    let before = program_cpu::Snapshot::now();
    start(writer, contexts, primer);
    contexts.iter().any(|c| c.sampler.is_some()).then(|| {
        crate::first_attach::note(crate::first_attach::Kind::PcSampling);
        before
    })
}

/// Finishes PC sampling ([`finish`]) and judges the window begun at `since`, if it began ([`judge_sampling`]).
fn finish_sampling(
    writer: &Arc<Writer>,
    contexts: &mut [Sampled],
    since: Option<program_cpu::Snapshot>,
) -> Message {
    let done = finish(writer, contexts);
    if let (Some(since), Message::ProfileFinished { count, .. }) = (since, &done) {
        judge_sampling(writer, *count, &since);
    }
    done
}

/// Stops a recorder an earlier attach left, for kernel metrics (they take CUPTI's callback subscriber), said;
/// whether one was stopped (it starts again inside the finish).
fn stop_recorder_for_metrics(writer: &Writer) -> bool {
    let stopped =
        crate::flight::stop("profile --pid's kernel metrics took CUPTI's callback subscriber");
    if stopped {
        writer.notice(
            NoticeLevel::Info,
            "the flight recorder stops for the kernel metrics' window (they need CUPTI's callback subscriber) and \
             starts again after it"
                .into(),
        );
    }
    stopped
}

/// Notes whether the PC sampling window begun at `since` keeps later windows' stall records (`first_attach`): one with
/// stall records, or one in which the program ran, does; one with neither, if it was the process's first, leaves
/// every later window blind, and is said ([`Message::PcSampledIdle`]). The program's CPU time is its threads' that
/// lived before the window ([`crate::program_cpu`]): those born with the sampling are taken as CUPTI's and the
/// driver's. Where it cannot be read, the program is taken as having run: a window is never refused for what could
/// not be told.
fn judge_sampling(writer: &Writer, stall_records: u64, since: &program_cpu::Snapshot) {
    let spent = program_cpu::spent(since, &program_cpu::Snapshot::now());
    if !spent.born.is_empty() {
        log::info!(
            "threads born in the PC sampling window, not counted as the program's: {:?}",
            spent.born
        );
    }
    let idle = match (stall_records, spent.program) {
        (0, Some(cpu)) => (!gpu_tools_injection::program::ran(cpu, spent.window)).then_some(cpu),
        _ => None,
    };
    let blinded = crate::first_attach::note_sampling_ended(idle.is_none());
    if let (true, Some(cpu)) = (blinded, idle) {
        writer.message(&Message::PcSampledIdle {
            cpu_ms: u64::try_from(cpu.as_millis()).unwrap_or(u64::MAX),
            window_ms: u64::try_from(spent.window.as_millis()).unwrap_or(u64::MAX),
        });
    }
}

/// Starts PC sampling in every context (every other thread of the program is stopped outside the driver now);
/// sparsely for a `primer` ([`PRIMER_PERIOD`]).
fn start(writer: &Writer, contexts: &mut [Sampled], primer: bool) {
    let mut started = 0;
    for c in contexts.iter_mut().filter(|c| c.sampler.is_none()) {
        // SAFETY: a primary context retained for the session; the sampler is finished, or dropped, before it is
        // released (`Sampled`'s field order).
        let builder =
            unsafe { PcSampler::builder_for_raw(c.ctx.as_raw()) }.worker_sleep_ms(WORKER_SLEEP_MS);
        let builder = if primer {
            builder.period(PRIMER_PERIOD)
        } else {
            builder
        };
        let made = builder.start();
        match made {
            Ok(s) => {
                c.sampler = Some(s);
                started += 1;
                crate::first_attach::note_pc_sampled();
            }
            Err(e) => writer.notice(
                NoticeLevel::Error,
                format!("context {}: not profiled: {e}", c.id),
            ),
        }
    }
    writer.message(&Message::ProfileStarted {
        contexts: started,
        ranges_named: false,
    });
}

/// Starts kernel metrics with named ranges (every other thread of the program is stopped outside the driver
/// now): subscribes, gives `profiling` the program's contexts, and enables the launch callbacks. On failure nothing
/// is left subscribed or profiling.
fn start_named(
    writer: &Arc<Writer>,
    contexts: &[Sampled],
    request: &ProfileRequest,
) -> Result<Subscriber, String> {
    let subscriber = Subscriber::builder()
        .name("gpu-tools-profile")
        .subscribe(crate::profiling::on_event)
        .map_err(|e| format!("CUPTI's callback subscriber could not be had ({e})"))?;
    let mut request = request.clone();
    request.pc_sampling = false;
    crate::profiling::start_with(writer, request);
    let profiled = contexts
        .iter()
        .filter(|c| crate::profiling::adopt_context(c.ctx.as_raw(), c.id))
        .count();
    let enabled = subscriber
        .enable_domain(CallbackDomain::Resource)
        .and_then(|()| crate::profiling::enable_callbacks(&subscriber));
    if let Err(e) = enabled {
        crate::profiling::finish();
        if let Err(e) = subscriber.unsubscribe() {
            log::warn!("unsubscribe: {e}");
        }
        return Err(format!("the launch callbacks could not be enabled ({e})"));
    }
    writer.message(&Message::ProfileStarted {
        contexts: profiled as u64,
        ranges_named: true,
    });
    Ok(subscriber)
}

/// Decodes and sends the named ranges, stops the profilers and unsubscribes (every other thread of the program is
/// stopped outside the driver now); the message that says so, for the caller to send.
fn finish_named(writer: &Writer, subscriber: Subscriber) -> Message {
    let profiled = crate::profiling::finish();
    if let Err(e) = subscriber.unsubscribe() {
        writer.notice(NoticeLevel::Warning, format!("unsubscribe: {e}"));
    }
    Message::ProfileFinished {
        count: profiled,
        ranges_named: true,
    }
}

/// Finishes sampling and sends what was sampled (every other thread of the program is stopped outside the
/// driver now); the message that says so, for the caller to send.
fn finish(writer: &Arc<Writer>, contexts: &mut [Sampled]) -> Message {
    let mut records = 0;
    for c in contexts.iter_mut() {
        let Some(sampler) = c.sampler.take() else {
            continue;
        };
        // What was read is sent also when the finish fails: its counts say what CUPTI saw.
        let (samples, error) = sampler.finish_keeping();
        records += crate::profiling::send_pc_samples(writer, c.id, &samples);
        if let Some(e) = error {
            writer.notice(
                NoticeLevel::Error,
                format!("context {}: PC sampling: {e}", c.id),
            );
            if gpu_tools::cupti::pc_sampling::still_enabled(&e) {
                writer.message(&Message::PcLeftOn { context: c.id });
            }
        }
    }
    Message::ProfileFinished {
        count: records as u64,
        ranges_named: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coexist::ProgramProfiler;
    use gpu_tools::cupti::activity::{ActivityKind, ActivityKinds};

    #[test]
    fn pc_sampling_is_refused_as_blind_only_after_a_trace_an_empty_sampling_the_range_profiler_or_the_programs_profiler_with_a_cupti_seen_so()
     {
        use gpu_tools_injection::profile::notice::{PC_AFTER_RANGE_PROFILER, PC_AFTER_TRACE};
        let api = |v| Some(CuptiVersion::from_api(v));
        let seen = api(130_001);
        assert_eq!(
            blind_reason(true, seen, false, false, FirstUse::TraceBeforeSampling),
            Some(PC_AFTER_TRACE)
        );
        assert_eq!(
            blind_reason(true, seen, true, false, FirstUse::TraceBeforeSampling),
            Some(PC_AFTER_RANGE_PROFILER),
            "the range profiler named first"
        );
        assert_eq!(
            blind_reason(true, api(28), false, false, FirstUse::TraceBeforeSampling),
            Some(PC_AFTER_TRACE)
        );
        assert_eq!(
            blind_reason(true, None, false, false, FirstUse::TraceBeforeSampling),
            Some(PC_AFTER_TRACE)
        );
        assert_eq!(
            blind_reason(true, seen, false, false, FirstUse::Kept),
            None,
            "sampled first"
        );
        use gpu_tools_injection::profile::notice::PC_AFTER_IDLE_SAMPLING;
        assert_eq!(
            blind_reason(true, seen, false, false, FirstUse::IdleSampling),
            Some(PC_AFTER_IDLE_SAMPLING),
            "an idle first window"
        );
        assert_eq!(
            blind_reason(true, seen, true, false, FirstUse::IdleSampling),
            Some(PC_AFTER_RANGE_PROFILER),
            "the range profiler named first"
        );
        assert_eq!(
            blind_reason(false, seen, true, false, FirstUse::TraceBeforeSampling),
            None,
            "kernel metrics"
        );
        assert_eq!(
            blind_reason(true, api(130_100), true, false, FirstUse::IdleSampling),
            None,
            "a newer CUPTI is tried"
        );
        // The program's own profiler before any PC sampling: named first, whatever came after it.
        use gpu_tools_injection::profile::notice::PC_AFTER_PROGRAM_PROFILER;
        for (range, first_use) in [
            (false, FirstUse::Kept),
            (true, FirstUse::TraceBeforeSampling),
            (false, FirstUse::IdleSampling),
        ] {
            assert_eq!(
                blind_reason(true, seen, range, true, first_use),
                Some(PC_AFTER_PROGRAM_PROFILER)
            );
        }
        assert_eq!(
            blind_reason(false, seen, false, true, FirstUse::TraceBeforeSampling),
            None,
            "kernel metrics"
        );
        assert_eq!(
            blind_reason(
                true,
                api(130_100),
                false,
                true,
                FirstUse::TraceBeforeSampling
            ),
            None,
            "a newer CUPTI"
        );
    }

    #[test]
    fn xla_command_buffers_are_on_unless_their_flag_is_given_an_empty_list() {
        assert!(xla_command_buffers_on(None));
        assert!(xla_command_buffers_on(Some("")));
        assert!(xla_command_buffers_on(Some("--xla_gpu_autotune_level=0")));
        assert!(!xla_command_buffers_on(Some(
            "--xla_gpu_enable_command_buffer= --xla_gpu_autotune_level=0"
        )));
        assert!(!xla_command_buffers_on(Some(
            "--xla_gpu_enable_command_buffer=''"
        )));
        assert!(xla_command_buffers_on(Some(
            "--xla_gpu_enable_command_buffer=FUSION,CUBLAS"
        )));
        assert!(
            xla_command_buffers_on(Some(
                "--xla_gpu_enable_command_buffer= --xla_gpu_enable_command_buffer=FUSION"
            )),
            "the last one decides"
        );
        assert!(
            xla_command_buffers_on(Some("--xla_gpu_enable_command_buffer_x=")),
            "another flag"
        );
    }

    #[test]
    fn the_pc_sampling_before_a_first_trace_is_refused_beside_any_program_profiler() {
        let recording = || {
            Ok(ProgramProfiler::Recording(ActivityKinds::from_kind(
                ActivityKind::CONCURRENT_KERNEL,
            )))
        };
        let idle = || Ok(ProgramProfiler::Idle { asked: false });
        for primer in [false, true] {
            for first_pc in [false, true] {
                assert_eq!(
                    refusal(Ok(ProgramProfiler::None), primer, first_pc),
                    None,
                    "none ever registered"
                );
                assert!(
                    refusal(recording(), primer, first_pc)
                        .is_some_and(|r| r.contains("is recording"))
                );
                assert!(
                    refusal(Err("no CUPTI".into()), primer, first_pc)
                        .is_some_and(|r| r.contains("no CUPTI"))
                );
            }
        }
        // A profile asked for by name goes on beside an idle one where PC sampling ran first; the PC sampling
        // before a first trace does not.
        assert_eq!(refusal(idle(), false, false), None);
        assert!(
            refusal(idle(), true, false)
                .is_some_and(|r| r.contains("one of its sessions may start during the sampling"))
        );
        // PC sampling before any other, beside a profiler that registered: its activity API came first.
        for primer in [false, true] {
            assert!(
                refusal(idle(), primer, true).is_some_and(|r| r.contains("before any PC sampling"))
            );
        }
    }
}
