//! DeleteTopics (by name, or by id in v6+). Internal topics are refused
//! with INVALID_TOPIC_EXCEPTION.

use weir_acl::{Operation, ResourceType as AclResource};
use weir_protocol::codec::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::delete_topics_response::DeletableTopicResult;
use weir_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, ResponseBody};

use super::{Reply, RequestContext};

/// Kafka's checks (KRaft order), unless the client may DELETE the cluster:
/// a topic named but not describable is TOPIC_AUTHORIZATION_FAILED whether
/// it exists or not; an unknown one is then UNKNOWN_TOPIC_OR_PARTITION
/// (left to the admin); a known one without DELETE is
/// TOPIC_AUTHORIZATION_FAILED. A known id without DELETE is refused with
/// its name only if the client may DESCRIBE the topic. Refusals come first.
pub async fn handle(ctx: &RequestContext, mut req: DeleteTopicsRequest) -> Reply {
    let mut refused = Vec::new();
    if !ctx.authorize_cluster(Operation::Delete) {
        let snap = ctx.broker.cluster();
        let may = |op, name: &str| ctx.authorize(op, AclResource::Topic, name);
        // None: left to the admin
        let refusal = |name: Option<&str>, id: Uuid| -> Option<DeletableTopicResult> {
            let refused = |name: Option<&str>, id| DeletableTopicResult {
                name: name.map(str::to_string),
                topic_id: id,
                error_code: ErrorCode::TopicAuthorizationFailed.code(),
                error_message: Some("Authorization failed.".to_string()),
                ..Default::default()
            };
            match name {
                Some(n) if !may(Operation::Describe, n) => Some(refused(Some(n), Uuid::ZERO)),
                Some(n) if snap.topic(n).is_none() => None,
                Some(n) => (!may(Operation::Delete, n)).then(|| refused(Some(n), Uuid::ZERO)),
                None => {
                    let t = snap.topic_by_id(&id.0)?;
                    if may(Operation::Delete, &t.name) {
                        None
                    } else if may(Operation::Describe, &t.name) {
                        Some(refused(Some(&t.name), id))
                    } else {
                        Some(refused(None, id))
                    }
                }
            }
        };
        req.topic_names
            .retain(|n| match refusal(Some(n), Uuid::ZERO) {
                Some(r) => {
                    refused.push(r);
                    false
                }
                None => true,
            });
        req.topics.retain(|t| {
            let name = if t.topic_id == Uuid::ZERO {
                t.name.as_deref()
            } else {
                None
            };
            match refusal(name, t.topic_id) {
                Some(r) => {
                    refused.push(r);
                    false
                }
                None => true,
            }
        });
        if ctx.api_version < 6 {
            refused.iter_mut().for_each(|r| r.topic_id = Uuid::ZERO);
        }
    }
    let resp = if refused.is_empty() || !(req.topic_names.is_empty() && req.topics.is_empty()) {
        ctx.broker.topic_admin().delete_topics(ctx, req).await
    } else {
        DeleteTopicsResponse::default()
    };
    refused.extend(resp.responses);
    Reply::Body(ResponseBody::DeleteTopics(DeleteTopicsResponse {
        responses: refused,
        ..resp
    }))
}

/// This broker's own answer ([`crate::cluster::LocalTopicAdmin`]).
pub async fn delete_locally(
    ctx: &RequestContext,
    req: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    let b = &ctx.broker;
    let _guard = b.admin.lock().await;
    // (name, id) pairs as requested
    let wanted: Vec<(Option<String>, Uuid)> = if ctx.api_version >= 6 {
        req.topics
            .iter()
            .map(|t| (t.name.clone(), t.topic_id))
            .collect()
    } else {
        req.topic_names
            .iter()
            .map(|n| (Some(n.clone()), Uuid::ZERO))
            .collect()
    };
    let mut responses = Vec::with_capacity(wanted.len());
    for (name, id) in wanted {
        let meta = match (&name, id) {
            (Some(n), _) => b.topic(n),
            (None, id) if id != Uuid::ZERO => b.topic_by_id(&id.0),
            _ => None,
        };
        let mut r = DeletableTopicResult {
            name: name.clone(),
            topic_id: id,
            error_code: ErrorCode::None.code(),
            error_message: None,
            ..Default::default()
        };
        match meta {
            None => {
                r.error_code = if name.is_none() {
                    ErrorCode::UnknownTopicId
                } else {
                    ErrorCode::UnknownTopicOrPartition
                }
                .code();
                r.error_message = Some("This server does not host this topic.".into());
            }
            Some(t) if crate::groups::is_internal_topic(&t.name) => {
                // The broker owns it: deleting it would lose every group's
                // committed offsets (Kafka 4 leaves this to its CLI).
                r.name = Some(t.name.clone());
                r.topic_id = Uuid(t.id_bytes());
                r.error_code = ErrorCode::InvalidTopicException.code();
                r.error_message = Some(format!("Cannot delete internal topic {}", t.name));
            }
            Some(t) => {
                r.name = Some(t.name.clone());
                r.topic_id = Uuid(t.id_bytes());
                if let Err(e) = super::blocking(|| b.delete_topic(&t.name)) {
                    r.error_code = ErrorCode::UnknownServerError.code();
                    r.error_message = Some(e.to_string());
                }
            }
        }
        if ctx.api_version < 6 {
            r.topic_id = Uuid::ZERO;
        }
        responses.push(r);
    }
    DeleteTopicsResponse {
        throttle_time_ms: 0,
        responses,
        ..Default::default()
    }
}
