//! The Kafka error codes the broker answers with, as `i16` constants for
//! the generated message fields (from `weir_protocol::error_code`).

use weir_protocol::error_code::ErrorCode;
use weir_storage::StorageError;

pub const UNKNOWN_SERVER_ERROR: i16 = ErrorCode::UnknownServerError as i16;
pub const NONE: i16 = ErrorCode::None as i16;
pub const FETCH_SESSION_ID_NOT_FOUND: i16 = ErrorCode::FetchSessionIdNotFound as i16;
pub const OFFSET_OUT_OF_RANGE: i16 = ErrorCode::OffsetOutOfRange as i16;
pub const CORRUPT_MESSAGE: i16 = ErrorCode::CorruptMessage as i16;
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = ErrorCode::UnknownTopicOrPartition as i16;
pub const INVALID_FETCH_SIZE: i16 = ErrorCode::InvalidFetchSize as i16;
pub const MESSAGE_TOO_LARGE: i16 = ErrorCode::MessageTooLarge as i16;
pub const INVALID_TOPIC_EXCEPTION: i16 = ErrorCode::InvalidTopicException as i16;
pub const RECORD_LIST_TOO_LARGE: i16 = ErrorCode::RecordListTooLarge as i16;
pub const NOT_ENOUGH_REPLICAS: i16 = ErrorCode::NotEnoughReplicas as i16;
pub const INVALID_REQUIRED_ACKS: i16 = ErrorCode::InvalidRequiredAcks as i16;
pub const INVALID_TIMESTAMP: i16 = ErrorCode::InvalidTimestamp as i16;
pub const UNSUPPORTED_VERSION: i16 = ErrorCode::UnsupportedVersion as i16;
pub const TOPIC_ALREADY_EXISTS: i16 = ErrorCode::TopicAlreadyExists as i16;
pub const INVALID_PARTITIONS: i16 = ErrorCode::InvalidPartitions as i16;
pub const INVALID_REPLICATION_FACTOR: i16 = ErrorCode::InvalidReplicationFactor as i16;
pub const INVALID_REQUEST: i16 = ErrorCode::InvalidRequest as i16;
pub const POLICY_VIOLATION: i16 = ErrorCode::PolicyViolation as i16;
pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = ErrorCode::OutOfOrderSequenceNumber as i16;
pub const DUPLICATE_SEQUENCE_NUMBER: i16 = ErrorCode::DuplicateSequenceNumber as i16;
pub const INVALID_PRODUCER_EPOCH: i16 = ErrorCode::InvalidProducerEpoch as i16;
pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 =
    ErrorCode::TransactionalIdAuthorizationFailed as i16;
pub const INVALID_CONFIG: i16 = ErrorCode::InvalidConfig as i16;
pub const KAFKA_STORAGE_ERROR: i16 = ErrorCode::KafkaStorageError as i16;
pub const LOG_DIR_NOT_FOUND: i16 = ErrorCode::LogDirNotFound as i16;
pub const UNKNOWN_PRODUCER_ID: i16 = ErrorCode::UnknownProducerId as i16;
pub const COORDINATOR_NOT_AVAILABLE: i16 = ErrorCode::CoordinatorNotAvailable as i16;
pub const UNKNOWN_TOPIC_ID: i16 = ErrorCode::UnknownTopicId as i16;
pub const INCONSISTENT_TOPIC_ID: i16 = ErrorCode::InconsistentTopicId as i16;
pub const TRANSACTIONAL_ID_NOT_FOUND: i16 = ErrorCode::TransactionalIdNotFound as i16;
pub const INVALID_RECORD: i16 = ErrorCode::InvalidRecord as i16;
pub const THROTTLING_QUOTA_EXCEEDED: i16 = ErrorCode::ThrottlingQuotaExceeded as i16;

/// The Kafka error code for a storage error on the produce/fetch paths.
pub fn from_storage(e: &StorageError) -> i16 {
    match e {
        StorageError::OffsetOutOfRange { .. } => OFFSET_OUT_OF_RANGE,
        // A stored batch that cannot be read (Kafka's CorruptRecordException
        // on the read path).
        StorageError::CorruptRecord { .. }
        | StorageError::CorruptLog { .. }
        | StorageError::CorruptBelowRecoveryPoint { .. } => CORRUPT_MESSAGE,
        StorageError::InvalidRecord { .. } => INVALID_RECORD,
        StorageError::RecordTooLarge { .. } => MESSAGE_TOO_LARGE,
        StorageError::InvalidTimestamp { .. } => INVALID_TIMESTAMP,
        StorageError::UnknownLog(_) => UNKNOWN_TOPIC_OR_PARTITION,
        StorageError::InvalidArgument(_) => INVALID_REQUEST,
        _ => KAFKA_STORAGE_ERROR,
    }
}
