//! Kafka's wire error codes (`org.apache.kafka.common.protocol.Errors`),
//! -1 and 0 ..= 133 as of Kafka 4.1.
//!
//! Names, numbers and retriability follow Kafka; messages are Kafka's default
//! messages, shortened to one sentence where Kafka's run longer. A code this
//! table does not know maps to [`ErrorCode::UnknownServerError`] as in the
//! Java client, but [`ErrorCode::from_code`] reports it as `None` so a
//! caller can tell.
//!
//! ```
//! use weir_protocol::error_code::ErrorCode;
//! assert_eq!(ErrorCode::OffsetOutOfRange.code(), 1);
//! assert_eq!(ErrorCode::OffsetOutOfRange.name(), "OFFSET_OUT_OF_RANGE");
//! assert_eq!(ErrorCode::from_code(6), Some(ErrorCode::NotLeaderOrFollower));
//! assert!(ErrorCode::NotLeaderOrFollower.is_retriable());
//! ```

/// A Kafka protocol error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i16)]
pub enum ErrorCode {
    /// The server experienced an unexpected error when processing the request.
    UnknownServerError = -1,
    None = 0,
    /// The requested offset is not within the range of offsets maintained by the server.
    OffsetOutOfRange = 1,
    /// This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt.
    CorruptMessage = 2,
    /// This server does not host this topic-partition.
    UnknownTopicOrPartition = 3,
    /// The requested fetch size is invalid.
    InvalidFetchSize = 4,
    /// There is no leader for this topic-partition as we are in the middle of a leadership election.
    LeaderNotAvailable = 5,
    /// This server is not the leader or a replica of that topic-partition.
    NotLeaderOrFollower = 6,
    /// The request timed out.
    RequestTimedOut = 7,
    /// The broker is not available.
    BrokerNotAvailable = 8,
    /// The replica is not available for the requested topic-partition.
    ReplicaNotAvailable = 9,
    /// The request included a message larger than the max message size the server will accept.
    MessageTooLarge = 10,
    /// The controller moved to another broker.
    StaleControllerEpoch = 11,
    /// The metadata field of the offset request was too large.
    OffsetMetadataTooLarge = 12,
    /// The server disconnected before a response was received.
    NetworkException = 13,
    /// The coordinator is loading and hence can't process requests.
    CoordinatorLoadInProgress = 14,
    /// The coordinator is not available.
    CoordinatorNotAvailable = 15,
    /// This is not the correct coordinator.
    NotCoordinator = 16,
    /// The request attempted to perform an operation on an invalid topic.
    InvalidTopicException = 17,
    /// The request included message batch larger than the configured segment size on the server.
    RecordListTooLarge = 18,
    /// Messages are rejected since there are fewer in-sync replicas than required.
    NotEnoughReplicas = 19,
    /// Messages are written to the log, but to fewer in-sync replicas than required.
    NotEnoughReplicasAfterAppend = 20,
    /// Produce request specified an invalid value for required acks.
    InvalidRequiredAcks = 21,
    /// Specified group generation id is not valid.
    IllegalGeneration = 22,
    /// The group member's supported protocols are incompatible with those of existing members.
    InconsistentGroupProtocol = 23,
    /// The group id is invalid.
    InvalidGroupId = 24,
    /// The coordinator is not aware of this member.
    UnknownMemberId = 25,
    /// The session timeout is not within the range allowed by the broker.
    InvalidSessionTimeout = 26,
    /// The group is rebalancing, so a rejoin is needed.
    RebalanceInProgress = 27,
    /// The committing offset data size is not valid.
    InvalidCommitOffsetSize = 28,
    /// Topic authorization failed.
    TopicAuthorizationFailed = 29,
    /// Group authorization failed.
    GroupAuthorizationFailed = 30,
    /// Cluster authorization failed.
    ClusterAuthorizationFailed = 31,
    /// The timestamp of the message is out of acceptable range.
    InvalidTimestamp = 32,
    /// The broker does not support the requested SASL mechanism.
    UnsupportedSaslMechanism = 33,
    /// Request is not valid given the current SASL state.
    IllegalSaslState = 34,
    /// The version of API is not supported.
    UnsupportedVersion = 35,
    /// Topic with this name already exists.
    TopicAlreadyExists = 36,
    /// Number of partitions is below 1.
    InvalidPartitions = 37,
    /// Replication factor is below 1 or larger than the number of available brokers.
    InvalidReplicationFactor = 38,
    /// Replica assignment is invalid.
    InvalidReplicaAssignment = 39,
    /// Configuration is invalid.
    InvalidConfig = 40,
    /// This is not the correct controller for this cluster.
    NotController = 41,
    /// The request is malformed or was sent to an incompatible broker.
    InvalidRequest = 42,
    /// The message format version on the broker does not support the request.
    UnsupportedForMessageFormat = 43,
    /// Request parameters do not satisfy the configured policy.
    PolicyViolation = 44,
    /// The broker received an out of order sequence number.
    OutOfOrderSequenceNumber = 45,
    /// The broker received a duplicate sequence number.
    DuplicateSequenceNumber = 46,
    /// Producer attempted to produce with an old epoch.
    InvalidProducerEpoch = 47,
    /// The producer attempted a transactional operation in an invalid state.
    InvalidTxnState = 48,
    /// The producer attempted to use a producer id which is not currently assigned to its transactional id.
    InvalidProducerIdMapping = 49,
    /// The transaction timeout is larger than the maximum value allowed by the broker.
    InvalidTransactionTimeout = 50,
    /// The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing.
    ConcurrentTransactions = 51,
    /// The transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for the producer.
    TransactionCoordinatorFenced = 52,
    /// Transactional Id authorization failed.
    TransactionalIdAuthorizationFailed = 53,
    /// Security features are disabled.
    SecurityDisabled = 54,
    /// The broker did not attempt to execute this operation.
    OperationNotAttempted = 55,
    /// Disk error when trying to access log file on the disk.
    KafkaStorageError = 56,
    /// The user-specified log directory is not found in the broker config.
    LogDirNotFound = 57,
    /// SASL Authentication failed.
    SaslAuthenticationFailed = 58,
    /// The broker could not locate the producer metadata associated with the producer id.
    UnknownProducerId = 59,
    /// A partition reassignment is in progress.
    ReassignmentInProgress = 60,
    /// Delegation Token feature is not enabled.
    DelegationTokenAuthDisabled = 61,
    /// Delegation Token is not found on server.
    DelegationTokenNotFound = 62,
    /// Specified Principal is not valid Owner/Renewer.
    DelegationTokenOwnerMismatch = 63,
    /// Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels.
    DelegationTokenRequestNotAllowed = 64,
    /// Delegation Token authorization failed.
    DelegationTokenAuthorizationFailed = 65,
    /// Delegation Token is expired.
    DelegationTokenExpired = 66,
    /// Supplied principalType is not supported.
    InvalidPrincipalType = 67,
    /// The group is not empty.
    NonEmptyGroup = 68,
    /// The group id does not exist.
    GroupIdNotFound = 69,
    /// The fetch session ID was not found.
    FetchSessionIdNotFound = 70,
    /// The fetch session epoch is invalid.
    InvalidFetchSessionEpoch = 71,
    /// There is no listener on the leader broker that matches the listener on which metadata request was processed.
    ListenerNotFound = 72,
    /// Topic deletion is disabled.
    TopicDeletionDisabled = 73,
    /// The leader epoch in the request is older than the epoch on the broker.
    FencedLeaderEpoch = 74,
    /// The leader epoch in the request is newer than the epoch on the broker.
    UnknownLeaderEpoch = 75,
    /// The requesting client does not support the compression type of given partition.
    UnsupportedCompressionType = 76,
    /// Broker epoch has changed.
    StaleBrokerEpoch = 77,
    /// The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing.
    OffsetNotAvailable = 78,
    /// The group member needs to have a valid member id before actually entering a consumer group.
    MemberIdRequired = 79,
    /// The preferred leader was not available.
    PreferredLeaderNotAvailable = 80,
    /// The group has reached its maximum size.
    GroupMaxSizeReached = 81,
    /// Another consumer with the same group.instance.id has registered with a different member.id.
    FencedInstanceId = 82,
    /// Eligible topic partition leaders are not available.
    EligibleLeadersNotAvailable = 83,
    /// Leader election not needed for topic partition.
    ElectionNotNeeded = 84,
    /// No partition reassignment is in progress.
    NoReassignmentInProgress = 85,
    /// Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.
    GroupSubscribedToTopic = 86,
    /// This record has failed the validation on broker and hence will be rejected.
    InvalidRecord = 87,
    /// There are unstable offsets that need to be cleared.
    UnstableOffsetCommit = 88,
    /// The throttling quota has been exceeded.
    ThrottlingQuotaExceeded = 89,
    /// There is a newer producer with the same transactionalId which fences the current one.
    ProducerFenced = 90,
    /// A request illegally referred to a resource that does not exist.
    ResourceNotFound = 91,
    /// A request illegally referred to the same resource twice.
    DuplicateResource = 92,
    /// Requested credential would not meet criteria for acceptability.
    UnacceptableCredential = 93,
    /// Either the sender or recipient of a voter-only request is not one of the expected voters.
    InconsistentVoterSet = 94,
    /// The given update version was invalid.
    InvalidUpdateVersion = 95,
    /// Unable to update finalized features due to an unexpected server error.
    FeatureUpdateFailed = 96,
    /// Request principal deserialization failed during forwarding.
    PrincipalDeserializationFailure = 97,
    /// Requested snapshot was not found.
    SnapshotNotFound = 98,
    /// Requested position is not greater than or equal to zero, and less than the size of the snapshot.
    PositionOutOfRange = 99,
    /// This server does not host this topic ID.
    UnknownTopicId = 100,
    /// This broker ID is already in use.
    DuplicateBrokerRegistration = 101,
    /// The given broker ID was not registered.
    BrokerIdNotRegistered = 102,
    /// The log's topic ID did not match the topic ID in the request.
    InconsistentTopicId = 103,
    /// The clusterId in the request does not match that found on the server.
    InconsistentClusterId = 104,
    /// The transactionalId could not be found.
    TransactionalIdNotFound = 105,
    /// The fetch session encountered inconsistent topic ID usage.
    FetchSessionTopicIdError = 106,
    /// The new ISR contains at least one ineligible replica.
    IneligibleReplica = 107,
    /// The AlterPartition request successfully updated the partition state but the leader has changed.
    NewLeaderElected = 108,
    /// The requested offset is moved to tiered storage.
    OffsetMovedToTieredStorage = 109,
    /// The member epoch is fenced by the group coordinator.
    FencedMemberEpoch = 110,
    /// The instance ID is still used by another member in the consumer group.
    UnreleasedInstanceId = 111,
    /// The assignor or its version range is not supported by the consumer group.
    UnsupportedAssignor = 112,
    /// The member epoch is stale.
    StaleMemberEpoch = 113,
    /// The request was sent to an endpoint of the wrong type.
    MismatchedEndpointType = 114,
    /// This endpoint type is not supported yet.
    UnsupportedEndpointType = 115,
    /// This controller ID is not known.
    UnknownControllerId = 116,
    /// Client sent a push telemetry request with an invalid or outdated subscription ID.
    UnknownSubscriptionId = 117,
    /// Client sent a push telemetry request larger than the maximum size the broker will accept.
    TelemetryTooLarge = 118,
    /// The controller has considered the broker registration to be invalid.
    InvalidRegistration = 119,
    /// The server encountered an error with the transaction; the client can abort the transaction to continue.
    TransactionAbortable = 120,
    /// The record state is invalid.
    InvalidRecordState = 121,
    /// The share session was not found.
    ShareSessionNotFound = 122,
    /// The share session epoch is invalid.
    InvalidShareSessionEpoch = 123,
    /// The share-group state epoch did not match.
    FencedStateEpoch = 124,
    /// The voter key doesn't match the receiving replica's key.
    InvalidVoterKey = 125,
    /// The voter is already part of the set of voters.
    DuplicateVoter = 126,
    /// The voter is not part of the set of voters.
    VoterNotFound = 127,
    /// The regular expression is not valid.
    InvalidRegularExpression = 128,
    /// Client metadata is stale; the client should rebootstrap to obtain new metadata.
    RebootstrapRequired = 129,
    /// The supplied topology is invalid.
    StreamsInvalidTopology = 130,
    /// The supplied topology epoch is invalid.
    StreamsInvalidTopologyEpoch = 131,
    /// The supplied topology epoch is outdated.
    StreamsTopologyFenced = 132,
    /// The limit of share sessions has been reached.
    ShareSessionLimitReached = 133,
}

