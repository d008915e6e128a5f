//! What the analysis says of the real traces of `tests/fixtures/traces/`.
