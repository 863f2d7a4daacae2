//! The integration tests of this crate, built as one test binary (one link
//! instead of one per file). Run one file's tests with a filter on its
//! module name: `cargo test -p weir-storage --test integration <module>::`.

mod common;

mod checkpoint_fuzz_smoke;
mod cleaner;
mod cleaner_txn;
mod crash;
mod data_safety;
mod flush;
mod follower;
mod fuzz_ops;
mod kafka_python;
mod leader_epochs;
mod leftovers_and_faults;
mod log_basic;
mod manager;
mod model;
mod retention;
mod startup_faults;
mod truncation;
mod txn_index;
