//! Variable-length integers as Kafka encodes them.
//!
//! Unsigned varints (protocol: compact lengths, tagged-field headers) use
//! 7 bits per byte, least significant group first. Signed varints (records)
//! are zigzag-encoded first, as Protocol Buffers does.

/// Why a varint could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum VarintError {
    #[error("input ends inside a varint")]
    Incomplete,
    #[error("varint longer than {max_bytes} bytes")]
    TooLong { max_bytes: usize },
    #[error("varint value does not fit in {bits} bits")]
    Overflow { bits: u32 },
}

/// Reads an unsigned 32-bit varint from the start of `buf`; returns the value
/// and the number of bytes it took.
pub fn read_unsigned_varint(buf: &[u8]) -> Result<(u32, usize), VarintError> {
    let mut value: u32 = 0;
    for (i, &b) in buf.iter().enumerate() {
        if i == 5 {
            return Err(VarintError::TooLong { max_bytes: 5 });
        }
        value |= ((b & 0x7f) as u32) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    if buf.len() >= 5 {
        Err(VarintError::TooLong { max_bytes: 5 })
    } else {
        Err(VarintError::Incomplete)
    }
}

/// Reads an unsigned 64-bit varint from the start of `buf`. At most 10 bytes,
/// and the tenth may only carry the value's top bit: anything more would
/// not fit in 64 bits and is rejected rather than truncated.
pub fn read_unsigned_varlong(buf: &[u8]) -> Result<(u64, usize), VarintError> {
    let mut value: u64 = 0;
    for (i, &b) in buf.iter().enumerate() {
        if i == 10 {
            return Err(VarintError::TooLong { max_bytes: 10 });
        }
        if i == 9 && b & 0x7f > 1 {
            return Err(VarintError::Overflow { bits: 64 });
        }
        value |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    if buf.len() >= 10 {
        Err(VarintError::TooLong { max_bytes: 10 })
    } else {
        Err(VarintError::Incomplete)
    }
}

/// Reads a zigzag-encoded signed 32-bit varint.
pub fn read_varint(buf: &[u8]) -> Result<(i32, usize), VarintError> {
    let (raw, n) = read_unsigned_varint(buf)?;
    Ok((((raw >> 1) as i32) ^ -((raw & 1) as i32), n))
}

/// Reads a zigzag-encoded signed 64-bit varint.
pub fn read_varlong(buf: &[u8]) -> Result<(i64, usize), VarintError> {
    let (raw, n) = read_unsigned_varlong(buf)?;
    Ok((((raw >> 1) as i64) ^ -((raw & 1) as i64), n))
}

/// Appends an unsigned 32-bit varint.
pub fn put_unsigned_varint(out: &mut impl bytes::BufMut, mut value: u32) {
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

/// Appends an unsigned 64-bit varint.
pub fn put_unsigned_varlong(out: &mut impl bytes::BufMut, mut value: u64) {
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

/// Appends a zigzag-encoded signed 32-bit varint.
pub fn put_varint(out: &mut impl bytes::BufMut, value: i32) {
    put_unsigned_varint(out, ((value << 1) ^ (value >> 31)) as u32);
}

/// Appends a zigzag-encoded signed 64-bit varint.
pub fn put_varlong(out: &mut impl bytes::BufMut, value: i64) {
    put_unsigned_varlong(out, ((value << 1) ^ (value >> 63)) as u64);
}

/// Encoded size of an unsigned 32-bit varint.
pub fn unsigned_varint_len(value: u32) -> usize {
    match value {
        0..=0x7f => 1,
        0x80..=0x3fff => 2,
        0x4000..=0x1f_ffff => 3,
        0x20_0000..=0x0fff_ffff => 4,
        _ => 5,
    }
}

/// Encoded size of an unsigned 64-bit varint.
pub fn unsigned_varlong_len(value: u64) -> usize {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Encoded size of a zigzag signed 32-bit varint.
pub fn varint_len(value: i32) -> usize {
    unsigned_varint_len(((value << 1) ^ (value >> 31)) as u32)
}

/// Encoded size of a zigzag signed 64-bit varint.
pub fn varlong_len(value: i64) -> usize {
    unsigned_varlong_len(((value << 1) ^ (value >> 63)) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_encodings() {
        // Values and bytes from the Protocol Buffers encoding guide.
        let mut v = Vec::new();
        put_unsigned_varint(&mut v, 300);
        assert_eq!(v, [0xac, 0x02]);
        v.clear();
        put_varint(&mut v, -1);
        assert_eq!(v, [0x01]);
        v.clear();
        put_varint(&mut v, 1);
        assert_eq!(v, [0x02]);
        v.clear();
        put_varlong(&mut v, i64::MIN);
        assert_eq!(v.len(), 10);
    }

    #[test]
    fn rejects_overlong_and_truncated() {
        assert_eq!(
            read_unsigned_varint(&[0xff; 6]),
            Err(VarintError::TooLong { max_bytes: 5 })
        );
        assert_eq!(read_unsigned_varint(&[0x80]), Err(VarintError::Incomplete));
        assert_eq!(read_unsigned_varlong(&[]), Err(VarintError::Incomplete));
        assert_eq!(
            read_unsigned_varlong(&[0xff; 11]),
            Err(VarintError::Overflow { bits: 64 })
        );
        let mut max = [0xff; 10];
        max[9] = 0x01;
        assert_eq!(read_unsigned_varlong(&max), Ok((u64::MAX, 10)));
        max[9] = 0x02;
        assert_eq!(
            read_unsigned_varlong(&max),
            Err(VarintError::Overflow { bits: 64 })
        );
        max[9] = 0x81;
        assert_eq!(
            read_unsigned_varlong(&max),
            Err(VarintError::TooLong { max_bytes: 10 })
        );
    }

    proptest! {
        #[test]
        fn roundtrip_i32(x: i32) {
            let mut v = Vec::new();
            put_varint(&mut v, x);
            prop_assert_eq!(v.len(), varint_len(x));
            prop_assert_eq!(read_varint(&v), Ok((x, v.len())));
        }

        #[test]
        fn roundtrip_i64(x: i64) {
            let mut v = Vec::new();
            put_varlong(&mut v, x);
            prop_assert_eq!(v.len(), varlong_len(x));
            prop_assert_eq!(read_varlong(&v), Ok((x, v.len())));
        }

        #[test]
        fn roundtrip_u64(x: u64) {
            let mut v = Vec::new();
            put_unsigned_varlong(&mut v, x);
            prop_assert_eq!(v.len(), unsigned_varlong_len(x));
            prop_assert_eq!(read_unsigned_varlong(&v), Ok((x, v.len())));
        }

        #[test]
        fn roundtrip_u32(x: u32) {
            let mut v = Vec::new();
            put_unsigned_varint(&mut v, x);
            prop_assert_eq!(v.len(), unsigned_varint_len(x));
            prop_assert_eq!(read_unsigned_varint(&v), Ok((x, v.len())));
        }
    }
}
