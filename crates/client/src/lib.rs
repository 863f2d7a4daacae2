//! weir's own Kafka client: a small async client on the sans-io protocol
//! crate, shared by the `weir` command line tools (topics, produce, consume,
//! perf). It talks to any Kafka-compatible broker.
//!
//! - [`Connection`]: one connection (TCP, or TLS over it), version
//!   negotiation through ApiVersions, SASL authentication, typed
//!   request/response round trips.
//! - [`Security`]: `security.protocol` PLAINTEXT, SSL, SASL_PLAINTEXT or
//!   SASL_SSL with Kafka's client `ssl.*` and `sasl.*` properties
//!   ([`security`]), used by every connection of a client.
//! - [`Client`]: bootstrap, metadata, and the common admin and data
//!   operations on top of connections to partition leaders; configs,
//!   partitions, DeleteRecords and log-dir sizes ([`admin`]); a producer's
//!   topic lookup with broker-side auto-creation
//!   ([`Client::producer_topic`]).
//! - [`GroupMember`]: a classic consumer-group member (range assignor)
//!   and committed-offset helpers ([`group`]).

pub mod acls;
pub mod admin;
mod client;
mod connection;
mod error;
pub mod group;
pub mod jaas;
pub mod pem;
pub mod quotas;
mod sasl;
pub mod scram;
pub mod security;
mod stream;
mod tls;

pub use admin::{ConfigEntry, ConfigOp, ConfigSource, ReplicaLogDir, ResourceType};
pub use client::{
    Client, ClientOptions, FetchedPartition, PartitionInfo, ProducerTopic, TopicInfo,
};
pub use connection::Connection;
pub use error::ClientError;
pub use group::{GroupMember, HeartbeatStatus, TopicPartition};
pub use security::{Security, SecurityError, SecurityProtocol, SecuritySettings};
