//! Process ids given on the command line, checked the same way by every subcommand that takes one, before it acts
//! on the process: one wording for a process that does not exist.
//!
//! This reads `/proc/PID` itself; the library's process-control module is to offer the same check.

use crate::failure::Failure;

/// Checks that `pid` names a live process; the error says so in the wording every subcommand uses.
pub fn check(pid: u32) -> Result<(), Failure> {
    if pid == 0 {
        return Err(Failure::new(1, "no process 0: PID 0 is not a process"));
    }
    if i32::try_from(pid).is_err() {
        return Err(Failure::new(
            1,
            format!("no process {pid}: PIDs are below 2^31"),
        ));
    }
    match std::fs::metadata(format!("/proc/{pid}")) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(Failure::new(1, format!("no process {pid}")))
        }
        Err(e) => Err(Failure::new(1, format!("process {pid}: {e}"))),
    }
}

/// Whether process `pid` uses CUDA: it maps the driver (`libcuda.so`) and has initialised it (holds
/// `/dev/nvidiactl`, or `/dev/dxg` under WSL, open). A launcher that only imported a CUDA library is left out.
pub fn uses_cuda(pid: u32) -> bool {
    let p = gpu_tools::linux::procfs::Process::new(pid);
    p.mapped_library("libcuda.so").is_some()
        && p.open_files().is_ok_and(|files| {
            files.iter().any(|f| {
                f == std::path::Path::new("/dev/nvidiactl") || f == std::path::Path::new("/dev/dxg")
            })
        })
}

/// The processes of `tree` that hold a CUDA context: those NVML lists as compute processes; where NVML is not
/// there, or lists none of them (pids of another namespace), those that initialised the driver ([`uses_cuda`]).
/// A launcher that imported CUDA libraries without running anything on a GPU is left out.
pub fn cuda_processes(tree: &[u32]) -> Vec<u32> {
    let listed = crate::gpu_memory::GpuMemory::open().and_then(|m| m.compute_processes());
    match listed {
        Ok(set) if tree.iter().any(|p| set.contains(p)) => {
            tree.iter().copied().filter(|p| set.contains(p)).collect()
        }
        _ => tree.iter().copied().filter(|&p| uses_cuda(p)).collect(),
    }
}

/// Process `root` and every process below it (children, their children, ...), `root` first, from the parent ids in
/// `/proc/*/stat`. Processes that end while `/proc` is read are left out.
pub fn tree(root: u32) -> Vec<u32> {
    use gpu_tools::linux::procfs::Process;
    let mut parent_of: Vec<(u32, u32)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if let Ok(stat) = Process::new(pid).stat() {
                parent_of.push((pid, stat.parent));
            }
        }
    }
    let mut out = vec![root];
    let mut at = 0;
    while at < out.len() {
        let p = out[at];
        let mut children: Vec<u32> = parent_of
            .iter()
            .filter(|(_, parent)| *parent == p)
            .map(|(c, _)| *c)
            .collect();
        children.sort_unstable();
        out.extend(children);
        at += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(r: Result<(), Failure>) -> String {
        match r {
            Err(Failure::Message { code: 1, message }) => message,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_tree_holds_its_descendants() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 5 & wait"])
            .spawn()
            .unwrap();
        // The grandchild appears once the shell has forked it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut found = Vec::new();
        while std::time::Instant::now() < deadline {
            found = tree(std::process::id());
            if found.len() >= 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found[0], std::process::id());
        assert!(found.contains(&child.id()), "{found:?}");
        assert!(found.len() >= 3, "the shell's sleep too: {found:?}");
    }

    #[test]
    fn live_and_missing_processes() {
        assert!(check(std::process::id()).is_ok());
        assert_eq!(message(check(0)), "no process 0: PID 0 is not a process");
        assert!(message(check(u32::MAX)).starts_with(&format!("no process {}", u32::MAX)));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        assert_eq!(message(check(gone)), format!("no process {gone}"));
    }
}
