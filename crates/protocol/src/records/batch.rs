//! A view over one record batch, and splitters that cut a buffer of
//! concatenated batches (a Produce request's `records`, a fetch response, a
//! segment file) into batches.

use bytes::Bytes;

use super::compression::{Compression, DecompressLimits, decompress};
use super::control::{ControlRecordType, EndTxnMarker};
use super::error::RecordsError;
use super::header::{
    BATCH_HEADER_LEN, BatchHeader, CRC_START, HeaderError, LENGTH_OFFSET, LOG_OVERHEAD,
    MAGIC_OFFSET, MAGIC_V2, bytes_at,
};
use super::record::{MIN_RECORD_SIZE, Record};

/// Locates the batch starting at `buf[pos..]`. Returns its header; the batch
/// occupies `pos..pos + header.total_size()`. Does not check the CRC.
pub fn next_batch(buf: &[u8], pos: usize) -> Result<BatchHeader, RecordsError> {
    split_batch(buf, pos).map(|(header, _)| header)
}

/// [`next_batch`], also returning the batch's bytes.
fn split_batch(buf: &[u8], pos: usize) -> Result<(BatchHeader, &[u8]), RecordsError> {
    let rest = buf.get(pos..).unwrap_or_default();
    // The length field ends the part of the header it does not count.
    let Some(length) = bytes_at(rest, LENGTH_OFFSET).map(i32::from_be_bytes) else {
        return Err(RecordsError::Incomplete {
            position: pos,
            needed: LOG_OVERHEAD,
            available: rest.len(),
        });
    };
    if (length as i64) < (BATCH_HEADER_LEN - LOG_OVERHEAD) as i64 {
        return Err(RecordsError::InvalidHeader {
            position: pos,
            error: HeaderError::LengthTooSmall { length },
        });
    }
    // Reject a wrong magic as soon as it is visible, before waiting for the
    // rest of a batch that will never be valid.
    if let Some(&magic) = rest.get(MAGIC_OFFSET)
        && magic as i8 != MAGIC_V2
    {
        return Err(RecordsError::InvalidHeader {
            position: pos,
            error: HeaderError::UnsupportedMagic { magic: magic as i8 },
        });
    }
    let total = length as usize + LOG_OVERHEAD;
    let Some(batch) = rest.get(..total) else {
        return Err(RecordsError::Incomplete {
            position: pos,
            needed: total,
            available: rest.len(),
        });
    };
    let header = BatchHeader::parse(batch).map_err(|e| RecordsError::from_header(pos, e))?;
    Ok((header, batch))
}

/// Checks the CRC of `bytes`, which holds the batch `header` was parsed
/// from.
fn check_crc(header: &BatchHeader, bytes: &[u8]) -> Result<(), RecordsError> {
    let Some(covered) = bytes.get(CRC_START..header.total_size()) else {
        return Err(RecordsError::NotOneBatch {
            batch_size: header.total_size(),
            buffer_len: bytes.len(),
        });
    };
    let computed = crc32c::crc32c(covered);
    if computed != header.crc {
        return Err(RecordsError::CrcMismatch {
            base_offset: header.base_offset,
            stored: header.crc,
            computed,
        });
    }
    Ok(())
}

/// One record batch over its own bytes.
///
/// Always true: `bytes` holds exactly one magic-2 batch
/// (`bytes.len() == header.total_size()`) and `header` was parsed from it.
/// The CRC is only checked by [`RecordBatch::validate_crc`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordBatch {
    header: BatchHeader,
    bytes: Bytes,
}

impl RecordBatch {
    /// Wraps a buffer holding exactly one batch.
    pub fn from_bytes(bytes: Bytes) -> Result<Self, RecordsError> {
        let header = next_batch(&bytes, 0)?;
        let total = header.total_size();
        if bytes.len() != total {
            return Err(RecordsError::NotOneBatch {
                batch_size: total,
                buffer_len: bytes.len(),
            });
        }
        Ok(RecordBatch { header, bytes })
    }

    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    /// The batch as it is on the wire and on disk.
    pub fn as_bytes(&self) -> &Bytes {
        &self.bytes
    }

    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// Total size in bytes, header included.
    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    pub fn base_offset(&self) -> i64 {
        self.header.base_offset
    }

