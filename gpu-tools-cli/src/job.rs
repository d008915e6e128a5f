//! `--job SELECTOR` of `trace` and `where`: the processes of one job on this host, found in `/proc`, without
//! PIDs. A selector names the job as its launcher does:
//!
//! - `slurm:JOBID`: `SLURM_JOB_ID` (or the older `SLURM_JOBID`) in the process's environment, or a control group
//!   of the job (`job_JOBID` in its path: `/slurm/uid_U/job_JOBID/...` under cgroup v1,
//!   `/system.slice/slurmstepd.scope/job_JOBID/...` under v2);
//! - `torchrun:RUN_ID`: `TORCHELASTIC_RUN_ID` in the environment;
//! - `k8s:POD_UID`: a control group of the pod (`pod<UID>` under the cgroupfs driver, `...-pod<UID with _ for
//!   ->.slice` under the systemd driver);
//! - `cmd:REGEX`: the command line matches REGEX (anywhere in it; anchor with `^` and `$`).
//!
//! Of the processes that match, those that use CUDA ([`cuda_use`]: the driver mapped, or an NVIDIA device open)
//! are selected; the others (the launchers: `srun`, `slurmstepd`'s shell, `torchrun`, a Python parent) are
//! named as skipped. This process and its ancestors (the `srun` step that started it) are never candidates. The
//! reading of `/proc` is the library's (`gpu_tools::linux::procfs`); what matches is decided here.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use gpu_tools::linux::procfs::{self, Cgroup, Process};

use crate::failure::Failure;

/// A job, as `--job` names it.
#[derive(Debug, Clone)]
pub enum Selector {
    /// A Slurm job id.
    Slurm(String),
    /// A torchrun (TorchElastic) run id.
    Torchrun(String),
    /// A Kubernetes pod's UID, lower case.
    Kubernetes(String),
    /// A regular expression over the command line.
    Command(regex::Regex),
}

impl FromStr for Selector {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let Some((kind, value)) = s.split_once(':') else {
            return Err(format!(
                "'{s}' names no kind of job: slurm:JOBID, torchrun:RUN_ID, k8s:POD_UID or cmd:REGEX"
            ));
        };
        if value.is_empty() {
            return Err(format!(
                "'{s}': the {kind} selector needs a value after ':'"
            ));
        }
        match kind {
            "slurm" => {
                // The job's own id: an array job's task has one of its own (`squeue -r -o %A`), which is what
                // its processes' SLURM_JOB_ID holds.
                if !value.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(format!(
                        "'{value}' is not a Slurm job id (digits; for a task of an array job, its own id:                          `squeue -r -o %A`)"
                    ));
                }
                Ok(Selector::Slurm(value.to_string()))
            }
            "torchrun" => Ok(Selector::Torchrun(value.to_string())),
            "k8s" => {
                let uid = value.to_ascii_lowercase();
                if !uid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
                    return Err(format!(
                        "'{value}' is not a pod UID (hexadecimal digits and '-': `kubectl get pod NAME -o \
                         jsonpath='{{.metadata.uid}}'`)"
                    ));
                }
                Ok(Selector::Kubernetes(uid))
            }
            "cmd" => regex::Regex::new(value)
                .map(Selector::Command)
                .map_err(|e| format!("'{value}' is not a regular expression: {e}")),
            other => Err(format!(
                "'{other}' is not a kind of job: slurm:JOBID, torchrun:RUN_ID, k8s:POD_UID or cmd:REGEX"
            )),
        }
    }
}

impl fmt::Display for Selector {
    /// What the selector selects, for messages: "slurm job 42".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Slurm(id) => write!(f, "slurm job {id}"),
            Selector::Torchrun(id) => write!(f, "torchrun run {id}"),
            Selector::Kubernetes(uid) => write!(f, "Kubernetes pod {uid}"),
            Selector::Command(re) => write!(f, "processes whose command line matches '{re}'"),
        }
    }
}

/// What a selector looks at of one process: read from `/proc` ([`Observed::read`]) or from recorded text.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub pid: u32,
    /// The command line, arguments joined by spaces.
    pub command: String,
    /// The environment it started with; `None` where it could not be read (another user's process).
    pub environment: Option<Vec<(OsString, OsString)>>,
    /// Its control groups.
    pub cgroups: Vec<Cgroup>,
}

