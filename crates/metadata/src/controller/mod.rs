//! The controller's decisions: pure functions of the current image and an
//! event, returning the records to append to the metadata log (or a Kafka
//! error). Nothing here changes the image: the caller commits the records
//! through the log and every node applies them with
//! [`MetadataImage::apply`](crate::MetadataImage::apply).
//!
//! The only state the controller keeps itself is soft: when each broker
//! last heartbeated (time is the `now_ms` argument, never the wall clock)
//! and the seed that picks where replica placement starts. A new active
//! controller starts every known broker's session at its first `now_ms`.
//!
//! Leadership follows Kafka's rules without unclean election: a leader is
//! the first replica, in replica order, that is in the ISR and active
//! (unfenced, not shutting down); when none is, the leader is
//! [`NO_LEADER`](crate::NO_LEADER) and the ISR keeps its last member.
//! Only an ElectLeaders request of the unclean type elects outside the ISR
//! (see `leaders`); ElectLeaders' preferred type and the periodic
//! [`Controller::rebalance_leaders`] move leadership back to the first
//! replica.

use std::collections::BTreeMap;

use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::metadata_record::MetadataRecord;

use crate::image::Endpoint;

/// Kafka's `broker.session.timeout.ms` default.
pub const DEFAULT_SESSION_TIMEOUT_MS: u64 = 9_000;
/// Producer ids handed out per `AllocateProducerIds`, as in Kafka.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1_000;
/// Longest topic name Kafka accepts.
pub const MAX_TOPIC_NAME_LEN: usize = 249;
/// Most records one admin decision writes (Kafka's
/// `MAX_RECORDS_PER_USER_OP`): bounds the partitions one CreateTopics or
/// CreatePartitions adds and the elections one ElectLeaders or leader
/// rebalance makes, and so the size of one metadata log batch.
pub const MAX_RECORDS_PER_USER_OP: usize = 10_000;

/// Controller settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerConfig {
    /// `broker.session.timeout.ms`: a broker that has not heartbeated for
    /// longer is fenced.
    pub session_timeout_ms: u64,
    /// `num.partitions`, for a CreateTopics that leaves it at -1.
    pub default_partitions: i32,
    /// `default.replication.factor`, for a CreateTopics that leaves it at -1.
    pub default_replication_factor: i16,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            session_timeout_ms: DEFAULT_SESSION_TIMEOUT_MS,
            default_partitions: 1,
            default_replication_factor: 1,
        }
    }
}

/// A Kafka error with the message to send back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub code: ErrorCode,
    pub message: String,
}

fn reject<T>(code: ErrorCode, message: impl Into<String>) -> Result<T, Rejection> {
    Err(Rejection {
        code,
        message: message.into(),
    })
}

/// A BrokerRegistration request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    pub broker_id: i32,
    pub incarnation_id: Uuid,
    pub endpoints: Vec<Endpoint>,
    pub rack: Option<String>,
}

/// A BrokerHeartbeat request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    pub broker_id: i32,
    pub broker_epoch: i64,
    /// The offset of the metadata log the broker has applied.
    pub current_metadata_offset: i64,
    pub want_fence: bool,
    pub want_shutdown: bool,
}

/// The answer to a heartbeat, with the records it needs committed first.
#[derive(Debug, Clone, PartialEq)]
pub struct HeartbeatReply {
    pub records: Vec<MetadataRecord>,
    /// Whether the broker is fenced once `records` are applied.
    pub is_fenced: bool,
    /// Whether a broker in controlled shutdown may stop now (it leads
    /// nothing).
    pub should_shut_down: bool,
}

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewTopic {
    pub name: String,
    /// -1: `default_partitions`.
    pub num_partitions: i32,
    /// -1: `default_replication_factor`.
    pub replication_factor: i16,
    /// Explicit replicas per partition (partition i = entry i); when given,
    /// `num_partitions` and `replication_factor` must be -1.
    pub assignments: Vec<Vec<i32>>,
    pub configs: Vec<(String, Option<String>)>,
}

/// A CreatePartitions request for one topic.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewPartitions {
    pub name: String,
    /// The partition count wanted, above the current one.
    pub count: i32,
    /// Explicit replicas of each new partition, in partition order.
    pub assignments: Option<Vec<Vec<i32>>>,
}

/// One partition of an AlterPartition request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartition {
    pub topic_id: Uuid,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// The proposed ISR: (broker id, broker epoch or -1 to skip the check).
    pub new_isr: Vec<(i32, i64)>,
}

/// A broker's session as this controller sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Session {
    last_heartbeat_ms: u64,
}

/// The active controller's soft state; see the module doc.
#[derive(Debug, Clone)]
pub struct Controller {
    config: ControllerConfig,
    sessions: BTreeMap<i32, Session>,
    rng: u64,
}

impl Controller {
    /// A controller whose placement and topic ids derive from `seed`.
    pub fn new(config: ControllerConfig, seed: u64) -> Self {
        Self {
            config,
            sessions: BTreeMap::new(),
            rng: seed,
        }
    }

    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    fn next_random(&mut self) -> u64 {
        // SplitMix64: deterministic for a seed, good enough to spread starts.
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn session_alive(&self, broker_id: i32, now_ms: u64) -> bool {
        self.sessions.get(&broker_id).is_some_and(|s| {
            now_ms.saturating_sub(s.last_heartbeat_ms) <= self.config.session_timeout_ms
        })
    }
}

mod acls;
mod brokers;
mod client_quotas;
mod configs;
mod election;
mod leaders;
mod partitions;
mod reassignment;
mod scram;
mod topics;

pub use acls::{AclCreation, AclDeletion, acl_record, delete_acls};
pub use client_quotas::{
    QuotaAlteration, alter_client_quotas, client_quota_changes, client_quota_record,
};
pub use configs::alter_topic_configs;
pub use leaders::{ElectionResult, ElectionType, imbalanced_partitions};
pub use reassignment::{
    OngoingReassignment, Reassignment, ReassignmentResult, ongoing_reassignments,
};
pub use scram::{ScramAlteration, alter_scram_credentials, scram_changes, scram_record};
