//! The fixed 61-byte header of a record batch (magic 2).
//!
//! Layout (all big-endian):
//!
//! | offset | field                | type  |
//! |-------:|----------------------|-------|
//! | 0      | baseOffset           | int64 |
//! | 8      | batchLength          | int32 |  bytes after this field
//! | 12     | partitionLeaderEpoch | int32 |
//! | 16     | magic                | int8  |
//! | 17     | crc                  | uint32|  CRC-32C of bytes 21..end
//! | 21     | attributes           | int16 |
//! | 23     | lastOffsetDelta      | int32 |
//! | 27     | baseTimestamp        | int64 |
//! | 35     | maxTimestamp         | int64 |
//! | 43     | producerId           | int64 |
//! | 51     | producerEpoch        | int16 |
//! | 53     | baseSequence         | int32 |
//! | 57     | recordsCount         | int32 |
//! | 61     | records…             |       |

/// Size of the batch header, up to and including the record count.
pub const BATCH_HEADER_LEN: usize = 61;
/// Bytes before (and including) the batchLength field: the part not counted
/// by batchLength.
pub const LOG_OVERHEAD: usize = 12;
pub const BASE_OFFSET_OFFSET: usize = 0;
pub const LENGTH_OFFSET: usize = 8;
pub const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
pub const MAGIC_OFFSET: usize = 16;
pub const CRC_OFFSET: usize = 17;
pub const ATTRIBUTES_OFFSET: usize = 21;
pub const LAST_OFFSET_DELTA_OFFSET: usize = 23;
pub const BASE_TIMESTAMP_OFFSET: usize = 27;
pub const MAX_TIMESTAMP_OFFSET: usize = 35;
pub const PRODUCER_ID_OFFSET: usize = 43;
pub const PRODUCER_EPOCH_OFFSET: usize = 51;
pub const BASE_SEQUENCE_OFFSET: usize = 53;
pub const RECORDS_COUNT_OFFSET: usize = 57;
/// The first byte covered by the CRC.
pub const CRC_START: usize = ATTRIBUTES_OFFSET;
/// The only supported magic value.
pub const MAGIC_V2: i8 = 2;

/// Attribute bits.
pub const COMPRESSION_CODEC_MASK: i16 = 0x07;
pub const TIMESTAMP_TYPE_MASK: i16 = 0x08;
pub const TRANSACTIONAL_FLAG_MASK: i16 = 0x10;
pub const CONTROL_FLAG_MASK: i16 = 0x20;
pub const DELETE_HORIZON_FLAG_MASK: i16 = 0x40;

/// Why a batch header could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("need {needed} bytes for a batch header, have {available}")]
    Incomplete { needed: usize, available: usize },
    #[error("unsupported magic {magic} (only magic 2 is supported)")]
    UnsupportedMagic { magic: i8 },
    #[error("batch length {length} is smaller than the header")]
    LengthTooSmall { length: i32 },
    #[error("crc mismatch: header says {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
}

/// A decoded batch header. Always describes a magic-2 batch whose
/// `batch_length` is at least `BATCH_HEADER_LEN - LOG_OVERHEAD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

/// The `N` bytes of `b` at `at`, or `None` past its end. Inlined with a
/// constant `at` into a fixed-size header, the check compiles away.
#[inline]
pub(super) fn bytes_at<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..)?.first_chunk().copied()
}
#[inline]
fn be_i16(b: &[u8], at: usize) -> Option<i16> {
    bytes_at(b, at).map(i16::from_be_bytes)
}
#[inline]
fn be_i32(b: &[u8], at: usize) -> Option<i32> {
    bytes_at(b, at).map(i32::from_be_bytes)
}
#[inline]
fn be_i64(b: &[u8], at: usize) -> Option<i64> {
    bytes_at(b, at).map(i64::from_be_bytes)
}

/// Copies `value` over `buf[at..]`; a `buf` too short to hold it is left
/// unchanged (and fails a debug assertion: callers pass a whole batch).
pub(super) fn put(buf: &mut [u8], at: usize, value: &[u8]) {
    let field = buf.get_mut(at..at + value.len());
    debug_assert!(field.is_some(), "a batch ends inside its header");
    if let Some(field) = field {
        field.copy_from_slice(value);
    }
}

impl BatchHeader {
    /// Parses the header at the start of `buf`. Checks magic and the minimum
    /// length, not the CRC (see [`BatchHeader::verify_crc`]).
    pub fn parse(buf: &[u8]) -> Result<Self, HeaderError> {
        let Some(header) = Self::read(buf) else {
            return Err(HeaderError::Incomplete {
                needed: BATCH_HEADER_LEN,
                available: buf.len(),
            });
        };
        if header.magic != MAGIC_V2 {
            return Err(HeaderError::UnsupportedMagic {
                magic: header.magic,
            });
        }
        if (header.batch_length as i64) < (BATCH_HEADER_LEN - LOG_OVERHEAD) as i64 {
            return Err(HeaderError::LengthTooSmall {
                length: header.batch_length,
            });
        }
        Ok(header)
    }

