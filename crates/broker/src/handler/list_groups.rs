//! ListGroups: every classic group this coordinator serves, filtered by
//! state (v4+) and type (v5+).

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::list_groups_response::ListedGroup;
use weir_protocol::messages::{ListGroupsRequest, ListGroupsResponse, ResponseBody};

use super::{Reply, RequestContext};

pub fn handle(ctx: &RequestContext, req: ListGroupsRequest) -> Reply {
    let resp = match ctx.broker.groups() {
        None => ListGroupsResponse {
            error_code: ErrorCode::CoordinatorNotAvailable.code(),
            ..Default::default()
        },
        Some(groups) => ListGroupsResponse {
            groups: groups
                .lock()
                .list_groups(&req.states_filter, &req.types_filter)
                .into_iter()
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
