//! Idempotent-producer state: per producer id and partition, the epoch and
//! the last [`MAX_TRACKED_BATCHES`] batches appended (sequence range and
//! offsets), used to reject sequence gaps and to answer retried batches with
//! their original offsets. Pure logic: no I/O, no clock.
//!
//! Rules (as Kafka's `ProducerStateManager`):
//! - no state for the producer id (new, or expired): any sequence is
//!   accepted and starts the state;
//! - an epoch lower than the known one is fenced (INVALID_PRODUCER_EPOCH);
//! - a higher epoch must start at sequence 0;
//! - same epoch: a batch equal to one of the last five is a duplicate;
//!   otherwise its first sequence must be last sequence + 1 (wrapping at
//!   `i32::MAX`), else OUT_OF_ORDER_SEQUENCE_NUMBER.
//!
//! Transactions (Kafka's `ProducerAppendInfo`, transaction version 1): a
//! producer's transactional batch opens its transaction at the batch's
//! offset when none is open; its COMMIT or ABORT marker (a control batch)
//! closes it and yields the [`CompletedTxn`]. A non-transactional batch of a
//! producer with an open transaction is refused (INVALID_TXN_STATE); a
//! marker of an older producer epoch (INVALID_PRODUCER_EPOCH) or coordinator
//! epoch (TRANSACTION_COORDINATOR_FENCED) too. A marker of a producer with
//! nothing open is accepted and completes nothing. The partition's first
//! unstable offset is the smallest first offset of a transaction still open,
//! or ended by a marker the high watermark has not passed yet (Kafka's
//! unreplicated transactions: until its marker is replicated, a new leader
//! may still see it open); the last stable offset (LSO) is the high
//! watermark capped by it.
//!
//! ```
//! use weir_broker::producer_state::{BatchMeta, PartitionProducers};
//! let mut p = PartitionProducers::default();
//! let batch = |first_offset| BatchMeta {
//!     first_seq: 0, last_seq: 0, first_offset, last_offset: first_offset, timestamp: 0,
//! };
//! p.record_data(7, 0, Some(batch(10)), true);
//! p.record_data(8, 0, Some(batch(11)), true);
//! assert_eq!(p.last_stable_offset(20), 10);
//! // Producer 7's marker at offset 12 ends its transaction.
//! let done = p.end_txn(7, 0, 0, 12, 0).unwrap();
//! assert_eq!((done.first_offset, done.next_open_offset), (10, Some(11)));
//! // Until the high watermark passes the marker, 7's still counts.
//! assert_eq!(p.last_stable_offset(12), 10);
//! assert_eq!(p.last_stable_offset(20), 11);
//! ```

use std::collections::{BTreeSet, HashMap, VecDeque};

/// How many recent batches per producer and partition are remembered for
/// de-duplication (Kafka: 5, the client's max in-flight requests).
pub const MAX_TRACKED_BATCHES: usize = 5;

/// One appended batch of an idempotent producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMeta {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    /// Max timestamp of the batch (Kafka expires idle producers by it).
    pub timestamp: i64,
}

/// What to do with an incoming batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqCheck {
    /// Append it.
    Append,
    /// Already appended: acknowledge with the original offsets.
    Duplicate(BatchMeta),
    /// A gap or reordering.
    OutOfOrder { expected: i32, got: i32 },
    /// The producer's epoch is older than the current one.
    Fenced { current: i16, got: i16 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    pub batches: VecDeque<BatchMeta>,
    /// The coordinator epoch of the producer's last marker (-1: none).
    pub coordinator_epoch: i32,
    /// The first offset of the producer's open transaction.
    pub current_txn_first_offset: Option<i64>,
    /// The timestamp of its last batch or marker.
    pub last_timestamp: i64,
}

impl Default for ProducerEntry {
    fn default() -> Self {
        ProducerEntry {
            epoch: 0,
            batches: VecDeque::new(),
            coordinator_epoch: -1,
            current_txn_first_offset: None,
            last_timestamp: -1,
        }
    }
}

/// A transaction a marker ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    /// The offset of its first batch.
    pub first_offset: i64,
    /// The first offset of the earliest transaction (of another producer)
    /// still open once it ended: the partition's first unstable offset
    /// then, which an ABORT's `.txnindex` entry records as its last stable
    /// offset (Kafka's `lastStableOffset(completedTxn)`).
    pub next_open_offset: Option<i64>,
}

