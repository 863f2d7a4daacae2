//! Building record batches.

use bytes::Bytes;

use super::batch::RecordBatch;
use super::compression::{Compression, compress};
use super::control::EndTxnMarker;
use super::error::RecordsError;
use super::header::{
    BASE_OFFSET_OFFSET, BASE_SEQUENCE_OFFSET, BASE_TIMESTAMP_OFFSET, BATCH_HEADER_LEN,
    CONTROL_FLAG_MASK, DELETE_HORIZON_FLAG_MASK, LAST_OFFSET_DELTA_OFFSET, LENGTH_OFFSET,
    LOG_OVERHEAD, MAGIC_OFFSET, MAGIC_V2, MAX_TIMESTAMP_OFFSET, PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_EPOCH_OFFSET, PRODUCER_ID_OFFSET, RECORDS_COUNT_OFFSET, TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK, put, write_crc,
};
use super::record::{Record, RecordHeader};

/// Kafka's "no timestamp" value.
pub const NO_TIMESTAMP: i64 = -1;
/// Producer id, epoch and sequence of a non-idempotent producer.
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const NO_SEQUENCE: i32 = -1;
/// Partition leader epoch before the leader assigns one.
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;

/// Meaning of the record timestamps (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimestampType {
    /// Set by the producer.
    #[default]
    CreateTime,
    /// Set by the broker on append; `maxTimestamp` holds the append time.
    LogAppendTime,
}

#[derive(Debug, Clone)]
struct Pending {
    offset_delta: i32,
    timestamp: i64,
    key: Option<Bytes>,
    value: Option<Bytes>,
    headers: Vec<RecordHeader>,
}

/// Builds one magic-2 record batch.
///
/// Record offsets are strictly increasing and lie in
/// `base_offset ..= base_offset + i32::MAX`; `build` computes the
/// lastOffsetDelta, the base and max timestamps, compresses the records
/// section and writes the CRC.
///
/// ```
/// use bytes::Bytes;
/// use weir_protocol::records::{Compression, DecompressLimits, RecordBatchBuilder};
///
/// let mut b = RecordBatchBuilder::new(Compression::Zstd).base_offset(100);
/// b.push(1_700_000_000_000, Some(Bytes::from("k")), Some(Bytes::from("v")), vec![])?;
/// b.push(1_700_000_000_005, None, Some(Bytes::from("w")), vec![])?;
/// let batch = b.build()?;
/// assert_eq!(batch.last_offset(), 101);
/// let records = batch.collect_records(&DecompressLimits::default())?;
/// assert_eq!(records[1].offset(batch.base_offset()), 101);
/// # Ok::<(), weir_protocol::records::RecordsError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RecordBatchBuilder {
    compression: Compression,
    base_offset: i64,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    control: bool,
    timestamp_type: TimestampType,
    log_append_time: i64,
    delete_horizon_ms: Option<i64>,
    base_timestamp: Option<i64>,
    last_offset_delta: Option<i32>,
    records: Vec<Pending>,
    records_size: usize,
}

impl RecordBatchBuilder {
    /// An empty builder: base offset 0, no producer id, no leader epoch,
    /// CreateTime.
    pub fn new(compression: Compression) -> Self {
        RecordBatchBuilder {
            compression,
            base_offset: 0,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            transactional: false,
            control: false,
            timestamp_type: TimestampType::CreateTime,
            log_append_time: NO_TIMESTAMP,
            delete_horizon_ms: None,
            base_timestamp: None,
            last_offset_delta: None,
            records: Vec::new(),
            records_size: 0,
        }
    }

    pub fn base_offset(mut self, base_offset: i64) -> Self {
        self.base_offset = base_offset;
        self
    }

    pub fn partition_leader_epoch(mut self, epoch: i32) -> Self {
        self.partition_leader_epoch = epoch;
        self
    }

