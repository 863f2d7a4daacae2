//! ConsumerGroupDescribe (KIP-848): a consumer-protocol group's epochs,
//! members, and their current and target assignments (with topic names).
//! Unknown and classic groups are GROUP_ID_NOT_FOUND.

use weir_acl::{Operation, ResourceType as AclResource};
use weir_group::{Partitions, TopicsImage};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use weir_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ResponseBody,
};

use super::consumer_group_heartbeat::topics_image;
use super::{Reply, RequestContext};
use crate::authorized_operations::{ResourceType, authorized_operations};

fn assignment(p: Partitions, image: &TopicsImage) -> Assignment {
    Assignment {
        topic_partitions: p
            .into_iter()
            .map(|(t, ps)| TopicPartitions {
                topic_id: t,
                topic_name: image.name(&t).unwrap_or_default().to_string(),
                partitions: ps.into_iter().collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

pub fn handle(ctx: &RequestContext, req: ConsumerGroupDescribeRequest) -> Reply {
    let with_ops = req.include_authorized_operations;
    let (asked, refused): (Vec<String>, Vec<String>) = req
        .group_ids
        .into_iter()
        .partition(|g| ctx.authorize(Operation::Describe, AclResource::Group, g));
    let mut groups: Vec<DescribedGroup> = refused
        .into_iter()
        .map(|group_id| DescribedGroup {
            error_code: ErrorCode::GroupAuthorizationFailed.code(),
            group_id,
            ..Default::default()
        })
        .collect();
    let Some(coordinator) = ctx.broker.groups() else {
        groups.extend(asked.into_iter().map(|group_id| DescribedGroup {
            error_code: ErrorCode::CoordinatorNotAvailable.code(),
            group_id,
            ..Default::default()
        }));
        return body(groups);
    };
    let image = topics_image(&ctx.broker);
    let described = coordinator.describe_consumer_groups(&asked);
    groups.extend(described.into_iter().map(|d| {
        let ops = authorized_operations(
            ctx,
            ResourceType::Group,
            &d.group_id,
            with_ops && d.error.is_ok(),
        );
        DescribedGroup {
            error_code: d.error.code(),
            error_message: d.error_message,
            group_id: d.group_id,
            group_state: d.state.to_string(),
            group_epoch: d.group_epoch,
            assignment_epoch: d.assignment_epoch,
            assignor_name: d.assignor_name,
            members: d
                .members
                .into_iter()
                .map(|m| Member {
                    member_id: m.member_id,
                    instance_id: m.instance_id,
                    rack_id: m.rack_id,
                    member_epoch: m.member_epoch,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    subscribed_topic_names: m.subscribed_topic_names,
                    subscribed_topic_regex: m.subscribed_topic_regex,
                    assignment: assignment(m.assignment, &image),
                    target_assignment: assignment(m.target_assignment, &image),
                    ..Default::default()
                })
                .collect(),
            authorized_operations: ops,
            ..Default::default()
        }
    }));
    body(groups)
}

fn body(groups: Vec<DescribedGroup>) -> Reply {
    Reply::Body(ResponseBody::ConsumerGroupDescribe(
        ConsumerGroupDescribeResponse {
            groups,
            ..Default::default()
        },
    ))
}
