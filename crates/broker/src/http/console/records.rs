//! The record browser: `/api/records?topic=T&partition=P` with either
//! `offset=O` or `timestamp=MS` (neither: from the log start offset) and
//! `limit=N` (default [`DEFAULT_LIMIT`], capped at [`MAX_LIMIT`]).
//!
//! Reads like a consumer does: only below the high watermark, whole batches
//! from the log, records below the start offset dropped, control batches
//! (transaction markers) skipped. Keys, values and header values are shown
//! as UTF-8 text when valid, else as hex, each cut to [`MAX_SHOWN_BYTES`].
//!
//! Damaged data does not fail the page: a batch whose CRC does not match or
//! whose records cannot be decoded becomes one [`ErrorRow`] (its offsets and
//! the reason) among the records and reading goes on after it; where the
//! log cannot be read further (an unreadable batch header, a storage
//! refusal) an error row at that offset ends the page.

use std::fmt::Write as _;

use bytes::Bytes;
use serde::Serialize;
use weir_protocol::records::{BatchIter, Compression, DecompressLimits, RecordBatch};
use weir_storage::StorageError;

use super::ConsoleError;
use super::query::Query;
use crate::broker::Broker;

/// The query parameters `/api/records` accepts.
pub const PARAMS: &[&str] = &["topic", "partition", "offset", "timestamp", "limit"];
/// Records returned when no limit is given.
pub const DEFAULT_LIMIT: usize = 50;
/// Most records one request returns; larger limits are cut to this.
pub const MAX_LIMIT: usize = 500;
/// Bytes of a key, value or header value shown; the rest is cut.
pub const MAX_SHOWN_BYTES: usize = 2048;
/// Bytes read from the log per step.
const READ_CHUNK_BYTES: usize = 1 << 20;
/// Most log bytes one request reads (a bound on work when records are huge
/// or the start lies deep inside a large compressed batch).
const MAX_SCAN_BYTES: usize = 16 << 20;

/// Bytes rendered for display.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Shown {
    /// `utf8` or `hex`.
    pub encoding: &'static str,
    pub data: String,
    /// Size of the whole field in bytes.
    pub size: usize,
    /// True when `data` shows only the first [`MAX_SHOWN_BYTES`] bytes.
    pub truncated: bool,
}

/// Renders bytes: UTF-8 text when the whole field is valid UTF-8, else hex.
pub fn show(bytes: &[u8]) -> Shown {
    let size = bytes.len();
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            let mut cut = text.len().min(MAX_SHOWN_BYTES);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            Shown {
                encoding: "utf8",
                data: text.get(..cut).unwrap_or_default().to_string(),
                size,
                truncated: cut < size,
            }
        }
        Err(_) => {
            let shown = bytes.get(..MAX_SHOWN_BYTES).unwrap_or(bytes);
            let mut data = String::with_capacity(shown.len() * 2);
            for b in shown {
                // writing to a String cannot fail
                let _ = write!(data, "{b:02x}");
            }
            Shown {
                encoding: "hex",
                data,
                size,
                truncated: shown.len() < size,
            }
        }
    }
}

fn show_opt(b: &Option<Bytes>) -> Option<Shown> {
    b.as_deref().map(show)
}

#[derive(Debug, Serialize)]
pub struct ShownHeader {
    pub key: String,
    pub value: Option<Shown>,
}

#[derive(Debug, Serialize)]
pub struct ShownRecord {
    pub offset: i64,
    pub timestamp: i64,
    /// `CreateTime` or `LogAppendTime`.
    pub timestamp_type: &'static str,
    pub key: Option<Shown>,
    pub value: Option<Shown>,
    pub headers: Vec<ShownHeader>,
    /// Codec of the batch the record was stored in.
    pub compression: &'static str,
}

/// A batch (or a place in the log) that could not be read, shown as a row
/// among the records.
#[derive(Debug, Serialize)]
pub struct ErrorRow {
    /// The batch's base offset, or the offset where reading stopped.
    pub offset: i64,
    /// The batch's last offset, when its header could be read.
    pub last_offset: Option<i64>,
    /// Why it could not be read.
    pub error: String,
}

