//! `gpu-tools where PID`: where is my hung CUDA job?

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use clap::builder::{PossibleValuesParser, TypedValueParser};
use gpu_tools::cudbg::elf::{self, FunctionSymbol};
use gpu_tools::cudbg::{
    AttachProtocol, DebugSession, DetachProcedure, Event, SessionError, WarpInfo,
};

mod flight;

use crate::cupti_or_debugger::{self, Consent, injection_library_loaded};
use crate::demangle::readable as demangle;
use crate::failure::Outcome;
use crate::stdout::outln;

/// Print where the warps of a running CUDA process are, then let it go on.
///
/// Attaches to the CUDA process PID with the CUDA debugger API, suspends each GPU it uses, prints every running
/// kernel (device, grid id, demangled name, grid and block dimensions) with its warps' PCs and the function each
/// PC lies in (from the module's ELF symbols), resumes, and detaches: the process runs on as before, also when
/// this command fails on the way. Needs the right to trace the process (its owner, or root; see
/// /proc/sys/kernel/yama/ptrace_scope). Exits 0 when the process was examined (or had ended), 1 otherwise.
///
/// The CUDA driver refuses the debugger in a process where CUPTI has run, for the rest of its life. A process that
/// an earlier `trace --pid` or `profile --pid` traced is therefore not attached to: the flight recorder that attach
/// left in it answers instead (the kernels launched and not finished, per stream, since when, on which thread, and
/// the threads waiting for them; no warps or PCs), over a socket, without stopping it. A process whose own
/// profiler ran CUPTI is refused by the driver, which `where` says.
///
/// The other way round holds too: after the debugger's attach the driver refuses CUPTI in the process for the rest
/// of its life: `trace --pid`, `profile --pid`, and the job's own profiler (a torch.profiler records nothing from
/// then on). `where` says so before it attaches, and where the process maps a profiler library of its own
/// (`libcupti`, as PyTorch does, `libkineto`, `libtorch_cpu`) it asks first: y/N on the terminal when standard
/// input and standard error are terminals; otherwise it attaches nothing and exits 1 unless `--yes` is given.
///
/// With several processes (`--pid A,B`, `--pid-tree LAUNCHER`: every CUDA process under torchrun, srun or
/// mpirun, or `--job slurm:JOBID`: the job's CUDA processes on this host), each is examined by a process of its own, one after the other (two attaches at once can leave one
/// waiting for its driver); their reports follow one another, each headed by the process's rank, then a summary of
/// a line per process shows a stuck collective at a glance.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Process id of the CUDA program.
    #[arg(
        required_unless_present_any = ["pids", "pid_tree", "job"],
        conflicts_with_all = ["pids", "pid_tree", "job"]
    )]
    pid: Option<u32>,
    /// Several processes (comma-separated PIDs).
    #[arg(
        long = "pid",
        id = "pids",
        value_name = "PID[,PID...]",
        value_delimiter = ','
    )]
    pids: Vec<u32>,
    /// Every process under PID that uses CUDA (a launcher such as torchrun), PID included.
    #[arg(long, value_name = "PID")]
    pid_tree: Option<u32>,
    /// The processes of a job on this host that use CUDA: `slurm:JOBID`, `torchrun:RUN_ID`, `k8s:POD_UID`,
    /// `cmd:REGEX` (as `trace --job`); the job's other processes are named as skipped. No process of the job
    /// here: exit 1.
    #[arg(long, value_name = "SELECTOR")]
    job: Option<crate::job::Selector>,
    /// Look at this wall-clock instant, the same on every host: RFC 3339 or `+SECONDS` (as `trace
    /// --start-at`). A time in the past is refused (exit 2).
    #[arg(long, value_name = "TIME", value_parser = crate::start_at::parse_now)]
    start_at: Option<crate::start_at::StartAt>,
    /// Print one JSON summary line at the end (what a multi-process `where` reads from each of its parts).
    #[arg(long, hide = true)]
    summary_line: bool,
    /// Print each step of the attach and the detach.
    #[arg(long)]
    verbose: bool,
    /// Attach the debugger without asking where a process maps a profiler library of its own (`libcupti`,
    /// `libkineto`, `libtorch_cpu`): after the attach, that profiler records nothing for the rest of the process's
    /// life. Without it, `where` asks on the terminal, or, with none (a script, a pipe), attaches nothing and exits 1.
    #[arg(long, short = 'y')]
    yes: bool,
    /// The note on CUPTI is left out (said once by the `where` over several processes that runs this one).
    #[arg(long, hide = true)]
    noted: bool,
    /// Warps to print per kernel (the rest are counted).
    #[arg(long, default_value_t = 8)]
    max_warps: usize,
    /// How the process's driver is asked to start its debugger back end: `auto` (the driver's attach
    /// descriptor where it has one, CUDA 13.1 on), `call` (call cudbgApiAttach in the process), `descriptor`.
    #[arg(
        long,
        default_value = "auto",
        value_parser = PossibleValuesParser::new(AttachProtocol::NAMES)
            .map(|s| s.parse::<AttachProtocol>().unwrap_or_default())
    )]
    protocol: AttachProtocol,
    /// How the process is let go: `default` (the documented steps without calling cudbgApiDetach in the process:
    /// with that call, driver 580 crashes at exit a process that destroyed its last CUDA context first) or
    /// `documented` (NVIDIA's procedure as written).
    #[arg(
        long,
        default_value = "default",
        value_parser = PossibleValuesParser::new(DetachProcedure::NAMES)
            .map(|s| s.parse::<DetachProcedure>().unwrap_or_default())
    )]
    detach: DetachProcedure,
}

