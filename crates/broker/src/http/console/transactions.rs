//! `/api/transactions`: the transactional ids this broker coordinates (the
//! ids of the `__transaction_state` partitions it leads and has loaded),
//! each with its producer, state, timeout, partitions and how long its
//! open transaction has run, and the coordinator's counts (the
//! `weir_transaction*` metrics' values).
//!
//! Read under one coordinator lock, so the list and the counts agree. Open
//! transactions come first, the oldest first (they are what an operator
//! looks for: a transaction that holds back read_committed consumers),
//! then the others by id; at most [`MAX_LISTED`] are listed and `total`
//! says how many there are.

use serde::Serialize;
use weir_txn::{PartitionStatus, TxnCoordinator, TxnMetadata, TxnState};

use super::ConsoleError;
use crate::broker::Broker;

/// Transactional ids listed at most in one answer.
pub const MAX_LISTED: usize = 1000;

/// A partition of an open transaction.
#[derive(Serialize, Debug, PartialEq, Eq)]
pub struct TxnPartition {
    pub topic: String,
    pub partition: i32,
}

/// One transactional id.
#[derive(Serialize, Debug, PartialEq, Eq)]
pub struct TxnEntry {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// Kafka's state name (`Ongoing`, `PrepareCommit`, …).
    pub state: &'static str,
    /// The state being written to `__transaction_state` (a request or the
    /// markers' completion waits for it), null when none is.
    pub pending_state: Option<&'static str>,
    pub timeout_ms: i32,
    /// When the open (or last) transaction started; null before the first.
    pub start_ms: Option<i64>,
    /// How long the open transaction has run (now − start); null when no
    /// transaction is open.
    pub open_age_ms: Option<i64>,
    pub last_update_ms: i64,
    /// The partitions of the open transaction; in PrepareCommit and
    /// PrepareAbort those still waiting for their marker.
    pub partitions: Vec<TxnPartition>,
    /// The `__transaction_state` partition holding the id.
    pub coordinator_partition: i32,
}

/// The coordinator's counts, as `/metrics` reports them.
#[derive(Serialize, Debug, PartialEq, Eq)]
pub struct TxnCounts {
    pub transactional_ids: usize,
    pub open: usize,
    /// 0 when no transaction is open.
    pub oldest_open_age_ms: i64,
    pub completing: usize,
    pub committed: u64,
    pub aborted: u64,
    pub timed_out: u64,
}

#[derive(Serialize, Debug, PartialEq, Eq)]
pub struct TransactionsView {
    pub node_id: i32,
    pub now_ms: i64,
    /// `__transaction_state` partitions this broker leads and serves.
    pub coordinated_partitions: Vec<i32>,
    /// Partitions this broker is replaying (their ids are not listed yet).
    pub loading_partitions: Vec<i32>,
    /// Transactional ids of the coordinated partitions (all of them, also
    /// those beyond [`MAX_LISTED`]).
    pub total: usize,
    pub transactions: Vec<TxnEntry>,
    pub counts: TxnCounts,
}

pub fn transactions(b: &Broker) -> Result<TransactionsView, ConsoleError> {
    let txns = b
        .transactions()
        .ok_or(ConsoleError::TxnCoordinatorUnavailable)?;
    let now = b.now_ms();
    let coord = txns.lock();
    Ok(view(&coord, b.config.node_id, now, MAX_LISTED))
}

