//! One module per subcommand.

pub mod acls;
pub mod cluster;
pub mod command_config;
pub mod common;
pub mod configs;
pub mod consume;
pub mod delete_records;
pub mod dev;
pub mod dump_log;
pub mod groups;
pub mod offsets;
pub mod perf;
pub mod produce;
pub mod quotas;
pub mod serve;
pub mod topics;
pub mod transactions;
pub mod users;
