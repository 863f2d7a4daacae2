//! The coordinator: transactional ids by `__transaction_state` partition,
//! partition ownership and loading, the client requests (after Kafka's
//! `TransactionCoordinator`) and the writes they cause, markers, timeouts
//! and expiration (after `TransactionStateManager`).
//!
//! Every request that changes a transactional id returns a [`Write`]; the
//! change takes effect when the broker reports the write durable with
//! [`TxnCoordinator::write_completed`], which also says what to answer and
//! which markers to send. Between the two the transactional id has a
//! pending state, and other requests for it get CONCURRENT_TRANSACTIONS.

use std::collections::{BTreeMap, BTreeSet};

use weir_protocol::error_code::ErrorCode;

use crate::config::TxnConfig;
use crate::metadata::{TransitionError, TxnMetadata};
use crate::records::{self, RecordError, RecordKey};
use crate::state::TxnState;
use crate::types::{DescribedTxn, ListFilter, ListedTxn, MarkerJob, TxnGauges, TxnResult, WriteId};
use crate::writes::{Completing, PendingWrite};

/// Ownership of one `__transaction_state` partition by this coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionStatus {
    /// Serving requests for its transactional ids.
    Active,
    /// Being replayed; requests get COORDINATOR_LOAD_IN_PROGRESS.
    Loading,
    /// Not ours; requests get NOT_COORDINATOR.
    NotOwned,
}

/// Why a record was not replayed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("partition {0} is not being loaded")]
    NotLoading(i32),
    #[error("transactional id {id} belongs to partition {expected}, found in {found}")]
    WrongPartition {
        id: String,
        expected: i32,
        found: i32,
    },
    #[error("transactional id {id} recorded in state {state}, which is never written")]
    UnwrittenState { id: String, state: TxnState },
}

/// Kafka's `Utils.abs(transactionalId.hashCode) % partitions` (`Utils.abs`
/// maps `i32::MIN` to 0, everything else to its absolute value). A
/// non-positive count maps everything to partition 0.
pub fn partition_for(transactional_id: &str, partitions: i32) -> i32 {
    if partitions <= 0 {
        return 0;
    }
    let h = weir_group::java_string_hash(transactional_id);
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions
}

/// The coordinator error an append to `__transaction_state` fails with,
/// as Kafka's `TransactionStateManager` maps the log's errors: the client
/// retries (COORDINATOR_NOT_AVAILABLE) or looks the coordinator up again
/// (NOT_COORDINATOR).
pub fn append_error(code: ErrorCode) -> ErrorCode {
    match code {
        ErrorCode::UnknownTopicOrPartition
        | ErrorCode::NotEnoughReplicas
        | ErrorCode::NotEnoughReplicasAfterAppend
        | ErrorCode::RequestTimedOut => ErrorCode::CoordinatorNotAvailable,
        ErrorCode::NotLeaderOrFollower | ErrorCode::KafkaStorageError => ErrorCode::NotCoordinator,
        ErrorCode::MessageTooLarge | ErrorCode::RecordListTooLarge => ErrorCode::UnknownServerError,
        other => other,
    }
}

/// One `__transaction_state` partition.
#[derive(Debug)]
pub(crate) struct Partition {
    pub(crate) status: PartitionStatus,
    /// Its leader epoch when it was loaded (sent with markers).
    pub(crate) coordinator_epoch: i32,
    /// Which load this is (increases with every load, also at the same
    /// leader epoch): writes and marker jobs of an earlier load are stale.
    pub(crate) load: u64,
    pub(crate) txns: BTreeMap<String, TxnMetadata>,
}

/// The transaction coordinator of one broker.
///
/// A pure state machine: every call takes the current time and returns
/// results, [`Write`]s and [`MarkerJob`]s; it never blocks, reads clocks or
/// does I/O. Invariants: every transactional id sits in the partition
/// [`partition_for`] gives it, in a partition that is Active or Loading;
/// a pending write exists for an id only while its metadata has a pending
/// state (a completing transaction's pending completion included).
#[derive(Debug)]
pub struct TxnCoordinator {
    pub(crate) config: TxnConfig,
    pub(crate) partitions: Vec<Partition>,
    pub(crate) writes: BTreeMap<WriteId, PendingWrite>,
    pub(crate) next_write: u64,
    pub(crate) next_load: u64,
    pub(crate) completing: BTreeMap<String, Completing>,
    pub(crate) next_abort_check_ms: Option<i64>,
    pub(crate) next_expiration_check_ms: Option<i64>,
    pub(crate) commits: u64,
    pub(crate) aborts: u64,
    pub(crate) timeouts: u64,
}

