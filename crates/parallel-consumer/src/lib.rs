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
//!   dead-letter headers; counters, the handler latency histogram and the
//!   watermark lag as a snapshot, Prometheus text and (cargo feature
//!   `metrics`) through the `metrics` crate's facade.
//! - [`driver`]: [`driver::ParallelConsumer`], one thread owning an rdkafka
//!   consumer (poll, commit, pause, resume, rebalance callbacks) and tokio
//!   worker tasks running the handler.
//!
//! `docs/parallel-consumer.md` describes the design and the metadata format.
//!
//! # Usage
//!
//! A consumer from [`driver::ParallelConsumer::builder`], a handler that
//! gets a [`driver::HandlerContext`] (attempt number, assignment
//! generation, cancellation on revoke) and says whether a failure is
//! [`driver::HandlerError::Retriable`] or [`driver::HandlerError::Terminal`],
//! the event stream, and an async shutdown:
//!
#![doc = include_str!("usage.md")]
//!
//! Lifecycle:
//!
//! - [`driver::ParallelConsumer::shutdown`] stops fetching, lets in-flight
//!   handlers finish for up to `shutdown_timeout`, commits the completed
//!   prefix and leaves the group; it only awaits the owner thread, so it
//!   works on a current-thread runtime. `shutdown_blocking` is the same for
//!   non-async callers; `abort` stops without committing.
//! - Dropping the consumer never blocks: the same drain and final commit
//!   run in the background.
//! - [`driver::ParallelConsumer::events`] reports what goes wrong after
//!   start (commit and dead-letter failures, stopped partitions, lost
//!   assignments, client errors, the fatal error that stopped it).
//! - [`driver::ParallelConsumer::pause`] / `resume` hold a partition
//!   (nothing fetched or handed out) until the user resumes it.
//!
//! The crate re-exports [`rdkafka`] (the version its API takes, for
//! example `ClientConfig`). Its minimum Rust version is the workspace's
//! `rust-version` (1.88).
//!
//! The tracker alone:
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

pub use rdkafka;

pub mod driver;
pub mod engine;
pub mod exactly_once;
pub mod metadata;
pub mod metrics;
pub mod record;
pub mod scheduler;
pub mod tracker;

#[cfg(test)]
mod tests {
    /// docs/parallel-consumer.md shows the usage example compiled here.
    #[test]
    fn the_docs_show_the_doctested_usage_example() {
        let docs = include_str!("../../../docs/parallel-consumer.md");
        let example = include_str!("usage.md");
        let body = example
            .trim()
            .trim_start_matches("```no_run")
            .trim_end_matches("```");
        assert!(
            docs.contains(&format!("```rust{body}```")),
            "docs/parallel-consumer.md's Usage example differs from src/usage.md"
        );
    }
}
