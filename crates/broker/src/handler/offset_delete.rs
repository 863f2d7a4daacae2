//! OffsetDelete: removes committed offsets of partitions the group is not
//! subscribed to. Topics unknown to the broker are rejected here.

use weir_acl::{Operation, ResourceType as AclResource};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use weir_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse, ResponseBody};

use super::{Reply, RequestContext};

fn reply(error: ErrorCode, topics: Vec<(String, Vec<(i32, ErrorCode)>)>) -> Reply {
    Reply::Body(ResponseBody::OffsetDelete(OffsetDeleteResponse {
        error_code: error.code(),
        topics: topics
            .into_iter()
            .map(|(name, ps)| OffsetDeleteResponseTopic {
                name,
                partitions: ps
                    .into_iter()
                    .map(|(p, e)| OffsetDeleteResponsePartition {
                        partition_index: p,
                        error_code: e.code(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }))
}

pub async fn handle(ctx: &RequestContext, req: OffsetDeleteRequest) -> Reply {
    // Kafka: DELETE on the group, then READ on each topic
    if !ctx.authorize(Operation::Delete, AclResource::Group, &req.group_id) {
        return reply(ErrorCode::GroupAuthorizationFailed, Vec::new());
    }
    let readable = |t: &str| ctx.authorize(Operation::Read, AclResource::Topic, t);
    let Some(groups) = ctx.broker.groups() else {
        return reply(ErrorCode::CoordinatorNotAvailable, Vec::new());
    };
    if groups.ensure_topic(&ctx.broker).await.is_err() {
        return reply(ErrorCode::CoordinatorNotAvailable, Vec::new());
    }
    let mut known = Vec::new();
    for t in req.topics.iter().filter(|t| readable(&t.name)) {
        let exists = ctx.broker.topic(&t.name);
        for p in &t.partitions {
            let ok = exists
                .as_ref()
                .is_some_and(|m| (0..m.partitions).contains(&p.partition_index));
            if ok {
                known.push((t.name.clone(), p.partition_index));
            }
        }
    }
    let now = ctx.broker.now_ms();
    let ((e, results), failures) = groups.write(&ctx.broker, &req.group_id, |coord| {
        let (e, results, out) = coord.delete_offsets(&req.group_id, &known, now);
        ((e, results), out)
    });
    // Offsets whose tombstones were not written stay committed.
    let (group_error, results) = match failures.first() {
        None => (e, results),
        Some(failed) => (failed, Vec::new()),
    };
    if !group_error.is_ok() {
        return reply(group_error, Vec::new());
    }
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let refused = !readable(&t.name);
            let ps = t
                .partitions
                .iter()
                .map(|p| {
                    if refused {
                        return (p.partition_index, ErrorCode::TopicAuthorizationFailed);
                    }
                    let e = results
                        .iter()
                        .find(|r| r.topic == t.name && r.partition == p.partition_index)
                        .map_or(ErrorCode::UnknownTopicOrPartition, |r| r.error);
                    (p.partition_index, e)
                })
                .collect();
            (t.name, ps)
        })
        .collect();
    reply(ErrorCode::None, topics)
}
