//! Batch-level helpers: validating a produce request and assigning offsets,
//! scanning batches in a segment file, and finding records by timestamp.

use crate::backend::StorageFile;
use crate::config::{LogConfig, TimestampType};
use crate::error::StorageError;
use weir_protocol::records::header::{
    self, ATTRIBUTES_OFFSET, BATCH_HEADER_LEN, MAX_TIMESTAMP_OFFSET, TIMESTAMP_TYPE_MASK,
};
use weir_protocol::records::{BatchHeader, DecompressLimits, RecordBatch, validate_records};

/// One batch of an accepted append, after offset assignment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AppendedBatch {
    pub base_offset: i64,
    pub size: usize,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub records: i64,
}

/// The batches of a request that passed [`validate`]: (position, size,
/// header) of each, in order.
#[derive(Debug)]
pub(crate) struct Validated(Vec<(usize, usize, BatchHeader)>);

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

/// Checks every batch (header, size limits, CRC-32C, every record with
/// [`validate_records`], timestamps); returns (position, size, header) of
/// each, in order. Nothing is written unless every batch passes.
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
        if config.message_timestamp_type == TimestampType::CreateTime {
            for ts in [h.base_timestamp, h.max_timestamp] {
                if ts < now_ms.saturating_sub(config.message_timestamp_before_max_ms) {
                    return Err(StorageError::InvalidTimestamp {
                        timestamp: ts,
                        now_ms,
                        reason: "older than message.timestamp.before.max.ms",
                    });
                }
                if ts > now_ms.saturating_add(config.message_timestamp_after_max_ms) {
                    return Err(StorageError::InvalidTimestamp {
                        timestamp: ts,
                        now_ms,
                        reason: "newer than message.timestamp.after.max.ms",
                    });
                }
            }
        }
        // Every record last (the costliest check), decompressing within the
        // bound; no allocation for an uncompressed batch.
        validate_records(
            &h,
            &rest[BATCH_HEADER_LEN..size],
            &DecompressLimits::default(),
        )
        .map_err(|e| {
            if e.is_invalid_record() {
                StorageError::InvalidRecord {
                    position: pos,
                    reason: e.to_string(),
                }
            } else {
                corrupt(e.to_string())
            }
        })?;
        spans.push((pos, size, h));
        pos += size;
    }
    if spans.is_empty() {
        return Err(StorageError::CorruptRecord {
            position: 0,
            reason: "no record batch in the request".into(),
        });
    }
    Ok(Validated(spans))
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
