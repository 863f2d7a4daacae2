//! DeleteTopics (by name, or by id in v6+). Internal topics are refused
//! with INVALID_TOPIC_EXCEPTION.

use weir_protocol::codec::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::delete_topics_response::DeletableTopicResult;
use weir_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, ResponseBody};

use super::{Reply, RequestContext};

pub async fn handle(ctx: &RequestContext, req: DeleteTopicsRequest) -> Reply {
    let admin = ctx.broker.topic_admin();
    let resp = admin.delete_topics(ctx, req).await;
    Reply::Body(ResponseBody::DeleteTopics(resp))
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
