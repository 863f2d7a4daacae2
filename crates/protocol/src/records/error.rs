//! Errors of the record batch codec.

use super::compression::Compression;
use super::header::HeaderError;
use crate::varint::VarintError;

/// Why a batch, or a buffer of batches, could not be read or built.
///
/// Positions are byte offsets into the buffer handed to the splitter
/// ([`BatchIter`](super::BatchIter), [`BatchSlices`](super::BatchSlices)),
/// so a caller recovering a log can truncate at `position`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordsError {
    /// The buffer ends inside a batch (a torn write, or a fetch response cut
    /// at `max_bytes`). Not corruption by itself.
    #[error("incomplete batch at position {position}: need {needed} bytes, have {available}")]
    Incomplete {
        position: usize,
        needed: usize,
        available: usize,
    },
    /// The fixed header is unreadable (bad magic, impossible length).
    #[error("invalid batch header at position {position}: {error}")]
    InvalidHeader {
        position: usize,
        #[source]
        error: HeaderError,
    },
    /// The stored CRC-32C does not match the batch contents.
    #[error(
        "corrupt batch (base offset {base_offset}): crc {stored:#010x} stored, {computed:#010x} computed"
    )]
    CrcMismatch {
        base_offset: i64,
        stored: u32,
        computed: u32,
    },
    /// The attributes name a compression codec that does not exist.
    #[error("unknown compression codec id {id}")]
    UnknownCompression { id: u8 },
    /// The compressed records section could not be decompressed.
    #[error("{codec:?} decompression failed: {message}")]
    Decompress { codec: Compression, message: String },
    /// Decompression would produce more than the configured limit.
    #[error("{codec:?} records section decompresses to more than {limit} bytes")]
    DecompressedTooLarge { codec: Compression, limit: usize },
    /// Compression failed while building a batch.
    #[error("{codec:?} compression failed: {message}")]
    Compress { codec: Compression, message: String },
    /// A buffer meant to hold exactly one batch holds more or less.
    #[error("buffer of {buffer_len} bytes holds a batch of {batch_size} bytes")]
    NotOneBatch {
        batch_size: usize,
        buffer_len: usize,
    },
    /// The header's record count is negative (or, for a produced batch,
    /// zero).
    #[error("invalid record count {count}")]
    InvalidRecordCount { count: i32 },
    /// A produced batch's `lastOffsetDelta` does not cover exactly its
    /// `recordsCount` records.
    #[error("batch declares {records_count} records but lastOffsetDelta {last_offset_delta}")]
    InconsistentOffsetRange {
        records_count: i32,
        last_offset_delta: i32,
    },
    /// A record of a produced batch whose offset delta is not its position
    /// in the batch (deltas must run 0, 1, 2, …).
    #[error("record #{index} has offset delta {offset_delta}, expected {index}")]
    OffsetDeltaMismatch { index: usize, offset_delta: i32 },
    /// Fewer records than the header declares.
    #[error("batch declares {declared} records but its data ends after {found}")]
    MissingRecords { declared: i32, found: usize },
    /// Bytes left over after the declared number of records.
    #[error("{remaining} bytes left after the {declared} declared records")]
    TrailingBytes { declared: i32, remaining: usize },
    /// A single record inside the batch is malformed.
    #[error("corrupt record #{index}: {error}")]
    CorruptRecord {
        index: usize,
        #[source]
        error: RecordError,
    },
    /// A control record whose key or value cannot be parsed.
    #[error("invalid control record: {reason}")]
    InvalidControlRecord { reason: &'static str },
    /// A builder input that cannot be represented in a batch.
    #[error("cannot build batch: {reason}")]
    InvalidBuild { reason: &'static str },
}

impl RecordsError {
    /// True when the error only means "more bytes are needed".
    pub fn is_incomplete(&self) -> bool {
        matches!(self, RecordsError::Incomplete { .. })
    }

    /// True for the errors Kafka answers a produce with `INVALID_RECORD`
    /// (its `InvalidRecordException`: counts, offsets, a record that does not
    /// parse, missing or left-over records); false for the `CORRUPT_MESSAGE`
    /// ones (header, CRC, codec, compressed stream, decompression bound).
    pub fn is_invalid_record(&self) -> bool {
        matches!(
            self,
            RecordsError::InvalidRecordCount { .. }
                | RecordsError::InconsistentOffsetRange { .. }
                | RecordsError::OffsetDeltaMismatch { .. }
                | RecordsError::MissingRecords { .. }
                | RecordsError::TrailingBytes { .. }
                | RecordsError::CorruptRecord { .. }
        )
    }

    pub(crate) fn from_header(position: usize, error: HeaderError) -> Self {
        match error {
            HeaderError::Incomplete { needed, available } => RecordsError::Incomplete {
                position,
                needed,
                available,
            },
            error => RecordsError::InvalidHeader { position, error },
        }
    }
}

/// Which length field of a record an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordField {
    Length,
    Key,
    Value,
    HeaderCount,
    HeaderKey,
    HeaderValue,
}

/// Why one record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("bad varint in {field:?}: {error}")]
    Varint {
        field: &'static str,
        error: VarintError,
    },
    #[error("negative {field:?} length {length}")]
    NegativeLength { field: RecordField, length: i64 },
    #[error("{field:?} length {length} exceeds the {remaining} bytes left")]
    LengthExceedsRemaining {
        field: RecordField,
        length: i64,
        remaining: usize,
    },
    #[error("record body ends before its {field}")]
    Truncated { field: &'static str },
    #[error("record declares {declared} bytes but its fields take {consumed}")]
    SizeMismatch { declared: usize, consumed: usize },
    #[error("header key is not valid UTF-8")]
    InvalidHeaderKey,
}
