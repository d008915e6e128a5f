//! Finding and opening vendor libraries at run time.
//!
//! Every library is looked for in this order; the first candidate that opens and exports every symbol the crate
//! requires wins, and the rest are not tried:
//!
//! 1. **An explicit path given in code** (`load_from`: `CheckpointLibrary::load_from(path)`,
//!    `Driver::load_from(path)`, ...): only that path is tried.
//! 2. **The library's environment variable**: only that path is tried.
//!
//!    | library | variable |
//!    |---|---|
//!    | `libcheckpoint.so` (CUPTI checkpoint) | `GPU_TOOLS_CHECKPOINT_LIB` |
//!    | `libcupti.so.13`, `.12` (CUPTI) | `GPU_TOOLS_CUPTI_LIB` |
//!    | `libcuda.so.1` (CUDA driver, debugger API) | `GPU_TOOLS_CUDA_DRIVER_LIB` |
//!    | `librocprofiler64.so.2` (rocprofiler v2) | `GPU_TOOLS_ROCPROFILER_LIB` |
//!
//! 3. **Root variables**: under `$CUDA_HOME` and `$CUDA_PATH`: `extras/CUPTI/lib64`, `targets/x86_64-linux/lib`,
//!    `lib64` (CUPTI); under `$ROCM_PATH`: `lib`, `lib64`. The driver is not looked for under toolkit roots: they
//!    hold only `lib64/stubs` (every call fails) and `compat` (a forward-compatibility driver that fails next to a
//!    newer system driver).
//! 4. **Standard install folders**: `/usr/local/cuda/extras/CUPTI/lib64`, `/usr/local/cuda/targets/x86_64-linux/lib`,
//!    `/usr/local/cuda/lib64` (CUPTI); `/usr/local/nvidia/lib64`, `/usr/lib/x86_64-linux-gnu`, `/usr/lib64`,
//!    `/usr/lib/wsl/lib` (driver); `/opt/rocm/lib`, `/opt/rocm/lib64` (rocprofiler).
//! 5. **NVIDIA Python wheels** of the machine's `python3` (or of `$GPU_TOOLS_PYTHON`): `nvidia/cu13/lib` and
//!    `nvidia/cuda_cupti/lib` in each of its site-packages folders (CUPTI libraries only). A `$GPU_TOOLS_PYTHON`
//!    that does not run as a Python is not ignored: it is an attempt of its own ([`Rejection::BadPython`]).
//! 6. **The system loader**: `dlopen` of the bare file name (`LD_LIBRARY_PATH`, the `ld.so` cache).
//!
//! A candidate that opens but lacks a required symbol (the wrong library, or one too old) is closed again and the
//! search goes on; the final [`LoadError`] lists every candidate and why it was rejected (`{:#}` prints them one
//! per line). A bare name the system loader has no file for is "not found", like a missing path: only a file that
//! was found and then rejected is "refused". Where nothing was found, the message ends with the usual fix
//! ([`LoadError::fix`]: for CUPTI the `nvidia-cuda-cupti` wheel, `CUDA_HOME`, `GPU_TOOLS_PYTHON`). A library is loaded at most once per process and shared by all threads; asking for it again from
//! another explicit path is [`LoadError::AlreadyLoaded`], naming both paths.
//!
//! Trust: a file found this way, or named by `load_from` or an environment variable, is taken to be the vendor
//! library. Opening it runs its initialisers, and its symbols are called with the signatures of the vendor
//! headers the bindings were generated from. Like any run-time loader of a C API, the crate cannot check more
//! than the symbol names, so point these paths only at the vendor's libraries.

// Without a vendor feature nothing loads a library: only the public error types remain in use.
#![cfg_attr(
    not(any(
        feature = "cupti",
        feature = "cudbg",
        feature = "rocprofiler",
        feature = "rocprofiler-sdk"
    )),
    allow(dead_code, unused_imports)
)]

mod bind;
mod error;
mod python;
mod search;
mod slot;

#[cfg(any(feature = "cupti", feature = "cudbg"))]
pub(crate) use bind::optional;
pub(crate) use bind::{dlopen, required};
pub use error::{Attempt, LoadError, Origin, Rejection};
// Kept at their old paths: the loader's own modules use the first two, only rocprofiler-sdk the third.
#[allow(unused_imports)]
pub(crate) use python::{PYTHON_VAR, python_problem, python_site_packages};
pub(crate) use search::LibrarySpec;
pub(crate) use slot::Slot;

/// The log target of every loader line, whichever file it comes from: `RUST_LOG=gpu_tools::loader=trace` and the
/// lines' target name one place.
const LOG_TARGET: &str = "gpu_tools::loader";