/// Why a marker is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerRefusal {
    /// The marker's producer epoch is older than the partition's.
    Fenced { current: i16, got: i16 },
    /// The marker's coordinator epoch is older than the last marker's.
    CoordinatorFenced { current: i32, got: i32 },
}

/// State of all producers for one partition.
///
/// Always true of it: `open_txns` holds exactly `(first offset, producer)`
/// of each producer whose `current_txn_first_offset` is set.
#[derive(Debug, Clone, Default)]
pub struct PartitionProducers {
    producers: HashMap<i64, ProducerEntry>,
    /// The open transactions, by first offset.
    open_txns: BTreeSet<(i64, i64)>,
    /// Ended transactions as (first offset, producer, marker offset) whose
    /// marker the high watermark may not have passed yet (forgotten by
    /// [`PartitionProducers::first_unstable_offset_at`] once it has).
    unreplicated: BTreeSet<(i64, i64, i64)>,
}

fn next_seq(seq: i32) -> i32 {
    if seq == i32::MAX { 0 } else { seq + 1 }
}

/// The last sequence of a batch starting at `first` with `count` records.
pub fn last_seq(first: i32, count: i32) -> i32 {
    let span = (count.max(1) - 1) as i64;
    ((first as i64 + span) % (i32::MAX as i64 + 1)) as i32
}

impl PartitionProducers {
    pub fn check(&self, producer_id: i64, epoch: i16, first_seq: i32, last_seq: i32) -> SeqCheck {
        let Some(e) = self.producers.get(&producer_id) else {
            return SeqCheck::Append;
        };
        if epoch < e.epoch {
            return SeqCheck::Fenced {
                current: e.epoch,
                got: epoch,
            };
        }
        if epoch > e.epoch {
            return if first_seq == 0 {
                SeqCheck::Append
            } else {
                SeqCheck::OutOfOrder {
                    expected: 0,
                    got: first_seq,
                }
            };
        }
        if let Some(b) = e
            .batches
            .iter()
            .find(|b| b.first_seq == first_seq && b.last_seq == last_seq)
        {
            return SeqCheck::Duplicate(*b);
        }
        match e.batches.back() {
            None => SeqCheck::Append,
            Some(last) if next_seq(last.last_seq) == first_seq => SeqCheck::Append,
            Some(last) => SeqCheck::OutOfOrder {
                expected: next_seq(last.last_seq),
                got: first_seq,
            },
        }
    }

    /// Records an appended batch (after [`PartitionProducers::check`]
    /// returned `Append`, or while rebuilding from the log).
    pub fn record(&mut self, producer_id: i64, epoch: i16, batch: BatchMeta) {
        let e = self.producers.entry(producer_id).or_default();
        if epoch != e.epoch {
            e.batches.clear();
            e.epoch = epoch;
        }
        e.last_timestamp = batch.timestamp;
        e.batches.push_back(batch);
        while e.batches.len() > MAX_TRACKED_BATCHES {
            e.batches.pop_front();
        }
    }

    /// Whether a batch of `producer_id` that is (or is not) transactional
    /// may be appended: a non-transactional batch while the producer has a
    /// transaction open is refused (Kafka's `InvalidTxnStateException`),
    /// returning that transaction's first offset.
    pub fn check_txn(&self, producer_id: i64, transactional: bool) -> Result<(), i64> {
        match self
            .producers
            .get(&producer_id)
            .and_then(|e| e.current_txn_first_offset)
        {
            Some(first) if !transactional => Err(first),
            _ => Ok(()),
        }
    }

    /// Records an appended data batch of `producer_id` in `epoch`: its
    /// sequence range when it has one (`batch`; a coordinator's batch has
    /// none), and, when `transactional`, the transaction it opens at its
    /// first offset if none is open. `first_offset` is the batch's first
    /// offset (that of `batch` when given).
    pub fn record_data(
        &mut self,
        producer_id: i64,
        epoch: i16,
        batch: Option<BatchMeta>,
        transactional: bool,
    ) {
        self.record_data_at(producer_id, epoch, batch, transactional, None);
    }

