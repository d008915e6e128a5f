//! Stopping every thread of a running process but a few, and telling whether any stopped thread is inside given
//! libraries.
//!
//! Some vendor calls deadlock when another thread of the process is inside the vendor's libraries at that moment:
//! CUPTI's PC sampling enable, start, stop and disable take locks of the CUDA driver and of CUPTI in an order that
//! a program thread inside `libcuda.so` or `libcupti.so` may hold the other way round. A tool thread injected into
//! the program makes those calls safely this way: another process stops every program thread but the tool's own
//! and the driver's internal ones ([`StoppedThreads::stop`]), checks that none of them is inside libcuda, libcupti
//! or libnvperf ([`StoppedThreads::find_inside`], with [`library_code_ranges`]), and if so lets the tool thread
//! make its calls while the others stay stopped, then lets them go ([`StoppedThreads::resume`], or drop). If one
//! is inside, it lets them go at once, waits a moment and tries again.
//!
//! ```no_run
//! use std::time::Duration;
//! use gpu_tools::linux::quiesce::{StoppedThreads, library_code_ranges};
//!
//! let (pid, tool_thread) = (4242, 4250);
//! let ranges = library_code_ranges(pid, &["libcuda.so", "libcupti.so", "libnvperf"])?;
//! let spare = |tid: u32, name: &std::ffi::OsStr| {
//!     tid == tool_thread || name.to_string_lossy().starts_with("cuda")
//! };
//! loop {
//!     let stopped = StoppedThreads::stop(pid, &spare, Duration::from_secs(1))?;
//!     match stopped.find_inside(&ranges) {
//!         None => {
//!             // Here the tool thread makes its calls; the program's threads stay stopped.
//!             stopped.resume()?;
//!             break;
//!         }
//!         Some(inside) => {
//!             println!("thread {} ({:?}) is inside: {:?}", inside.tid, inside.name, inside.evidence);
//!             stopped.resume()?;
//!             std::thread::sleep(Duration::from_millis(2));
//!         }
//!     }
//! }
//! # Ok::<(), gpu_tools::linux::quiesce::QuiesceError>(())
//! ```
//!
//! # Stopping
//!
//! Each thread listed in `/proc/<pid>/task` that is not spared is seized (`PTRACE_SEIZE`) and interrupted
//! (`PTRACE_INTERRUPT`), and its stop awaited (`waitid` with `__WALL`); then the list is read again until it
//! holds no thread not seen before, since running threads may start others meanwhile. A thread that ends
//! meanwhile is left out. Spared threads run on, and a thread they start after [`StoppedThreads::stop`] returned
//! runs too. A signal that reaches a thread before the interrupt does stops it as well (a signal-delivery stop,
//! which answers the interrupt: the kernel drops a pending interrupt at any ptrace stop); the thread is held there
//! and gets the signal, with its original details, when it is let go. A process cannot trace its own threads, so
//! the stopping is done from another process (the tool's own thread cannot do it).
//!
//! ptrace ties each stopped thread to the thread of this process that seized it; a thread of this crate holds
//! them (`worker`), so a [`StoppedThreads`] may be used and dropped on any thread. Dropping it, or
//! [`StoppedThreads::resume`], lets every thread go. Any failure of [`StoppedThreads::stop`] lets the threads
//! stopped so far go before it returns, also those seized that never stopped: they are released as the holding
//! thread ends.
//!
//! # Inside
//!
//! A stopped thread is inside the given code when its program counter is in one of the ranges, or when any
//! 8-byte-aligned word of its live stack is: from its stack pointer up to the end of the mapping that holds it,
//! at most [`STACK_SCAN_LIMIT`] bytes. This scan is conservative on purpose: on x86-64 every return address of
//! every live frame is on the stack, so no thread inside those libraries can be missed; stale words (left in a
//! frame by earlier calls, or data that happens to point there) may give false positives, and the caller tries
//! again. A stack that cannot be read, or is deeper than the limit, counts as inside, and the result says so.
//!
//! The stack scanned is the one the thread runs on. A thread running a signal handler on an alternate signal stack
//! (`sigaltstack`), or code that switched stacks itself (coroutines, fibers), keeps the frames it interrupted on
//! another stack, which is not scanned. Registers are read on x86-64; elsewhere a thread's stack pointer is
//! unknown and every thread counts as inside.

mod error;
mod stack;
#[cfg(test)]
mod tests;
mod unwind;
mod worker;

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::time::{Duration, Instant};

