//! The integration tests of this crate, built as one test binary (one link
//! instead of one per file). Run one file's tests with a filter on its
//! module name: `cargo test -p weir-txn --test integration <module>::`.

mod common;

mod random_ops;
mod records_fuzz_smoke;
mod requests;
mod transitions;
