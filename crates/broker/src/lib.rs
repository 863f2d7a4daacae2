//! The weir broker: configuration, network layer, request handlers, topic
//! metadata and idempotent-producer state.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use weir_broker::config::ConfigSources;
//! let mut sources = ConfigSources::default();
//! sources.set("listeners", "127.0.0.1:0");
//! sources.set("log.dirs", "/tmp/weir-data");
//! let running = weir_broker::server::start(sources.build()?).await?;
//! println!("listening on {}", running.local_addr);
//! running.shutdown().await?;
//! # Ok(()) }
//! ```

// Requests come from the network and segment files from disk: bad input is
// an error, never a panic. Exceptions carry `#[allow(..)] // why` on the
// smallest item.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod acls;
pub mod authorized_operations;
pub mod broker;
pub mod cluster;
pub mod codes;
pub mod config;
pub mod configdef;
// Code on the async workers: no blocking file or clock calls (clippy.toml).
#[deny(clippy::disallowed_methods)]
pub mod connection;
pub mod dynamic_config;
pub mod embedded;
pub mod groups;
#[deny(clippy::disallowed_methods)]
pub mod handler;
pub mod hosting;
pub mod http;
pub mod metrics;
pub mod producer_state;
pub mod producer_state_io;
pub mod properties;
pub mod quotas;
pub mod replica_manager;
pub mod replication;
pub mod runtime_watchdog;
pub mod sasl;
pub mod scram_credentials;
pub mod security_admin;
pub mod server;
pub mod session;
pub mod tls;
pub mod topic_config;
pub mod topics;
pub mod transactions;
pub mod txn_partition;
pub mod wakeups;

pub use broker::{Broker, BrokerError};
pub use config::{BrokerConfig, ConfigError, ConfigSources};
pub use embedded::EmbeddedBroker;
pub use server::{RunningBroker, start};