pub use error::QuiesceError;
pub use stack::{
    CodeRange, Evidence, Inside, STACK_SCAN_LIMIT, code_ranges, fork_code_ranges,
    library_code_ranges,
};
use stack::{Ranges, pc_inside, stack_inside};
pub use unwind::{Unwinder, WalkEnd};
use worker::Holder;

use crate::linux::procfs::Process;

/// One stopped thread, as it was when it stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoppedThread {
    /// The thread id.
    pub tid: u32,
    /// Its name (`/proc/<pid>/task/<tid>/comm`) when it was looked at.
    pub name: OsString,
    /// Its program counter (`u64::MAX` where registers are not read: not x86-64).
    pub pc: u64,
    /// Its stack pointer (`u64::MAX` where registers are not read).
    pub sp: u64,
    /// Its frame pointer (`rbp`; `u64::MAX` where registers are not read), where unwinding starts.
    pub bp: u64,
    /// A signal that reached it before the interrupt did; it gets the signal when it is let go.
    pub pending_signal: Option<i32>,
}

/// The threads of a process stopped under ptrace, all but those spared. Dropping it, or [`Self::resume`], lets
/// them go on. See the [module](self) documentation.
#[derive(Debug)]
pub struct StoppedThreads {
    pid: u32,
    threads: Vec<StoppedThread>,
    spared: Vec<u32>,
    holder: Holder,
}