    pub fn last_offset(&self) -> i64 {
        self.header.last_offset()
    }

    /// Offset just past this batch.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().wrapping_add(1)
    }

    pub fn is_control(&self) -> bool {
        self.header.is_control()
    }

    pub fn is_transactional(&self) -> bool {
        self.header.is_transactional()
    }

    pub fn compression(&self) -> Result<Compression, RecordsError> {
        Compression::from_id(self.header.compression())
    }

    /// Checks the stored CRC-32C against the batch contents.
    pub fn validate_crc(&self) -> Result<(), RecordsError> {
        check_crc(&self.header, &self.bytes)
    }

    /// The records section as stored (possibly compressed).
    pub fn records_section(&self) -> &[u8] {
        // `bytes` holds at least a whole header (see the struct's doc).
        self.bytes.get(BATCH_HEADER_LEN..).unwrap_or_default()
    }

    /// The records section decompressed (a zero-copy slice when the batch is
    /// not compressed).
    pub fn decompressed_records(&self, limits: &DecompressLimits) -> Result<Bytes, RecordsError> {
        match self.compression()? {
            Compression::None => Ok(self.bytes.slice(BATCH_HEADER_LEN..)),
            codec => Ok(Bytes::from(decompress(
                codec,
                self.records_section(),
                limits,
            )?)),
        }
    }

    /// Iterates the records, decompressing first when needed. Yields exactly
    /// `records_count` records, then an error if bytes are left over. A batch
    /// declaring no records yields nothing, whatever its section holds.
    pub fn records(&self, limits: &DecompressLimits) -> Result<Records, RecordsError> {
        let count = self.header.records_count;
        if count < 0 {
            return Err(RecordsError::InvalidRecordCount { count });
        }
        // Like Kafka, an empty batch's section is never looked at (an empty
        // batch left by compaction may carry a compressed empty stream).
        let data = if count == 0 {
            Bytes::new()
        } else {
            self.decompressed_records(limits)?
        };
        Ok(Records {
            data,
            pos: 0,
            declared: count,
            index: 0,
            done: false,
        })
    }

    /// All records, or the first error.
    pub fn collect_records(&self, limits: &DecompressLimits) -> Result<Vec<Record>, RecordsError> {
        let iter = self.records(limits)?;
        // Never reserve more than the section could hold.
        let cap =
            (self.header.records_count.max(0) as usize).min(iter.data.len() / MIN_RECORD_SIZE);
        let mut out = Vec::with_capacity(cap);
        for r in iter {
            out.push(r?);
        }
        Ok(out)
    }

    /// For a control batch: the type of its (first) control record.
    pub fn control_type(
        &self,
        limits: &DecompressLimits,
    ) -> Result<ControlRecordType, RecordsError> {
        if !self.is_control() {
            return Err(RecordsError::InvalidControlRecord {
                reason: "batch is not a control batch",
            });
        }
        match self.records(limits)?.next() {
            Some(r) => ControlRecordType::of_record(&r?),
            None => Err(RecordsError::InvalidControlRecord {
                reason: "control batch without records",
            }),
        }
    }

    /// For a COMMIT/ABORT control batch: its marker.
    pub fn end_txn_marker(&self, limits: &DecompressLimits) -> Result<EndTxnMarker, RecordsError> {
        if !self.is_control() {
            return Err(RecordsError::InvalidControlRecord {
                reason: "batch is not a control batch",
            });
        }
        match self.records(limits)?.next() {
            Some(r) => EndTxnMarker::from_record(&r?),
            None => Err(RecordsError::InvalidControlRecord {
                reason: "control batch without records",
            }),
        }
    }
}

/// Iterator over the records of one batch. Stops after the first error.
#[derive(Debug, Clone)]
pub struct Records {
    data: Bytes,
    pos: usize,
    declared: i32,
    index: usize,
    done: bool,
}

