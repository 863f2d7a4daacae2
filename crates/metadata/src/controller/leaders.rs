//! Elections an admin asks for (ElectLeaders) and the periodic preferred
//! leader rebalance (`auto.leader.rebalance.enable`).
//!
//! A preferred election makes a partition's first replica its leader when
//! that replica is active and in the ISR. An unclean election (KIP-460) is
//! for a partition without a leader: it elects from the ISR when it can,
//! else the first active replica, whose log becomes the partition's truth
//! (the ISR shrinks to it). Asking for it is the permission: the topic's
//! `unclean.leader.election.enable` governs only automatic elections, as in
//! Kafka. Every election is a `PartitionChangeRecord` naming the new leader,
//! which bumps the leader epoch when applied.

use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::metadata::PartitionChangeRecord;
use weir_protocol::metadata_record::MetadataRecord;

use super::*;
use crate::image::{MetadataImage, NO_LEADER, Partition};

/// ElectLeaders' `election_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    /// 0: the first replica, if it is active and in the ISR.
    Preferred,
    /// 1: for a partition without a leader, any active replica.
    Unclean,
}

impl ElectionType {
    /// The wire value's type, `None` for an unknown one.
    pub fn from_wire(v: i8) -> Option<Self> {
        match v {
            0 => Some(ElectionType::Preferred),
            1 => Some(ElectionType::Unclean),
            _ => None,
        }
    }
}

/// The outcome of one partition's election: `Ok` when a leader was
/// elected, else ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
/// ELIGIBLE_LEADERS_NOT_AVAILABLE or UNKNOWN_TOPIC_OR_PARTITION.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionResult {
    pub topic: String,
    pub partition: i32,
    pub result: Result<(), Rejection>,
}

impl Controller {
    /// ElectLeaders, as one decision. `partitions` names (topic, partition)
    /// pairs, each answered in order (a pair named again gets the first
    /// answer and no second election); `None` means every partition, and
    /// then the answer leaves out the partitions that needed no election,
    /// as Kafka does. Elections beyond [`MAX_RECORDS_PER_USER_OP`] are not
    /// made: those partitions answer REQUEST_TIMED_OUT, to be asked again.
    pub fn elect_leaders(
        &self,
        image: &MetadataImage,
        election: ElectionType,
        partitions: Option<&[(String, i32)]>,
    ) -> (Vec<ElectionResult>, Vec<MetadataRecord>) {
        let all: Vec<(String, i32)>;
        let wanted = match partitions {
            Some(wanted) => wanted,
            None => {
                all = image
                    .topics()
                    .flat_map(|t| t.partitions.keys().map(|p| (t.name.clone(), *p)))
                    .collect();
                &all
            }
        };
        let mut done: BTreeMap<(&str, i32), Result<(), Rejection>> = BTreeMap::new();
        let mut results = Vec::with_capacity(wanted.len());
        let mut records = Vec::new();
        for (topic, partition) in wanted {
            let key = (topic.as_str(), *partition);
            let result = match done.get(&key) {
                Some(first) => first.clone(),
                None => {
                    let result = if records.len() >= MAX_RECORDS_PER_USER_OP {
                        reject(
                            ErrorCode::RequestTimedOut,
                            "too many elections for one request; ask again",
                        )
                    } else {
                        elect_one(image, topic, *partition, election).map(|r| records.push(r))
                    };
                    done.insert(key, result.clone());
                    result
                }
            };
            results.push(ElectionResult {
                topic: topic.clone(),
                partition: *partition,
                result,
            });
        }
        if partitions.is_none() {
            results
                .retain(|r| !matches!(&r.result, Err(e) if e.code == ErrorCode::ElectionNotNeeded));
        }
        (results, records)
    }

    /// The periodic leader rebalance: a preferred election for every
    /// partition whose first replica is active, in the ISR and not the
    /// leader (at most [`MAX_RECORDS_PER_USER_OP`]; the next run does the
    /// rest).
    pub fn rebalance_leaders(&self, image: &MetadataImage) -> Vec<MetadataRecord> {
        let mut records = Vec::new();
        for t in image.topics() {
            for (&partition, p) in &t.partitions {
                if records.len() >= MAX_RECORDS_PER_USER_OP {
                    return records;
                }
                if let Some(leader) = preferred_electable(image, p) {
                    records.push(leader_change(t.id, partition, leader, None));
                }
            }
        }
        records
    }
}

/// The partitions whose leader is not their preferred replica although it
/// could be (what [`Controller::rebalance_leaders`] would elect).
pub fn imbalanced_partitions(image: &MetadataImage) -> Vec<(Uuid, i32)> {
    image
        .topics()
        .flat_map(|t| {
            t.partitions
                .iter()
                .filter(|(_, p)| preferred_electable(image, p).is_some())
                .map(|(i, _)| (t.id, *i))
        })
        .collect()
}

/// The preferred replica, if a preferred election would make it leader.
fn preferred_electable(image: &MetadataImage, p: &Partition) -> Option<i32> {
    let preferred = *p.replicas.first()?;
    (p.leader != preferred && p.isr.contains(&preferred) && image.is_active(preferred))
        .then_some(preferred)
}

fn elect_one(
    image: &MetadataImage,
    topic: &str,
    partition: i32,
    election: ElectionType,
) -> Result<MetadataRecord, Rejection> {
    let Some(t) = image.topic_by_name(topic) else {
        return reject(
            ErrorCode::UnknownTopicOrPartition,
            format!("no topic {topic}"),
        );
    };
    let Some(p) = t.partitions.get(&partition) else {
        return reject(
            ErrorCode::UnknownTopicOrPartition,
            format!("no partition {topic}-{partition}"),
        );
    };
    match election {
        ElectionType::Preferred => {
            if p.replicas.first() == Some(&p.leader) {
                return reject(
                    ErrorCode::ElectionNotNeeded,
                    format!("the preferred replica {} already leads", p.leader),
                );
            }
            match preferred_electable(image, p) {
                Some(leader) => Ok(leader_change(t.id, partition, leader, None)),
                None => reject(
                    ErrorCode::PreferredLeaderNotAvailable,
                    format!(
                        "preferred replica {} of {topic}-{partition} is not active or not in the ISR {:?}",
                        p.replicas.first().copied().unwrap_or(NO_LEADER),
                        p.isr
                    ),
                ),
            }
        }
        ElectionType::Unclean => {
            if p.leader != NO_LEADER {
                return reject(
                    ErrorCode::ElectionNotNeeded,
                    format!("{topic}-{partition} is led by {}", p.leader),
                );
            }
            let active = |r: &&i32| image.is_active(**r);
            if let Some(&leader) = p.replicas.iter().filter(|r| p.isr.contains(r)).find(active) {
                return Ok(leader_change(t.id, partition, leader, None));
            }
            match p.replicas.iter().find(active) {
                Some(&leader) => Ok(leader_change(t.id, partition, leader, Some(vec![leader]))),
                None => reject(
                    ErrorCode::EligibleLeadersNotAvailable,
                    format!("no replica of {topic}-{partition} is active"),
                ),
            }
        }
    }
}

fn leader_change(
    topic_id: Uuid,
    partition: i32,
    leader: i32,
    isr: Option<Vec<i32>>,
) -> MetadataRecord {
    MetadataRecord::PartitionChange(PartitionChangeRecord {
        partition_id: partition,
        topic_id,
        leader,
        isr,
        ..Default::default()
    })
}
