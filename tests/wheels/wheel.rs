//! The real CUPTI libraries of NVIDIA's PyPI wheels, for the tests that run against them without a GPU, and the
//! harness of those tests (`harness = false`): a check whose wheel is not installed is reported as ignored, not as
//! passed. A process loads one CUPTI, so each group of checks (`main.rs`) runs in a process of its own.
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One wheel's library folder and what is known about the CUPTI in it.
pub struct Wheel {
    /// The variable naming the wheel's library folder.
    pub var: &'static str,
    /// The CUPTI library file in that folder.
    pub cupti_file: &'static str,
    /// The CUDA release of the wheel CI installs.
    pub cuda: (u32, u32),
    /// What `cuptiGetVersion` reports for it.
    pub api_version: u32,
    /// Codes of the crate's `cupti_result.h` (13.0) that this release's `cuptiGetResultString` does not name.
    pub vendor_unnamed: &'static [u32],
    /// The record layout this release writes.
    pub layout: gpu_tools::cupti::activity::RecordLayout,
    /// How many record kinds the vendor's own record walk sizes (and the crate's table sizes alike).
    pub vendor_sized_kinds: usize,
    /// The size of a kernel record (`CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL`).
    pub kernel_record_size: usize,
    /// What the Activity and Callback entry points return without a driver.
    pub no_driver_code: u32,
    /// Whether the library exports `cuptiSubscribe_v2` (new in 13.0).
    pub has_subscribe_v2: bool,
}

/// `nvidia-cuda-cupti` 13.0.85: `nvidia/cu13/lib`.
pub const CUDA13: Wheel = Wheel {
    var: "GPU_TOOLS_CUPTI_WHEEL_LIB",
    cupti_file: "libcupti.so.13",
    cuda: (13, 0),
    api_version: 130001,
    // The 13.0 header defines 36 and 37, but the library of the same release rejects them.
    vendor_unnamed: &[36, 37],
    layout: gpu_tools::cupti::activity::RecordLayout::Cupti13_0,
    // 13.0 refuses 16 kinds its header still defines.
    vendor_sized_kinds: 39,
    kernel_record_size: 216,
    // CUPTI_ERROR_UNKNOWN
    no_driver_code: 999,
    has_subscribe_v2: true,
};

/// `nvidia-cuda-cupti-cu12` 12.9.79: `nvidia/cuda_cupti/lib`.
pub const CUDA12: Wheel = Wheel {
    var: "GPU_TOOLS_CUPTI12_WHEEL_LIB",
    cupti_file: "libcupti.so.12",
    cuda: (12, 9),
    api_version: 28,
    // 46 (CUPTI_ERROR_INVALID_CHIP_NAME) is new in CUDA 13.0.
    vendor_unnamed: &[36, 37, 46],
    layout: gpu_tools::cupti::activity::RecordLayout::Cupti12_9,
    vendor_sized_kinds: 55,
    kernel_record_size: 208,
    // CUPTI_ERROR_NOT_INITIALIZED
    no_driver_code: 15,
    has_subscribe_v2: false,
};

impl Wheel {
    /// The wheel's library folder, from its variable; `None` when the variable is unset. A set variable naming a
    /// folder without the wheel's libraries panics.
    pub fn dir(&self) -> Option<PathBuf> {
        let dir = PathBuf::from(std::env::var_os(self.var)?);
        for file in ["libcheckpoint.so", self.cupti_file] {
            assert!(
                dir.join(file).is_file(),
                "{} is set but {} has no {file}",
                self.var,
                dir.display()
            );
        }
        Some(dir)
    }

    /// The wheel's CUPTI library file.
    pub fn cupti(&self, dir: &Path) -> PathBuf {
        dir.join(self.cupti_file)
    }
}

/// The wheel of this process: a process loads one CUPTI, so each group of checks runs in a process of its own
/// (`main.rs`), and [`main`] sets it.
static CURRENT: OnceLock<&'static Wheel> = OnceLock::new();

/// The wheel whose checks this process runs.
pub fn the_wheel() -> &'static Wheel {
    CURRENT
        .get()
        .expect("wheel::main sets the process's wheel before any check runs")
}

