//! The CUPTI tracing layer against the CUPTI double (`gpu-tools-testing/doubles/cupti_activity.c`) and recorded real buffers,
//! one module each: the activity tracer, the callback subscriber, the recorded CUPTI 13.0 buffers. One binary and
//! one double: every test that touches the double's process-wide state takes `common::serial()`.

#[cfg(feature = "cupti")]
mod common;

mod cupti_activity_double;
mod cupti_callback_double;
mod cupti_recorded;
