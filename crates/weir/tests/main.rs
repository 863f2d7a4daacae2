//! The integration tests of this crate, built as one test binary (one link
//! instead of one per file). Run one file's tests with a filter on its
//! module name: `cargo test -p weir --test integration <module>::`.

mod common;

mod acls_cli;
mod auto_create;
mod cli;
mod cluster_cli;
mod command_config;
mod consume_corrupt;
mod dev_cluster;
mod dump_log_damage;
mod dynamic_configs;
mod groups;
mod producer_ids;
mod security_cli;
mod security_walkthrough;
mod serve_kraft;
mod serve_limits;
mod serve_signals;
mod transactions_cli;
