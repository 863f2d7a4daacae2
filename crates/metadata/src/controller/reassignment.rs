//! Partition reassignment (KIP-455): AlterPartitionReassignments and
//! ListPartitionReassignments, and the partition change every ISR change
//! goes through so that a reassignment completes as soon as it can.
//!
//! A reassignment of a partition from its current replicas to a target
//! runs in three steps, as in Kafka's KRaft controller:
//!
//! 1. the replicas become the target followed by the current replicas the
//!    target drops; `adding` = target − current and `removing` = current −
//!    target (each in ascending id order); the ISR and the leader stay;
//! 2. the adding replicas fetch from the leader, which adds each to the
//!    ISR once caught up (AlterPartition);
//! 3. the first ISR change that leaves every target replica in the ISR
//!    completes it, in the same record: replicas = target, ISR = ISR ∖
//!    removing, adding and removing cleared, a new leader from the target
//!    replicas in the ISR if the leader was removed, and in any case a
//!    leader epoch bump when replicas were removed (it fences them).
//!
//! A reassignment that only removes replicas already completes in step 1.
//! A new target while one is in progress is computed against the replicas
//! of the moment (the union), so adding replicas the new target leaves out
//! are removed again. Cancelling (a null target) returns to the original
//! replicas: the adding replicas leave the replicas and the ISR (the
//! others keep their order in the replica list, so the preferred leader
//! may differ from before the reassignment, as in Kafka). If that
//! leaves the ISR empty, the first original replica becomes the ISR and
//! leader, which is an unclean election and is allowed only when the
//! topic's `unclean.leader.election.enable` is `true`.
//!
//! Target replicas must be non-empty, distinct and registered, unfenced
//! brokers (Kafka accepts fenced ones; a reassignment onto a fenced broker
//! could not complete until it comes back, so weir refuses it up front).

use std::collections::{BTreeMap, BTreeSet};

use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::metadata::PartitionChangeRecord;
use weir_protocol::metadata_record::MetadataRecord;

use super::*;
use crate::image::{MetadataImage, NO_LEADER, NO_LEADER_CHANGE, Partition, TOPIC_RESOURCE};

/// The topic config that allows a cancellation to elect outside the ISR.
const UNCLEAN_ELECTION: &str = "unclean.leader.election.enable";

/// One partition of an AlterPartitionReassignments request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reassignment {
    pub topic: String,
    pub partition: i32,
    /// The replicas wanted, the first preferred as leader; `None` cancels
    /// the reassignment in progress.
    pub target: Option<Vec<i32>>,
}

/// The outcome of one partition's reassignment: `Ok` once it is started,
/// completed or cancelled; else UNKNOWN_TOPIC_OR_PARTITION,
/// INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS or
/// REQUEST_TIMED_OUT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReassignmentResult {
    pub topic: String,
    pub partition: i32,
    pub result: Result<(), Rejection>,
}

/// A reassignment in progress, as ListPartitionReassignments reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OngoingReassignment {
    pub topic: String,
    pub partition: i32,
    /// The current replicas: the target, then the removing ones.
    pub replicas: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

impl Controller {
    /// AlterPartitionReassignments, as one decision: each partition is
    /// answered in order, each decided on `image` (a partition named again
    /// gets the first answer and no second change). Changes beyond
    /// [`MAX_RECORDS_PER_USER_OP`] are not made: those partitions answer
    /// REQUEST_TIMED_OUT, to be asked again.
    pub fn alter_partition_reassignments(
        &self,
        image: &MetadataImage,
        reassignments: &[Reassignment],
    ) -> (Vec<ReassignmentResult>, Vec<MetadataRecord>) {
        let mut done: BTreeMap<(&str, i32), Result<(), Rejection>> = BTreeMap::new();
        let mut results = Vec::with_capacity(reassignments.len());
        let mut records = Vec::new();
        for r in reassignments {
            let key = (r.topic.as_str(), r.partition);
            let result = match done.get(&key) {
                Some(first) => first.clone(),
                None => {
                    let result = if records.len() >= MAX_RECORDS_PER_USER_OP {
                        reject(
                            ErrorCode::RequestTimedOut,
                            "too many reassignments for one request; ask again",
                        )
                    } else {
                        reassign_one(image, r).map(|change| {
                            records.extend(change.map(MetadataRecord::PartitionChange));
                        })
                    };
                    done.insert(key, result.clone());
                    result
                }
            };
            results.push(ReassignmentResult {
                topic: r.topic.clone(),
                partition: r.partition,
                result,
            });
        }
        (results, records)
    }
}

