//! The program's CPU time over a PC sampling window, thread by thread: what tells a window in which the program
//! ran from one in which it waited (`pc_attach`'s judgement of a window without stall records).
//!
//! Only threads that lived before the window began count, less the library's (whose names begin
//! [`LIBRARY_THREADS`]) and any first seen at the end of an earlier sampling window: the threads that CUPTI and the
//! driver start for PC sampling are born with it and are not the program. Counted whole, the process's CPU time
//! made a job waiting for its forked child look busy in its primer (the survival matrix's fork-child beside 16 other
//! jobs on an H200, the 41st session: the trace right after, judged by the same rule, found it idle), and PC
//! sampling after its trace was blind. That those threads were what counted is inferred, not seen: those alive at a
//! window's end go to the library's log at level info, and in the 43rd session's runs there were none (threads that
//! come and go inside the window count in the process's whole CPU time, and not here).
//! A program thread born during a window is left out too, and one that ends during it loses its time in it: both
//! lean toward judging the program idle, which refuses later windows, never samples blind.

use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use gpu_tools::linux::procfs::{Process, ThreadCpu};
use gpu_tools_injection::program::LIBRARY_THREADS;

/// Threads first seen at the end of a PC sampling window (CUPTI's and the driver's, which may outlive it).
static BORN_IN_SAMPLING: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

fn born_in_sampling() -> MutexGuard<'static, BTreeSet<u32>> {
    BORN_IN_SAMPLING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The process's threads and their CPU time at a moment (`None` where `/proc` did not say).
pub struct Snapshot {
    at: Instant,
    threads: Option<Vec<ThreadCpu>>,
}

impl Snapshot {
    /// Now, in this process.
    pub fn now() -> Snapshot {
        Snapshot {
            at: Instant::now(),
            threads: Process::current().thread_cpu_times().ok(),
        }
    }
}

/// What a window's two snapshots came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spent {
    /// The window's length.
    pub window: Duration,
    /// The program's CPU time in it (`None` where a snapshot could not be read).
    pub program: Option<Duration>,
    /// The threads born in the window, and their CPU time in it (left out of `program`).
    pub born: Vec<(String, Duration)>,
}

/// The CPU time the program's threads used between `before` and `after`, and the threads born between them, which
/// are noted as not the program's from now on (those born in earlier windows do not count either).
pub fn spent(before: &Snapshot, after: &Snapshot) -> Spent {
    let window = after.at.saturating_duration_since(before.at);
    let (Some(was), Some(is)) = (&before.threads, &after.threads) else {
        return Spent {
            window,
            program: None,
            born: Vec::new(),
        };
    };
    let mut left_out = born_in_sampling();
    let (program, born) = split(was, is, &left_out);
    left_out.extend(born.iter().map(|t| t.tid));
    Spent {
        window,
        program: Some(program),
        born: born
            .iter()
            .map(|t| (t.name.to_string_lossy().into_owned(), t.cpu))
            .collect(),
    }
}

/// The program's CPU time from `was` to `is` (threads in both, not the library's, not in `left_out`), and the
/// threads of `is` not in `was`.
fn split<'a>(
    was: &[ThreadCpu],
    is: &'a [ThreadCpu],
    left_out: &BTreeSet<u32>,
) -> (Duration, Vec<&'a ThreadCpu>) {
    let mut program = Duration::ZERO;
    let mut born = Vec::new();
    for now in is {
        match was.iter().find(|t| t.tid == now.tid) {
            Some(then) => {
                let library = now.name.as_encoded_bytes().starts_with(LIBRARY_THREADS);
                if !library && !left_out.contains(&now.tid) {
                    program += now.cpu.saturating_sub(then.cpu);
                }
            }
            None => born.push(now),
        }
    }
    (program, born)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(tid: u32, name: &str, ms: u64) -> ThreadCpu {
        ThreadCpu {
            tid,
            name: name.into(),
            cpu: Duration::from_millis(ms),
        }
    }

    #[test]
    fn threads_born_in_the_window_the_librarys_and_those_left_out_are_not_the_program() {
        let was = [
            thread(1, "python", 100),
            thread(2, "gpu-tools-pc", 50),
            thread(3, "cuda-EvtHandlr", 10),
            thread(4, "pt_autograd", 7),
            thread(9, "ended", 40),
        ];
        let is = [
            thread(1, "python", 130),
            thread(2, "gpu-tools-pc", 450),
            thread(3, "cuda-EvtHandlr", 900),
            thread(4, "pt_autograd", 9),
            thread(5, "python", 700),
        ];
        // Thread 3 was first seen at an earlier window's end; 5 is born in this one; 9 ended in it.
        let (program, born) = split(&was, &is, &BTreeSet::from([3]));
        assert_eq!(program, Duration::from_millis(32));
        assert_eq!(born.iter().map(|t| t.tid).collect::<Vec<_>>(), vec![5]);
    }

    #[test]
    fn a_thread_born_in_a_window_of_this_process_is_said_and_left_out_from_then_on() {
        let before = Snapshot::now();
        let (spun, done) = std::sync::mpsc::channel();
        let spinner = std::thread::Builder::new()
            .name("born-spin".into())
            .spawn(move || {
                // SAFETY: gettid has no preconditions.
                let tid = unsafe { libc::gettid() };
                // Until it has used 300 ms of CPU by its own clock, however busy the machine (20 s at most).
                let own = || {
                    let mut now = libc::timespec {
                        tv_sec: 0,
                        tv_nsec: 0,
                    };
                    // SAFETY: a valid clock id and a timespec on the stack.
                    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
                    Duration::new(
                        u64::try_from(now.tv_sec).unwrap_or(0),
                        u32::try_from(now.tv_nsec).unwrap_or(0),
                    )
                };
                let t = Instant::now();
                let mut x = 0u64;
                while own() < Duration::from_millis(300) && t.elapsed() < Duration::from_secs(20) {
                    for _ in 0..10_000 {
                        x = std::hint::black_box(x.wrapping_add(1));
                    }
                }
                spun.send(tid).ok();
                std::thread::park();
            })
            .expect("a thread");
        let tid = done.recv().expect("the spinner's id");
        let after = Snapshot::now();
        let spent = spent(&before, &after);
        spinner.thread().unpark();
        spinner.join().ok();
        assert!(spent.program.is_some(), "{spent:?}");
        let born: Vec<_> = spent
            .born
            .iter()
            .filter(|(name, _)| name == "born-spin")
            .collect();
        assert_eq!(born.len(), 1, "{spent:?}");
        assert!(born[0].1 >= Duration::from_millis(250), "{spent:?}");
        assert!(born_in_sampling().contains(&u32::try_from(tid).unwrap_or(0)));
    }
}