/// One check of a wheel's real libraries.
pub struct Check {
    /// The test's name.
    pub name: &'static str,
    /// The check, given the wheel's library folder.
    pub run: fn(&Path),
    /// It shows what happens without a CUDA driver: ignored where one loads.
    pub without_driver: bool,
}

/// A helper run in a child process of the test binary (for calls that may kill the process), selected by
/// [`CHILD`] = its name; it gets the wheel's library folder.
pub struct Child {
    pub name: &'static str,
    pub run: fn(&Path),
}

/// Variable that makes the test binary run one [`Child`] instead of its tests.
pub const CHILD: &str = "GPU_TOOLS_WHEEL_CHILD";

/// Variables that make an unset wheel variable a failure instead of an ignored test: CI's.
const REQUIRED_BY: [&str; 2] = ["CI", "GPU_TOOLS_REQUIRE_WHEELS"];

/// The test binary's `main`: runs `checks` with libtest's command line and output. Without the wheel (its
/// variable unset) each check is reported as ignored, with the reason on stderr, unless `CI` or
/// `GPU_TOOLS_REQUIRE_WHEELS` is set, where they fail; a check that needs the absence of a driver is ignored on a
/// machine with one. `source` is the checks' file: a `#[test]` function in it would never run under this
/// harness, so one is a failure.
pub fn main(
    wheel: &'static Wheel,
    checks: &'static [Check],
    children: &[Child],
    source: &'static str,
) {
    let _ = CURRENT.set(wheel);
    if let Ok(name) = std::env::var(CHILD) {
        let child = children
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no child helper named {name}"));
        let dir = wheel
            .dir()
            .expect("the parent test sets the wheel's variable");
        (child.run)(&dir);
        return;
    }
    let args = libtest_mimic::Arguments::from_args();
    let dir = wheel.dir();
    let required = REQUIRED_BY.iter().find(|v| std::env::var_os(v).is_some());
    let driver = gpu_tools::cuda::Driver::load().is_ok();
    if dir.is_none() {
        match required {
            Some(v) => eprintln!(
                "{} is unset although {v} is set: the real-library checks fail",
                wheel.var
            ),
            None => eprintln!(
                "{} is unset: the real-library checks are ignored (docs/testing.md says how to install the wheel)",
                wheel.var
            ),
        }
    }
    let mut trials = vec![libtest_mimic::Trial::test(
        "every_check_is_listed",
        move || {
            if source
                .lines()
                .any(|l| l.trim_start().starts_with("#[test]"))
            {
                return Err(
                    "a #[test] function in the checks' file would never run: list it in CHECKS"
                        .into(),
                );
            }
            for c in checks {
                if !source.contains(&format!("fn {}(", c.name)) {
                    return Err(
                        format!("CHECKS names {}, which the file does not define", c.name).into(),
                    );
                }
            }
            Ok(())
        },
    )];
    for check in checks {
        let run = check.run;
        let name = check.name;
        let (trial, ignored) = match (&dir, required) {
            (Some(dir), _) => {
                let dir = dir.clone();
                let trial = libtest_mimic::Trial::test(name, move || {
                    run(&dir);
                    Ok(())
                });
                (trial, check.without_driver && driver)
            }
            (None, Some(v)) => {
                let message = format!("{} is unset under {v}", wheel.var);
                (
                    libtest_mimic::Trial::test(name, move || Err(message.into())),
                    false,
                )
            }
            (None, None) => (libtest_mimic::Trial::test(name, || Ok(())), true),
        };
        trials.push(trial.with_ignored_flag(ignored));
    }
    if driver && checks.iter().any(|c| c.without_driver) {
        eprintln!("a CUDA driver loads here: the checks of what happens without one are ignored");
    }
    libtest_mimic::run(&args, trials).exit();
}

/// Runs the [`Child`] `name` in a child process of the test binary with the wheel's variable set to `dir`, and
/// returns its output.
pub fn run_child(wheel: &Wheel, name: &str, dir: &Path) -> std::process::Output {
    std::process::Command::new(std::env::current_exe().expect("test binary"))
        .env(CHILD, name)
        .env(wheel.var, dir)
        .output()
        .expect("run the child helper")
}
