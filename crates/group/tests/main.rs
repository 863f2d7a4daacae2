//! The integration tests of this crate, built as one test binary (one link
//! instead of one per file). Run one file's tests with a filter on its
//! module name: `cargo test -p weir-group --test integration <module>::`.

mod common;
mod consumer_common;

mod consumer_groups;
mod consumer_model;
mod durability;
mod membership;
mod migration;
mod offsets;
mod random_scenarios;
mod records;
mod records_fuzz_smoke;
mod records_oracle;
mod txn_offsets;
