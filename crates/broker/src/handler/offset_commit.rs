//! OffsetCommit: acknowledged only after the records are appended to
//! `__consumer_offsets` (and flushed as that log's flush policy says). A
//! failed append is answered with Kafka's mapping of the append error and
//! the commit never becomes visible to OffsetFetch.
//!
//! A partition of a topic that does not exist is answered
//! UNKNOWN_TOPIC_OR_PARTITION and never reaches the coordinator, in every
//! version: Kafka checks existence in its request layer (`KafkaApis`)
//! before the group coordinator sees the commit. The admin client's
//! AlterConsumerGroupOffsets is this request, so it is refused the same way.

use std::collections::BTreeMap;

use weir_acl::{Operation, ResourceType as AclResource};
use weir_group::{CommitPartition, OffsetCommitRequest as Commit};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use weir_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, ResponseBody};

use super::{Reply, RequestContext};
use crate::groups::AppendedAt;
use crate::replica_manager::AppendRole;

/// The requested partitions by topic, each with the answer it gets
/// without the coordinator (None: it goes to the coordinator).
pub(super) type Shape = Vec<(String, Vec<(i32, Option<ErrorCode>)>)>;

/// Looks up which requested partitions the coordinator sees: those of
/// topics the client may READ (else TOPIC_AUTHORIZATION_FAILED, checked
/// first as in Kafka) that exist (else UNKNOWN_TOPIC_OR_PARTITION). Topic
/// existence is broker knowledge, looked up once.
pub(super) fn shape<'a>(
    ctx: &RequestContext,
    topics: impl Iterator<Item = (&'a str, Vec<i32>)>,
) -> Shape {
    topics
        .map(|(name, indexes)| {
            let readable = ctx.authorize(Operation::Read, AclResource::Topic, name);
            let partitions = ctx.broker.topic(name).map_or(0, |m| m.partitions);
            let parts = indexes
                .into_iter()
                .map(|p| {
                    let answer = if !readable {
                        Some(ErrorCode::TopicAuthorizationFailed)
                    } else if !(0..partitions).contains(&p) {
                        Some(ErrorCode::UnknownTopicOrPartition)
                    } else {
                        None
                    };
                    (p, answer)
                })
                .collect();
            (name.to_string(), parts)
        })
        .collect()
}

/// The same partitions, every one answered by the coordinator (for an
/// error of the whole request, such as GROUP_AUTHORIZATION_FAILED).
pub(super) fn whole(shape: &Shape) -> Shape {
    shape
        .iter()
        .map(|(n, parts)| (n.clone(), parts.iter().map(|&(p, _)| (p, None)).collect()))
        .collect()
}

/// Whether any requested partition goes to the coordinator.
pub(super) fn any_known(shape: &Shape) -> bool {
    shape
        .iter()
        .any(|(_, parts)| parts.iter().any(|(_, answer)| answer.is_none()))
}

