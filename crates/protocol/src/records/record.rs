//! One record inside a batch.
//!
//! ```text
//! length          varint   bytes after this field
//! attributes      int8     unused, 0
//! timestampDelta  varlong  timestamp − batch baseTimestamp
//! offsetDelta     varint   offset − batch baseOffset
//! keyLength       varint   −1 = null key (any negative reads as null)
//! key             bytes
//! valueLength     varint   −1 = null value (tombstone)
//! value           bytes
//! headerCount     varint
//! headers         [headerKeyLength varint, headerKey utf-8,
//!                  headerValueLength varint (−1 = null), headerValue]
//! ```

use std::ops::Range;

use bytes::{BufMut, Bytes};

use super::error::{RecordError, RecordField};
use crate::varint;

/// A record header. The key is a UTF-8 string, the value raw bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordHeader {
    pub key: String,
    pub value: Option<Bytes>,
}

/// A decoded record. `key`, `value` and header values are zero-copy slices
/// of the (decompressed) records section they were read from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record {
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<RecordHeader>,
}

/// Smallest possible encoded record: a 1-byte length and six 1-byte fields.
pub const MIN_RECORD_SIZE: usize = 7;

fn bytes_len(b: &Option<Bytes>) -> usize {
    match b {
        None => varint::varint_len(-1),
        Some(b) => varint::varint_len(b.len() as i32) + b.len(),
    }
}

fn put_nullable(out: &mut impl BufMut, b: &Option<Bytes>) {
    match b {
        None => varint::put_varint(out, -1),
        Some(b) => {
            varint::put_varint(out, b.len() as i32);
            out.put_slice(b);
        }
    }
}

impl Record {
    /// Offset of this record in a batch with base offset `base_offset`.
    pub fn offset(&self, base_offset: i64) -> i64 {
        base_offset.wrapping_add(self.offset_delta as i64)
    }

    /// Timestamp of this record in a batch with base timestamp
    /// `base_timestamp`.
    pub fn timestamp(&self, base_timestamp: i64) -> i64 {
        base_timestamp.wrapping_add(self.timestamp_delta)
    }

    /// Size of the body (everything after the length varint).
    pub fn body_len(&self) -> usize {
        1 + varint::varlong_len(self.timestamp_delta)
            + varint::varint_len(self.offset_delta)
            + bytes_len(&self.key)
            + bytes_len(&self.value)
            + varint::varint_len(self.headers.len() as i32)
            + self
                .headers
                .iter()
                .map(|h| varint::varint_len(h.key.len() as i32) + h.key.len() + bytes_len(&h.value))
                .sum::<usize>()
    }

    /// Total encoded size including the length prefix.
    pub fn encoded_len(&self) -> usize {
        let body = self.body_len();
        varint::varint_len(body as i32) + body
    }

    /// Appends the encoded record. Lengths must fit in an i32; the builder
    /// checks that before calling.
    pub fn encode(&self, out: &mut impl BufMut) {
        varint::put_varint(out, self.body_len() as i32);
        out.put_i8(self.attributes);
        varint::put_varlong(out, self.timestamp_delta);
        varint::put_varint(out, self.offset_delta);
        put_nullable(out, &self.key);
        put_nullable(out, &self.value);
        varint::put_varint(out, self.headers.len() as i32);
        for h in &self.headers {
            varint::put_varint(out, h.key.len() as i32);
            out.put_slice(h.key.as_bytes());
            put_nullable(out, &h.value);
        }
    }

    /// Decodes the record starting at `data[*pos..]` and advances `pos`
    /// past it. Key, value and header values are slices of `data`.
    pub fn decode(data: &Bytes, pos: &mut usize) -> Result<Record, RecordError> {
        let mut headers = Vec::new();
        let layout = scan_record(data, pos, |count, key, value| {
            if headers.capacity() == 0 {
                headers.reserve_exact(count);
            }
            headers.push(RecordHeader {
                key: key.to_owned(),
                value: value.map(|r| data.slice(r)),
            });
        })?;
        Ok(Record {
            attributes: layout.attributes,
            timestamp_delta: layout.timestamp_delta,
            offset_delta: layout.offset_delta,
            key: layout.key.map(|r| data.slice(r)),
            value: layout.value.map(|r| data.slice(r)),
            headers,
        })
    }
}

