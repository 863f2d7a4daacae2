//! The Kafka error codes the broker answers with (numbers from Kafka's
//! protocol; names as in `Errors.java`).

pub const UNKNOWN_SERVER_ERROR: i16 = -1;
pub const NONE: i16 = 0;
pub const OFFSET_OUT_OF_RANGE: i16 = 1;
pub const CORRUPT_MESSAGE: i16 = 2;
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
pub const INVALID_FETCH_SIZE: i16 = 4;
pub const MESSAGE_TOO_LARGE: i16 = 10;
pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
pub const RECORD_LIST_TOO_LARGE: i16 = 18;
pub const NOT_ENOUGH_REPLICAS: i16 = 19;
pub const INVALID_REQUIRED_ACKS: i16 = 21;
pub const INVALID_TIMESTAMP: i16 = 32;
pub const UNSUPPORTED_VERSION: i16 = 35;
pub const TOPIC_ALREADY_EXISTS: i16 = 36;
pub const INVALID_PARTITIONS: i16 = 37;
pub const INVALID_REPLICATION_FACTOR: i16 = 38;
pub const INVALID_REQUEST: i16 = 42;
pub const POLICY_VIOLATION: i16 = 44;
pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
pub const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;
pub const INVALID_PRODUCER_EPOCH: i16 = 47;
pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
pub const INVALID_CONFIG: i16 = 40;
pub const KAFKA_STORAGE_ERROR: i16 = 56;
pub const LOG_DIR_NOT_FOUND: i16 = 57;
pub const UNKNOWN_PRODUCER_ID: i16 = 59;
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
pub const UNKNOWN_TOPIC_ID: i16 = 100;
pub const INCONSISTENT_TOPIC_ID: i16 = 103;
pub const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;
pub const INVALID_RECORD: i16 = 87;
pub const THROTTLING_QUOTA_EXCEEDED: i16 = 89;

use weir_storage::StorageError;

/// The Kafka error code for a storage error on the produce/fetch paths.
pub fn from_storage(e: &StorageError) -> i16 {
    match e {
        StorageError::OffsetOutOfRange { .. } => OFFSET_OUT_OF_RANGE,
        StorageError::CorruptRecord { .. } => CORRUPT_MESSAGE,
        StorageError::RecordTooLarge { .. } => MESSAGE_TOO_LARGE,
        StorageError::InvalidTimestamp { .. } => INVALID_TIMESTAMP,
        StorageError::UnknownLog(_) => UNKNOWN_TOPIC_OR_PARTITION,
        StorageError::InvalidArgument(_) => INVALID_REQUEST,
        _ => KAFKA_STORAGE_ERROR,
    }
}
