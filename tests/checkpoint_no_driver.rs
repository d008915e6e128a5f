//! The real `libcheckpoint.so` of the CUDA 13 wheel without a CUDA driver: the raw call crashes, the crate's
//! routes are typed errors (`tests/common/checkpoint_no_driver_checks.rs`). `GPU_TOOLS_CUPTI_WHEEL_LIB` names the
//! wheel's `nvidia/cu13/lib` folder (docs/testing.md). Unset: the checks are reported as ignored. Set but without
//! `libcheckpoint.so`: they fail.

#[path = "common/wheel.rs"]
mod wheel;

const WHEEL: wheel::Wheel = wheel::CUDA13;

#[path = "common/checkpoint_no_driver_checks.rs"]
mod checks;

fn main() {
    wheel::main(
        &WHEEL,
        checks::CHECKS,
        checks::CHILDREN,
        include_str!("common/checkpoint_no_driver_checks.rs"),
    );
}