    fn record_data_at(
        &mut self,
        producer_id: i64,
        epoch: i16,
        batch: Option<BatchMeta>,
        transactional: bool,
        first_offset: Option<i64>,
    ) {
        match batch {
            Some(b) => self.record(producer_id, epoch, b),
            None => self.set_epoch(producer_id, epoch),
        }
        let Some(first) = batch.map(|b| b.first_offset).or(first_offset) else {
            return;
        };
        if transactional {
            let e = self.producers.entry(producer_id).or_default();
            if e.current_txn_first_offset.is_none() {
                e.current_txn_first_offset = Some(first);
                self.open_txns.insert((first, producer_id));
            }
        }
    }

    /// The producer's epoch becomes `epoch`; its batches are forgotten when
    /// the epoch changes (Kafka's `maybeUpdateProducerEpoch`).
    fn set_epoch(&mut self, producer_id: i64, epoch: i16) {
        let e = self.producers.entry(producer_id).or_default();
        if epoch != e.epoch {
            e.batches.clear();
            e.epoch = epoch;
        }
    }

    /// Whether a marker of `producer_id` in `epoch` from a coordinator in
    /// `coordinator_epoch` may be appended.
    pub fn check_marker(
        &self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
    ) -> Result<(), MarkerRefusal> {
        let Some(e) = self.producers.get(&producer_id) else {
            return Ok(());
        };
        if epoch < e.epoch {
            return Err(MarkerRefusal::Fenced {
                current: e.epoch,
                got: epoch,
            });
        }
        if coordinator_epoch < e.coordinator_epoch {
            return Err(MarkerRefusal::CoordinatorFenced {
                current: e.coordinator_epoch,
                got: coordinator_epoch,
            });
        }
        Ok(())
    }

    /// What [`PartitionProducers::end_txn`] would return for a marker of
    /// `producer_id` now (for indexing an ABORT with its marker).
    pub fn would_complete(&self, producer_id: i64) -> Option<CompletedTxn> {
        let first = self.producers.get(&producer_id)?.current_txn_first_offset?;
        Some(CompletedTxn {
            producer_id,
            first_offset: first,
            next_open_offset: self
                .open_txns
                .iter()
                .find(|&&(_, p)| p != producer_id)
                .map(|&(f, _)| f),
        })
    }

    /// Records an appended COMMIT or ABORT marker of `producer_id` at
    /// `marker_offset`: its open transaction, if any, ends and is returned;
    /// the producer takes the marker's epochs (Kafka's `appendEndTxnMarker`;
    /// no checks, see [`PartitionProducers::check_marker`]).
    pub fn end_txn(
        &mut self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
        marker_offset: i64,
        timestamp: i64,
    ) -> Option<CompletedTxn> {
        self.set_epoch(producer_id, epoch);
        let e = self.producers.entry(producer_id).or_default();
        e.coordinator_epoch = coordinator_epoch;
        e.last_timestamp = timestamp;
        let first = e.current_txn_first_offset.take()?;
        self.open_txns.remove(&(first, producer_id));
        self.unreplicated
            .insert((first, producer_id, marker_offset));
        Some(CompletedTxn {
            producer_id,
            first_offset: first,
            next_open_offset: self.first_open_offset(),
        })
    }

    /// The smallest first offset of an open transaction.
    pub fn first_open_offset(&self) -> Option<i64> {
        self.open_txns.first().map(|&(first, _)| first)
    }

