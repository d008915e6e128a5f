//! Processes in which gpu-tools left PC sampling on. A `cuptiPCSamplingDisable` that fails keeps sampling on in
//! that process, and the GPU's performance counters held, until the process ends (one H200, CUPTI 13.0: every
//! other process's PC sampling and counters on the GPU were refused meanwhile). `profile --pid` notes each such
//! process in a file of its own, so that a later refusal for counters held names it, as the tool that holds them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gpu_tools::linux::procfs::Process;

/// The folder of the notes, private to the user: in the user's runtime folder, else in the temporary folder.
fn folder() -> PathBuf {
    let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    match std::env::var_os("XDG_RUNTIME_DIR").and_then(absolute) {
        Some(dir) => dir.join("gpu-tools-pc-left-on"),
        None => std::env::temp_dir().join(format!(
            "gpu-tools-pc-left-on-{}",
            crate::private_dir::euid()
        )),
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
    crate::private_dir::make(dir)?;
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    // Whole or not at all: a reader never sees a half-written note (and takes it for a damaged one).
    let mut temp = tempfile::Builder::new().prefix(".note-").tempfile_in(dir)?;
    writeln!(temp, "{start} {since}")?;
    temp.persist(dir.join(pid.to_string()))
        .map_err(|e| e.error)?;
    Ok(())
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
    // Notes are trusted only in a folder of ours that nobody else can write to.
    if crate::private_dir::check(dir).is_err() {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        // Plain files only (a link is not followed, a pipe not read).
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
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
        let noted = match (words.next(), words.next()) {
            (Some(Ok(start)), Some(Ok(since))) => UNIX_EPOCH
                .checked_add(Duration::from_secs(since))
                .map(|at| (start, at)),
            _ => None,
        };
        let Some((start, at)) = noted else {
            // Damaged.
            let _ = std::fs::remove_file(&path);
            continue;
        };
        match Process::new(pid).stat() {
            Ok(stat) if stat.start_time == start && !stat.has_ended() => found.push(LeftOn {
                pid,
                ago: now.duration_since(at).unwrap_or_default(),
            }),
            // Ended, or the pid now names another process.
            Ok(_) => {
                let _ = std::fs::remove_file(&path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let _ = std::fs::remove_file(&path);
            }
            // Not readable now: kept, not named.
            Err(_) => {}
        }
    }
    found.sort_by_key(|l| l.pid);
    found
}

/// The sentence a refusal for counters held adds where gpu-tools itself left PC sampling on somewhere (empty
/// otherwise); `target`, the process being profiled, is named as such.
pub fn said(target: Option<u32>) -> String {
    sentence(&processes(), target)
}

fn sentence(left: &[LeftOn], target: Option<u32>) -> String {
    let named: Vec<String> = left
        .iter()
        .map(|l| {
            format!(
                "{}process {} (since {} s ago)",
                if Some(l.pid) == target { "this " } else { "" },
                l.pid,
                l.ago.as_secs()
            )
        })
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
            sentence(&left, Some(me)).contains(&format!("this process {me}")),
            "the profiled process named as such"
        );
        // A note whose process has ended (another start time under the same pid) is removed.
        std::fs::write(dir.path().join(me.to_string()), "1 0\n").expect("written");
        assert!(processes_in(dir.path(), now).is_empty());
        assert!(
            !dir.path().join(me.to_string()).exists(),
            "the stale note removed"
        );
        // A damaged note too, and one of a time past what the clock holds.
        std::fs::write(dir.path().join("123"), "not numbers").expect("written");
        std::fs::write(dir.path().join(me.to_string()), format!("1 {}\n", u64::MAX))
            .expect("written");
        assert!(processes_in(dir.path(), now).is_empty());
        assert!(!dir.path().join("123").exists());
        assert!(!dir.path().join(me.to_string()).exists());
    }

    #[test]
    fn notes_in_a_folder_others_can_write_are_not_read() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("a folder");
        note_in(dir.path(), std::process::id(), SystemTime::now()).expect("noted");
        assert_eq!(processes_in(dir.path(), SystemTime::now()).len(), 1);
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777))
            .expect("opened");
        assert!(processes_in(dir.path(), SystemTime::now()).is_empty());
    }

    #[test]
    fn a_link_among_the_notes_is_not_followed() {
        let dir = tempfile::tempdir().expect("a folder");
        let me = std::process::id();
        let start = Process::new(me).stat().expect("stat").start_time;
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, format!("{start} 0\n")).expect("written");
        std::os::unix::fs::symlink(&target, dir.path().join(me.to_string())).expect("linked");
        assert!(processes_in(dir.path(), SystemTime::now()).is_empty());
        assert!(target.exists(), "left alone");
    }
}