impl ErrorCode {
    /// Every code, in numeric order.
    pub const ALL: [ErrorCode; 135] = [
        ErrorCode::UnknownServerError,
        ErrorCode::None,
        ErrorCode::OffsetOutOfRange,
        ErrorCode::CorruptMessage,
        ErrorCode::UnknownTopicOrPartition,
        ErrorCode::InvalidFetchSize,
        ErrorCode::LeaderNotAvailable,
        ErrorCode::NotLeaderOrFollower,
        ErrorCode::RequestTimedOut,
        ErrorCode::BrokerNotAvailable,
        ErrorCode::ReplicaNotAvailable,
        ErrorCode::MessageTooLarge,
        ErrorCode::StaleControllerEpoch,
        ErrorCode::OffsetMetadataTooLarge,
        ErrorCode::NetworkException,
        ErrorCode::CoordinatorLoadInProgress,
        ErrorCode::CoordinatorNotAvailable,
        ErrorCode::NotCoordinator,
        ErrorCode::InvalidTopicException,
        ErrorCode::RecordListTooLarge,
        ErrorCode::NotEnoughReplicas,
        ErrorCode::NotEnoughReplicasAfterAppend,
        ErrorCode::InvalidRequiredAcks,
        ErrorCode::IllegalGeneration,
        ErrorCode::InconsistentGroupProtocol,
        ErrorCode::InvalidGroupId,
        ErrorCode::UnknownMemberId,
        ErrorCode::InvalidSessionTimeout,
        ErrorCode::RebalanceInProgress,
        ErrorCode::InvalidCommitOffsetSize,
        ErrorCode::TopicAuthorizationFailed,
        ErrorCode::GroupAuthorizationFailed,
        ErrorCode::ClusterAuthorizationFailed,
        ErrorCode::InvalidTimestamp,
        ErrorCode::UnsupportedSaslMechanism,
        ErrorCode::IllegalSaslState,
        ErrorCode::UnsupportedVersion,
        ErrorCode::TopicAlreadyExists,
        ErrorCode::InvalidPartitions,
        ErrorCode::InvalidReplicationFactor,
        ErrorCode::InvalidReplicaAssignment,
        ErrorCode::InvalidConfig,
        ErrorCode::NotController,
        ErrorCode::InvalidRequest,
        ErrorCode::UnsupportedForMessageFormat,
        ErrorCode::PolicyViolation,
        ErrorCode::OutOfOrderSequenceNumber,
        ErrorCode::DuplicateSequenceNumber,
        ErrorCode::InvalidProducerEpoch,
        ErrorCode::InvalidTxnState,
        ErrorCode::InvalidProducerIdMapping,
        ErrorCode::InvalidTransactionTimeout,
        ErrorCode::ConcurrentTransactions,
        ErrorCode::TransactionCoordinatorFenced,
        ErrorCode::TransactionalIdAuthorizationFailed,
        ErrorCode::SecurityDisabled,
        ErrorCode::OperationNotAttempted,
        ErrorCode::KafkaStorageError,
        ErrorCode::LogDirNotFound,
        ErrorCode::SaslAuthenticationFailed,
        ErrorCode::UnknownProducerId,
        ErrorCode::ReassignmentInProgress,
        ErrorCode::DelegationTokenAuthDisabled,
        ErrorCode::DelegationTokenNotFound,
        ErrorCode::DelegationTokenOwnerMismatch,
        ErrorCode::DelegationTokenRequestNotAllowed,
        ErrorCode::DelegationTokenAuthorizationFailed,
        ErrorCode::DelegationTokenExpired,
        ErrorCode::InvalidPrincipalType,
        ErrorCode::NonEmptyGroup,
        ErrorCode::GroupIdNotFound,
        ErrorCode::FetchSessionIdNotFound,
        ErrorCode::InvalidFetchSessionEpoch,
        ErrorCode::ListenerNotFound,
        ErrorCode::TopicDeletionDisabled,
        ErrorCode::FencedLeaderEpoch,
        ErrorCode::UnknownLeaderEpoch,
        ErrorCode::UnsupportedCompressionType,
        ErrorCode::StaleBrokerEpoch,
        ErrorCode::OffsetNotAvailable,
        ErrorCode::MemberIdRequired,
        ErrorCode::PreferredLeaderNotAvailable,
        ErrorCode::GroupMaxSizeReached,
        ErrorCode::FencedInstanceId,
        ErrorCode::EligibleLeadersNotAvailable,
        ErrorCode::ElectionNotNeeded,
        ErrorCode::NoReassignmentInProgress,
        ErrorCode::GroupSubscribedToTopic,
        ErrorCode::InvalidRecord,
        ErrorCode::UnstableOffsetCommit,
        ErrorCode::ThrottlingQuotaExceeded,
        ErrorCode::ProducerFenced,
        ErrorCode::ResourceNotFound,
        ErrorCode::DuplicateResource,
        ErrorCode::UnacceptableCredential,
        ErrorCode::InconsistentVoterSet,
        ErrorCode::InvalidUpdateVersion,
        ErrorCode::FeatureUpdateFailed,
        ErrorCode::PrincipalDeserializationFailure,
        ErrorCode::SnapshotNotFound,
        ErrorCode::PositionOutOfRange,
        ErrorCode::UnknownTopicId,
        ErrorCode::DuplicateBrokerRegistration,
        ErrorCode::BrokerIdNotRegistered,
        ErrorCode::InconsistentTopicId,
        ErrorCode::InconsistentClusterId,
        ErrorCode::TransactionalIdNotFound,
        ErrorCode::FetchSessionTopicIdError,
        ErrorCode::IneligibleReplica,
        ErrorCode::NewLeaderElected,
        ErrorCode::OffsetMovedToTieredStorage,
        ErrorCode::FencedMemberEpoch,
        ErrorCode::UnreleasedInstanceId,
        ErrorCode::UnsupportedAssignor,
        ErrorCode::StaleMemberEpoch,
        ErrorCode::MismatchedEndpointType,
        ErrorCode::UnsupportedEndpointType,
        ErrorCode::UnknownControllerId,
        ErrorCode::UnknownSubscriptionId,
        ErrorCode::TelemetryTooLarge,
        ErrorCode::InvalidRegistration,
        ErrorCode::TransactionAbortable,
        ErrorCode::InvalidRecordState,
        ErrorCode::ShareSessionNotFound,
        ErrorCode::InvalidShareSessionEpoch,
        ErrorCode::FencedStateEpoch,
        ErrorCode::InvalidVoterKey,
        ErrorCode::DuplicateVoter,
        ErrorCode::VoterNotFound,
        ErrorCode::InvalidRegularExpression,
        ErrorCode::RebootstrapRequired,
        ErrorCode::StreamsInvalidTopology,
        ErrorCode::StreamsInvalidTopologyEpoch,
        ErrorCode::StreamsTopologyFenced,
        ErrorCode::ShareSessionLimitReached,
    ];