/// A process in another network namespace than this one: refused before anything is attached. Seen on driver 580
/// (H200): a `where` run under `unshare -n` against a PyTorch job timed out waiting for the driver's ATTACH_COMPLETE
/// after 30 s, and the job never ran on (it had to be killed): the debugger's two ends did not reach each other
/// across the namespaces. A namespace that cannot be read (another user's process) is left to the attach.
fn other_network_namespace(pid: u32) -> Result<(), crate::failure::Failure> {
    let ours = std::fs::read_link("/proc/self/ns/net");
    let theirs = std::fs::read_link(format!("/proc/{pid}/ns/net"));
    match (ours, theirs) {
        (Ok(a), Ok(b)) if a != b => Err(crate::failure::Failure::new(
            1,
            format!(
                "process {pid} is in another network namespace ({}) than this where ({}): the CUDA debugger's attach \
                 does not complete across namespaces and leaves the process stuck (seen on driver 580), so it is not \
                 made. Run where inside the process's namespace: `nsenter --target {pid} --net gpu-tools where {pid}`, \
                 or from a shell in its container or pod",
                b.display(),
                a.display()
            ),
        )),
        _ => Ok(()),
    }
}

/// A process that maps no CUDA driver, on a machine where none is installed: said with the driver's fix before
/// anything is attempted. (A process that maps one is examined through its own driver, whatever this process can
/// load; one whose memory map cannot be read is left to the attach, which says why.)
fn no_driver_here(pid: u32) -> Result<(), crate::failure::Failure> {
    let process = gpu_tools::linux::procfs::Process::new(pid);
    let Ok(maps) = process.maps() else {
        return Ok(());
    };
    let maps_driver = maps.iter().any(|m| {
        m.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("libcuda.so"))
    });
    if maps_driver {
        return Ok(());
    }
    match gpu_tools::cuda::Driver::load() {
        Ok(_) => Ok(()),
        Err(e) => Err(crate::failure::Failure::new(
            1,
            format!(
                "process {pid} does not use CUDA, and the CUDA driver is not installed here (no process of this \
                 machine can use it): {e}"
            ),
        )),
    }
}