/// One row of a page: a record, or data that could not be read.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Row {
    Record(ShownRecord),
    Error(ErrorRow),
}

#[derive(Debug, Serialize)]
pub struct RecordsPage {
    pub topic: String,
    pub partition: i32,
    pub log_start_offset: i64,
    pub high_watermark: i64,
    /// The limit applied (the requested one, capped at [`MAX_LIMIT`]).
    pub limit: usize,
    /// Where reading started: the requested offset (raised to the log start
    /// offset when below it) or the first offset with a timestamp ≥ the
    /// requested one (the high watermark when there is none).
    pub start_offset: i64,
    /// The offset to ask for to continue after this page.
    pub next_offset: i64,
    /// Records and error rows, in offset order.
    pub records: Vec<Row>,
}

/// Whether a storage error means damaged data (shown as an error row)
/// rather than a failed read (a 500).
fn is_damage(e: &StorageError) -> bool {
    matches!(
        e,
        StorageError::CorruptLog { .. }
            | StorageError::CorruptBelowRecoveryPoint { .. }
            | StorageError::CorruptRecord { .. }
    )
}

fn error_row(offset: i64, batch: Option<&RecordBatch>, error: impl ToString) -> Row {
    Row::Error(ErrorRow {
        offset: batch.map_or(offset, RecordBatch::base_offset),
        last_offset: batch.map(RecordBatch::last_offset),
        error: error.to_string(),
    })
}