/// Where the fields of one record lie in the buffer it was scanned from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordLayout {
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    /// Byte range of the key, `None` for a null key.
    pub key: Option<Range<usize>>,
    /// Byte range of the value, `None` for a null value.
    pub value: Option<Range<usize>>,
}

/// Reads the record starting at `data[*pos..]` without allocating: every
/// length is checked against the bytes present and against the record's own
/// length, header keys must be UTF-8, and the fields must fill the record
/// exactly. Calls `on_header(header_count, key, value_range)` for each header,
/// in order. Advances `pos` past the record only on success.
///
/// The one parser of the record layout: [`Record::decode`] builds a record
/// from it, the produce validator (`validate.rs`) only checks.
pub(crate) fn scan_record<'d>(
    data: &'d [u8],
    pos: &mut usize,
    mut on_header: impl FnMut(usize, &'d str, Option<Range<usize>>),
) -> Result<RecordLayout, RecordError> {
    let mut r = Reader {
        data,
        pos: *pos,
        end: data.len(),
    };
    let length = r.varint("length")?;
    if length < 0 {
        return Err(RecordError::NegativeLength {
            field: RecordField::Length,
            length: length as i64,
        });
    }
    let length = length as usize;
    if length > r.remaining() {
        return Err(RecordError::LengthExceedsRemaining {
            field: RecordField::Length,
            length: length as i64,
            remaining: r.remaining(),
        });
    }
    let body_start = r.pos;
    r.end = body_start + length;
    let attributes = r.byte("attributes")? as i8;
    let timestamp_delta = r.varlong("timestampDelta")?;
    let offset_delta = r.varint("offsetDelta")?;
    let key = r.nullable(RecordField::Key)?;
    let value = r.nullable(RecordField::Value)?;
    let count = r.varint("headerCount")?;
    if count < 0 {
        return Err(RecordError::NegativeLength {
            field: RecordField::HeaderCount,
            length: count as i64,
        });
    }
    // Each header takes at least two bytes: a count the body cannot hold is
    // refused before `on_header` may reserve room for it.
    let count = count as usize;
    if count > r.remaining() / 2 {
        return Err(RecordError::LengthExceedsRemaining {
            field: RecordField::HeaderCount,
            length: count as i64,
            remaining: r.remaining(),
        });
    }
    for _ in 0..count {
        let key_len = r.varint("headerKeyLength")?;
        let key = r.take(RecordField::HeaderKey, key_len)?;
        // `take` checked the range against the record's end.
        let key = data
            .get(key)
            .ok_or(RecordError::Truncated { field: "headerKey" })?;
        let key = std::str::from_utf8(key).map_err(|_| RecordError::InvalidHeaderKey)?;
        let value = r.nullable(RecordField::HeaderValue)?;
        on_header(count, key, value);
    }
    if r.pos != r.end {
        return Err(RecordError::SizeMismatch {
            declared: length,
            consumed: r.pos - body_start,
        });
    }
    *pos = r.end;
    Ok(RecordLayout {
        attributes,
        timestamp_delta,
        offset_delta,
        key,
        value,
    })
}

/// Cursor over `data[pos..end]`.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    end: usize,
}

