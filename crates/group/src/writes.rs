//! Writes to `__consumer_offsets` that are not durable yet.
//!
//! A change that clients can observe through another request (a committed
//! offset, a deleted offset or group, a stored assignment) must not be
//! visible before its record is in the log, and must not stay visible if
//! the append failed. Every `Output::Append` therefore carries a
//! [`WriteId`], and the coordinator keeps what the write means until the
//! broker reports the outcome with
//! [`GroupCoordinator::append_completed`]:
//!
//! * offset commits and removals (OffsetDelete, DeleteGroups, expiry) are
//!   applied only when the write is durable (Kafka's pending offset
//!   commits), each offset with the log offset of its record;
//! * transactional offset commits (TxnOffsetCommit) become pending offsets
//!   of their producer when durable, and committed ones only when the
//!   producer's COMMIT marker is seen (`txn.rs`);
//! * an assignment stored by the leader's SyncGroup is already in effect
//!   when its record is written; if the write fails, the assignment is
//!   dropped, the members that were answered with it get an error instead
//!   and the group rebalances (Kafka's `resetAndPropagateAssignmentError`);
//! * a static member replaced without a rebalance gets its old member id
//!   back if the write fails.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::coordinator::{GroupCoordinator, PartitionStatus};
use crate::group::{Ctx, Group, OffsetKey, StoredOffset};
use crate::types::{AppendOutcome, CommittedOffset, GroupState, Output, WriteId};

/// What a pending write changes once it is durable, or must undo if it fails.
#[derive(Clone, Debug)]
pub(crate) enum Effect {
    /// The in-memory change stands either way (a group became Empty: the
    /// record only refreshes the persisted generation).
    Nothing,
    /// Offsets that become visible when durable, in the order of their
    /// records in the appended batch.
    Commit {
        group_id: String,
        offsets: Vec<(OffsetKey, CommittedOffset)>,
        /// The commit created the (Empty, standalone) group.
        created_group: bool,
    },
    /// Transactional offsets (in record order) that become pending offsets
    /// of `producer_id` when durable.
    TxnCommit {
        group_id: String,
        producer_id: i64,
        offsets: Vec<(OffsetKey, CommittedOffset)>,
        created_group: bool,
    },
    /// Offsets, committed and pending in transactions, (and, with
    /// `remove_group`, the Empty group) removed when their tombstones are
    /// durable.
    Tombstones {
        group_id: String,
        offsets: Vec<OffsetKey>,
        remove_group: bool,
    },
    /// The assignment of `generation`, already sent to the members holding
    /// `tokens` in the same output list.
    Assignment {
        group_id: String,
        generation: i32,
        tokens: Vec<u64>,
    },
    /// A consumer group's (KIP-848) records: its state changed already;
    /// if the write fails it goes back to `before` (None: the group did not
    /// exist, or had no consumer part).
    ConsumerGroup {
        group_id: String,
        before: Option<Box<crate::consumer::heartbeat::Snapshot>>,
        /// Parked requests (a classic member's JoinGroup) answered with
        /// the change, failed with the append's error if it fails.
        tokens: Vec<u64>,
    },
    /// A static member's id replaced without a rebalance; `token` is the
    /// join answered after the write.
    StaticReplace {
        group_id: String,
        old_id: String,
        new_id: String,
        token: u64,
    },
}

/// Write ids and the effects of writes not yet reported.
#[derive(Debug, Default)]
pub(crate) struct Writes {
    next: u64,
    pending: BTreeMap<WriteId, (i32, Effect)>,
}

impl Writes {
    /// Registers a write to `partition` and returns its id.
    pub fn register(&mut self, partition: i32, effect: Effect) -> WriteId {
        self.next += 1;
        let id = WriteId(self.next);
        self.pending.insert(id, (partition, effect));
        id
    }

    pub fn len(&self) -> usize {
        self.pending.len()
    }
}

/// The coordinator's answer to the outcome of one append.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Completion {
    /// Parked requests whose answer (after the `Output::Append` in the same
    /// output list) depended on the failed write: the broker must answer
    /// them with the append's error instead.
    pub failed_tokens: Vec<u64>,
    /// Further work (e.g. a rebalance started after a failed assignment
    /// write), performed like any other outputs.
    pub outputs: Vec<Output>,
}

