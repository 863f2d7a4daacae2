//! The integration tests of this crate, built as one test binary (one link
//! instead of one per file). Run one file's tests with a filter on its
//! module name: `cargo test -p weir-raft --test integration <module>::`.

mod common;

mod cluster_id;
mod fuzz_smoke;
mod log_file;
mod mem_cluster;
mod openraft_suite;
mod single_node;
mod tcp_cancel;
mod tcp_cluster;
