//! Helpers for the process-checkpoint tests: target processes that are killed and reaped when the test ends.
#![allow(dead_code)]

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