/// The driver's refusal of the debugger, with its cause where the process has run CUPTI: driver 580 refuses the
/// debugger's attach (CUDBG_ERROR_INITIALIZATION_FAILURE) in every process in which CUPTI has had a callback
/// subscriber or activity records, for the rest of the process's life. A C program (`where_after_cupti_probe.cu`,
/// H200) was examined after loading CUPTI alone, and refused after a subscribe and unsubscribe, after activity records
/// turned on and off, and after `cuptiFinalize` too. So an earlier `trace --pid` or `profile --pid`, or the program's
/// own profiler, rules the debugger out; the refusal leaves the process as it was.
fn refused_after_cupti(pid: u32, e: gpu_tools::Error) -> crate::failure::Failure {
    use gpu_tools::cudbg::{AttachError, SessionError};
    let refused = matches!(
        &e,
        gpu_tools::Error::Session(SessionError::Attach(AttachError::DriverRefused { .. }))
    );
    if refused && injection_library_loaded(pid) {
        return crate::failure::Failure::new(
            1,
            format!(
                "{e}. The process has run CUPTI for an earlier `gpu-tools trace --pid` or `profile --pid`: the \
                 CUDA driver (580) refuses the debugger in any process where CUPTI has subscribed or recorded, for \
                 the rest of its life, even after CUPTI is finalized. The process runs on as it was; run `where` \
                 before tracing a job, or use `trace --pid` to see what it launches"
            ),
        );
    }
    e.into()
}

/// The marker of the summary line a part prints with `--summary-line`.
const SUMMARY: &str = "where-summary\t";

/// What one process was seen doing: its running kernels and their resident warps.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Seen {
    /// (kernel name, warps resident), over every device.
    kernels: Vec<(String, usize)>,
    /// Set when the process ended before it was examined.
    ended: Option<String>,
    /// Streams with unfinished launches that the driver was not asked about (a flight recorder's answer during a
    /// graph capture): what runs there is not known.
    #[serde(default)]
    not_asked: usize,
}

/// How long a `where` waits for another one on this host to finish its attach.
const LOCK_WAIT: Duration = Duration::from_secs(90);

pub fn run(args: Args) -> Outcome {
    if let Some(pid) = args.pid {
        crate::pid::check(pid)?;
        if injection_library_loaded(pid) {
            // CUPTI has run here for an attach: no debugger; the flight recorder it left answers instead.
            wait_for_start(&args)?;
            let seen = flight::examine(pid)?;
            if args.summary_line {
                outln!(
                    "{SUMMARY}{}",
                    serde_json::to_string(&seen).unwrap_or_default()
                )?;
            }
            return Ok(0);
        }
        other_network_namespace(pid)?;
        no_driver_here(pid)?;
        before_debugger(&args, &[pid])?;
        wait_for_start(&args)?;
        // One debugger attach at a time on this host (`debugger_lock`): held until after the detach.
        let _lock = crate::debugger_lock::acquire(LOCK_WAIT, || {
            eprintln!(
                "gpu-tools where: waiting for another gpu-tools where on this host to finish (debugger attaches are \
                 made one at a time)"
            )
        })
        .map_err(|e| crate::failure::Failure::new(1, format!("process {pid}: {e}")))?;
        let seen = examine(&args, pid).map_err(|e| refused_after_cupti(pid, e))?;
        if args.summary_line {
            outln!(
                "{SUMMARY}{}",
                serde_json::to_string(&seen).unwrap_or_default()
            )?;
        }
        return Ok(0);
    }
    several(&args)
}

