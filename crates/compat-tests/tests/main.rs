//! The integration tests of this crate, built as one test binary (one link
//! instead of one per file). Run one file's tests with a filter on its
//! module name: `cargo test -p weir-compat-tests --test integration <module>::`.

mod acls;
mod cluster;
mod cluster_acls;
mod cluster_configs;
mod cluster_listeners;
mod cluster_roles;
mod cluster_security;
mod compaction;
mod conformance;
mod console;
mod crash_loop;
mod groups_scenarios;
mod jepsen;
mod kafka_python;
mod kafka_python_record_errors;
mod kafkajs;
mod kcat;
mod mixed_group_migration;
mod netns_partition;
mod quotas;
mod rdkafka;
mod rdkafka_consumer_protocol;
mod rdkafka_dynamic_configs;
mod rdkafka_groups;
mod rdkafka_groups_members;
mod rdkafka_groups_reset;
mod rdkafka_record_errors;
mod reassignment;
mod replicated_offsets;
mod replicated_transactions;
mod replicated_txn_offsets;
mod replication;
mod sasl;
mod sasl_oauthbearer;
mod scram_users;
mod security_matrix;
mod tls;
mod torn_tail;
mod transactions;
mod transactions_clients;
mod txn_marker_recovery;
mod txn_offsets_clients;
