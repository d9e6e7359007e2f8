//! End-to-end tests of the `apollo` binary.
