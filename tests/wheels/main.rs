//! The real CUPTI libraries of NVIDIA's PyPI wheels on a machine without a GPU (docs/testing.md), in groups of
//! checks, each group in a process of its own: a process loads one CUPTI, and a library loaded stays loaded.
//!
//! - `cupti_wheel`, `cupti_wheel12`: the CUPTI libraries of the CUDA 13 wheel (`nvidia-cuda-cupti` 13.0.85,
//!   `GPU_TOOLS_CUPTI_WHEEL_LIB` names its `nvidia/cu13/lib`) and of the CUDA 12 wheel (`nvidia-cuda-cupti-cu12`
//!   12.9.79, `GPU_TOOLS_CUPTI12_WHEEL_LIB` names its `nvidia/cuda_cupti/lib`) through the crate's loader
//!   (`cupti_wheel_checks.rs`, `cupti_tracing.rs`).
//! - `checkpoint_no_driver`, `checkpoint_no_driver12`: their `libcheckpoint.so` without a CUDA driver: the raw call
//!   crashes, the crate's routes are typed errors (`checkpoint_no_driver_checks.rs`).
//! - `cupti_profiling_wheel`: the metric catalogue of the 13.0 libraries; `cupti_counters_recorded`: real counter
//!   data recorded on a GPU host, evaluated with the 13.0 metric host.
//!
//! With a wheel's variable unset its checks are reported as ignored (as failed under CI); set but naming a folder
//! without the wheel's libraries, they fail (`wheel.rs`). The test binary runs itself once per group, with the
//! group's name in `GPU_TOOLS_WHEEL_GROUP` and its own command line (filters, `--list`, `--nocapture`); each group
//! prints libtest's output of its own. `GPU_TOOLS_WHEEL_GROUPS` (names separated by spaces or commas) runs only
//! those groups.

mod checkpoint_no_driver_checks;
mod cupti_counters_recorded;
mod cupti_profiling_wheel;
mod cupti_tracing;
mod cupti_wheel_checks;
mod wheel;

use std::process::Command;

/// Variable naming the group a child process of this binary runs.
const GROUP: &str = "GPU_TOOLS_WHEEL_GROUP";
/// Variable naming the groups to run (all when unset).
const ONLY: &str = "GPU_TOOLS_WHEEL_GROUPS";

/// The groups, each a process of its own.
const GROUPS: &[(&str, fn())] = &[
    ("cupti_wheel", || {
        wheel::main(
            &wheel::CUDA13,
            cupti_wheel_checks::CHECKS,
            cupti_wheel_checks::CHILDREN,
            include_str!("cupti_wheel_checks.rs"),
        )
    }),
    ("cupti_wheel12", || {
        wheel::main(
            &wheel::CUDA12,
            cupti_wheel_checks::CHECKS,
            cupti_wheel_checks::CHILDREN,
            include_str!("cupti_wheel_checks.rs"),
        )
    }),
    ("checkpoint_no_driver", || {
        wheel::main(
            &wheel::CUDA13,
            checkpoint_no_driver_checks::CHECKS,
            checkpoint_no_driver_checks::CHILDREN,
            include_str!("checkpoint_no_driver_checks.rs"),
        )
    }),
    ("checkpoint_no_driver12", || {
        wheel::main(
            &wheel::CUDA12,
            checkpoint_no_driver_checks::CHECKS,
            checkpoint_no_driver_checks::CHILDREN,
            include_str!("checkpoint_no_driver_checks.rs"),
        )
    }),
    ("cupti_profiling_wheel", cupti_profiling_wheel::main),
    ("cupti_counters_recorded", cupti_counters_recorded::main),
];

fn main() {
    if let Ok(name) = std::env::var(GROUP) {
        let Some((_, run)) = GROUPS.iter().find(|(n, _)| *n == name) else {
            eprintln!("{GROUP}={name}: no such group");
            std::process::exit(2);
        };
        run();
        return;
    }
    let only = std::env::var(ONLY).ok();
    let selected: Vec<&str> = match &only {
        Some(list) => list.split([' ', ',']).filter(|n| !n.is_empty()).collect(),
        None => GROUPS.iter().map(|(n, _)| *n).collect(),
    };
    if let Some(bad) = selected
        .iter()
        .find(|n| !GROUPS.iter().any(|(g, _)| g == *n))
    {
        eprintln!("{ONLY} names {bad}, which is no group of this binary");
        std::process::exit(2);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut failed = Vec::new();
    for name in selected {
        println!("\nwheels: group {name}, in a process of its own");
        let status = Command::new(&exe)
            .args(std::env::args_os().skip(1))
            .env(GROUP, name)
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => failed.push(format!("{name} ({s})")),
            Err(e) => failed.push(format!("{name} (not started: {e})")),
        }
    }
    if !failed.is_empty() {
        eprintln!("wheels: groups failed: {}", failed.join(", "));
        std::process::exit(101);
    }
}