impl Observed {
    /// Process `pid` as `/proc` shows it now; `None` when it has ended (or is a kernel thread: no command line).
    pub fn read(pid: u32) -> Option<Observed> {
        let p = Process::new(pid);
        let command = p.command_line_text().ok()?;
        if command.is_empty() {
            return None;
        }
        Some(Observed {
            pid,
            command,
            environment: p.environment().ok(),
            cgroups: p.cgroups().unwrap_or_default(),
        })
    }

    /// From the text of its `/proc` files (`environ`, `cgroup`, `cmdline`), as recorded.
    #[cfg(test)]
    pub fn from_text(pid: u32, environ: &[u8], cgroup: &[u8], cmdline: &[u8]) -> Observed {
        Observed {
            pid,
            command: cmdline
                .split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(String::from_utf8_lossy)
                .collect::<Vec<_>>()
                .join(" "),
            environment: Some(
                procfs::parse_environment(environ)
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect(),
            ),
            cgroups: procfs::parse_cgroups(cgroup).collect(),
        }
    }

    fn variable(&self, name: &str) -> Option<&OsStr> {
        self.environment
            .as_ref()?
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_os_str())
    }

    fn in_group(&self, matches: impl Fn(&OsStr) -> bool) -> bool {
        self.cgroups.iter().any(|g| g.components().any(&matches))
    }
}

impl Selector {
    /// Whether process `p` belongs to the job.
    pub fn matches(&self, p: &Observed) -> bool {
        match self {
            Selector::Slurm(id) => {
                ["SLURM_JOB_ID", "SLURM_JOBID"]
                    .iter()
                    .any(|k| p.variable(k) == Some(OsStr::new(id)))
                    || p.in_group(|c| c.as_encoded_bytes() == format!("job_{id}").as_bytes())
            }
            Selector::Torchrun(id) => p.variable("TORCHELASTIC_RUN_ID") == Some(OsStr::new(id)),
            Selector::Kubernetes(uid) => {
                let dashed = format!("pod{uid}");
                let underscored = format!("pod{}", uid.replace('-', "_"));
                p.in_group(|c| {
                    let c = c.to_string_lossy();
                    let c = c.strip_suffix(".slice").unwrap_or(&c);
                    [&dashed, &underscored]
                        .iter()
                        .any(|pod| c == pod.as_str() || c.ends_with(&format!("-{pod}")))
                })
            }
            Selector::Command(re) => re.is_match(&p.command),
        }
    }

    /// Whether the selector reads the environment (which only the process's owner, or root, may read).
    fn reads_environment(&self) -> bool {
        matches!(self, Selector::Slurm(_) | Selector::Torchrun(_))
    }
}

/// How a process uses CUDA, as `/proc` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CudaUse {
    /// It maps the CUDA driver (this file).
    Driver(PathBuf),
    /// It holds an NVIDIA device open (this one).
    Device(PathBuf),
}

/// Whether process `pid` uses CUDA: it maps the driver (`libcuda.so*`), or holds an NVIDIA device
/// (`/dev/nvidia*`) open. `None` for a process that does neither (a launcher), or that has ended.
pub fn cuda_use(pid: u32) -> Option<CudaUse> {
    let p = Process::new(pid);
    if let Some(driver) = p.mapped_library("libcuda.so") {
        return Some(CudaUse::Driver(driver));
    }
    p.open_files()
        .ok()?
        .into_iter()
        .find(|f| f.to_string_lossy().starts_with("/dev/nvidia"))
        .map(CudaUse::Device)
}

/// A process of the job.
#[derive(Debug, Clone)]
pub struct Member {
    pub pid: u32,
    pub command: String,
    /// Its rank as its launcher numbered it (`RANK`, `OMPI_COMM_WORLD_RANK`, `PMI_RANK`, `SLURM_PROCID`).
    pub rank: Option<u32>,
}

/// The job's processes on this host.
#[derive(Debug, Default)]
pub struct Selection {
    /// Those that use CUDA: to trace.
    pub cuda: Vec<Member>,
    /// Those that do not (launchers, shells).
    pub skipped: Vec<Member>,
    /// Processes whose environment could not be read (another user's), when the selector reads it.
    pub unreadable: usize,
}

