//! Loading groups and offsets by replaying `__consumer_offsets`.
//!
//! The broker calls [`GroupCoordinator::begin_load`] for a partition, then
//! [`GroupCoordinator::replay`] for every record of that partition in offset
//! order (after compaction or not: later records override earlier ones) and
//! [`GroupCoordinator::complete_txn`] for every COMMIT/ABORT marker among
//! them, then [`GroupCoordinator::complete_load`]. Offset commits of a
//! transactional batch are pending until their producer's marker.

use crate::coordinator::{GroupCoordinator, PartitionStatus};
use crate::error::{ErrorCode, RecordError};
use crate::group::{Group, Member, StoredOffset};
use crate::records::{
    RecordKey, decode_group_metadata_value, decode_key, decode_offset_commit_value,
};
use crate::types::{GroupState, JoinResponse, Output, Protocol, Response, SyncResponse};

impl GroupCoordinator {
    /// Records `status` for `partition`; leaving Active drops its groups.
    fn set_status(&mut self, partition: i32, status: PartitionStatus) {
        if status != PartitionStatus::Active {
            self.groups.retain(|g, _| {
                crate::partition::partition_for(g, self.config.offsets_topic_partitions)
                    != partition
            });
            self.forget_txns(partition);
        }
        if let Some(slot) = usize::try_from(partition)
            .ok()
            .and_then(|p| self.partitions.get_mut(p))
        {
            *slot = status;
        }
    }

    /// Starts loading `partition`: its groups are dropped and its requests
    /// get COORDINATOR_LOAD_IN_PROGRESS until `complete_load`.
    pub fn begin_load(&mut self, partition: i32) -> Vec<Output> {
        self.unload_with(
            partition,
            PartitionStatus::Loading,
            ErrorCode::NotCoordinator,
        )
    }

    /// Stops serving `partition` (leadership moved): its groups are dropped
    /// and parked requests are answered with NOT_COORDINATOR.
    pub fn unload(&mut self, partition: i32) -> Vec<Output> {
        self.unload_with(
            partition,
            PartitionStatus::NotOwned,
            ErrorCode::NotCoordinator,
        )
    }

    fn unload_with(
        &mut self,
        partition: i32,
        status: PartitionStatus,
        error: ErrorCode,
    ) -> Vec<Output> {
        let mut joins = Vec::new();
        let mut syncs = Vec::new();
        for g in self.groups.values() {
            if self.partition_for(&g.id) != partition {
                continue;
            }
            for m in &g.members {
                joins.extend(m.awaiting_join.map(|t| (t, m.member_id.clone())));
                syncs.extend(m.awaiting_sync);
            }
        }
        self.set_status(partition, status);
        let mut out: Vec<Output> = joins
            .into_iter()
            .map(|(token, id)| Output::Respond {
                token,
                response: Response::Join(JoinResponse::error(error, &id)),
            })
            .collect();
        out.extend(syncs.into_iter().map(|token| Output::Respond {
            token,
            response: Response::Sync(SyncResponse::error(error)),
        }));
        out
    }