/// Before the debugger's attach to `pids` (none of which has run CUPTI for gpu-tools): the note that CUPTI is
/// refused in them from then on (unless `--noted`), and the consent where one maps a profiler library of its own:
/// `--yes`, or a yes on the terminal; otherwise nothing is touched (exit 1). Returns whether consent was given (the
/// parts of a `where` over several processes get `--yes` then).
fn before_debugger(args: &Args, pids: &[u32]) -> Result<bool, crate::failure::Failure> {
    use std::io::IsTerminal;
    if pids.is_empty() {
        return Ok(args.yes);
    }
    if !args.noted {
        eprintln!(
            "gpu-tools where: {}",
            cupti_or_debugger::debugger_note(pids)
        );
    }
    let found: Vec<(u32, String)> = pids
        .iter()
        .filter_map(|&p| cupti_or_debugger::profiler_library(p).map(|lib| (p, lib)))
        .collect();
    if found.is_empty() {
        return Ok(args.yes);
    }
    let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    match Consent::of(args.yes, terminal) {
        Consent::Given => Ok(true),
        Consent::Ask => match cupti_or_debugger::ask_on_terminal("where", &found) {
            Ok(true) => Ok(true),
            Ok(false) => Err(cupti_or_debugger::not_consented(&found, true)),
            Err(e) => Err(crate::failure::Failure::new(
                1,
                format!("cannot read the answer: {e}; nothing was touched"),
            )),
        },
        Consent::Refused => Err(cupti_or_debugger::not_consented(&found, false)),
    }
}

/// `--start-at`: the wait, once the processes are known. Ctrl-C ends it as it ends `where` anywhere else (no
/// handler: nothing is attached yet, and one installed here would outlive the wait).
fn wait_for_start(args: &Args) -> Result<(), crate::failure::Failure> {
    match &args.start_at {
        Some(start) => {
            crate::start_at::wait(start, &std::sync::atomic::AtomicBool::new(false), "where")
        }
        None => Ok(()),
    }
}

/// Every process given, each examined by a `gpu-tools where PID` of its own (a process holds one debugger
/// client), one after the other (two attaches at once on a two-GPU host left one waiting 30 s for its driver's
/// ATTACH_COMPLETE); their reports, then one summary line per process.
fn several(args: &Args) -> Outcome {
    let mut pids = args.pids.clone();
    if let Some(root) = args.pid_tree {
        crate::pid::check(root)?;
        pids.extend(crate::pid::cuda_processes(&crate::pid::tree(root)));
    }
    if let Some(selector) = &args.job {
        pids.extend(
            crate::job::select("where", selector)?
                .into_iter()
                .map(|m| m.pid),
        );
    }
    let mut unique = std::collections::HashSet::new();
    pids.retain(|p| unique.insert(*p));
    if pids.is_empty() {
        // On a machine without the driver, that is the first thing to say.
        let driver = match gpu_tools::cuda::Driver::load() {
            Ok(_) => String::new(),
            Err(e) => format!(" (the CUDA driver is not installed here: {e})"),
        };
        return Err(crate::failure::Failure::new(
            1,
            format!(
                "no process under {} uses CUDA{driver}",
                args.pid_tree.unwrap_or_default()
            ),
        ));
    }
    for &p in &pids {
        crate::pid::check(p)?;
    }
    // Asked once for all (the parts are given the answer): those an attach traced are answered by their recorder.
    let untraced: Vec<u32> = pids
        .iter()
        .copied()
        .filter(|&p| !injection_library_loaded(p))
        .collect();
    let consented = before_debugger(args, &untraced)?;
    wait_for_start(args)?;
    let exe = std::env::current_exe()
        .map_err(|e| crate::failure::Failure::new(1, format!("cannot find this program: {e}")))?;
    let started = Instant::now();
    let part = |pid: u32| {
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["where", &pid.to_string(), "--summary-line"])
            .args(["--max-warps", &args.max_warps.to_string()])
            .args(["--protocol", args.protocol.name()])
            .args(["--detach", args.detach.name()])
            .arg("--noted")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if args.verbose {
            cmd.arg("--verbose");
        }
        if consented {
            cmd.arg("--yes");
        }
        cmd.spawn()
    };
    let mut summary = Vec::new();
    let mut parts = Vec::new();
    let mut failed = 0;
    for pid in pids {
        let child = part(pid);
        let rank = rank_of(pid);
        let head = match &rank {
            Some(r) => format!("=== process {pid} ({r})"),
            None => format!("=== process {pid}"),
        };
        out_line(&head)?;
        let output = child.and_then(|c| c.wait_with_output());
        let (text, err, ok) = match output {
            Ok(o) => (
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
                o.status.success(),
            ),
            Err(e) => (String::new(), format!("cannot run: {e}"), false),
        };
        let mut seen = None;
        for line in part_lines(&text) {
            match line.strip_prefix(SUMMARY) {
                Some(json) => seen = Some(read_summary(json)),
                None => out_line(line)?,
            }
        }
        if !err.trim().is_empty() {
            eprint!("{err}");
        }
        let who = rank.unwrap_or_else(|| format!("process {pid}"));
        let (line, part, examined_whole) = judge_part(pid, who, seen, ok, &err)?;
        if !examined_whole {
            failed += 1;
        }
        summary.push(line);
        parts.push(part);
    }
    out_line(&format!(
        "=== summary ({} {}, {:.1} s)",
        summary.len(),
        if summary.len() == 1 {
            "process"
        } else {
            "processes"
        },
        started.elapsed().as_secs_f64()
    ))?;
    for line in summary {
        out_line(&line)?;
    }
    if let Some(line) = collective_verdict(&parts) {
        out_line(&line)?;
    }
    Ok(if failed == 0 { 0 } else { 1 })
}

