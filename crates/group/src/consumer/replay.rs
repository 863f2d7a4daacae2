//! Rebuilding consumer groups from their KIP-848 records on load.
//!
//! Records apply in log order, the last one per key winning; a tombstone
//! removes what its key names. A group's ConsumerGroupMetadata tombstone
//! removes the group (its offsets, if any, stay).

use super::records::{self as rec, ConsumerKey};
use super::{ConsumerGroup, ConsumerMember};
use crate::coordinator::GroupCoordinator;
use crate::error::RecordError;
use crate::group::Group;

impl GroupCoordinator {
    /// Applies one KIP-848 record; `Ok(false)` if `key` is not one.
    pub(crate) fn replay_consumer(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<bool, RecordError> {
        let Some(key) = rec::decode_key(key)? else {
            return Ok(false);
        };
        let group_id = match &key {
            ConsumerKey::Metadata { group }
            | ConsumerKey::PartitionMetadata { group }
            | ConsumerKey::MemberMetadata { group, .. }
            | ConsumerKey::TargetMetadata { group }
            | ConsumerKey::TargetMember { group, .. }
            | ConsumerKey::CurrentAssignment { group, .. } => group.clone(),
        };
        if value.is_none() && !self.groups.contains_key(&group_id) {
            return Ok(true);
        }
        if let (ConsumerKey::Metadata { .. }, None) = (&key, value) {
            let keep = self
                .groups
                .get(&group_id)
                .is_some_and(|g| !g.has_no_offsets());
            if keep {
                if let Some(g) = self.groups.get_mut(&group_id) {
                    g.consumer = None;
                    g.protocol_type = None;
                }
            } else {
                self.groups.remove(&group_id);
            }
            return Ok(true);
        }
        let g = self
            .groups
            .entry(group_id.clone())
            .or_insert_with(|| Group::new(group_id, -1));
        g.protocol_type = Some("consumer".to_string());
        let cg: &mut ConsumerGroup = g.consumer.get_or_insert_default();
        match (key, value) {
            (ConsumerKey::Metadata { .. }, Some(v)) => {
                cg.epoch = rec::decode_epoch(v)?;
            }
            (ConsumerKey::Metadata { .. }, None) => {}
            (ConsumerKey::PartitionMetadata { .. }, v) => {
                cg.subscribed = match v {
                    Some(v) => rec::decode_partition_metadata(v)?
                        .into_iter()
                        .map(|t| (t.name.clone(), t))
                        .collect(),
                    None => Default::default(),
                };
            }
            (ConsumerKey::MemberMetadata { member, .. }, Some(v)) => {
                let meta = rec::decode_member_metadata(v)?;
                cg.members
                    .entry(member.clone())
                    .or_insert_with(|| ConsumerMember::new(member))
                    .set_meta(meta);
            }
            (ConsumerKey::MemberMetadata { member, .. }, None) => {
                cg.remove_member(&member);
            }
            (ConsumerKey::TargetMetadata { .. }, v) => {
                cg.assignment_epoch = match v {
                    Some(v) => rec::decode_target_epoch(v)?,
                    None => 0,
                };
            }
            (ConsumerKey::TargetMember { member, .. }, Some(v)) => {
                cg.target.insert(member, rec::decode_target_member(v)?);
            }
            (ConsumerKey::TargetMember { member, .. }, None) => {
                cg.target.remove(&member);
            }
            (ConsumerKey::CurrentAssignment { member, .. }, v) => {
                let current = match v {
                    Some(v) => rec::decode_current_assignment(v)?,
                    None => Default::default(),
                };
                cg.members
                    .entry(member.clone())
                    .or_insert_with(|| ConsumerMember::new(member.clone()));
                cg.set_current(&member, current, false);
            }
        }
        Ok(true)
    }

    /// After a load: the loaded consumer members get a full session
    /// timeout from `now_ms` (and a revocation pending when the partition
    /// was loaded gets a full rebalance timeout).
    pub(crate) fn complete_consumer_load(&mut self, partition: i32, now_ms: i64) {
        let n = self.config.offsets_topic_partitions;
        for (id, g) in self.groups.iter_mut() {
            if crate::partition::partition_for(id, n) != partition {
                continue;
            }
            let Some(cg) = g.consumer.as_deref_mut() else {
                continue;
            };
            let session = i64::from(
                super::heartbeat::group_config(&self.config, &self.consumer_timeouts, id)
                    .consumer_session_timeout_ms,
            );
            // Targets of members whose metadata was never seen (or was
            // tombstoned) are dropped, as are group-less leftovers.
            let members: Vec<String> = cg.members.keys().cloned().collect();
            cg.target.retain(|m, _| members.contains(m));
            cg.assignment_epoch = cg.assignment_epoch.min(cg.epoch);
            for m in cg.members.values_mut() {
                // A classic member's own session timeout, else the group's.
                let session = m
                    .meta
                    .classic
                    .as_ref()
                    .map_or(session, |c| i64::from(c.session_timeout_ms));
                m.session_deadline_ms = now_ms.saturating_add(session);
                m.rebalance_deadline_ms = (m.current.state
                    == super::types::MemberState::UnrevokedPartitions)
                    .then(|| now_ms.saturating_add(i64::from(m.meta.rebalance_timeout_ms.max(0))));
            }
        }
    }
}
