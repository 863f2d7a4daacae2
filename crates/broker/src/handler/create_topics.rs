//! CreateTopics. Internal topics are not created here: TOPIC_ALREADY_EXISTS
//! once the broker made them, INVALID_TOPIC_EXCEPTION before.

use std::collections::BTreeMap;

use weir_acl::{Operation, ResourceType as AclResource};
use weir_protocol::codec::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use weir_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, ResponseBody};

use super::{Reply, RequestContext};
use crate::broker::CreateTopicError;
use crate::topic_config;

/// Kafka's checks: CREATE on the cluster, else CREATE on each topic
/// (TOPIC_AUTHORIZATION_FAILED, answered after the others); a created
/// topic's configs only for a client that may DESCRIBE_CONFIGS it (else
/// `topic_config_error_code` TOPIC_AUTHORIZATION_FAILED). The broker's own
/// creations (auto-creation, internal topics) go to the topic admin
/// directly and are not checked.
pub async fn handle(ctx: &RequestContext, mut req: CreateTopicsRequest) -> Reply {
    let mut refused = Vec::new();
    if !ctx.authorize_cluster(Operation::Create) {
        let (allowed, denied): (Vec<_>, Vec<_>) = std::mem::take(&mut req.topics)
            .into_iter()
            .partition(|t| ctx.authorize(Operation::Create, AclResource::Topic, &t.name));
        req.topics = allowed;
        refused = denied;
    }
    let admin = ctx.broker.topic_admin();
    let mut resp = if req.topics.is_empty() {
        CreateTopicsResponse::default()
    } else {
        admin.create_topics(ctx, req).await
    };
    for t in &mut resp.topics {
        if t.error_code == ErrorCode::None.code()
            && !ctx.authorize(Operation::DescribeConfigs, AclResource::Topic, &t.name)
        {
            t.configs = Some(vec![]);
            t.topic_config_error_code = ErrorCode::TopicAuthorizationFailed.code();
        }
    }
    resp.topics
        .extend(refused.into_iter().map(|t| CreatableTopicResult {
            name: t.name,
            error_code: ErrorCode::TopicAuthorizationFailed.code(),
            error_message: Some("Authorization failed.".to_string()),
            num_partitions: -1,
            replication_factor: -1,
            topic_config_error_code: ErrorCode::TopicAuthorizationFailed.code(),
            ..Default::default()
        }));
    Reply::Body(ResponseBody::CreateTopics(resp))
}

/// This broker's own answer ([`crate::cluster::LocalTopicAdmin`]).
pub async fn create_locally(
    ctx: &RequestContext,
    req: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let b = &ctx.broker;
    let _guard = b.admin.lock().await;
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let mut result = CreatableTopicResult {
            name: t.name.clone(),
            error_code: ErrorCode::None.code(),
            error_message: None,
            num_partitions: -1,
            replication_factor: -1,
            configs: None,
            ..Default::default()
        };
        let mut configs = BTreeMap::new();
        let mut bad_config = None;
        for c in &t.configs {
            match &c.value {
                Some(v) => {
                    configs.insert(c.name.clone(), v.clone());
                }
                None => {
                    bad_config = Some(format!(
                        "Null value not supported for topic config {}",
                        c.name
                    ))
                }
            }
        }
        let outcome = if crate::groups::is_internal_topic(&t.name) {
            // Created by the broker when first needed (group or
            // transactional use), with the partition count placement
            // depends on and a compacted policy.
            if b.topic(&t.name).is_some() {
                Err(CreateTopicError::Exists(t.name.clone()))
            } else {
                Err(CreateTopicError::InvalidName(format!(
                    "{} is an internal topic; the broker creates it when first needed",
                    t.name
                )))
            }
        } else if let Some(msg) = bad_config {
            Err(CreateTopicError::InvalidConfig(msg))
        } else if !t.assignments.is_empty() {
            let all_local = t
                .assignments
                .iter()
                .all(|a| a.broker_ids == [b.config.node_id]);
            if !all_local || t.num_partitions != -1 || t.replication_factor != -1 {
                Err(CreateTopicError::InvalidReplicationFactor(
                    "Replica assignments must name only this broker, with numPartitions and replicationFactor -1".into(),
                ))
            } else {
                super::blocking(|| {
                    b.create_topic(
                        &t.name,
                        t.assignments.len() as i32,
                        1,
                        configs,
                        req.validate_only,
                    )
                })
            }
        } else {
            super::blocking(|| {
                b.create_topic(
                    &t.name,
                    t.num_partitions,
                    t.replication_factor,
                    configs,
                    req.validate_only,
                )
            })
        };
        match outcome {
            Ok(meta) => {
                result.topic_id = if req.validate_only {
                    Uuid::ZERO
                } else {
                    Uuid(meta.id_bytes())
                };
                result.num_partitions = meta.partitions;
                result.replication_factor = 1;
                result.configs = Some(
                    topic_config::resolve_all(&b.effective_config(), &meta.configs)
                        .into_iter()
                        .map(|r| CreatableTopicConfigs {
                            name: r.def.name.to_string(),
                            value: r.value,
                            read_only: false,
                            config_source: r.source as i8,
                            is_sensitive: r.def.sensitive,
                            ..Default::default()
                        })
                        .collect(),
                );
            }
            Err(e) => {
                result.error_code = match &e {
                    CreateTopicError::Exists(_) => ErrorCode::TopicAlreadyExists,
                    CreateTopicError::InvalidName(_) => ErrorCode::InvalidTopicException,
                    CreateTopicError::InvalidPartitions(_) => ErrorCode::InvalidPartitions,
                    CreateTopicError::InvalidReplicationFactor(_) => {
                        ErrorCode::InvalidReplicationFactor
                    }
                    CreateTopicError::InvalidConfig(_) => ErrorCode::InvalidConfig,
                    CreateTopicError::Storage(_) => ErrorCode::KafkaStorageError,
                    CreateTopicError::Internal(_) => ErrorCode::UnknownServerError,
                }
                .code();
                result.error_message = Some(e.to_string());
            }
        }
        results.push(result);
    }
    CreateTopicsResponse {
        throttle_time_ms: 0,
        topics: results,
        ..Default::default()
    }
}