impl GroupCoordinator {
    /// Reports whether the `Output::Append` with id `write` reached the log
    /// (and at which offset) or failed. Call it once per append, in the
    /// order the appends were performed, before the next call that may
    /// write or tick (calls that write nothing, such as `heartbeat`,
    /// `fetch_offsets` or the describes, may come in between and see the
    /// state before the outcome): a commit, OffsetDelete, DeleteGroups or
    /// expiry takes effect only here, so OffsetFetch never returns a value
    /// that is not in the log.
    pub fn append_completed(
        &mut self,
        write: WriteId,
        outcome: AppendOutcome,
        now_ms: i64,
    ) -> Completion {
        let Some((partition, effect)) = self.writes.pending.remove(&write) else {
            return Completion::default();
        };
        if self.partition_status(partition) != PartitionStatus::Active {
            // Unloaded meanwhile: the log is the truth now.
            return Completion::default();
        }
        match outcome {
            AppendOutcome::Appended { base_offset } => {
                self.apply(partition, effect, base_offset, now_ms);
                Completion::default()
            }
            AppendOutcome::Failed => self.undo(partition, effect, now_ms),
        }
    }

    /// Appends not yet reported with `append_completed`.
    pub fn pending_writes(&self) -> usize {
        self.writes.len()
    }

    /// Applies a durable write whose first record is at `base_offset`.
    fn apply(&mut self, partition: i32, effect: Effect, base_offset: i64, now_ms: i64) {
        let stored = |offsets: Vec<(OffsetKey, CommittedOffset)>| {
            offsets
                .into_iter()
                .zip(base_offset..)
                .map(|((key, value), record_offset)| {
                    (
                        key,
                        StoredOffset {
                            value,
                            record_offset,
                        },
                    )
                })
                .collect::<Vec<_>>()
        };
        match effect {
            Effect::Nothing
            | Effect::Assignment { .. }
            | Effect::StaticReplace { .. }
            | Effect::ConsumerGroup { .. } => {}
            Effect::Commit {
                group_id, offsets, ..
            } => {
                let group = self
                    .groups
                    .entry(group_id.clone())
                    .or_insert_with(|| Group::new(group_id, now_ms));
                group.offsets.extend(stored(offsets));
            }
            Effect::TxnCommit {
                group_id,
                producer_id,
                offsets,
                ..
            } => {
                let offsets = stored(offsets);
                self.add_pending_txn(partition, &group_id, producer_id, offsets, now_ms);
                self.check_txn_index();
            }
            Effect::Tombstones {
                group_id,
                offsets,
                remove_group,
            } => {
                for k in &offsets {
                    self.remove_offset(partition, &group_id, k);
                }
                let Some(group) = self.groups.get(&group_id) else {
                    return;
                };
                // A transaction that wrote offsets after the tombstones
                // keeps the group (Kafka keeps a group with open
                // transactions).
                let empty = group.state == GroupState::Empty
                    && group.members.is_empty()
                    && group.pending_members.is_empty()
                    && group.pending_txn.is_empty();
                if remove_group && empty {
                    self.groups.remove(&group_id);
                }
            }
        }
    }

    fn undo(&mut self, partition: i32, effect: Effect, now_ms: i64) -> Completion {
        let mut completion = Completion::default();
        match effect {
            Effect::Nothing | Effect::Tombstones { .. } => {}
            Effect::ConsumerGroup {
                group_id,
                before,
                tokens,
            } => {
                completion.failed_tokens = tokens;
                self.restore(&group_id, before.map(|b| *b));
            }
            Effect::Commit {
                group_id,
                created_group,
                ..
            }
            | Effect::TxnCommit {
                group_id,
                created_group,
                ..
            } => {
                let unused = self.groups.get(&group_id).is_some_and(|g| {
                    g.state == GroupState::Empty
                        && g.members.is_empty()
                        && g.pending_members.is_empty()
                        && g.has_no_offsets()
                });
                if created_group && unused {
                    self.groups.remove(&group_id);
                }
            }
            Effect::Assignment {
                group_id,
                generation,
                tokens,
            } => {
                completion.failed_tokens = tokens;
                let Some(group) = self.groups.get_mut(&group_id) else {
                    return completion;
                };
                if group.generation != generation || group.state != GroupState::Stable {
                    return completion;
                }
                for m in &mut group.members {
                    m.assignment = Bytes::new();
                }
                let mut ctx = Ctx {
                    now: now_ms,
                    cfg: &self.config,
                    partition,
                    out: &mut completion.outputs,
                    writes: &mut self.writes,
                };
                group.prepare_rebalance(&mut ctx);
            }
            Effect::StaticReplace {
                group_id,
                old_id,
                new_id,
                token,
            } => {
                completion.failed_tokens = vec![token];
                let Some(group) = self.groups.get_mut(&group_id) else {
                    return completion;
                };
                if let Some(m) = group.member_mut(&new_id) {
                    m.member_id = old_id.clone();
                }
                if group.pending_sync.remove(&new_id) {
                    group.pending_sync.insert(old_id.clone());
                }
                if group.is_leader(&new_id) {
                    group.leader = Some(old_id);
                }
            }
        }
        completion
    }
}
