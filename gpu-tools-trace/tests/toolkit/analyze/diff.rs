//! `diff` of two traces.
