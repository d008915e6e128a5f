//! rocprofiler v2 against its double (`tests/doubles/rocprofiler_double.c`), one module each: the safe layer, and
//! every record delivered exactly once under load. Every test that touches the double takes `common::serial()`.

#[cfg(feature = "rocprofiler")]
#[path = "../common/rocprofiler.rs"]
mod common;

mod rocprofiler_double;
mod rocprofiler_loss;
