//! weir's quorum controller: the cluster metadata image driven by the
//! replicated metadata log (weir-raft), and the controller (weir-metadata's
//! decisions) that runs on the log's leader.
//!
//! - [`batch`]: a log entry's payload, one batch of KRaft-framed records.
//! - [`image::ImageStateMachine`]: weir-raft's state machine; applies each
//!   batch to the [`weir_metadata::MetadataImage`], publishes the new image
//!   for lock-free readers ([`image::ImageReader`]) and sends the delta to
//!   subscribers.
//! - [`controller::QuorumController`]: decides on the leader, one request at
//!   a time on the latest image, proposes through raft and answers once the
//!   records are applied; elsewhere it answers NOT_CONTROLLER.
//! - [`node::ControllerNode`]: the three together for one node.
//! - [`listener`]: the CONTROLLER listener, raft RPCs and Kafka controller
//!   requests (BrokerRegistration, BrokerHeartbeat, ControlledShutdown,
//!   CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders,
//!   AlterPartition, AllocateProducerIds, DescribeQuorum) on one port.
//! - [`metrics`]: the controller's gauges and counters.
//! - [`client::ControllerClient`]: sends those requests to whichever voter
//!   is the active controller.
//! - [`broker_requests`]: a broker's AlterPartition (ISR changes) and
//!   AllocateProducerIds through that client, in plain types.
//! - [`lifecycle::BrokerLifecycle`]: a broker's registration, heartbeats
//!   and controlled shutdown.
//! - [`cluster_node::ClusterNode`]: all of it for one process, with session
//!   expiry and the leader rebalance on the active controller.
//! - [`observer::MetadataObserver`]: the image of a broker-only node,
//!   fetched from the active controller (`__cluster_metadata` Fetch and
//!   FetchSnapshot) instead of voted on.
//!
//! See "Quorum controller" in `docs/cluster.md`.
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use weir_cluster::controller::QuorumControllerConfig;
//! use weir_cluster::node::ControllerNode;
//! use weir_metadata::controller::NewTopic;
//! use weir_raft::RaftOptions;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:9093").await?;
//! let voters = BTreeMap::from([(1, "127.0.0.1:9093".to_string())]);
//! let options = RaftOptions::new(1, "/tmp/weir-meta", voters);
//! let node = ControllerNode::start_tcp(options, QuorumControllerConfig::default(), listener).await?;
//! node.raft.initialize().await?;
//! let topic = NewTopic { name: "orders".into(), num_partitions: 3, replication_factor: 1, ..Default::default() };
//! match node.controller.create_topic(topic).await {
//!     Ok(id) => println!("created {id:?}"),
//!     Err(e) => println!("{:?}: {e}", e.error_code()),
//! }
//! let image = node.images.current();
//! println!("{} topics at index {}", image.image.topics().count(), image.index);
//! # Ok(())
//! # }
//! ```
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod batch;
pub mod broker_requests;
pub mod client;
pub mod cluster_node;
pub mod controller;
pub mod image;
pub mod lifecycle;
pub mod listener;
pub mod metrics;
pub mod node;
pub mod observer;

pub use client::{ControllerClient, ControllerClientConfig, ControllerClientError};
pub use cluster_node::{ClusterNode, ClusterNodeConfig};
pub use controller::{ControllerError, QuorumController, QuorumControllerConfig};
pub use image::{AppliedImage, ImageReader, ImageStateMachine, ImageUpdate};
pub use lifecycle::{BrokerInfo, BrokerLifecycle, BrokerState, LifecycleConfig};
pub use metrics::ControllerMetricsSnapshot;
pub use node::ControllerNode;
pub use observer::{MetadataObserver, ObserverConfig};
