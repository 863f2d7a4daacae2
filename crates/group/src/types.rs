//! Plain request and result types of the coordinator API.
//!
//! These are domain types, not wire types: the broker fills them from the
//! decoded request (any version) and maps the results back into the
//! response of the version the client spoke.

use bytes::Bytes;

use crate::error::ErrorCode;

/// Group states of Kafka's classic protocol, plus the two a consumer
/// group (KIP-848) adds: Assigning (the group epoch is ahead of the target
/// assignment) and Reconciling (members are moving to the target). A
/// consumer group is otherwise Empty or Stable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
    Assigning,
    Reconciling,
}

impl GroupState {
    /// The name Kafka uses in ListGroups / DescribeGroups responses.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
            GroupState::Assigning => "Assigning",
            GroupState::Reconciling => "Reconciling",
        }
    }

    /// Parses a state name as sent in ListGroups `states_filter`
    /// (case-insensitive, like Kafka).
    pub fn parse(name: &str) -> Option<Self> {
        [
            GroupState::Empty,
            GroupState::PreparingRebalance,
            GroupState::CompletingRebalance,
            GroupState::Stable,
            GroupState::Dead,
            GroupState::Assigning,
            GroupState::Reconciling,
        ]
        .into_iter()
        .find(|s| s.name().eq_ignore_ascii_case(name))
    }
}

/// One entry of a JoinGroup request's `protocols`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protocol {
    pub name: String,
    pub metadata: Bytes,
}

/// A JoinGroup request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinRequest {
    pub group_id: String,
    pub session_timeout_ms: i32,
    /// v0 requests have no rebalance timeout: pass the session timeout.
    pub rebalance_timeout_ms: i32,
    /// Empty for a member joining for the first time.
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol_type: String,
    pub protocols: Vec<Protocol>,
    pub client_id: String,
    pub client_host: String,
    /// True for JoinGroup v4+: an unknown member first gets MEMBER_ID_REQUIRED
    /// with its new id and must join again with it.
    pub require_known_member_id: bool,
    /// True for JoinGroup v9+: a static leader that rejoins without a
    /// rebalance is told to skip the assignment (`skip_assignment`) instead
    /// of being hidden as a follower.
    pub supports_skip_assignment: bool,
}

/// A member as listed to the leader in a JoinGroup response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

/// A JoinGroup result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinResponse {
    pub error: ErrorCode,
    /// -1 on error.
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    /// v9+: true when a rejoining static leader must not recompute the
    /// assignment (the group stays in its current generation).
    pub skip_assignment: bool,
    pub member_id: String,
    /// Non-empty only for the leader.
    pub members: Vec<JoinMember>,
}

impl JoinResponse {
    pub(crate) fn error(error: ErrorCode, member_id: &str) -> Self {
        Self {
            error,
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            skip_assignment: false,
            member_id: member_id.to_string(),
            members: Vec::new(),
        }
    }
}

/// One assignment in the leader's SyncGroup request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub member_id: String,
    pub assignment: Bytes,
}

/// A SyncGroup request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// v5+; `None` skips the check.
    pub protocol_type: Option<String>,
    /// v5+; `None` skips the check.
    pub protocol_name: Option<String>,
    /// Only the leader's request carries assignments.
    pub assignments: Vec<Assignment>,
}

/// A SyncGroup result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncResponse {
    pub error: ErrorCode,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncResponse {
    pub(crate) fn error(error: ErrorCode) -> Self {
        Self {
            error,
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// A Heartbeat request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

/// One member leaving (LeaveGroup v3+ batches them; v0-2 have one member id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeavingMember {
    /// May be empty when `group_instance_id` is set.
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

/// A LeaveGroup request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaveRequest {
    pub group_id: String,
    pub members: Vec<LeavingMember>,
}

/// Per-member outcome of a LeaveGroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaveMemberResult {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub error: ErrorCode,
}

/// A LeaveGroup result. For v0-2 responses use `error`, or the single
/// member's error when `error` is NONE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaveResponse {
    pub error: ErrorCode,
    pub members: Vec<LeaveMemberResult>,
}

/// One partition of an OffsetCommit request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitPartition {
    pub topic: String,
    pub partition: i32,
    /// The next offset to read (not the last one processed).
    pub offset: i64,
    /// -1 when unknown.
    pub leader_epoch: i32,
    /// `None` (null on the wire) is stored as the empty string, like Kafka.
    pub metadata: Option<String>,
}

