//! Segmented partition log storage in Apache Kafka's exact on-disk format.
//!
//! A [`LogManager`] owns every partition under one or more data dirs; each
//! partition is a [`Log`] of segments (`.log` + `.index` + `.timeindex`,
//! and a `.txnindex` for segments holding aborted transactions' markers).
//! Batches are stored exactly as produced (only the base offset, and with
//! LogAppendTime the max timestamp and CRC, are rewritten). Reads return
//! [`FileRegion`]s for zero-copy sending. All file I/O goes through the
//! [`backend::Storage`] seam. The byte-level layout, offset invariants and
//! recovery algorithm are in `docs/storage-format.md`.
//!
//! ```
//! use std::sync::Arc;
//! use weir_storage::{LogConfig, LogManager, LogManagerConfig, TopicPartition};
//! use weir_storage::backend::MemStorage;
//!
//! let cfg = LogManagerConfig::with_storage(vec!["/data".into()], Arc::new(MemStorage::new()));
//! let mgr = LogManager::open(cfg, 0).unwrap();
//! let tp = TopicPartition::new("events", 0);
//! let log = mgr.create_log(&tp, [1; 16], LogConfig::default()).unwrap();
//! let mut batch = weir_storage::testing::batch(&[b"hello"], 1_000);
//! let info = log.append(&mut batch, 1_000).unwrap();
//! assert_eq!((info.base_offset, log.log_end_offset()), (0, 1));
//! log.set_high_watermark(log.log_end_offset());
//! let read = log.read(0, 1 << 20, log.high_watermark(), true).unwrap();
//! assert_eq!(read.regions[0].read_to_vec().unwrap(), batch);
//! ```

pub mod backend;
mod batch;
pub mod checkpoint;
pub mod cleaner;
mod config;
mod creation;
pub mod epochs;
mod error;
pub mod fuzz_ops;
pub mod index;
mod log;
mod manager;
mod recovery;
pub mod retention;
pub mod segment;
pub mod testing;
pub mod txn_index;

pub use batch::{control_type, record_timestamps};
pub use config::{LogConfig, Ratio, TimestampType, TopicPartition};
pub use creation::{CREATING_SUFFIX, KnownTopic, PendingCreation};
pub use error::{RejectedRecord, StorageError};
pub use log::{AbortMarker, AppendInfo, FileRegion, Log, ReadResult};
pub use manager::{LogManager, LogManagerConfig};
pub use recovery::OpenOptions;
pub use segment::Damage;
pub use txn_index::AbortedTxn;