    /// The first unstable offset once the high watermark is `hw`: the
    /// smallest first offset of a transaction open, or ended by a marker
    /// at or above `hw`. Ended transactions whose marker is below `hw` are
    /// forgotten (they are replicated).
    pub fn first_unstable_offset_at(&mut self, hw: i64) -> Option<i64> {
        self.unreplicated.retain(|&(_, _, marker)| marker >= hw);
        let ended = self.unreplicated.first().map(|&(first, _, _)| first);
        match (self.first_open_offset(), ended) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The last stable offset at high watermark `hw`: `hw`, capped by the
    /// first unstable offset.
    pub fn last_stable_offset(&mut self, hw: i64) -> i64 {
        self.first_unstable_offset_at(hw).map_or(hw, |f| f.min(hw))
    }

    /// The open transactions as (first offset, producer id), oldest first.
    pub fn open_txns(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.open_txns.iter().copied()
    }

    /// Applies a batch appended without checks (a follower's, or one read
    /// back from the log while rebuilding): sequences of batches that have
    /// them, transactions opened and ended. `control` is the type of a
    /// control batch's marker (`Some(true)` COMMIT, `Some(false)` ABORT),
    /// `None` for a data batch or another control batch. Returns the
    /// transaction a marker ended.
    pub fn apply(&mut self, b: &AppliedBatch) -> Option<CompletedTxn> {
        if b.producer_id < 0 {
            return None;
        }
        if b.is_control {
            b.marker?;
            return self.end_txn(
                b.producer_id,
                b.epoch,
                b.coordinator_epoch,
                b.base_offset,
                b.max_timestamp,
            );
        }
        let meta = (b.base_sequence >= 0).then(|| BatchMeta {
            first_seq: b.base_sequence,
            last_seq: last_seq(b.base_sequence, (b.last_offset - b.base_offset + 1) as i32),
            first_offset: b.base_offset,
            last_offset: b.last_offset,
            timestamp: b.max_timestamp,
        });
        self.record_data_at(
            b.producer_id,
            b.epoch,
            meta,
            b.is_transactional,
            Some(b.base_offset),
        );
        None
    }

    /// Restores a producer's transaction and coordinator epoch (a snapshot
    /// being read).
    fn restore_txn(&mut self, producer_id: i64, coordinator_epoch: i32, first: Option<i64>) {
        let e = self.producers.entry(producer_id).or_default();
        e.coordinator_epoch = coordinator_epoch;
        if let Some(old) = e.current_txn_first_offset.take() {
            self.open_txns.remove(&(old, producer_id));
        }
        if let Some(f) = first {
            e.current_txn_first_offset = Some(f);
            self.open_txns.insert((f, producer_id));
        }
    }

    /// Every producer with its state, in producer id order.
    pub fn entries(&self) -> Vec<(i64, &ProducerEntry)> {
        let mut v: Vec<_> = self.producers.iter().map(|(k, e)| (*k, e)).collect();
        v.sort_by_key(|(k, _)| *k);
        v
    }

    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Drops state of batches at or after `offset` (log truncation), and
    /// the transactions opened there. Markers cut are not undone: a
    /// truncated partition's state is rebuilt from its log instead (see
    /// `ReplicaManager::truncate_to`).
    pub fn truncate_to(&mut self, offset: i64) {
        for (pid, e) in self.producers.iter_mut() {
            e.batches.retain(|b| b.last_offset < offset);
            if let Some(first) = e.current_txn_first_offset
                && first >= offset
            {
                e.current_txn_first_offset = None;
                self.open_txns.remove(&(first, *pid));
            }
        }
        self.unreplicated.retain(|&(_, _, marker)| marker < offset);
        self.producers
            .retain(|_, e| !e.batches.is_empty() || e.current_txn_first_offset.is_some());
    }

    /// Restores one entry of a snapshot: a batch of the producer's (with
    /// its epochs and open transaction), or, with `batch` `None`, a
    /// producer known without one (by a marker, or a coordinator's batch).
    pub(crate) fn restore(
        &mut self,
        producer_id: i64,
        epoch: i16,
        batch: Option<BatchMeta>,
        coordinator_epoch: i32,
        current_txn_first_offset: Option<i64>,
        timestamp: i64,
    ) {
        match batch {
            Some(b) => self.record(producer_id, epoch, b),
            None => {
                self.set_epoch(producer_id, epoch);
                if let Some(e) = self.producers.get_mut(&producer_id) {
                    e.last_timestamp = timestamp;
                }
            }
        }
        self.restore_txn(producer_id, coordinator_epoch, current_txn_first_offset);
    }

    /// After a snapshot is read: a producer with batches has its last
    /// batch's timestamp (what a snapshot can say again).
    pub(crate) fn normalize_timestamps(&mut self) {
        for e in self.producers.values_mut() {
            if let Some(b) = e.batches.back() {
                e.last_timestamp = b.timestamp;
            }
        }
    }

    /// The invariant between producers and open transactions, checked in
    /// debug builds.
    #[track_caller]
    pub fn debug_check(&self) {
        debug_assert!(
            self.open_txns.len()
                == self
                    .producers
                    .values()
                    .filter(|e| e.current_txn_first_offset.is_some())
                    .count()
                && self.open_txns.iter().all(|&(first, pid)| self
                    .producers
                    .get(&pid)
                    .is_some_and(|e| e.current_txn_first_offset == Some(first))),
            "open transactions {:?} match the producers'",
            self.open_txns
        );
    }
}

/// What [`PartitionProducers::apply`] needs of a batch header (and, for a
/// control batch, of its marker).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppliedBatch {
    pub producer_id: i64,
    pub epoch: i16,
    pub base_sequence: i32,
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub is_transactional: bool,
    pub is_control: bool,
    /// For a COMMIT (`true`) or ABORT (`false`) marker.
    pub marker: Option<bool>,
    /// The marker's coordinator epoch (-1 otherwise).
    pub coordinator_epoch: i32,
}

