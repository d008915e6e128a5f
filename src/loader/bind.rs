//! Opening one candidate file and copying its function pointers out of a bindgen table.

use std::path::Path;

use super::error::Rejection;

/// Opens a shared library, mapping a failure to a [`Rejection`].
pub(crate) fn dlopen(path: &Path) -> Result<libloading::Library, Rejection> {
    // SAFETY: opening a library runs its initialisers. The crate opens the vendor libraries its search specs
    // name, or a file the caller chose and so vouched for (module docs, "Trust"); the vendors' initialisers do
    // not depend on this process's state.
    unsafe { libloading::Library::new(path.as_os_str()) }
        .map_err(|e| Rejection::OpenFailed(e.to_string()))
}

/// Copies a required function pointer out of a bindgen table field.
pub(crate) fn required<F: Copy>(
    field: &Result<F, libloading::Error>,
    symbol: &'static str,
) -> Result<F, Rejection> {
    field
        .as_ref()
        .map(|f| *f)
        .map_err(|_| Rejection::MissingSymbol(symbol))
}

/// Copies an optional function pointer (one that only newer vendor releases export).
#[cfg(any(feature = "cupti", feature = "cudbg"))]
pub(crate) fn optional<F: Copy>(field: &Result<F, libloading::Error>) -> Option<F> {
    field.as_ref().ok().copied()
}
