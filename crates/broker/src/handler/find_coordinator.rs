//! FindCoordinator: this single node coordinates every group. v4+ batches
//! keys in `coordinator_keys`.
//!
//! Transactions are not supported. A transaction coordinator lookup is
//! answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka answers a
//! principal that may use no transactional id: clients treat it as fatal
//! and `init_transactions()` fails at once. COORDINATOR_NOT_AVAILABLE (or
//! any other retriable code) would make them retry until their timeout.

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::find_coordinator_response::Coordinator;
use weir_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse, ResponseBody};

use super::{Reply, RequestContext};

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

/// The error message of every refused transactional request.
pub const TRANSACTIONS_UNSUPPORTED: &str = "transactions are not supported by this broker";

/// (error code, message) for one key; NONE means this node.
async fn lookup(ctx: &RequestContext, key_type: i8) -> (ErrorCode, Option<String>) {
    match key_type {
        KEY_TYPE_GROUP => match ctx.broker.groups() {
            None => (ErrorCode::CoordinatorNotAvailable, None),
            Some(g) => match g.ensure_topic(&ctx.broker).await {
                Ok(()) => (ErrorCode::None, None),
                Err(e) => (ErrorCode::CoordinatorNotAvailable, Some(e.to_string())),
            },
        },
        KEY_TYPE_TRANSACTION => (
            ErrorCode::TransactionalIdAuthorizationFailed,
            Some(TRANSACTIONS_UNSUPPORTED.into()),
        ),
        other => (
            ErrorCode::InvalidRequest,
            Some(format!("unknown coordinator key type {other}")),
        ),
    }
}

pub async fn handle(ctx: &RequestContext, req: FindCoordinatorRequest) -> Reply {
    let node_id = ctx.broker.config.node_id;
    let (host, port) = ctx.broker.advertised();
    let port = i32::from(port);
    let (error_code, error_message) = lookup(ctx, req.key_type).await;
    let ok = error_code.is_ok();
    let resp = if ctx.api_version >= 4 {
        FindCoordinatorResponse {
            coordinators: req
                .coordinator_keys
                .into_iter()
                .map(|key| Coordinator {
                    key,
                    node_id: if ok { node_id } else { -1 },
                    host: if ok { host.clone() } else { String::new() },
                    port: if ok { port } else { -1 },
                    error_code: error_code.code(),
                    error_message: error_message.clone(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    } else {
        FindCoordinatorResponse {
            error_code: error_code.code(),
            error_message,
            node_id: if ok { node_id } else { -1 },
            host: if ok { host } else { String::new() },
            port: if ok { port } else { -1 },
            ..Default::default()
        }
    };
    Reply::Body(ResponseBody::FindCoordinator(resp))
}
