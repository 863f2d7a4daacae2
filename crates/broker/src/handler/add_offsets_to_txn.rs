//! AddOffsetsToTxn: the group's `__consumer_offsets` partition (where its
//! TxnOffsetCommit will write) joins the producer's transaction, so the
//! transaction's marker reaches that partition too. The partition is the
//! group coordinator's placement of the group; the coordinator answers as
//! for AddPartitionsToTxn. v0-1 clients get INVALID_PRODUCER_EPOCH where
//! newer ones get PRODUCER_FENCED.

use std::collections::BTreeSet;

use weir_acl::{Operation, ResourceType as AclResource};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, ResponseBody};
use weir_txn::{Step, TopicPartition};

use super::{Reply, RequestContext};
use crate::groups::OFFSETS_TOPIC;

/// The first version whose clients know PRODUCER_FENCED.
const FENCED_SINCE: i16 = 2;

pub async fn handle(ctx: &RequestContext, req: AddOffsetsToTxnRequest) -> Reply {
    let code = add(ctx, &req).await;
    let code = crate::transactions::fenced_code(code, ctx.api_version, FENCED_SINCE);
    Reply::Body(ResponseBody::AddOffsetsToTxn(AddOffsetsToTxnResponse {
        error_code: code.code(),
        ..Default::default()
    }))
}

async fn add(ctx: &RequestContext, req: &AddOffsetsToTxnRequest) -> ErrorCode {
    let b = &ctx.broker;
    // Kafka: WRITE on the transactional id, then READ on the group
    if !ctx.authorize(
        Operation::Write,
        AclResource::TransactionalId,
        &req.transactional_id,
    ) {
        return ErrorCode::TransactionalIdAuthorizationFailed;
    }
    if !ctx.authorize(Operation::Read, AclResource::Group, &req.group_id) {
        return ErrorCode::GroupAuthorizationFailed;
    }
    let (Some(groups), Some(txns)) = (b.groups(), b.transactions()) else {
        return ErrorCode::CoordinatorNotAvailable;
    };
    let partition = groups.partition_for(&req.group_id);
    let partitions = BTreeSet::from([TopicPartition::new(OFFSETS_TOPIC, partition)]);
    let step = txns.lock().add_partitions(
        &req.transactional_id,
        req.producer_id,
        req.producer_epoch,
        &partitions,
        b.now_ms(),
    );
    match step {
        Ok(Step::Done(_)) => ErrorCode::None,
        Ok(Step::Write(w)) => {
            let done = txns.write(b, w).await;
            crate::transactions::answer_of(&done)
                .err()
                .unwrap_or(ErrorCode::None)
        }
        Ok(Step::NeedProducerId) => ErrorCode::UnknownServerError,
        Err(e) => e,
    }
}
