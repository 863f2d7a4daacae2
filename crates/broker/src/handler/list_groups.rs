//! ListGroups: every classic group this coordinator serves, filtered by
//! state (v4+) and type (v5+).

use weir_acl::{Operation, ResourceType as AclResource};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::list_groups_response::ListedGroup;
use weir_protocol::messages::{ListGroupsRequest, ListGroupsResponse, ResponseBody};

use super::{Reply, RequestContext};

/// With DESCRIBE on the cluster every group is listed; otherwise only the
/// groups the client may DESCRIBE (Kafka's rule).
pub fn handle(ctx: &RequestContext, req: ListGroupsRequest) -> Reply {
    let all = ctx.authorize_cluster(Operation::Describe);
    let resp = match ctx.broker.groups() {
        None => ListGroupsResponse {
            error_code: ErrorCode::CoordinatorNotAvailable.code(),
            ..Default::default()
        },
        Some(groups) => ListGroupsResponse {
            groups: groups
                .list_groups(&req.states_filter, &req.types_filter)
                .into_iter()
                .filter(|g| {
                    all || ctx.authorize(Operation::Describe, AclResource::Group, &g.group_id)
                })
                .map(|g| ListedGroup {
                    group_id: g.group_id,
                    protocol_type: g.protocol_type,
                    group_state: g.state.name().to_string(),
                    group_type: g.group_type.to_string(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        },
    };
    Reply::Body(ResponseBody::ListGroups(resp))
}
