//! Batch-level helpers: validating a produce request and assigning offsets,
//! scanning batches in a segment file, and finding records by timestamp.

use crate::backend::StorageFile;
use crate::config::{LogConfig, TimestampType};
use crate::error::{RejectedRecord, StorageError};
use weir_protocol::records::header::{
    self, ATTRIBUTES_OFFSET, BATCH_HEADER_LEN, MAX_TIMESTAMP_OFFSET, TIMESTAMP_TYPE_MASK,
};
use weir_protocol::records::{
    BatchHeader, ControlRecordType, DecompressLimits, NO_TIMESTAMP, RecordBatch, RecordInfo,
    RecordsError, validate_records_each,
};

/// One batch of an accepted append, after offset assignment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AppendedBatch {
    pub base_offset: i64,
    pub size: usize,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub records: i64,
}

/// The batches of a request that passed [`validate`] (or
/// [`validate_as_stored`]): (position, size, header) of each, in order.
#[derive(Debug)]
pub(crate) struct Validated(Vec<(usize, usize, BatchHeader)>);

impl Validated {
    /// Each batch's partitionLeaderEpoch as received, in order.
    pub(crate) fn leader_epochs(&self) -> impl Iterator<Item = i32> + '_ {
        self.0.iter().map(|(_, _, h)| h.partition_leader_epoch)
    }

    /// Whether batch `i` exists and is a control batch.
    pub(crate) fn is_control(&self, i: usize) -> bool {
        self.0.get(i).is_some_and(|(_, _, h)| h.is_control())
    }
}

/// Assigns offsets from `next_offset` in place to validated batches (and
/// LogAppendTime when configured, and the leader epoch when given).
pub(crate) fn assign(
    records: &mut [u8],
    valid: &Validated,
    next_offset: i64,
    config: &LogConfig,
    now_ms: i64,
    leader_epoch: Option<i32>,
) -> Vec<AppendedBatch> {
    let mut next = next_offset;
    let mut out = Vec::with_capacity(valid.0.len());
    for &(pos, size, h) in &valid.0 {
        let batch = &mut records[pos..pos + size];
        header::set_base_offset(batch, next);
        if let Some(epoch) = leader_epoch {
            header::set_partition_leader_epoch(batch, epoch);
        }
        let mut max_ts = h.max_timestamp;
        if config.message_timestamp_type == TimestampType::LogAppendTime {
            let attrs = h.attributes | TIMESTAMP_TYPE_MASK;
            batch[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attrs.to_be_bytes());
            batch[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8]
                .copy_from_slice(&now_ms.to_be_bytes());
            header::write_crc(batch);
            max_ts = now_ms;
        }
        let last = next + h.last_offset_delta as i64;
        out.push(AppendedBatch {
            base_offset: next,
            size,
            last_offset: last,
            max_timestamp: max_ts,
            records: h.records_count as i64,
        });
        next = last + 1;
    }
    out
}

/// [`assign`] for a buffer the caller cannot change: the offsets are
/// planned, not written; the segment writes each batch's base offset over
/// the stored copy (see `Segment::append`). Only for appends that change
/// nothing else (no LogAppendTime, no leader epoch stamp).
pub(crate) fn plan(valid: &Validated, next_offset: i64) -> Vec<AppendedBatch> {
    let mut next = next_offset;
    let mut out = Vec::with_capacity(valid.0.len());
    for &(_, size, h) in &valid.0 {
        let last = next + h.last_offset_delta as i64;
        out.push(AppendedBatch {
            base_offset: next,
            size,
            last_offset: last,
            max_timestamp: h.max_timestamp,
            records: h.records_count as i64,
        });
        next = last + 1;
    }
    out
}

/// The batches of a follower's append, with the offsets the leader gave
/// them (nothing is assigned or rewritten).
pub(crate) fn as_stored(valid: &Validated) -> Vec<AppendedBatch> {
    valid
        .0
        .iter()
        .map(|&(_, size, h)| AppendedBatch {
            base_offset: h.base_offset,
            size,
            last_offset: h.last_offset(),
            max_timestamp: h.max_timestamp,
            records: h.records_count as i64,
        })
        .collect()
}