/// One process's line of the summary and its part in the verdict, from what its `where` printed: its summary line
/// (`seen`), whether it succeeded, and its standard error. The flag: it was examined and its summary read.
fn judge_part(
    pid: u32,
    who: String,
    seen: Option<Result<Seen, String>>,
    ok: bool,
    err: &str,
) -> Result<(String, Part, bool), crate::failure::Failure> {
    Ok(match (seen, ok) {
        (Some(Err(why)), true) => (
            // It was examined and said what it saw above; only the line for the summary is lost.
            format!(
                "{who} (pid {pid}): examined (above), but its summary line could not be read: {why}"
            ),
            Part {
                who,
                pid,
                collective: None,
                examined: true,
            },
            false,
        ),
        (Some(Ok(s)), true) => {
            let collective = s
                .kernels
                .iter()
                .find(|(name, _)| short(name).starts_with("nccl"))
                .map(|(name, _)| short(name).to_string());
            (
                format!("{who} (pid {pid}): {}", describe(&s)),
                Part {
                    who,
                    pid,
                    collective,
                    examined: true,
                },
                true,
            )
        }
        _ => {
            // The debugger could not attach (a thread blocked in a driver call holds what the attach needs):
            // what its threads are blocked in is still readable without stopping it.
            let host = host_view(pid);
            for line in &host.lines {
                out_line(line)?;
            }
            (
                format!(
                    "{who} (pid {pid}): not examined ({}){}",
                    err.lines().last().unwrap_or("failed"),
                    host.summary.map(|s| format!("; {s}")).unwrap_or_default()
                ),
                Part {
                    who,
                    pid,
                    collective: None,
                    examined: false,
                },
                false,
            )
        }
    })
}

/// A part's summary line, or why it could not be read.
fn read_summary(json: &str) -> Result<Seen, String> {
    serde_json::from_str::<Seen>(json).map_err(|e| e.to_string())
}

/// The lines a part wrote to its standard output.
fn part_lines(text: &str) -> impl Iterator<Item = &str> {
    // At newlines alone: `lines` would also drop a carriage return ending a line, as a kernel name from the flight
    // recorder may.
    text.split_terminator('\n')
}

/// One process of a `where` over several, for the verdict.
struct Part {
    who: String,
    pid: u32,
    /// The NCCL kernel it runs, if any.
    collective: Option<String>,
    examined: bool,
}

