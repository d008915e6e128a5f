//! The checks of `tests/cupti_wheel.rs` against the CUDA 12 PyPI wheel (`nvidia-cuda-cupti-cu12` 12.9.79), in a
//! process of their own (a process loads one CUPTI). `GPU_TOOLS_CUPTI12_WHEEL_LIB` names the wheel's
//! `nvidia/cuda_cupti/lib` folder (docs/testing.md). Unset: the checks are reported as ignored.

#[path = "common/wheel.rs"]
mod wheel;

const WHEEL: wheel::Wheel = wheel::CUDA12;

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
