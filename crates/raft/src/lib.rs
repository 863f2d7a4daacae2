//! weir's replicated cluster metadata log: openraft with durable storage.
//!
//! Every controller is a raft voter; the log carries opaque payloads (one
//! metadata record batch each) and a [`MetadataStateMachine`] applies them
//! in log order once they are committed. The pieces:
//!
//! - [`log_store::LogStore`]: the raft log in a directory, one append-only
//!   file of length- and CRC32C-framed entries, fsynced before openraft is
//!   told an append is durable; vote and committed index in a small state
//!   file replaced atomically.
//! - [`state_machine::StateMachineStore`]: adapts a [`MetadataStateMachine`]
//!   to openraft and keeps its snapshots in the same directory.
//! - [`network`]: the TCP transport (length-prefixed JSON frames with a
//!   bounded size) and an in-memory router for tests that can cut links.
//! - [`MetadataRaft`]: the facade a broker uses (start, initialize,
//!   propose, leader, committed, shutdown).
//!
//! The on-disk formats and the guarantees are written down in
//! `docs/raft.md`.
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use weir_raft::{MetadataRaft, MetadataStateMachine, RaftOptions};
//!
//! #[derive(Default)]
//! struct Records(Vec<Vec<u8>>);
//!
//! impl MetadataStateMachine for Records {
//!     fn apply(&mut self, _index: u64, payload: &[u8]) -> Result<(), String> {
//!         self.0.push(payload.to_vec());
//!         Ok(())
//!     }
//!     fn snapshot(&self) -> Vec<u8> {
//!         serde_json::to_vec(&self.0).unwrap_or_default()
//!     }
//!     fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
//!         self.0 = serde_json::from_slice(snapshot).map_err(|e| e.to_string())?;
//!         Ok(())
//!     }
//! }
//!
//! # async fn run() -> Result<(), weir_raft::RaftStartError> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:9093").await?;
//! let voters = BTreeMap::from([(1, "127.0.0.1:9093".to_string())]);
//! let options = RaftOptions::new(1, "/tmp/weir-meta", voters);
//! let raft = MetadataRaft::start_tcp(options, Records::default(), listener).await?;
//! raft.initialize().await?;
//! let index = raft.propose(bytes::Bytes::from_static(b"record")).await;
//! # let _ = index;
//! # Ok(())
//! # }
//! ```
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod facade;
pub mod log_store;
pub mod network;
pub mod state_machine;

pub use facade::{MetadataRaft, ProposeError, RaftOptions, RaftStartError};
pub use state_machine::MetadataStateMachine;

use std::io::Cursor;

openraft::declare_raft_types!(
    /// openraft's types for the metadata log: node ids are Kafka's
    /// `node.id`, a node's info is its controller endpoint `host:port`,
    /// an entry's payload is one opaque metadata record batch and the
    /// answer to a write is the log index it was applied at.
    pub TypeConfig:
        D = bytes::Bytes,
        R = u64,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// The raft handle type for [`TypeConfig`].
pub type Raft = openraft::Raft<TypeConfig>;
/// One raft log entry.
pub type Entry = openraft::Entry<TypeConfig>;
/// A log id: the term (leader id) and index of an entry.
pub type LogId = openraft::LogId<u64>;
/// A persisted vote.
pub type Vote = openraft::Vote<u64>;
/// openraft's storage error for this configuration.
pub type StorageError = openraft::StorageError<u64>;

/// Wraps an I/O failure as openraft's storage error.
fn storage_err(
    make: fn(openraft::AnyError) -> openraft::StorageIOError<u64>,
    e: &std::io::Error,
) -> StorageError {
    StorageError::IO {
        source: make(openraft::AnyError::new(e)),
    }
}
