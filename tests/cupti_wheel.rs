//! The real CUPTI libraries of the CUDA 13 PyPI wheel (`nvidia-cuda-cupti` 13.0.85), loaded through the crate's
//! loader on a machine without a GPU. `GPU_TOOLS_CUPTI_WHEEL_LIB` names the wheel's `nvidia/cu13/lib` folder
//! (docs/testing.md). When it is unset the checks are reported as ignored (as failed under CI); when it is set, a
//! missing file fails. `tests/cupti_wheel12.rs` runs the same checks against CUDA 12.

#[path = "common/wheel.rs"]
mod wheel;

const WHEEL: wheel::Wheel = wheel::CUDA13;

#[path = "common/cupti_tracing.rs"]
mod tracing;

#[path = "common/cupti_wheel_checks.rs"]
mod checks;

fn main() {
    wheel::main(
        &WHEEL,
        checks::CHECKS,
        checks::CHILDREN,
        include_str!("common/cupti_wheel_checks.rs"),
    );
}
