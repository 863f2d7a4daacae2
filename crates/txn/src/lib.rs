//! Kafka's transaction coordinator as a pure state machine.
//!
//! [`TxnCoordinator`] holds the transactional ids of the
//! `__transaction_state` partitions this broker leads. Every call takes
//! the current time in milliseconds and never reads a clock, sleeps or does
//! I/O. A request that changes a transactional id returns a [`Write`]: a
//! record to append to `__transaction_state` with acks=all. The change
//! takes effect only when the broker reports the record durable with
//! [`TxnCoordinator::write_completed`] (Kafka's `prepareTransitionTo` /
//! `completeTransitionTo` two-step); until then the transactional id has a
//! pending state and concurrent requests for it get
//! CONCURRENT_TRANSACTIONS. The [`WriteDone`] says what to answer and, for
//! EndTxn, which [`MarkerJob`] to run: WriteTxnMarkers to every partition
//! leader, [`TxnCoordinator::marker_written`] per partition, then
//! [`TxnCoordinator::complete_markers`] gives the record that completes the
//! transaction.
//!
//! Transaction version 1 (before KIP-890 part 2): the producer epoch stays
//! the same across the transactions of one producer session.
//!
//! ```
//! use std::collections::BTreeSet;
//! use weir_txn::{Step, TopicPartition, TxnConfig, TxnCoordinator, TxnResult, TxnState};
//!
//! let mut c = TxnCoordinator::new(TxnConfig::default());
//! // InitProducerId for a new transactional id needs a producer id.
//! assert_eq!(c.init_producer_id("tx", 60_000, None, None, 0), Ok(Step::NeedProducerId));
//! let Ok(Step::Write(w)) = c.init_producer_id("tx", 60_000, None, Some(1000), 0) else { panic!() };
//! let done = c.write_completed(w.id, Ok(()), 0);
//! let producer = done.answer.unwrap().unwrap();
//! assert_eq!((producer.producer_id, producer.epoch), (1000, 0));
//!
//! // One partition, then commit.
//! let parts = BTreeSet::from([TopicPartition::new("orders", 0)]);
//! let Ok(Step::Write(w)) = c.add_partitions("tx", 1000, 0, &parts, 1) else { panic!() };
//! c.write_completed(w.id, Ok(()), 1);
//! let Ok(Step::Write(w)) = c.end_txn("tx", 1000, 0, TxnResult::Commit, 2) else { panic!() };
//! let job = c.write_completed(w.id, Ok(()), 2).markers.unwrap();
//! assert_eq!(c.metadata("tx").unwrap().state, TxnState::PrepareCommit);
//!
//! // The leader of orders-0 wrote the COMMIT marker.
//! c.marker_written(&job, &TopicPartition::new("orders", 0));
//! let w = c.complete_markers(&job).unwrap();
//! c.write_completed(w.id, Ok(()), 3);
//! assert_eq!(c.metadata("tx").unwrap().state, TxnState::CompleteCommit);
//! ```
//!
//! States, records, markers and timeouts are described in
//! `docs/transactions.md`.

pub mod config;
pub mod coordinator;
pub mod metadata;
pub mod records;
mod requests;
pub mod state;
mod timers;
pub mod types;
mod writes;

pub use config::{ConfigError, TxnConfig};
pub use coordinator::{PartitionStatus, ReplayError, TxnCoordinator, append_error, partition_for};
pub use metadata::{Transit, TransitionError, TxnMetadata, is_epoch_exhausted};
pub use records::RecordError;
pub use state::TxnState;
pub use types::*;
pub use weir_protocol::error_code::ErrorCode;
