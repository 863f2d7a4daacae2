//! AlterPartition and producer id blocks.

use std::collections::BTreeSet;

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::metadata::ProducerIdsRecord;
use weir_protocol::metadata_record::MetadataRecord;

use super::reassignment::{PartitionTarget, partition_change};
use super::*;
use crate::image::{MetadataImage, Partition};

impl Controller {
    /// AlterPartition from `broker_id` for one partition, with Kafka's
    /// checks in Kafka's order. Returns the partition as it will be and the
    /// record (none if nothing changes). A new ISR that holds every target
    /// replica of a reassignment in progress completes it (see
    /// `reassignment`), possibly electing another leader than `broker_id`.
    pub fn alter_partition(
        &self,
        image: &MetadataImage,
        broker_id: i32,
        broker_epoch: i64,
        req: &AlterPartition,
    ) -> Result<(Partition, Vec<MetadataRecord>), Rejection> {
        match image.broker(broker_id) {
            Some(b) if b.epoch == broker_epoch || broker_epoch == -1 => {}
            _ => {
                return reject(
                    ErrorCode::StaleBrokerEpoch,
                    format!("broker {broker_id} epoch {broker_epoch} is stale"),
                );
            }
        }
        if image.topic(req.topic_id).is_none() {
            return reject(ErrorCode::UnknownTopicId, "unknown topic id");
        }
        let Some(p) = image.partition(req.topic_id, req.partition) else {
            return reject(
                ErrorCode::UnknownTopicOrPartition,
                format!("partition {} does not exist", req.partition),
            );
        };
        // A newer epoch than ours: this controller is probably no longer
        // the active one.
        if req.leader_epoch > p.leader_epoch || req.partition_epoch > p.partition_epoch {
            return reject(
                ErrorCode::NotController,
                "request epochs are newer than this controller's",
            );
        }
        if req.leader_epoch < p.leader_epoch {
            return reject(
                ErrorCode::FencedLeaderEpoch,
                format!(
                    "leader epoch is {}, not {}",
                    p.leader_epoch, req.leader_epoch
                ),
            );
        }
        if broker_id != p.leader {
            return reject(
                ErrorCode::InvalidRequest,
                format!("the leader is {}, not {broker_id}", p.leader),
            );
        }
        if req.partition_epoch < p.partition_epoch {
            return reject(
                ErrorCode::InvalidUpdateVersion,
                format!(
                    "partition epoch is {}, not {}",
                    p.partition_epoch, req.partition_epoch
                ),
            );
        }
        let new_isr: Vec<i32> = req.new_isr.iter().map(|(id, _)| *id).collect();
        let distinct: BTreeSet<i32> = new_isr.iter().copied().collect();
        if new_isr.is_empty()
            || distinct.len() != new_isr.len()
            || !new_isr.iter().all(|r| p.replicas.contains(r))
        {
            return reject(
                ErrorCode::InvalidRequest,
                format!("invalid ISR {new_isr:?}"),
            );
        }
        if !distinct.contains(&p.leader) {
            return reject(ErrorCode::InvalidRequest, "the ISR must include the leader");
        }
        for (id, epoch) in &req.new_isr {
            let eligible = image
                .broker(*id)
                .is_some_and(|b| b.is_active() && (*epoch == -1 || b.epoch == *epoch));
            if !eligible {
                return reject(
                    ErrorCode::IneligibleReplica,
                    format!("replica {id} is not eligible for the ISR"),
                );
            }
        }
        // An ISR change may complete a reassignment in progress, and with
        // it move the leadership (the caller tells the requester
        // NEW_LEADER_ELECTED then, as Kafka does).
        let goal = PartitionTarget {
            isr: new_isr,
            ..PartitionTarget::of(p)
        };
        let Some(record) =
            partition_change(req.topic_id, req.partition, p, goal, |b| image.is_active(b))
        else {
            return Ok((p.clone(), Vec::new()));
        };
        let next = match p.changed(&record) {
            Ok(next) => next,
            Err(e) => return reject(ErrorCode::UnknownServerError, e.to_string()),
        };
        Ok((next, vec![MetadataRecord::PartitionChange(record)]))
    }

    /// AllocateProducerIds: the next block of [`PRODUCER_ID_BLOCK_SIZE`]
    /// ids (first id, records).
    pub fn allocate_producer_ids(
        &self,
        image: &MetadataImage,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<(i64, Vec<MetadataRecord>), Rejection> {
        match image.broker(broker_id) {
            Some(b) if b.epoch == broker_epoch => {}
            Some(_) => return reject(ErrorCode::StaleBrokerEpoch, "stale broker epoch"),
            None => return reject(ErrorCode::BrokerIdNotRegistered, "broker is not registered"),
        }
        let first = image.next_producer_id();
        let Some(next) = first.checked_add(PRODUCER_ID_BLOCK_SIZE) else {
            return reject(ErrorCode::UnknownServerError, "producer ids exhausted");
        };
        Ok((
            first,
            vec![MetadataRecord::ProducerIds(ProducerIdsRecord {
                broker_id,
                broker_epoch,
                next_producer_id: next,
                ..Default::default()
            })],
        ))
    }
}
