//! Metadata: brokers, cluster id, controller, topics with ids and
//! partitions; auto-creates requested topics when allowed. Authorized
//! operations are filled in only when the request asks for them (topics
//! v8+, the cluster v8–v10), as Kafka does.

use std::collections::BTreeMap;

use weir_protocol::codec::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use weir_protocol::messages::{MetadataRequest, MetadataResponse, ResponseBody};

use super::{Reply, RequestContext};
use crate::authorized_operations::{NOT_REQUESTED, ResourceType, authorized_operations};
use crate::broker::{CreateTopicError, validate_topic_name};
use crate::topics::TopicMeta;

pub fn topic_response(node_id: i32, t: &TopicMeta) -> MetadataResponseTopic {
    MetadataResponseTopic {
        error_code: ErrorCode::None.code(),
        name: Some(t.name.clone()),
        topic_id: Uuid(t.id_bytes()),
        is_internal: t.name == crate::groups::OFFSETS_TOPIC,
        partitions: (0..t.partitions)
            .map(|p| MetadataResponsePartition {
                error_code: ErrorCode::None.code(),
                partition_index: p,
                leader_id: node_id,
                leader_epoch: 0,
                replica_nodes: vec![node_id],
                isr_nodes: vec![node_id],
                offline_replicas: vec![],
                ..Default::default()
            })
            .collect(),
        topic_authorized_operations: NOT_REQUESTED,
        ..Default::default()
    }
}

fn error_topic(name: Option<String>, id: Uuid, code: ErrorCode) -> MetadataResponseTopic {
    MetadataResponseTopic {
        error_code: code.code(),
        name,
        topic_id: id,
        topic_authorized_operations: NOT_REQUESTED,
        ..Default::default()
    }
}

pub async fn handle(ctx: &RequestContext, req: MetadataRequest) -> Reply {
    let b = &ctx.broker;
    let node_id = b.config.node_id;
    let (host, port) = b.advertised();
    // v0: an empty list means all topics; v1+: null means all topics
    let requested = match req.topics {
        None => None,
        Some(t) if t.is_empty() && ctx.api_version == 0 => None,
        Some(t) => Some(t),
    };
    let allow_auto = ctx.api_version < 4 || req.allow_auto_topic_creation;
    let mut topics: Vec<MetadataResponseTopic> = match requested {
        None => b
            .all_topics()
            .iter()
            .map(|t| topic_response(node_id, t))
            .collect(),
        Some(list) => {
            let mut out = Vec::with_capacity(list.len());
            for rt in list {
                let by_id = rt.topic_id != Uuid::ZERO;
                match (&rt.name, by_id) {
                    (Some(name), _) if !name.is_empty() => {
                        if let Some(t) = b.topic(name) {
                            out.push(topic_response(node_id, &t));
                            continue;
                        }
                        if validate_topic_name(name).is_err() {
                            out.push(error_topic(
                                Some(name.clone()),
                                Uuid::ZERO,
                                ErrorCode::InvalidTopicException,
                            ));
                            continue;
                        }
                        let internal = crate::groups::is_internal_topic(name);
                        if allow_auto && b.config.auto_create_topics_enable && internal {
                            // created as the group coordinator needs it
                            // (partition count, compaction), as Kafka does
                            if let Some(g) = b.groups()
                                && g.ensure_topic(b).await.is_ok()
                                && let Some(t) = b.topic(name)
                            {
                                out.push(topic_response(node_id, &t));
                            } else {
                                out.push(error_topic(
                                    Some(name.clone()),
                                    Uuid::ZERO,
                                    ErrorCode::CoordinatorNotAvailable,
                                ));
                            }
                        } else if allow_auto && b.config.auto_create_topics_enable {
                            let _guard = b.admin.lock().await;
                            let created = match b.topic(name) {
                                Some(t) => Ok(t),
                                None => super::blocking(|| {
                                    b.create_topic(name, -1, -1, BTreeMap::new(), false)
                                }),
                            };
                            match created {
                                Ok(t) => out.push(topic_response(node_id, &t)),
                                Err(CreateTopicError::InvalidName(_)) => out.push(error_topic(
                                    Some(name.clone()),
                                    Uuid::ZERO,
                                    ErrorCode::InvalidTopicException,
                                )),
                                Err(e) => {
                                    tracing::warn!(topic = %name, "auto-create failed: {e}");
                                    out.push(error_topic(
                                        Some(name.clone()),
                                        Uuid::ZERO,
                                        ErrorCode::UnknownServerError,
                                    ))
                                }
                            }
                        } else {
                            out.push(error_topic(
                                Some(name.clone()),
                                Uuid::ZERO,
                                ErrorCode::UnknownTopicOrPartition,
                            ));
                        }
                    }
                    (_, true) => match b.topic_by_id(&rt.topic_id.0) {
                        Some(t) => out.push(topic_response(node_id, &t)),
                        None => out.push(error_topic(None, rt.topic_id, ErrorCode::UnknownTopicId)),
                    },
                    _ => out.push(error_topic(
                        rt.name.clone(),
                        Uuid::ZERO,
                        ErrorCode::InvalidRequest,
                    )),
                }
            }
            out
        }
    };
    if req.include_topic_authorized_operations {
        let ops = authorized_operations(ResourceType::Topic, true);
        for t in &mut topics {
            t.topic_authorized_operations = ops;
        }
    }
    Reply::Body(ResponseBody::Metadata(MetadataResponse {
        throttle_time_ms: 0,
        brokers: vec![MetadataResponseBroker {
            node_id,
            host,
            port: port as i32,
            rack: None,
            ..Default::default()
        }],
        cluster_id: Some(b.meta.cluster_id.clone()),
        controller_id: node_id,
        topics,
        cluster_authorized_operations: authorized_operations(
            ResourceType::Cluster,
            req.include_cluster_authorized_operations,
        ),
        ..Default::default()
    }))
}