    /// Reads the fields, unchecked; `None` when `buf` is shorter than the
    /// header.
    #[inline]
    fn read(buf: &[u8]) -> Option<Self> {
        let h: &[u8; BATCH_HEADER_LEN] = buf.first_chunk()?;
        Some(BatchHeader {
            base_offset: be_i64(h, BASE_OFFSET_OFFSET)?,
            batch_length: be_i32(h, LENGTH_OFFSET)?,
            partition_leader_epoch: be_i32(h, PARTITION_LEADER_EPOCH_OFFSET)?,
            magic: bytes_at(h, MAGIC_OFFSET).map(i8::from_be_bytes)?,
            crc: be_i32(h, CRC_OFFSET)? as u32,
            attributes: be_i16(h, ATTRIBUTES_OFFSET)?,
            last_offset_delta: be_i32(h, LAST_OFFSET_DELTA_OFFSET)?,
            base_timestamp: be_i64(h, BASE_TIMESTAMP_OFFSET)?,
            max_timestamp: be_i64(h, MAX_TIMESTAMP_OFFSET)?,
            producer_id: be_i64(h, PRODUCER_ID_OFFSET)?,
            producer_epoch: be_i16(h, PRODUCER_EPOCH_OFFSET)?,
            base_sequence: be_i32(h, BASE_SEQUENCE_OFFSET)?,
            records_count: be_i32(h, RECORDS_COUNT_OFFSET)?,
        })
    }

    /// Total size of the batch on disk / on the wire, including the first
    /// 12 bytes.
    pub fn total_size(&self) -> usize {
        self.batch_length as usize + LOG_OVERHEAD
    }

    /// Offset of the last record in the batch (wrapping: both fields come
    /// from untrusted input).
    pub fn last_offset(&self) -> i64 {
        self.base_offset.wrapping_add(self.last_offset_delta as i64)
    }

    /// Sequence number of the last record, or −1 when the batch has no
    /// sequence. Wraps from `i32::MAX` to 0 as Kafka's producer does.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence < 0 {
            return -1;
        }
        increment_sequence(self.base_sequence, self.last_offset_delta)
    }

    /// True when the batch comes from an idempotent or transactional
    /// producer.
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }

    /// Compression codec id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
    pub fn compression(&self) -> u8 {
        (self.attributes & COMPRESSION_CODEC_MASK) as u8
    }

    /// True when timestamps are LogAppendTime.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & TIMESTAMP_TYPE_MASK != 0
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_FLAG_MASK != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_FLAG_MASK != 0
    }

    pub fn has_delete_horizon(&self) -> bool {
        self.attributes & DELETE_HORIZON_FLAG_MASK != 0
    }

    /// Checks the CRC-32C over `batch[CRC_START..total_size]`. `batch` must
    /// hold the whole batch.
    pub fn verify_crc(&self, batch: &[u8]) -> Result<(), HeaderError> {
        let end = self.total_size();
        let Some(covered) = batch.get(CRC_START..end) else {
            return Err(HeaderError::Incomplete {
                needed: end,
                available: batch.len(),
            });
        };
        let computed = crc32c::crc32c(covered);
        if computed != self.crc {
            return Err(HeaderError::CrcMismatch {
                stored: self.crc,
                computed,
            });
        }
        Ok(())
    }
}

/// Kafka's `DefaultRecordBatch.incrementSequence`: producer sequence
/// numbers wrap from `i32::MAX` to 0.
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

/// Computes the CRC of a whole batch (over `CRC_START..`) and writes it into
/// the header. Used after changing a CRC-covered field (LogAppendTime).
/// Like the other setters here, leaves a buffer shorter than the header
/// unchanged.
pub fn write_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(batch.get(CRC_START..).unwrap_or_default());
    put(batch, CRC_OFFSET, &crc.to_be_bytes());
}

/// Marks a whole batch as LogAppendTime with `append_time_ms` as its max
/// timestamp, as the leader does when `message.timestamp.type` is
/// LogAppendTime, and rewrites the CRC. `batch` must hold exactly one batch.
pub fn set_log_append_time(batch: &mut [u8], append_time_ms: i64) {
    let attributes = be_i16(batch, ATTRIBUTES_OFFSET).unwrap_or_default() | TIMESTAMP_TYPE_MASK;
    put(batch, ATTRIBUTES_OFFSET, &attributes.to_be_bytes());
    put(batch, MAX_TIMESTAMP_OFFSET, &append_time_ms.to_be_bytes());
    write_crc(batch);
}

/// Overwrites the base offset of a batch in place (not CRC-covered).
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    put(batch, BASE_OFFSET_OFFSET, &base_offset.to_be_bytes());
}

/// Overwrites the partition leader epoch in place (not CRC-covered).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    put(batch, PARTITION_LEADER_EPOCH_OFFSET, &epoch.to_be_bytes());
}
