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
//! The [`tracker`] module is pure (no I/O, time passed in); a driver that owns
//! a Kafka consumer builds on it.
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
pub mod metadata;
pub mod metrics;
pub mod record;
pub mod scheduler;
pub mod tracker;