    /// Applies one record of `__consumer_offsets`, found at `at` in the
    /// log. `value` None is a tombstone (of the committed offset and of any
    /// pending transactional one). Records of other types (KIP-848, share
    /// groups) are skipped.
    pub fn replay(
        &mut self,
        at: LogPosition,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), RecordError> {
        match decode_key(key)? {
            RecordKey::Other { .. } => {
                // KIP-848 consumer group records; others (share groups)
                // are skipped.
                self.replay_consumer(key, value)?;
                Ok(())
            }
            RecordKey::OffsetCommit {
                group,
                topic,
                partition,
            } => {
                let offsets_partition = self.partition_for(&group);
                let key = (topic, partition);
                match value {
                    Some(v) => {
                        let stored = StoredOffset {
                            value: decode_offset_commit_value(v)?,
                            record_offset: at.offset,
                        };
                        match at.transaction {
                            Some(producer_id) => self.add_pending_txn(
                                offsets_partition,
                                &group,
                                producer_id,
                                vec![(key, stored)],
                                -1,
                            ),
                            None => {
                                self.groups
                                    .entry(group.clone())
                                    .or_insert_with(|| Group::new(group, -1))
                                    .offsets
                                    .insert(key, stored);
                            }
                        }
                    }
                    None => self.remove_offset(offsets_partition, &group, &key),
                }
                Ok(())
            }
            RecordKey::GroupMetadata { group } => {
                match value {
                    None => {
                        // The group was deleted or expired; offsets written
                        // after the tombstone (standalone commits, open
                        // transactions) survive.
                        let keep = self.groups.get(&group).is_some_and(|g| !g.has_no_offsets());
                        if keep {
                            if let Some(g) = self.groups.get_mut(&group) {
                                let offsets = std::mem::take(&mut g.offsets);
                                let pending_txn = std::mem::take(&mut g.pending_txn);
                                *g = Group::new(group, -1);
                                g.offsets = offsets;
                                g.pending_txn = pending_txn;
                            }
                        } else {
                            self.groups.remove(&group);
                        }
                    }
                    Some(v) => {
                        let value = decode_group_metadata_value(v)?;
                        let g = self
                            .groups
                            .entry(group.clone())
                            .or_insert_with(|| Group::new(group, -1));
                        // A classic group replaces an (empty) consumer group.
                        g.consumer = None;
                        g.generation = value.generation;
                        g.protocol_type = Some(value.protocol_type).filter(|t| !t.is_empty());
                        g.protocol = value.protocol;
                        g.state_timestamp_ms = value.current_state_timestamp_ms;
                        g.pending_members.clear();
                        g.pending_sync.clear();
                        g.join_deadline_ms = None;
                        g.sync_deadline_ms = None;
                        g.initial_delay = None;
                        g.members = value
                            .members
                            .into_iter()
                            .map(|m| Member {
                                member_id: m.member_id,
                                group_instance_id: m.group_instance_id,
                                client_id: m.client_id,
                                client_host: m.client_host,
                                session_timeout_ms: m.session_timeout_ms,
                                rebalance_timeout_ms: if m.rebalance_timeout_ms < 0 {
                                    m.session_timeout_ms
                                } else {
                                    m.rebalance_timeout_ms
                                },
                                protocols: g
                                    .protocol
                                    .iter()
                                    .map(|name| Protocol {
                                        name: name.clone(),
                                        metadata: m.subscription.clone(),
                                    })
                                    .collect(),
                                assignment: m.assignment,
                                awaiting_join: None,
                                awaiting_sync: None,
                                heartbeat_deadline_ms: i64::MAX,
                                is_new: false,
                            })
                            .collect();
                        g.leader = value
                            .leader
                            .filter(|l| g.members.iter().any(|m| &m.member_id == l))
                            .or_else(|| g.members.first().map(|m| m.member_id.clone()));
                        g.state = if g.members.is_empty() {
                            GroupState::Empty
                        } else {
                            GroupState::Stable
                        };
                    }
                }
                Ok(())
            }
        }
    }

    /// Finishes loading `partition`: loaded members get a full session
    /// timeout from `now_ms` to heartbeat, and the partition is served.
    pub fn complete_load(&mut self, partition: i32, now_ms: i64) {
        let ids: Vec<String> = self
            .groups
            .keys()
            .filter(|g| self.partition_for(g) == partition)
            .cloned()
            .collect();
        for id in ids {
            if let Some(g) = self.groups.get_mut(&id) {
                for m in &mut g.members {
                    m.heartbeat_deadline_ms =
                        now_ms.saturating_add(i64::from(m.session_timeout_ms));
                }
            }
        }
        self.complete_consumer_load(partition, now_ms);
        self.set_status(partition, PartitionStatus::Active);
        self.check_txn_index();
    }

    /// Makes `partition` Active with the groups that `loaded` replayed for
    /// it. `loaded` is a coordinator with the same settings that ran
    /// `begin_load`, `replay` / `complete_txn` and `complete_load` for
    /// `partition` on its own, so the broker can replay a partition without
    /// holding the coordinator that answers requests meanwhile (they get
    /// COORDINATOR_LOAD_IN_PROGRESS while `partition` is Loading here).
    /// Only `partition`'s groups and pending transactions are taken. Returns
    /// false, changing nothing, unless `partition` is Loading here (an
    /// unload cancelled the load).
    pub fn adopt_load(&mut self, partition: i32, loaded: GroupCoordinator) -> bool {
        if self.partition_status(partition) != PartitionStatus::Loading {
            return false;
        }
        let n = self.config.offsets_topic_partitions;
        self.groups.extend(
            loaded
                .groups
                .into_iter()
                .filter(|(id, _)| crate::partition::partition_for(id, n) == partition),
        );
        self.txn_index.extend(
            loaded
                .txn_index
                .into_iter()
                .filter(|&((p, _), _)| p == partition),
        );
        self.set_status(partition, PartitionStatus::Active);
        self.check_txn_index();
        true
    }

    /// Committed offset of one partition, if any (for tests and tools).
    pub fn committed(
        &self,
        group_id: &str,
        topic: &str,
        partition: i32,
    ) -> Option<crate::types::CommittedOffset> {
        self.groups
            .get(group_id)
            .and_then(|g| g.offsets.get(&(topic.to_string(), partition)))
            .map(|s| s.value.clone())
    }
}

/// Where a replayed record is in `__consumer_offsets`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogPosition {
    /// The record's offset (batch base offset plus its offset delta).
    pub offset: i64,
    /// The producer id when the record's batch is transactional: its offset
    /// commits are pending until that producer's marker.
    pub transaction: Option<i64>,
}

impl LogPosition {
    /// A record of a non-transactional batch.
    pub fn plain(offset: i64) -> Self {
        Self {
            offset,
            transaction: None,
        }
    }
}
