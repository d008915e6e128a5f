//! Reading `/proc`: what the kernel says about a process (its state, parent, tracer, threads, command line,
//! environment, control groups, memory map and open files), and which processes there are ([`process_ids`]). Pure `std`: nothing here needs a vendor library or a system call beyond
//! reading files, and nothing changes the process.
//!
//! Everything is read as bytes, so a command name or a mapped path that is not UTF-8, or that holds spaces and
//! parentheses, is kept as it is. A process that is gone, or not readable by this user, is an [`io::Error`] from the
//! reader (`NotFound`, `PermissionDenied`); the parsers ([`parse_maps`], [`parse_stat`], [`parse_environment`],
//! [`parse_cgroups`]) work on bytes read by anyone, for example a copy saved earlier.
//!
//! ```
//! use gpu_tools::linux::procfs::Process;
//!
//! let me = Process::current();
//! let libc = me
//!     .maps()?
//!     .into_iter()
//!     .find(|m| m.file_name().is_some_and(|n| n.to_string_lossy().starts_with("libc.so")));
//! println!("libc mapped from {:?}", libc.and_then(|m| m.path().map(|p| p.to_owned())));
//! assert_eq!(me.stat()?.state, 'R');
//! # Ok::<(), std::io::Error>(())
//! ```

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// One process as `/proc` shows it: `/proc/<pid>`, or `/proc/self` for the calling process.
///
/// A handle names the folder only; each method reads the file it needs when called, so a process that ends
/// between two calls is seen as ended by the second.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Process {
    dir: PathBuf,
}

impl Process {
    /// Process (or thread) `pid`: `/proc/<pid>`.
    pub fn new(pid: u32) -> Self {
        Process {
            dir: PathBuf::from(format!("/proc/{pid}")),
        }
    }

    /// The calling process: `/proc/self`, which stays right in a process whose pid namespace differs from the
    /// one `/proc` was mounted for.
    pub fn current() -> Self {
        Process {
            dir: PathBuf::from("/proc/self"),
        }
    }

    /// Thread `tid` of this process: `/proc/<pid>/task/<tid>`, whose files ([`Process::stat`],
    /// [`Process::status_field`], [`Process::tracer`], [`Process::name`]) describe that one thread.
    pub fn thread(&self, tid: u32) -> Self {
        Process {
            dir: self.dir.join("task").join(tid.to_string()),
        }
    }