/// When some processes wait in an NCCL kernel and others run none (or could not be examined), the ones outside
/// the collective are where to look: a rank that never joined is what keeps the others waiting.
fn collective_verdict(parts: &[Part]) -> Option<String> {
    let inside: Vec<&Part> = parts.iter().filter(|p| p.collective.is_some()).collect();
    let outside: Vec<&Part> = parts.iter().filter(|p| p.collective.is_none()).collect();
    let first = inside.first()?;
    if outside.is_empty() {
        return None;
    }
    let kernel = first.collective.as_deref().unwrap_or_default();
    let names = |ps: &[&Part]| {
        ps.iter()
            .map(|p| {
                let how = if p.examined { "" } else { ", not examined" };
                format!("{} (pid {}{how})", p.who, p.pid)
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some(format!(
        "=> {} wait{} in {kernel}; not in it: {}. A collective waits for its slowest rank: look at {} first.",
        names(&inside),
        if inside.len() == 1 { "s" } else { "" },
        names(&outside),
        if outside.len() == 1 {
            "that one"
        } else {
            "those"
        }
    ))
}

/// What the threads of a process that could not be attached to are blocked in.
struct HostView {
    lines: Vec<String>,
    summary: Option<String>,
}

fn host_view(pid: u32) -> HostView {
    use gpu_tools::linux::threads::{SystemCall, process_threads};
    let threads = match process_threads(pid) {
        Ok(t) => t,
        Err(e) => {
            return HostView {
                lines: vec![format!("host view: cannot read its threads: {e}")],
                summary: None,
            };
        }
    };
    let what = |t: &gpu_tools::linux::threads::ThreadState| -> String {
        let lib = t
            .library
            .as_ref()
            .map(|l| format!(" in {}", l.to_string_lossy()))
            .unwrap_or_default();
        match t.system_call {
            Some(SystemCall::Running) => "running".into(),
            Some(c @ SystemCall::Blocked { number, .. }) => match (c.name(), number) {
                (Some(name), _) => format!("blocked in {name}{lib}"),
                (None, Some(n)) => format!("blocked in system call {n}{lib}"),
                (None, None) => format!("blocked{lib}"),
            },
            None => format!("state {}", t.state),
        }
    };
    let mut lines = vec![format!(
        "host view ({} threads, read from /proc without stopping the process):",
        threads.len()
    )];
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in &threads {
        groups
            .entry(what(t))
            .or_default()
            .push(format!("{} {}", t.tid, t.name.to_string_lossy()));
    }
    for (how, names) in &groups {
        let shown: Vec<&str> = names.iter().take(4).map(String::as_str).collect();
        let more = names.len().saturating_sub(shown.len());
        lines.push(format!(
            "  {:>3} {how}: {}{}",
            names.len(),
            shown.join(", "),
            if more > 0 {
                format!(", ... {more} more")
            } else {
                String::new()
            }
        ));
    }
    let summary = threads
        .iter()
        .find(|t| t.tid == pid)
        .map(|main| format!("its main thread is {}", what(main)));
    HostView { lines, summary }
}

/// One line on stdout; a closed pipe ends the command quietly (see `Failure::stdout`).
fn out_line(text: &str) -> Result<(), crate::failure::Failure> {
    use std::io::Write;
    writeln!(std::io::stdout(), "{text}").map_err(crate::failure::Failure::stdout)
}

/// "1 kernel running (NAME, 408 warps)", "no kernel running", or how it ended.
fn describe(seen: &Seen) -> String {
    if let Some(how) = &seen.ended {
        return format!("ended ({how})");
    }
    let not_asked = match seen.not_asked {
        0 => String::new(),
        n => format!(
            "{n} stream{} with unfinished launches not asked about",
            if n == 1 { "" } else { "s" }
        ),
    };
    match (seen.kernels.len(), not_asked.is_empty()) {
        (0, true) => "no kernel running".into(),
        (0, false) => format!("not known: {not_asked}"),
        (n, _) => format!(
            "{n} kernel{} running ({}){}",
            if n == 1 { "" } else { "s" },
            seen.kernels
                .iter()
                .map(|(name, warps)| format!("{}, {warps} warps", short(name)))
                .collect::<Vec<_>>()
                .join("; "),
            if not_asked.is_empty() {
                String::new()
            } else {
                format!("; {not_asked}")
            }
        ),
    }
}

/// A kernel name without its parameter list, for the summary.
fn short(name: &str) -> &str {
    // The list is the parenthesised group that ends the name, found from its end: the name before it may hold
    // parentheses too (`(anonymous namespace)::k`, a template argument `(char)97`).
    let Some(body) = name.strip_suffix(')') else {
        return name;
    };
    let mut depth = 1usize;
    for (at, c) in body.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    return &name[..at];
                }
            }
            _ => {}
        }
    }
    name
}

