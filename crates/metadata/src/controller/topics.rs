//! Topic creation (validation, placement), partitions added to a topic,
//! and deletion.

use std::collections::{BTreeMap, BTreeSet};

use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::metadata::{
    ConfigRecord, PartitionRecord, RemoveTopicRecord, TopicRecord,
};
use weir_protocol::metadata_record::MetadataRecord;

use super::*;
use crate::image::{MetadataImage, TOPIC_RESOURCE};

impl Controller {
    /// CreateTopics for one topic: validation, then the topic, its configs
    /// and its partitions. Replicas are spread round-robin over the active
    /// brokers in placement order (rack-alternating, see `placement_order`)
    /// from a start picked by the seed: partition p's replica j is broker
    /// `(start + p + j) mod n`, so leaders and followers rotate.
    pub fn create_topic(
        &mut self,
        image: &MetadataImage,
        topic: &NewTopic,
    ) -> Result<(Uuid, Vec<MetadataRecord>), Rejection> {
        validate_topic_name(&topic.name)?;
        if image.topic_by_name(&topic.name).is_some() {
            return reject(
                ErrorCode::TopicAlreadyExists,
                format!("topic {} already exists", topic.name),
            );
        }
        let active = placement_order(image);
        let assignments = if topic.assignments.is_empty() {
            let partitions = match topic.num_partitions {
                -1 => self.config.default_partitions,
                n if n >= 1 => n,
                n => {
                    return reject(
                        ErrorCode::InvalidPartitions,
                        format!("number of partitions {n} is invalid"),
                    );
                }
            };
            let rf = match topic.replication_factor {
                -1 => self.config.default_replication_factor,
                n if n >= 1 => n,
                n => {
                    return reject(
                        ErrorCode::InvalidReplicationFactor,
                        format!("replication factor {n} is invalid"),
                    );
                }
            };
            let rf = usize::from(rf.unsigned_abs());
            if rf > active.len() {
                return reject(
                    ErrorCode::InvalidReplicationFactor,
                    format!(
                        "replication factor {rf} is larger than the {} available brokers",
                        active.len()
                    ),
                );
            }
            check_record_bound(partitions)?;
            let start = self.next_random() as usize;
            place(&active, start, 0..partitions as usize, rf)
        } else {
            if topic.num_partitions != -1 || topic.replication_factor != -1 {
                return reject(
                    ErrorCode::InvalidRequest,
                    "both assignments and a number of partitions or a replication factor were given",
                );
            }
            validate_assignments(image, &topic.assignments)?;
            topic.assignments.clone()
        };
        let id = self.new_topic_id(image);
        let mut records = vec![MetadataRecord::Topic(TopicRecord {
            name: topic.name.clone(),
            topic_id: id,
            ..Default::default()
        })];
        for (name, value) in &topic.configs {
            records.push(MetadataRecord::Config(ConfigRecord {
                resource_type: TOPIC_RESOURCE,
                resource_name: topic.name.clone(),
                name: name.clone(),
                value: value.clone(),
                ..Default::default()
            }));
        }
        for (p, replicas) in assignments.into_iter().enumerate() {
            records.push(new_partition(image, id, p as i32, replicas)?);
        }
        Ok((id, records))
    }

    /// CreatePartitions for one topic: the records of the partitions it
    /// adds (`validate_only` is the caller's: it commits nothing). The count
    /// must exceed the current one; explicit assignments name one replica
    /// list per new partition, each as long as the topic's replication
    /// factor, of distinct registered brokers with at least one active;
    /// without them the new partitions are placed as
    /// [`create_topic`](Self::create_topic) places a topic's, continuing
    /// the rotation from a start picked by the seed.
    pub fn create_partitions(
        &mut self,
        image: &MetadataImage,
        req: &NewPartitions,
    ) -> Result<Vec<MetadataRecord>, Rejection> {
        let Some(topic) = image.topic_by_name(&req.name) else {
            return reject(
                ErrorCode::UnknownTopicOrPartition,
                format!("topic {} does not exist", req.name),
            );
        };
        if FIXED_PARTITION_COUNT_TOPICS.contains(&req.name.as_str()) {
            // Group and transaction placement hash over the partition count:
            // more partitions would move them away from their state.
            return reject(
                ErrorCode::InvalidTopicException,
                format!(
                    "the number of partitions of internal topic {} cannot change",
                    req.name
                ),
            );
        }
        let current = topic.partitions.len();
        let count = usize::try_from(req.count).unwrap_or(0);
        if count < current {
            return reject(
                ErrorCode::InvalidPartitions,
                format!(
                    "topic {} has {current} partitions, more than the requested {}",
                    req.name, req.count
                ),
            );
        }
        if count == current {
            return reject(
                ErrorCode::InvalidPartitions,
                format!("topic {} already has {current} partitions", req.name),
            );
        }
        let added = count - current;
        check_record_bound(added as i32)?;
        let rf = topic
            .partitions
            .values()
            .next()
            .map_or(0, |p| p.replicas.len());
        let assignments = match &req.assignments {
            Some(assignments) => {
                if assignments.len() != added {
                    return reject(
                        ErrorCode::InvalidReplicaAssignment,
                        format!(
                            "{added} partitions are added but {} assignments were given",
                            assignments.len()
                        ),
                    );
                }
                validate_assignments(image, assignments)?;
                if let Some(a) = assignments.iter().find(|a| a.len() != rf) {
                    return reject(
                        ErrorCode::InvalidReplicaAssignment,
                        format!(
                            "an assignment has {} replicas, the topic's partitions have {rf}",
                            a.len()
                        ),
                    );
                }
                assignments.clone()
            }
            None => {
                let active = placement_order(image);
                if rf > active.len() {
                    return reject(
                        ErrorCode::InvalidReplicationFactor,
                        format!(
                            "replication factor {rf} is larger than the {} available brokers",
                            active.len()
                        ),
                    );
                }
                let start = self.next_random() as usize;
                place(&active, start, current..count, rf)
            }
        };
        assignments
            .into_iter()
            .zip(current..count)
            .map(|(replicas, p)| new_partition(image, topic.id, p as i32, replicas))
            .collect()
    }

