//! The mapping from storage errors to the Kafka error code a response
//! carries. Handlers use `weir_protocol::error_code::ErrorCode` directly and
//! write its `code()` into the generated message fields.

use weir_protocol::error_code::ErrorCode;
use weir_storage::StorageError;

/// The Kafka error code for a storage error on the produce/fetch paths.
pub fn from_storage(e: &StorageError) -> ErrorCode {
    match e {
        StorageError::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
        // A stored batch that cannot be read (Kafka's CorruptRecordException
        // on the read path).
        StorageError::CorruptRecord { .. }
        | StorageError::CorruptLog { .. }
        | StorageError::CorruptBelowRecoveryPoint { .. } => ErrorCode::CorruptMessage,
        StorageError::InvalidRecord { .. } => ErrorCode::InvalidRecord,
        StorageError::RejectedRecords {
            invalid_timestamp: false,
            ..
        } => ErrorCode::InvalidRecord,
        StorageError::RecordTooLarge { .. } => ErrorCode::MessageTooLarge,
        StorageError::RecordListTooLarge { .. } => ErrorCode::RecordListTooLarge,
        StorageError::InvalidTimestamp { .. }
        | StorageError::RejectedRecords {
            invalid_timestamp: true,
            ..
        } => ErrorCode::InvalidTimestamp,
        StorageError::UnknownLog(_) => ErrorCode::UnknownTopicOrPartition,
        StorageError::InvalidArgument(_) => ErrorCode::InvalidRequest,
        _ => ErrorCode::KafkaStorageError,
    }
}