/// Checks the batches a follower fetched from its leader, as Kafka checks
/// an append that keeps its offsets: each batch's header (magic 2,
/// lengths), CRC-32C, record count against its offset range (a batch the
/// cleaner emptied keeps its range, so fewer records than offsets is
/// normal), and offsets that increase from batch to batch (a gap is what
/// compaction leaves); the whole request against `segment.bytes`. The
/// records themselves, their timestamps and `max.message.bytes` are the
/// leader's business and are not checked again. Where the first batch
/// starts is the log's to check.
pub(crate) fn validate_as_stored(
    records: &[u8],
    config: &LogConfig,
) -> Result<Validated, StorageError> {
    let mut spans = Vec::new();
    let mut pos = 0usize;
    let mut previous_last: Option<i64> = None;
    while pos < records.len() {
        let rest = &records[pos..];
        let corrupt = |reason: String| StorageError::CorruptRecord {
            position: pos,
            reason,
        };
        let h = BatchHeader::parse(rest).map_err(|e| corrupt(e.to_string()))?;
        let size = h.total_size();
        if size > rest.len() {
            return Err(corrupt(format!(
                "batch of {size} bytes but only {} left in the request",
                rest.len()
            )));
        }
        h.verify_crc(&rest[..size])
            .map_err(|e| corrupt(e.to_string()))?;
        if h.base_offset < 0
            || h.last_offset_delta < 0
            || h.records_count < 0
            || i64::from(h.records_count) > i64::from(h.last_offset_delta) + 1
        {
            return Err(StorageError::InvalidRecord {
                position: pos,
                reason: format!(
                    "base offset {}, last offset delta {}, {} records",
                    h.base_offset, h.last_offset_delta, h.records_count
                ),
            });
        }
        if let Some(prev) = previous_last
            && h.base_offset <= prev
        {
            return Err(StorageError::OffsetsOutOfOrder {
                position: pos,
                base_offset: h.base_offset,
                previous_last_offset: prev,
            });
        }
        previous_last = Some(h.last_offset());
        spans.push((pos, size, h));
        pos += size;
    }
    validated(spans, records.len(), config)
}

/// [`validate`] then [`assign`].
#[cfg(test)]
fn validate_and_assign(
    records: &mut [u8],
    next_offset: i64,
    config: &LogConfig,
    now_ms: i64,
    leader_epoch: Option<i32>,
) -> Result<Vec<AppendedBatch>, StorageError> {
    let valid = validate(records, config, now_ms)?;
    Ok(assign(
        records,
        &valid,
        next_offset,
        config,
        now_ms,
        leader_epoch,
    ))
}

/// [`validate`] then [`plan`].
#[cfg(test)]
fn validate_and_plan(
    records: &[u8],
    next_offset: i64,
    config: &LogConfig,
    now_ms: i64,
) -> Result<Vec<AppendedBatch>, StorageError> {
    Ok(plan(&validate(records, config, now_ms)?, next_offset))
}

/// Checks every batch (header, `max.message.bytes`, CRC-32C, every record
/// with [`validate_records_each`], the records Kafka checks one by one, the
/// header's max timestamp) and the whole request against `segment.bytes`;
/// returns (position, size, header) of each batch, in order. Nothing is
/// written unless every batch passes.
///
/// Checked record by record, as Kafka's `LogValidator` does, and refused
/// with every bad record's index ([`StorageError::RejectedRecords`]): a
/// record without a key on a compacted topic, a CreateTime timestamp out of
/// `message.timestamp.before.max.ms`/`after.max.ms`, and a record whose
/// layout is wrong (it does not parse, or its offset delta is not its
/// index; only that record is named, as the ones after it cannot be read).
/// The rest refuses the batch as a whole.
pub(crate) fn validate(
    records: &[u8],
    config: &LogConfig,
    now_ms: i64,
) -> Result<Validated, StorageError> {
    let mut spans = Vec::new();
    let mut pos = 0usize;
    while pos < records.len() {
        let rest = &records[pos..];
        let corrupt = |reason: String| StorageError::CorruptRecord {
            position: pos,
            reason,
        };
        let h = BatchHeader::parse(rest).map_err(|e| corrupt(e.to_string()))?;
        let size = h.total_size();
        if size > rest.len() {
            return Err(corrupt(format!(
                "batch of {size} bytes but only {} left in the request",
                rest.len()
            )));
        }
        if size > config.max_message_bytes as usize {
            return Err(StorageError::RecordTooLarge {
                size,
                max: config.max_message_bytes as usize,
            });
        }
        h.verify_crc(&rest[..size])
            .map_err(|e| corrupt(e.to_string()))?;
        let mut rejected = RecordChecks::new(config, &h, now_ms);
        // Every record last (the costliest check), decompressing within the
        // bound; no allocation for an uncompressed batch.
        validate_records_each(
            &h,
            &rest[BATCH_HEADER_LEN..size],
            &DecompressLimits::default(),
            |r| rejected.check(r),
        )
        .map_err(|e| match e {
            RecordsError::OffsetDeltaMismatch { index, .. }
            | RecordsError::CorruptRecord { index, .. } => StorageError::RejectedRecords {
                position: pos,
                invalid_timestamp: false,
                records: vec![RejectedRecord {
                    batch_index: index,
                    message: e.to_string(),
                }],
            },
            e if e.is_invalid_record() => StorageError::InvalidRecord {
                position: pos,
                reason: e.to_string(),
            },
            e => corrupt(e.to_string()),
        })?;
        rejected.into_result(pos)?;
        // The records passed; a header claiming a max timestamp out of
        // bounds is refused as a whole.
        if config.message_timestamp_type == TimestampType::CreateTime
            && h.max_timestamp != NO_TIMESTAMP
            && let Some(reason) = timestamp_out_of_bounds(h.max_timestamp, config, now_ms)
        {
            return Err(StorageError::InvalidTimestamp {
                timestamp: h.max_timestamp,
                now_ms,
                reason,
            });
        }
        spans.push((pos, size, h));
        pos += size;
    }
    validated(spans, records.len(), config)
}

