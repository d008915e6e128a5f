//! Changed and cut trace files.