impl AppliedBatch {
    /// Reads one whole batch (`bytes`, with its offsets as stored).
    pub fn parse(bytes: &[u8]) -> Option<AppliedBatch> {
        let h = weir_protocol::records::BatchHeader::parse(bytes).ok()?;
        let (marker, coordinator_epoch) = if h.is_control() {
            let batch = weir_protocol::records::RecordBatch::from_bytes(
                bytes::Bytes::copy_from_slice(bytes.get(..h.total_size())?),
            )
            .ok()?;
            match batch.end_txn_marker(&Default::default()) {
                Ok(m) => (
                    Some(m.kind == weir_protocol::records::ControlRecordType::Commit),
                    m.coordinator_epoch,
                ),
                Err(_) => (None, -1),
            }
        } else {
            (None, -1)
        };
        Some(AppliedBatch {
            producer_id: h.producer_id,
            epoch: h.producer_epoch,
            base_sequence: h.base_sequence,
            base_offset: h.base_offset,
            last_offset: h.last_offset(),
            max_timestamp: h.max_timestamp,
            is_transactional: h.is_transactional(),
            is_control: h.is_control(),
            marker,
            coordinator_epoch,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(first_seq: i32, last_seq: i32, first_offset: i64) -> BatchMeta {
        BatchMeta {
            first_seq,
            last_seq,
            first_offset,
            last_offset: first_offset + (last_seq - first_seq) as i64,
            timestamp: 0,
        }
    }

    #[test]
    fn sequence_table() {
        let mut p = PartitionProducers::default();
        assert_eq!(p.check(7, 0, 0, 4), SeqCheck::Append);
        p.record(7, 0, b(0, 4, 100));
        assert_eq!(p.check(7, 0, 5, 9), SeqCheck::Append);
        p.record(7, 0, b(5, 9, 105));
        // retry of either batch
        assert_eq!(p.check(7, 0, 0, 4), SeqCheck::Duplicate(b(0, 4, 100)));
        assert_eq!(p.check(7, 0, 5, 9), SeqCheck::Duplicate(b(5, 9, 105)));
        // gap
        assert_eq!(
            p.check(7, 0, 11, 12),
            SeqCheck::OutOfOrder {
                expected: 10,
                got: 11
            }
        );
        // fenced
        p.record(7, 2, b(0, 0, 200));
        assert_eq!(p.check(7, 1, 1, 1), SeqCheck::Fenced { current: 2, got: 1 });
        // new epoch must start at 0
        assert_eq!(
            p.check(7, 3, 5, 5),
            SeqCheck::OutOfOrder {
                expected: 0,
                got: 5
            }
        );
        assert_eq!(p.check(7, 3, 0, 5), SeqCheck::Append);
        // unknown producer: any sequence
        assert_eq!(p.check(8, 0, 42, 42), SeqCheck::Append);
    }

    #[test]
    fn only_the_last_five_batches_are_deduplicated() {
        let mut p = PartitionProducers::default();
        for i in 0..7 {
            p.record(1, 0, b(i, i, i as i64));
        }
        assert_eq!(p.check(1, 0, 2, 2), SeqCheck::Duplicate(b(2, 2, 2)));
        assert_eq!(
            p.check(1, 0, 1, 1),
            SeqCheck::OutOfOrder {
                expected: 7,
                got: 1
            }
        );
    }

    #[test]
    fn sequences_wrap_at_i32_max() {
        assert_eq!(last_seq(i32::MAX, 2), 0);
        let mut p = PartitionProducers::default();
        p.record(1, 0, b(i32::MAX - 1, i32::MAX, 0));
        assert_eq!(p.check(1, 0, 0, 3), SeqCheck::Append);
    }

    /// Two producers' transactions interleaved: the LSO is the earliest
    /// open one's first offset (or one whose marker the high watermark has
    /// not passed), and each completion names the next open one (an
    /// ABORT's last stable offset).
    #[test]
    fn first_unstable_offset_across_interleaved_transactions() {
        let mut p = PartitionProducers::default();
        // (step, first unstable offset after it)
        p.record_data(1, 0, Some(b(0, 1, 10)), true);
        assert_eq!(p.first_open_offset(), Some(10));
        p.record_data(2, 0, Some(b(0, 0, 12)), true);
        p.record_data(1, 0, Some(b(2, 2, 13)), true);
        assert_eq!(
            p.first_open_offset(),
            Some(10),
            "a later batch opens nothing"
        );
        assert_eq!(p.last_stable_offset(14), 10);
        assert_eq!(p.last_stable_offset(5), 5, "never above the high watermark");
        p.debug_check();
        // Producer 1 commits at 14: producer 2's transaction is next.
        assert_eq!(p.would_complete(1).unwrap().next_open_offset, Some(12));
        let done = p.end_txn(1, 0, 5, 14, 0).unwrap();
        assert_eq!(
            done,
            CompletedTxn {
                producer_id: 1,
                first_offset: 10,
                next_open_offset: Some(12)
            }
        );
        assert_eq!(p.first_open_offset(), Some(12));
        // The commit marker at 14 is not replicated yet: 1's still counts.
        assert_eq!(p.last_stable_offset(14), 10);
        assert_eq!(p.last_stable_offset(15), 12);
        // Producer 1 opens again (after 2's), then 2 aborts at 16.
        p.record_data(1, 0, Some(b(3, 3, 15)), true);
        assert_eq!(p.would_complete(2).unwrap().next_open_offset, Some(15));
        let done = p.end_txn(2, 0, 5, 16, 0).unwrap();
        assert_eq!((done.first_offset, done.next_open_offset), (12, Some(15)));
        assert_eq!(p.last_stable_offset(17), 15);
        // A marker for nothing open completes nothing; the last one clears.
        assert_eq!(p.would_complete(2), None);
        assert_eq!(p.end_txn(2, 0, 5, 17, 0), None);
        assert_eq!(
            p.end_txn(1, 0, 5, 18, 0).map(|d| d.next_open_offset),
            Some(None)
        );
        assert_eq!(
            p.last_stable_offset(18),
            15,
            "1's marker at 18 is not replicated"
        );
        assert_eq!(p.last_stable_offset(19), 19);
        p.debug_check();
    }

    #[test]
    fn transaction_rules() {
        let mut p = PartitionProducers::default();
        p.record_data(1, 3, Some(b(0, 0, 0)), true);
        // A non-transactional batch while a transaction is open.
        assert_eq!(p.check_txn(1, false), Err(0));
        assert_eq!(p.check_txn(1, true), Ok(()));
        assert_eq!(p.check_txn(2, false), Ok(()));
        // Markers of an older producer or coordinator epoch.
        assert_eq!(
            p.check_marker(1, 2, 0),
            Err(MarkerRefusal::Fenced { current: 3, got: 2 })
        );
        assert_eq!(p.check_marker(1, 3, 0), Ok(()));
        assert_eq!(p.check_marker(9, 0, 0), Ok(()), "an unknown producer");
        p.end_txn(1, 4, 7, 1, 0);
        assert_eq!(
            p.check_marker(1, 4, 6),
            Err(MarkerRefusal::CoordinatorFenced { current: 7, got: 6 })
        );
        // The marker's newer epoch was taken: its batches are forgotten,
        // the new epoch starts at sequence 0.
        let e = p.get(1).unwrap();
        assert_eq!((e.epoch, e.batches.len()), (4, 0));
        assert_eq!(p.check(1, 3, 1, 1), SeqCheck::Fenced { current: 4, got: 3 });
        // A coordinator's batch (no sequence) opens a transaction too.
        p.record_data_at(5, 0, None, true, Some(40));
        assert_eq!(p.first_open_offset(), Some(40));
        assert!(p.get(5).unwrap().batches.is_empty());
        // Truncation drops the transactions opened at or after the cut.
        p.truncate_to(40);
        assert_eq!(p.last_stable_offset(50), 50);
        p.debug_check();
    }

    #[test]
    fn truncation_forgets_later_batches() {
        let mut p = PartitionProducers::default();
        p.record(1, 0, b(0, 0, 10));
        p.record(1, 0, b(1, 1, 11));
        p.truncate_to(11);
        assert_eq!(p.check(1, 0, 1, 1), SeqCheck::Append);
    }
}
