//! Record batches, magic 2 (the only format Kafka 4 accepts).

pub mod header;

pub use header::{BatchHeader, HeaderError};