    /// The process's folder under `/proc`.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn read(&self, file: &str) -> io::Result<Vec<u8>> {
        std::fs::read(self.dir.join(file))
    }

    /// Whether the process exists. A zombie (ended, not yet reaped) still exists.
    pub fn exists(&self) -> bool {
        self.dir.exists()
    }

    /// `/proc/<pid>/stat`, parsed.
    pub fn stat(&self) -> io::Result<Stat> {
        parse_stat(&self.read("stat")?).ok_or_else(|| invalid("stat", &self.dir))
    }

    /// The value of field `name` of `/proc/<pid>/status` (`"TracerPid"`, `"Uid"`, ...), trimmed; `Ok(None)` when the
    /// kernel has no such field.
    pub fn status_field(&self, name: &str) -> io::Result<Option<String>> {
        let text = self.read("status")?;
        Ok(parse_status_field(&text, name))
    }

    /// The process tracing this one, `Ok(None)` when none does. The kernel names the tracing thread; this is the
    /// process (thread group) it belongs to, or the thread itself when that has ended meanwhile.
    pub fn tracer(&self) -> io::Result<Option<u32>> {
        let thread = self.number_field("TracerPid")?;
        if thread == 0 {
            return Ok(None);
        }
        Ok(Some(Process::new(thread).thread_group().unwrap_or(thread)))
    }

    /// The process (thread group) this process or thread belongs to (`Tgid`).
    pub fn thread_group(&self) -> io::Result<u32> {
        self.number_field("Tgid")
    }

    /// The real user id (the first value of `Uid`).
    pub fn uid(&self) -> io::Result<u32> {
        self.number_field("Uid")
    }

    /// The owner of the process's folder: its effective user id as `/proc` presents it (what the kernel checks
    /// access against).
    pub fn owner(&self) -> io::Result<u32> {
        Ok(std::fs::metadata(&self.dir)?.uid())
    }

    fn number_field(&self, name: &str) -> io::Result<u32> {
        self.status_field(name)?
            .as_deref()
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .ok_or_else(|| invalid(name, &self.dir))
    }

    /// The command name (`comm`, without its newline): the executable's name cut to 15 bytes, or what the process
    /// or thread chose (`prctl(PR_SET_NAME)`, `pthread_setname_np`), any bytes.
    pub fn name(&self) -> io::Result<OsString> {
        let mut bytes = self.read("comm")?;
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
        }
        Ok(OsString::from_vec(bytes))
    }

    /// The CPU time (user and system) the process's threads have used, less that of its live threads whose name
    /// starts with `prefix`: what the rest of the process ran, where `prefix` names threads a tool put there
    /// (CPU time of threads that ended stays in the whole's).
    pub fn cpu_time_less_threads(&self, prefix: &[u8]) -> io::Result<std::time::Duration> {
        let stat = self.stat()?;
        let whole = stat.user_ticks.saturating_add(stat.system_ticks);
        let named = self
            .thread_ids()?
            .into_iter()
            .filter_map(|tid| self.thread(tid).stat().ok())
            .filter(|thread| thread.command.as_encoded_bytes().starts_with(prefix))
            .map(|thread| thread.user_ticks.saturating_add(thread.system_ticks))
            .fold(0, u64::saturating_add);
        ticks_to_time(whole.saturating_sub(named)).ok_or_else(|| invalid("_SC_CLK_TCK", &self.dir))
    }

    /// Each live thread's CPU time (user and system) and name, in the order the kernel lists them; a thread that
    /// ended between the listing and its reading is left out.
    pub fn thread_cpu_times(&self) -> io::Result<Vec<ThreadCpu>> {
        let per_second = ticks_per_second().ok_or_else(|| invalid("_SC_CLK_TCK", &self.dir))?;
        let mut threads = Vec::new();
        for tid in self.thread_ids()? {
            let Ok(stat) = self.thread(tid).stat() else {
                continue;
            };
            threads.push(ThreadCpu {
                tid,
                cpu: ticks_at(
                    stat.user_ticks.saturating_add(stat.system_ticks),
                    per_second,
                ),
                name: stat.command,
            });
        }
        Ok(threads)
    }

    /// The ids of the process's threads (`/proc/<pid>/task`), in the order the kernel lists them.
    pub fn thread_ids(&self) -> io::Result<Vec<u32>> {
        Ok(std::fs::read_dir(self.dir.join("task"))?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect())
    }

    /// The arguments the process was started with (`/proc/<pid>/cmdline`); empty for a kernel thread or a zombie.
    pub fn command_line(&self) -> io::Result<Vec<OsString>> {
        Ok(split_nul(&self.read("cmdline")?)
            .map(|a| OsStr::from_bytes(a).to_owned())
            .collect())
    }

    /// The command line as one text, arguments joined by spaces (bytes that are not UTF-8 replaced), for messages.
    pub fn command_line_text(&self) -> io::Result<String> {
        Ok(split_nul(&self.read("cmdline")?)
            .map(String::from_utf8_lossy)
            .collect::<Vec<_>>()
            .join(" "))
    }

    /// The value environment variable `name` had when the process started (`/proc/<pid>/environ`; a process's later
    /// changes to its own environment are not seen). `Ok(None)` when it was not set.
    pub fn environment_variable(&self, name: &str) -> io::Result<Option<OsString>> {
        Ok(environment_value(&self.read("environ")?, name.as_bytes())
            .map(|v| OsStr::from_bytes(v).to_owned()))
    }

    /// Every variable of the environment the process started with (`/proc/<pid>/environ`), in its order, as
    /// [`parse_environment`] reads it. Only the process's owner (or root) may read it: `PermissionDenied` otherwise.
    pub fn environment(&self) -> io::Result<Vec<(OsString, OsString)>> {
        Ok(parse_environment(&self.read("environ")?)
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect())
    }

    /// The control groups the process belongs to (`/proc/<pid>/cgroup`), one per hierarchy, as
    /// [`parse_cgroups`] reads them.
    pub fn cgroups(&self) -> io::Result<Vec<Cgroup>> {
        Ok(parse_cgroups(&self.read("cgroup")?).collect())
    }

    /// The process's memory map (`/proc/<pid>/maps`), in address order.
    pub fn maps(&self) -> io::Result<Vec<Mapping>> {
        Ok(parse_maps(&self.read("maps")?).collect())
    }

    /// The path of the first mapped file whose name starts with `prefix` (`"libcupti.so"`): where the loader found
    /// a library opened by bare name. `None` when none is mapped or the map cannot be read.
    pub fn mapped_library(&self, prefix: &str) -> Option<PathBuf> {
        self.maps().ok()?.into_iter().find_map(|m| {
            let name = m.file_name()?.to_str()?;
            name.starts_with(prefix)
                .then(|| m.path().map(Path::to_path_buf))?
        })
    }

    /// What the process's open file descriptors point to (`/proc/<pid>/fd`), as the links read; descriptors closed
    /// while the folder is read are left out.
    pub fn open_files(&self) -> io::Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(self.dir.join("fd"))? {
            let Ok(entry) = entry else { continue };
            if let Ok(target) = std::fs::read_link(entry.path()) {
                out.push(target);
            }
        }
        Ok(out)
    }
}

