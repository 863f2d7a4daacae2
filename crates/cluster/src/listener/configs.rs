//! IncrementalAlterConfigs (v0-1) of TOPIC resources: how a broker hands
//! the active controller a topic's config change.
//!
//! What is accepted, per resource:
//!
//! - the resource type is TOPIC (2); any other is INVALID_REQUEST (broker
//!   and group configs are not in the metadata log);
//! - each operation is SET (0) with a value or DELETE (1); APPEND,
//!   SUBTRACT, a SET without a value, or a config named twice in the
//!   resource is INVALID_REQUEST, and so is a topic named twice in the
//!   request;
//! - the operations apply to the topic's overrides in the image the
//!   controller decides on; configs not named keep their value. Names and
//!   values are not checked here: the broker that forwards the change has
//!   the config definitions and validated the whole new set.
//!
//! A weir broker sends the complete new override set as SET operations
//! plus a DELETE for every override it saw that the new set drops, so the
//! topic ends with exactly that set unless another change of the same topic
//! committed in between. Each resource is one controller decision (one
//! batch); an unknown topic is UNKNOWN_TOPIC_OR_PARTITION.

use std::collections::BTreeMap;

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use weir_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use weir_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};

use super::ListenerContext;
use super::topics::message;

/// `resource_type` of a topic.
pub const RESOURCE_TOPIC: i8 = 2;
/// IncrementalAlterConfigs' SET operation.
pub const OP_SET: i8 = 0;
/// IncrementalAlterConfigs' DELETE operation.
pub const OP_DELETE: i8 = 1;

pub(super) async fn incremental_alter(
    ctx: &ListenerContext,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut seen: BTreeMap<(i8, String), usize> = BTreeMap::new();
    for r in &req.resources {
        *seen
            .entry((r.resource_type, r.resource_name.clone()))
            .or_default() += 1;
    }
    let mut responses = Vec::with_capacity(req.resources.len());
    for r in req.resources {
        let key = (r.resource_type, r.resource_name.clone());
        let outcome = if seen.get(&key).copied().unwrap_or(0) > 1 {
            Err((
                ErrorCode::InvalidRequest,
                format!("resource {} appears more than once in the request", key.1),
            ))
        } else {
            match changes(&r) {
                Ok(changes) => ctx
                    .controller
                    .alter_topic_configs(r.resource_name.clone(), changes, req.validate_only)
                    .await
                    .map_err(|e| (e.error_code(), message(&e))),
                Err(msg) => Err((ErrorCode::InvalidRequest, msg)),
            }
        };
        let (code, msg) = match outcome {
            Ok(()) => (ErrorCode::None, None),
            Err((code, msg)) => (code, Some(msg)),
        };
        responses.push(AlterConfigsResourceResponse {
            error_code: code.code(),
            error_message: msg,
            resource_type: r.resource_type,
            resource_name: r.resource_name,
            ..Default::default()
        });
    }
    IncrementalAlterConfigsResponse {
        responses,
        ..Default::default()
    }
}

/// A resource's operations as key → new value (`None`: removed), or why
/// the controller does not accept them (see the module doc).
fn changes(r: &AlterConfigsResource) -> Result<BTreeMap<String, Option<String>>, String> {
    if r.resource_type != RESOURCE_TOPIC {
        return Err(format!(
            "the controller changes TOPIC ({RESOURCE_TOPIC}) configs only, not resource type {}",
            r.resource_type
        ));
    }
    let mut out = BTreeMap::new();
    for c in &r.configs {
        let value = match (c.config_operation, &c.value) {
            (OP_SET, Some(v)) => Some(v.clone()),
            (OP_SET, None) => return Err(format!("Null value not supported for {}", c.name)),
            (OP_DELETE, _) => None,
            (op, _) => {
                return Err(format!(
                    "operation {op} on {} is not accepted by the controller: send SET and DELETE",
                    c.name
                ));
            }
        };
        if out.insert(c.name.clone(), value).is_some() {
            return Err(format!("config {} appears more than once", c.name));
        }
    }
    Ok(out)
}
