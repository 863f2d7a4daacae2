//! Request, result and input types of the consumer protocol (KIP-848).

use std::collections::{BTreeMap, BTreeSet};

use weir_protocol::Uuid;

use crate::error::ErrorCode;

/// Partitions by topic id: an assignment, a target assignment or the
/// partitions a member says it owns.
pub type Partitions = BTreeMap<Uuid, BTreeSet<i32>>;

/// One topic as the coordinator needs to know it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicInfo {
    pub id: Uuid,
    pub partitions: i32,
    /// Internal topics (`__consumer_offsets`, …) never match a regex.
    pub internal: bool,
}

/// The topics of the cluster, passed in by the broker with every request
/// that may change an assignment (the coordinator does no I/O).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicsImage {
    by_name: BTreeMap<String, TopicInfo>,
    names: BTreeMap<Uuid, String>,
}

impl TopicsImage {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a topic.
    pub fn insert(&mut self, name: &str, id: Uuid, partitions: i32, internal: bool) {
        if let Some(old) = self.by_name.insert(
            name.to_string(),
            TopicInfo {
                id,
                partitions,
                internal,
            },
        ) {
            self.names.remove(&old.id);
        }
        self.names.insert(id, name.to_string());
    }

    pub fn get(&self, name: &str) -> Option<&TopicInfo> {
        self.by_name.get(name)
    }

    /// The name of the topic with id `id`.
    pub fn name(&self, id: &Uuid) -> Option<&str> {
        self.names.get(id).map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &TopicInfo)> {
        self.by_name.iter()
    }
}

/// A consumer group's own session timeout and heartbeat interval (the
/// group configs `consumer.session.timeout.ms` and
/// `consumer.heartbeat.interval.ms`, Kafka 4); `None` takes the broker's
/// `group.consumer.*` value. The broker checks them against its bounds
/// when they are set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConsumerGroupTimeouts {
    pub session_timeout_ms: Option<i32>,
    pub heartbeat_interval_ms: Option<i32>,
}

/// A ConsumerGroupHeartbeat request (v0-1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerHeartbeatRequest {
    pub group_id: String,
    /// Empty only in v0 when joining (the coordinator then makes one up).
    pub member_id: String,
    /// 0 to join, -1 to leave, -2 for a static member leaving temporarily.
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1 when unchanged.
    pub rebalance_timeout_ms: i32,
    /// `None` when unchanged.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// `None` when unchanged (v1+).
    pub subscribed_topic_regex: Option<String>,
    /// `None` when unchanged.
    pub server_assignor: Option<String>,
    /// The partitions the member owns; `None` when unchanged.
    pub owned: Option<Partitions>,
    pub client_id: String,
    pub client_host: String,
    /// The request's version: v1+ members bring their own member id.
    pub api_version: i16,
}

/// A ConsumerGroupHeartbeat result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerHeartbeatResponse {
    pub error: ErrorCode,
    pub error_message: Option<String>,
    pub member_id: Option<String>,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The member's whole assignment, when it is new to the member or the
    /// request was a full one (joining, or after an error).
    pub assignment: Option<Partitions>,
    /// How long computing the group's new target assignment took, in
    /// nanoseconds of the coordinator's assignment clock
    /// ([`crate::GroupCoordinator::set_assignment_clock`]); None when this
    /// heartbeat computed none or no clock is set.
    pub assignment_nanos: Option<u64>,
}

impl ConsumerHeartbeatResponse {
    pub fn error(error: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            error,
            error_message: Some(message.into()),
            member_id: None,
            member_epoch: -1,
            heartbeat_interval_ms: 0,
            assignment: None,
            assignment_nanos: None,
        }
    }
}

/// Reconciliation state of a member, Kafka's `MemberState` (the values
/// are those of the CurrentMemberAssignment record).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MemberState {
    /// Owns exactly its target assignment of its epoch.
    #[default]
    Stable,
    /// Must revoke partitions before it can move to the next epoch.
    UnrevokedPartitions,
    /// In the newest epoch, waiting for partitions other members still own.
    UnreleasedPartitions,
    /// A state this version does not know (from a newer writer).
    Unknown,
}

impl MemberState {
    pub fn value(self) -> i8 {
        match self {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
            MemberState::Unknown => 127,
        }
    }

    pub fn from_value(v: i8) -> Self {
        match v {
            0 => MemberState::Stable,
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Unknown,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            MemberState::Stable => "stable",
            MemberState::UnrevokedPartitions => "unrevoked_partitions",
            MemberState::UnreleasedPartitions => "unreleased_partitions",
            MemberState::Unknown => "unknown",
        }
    }
}

/// A member of a consumer group, as ConsumerGroupDescribe reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerMemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub state: MemberState,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    /// Owned now (assigned; partitions pending revocation are not listed).
    pub assignment: Partitions,
    pub target_assignment: Partitions,
}

/// ConsumerGroupDescribe result for one group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerGroupDescription {
    pub group_id: String,
    pub error: ErrorCode,
    pub error_message: Option<String>,
    /// Kafka's names: Empty, Assigning, Reconciling, Stable, Dead.
    pub state: &'static str,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor_name: String,
    pub members: Vec<ConsumerMemberDescription>,
}
