//! JoinGroup: parked until the rebalance completes (the coordinator answers
//! through an `Output::Respond` with this request's token).

use weir_acl::{Operation, ResourceType as AclResource};
use weir_group::{JoinRequest, Protocol, Response};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::join_group_response::JoinGroupResponseMember;
use weir_protocol::messages::{JoinGroupRequest, JoinGroupResponse, ResponseBody};

use super::{Reply, RequestContext};

fn error(code: ErrorCode, member_id: String) -> JoinGroupResponse {
    JoinGroupResponse {
        error_code: code.code(),
        generation_id: -1,
        member_id,
        protocol_name: Some(String::new()),
        ..Default::default()
    }
}

pub async fn handle(ctx: &RequestContext, req: JoinGroupRequest) -> Reply {
    let v = ctx.api_version;
    if !ctx.authorize(Operation::Read, AclResource::Group, &req.group_id) {
        return body(error(ErrorCode::GroupAuthorizationFailed, String::new()));
    }
    let Some(groups) = ctx.broker.groups() else {
        return body(error(ErrorCode::CoordinatorNotAvailable, req.member_id));
    };
    if groups.ensure_topic(&ctx.broker).await.is_err() {
        return body(error(ErrorCode::CoordinatorNotAvailable, req.member_id));
    }
    let member_id = req.member_id.clone();
    let group_id = req.group_id.clone();
    let join = JoinRequest {
        group_id: req.group_id,
        session_timeout_ms: req.session_timeout_ms,
        // v0 has no rebalance timeout: the session timeout serves for both
        rebalance_timeout_ms: if v == 0 {
            req.session_timeout_ms
        } else {
            req.rebalance_timeout_ms
        },
        member_id: req.member_id,
        group_instance_id: req.group_instance_id,
        protocol_type: req.protocol_type,
        protocols: req
            .protocols
            .into_iter()
            .map(|p| Protocol {
                name: p.name,
                metadata: p.metadata,
            })
            .collect(),
        client_id: ctx.client_id.clone(),
        client_host: format!("/{}", ctx.peer.ip()),
        require_known_member_id: v >= 4,
        supports_skip_assignment: v >= 9,
    };
    let parked = groups.park(&group_id);
    let token = parked.token;
    let now = ctx.broker.now_ms();
    // A classic member of a consumer group (after an online upgrade) names
    // its topics; the coordinator resolves them in the broker's current view.
    let image = super::consumer_group_heartbeat::topics_image(&ctx.broker);
    groups.write(&ctx.broker, &group_id, |coord| {
        coord.set_topics(image);
        ((), coord.join_group(join, token, now))
    });
    let Some(Response::Join(r)) = groups.wait(parked, ctx.shutdown.clone()).await else {
        return body(error(ErrorCode::CoordinatorNotAvailable, member_id));
    };
    body(JoinGroupResponse {
        error_code: r.error.code(),
        generation_id: r.generation_id,
        // nullable from v7; older versions carry a plain string
        protocol_type: if v >= 7 {
            r.protocol_type
        } else {
            Some(r.protocol_type.unwrap_or_default())
        },
        protocol_name: if v >= 7 {
            r.protocol_name
        } else {
            Some(r.protocol_name.unwrap_or_default())
        },
        leader: r.leader,
        skip_assignment: r.skip_assignment,
        member_id: r.member_id,
        members: r
            .members
            .into_iter()
            .map(|m| JoinGroupResponseMember {
                member_id: m.member_id,
                group_instance_id: m.group_instance_id,
                metadata: m.metadata,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    })
}

fn body(r: JoinGroupResponse) -> Reply {
    Reply::Body(ResponseBody::JoinGroup(r))
}
