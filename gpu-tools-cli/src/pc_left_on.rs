//! Processes in which gpu-tools left PC sampling on. A `cuptiPCSamplingDisable` that fails keeps sampling on in
//! that process, and the GPU's performance counters held, until the process ends (one H200, CUPTI 13.0: every
//! other process's PC sampling and counters on the GPU were refused meanwhile). `profile --pid` notes each such
//! process in a file of its own, so that a later refusal for counters held names it, as the tool that holds them.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gpu_tools::linux::procfs::Process;

/// The folder of the notes: the user's runtime folder, else one of the user's in the temporary folder.
fn folder() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("gpu-tools-pc-left-on"),
        // SAFETY: getuid has no preconditions.
        _ => std::env::temp_dir().join(format!("gpu-tools-pc-left-on-{}", unsafe {
            libc::getuid()
        })),
    }
}

/// Notes that PC sampling stays on in process `pid` (the note names the process by its start time too, so that a
/// later process given the same pid is not taken for it). Best effort: a note that cannot be written is said.
pub fn note(pid: u32) {
    if let Err(e) = note_in(&folder(), pid, SystemTime::now()) {
        eprintln!(
            "gpu-tools profile: process {pid}: could not note that PC sampling stays on there: {e}"
        );
    }
}

fn note_in(dir: &Path, pid: u32, now: SystemTime) -> std::io::Result<()> {
    let start = Process::new(pid).stat()?.start_time;
    std::fs::create_dir_all(dir)?;
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    std::fs::write(dir.join(pid.to_string()), format!("{start} {since}\n"))
}

/// A process noted, alive and the same one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOn {
    pub pid: u32,
    /// How long ago its disable failed.
    pub ago: Duration,
}

/// The processes noted that still run; notes of ended ones are removed.
pub fn processes() -> Vec<LeftOn> {
    processes_in(&folder(), SystemTime::now())
}

fn processes_in(dir: &Path, now: SystemTime) -> Vec<LeftOn> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(pid) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let mut words = text.split_whitespace().map(str::parse::<u64>);
        let (Some(Ok(start)), Some(Ok(since))) = (words.next(), words.next()) else {
            let _ = std::fs::remove_file(&path);
            continue;
        };
        match Process::new(pid).stat() {
            Ok(stat) if stat.start_time == start && !stat.has_ended() => {
                let at = UNIX_EPOCH + Duration::from_secs(since);
                found.push(LeftOn {
                    pid,
                    ago: now.duration_since(at).unwrap_or_default(),
                });
            }
            // Ended, or the pid now names another process.
            _ => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    found.sort_by_key(|l| l.pid);
    found
}

/// The sentence a refusal for counters held adds where gpu-tools itself left PC sampling on somewhere (empty
/// otherwise), leaving out `except` (the process being profiled, which would be told apart by its own refusal).
pub fn said(except: Option<u32>) -> String {
    sentence(&processes(), except)
}

fn sentence(left: &[LeftOn], except: Option<u32>) -> String {
    let named: Vec<String> = left
        .iter()
        .filter(|l| Some(l.pid) != except)
        .map(|l| format!("process {} (since {} s ago)", l.pid, l.ago.as_secs()))
        .collect();
    if named.is_empty() {
        return String::new();
    }
    format!(
        ". gpu-tools itself left PC sampling on in {}: its cuptiPCSamplingDisable failed, and CUPTI holds the \
         counters for it until that process ends",
        named.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_noted_process_is_named_while_it_runs_and_forgotten_after() {
        let dir = tempfile::tempdir().expect("a folder");
        // Whole seconds, as the notes keep them.
        let now = UNIX_EPOCH
            + Duration::from_secs(
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .expect("after 1970")
                    .as_secs(),
            );
        let me = std::process::id();
        note_in(dir.path(), me, now - Duration::from_secs(90)).expect("noted");
        let left = processes_in(dir.path(), now);
        assert_eq!(
            left,
            vec![LeftOn {
                pid: me,
                ago: Duration::from_secs(90)
            }]
        );
        let text = sentence(&left, None);
        assert!(
            text.contains(&format!("process {me} (since 90 s ago)")),
            "{text}"
        );
        assert!(
            sentence(&left, Some(me)).is_empty(),
            "the profiled process left out"
        );
        // A note whose process has ended (another start time under the same pid) is removed.
        std::fs::write(dir.path().join(me.to_string()), "1 0\n").expect("written");
        assert!(processes_in(dir.path(), now).is_empty());
        assert!(
            !dir.path().join(me.to_string()).exists(),
            "the stale note removed"
        );
        // A damaged note too.
        std::fs::write(dir.path().join("123"), "not numbers").expect("written");
        assert!(processes_in(dir.path(), now).is_empty());
        assert!(!dir.path().join("123").exists());
    }
}
