//! Helpers for the process-checkpoint tests: target processes that are killed and reaped when the test ends.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process, killed and reaped on drop.
pub struct Target {
    pub child: Child,
}

impl Target {
    pub fn spawn(cmd: &mut Command) -> Self {
        let child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
        Target { child }
    }

    /// A process that only sleeps (no CUDA).
    pub fn sleeper() -> Self {
        Target::spawn(Command::new("sleep").arg("120"))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// True while the process has not exited.
    pub fn running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// Kills and reaps the process.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits up to `limit` for the process to exit; `None` if it is still running.
    pub fn wait_for(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                return Some(s);
            }
            if start.elapsed() > limit {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A pid that names no process: that of a child already reaped (the kernel hands pids out in increasing order,
/// so it is not reused within a test).
pub fn vanished_pid() -> u32 {
    let mut t = Target::spawn(&mut Command::new("true"));
    let pid = t.pid();
    t.child.wait().expect("wait for true");
    pid
}

/// The `debuggee_memory` example, with its output read line by line.
pub struct Debuggee {
    pub target: Target,
    lines: std::sync::mpsc::Receiver<String>,
    /// Every line read so far.
    pub seen: Vec<String>,
}

impl Debuggee {
    /// Starts `program` (the example's path) with `args` and waits for `ready`.
    pub fn start(program: &std::path::Path, args: &[&str]) -> Self {
        let mut target = Target::spawn(Command::new(program).args(args));
        let stdout = target.child.stdout.take().expect("piped stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        let pid = target.pid();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if !line.starts_with("check ") {
                    eprintln!("  [debuggee {pid}] {line}");
                }
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut d = Debuggee {
            target,
            lines,
            seen: Vec::new(),
        };
        d.wait_for("ready", Duration::from_secs(300));
        d
    }

    pub fn pid(&self) -> u32 {
        self.target.pid()
    }

    /// Waits for a line starting with `prefix`; panics with what was seen if none comes.
    pub fn wait_for(&mut self, prefix: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.starts_with("error") {
                        panic!("the debuggee failed: {line}");
                    }
                    if line.starts_with(prefix) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "no line starting with {prefix:?} from the debuggee within {limit:?}; last lines: {:?}",
                    &self.seen[self.seen.len().saturating_sub(5)..]
                ),
            }
        }
    }

    /// Reads what is there without waiting; returns the number of the last check seen.
    pub fn last_check(&mut self) -> u64 {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
        self.seen
            .iter()
            .rev()
            .find_map(|l| l.strip_prefix("check ")?.split(' ').next()?.parse().ok())
            .unwrap_or(0)
    }

    /// Waits until the debuggee completes a check numbered above `after`, i.e. its CUDA calls run.
    pub fn wait_check_after(&mut self, after: u64, limit: Duration) -> u64 {
        let deadline = Instant::now() + limit;
        loop {
            let n = self.last_check();
            if n > after {
                return n;
            }
            assert!(
                Instant::now() < deadline,
                "the debuggee completed no check after {after} within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Asks it to stop, waits for its exit, and returns the exit code and the final line.
    pub fn stop(&mut self) -> (Option<i32>, String) {
        if let Some(stdin) = self.target.child.stdin.as_mut() {
            use std::io::Write;
            let _ = stdin.write_all(b"stop\n");
            let _ = stdin.flush();
        }
        let status = self
            .target
            .wait_for(Duration::from_secs(300))
            .expect("the debuggee exits within 300 s of being told to stop");
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(500)) {
            self.seen.push(line);
        }
        let last = self
            .seen
            .iter()
            .rev()
            .find(|l| l.starts_with("final check") || l.starts_with("error"))
            .cloned()
            .unwrap_or_default();
        (status.code(), last)
    }

    /// Stops it and asserts it found every byte intact.
    pub fn assert_intact(&mut self) {
        let (code, last) = self.stop();
        eprintln!("debuggee {}: exit {code:?}, {last}", self.pid());
        assert_eq!(code, Some(0), "{last}");
        assert!(last.starts_with("final check: intact"), "{last}");
    }
}

/// `unwrap` that panics with the error's `Display` (which names the driver call and its code), for the note.
pub trait OrPanic<T> {
    fn or_panic(self, what: &str) -> T;
}

impl<T, E: std::fmt::Display> OrPanic<T> for Result<T, E> {
    #[track_caller]
    fn or_panic(self, what: &str) -> T {
        self.unwrap_or_else(|e| panic!("{what} refused: {e}"))
    }
}
