//! CUPTI or the debugger: the CUDA driver (580, seen on an H200) lets a process have one of them, for the rest of
//! its life. After any CUPTI use (an attach of `trace --pid` or `profile --pid`, or the program's own profiler) it
//! refuses the debugger (`where`) and the checkpoint lock (`freeze`); after a debugger attach it refuses CUPTI, the
//! program's own profiler included (a torch.profiler then records nothing). What each command says before it makes
//! that choice for a process, and how it tells which one a process has had.

use gpu_tools::linux::procfs::Process;

/// The CUDA injection library of `trace --pid` or `profile --pid` is loaded in the process: CUPTI has run in it for
/// an attach (the library stays loaded, and so does its flight recorder, if one was left).
pub fn injection_library_loaded(pid: u32) -> bool {
    Process::new(pid)
        .mapped_library(crate::inject_lib::CUDA_STEM)
        .is_some()
}

/// How the file names of a program's own profiler libraries begin: CUPTI itself (PyTorch maps its own
/// `libcupti.so.13`), Kineto, and `libtorch_cpu`, which carries Kineto in PyTorch's wheels.
const PROFILER_LIBRARIES: [&str; 3] = ["libcupti", "libkineto", "libtorch_cpu"];

/// The file name of the first library of a profiler of its own that the process maps, if any: after a debugger
/// attach that profiler records nothing for the rest of the process's life.
pub fn profiler_library(pid: u32) -> Option<String> {
    let maps = Process::new(pid).maps().ok()?;
    maps.iter()
        .filter_map(|m| m.file_name()?.to_str().map(String::from))
        .find(|name| is_profiler_library(name))
}

fn is_profiler_library(name: &str) -> bool {
    PROFILER_LIBRARIES.iter().any(|p| name.starts_with(p))
}

/// "process 7" or "processes 7, 8".
fn processes(pids: &[u32]) -> String {
    let list = pids
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if pids.len() == 1 {
        format!("process {list}")
    } else {
        format!("processes {list}")
    }
}

/// The processes of `pids` that a CUPTI attach would start CUPTI in for the first time: they map the CUDA driver
/// (the attach needs it) and not yet the injection library.
pub fn before_first_cupti(pids: &[u32]) -> Vec<u32> {
    pids.iter()
        .copied()
        .filter(|&p| {
            Process::new(p).mapped_library("libcuda.so").is_some() && !injection_library_loaded(p)
        })
        .collect()
}

/// The note a CUPTI attach (`trace --pid`, `profile --pid`) gives before its first attach to `pids`: what the
/// driver refuses from then on, and what `where` can still say.
pub fn cupti_note(pids: &[u32], flight_recorder: bool) -> String {
    let them = if pids.len() == 1 { "it" } else { "them" };
    let after = if flight_recorder {
        format!(
            "`where` will answer from the flight recorder this attach leaves in {them} instead (the kernels launched \
             and not finished, per stream, and the threads waiting; no warps or PCs)"
        )
    } else {
        "with --no-flight-recorder, `where` will not be able to say where a hang is".to_string()
    };
    format!(
        "note: {} {} not run CUPTI for gpu-tools yet: from this attach on, the CUDA driver refuses the debugger \
         (`gpu-tools where`) and its checkpoint (`gpu-tools freeze`) in {them} for the rest of {} life; {after}; \
         a debugger attached anyway (`cuda-gdb -p`) failed in the driver and killed such a job (SIGSEGV, driver 580)",
        processes(pids),
        if pids.len() == 1 { "has" } else { "have" },
        if pids.len() == 1 { "its" } else { "their" },
    )
}

/// The note a trace attach gives before it traces `pids`, none of which has run CUPTI for gpu-tools: PC sampling
/// after a first attach that traced gave no stall record (`gpu-host/scripts/pc_order_probe.sh`), the program's own
/// PC sampling included (`pc_graph_probe.cu`'s `serve-pc`), whatever the trace recorded, and the injection library
/// refuses it.
pub fn pc_sampling_note(pids: &[u32]) -> String {
    let them = if pids.len() == 1 { "it" } else { "them" };
    format!(
        "note: `gpu-tools profile --pid --pc-sampling` of {} after this first attach is refused with CUPTI 13.0 or \
         older: PC sampling after it (the program's own too) counted every sample outside the program's kernels, \
         with no stall record (CUPTI 13.0, driver 580); a process sampled before its first trace kept its stall \
         records: sample {them} first, if you will want PCs",
        processes(pids)
    )
}

/// The note `where` gives before the debugger's attach to `pids`, none of which has run CUPTI for gpu-tools.
pub fn debugger_note(pids: &[u32]) -> String {
    let (them, their) = if pids.len() == 1 {
        ("it", "its")
    } else {
        ("them", "their")
    };
    format!(
        "note: after the CUDA debugger's attach to {}, the driver refuses CUPTI in {them} for the rest of {their} \
         life: `gpu-tools trace --pid` and `profile --pid`, and the job's own profiler (a torch.profiler records \
         nothing from then on)",
        processes(pids)
    )
}

/// What `where` does about processes whose own profiler's library is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consent {
    /// Attach: `--yes` was given.
    Given,
    /// Ask on the terminal (standard input and standard error are terminals).
    Ask,
    /// Attach nothing: no one to ask, and no `--yes`.
    Refused,
}

