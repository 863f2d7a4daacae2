//! The integration tests of this crate, built as one test binary (one link
//! instead of one per file). Run one file's tests with a filter on its
//! module name: `cargo test -p weir-cluster --test integration <module>::`.

mod common;

mod acls;
mod alter_partition;
mod batch_fuzz_smoke;
mod configs;
mod controller_listener;
mod image;
mod leaders;
mod lifecycle;
mod observer;
mod quorum;
mod reassignments;
mod refusals;
mod security;
mod tcp;
