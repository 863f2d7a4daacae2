//! weir's cluster metadata, without I/O: the [`MetadataImage`] every node
//! builds by applying KRaft metadata records, and the [`controller`]'s
//! decisions that produce those records.
//!
//! The records are `weir_protocol`'s generated KRaft types, framed in the
//! metadata log by [`weir_protocol::metadata_record::MetadataRecord`]. The
//! replicated log itself (openraft) lives elsewhere; it hands committed
//! records to [`MetadataImage::apply`]. Time is an argument (`now_ms`),
//! never read from a clock. See `docs/cluster.md`.
//!
//! The SCRAM credential and client quota models ([`scram`],
//! [`client_quotas`]) are shared with a single node, which validates and
//! answers with the same code and keeps the result in its own files.
//!
//! ```
//! use weir_metadata::controller::{Controller, ControllerConfig, Heartbeat, NewTopic, Registration};
//! use weir_metadata::MetadataImage;
//! use weir_protocol::Uuid;
//!
//! let mut controller = Controller::new(ControllerConfig::default(), 42);
//! let mut image = MetadataImage::empty();
//! // Broker 1 registers (fenced), then heartbeats once caught up: unfenced.
//! let reg = Registration { broker_id: 1, incarnation_id: Uuid([1; 16]), endpoints: vec![], rack: None };
//! let (epoch, records) = controller.register_broker(&image, &reg, 0).unwrap();
//! (image, _) = image.apply(&records).unwrap();
//! let hb = Heartbeat { broker_id: 1, broker_epoch: epoch, current_metadata_offset: 1, want_fence: false, want_shutdown: false };
//! let reply = controller.heartbeat(&image, &hb, 1, 100).unwrap();
//! (image, _) = image.apply(&reply.records).unwrap();
//! assert!(!image.broker(1).unwrap().fenced);
//!
//! // A topic with three partitions, all led by the only broker.
//! let topic = NewTopic { name: "orders".into(), num_partitions: 3, replication_factor: 1, ..Default::default() };
//! let (id, records) = controller.create_topic(&image, &topic).unwrap();
//! let (image, delta) = image.apply(&records).unwrap();
//! assert!(delta.topics_created.contains(&id));
//! assert_eq!(image.partition(id, 2).unwrap().leader, 1);
//!
//! // Broker 1 stops heartbeating: fenced, and its partitions lose their leader.
//! let records = controller.expire_sessions(&image, 100 + 9_001);
//! let (image, delta) = image.apply(&records).unwrap();
//! assert!(delta.brokers_fenced.contains(&1));
//! assert_eq!(image.partition(id, 0).unwrap().leader, -1);
//! ```

#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod client_quotas;
pub mod controller;
pub mod image;
pub mod scram;

pub use image::{
    ApplyError, Broker, Endpoint, MetadataDelta, MetadataImage, NO_LEADER, NO_LEADER_CHANGE,
    Partition, Topic,
};
