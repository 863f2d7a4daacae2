//! Whole request and response frames: header plus body.
//!
//! A frame on the wire is a 4-byte big-endian size followed by that many
//! bytes. The decoders here take one frame *without* its size prefix (the
//! connection has already split the stream); the encoders write the prefix.
//!
//! ```
//! use bytes::{Bytes, BytesMut};
//! use weir_protocol::frame::{decode_request, encode_request};
//! use weir_protocol::messages::{ApiVersionsRequest, RequestBody, RequestHeader};
//!
//! let header = RequestHeader {
//!     request_api_key: 18,
//!     request_api_version: 3,
//!     correlation_id: 7,
//!     client_id: Some("demo".into()),
//!     ..Default::default()
//! };
//! let body = RequestBody::ApiVersions(ApiVersionsRequest::default());
//! let mut buf = BytesMut::new();
//! encode_request(&mut buf, &header, &body).unwrap();
//! let frame = buf.freeze().slice(4..);
//! let (h, b) = decode_request(frame).unwrap();
//! assert_eq!((h, b), (header, body));
//! ```

use bytes::{Bytes, BytesMut};

use crate::codec::{Decodable, DecodeError, Encodable, EncodeError};
use crate::messages::{ApiKey, RequestBody, RequestHeader, ResponseBody, ResponseHeader};

/// Why a frame could not be decoded. The variants that carry a
/// `correlation_id` are the ones a broker can still answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("unknown api key {api_key} (correlation id {correlation_id})")]
    UnknownApiKey { api_key: i16, correlation_id: i32 },
    #[error(
        "unsupported version {version} of api key {api_key:?} (correlation id {correlation_id})"
    )]
    UnsupportedVersion {
        api_key: ApiKey,
        version: i16,
        correlation_id: i32,
    },
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("{remaining} bytes left after the body of {api_key:?} v{version}")]
    TrailingBytes {
        api_key: ApiKey,
        version: i16,
        remaining: usize,
    },
}

/// Decodes one request frame (without the size prefix).
///
/// The api key and version are read first (they open every request header
/// version) to choose the header version and the body type.
pub fn decode_request(frame: Bytes) -> Result<(RequestHeader, RequestBody), FrameError> {
    let Some(&[k0, k1, v0, v1, c0, c1, c2, c3]) = frame.first_chunk::<8>() else {
        return Err(DecodeError::Incomplete {
            needed: 8,
            remaining: frame.len(),
        }
        .into());
    };
    let api_key = i16::from_be_bytes([k0, k1]);
    let version = i16::from_be_bytes([v0, v1]);
    let correlation_id = i32::from_be_bytes([c0, c1, c2, c3]);
    let key = ApiKey::try_from(api_key).map_err(|_| FrameError::UnknownApiKey {
        api_key,
        correlation_id,
    })?;
    let (lo, hi) = key.valid_versions();
    if !(lo..=hi).contains(&version) {
        return Err(FrameError::UnsupportedVersion {
            api_key: key,
            version,
            correlation_id,
        });
    }
    let mut buf = frame;
    let header = RequestHeader::decode(&mut buf, key.request_header_version(version))?;
    let body = RequestBody::decode(key, version, &mut buf)?;
    if !buf.is_empty() {
        return Err(FrameError::TrailingBytes {
            api_key: key,
            version,
            remaining: buf.len(),
        });
    }
    Ok((header, body))
}

/// Decodes one response frame (without the size prefix) to a request of
/// `api_key` at `api_version`.
pub fn decode_response(
    frame: Bytes,
    api_key: ApiKey,
    api_version: i16,
) -> Result<(ResponseHeader, ResponseBody), FrameError> {
    let mut buf = frame;
    let header = ResponseHeader::decode(&mut buf, api_key.response_header_version(api_version))?;
    let (lo, hi) = api_key.valid_versions();
    if !(lo..=hi).contains(&api_version) {
        return Err(FrameError::UnsupportedVersion {
            api_key,
            version: api_version,
            correlation_id: header.correlation_id,
        });
    }
    let body = ResponseBody::decode(api_key, api_version, &mut buf)?;
    if !buf.is_empty() {
        return Err(FrameError::TrailingBytes {
            api_key,
            version: api_version,
            remaining: buf.len(),
        });
    }
    Ok((header, body))
}

