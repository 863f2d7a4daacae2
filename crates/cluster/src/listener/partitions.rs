//! AlterPartition (v2-3) and AllocateProducerIds (v0): a partition leader
//! changing its ISR, and a broker taking a block of producer ids.
//!
//! AlterPartition names topics by id, from v2 (Kafka 4's minimum version:
//! v0-1 named them and are not served; a request of those versions is
//! answered UNSUPPORTED_VERSION). Each partition is one controller decision
//! (weir-metadata's `alter_partition`, with Kafka's checks in Kafka's order)
//! and one batch, answered with the partition as committed or the
//! rejection's code (UNKNOWN_TOPIC_ID, FENCED_LEADER_EPOCH,
//! INVALID_UPDATE_VERSION, INVALID_REQUEST, INELIGIBLE_REPLICA, …). In v3
//! every proposed ISR member carries its broker epoch (`new_isr_with_epochs`),
//! checked against the registered one; in v2 only ids are sent and epochs
//! are not checked.
//!
//! What stands for the whole request is answered, as Kafka does, in the
//! top-level error code with no topics: NOT_CONTROLLER off the active
//! controller, STALE_BROKER_EPOCH for a requester whose epoch is not the
//! registered one, a timeout. Processing stops there; partitions already
//! committed keep their change, and a leader that sends them again gets
//! INVALID_UPDATE_VERSION and learns the new epochs from the metadata log.
//!
//! An ISR change that completes a partition reassignment may elect another
//! leader than the requester (its replica was removed): the change is
//! committed and the requester answered NEW_LEADER_ELECTED, as Kafka does,
//! so it learns its new role from the metadata log.
//!
//! Leader recovery (KIP-704): partitions here are always RECOVERED (0), as
//! no election of weir's leaves a leader recovering; a request asking for
//! RECOVERING (1) is INVALID_REQUEST, as Kafka answers for a recovered
//! partition, and so is an unknown state.

use weir_metadata::Partition;
use weir_metadata::controller::{AlterPartition, PRODUCER_ID_BLOCK_SIZE};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::alter_partition_request::PartitionData as RequestPartition;
use weir_protocol::messages::alter_partition_response::{PartitionData, TopicData};
use weir_protocol::messages::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse, AlterPartitionRequest,
    AlterPartitionResponse,
};

use super::ListenerContext;
use crate::controller::ControllerError;

/// The AlterPartition versions served: v2 (topic ids) to v3 (ISR members
/// with broker epochs).
pub const ALTER_PARTITION_VERSIONS: (i16, i16) = (2, 3);

/// `LeaderRecoveryState` RECOVERED.
pub const RECOVERED: i8 = 0;

pub(super) async fn alter_partition(
    ctx: &ListenerContext,
    req: AlterPartitionRequest,
    version: i16,
) -> AlterPartitionResponse {
    let (min, max) = ALTER_PARTITION_VERSIONS;
    if !(min..=max).contains(&version) {
        return request_error(ErrorCode::UnsupportedVersion);
    }
    let mut topics = Vec::with_capacity(req.topics.len());
    for topic in req.topics {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            let index = p.partition_index;
            let outcome = match recovery_error(&p) {
                Some(code) => Err(code),
                None => {
                    let change = AlterPartition {
                        topic_id: topic.topic_id,
                        partition: index,
                        leader_epoch: p.leader_epoch,
                        partition_epoch: p.partition_epoch,
                        new_isr: proposed_isr(&p, version),
                    };
                    match ctx
                        .controller
                        .alter_partition(req.broker_id, req.broker_epoch, change)
                        .await
                    {
                        Ok(partition) => Ok(partition),
                        Err(e) => match request_wide(&e) {
                            Some(code) => return request_error(code),
                            None => Err(e.error_code()),
                        },
                    }
                }
            };
            let outcome = outcome.and_then(|p| {
                if p.leader == req.broker_id {
                    Ok(p)
                } else {
                    Err(ErrorCode::NewLeaderElected)
                }
            });
            partitions.push(partition_answer(index, outcome));
        }
        topics.push(TopicData {
            topic_id: topic.topic_id,
            partitions,
            ..Default::default()
        });
    }
    AlterPartitionResponse {
        topics,
        ..Default::default()
    }
}

pub(super) async fn allocate_producer_ids(
    ctx: &ListenerContext,
    req: AllocateProducerIdsRequest,
) -> AllocateProducerIdsResponse {
    match ctx
        .controller
        .allocate_producer_ids(req.broker_id, req.broker_epoch)
        .await
    {
        Ok(first) => AllocateProducerIdsResponse {
            producer_id_start: first,
            producer_id_len: i32::try_from(PRODUCER_ID_BLOCK_SIZE).unwrap_or(i32::MAX),
            ..Default::default()
        },
        Err(e) => AllocateProducerIdsResponse {
            error_code: e.error_code().code(),
            producer_id_start: -1,
            producer_id_len: 0,
            ..Default::default()
        },
    }
}

/// The proposed ISR as (broker id, broker epoch); -1 skips the epoch check
/// (v2 sends no epochs).
fn proposed_isr(p: &RequestPartition, version: i16) -> Vec<(i32, i64)> {
    if version >= 3 {
        p.new_isr_with_epochs
            .iter()
            .map(|b| (b.broker_id, b.broker_epoch))
            .collect()
    } else {
        p.new_isr.iter().map(|id| (*id, -1)).collect()
    }
}

/// INVALID_REQUEST for a leader recovery state other than RECOVERED.
fn recovery_error(p: &RequestPartition) -> Option<ErrorCode> {
    (p.leader_recovery_state != RECOVERED).then_some(ErrorCode::InvalidRequest)
}

/// The top-level code of an error that stands for the whole request, or
/// `None` for one of this partition alone.
fn request_wide(e: &ControllerError) -> Option<ErrorCode> {
    match e {
        ControllerError::Rejected(r) if r.code == ErrorCode::StaleBrokerEpoch => Some(r.code),
        // A partition's epochs newer than this controller's image is a
        // NOT_CONTROLLER of that partition; this node not leading is the
        // request's.
        ControllerError::Rejected(_) => None,
        other => Some(other.error_code()),
    }
}

fn request_error(code: ErrorCode) -> AlterPartitionResponse {
    AlterPartitionResponse {
        error_code: code.code(),
        ..Default::default()
    }
}

fn partition_answer(index: i32, outcome: Result<Partition, ErrorCode>) -> PartitionData {
    match outcome {
        Ok(p) => PartitionData {
            partition_index: index,
            leader_id: p.leader,
            leader_epoch: p.leader_epoch,
            isr: p.isr,
            leader_recovery_state: RECOVERED,
            partition_epoch: p.partition_epoch,
            ..Default::default()
        },
        Err(code) => PartitionData {
            partition_index: index,
            error_code: code.code(),
            ..Default::default()
        },
    }
}
