//! CreateTopics, DeleteTopics and CreatePartitions: every topic of the
//! request, each with its own result. Each topic is one controller decision
//! (one batch), as Kafka commits topics independently.

use std::collections::BTreeMap;

use weir_metadata::controller::{NewPartitions, NewTopic};
use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use weir_protocol::messages::create_topics_response::CreatableTopicResult;
use weir_protocol::messages::delete_topics_response::DeletableTopicResult;
use weir_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse,
};

use super::ListenerContext;
use crate::controller::ControllerError;

pub(super) async fn create(
    ctx: &ListenerContext,
    req: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for t in &req.topics {
        *seen.entry(t.name.clone()).or_default() += 1;
    }
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let name = t.name.clone();
        let outcome = if seen.get(&name).copied().unwrap_or(0) > 1 {
            Err((
                ErrorCode::InvalidRequest,
                format!("topic {name} appears more than once in the request"),
            ))
        } else {
            let mut assignments = t.assignments;
            assignments.sort_by_key(|a| a.partition_index);
            let topic = NewTopic {
                name: t.name,
                num_partitions: t.num_partitions,
                replication_factor: t.replication_factor,
                assignments: assignments.into_iter().map(|a| a.broker_ids).collect(),
                configs: t.configs.into_iter().map(|c| (c.name, c.value)).collect(),
            };
            let result = if req.validate_only {
                ctx.controller.validate_topic(topic).await
            } else {
                ctx.controller.create_topic(topic).await
            };
            result.map_err(|e| (e.error_code(), message(&e)))
        };
        results.push(creatable_result(ctx, name, outcome, version));
    }
    CreateTopicsResponse {
        topics: results,
        ..Default::default()
    }
}

fn creatable_result(
    ctx: &ListenerContext,
    name: String,
    outcome: Result<Uuid, (ErrorCode, String)>,
    version: i16,
) -> CreatableTopicResult {
    let mut r = CreatableTopicResult {
        name,
        ..Default::default()
    };
    match outcome {
        Ok(id) => {
            let image = ctx.images.current();
            let topic = image.image.topic(id);
            if version >= 5 {
                r.num_partitions = topic.map_or(-1, |t| t.partitions.len() as i32);
                r.replication_factor = topic
                    .and_then(|t| t.partitions.values().next())
                    .map_or(-1, |p| p.replicas.len() as i16);
            }
            if version >= 7 {
                r.topic_id = id;
            }
        }
        Err((code, msg)) => {
            r.error_code = code.code();
            r.error_message = (version >= 1).then_some(msg);
            r.num_partitions = -1;
            r.replication_factor = -1;
        }
    }
    r
}

pub(super) async fn delete(
    ctx: &ListenerContext,
    req: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    // (name if known, id if given)
    let mut wanted: Vec<(Option<String>, Uuid)> = req
        .topic_names
        .into_iter()
        .map(|n| (Some(n), Uuid::ZERO))
        .collect();
    wanted.extend(req.topics.into_iter().map(|t| (t.name, t.topic_id)));
    let mut responses = Vec::with_capacity(wanted.len());
    for (name, id) in wanted {
        let image = ctx.images.current();
        let by_id = (id != Uuid::ZERO).then(|| image.image.topic(id).map(|t| t.name.clone()));
        let target = match (&name, by_id) {
            (_, Some(Some(n))) => Ok(n),
            (_, Some(None)) => Err((ErrorCode::UnknownTopicId, format!("no topic with id {id}"))),
            (Some(n), None) => Ok(n.clone()),
            (None, None) => Err((ErrorCode::InvalidRequest, "neither a name nor an id".into())),
        };
        let topic_id = match &target {
            Ok(n) => image.image.topic_by_name(n).map_or(id, |t| t.id),
            Err(_) => id,
        };
        let outcome = match target {
            Ok(n) => ctx
                .controller
                .delete_topic(n)
                .await
                .map_err(|e| (e.error_code(), message(&e))),
            Err(e) => Err(e),
        };
        let (code, msg) = match outcome {
            Ok(()) => (ErrorCode::None, None),
            Err((code, msg)) => (code, Some(msg)),
        };
        responses.push(DeletableTopicResult {
            name: if version >= 6 && name.is_none() {
                None
            } else {
                name
            },
            topic_id: if version >= 6 { topic_id } else { Uuid::ZERO },
            error_code: code.code(),
            error_message: if version >= 5 { msg } else { None },
            ..Default::default()
        });
    }
    DeleteTopicsResponse {
        responses,
        ..Default::default()
    }
}

pub(super) async fn create_partitions(
    ctx: &ListenerContext,
    req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for t in &req.topics {
        *seen.entry(t.name.clone()).or_default() += 1;
    }
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let outcome = if seen.get(&t.name).copied().unwrap_or(0) > 1 {
            Err((
                ErrorCode::InvalidRequest,
                format!("topic {} appears more than once in the request", t.name),
            ))
        } else {
            let wanted = NewPartitions {
                name: t.name.clone(),
                count: t.count,
                assignments: t
                    .assignments
                    .map(|a| a.into_iter().map(|a| a.broker_ids).collect()),
            };
            let result = if req.validate_only {
                ctx.controller.validate_partitions(wanted).await
            } else {
                ctx.controller.create_partitions(wanted).await
            };
            result.map_err(|e| (e.error_code(), message(&e)))
        };
        let (code, msg) = match outcome {
            Ok(()) => (ErrorCode::None, None),
            Err((code, msg)) => (code, Some(msg)),
        };
        results.push(CreatePartitionsTopicResult {
            name: t.name,
            error_code: code.code(),
            error_message: msg,
            ..Default::default()
        });
    }
    CreatePartitionsResponse {
        results,
        ..Default::default()
    }
}

pub(super) fn message(e: &ControllerError) -> String {
    match e {
        ControllerError::Rejected(r) => r.message.clone(),
        other => other.to_string(),
    }
}
