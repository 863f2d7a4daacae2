//! FindCoordinator: a group's coordinator is the leader of its
//! `__consumer_offsets` partition (on a single node, this node). v4+
//! batches keys in `coordinator_keys`.
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
use crate::groups::OFFSETS_TOPIC;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

/// The error message of every refused transactional request.
pub const TRANSACTIONS_UNSUPPORTED: &str = "transactions are not supported by this broker";

/// The coordinator of one key: (node id, host, port), or why there is none.
type Lookup = Result<(i32, String, i32), (ErrorCode, Option<String>)>;

/// A group's coordinator is the leader of its `__consumer_offsets`
/// partition (created first on a node that has none yet).
async fn lookup(ctx: &RequestContext, key_type: i8, key: &str) -> Lookup {
    match key_type {
        KEY_TYPE_GROUP => {
            let b = &ctx.broker;
            let Some(g) = b.groups() else {
                return Err((ErrorCode::CoordinatorNotAvailable, None));
            };
            let mut snap = b.cluster();
            if snap.topic(OFFSETS_TOPIC).is_none() {
                g.ensure_topic(b)
                    .await
                    .map_err(|e| (ErrorCode::CoordinatorNotAvailable, Some(e.to_string())))?;
                snap = b.cluster();
            }
            let leader = snap.topic(OFFSETS_TOPIC).and_then(|t| {
                let count = i32::try_from(t.partitions.len()).unwrap_or(i32::MAX);
                let p = usize::try_from(weir_group::partition_for(key, count)).ok()?;
                snap.broker(t.partitions.get(p)?.leader)
            });
            match leader {
                Some(n) => Ok((n.id, n.host.clone(), i32::from(n.port))),
                None => Err((ErrorCode::CoordinatorNotAvailable, None)),
            }
        }
        KEY_TYPE_TRANSACTION => Err((
            ErrorCode::TransactionalIdAuthorizationFailed,
            Some(TRANSACTIONS_UNSUPPORTED.into()),
        )),
        other => Err((
            ErrorCode::InvalidRequest,
            Some(format!("unknown coordinator key type {other}")),
        )),
    }
}

pub async fn handle(ctx: &RequestContext, req: FindCoordinatorRequest) -> Reply {
    let resp = if ctx.api_version >= 4 {
        let mut coordinators = Vec::with_capacity(req.coordinator_keys.len());
        for key in req.coordinator_keys {
            let found = lookup(ctx, req.key_type, &key).await;
            coordinators.push(match found {
                Ok((node_id, host, port)) => Coordinator {
                    key,
                    node_id,
                    host,
                    port,
                    error_code: ErrorCode::None.code(),
                    error_message: None,
                    ..Default::default()
                },
                Err((code, error_message)) => Coordinator {
                    key,
                    node_id: -1,
                    host: String::new(),
                    port: -1,
                    error_code: code.code(),
                    error_message,
                    ..Default::default()
                },
            });
        }
        FindCoordinatorResponse {
            coordinators,
            ..Default::default()
        }
    } else {
        match lookup(ctx, req.key_type, &req.key).await {
            Ok((node_id, host, port)) => FindCoordinatorResponse {
                error_code: ErrorCode::None.code(),
                error_message: None,
                node_id,
                host,
                port,
                ..Default::default()
            },
            Err((code, error_message)) => FindCoordinatorResponse {
                error_code: code.code(),
                error_message,
                node_id: -1,
                host: String::new(),
                port: -1,
                ..Default::default()
            },
        }
    };
    Reply::Body(ResponseBody::FindCoordinator(resp))
}
