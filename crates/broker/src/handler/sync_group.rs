//! SyncGroup: followers are parked until the leader sends the assignment.

use weir_acl::{Operation, ResourceType as AclResource};
use weir_group::{Assignment, Response, SyncRequest};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::{ResponseBody, SyncGroupRequest, SyncGroupResponse};

use super::{Reply, RequestContext};

fn error(code: ErrorCode) -> Reply {
    Reply::Body(ResponseBody::SyncGroup(SyncGroupResponse {
        error_code: code.code(),
        ..Default::default()
    }))
}

pub async fn handle(ctx: &RequestContext, req: SyncGroupRequest) -> Reply {
    let v = ctx.api_version;
    if !ctx.authorize(Operation::Read, AclResource::Group, &req.group_id) {
        return error(ErrorCode::GroupAuthorizationFailed);
    }
    let Some(groups) = ctx.broker.groups() else {
        return error(ErrorCode::CoordinatorNotAvailable);
    };
    if groups.ensure_topic(&ctx.broker).await.is_err() {
        return error(ErrorCode::CoordinatorNotAvailable);
    }
    let group_id = req.group_id;
    let sync = SyncRequest {
        group_id: group_id.clone(),
        generation_id: req.generation_id,
        member_id: req.member_id,
        group_instance_id: req.group_instance_id,
        protocol_type: if v >= 5 { req.protocol_type } else { None },
        protocol_name: if v >= 5 { req.protocol_name } else { None },
        assignments: req
            .assignments
            .into_iter()
            .map(|a| Assignment {
                member_id: a.member_id,
                assignment: a.assignment,
            })
            .collect(),
    };
    let parked = groups.park(&group_id);
    let token = parked.token;
    let now = ctx.broker.now_ms();
    groups.write(&ctx.broker, &group_id, |coord| {
        ((), coord.sync_group(sync, token, now))
    });
    let Some(Response::Sync(r)) = groups.wait(parked, ctx.shutdown.clone()).await else {
        return error(ErrorCode::CoordinatorNotAvailable);
    };
    Reply::Body(ResponseBody::SyncGroup(SyncGroupResponse {
        error_code: r.error.code(),
        protocol_type: r.protocol_type,
        protocol_name: r.protocol_name,
        assignment: r.assignment,
        ..Default::default()
    }))
}
