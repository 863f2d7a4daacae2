//! Traits, errors and primitive encoders shared by the generated messages.
//!
//! The generated code in [`crate::messages`] is written against the helpers
//! in [`rt`]; applications only need [`Encodable`], [`Decodable`],
//! [`Message`], [`Request`], [`Uuid`] and [`RawTaggedField`].

use bytes::{Buf, Bytes, BytesMut};
use std::fmt;
use std::str::FromStr;

use crate::messages::ApiKey;
use crate::varint::VarintError;

/// A Kafka UUID (topic ids, member ids, …): 16 raw bytes.
///
/// Kafka prints UUIDs as URL-safe base64 without padding (22 characters).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    /// The all-zero UUID, Kafka's "no id".
    pub const ZERO: Uuid = Uuid([0; 16]);
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = String::with_capacity(22);
        crate::base64url::encode(&self.0, &mut text);
        f.write_str(&text)
    }
}

impl fmt::Debug for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Uuid({self})")
    }
}

/// Why a string is not a Kafka UUID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a base64url UUID: {input:?}")]
pub struct ParseUuidError {
    pub input: String,
}

impl FromStr for Uuid {
    type Err = ParseUuidError;

    /// Parses exactly the 22 characters [`Display`](fmt::Display) writes:
    /// no padding, and the unused low bits of the last character are zero.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseUuidError {
            input: s.to_string(),
        };
        if s.len() != 22 {
            return Err(err());
        }
        let bytes = crate::base64url::decode(s.as_bytes()).map_err(|_| err())?;
        Ok(Uuid(bytes.try_into().map_err(|_| err())?))
    }
}

/// A tagged field this code does not know, kept as raw bytes and written
/// back unchanged. Lists of these are sorted by `tag`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawTaggedField {
    pub tag: u32,
    pub data: Bytes,
}

