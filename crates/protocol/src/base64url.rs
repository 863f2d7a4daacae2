//! URL-safe base64 without padding (RFC 4648 §5), the text form Kafka uses
//! for UUIDs (topic ids, cluster ids) and weir uses for binary metadata.
//!
//! Decoding is strict, so every byte string has exactly one text form:
//! padding, characters outside the alphabet, a lone trailing character and
//! non-zero unused bits in the last character are all rejected.
//!
//! ```
//! use weir_protocol::base64url;
//!
//! let mut text = String::new();
//! base64url::encode(b"foob", &mut text);
//! assert_eq!(text, "Zm9vYg");
//! assert_eq!(base64url::decode(text.as_bytes()).unwrap(), b"foob");
//! assert!(base64url::decode(b"Zm9vYg==").is_err());
//! ```

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Why text is not canonical unpadded base64url. `position` is the index of
/// the offending character in the decoded text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Base64UrlError {
    #[error("invalid base64url character at byte {position}")]
    InvalidChar { position: usize },
    #[error("lone base64url character at byte {position} holds less than a byte")]
    LoneChar { position: usize },
    #[error("unused bits of the base64url character at byte {position} are not zero")]
    NonCanonical { position: usize },
}

impl Base64UrlError {
    /// Index of the offending character in the text.
    pub fn position(&self) -> usize {
        match *self {
            Self::InvalidChar { position }
            | Self::LoneChar { position }
            | Self::NonCanonical { position } => position,
        }
    }
}

/// Length of the text form of `len` bytes.
pub fn encoded_len(len: usize) -> usize {
    (len * 4).div_ceil(3)
}

/// Appends the text form of `data` to `out`.
pub fn encode(data: &[u8], out: &mut String) {
    out.reserve(encoded_len(data.len()));
    for chunk in data.chunks(3) {
        let [b0, b1, b2] = [0, 1, 2].map(|i| chunk.get(i).copied().unwrap_or(0));
        let n = (u32::from(b0) << 16) | (u32::from(b1) << 8) | u32::from(b2);
        // One byte needs 2 characters, two need 3, three need 4.
        for i in 0..=chunk.len() {
            out.push(char_for(n >> (18 - 6 * i)));
        }
    }
}

/// The character for the low 6 bits of `v`.
#[allow(clippy::indexing_slicing)] // masked to 6 bits: below ALPHABET's 64 entries
fn char_for(v: u32) -> char {
    ALPHABET[(v & 0x3f) as usize] as char
}

fn value(c: u8) -> Option<u32> {
    let v = match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'-' => 62,
        b'_' => 63,
        _ => return None,
    };
    Some(u32::from(v))
}

/// Decodes canonical unpadded base64url text.
pub fn decode(text: &[u8]) -> Result<Vec<u8>, Base64UrlError> {
    if text.len() % 4 == 1 {
        return Err(Base64UrlError::LoneChar {
            position: text.len() - 1,
        });
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3 + 2);
    for (ci, chunk) in text.chunks(4).enumerate() {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            let v = value(c).ok_or(Base64UrlError::InvalidChar {
                position: ci * 4 + i,
            })?;
            n |= v << (18 - 6 * i);
        }
        let kept = chunk.len() - 1;
        // The bits below the last whole byte must be zero.
        if n & (0xff_ffff >> (8 * kept)) != 0 {
            return Err(Base64UrlError::NonCanonical {
                position: ci * 4 + kept,
            });
        }
        // `n` holds the group's 3 bytes below an empty top byte.
        out.extend_from_slice(n.to_be_bytes().get(1..1 + kept).unwrap_or_default());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enc(data: &[u8]) -> String {
        let mut s = String::new();
        encode(data, &mut s);
        s
    }

    #[test]
    fn rfc4648_vectors() {
        // RFC 4648 section 10, url alphabet, no padding.
        for (raw, b64) in [
            ("", ""),
            ("f", "Zg"),
            ("fo", "Zm8"),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg"),
            ("fooba", "Zm9vYmE"),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(enc(raw.as_bytes()), b64);
            assert_eq!(decode(b64.as_bytes()).unwrap(), raw.as_bytes());
        }
        // The two characters where the url alphabet differs from base64.
        assert_eq!(enc(&[0xfb, 0xff]), "-_8");
        assert_eq!(decode(b"-_8").unwrap(), [0xfb, 0xff]);
    }

    #[test]
    fn rejects_non_canonical_text() {
        use Base64UrlError::*;
        for (text, error) in [
            (&b"Zg=="[..], InvalidChar { position: 2 }),
            (b"Zm9+", InvalidChar { position: 3 }),
            (b"Zm9vY", LoneChar { position: 4 }),
            // "Zg" and "Zm8" with unused low bits set.
            (b"Zh", NonCanonical { position: 1 }),
            (b"Zm9vZm9", NonCanonical { position: 6 }),
        ] {
            assert_eq!(
                decode(text),
                Err(error),
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
        assert_eq!(decode(b"Zm9vZm8").unwrap(), b"foofo");
    }

    proptest! {
        #[test]
        fn round_trip(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let text = enc(&data);
            prop_assert_eq!(text.len(), encoded_len(data.len()));
            prop_assert_eq!(decode(text.as_bytes()), Ok(data));
        }

        #[test]
        fn whatever_decodes_encodes_back(text in "[A-Za-z0-9_=+/-]{0,24}") {
            if let Ok(data) = decode(text.as_bytes()) {
                prop_assert_eq!(enc(&data), text);
            }
        }
    }
}
