//! Record batches, magic 2 (the only format Kafka 4 accepts).
//!
//! - [`header`]: the fixed 61-byte batch header and CRC helpers.
//! - [`RecordBatch`]: a view over one batch's bytes: CRC check, record
//!   iteration (decompressing within [`DecompressLimits`]), control records.
//! - [`BatchIter`] / [`BatchSlices`]: split a buffer of concatenated batches
//!   (Produce request, fetch response, segment file), with typed errors for
//!   torn ([`RecordsError::Incomplete`]) and invalid batches.
//! - [`RecordBatchBuilder`]: encode a batch, with any codec.
//! - [`compression`]: gzip, snappy (xerial framing), lz4 (frame), zstd.
//! - [`validate_records`]: every record of a produced batch checked before
//!   it is appended (counts, offsets, structure, decompression bound).
//!
//! The byte layout is documented in `docs/record-batch.md`.
//!
//! ```
//! use bytes::Bytes;
//! use weir_protocol::records::{BatchIter, Compression, DecompressLimits, RecordBatchBuilder};
//!
//! let mut b = RecordBatchBuilder::new(Compression::Gzip).base_offset(7);
//! b.push(1_000, Some(Bytes::from("key")), Some(Bytes::from("value")), vec![])?;
//! let bytes = b.build()?.into_bytes();
//!
//! for batch in BatchIter::new(bytes) {
//!     let batch = batch?; // CRC checked
//!     for record in batch.records(&DecompressLimits::default())? {
//!         let record = record?;
//!         assert_eq!(record.offset(batch.base_offset()), 7);
//!         assert_eq!(record.value.as_deref(), Some(&b"value"[..]));
//!     }
//! }
//! # Ok::<(), weir_protocol::records::RecordsError>(())
//! ```

mod batch;
mod builder;
pub mod compression;
mod control;
mod error;
mod fuzz;
pub mod header;
mod record;
mod validate;

pub use batch::{BatchIter, BatchRef, BatchSlices, RecordBatch, Records, next_batch};
pub use builder::{
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP,
    RecordBatchBuilder, TimestampType,
};
pub use compression::{Compression, DEFAULT_MAX_DECOMPRESSED_BYTES, DecompressLimits};
pub use control::{ControlRecordType, EndTxnMarker};
pub use error::{RecordError, RecordField, RecordsError};
pub use fuzz::fuzz_records;
pub use header::{BatchHeader, HeaderError};
pub use record::{MIN_RECORD_SIZE, Record, RecordHeader};
pub use validate::{RecordInfo, validate_records, validate_records_each};