    /// Idempotent / transactional producer identity of the batch.
    pub fn producer(mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    pub fn transactional(mut self, transactional: bool) -> Self {
        self.transactional = transactional;
        self
    }

    pub fn control(mut self, control: bool) -> Self {
        self.control = control;
        self
    }

    /// CreateTime: maxTimestamp is the largest record timestamp.
    pub fn create_time(mut self) -> Self {
        self.timestamp_type = TimestampType::CreateTime;
        self
    }

    /// LogAppendTime: maxTimestamp is `append_time_ms`.
    pub fn log_append_time(mut self, append_time_ms: i64) -> Self {
        self.timestamp_type = TimestampType::LogAppendTime;
        self.log_append_time = append_time_ms;
        self
    }

    /// Sets the delete horizon (compaction): the flag is set and
    /// baseTimestamp holds the horizon; record timestamps stay relative to
    /// it.
    pub fn delete_horizon(mut self, delete_horizon_ms: Option<i64>) -> Self {
        self.delete_horizon_ms = delete_horizon_ms;
        self
    }

    /// Overrides the base timestamp (default: the first record's timestamp).
    /// Ignored when a delete horizon is set.
    pub fn base_timestamp(mut self, base_timestamp: i64) -> Self {
        self.base_timestamp = Some(base_timestamp);
        self
    }

    /// Overrides lastOffsetDelta, e.g. to keep an emptied batch's offset
    /// range after compaction. Must not be below the last record's delta.
    pub fn last_offset_delta(mut self, last_offset_delta: i32) -> Self {
        self.last_offset_delta = Some(last_offset_delta);
        self
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Offset the next [`push`](Self::push) gets.
    pub fn next_offset(&self) -> i64 {
        match self.records.last() {
            Some(p) => self.base_offset + p.offset_delta as i64 + 1,
            None => self.base_offset,
        }
    }

    /// Uncompressed size of the batch built so far (an upper bound for
    /// codecs that shrink the data, which is what producers size batches
    /// by).
    pub fn estimated_size(&self) -> usize {
        BATCH_HEADER_LEN + self.records_size
    }

    /// Appends a record at the next offset.
    pub fn push(
        &mut self,
        timestamp: i64,
        key: Option<Bytes>,
        value: Option<Bytes>,
        headers: Vec<RecordHeader>,
    ) -> Result<(), RecordsError> {
        let offset = self.next_offset();
        self.push_at(offset, timestamp, key, value, headers)
    }

    /// Appends a record at an explicit offset (compaction keeps the original
    /// offsets). Offsets must increase.
    pub fn push_at(
        &mut self,
        offset: i64,
        timestamp: i64,
        key: Option<Bytes>,
        value: Option<Bytes>,
        headers: Vec<RecordHeader>,
    ) -> Result<(), RecordsError> {
        let delta = offset
            .checked_sub(self.base_offset)
            .filter(|d| (0..=i32::MAX as i64).contains(d))
            .ok_or(RecordsError::InvalidBuild {
                reason: "offset outside base_offset ..= base_offset + i32::MAX",
            })? as i32;
        if let Some(last) = self.records.last()
            && delta <= last.offset_delta
        {
            return Err(RecordsError::InvalidBuild {
                reason: "record offsets must increase",
            });
        }
        if self.records.len() >= i32::MAX as usize {
            return Err(RecordsError::InvalidBuild {
                reason: "more than i32::MAX records",
            });
        }
        let too_long = |b: &Option<Bytes>| b.as_ref().is_some_and(|b| b.len() > i32::MAX as usize);
        if too_long(&key)
            || too_long(&value)
            || headers
                .iter()
                .any(|h| h.key.len() > i32::MAX as usize || too_long(&h.value))
        {
            return Err(RecordsError::InvalidBuild {
                reason: "key, value or header longer than i32::MAX",
            });
        }
        let size = key.as_ref().map_or(0, |k| k.len())
            + value.as_ref().map_or(0, |v| v.len())
            + headers
                .iter()
                .map(|h| h.key.len() + h.value.as_ref().map_or(0, |v| v.len()) + 10)
                .sum::<usize>()
            + 30;
        self.records_size = self.records_size.saturating_add(size);
        self.records.push(Pending {
            offset_delta: delta,
            timestamp,
            key,
            value,
            headers,
        });
        Ok(())
    }

    /// Appends a control record carrying `marker` at the next offset.
    pub fn push_end_txn_marker(
        &mut self,
        timestamp: i64,
        marker: &EndTxnMarker,
    ) -> Result<(), RecordsError> {
        let rec = marker.to_record();
        self.push(timestamp, rec.key, rec.value, Vec::new())
    }

    /// A complete COMMIT/ABORT marker batch, as the transaction coordinator
    /// has the leader write it: control and transactional flags set, one
    /// record, no sequence.
    pub fn end_txn_marker_batch(
        base_offset: i64,
        partition_leader_epoch: i32,
        producer_id: i64,
        producer_epoch: i16,
        timestamp: i64,
        marker: &EndTxnMarker,
    ) -> Result<RecordBatch, RecordsError> {
        let mut b = RecordBatchBuilder::new(Compression::None)
            .base_offset(base_offset)
            .partition_leader_epoch(partition_leader_epoch)
            .producer(producer_id, producer_epoch, NO_SEQUENCE)
            .transactional(true)
            .control(true);
        b.push_end_txn_marker(timestamp, marker)?;
        b.build()
    }

    /// Encodes the batch.
    pub fn build(&self) -> Result<RecordBatch, RecordsError> {
        let base_timestamp = match (self.delete_horizon_ms, self.base_timestamp) {
            (Some(h), _) => h,
            (None, Some(t)) => t,
            (None, None) => self.records.first().map_or(NO_TIMESTAMP, |r| r.timestamp),
        };
        let max_timestamp = match self.timestamp_type {
            TimestampType::LogAppendTime => self.log_append_time,
            TimestampType::CreateTime => self
                .records
                .iter()
                .map(|r| r.timestamp)
                .max()
                .unwrap_or(NO_TIMESTAMP),
        };
        let records_last = self.records.last().map(|r| r.offset_delta);
        let last_offset_delta = match (self.last_offset_delta, records_last) {
            (Some(explicit), Some(last)) if explicit < last => {
                return Err(RecordsError::InvalidBuild {
                    reason: "last_offset_delta below the last record's offset delta",
                });
            }
            (Some(explicit), _) => explicit,
            (None, Some(last)) => last,
            (None, None) => 0,
        };

        let mut section = Vec::with_capacity(self.records_size);
        for p in &self.records {
            let timestamp_delta =
                p.timestamp
                    .checked_sub(base_timestamp)
                    .ok_or(RecordsError::InvalidBuild {
                        reason: "timestamp delta overflows i64",
                    })?;
            let rec = Record {
                attributes: 0,
                timestamp_delta,
                offset_delta: p.offset_delta,
                key: p.key.clone(),
                value: p.value.clone(),
                headers: p.headers.clone(),
            };
            if rec.body_len() > i32::MAX as usize {
                return Err(RecordsError::InvalidBuild {
                    reason: "record larger than i32::MAX",
                });
            }
            rec.encode(&mut section);
        }

        let mut out = Vec::with_capacity(BATCH_HEADER_LEN + section.len());
        out.resize(BATCH_HEADER_LEN, 0);
        compress(self.compression, &section, &mut out)?;
        let batch_length =
            i32::try_from(out.len() - LOG_OVERHEAD).map_err(|_| RecordsError::InvalidBuild {
                reason: "batch larger than i32::MAX",
            })?;

        let mut attributes = self.compression.id() as i16;
        if self.timestamp_type == TimestampType::LogAppendTime {
            attributes |= TIMESTAMP_TYPE_MASK;
        }
        if self.transactional {
            attributes |= TRANSACTIONAL_FLAG_MASK;
        }
        if self.control {
            attributes |= CONTROL_FLAG_MASK;
        }
        if self.delete_horizon_ms.is_some() {
            attributes |= DELETE_HORIZON_FLAG_MASK;
        }

        put(
            &mut out,
            BASE_OFFSET_OFFSET,
            &self.base_offset.to_be_bytes(),
        );
        put(&mut out, LENGTH_OFFSET, &batch_length.to_be_bytes());
        put(
            &mut out,
            PARTITION_LEADER_EPOCH_OFFSET,
            &self.partition_leader_epoch.to_be_bytes(),
        );
        put(&mut out, MAGIC_OFFSET, &MAGIC_V2.to_be_bytes());
        put(
            &mut out,
            super::header::ATTRIBUTES_OFFSET,
            &attributes.to_be_bytes(),
        );
        put(
            &mut out,
            LAST_OFFSET_DELTA_OFFSET,
            &last_offset_delta.to_be_bytes(),
        );
        put(
            &mut out,
            BASE_TIMESTAMP_OFFSET,
            &base_timestamp.to_be_bytes(),
        );
        put(&mut out, MAX_TIMESTAMP_OFFSET, &max_timestamp.to_be_bytes());
        put(
            &mut out,
            PRODUCER_ID_OFFSET,
            &self.producer_id.to_be_bytes(),
        );
        put(
            &mut out,
            PRODUCER_EPOCH_OFFSET,
            &self.producer_epoch.to_be_bytes(),
        );
        put(
            &mut out,
            BASE_SEQUENCE_OFFSET,
            &self.base_sequence.to_be_bytes(),
        );
        put(
            &mut out,
            RECORDS_COUNT_OFFSET,
            &(self.records.len() as i32).to_be_bytes(),
        );
        write_crc(&mut out);
        RecordBatch::from_bytes(Bytes::from(out))
    }
}