    /// The numeric wire value.
    pub fn code(self) -> i16 {
        self as i16
    }

    /// The code with wire value `code`, if Kafka defines it.
    pub fn from_code(code: i16) -> Option<Self> {
        // ALL is dense from -1: index = code + 1.
        let index = usize::try_from(i32::from(code) + 1).ok()?;
        Self::ALL.get(index).copied()
    }

    /// Like the Java client's `Errors.forCode`: unknown codes become
    /// [`ErrorCode::UnknownServerError`].
    pub fn from_code_lossy(code: i16) -> Self {
        Self::from_code(code).unwrap_or(ErrorCode::UnknownServerError)
    }

    /// True for [`ErrorCode::None`].
    pub fn is_ok(self) -> bool {
        self == ErrorCode::None
    }

    /// Kafka's name, e.g. `"OFFSET_OUT_OF_RANGE"`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::UnknownServerError => "UNKNOWN_SERVER_ERROR",
            ErrorCode::None => "NONE",
            ErrorCode::OffsetOutOfRange => "OFFSET_OUT_OF_RANGE",
            ErrorCode::CorruptMessage => "CORRUPT_MESSAGE",
            ErrorCode::UnknownTopicOrPartition => "UNKNOWN_TOPIC_OR_PARTITION",
            ErrorCode::InvalidFetchSize => "INVALID_FETCH_SIZE",
            ErrorCode::LeaderNotAvailable => "LEADER_NOT_AVAILABLE",
            ErrorCode::NotLeaderOrFollower => "NOT_LEADER_OR_FOLLOWER",
            ErrorCode::RequestTimedOut => "REQUEST_TIMED_OUT",
            ErrorCode::BrokerNotAvailable => "BROKER_NOT_AVAILABLE",
            ErrorCode::ReplicaNotAvailable => "REPLICA_NOT_AVAILABLE",
            ErrorCode::MessageTooLarge => "MESSAGE_TOO_LARGE",
            ErrorCode::StaleControllerEpoch => "STALE_CONTROLLER_EPOCH",
            ErrorCode::OffsetMetadataTooLarge => "OFFSET_METADATA_TOO_LARGE",
            ErrorCode::NetworkException => "NETWORK_EXCEPTION",
            ErrorCode::CoordinatorLoadInProgress => "COORDINATOR_LOAD_IN_PROGRESS",
            ErrorCode::CoordinatorNotAvailable => "COORDINATOR_NOT_AVAILABLE",
            ErrorCode::NotCoordinator => "NOT_COORDINATOR",
            ErrorCode::InvalidTopicException => "INVALID_TOPIC_EXCEPTION",
            ErrorCode::RecordListTooLarge => "RECORD_LIST_TOO_LARGE",
            ErrorCode::NotEnoughReplicas => "NOT_ENOUGH_REPLICAS",
            ErrorCode::NotEnoughReplicasAfterAppend => "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
            ErrorCode::InvalidRequiredAcks => "INVALID_REQUIRED_ACKS",
            ErrorCode::IllegalGeneration => "ILLEGAL_GENERATION",
            ErrorCode::InconsistentGroupProtocol => "INCONSISTENT_GROUP_PROTOCOL",
            ErrorCode::InvalidGroupId => "INVALID_GROUP_ID",
            ErrorCode::UnknownMemberId => "UNKNOWN_MEMBER_ID",
            ErrorCode::InvalidSessionTimeout => "INVALID_SESSION_TIMEOUT",
            ErrorCode::RebalanceInProgress => "REBALANCE_IN_PROGRESS",
            ErrorCode::InvalidCommitOffsetSize => "INVALID_COMMIT_OFFSET_SIZE",
            ErrorCode::TopicAuthorizationFailed => "TOPIC_AUTHORIZATION_FAILED",
            ErrorCode::GroupAuthorizationFailed => "GROUP_AUTHORIZATION_FAILED",
            ErrorCode::ClusterAuthorizationFailed => "CLUSTER_AUTHORIZATION_FAILED",
            ErrorCode::InvalidTimestamp => "INVALID_TIMESTAMP",
            ErrorCode::UnsupportedSaslMechanism => "UNSUPPORTED_SASL_MECHANISM",
            ErrorCode::IllegalSaslState => "ILLEGAL_SASL_STATE",
            ErrorCode::UnsupportedVersion => "UNSUPPORTED_VERSION",
            ErrorCode::TopicAlreadyExists => "TOPIC_ALREADY_EXISTS",
            ErrorCode::InvalidPartitions => "INVALID_PARTITIONS",
            ErrorCode::InvalidReplicationFactor => "INVALID_REPLICATION_FACTOR",
            ErrorCode::InvalidReplicaAssignment => "INVALID_REPLICA_ASSIGNMENT",
            ErrorCode::InvalidConfig => "INVALID_CONFIG",
            ErrorCode::NotController => "NOT_CONTROLLER",
            ErrorCode::InvalidRequest => "INVALID_REQUEST",
            ErrorCode::UnsupportedForMessageFormat => "UNSUPPORTED_FOR_MESSAGE_FORMAT",
            ErrorCode::PolicyViolation => "POLICY_VIOLATION",
            ErrorCode::OutOfOrderSequenceNumber => "OUT_OF_ORDER_SEQUENCE_NUMBER",
            ErrorCode::DuplicateSequenceNumber => "DUPLICATE_SEQUENCE_NUMBER",
            ErrorCode::InvalidProducerEpoch => "INVALID_PRODUCER_EPOCH",
            ErrorCode::InvalidTxnState => "INVALID_TXN_STATE",
            ErrorCode::InvalidProducerIdMapping => "INVALID_PRODUCER_ID_MAPPING",
            ErrorCode::InvalidTransactionTimeout => "INVALID_TRANSACTION_TIMEOUT",
            ErrorCode::ConcurrentTransactions => "CONCURRENT_TRANSACTIONS",
            ErrorCode::TransactionCoordinatorFenced => "TRANSACTION_COORDINATOR_FENCED",
            ErrorCode::TransactionalIdAuthorizationFailed => {
                "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
            }
            ErrorCode::SecurityDisabled => "SECURITY_DISABLED",
            ErrorCode::OperationNotAttempted => "OPERATION_NOT_ATTEMPTED",
            ErrorCode::KafkaStorageError => "KAFKA_STORAGE_ERROR",
            ErrorCode::LogDirNotFound => "LOG_DIR_NOT_FOUND",
            ErrorCode::SaslAuthenticationFailed => "SASL_AUTHENTICATION_FAILED",
            ErrorCode::UnknownProducerId => "UNKNOWN_PRODUCER_ID",
            ErrorCode::ReassignmentInProgress => "REASSIGNMENT_IN_PROGRESS",
            ErrorCode::DelegationTokenAuthDisabled => "DELEGATION_TOKEN_AUTH_DISABLED",
            ErrorCode::DelegationTokenNotFound => "DELEGATION_TOKEN_NOT_FOUND",
            ErrorCode::DelegationTokenOwnerMismatch => "DELEGATION_TOKEN_OWNER_MISMATCH",
            ErrorCode::DelegationTokenRequestNotAllowed => "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED",
            ErrorCode::DelegationTokenAuthorizationFailed => {
                "DELEGATION_TOKEN_AUTHORIZATION_FAILED"
            }
            ErrorCode::DelegationTokenExpired => "DELEGATION_TOKEN_EXPIRED",
            ErrorCode::InvalidPrincipalType => "INVALID_PRINCIPAL_TYPE",
            ErrorCode::NonEmptyGroup => "NON_EMPTY_GROUP",
            ErrorCode::GroupIdNotFound => "GROUP_ID_NOT_FOUND",
            ErrorCode::FetchSessionIdNotFound => "FETCH_SESSION_ID_NOT_FOUND",
            ErrorCode::InvalidFetchSessionEpoch => "INVALID_FETCH_SESSION_EPOCH",
            ErrorCode::ListenerNotFound => "LISTENER_NOT_FOUND",
            ErrorCode::TopicDeletionDisabled => "TOPIC_DELETION_DISABLED",
            ErrorCode::FencedLeaderEpoch => "FENCED_LEADER_EPOCH",
            ErrorCode::UnknownLeaderEpoch => "UNKNOWN_LEADER_EPOCH",
            ErrorCode::UnsupportedCompressionType => "UNSUPPORTED_COMPRESSION_TYPE",
            ErrorCode::StaleBrokerEpoch => "STALE_BROKER_EPOCH",
            ErrorCode::OffsetNotAvailable => "OFFSET_NOT_AVAILABLE",
            ErrorCode::MemberIdRequired => "MEMBER_ID_REQUIRED",
            ErrorCode::PreferredLeaderNotAvailable => "PREFERRED_LEADER_NOT_AVAILABLE",
            ErrorCode::GroupMaxSizeReached => "GROUP_MAX_SIZE_REACHED",
            ErrorCode::FencedInstanceId => "FENCED_INSTANCE_ID",
            ErrorCode::EligibleLeadersNotAvailable => "ELIGIBLE_LEADERS_NOT_AVAILABLE",
            ErrorCode::ElectionNotNeeded => "ELECTION_NOT_NEEDED",
            ErrorCode::NoReassignmentInProgress => "NO_REASSIGNMENT_IN_PROGRESS",
            ErrorCode::GroupSubscribedToTopic => "GROUP_SUBSCRIBED_TO_TOPIC",
            ErrorCode::InvalidRecord => "INVALID_RECORD",
            ErrorCode::UnstableOffsetCommit => "UNSTABLE_OFFSET_COMMIT",
            ErrorCode::ThrottlingQuotaExceeded => "THROTTLING_QUOTA_EXCEEDED",
            ErrorCode::ProducerFenced => "PRODUCER_FENCED",
            ErrorCode::ResourceNotFound => "RESOURCE_NOT_FOUND",
            ErrorCode::DuplicateResource => "DUPLICATE_RESOURCE",
            ErrorCode::UnacceptableCredential => "UNACCEPTABLE_CREDENTIAL",
            ErrorCode::InconsistentVoterSet => "INCONSISTENT_VOTER_SET",
            ErrorCode::InvalidUpdateVersion => "INVALID_UPDATE_VERSION",
            ErrorCode::FeatureUpdateFailed => "FEATURE_UPDATE_FAILED",
            ErrorCode::PrincipalDeserializationFailure => "PRINCIPAL_DESERIALIZATION_FAILURE",
            ErrorCode::SnapshotNotFound => "SNAPSHOT_NOT_FOUND",
            ErrorCode::PositionOutOfRange => "POSITION_OUT_OF_RANGE",
            ErrorCode::UnknownTopicId => "UNKNOWN_TOPIC_ID",
            ErrorCode::DuplicateBrokerRegistration => "DUPLICATE_BROKER_REGISTRATION",
            ErrorCode::BrokerIdNotRegistered => "BROKER_ID_NOT_REGISTERED",
            ErrorCode::InconsistentTopicId => "INCONSISTENT_TOPIC_ID",
            ErrorCode::InconsistentClusterId => "INCONSISTENT_CLUSTER_ID",
            ErrorCode::TransactionalIdNotFound => "TRANSACTIONAL_ID_NOT_FOUND",
            ErrorCode::FetchSessionTopicIdError => "FETCH_SESSION_TOPIC_ID_ERROR",
            ErrorCode::IneligibleReplica => "INELIGIBLE_REPLICA",
            ErrorCode::NewLeaderElected => "NEW_LEADER_ELECTED",
            ErrorCode::OffsetMovedToTieredStorage => "OFFSET_MOVED_TO_TIERED_STORAGE",
            ErrorCode::FencedMemberEpoch => "FENCED_MEMBER_EPOCH",
            ErrorCode::UnreleasedInstanceId => "UNRELEASED_INSTANCE_ID",
            ErrorCode::UnsupportedAssignor => "UNSUPPORTED_ASSIGNOR",
            ErrorCode::StaleMemberEpoch => "STALE_MEMBER_EPOCH",
            ErrorCode::MismatchedEndpointType => "MISMATCHED_ENDPOINT_TYPE",
            ErrorCode::UnsupportedEndpointType => "UNSUPPORTED_ENDPOINT_TYPE",
            ErrorCode::UnknownControllerId => "UNKNOWN_CONTROLLER_ID",
            ErrorCode::UnknownSubscriptionId => "UNKNOWN_SUBSCRIPTION_ID",
            ErrorCode::TelemetryTooLarge => "TELEMETRY_TOO_LARGE",
            ErrorCode::InvalidRegistration => "INVALID_REGISTRATION",
            ErrorCode::TransactionAbortable => "TRANSACTION_ABORTABLE",
            ErrorCode::InvalidRecordState => "INVALID_RECORD_STATE",
            ErrorCode::ShareSessionNotFound => "SHARE_SESSION_NOT_FOUND",
            ErrorCode::InvalidShareSessionEpoch => "INVALID_SHARE_SESSION_EPOCH",
            ErrorCode::FencedStateEpoch => "FENCED_STATE_EPOCH",
            ErrorCode::InvalidVoterKey => "INVALID_VOTER_KEY",
            ErrorCode::DuplicateVoter => "DUPLICATE_VOTER",
            ErrorCode::VoterNotFound => "VOTER_NOT_FOUND",
            ErrorCode::InvalidRegularExpression => "INVALID_REGULAR_EXPRESSION",
            ErrorCode::RebootstrapRequired => "REBOOTSTRAP_REQUIRED",
            ErrorCode::StreamsInvalidTopology => "STREAMS_INVALID_TOPOLOGY",
            ErrorCode::StreamsInvalidTopologyEpoch => "STREAMS_INVALID_TOPOLOGY_EPOCH",
            ErrorCode::StreamsTopologyFenced => "STREAMS_TOPOLOGY_FENCED",
            ErrorCode::ShareSessionLimitReached => "SHARE_SESSION_LIMIT_REACHED",
        }
    }

    /// Kafka's default message (empty for [`ErrorCode::None`]).
    pub fn message(self) -> &'static str {
        match self {
            ErrorCode::UnknownServerError => {
                "The server experienced an unexpected error when processing the request."
            }
            ErrorCode::None => "",
            ErrorCode::OffsetOutOfRange => {
                "The requested offset is not within the range of offsets maintained by the server."
            }
            ErrorCode::CorruptMessage => {
                "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt."
            }
            ErrorCode::UnknownTopicOrPartition => "This server does not host this topic-partition.",
            ErrorCode::InvalidFetchSize => "The requested fetch size is invalid.",
            ErrorCode::LeaderNotAvailable => {
                "There is no leader for this topic-partition as we are in the middle of a leadership election."
            }
            ErrorCode::NotLeaderOrFollower => {
                "This server is not the leader or a replica of that topic-partition."
            }
            ErrorCode::RequestTimedOut => "The request timed out.",
            ErrorCode::BrokerNotAvailable => "The broker is not available.",
            ErrorCode::ReplicaNotAvailable => {
                "The replica is not available for the requested topic-partition."
            }
            ErrorCode::MessageTooLarge => {
                "The request included a message larger than the max message size the server will accept."
            }
            ErrorCode::StaleControllerEpoch => "The controller moved to another broker.",
            ErrorCode::OffsetMetadataTooLarge => {
                "The metadata field of the offset request was too large."
            }
            ErrorCode::NetworkException => {
                "The server disconnected before a response was received."
            }
            ErrorCode::CoordinatorLoadInProgress => {
                "The coordinator is loading and hence can't process requests."
            }
            ErrorCode::CoordinatorNotAvailable => "The coordinator is not available.",
            ErrorCode::NotCoordinator => "This is not the correct coordinator.",
            ErrorCode::InvalidTopicException => {
                "The request attempted to perform an operation on an invalid topic."
            }
            ErrorCode::RecordListTooLarge => {
                "The request included message batch larger than the configured segment size on the server."
            }
            ErrorCode::NotEnoughReplicas => {
                "Messages are rejected since there are fewer in-sync replicas than required."
            }
            ErrorCode::NotEnoughReplicasAfterAppend => {
                "Messages are written to the log, but to fewer in-sync replicas than required."
            }
            ErrorCode::InvalidRequiredAcks => {
                "Produce request specified an invalid value for required acks."
            }
            ErrorCode::IllegalGeneration => "Specified group generation id is not valid.",
            ErrorCode::InconsistentGroupProtocol => {
                "The group member's supported protocols are incompatible with those of existing members."
            }
            ErrorCode::InvalidGroupId => "The group id is invalid.",
            ErrorCode::UnknownMemberId => "The coordinator is not aware of this member.",
            ErrorCode::InvalidSessionTimeout => {
                "The session timeout is not within the range allowed by the broker."
            }
            ErrorCode::RebalanceInProgress => "The group is rebalancing, so a rejoin is needed.",
            ErrorCode::InvalidCommitOffsetSize => "The committing offset data size is not valid.",
            ErrorCode::TopicAuthorizationFailed => "Topic authorization failed.",
            ErrorCode::GroupAuthorizationFailed => "Group authorization failed.",
            ErrorCode::ClusterAuthorizationFailed => "Cluster authorization failed.",
            ErrorCode::InvalidTimestamp => {
                "The timestamp of the message is out of acceptable range."
            }
            ErrorCode::UnsupportedSaslMechanism => {
                "The broker does not support the requested SASL mechanism."
            }
            ErrorCode::IllegalSaslState => "Request is not valid given the current SASL state.",
            ErrorCode::UnsupportedVersion => "The version of API is not supported.",
            ErrorCode::TopicAlreadyExists => "Topic with this name already exists.",
            ErrorCode::InvalidPartitions => "Number of partitions is below 1.",
            ErrorCode::InvalidReplicationFactor => {
                "Replication factor is below 1 or larger than the number of available brokers."
            }
            ErrorCode::InvalidReplicaAssignment => "Replica assignment is invalid.",
            ErrorCode::InvalidConfig => "Configuration is invalid.",
            ErrorCode::NotController => "This is not the correct controller for this cluster.",
            ErrorCode::InvalidRequest => {
                "The request is malformed or was sent to an incompatible broker."
            }
            ErrorCode::UnsupportedForMessageFormat => {
                "The message format version on the broker does not support the request."
            }
            ErrorCode::PolicyViolation => {
                "Request parameters do not satisfy the configured policy."
            }
            ErrorCode::OutOfOrderSequenceNumber => {
                "The broker received an out of order sequence number."
            }
            ErrorCode::DuplicateSequenceNumber => {
                "The broker received a duplicate sequence number."
            }
            ErrorCode::InvalidProducerEpoch => "Producer attempted to produce with an old epoch.",
            ErrorCode::InvalidTxnState => {
                "The producer attempted a transactional operation in an invalid state."
            }
            ErrorCode::InvalidProducerIdMapping => {
                "The producer attempted to use a producer id which is not currently assigned to its transactional id."
            }
            ErrorCode::InvalidTransactionTimeout => {
                "The transaction timeout is larger than the maximum value allowed by the broker."
            }
            ErrorCode::ConcurrentTransactions => {
                "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing."
            }
            ErrorCode::TransactionCoordinatorFenced => {
                "The transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for the producer."
            }
            ErrorCode::TransactionalIdAuthorizationFailed => {
                "Transactional Id authorization failed."
            }
            ErrorCode::SecurityDisabled => "Security features are disabled.",
            ErrorCode::OperationNotAttempted => {
                "The broker did not attempt to execute this operation."
            }
            ErrorCode::KafkaStorageError => {
                "Disk error when trying to access log file on the disk."
            }
            ErrorCode::LogDirNotFound => {
                "The user-specified log directory is not found in the broker config."
            }
            ErrorCode::SaslAuthenticationFailed => "SASL Authentication failed.",
            ErrorCode::UnknownProducerId => {
                "The broker could not locate the producer metadata associated with the producer id."
            }
            ErrorCode::ReassignmentInProgress => "A partition reassignment is in progress.",
            ErrorCode::DelegationTokenAuthDisabled => "Delegation Token feature is not enabled.",
            ErrorCode::DelegationTokenNotFound => "Delegation Token is not found on server.",
            ErrorCode::DelegationTokenOwnerMismatch => {
                "Specified Principal is not valid Owner/Renewer."
            }
            ErrorCode::DelegationTokenRequestNotAllowed => {
                "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels."
            }
            ErrorCode::DelegationTokenAuthorizationFailed => {
                "Delegation Token authorization failed."
            }
            ErrorCode::DelegationTokenExpired => "Delegation Token is expired.",
            ErrorCode::InvalidPrincipalType => "Supplied principalType is not supported.",
            ErrorCode::NonEmptyGroup => "The group is not empty.",
            ErrorCode::GroupIdNotFound => "The group id does not exist.",
            ErrorCode::FetchSessionIdNotFound => "The fetch session ID was not found.",
            ErrorCode::InvalidFetchSessionEpoch => "The fetch session epoch is invalid.",
            ErrorCode::ListenerNotFound => {
                "There is no listener on the leader broker that matches the listener on which metadata request was processed."
            }
            ErrorCode::TopicDeletionDisabled => "Topic deletion is disabled.",
            ErrorCode::FencedLeaderEpoch => {
                "The leader epoch in the request is older than the epoch on the broker."
            }
            ErrorCode::UnknownLeaderEpoch => {
                "The leader epoch in the request is newer than the epoch on the broker."
            }
            ErrorCode::UnsupportedCompressionType => {
                "The requesting client does not support the compression type of given partition."
            }
            ErrorCode::StaleBrokerEpoch => "Broker epoch has changed.",
            ErrorCode::OffsetNotAvailable => {
                "The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing."
            }
            ErrorCode::MemberIdRequired => {
                "The group member needs to have a valid member id before actually entering a consumer group."
            }
            ErrorCode::PreferredLeaderNotAvailable => "The preferred leader was not available.",
            ErrorCode::GroupMaxSizeReached => "The group has reached its maximum size.",
            ErrorCode::FencedInstanceId => {
                "Another consumer with the same group.instance.id has registered with a different member.id."
            }
            ErrorCode::EligibleLeadersNotAvailable => {
                "Eligible topic partition leaders are not available."
            }
            ErrorCode::ElectionNotNeeded => "Leader election not needed for topic partition.",
            ErrorCode::NoReassignmentInProgress => "No partition reassignment is in progress.",
            ErrorCode::GroupSubscribedToTopic => {
                "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it."
            }
            ErrorCode::InvalidRecord => {
                "This record has failed the validation on broker and hence will be rejected."
            }
            ErrorCode::UnstableOffsetCommit => {
                "There are unstable offsets that need to be cleared."
            }
            ErrorCode::ThrottlingQuotaExceeded => "The throttling quota has been exceeded.",
            ErrorCode::ProducerFenced => {
                "There is a newer producer with the same transactionalId which fences the current one."
            }
            ErrorCode::ResourceNotFound => {
                "A request illegally referred to a resource that does not exist."
            }
            ErrorCode::DuplicateResource => {
                "A request illegally referred to the same resource twice."
            }
            ErrorCode::UnacceptableCredential => {
                "Requested credential would not meet criteria for acceptability."
            }
            ErrorCode::InconsistentVoterSet => {
                "Either the sender or recipient of a voter-only request is not one of the expected voters."
            }
            ErrorCode::InvalidUpdateVersion => "The given update version was invalid.",
            ErrorCode::FeatureUpdateFailed => {
                "Unable to update finalized features due to an unexpected server error."
            }
            ErrorCode::PrincipalDeserializationFailure => {
                "Request principal deserialization failed during forwarding."
            }
            ErrorCode::SnapshotNotFound => "Requested snapshot was not found.",
            ErrorCode::PositionOutOfRange => {
                "Requested position is not greater than or equal to zero, and less than the size of the snapshot."
            }
            ErrorCode::UnknownTopicId => "This server does not host this topic ID.",
            ErrorCode::DuplicateBrokerRegistration => "This broker ID is already in use.",
            ErrorCode::BrokerIdNotRegistered => "The given broker ID was not registered.",
            ErrorCode::InconsistentTopicId => {
                "The log's topic ID did not match the topic ID in the request."
            }
            ErrorCode::InconsistentClusterId => {
                "The clusterId in the request does not match that found on the server."
            }
            ErrorCode::TransactionalIdNotFound => "The transactionalId could not be found.",
            ErrorCode::FetchSessionTopicIdError => {
                "The fetch session encountered inconsistent topic ID usage."
            }
            ErrorCode::IneligibleReplica => "The new ISR contains at least one ineligible replica.",
            ErrorCode::NewLeaderElected => {
                "The AlterPartition request successfully updated the partition state but the leader has changed."
            }
            ErrorCode::OffsetMovedToTieredStorage => {
                "The requested offset is moved to tiered storage."
            }
            ErrorCode::FencedMemberEpoch => "The member epoch is fenced by the group coordinator.",
            ErrorCode::UnreleasedInstanceId => {
                "The instance ID is still used by another member in the consumer group."
            }
            ErrorCode::UnsupportedAssignor => {
                "The assignor or its version range is not supported by the consumer group."
            }
            ErrorCode::StaleMemberEpoch => "The member epoch is stale.",
            ErrorCode::MismatchedEndpointType => {
                "The request was sent to an endpoint of the wrong type."
            }
            ErrorCode::UnsupportedEndpointType => "This endpoint type is not supported yet.",
            ErrorCode::UnknownControllerId => "This controller ID is not known.",
            ErrorCode::UnknownSubscriptionId => {
                "Client sent a push telemetry request with an invalid or outdated subscription ID."
            }
            ErrorCode::TelemetryTooLarge => {
                "Client sent a push telemetry request larger than the maximum size the broker will accept."
            }
            ErrorCode::InvalidRegistration => {
                "The controller has considered the broker registration to be invalid."
            }
            ErrorCode::TransactionAbortable => {
                "The server encountered an error with the transaction; the client can abort the transaction to continue."
            }
            ErrorCode::InvalidRecordState => "The record state is invalid.",
            ErrorCode::ShareSessionNotFound => "The share session was not found.",
            ErrorCode::InvalidShareSessionEpoch => "The share session epoch is invalid.",
            ErrorCode::FencedStateEpoch => "The share-group state epoch did not match.",
            ErrorCode::InvalidVoterKey => {
                "The voter key doesn't match the receiving replica's key."
            }
            ErrorCode::DuplicateVoter => "The voter is already part of the set of voters.",
            ErrorCode::VoterNotFound => "The voter is not part of the set of voters.",
            ErrorCode::InvalidRegularExpression => "The regular expression is not valid.",
            ErrorCode::RebootstrapRequired => {
                "Client metadata is stale; the client should rebootstrap to obtain new metadata."
            }
            ErrorCode::StreamsInvalidTopology => "The supplied topology is invalid.",
            ErrorCode::StreamsInvalidTopologyEpoch => "The supplied topology epoch is invalid.",
            ErrorCode::StreamsTopologyFenced => "The supplied topology epoch is outdated.",
            ErrorCode::ShareSessionLimitReached => "The limit of share sessions has been reached.",
        }
    }

    /// Whether a client may retry the request unchanged (Kafka's
    /// `RetriableException` subclasses).
    pub fn is_retriable(self) -> bool {
        matches!(
            self,
            ErrorCode::CorruptMessage
                | ErrorCode::UnknownTopicOrPartition
                | ErrorCode::LeaderNotAvailable
                | ErrorCode::NotLeaderOrFollower
                | ErrorCode::RequestTimedOut
                | ErrorCode::ReplicaNotAvailable
                | ErrorCode::NetworkException
                | ErrorCode::CoordinatorLoadInProgress
                | ErrorCode::CoordinatorNotAvailable
                | ErrorCode::NotCoordinator
                | ErrorCode::NotEnoughReplicas
                | ErrorCode::NotEnoughReplicasAfterAppend
                | ErrorCode::NotController
                | ErrorCode::ConcurrentTransactions
                | ErrorCode::KafkaStorageError
                | ErrorCode::FetchSessionIdNotFound
                | ErrorCode::InvalidFetchSessionEpoch
                | ErrorCode::ListenerNotFound
                | ErrorCode::FencedLeaderEpoch
                | ErrorCode::UnknownLeaderEpoch
                | ErrorCode::OffsetNotAvailable
                | ErrorCode::PreferredLeaderNotAvailable
                | ErrorCode::EligibleLeadersNotAvailable
                | ErrorCode::ElectionNotNeeded
                | ErrorCode::UnstableOffsetCommit
                | ErrorCode::ThrottlingQuotaExceeded
                | ErrorCode::UnknownTopicId
                | ErrorCode::InconsistentTopicId
                | ErrorCode::FetchSessionTopicIdError
                | ErrorCode::ShareSessionNotFound
                | ErrorCode::InvalidShareSessionEpoch
                | ErrorCode::ShareSessionLimitReached
        )
    }
}

