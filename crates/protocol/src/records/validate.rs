//! Validation of every record of a produced batch, before a leader appends
//! it (the checks of Kafka's `LogValidator` that apply to magic 2).
//!
//! A batch whose header and CRC are fine may still hold records a consumer
//! cannot read. [`validate_records`] refuses, for a produced batch:
//!
//! - a `recordsCount` below 1, or a `lastOffsetDelta` other than
//!   `recordsCount − 1` (the offsets the batch takes must be its records);
//! - a codec id other than 0–4;
//! - a compressed section that does not decompress, or decompresses to more
//!   than [`DecompressLimits::max_bytes`];
//! - a record that does not parse (the same rules as [`Record::decode`]:
//!   every length fits, header keys are UTF-8, the fields fill the record);
//! - a record whose offset delta is not its index (0, 1, 2, …);
//! - fewer records than declared, or bytes left after the last one.
//!
//! [`validate_records_each`] also hands each record's index, timestamp and
//! whether it has a key to the caller, for the checks Kafka makes record by
//! record and answers with the index of each bad record (a missing key on a
//! compacted topic, a timestamp out of bounds).
//!
//! Cost: one pass, no copy. An uncompressed batch is checked in place
//! without allocating. gzip, lz4 and zstd are decompressed as a stream into a
//! window that holds one record at a time (it grows only for a record larger
//! than 32 KiB, and never past the bound), zstd with a per-thread context
//! reused across batches; snappy has no streaming decoder
//! and is decompressed whole, within the bound, as
//! [`decompress`](super::compression::decompress) does.
//!
//! ```
//! use bytes::Bytes;
//! use weir_protocol::records::{Compression, DecompressLimits, RecordBatchBuilder, validate_records};
//!
//! let mut b = RecordBatchBuilder::new(Compression::Zstd);
//! b.push(1_000, None, Some(Bytes::from("value")), vec![])?;
//! let batch = b.build()?;
//! validate_records(batch.header(), batch.records_section(), &DecompressLimits::default())?;
//! # Ok::<(), weir_protocol::records::RecordsError>(())
//! ```
//!
//! [`Record::decode`]: super::Record::decode

use std::cell::RefCell;
use std::io::Read;

use zstd::zstd_safe::{DCtx, DParameter, ResetDirective};

use super::compression::{self, Compression, DecompressLimits, READ_CHUNK};
use super::error::RecordsError;
use super::header::BatchHeader;
use super::record::scan_record;

/// Longest record length prefix (a varint).
const MAX_LENGTH_PREFIX: usize = 5;

/// Checks every record of a produced batch: `header` is the batch's parsed
/// header (its CRC already checked), `section` the bytes after the 61-byte
/// header. Errors for which [`RecordsError::is_invalid_record`] is true are
/// Kafka's `INVALID_RECORD`, the others `CORRUPT_MESSAGE`.
pub fn validate_records(
    header: &BatchHeader,
    section: &[u8],
    limits: &DecompressLimits,
) -> Result<(), RecordsError> {
    validate_records_each(header, section, limits, |_| {})
}

/// What a broker checks of one record beyond its layout: its index in the
/// batch, its timestamp (the batch's base timestamp plus the record's
/// delta) and whether it has a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordInfo {
    pub index: usize,
    pub timestamp: i64,
    pub has_key: bool,
}

