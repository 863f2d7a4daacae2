//! Plain values the coordinator takes and returns.

use std::collections::BTreeSet;

use bytes::Bytes;
use weir_protocol::error_code::ErrorCode;

use crate::state::TxnState;

/// `RecordBatch.NO_PRODUCER_ID`.
pub const NO_PRODUCER_ID: i64 = -1;
/// `RecordBatch.NO_PRODUCER_EPOCH`.
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// A partition of a transaction.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// A producer session: its id and epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerIdAndEpoch {
    pub producer_id: i64,
    pub epoch: i16,
}

impl ProducerIdAndEpoch {
    /// What a failed InitProducerId or EndTxn carries.
    pub const NONE: ProducerIdAndEpoch = ProducerIdAndEpoch {
        producer_id: NO_PRODUCER_ID,
        epoch: NO_PRODUCER_EPOCH,
    };
}

/// How a transaction ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnResult {
    Commit,
    Abort,
}

impl TxnResult {
    /// EndTxn's `committed` flag and WriteTxnMarkers' `transaction_result`.
    pub fn from_committed(committed: bool) -> TxnResult {
        if committed {
            TxnResult::Commit
        } else {
            TxnResult::Abort
        }
    }

    pub fn committed(self) -> bool {
        self == TxnResult::Commit
    }

    /// The state EndTxn moves an ongoing transaction to.
    pub fn prepare_state(self) -> TxnState {
        match self {
            TxnResult::Commit => TxnState::PrepareCommit,
            TxnResult::Abort => TxnState::PrepareAbort,
        }
    }

    /// The state once every marker is written.
    pub fn complete_state(self) -> TxnState {
        match self {
            TxnResult::Commit => TxnState::CompleteCommit,
            TxnResult::Abort => TxnState::CompleteAbort,
        }
    }
}

/// One `__transaction_state` record: key and value (None = tombstone) in
/// Kafka's format (see `records`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnRecord {
    pub key: Bytes,
    pub value: Option<Bytes>,
}

/// Identifies one [`Write`] until its outcome is reported with
/// `TxnCoordinator::write_completed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WriteId(pub u64);

/// A record the broker must append to `partition` of
/// `__transaction_state` with acks=all, then report the outcome of with
/// `TxnCoordinator::write_completed`. The transition it carries takes
/// effect only then; meanwhile the transactional id has a pending state
/// and concurrent requests for it get CONCURRENT_TRANSACTIONS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    pub id: WriteId,
    pub partition: i32,
    pub record: TxnRecord,
}

/// The markers of one transaction, to be written by the leaders of its
/// partitions (WriteTxnMarkers). Once they all answered, the broker asks
/// `TxnCoordinator::complete_markers` for the record that completes the
/// transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkerJob {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub result: TxnResult,
    /// The leader epoch of the `__transaction_state` partition when the
    /// markers were decided; partition leaders fence older coordinators
    /// with it.
    pub coordinator_epoch: i32,
    /// The `__transaction_state` partition of the transactional id.
    pub txn_partition: i32,
    pub partitions: BTreeSet<TopicPartition>,
    /// The coordinator's load of that partition (it changes when the
    /// partition is loaded again, even at the same leader epoch): a job of
    /// an earlier load is stale.
    pub load: u64,
}

/// What a write's outcome means for the broker.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct WriteDone {
    /// The answer of the request that caused the write; None when no
    /// request waits for it (timeouts, completions, expirations).
    pub answer: Option<Result<ProducerIdAndEpoch, ErrorCode>>,
    /// Markers to send now: an EndTxn, a timeout or a fence became
    /// durable.
    pub markers: Option<MarkerJob>,
    /// The write was a completion that failed retriably: ask
    /// `complete_markers` again after a back-off.
    pub retry_completion: bool,
}

/// What a request that may write gives back when it is accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Answered at once, without a write (NONE with this producer).
    Done(ProducerIdAndEpoch),
    /// Answered once this write is durable (`write_completed`).
    Write(Write),
    /// InitProducerId needs a producer id no other producer has: call it
    /// again with one.
    NeedProducerId,
}

/// DescribeTransactions' view of one transactional id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedTxn {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub state: TxnState,
    pub timeout_ms: i32,
    /// -1 when no transaction was started.
    pub start_ms: i64,
    pub partitions: BTreeSet<TopicPartition>,
}

/// ListTransactions' view of one transactional id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedTxn {
    pub transactional_id: String,
    pub producer_id: i64,
    pub state: TxnState,
}

/// ListTransactions' filters; empty lists and a negative duration filter
/// nothing.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ListFilter {
    pub states: Vec<String>,
    pub producer_ids: Vec<i64>,
    /// Only transactions running longer than this (ListTransactions v1),
    /// -1 for all.
    pub duration_ms: i64,
}

/// Counts and ages for the broker's metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TxnGauges {
    /// Transactional ids this coordinator serves.
    pub transactional_ids: usize,
    /// Transactions open (Ongoing, PrepareCommit, PrepareAbort).
    pub open: usize,
    /// Age of the oldest open transaction, 0 when none is open.
    pub oldest_open_age_ms: i64,
    /// Transactions completed by commit since start.
    pub commits: u64,
    /// Transactions completed by abort since start (timeouts included).
    pub aborts: u64,
    /// Transactions aborted because they ran past their timeout.
    pub timeouts: u64,
    /// Transactions whose markers are being written.
    pub completing: usize,
}
