//! Transactions in a cleaning: which data batches belong to aborted
//! transactions and when a transaction's marker may go (Kafka's
//! `CleanedTransactionMetadata`, with the delete horizon of KIP-534).
//! Pure: the worker feeds the batches of the cleaned range in log order
//! and acts on the answers.
//!
//! Rules, for one pass over the log from its start:
//! - a transactional data batch of a producer inside one of its aborted
//!   transactions (from the `.txnindex` entry's first offset to its ABORT
//!   marker) is aborted: all its records go;
//! - a COMMIT or ABORT marker *has data* when a data batch of its
//!   transaction was read in this pass (dropped by it or not). A marker
//!   with data stays as it is, and so does the `.txnindex` entry of an
//!   ABORT with data;
//! - a marker without data (its transaction's batches went in an earlier
//!   pass, or it ended an empty transaction), or a control batch already
//!   emptied, is *removable*: the first pass that finds it so gives it a
//!   delete horizon (now + `delete.retention.ms`, in its base timestamp
//!   with the delete-horizon flag, as a tombstone's), and a pass at or
//!   after that horizon removes it. The `.txnindex` entry of a removable
//!   ABORT goes at once: no batch is left for a read_committed consumer to
//!   skip.
//!
//! So a marker outlives every batch of its transaction by at least one
//! pass and `delete.retention.ms`, and a consumer that read the batches
//! before they went still finds the marker. Control batches of other types
//! are never removed.
//!
//! ```
//! use weir_protocol::records::ControlRecordType;
//! use weir_storage::AbortedTxn;
//! use weir_storage::cleaner::txn::{Marker, MarkerAction, TxnCleaning, marker_action};
//! let abort = AbortedTxn { producer_id: 7, first_offset: 0, last_offset: 1, last_stable_offset: 2 };
//! let kind = Some(ControlRecordType::Abort);
//! // First pass: the aborted batch is read (and dropped), its marker stays.
//! let mut pass = TxnCleaning::new(vec![abort]);
//! assert!(pass.on_data(7, true, 0));
//! assert_eq!(pass.on_marker(7, 1, kind), Marker::Needed);
//! // Next pass: the batch is gone; the marker gets a horizon, then goes.
//! let mut pass = TxnCleaning::new(vec![abort]);
//! assert_eq!(pass.on_marker(7, 1, kind), Marker::Removable);
//! assert_eq!(pass.removed_entries(), [abort]);
//! let at = |now, horizon| marker_action(Marker::Removable, horizon, now, 500, true);
//! assert_eq!(at(1_000, None), MarkerAction::SetHorizon(1_500));
//! assert_eq!(at(1_499, Some(1_500)), MarkerAction::Keep);
//! assert_eq!(at(1_500, Some(1_500)), MarkerAction::Remove);
//! ```

use crate::txn_index::AbortedTxn;
use std::collections::{HashMap, HashSet, VecDeque};
use weir_protocol::records::ControlRecordType;

/// One aborted transaction the pass is inside of.
#[derive(Debug, Clone, Copy)]
struct OpenAbort {
    txn: AbortedTxn,
    /// A data batch of it was read in this pass.
    has_data: bool,
}

/// The transactions of one pass over a log's batches, fed in offset
/// order.
///
/// Always true of it: `upcoming` is sorted by first offset and holds only
/// entries whose first offset lies past every batch fed so far.
#[derive(Debug, Clone, Default)]
pub struct TxnCleaning {
    /// The aborted transactions not reached yet.
    upcoming: VecDeque<AbortedTxn>,
    /// By producer: the aborted transaction the pass is inside of.
    aborting: HashMap<i64, OpenAbort>,
    /// Producers with a data batch of a transaction that is not aborted
    /// read since their last marker.
    committing: HashSet<i64>,
    /// Entries of ABORT markers found removable.
    removed: Vec<AbortedTxn>,
}

impl TxnCleaning {
    /// A pass over a log whose aborted transactions are `aborted` (every
    /// `.txnindex` entry of the range read, in any order).
    pub fn new(aborted: impl IntoIterator<Item = AbortedTxn>) -> TxnCleaning {
        let mut upcoming: Vec<AbortedTxn> = aborted.into_iter().collect();
        upcoming.sort_by_key(|t| (t.first_offset, t.last_offset));
        TxnCleaning {
            upcoming: upcoming.into(),
            ..TxnCleaning::default()
        }
    }

