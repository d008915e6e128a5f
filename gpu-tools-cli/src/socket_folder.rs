//! The private folder (mode 0700, removed when dropped) that holds the socket an injected library connects to.

use crate::failure::Failure;

/// A new private folder named after `prefix` in the temporary folder.
pub fn private(prefix: &str) -> Result<tempfile::TempDir, Failure> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| Failure::new(1, format!("cannot make a socket folder: {e}")))
}
