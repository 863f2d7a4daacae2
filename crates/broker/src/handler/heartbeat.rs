//! Heartbeat: keeps a member's session alive and tells it about rebalances.

use weir_acl::{Operation, ResourceType as AclResource};
use weir_group::HeartbeatRequest as Beat;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::{HeartbeatRequest, HeartbeatResponse, ResponseBody};

use super::{Reply, RequestContext};

pub fn handle(ctx: &RequestContext, req: HeartbeatRequest) -> Reply {
    let error_code = match ctx.broker.groups() {
        _ if !ctx.authorize(Operation::Read, AclResource::Group, &req.group_id) => {
            ErrorCode::GroupAuthorizationFailed
        }
        None => ErrorCode::CoordinatorNotAvailable,
        Some(groups) => {
            let beat = Beat {
                group_id: req.group_id,
                generation_id: req.generation_id,
                member_id: req.member_id,
                group_instance_id: req.group_instance_id,
            };
            let now = ctx.broker.now_ms();
            // only the shard's state lock, never held across an append
            groups.lock(&beat.group_id).heartbeat(&beat, now)
        }
    };
    Reply::Body(ResponseBody::Heartbeat(HeartbeatResponse {
        error_code: error_code.code(),
        ..Default::default()
    }))
}