impl Consent {
    /// From `--yes` and whether there is a terminal to ask on.
    pub fn of(yes: bool, terminal: bool) -> Consent {
        match (yes, terminal) {
            (true, _) => Consent::Given,
            (false, true) => Consent::Ask,
            (false, false) => Consent::Refused,
        }
    }
}

/// Whether a line typed in answer to a y/N question says yes (anything else, an empty line included, is no).
pub fn says_yes(line: &str) -> bool {
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// "process 7 maps libcupti.so.13" or "processes 7 (libcupti.so.13), 8 (libtorch_cpu.so) map".
pub fn profiler_holders(found: &[(u32, String)]) -> String {
    match found {
        [(pid, lib)] => format!("process {pid} maps {lib}"),
        _ => format!(
            "processes {} map",
            found
                .iter()
                .map(|(p, l)| format!("{p} ({l})"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Asks on the terminal, with `where`'s processes `found` mapping their profiler's library, whether to attach the
/// debugger. Err: the answer could not be read.
pub fn ask_on_terminal(command: &str, found: &[(u32, String)]) -> std::io::Result<bool> {
    use std::io::{BufRead, Write};
    let mut err = std::io::stderr().lock();
    write!(
        err,
        "gpu-tools {command}: {}, the library of a profiler of the job's own (torch.profiler, Kineto, CUPTI): after \
         the debugger's attach it records nothing for the rest of the process's life. Attach the debugger? [y/N] ",
        profiler_holders(found)
    )?;
    err.flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(says_yes(&line))
}

/// The refusal when the processes `found` map their profiler's library and no one consented: nothing was touched.
pub fn not_consented(found: &[(u32, String)], asked: bool) -> crate::failure::Failure {
    let why = if asked {
        "Not attached, as answered"
    } else {
        "Not attached without --yes (there is no terminal to ask on)"
    };
    crate::failure::Failure::new(
        1,
        format!(
            "{}, the library of a profiler of the job's own (torch.profiler, Kineto, CUPTI): after the CUDA \
             debugger's attach the driver refuses CUPTI there for the rest of the process's life, and that profiler \
             records nothing from then on. {why}: nothing was touched; pass --yes to attach anyway",
            profiler_holders(found)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profilers_libraries_are_told_by_name() {
        for lib in [
            "libcupti.so.13",
            "libcupti.so.12",
            "libkineto.so",
            "libtorch_cpu.so",
        ] {
            assert!(is_profiler_library(lib), "{lib}");
        }
        for lib in [
            "libcuda.so.1",
            "libtorch_cuda.so",
            "libgpu_tools_inject-0123.so",
            "libc.so.6",
        ] {
            assert!(!is_profiler_library(lib), "{lib}");
        }
    }

    #[test]
    fn consent_comes_from_yes_or_the_terminal() {
        assert_eq!(Consent::of(true, false), Consent::Given);
        assert_eq!(Consent::of(true, true), Consent::Given);
        assert_eq!(Consent::of(false, true), Consent::Ask);
        assert_eq!(Consent::of(false, false), Consent::Refused);
        for yes in ["y", "Y", "yes", " YES\n", "y\n"] {
            assert!(says_yes(yes), "{yes:?}");
        }
        for no in ["", "\n", "n", "no", "yep", "sure", "y y"] {
            assert!(!says_yes(no), "{no:?}");
        }
    }

    #[test]
    fn the_notes_name_each_process_and_what_is_lost() {
        let one = cupti_note(&[7], true);
        assert!(
            one.starts_with("note: process 7 has not run CUPTI for gpu-tools yet"),
            "{one}"
        );
        assert!(
            one.contains("refuses the debugger (`gpu-tools where`) and its checkpoint (`gpu-tools freeze`) in it for the rest of its life"),
            "{one}"
        );
        assert!(
            one.contains("flight recorder this attach leaves in it"),
            "{one}"
        );
        assert!(
            one.ends_with("killed such a job (SIGSEGV, driver 580)"),
            "{one}"
        );
        let pc = pc_sampling_note(&[7, 8]);
        assert!(
            pc.starts_with(
                "note: `gpu-tools profile --pid --pc-sampling` of processes 7, 8 after this first attach is refused"
            )
                && pc.ends_with("sample them first, if you will want PCs"),
            "{pc}"
        );
        let two = cupti_note(&[7, 8], false);
        assert!(
            two.starts_with("note: processes 7, 8 have not run"),
            "{two}"
        );
        assert!(
            two.contains("in them for the rest of their life; with --no-flight-recorder, `where` will not be able to say where a hang is"),
            "{two}"
        );
        let d = debugger_note(&[9]);
        assert!(
            d.contains("refuses CUPTI in it for the rest of its life"),
            "{d}"
        );
        assert!(d.contains("torch.profiler records nothing"), "{d}");
        assert_eq!(
            profiler_holders(&[(7, "libcupti.so.13".into())]),
            "process 7 maps libcupti.so.13"
        );
        assert_eq!(
            profiler_holders(&[(7, "libcupti.so.13".into()), (8, "libtorch_cpu.so".into())]),
            "processes 7 (libcupti.so.13), 8 (libtorch_cpu.so) map"
        );
    }
}