/// The view of `coord` at `now_ms`, listing at most `limit` ids.
pub fn view(coord: &TxnCoordinator, node_id: i32, now_ms: i64, limit: usize) -> TransactionsView {
    let partitions = coord.config().state_topic_partitions;
    let with = |status| {
        (0..partitions)
            .filter(|&p| coord.partition_status(p) == status)
            .collect::<Vec<i32>>()
    };
    let coordinated = with(PartitionStatus::Active);
    let served = |m: &&TxnMetadata| {
        m.state != TxnState::Dead
            && coord.partition_status(coord.partition_for(&m.transactional_id))
                == PartitionStatus::Active
    };
    let mut listed: Vec<&TxnMetadata> = coord.all_metadata().filter(served).collect();
    // open first, oldest first; then by id
    listed.sort_by(|x, y| {
        let open = |m: &TxnMetadata| m.state.is_open();
        open(y)
            .cmp(&open(x))
            .then_with(|| {
                if open(x) {
                    x.start_ms.cmp(&y.start_ms)
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .then_with(|| x.transactional_id.cmp(&y.transactional_id))
    });
    let total = listed.len();
    let g = coord.gauges(now_ms);
    TransactionsView {
        node_id,
        now_ms,
        coordinated_partitions: coordinated,
        loading_partitions: with(PartitionStatus::Loading),
        total,
        transactions: listed
            .into_iter()
            .take(limit)
            .map(|m| entry(coord, m, now_ms))
            .collect(),
        counts: TxnCounts {
            transactional_ids: g.transactional_ids,
            open: g.open,
            oldest_open_age_ms: g.oldest_open_age_ms,
            completing: g.completing,
            committed: g.commits,
            aborted: g.aborts,
            timed_out: g.timeouts,
        },
    }
}

fn entry(coord: &TxnCoordinator, m: &TxnMetadata, now_ms: i64) -> TxnEntry {
    let started = m.start_ms >= 0;
    TxnEntry {
        transactional_id: m.transactional_id.clone(),
        producer_id: m.producer_id,
        producer_epoch: m.producer_epoch,
        state: m.state.name(),
        pending_state: m.pending.map(TxnState::name),
        timeout_ms: m.timeout_ms,
        start_ms: started.then_some(m.start_ms),
        // the same age as weir_transactions_oldest_open_age_seconds
        open_age_ms: (m.state.is_open() && started)
            .then(|| now_ms.saturating_sub(m.start_ms).max(0)),
        last_update_ms: m.last_update_ms,
        partitions: m
            .partitions
            .iter()
            .map(|tp| TxnPartition {
                topic: tp.topic.clone(),
                partition: tp.partition,
            })
            .collect(),
        coordinator_partition: coord.partition_for(&m.transactional_id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_txn::{TopicPartition, TxnConfig, partition_for, records};

    const PARTITIONS: i32 = 3;

    /// A coordinator that replayed one record per `(id, state, start_ms)`
    /// (producer id = index, epoch 2, partition `t`-0 while open); the
    /// partition of `loading` is left loading.
    fn replayed(ids: &[(&str, TxnState, i64)], loading: Option<i32>) -> TxnCoordinator {
        let mut coord = TxnCoordinator::new(TxnConfig {
            state_topic_partitions: PARTITIONS,
            ..TxnConfig::default()
        });
        for p in 0..PARTITIONS {
            coord.begin_load(p, 0);
        }
        for (i, (id, state, start_ms)) in ids.iter().enumerate() {
            let mut m = TxnMetadata::new(id, i as i64, 60_000, 5);
            m.producer_epoch = 2;
            m.state = *state;
            m.start_ms = *start_ms;
            if state.is_open() {
                m.partitions.insert(TopicPartition::new("t", 0));
            }
            let r = records::record(id, &m.current());
            let p = partition_for(id, PARTITIONS);
            coord.replay(p, &r.key, r.value.as_deref()).unwrap();
        }
        for p in (0..PARTITIONS).filter(|&p| Some(p) != loading) {
            coord.complete_load(p, 0);
        }
        coord
    }

    fn ids(v: &TransactionsView) -> Vec<&str> {
        v.transactions
            .iter()
            .map(|t| t.transactional_id.as_str())
            .collect()
    }

    #[test]
    fn open_transactions_come_first_oldest_first_then_the_rest_by_id() {
        let coord = replayed(
            &[
                ("idle-b", TxnState::Empty, -1),
                ("young", TxnState::Ongoing, 900),
                ("idle-a", TxnState::CompleteCommit, 100),
                ("old", TxnState::PrepareCommit, 200),
                ("aborted", TxnState::CompleteAbort, 300),
            ],
            None,
        );
        let v = view(&coord, 7, 1000, MAX_LISTED);
        assert_eq!(ids(&v), ["old", "young", "aborted", "idle-a", "idle-b"]);
        assert_eq!((v.node_id, v.now_ms, v.total), (7, 1000, 5));
        assert_eq!(v.coordinated_partitions, [0, 1, 2]);
        assert!(v.loading_partitions.is_empty());
        let old = &v.transactions[0];
        assert_eq!(
            (
                old.state,
                old.producer_id,
                old.producer_epoch,
                old.timeout_ms
            ),
            ("PrepareCommit", 3, 2, 60_000)
        );
        assert_eq!((old.start_ms, old.open_age_ms), (Some(200), Some(800)));
        assert_eq!(
            old.partitions,
            [TxnPartition {
                topic: "t".into(),
                partition: 0
            }]
        );
        // the load resumed its markers: the completion is pending
        assert_eq!(old.pending_state, Some("CompleteCommit"));
        assert_eq!(old.coordinator_partition, partition_for("old", PARTITIONS));
        let idle = &v.transactions[4];
        assert_eq!((idle.start_ms, idle.open_age_ms), (None, None));
        let done = &v.transactions[3];
        assert_eq!((done.start_ms, done.open_age_ms), (Some(100), None));
        assert!(done.partitions.is_empty());
        assert_eq!(
            (v.counts.transactional_ids, v.counts.open),
            (5, 2),
            "{:?}",
            v.counts
        );
        assert_eq!(v.counts.oldest_open_age_ms, old.open_age_ms.unwrap());
    }

    #[test]
    fn the_list_is_capped_and_loading_partitions_are_not_listed() {
        let names: Vec<String> = (0..20).map(|i| format!("id-{i:02}")).collect();
        let all: Vec<(&str, TxnState, i64)> = names
            .iter()
            .map(|n| (n.as_str(), TxnState::Empty, -1))
            .collect();
        let coord = replayed(&all, None);
        let v = view(&coord, 1, 0, 5);
        assert_eq!(v.total, 20);
        assert_eq!(ids(&v), ["id-00", "id-01", "id-02", "id-03", "id-04"]);

        let coord = replayed(&all, Some(1));
        let v = view(&coord, 1, 0, MAX_LISTED);
        assert_eq!(v.loading_partitions, [1]);
        assert_eq!(v.coordinated_partitions, [0, 2]);
        let listed = ids(&v);
        assert!(!listed.is_empty());
        assert!(
            listed.iter().all(|id| partition_for(id, PARTITIONS) != 1),
            "{listed:?}"
        );
        assert_eq!(v.total, listed.len());
        assert_eq!(
            v.total,
            names
                .iter()
                .filter(|n| partition_for(n, PARTITIONS) != 1)
                .count()
        );
    }
}