/// [`validate_records`], calling `on_record` for each record in order once
/// it has parsed (so for every record when the result is `Ok`).
pub fn validate_records_each(
    header: &BatchHeader,
    section: &[u8],
    limits: &DecompressLimits,
    mut on_record: impl FnMut(RecordInfo),
) -> Result<(), RecordsError> {
    let on_record: &mut dyn FnMut(RecordInfo) = &mut on_record;
    let base_timestamp = header.base_timestamp;
    let count = header.records_count;
    if count <= 0 {
        return Err(RecordsError::InvalidRecordCount { count });
    }
    if header.last_offset_delta != count - 1 {
        return Err(RecordsError::InconsistentOffsetRange {
            records_count: count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    let codec = Compression::from_id(header.compression())?;
    let max = limits.max_bytes;
    match codec {
        Compression::None => check_records(&mut Slice(section), count, base_timestamp, on_record),
        Compression::Zstd => with_zstd_context(limits, |dctx| {
            let reader = zstd::stream::read::Decoder::with_context(section, dctx);
            check_records(
                &mut Stream::new(codec, reader, max),
                count,
                base_timestamp,
                on_record,
            )
        }),
        Compression::Gzip | Compression::Lz4 => {
            let reader = compression::stream_decoder(codec, section, limits)?.ok_or(
                RecordsError::Decompress {
                    codec,
                    message: "no streaming decoder".into(),
                },
            )?;
            check_records(
                &mut Stream::new(codec, reader, max),
                count,
                base_timestamp,
                on_record,
            )
        }
        Compression::Snappy => {
            let data = compression::decompress(codec, section, limits)?;
            check_records(&mut Slice(&data), count, base_timestamp, on_record)
        }
    }
}

thread_local! {
    /// One zstd decompression context per thread, reused from batch to
    /// batch: a fresh context allocates its window buffers (2 MiB for a
    /// level-3 stream) every time, which costs more than decompressing a
    /// 16 KiB batch.
    static ZSTD_DCTX: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's zstd context, its window capped for
/// `limits` (as [`compression::stream_decoder`] caps it).
fn with_zstd_context<T>(
    limits: &DecompressLimits,
    f: impl FnOnce(&mut DCtx<'static>) -> Result<T, RecordsError>,
) -> Result<T, RecordsError> {
    let fail = |message: &str| RecordsError::Decompress {
        codec: Compression::Zstd,
        message: message.to_string(),
    };
    let prepare = |dctx: &mut DCtx<'static>| {
        // Parameters may only change between frames: drop whatever an
        // earlier, failed batch left in the context first.
        dctx.reset(ResetDirective::SessionOnly)
            .map_err(|code| fail(zstd::zstd_safe::get_error_name(code)))?;
        dctx.set_parameter(DParameter::WindowLogMax(compression::window_log_for(
            limits.max_bytes,
        )))
        .map_err(|code| fail(zstd::zstd_safe::get_error_name(code)))
    };
    ZSTD_DCTX.with(|cell| {
        // Never re-entered today; if it were, a fresh context would do.
        let Ok(mut slot) = cell.try_borrow_mut() else {
            let mut dctx = DCtx::try_create().ok_or_else(|| fail("cannot create a context"))?;
            prepare(&mut dctx)?;
            return f(&mut dctx);
        };
        let dctx = match &mut *slot {
            Some(dctx) => dctx,
            None => slot.insert(DCtx::try_create().ok_or_else(|| fail("cannot create a context"))?),
        };
        prepare(dctx)?;
        f(dctx)
    })
}

/// The records section as the checker reads it.
trait Source {
    /// The bytes from the current position: at least `need` of them, fewer
    /// only when the section ends first.
    fn window(&mut self, need: usize) -> Result<&[u8], RecordsError>;
    /// Moves the position `n` bytes on (`n` ≤ the last window's length).
    fn advance(&mut self, n: usize);
    /// How many bytes follow the position (a stream is read to its end,
    /// within the bound).
    fn remaining(&mut self) -> Result<usize, RecordsError>;
}

/// `count` records numbered 0, 1, 2, … and nothing after them; each is
/// handed to `on_record` once it has parsed.
fn check_records(
    src: &mut impl Source,
    count: i32,
    base_timestamp: i64,
    on_record: &mut dyn FnMut(RecordInfo),
) -> Result<(), RecordsError> {
    for index in 0..count as usize {
        let head = src.window(MAX_LENGTH_PREFIX)?;
        if head.is_empty() {
            return Err(RecordsError::MissingRecords {
                declared: count,
                found: index,
            });
        }
        // The whole record must be in the window before it is scanned. A
        // bad length prefix is left to the scanner to report.
        let need = match crate::varint::read_varint(head) {
            Ok((len, n)) if len >= 0 => n + len as usize,
            _ => head.len(),
        };
        let record = src.window(need)?;
        let mut end = 0;
        let layout = scan_record(record, &mut end, |_, _, _| {})
            .map_err(|error| RecordsError::CorruptRecord { index, error })?;
        if layout.offset_delta as i64 != index as i64 {
            return Err(RecordsError::OffsetDeltaMismatch {
                index,
                offset_delta: layout.offset_delta,
            });
        }
        on_record(RecordInfo {
            index,
            timestamp: base_timestamp.saturating_add(layout.timestamp_delta),
            has_key: layout.key.is_some(),
        });
        src.advance(end);
    }
    match src.remaining()? {
        0 => Ok(()),
        remaining => Err(RecordsError::TrailingBytes {
            declared: count,
            remaining,
        }),
    }
}

/// An uncompressed section (or a decompressed one), read in place.
struct Slice<'a>(&'a [u8]);

impl Source for Slice<'_> {
    fn window(&mut self, _need: usize) -> Result<&[u8], RecordsError> {
        Ok(self.0)
    }

    fn advance(&mut self, n: usize) {
        self.0 = self.0.get(n..).unwrap_or_default();
    }

    fn remaining(&mut self) -> Result<usize, RecordsError> {
        Ok(self.0.len())
    }
}

/// A decompressing reader seen through a window `buf[start..end]` that
/// holds at least the current record. Invariant: `pulled` (bytes read from
/// the decoder) never exceeds `max` without the read failing, so the window
/// never holds more than `max` bytes.
struct Stream<R> {
    codec: Compression,
    reader: R,
    max: usize,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    pulled: usize,
    eof: bool,
}

impl<R: Read> Stream<R> {
    fn new(codec: Compression, reader: R, max: usize) -> Self {
        Stream {
            codec,
            reader,
            max,
            buf: Vec::new(),
            start: 0,
            end: 0,
            pulled: 0,
            eof: false,
        }
    }

    /// Reads once into the free end of the buffer, making room first
    /// (moving the window to the front, then growing the buffer, at most to
    /// one byte past the bound).
    fn fill_once(&mut self) -> Result<(), RecordsError> {
        if self.end == self.buf.len() && self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            let cap = self.max.saturating_add(1);
            let len = (self.buf.len() * 2).max(READ_CHUNK).min(cap);
            if len == self.buf.len() {
                return Err(self.too_large());
            }
            // Exact: the default doubling would overshoot the cap.
            self.buf.reserve_exact(len - self.buf.len());
            self.buf.resize(len, 0);
        }
        let n = loop {
            // `end <= buf.len()`: the window lies inside the buffer.
            match self
                .reader
                .read(self.buf.get_mut(self.end..).unwrap_or_default())
            {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(RecordsError::Decompress {
                        codec: self.codec,
                        message: e.to_string(),
                    });
                }
            }
        };
        if n == 0 {
            self.eof = true;
        }
        self.pulled += n;
        if self.pulled > self.max {
            return Err(self.too_large());
        }
        self.end += n;
        Ok(())
    }

    fn too_large(&self) -> RecordsError {
        RecordsError::DecompressedTooLarge {
            codec: self.codec,
            limit: self.max,
        }
    }
}