/// Why bytes could not be decoded as a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("input ended early: needed {needed} more bytes, {remaining} left")]
    Incomplete { needed: usize, remaining: usize },
    #[error("declared length {declared} does not fit in the {remaining} remaining bytes")]
    LengthTooLarge { declared: u64, remaining: usize },
    #[error("invalid length {length}")]
    InvalidLength { length: i64 },
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    #[error("unsupported version {version}")]
    UnsupportedVersion { version: i16 },
    #[error("null in non-nullable field {field}")]
    NullNotAllowed { field: &'static str },
    #[error("tagged field {tag} declares {declared} bytes but its value took {consumed}")]
    TaggedFieldSize {
        tag: u32,
        declared: usize,
        consumed: usize,
    },
    #[error(transparent)]
    Varint(#[from] VarintError),
}

/// Why a message could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("unsupported version {version}")]
    UnsupportedVersion { version: i16 },
    #[error("field {field} has a non-default value but does not exist in version {version}")]
    NonIgnorableField { field: &'static str, version: i16 },
    #[error("field {field} is null but not nullable in version {version}")]
    NullNotAllowed { field: &'static str, version: i16 },
    #[error("field {field} is too long to encode ({len})")]
    TooLong { field: &'static str, len: usize },
    #[error("tagged fields are set but version {version} does not support them")]
    TaggedFieldsNotSupported { version: i16 },
    #[error("api key {api_key:?} does not match the body")]
    ApiKeyMismatch { api_key: ApiKey },
}

/// A value that can be written in a given protocol version.
pub trait Encodable {
    /// Appends the encoding of `self` at `version` to `buf`.
    fn encode(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError>;
    /// The number of bytes [`Encodable::encode`] would write.
    fn encoded_len(&self, version: i16) -> Result<usize, EncodeError>;
}

/// A value that can be read in a given protocol version.
pub trait Decodable: Sized {
    /// Reads one value from the front of `buf`, advancing it. Byte fields
    /// (`bytes`, `records`) are zero-copy slices of `buf`.
    fn decode(buf: &mut Bytes, version: i16) -> Result<Self, DecodeError>;
}

/// A top-level message (request, response, header or data record).
pub trait Message {
    const NAME: &'static str;
    const VALID_VERSIONS: (i16, i16);
    /// The first flexible version, if any.
    const FLEXIBLE_MIN: Option<i16>;
}

/// A request, tied to its api key and response type.
pub trait Request: Message + Encodable + Decodable {
    const API_KEY: ApiKey;
    type Response: Message + Encodable + Decodable;
}

/// Runtime support for the generated code. Not a stable API.
#[doc(hidden)]
pub mod rt {
    use super::*;

    /// Where encoded bytes go: a buffer, or a counter for `encoded_len`.
    pub trait Writer {
        fn put_slice(&mut self, s: &[u8]);
        #[inline]
        fn put_u8(&mut self, v: u8) {
            self.put_slice(&[v]);
        }
        #[inline]
        fn put_i8(&mut self, v: i8) {
            self.put_slice(&v.to_be_bytes());
        }
        #[inline]
        fn put_bool(&mut self, v: bool) {
            self.put_u8(u8::from(v));
        }
        #[inline]
        fn put_i16(&mut self, v: i16) {
            self.put_slice(&v.to_be_bytes());
        }
        #[inline]
        fn put_u16(&mut self, v: u16) {
            self.put_slice(&v.to_be_bytes());
        }
        #[inline]
        fn put_i32(&mut self, v: i32) {
            self.put_slice(&v.to_be_bytes());
        }
        #[inline]
        fn put_u32(&mut self, v: u32) {
            self.put_slice(&v.to_be_bytes());
        }
        #[inline]
        fn put_i64(&mut self, v: i64) {
            self.put_slice(&v.to_be_bytes());
        }
        #[inline]
        fn put_f64(&mut self, v: f64) {
            self.put_slice(&v.to_be_bytes());
        }
        #[inline]
        fn put_uuid(&mut self, v: &Uuid) {
            self.put_slice(&v.0);
        }
        #[inline]
        fn put_uvarint(&mut self, v: u32) {
            let mut tmp = [0u8; 5];
            let mut out = &mut tmp[..];
            crate::varint::put_unsigned_varint(&mut out, v);
            let n = 5 - out.len();
            // A u32 varint takes at most 5 bytes.
            self.put_slice(tmp.get(..n).unwrap_or_default());
        }
    }

    impl Writer for BytesMut {
        #[inline]
        fn put_slice(&mut self, s: &[u8]) {
            self.extend_from_slice(s);
        }
        #[inline]
        fn put_uvarint(&mut self, v: u32) {
            crate::varint::put_unsigned_varint(self, v);
        }
    }

    /// Counts bytes instead of writing them.
    #[derive(Debug, Default)]
    pub struct Counter(pub usize);

    impl Writer for Counter {
        #[inline]
        fn put_slice(&mut self, s: &[u8]) {
            self.0 += s.len();
        }
        #[inline]
        fn put_uvarint(&mut self, v: u32) {
            self.0 += crate::varint::unsigned_varint_len(v);
        }
    }

    /// Generated structs write themselves through this.
    pub trait WriteTo {
        fn write_to<W: Writer>(&self, w: &mut W, version: i16) -> Result<(), EncodeError>;
    }

    pub fn encode<T: WriteTo>(v: &T, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        // A failed encode leaves `buf` as it was.
        let start = buf.len();
        let r = v.write_to(buf, version);
        if r.is_err() {
            buf.truncate(start);
        }
        r
    }

    pub fn encoded_len<T: WriteTo>(v: &T, version: i16) -> Result<usize, EncodeError> {
        let mut c = Counter(0);
        v.write_to(&mut c, version)?;
        Ok(c.0)
    }

    pub fn put_str<W: Writer>(
        w: &mut W,
        s: Option<&str>,
        compact: bool,
        nullable: bool,
        field: &'static str,
        version: i16,
    ) -> Result<(), EncodeError> {
        put_byte_slice(
            w,
            s.map(str::as_bytes),
            compact,
            false,
            nullable,
            field,
            version,
        )
    }

    /// Strings and bytes: `int16`/`int32` length (-1 = null), or compact
    /// `uvarint(length + 1)` (0 = null).
    pub fn put_byte_slice<W: Writer>(
        w: &mut W,
        s: Option<&[u8]>,
        compact: bool,
        wide: bool,
        nullable: bool,
        field: &'static str,
        version: i16,
    ) -> Result<(), EncodeError> {
        match s {
            None if !nullable => return Err(EncodeError::NullNotAllowed { field, version }),
            None if compact => w.put_uvarint(0),
            None if wide => w.put_i32(-1),
            None => w.put_i16(-1),
            Some(s) => {
                let too_long = || EncodeError::TooLong {
                    field,
                    len: s.len(),
                };
                if compact {
                    let n = u32::try_from(s.len()).ok().and_then(|n| n.checked_add(1));
                    w.put_uvarint(n.ok_or_else(too_long)?);
                } else if wide {
                    w.put_i32(i32::try_from(s.len()).map_err(|_| too_long())?);
                } else {
                    w.put_i16(i16::try_from(s.len()).map_err(|_| too_long())?);
                }
                w.put_slice(s);
            }
        }
        Ok(())
    }

    /// An array length: `int32` (-1 = null) or compact `uvarint(n + 1)`.
    pub fn put_array_len<W: Writer>(
        w: &mut W,
        len: Option<usize>,
        compact: bool,
        nullable: bool,
        field: &'static str,
        version: i16,
    ) -> Result<(), EncodeError> {
        match len {
            None if !nullable => return Err(EncodeError::NullNotAllowed { field, version }),
            None if compact => w.put_uvarint(0),
            None => w.put_i32(-1),
            Some(n) => {
                let too_long = || EncodeError::TooLong { field, len: n };
                if compact {
                    let n = u32::try_from(n).ok().and_then(|n| n.checked_add(1));
                    w.put_uvarint(n.ok_or_else(too_long)?);
                } else {
                    w.put_i32(i32::try_from(n).map_err(|_| too_long())?);
                }
            }
        }
        Ok(())
    }

    /// Number of tagged fields, checked to fit the wire's u32.
    pub fn put_tag_count<W: Writer>(w: &mut W, n: usize) -> Result<(), EncodeError> {
        let n = u32::try_from(n).map_err(|_| EncodeError::TooLong {
            field: "tagged fields",
            len: n,
        })?;
        w.put_uvarint(n);
        Ok(())
    }

    /// Tag and size header of one tagged field.
    pub fn put_tag_header<W: Writer>(w: &mut W, tag: u32, size: usize) -> Result<(), EncodeError> {
        w.put_uvarint(tag);
        let n = u32::try_from(size).map_err(|_| EncodeError::TooLong {
            field: "tagged field",
            len: size,
        })?;
        w.put_uvarint(n);
        Ok(())
    }

    /// Writes the unknown tagged fields with a tag below `before`, in order,
    /// starting at `*next`; these interleave with the known tagged fields so
    /// that the whole section stays sorted by tag.
    pub fn put_raw_tags<W: Writer>(
        w: &mut W,
        raw: &[RawTaggedField],
        next: &mut usize,
        before: u64,
    ) -> Result<(), EncodeError> {
        while let Some(f) = raw.get(*next) {
            if u64::from(f.tag) >= before {
                break;
            }
            put_tag_header(w, f.tag, f.data.len())?;
            w.put_slice(&f.data);
            *next += 1;
        }
        Ok(())
    }

    // ---- decoding ----

    #[inline]
    pub fn need(buf: &Bytes, n: usize) -> Result<(), DecodeError> {
        if buf.remaining() < n {
            Err(DecodeError::Incomplete {
                needed: n,
                remaining: buf.remaining(),
            })
        } else {
            Ok(())
        }
    }

    #[inline]
    pub fn get_bool(buf: &mut Bytes) -> Result<bool, DecodeError> {
        need(buf, 1)?;
        Ok(buf.get_u8() != 0)
    }
    #[inline]
    pub fn get_i8(buf: &mut Bytes) -> Result<i8, DecodeError> {
        need(buf, 1)?;
        Ok(buf.get_i8())
    }
    #[inline]
    pub fn get_i16(buf: &mut Bytes) -> Result<i16, DecodeError> {
        need(buf, 2)?;
        Ok(buf.get_i16())
    }
    #[inline]
    pub fn get_u16(buf: &mut Bytes) -> Result<u16, DecodeError> {
        need(buf, 2)?;
        Ok(buf.get_u16())
    }
    #[inline]
    pub fn get_i32(buf: &mut Bytes) -> Result<i32, DecodeError> {
        need(buf, 4)?;
        Ok(buf.get_i32())
    }
    #[inline]
    pub fn get_u32(buf: &mut Bytes) -> Result<u32, DecodeError> {
        need(buf, 4)?;
        Ok(buf.get_u32())
    }
    #[inline]
    pub fn get_i64(buf: &mut Bytes) -> Result<i64, DecodeError> {
        need(buf, 8)?;
        Ok(buf.get_i64())
    }
    #[inline]
    pub fn get_f64(buf: &mut Bytes) -> Result<f64, DecodeError> {
        need(buf, 8)?;
        Ok(buf.get_f64())
    }
    #[inline]
    pub fn get_uuid(buf: &mut Bytes) -> Result<Uuid, DecodeError> {
        need(buf, 16)?;
        let mut b = [0u8; 16];
        buf.copy_to_slice(&mut b);
        Ok(Uuid(b))
    }
    #[inline]
    pub fn get_uvarint(buf: &mut Bytes) -> Result<u32, DecodeError> {
        let (v, n) = crate::varint::read_unsigned_varint(buf)?;
        buf.advance(n);
        Ok(v)
    }

    /// Reads a length prefix; `None` is null. The length is checked
    /// against the remaining input (`count * min_item` bytes at least).
    fn get_len(
        buf: &mut Bytes,
        compact: bool,
        wide: bool,
        min_item: usize,
    ) -> Result<Option<usize>, DecodeError> {
        let n: i64 = if compact {
            i64::from(get_uvarint(buf)?) - 1
        } else if wide {
            i64::from(get_i32(buf)?)
        } else {
            i64::from(get_i16(buf)?)
        };
        if n == -1 {
            return Ok(None);
        }
        if n < 0 {
            return Err(DecodeError::InvalidLength { length: n });
        }
        let remaining = buf.remaining();
        let needed = (n as u64).saturating_mul(min_item.max(1) as u64);
        if needed > remaining as u64 {
            return Err(DecodeError::LengthTooLarge {
                declared: n as u64,
                remaining,
            });
        }
        Ok(Some(n as usize))
    }

    /// A string or null.
    pub fn get_str(buf: &mut Bytes, compact: bool) -> Result<Option<String>, DecodeError> {
        match get_len(buf, compact, false, 1)? {
            None => Ok(None),
            Some(n) => {
                let raw = buf.split_to(n);
                match std::str::from_utf8(&raw) {
                    Ok(s) => Ok(Some(s.to_owned())),
                    Err(_) => Err(DecodeError::InvalidUtf8),
                }
            }
        }
    }

    /// Bytes or null, as a zero-copy slice of `buf`.
    pub fn get_bytes(buf: &mut Bytes, compact: bool) -> Result<Option<Bytes>, DecodeError> {
        Ok(get_len(buf, compact, true, 1)?.map(|n| buf.split_to(n)))
    }

    /// An array or null; `min_item` is the smallest encoding of one item.
    pub fn get_array<T>(
        buf: &mut Bytes,
        compact: bool,
        min_item: usize,
        mut item: impl FnMut(&mut Bytes) -> Result<T, DecodeError>,
    ) -> Result<Option<Vec<T>>, DecodeError> {
        match get_len(buf, compact, true, min_item)? {
            None => Ok(None),
            Some(n) => {
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(item(buf)?);
                }
                Ok(Some(v))
            }
        }
    }

    #[inline]
    pub fn non_null<T>(v: Option<T>, field: &'static str) -> Result<T, DecodeError> {
        v.ok_or(DecodeError::NullNotAllowed { field })
    }

    /// Reads a tagged-field header and splits off its data.
    pub fn get_tagged(buf: &mut Bytes) -> Result<(u32, Bytes), DecodeError> {
        let tag = get_uvarint(buf)?;
        let size = get_uvarint(buf)? as usize;
        if size > buf.remaining() {
            return Err(DecodeError::LengthTooLarge {
                declared: size as u64,
                remaining: buf.remaining(),
            });
        }
        Ok((tag, buf.split_to(size)))
    }

    /// A known tagged field's value must use exactly its declared size.
    pub fn tagged_done(tag: u32, declared: usize, rest: &Bytes) -> Result<(), DecodeError> {
        if rest.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TaggedFieldSize {
                tag,
                declared,
                consumed: declared - rest.len(),
            })
        }
    }

    /// Number of tagged fields: each takes at least two bytes.
    pub fn get_tag_count(buf: &mut Bytes) -> Result<usize, DecodeError> {
        let n = get_uvarint(buf)? as usize;
        if n.saturating_mul(2) > buf.remaining() {
            return Err(DecodeError::LengthTooLarge {
                declared: n as u64,
                remaining: buf.remaining(),
            });
        }
        Ok(n)
    }
}

/// Random values for property tests: each generated struct gets a
/// `random(rng, version)` that fills only the fields of that version.
#[cfg(any(test, feature = "arbitrary"))]
pub mod arbitrary {
    use super::{RawTaggedField, Uuid};
    use bytes::Bytes;

    /// A small deterministic generator (SplitMix64), seeded by the caller.
    #[derive(Debug, Clone)]
    pub struct Rng(pub u64);

    impl Rng {
        pub fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        /// A value in `0..n` (`n > 0`).
        pub fn below(&mut self, n: u64) -> u64 {
            self.next_u64() % n.max(1)
        }
        /// True with probability 1/n.
        pub fn one_in(&mut self, n: u64) -> bool {
            self.below(n) == 0
        }
        pub fn bool(&mut self) -> bool {
            self.next_u64() & 1 == 1
        }
        /// Integers biased towards edge values.
        pub fn int(&mut self) -> i64 {
            match self.below(4) {
                0 => match self.below(5) {
                    0 => 0,
                    1 => -1,
                    2 => 1,
                    3 => i64::MAX,
                    _ => i64::MIN,
                },
                1 => self.below(256) as i64 - 128,
                _ => self.next_u64() as i64,
            }
        }
        pub fn i8(&mut self) -> i8 {
            self.int() as i8
        }
        pub fn i16(&mut self) -> i16 {
            self.int() as i16
        }
        pub fn i32(&mut self) -> i32 {
            self.int() as i32
        }
        pub fn i64(&mut self) -> i64 {
            self.int()
        }
        pub fn u16(&mut self) -> u16 {
            self.int() as u16
        }
        pub fn u32(&mut self) -> u32 {
            self.int() as u32
        }
        /// A finite float (NaN would not compare equal to itself).
        pub fn f64(&mut self) -> f64 {
            let v = f64::from_bits(self.next_u64());
            if v.is_finite() {
                v
            } else {
                self.i32() as f64 / 7.0
            }
        }
        pub fn uuid(&mut self) -> Uuid {
            if self.one_in(4) {
                return Uuid::ZERO;
            }
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&self.next_u64().to_be_bytes());
            b[8..].copy_from_slice(&self.next_u64().to_be_bytes());
            Uuid(b)
        }
        pub fn string(&mut self) -> String {
            const PARTS: &[&str] = &[
                "a", "topic", "-", "_", ".", "0", "é", "日本", "🦀", " ", "Z",
            ];
            let n = self.below(6);
            (0..n)
                .map(|_| {
                    let i = self.below(PARTS.len() as u64) as usize;
                    PARTS.get(i).copied().unwrap_or_default()
                })
                .collect()
        }
        pub fn bytes(&mut self) -> Bytes {
            let n = self.below(12) as usize;
            (0..n)
                .map(|_| self.next_u64() as u8)
                .collect::<Vec<u8>>()
                .into()
        }
        /// Array lengths stay small so nested arrays stay small.
        pub fn array_len(&mut self) -> usize {
            self.below(4) as usize
        }
        /// Sometimes a few unknown tagged fields, with tags far above any
        /// Kafka uses, sorted.
        pub fn unknown_tags(&mut self) -> Vec<RawTaggedField> {
            if !self.one_in(4) {
                return Vec::new();
            }
            let n = 1 + self.below(2) as u32;
            (0..n)
                .map(|i| RawTaggedField {
                    tag: 10_000 + 7 * i + self.below(7) as u32,
                    data: self.bytes(),
                })
                .collect()
        }
    }

    /// A random value valid in `version`.
    pub trait Random: Sized {
        fn random(rng: &mut Rng, version: i16) -> Self;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_text_round_trip() {
        let u = Uuid([
            0x5b, 0x2f, 0x1a, 0x9e, 0x44, 0x01, 0x4c, 0x3d, 0x8a, 0x77, 0x10, 0xf3, 0x22, 0xbe,
            0x61, 0x0c,
        ]);
        let s = u.to_string();
        assert_eq!(s.len(), 22);
        assert_eq!(s.parse::<Uuid>(), Ok(u));
        assert_eq!(Uuid::ZERO.to_string(), "AAAAAAAAAAAAAAAAAAAAAA");
        assert!("AAAAAAAAAAAAAAAAAAAAAB".parse::<Uuid>().is_err());
        assert!("short".parse::<Uuid>().is_err());
        assert!("AAAAAAAAAAAAAAAAAAAAAA==".parse::<Uuid>().is_err());
        assert!("AAAAAAAAAAAAAAAAAAAAA!".parse::<Uuid>().is_err());
    }

    #[test]
    fn uuid_matches_kafka_examples() {
        // Kafka's Uuid.toString is base64url without padding of the 16 bytes:
        // new Uuid(0x0123456789abcdefL, 0xfedcba9876543210L), new Uuid(0L, 1L)
        // and new Uuid(-1L, -1L).
        let mut one = [0u8; 16];
        one[15] = 1;
        for (bytes, text) in [
            (
                [
                    0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76,
                    0x54, 0x32, 0x10,
                ],
                "ASNFZ4mrze_-3LqYdlQyEA",
            ),
            (one, "AAAAAAAAAAAAAAAAAAAAAQ"),
            ([0xff; 16], "_____________________w"),
        ] {
            assert_eq!(Uuid(bytes).to_string(), text);
            assert_eq!(text.parse::<Uuid>(), Ok(Uuid(bytes)));
        }
        // The last character carries 4 unused bits, which must be zero.
        assert!("_____________________x".parse::<Uuid>().is_err());
    }
}