impl StoppedThreads {
    /// Stops every thread of process `pid` for which `spare(tid, name)` is false, each within `timeout` of the
    /// call. `spare` is asked once for each thread, including those that appear while the others are stopped.
    ///
    /// Fails for a process that does not exist, this process itself, a thread traced already (naming its tracer),
    /// a thread this process may not trace, threads that do not stop within `timeout`, and a process that ends
    /// meanwhile; the threads stopped so far go on before the error is returned.
    pub fn stop(
        pid: u32,
        spare: &dyn Fn(u32, &OsStr) -> bool,
        timeout: Duration,
    ) -> Result<Self, QuiesceError> {
        let deadline = Instant::now() + timeout;
        preflight(pid)?;
        let process = Process::new(pid);
        // Dropped on every early return: it lets go what was stopped.
        let holder = Holder::start(pid)?;
        let mut seen = BTreeSet::new();
        let mut threads = Vec::new();
        let mut spared = Vec::new();
        loop {
            let tids = process.thread_ids().map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => QuiesceError::Ended { pid },
                _ => QuiesceError::Trace {
                    pid,
                    detail: format!("/proc/{pid}/task: {e}"),
                },
            })?;
            let fresh: Vec<u32> = tids.into_iter().filter(|&t| seen.insert(t)).collect();
            if fresh.is_empty() {
                break;
            }
            let mut wanted = Vec::with_capacity(fresh.len());
            for tid in fresh {
                // A thread that ended since the folder was read has no name any more.
                let Ok(name) = process.thread(tid).name() else {
                    continue;
                };
                if spare(tid, &name) {
                    spared.push(tid);
                } else {
                    wanted.push((tid, name));
                }
            }
            threads.extend(holder.stop(wanted, deadline, timeout)?);
        }
        if process.stat().is_ok_and(|s| s.has_ended()) {
            return Err(QuiesceError::Ended { pid });
        }
        threads.sort_by_key(|t| (t.tid != pid, t.tid));
        log::debug!(
            "quiesce {pid}: stopped {} threads, spared {:?}",
            threads.len(),
            spared
        );
        Ok(StoppedThreads {
            pid,
            threads,
            spared,
            holder,
        })
    }

    /// [`Self::stop`] sparing the threads `spared`.
    pub fn stop_all_but(pid: u32, spared: &[u32], timeout: Duration) -> Result<Self, QuiesceError> {
        Self::stop(pid, &|tid, _| spared.contains(&tid), timeout)
    }

    /// The process.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The stopped threads, the main thread first, then by id.
    pub fn threads(&self) -> &[StoppedThread] {
        &self.threads
    }

    /// The threads left running, as `spare` chose them.
    pub fn spared(&self) -> &[u32] {
        &self.spared
    }

    /// The first stopped thread that may be inside `ranges` (see [`library_code_ranges`]): a thread whose program
    /// counter is there is named before any found by its stack. `None`: no stopped thread is inside.
    pub fn find_inside(&self, ranges: &[CodeRange]) -> Option<Inside> {
        let ranges = Ranges::new(ranges);
        let inside = |t: &StoppedThread, evidence| Inside {
            tid: t.tid,
            name: t.name.clone(),
            evidence,
        };
        if let Some(found) = self
            .threads
            .iter()
            .find_map(|t| pc_inside(t, &ranges).map(|e| inside(t, e)))
        {
            return Some(found);
        }
        let maps = self.maps();
        self.threads
            .iter()
            .find_map(|t| stack_inside(self.pid, t, &maps, &ranges).map(|e| inside(t, e)))
    }

    /// Every stopped thread that may be inside `ranges`, in the order of [`Self::threads`].
    pub fn all_inside(&self, ranges: &[CodeRange]) -> Vec<Inside> {
        let ranges = Ranges::new(ranges);
        let maps = self.maps();
        self.threads
            .iter()
            .filter_map(|t| {
                let evidence =
                    pc_inside(t, &ranges).or_else(|| stack_inside(self.pid, t, &maps, &ranges))?;
                Some(Inside {
                    tid: t.tid,
                    name: t.name.clone(),
                    evidence,
                })
            })
            .collect()
    }

    /// Every stopped thread inside `ranges` by its live frames: its program counter, or a return address of a
    /// frame unwound by the code's call-frame information (`unwind`), which stale words on the stack do not
    /// fool. Where a walk stops before the outermost frame, the rest of that stack is scanned word by word, as
    /// [`Self::all_inside`] does (so a frame the walk could not reach is never missed). `unwinder` keeps the
    /// modules it read, for the next call.
    pub fn frames_inside(&self, ranges: &[CodeRange], unwinder: &mut Unwinder) -> Vec<Inside> {
        let table = Ranges::new(ranges);
        let maps = self.maps();
        let Ok(mapping) = &maps else {
            return self.all_inside(ranges);
        };
        let read = |addr: u64| self.word_at(addr);
        self.threads
            .iter()
            .filter_map(|t| {
                let evidence = pc_inside(t, &table).or_else(|| {
                    let (pcs, end) = unwinder.frames(self.pid, mapping, (t.pc, t.sp, t.bp), &read);
                    if let Some((depth, &pc)) = pcs
                        .iter()
                        .enumerate()
                        .skip(1)
                        .find(|(_, pc)| table.find(**pc).is_some())
                    {
                        let library = table.find(pc).map(|r| r.path.clone()).unwrap_or_default();
                        return Some(Evidence::Frame { depth, pc, library });
                    }
                    match end {
                        WalkEnd::Complete => None,
                        WalkEnd::Stopped { sp, .. } => {
                            let rest = StoppedThread { sp, ..t.clone() };
                            stack_inside(self.pid, &rest, &maps, &table).map(|e| match e {
                                Evidence::StackWord {
                                    offset,
                                    value,
                                    library,
                                } => Evidence::StackWord {
                                    offset: offset + (sp - t.sp),
                                    value,
                                    library,
                                },
                                other => other,
                            })
                        }
                    }
                })?;
                Some(Inside {
                    tid: t.tid,
                    name: t.name.clone(),
                    evidence,
                })
            })
            .collect()
    }

    /// The stopped threads that code in `ranges` started: the walk of each one's live frames reaches its outermost
    /// frame, and the outermost frame above the C library's (the thread start) is in `ranges`. A vendor library's
    /// worker threads need not carry a name of their own (CUPTI's PC-sampling threads take the name of the program
    /// thread that enabled them); this tells them apart by where they began. `unwinder` keeps the modules it read,
    /// for the next call.
    pub fn started_in(&self, ranges: &[CodeRange], unwinder: &mut Unwinder) -> Vec<u32> {
        self.by_start(ranges, unwinder, true)
    }

    /// The stopped threads that code outside `ranges` started, told as [`started_in`](Self::started_in) tells
    /// its own: a thread whose walk stops short is in neither list.
    pub fn started_outside(&self, ranges: &[CodeRange], unwinder: &mut Unwinder) -> Vec<u32> {
        self.by_start(ranges, unwinder, false)
    }

    /// The threads whose complete walk's outermost frame above the C library's is (`inside`) or is not in
    /// `ranges`.
    fn by_start(&self, ranges: &[CodeRange], unwinder: &mut Unwinder, inside: bool) -> Vec<u32> {
        let table = Ranges::new(ranges);
        let (Ok(mapping), Ok(libc)) = (self.maps(), library_code_ranges(self.pid, &["libc.so"]))
        else {
            return Vec::new();
        };
        let libc = Ranges::new(&libc);
        let read = |addr: u64| self.word_at(addr);
        self.threads
            .iter()
            .filter(|t| {
                let (pcs, end) = unwinder.frames(self.pid, &mapping, (t.pc, t.sp, t.bp), &read);
                end == WalkEnd::Complete
                    && pcs
                        .iter()
                        .rev()
                        .find(|pc| libc.find(**pc).is_none())
                        .is_some_and(|pc| table.find(*pc).is_some() == inside)
            })
            .map(|t| t.tid)
            .collect()
    }

    /// The word at `addr` in the process's memory, for the unwinder.
    fn word_at(&self, addr: u64) -> Option<u64> {
        let mut word = [0u8; 8];
        stack::read_memory(self.pid, addr, &mut word)
            .ok()
            .map(|()| u64::from_ne_bytes(word))
    }

    fn maps(&self) -> Result<Vec<crate::linux::procfs::Mapping>, String> {
        Process::new(self.pid)
            .maps()
            .map_err(|e| format!("/proc/{}/maps: {e}", self.pid))
    }

    /// Lets stopped thread `tid` run alone for `run_for` (zero: as long as stopping it again takes, some
    /// microseconds), the others staying stopped, and stops it again: for a thread found inside code that must be
    /// left before the process is looked at once more. Returns false when the thread ended meanwhile (it is then
    /// gone from [`Self::threads`]). A thread with a signal pending is not run alone (an error says so).
    pub fn nudge(&mut self, tid: u32, run_for: Duration) -> Result<bool, QuiesceError> {
        let registers = self.holder.nudge(tid, run_for)?;
        Ok(self.ran(tid, registers))
    }

    /// Lets stopped thread `tid` run alone, the others staying stopped, until it reaches `address` (where a
    /// breakpoint is set for that run only, and taken out again on every path), within `limit`: to let a thread
    /// leave code, run it to the return address of the outermost frame it has there ([`Self::frames`]). Returns
    /// false when the thread ended meanwhile. A timeout, or a signal on the way, is an error; the thread is then
    /// stopped again where it was, with the signal kept for it.
    pub fn run_to(
        &mut self,
        tid: u32,
        address: u64,
        limit: Duration,
    ) -> Result<bool, QuiesceError> {
        let registers = self.holder.run_to(tid, address, limit)?;
        Ok(self.ran(tid, registers))
    }

    /// Records where thread `tid` stopped after running alone, or that it ended: whether it is still here.
    fn ran(&mut self, tid: u32, registers: Option<(u64, u64, u64)>) -> bool {
        match registers {
            Some((pc, sp, bp)) => {
                if let Some(t) = self.threads.iter_mut().find(|t| t.tid == tid) {
                    t.pc = pc;
                    t.sp = sp;
                    t.bp = bp;
                }
                true
            }
            None => {
                self.threads.retain(|t| t.tid != tid);
                false
            }
        }
    }

    /// The live frames of stopped thread `tid` (its program counter, then each return address, innermost first)
    /// and where the walk ended; `None` for a thread that is not stopped here.
    pub fn frames(&self, tid: u32, unwinder: &mut Unwinder) -> Option<(Vec<u64>, WalkEnd)> {
        let t = self.threads.iter().find(|t| t.tid == tid)?;
        let maps = self.maps().ok()?;
        let read = |addr: u64| self.word_at(addr);
        Some(unwinder.frames(self.pid, &maps, (t.pc, t.sp, t.bp), &read))
    }

    /// Lets every stopped thread go on, with any signal it was about to receive, reporting a failure (dropping
    /// does the same and logs it).
    pub fn resume(mut self) -> Result<(), QuiesceError> {
        self.holder.release()
    }
}

/// The checks made before anything is seized.
fn preflight(pid: u32) -> Result<(), QuiesceError> {
    if pid == std::process::id() {
        return Err(QuiesceError::OwnProcess(pid));
    }
    let process = Process::new(pid);
    if !process.exists() || process.stat().is_ok_and(|s| s.has_ended()) {
        return Err(QuiesceError::NoSuchProcess(pid));
    }
    // A thread id is not a process.
    if process.thread_group().is_ok_and(|g| g != pid) {
        return Err(QuiesceError::NoSuchProcess(pid));
    }
    if let Ok(Some(tracer)) = process.tracer() {
        return Err(QuiesceError::AlreadyTraced {
            pid,
            tid: pid,
            tracer,
        });
    }
    Ok(())
}