/// An OffsetCommit request. Admin / standalone consumers commit with
/// `generation_id = -1` and an empty `member_id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetCommitRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// v2-v4 `retention_time_ms`; `None` or -1 means the broker default.
    pub retention_time_ms: Option<i64>,
    pub partitions: Vec<CommitPartition>,
    /// The OffsetCommit version: a member of a consumer-protocol group
    /// must commit with v9 or later (UNSUPPORTED_VERSION otherwise).
    pub api_version: i16,
}

/// A TxnOffsetCommit request: offsets committed as part of a producer's
/// transaction. They are written to `__consumer_offsets` as a transactional
/// batch of that producer and become the group's committed offsets only
/// when the producer's COMMIT marker lands on the same partition
/// ([`crate::GroupCoordinator::complete_txn`]); an ABORT drops them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnOffsetCommitRequest {
    pub group_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// v3+; -1 (v0-2, or a producer outside group management) skips the
    /// member checks.
    pub generation_id: i32,
    /// v3+; empty when unknown.
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub partitions: Vec<CommitPartition>,
}

/// The producer whose transaction an `Output::Append` belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// Per-partition outcome of a commit or an offset delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionResult {
    pub topic: String,
    pub partition: i32,
    pub error: ErrorCode,
}

/// A committed offset as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
    /// Only set by v2-v4 commits with an explicit retention time.
    pub expire_timestamp_ms: Option<i64>,
}

/// The offsets asked for one group in an OffsetFetch (v8+ asks for many).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetFetchGroup {
    pub group_id: String,
    /// `None`: all partitions the group has offsets for.
    pub partitions: Option<Vec<(String, i32)>>,
}

/// One partition in an OffsetFetch result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedOffset {
    pub topic: String,
    pub partition: i32,
    /// -1 when nothing is committed.
    pub offset: i64,
    pub leader_epoch: i32,
    /// Empty when nothing is committed.
    pub metadata: String,
    pub error: ErrorCode,
}

/// OffsetFetch result for one group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetFetchResult {
    pub group_id: String,
    pub error: ErrorCode,
    /// Sorted by (topic, partition).
    pub partitions: Vec<FetchedOffset>,
}

/// One group in a ListGroups result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub state: GroupState,
    /// "classic" or "consumer" (KIP-848).
    pub group_type: &'static str,
}

/// A member in a DescribeGroups result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// Metadata for the selected protocol; empty unless the group is Stable.
    pub metadata: Bytes,
    /// Empty unless the group is Stable.
    pub assignment: Bytes,
}

/// DescribeGroups result for one group. An unknown group is reported as
/// state Dead with no members and error NONE (v0-5); v6+ responses should
/// use GROUP_ID_NOT_FOUND when `found` is false.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedGroup {
    pub group_id: String,
    pub error: ErrorCode,
    pub found: bool,
    pub state: GroupState,
    pub protocol_type: String,
    /// The selected protocol when Stable, else empty.
    pub protocol: String,
    pub members: Vec<DescribedMember>,
}

/// A result of an asynchronous request, or a write the broker must perform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// The parked request with this token is answered.
    Respond { token: u64, response: Response },
    /// Append these records to `__consumer_offsets` partition `partition`.
    /// The broker performs outputs in order, so a response that follows an
    /// append in the same list is sent only after the append, and reports
    /// the outcome with `GroupCoordinator::append_completed(write, ..)`
    /// before performing the next output.
    ///
    /// With `transaction`, the records form a transactional batch of that
    /// producer (TxnOffsetCommit): the partition's last stable offset and
    /// the producer's COMMIT/ABORT marker apply to them as to any
    /// transactional write.
    Append {
        partition: i32,
        records: Vec<OffsetsRecord>,
        write: WriteId,
        transaction: Option<TxnProducer>,
    },
}

/// How an `Output::Append` ended, reported with
/// `GroupCoordinator::append_completed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendOutcome {
    /// The records are in the log, the first at `base_offset` and the
    /// others after it in order (one batch).
    Appended { base_offset: i64 },
    /// Nothing was written.
    Failed,
}

impl AppendOutcome {
    pub fn is_appended(self) -> bool {
        matches!(self, AppendOutcome::Appended { .. })
    }
}

/// Identifies one `Output::Append` until its outcome is reported with
/// `GroupCoordinator::append_completed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WriteId(pub u64);

/// The response carried by `Output::Respond`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    Join(JoinResponse),
    Sync(SyncResponse),
}

/// One record for `__consumer_offsets`: key and value (None = tombstone)
/// in Kafka's format (see `records`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetsRecord {
    pub key: Bytes,
    pub value: Option<Bytes>,
}