fn invalid(what: &str, dir: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: unexpected {what}", dir.display()),
    )
}

/// The non-empty NUL-separated parts of `bytes`.
fn split_nul(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|&c| c == 0).filter(|a| !a.is_empty())
}

fn parse_status_field(text: &[u8], name: &str) -> Option<String> {
    text.split(|&c| c == b'\n').find_map(|line| {
        let value = line.strip_prefix(name.as_bytes())?.strip_prefix(b":")?;
        Some(String::from_utf8_lossy(value).trim().to_owned())
    })
}

fn environment_value<'a>(bytes: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    bytes
        .split(|&c| c == 0)
        .find_map(|entry| entry.strip_prefix(name)?.strip_prefix(b"="))
}

/// Parses the bytes of a `/proc/<pid>/environ` file: `NAME=value` entries, each ended by a NUL, into
/// `(name, value)`, in order. The value is everything after the first `=` (it may hold more); an entry without
/// `=` (a process may write anything over its environment block) is left out, and so are empty entries.
pub fn parse_environment(bytes: &[u8]) -> impl Iterator<Item = (&OsStr, &OsStr)> + '_ {
    split_nul(bytes).filter_map(|entry| {
        let at = entry.iter().position(|&c| c == b'=')?;
        Some((
            OsStr::from_bytes(&entry[..at]),
            OsStr::from_bytes(&entry[at + 1..]),
        ))
    })
}

/// One line of `/proc/<pid>/cgroup`: a hierarchy and the process's group in it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Cgroup {
    /// The hierarchy's number (0 for the unified hierarchy of cgroup v2).
    pub hierarchy: u32,
    /// The controllers bound to the hierarchy (`cpu,cpuacct`, `name=systemd`; empty for cgroup v2).
    pub controllers: String,
    /// The group's path in the hierarchy, from its root (`/slurm/uid_1000/job_42/step_0`,
    /// `/kubepods.slice/...`); relative to the reader's own group where the process lies outside its cgroup
    /// namespace (`/../..`).
    pub path: OsString,
}

impl Cgroup {
    /// The path's parts, without the empty ones: `["slurm", "uid_1000", "job_42", "step_0"]`.
    pub fn components(&self) -> impl Iterator<Item = &OsStr> + '_ {
        self.path
            .as_bytes()
            .split(|&c| c == b'/')
            .filter(|c| !c.is_empty())
            .map(OsStr::from_bytes)
    }
}

/// Parses the lines of a `/proc/<pid>/cgroup` file: `hierarchy:controllers:path`, the path up to the end of the
/// line (it may hold `:`); lines that do not parse are skipped.
pub fn parse_cgroups(text: &[u8]) -> impl Iterator<Item = Cgroup> + '_ {
    text.split(|&c| c == b'\n').filter_map(|line| {
        let first = line.iter().position(|&c| c == b':')?;
        let rest = &line[first + 1..];
        let second = rest.iter().position(|&c| c == b':')?;
        Some(Cgroup {
            hierarchy: std::str::from_utf8(&line[..first]).ok()?.parse().ok()?,
            controllers: std::str::from_utf8(&rest[..second]).ok()?.to_owned(),
            path: OsStr::from_bytes(&rest[second + 1..]).to_owned(),
        })
    })
}

