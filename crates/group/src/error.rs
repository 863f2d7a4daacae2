//! Kafka wire error codes used by the group coordinator, and the typed errors
//! of the `__consumer_offsets` record codec.

/// A Kafka protocol error code (the `error_code` int16 of a response).
///
/// The coordinator reports outcomes with these codes so the broker can copy
/// them into wire responses unchanged (`code()` gives the wire value).
pub use weir_protocol::error_code::ErrorCode;

/// Failure to decode a `__consumer_offsets` key or value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("record truncated at byte {position}: needed {needed} more bytes, {remaining} remain")]
    Truncated {
        position: usize,
        needed: usize,
        remaining: usize,
    },
    #[error("negative length {length} at byte {position} for a non-nullable field")]
    NegativeLength { length: i64, position: usize },
    #[error("string at byte {position} is not valid UTF-8")]
    InvalidUtf8 { position: usize },
    #[error("varint at byte {position} is too long")]
    VarintTooLong { position: usize },
    #[error("unsupported {kind} version {version}")]
    UnsupportedVersion { kind: &'static str, version: i16 },
    #[error("{remaining} trailing bytes after {kind}")]
    TrailingBytes {
        kind: &'static str,
        remaining: usize,
    },
    #[error("cannot decode the {kind}: {message}")]
    Decode { kind: &'static str, message: String },
    #[error(
        "a group metadata value needs a group metadata key, got an offset commit key (or vice versa)"
    )]
    KeyValueMismatch,
}