/// The end of a validation: at least one batch, and a request that fits in
/// a segment (Kafka's last check, on the whole request).
fn validated(
    spans: Vec<(usize, usize, BatchHeader)>,
    len: usize,
    config: &LogConfig,
) -> Result<Validated, StorageError> {
    if spans.is_empty() {
        return Err(StorageError::CorruptRecord {
            position: 0,
            reason: "no record batch in the request".into(),
        });
    }
    if len as u64 > config.segment_bytes {
        return Err(StorageError::RecordListTooLarge {
            size: len,
            max: config.segment_bytes as usize,
        });
    }
    Ok(Validated(spans))
}

/// Why `timestamp` is out of the CreateTime bounds at `now_ms`, if it is.
fn timestamp_out_of_bounds(
    timestamp: i64,
    config: &LogConfig,
    now_ms: i64,
) -> Option<&'static str> {
    if timestamp < now_ms.saturating_sub(config.message_timestamp_before_max_ms) {
        Some("older than message.timestamp.before.max.ms")
    } else if timestamp > now_ms.saturating_add(config.message_timestamp_after_max_ms) {
        Some("newer than message.timestamp.after.max.ms")
    } else {
        None
    }
}

/// The checks Kafka makes record by record, collecting every bad record.
struct RecordChecks {
    require_key: bool,
    /// CreateTime bounds `[low, high]`, when the topic uses CreateTime.
    bounds: Option<(i64, i64)>,
    rejected: Vec<RejectedRecord>,
    invalid_timestamp: bool,
}

impl RecordChecks {
    fn new(config: &LogConfig, header: &BatchHeader, now_ms: i64) -> Self {
        RecordChecks {
            // The cleaner could never drop a record without a key.
            require_key: config.compact() && !header.is_control(),
            bounds: (config.message_timestamp_type == TimestampType::CreateTime).then(|| {
                (
                    now_ms.saturating_sub(config.message_timestamp_before_max_ms),
                    now_ms.saturating_add(config.message_timestamp_after_max_ms),
                )
            }),
            rejected: Vec::new(),
            invalid_timestamp: false,
        }
    }

    /// A record's key first, then its timestamp (one error per record).
    fn check(&mut self, r: RecordInfo) {
        if self.require_key && !r.has_key {
            self.rejected.push(RejectedRecord {
                batch_index: r.index,
                message: "Compacted topic cannot accept message without key".into(),
            });
            return;
        }
        // -1 is "no timestamp", never out of bounds.
        if let Some((low, high)) = self.bounds
            && r.timestamp != NO_TIMESTAMP
            && !(low..=high).contains(&r.timestamp)
        {
            self.invalid_timestamp = true;
            self.rejected.push(RejectedRecord {
                batch_index: r.index,
                message: format!(
                    "Timestamp {} of message with offset {} is out of range. The timestamp should be within [{low}, {high}]",
                    r.timestamp, r.index
                ),
            });
        }
    }

    fn into_result(self, position: usize) -> Result<(), StorageError> {
        if self.rejected.is_empty() {
            return Ok(());
        }
        Err(StorageError::RejectedRecords {
            position,
            invalid_timestamp: self.invalid_timestamp,
            records: self.rejected,
        })
    }
}