impl From<ErrorCode> for i16 {
    fn from(e: ErrorCode) -> i16 {
        e.code()
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_dense_and_consistent() {
        for (i, e) in ErrorCode::ALL.iter().enumerate() {
            assert_eq!(e.code() as i32, i as i32 - 1);
            assert_eq!(ErrorCode::from_code(e.code()), Some(*e));
            assert!(e.name().chars().all(|c| c.is_ascii_uppercase() || c == '_'));
            assert_eq!(e.message().is_empty(), *e == ErrorCode::None);
        }
        assert_eq!(ErrorCode::from_code(-2), None);
        assert_eq!(ErrorCode::from_code(134), None);
        assert_eq!(ErrorCode::from_code(i16::MIN), None);
        assert_eq!(
            ErrorCode::from_code_lossy(999),
            ErrorCode::UnknownServerError
        );
    }

    #[test]
    fn known_values() {
        // Spot checks against Kafka's Errors.java.
        let cases = [
            (
                ErrorCode::UnknownServerError,
                -1,
                "UNKNOWN_SERVER_ERROR",
                false,
            ),
            (ErrorCode::None, 0, "NONE", false),
            (ErrorCode::OffsetOutOfRange, 1, "OFFSET_OUT_OF_RANGE", false),
            (ErrorCode::CorruptMessage, 2, "CORRUPT_MESSAGE", true),
            (
                ErrorCode::NotLeaderOrFollower,
                6,
                "NOT_LEADER_OR_FOLLOWER",
                true,
            ),
            (ErrorCode::MessageTooLarge, 10, "MESSAGE_TOO_LARGE", false),
            (ErrorCode::NotCoordinator, 16, "NOT_COORDINATOR", true),
            (
                ErrorCode::RebalanceInProgress,
                27,
                "REBALANCE_IN_PROGRESS",
                false,
            ),
            (
                ErrorCode::OutOfOrderSequenceNumber,
                45,
                "OUT_OF_ORDER_SEQUENCE_NUMBER",
                false,
            ),
            (
                ErrorCode::ConcurrentTransactions,
                51,
                "CONCURRENT_TRANSACTIONS",
                true,
            ),
            (
                ErrorCode::KafkaStorageError,
                56,
                "KAFKA_STORAGE_ERROR",
                true,
            ),
            (ErrorCode::FencedInstanceId, 82, "FENCED_INSTANCE_ID", false),
            (
                ErrorCode::UnstableOffsetCommit,
                88,
                "UNSTABLE_OFFSET_COMMIT",
                true,
            ),
            (ErrorCode::ProducerFenced, 90, "PRODUCER_FENCED", false),
            (ErrorCode::UnknownTopicId, 100, "UNKNOWN_TOPIC_ID", true),
            (
                ErrorCode::StaleMemberEpoch,
                113,
                "STALE_MEMBER_EPOCH",
                false,
            ),
            (
                ErrorCode::TransactionAbortable,
                120,
                "TRANSACTION_ABORTABLE",
                false,
            ),
            (
                ErrorCode::ShareSessionLimitReached,
                133,
                "SHARE_SESSION_LIMIT_REACHED",
                true,
            ),
        ];
        for (e, code, name, retriable) in cases {
            assert_eq!(e.code(), code);
            assert_eq!(e.name(), name);
            assert_eq!(e.is_retriable(), retriable, "{name}");
        }
        assert_eq!(
            ErrorCode::ALL.iter().filter(|e| e.is_retriable()).count(),
            32
        );
        assert_eq!(ErrorCode::CorruptMessage.to_string(), "CORRUPT_MESSAGE (2)");
    }
}