    /// Enters the aborted transactions that start at or before `offset`.
    fn reach(&mut self, offset: i64) {
        while let Some(t) = self.upcoming.front().copied() {
            if t.first_offset > offset {
                break;
            }
            self.upcoming.pop_front();
            // An entry of the same producer whose marker is behind this
            // one's start has nothing left to match (its marker is gone).
            match self.aborting.get(&t.producer_id) {
                Some(open) if open.txn.last_offset >= t.first_offset => {}
                _ => {
                    self.aborting.insert(
                        t.producer_id,
                        OpenAbort {
                            txn: t,
                            has_data: false,
                        },
                    );
                }
            }
        }
    }

    /// A data batch of `producer_id` ending at `last_offset`: whether it
    /// belongs to an aborted transaction (its records all go).
    pub fn on_data(&mut self, producer_id: i64, transactional: bool, last_offset: i64) -> bool {
        self.reach(last_offset);
        if !transactional {
            return false;
        }
        match self.aborting.get_mut(&producer_id) {
            Some(open) => {
                open.has_data = true;
                true
            }
            None => {
                self.committing.insert(producer_id);
                false
            }
        }
    }

    /// A control batch of `producer_id` ending at `last_offset`, whose
    /// first record is a control record of type `kind` (`None`: it has no
    /// record left).
    pub fn on_marker(
        &mut self,
        producer_id: i64,
        last_offset: i64,
        kind: Option<ControlRecordType>,
    ) -> Marker {
        self.reach(last_offset);
        match kind {
            None => Marker::Empty,
            Some(ControlRecordType::Abort) => match self.aborting.remove(&producer_id) {
                Some(open) if open.has_data => Marker::Needed,
                Some(open) => {
                    self.removed.push(open.txn);
                    Marker::Removable
                }
                None => Marker::Removable,
            },
            Some(ControlRecordType::Commit) if self.committing.remove(&producer_id) => {
                Marker::Needed
            }
            Some(ControlRecordType::Commit) => Marker::Removable,
            Some(_) => Marker::Needed,
        }
    }

    /// The `.txnindex` entries of the ABORT markers found removable so far:
    /// they leave the index of the cleaned segment.
    pub fn removed_entries(&self) -> &[AbortedTxn] {
        &self.removed
    }
}

/// What a control batch is to a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// A COMMIT or ABORT whose transaction has batches left, or a control
    /// record of another type: it stays.
    Needed,
    /// A COMMIT or ABORT whose transaction has no batch left.
    Removable,
    /// No record left (emptied by an earlier cleaning): nothing to keep.
    Empty,
}

/// What the cleaning does with a control batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerAction {
    /// Written unchanged.
    Keep,
    /// Written with this delete horizon (ms).
    SetHorizon(i64),
    /// Left out (written empty only where the cleaning must keep a batch).
    Remove,
}

