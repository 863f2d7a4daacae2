//! Errors of the storage layer.

use std::path::PathBuf;

/// Everything that can go wrong in the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("offset {offset} is out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start: i64,
        log_end: i64,
    },
    #[error("corrupt record batch at position {position} of the request: {reason}")]
    CorruptRecord { position: usize, reason: String },
    /// A batch whose header and CRC are sound but whose records are not
    /// (counts, offsets, a record that does not parse): Kafka's
    /// `INVALID_RECORD`.
    #[error("invalid records in the batch at position {position} of the request: {reason}")]
    InvalidRecord { position: usize, reason: String },
    /// One batch over `max.message.bytes`: Kafka's `MESSAGE_TOO_LARGE`.
    #[error("record batch of {size} bytes exceeds the limit of {max} bytes")]
    RecordTooLarge { size: usize, max: usize },
    /// The batches of one append together larger than a segment
    /// (`segment.bytes`): Kafka's `RECORD_LIST_TOO_LARGE`.
    #[error("record batches of {size} bytes exceed the segment size of {max} bytes")]
    RecordListTooLarge { size: usize, max: usize },
    /// Records of the batch at `position` refused one by one, each with its
    /// index in the batch (Kafka's `RecordValidationException`): a missing
    /// key on a compacted topic, a timestamp out of bounds, a record whose
    /// layout is wrong. `INVALID_TIMESTAMP` when any has a bad timestamp,
    /// `INVALID_RECORD` otherwise; the message is Kafka's.
    #[error("{}", rejected_summary(*invalid_timestamp, records))]
    RejectedRecords {
        position: usize,
        invalid_timestamp: bool,
        records: Vec<RejectedRecord>,
    },
    /// A follower's append whose first batch starts below the log end
    /// offset: it would overwrite records (Kafka's
    /// `UnexpectedAppendOffsetException`). Nothing was appended.
    #[error(
        "unexpected append offset: the first batch starts at {first_offset}, below the log end offset {log_end_offset}"
    )]
    UnexpectedAppendOffset {
        first_offset: i64,
        log_end_offset: i64,
    },
    /// A follower's append whose batches do not follow each other (a batch
    /// starts at or below the last offset of the one before it; Kafka's
    /// `OffsetsOutOfOrderException`). Nothing was appended.
    #[error(
        "out of order offsets: the batch at position {position} of the request starts at {base_offset}, after a batch ending at {previous_last_offset}"
    )]
    OffsetsOutOfOrder {
        position: usize,
        base_offset: i64,
        previous_last_offset: i64,
    },
    #[error("invalid timestamp {timestamp} (now {now_ms}): {reason}")]
    InvalidTimestamp {
        timestamp: i64,
        now_ms: i64,
        reason: &'static str,
    },
    #[error(
        "corrupt batch at position {position} of {path} below the recovery point {recovery_point}: {reason}"
    )]
    CorruptBelowRecoveryPoint {
        path: PathBuf,
        position: u64,
        recovery_point: i64,
        reason: String,
    },
    #[error("corrupt log file {path} at position {position}: {reason}")]
    CorruptLog {
        path: PathBuf,
        position: u64,
        reason: String,
    },
    #[error("malformed file {path}: {reason}")]
    MalformedFile { path: PathBuf, reason: String },
    #[error("log {0} already exists")]
    LogExists(String),
    #[error("no log for {0}")]
    UnknownLog(String),
    #[error("log {0} is closed")]
    Closed(String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// One record refused by [`StorageError::RejectedRecords`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedRecord {
    /// The record's index in its batch (0 for the first record).
    pub batch_index: usize,
    pub message: String,
}

/// Kafka's partition-level message for records refused one by one.
fn rejected_summary(invalid_timestamp: bool, records: &[RejectedRecord]) -> String {
    if invalid_timestamp {
        return "One or more records have been rejected due to invalid timestamp".to_string();
    }
    let first: Vec<String> = records
        .iter()
        .take(3)
        .map(|r| {
            format!(
                "RecordError(batchIndex={}, message='{}')",
                r.batch_index, r.message
            )
        })
        .collect();
    format!(
        "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
        records.len(),
        first.join(", ")
    )
}

impl StorageError {
    /// Whether this is a full disk (`ENOSPC`, or a disk quota).
    pub fn is_no_space(&self) -> bool {
        matches!(self, StorageError::Io { source, .. }
            if matches!(source.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)))
    }
}

/// Attaches a path to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn at(self, path: &std::path::Path) -> Result<T, StorageError>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: &std::path::Path) -> Result<T, StorageError> {
        self.map_err(|source| StorageError::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}