impl<R: Read> Source for Stream<R> {
    fn window(&mut self, need: usize) -> Result<&[u8], RecordsError> {
        while self.end - self.start < need && !self.eof {
            self.fill_once()?;
        }
        Ok(self.buf.get(self.start..self.end).unwrap_or_default())
    }

    fn advance(&mut self, n: usize) {
        self.start += n;
        debug_assert!(self.start <= self.end);
    }

    fn remaining(&mut self) -> Result<usize, RecordsError> {
        // Count what is left by reading it through the window, dropping
        // each chunk once counted.
        let mut left = 0;
        loop {
            left += self.end - self.start;
            self.start = 0;
            self.end = 0;
            if self.eof {
                return Ok(left);
            }
            self.fill_once()?;
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::records::{RecordBatch, RecordBatchBuilder, RecordError, RecordHeader};

    fn batch(codec: Compression, n: usize, value_len: usize) -> RecordBatch {
        let mut b = RecordBatchBuilder::new(codec).base_timestamp(1_000);
        for i in 0..n {
            let value = Bytes::from(vec![b'v'; value_len]);
            let headers = vec![RecordHeader {
                key: format!("h{i}"),
                value: Some(Bytes::from_static(b"x")),
            }];
            b.push(
                1_000 + i as i64,
                Some(Bytes::from(format!("k{i}"))),
                Some(value),
                headers,
            )
            .unwrap();
        }
        b.build().unwrap()
    }

    fn check(b: &RecordBatch) -> Result<(), RecordsError> {
        validate_records(
            b.header(),
            b.records_section(),
            &DecompressLimits::default(),
        )
    }

    #[test]
    fn valid_batches_pass_with_every_codec() {
        for codec in Compression::ALL {
            for (n, value_len) in [(1, 0), (3, 10), (50, 1024), (2, 100_000)] {
                assert_eq!(check(&batch(codec, n, value_len)), Ok(()), "{codec:?} {n}");
            }
        }
    }

    #[test]
    fn a_record_larger_than_the_read_chunk_grows_the_window_only_to_the_bound() {
        for codec in [Compression::Gzip, Compression::Lz4, Compression::Zstd] {
            let b = batch(codec, 1, 3 * READ_CHUNK);
            let section_len = b.records_section().len();
            let decompressed = b
                .decompressed_records(&DecompressLimits::default())
                .unwrap();
            let exact = DecompressLimits {
                max_bytes: decompressed.len(),
            };
            assert_eq!(
                validate_records(b.header(), b.records_section(), &exact),
                Ok(())
            );
            let short = DecompressLimits {
                max_bytes: decompressed.len() - 1,
            };
            assert_eq!(
                validate_records(b.header(), b.records_section(), &short),
                Err(RecordsError::DecompressedTooLarge {
                    codec,
                    limit: decompressed.len() - 1
                }),
                "{codec:?} ({section_len} compressed bytes)"
            );
        }
    }

    #[test]
    fn each_record_is_reported_with_its_timestamp_and_key() {
        for codec in Compression::ALL {
            let mut b = RecordBatchBuilder::new(codec).base_timestamp(1_000);
            for (ts, key) in [(1_000, Some("k")), (900, None), (5_000, Some(""))] {
                b.push(ts, key.map(Bytes::from), Some(Bytes::from("v")), vec![])
                    .unwrap();
            }
            let b = b.build().unwrap();
            let mut seen = Vec::new();
            validate_records_each(
                b.header(),
                b.records_section(),
                &DecompressLimits::default(),
                |r| seen.push(r),
            )
            .unwrap();
            let expected = [(0, 1_000, true), (1, 900, false), (2, 5_000, true)].map(
                |(index, timestamp, has_key)| RecordInfo {
                    index,
                    timestamp,
                    has_key,
                },
            );
            assert_eq!(seen, expected, "{codec:?}");
        }
    }

    #[test]
    fn count_and_offset_range_must_agree() {
        let b = batch(Compression::None, 1, 5);
        let mut h = *b.header();
        h.records_count = 1000;
        assert_eq!(
            validate_records(&h, b.records_section(), &DecompressLimits::default()),
            Err(RecordsError::InconsistentOffsetRange {
                records_count: 1000,
                last_offset_delta: 0
            })
        );
        h.last_offset_delta = 999;
        assert_eq!(
            validate_records(&h, b.records_section(), &DecompressLimits::default()),
            Err(RecordsError::MissingRecords {
                declared: 1000,
                found: 1
            })
        );
        for count in [0, -1] {
            h.records_count = count;
            h.last_offset_delta = count - 1;
            assert_eq!(
                validate_records(&h, b.records_section(), &DecompressLimits::default()),
                Err(RecordsError::InvalidRecordCount { count })
            );
        }
    }

    #[test]
    fn unknown_codec() {
        let b = batch(Compression::None, 1, 5);
        let mut h = *b.header();
        h.attributes |= 7;
        assert_eq!(
            validate_records(&h, b.records_section(), &DecompressLimits::default()),
            Err(RecordsError::UnknownCompression { id: 7 })
        );
    }

    #[test]
    fn garbage_and_left_over_bytes() {
        let b = batch(Compression::None, 2, 5);
        let h = *b.header();
        let limits = DecompressLimits::default();
        // A length prefix running past the section.
        let err = validate_records(&h, &[0x7e, 0, 0, 0], &limits).unwrap_err();
        assert!(
            matches!(
                err,
                RecordsError::CorruptRecord {
                    index: 0,
                    error: RecordError::LengthExceedsRemaining { .. }
                }
            ),
            "{err:?}"
        );
        let mut extra = b.records_section().to_vec();
        extra.push(0);
        assert_eq!(
            validate_records(&h, &extra, &limits),
            Err(RecordsError::TrailingBytes {
                declared: 2,
                remaining: 1
            })
        );
        // The same through a compressed stream.
        let mut hz = h;
        hz.attributes |= Compression::Zstd.id() as i16;
        let mut z = Vec::new();
        compression::compress(Compression::Zstd, &extra, &mut z).unwrap();
        assert_eq!(
            validate_records(&hz, &z, &limits),
            Err(RecordsError::TrailingBytes {
                declared: 2,
                remaining: 1
            })
        );
        assert!(matches!(
            validate_records(&hz, b"definitely not zstd", &limits),
            Err(RecordsError::Decompress {
                codec: Compression::Zstd,
                ..
            })
        ));
    }

    #[test]
    fn offset_deltas_must_count_up_from_zero() {
        // Deltas 0 and 2 in a batch of two records claiming deltas 0..=1.
        let mut b = RecordBatchBuilder::new(Compression::None);
        for (offset, value) in [(0, "a"), (2, "b")] {
            b.push_at(offset, 1_000, None, Some(Bytes::from(value)), vec![])
                .unwrap();
        }
        let b = b.build().unwrap();
        let mut h = *b.header();
        h.last_offset_delta = 1;
        assert_eq!(
            validate_records(&h, b.records_section(), &DecompressLimits::default()),
            Err(RecordsError::OffsetDeltaMismatch {
                index: 1,
                offset_delta: 2
            })
        );
    }

    #[test]
    fn the_reused_zstd_context_recovers_from_a_failed_batch() {
        let good = batch(Compression::Zstd, 20, 2000);
        let limits = DecompressLimits::default();
        let small = DecompressLimits { max_bytes: 1000 };
        let section = good.records_section();
        // Fail mid-frame in three ways, each followed by a good batch.
        let cut = &section[..section.len() / 2];
        assert!(validate_records(good.header(), cut, &limits).is_err());
        assert_eq!(check(&good), Ok(()));
        assert!(matches!(
            validate_records(good.header(), section, &small),
            Err(RecordsError::DecompressedTooLarge { .. })
        ));
        assert_eq!(check(&good), Ok(()));
        let mut lying = *good.header();
        lying.records_count = 2;
        lying.last_offset_delta = 1;
        assert!(validate_records(&lying, section, &limits).is_err());
        assert_eq!(check(&good), Ok(()));
    }

    #[test]
    fn errors_classify_as_kafka_does() {
        assert!(
            RecordsError::MissingRecords {
                declared: 2,
                found: 1
            }
            .is_invalid_record()
        );
        assert!(
            RecordsError::InconsistentOffsetRange {
                records_count: 2,
                last_offset_delta: 0
            }
            .is_invalid_record()
        );
        assert!(!RecordsError::UnknownCompression { id: 7 }.is_invalid_record());
        assert!(
            !RecordsError::DecompressedTooLarge {
                codec: Compression::Gzip,
                limit: 1
            }
            .is_invalid_record()
        );
    }
}