/// The action for a control batch that is `marker` to the pass (see
/// [`TxnCleaning::on_marker`]) and carries `horizon`, at `now_ms`.
/// `below_removal_limit`: the broker allows removing it (its producer
/// state no longer needs it, see
/// [`LogCleaner::set_marker_removal_limit`](super::LogCleaner::set_marker_removal_limit));
/// otherwise a removable marker keeps its horizon and waits.
pub fn marker_action(
    marker: Marker,
    horizon: Option<i64>,
    now_ms: i64,
    delete_retention_ms: i64,
    below_removal_limit: bool,
) -> MarkerAction {
    match (marker, horizon) {
        (Marker::Needed, _) => MarkerAction::Keep,
        (Marker::Empty, _) => MarkerAction::Remove,
        (Marker::Removable, None) => {
            MarkerAction::SetHorizon(now_ms.saturating_add(delete_retention_ms))
        }
        (Marker::Removable, Some(h)) if now_ms >= h && below_removal_limit => MarkerAction::Remove,
        (Marker::Removable, Some(_)) => MarkerAction::Keep,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ControlRecordType::{Abort, Commit, LeaderChange};
    use proptest::prelude::*;

    fn entry(pid: i64, first: i64, last: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: last + 1,
        }
    }

    /// One batch of a log: data (producer, transactional) or a control
    /// batch (producer, type).
    #[derive(Debug, Clone, Copy)]
    enum B {
        Data(i64, bool),
        Ctl(i64, Option<ControlRecordType>),
    }

    /// Feeds `log` (one offset per batch): per batch, for data whether it
    /// is aborted, for control batches whether it is removable.
    fn pass(aborted: &[AbortedTxn], log: &[B]) -> (Vec<bool>, Vec<AbortedTxn>) {
        let mut t = TxnCleaning::new(aborted.iter().copied());
        let out = log
            .iter()
            .enumerate()
            .map(|(o, b)| match *b {
                B::Data(pid, txn) => t.on_data(pid, txn, o as i64),
                B::Ctl(pid, kind) => t.on_marker(pid, o as i64, kind) != Marker::Needed,
            })
            .collect();
        (out, t.removed_entries().to_vec())
    }

    #[test]
    fn table() {
        use B::*;
        // (aborted entries, batches at offsets 0.., expected answers,
        // expected removed entries)
        type Case = (Vec<AbortedTxn>, Vec<B>, Vec<bool>, Vec<AbortedTxn>);
        let cases: Vec<Case> = vec![
            // Commit with data: kept; a repeated COMMIT ends nothing.
            (
                vec![],
                vec![Data(1, true), Ctl(1, Some(Commit)), Ctl(1, Some(Commit))],
                vec![false, false, true],
                vec![],
            ),
            // COMMIT whose data went: removable.
            (vec![], vec![Ctl(1, Some(Commit))], vec![true], vec![]),
            // ABORT with data: the data is aborted, the marker kept.
            (
                vec![entry(1, 0, 2)],
                vec![Data(1, true), Data(1, true), Ctl(1, Some(Abort))],
                vec![true, true, false],
                vec![],
            ),
            // ABORT whose data went: removable, its entry leaves the index.
            (
                vec![entry(1, 0, 1)],
                vec![Data(2, false), Ctl(1, Some(Abort))],
                vec![false, true],
                vec![entry(1, 0, 1)],
            ),
            // An ABORT that ended nothing (retry, empty transaction).
            (vec![], vec![Ctl(1, Some(Abort))], vec![true], vec![]),
            // Interleaved: 1 aborts, 2 commits; a plain batch of 1 between
            // its transactions is not transactional.
            (
                vec![entry(1, 1, 4)],
                vec![
                    Data(2, true),
                    Data(1, true),
                    Data(1, false),
                    Data(2, true),
                    Ctl(1, Some(Abort)),
                    Ctl(2, Some(Commit)),
                    Data(1, true),
                    Ctl(1, Some(Commit)),
                ],
                vec![false, true, false, false, false, false, false, false],
                vec![],
            ),
            // 1's batch before its aborted transaction starts is committed.
            (
                vec![entry(1, 2, 3)],
                vec![
                    Data(1, true),
                    Ctl(1, Some(Commit)),
                    Data(1, true),
                    Ctl(1, Some(Abort)),
                ],
                vec![false, false, true, false],
                vec![],
            ),
            // Emptied control batches and other control types.
            (
                vec![],
                vec![Ctl(1, None), Ctl(-1, Some(LeaderChange))],
                vec![true, false],
                vec![],
            ),
            // An entry whose marker is gone does not make the producer's
            // next aborted transaction lose its entry.
            (
                vec![entry(1, 0, 1), entry(1, 3, 4)],
                vec![
                    Data(2, false),
                    Data(2, false),
                    Data(2, false),
                    Data(1, true),
                    Ctl(1, Some(Abort)),
                ],
                vec![false, false, false, true, false],
                vec![],
            ),
        ];
        for (i, (aborted, log, want, removed)) in cases.into_iter().enumerate() {
            assert_eq!(pass(&aborted, &log), (want, removed), "case {i}");
        }
    }

    #[test]
    fn marker_action_table() {
        use Marker::*;
        use MarkerAction::*;
        // (marker, horizon, now, retention, below limit, expected)
        let cases = [
            (Needed, None, 100, 10, true, Keep),
            (Needed, Some(50), 100, 10, true, Keep),
            (Removable, None, 100, 10, true, SetHorizon(110)),
            (Removable, None, 100, 10, false, SetHorizon(110)),
            (Removable, Some(110), 109, 10, true, Keep),
            (Removable, Some(110), 110, 10, true, Remove),
            (Removable, Some(110), 500, 10, false, Keep),
            (
                Removable,
                None,
                i64::MAX - 1,
                10,
                true,
                SetHorizon(i64::MAX),
            ),
            (Empty, None, 100, 10, false, Remove),
        ];
        for (i, (marker, horizon, now, retention, below, want)) in cases.into_iter().enumerate() {
            assert_eq!(
                marker_action(marker, horizon, now, retention, below),
                want,
                "case {i}"
            );
        }
    }

    /// A log of transactions: each step a producer writes a transactional
    /// batch, ends its transaction (commit or abort), or a batch goes
    /// (compaction). Returns the batches left and the `.txnindex`.
    fn build(steps: &[(u8, u8)]) -> (Vec<(i64, B)>, Vec<AbortedTxn>) {
        let mut log: Vec<(i64, B)> = Vec::new();
        let mut open: HashMap<i64, i64> = HashMap::new();
        let mut index = Vec::new();
        let mut offset = 0;
        for &(pid, op) in steps {
            let pid = i64::from(pid % 3);
            match op % 4 {
                0 | 1 => {
                    open.entry(pid).or_insert(offset);
                    log.push((offset, B::Data(pid, true)));
                }
                2 => {
                    let abort = op % 8 >= 4;
                    if abort && let Some(first) = open.get(&pid) {
                        index.push(entry(pid, *first, offset));
                    }
                    open.remove(&pid);
                    let kind = if abort { Abort } else { Commit };
                    log.push((offset, B::Ctl(pid, Some(kind))));
                }
                _ => {
                    // a data batch goes (it is never the last one)
                    let n = log.len();
                    if n > 1 {
                        let i = usize::from(op) % (n - 1);
                        if matches!(log[i].1, B::Data(..)) {
                            log.remove(i);
                        }
                    }
                    continue;
                }
            }
            offset += 1;
        }
        // Every transaction is decided (the cleaner stops at the LSO).
        for (pid, _) in std::mem::take(&mut open) {
            log.push((offset, B::Ctl(pid, Some(Commit))));
            offset += 1;
        }
        (log, index)
    }

    proptest! {
        /// Against a model: data batches are aborted exactly when the
        /// index covers them; a marker is removable exactly when no batch
        /// of its transaction is left; removed entries are exactly those
        /// of removable ABORTs that ended a transaction.
        #[test]
        fn matches_a_model(steps in prop::collection::vec((any::<u8>(), any::<u8>()), 0..60)) {
            let (log, index) = build(&steps);
            let mut t = TxnCleaning::new(index.iter().copied());
            // The model: a producer's transaction is the run of its
            // transactional batches since its previous marker.
            let mut since_marker: HashMap<i64, usize> = HashMap::new();
            let mut removed = Vec::new();
            for &(o, b) in &log {
                match b {
                    B::Data(pid, txn) => {
                        let aborted = index.iter().any(|e| e.producer_id == pid && e.first_offset <= o && o <= e.last_offset);
                        prop_assert_eq!(t.on_data(pid, txn, o), aborted && txn, "data at {}", o);
                        *since_marker.entry(pid).or_default() += 1;
                    }
                    B::Ctl(pid, kind) => {
                        let had_data = since_marker.remove(&pid).unwrap_or(0) > 0;
                        let e = index.iter().find(|e| e.producer_id == pid && e.last_offset == o);
                        if let (Some(e), false) = (e, had_data) {
                            removed.push(*e);
                        }
                        let want = if had_data { Marker::Needed } else { Marker::Removable };
                        prop_assert_eq!(t.on_marker(pid, o, kind), want, "marker at {}", o);
                    }
                }
            }
            prop_assert_eq!(t.removed_entries(), &removed[..]);
        }
    }
}
