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
        Self::start_with(names, &[]).expect("a sleeper starts")
    }

    /// As [`Mapping::start`], the sleeper in a mount namespace of its own (`unshare --mount`, as a container's
    /// process is), holding open a `/dev/nvidiactl` of that namespace's own (an empty file on a tmpfs over its
    /// `/dev`), as a container's CUDA process holds the GPU's: the commands take it for a process that initialised
    /// the CUDA driver. `None` where that is not permitted here (said, and a failure in CI).
    pub fn start_in_container(names: &[&str]) -> Option<Mapping> {
        let wrapper = [
            "unshare",
            "--mount",
            "sh",
            "-c",
            "mount -t tmpfs tmpfs /dev && : > /dev/nvidiactl && exec \"$@\" 3</dev/nvidiactl",
            "sh",
        ];
        let mapping = Self::moved(Self::start_with(names, &wrapper)?)?;
        let held = || {
            std::fs::read_dir(format!("/proc/{}/fd", mapping.pid())).is_ok_and(|fds| {
                fds.flatten().any(|fd| {
                    std::fs::read_link(fd.path())
                        .is_ok_and(|l| l == std::path::Path::new("/dev/nvidiactl"))
                })
            })
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && !held() {
            std::thread::sleep(Duration::from_millis(20));
        }
        if !held() {
            gpu_tools_testing::skip_unless_ci(
                "the contained sleeper holds no /dev/nvidiactl of its own",
            );
            return None;
        }
        Some(mapping)
    }

    /// The sleeper, once it is in a mount namespace other than ours.
    fn moved(mapping: Mapping) -> Option<Mapping> {
        // `unshare` execs `sleep` in the new namespace: wait until the process's namespace differs from ours.
        let ours = std::fs::read_link("/proc/self/ns/mnt").expect("our mount namespace");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if std::fs::read_link(format!("/proc/{}/ns/mnt", mapping.pid()))
                .is_ok_and(|n| n != ours)
            {
                return Some(mapping);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        gpu_tools_testing::skip_unless_ci(
            "unshare --mount did not move the sleeper to a namespace of its own",
        );
        None
    }

    /// The sleeper, run through `wrapper` (empty: none); `None` where the wrapper cannot run.
    fn start_with(names: &[&str], wrapper: &[&str]) -> Option<Mapping> {
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
        let mut command = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg("sleep");
                c
            }
            None => Command::new("sleep"),
        };
        let mut child = match command
            .arg("30")
            .env("LD_PRELOAD", paths.join(":"))
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                gpu_tools_testing::skip_unless_ci(&format!("{wrapper:?} cannot run here: {e}"));
                return None;
            }
        };
        let pid = child.id();
        let deadline = Instant::now() + Duration::from_secs(5);
        let maps_all = || {
            std::fs::read_to_string(format!("/proc/{pid}/maps"))
                .is_ok_and(|m| names.iter().all(|n| m.contains(&format!("/{n}\n"))))
        };
        while Instant::now() < deadline && !maps_all() {
            if let Ok(Some(status)) = child.try_wait() {
                gpu_tools_testing::skip_unless_ci(&format!(
                    "{wrapper:?} sleep ended at once ({status})"
                ));
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(maps_all(), "the sleeper maps {names:?}");
        Some(Mapping { child, _dir: dir })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the sleeper (SIGSTOP) and waits until it is stopped.
    pub fn stop(&self) {
        self.signal(libc::SIGSTOP);
        self.wait_for_state('T');
    }

    /// Lets a stopped sleeper run again (SIGCONT) and waits until it sleeps.
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
        self.wait_for_state('S');
    }

    fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.pid()).expect("a pid fits pid_t");
        // SAFETY: kill has no memory preconditions; the pid is this test's child, not yet reaped.
        let sent = unsafe { libc::kill(pid, signal) };
        assert_eq!(sent, 0, "signal {signal} to {pid}");
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

    /// Asserts that the sleeper still sleeps or runs (not ended, not stopped), traced by no one.
    pub fn assert_untouched(&self) {
        let pid = self.pid();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        assert!(
            status.lines().any(|l| l == "TracerPid:\t0"),
            "nothing is attached: {status}"
        );
        // Running (R) is as untouched as sleeping: a loaded machine can catch `sleep` between its calls.
        assert!(
            status
                .lines()
                .any(|l| l.starts_with("State:\tS") || l.starts_with("State:\tR")),
            "it sleeps or runs (not stopped, traced or ended): {status}"
        );
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