/// Reads one page of records as described in the module doc.
pub fn read(b: &Broker, q: &Query) -> Result<RecordsPage, ConsoleError> {
    let topic = q.required("topic")?;
    let partition: i32 = q.int("partition")?.unwrap_or(0);
    let offset: Option<i64> = q.int("offset")?;
    let timestamp: Option<i64> = q.int("timestamp")?;
    let limit: usize = match q.int::<i64>("limit")? {
        None => DEFAULT_LIMIT,
        Some(n) if n < 1 => {
            return Err(ConsoleError::BadRequest(format!(
                "limit must be at least 1 (got {n})"
            )));
        }
        Some(n) => usize::try_from(n).unwrap_or(MAX_LIMIT).min(MAX_LIMIT),
    };
    if offset.is_some() && timestamp.is_some() {
        return Err(ConsoleError::BadRequest(
            "give either offset or timestamp, not both".into(),
        ));
    }
    if let Some(o) = offset.filter(|o| *o < 0) {
        return Err(ConsoleError::BadRequest(format!(
            "offset must not be negative (got {o})"
        )));
    }
    if let Some(t) = timestamp.filter(|t| *t < 0) {
        return Err(ConsoleError::BadRequest(format!(
            "timestamp must not be negative (got {t})"
        )));
    }
    let meta = b.topic(topic).ok_or_else(|| ConsoleError::NotFound {
        what: "topic",
        name: topic.to_string(),
    })?;
    let log = b
        .replicas
        .log(topic, partition)
        .filter(|_| (0..meta.partitions).contains(&partition))
        .ok_or_else(|| ConsoleError::NotFound {
            what: "partition",
            name: format!("{topic}-{partition}"),
        })?;
    let log_start = log.log_start_offset();
    let hw = log.high_watermark();
    let start = match (offset, timestamp) {
        (Some(o), _) => o.max(log_start),
        (None, Some(ts)) => match log.offset_for_timestamp(ts)? {
            Some((o, _)) if o < hw => o.max(log_start),
            _ => hw,
        },
        (None, None) => log_start,
    };
    let mut records = Vec::new();
    let mut pos = start;
    let mut scanned = 0usize;
    let limits = DecompressLimits::default();
    'read: while records.len() < limit && pos < hw && scanned < MAX_SCAN_BYTES {
        let read = match log.read(pos, READ_CHUNK_BYTES, hw, true) {
            Ok(r) => r,
            Err(e) if is_damage(&e) => {
                records.push(error_row(pos, None, e));
                break;
            }
            Err(e) => return Err(e.into()),
        };
        if read.total_bytes == 0 {
            break;
        }
        let mut data = Vec::with_capacity(read.total_bytes);
        for region in &read.regions {
            data.extend_from_slice(&region.read_to_vec()?);
        }
        scanned += data.len();
        let before = pos;
        // CRCs are checked per batch below, so a bad one is a row, not the end
        let mut batches = BatchIter::new(data).verify_crc(false);
        for batch in batches.by_ref() {
            let batch = match batch {
                Ok(b) => b,
                // a batch cut at the end of this read: read on from `pos`
                Err(e) if e.is_incomplete() && pos > before => break,
                Err(e) => {
                    // the next batch cannot be located: nothing after it
                    // can be read
                    records.push(error_row(pos, None, e));
                    break 'read;
                }
            };
            let header = *batch.header();
            if batch.next_offset() <= pos {
                continue;
            }
            if records.len() >= limit {
                break 'read;
            }
            if let Err(e) = batch.validate_crc() {
                records.push(error_row(pos, Some(&batch), e));
                pos = pos.max(batch.next_offset());
                continue;
            }
            if batch.is_control() {
                pos = pos.max(batch.next_offset());
                continue;
            }
            let compression = Compression::from_id(header.compression())
                .map(Compression::name)
                .unwrap_or("unknown");
            let decoded = match batch.collect_records(&limits) {
                Ok(d) => d,
                Err(e) => {
                    records.push(error_row(pos, Some(&batch), e));
                    pos = pos.max(batch.next_offset());
                    continue;
                }
            };
            for r in decoded {
                let off = r.offset(header.base_offset);
                if off < pos {
                    continue;
                }
                if records.len() >= limit {
                    break 'read;
                }
                let (timestamp, timestamp_type) = if header.is_log_append_time() {
                    (header.max_timestamp, "LogAppendTime")
                } else {
                    (r.timestamp(header.base_timestamp), "CreateTime")
                };
                records.push(Row::Record(ShownRecord {
                    offset: off,
                    timestamp,
                    timestamp_type,
                    key: show_opt(&r.key),
                    value: show_opt(&r.value),
                    headers: r
                        .headers
                        .iter()
                        .map(|h| ShownHeader {
                            key: h.key.clone(),
                            value: show_opt(&h.value),
                        })
                        .collect(),
                    compression,
                }));
                pos = off + 1;
            }
            pos = pos.max(batch.next_offset());
        }
        if pos <= before {
            // no progress: stop rather than spin
            break;
        }
    }
    Ok(RecordsPage {
        topic: topic.to_string(),
        partition,
        log_start_offset: log_start,
        high_watermark: hw,
        limit,
        start_offset: start,
        next_offset: pos.min(hw).max(start),
        records,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_shown_as_text_and_binary_as_hex() {
        assert_eq!(
            show(b"h\xc3\xa9llo"),
            Shown {
                encoding: "utf8",
                data: "héllo".into(),
                size: 6,
                truncated: false
            }
        );
        assert_eq!(
            show(&[0x00, 0xff, 0x10]),
            Shown {
                encoding: "hex",
                data: "00ff10".into(),
                size: 3,
                truncated: false
            }
        );
    }

    #[test]
    fn long_fields_are_cut_on_a_char_boundary() {
        // 'é' is two bytes: an odd cut point lands inside one
        let text = "é".repeat(MAX_SHOWN_BYTES);
        let s = show(text.as_bytes());
        assert_eq!(s.encoding, "utf8");
        assert!(s.truncated);
        assert_eq!(s.size, MAX_SHOWN_BYTES * 2);
        assert!(s.data.len() <= MAX_SHOWN_BYTES);
        let odd = format!("a{text}");
        let s = show(odd.as_bytes());
        assert!(s.data.len() < MAX_SHOWN_BYTES);
        assert!(s.data.starts_with('a'));
        let bin = vec![0xffu8; MAX_SHOWN_BYTES + 10];
        let s = show(&bin);
        assert_eq!(s.encoding, "hex");
        assert!(s.truncated);
        assert_eq!(s.data.len(), MAX_SHOWN_BYTES * 2);
    }
}