/// What the scanner found at a position.
#[derive(Debug)]
pub(crate) enum Scanned {
    /// A complete, valid batch.
    Batch { position: u64, header: BatchHeader },
    /// Not a valid batch (bad header, CRC, offsets, or cut short).
    Invalid { position: u64, reason: String },
}

/// Reads batches of a segment file sequentially through a large buffer.
pub(crate) struct BatchScanner<'a> {
    file: &'a dyn StorageFile,
    end: u64,
    pos: u64,
    buf: Vec<u8>,
    buf_start: u64,
    verify_crc: bool,
}

const SCAN_CHUNK: usize = 1 << 20;
/// Header-only scans read less ahead: batch bodies are skipped.
const HEADER_CHUNK: usize = 4 << 10;

impl<'a> BatchScanner<'a> {
    pub fn new(file: &'a dyn StorageFile, start: u64, end: u64, verify_crc: bool) -> Self {
        BatchScanner {
            file,
            end,
            pos: start,
            buf: Vec::new(),
            buf_start: start,
            verify_crc,
        }
    }

    /// Makes `[pos, pos + need)` available in the buffer (caller checked `end`).
    fn fill(&mut self, need: usize) -> std::io::Result<&[u8]> {
        let have_from = self.pos.saturating_sub(self.buf_start) as usize;
        if self.pos < self.buf_start || have_from + need > self.buf.len() {
            let chunk = if self.verify_crc {
                SCAN_CHUNK
            } else {
                HEADER_CHUNK
            };
            let want = need.max(chunk).min((self.end - self.pos) as usize);
            self.buf.resize(want, 0);
            self.file.read_exact_at(&mut self.buf, self.pos)?;
            self.buf_start = self.pos;
        }
        let from = (self.pos - self.buf_start) as usize;
        Ok(&self.buf[from..from + need])
    }

    /// The next batch, `None` at the end. After an `Invalid`, stops.
    pub fn next_batch(&mut self) -> std::io::Result<Option<Scanned>> {
        if self.pos >= self.end {
            return Ok(None);
        }
        let position = self.pos;
        let left = self.end - self.pos;
        if left < BATCH_HEADER_LEN as u64 {
            self.pos = self.end;
            return Ok(Some(Scanned::Invalid {
                position,
                reason: format!("{left} trailing bytes, less than a batch header"),
            }));
        }
        let header = match BatchHeader::parse(self.fill(BATCH_HEADER_LEN)?) {
            Ok(h) => h,
            Err(e) => {
                self.pos = self.end;
                return Ok(Some(Scanned::Invalid {
                    position,
                    reason: e.to_string(),
                }));
            }
        };
        let size = header.total_size() as u64;
        if size > left {
            self.pos = self.end;
            return Ok(Some(Scanned::Invalid {
                position,
                reason: format!("batch of {size} bytes but only {left} left in the file"),
            }));
        }
        if self.verify_crc {
            let bytes = self.fill(size as usize)?;
            if let Err(e) = header.verify_crc(bytes) {
                self.pos = self.end;
                return Ok(Some(Scanned::Invalid {
                    position,
                    reason: e.to_string(),
                }));
            }
        }
        self.pos += size;
        Ok(Some(Scanned::Batch { position, header }))
    }
}

/// The type of the control batch `header` at `pos` of `file` (its first
/// record's key), `None` when its records cannot be read. Control batches
/// are a few dozen bytes: the whole batch is read.
pub(crate) fn read_control_type(
    file: &dyn StorageFile,
    pos: u64,
    header: &BatchHeader,
) -> std::io::Result<Option<ControlRecordType>> {
    let mut buf = vec![0u8; header.total_size()];
    file.read_exact_at(&mut buf, pos)?;
    Ok(control_type(&buf))
}

/// The type of the control batch `bytes` (one whole batch), `None` when it
/// is not a control batch or its first record cannot be read.
pub fn control_type(bytes: &[u8]) -> Option<ControlRecordType> {
    let batch = RecordBatch::from_bytes(bytes::Bytes::copy_from_slice(bytes)).ok()?;
    batch.control_type(&DecompressLimits::default()).ok()
}

