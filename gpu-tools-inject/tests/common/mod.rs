//! The CUPTI double (`tests/doubles/cupti_activity.c` of the library) loaded through the library with the driver
//! double, its controls (`gpu_tools_testing::cupti_double`), and one test at a time (the tracer and the subscriber
//! are process-wide). The library's tests load it the same way, under their own features.
#![allow(dead_code)]

use std::ops::Deref;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};

use gpu_tools::cupti::CuptiLibrary;
use gpu_tools_testing::cupti_double::Controls;

/// The library's copy of the double, and the double's controls.
pub struct Double {
    pub lib: &'static CuptiLibrary,
    controls: Controls,
}

impl Deref for Double {
    type Target = Controls;
    fn deref(&self) -> &Controls {
        &self.controls
    }
}

pub fn double_path(name: &str) -> PathBuf {
    gpu_tools_testing::double_path(name)
}

/// Loads the driver double and the CUPTI double into this process's slots, once.
pub fn double() -> &'static Double {
    static D: OnceLock<Double> = OnceLock::new();
    D.get_or_init(|| {
        gpu_tools::cuda::Driver::load_from(double_path("cuda_driver"))
            .expect("driver double loads");
        let lib = CuptiLibrary::load_from(double_path("cupti_activity"))
            .expect("CUPTI double loads through the crate");
        let controls =
            Controls::open(&double_path("cupti_activity")).expect("open the double's controls");
        Double { lib, controls }
    })
}

/// One test at a time: the tracer, the subscriber and the double's state are process-wide.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let d = double();
    d.set_version(130_001);
    d.set_async(false);
    guard
}
