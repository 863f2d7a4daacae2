//! The integration tests of this crate, built as one test binary (one link
//! instead of one per file). Run one file's tests with a filter on its
//! module name: `cargo test -p weir-parallel-consumer --test integration <module>::`.

mod common;

mod consumer_protocol;
mod end_to_end;
mod events;
mod exactly_once;
mod exactly_once_batch;
mod exactly_once_e2e;
mod idempotent_effects;
mod lifecycle;
mod metadata_fuzz_smoke;
mod metrics;
mod mock_cluster;
mod scenarios;
mod security;