pub(crate) fn transition_failed(e: &TransitionError) -> ErrorCode {
    debug_assert!(false, "transaction coordinator bug: {e}");
    ErrorCode::UnknownServerError
}

impl TxnCoordinator {
    /// A coordinator owning every `__transaction_state` partition at leader
    /// epoch 0, with no transactional ids (a single broker with nothing to
    /// load). Use [`TxnCoordinator::begin_load`] to replay records first.
    pub fn new(config: TxnConfig) -> TxnCoordinator {
        let n = usize::try_from(config.state_topic_partitions.max(1)).unwrap_or(1);
        TxnCoordinator {
            partitions: (0..n)
                .map(|i| Partition {
                    status: PartitionStatus::Active,
                    coordinator_epoch: 0,
                    load: i as u64,
                    txns: BTreeMap::new(),
                })
                .collect(),
            config,
            writes: BTreeMap::new(),
            next_write: 1,
            next_load: n as u64,
            completing: BTreeMap::new(),
            next_abort_check_ms: None,
            next_expiration_check_ms: None,
            commits: 0,
            aborts: 0,
            timeouts: 0,
        }
    }

    pub fn config(&self) -> &TxnConfig {
        &self.config
    }

    /// The `__transaction_state` partition of `transactional_id`, whose
    /// leader coordinates it.
    pub fn partition_for(&self, transactional_id: &str) -> i32 {
        partition_for(transactional_id, self.config.state_topic_partitions)
    }

    pub(crate) fn slot(&self, partition: i32) -> Option<&Partition> {
        self.partitions.get(usize::try_from(partition).ok()?)
    }

    pub fn partition_status(&self, partition: i32) -> PartitionStatus {
        self.slot(partition)
            .map_or(PartitionStatus::NotOwned, |p| p.status)
    }

    /// The leader epoch a partition was loaded at, while owned.
    pub fn coordinator_epoch(&self, partition: i32) -> Option<i32> {
        self.slot(partition)
            .filter(|p| p.status != PartitionStatus::NotOwned)
            .map(|p| p.coordinator_epoch)
    }

    /// The index of the partition of `transactional_id` if this coordinator
    /// serves it now.
    pub(crate) fn owner(&self, transactional_id: &str) -> Result<usize, ErrorCode> {
        let p = self.partition_for(transactional_id);
        match self.partition_status(p) {
            PartitionStatus::Active => Ok(usize::try_from(p).unwrap_or(0)),
            PartitionStatus::Loading => Err(ErrorCode::CoordinatorLoadInProgress),
            PartitionStatus::NotOwned => Err(ErrorCode::NotCoordinator),
        }
    }

    /// The metadata of a transactional id this coordinator serves.
    pub fn metadata(&self, transactional_id: &str) -> Option<&TxnMetadata> {
        let p = self.slot(self.partition_for(transactional_id))?;
        p.txns.get(transactional_id)
    }

    /// Every transactional id this coordinator holds (Active and Loading
    /// partitions).
    pub fn all_metadata(&self) -> impl Iterator<Item = &TxnMetadata> {
        self.partitions.iter().flat_map(|p| p.txns.values())
    }

    // ------------------------------------------------------------ loading

    /// Starts loading `partition` at `coordinator_epoch`: whatever was held
    /// for it is dropped (writes and markers of the earlier load become
    /// stale) and requests get COORDINATOR_LOAD_IN_PROGRESS until
    /// [`TxnCoordinator::complete_load`].
    pub fn begin_load(&mut self, partition: i32, coordinator_epoch: i32) {
        let load = self.next_load;
        self.next_load += 1;
        let Some(p) = usize::try_from(partition)
            .ok()
            .and_then(|i| self.partitions.get_mut(i))
        else {
            return;
        };
        *p = Partition {
            status: PartitionStatus::Loading,
            coordinator_epoch,
            load,
            txns: BTreeMap::new(),
        };
        self.forget_completing(partition);
    }

