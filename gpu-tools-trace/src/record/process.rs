//! The traced process: the first and last records of its stream, and its host and job labels (ranks).

/// First record of a stream.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessStart {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub parent_pid: u32,
    /// When tracing began, ns.
    pub time: u64,
    /// The command line, arguments separated by spaces (cut at 4 KiB).
    pub command: String,
}

/// Why a stream ended.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum EndReason {
    /// The process exited normally (the exit handler ran).
    Exit,
    /// Tracing was stopped before the process ended.
    Stopped,
    /// A fatal signal (its number) was about to end the process: the records were flushed in its handler.
    Signal(u8),
    /// A code newer than this crate.
    Other(u8),
}

impl EndReason {
    /// Wire code.
    pub fn code(self) -> u8 {
        match self {
            EndReason::Exit => 1,
            EndReason::Stopped => 2,
            EndReason::Signal(n) => 0x80 | (n & 0x7f),
            EndReason::Other(c) => c,
        }
    }

    /// From the wire code.
    pub fn from_code(code: u8) -> Self {
        match code {
            1 => EndReason::Exit,
            2 => EndReason::Stopped,
            c if c & 0x80 != 0 => EndReason::Signal(c & 0x7f),
            c => EndReason::Other(c),
        }
    }
}

/// Said as `exit`, `tracing stopped`, `signal 11 (SIGSEGV)` (the number alone for a signal without a standard
/// Linux name), `unknown (code 9)`.
impl std::fmt::Display for EndReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            EndReason::Exit => f.write_str("exit"),
            EndReason::Stopped => f.write_str("tracing stopped"),
            EndReason::Signal(n) => match signal_name(n) {
                Some(name) => write!(f, "signal {n} ({name})"),
                None => write!(f, "signal {n}"),
            },
            EndReason::Other(c) => write!(f, "unknown (code {c})"),
        }
    }
}

/// The name of Linux's standard signal `n` (1 to 31, numbered as on x86, Arm and RISC-V): `SIGSEGV` for 11.
fn signal_name(n: u8) -> Option<&'static str> {
    const NAMES: [&str; 31] = [
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    NAMES.get(usize::from(n).checked_sub(1)?).copied()
}

/// Last record of a stream: what the sending side counted, so the receiver can check it got everything.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessEnd {
    /// When the stream ended, ns.
    pub time: u64,
    /// Why.
    pub reason: EndReason,
    /// Records sent before this one, every kind counted (a receiver that got them all has this many plus one).
    pub records: u64,
    /// Records the vendor reported as dropped.
    pub dropped: u64,
    /// Vendor records that could not be decoded, or were of a kind this format does not carry.
    pub skipped: u64,
    /// Calls of the record callback that panicked (their batch was lost).
    pub callback_panics: u64,
}

/// The job labels of a process: its host and the rank variables set for it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ProcessInfo {
    /// Host name.
    pub host: String,
    /// The host's boot id (`/proc/sys/kernel/random/boot_id`): processes with the same host and boot id share one
    /// `CLOCK_MONOTONIC`. Empty where unknown.
    pub boot_id: String,
    /// Rank variables as `(name, value)`: `RANK`, `LOCAL_RANK`, `WORLD_SIZE`, `OMPI_COMM_WORLD_RANK`, `PMI_RANK`,
    /// ..., those set, in [`RANK_VARIABLES`] order.
    pub labels: Vec<(String, String)>,
}

/// The environment variables launchers set to number the processes of a job, read into [`ProcessInfo::labels`].
pub const RANK_VARIABLES: [&str; 11] = [
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMI_RANK",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "SLURM_NTASKS",
];

/// Each launcher's rank variable and the size of the world it numbers: a rank from `SLURM_PROCID` counts among
/// `SLURM_NTASKS` (under torchrun in a one-task-per-node step, `SLURM_NTASKS` is the nodes, `WORLD_SIZE` the
/// ranks).
const RANK_AND_SIZE: [(&str, &str); 4] = [
    ("RANK", "WORLD_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI_RANK", "PMI_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS"),
];

impl ProcessInfo {
    /// This process's host name and the rank variables of its environment.
    pub fn current() -> ProcessInfo {
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        ProcessInfo::from_lookup(host_name(), boot_id, |k| std::env::var(k).ok())
    }

