//! rocprofiler v2 against its double (`gpu-tools-testing/doubles/rocprofiler_double.c`), one module each: the safe layer, and
//! every record delivered exactly once under load. Every test that touches the double takes `common::serial()`.

#[cfg(feature = "rocprofiler")]
mod common;

mod rocprofiler_double;
mod rocprofiler_loss;