/// The ids of the processes `/proc` lists now (its numeric folders), in increasing order. Threads are not listed
/// (only processes, as `ps` shows them); a process started or ended while the folder is read may or may not be.
pub fn process_ids() -> io::Result<Vec<u32>> {
    let mut ids: Vec<u32> = std::fs::read_dir("/proc")?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

/// Clock ticks (`/proc`'s unit of CPU time) as a duration, at the rate the kernel gave this process (`AT_CLKTCK` in
/// `/proc/self/auxv`, what `sysconf(_SC_CLK_TCK)` answers); `None` where it gave none.
fn ticks_to_time(ticks: u64) -> Option<std::time::Duration> {
    Some(ticks_at(ticks, ticks_per_second()?))
}

/// The rate of [`ticks_to_time`], read once for many conversions.
fn ticks_per_second() -> Option<u64> {
    let auxv = std::fs::read("/proc/self/auxv").ok()?;
    clock_ticks_per_second(&auxv).filter(|&t| t > 0)
}

/// `ticks` at `per_second` (not 0) as a duration.
fn ticks_at(ticks: u64, per_second: u64) -> std::time::Duration {
    std::time::Duration::from_nanos(ticks.saturating_mul(1_000_000_000) / per_second)
}

/// `AT_CLKTCK`'s value in an auxiliary vector (pairs of native words, key then value, ending at `AT_NULL`).
fn clock_ticks_per_second(auxv: &[u8]) -> Option<u64> {
    const AT_NULL: u64 = 0;
    const AT_CLKTCK: u64 = 17;
    const WORD: usize = std::mem::size_of::<usize>();
    let word = |bytes: &[u8]| -> Option<u64> {
        let array: [u8; WORD] = bytes.try_into().ok()?;
        u64::try_from(usize::from_ne_bytes(array)).ok()
    };
    for pair in auxv.chunks_exact(2 * WORD) {
        let (key, value) = pair.split_at(WORD);
        match word(key)? {
            AT_NULL => return None,
            AT_CLKTCK => return word(value),
            _ => {}
        }
    }
    None
}

/// One thread's CPU time, as [`Process::thread_cpu_times`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadCpu {
    /// The thread's id.
    pub tid: u32,
    /// Its name (`comm`), as [`Stat::command`].
    pub name: OsString,
    /// The CPU time it has used, user and system.
    pub cpu: std::time::Duration,
}

/// The fields of `/proc/<pid>/stat` that the crate uses (see `proc(5)`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stat {
    /// The process id (field 1).
    pub pid: u32,
    /// The command name (field 2, without its parentheses): chosen by the process (`prctl(PR_SET_NAME)`), so any
    /// bytes, spaces and parentheses included.
    pub command: OsString,
    /// The state (field 3): `R` running, `S` sleeping, `D` waiting on a disk, `T` stopped, `t` stopped by a
    /// tracer, `Z` zombie, `X` dead, ...
    pub state: char,
    /// The parent's process id (field 4).
    pub parent: u32,
    /// CPU time its threads spent in user mode, in clock ticks (field 14; `sysconf`'s `_SC_CLK_TCK` a second).
    pub user_ticks: u64,
    /// CPU time its threads spent in the kernel, in clock ticks (field 15).
    pub system_ticks: u64,
    /// The number of threads (field 20).
    pub threads: u64,
    /// The start time in clock ticks after boot (field 22): with the pid it names one process, so a pid reused
    /// by a new process is told apart from an earlier one.
    pub start_time: u64,
}

impl Stat {
    /// Whether the process has ended and waits to be reaped (state `Z`, or `X`/`x` while it is torn down).
    pub fn has_ended(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Parses a `/proc/<pid>/stat` line. The command name may hold spaces and parentheses, so it ends at the last `)`;
/// `None` for anything that is not such a line.
pub fn parse_stat(line: &[u8]) -> Option<Stat> {
    let open = line.iter().position(|&c| c == b'(')?;
    let close = line.iter().rposition(|&c| c == b')')?;
    let pid = std::str::from_utf8(line.get(..open)?)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let command = OsStr::from_bytes(line.get(open + 1..close)?).to_owned();
    let rest = std::str::from_utf8(line.get(close + 1..)?).ok()?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    let number = |i: usize| fields.get(i)?.parse::<u64>().ok();
    // The kernel writes the state as one letter: more is a damaged line, not that state.
    let mut state = fields.first()?.chars();
    let (Some(state), None) = (state.next(), state.next()) else {
        return None;
    };
    Some(Stat {
        pid,
        command,
        state,
        parent: number(1)?.try_into().ok()?,
        user_ticks: number(11)?,
        system_ticks: number(12)?,
        threads: number(17)?,
        start_time: number(19)?,
    })
}

/// One line of `/proc/<pid>/maps`: a range of the address space and what is mapped there.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Permissions as the kernel writes them: `r`/`-`, `w`/`-`, `x`/`-`, then `p` (private) or `s` (shared).
    pub permissions: [u8; 4],
    /// Offset of `start` in the mapped file (0 for anonymous memory).
    pub offset: u64,
    /// Device of the mapped file (major, minor); (0, 0) for anonymous memory.
    pub device: (u32, u32),
    /// Inode of the mapped file; 0 for anonymous memory.
    pub inode: u64,
    /// What the kernel names the mapping by: a file's path (spaces and all; a newline in it is written `\012`,
    /// and ` (deleted)` follows a file deleted since it was mapped), a pseudo-name such as `[heap]` or `[stack]`,
    /// or empty for anonymous memory.
    pub pathname: OsString,
}

impl Mapping {
    /// A file mapped from offset 0 at address 0: where an unloaded library's symbols lie relative to its base.
    #[cfg(feature = "inject")]
    pub(crate) fn file_at_zero() -> Self {
        Mapping {
            start: 0,
            end: u64::MAX,
            permissions: *b"r-xp",
            offset: 0,
            device: (0, 0),
            inode: 1,
            pathname: OsString::from("/"),
        }
    }

