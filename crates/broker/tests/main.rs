//! The integration tests of this crate, built as one test binary (one link
//! instead of one per file). Run one file's tests with a filter on its
//! module name: `cargo test -p weir-broker --test integration <module>::`.

mod common;

mod acl_matrix;
mod admin;
mod client_quotas;
mod cluster_view;
mod conformance;
mod console;
mod console_cluster;
mod console_corrupt;
mod console_transactions;
mod consumer_groups;
mod damaged_segments;
mod data;
mod decoders_fuzz_smoke;
mod dynamic_configs;
mod embedded;
mod fetch_wakeups;
mod follower_writes;
mod group_shards;
mod groups;
mod hosting;
mod http_host;
mod http_security;
mod internal_topic;
mod metrics;
mod network;
mod offset_for_leader_epoch;
mod produce_flush;
mod produce_record_errors;
mod producer_state_loads;
mod record_validation;
mod replica_fetch_refusals;
mod replication_metrics;
mod retention;
mod retention_live;
mod sasl_reauth;
mod scram_credentials;
mod startup_faults;
mod tls;
mod transactions;
mod txn_compaction;
mod txn_markers;
mod txn_offsets;
mod txn_partitions;
mod worker_syncs;