/// Reads the header of the batch at `pos` (which must hold a complete header).
pub(crate) fn read_header(
    file: &dyn StorageFile,
    pos: u64,
    end: u64,
) -> Result<Option<BatchHeader>, String> {
    if pos + BATCH_HEADER_LEN as u64 > end {
        return Ok(None);
    }
    let mut buf = [0u8; BATCH_HEADER_LEN];
    file.read_exact_at(&mut buf, pos)
        .map_err(|e| e.to_string())?;
    let h = BatchHeader::parse(&buf).map_err(|e| e.to_string())?;
    if pos + h.total_size() as u64 > end {
        return Ok(None);
    }
    Ok(Some(h))
}

/// (offset, timestamp) of every record of a batch (decompressing when
/// needed), or `None` when the records cannot be decoded.
pub fn record_timestamps(batch: &[u8]) -> Option<Vec<(i64, i64)>> {
    let rb = RecordBatch::from_bytes(bytes::Bytes::copy_from_slice(batch)).ok()?;
    let h = *rb.header();
    let recs = rb.collect_records(&DecompressLimits::default()).ok()?;
    Some(
        recs.iter()
            .map(|r| {
                let ts = if h.is_log_append_time() {
                    h.max_timestamp
                } else {
                    r.timestamp(h.base_timestamp)
                };
                (r.offset(h.base_offset), ts)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use weir_protocol::records::header::{ATTRIBUTES_OFFSET, RECORDS_COUNT_OFFSET};
    use weir_protocol::records::{Compression, RecordBatchBuilder};

    use super::*;

    const NOW: i64 = 1_700_000_000_000;

    fn batch(codec: Compression, n: usize) -> Vec<u8> {
        let mut b = RecordBatchBuilder::new(codec);
        for i in 0..n {
            b.push(NOW, None, Some(Bytes::from(format!("v{i}"))), vec![])
                .unwrap();
        }
        b.build().unwrap().as_bytes().to_vec()
    }

    /// `batch` with bytes rewritten at `at`, CRC recomputed.
    fn patched(mut b: Vec<u8>, at: usize, bytes: &[u8]) -> Vec<u8> {
        b[at..at + bytes.len()].copy_from_slice(bytes);
        header::write_crc(&mut b);
        b
    }

    #[test]
    fn invalid_records_refuse_the_whole_request_untouched() {
        let config = LogConfig::default();
        let cases = [
            (
                "count 3 for 2 records",
                patched(
                    batch(Compression::None, 2),
                    RECORDS_COUNT_OFFSET,
                    &3i32.to_be_bytes(),
                ),
                true,
            ),
            (
                "codec 7",
                patched(
                    batch(Compression::None, 2),
                    ATTRIBUTES_OFFSET,
                    &7i16.to_be_bytes(),
                ),
                false,
            ),
            (
                "zstd claiming 3 of 2",
                patched(
                    batch(Compression::Zstd, 2),
                    RECORDS_COUNT_OFFSET,
                    &3i32.to_be_bytes(),
                ),
                true,
            ),
        ];
        for (name, bad, invalid_record) in cases {
            // A valid batch first: all or nothing.
            let good = batch(Compression::Lz4, 3);
            let mut request = [good.clone(), bad].concat();
            let before = request.clone();
            let err = validate_and_assign(&mut request, 100, &config, NOW, Some(4)).unwrap_err();
            match (&err, invalid_record) {
                (StorageError::InvalidRecord { position, .. }, true)
                | (StorageError::CorruptRecord { position, .. }, false) => {
                    assert_eq!(*position, good.len(), "{name}")
                }
                _ => panic!("{name}: {err:?}"),
            }
            assert_eq!(request, before, "{name}: request changed");
            assert!(
                validate_and_plan(&before, 100, &config, NOW).is_err(),
                "{name}"
            );
        }
    }

    /// A batch of `keys.len()` records with the given keys and timestamps.
    fn keyed(codec: Compression, records: &[(Option<&str>, i64)]) -> Vec<u8> {
        let mut b = RecordBatchBuilder::new(codec);
        for &(key, ts) in records {
            b.push(
                ts,
                key.map(|k| Bytes::copy_from_slice(k.as_bytes())),
                Some(Bytes::from("v")),
                vec![],
            )
            .unwrap();
        }
        b.build().unwrap().as_bytes().to_vec()
    }

    fn rejected(err: &StorageError) -> (bool, Vec<usize>) {
        match err {
            StorageError::RejectedRecords {
                invalid_timestamp,
                records,
                ..
            } => (
                *invalid_timestamp,
                records.iter().map(|r| r.batch_index).collect(),
            ),
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn records_are_checked_one_by_one_and_every_bad_one_is_named() {
        let compacted = LogConfig {
            cleanup_policy: "compact".into(),
            ..LogConfig::default()
        };
        let create_time = LogConfig {
            message_timestamp_before_max_ms: 1_000,
            message_timestamp_after_max_ms: 1_000,
            ..LogConfig::default()
        };
        for codec in Compression::ALL {
            // Keys on a compacted topic: records 1 and 3 have none.
            let request = keyed(
                codec,
                &[(Some("a"), NOW), (None, NOW), (Some(""), NOW), (None, NOW)],
            );
            let err = validate(&request, &compacted, NOW).unwrap_err();
            assert_eq!(rejected(&err), (false, vec![1, 3]), "{codec:?}");
            assert!(validate(&request, &LogConfig::default(), NOW).is_ok());
            // Timestamps: record 0 too old, record 2 too new, -1 is none.
            let request = keyed(
                codec,
                &[
                    (None, NOW - 1_001),
                    (None, NOW - 1_000),
                    (None, NOW + 1_001),
                    (None, NOW + 1_000),
                    (None, NO_TIMESTAMP),
                ],
            );
            let err = validate(&request, &create_time, NOW).unwrap_err();
            assert_eq!(rejected(&err), (true, vec![0, 2]), "{codec:?}");
            let StorageError::RejectedRecords { records, .. } = &err else {
                unreachable!()
            };
            assert_eq!(
                records[0].message,
                format!(
                    "Timestamp {} of message with offset 0 is out of range. The timestamp should be within [{}, {}]",
                    NOW - 1_001,
                    NOW - 1_000,
                    NOW + 1_000
                )
            );
            // A timestamp error among key errors makes it INVALID_TIMESTAMP.
            let both = LogConfig {
                cleanup_policy: "compact".into(),
                ..create_time.clone()
            };
            let request = keyed(codec, &[(None, NOW), (Some("k"), NOW + 5_000)]);
            let err = validate(&request, &both, NOW).unwrap_err();
            assert_eq!(rejected(&err), (true, vec![0, 1]), "{codec:?}");
        }
    }

    #[test]
    fn rejected_records_read_as_kafka_says_them() {
        let records = (0..4)
            .map(|i| RejectedRecord {
                batch_index: i,
                message: format!("bad {i}"),
            })
            .collect();
        let err = StorageError::RejectedRecords {
            position: 0,
            invalid_timestamp: false,
            records,
        };
        assert_eq!(
            err.to_string(),
            "One or more records have been rejected due to 4 record errors in total, and only \
             showing the first three errors at most: [RecordError(batchIndex=0, message='bad 0'), \
             RecordError(batchIndex=1, message='bad 1'), RecordError(batchIndex=2, message='bad 2')]"
        );
    }

    #[test]
    fn a_request_larger_than_a_segment_is_a_record_list_too_large() {
        let request = batch(Compression::None, 20);
        let size = request.len();
        let fits = LogConfig {
            segment_bytes: size as u64,
            ..LogConfig::default()
        };
        assert!(validate(&request, &fits, NOW).is_ok());
        let small = LogConfig {
            segment_bytes: size as u64 - 1,
            ..LogConfig::default()
        };
        assert!(matches!(
            validate(&request, &small, NOW),
            Err(StorageError::RecordListTooLarge { size: s, max }) if s == size && max == size - 1
        ));
        // Two batches that each fit but not together.
        let two = [request.clone(), request.clone()].concat();
        assert!(matches!(
            validate(&two, &fits, NOW),
            Err(StorageError::RecordListTooLarge { .. })
        ));
        // Over max.message.bytes as well: that is checked first, per batch.
        let both = LogConfig {
            max_message_bytes: size as u32 - 1,
            ..small
        };
        assert!(matches!(
            validate(&request, &both, NOW),
            Err(StorageError::RecordTooLarge { .. })
        ));
    }

    #[test]
    fn valid_batches_get_offsets_with_every_codec() {
        let config = LogConfig::default();
        let mut request: Vec<u8> = Compression::ALL
            .iter()
            .flat_map(|&codec| batch(codec, 4))
            .collect();
        let appended = validate_and_assign(&mut request, 10, &config, NOW, None).unwrap();
        let bases: Vec<i64> = appended.iter().map(|b| b.base_offset).collect();
        assert_eq!(bases, [10, 14, 18, 22, 26]);
        assert_eq!(appended.iter().map(|b| b.records).sum::<i64>(), 20);
    }
}