    /// The mapped file's path, when the mapping names one (an absolute path).
    pub fn path(&self) -> Option<&Path> {
        self.pathname
            .as_bytes()
            .starts_with(b"/")
            .then(|| Path::new(&self.pathname))
    }

    /// The mapped file's name (the last part of its path).
    pub fn file_name(&self) -> Option<&OsStr> {
        self.path()?.file_name()
    }

    /// Whether `addr` lies inside the mapping.
    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }

    /// Whether the same file is mapped (device and inode); never true for anonymous memory.
    pub fn same_file(&self, other: &Mapping) -> bool {
        self.inode != 0 && self.inode == other.inode && self.device == other.device
    }

    /// Whether the mapping may be executed.
    pub fn is_executable(&self) -> bool {
        self.permissions[2] == b'x'
    }
}

/// Where the loader mapped one file: the starts, ascending, of the mappings at file offset `offset` among
/// `same_file` (the memory map's lines of one file, in any order) that begin an image it loaded, as opposed to the
/// file mapped as data. A program that reads a library's debug information (a symbolizer printing a backtrace)
/// maps the whole file read-only at offset 0 too; an image is told apart by an executable mapping of the file
/// after its start and before the next mapping at `offset`.
#[cfg_attr(not(feature = "inject"), allow(dead_code))]
pub(crate) fn loaded_at(same_file: &[&Mapping], offset: u64) -> Vec<u64> {
    let mut at: Vec<u64> = same_file
        .iter()
        .filter(|m| m.offset == offset)
        .map(|m| m.start)
        .collect();
    at.sort_unstable();
    at.dedup();
    let ends = at
        .iter()
        .skip(1)
        .copied()
        .chain([u64::MAX])
        .collect::<Vec<_>>();
    at.iter()
        .zip(ends)
        .filter(|&(&start, end)| {
            same_file
                .iter()
                .any(|m| m.is_executable() && m.start >= start && m.start < end)
        })
        .map(|(&start, _)| start)
        .collect()
}

/// Parses the lines of a `/proc/<pid>/maps` file; lines that do not parse are skipped.
///
/// A line is `start-end perms offset major:minor inode`, then, after padding, the pathname up to the end of the
/// line: a path keeps its spaces.
pub fn parse_maps(text: &[u8]) -> impl Iterator<Item = Mapping> + '_ {
    text.split(|&c| c == b'\n').filter_map(parse_maps_line)
}

