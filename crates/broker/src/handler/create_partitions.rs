//! CreatePartitions. Internal topics are refused with
//! INVALID_TOPIC_EXCEPTION; a failure to write the new partitions is
//! KAFKA_STORAGE_ERROR (none of them is added).

use weir_acl::{Operation, ResourceType as AclResource};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use weir_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse, ResponseBody};

use super::{Reply, RequestContext};
use crate::broker::AddPartitionsError;

/// Kafka's check: ALTER on each topic (TOPIC_AUTHORIZATION_FAILED before
/// the others' answers).
pub async fn handle(ctx: &RequestContext, mut req: CreatePartitionsRequest) -> Reply {
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut req.topics)
        .into_iter()
        .partition(|t| ctx.authorize(Operation::Alter, AclResource::Topic, &t.name));
    req.topics = allowed;
    let mut results: Vec<CreatePartitionsTopicResult> = refused
        .into_iter()
        .map(|t| CreatePartitionsTopicResult {
            name: t.name,
            error_code: ErrorCode::TopicAuthorizationFailed.code(),
            error_message: None,
            ..Default::default()
        })
        .collect();
    let resp = if req.topics.is_empty() {
        CreatePartitionsResponse::default()
    } else {
        ctx.broker.topic_admin().create_partitions(ctx, req).await
    };
    results.extend(resp.results);
    Reply::Body(ResponseBody::CreatePartitions(CreatePartitionsResponse {
        results,
        ..resp
    }))
}

/// This broker's own answer ([`crate::cluster::LocalTopicAdmin`]).
pub async fn create_locally(
    ctx: &RequestContext,
    req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let b = &ctx.broker;
    let _guard = b.admin.lock().await;
    let results = req
        .topics
        .iter()
        .map(|t| {
            let (error_code, error_message) = if b.topic(&t.name).is_none() {
                (
                    ErrorCode::UnknownTopicOrPartition,
                    Some(format!("The topic '{}' does not exist.", t.name)),
                )
            } else if crate::groups::is_internal_topic(&t.name) {
                // Group placement hashes over the partition count: adding
                // partitions would move groups away from their offsets.
                (
                    ErrorCode::InvalidTopicException,
                    Some(format!(
                        "Cannot change the number of partitions of internal topic {}",
                        t.name
                    )),
                )
            } else if t.assignments.as_ref().is_some_and(|a| {
                a.iter()
                    .any(|x| x.broker_ids.iter().any(|id| *id != b.config.node_id))
            }) {
                (
                    ErrorCode::InvalidReplicationFactor,
                    Some("Assignments may only name this broker".into()),
                )
            } else {
                match super::blocking(|| b.add_partitions(&t.name, t.count, req.validate_only)) {
                    Ok(()) => (ErrorCode::None, None),
                    Err(AddPartitionsError::Invalid(msg)) => {
                        (ErrorCode::InvalidPartitions, Some(msg))
                    }
                    Err(AddPartitionsError::Storage(msg)) => {
                        (ErrorCode::KafkaStorageError, Some(msg))
                    }
                }
            };
            CreatePartitionsTopicResult {
                name: t.name.clone(),
                error_code: error_code.code(),
                error_message,
                ..Default::default()
            }
        })
        .collect();
    CreatePartitionsResponse {
        throttle_time_ms: 0,
        results,
        ..Default::default()
    }
}
