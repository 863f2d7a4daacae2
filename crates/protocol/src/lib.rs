//! Sans-io Kafka protocol for weir.
//!
//! Everything here works on byte buffers and never touches a socket or a
//! file: the broker and the clients own the I/O.
//!
//! - [`messages`]: every request and response of the Kafka protocol, generated
//!   from Kafka's JSON message definitions by `crates/protocol-codegen`.
//! - [`metadata_record`]: KRaft metadata records framed as in `__cluster_metadata`.
//! - [`records`]: record batches (magic 2), their CRC-32C and compression.
//! - [`partitioner`]: the Java client's murmur2 key partitioner.
//! - [`varint`]: Kafka's variable-length integers.
//! - [`base64url`]: unpadded URL-safe base64, the text form of [`Uuid`].
//! - [`codec`]: the `Encodable`/`Decodable` traits and errors of the messages.
//! - [`frame`]: whole request/response frames (header + body).
//! - [`weir_ext`]: weir's opt-in protocol extensions (tagged fields).

// Decoders face untrusted bytes: a malformed frame is an error, never a
// panic. Exceptions carry `#[allow(..)] // why` on the smallest item.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod base64url;
pub mod codec;
pub mod error_code;
pub mod frame;
pub mod messages;
pub mod metadata_record;
pub mod partitioner;
pub mod records;
pub mod varint;
pub mod weir_ext;

pub use codec::{
    Decodable, DecodeError, Encodable, EncodeError, Message, RawTaggedField, Request, Uuid,
};
pub use frame::FrameError;
pub use messages::ApiKey;
