//! Kafka wire error codes used by the group coordinator, and the typed errors
//! of the `__consumer_offsets` record codec.

use std::fmt;

/// A Kafka protocol error code (the `error_code` int16 of a response).
///
/// The coordinator reports outcomes with these codes so the broker can copy
/// them into wire responses unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ErrorCode(pub i16);

impl ErrorCode {
    pub const NONE: Self = Self(0);
    pub const UNKNOWN_SERVER_ERROR: Self = Self(-1);
    pub const UNKNOWN_TOPIC_OR_PARTITION: Self = Self(3);
    pub const OFFSET_METADATA_TOO_LARGE: Self = Self(12);
    pub const COORDINATOR_LOAD_IN_PROGRESS: Self = Self(14);
    pub const COORDINATOR_NOT_AVAILABLE: Self = Self(15);
    pub const NOT_COORDINATOR: Self = Self(16);
    pub const ILLEGAL_GENERATION: Self = Self(22);
    pub const INCONSISTENT_GROUP_PROTOCOL: Self = Self(23);
    pub const INVALID_GROUP_ID: Self = Self(24);
    pub const UNKNOWN_MEMBER_ID: Self = Self(25);
    pub const INVALID_SESSION_TIMEOUT: Self = Self(26);
    pub const REBALANCE_IN_PROGRESS: Self = Self(27);
    pub const INVALID_REQUEST: Self = Self(42);
    pub const NON_EMPTY_GROUP: Self = Self(68);
    pub const GROUP_ID_NOT_FOUND: Self = Self(69);
    pub const MEMBER_ID_REQUIRED: Self = Self(79);
    pub const GROUP_MAX_SIZE_REACHED: Self = Self(81);
    pub const FENCED_INSTANCE_ID: Self = Self(82);
    pub const GROUP_SUBSCRIBED_TO_TOPIC: Self = Self(86);

    /// The wire value.
    pub fn code(self) -> i16 {
        self.0
    }

    pub fn is_ok(self) -> bool {
        self == Self::NONE
    }

    /// Kafka's upper-case name for the code, for logs and test failures.
    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "NONE",
            -1 => "UNKNOWN_SERVER_ERROR",
            3 => "UNKNOWN_TOPIC_OR_PARTITION",
            12 => "OFFSET_METADATA_TOO_LARGE",
            14 => "COORDINATOR_LOAD_IN_PROGRESS",
            15 => "COORDINATOR_NOT_AVAILABLE",
            16 => "NOT_COORDINATOR",
            22 => "ILLEGAL_GENERATION",
            23 => "INCONSISTENT_GROUP_PROTOCOL",
            24 => "INVALID_GROUP_ID",
            25 => "UNKNOWN_MEMBER_ID",
            26 => "INVALID_SESSION_TIMEOUT",
            27 => "REBALANCE_IN_PROGRESS",
            42 => "INVALID_REQUEST",
            68 => "NON_EMPTY_GROUP",
            69 => "GROUP_ID_NOT_FOUND",
            79 => "MEMBER_ID_REQUIRED",
            81 => "GROUP_MAX_SIZE_REACHED",
            82 => "FENCED_INSTANCE_ID",
            86 => "GROUP_SUBSCRIBED_TO_TOPIC",
            _ => "UNKNOWN_ERROR_CODE",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.name(), self.0)
    }
}

impl From<ErrorCode> for i16 {
    fn from(e: ErrorCode) -> i16 {
        e.0
    }
}

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
    #[error(
        "a group metadata value needs a group metadata key, got an offset commit key (or vice versa)"
    )]
    KeyValueMismatch,
}
