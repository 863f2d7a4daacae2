//! Parallel consumption of Kafka partitions whose commits only move over
//! completed work.
//!
//! When a consumer hands records to parallel workers, three positions per
//! partition drift apart: `position` (delivered to the application),
//! `processed` (effect completed) and `committed` (where a restarted consumer
//! resumes). Committing the position skips unfinished records; committing
//! nothing re-runs finished ones. This crate tracks, per partition, the
//! delivered offsets in delivery order and which of them completed, and only
//! ever proposes a commit one past the longest completed prefix.
//!
//! Pure parts (no I/O, time passed in) and one I/O layer:
//!
//! - [`tracker`]: delivered order, completed/failed records, the watermark,
//!   assignment generations.
//! - [`scheduler`]: ordering modes (partition, key, unordered), the global
//!   concurrency limit, bounded per-partition buffers → submit / pause /
//!   resume decisions.
//! - [`metadata`]: the completed set above the watermark as compact commit
//!   metadata with a size bound.
//! - [`engine`]: the consumer owner's state machine over the three above,
//!   plus commit bookkeeping and per-partition [`engine::PartitionStats`].
//! - [`exactly_once`]: in exactly-once mode, the outputs of completed
//!   records waiting for the watermark, and what the next transaction
//!   carries.
//! - [`record`], [`metrics`]: the handler's record, retry backoff,
//!   dead-letter headers; Prometheus text.
//! - [`driver`]: [`driver::ParallelConsumer`], one thread owning an rdkafka
//!   consumer (poll, commit, pause, resume, rebalance callbacks) and tokio
//!   worker tasks running the handler.
//!
//! `docs/parallel-consumer.md` describes the design and the metadata format.
//!
//! ```
//! use weir_parallel_consumer::tracker::PartitionTracker;
//!
//! let mut p = PartitionTracker::new(10);
//! for offset in [10, 11, 12] {
//!     p.deliver(offset, 0).unwrap();
//! }
//! p.complete(11).unwrap();
//! p.complete(12).unwrap();
//! assert_eq!(p.next_commit(), 10); // 10 still runs: 13 must not be committed
//! p.complete(10).unwrap();
//! assert_eq!(p.next_commit(), 13);
//! ```

pub mod driver;
pub mod engine;
pub mod exactly_once;
pub mod metadata;
pub mod metrics;
pub mod record;
pub mod scheduler;
pub mod tracker;