/// Writes a size prefix, then `write`'s bytes; patches the size afterwards.
/// On error `buf` is left as it was.
fn with_size_prefix(
    buf: &mut BytesMut,
    write: impl FnOnce(&mut BytesMut) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let start = buf.len();
    buf.extend_from_slice(&[0; 4]);
    if let Err(e) = write(buf) {
        buf.truncate(start);
        return Err(e);
    }
    let len = buf.len() - start - 4;
    let Ok(len) = i32::try_from(len) else {
        buf.truncate(start);
        return Err(EncodeError::TooLong {
            field: "frame",
            len,
        });
    };
    // `write` only appends, so the placeholder is still at `start`.
    if let Some(prefix) = buf.get_mut(start..start + 4) {
        prefix.copy_from_slice(&len.to_be_bytes());
    }
    Ok(())
}

/// Appends a complete response frame: size prefix, the response header
/// version that `api_key`/`api_version` use, and `body`.
pub fn encode_response(
    buf: &mut BytesMut,
    correlation_id: i32,
    api_key: ApiKey,
    api_version: i16,
    body: &ResponseBody,
) -> Result<(), EncodeError> {
    if body.api_key() != api_key {
        return Err(EncodeError::ApiKeyMismatch { api_key });
    }
    let header = ResponseHeader {
        correlation_id,
        ..Default::default()
    };
    with_size_prefix(buf, |buf| {
        header.encode(buf, api_key.response_header_version(api_version))?;
        body.encode(buf, api_version)
    })
}

/// Appends a complete request frame. The api key and version are taken
/// from `header`, which must match `body`.
pub fn encode_request(
    buf: &mut BytesMut,
    header: &RequestHeader,
    body: &RequestBody,
) -> Result<(), EncodeError> {
    let api_key = body.api_key();
    if i16::from(api_key) != header.request_api_key {
        return Err(EncodeError::ApiKeyMismatch { api_key });
    }
    let version = header.request_api_version;
    with_size_prefix(buf, |buf| {
        header.encode(buf, api_key.request_header_version(version))?;
        body.encode(buf, version)
    })
}

/// Fuzz entry point for request frames: decoding arbitrary bytes must not
/// panic, and whatever decodes must re-encode to bytes that decode and
/// re-encode to the same bytes.
#[allow(clippy::expect_used)] // a fuzz target reports a broken property by panicking
pub fn fuzz_request_frame(data: &[u8]) {
    let Ok((header, body)) = decode_request(Bytes::copy_from_slice(data)) else {
        return;
    };
    let mut first = BytesMut::new();
    encode_request(&mut first, &header, &body).expect("a decoded request re-encodes");
    let first = first.freeze();
    let (h2, b2) = decode_request(first.slice(4..)).expect("a re-encoded request decodes");
    let mut second = BytesMut::new();
    encode_request(&mut second, &h2, &b2).expect("a decoded request re-encodes");
    assert_eq!(first, second.freeze(), "request encoding is not stable");
}

/// Fuzz entry point for response frames. The first two bytes pick the api
/// key (modulo the number of keys), the third the version (modulo the
/// number of valid versions); the rest is the frame.
#[allow(clippy::expect_used)] // a fuzz target reports a broken property by panicking
pub fn fuzz_response_frame(data: &[u8]) {
    let [k0, k1, v, rest @ ..] = data else { return };
    let pick = usize::from(u16::from_be_bytes([*k0, *k1])) % ApiKey::ALL.len();
    let Some(&key) = ApiKey::ALL.get(pick) else {
        return;
    };
    let (lo, hi) = key.valid_versions();
    let span = (hi - lo + 1) as u16;
    let version = lo + (u16::from(*v) % span) as i16;
    let Ok((header, body)) = decode_response(Bytes::copy_from_slice(rest), key, version) else {
        return;
    };
    let mut first = BytesMut::new();
    encode_response(&mut first, header.correlation_id, key, version, &body)
        .expect("a decoded response re-encodes");
    let first = first.freeze();
    let (h2, b2) =
        decode_response(first.slice(4..), key, version).expect("re-encoded response decodes");
    let mut second = BytesMut::new();
    encode_response(&mut second, h2.correlation_id, key, version, &b2)
        .expect("a decoded response re-encodes");
    assert_eq!(first, second.freeze(), "response encoding is not stable");
}