/// The rank a launcher gave process `pid`, from its environment.
fn rank_of(pid: u32) -> Option<String> {
    let proc = gpu_tools::linux::procfs::Process::new(pid);
    let info = gpu_tools::trace::ProcessInfo::from_lookup(String::new(), String::new(), |k| {
        proc.environment_variable(k)
            .ok()
            .flatten()
            .map(|v| v.to_string_lossy().into_owned())
    });
    let label = info.rank_label();
    (!label.is_empty()).then_some(label)
}

fn examine(args: &Args, pid: u32) -> Result<Seen, gpu_tools::Error> {
    let mut seen = Seen::default();
    let mut builder = DebugSession::attach_builder(pid)
        .protocol(args.protocol)
        .detach_procedure(args.detach)
        .capabilities(gpu_tools::sys::cudbg::CUDBG_DEBUGGER_CAPABILITY_NO_CONTEXT_PUSH_POP_EVENTS);
    if args.verbose {
        builder = builder.progress(|step| eprintln!("attach: {step}"));
    }
    let mut session = builder.start()?;
    // The driver reports the modules already loaded while it attaches; their symbols name the kernels. A process
    // that keeps launching never goes quiet, so the events are taken for a bounded time only.
    let mut symbols: HashMap<u64, Vec<FunctionSymbol>> = HashMap::new();
    let deadline = Instant::now() + Duration::from_millis(300);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let batch = match session.next_batch(Some(left)) {
            Ok(Some(batch)) => batch,
            Ok(None) => break,
            Err(gpu_tools::Error::Session(SessionError::Timeout(_))) => break,
            Err(e) => return Err(e),
        };
        for (_, event) in &batch {
            if let Event::ElfImageLoaded(img) = event {
                let bytes = batch.session().elf_image(img)?;
                symbols.insert(img.module, elf::function_symbols(&bytes));
            }
        }
    }
    if let Some(status) = session.exit_status()? {
        let _ = outln!("process {pid} ended ({status}) before it could be examined");
        seen.ended = Some(status.to_string());
        return Ok(seen);
    }
    let name_at = |module: u64, pc: u64| -> String {
        symbols
            .get(&module)
            .and_then(|s| elf::function_at(s, pc))
            .map_or_else(|| format!("?@{pc:#x}"), demangle)
    };
    let devices = session.devices()?;
    let _ = outln!(
        "process {pid}: {} CUDA devices, {} modules",
        devices.len(),
        symbols.len()
    );
    for props in &devices {
        let dev = session.suspend(props.index)?;
        let mut grids: BTreeMap<u64, Vec<WarpInfo>> = BTreeMap::new();
        for w in dev.warps()? {
            grids.entry(w.grid_id).or_default().push(w);
        }
        let _ = outln!(
            "device {} {} ({}, {} SMs): {} kernels running",
            props.index,
            props.name,
            props.sm_type,
            props.sms,
            grids.len()
        );
        for (grid, warps) in &grids {
            match dev.grid(*grid) {
                Ok(info) => {
                    let name = name_at(info.module, info.function_entry);
                    let _ = outln!(
                        "  kernel grid {grid} {name} grid {} block {} ({} warps resident)",
                        info.grid_dim,
                        info.block_dim,
                        warps.len()
                    );
                    seen.kernels.push((name, warps.len()));
                }
                Err(e) => {
                    let _ = outln!(
                        "  kernel grid {grid} (no grid info: {e}), {} warps",
                        warps.len()
                    );
                    seen.kernels.push((format!("grid {grid}"), warps.len()));
                }
            }
            let module = dev.grid(*grid).map_or(0, |g| g.module);
            for w in warps.iter().take(args.max_warps) {
                let _ = outln!(
                    "    sm {:>3} warp {:>2} block {} pc {:#x} in {} lanes {:#010x}{}",
                    w.sm,
                    w.warp,
                    w.block_idx,
                    w.pc,
                    name_at(module, w.pc),
                    w.valid_lanes,
                    if w.broken { " (at a breakpoint)" } else { "" }
                );
            }
            if warps.len() > args.max_warps {
                let _ = outln!("    ... {} more warps", warps.len() - args.max_warps);
            }
        }
        dev.resume()?;
    }
    session.close()?;
    let _ = outln!("detached; process {pid} runs on");
    Ok(seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(who: &str, pid: u32, collective: Option<&str>, examined: bool) -> Part {
        Part {
            who: who.into(),
            pid,
            collective: collective.map(Into::into),
            examined,
        }
    }

    #[test]
    fn a_kernel_name_with_parentheses_of_its_own_loses_only_its_parameter_list() {
        for (name, shown) in [
            (
                "(anonymous namespace)::scale(float*, int)",
                "(anonymous namespace)::scale",
            ),
            (
                "void apply<(anonymous namespace)::Op, (char)97>(float*)",
                "void apply<(anonymous namespace)::Op, (char)97>",
            ),
            ("run(void (*)(int), int)", "run"),
            ("step()", "step"),
            (
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            ),
            ("grid 7", "grid 7"),
        ] {
            assert_eq!(short(name), shown);
        }
        let seen = Seen {
            kernels: vec![("(anonymous namespace)::scale(float*, int)".into(), 408)],
            ended: None,
            not_asked: 0,
        };
        assert_eq!(
            describe(&seen),
            "1 kernel running ((anonymous namespace)::scale, 408 warps)"
        );
        let partly = Seen {
            not_asked: 2,
            ..seen
        };
        assert_eq!(
            describe(&partly),
            "1 kernel running ((anonymous namespace)::scale, 408 warps); 2 streams with unfinished launches not \
             asked about"
        );
    }

    #[test]
    fn a_summary_line_that_cannot_be_read_says_why() {
        let seen = read_summary(r#"{"kernels":[["k(int)",4]],"ended":null}"#).unwrap();
        assert_eq!(seen.kernels, [("k(int)".to_string(), 4)]);
        let why = read_summary(r#"{"kernels":[["k(int)",4]"#).unwrap_err();
        assert!(why.contains("EOF"), "{why}");
    }

    #[test]
    fn a_part_line_ending_in_a_carriage_return_is_relayed_whole() {
        let out = "process 9: from gpu-tools' flight recorder\n    #1  1.0 s ago  thread 7 kernel\r\n\nwhere-summary\t{}\n";
        assert_eq!(
            part_lines(out).collect::<Vec<_>>(),
            [
                "process 9: from gpu-tools' flight recorder",
                "    #1  1.0 s ago  thread 7 kernel\r",
                "",
                "where-summary\t{}"
            ]
        );
        assert_eq!(part_lines("").count(), 0);
        assert_eq!(part_lines("no newline").collect::<Vec<_>>(), ["no newline"]);
    }

    #[test]
    fn the_rank_outside_a_collective_is_named() {
        let kernel = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
        let v = collective_verdict(&[
            part("rank 0", 10, Some(kernel), true),
            part("rank 1", 11, None, false),
        ])
        .unwrap();
        assert_eq!(
            v,
            "=> rank 0 (pid 10) waits in ncclDevKernel_AllReduce_Sum_f32_RING_LL; not in it: rank 1 (pid 11, not \
             examined). A collective waits for its slowest rank: look at that one first."
        );
        // Every rank inside, or none: nothing to say.
        assert_eq!(
            collective_verdict(&[
                part("rank 0", 10, Some(kernel), true),
                part("rank 1", 11, Some(kernel), true)
            ]),
            None
        );
        assert_eq!(
            collective_verdict(&[
                part("rank 0", 10, None, true),
                part("rank 1", 11, None, true)
            ]),
            None
        );
    }
}