    /// Applies one record of a partition being loaded; a tombstone
    /// (`value` None) forgets the transactional id. A key of another record
    /// type is skipped.
    pub fn replay(
        &mut self,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), ReplayError> {
        let count = self.config.state_topic_partitions;
        let p = usize::try_from(partition)
            .ok()
            .and_then(|i| self.partitions.get_mut(i))
            .filter(|p| p.status == PartitionStatus::Loading)
            .ok_or(ReplayError::NotLoading(partition))?;
        let id = match records::decode_key(key)? {
            RecordKey::Transaction { transactional_id } => transactional_id,
            RecordKey::Other { .. } => return Ok(()),
        };
        let expected = partition_for(&id, count);
        if expected != partition {
            return Err(ReplayError::WrongPartition {
                id,
                expected,
                found: partition,
            });
        }
        match value {
            None => {
                p.txns.remove(&id);
            }
            Some(v) => {
                let m = records::decode_value(&id, v)?;
                if matches!(m.state, TxnState::Dead | TxnState::PrepareEpochFence) {
                    return Err(ReplayError::UnwrittenState { id, state: m.state });
                }
                p.txns.insert(id, m);
            }
        }
        Ok(())
    }

    /// Ends the load of `partition`: it serves requests from now on, and
    /// transactions found in PrepareCommit or PrepareAbort finish — their
    /// markers are returned to be sent.
    pub fn complete_load(&mut self, partition: i32, now_ms: i64) -> Vec<MarkerJob> {
        let Some(i) = usize::try_from(partition)
            .ok()
            .filter(|&i| i < self.partitions.len())
        else {
            return Vec::new();
        };
        if self.partitions[i].status != PartitionStatus::Loading {
            return Vec::new();
        }
        self.partitions[i].status = PartitionStatus::Active;
        let ids: Vec<String> = self.partitions[i]
            .txns
            .iter()
            .filter(|(_, m)| matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort))
            .map(|(id, _)| id.clone())
            .collect();
        let mut jobs = Vec::new();
        for id in ids {
            let result = match self.partitions[i].txns[&id].state {
                TxnState::PrepareCommit => TxnResult::Commit,
                _ => TxnResult::Abort,
            };
            if let Some(job) = self.start_markers(i, &id, result, now_ms) {
                jobs.push(job);
            }
        }
        jobs
    }

    /// Drops `partition` (this broker no longer leads it): its
    /// transactional ids are forgotten, its writes and markers become
    /// stale.
    pub fn unload(&mut self, partition: i32) {
        if let Some(p) = usize::try_from(partition)
            .ok()
            .and_then(|i| self.partitions.get_mut(i))
        {
            p.status = PartitionStatus::NotOwned;
            p.txns.clear();
        }
        self.forget_completing(partition);
    }

    fn forget_completing(&mut self, partition: i32) {
        let count = self.config.state_topic_partitions;
        self.completing
            .retain(|id, _| partition_for(id, count) != partition);
    }

    // ------------------------------------------------------------ queries

    /// DescribeTransactions of one transactional id.
    pub fn describe(&self, transactional_id: &str) -> Result<DescribedTxn, ErrorCode> {
        if transactional_id.is_empty() {
            return Err(ErrorCode::InvalidRequest);
        }
        let p = self.owner(transactional_id)?;
        let m = self.partitions[p]
            .txns
            .get(transactional_id)
            .filter(|m| m.state != TxnState::Dead)
            .ok_or(ErrorCode::TransactionalIdNotFound)?;
        Ok(DescribedTxn {
            transactional_id: transactional_id.to_string(),
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
            state: m.state,
            timeout_ms: m.timeout_ms,
            start_ms: m.start_ms,
            partitions: m.partitions.clone(),
        })
    }

    /// ListTransactions: the transactional ids of every partition this
    /// coordinator serves that pass `filter`, and the state names in it
    /// that are no state. COORDINATOR_LOAD_IN_PROGRESS while a partition
    /// loads.
    pub fn list(
        &self,
        filter: &ListFilter,
        now_ms: i64,
    ) -> Result<(Vec<ListedTxn>, Vec<String>), ErrorCode> {
        if self
            .partitions
            .iter()
            .any(|p| p.status == PartitionStatus::Loading)
        {
            return Err(ErrorCode::CoordinatorLoadInProgress);
        }
        let mut states = BTreeSet::new();
        let mut unknown = Vec::new();
        for name in &filter.states {
            match TxnState::from_name(name) {
                Some(s) => {
                    states.insert(s);
                }
                None => unknown.push(name.clone()),
            }
        }
        let include = |m: &TxnMetadata| {
            m.state != TxnState::Dead
                && (filter.producer_ids.is_empty() || filter.producer_ids.contains(&m.producer_id))
                && (filter.states.is_empty() || states.contains(&m.state))
                // Kafka compares with the start even when none was
                // recorded (-1): such ids always pass.
                && (filter.duration_ms < 0 || now_ms.saturating_sub(m.start_ms) > filter.duration_ms)
        };
        let listed = self
            .partitions
            .iter()
            .filter(|p| p.status == PartitionStatus::Active)
            .flat_map(|p| p.txns.values())
            .filter(|m| include(m))
            .map(|m| ListedTxn {
                transactional_id: m.transactional_id.clone(),
                producer_id: m.producer_id,
                state: m.state,
            })
            .collect();
        Ok((listed, unknown))
    }

    /// Counts for the metrics.
    pub fn gauges(&self, now_ms: i64) -> TxnGauges {
        let mut g = TxnGauges {
            commits: self.commits,
            aborts: self.aborts,
            timeouts: self.timeouts,
            completing: self.completing.len(),
            ..TxnGauges::default()
        };
        for m in self
            .partitions
            .iter()
            .filter(|p| p.status == PartitionStatus::Active)
            .flat_map(|p| p.txns.values())
        {
            g.transactional_ids += 1;
            if m.state.is_open() {
                g.open += 1;
                let age = now_ms.saturating_sub(m.start_ms).max(0);
                g.oldest_open_age_ms = g.oldest_open_age_ms.max(age);
            }
        }
        g
    }

    /// Writes reported by no `write_completed` yet (for tests and
    /// diagnostics).
    pub fn writes_in_flight(&self) -> usize {
        self.writes.len()
    }
}

