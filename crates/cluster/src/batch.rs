//! The payload of one metadata log entry: a batch of KRaft-framed records
//! that apply together or not at all.
//!
//! Layout (big-endian):
//!
//! ```text
//! [format: u8 = 1][count: u32] then count × [len: u32][MetadataRecord frame: len bytes]
//! ```
//!
//! A frame is `weir_protocol::metadata_record::MetadataRecord`'s framing
//! (frame version, type, version, body). Decoding checks every length
//! against the bytes that remain before allocating, refuses more than
//! [`MAX_BATCH_RECORDS`] records and trailing bytes, and never panics.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use weir_protocol::codec::EncodeError;
use weir_protocol::metadata_record::{MetadataRecord, MetadataRecordError};

/// The only batch format so far.
pub const BATCH_FORMAT: u8 = 1;
/// Most records one batch may hold (a topic with this many partitions
/// does not fit one entry).
pub const MAX_BATCH_RECORDS: u32 = 1 << 20;
/// Bytes of the header: format and count.
const HEADER_BYTES: usize = 5;
/// Bytes of one frame's length prefix.
const LEN_BYTES: usize = 4;

/// Why bytes are not a batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("batch shorter than its {HEADER_BYTES}-byte header")]
    ShortHeader,
    #[error("unknown batch format {0}")]
    UnknownFormat(u8),
    #[error("batch claims {count} records; at most {max} fit")]
    TooManyRecords { count: u32, max: u64 },
    #[error("record {index}: length {len} runs past the end ({remaining} bytes left)")]
    Truncated {
        index: u32,
        len: u64,
        remaining: usize,
    },
    #[error("record {index}: {source}")]
    Record {
        index: u32,
        source: MetadataRecordError,
    },
    #[error("{0} bytes after the last record")]
    TrailingBytes(usize),
}

/// Encodes `records`, each in its latest version.
pub fn encode_batch(records: &[MetadataRecord]) -> Result<Bytes, EncodeError> {
    let count = u32::try_from(records.len())
        .ok()
        .filter(|n| *n <= MAX_BATCH_RECORDS)
        .ok_or(EncodeError::TooLong {
            field: "metadata batch records",
            len: records.len(),
        })?;
    let mut buf = BytesMut::new();
    buf.put_u8(BATCH_FORMAT);
    buf.put_u32(count);
    for r in records {
        let version = r.latest_version();
        let len = r.encoded_len(version)?;
        buf.put_u32(u32::try_from(len).map_err(|_| EncodeError::TooLong {
            field: "metadata record",
            len,
        })?);
        r.encode(&mut buf, version)?;
    }
    Ok(buf.freeze())
}

/// Fuzz entry point for the raft entry payload: any bytes decode or are
/// refused, never a panic; what weir encodes decodes back to the same
/// records. (A record decoded at an older version is not compared with
/// itself: it is encoded at the newest, where tagged fields it carried as
/// unknown may be known ones.)
pub fn fuzz_decode_batch(bytes: &[u8]) {
    let Ok(records) = decode_batch(Bytes::copy_from_slice(bytes)) else {
        return;
    };
    let Ok(encoded) = encode_batch(&records) else {
        return;
    };
    let Ok(normal) = decode_batch(encoded) else {
        panic!("a batch weir encoded does not decode");
    };
    if let Ok(again) = encode_batch(&normal) {
        assert_eq!(decode_batch(again).ok(), Some(normal));
    }
}

/// Decodes a whole batch.
pub fn decode_batch(mut buf: Bytes) -> Result<Vec<MetadataRecord>, BatchError> {
    if buf.remaining() < HEADER_BYTES {
        return Err(BatchError::ShortHeader);
    }
    let format = buf.get_u8();
    if format != BATCH_FORMAT {
        return Err(BatchError::UnknownFormat(format));
    }
    let count = buf.get_u32();
    // Every record takes at least its length prefix and a 3-byte header.
    let fit = (buf.remaining() / (LEN_BYTES + 3)) as u64;
    if count > MAX_BATCH_RECORDS || u64::from(count) > fit {
        return Err(BatchError::TooManyRecords {
            count,
            max: fit.min(u64::from(MAX_BATCH_RECORDS)),
        });
    }
    let mut records = Vec::with_capacity(count as usize);
    for index in 0..count {
        if buf.remaining() < LEN_BYTES {
            return Err(BatchError::Truncated {
                index,
                len: LEN_BYTES as u64,
                remaining: buf.remaining(),
            });
        }
        let len = buf.get_u32() as usize;
        if len > buf.remaining() {
            return Err(BatchError::Truncated {
                index,
                len: len as u64,
                remaining: buf.remaining(),
            });
        }
        let frame = buf.split_to(len);
        let (record, _version) =
            MetadataRecord::decode(frame).map_err(|source| BatchError::Record { index, source })?;
        records.push(record);
    }
    if buf.has_remaining() {
        return Err(BatchError::TrailingBytes(buf.remaining()));
    }
    Ok(records)
}
