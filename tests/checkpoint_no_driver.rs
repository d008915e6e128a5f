//! The real `libcheckpoint.so` of the CUDA 13 wheel without a CUDA driver: the raw call crashes, the crate's
//! routes are typed errors (`tests/common/checkpoint_no_driver_checks.rs`). `GPU_TOOLS_CUPTI_WHEEL_LIB` names the
//! wheel's `nvidia/cu13/lib` folder. Unset: the tests print a notice and check nothing. Set but without
//! `libcheckpoint.so`: they fail.
#![cfg(feature = "cupti")]

#[path = "common/wheel.rs"]
mod wheel;

const WHEEL: wheel::Wheel = wheel::CUDA13;

#[path = "common/checkpoint_no_driver_checks.rs"]
mod checks;
