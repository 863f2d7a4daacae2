//! ConsumerGroupHeartbeat (KIP-848, v0-1): join, heartbeat and leave a
//! consumer-protocol group. Synchronous: the coordinator answers at once;
//! its records are appended before the answer, and a failed append is
//! answered with that append's error (the group is then as before).

use weir_acl::{Operation, ResourceType as AclResource};
use weir_group::{ConsumerGroupTimeouts, ConsumerHeartbeatRequest, Partitions, TopicsImage};
use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use weir_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, ResponseBody,
};

use super::{Reply, RequestContext};
use crate::broker::Broker;

fn error(code: ErrorCode, message: Option<String>) -> Reply {
    body(ConsumerGroupHeartbeatResponse {
        error_code: code.code(),
        error_message: message,
        member_epoch: -1,
        ..Default::default()
    })
}

fn body(r: ConsumerGroupHeartbeatResponse) -> Reply {
    Reply::Body(ResponseBody::ConsumerGroupHeartbeat(r))
}

/// The broker's topics as the group coordinator sees them.
pub fn topics_image(b: &Broker) -> TopicsImage {
    let mut image = TopicsImage::new();
    for t in b.cluster().topics() {
        image.insert(
            &t.name,
            Uuid(t.id),
            i32::try_from(t.partitions.len()).unwrap_or(i32::MAX),
            crate::groups::is_internal_topic(&t.name),
        );
    }
    image
}

/// The group configs `consumer.session.timeout.ms` and
/// `consumer.heartbeat.interval.ms` of `group` (checked against the
/// broker's `group.consumer.{min,max}.*` bounds when they were set).
fn group_timeouts(b: &Broker, group: &str) -> ConsumerGroupTimeouts {
    let configs = b.group_configs(group);
    let int = |k: &str| configs.get(k).and_then(|v| v.trim().parse::<i32>().ok());
    ConsumerGroupTimeouts {
        session_timeout_ms: int("consumer.session.timeout.ms"),
        heartbeat_interval_ms: int("consumer.heartbeat.interval.ms"),
    }
}

pub async fn handle(ctx: &RequestContext, req: ConsumerGroupHeartbeatRequest) -> Reply {
    if !ctx.authorize(Operation::Read, AclResource::Group, &req.group_id) {
        return error(ErrorCode::GroupAuthorizationFailed, None);
    }
    // Subscribing to a topic needs DESCRIBE on it (Kafka 4).
    if let Some(names) = &req.subscribed_topic_names
        && ctx.broker.acls.enabled()
        && names
            .iter()
            .any(|t| !ctx.authorize(Operation::Describe, AclResource::Topic, t))
    {
        return error(ErrorCode::TopicAuthorizationFailed, None);
    }
    let Some(groups) = ctx.broker.groups() else {
        return error(ErrorCode::CoordinatorNotAvailable, None);
    };
    if groups.ensure_topic(&ctx.broker).await.is_err() {
        return error(ErrorCode::CoordinatorNotAvailable, None);
    }
    let owned = req.topic_partitions.map(|tps| {
        let mut p = Partitions::new();
        for tp in tps {
            p.entry(tp.topic_id).or_default().extend(tp.partitions);
        }
        p
    });
    let beat = ConsumerHeartbeatRequest {
        group_id: req.group_id,
        member_id: req.member_id,
        member_epoch: req.member_epoch,
        instance_id: req.instance_id,
        rack_id: req.rack_id,
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed_topic_names: req.subscribed_topic_names,
        subscribed_topic_regex: req.subscribed_topic_regex,
        server_assignor: req.server_assignor,
        owned,
        client_id: ctx.client_id.clone(),
        client_host: format!("/{}", ctx.peer.ip()),
        api_version: ctx.api_version,
    };
    let image = topics_image(&ctx.broker);
    let timeouts = group_timeouts(&ctx.broker, &beat.group_id);
    let now = ctx.broker.now_ms();
    // A KIP-848 heartbeat may write (epochs, assignments): it is a writing
    // call, ordered after the partition's earlier writes, as in Kafka. The
    // group's own timeouts, as they are now, apply to it.
    let (r, failures) = groups.write(&ctx.broker, &beat.group_id, |coord| {
        coord.set_consumer_group_timeouts(&beat.group_id, timeouts);
        coord.consumer_group_heartbeat(&beat, &image, now)
    });
    if let Some(code) = failures.first() {
        return error(code, None);
    }
    if let Some(ns) = r.assignment_nanos {
        ctx.broker
            .metrics
            .consumer_group_assignment
            .observe(std::time::Duration::from_nanos(ns));
    }
    body(ConsumerGroupHeartbeatResponse {
        error_code: r.error.code(),
        error_message: r.error_message,
        member_id: r.member_id,
        member_epoch: r.member_epoch,
        heartbeat_interval_ms: r.heartbeat_interval_ms,
        assignment: r.assignment.map(|a| Assignment {
            topic_partitions: a
                .into_iter()
                .map(|(t, ps)| TopicPartitions {
                    topic_id: t,
                    partitions: ps.into_iter().collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    })
}