    /// From a host name, a boot id and a variable lookup (for tests).
    pub fn from_lookup(
        host: String,
        boot_id: String,
        get: impl Fn(&str) -> Option<String>,
    ) -> ProcessInfo {
        let labels = RANK_VARIABLES
            .iter()
            .filter_map(|k| get(k).map(|v| (k.to_string(), v)))
            .collect();
        ProcessInfo {
            host,
            boot_id,
            labels,
        }
    }

    /// The process's rank as its launcher numbered it: `RANK`, else `OMPI_COMM_WORLD_RANK`, `PMI_RANK`,
    /// `SLURM_PROCID`.
    pub fn rank(&self) -> Option<u32> {
        RANK_AND_SIZE
            .iter()
            .find_map(|(k, _)| self.label(k))
            .and_then(|v| v.trim().parse().ok())
    }

    /// The number of ranks of the job, as the launcher that gave [`rank`](Self::rank) says: `WORLD_SIZE` beside
    /// `RANK`, `OMPI_COMM_WORLD_SIZE`, `PMI_SIZE`, `SLURM_NTASKS` beside the others; `None` where that variable
    /// was not recorded (a trace written before it was) or is not a number.
    pub fn world_size(&self) -> Option<u32> {
        self.world_size_variable().map(|(_, n)| n)
    }

    /// [`world_size`](Self::world_size) with the variable that gave it.
    pub fn world_size_variable(&self) -> Option<(&'static str, u32)> {
        let (_, size) = RANK_AND_SIZE
            .iter()
            .find(|(k, _)| self.label(k).is_some())?;
        Some((size, self.label(size)?.trim().parse().ok()?))
    }

    /// The value of one label.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// `rank 3 (local 1)`-style text, empty where no rank variable is set.
    pub fn rank_label(&self) -> String {
        let local = ["LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"]
            .iter()
            .find_map(|k| self.label(k));
        match (self.rank(), local) {
            (Some(r), Some(l)) => format!("rank {r} (local {l})"),
            (Some(r), None) => format!("rank {r}"),
            (None, Some(l)) => format!("local rank {l}"),
            (None, None) => String::new(),
        }
    }
}

/// This host's name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`, else `localhost`).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_end_reason_is_said_with_its_signal_named() {
        let said: Vec<String> = [
            EndReason::Exit,
            EndReason::Stopped,
            EndReason::Signal(11),
            EndReason::Signal(6),
            EndReason::Signal(7),
            EndReason::Signal(8),
            EndReason::Signal(15),
            EndReason::Signal(2),
            EndReason::Signal(0),
            EndReason::Signal(40),
            EndReason::Other(9),
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            said,
            [
                "exit",
                "tracing stopped",
                "signal 11 (SIGSEGV)",
                "signal 6 (SIGABRT)",
                "signal 7 (SIGBUS)",
                "signal 8 (SIGFPE)",
                "signal 15 (SIGTERM)",
                "signal 2 (SIGINT)",
                "signal 0",
                "signal 40",
                "unknown (code 9)"
            ]
        );
        assert_eq!(signal_name(31), Some("SIGSYS"));
        assert_eq!(signal_name(32), None);
    }

    fn info(vars: &[(&str, &str)]) -> ProcessInfo {
        ProcessInfo::from_lookup("h".into(), String::new(), |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn the_world_size_is_the_one_of_the_rank_variable_used() {
        // torchrun in a one-task-per-node srun step: RANK counts among WORLD_SIZE, not SLURM_NTASKS (the nodes).
        let torchrun = info(&[
            ("RANK", "5"),
            ("WORLD_SIZE", "16"),
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "2"),
        ]);
        assert_eq!(torchrun.rank(), Some(5));
        assert_eq!(torchrun.world_size_variable(), Some(("WORLD_SIZE", 16)));
        // srun with a task per rank.
        let srun = info(&[("SLURM_PROCID", "3"), ("SLURM_NTASKS", "4")]);
        assert_eq!(srun.rank(), Some(3));
        assert_eq!(srun.world_size(), Some(4));
        let mpi = info(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "8")]);
        assert_eq!(mpi.world_size_variable(), Some(("OMPI_COMM_WORLD_SIZE", 8)));
        // A rank without its size (a trace written before the size was recorded) has none.
        assert_eq!(
            info(&[("RANK", "1"), ("SLURM_NTASKS", "2")]).world_size(),
            None
        );
    }
}
