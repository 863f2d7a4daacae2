//! Sans-io Kafka protocol for weir.
//!
//! Everything here works on byte buffers and never touches a socket or a
//! file: the broker and the clients own the I/O.
//!
//! - [`messages`]: every request and response of the Kafka protocol, generated
//!   from Kafka's JSON message definitions by `crates/protocol-codegen`.
//! - [`records`]: record batches (magic 2), their CRC-32C and compression.
//! - [`partitioner`]: the Java client's murmur2 key partitioner.
//! - [`varint`]: Kafka's variable-length integers.

pub mod error_code;
pub mod partitioner;
pub mod records;
pub mod varint;