/// ListPartitionReassignments: the reassignments in progress, by topic
/// name then partition. `topics` names (topic, partitions) to look at
/// (`None`: all); names and partitions that do not exist or are not being
/// reassigned are left out, as Kafka does.
pub fn ongoing_reassignments(
    image: &MetadataImage,
    topics: Option<&[(String, Vec<i32>)]>,
) -> Vec<OngoingReassignment> {
    let mut wanted: BTreeMap<&str, Option<BTreeSet<i32>>> = BTreeMap::new();
    match topics {
        Some(topics) => {
            for (name, partitions) in topics {
                wanted
                    .entry(name.as_str())
                    .or_insert_with(|| Some(BTreeSet::new()))
                    .get_or_insert_with(BTreeSet::new)
                    .extend(partitions.iter().copied());
            }
        }
        None => {
            for t in image.topics() {
                wanted.insert(t.name.as_str(), None);
            }
        }
    }
    let mut out = Vec::new();
    for (name, partitions) in wanted {
        let Some(t) = image.topic_by_name(name) else {
            continue;
        };
        for (&partition, p) in &t.partitions {
            let asked = partitions.as_ref().is_none_or(|ps| ps.contains(&partition));
            if asked && p.is_reassigning() {
                out.push(OngoingReassignment {
                    topic: t.name.clone(),
                    partition,
                    replicas: p.replicas.clone(),
                    adding: p.adding_replicas.clone(),
                    removing: p.removing_replicas.clone(),
                });
            }
        }
    }
    out
}

/// One partition's reassignment: the change to commit (none when the
/// partition already is as asked).
fn reassign_one(
    image: &MetadataImage,
    r: &Reassignment,
) -> Result<Option<PartitionChangeRecord>, Rejection> {
    let Some(t) = image.topic_by_name(&r.topic) else {
        return reject(
            ErrorCode::UnknownTopicOrPartition,
            format!("no topic {}", r.topic),
        );
    };
    let Some(p) = t.partitions.get(&r.partition) else {
        return reject(
            ErrorCode::UnknownTopicOrPartition,
            format!("no partition {}-{}", r.topic, r.partition),
        );
    };
    let active = |b: i32| image.is_active(b);
    match &r.target {
        Some(target) => {
            validate_target(image, target)?;
            let current: BTreeSet<i32> = p.replicas.iter().copied().collect();
            let wanted: BTreeSet<i32> = target.iter().copied().collect();
            let removing: Vec<i32> = current.difference(&wanted).copied().collect();
            let adding: Vec<i32> = wanted.difference(&current).copied().collect();
            let mut replicas = target.clone();
            replicas.extend(&removing);
            let goal = PartitionTarget {
                replicas,
                adding,
                removing,
                ..PartitionTarget::of(p)
            };
            Ok(partition_change(t.id, r.partition, p, goal, active))
        }
        None => {
            if !p.is_reassigning() {
                return reject(
                    ErrorCode::NoReassignmentInProgress,
                    format!(
                        "no reassignment of {}-{} is in progress",
                        r.topic, r.partition
                    ),
                );
            }
            let not_adding = |b: &i32| !p.adding_replicas.contains(b);
            let replicas: Vec<i32> = p.replicas.iter().copied().filter(not_adding).collect();
            let mut isr: Vec<i32> = p.isr.iter().copied().filter(not_adding).collect();
            if isr.is_empty() {
                let unclean_allowed = image
                    .configs(TOPIC_RESOURCE, &r.topic)
                    .and_then(|c| c.get(UNCLEAN_ELECTION))
                    .is_some_and(|v| v.eq_ignore_ascii_case("true"));
                if !unclean_allowed {
                    return reject(
                        ErrorCode::InvalidReplicaAssignment,
                        format!(
                            "cancelling the reassignment of {}-{} would need an unclean leader election: no original replica is in the ISR {:?}",
                            r.topic, r.partition, p.isr
                        ),
                    );
                }
                // Unclean: the first active original replica's log becomes
                // the partition's truth.
                let Some(&first) = replicas.iter().find(|b| active(**b)).or(replicas.first())
                else {
                    return reject(
                        ErrorCode::InvalidReplicaAssignment,
                        "every replica is an adding one",
                    );
                };
                isr = vec![first];
            }
            let goal = PartitionTarget {
                replicas,
                isr,
                adding: Vec::new(),
                removing: Vec::new(),
            };
            Ok(partition_change(t.id, r.partition, p, goal, active))
        }
    }
}