impl Iterator for Records {
    type Item = Result<Record, RecordsError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.index == self.declared as usize {
            self.done = true;
            if self.pos != self.data.len() {
                return Some(Err(RecordsError::TrailingBytes {
                    declared: self.declared,
                    remaining: self.data.len() - self.pos,
                }));
            }
            return None;
        }
        if self.pos == self.data.len() {
            self.done = true;
            return Some(Err(RecordsError::MissingRecords {
                declared: self.declared,
                found: self.index,
            }));
        }
        match Record::decode(&self.data, &mut self.pos) {
            Ok(r) => {
                self.index += 1;
                Some(Ok(r))
            }
            Err(error) => {
                self.done = true;
                Some(Err(RecordsError::CorruptRecord {
                    index: self.index,
                    error,
                }))
            }
        }
    }
}

/// Splits a `Bytes` buffer of concatenated batches into [`RecordBatch`]es
/// (zero-copy). Stops after the first error; [`BatchIter::position`] is then
/// the start of the bad or torn batch, i.e. the length of the valid prefix.
#[derive(Debug, Clone)]
pub struct BatchIter {
    buf: Bytes,
    pos: usize,
    verify_crc: bool,
    done: bool,
}

impl BatchIter {
    /// A splitter that also checks each batch's CRC.
    pub fn new(buf: impl Into<Bytes>) -> Self {
        BatchIter {
            buf: buf.into(),
            pos: 0,
            verify_crc: true,
            done: false,
        }
    }

    /// Copies a borrowed buffer, then splits it.
    pub fn from_slice(buf: &[u8]) -> Self {
        Self::new(Bytes::copy_from_slice(buf))
    }

    /// Whether to check CRCs (on by default).
    pub fn verify_crc(mut self, verify: bool) -> Self {
        self.verify_crc = verify;
        self
    }

    /// Byte position of the next batch: after an error, the end of the
    /// valid prefix.
    pub fn position(&self) -> usize {
        self.pos
    }
}

impl Iterator for BatchIter {
    type Item = Result<RecordBatch, RecordsError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.pos == self.buf.len() {
            return None;
        }
        let header = match next_batch(&self.buf, self.pos) {
            Ok(h) => h,
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        let bytes = self.buf.slice(self.pos..self.pos + header.total_size());
        if self.verify_crc
            && let Err(e) = check_crc(&header, &bytes)
        {
            self.done = true;
            return Some(Err(e));
        }
        self.pos += header.total_size();
        Some(Ok(RecordBatch { header, bytes }))
    }
}

/// A batch borrowed from a larger buffer (e.g. a memory-mapped segment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchRef<'a> {
    pub header: BatchHeader,
    /// Position of the batch in the split buffer.
    pub position: usize,
    /// The whole batch, header included.
    pub bytes: &'a [u8],
}

impl BatchRef<'_> {
    pub fn validate_crc(&self) -> Result<(), RecordsError> {
        check_crc(&self.header, self.bytes)
    }

    /// Copies the batch into an owned [`RecordBatch`].
    pub fn to_batch(&self) -> RecordBatch {
        RecordBatch {
            header: self.header,
            bytes: Bytes::copy_from_slice(self.bytes),
        }
    }
}

/// Splits a borrowed buffer into [`BatchRef`]s without copying. Like
/// [`BatchIter`], stops after the first error and checks CRCs unless told
/// otherwise.
#[derive(Debug, Clone)]
pub struct BatchSlices<'a> {
    buf: &'a [u8],
    pos: usize,
    verify_crc: bool,
    done: bool,
}

impl<'a> BatchSlices<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        BatchSlices {
            buf,
            pos: 0,
            verify_crc: true,
            done: false,
        }
    }

    pub fn verify_crc(mut self, verify: bool) -> Self {
        self.verify_crc = verify;
        self
    }

    /// Byte position of the next batch: after an error, the end of the
    /// valid prefix.
    pub fn position(&self) -> usize {
        self.pos
    }
}

impl<'a> Iterator for BatchSlices<'a> {
    type Item = Result<BatchRef<'a>, RecordsError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.pos == self.buf.len() {
            return None;
        }
        let (header, bytes) = match split_batch(self.buf, self.pos) {
            Ok(found) => found,
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        let batch = BatchRef {
            header,
            position: self.pos,
            bytes,
        };
        if self.verify_crc
            && let Err(e) = batch.validate_crc()
        {
            self.done = true;
            return Some(Err(e));
        }
        self.pos += header.total_size();
        Some(Ok(batch))
    }
}
