//! DescribeGroups: state, protocol and members (with metadata and
//! assignment while Stable). An unknown group is Dead with no members.
//! A group's authorized operations only when asked for (v3+).

use weir_acl::{Operation, ResourceType as AclResource};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use weir_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse, ResponseBody};

use super::{Reply, RequestContext};
use crate::authorized_operations::{NOT_REQUESTED, ResourceType, authorized_operations};

pub fn handle(ctx: &RequestContext, req: DescribeGroupsRequest) -> Reply {
    let v = ctx.api_version;
    let with_ops = req.include_authorized_operations;
    // Kafka answers the groups the client may not DESCRIBE first, with
    // GROUP_AUTHORIZATION_FAILED, then the others.
    let (described, refused): (Vec<String>, Vec<String>) = req
        .groups
        .into_iter()
        .partition(|g| ctx.authorize(Operation::Describe, AclResource::Group, g));
    let mut out: Vec<DescribedGroup> = refused
        .into_iter()
        .map(|group_id| DescribedGroup {
            error_code: ErrorCode::GroupAuthorizationFailed.code(),
            group_id,
            authorized_operations: NOT_REQUESTED,
            ..Default::default()
        })
        .collect();
    let groups = match ctx.broker.groups() {
        Some(g) => g.describe_groups(&described),
        None => {
            out.extend(described.into_iter().map(|group_id| DescribedGroup {
                error_code: ErrorCode::CoordinatorNotAvailable.code(),
                group_id,
                authorized_operations: NOT_REQUESTED,
                ..Default::default()
            }));
            return Reply::Body(ResponseBody::DescribeGroups(DescribeGroupsResponse {
                groups: out,
                ..Default::default()
            }));
        }
    };
    out.extend(groups.into_iter().map(|g| {
        let error_code = if v >= 6 && g.error.is_ok() && !g.found {
            ErrorCode::GroupIdNotFound.code()
        } else {
            g.error.code()
        };
        // the operations of a group answered without error only
        let ops = authorized_operations(
            ctx,
            ResourceType::Group,
            &g.group_id,
            with_ops && error_code == ErrorCode::None.code(),
        );
        DescribedGroup {
            error_code,
            group_id: g.group_id,
            group_state: g.state.name().to_string(),
            protocol_type: g.protocol_type,
            protocol_data: g.protocol,
            members: g
                .members
                .into_iter()
                .map(|m| DescribedGroupMember {
                    member_id: m.member_id,
                    group_instance_id: m.group_instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    member_metadata: m.metadata,
                    member_assignment: m.assignment,
                    ..Default::default()
                })
                .collect(),
            authorized_operations: ops,
            ..Default::default()
        }
    }));
    Reply::Body(ResponseBody::DescribeGroups(DescribeGroupsResponse {
        groups: out,
        ..Default::default()
    }))
}
