//! OffsetCommit, OffsetFetch, OffsetDelete and offset expiry.

use crate::coordinator::{GroupCoordinator, PartitionStatus};
use crate::error::ErrorCode;
use crate::group::Group;
use crate::records::{encode_offset_commit_key, encode_offset_commit_value};
use crate::types::{
    CommittedOffset, FetchedOffset, GroupState, OffsetCommitRequest, OffsetFetchGroup,
    OffsetFetchResult, OffsetsRecord, Output, PartitionResult,
};
use crate::writes::Effect;

fn all_partitions(req: &OffsetCommitRequest, error: ErrorCode) -> Vec<PartitionResult> {
    req.partitions
        .iter()
        .map(|p| PartitionResult {
            topic: p.topic.clone(),
            partition: p.partition,
            error,
        })
        .collect()
}

impl GroupCoordinator {
    /// OffsetCommit. Returns per-partition results and the records to
    /// append; the broker appends them before sending the response.
    ///
    /// Commits with `generation_id < 0` are accepted only while the group
    /// is Empty (standalone consumers and admin tools); otherwise the member
    /// and generation must match the current ones.
    pub fn commit_offsets(
        &mut self,
        req: &OffsetCommitRequest,
        now_ms: i64,
    ) -> (Vec<PartitionResult>, Vec<Output>) {
        let partition = match self.check_owner(&req.group_id) {
            Ok(p) => p,
            Err(e) => return (all_partitions(req, e), Vec::new()),
        };
        let created_group = !self.groups.contains_key(&req.group_id);
        if created_group {
            if req.generation_id >= 0 {
                // Neither a known group nor a standalone commit: the
                // committer's generation cannot be current.
                return (
                    all_partitions(req, ErrorCode::IllegalGeneration),
                    Vec::new(),
                );
            }
            self.groups.insert(
                req.group_id.clone(),
                Group::new(req.group_id.clone(), now_ms),
            );
        }
        let max_metadata = self.config.max_metadata_bytes;
        let Some(group) = self.groups.get_mut(&req.group_id) else {
            return (
                all_partitions(req, ErrorCode::UnknownServerError),
                Vec::new(),
            );
        };
        if let Err(e) = validate_commit(group, req) {
            return (all_partitions(req, e), Vec::new());
        }
        let expire = req
            .retention_time_ms
            .filter(|&r| r >= 0)
            .map(|r| now_ms.saturating_add(r));
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
                    expire_timestamp_ms: expire,
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
            if created_group && group.offsets.is_empty() {
                self.groups.remove(&req.group_id);
            }
            return (results, Vec::new());
        }
        // Visible to OffsetFetch only once durable (`append_completed`).
        let effect = Effect::Commit {
            group_id: req.group_id.clone(),
            offsets: accepted,
            created_group,
        };
        let write = self.writes.register(partition, effect);
        (
            results,
            vec![Output::Append {
                partition,
                records,
                write,
                transaction: None,
            }],
        )
    }

    /// OffsetFetch for one or many groups (v8+). Partitions without a
    /// commit report offset -1; unknown groups are not an error. Offsets
    /// pending in transactions are not returned (the committed ones are).
    pub fn fetch_offsets(&self, groups: &[OffsetFetchGroup]) -> Vec<OffsetFetchResult> {
        groups
            .iter()
            .map(|g| self.fetch_group_offsets(g, false))
            .collect()
    }

    /// OffsetFetch with `require_stable` (v7+): as
    /// [`GroupCoordinator::fetch_offsets`], except that a partition with an
    /// offset pending in a transaction is answered UNSTABLE_OFFSET_COMMIT
    /// (offset -1) so the consumer retries until the transaction completes
    /// (KIP-447).
    pub fn fetch_stable_offsets(&self, groups: &[OffsetFetchGroup]) -> Vec<OffsetFetchResult> {
        groups
            .iter()
            .map(|g| self.fetch_group_offsets(g, true))
            .collect()
    }

    fn fetch_group_offsets(
        &self,
        req: &OffsetFetchGroup,
        require_stable: bool,
    ) -> OffsetFetchResult {
        let mut result = OffsetFetchResult {
            group_id: req.group_id.clone(),
            error: ErrorCode::None,
            partitions: Vec::new(),
        };
        if let Err(e) = self.check_owner(&req.group_id) {
            result.error = e;
            return result;
        }
        let group = self.groups.get(&req.group_id);
        let fetched = |topic: &str, partition: i32| {
            let key = (topic.to_string(), partition);
            let unstable = require_stable && group.is_some_and(|g| g.has_pending_txn(&key));
            let c = group
                .filter(|_| !unstable)
                .and_then(|g| g.offsets.get(&key))
                .map(|s| &s.value);
            FetchedOffset {
                topic: topic.to_string(),
                partition,
                offset: c.map_or(-1, |c| c.offset),
                leader_epoch: c.map_or(-1, |c| c.leader_epoch),
                metadata: c.map(|c| c.metadata.clone()).unwrap_or_default(),
                error: if unstable {
                    ErrorCode::UnstableOffsetCommit
                } else {
                    ErrorCode::None
                },
            }
        };
        result.partitions = match &req.partitions {
            // Every committed partition, as Kafka: one whose only offset is
            // pending in a transaction is not listed.
            None => group
                .map(|g| g.offsets.keys().map(|(t, p)| fetched(t, *p)).collect())
                .unwrap_or_default(),
            Some(wanted) => {
                let mut v: Vec<FetchedOffset> =
                    wanted.iter().map(|(t, p)| fetched(t, *p)).collect();
                v.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
                v
            }
        };
        result
    }

    /// OffsetDelete. Returns the group-level error, per-partition results and
    /// the tombstones to append. Topics unknown to the cluster are the
    /// broker's to reject (UNKNOWN_TOPIC_OR_PARTITION) before calling this.
    pub fn delete_offsets(
        &mut self,
        group_id: &str,
        partitions: &[(String, i32)],
        _now_ms: i64,
    ) -> (ErrorCode, Vec<PartitionResult>, Vec<Output>) {
        let partition = match self.check_owner(group_id) {
            Ok(p) => p,
            Err(e) => return (e, Vec::new(), Vec::new()),
        };
        let Some(group) = self.groups.get_mut(group_id) else {
            return (ErrorCode::GroupIdNotFound, Vec::new(), Vec::new());
        };
        let subscribed = match group.state {
            _ if group.is_active_consumer() => group
                .consumer
                .as_deref()
                .map(|cg| cg.subscribed.keys().cloned().collect())
                .unwrap_or_default(),
            GroupState::Dead => return (ErrorCode::GroupIdNotFound, Vec::new(), Vec::new()),
            GroupState::Empty => Default::default(),
            _ => match group.subscribed_topics() {
                Some(topics) => topics,
                None => return (ErrorCode::NonEmptyGroup, Vec::new(), Vec::new()),
            },
        };
        let mut results = Vec::with_capacity(partitions.len());
        let mut records = Vec::new();
        let mut removed = Vec::new();
        for (topic, p) in partitions {
            let error = if subscribed.contains(topic) {
                ErrorCode::GroupSubscribedToTopic
            } else {
                let key = (topic.clone(), *p);
                // A pending transactional offset is tombstoned too (Kafka's
                // `deleteOffsets`): its COMMIT marker then restores nothing.
                let present = group.offsets.contains_key(&key) || group.has_pending_txn(&key);
                if present && !removed.contains(&key) {
                    records.push(OffsetsRecord {
                        key: encode_offset_commit_key(group_id, topic, *p),
                        value: None,
                    });
                    removed.push(key);
                }
                ErrorCode::None
            };
            results.push(PartitionResult {
                topic: topic.clone(),
                partition: *p,
                error,
            });
        }
        let out = if records.is_empty() {
            Vec::new()
        } else {
            // Removed once the tombstones are durable.
            let effect = Effect::Tombstones {
                group_id: group_id.to_string(),
                offsets: removed,
                remove_group: false,
            };
            let write = self.writes.register(partition, effect);
            vec![Output::Append {
                partition,
                records,
                write,
                transaction: None,
            }]
        };
        (ErrorCode::None, results, out)
    }

    /// Expires offsets as Kafka does: offsets of Empty groups once the group
    /// has been empty for the retention period (counted from the commit
    /// for groups that never had members), offsets of topics a Stable
    /// consumer group no longer subscribes to, and offsets with an explicit
    /// expire timestamp. An Empty group left without offsets is removed.
    /// A partition with an offset pending in a transaction does not expire,
    /// and a group with pending transactional offsets is not removed (the
    /// transaction's COMMIT would make them its offsets).
    pub(crate) fn expire_offsets(&mut self, now_ms: i64) -> Vec<Output> {
        let retention = self.config.offsets_retention_ms;
        let mut out = Vec::new();
        for (id, group) in self.groups.iter_mut() {
            let partition =
                crate::partition::partition_for(id, self.config.offsets_topic_partitions);
            let active = usize::try_from(partition)
                .ok()
                .and_then(|p| self.partitions.get(p))
                == Some(&PartitionStatus::Active);
            if !active {
                continue;
            }
            // A consumer group (KIP-848): offsets of topics its members
            // subscribe to never expire; others expire from their commit.
            let consumer_topics = group.consumer.as_deref().map(|cg| {
                (!cg.members.is_empty()).then(|| cg.subscribed.keys().cloned().collect())
            });
            let unsubscribed_only = match (group.state, &group.protocol_type) {
                _ if consumer_topics.is_some() => consumer_topics.clone().flatten(),
                (GroupState::Empty, _) | (_, None) => None,
                (GroupState::Stable, Some(_)) => match group.subscribed_topics() {
                    Some(t) => Some(t),
                    None => continue,
                },
                _ => continue,
            };
            let empty_since = (group.state == GroupState::Empty
                && consumer_topics.is_none()
                && group.protocol_type.is_some()
                && group.state_timestamp_ms >= 0)
                .then_some(group.state_timestamp_ms);
            let expired: Vec<(String, i32)> = group
                .offsets
                .iter()
                .filter(|((topic, _), _)| {
                    unsubscribed_only
                        .as_ref()
                        .is_none_or(|subscribed| !subscribed.contains(topic))
                })
                .filter(|(key, _)| !group.has_pending_txn(key))
                .filter(|(_, c)| match c.value.expire_timestamp_ms {
                    Some(t) => now_ms >= t,
                    None => {
                        let base = empty_since.unwrap_or(c.value.commit_timestamp_ms);
                        now_ms.saturating_sub(base) >= retention
                    }
                })
                .map(|(k, _)| k.clone())
                .collect();
            let mut records: Vec<OffsetsRecord> = expired
                .iter()
                .map(|(topic, p)| OffsetsRecord {
                    key: encode_offset_commit_key(id, topic, *p),
                    value: None,
                })
                .collect();
            let remove_group = group.state == GroupState::Empty
                && !group.is_active_consumer()
                && group.offsets.len() == expired.len()
                && group.pending_members.is_empty()
                && group.pending_txn.is_empty();
            if remove_group {
                records.extend(group.metadata_tombstones());
            }
            if !records.is_empty() {
                // Removed once the tombstones are durable.
                let effect = Effect::Tombstones {
                    group_id: id.clone(),
                    offsets: expired,
                    remove_group,
                };
                let write = self.writes.register(partition, effect);
                out.push(Output::Append {
                    partition,
                    records,
                    write,
                    transaction: None,
                });
            }
        }
        out
    }
}

/// Kafka's classic-group commit validation.
fn validate_commit(group: &Group, req: &OffsetCommitRequest) -> Result<(), ErrorCode> {
    if let Some(cg) = group.consumer.as_deref() {
        // OffsetCommit's generation id carries the member epoch.
        return crate::consumer::heartbeat::validate_commit(
            cg,
            &req.member_id,
            req.generation_id,
            Some(req.api_version),
        );
    }
    if group.state == GroupState::Dead {
        return Err(ErrorCode::CoordinatorNotAvailable);
    }
    if req.generation_id < 0 && group.state == GroupState::Empty {
        return Ok(());
    }
    group.validate_member(&req.member_id, req.group_instance_id.as_deref())?;
    if req.generation_id != group.generation {
        return Err(ErrorCode::IllegalGeneration);
    }
    if group.state == GroupState::CompletingRebalance {
        // The member holds the new generation but not its assignment yet.
        return Err(ErrorCode::RebalanceInProgress);
    }
    Ok(())
}