/// The rank a launcher gave a process, from its environment (as the trace's process labels have it).
pub fn rank_in(environment: Option<&[(OsString, OsString)]>) -> Option<u32> {
    let vars = environment?;
    gpu_tools::trace::ProcessInfo::from_lookup(String::new(), String::new(), |k| {
        vars.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.to_string_lossy().into_owned())
    })
    .rank()
}

/// This process and its ancestors: never candidates (the `srun` step, the shell, this tool itself all carry the
/// job's variables).
fn self_and_ancestors() -> Vec<u32> {
    let mut out = vec![std::process::id()];
    let mut at = std::process::id();
    while let Ok(stat) = Process::new(at).stat() {
        if stat.parent == 0 || out.contains(&stat.parent) {
            break;
        }
        out.push(stat.parent);
        at = stat.parent;
    }
    out
}

/// Splits the matching processes of `candidates` into those that use CUDA (`is_cuda`) and the others.
pub fn classify(
    selector: &Selector,
    candidates: impl IntoIterator<Item = Observed>,
    is_cuda: impl Fn(u32) -> bool,
) -> Selection {
    let mut selection = Selection::default();
    for p in candidates {
        if p.environment.is_none() && selector.reads_environment() {
            selection.unreadable += 1;
        }
        if !selector.matches(&p) {
            continue;
        }
        let member = Member {
            pid: p.pid,
            rank: rank_in(p.environment.as_deref()),
            command: p.command,
        };
        if is_cuda(member.pid) {
            selection.cuda.push(member);
        } else {
            selection.skipped.push(member);
        }
    }
    selection
}

/// The job's processes on this host, read from `/proc` now.
pub fn find(selector: &Selector) -> Result<Selection, Failure> {
    let mine = self_and_ancestors();
    let ids = procfs::process_ids()
        .map_err(|e| Failure::new(1, format!("cannot list the processes of /proc: {e}")))?;
    let candidates = ids
        .into_iter()
        .filter(|p| !mine.contains(p))
        .filter_map(Observed::read);
    Ok(classify(selector, candidates, |pid| {
        cuda_use(pid).is_some()
    }))
}

/// A process for messages: `1234 (rank 3: python train.py)`, its command line cut to 60 characters.
pub fn describe(m: &Member) -> String {
    let mut command: String = m.command.chars().take(60).collect();
    if command.len() < m.command.len() {
        command.push_str("...");
    }
    match m.rank {
        Some(r) => format!("{} (rank {r}: {command})", m.pid),
        None => format!("{} ({command})", m.pid),
    }
}

/// The CUDA processes of the job, said on stderr by `command` with those skipped; exit 1 naming the selector when
/// there is none, naming what was skipped when only launchers match.
pub fn select(command: &str, selector: &Selector) -> Result<Vec<Member>, Failure> {
    let selection = find(selector)?;
    selection_result(command, selector, selection)
}

