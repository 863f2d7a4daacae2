//! weir's own Kafka client: a small async client on the sans-io protocol
//! crate, shared by the `weir` command line tools (topics, produce, consume,
//! perf). It talks to any Kafka-compatible broker.
//!
//! - [`Connection`]: one TCP connection, version negotiation through
//!   ApiVersions, typed request/response round trips.
//! - [`Client`]: bootstrap, metadata, and the common admin and data
//!   operations on top of connections to partition leaders; configs,
//!   partitions, DeleteRecords and log-dir sizes ([`admin`]); a producer's
//!   topic lookup with broker-side auto-creation
//!   ([`Client::producer_topic`]).
//! - [`GroupMember`]: a classic consumer-group member (range assignor)
//!   and committed-offset helpers ([`group`]).

pub mod admin;
mod client;
mod connection;
mod error;
pub mod group;

pub use admin::{ConfigEntry, ConfigOp, ConfigSource, ReplicaLogDir, ResourceType};
pub use client::{
    Client, ClientOptions, FetchedPartition, PartitionInfo, ProducerTopic, TopicInfo,
};
pub use connection::Connection;
pub use error::ClientError;
pub use group::{GroupMember, HeartbeatStatus, TopicPartition};
