//! TxnOffsetCommit: a transactional producer commits a consumer group's
//! offsets inside its transaction (`sendOffsetsToTransaction`). The
//! records go to the group's `__consumer_offsets` partition as a
//! transactional batch of the producer and stay pending until the
//! producer's COMMIT or ABORT marker lands on that partition
//! ([`crate::groups::Groups::complete_txn`]); the answer is sent once the
//! batch is appended and replicated, as for OffsetCommit.
//!
//! As Kafka: partitions of unknown topics are answered
//! UNKNOWN_TOPIC_OR_PARTITION and never reach the coordinator; an error of
//! the whole commit (NOT_COORDINATOR, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
//! FENCED_INSTANCE_ID, …) is given to every other partition and writes
//! nothing; a producer epoch older than the one the partition knows is
//! INVALID_PRODUCER_EPOCH; v0-1 clients get COORDINATOR_NOT_AVAILABLE
//! instead of COORDINATOR_LOAD_IN_PROGRESS (KAFKA-7296).

use weir_acl::{Operation, ResourceType as AclResource};
use weir_group::{CommitPartition, TxnOffsetCommitRequest as Commit};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use weir_protocol::messages::{ResponseBody, TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::offset_commit::{Shape, any_known, replicated, shape, whole};
use super::{Reply, RequestContext};

/// The first version whose clients understand COORDINATOR_LOAD_IN_PROGRESS.
const LOAD_IN_PROGRESS_VERSION: i16 = 2;

pub async fn handle(ctx: &RequestContext, req: TxnOffsetCommitRequest) -> Reply {
    let v = ctx.api_version;
    let shape = shape(
        ctx,
        req.topics.iter().map(|t| {
            let indexes = t.partitions.iter().map(|p| p.partition_index).collect();
            (t.name.as_str(), indexes)
        }),
    );
    let respond_all = |e: ErrorCode| respond(v, &shape, |_, _| e);
    // Kafka: WRITE on the transactional id, then READ on the group, each
    // refusal answered for every partition
    if !ctx.authorize(
        Operation::Write,
        AclResource::TransactionalId,
        &req.transactional_id,
    ) {
        return respond(v, &whole(&shape), |_, _| {
            ErrorCode::TransactionalIdAuthorizationFailed
        });
    }
    if !ctx.authorize(Operation::Read, AclResource::Group, &req.group_id) {
        return respond(v, &whole(&shape), |_, _| {
            ErrorCode::GroupAuthorizationFailed
        });
    }
    if !any_known(&shape) {
        return respond_all(ErrorCode::None);
    }
    if req.group_id.is_empty() {
        return respond_all(ErrorCode::InvalidGroupId);
    }
    let Some(groups) = ctx.broker.groups() else {
        return respond_all(ErrorCode::CoordinatorNotAvailable);
    };
    if groups.ensure_topic(&ctx.broker).await.is_err() {
        return respond_all(ErrorCode::CoordinatorNotAvailable);
    }
    let commit = Commit {
        group_id: req.group_id,
        producer_id: req.producer_id,
        producer_epoch: req.producer_epoch,
        generation_id: req.generation_id,
        member_id: req.member_id,
        group_instance_id: req.group_instance_id,
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
    let (outcome, appended) = groups.write(&ctx.broker, &commit.group_id, |coord| {
        match coord.commit_txn_offsets(&commit, now) {
            Err(e) => (Err(e), Vec::new()),
            Ok((results, out)) => (Ok(results), out),
        }
    });
    let results = match outcome {
        Ok(r) => r,
        Err(e) => {
            // Unknown topics keep their own error, as in Kafka's merge of
            // the coordinator's answer with the request layer's.
            return respond(v, &shape, |_, _| e);
        }
    };
    let appended = match appended.first() {
        None => replicated(ctx, &commit.group_id, &appended.appended).await,
        failed => failed,
    };
    respond(v, &shape, |topic, partition| {
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

/// One entry per requested partition: the answer of those answered
/// without the coordinator, `error` for the others.
fn respond(version: i16, shape: &Shape, error: impl Fn(&str, i32) -> ErrorCode) -> Reply {
    let for_version = |e: ErrorCode| match e {
        ErrorCode::CoordinatorLoadInProgress if version < LOAD_IN_PROGRESS_VERSION => {
            ErrorCode::CoordinatorNotAvailable
        }
        e => e,
    };
    Reply::Body(ResponseBody::TxnOffsetCommit(TxnOffsetCommitResponse {
        topics: shape
            .iter()
            .map(|(name, parts)| TxnOffsetCommitResponseTopic {
                name: name.clone(),
                partitions: parts
                    .iter()
                    .map(|&(p, answer)| TxnOffsetCommitResponsePartition {
                        partition_index: p,
                        error_code: answer.unwrap_or_else(|| for_version(error(name, p))).code(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }))
}