fn parse_maps_line(line: &[u8]) -> Option<Mapping> {
    let mut rest = line;
    let mut field = || -> Option<&str> {
        let start = rest.iter().position(|&c| c != b' ' && c != b'\t')?;
        let tail = &rest[start..];
        let len = tail
            .iter()
            .position(|&c| c == b' ' || c == b'\t')
            .unwrap_or(tail.len());
        rest = &tail[len..];
        std::str::from_utf8(&tail[..len]).ok()
    };
    let (range, perms, offset, device, inode) = (field()?, field()?, field()?, field()?, field()?);
    let (start, end) = range.split_once('-')?;
    let (major, minor) = device.split_once(':')?;
    let permissions: [u8; 4] = perms.as_bytes().try_into().ok()?;
    let pathname = match rest.iter().position(|&c| c != b' ' && c != b'\t') {
        Some(at) => OsStr::from_bytes(&rest[at..]).to_owned(),
        None => OsString::new(),
    };
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        permissions,
        offset: u64::from_str_radix(offset, 16).ok()?,
        device: (
            u32::from_str_radix(major, 16).ok()?,
            u32::from_str_radix(minor, 16).ok()?,
        ),
        inode: inode.parse().ok()?,
        pathname,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_clock_tick_rate_is_read_from_the_auxiliary_vector() {
        let pairs =
            |words: &[usize]| -> Vec<u8> { words.iter().flat_map(|w| w.to_ne_bytes()).collect() };
        assert_eq!(
            super::clock_ticks_per_second(&pairs(&[6, 4096, 17, 100, 0, 0])),
            Some(100)
        );
        assert_eq!(
            super::clock_ticks_per_second(&pairs(&[6, 4096, 0, 0, 17, 100])),
            None,
            "after AT_NULL"
        );
        assert_eq!(super::clock_ticks_per_second(&pairs(&[6, 4096])), None);
        let cut = pairs(&[6, 4096, 17, 100]);
        assert_eq!(
            super::clock_ticks_per_second(&cut[..cut.len() - 1]),
            None,
            "a cut pair"
        );
        // This process's, as the kernel gave it (100 on every Linux this runs on).
        let auxv = std::fs::read("/proc/self/auxv").unwrap();
        assert_eq!(super::clock_ticks_per_second(&auxv), Some(100));
    }

    #[test]
    fn cpu_time_leaves_out_the_threads_named() {
        use std::time::{Duration, Instant};
        let me = super::Process::current();
        let before = me.cpu_time_less_threads(b"procfs-spin").unwrap();
        let (spun, done) = std::sync::mpsc::channel();
        let spinner = std::thread::Builder::new()
            .name("procfs-spin".into())
            .spawn(move || {
                // Until this thread has used 30 ticks of CPU (its own stat), however busy the machine.
                // SAFETY: gettid has no preconditions.
                let own = super::Process::current()
                    .thread(u32::try_from(unsafe { libc::gettid() }).unwrap());
                let t = Instant::now();
                let mut x = 0u64;
                while t.elapsed() < Duration::from_secs(20) {
                    let stat = own.stat().unwrap();
                    if stat.user_ticks + stat.system_ticks >= 30 {
                        break;
                    }
                    for _ in 0..100_000 {
                        x = std::hint::black_box(x.wrapping_add(1));
                    }
                }
                spun.send(()).unwrap();
                std::thread::park();
            })
            .unwrap();
        done.recv().unwrap();
        let less = me.cpu_time_less_threads(b"procfs-spin").unwrap();
        let whole = me.cpu_time_less_threads(b"\xff-none").unwrap();
        // Thread by thread, the spinner is there by its name, with its 30 ticks.
        let threads = me.thread_cpu_times().unwrap();
        let spun: Vec<_> = threads.iter().filter(|t| t.name == "procfs-spin").collect();
        assert_eq!(spun.len(), 1, "{threads:?}");
        assert!(spun[0].cpu >= Duration::from_millis(300), "{spun:?}");
        spinner.thread().unpark();
        spinner.join().unwrap();
        assert!(
            whole.saturating_sub(less) >= Duration::from_millis(300),
            "the named thread's 30 ticks left out: whole {whole:?}, less {less:?}"
        );
        assert!(less >= before, "{before:?} then {less:?}");
    }

    use super::*;

    #[test]
    fn reads_this_process() {
        let me = Process::new(std::process::id());
        assert!(me.exists());
        assert_eq!(me.tracer().unwrap(), None);
        assert_eq!(me.thread_group().unwrap(), std::process::id());
        let stat = me.stat().unwrap();
        assert_eq!(stat.pid, std::process::id());
        assert_eq!(stat.parent, std::os::unix::process::parent_id());
        assert!(!stat.has_ended());
        assert!(stat.threads >= 1);
        assert!(me.thread_ids().unwrap().contains(&std::process::id()));
        let main = me.thread(std::process::id());
        assert_eq!(main.stat().unwrap().pid, std::process::id());
        assert_eq!(main.tracer().unwrap(), None);
        assert_eq!(main.name().unwrap(), stat.command);
        assert!(!me.command_line().unwrap().is_empty());
        assert!(!me.command_line_text().unwrap().is_empty());
        assert!(me.uid().is_ok());
        assert_eq!(me.owner().unwrap(), Process::current().owner().unwrap());
        assert!(!me.open_files().unwrap().is_empty());
        let gone = Process::new(u32::MAX / 2);
        assert!(!gone.exists());
        assert_eq!(gone.tracer().unwrap_err().kind(), io::ErrorKind::NotFound);
        assert_eq!(gone.stat().unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn environment_variables_by_exact_name() {
        let env = b"A=1\0CUDBG_APICLIENT_PID=42\0CUDBG_APICLIENT_PID2=7\0EMPTY=\0";
        assert_eq!(
            environment_value(env, b"CUDBG_APICLIENT_PID"),
            Some(b"42".as_slice())
        );
        assert_eq!(environment_value(env, b"EMPTY"), Some(b"".as_slice()));
        assert_eq!(environment_value(env, b"CUDBG"), None);
        assert_eq!(environment_value(b"", b"A"), None);
        assert_eq!(
            Process::current()
                .environment_variable("PATH")
                .unwrap()
                .is_some(),
            std::env::var_os("PATH").is_some()
        );
    }

    #[test]
    fn environment_entries_split_at_the_first_equals_sign() {
        let env = b"SLURM_JOB_ID=42\0OPTS=a=b=c\0EMPTY=\0no-equals-sign\0\0\xffK=\xfe\0";
        let vars: Vec<(&[u8], &[u8])> = parse_environment(env)
            .map(|(k, v)| (k.as_bytes(), v.as_bytes()))
            .collect();
        assert_eq!(
            vars,
            [
                (b"SLURM_JOB_ID".as_slice(), b"42".as_slice()),
                (b"OPTS", b"a=b=c"),
                (b"EMPTY", b""),
                (b"\xffK", b"\xfe"),
            ]
        );
        assert_eq!(parse_environment(b"").count(), 0);
        let mine = Process::current().environment().unwrap();
        assert_eq!(
            mine.iter()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.clone()),
            // The environment this process started with; the test harness does not change PATH.
            std::env::var_os("PATH")
        );
    }

    /// `/proc/PID/cgroup` of a Slurm task under cgroup v1 (the `proctrack/cgroup` plugin's hierarchy), of one
    /// under cgroup v2, and of a Kubernetes container under the systemd driver: paths with `:` and odd lines.
    #[test]
    fn cgroup_lines_keep_their_paths() {
        let v1 = b"\
12:freezer:/slurm/uid_1000/job_4242/step_0/task_1
11:memory:/slurm/uid_1000/job_4242/step_0
1:name=systemd:/system.slice/slurmd.service
not a line
";
        let groups: Vec<Cgroup> = parse_cgroups(v1).collect();
        assert_eq!(groups.len(), 3);
        assert_eq!(groups[0].hierarchy, 12);
        assert_eq!(groups[0].controllers, "freezer");
        assert_eq!(groups[0].path, "/slurm/uid_1000/job_4242/step_0/task_1");
        assert_eq!(
            groups[0].components().collect::<Vec<_>>(),
            ["slurm", "uid_1000", "job_4242", "step_0", "task_1"]
        );
        assert_eq!(groups[2].controllers, "name=systemd");
        let v2 = b"0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n";
        let g: Vec<Cgroup> = parse_cgroups(v2).collect();
        assert_eq!((g[0].hierarchy, g[0].controllers.as_str()), (0, ""));
        assert!(g[0].components().any(|c| c == "job_4242"));
        let k8s = b"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b_3c.slice/cri-containerd-ab:cd.scope";
        let g: Vec<Cgroup> = parse_cgroups(k8s).collect();
        assert_eq!(
            g[0].path,
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b_3c.slice/cri-containerd-ab:cd.scope"
        );
        assert_eq!(parse_cgroups(b"x::/a\n1:cpu\n").count(), 0);
        assert!(!Process::current().cgroups().unwrap().is_empty());
    }

    #[test]
    fn this_process_is_listed() {
        let ids = process_ids().unwrap();
        assert!(ids.binary_search(&std::process::id()).is_ok(), "{ids:?}");
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn status_fields_by_exact_name() {
        let text = b"Name:\tx\nTgid:\t42\nTracerPid:\t0\nUid:\t1000\t1000\t1000\t1000\n";
        assert_eq!(parse_status_field(text, "Tgid").as_deref(), Some("42"));
        assert_eq!(
            parse_status_field(text, "Uid").as_deref(),
            Some("1000\t1000\t1000\t1000")
        );
        assert_eq!(parse_status_field(text, "Tg"), None);
    }

    #[test]
    fn stat_survives_odd_command_names() {
        let line = b"42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 98765 1000 10";
        let s = parse_stat(line).unwrap();
        assert_eq!((s.pid, s.state, s.parent), (42, 'S', 1));
        assert_eq!(s.command, "a (b) c");
        assert_eq!((s.threads, s.start_time), (3, 98765));
        assert_eq!((s.user_ticks, s.system_ticks), (1, 2));
        let zombie = b"7 (\xff x) Z 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0";
        let z = parse_stat(zombie).unwrap();
        assert!(z.has_ended());
        assert_eq!(z.command.as_bytes(), b"\xff x");
        assert_eq!(parse_stat(b"garbage"), None);
        assert_eq!(parse_stat(b"42 (x) R 1 2"), None, "too few fields");
    }

    #[test]
    fn a_state_of_more_than_one_letter_is_not_a_stat_line() {
        let line = b"42 (x) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 98765 1000 10";
        assert!(parse_stat(line).is_some());
        let damaged = b"42 (x) Sx 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 98765 1000 10";
        assert_eq!(parse_stat(damaged), None);
    }

    /// The command name in a stat line is chosen by the process: spaces, parentheses and any bytes. Random lines
    /// built from such pieces never make the parser panic, and a line it accepts has the fields after the last `)`.
    #[test]
    fn arbitrary_stat_lines_parse_without_panicking() {
        let pieces: [&[u8]; 13] = [
            b"(",
            b")",
            b" ",
            b"S",
            b"Z",
            b"42",
            "\u{e9}".as_bytes(),
            b"x)y",
            b"\n",
            b"",
            b"(a b)",
            b"18446744073709551616",
            b"\xff",
        ];
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..200_000 {
            let mut line = Vec::new();
            for _ in 0..(seed % 40) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                line.extend_from_slice(pieces[(seed % pieces.len() as u64) as usize]);
            }
            if let Some(s) = parse_stat(&line) {
                let close = line.iter().rposition(|&c| c == b')').unwrap();
                let tail = std::str::from_utf8(&line[close + 1..]).unwrap();
                let first = tail.split_ascii_whitespace().next().unwrap();
                assert!(first.starts_with(s.state));
            }
        }
    }

    #[test]
    fn a_mapped_library_is_found_by_its_name_prefix() {
        let me = Process::current();
        let libc = me.mapped_library("libc.so").expect("this test links libc");
        assert!(libc.is_absolute(), "{}", libc.display());
        assert!(me.mapped_library("libno-such-library.so").is_none());
    }

    #[test]
    fn maps_lines_keep_paths_with_spaces() {
        let maps = b"\
7f0000000000-7f0000001000 r--p 00000000 08:01 123   /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000001000-7f0000002000 r-xp 00001000 08:01 456   /opt/py/site-packages/nvidia/cu13/lib/libcupti.so.13
7f0000002000-7f0000003000 rw-p 00000000 00:00 0
7f0000003000-7f0000004000 r--p 00000000 fd:01 789   /usr/lib/my libcuda dir/libcuda.so.1
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
7f0000005000-7f0000006000 r--p 00000000 08:01 42 /tmp/gone (deleted)
not a line
";
        let m: Vec<Mapping> = parse_maps(maps).collect();
        assert_eq!(m.len(), 6);
        assert_eq!(
            m[1],
            Mapping {
                start: 0x7f00_0000_1000,
                end: 0x7f00_0000_2000,
                permissions: *b"r-xp",
                offset: 0x1000,
                device: (8, 1),
                inode: 456,
                pathname: "/opt/py/site-packages/nvidia/cu13/lib/libcupti.so.13".into(),
            }
        );
        assert!(m[1].is_executable() && !m[0].is_executable());
        assert_eq!(m[2].pathname, "");
        assert_eq!(m[2].path(), None);
        assert_eq!(
            m[3].path(),
            Some(Path::new("/usr/lib/my libcuda dir/libcuda.so.1"))
        );
        assert_eq!(m[3].device, (0xfd, 1));
        assert_eq!(m[3].file_name(), Some(OsStr::new("libcuda.so.1")));
        assert_eq!(m[4].pathname, "[stack]");
        assert_eq!(m[4].path(), None);
        assert_eq!(m[5].pathname, "/tmp/gone (deleted)");
        assert!(m[0].contains(0x7f00_0000_0fff) && !m[0].contains(0x7f00_0000_1000));
        assert!(m[0].same_file(&m[0]) && !m[0].same_file(&m[1]) && !m[2].same_file(&m[2]));
    }

    #[test]
    fn handles_and_parsed_lines_are_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Process>();
        send_sync::<Stat>();
        send_sync::<Mapping>();
        send_sync::<Cgroup>();
    }

    #[test]
    fn this_process_maps_libc() {
        let maps = Process::current().maps().unwrap();
        let libc = maps
            .iter()
            .find(|m| {
                m.file_name()
                    .is_some_and(|n| n.as_bytes().starts_with(b"libc.so"))
            })
            .expect("libc is mapped");
        assert!(libc.path().unwrap().exists());
        assert!(maps.windows(2).all(|w| w[0].start < w[1].start));
    }
}