fn selection_result(
    command: &str,
    selector: &Selector,
    selection: Selection,
) -> Result<Vec<Member>, Failure> {
    let unreadable = if selection.unreadable > 0 {
        format!(
            " ({} processes of other users could not be read: run as the job's user or root)",
            selection.unreadable
        )
    } else {
        String::new()
    };
    let skipped = selection
        .skipped
        .iter()
        .map(describe)
        .collect::<Vec<_>>()
        .join(", ");
    if selection.cuda.is_empty() {
        if selection.skipped.is_empty() {
            return Err(Failure::new(
                1,
                format!("no process of {selector} on this host{unreadable}"),
            ));
        }
        return Err(Failure::new(
            1,
            format!(
                "no process of {selector} on this host uses CUDA (yet): skipped {} that do not (neither the CUDA \
                 driver mapped nor an NVIDIA device open): {skipped}{unreadable}",
                selection.skipped.len()
            ),
        ));
    }
    eprintln!(
        "gpu-tools {command}: {selector} on this host: {} CUDA {}: {}{}{unreadable}",
        selection.cuda.len(),
        if selection.cuda.len() == 1 {
            "process"
        } else {
            "processes"
        },
        selection
            .cuda
            .iter()
            .map(describe)
            .collect::<Vec<_>>()
            .join(", "),
        if skipped.is_empty() {
            String::new()
        } else {
            format!("; skipped (no CUDA): {skipped}")
        }
    );
    Ok(selection.cuda)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selector(s: &str) -> Selector {
        s.parse().unwrap()
    }

    /// A Slurm task's `/proc` files as recorded on a `slurmd` host of `.ci/slurm` (job 2, rank 1; the
    /// environment cut to the variables that matter here and a few others).
    const SLURM_ENVIRON: &[u8] = include_bytes!("../tests/fixtures/proc/slurm_task.environ");
    const SLURM_CMDLINE: &[u8] = include_bytes!("../tests/fixtures/proc/slurm_task.cmdline");
    const SLURM_CGROUP: &[u8] = include_bytes!("../tests/fixtures/proc/slurm_task.cgroup");

    /// `/proc/PID/cgroup` of a container of pod 0f3c2a1e-8b7d-4e5f-9a6b-c7d8e9f01234, under the kubelet's
    /// systemd cgroup driver (cgroup v2) and its cgroupfs driver (cgroup v1): the layouts the kubelet writes.
    const K8S_SYSTEMD: &[u8] = b"0::/kubepods.slice/kubepods-burstable.slice/\
kubepods-burstable-pod0f3c2a1e_8b7d_4e5f_9a6b_c7d8e9f01234.slice/\
cri-containerd-5d1e3f0c9b8a7d6e5f4c3b2a1d0e9f8c7b6a5d4e3f2c1b0a9d8e7f6c5b4a3d2e.scope\n";
    const K8S_CGROUPFS: &[u8] =
        b"12:memory:/kubepods/besteffort/pod0f3c2a1e-8b7d-4e5f-9a6b-c7d8e9f01234/\
5d1e3f0c9b8a7d6e5f4c3b2a1d0e9f8c7b6a5d4e3f2c1b0a9d8e7f6c5b4a3d2e\n\
1:name=systemd:/kubepods/besteffort/pod0f3c2a1e-8b7d-4e5f-9a6b-c7d8e9f01234/5d1e3f0c9b8a\n";
    const POD: &str = "0f3c2a1e-8b7d-4e5f-9a6b-c7d8e9f01234";

    fn slurm_task() -> Observed {
        Observed::from_text(4321, SLURM_ENVIRON, SLURM_CGROUP, SLURM_CMDLINE)
    }

    #[test]
    fn selectors_parse_and_name_themselves() {
        assert_eq!(selector("slurm:42").to_string(), "slurm job 42");
        assert_eq!(selector("torchrun:abc").to_string(), "torchrun run abc");
        assert_eq!(
            selector("k8s:0F3C2A1E-8B7D").to_string(),
            "Kubernetes pod 0f3c2a1e-8b7d"
        );
        assert_eq!(
            selector("cmd:^python").to_string(),
            "processes whose command line matches '^python'"
        );
        for (bad, says) in [
            ("42", "names no kind of job"),
            ("slurm:", "needs a value"),
            ("slurm:4x", "not a Slurm job id"),
            ("k8s:pod-name", "not a pod UID"),
            ("cmd:(", "not a regular expression"),
            ("pbs:42", "'pbs' is not a kind of job"),
        ] {
            let e = bad.parse::<Selector>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_slurm_task_matches_its_job_by_environment() {
        let task = slurm_task();
        assert!(task.command.contains("rank_double"), "{}", task.command);
        assert!(selector("slurm:2").matches(&task));
        assert!(!selector("slurm:20").matches(&task));
        assert!(!selector("slurm:999999").matches(&task));
        assert_eq!(rank_in(task.environment.as_deref()), Some(1));
        assert!(selector("cmd:rank_double").matches(&task));
        assert!(!selector("cmd:^python").matches(&task));
        assert!(!selector("torchrun:2").matches(&task));
    }

    #[test]
    fn a_slurm_job_matches_by_its_cgroup_alone() {
        let v1 = b"12:freezer:/slurm/uid_1000/job_4242/step_0/task_1\n1:name=systemd:/user.slice\n";
        let v2 = b"0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n";
        for text in [v1.as_slice(), v2] {
            let p = Observed::from_text(7, b"HOME=/root\0", text, b"python\0train.py\0");
            assert!(selector("slurm:4242").matches(&p));
            // Whole path components only: job 424 is another job.
            assert!(!selector("slurm:424").matches(&p));
            assert!(!selector("slurm:42420").matches(&p));
        }
    }

    #[test]
    fn a_torchrun_worker_matches_its_run_id() {
        let p = Observed::from_text(
            9,
            b"TORCHELASTIC_RUN_ID=ddp-7\0RANK=3\0LOCAL_RANK=1\0",
            b"0::/user.slice\n",
            b"/usr/bin/python3\0-u\0train.py\0",
        );
        assert!(selector("torchrun:ddp-7").matches(&p));
        assert!(!selector("torchrun:ddp").matches(&p));
        assert_eq!(rank_in(p.environment.as_deref()), Some(3));
    }

    #[test]
    fn a_pod_matches_under_both_cgroup_drivers() {
        for text in [K8S_SYSTEMD, K8S_CGROUPFS] {
            let p = Observed::from_text(11, b"", text, b"python\0serve.py\0");
            assert!(selector(&format!("k8s:{POD}")).matches(&p));
            assert!(selector(&format!("k8s:{}", POD.to_uppercase())).matches(&p));
            // Another pod whose UID begins the same way is another pod.
            assert!(!selector("k8s:0f3c2a1e-8b7d-4e5f-9a6b-c7d8e9f0123").matches(&p));
        }
        // Seen from a container with a cgroup namespace of its own: the path is relative to that container's group.
        let relative = b"0::/../../kubepods-besteffort-pod0f3c2a1e_8b7d_4e5f_9a6b_c7d8e9f01234.slice/cri-containerd-5d1e.scope\n";
        let p = Observed::from_text(12, b"", relative, b"python\0serve.py\0");
        assert!(selector(&format!("k8s:{POD}")).matches(&p));
        // A Slurm task is in no pod.
        assert!(!selector(&format!("k8s:{POD}")).matches(&slurm_task()));
    }

    #[test]
    fn launchers_are_skipped_and_named() {
        let launcher =
            Observed::from_text(100, SLURM_ENVIRON, SLURM_CGROUP, b"srun\0rank_double\0");
        let worker = slurm_task();
        let other = Observed::from_text(200, b"SLURM_JOB_ID=3\0", b"", b"rank_double\0");
        let hidden = Observed {
            pid: 300,
            command: "secret".into(),
            ..Default::default()
        };
        let s = selector("slurm:2");
        let selection = classify(&s, [launcher, worker, other, hidden], |pid| pid == 4321);
        assert_eq!(
            selection.cuda.iter().map(|m| m.pid).collect::<Vec<_>>(),
            [4321]
        );
        assert_eq!(
            selection.skipped.iter().map(|m| m.pid).collect::<Vec<_>>(),
            [100]
        );
        assert_eq!(selection.unreadable, 1);

        // Only the launcher: exit 1, naming it.
        let launcher =
            Observed::from_text(100, SLURM_ENVIRON, SLURM_CGROUP, b"srun\0rank_double\0");
        let only = classify(&s, [launcher], |_| false);
        let Err(Failure::Message { code: 1, message }) = selection_result("trace", &s, only) else {
            panic!("only a launcher is an error");
        };
        assert!(
            message
                .starts_with("no process of slurm job 2 on this host uses CUDA (yet): skipped 1"),
            "{message}"
        );
        assert!(
            message.contains("100 (rank 1: srun rank_double)"),
            "{message}"
        );

        // Nothing: exit 1, naming the job.
        let none = classify(&selector("slurm:999999"), [slurm_task()], |_| true);
        let Err(Failure::Message { code: 1, message }) = selection_result("trace", &s, none) else {
            panic!("no process is an error");
        };
        assert_eq!(message, "no process of slurm job 2 on this host");
    }

    #[test]
    fn this_process_is_never_a_candidate() {
        // This test binary runs with its own command line: a selector that matches it finds it not.
        let me = Process::current().command_line_text().unwrap();
        let re = regex::escape(&me);
        let selection = find(&selector(&format!("cmd:^{re}$"))).unwrap();
        assert!(
            selection
                .cuda
                .iter()
                .chain(&selection.skipped)
                .all(|m| m.pid != std::process::id()),
            "{selection:?}"
        );
    }

    #[test]
    fn a_process_without_cuda_has_no_cuda_use() {
        // This test maps no CUDA driver and opens no NVIDIA device.
        assert_eq!(cuda_use(std::process::id()), None);
        assert_eq!(cuda_use(u32::MAX / 2), None, "no such process");
    }
}
