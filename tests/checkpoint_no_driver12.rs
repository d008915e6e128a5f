//! The checks of `tests/checkpoint_no_driver.rs` with the CUDA 12 wheel's `libcheckpoint.so` (12.9.79), in a
//! process of its own. `GPU_TOOLS_CUPTI12_WHEEL_LIB` names the wheel's `nvidia/cuda_cupti/lib` folder.

#[path = "common/wheel.rs"]
mod wheel;

const WHEEL: wheel::Wheel = wheel::CUDA12;

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