/// What is always true of a transactional id at rest, checked after every
/// transition in debug builds.
pub(crate) fn debug_check(m: &TxnMetadata) {
    debug_assert!(
        !matches!(m.state, TxnState::Dead | TxnState::PrepareEpochFence),
        "{} rests in {}",
        m.transactional_id,
        m.state
    );
    debug_assert!(
        !matches!(
            m.state,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        ) || m.partitions.is_empty(),
        "{} in {} holds partitions",
        m.transactional_id,
        m.state
    );
    debug_assert!(
        m.producer_epoch >= 0,
        "{} without an epoch",
        m.transactional_id
    );
    debug_assert!(
        m.state == TxnState::Empty || m.start_ms >= 0,
        "{} in {} without a start",
        m.transactional_id,
        m.state
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_for_is_kafkas_utils_abs() {
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE: Utils.abs
        // gives 0.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        // "consumer-0".hashCode() == -166239207: Math.abs, not a mask.
        assert_eq!(partition_for("consumer-0", 50), 166_239_207 % 50);
        assert_eq!(partition_for("hello", 50), 99_162_322 % 50);
        assert_eq!(partition_for("x", 0), 0);
    }

    #[test]
    fn append_errors_map_as_kafkas_state_manager() {
        use ErrorCode::*;
        for (from, to) in [
            (UnknownTopicOrPartition, CoordinatorNotAvailable),
            (NotEnoughReplicas, CoordinatorNotAvailable),
            (NotEnoughReplicasAfterAppend, CoordinatorNotAvailable),
            (RequestTimedOut, CoordinatorNotAvailable),
            (NotLeaderOrFollower, NotCoordinator),
            (KafkaStorageError, NotCoordinator),
            (MessageTooLarge, UnknownServerError),
            (RecordListTooLarge, UnknownServerError),
            (CorruptMessage, CorruptMessage),
        ] {
            assert_eq!(append_error(from), to, "{from:?}");
        }
    }
}
