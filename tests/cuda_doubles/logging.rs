//! What the library reports through the `log` facade: the library path it loaded, each candidate it rejected
//! (trace), and each vendor call that failed with its name and code (debug). Uses the C doubles of the driver and
//! of `libcheckpoint.so`; the test logger is the process's only logger, so the test runs in a process of its own
//! (`gpu_tools_testing::own_process`).
#![cfg(feature = "cupti")]

use crate::common;

use std::sync::Mutex;

use gpu_tools::cuda::{Context, Driver};
use gpu_tools::cupti::{Checkpoint, Reserve};

/// Collects every record as `LEVEL target: message`.
struct Collect(Mutex<Vec<String>>);

impl log::Log for Collect {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        let line = format!("{} {}: {}", record.level(), record.target(), record.args());
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(line);
    }
    fn flush(&self) {}
}

static LOGGER: Collect = Collect(Mutex::new(Vec::new()));

/// The records logged since the last call.
fn take() -> Vec<String> {
    std::mem::take(&mut *LOGGER.0.lock().unwrap_or_else(|p| p.into_inner()))
}

fn has(lines: &[String], prefix: &str, needle: &str) -> bool {
    lines
        .iter()
        .any(|l| l.starts_with(prefix) && l.contains(needle))
}

#[test]
fn loads_rejections_and_failed_calls_are_logged() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    log::set_logger(&LOGGER).expect("the only logger");
    log::set_max_level(log::LevelFilter::Trace);

    // A rejected candidate (trace) and the failed search (debug).
    assert!(Driver::load_from("/nonexistent/libcuda.so.1").is_err());
    let lines = take();
    assert!(
        has(
            &lines,
            "TRACE gpu_tools::loader",
            "rejected /nonexistent/libcuda.so.1 (explicit path): no such file"
        ),
        "{lines:#?}"
    );
    assert!(
        has(
            &lines,
            "DEBUG gpu_tools::loader",
            "CUDA driver (libcuda.so.1): not loaded, 1 candidates rejected"
        ),
        "{lines:#?}"
    );

    // The path loaded, with where it came from.
    let driver_path = common::double_path("cuda_driver");
    let driver = Driver::load_from(&driver_path).expect("driver double");
    let lines = take();
    let loaded = format!(
        "CUDA driver (libcuda.so.1): loaded {} (explicit path)",
        driver_path.display()
    );
    assert!(
        has(&lines, "DEBUG gpu_tools::loader", &loaded),
        "{lines:#?}"
    );

    // A failed driver call, by name and code: the double has one device.
    let err = driver.device_info(7).unwrap_err();
    assert_eq!(err.name, "CUDA_ERROR_INVALID_DEVICE");
    let lines = take();
    assert!(
        has(
            &lines,
            "DEBUG gpu_tools::cuda",
            "cuDeviceGet failed: CUDA_ERROR_INVALID_DEVICE (101)"
        ),
        "{lines:#?}"
    );

    // A failed CUPTI call, by name and code: no memory left for the checkpoint.
    common::load_doubles();
    take();
    let ctx = Context::create(0).expect("double context");
    let mut cp = Checkpoint::builder(&ctx)
        .reserve_device(Reserve::MiB(1024))
        .reserve_host(Reserve::MiB(4096))
        .build()
        .expect("checkpoint");
    assert!(cp.save().is_err());
    let lines = take();
    assert!(
        has(
            &lines,
            "DEBUG gpu_tools::cupti",
            "cuptiCheckpointSave failed: CUPTI_ERROR_OUT_OF_MEMORY (8)"
        ),
        "{lines:#?}"
    );
}
