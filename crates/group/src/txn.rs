//! Offsets committed inside transactions (TxnOffsetCommit) and their
//! completion by the producer's COMMIT or ABORT marker.
//!
//! A TxnOffsetCommit is written to `__consumer_offsets` as a transactional
//! batch of its producer. Once durable, its offsets are *pending* for that
//! producer: OffsetFetch does not return them, and a fetch that requires
//! stable offsets gets UNSTABLE_OFFSET_COMMIT for their partitions. When
//! the producer's marker lands on the same `__consumer_offsets` partition
//! the broker calls [`GroupCoordinator::complete_txn`]: on COMMIT each
//! pending offset becomes the committed one unless a commit written later
//! in the log already replaced it, on ABORT they are dropped. Replay does
//! the same from the log (a control batch is the marker), so pending
//! offsets without a marker at the end of the log stay pending.
//!
//! This is Kafka's `OffsetMetadataManager` (pending transactional offsets,
//! `replayEndTransactionMarker`), with record offsets ordering the commits
//! of one partition.

use std::collections::BTreeMap;

use crate::coordinator::GroupCoordinator;
use crate::error::ErrorCode;
use crate::group::{Group, OffsetKey, StoredOffset};
use crate::records::{encode_offset_commit_key, encode_offset_commit_value};
use crate::types::{
    CommittedOffset, GroupState, OffsetsRecord, Output, PartitionResult, TxnOffsetCommitRequest,
    TxnProducer,
};
use crate::writes::Effect;

/// What a marker did to the pending offsets of one producer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxnCompletion {
    /// Groups that had offsets pending in the transaction.
    pub groups: usize,
    /// Pending offsets that became committed (COMMIT only; an offset whose
    /// partition was committed again later in the log is not counted).
    pub committed: usize,
    /// Pending offsets dropped: all of them on ABORT, the superseded ones
    /// on COMMIT.
    pub dropped: usize,
}

impl GroupCoordinator {
    /// TxnOffsetCommit. Returns the per-partition results and the
    /// transactional append to perform, or the error of the whole request
    /// (coordinator not serving the group, ILLEGAL_GENERATION for a group
    /// that does not exist with a generation, the member checks); nothing is
    /// written then.
    ///
    /// As Kafka's classic groups: a group that does not exist is created
    /// (Empty, standalone) when the generation is negative; a negative
    /// generation with no member id and no instance id skips the member
    /// checks even when the group has members (v0-2 requests carry no
    /// member), and the group's state is not checked (no
    /// REBALANCE_IN_PROGRESS).
    pub fn commit_txn_offsets(
        &mut self,
        req: &TxnOffsetCommitRequest,
        now_ms: i64,
    ) -> Result<(Vec<PartitionResult>, Vec<Output>), ErrorCode> {
        let partition = self.check_owner(&req.group_id)?;
        let created_group = !self.groups.contains_key(&req.group_id);
        if created_group {
            if req.generation_id >= 0 {
                return Err(ErrorCode::IllegalGeneration);
            }
            self.groups.insert(
                req.group_id.clone(),
                Group::new(req.group_id.clone(), now_ms),
            );
        }
        let max_metadata = self.config.max_metadata_bytes;
        let group = self
            .groups
            .get(&req.group_id)
            .ok_or(ErrorCode::UnknownServerError)?;
        validate_txn_commit(group, req)?;
        let mut results = Vec::with_capacity(req.partitions.len());
        let mut records = Vec::new();
        let mut accepted = Vec::new();
        for p in &req.partitions {
            let metadata = p.metadata.clone().unwrap_or_default();
            let error = if metadata.len() > max_metadata {
                ErrorCode::OffsetMetadataTooLarge
            } else {
                let value = CommittedOffset {
                    offset: p.offset,
                    leader_epoch: p.leader_epoch,
                    metadata,
                    commit_timestamp_ms: now_ms,
                    expire_timestamp_ms: None,
                };
                records.push(OffsetsRecord {
                    key: encode_offset_commit_key(&group.id, &p.topic, p.partition),
                    value: Some(encode_offset_commit_value(&value)),
                });
                accepted.push(((p.topic.clone(), p.partition), value));
                ErrorCode::None
            };
            results.push(PartitionResult {
                topic: p.topic.clone(),
                partition: p.partition,
                error,
            });
        }
        if records.is_empty() {
            if created_group {
                self.groups.remove(&req.group_id);
            }
            return Ok((results, Vec::new()));
        }
        // Pending once durable (`append_completed`), committed only by the
        // producer's COMMIT marker.
        let effect = Effect::TxnCommit {
            group_id: req.group_id.clone(),
            producer_id: req.producer_id,
            offsets: accepted,
            created_group,
        };
        let write = self.writes.register(partition, effect);
        let append = Output::Append {
            partition,
            records,
            write,
            transaction: Some(TxnProducer {
                producer_id: req.producer_id,
                producer_epoch: req.producer_epoch,
            }),
        };
        Ok((results, vec![append]))
    }

