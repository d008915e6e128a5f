//! Sleepers that map libraries by name, as the processes the commands look at do (the CUDA driver, CUPTI, the
//! injection library an attach left): a copy of a C double, which does nothing when loaded, under each name,
//! preloaded into `sleep`. Nothing here is a test.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `sleep 30` that maps a copy of a double under each name given; ended when dropped.
pub struct Mapping {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Mapping {
    /// Starts the sleeper and waits until it maps every name.
    pub fn start(names: &[&str]) -> Mapping {
        let dir = tempfile::tempdir().expect("temporary folder");
        let paths: Vec<String> = names
            .iter()
            .map(|name| {
                let path = dir.path().join(name);
                std::fs::copy(gpu_tools_testing::double_path("cupti_activity"), &path)
                    .expect("copy a double");
                path.display().to_string()
            })
            .collect();
        let child = Command::new("sleep")
            .arg("30")
            .env("LD_PRELOAD", paths.join(":"))
            .stdin(Stdio::null())
            .spawn()
            .expect("start a sleeper");
        let pid = child.id();
        let deadline = Instant::now() + Duration::from_secs(5);
        let maps_all = || {
            std::fs::read_to_string(format!("/proc/{pid}/maps"))
                .is_ok_and(|m| names.iter().all(|n| m.contains(&format!("/{n}\n"))))
        };
        while Instant::now() < deadline && !maps_all() {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(maps_all(), "the sleeper maps {names:?}");
        Mapping { child, _dir: dir }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to 5 s for the sleeper's state (`/proc`'s letter: `S` sleeping, `T` stopped) to be `state`.
    pub fn wait_for_state(&self, state: char) {
        let line = format!("State:\t{state}");
        let deadline = Instant::now() + Duration::from_secs(5);
        let reached = || {
            std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
                .is_ok_and(|s| s.lines().any(|l| l.starts_with(&line)))
        };
        while Instant::now() < deadline && !reached() {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(reached(), "process {} is not in state {state}", self.pid());
    }

    /// Asserts that the sleeper still sleeps (not ended, not stopped), traced by no one.
    pub fn assert_untouched(&self) {
        let pid = self.pid();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        assert!(
            status.lines().any(|l| l == "TracerPid:\t0"),
            "nothing is attached: {status}"
        );
        assert!(
            status.lines().any(|l| l.starts_with("State:\tS")),
            "it sleeps: {status}"
        );
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
