//! LeaveGroup: v0-2 carry one member id, v3+ a batch of members.

use weir_acl::{Operation, ResourceType as AclResource};
use weir_group::{LeaveRequest, LeavingMember};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::leave_group_response::MemberResponse;
use weir_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse, ResponseBody};

use super::{Reply, RequestContext};

pub async fn handle(ctx: &RequestContext, req: LeaveGroupRequest) -> Reply {
    let v = ctx.api_version;
    if !ctx.authorize(Operation::Read, AclResource::Group, &req.group_id) {
        return body(LeaveGroupResponse {
            error_code: ErrorCode::GroupAuthorizationFailed.code(),
            ..Default::default()
        });
    }
    let Some(groups) = ctx.broker.groups() else {
        return body(LeaveGroupResponse {
            error_code: ErrorCode::CoordinatorNotAvailable.code(),
            ..Default::default()
        });
    };
    if groups.ensure_topic(&ctx.broker).await.is_err() {
        return body(LeaveGroupResponse {
            error_code: ErrorCode::CoordinatorNotAvailable.code(),
            ..Default::default()
        });
    }
    let members = if v >= 3 {
        req.members
            .into_iter()
            .map(|m| LeavingMember {
                member_id: m.member_id,
                group_instance_id: m.group_instance_id,
            })
            .collect()
    } else {
        vec![LeavingMember {
            member_id: req.member_id,
            group_instance_id: None,
        }]
    };
    let leave = LeaveRequest {
        group_id: req.group_id,
        members,
    };
    let now = ctx.broker.now_ms();
    // The only record a leave writes is the group becoming Empty; the
    // members are gone either way, so (as Kafka's classic coordinator) a
    // failed write does not fail the leave.
    let (r, _) = groups.write(&ctx.broker, &leave.group_id, |coord| {
        coord.leave_group(&leave, now)
    });
    let resp = if v >= 3 {
        LeaveGroupResponse {
            error_code: r.error.code(),
            members: r
                .members
                .into_iter()
                .map(|m| MemberResponse {
                    member_id: m.member_id,
                    group_instance_id: m.group_instance_id,
                    error_code: m.error.code(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    } else {
        let member_error = r.members.first().map_or(r.error, |m| m.error);
        LeaveGroupResponse {
            error_code: if r.error.is_ok() {
                member_error.code()
            } else {
                r.error.code()
            },
            ..Default::default()
        }
    };
    body(resp)
}

fn body(r: LeaveGroupResponse) -> Reply {
    Reply::Body(ResponseBody::LeaveGroup(r))
}