pub async fn handle(ctx: &RequestContext, req: OffsetCommitRequest) -> Reply {
    let v = ctx.api_version;
    let shape = shape(
        ctx,
        req.topics.iter().map(|t| {
            let indexes = t.partitions.iter().map(|p| p.partition_index).collect();
            (t.name.as_str(), indexes)
        }),
    );
    let all = |e: ErrorCode| respond(&shape, |_, _| e);
    // Kafka: READ on the group before anything else, answered for every
    // partition
    if !ctx.authorize(Operation::Read, AclResource::Group, &req.group_id) {
        return respond(&whole(&shape), |_, _| ErrorCode::GroupAuthorizationFailed);
    }
    if !any_known(&shape) {
        return all(ErrorCode::None);
    }
    let Some(groups) = ctx.broker.groups() else {
        return all(ErrorCode::CoordinatorNotAvailable);
    };
    if groups.ensure_topic(&ctx.broker).await.is_err() {
        return all(ErrorCode::CoordinatorNotAvailable);
    }
    let commit = Commit {
        group_id: req.group_id.clone(),
        generation_id: req.generation_id_or_member_epoch,
        member_id: req.member_id,
        group_instance_id: req.group_instance_id,
        retention_time_ms: (v <= 4).then_some(req.retention_time_ms),
        api_version: v,
        partitions: req
            .topics
            .into_iter()
            .zip(&shape)
            .flat_map(|(t, (name, known))| {
                t.partitions
                    .into_iter()
                    .zip(known)
                    .filter(|(_, (_, answer))| answer.is_none())
                    .map(|(p, _)| CommitPartition {
                        topic: name.clone(),
                        partition: p.partition_index,
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: p.committed_metadata,
                    })
            })
            .collect(),
    };
    let now = ctx.broker.now_ms();
    let (results, appended) = groups.write(&ctx.broker, &commit.group_id, |coord| {
        // v9+ (KIP-848 era): a commit to a group that does not exist is
        // GROUP_ID_NOT_FOUND rather than creating a standalone group
        if v >= 9 && coord.group_state(&commit.group_id).is_none() && commit.generation_id >= 0 {
            return (None, Vec::new());
        }
        let (results, out) = coord.commit_offsets(&commit, now);
        (Some(results), out)
    });
    let Some(results) = results else {
        return all(ErrorCode::GroupIdNotFound);
    };
    // With followers, the commit is acknowledged once every in-sync replica
    // of its `__consumer_offsets` partition has it (Kafka's acks=all for
    // offset commits), so it survives the loss of this coordinator.
    let appended = match appended.first() {
        None => replicated(ctx, &commit.group_id, &appended.appended).await,
        failed => failed,
    };
    // A failed append leaves the commit invisible (the coordinator applies
    // it only once durable); the accepted partitions get the append's error.
    respond(&shape, |topic, partition| {
        let e = results
            .iter()
            .find(|r| r.topic == topic && r.partition == partition)
            .map_or(ErrorCode::UnknownServerError, |r| r.error);
        match appended {
            Some(failed) if e.is_ok() => failed,
            _ => e,
        }
    })
}

/// Waits until the records appended for `group` (`appended`, by
/// `__consumer_offsets` partition) are replicated to the ISR of its
/// partition, in the leader epoch they were appended in (bounded by
/// `offsets.commit.timeout.ms`); the error when they are not. Nothing to
/// wait for without followers. Without a record of an append, it waits for
/// the partition's current end in the current epoch.
pub(super) async fn replicated(
    ctx: &RequestContext,
    group: &str,
    appended: &BTreeMap<i32, AppendedAt>,
) -> Option<ErrorCode> {
    let b = &ctx.broker;
    let groups = b.groups()?;
    let partition = groups.partition_for(group);
    let tp = weir_storage::TopicPartition::new(crate::groups::OFFSETS_TOPIC, partition);
    let (epoch, end) = match appended.get(&partition) {
        Some(at) => (at.leader_epoch?, at.end_offset),
        None => {
            let epoch = match b.replicas.append_role(&tp) {
                AppendRole::Leader {
                    epoch,
                    replicated: true,
                } => epoch,
                AppendRole::NotLeader => return Some(ErrorCode::NotCoordinator),
                _ => return None,
            };
            (epoch, b.replicas.logs().get(&tp)?.log_end_offset())
        }
    };
    let timeout_ms = b
        .effective_config()
        .integer("offsets.commit.timeout.ms")
        .unwrap_or(5000)
        .max(1);
    let deadline =
        tokio::time::Instant::now() + std::time::Duration::from_millis(timeout_ms as u64);
    match b
        .replicas
        .wait_for_replication_in(&tp, end, 1, Some(epoch), deadline)
        .await
    {
        ErrorCode::None => None,
        // Kafka's coordinator answers a commit that timed out waiting for
        // replicas with REQUEST_TIMED_OUT, which clients retry; one whose
        // partition moved gets NOT_COORDINATOR (the client looks up the
        // new coordinator and commits again).
        ErrorCode::NotLeaderOrFollower => Some(ErrorCode::NotCoordinator),
        code => Some(code),
    }
}

/// One response entry per requested partition: the answer of those
/// answered without the coordinator, `error` for the others.
fn respond(shape: &Shape, error: impl Fn(&str, i32) -> ErrorCode) -> Reply {
    Reply::Body(ResponseBody::OffsetCommit(OffsetCommitResponse {
        topics: shape
            .iter()
            .map(|(name, parts)| OffsetCommitResponseTopic {
                name: name.clone(),
                partitions: parts
                    .iter()
                    .map(|&(p, answer)| OffsetCommitResponsePartition {
                        partition_index: p,
                        error_code: answer.unwrap_or_else(|| error(name, p)).code(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }))
}