impl Reader<'_> {
    fn remaining(&self) -> usize {
        self.end - self.pos
    }

    fn rest(&self) -> &[u8] {
        self.data.get(self.pos..self.end).unwrap_or_default()
    }

    fn byte(&mut self, field: &'static str) -> Result<u8, RecordError> {
        let b = *self
            .rest()
            .first()
            .ok_or(RecordError::Truncated { field })?;
        self.pos += 1;
        Ok(b)
    }

    fn varint(&mut self, field: &'static str) -> Result<i32, RecordError> {
        let (v, n) = varint::read_varint(self.rest()).map_err(|error| match error {
            varint::VarintError::Incomplete => RecordError::Truncated { field },
            error => RecordError::Varint { field, error },
        })?;
        self.pos += n;
        Ok(v)
    }

    fn varlong(&mut self, field: &'static str) -> Result<i64, RecordError> {
        let (v, n) = varint::read_varlong(self.rest()).map_err(|error| match error {
            varint::VarintError::Incomplete => RecordError::Truncated { field },
            error => RecordError::Varint { field, error },
        })?;
        self.pos += n;
        Ok(v)
    }

    /// The range of the next `len` bytes; `len` must be non-negative and fit.
    fn take(&mut self, field: RecordField, len: i32) -> Result<Range<usize>, RecordError> {
        if len < 0 {
            return Err(RecordError::NegativeLength {
                field,
                length: len as i64,
            });
        }
        let len = len as usize;
        if len > self.remaining() {
            return Err(RecordError::LengthExceedsRemaining {
                field,
                length: len as i64,
                remaining: self.remaining(),
            });
        }
        let range = self.pos..self.pos + len;
        self.pos += len;
        Ok(range)
    }

    /// A length-prefixed byte string where a negative length means null
    /// (writers use −1; Kafka's reader treats any negative length as null).
    fn nullable(&mut self, field: RecordField) -> Result<Option<Range<usize>>, RecordError> {
        let name = match field {
            RecordField::Key => "keyLength",
            RecordField::Value => "valueLength",
            _ => "headerValueLength",
        };
        let len = self.varint(name)?;
        if len < 0 {
            return Ok(None);
        }
        self.take(field, len).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_encoding() {
        // attributes 0, timestampDelta 1, offsetDelta 2, key "k",
        // value null, one header ("h", "v").
        let rec = Record {
            attributes: 0,
            timestamp_delta: 1,
            offset_delta: 2,
            key: Some(Bytes::from_static(b"k")),
            value: None,
            headers: vec![RecordHeader {
                key: "h".into(),
                value: Some(Bytes::from_static(b"v")),
            }],
        };
        let mut out = Vec::new();
        rec.encode(&mut out);
        let expected = [
            22, // body length 11, zigzag
            0, 2, 4, // attributes, tsDelta 1, offsetDelta 2
            2, b'k', // key
            1,    // null value (-1)
            2,    // one header
            2, b'h', 2, b'v',
        ];
        assert_eq!(out, expected);
        assert_eq!(out.len(), rec.encoded_len());
        let data = Bytes::from(out);
        let mut pos = 0;
        assert_eq!(Record::decode(&data, &mut pos), Ok(rec));
        assert_eq!(pos, data.len());
    }

    #[test]
    fn rejects_bad_lengths() {
        let decode = |b: &'static [u8]| Record::decode(&Bytes::from_static(b), &mut 0);
        // negative record length
        assert!(matches!(
            decode(&[1]),
            Err(RecordError::NegativeLength { .. })
        ));
        // length larger than input
        assert!(matches!(
            decode(&[20, 0]),
            Err(RecordError::LengthExceedsRemaining { .. })
        ));
        // key length -2 reads as a null key, as in Kafka's reader
        assert_eq!(
            decode(&[12, 0, 0, 0, 3, 1, 0]).map(|r| (r.key, r.value)),
            Ok((None, None))
        );
        // negative header key length
        assert!(matches!(
            decode(&[16, 0, 0, 0, 1, 1, 2, 1, 0]),
            Err(RecordError::NegativeLength {
                field: RecordField::HeaderKey,
                ..
            })
        ));
        // header count far beyond the body
        assert!(matches!(
            decode(&[20, 0, 0, 0, 1, 1, 0xfe, 0xff, 0xff, 0xff, 0x07]),
            Err(RecordError::LengthExceedsRemaining {
                field: RecordField::HeaderCount,
                ..
            })
        ));
        // body longer than its fields
        assert!(matches!(
            decode(&[14, 0, 0, 0, 1, 1, 0, 0]),
            Err(RecordError::SizeMismatch { .. })
        ));
        // invalid utf-8 header key
        assert_eq!(
            decode(&[18, 0, 0, 0, 1, 1, 2, 2, 0xff, 1]),
            Err(RecordError::InvalidHeaderKey)
        );
    }
}