    /// The marker of `producer_id`'s transaction is in `partition` of
    /// `__consumer_offsets` (written by WriteTxnMarkers, or read during
    /// replay): on COMMIT (`committed`) its pending offsets of the groups
    /// of that partition become the committed ones, except where a commit
    /// written later in the log already replaced them; on ABORT they are
    /// dropped. A producer with nothing pending there is a no-op, so a
    /// marker seen twice (replayed, then reported) changes nothing more.
    pub fn complete_txn(
        &mut self,
        partition: i32,
        producer_id: i64,
        committed: bool,
    ) -> TxnCompletion {
        let mut done = TxnCompletion::default();
        let Some(group_ids) = self.txn_index.remove(&(partition, producer_id)) else {
            return done;
        };
        for id in group_ids {
            let Some(group) = self.groups.get_mut(&id) else {
                continue;
            };
            let Some(pending) = group.pending_txn.remove(&producer_id) else {
                continue;
            };
            done.groups += 1;
            for (key, offset) in pending {
                let newer = committed
                    && group
                        .offsets
                        .get(&key)
                        .is_none_or(|current| offset.record_offset > current.record_offset);
                if newer {
                    group.offsets.insert(key, offset);
                    done.committed += 1;
                } else {
                    done.dropped += 1;
                }
            }
        }
        self.check_txn_index();
        done
    }

    /// Whether any transaction has an offset of (`topic`, `partition`)
    /// pending for `group_id`.
    pub fn has_pending_txn_offset(&self, group_id: &str, topic: &str, partition: i32) -> bool {
        self.groups
            .get(group_id)
            .is_some_and(|g| g.has_pending_txn(&(topic.to_string(), partition)))
    }

    /// The offset `producer_id`'s open transaction committed for one
    /// partition, if any (for tests and tools).
    pub fn pending_txn_offset(
        &self,
        producer_id: i64,
        group_id: &str,
        topic: &str,
        partition: i32,
    ) -> Option<CommittedOffset> {
        self.groups
            .get(group_id)?
            .pending_txn
            .get(&producer_id)?
            .get(&(topic.to_string(), partition))
            .map(|s| s.value.clone())
    }

    /// Producers with offsets pending in `partition`, for tools.
    pub fn open_txn_producers(&self, partition: i32) -> Vec<i64> {
        self.txn_index
            .range((partition, i64::MIN)..=(partition, i64::MAX))
            .map(|(&(_, producer_id), _)| producer_id)
            .collect()
    }

    /// Records durable transactional offsets of `producer_id` as pending
    /// (a later offset of the same transaction for the same partition
    /// replaces an earlier one). Creates the group if needed (a standalone
    /// group committing inside a transaction).
    pub(crate) fn add_pending_txn(
        &mut self,
        partition: i32,
        group_id: &str,
        producer_id: i64,
        offsets: Vec<(OffsetKey, StoredOffset)>,
        now_ms: i64,
    ) {
        if offsets.is_empty() {
            return;
        }
        let group = self
            .groups
            .entry(group_id.to_string())
            .or_insert_with(|| Group::new(group_id.to_string(), now_ms));
        group
            .pending_txn
            .entry(producer_id)
            .or_default()
            .extend(offsets);
        self.txn_index
            .entry((partition, producer_id))
            .or_default()
            .insert(group_id.to_string());
    }

    /// Removes one offset of a group, committed and pending (what a
    /// tombstone in the log means).
    pub(crate) fn remove_offset(&mut self, partition: i32, group_id: &str, key: &OffsetKey) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        if group.pending_txn.is_empty() {
            group.offsets.remove(key);
            return;
        }
        for producer_id in group.remove_offset(key) {
            if let Some(ids) = self.txn_index.get_mut(&(partition, producer_id)) {
                ids.remove(group_id);
                if ids.is_empty() {
                    self.txn_index.remove(&(partition, producer_id));
                }
            }
        }
        self.check_txn_index();
    }

    /// Drops the index entries of a partition that is no longer served.
    pub(crate) fn forget_txns(&mut self, partition: i32) {
        self.txn_index.retain(|&(p, _), _| p != partition);
    }

    /// Debug builds: `txn_index` names exactly the (partition, producer,
    /// group) triples with pending offsets, and no pending map is empty.
    pub(crate) fn check_txn_index(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        let mut expected: BTreeMap<(i32, i64), Vec<&str>> = BTreeMap::new();
        for (id, g) in &self.groups {
            for (&producer_id, pending) in &g.pending_txn {
                debug_assert!(!pending.is_empty(), "group {id}: empty pending map");
                expected
                    .entry((self.partition_for(id), producer_id))
                    .or_default()
                    .push(id);
            }
        }
        let actual: BTreeMap<(i32, i64), Vec<&str>> = self
            .txn_index
            .iter()
            .map(|(k, ids)| (*k, ids.iter().map(String::as_str).collect()))
            .collect();
        debug_assert_eq!(actual, expected, "transaction index out of step");
    }
}

/// Kafka's classic-group validation of a transactional commit
/// (`ClassicGroup.validateOffsetCommit` with `isTransactional`).
fn validate_txn_commit(group: &Group, req: &TxnOffsetCommitRequest) -> Result<(), ErrorCode> {
    if group.state == GroupState::Dead {
        return Err(ErrorCode::CoordinatorNotAvailable);
    }
    if req.generation_id < 0 && group.state == GroupState::Empty {
        return Ok(());
    }
    let anonymous =
        req.generation_id < 0 && req.member_id.is_empty() && req.group_instance_id.is_none();
    if anonymous {
        return Ok(());
    }
    if let Some(cg) = group.consumer.as_deref() {
        return crate::consumer::heartbeat::validate_commit(
            cg,
            &req.member_id,
            req.generation_id,
            None,
        );
    }
    group.validate_member(&req.member_id, req.group_instance_id.as_deref())?;
    if req.generation_id != group.generation {
        return Err(ErrorCode::IllegalGeneration);
    }
    Ok(())
}