/// INVALID_REPLICA_ASSIGNMENT unless `target` is non-empty, distinct and
/// made of registered, unfenced brokers.
fn validate_target(image: &MetadataImage, target: &[i32]) -> Result<(), Rejection> {
    if target.is_empty() {
        return reject(
            ErrorCode::InvalidReplicaAssignment,
            "the target replicas are empty",
        );
    }
    let mut seen = BTreeSet::new();
    for &b in target {
        if !seen.insert(b) {
            return reject(
                ErrorCode::InvalidReplicaAssignment,
                format!("the target replicas {target:?} name broker {b} more than once"),
            );
        }
        match image.broker(b) {
            None => {
                return reject(
                    ErrorCode::InvalidReplicaAssignment,
                    format!("the target replicas name broker {b}, which is not registered"),
                );
            }
            Some(broker) if broker.fenced => {
                return reject(
                    ErrorCode::InvalidReplicaAssignment,
                    format!("the target replicas name broker {b}, which is fenced"),
                );
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// What a partition change aims at (Kafka's `PartitionChangeBuilder`
/// targets); [`partition_change`] turns it into a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PartitionTarget {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

impl PartitionTarget {
    /// The partition as it is.
    pub fn of(p: &Partition) -> Self {
        PartitionTarget {
            replicas: p.replicas.clone(),
            isr: p.isr.clone(),
            adding: p.adding_replicas.clone(),
            removing: p.removing_replicas.clone(),
        }
    }

    /// Completes the reassignment in progress if every replica but the
    /// removing ones is in the ISR and something remains of both.
    fn complete_if_possible(&mut self) {
        if self.adding.is_empty() && self.removing.is_empty() {
            return;
        }
        let kept = |b: &i32| !self.removing.contains(b);
        let isr: Vec<i32> = self.isr.iter().copied().filter(kept).collect();
        let replicas: Vec<i32> = self.replicas.iter().copied().filter(kept).collect();
        if isr.is_empty() || replicas.is_empty() || !replicas.iter().all(|b| isr.contains(b)) {
            return;
        }
        self.isr = isr;
        self.replicas = replicas;
        self.adding.clear();
        self.removing.clear();
    }
}

/// The record that takes partition `p` to `goal`, `None` when nothing
/// would change. A reassignment the goal makes completable is completed.
/// The leader stays when it is in the new ISR and `acceptable` (active);
/// otherwise the first replica in the new ISR that is acceptable leads, or
/// nobody. A change that removes replicas bumps the leader epoch even when
/// the leader stays, so the removed replicas are fenced.
pub(super) fn partition_change(
    topic_id: Uuid,
    partition: i32,
    p: &Partition,
    mut goal: PartitionTarget,
    acceptable: impl Fn(i32) -> bool,
) -> Option<PartitionChangeRecord> {
    goal.complete_if_possible();
    let valid = |b: i32| goal.isr.contains(&b) && acceptable(b);
    let leader = if p.leader != NO_LEADER && valid(p.leader) {
        p.leader
    } else {
        goal.replicas
            .iter()
            .copied()
            .find(|b| valid(*b))
            .unwrap_or(NO_LEADER)
    };
    let leader = if leader != p.leader {
        leader
    } else if !p.replicas.iter().all(|b| goal.replicas.contains(b)) {
        p.leader
    } else {
        NO_LEADER_CHANGE
    };
    let changed = |now: &Vec<i32>, to: Vec<i32>| (*now != to).then_some(to);
    let record = PartitionChangeRecord {
        partition_id: partition,
        topic_id,
        leader,
        isr: changed(&p.isr, goal.isr),
        replicas: changed(&p.replicas, goal.replicas),
        adding_replicas: changed(&p.adding_replicas, goal.adding),
        removing_replicas: changed(&p.removing_replicas, goal.removing),
        ..Default::default()
    };
    let no_op = record.leader == NO_LEADER_CHANGE
        && record.isr.is_none()
        && record.replicas.is_none()
        && record.adding_replicas.is_none()
        && record.removing_replicas.is_none();
    (!no_op).then_some(record)
}