    /// A fresh topic id: random from the seed, never zero, never in use.
    fn new_topic_id(&mut self, image: &MetadataImage) -> Uuid {
        loop {
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&self.next_random().to_be_bytes());
            b[8..].copy_from_slice(&self.next_random().to_be_bytes());
            let id = Uuid(b);
            if id != Uuid::ZERO && image.topic(id).is_none() {
                return id;
            }
        }
    }

    /// DeleteTopics for one topic.
    pub fn delete_topic(
        &self,
        image: &MetadataImage,
        name: &str,
    ) -> Result<Vec<MetadataRecord>, Rejection> {
        let Some(t) = image.topic_by_name(name) else {
            return reject(
                ErrorCode::UnknownTopicOrPartition,
                format!("topic {name} does not exist"),
            );
        };
        Ok(vec![MetadataRecord::RemoveTopic(RemoveTopicRecord {
            topic_id: t.id,
            ..Default::default()
        })])
    }
}

/// Topics whose partition count never changes once created.
const FIXED_PARTITION_COUNT_TOPICS: &[&str] = &["__consumer_offsets", "__transaction_state"];

/// Replicas for `partitions` over `active` (placement order): partition
/// p's replica j is `active[(start + p + j) mod n]`, so leaders and
/// followers rotate. `rf <= active.len()` is the caller's check.
fn place(
    active: &[i32],
    start: usize,
    partitions: std::ops::Range<usize>,
    rf: usize,
) -> Vec<Vec<i32>> {
    let n = active.len().max(1);
    let start = start % n;
    partitions
        .map(|p| {
            (0..rf)
                .filter_map(|j| active.get((start + p + j) % n).copied())
                .collect()
        })
        .collect()
}

/// A new partition's record: its ISR is its active replicas, led by the
/// first of them.
fn new_partition(
    image: &MetadataImage,
    topic_id: Uuid,
    partition: i32,
    replicas: Vec<i32>,
) -> Result<MetadataRecord, Rejection> {
    let isr: Vec<i32> = replicas
        .iter()
        .copied()
        .filter(|r| image.is_active(*r))
        .collect();
    let Some(&leader) = isr.first() else {
        return reject(
            ErrorCode::InvalidReplicaAssignment,
            format!("every broker assigned to partition {partition} is fenced or shutting down"),
        );
    };
    Ok(MetadataRecord::Partition(PartitionRecord {
        partition_id: partition,
        topic_id,
        replicas,
        isr,
        leader,
        leader_epoch: 0,
        partition_epoch: 0,
        ..Default::default()
    }))
}

/// Refuses more new partitions than one decision may write records.
fn check_record_bound(partitions: i32) -> Result<(), Rejection> {
    if usize::try_from(partitions).is_ok_and(|n| n > MAX_RECORDS_PER_USER_OP) {
        return reject(
            ErrorCode::InvalidPartitions,
            format!(
                "{partitions} partitions in one request are more than the {MAX_RECORDS_PER_USER_OP} allowed"
            ),
        );
    }
    Ok(())
}

/// The active brokers in placement order: without racks, by id; with
/// racks, alternating between racks (racks by name, brokers of a rack by
/// id; brokers without a rack form one more group), as Kafka's rack-aware
/// assignment does, so that consecutive brokers, and so one partition's
/// replicas, sit in different racks where the racks allow it.
fn placement_order(image: &MetadataImage) -> Vec<i32> {
    let mut racks: BTreeMap<Option<&str>, Vec<i32>> = BTreeMap::new();
    for b in image.brokers().filter(|b| b.is_active()) {
        racks.entry(b.rack.as_deref()).or_default().push(b.id);
    }
    let longest = racks.values().map(Vec::len).max().unwrap_or(0);
    (0..longest)
        .flat_map(|i| racks.values().filter_map(move |ids| ids.get(i).copied()))
        .collect()
}

/// Kafka's topic name rules.
fn validate_topic_name(name: &str) -> Result<(), Rejection> {
    let why = if name.is_empty() {
        "the empty string"
    } else if name == "." || name == ".." {
        "'.' or '..'"
    } else if name.len() > MAX_TOPIC_NAME_LEN {
        "longer than 249 characters"
    } else if !name
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
    {
        "not made of ASCII letters, digits, '.', '_' and '-'"
    } else {
        return Ok(());
    };
    reject(
        ErrorCode::InvalidTopicException,
        format!("topic name {name:?} is {why}"),
    )
}

fn validate_assignments(image: &MetadataImage, assignments: &[Vec<i32>]) -> Result<(), Rejection> {
    let rf = assignments.first().map_or(0, Vec::len);
    for (p, replicas) in assignments.iter().enumerate() {
        let distinct: BTreeSet<_> = replicas.iter().collect();
        let why = if replicas.is_empty() {
            "has no replicas"
        } else if distinct.len() != replicas.len() {
            "repeats a broker"
        } else if replicas.len() != rf {
            "has a different replication factor from partition 0"
        } else if let Some(r) = replicas.iter().find(|r| image.broker(**r).is_none()) {
            return reject(
                ErrorCode::InvalidReplicaAssignment,
                format!("partition {p} names broker {r}, which is not registered"),
            );
        } else {
            continue;
        };
        return reject(
            ErrorCode::InvalidReplicaAssignment,
            format!("partition {p} {why}"),
        );
    }
    Ok(())
}
