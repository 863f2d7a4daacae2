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
    #[error("record batch of {size} bytes exceeds the limit of {max} bytes")]
    RecordTooLarge { size: usize, max: usize },
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
