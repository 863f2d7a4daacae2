//! Kafka's classic consumer group coordinator as a pure state machine.
//!
//! [`GroupCoordinator`] holds every group served by this broker. Requests
//! are plain structs (see [`types`]); every call takes the current time in
//! milliseconds and never reads a clock, sleeps or does I/O. What the broker
//! must do comes back as [`Output`]s:
//!
//! * `Output::Respond { token, response }` answers a parked JoinGroup or
//!   SyncGroup. Those requests complete asynchronously in Kafka (a join waits
//!   until every member rejoined or the rebalance timed out), so the broker
//!   passes a token with the request and holds the connection's reply until
//!   an output with that token arrives.
//! * `Output::Append { partition, records, .. }` must be appended to that
//!   partition of `__consumer_offsets` (key/value bytes in Kafka's format,
//!   value `None` = tombstone), as a transactional batch of the producer in
//!   `transaction` when it is set (TxnOffsetCommit). Outputs are performed
//!   in order; after each append the broker reports whether (and at which
//!   offset) it reached the log with [`GroupCoordinator::append_completed`].
//!   Commits and deletions become visible only then, and a failed write is
//!   undone (see `writes.rs`). Transactional offsets stay pending until the
//!   broker reports the producer's marker with
//!   [`GroupCoordinator::complete_txn`] (see `txn.rs`).
//!
//! Synchronous requests (Heartbeat, LeaveGroup, OffsetCommit, …) return their
//! result directly, plus outputs. [`GroupCoordinator::tick`] runs the timers
//! (session expiry, rebalance timeouts, offset expiry); call it at
//! [`GroupCoordinator::next_deadline`] or periodically.
//!
//! ```
//! use bytes::Bytes;
//! use weir_group::{GroupConfig, GroupCoordinator, JoinRequest, Output, Protocol, Response};
//!
//! let mut coord = GroupCoordinator::new(GroupConfig {
//!     initial_rebalance_delay_ms: 0,
//!     ..GroupConfig::default()
//! });
//! let join = JoinRequest {
//!     group_id: "g".into(),
//!     session_timeout_ms: 10_000,
//!     rebalance_timeout_ms: 30_000,
//!     member_id: String::new(),
//!     group_instance_id: None,
//!     protocol_type: "consumer".into(),
//!     protocols: vec![Protocol { name: "range".into(), metadata: Bytes::new() }],
//!     client_id: "client".into(),
//!     client_host: "/127.0.0.1".into(),
//!     require_known_member_id: false,
//!     supports_skip_assignment: true,
//! };
//! let out = coord.join_group(join, 1, 0);
//! let Output::Respond { token: 1, response: Response::Join(resp) } = &out[0] else {
//!     panic!("expected the join response")
//! };
//! assert_eq!(resp.generation_id, 1);
//! assert_eq!(resp.leader, resp.member_id);
//! ```
//!
//! States, transitions and record formats are described in `docs/groups.md`.

pub mod config;
pub mod consumer;
pub mod coordinator;
pub mod error;
mod group;
mod membership;
mod offsets;
pub mod partition;
pub mod records;
mod replay;
mod txn;
pub mod types;
mod writes;

pub use config::{ConfigError, GroupConfig, MigrationPolicy};
pub use consumer::assignor::Assignor;
pub use consumer::types::{
    ConsumerGroupDescription, ConsumerGroupTimeouts, ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse, ConsumerMemberDescription, MemberState, Partitions, TopicInfo,
    TopicsImage,
};
pub use coordinator::{AssignmentClock, GroupCoordinator, PartitionStatus};
pub use error::{ErrorCode, RecordError};
pub use partition::{java_string_hash, partition_for};
pub use replay::LogPosition;
pub use txn::TxnCompletion;
pub use types::*;
pub use writes::Completion;
