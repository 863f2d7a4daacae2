//! weir's own Kafka client: a small async client on the sans-io protocol
//! crate, shared by the `weir` command line tools (topics, produce, consume,
//! perf). It talks to any Kafka-compatible broker.
//!
//! - [`Connection`]: one TCP connection, version negotiation through
//!   ApiVersions, typed request/response round trips.
//! - [`Client`]: bootstrap, metadata, and the common admin and data
//!   operations on top of connections to partition leaders.

mod client;
mod connection;
mod error;

pub use client::{Client, FetchedPartition, PartitionInfo, TopicInfo};
pub use connection::Connection;
pub use error::ClientError;
