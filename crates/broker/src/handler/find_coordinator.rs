//! FindCoordinator: a group's coordinator is the leader of its
//! `__consumer_offsets` partition, a transactional id's the leader of its
//! `__transaction_state` partition (on a single node, this node). The
//! first lookup creates the topic (a cluster member asks the controller
//! and answers COORDINATOR_NOT_AVAILABLE until the topic has leaders, as
//! Kafka does). v4+ batches keys in `coordinator_keys`.

use weir_acl::{Operation, ResourceType as AclResource};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::find_coordinator_response::Coordinator;
use weir_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse, ResponseBody};

use super::{Reply, RequestContext};
use crate::groups::OFFSETS_TOPIC;
use crate::transactions::TRANSACTION_STATE_TOPIC;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

/// The coordinator of one key: (node id, host, port), or why there is none.
type Lookup = Result<(i32, String, i32), (ErrorCode, Option<String>)>;

/// A group's coordinator is the leader of its `__consumer_offsets`
/// partition (created first on a node that has none yet), a transactional
/// id's the leader of its `__transaction_state` partition.
async fn lookup(ctx: &RequestContext, key_type: i8, key: &str) -> Lookup {
    // Kafka: DESCRIBE on the group or the transactional id, before anything
    // about the coordinator is looked up
    let refused = match key_type {
        KEY_TYPE_GROUP => (!ctx.authorize(Operation::Describe, AclResource::Group, key))
            .then_some(ErrorCode::GroupAuthorizationFailed),
        KEY_TYPE_TRANSACTION => {
            (!ctx.authorize(Operation::Describe, AclResource::TransactionalId, key))
                .then_some(ErrorCode::TransactionalIdAuthorizationFailed)
        }
        _ => None,
    };
    if let Some(code) = refused {
        return Err((code, None));
    }
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
            coordinator_at(ctx, &snap, leader)
        }
        KEY_TYPE_TRANSACTION => {
            let b = &ctx.broker;
            let Some(t) = b.transactions() else {
                return Err((ErrorCode::CoordinatorNotAvailable, None));
            };
            let mut snap = b.cluster();
            if snap.topic(TRANSACTION_STATE_TOPIC).is_none() {
                t.ensure_topic(ctx)
                    .await
                    .map_err(|e| (ErrorCode::CoordinatorNotAvailable, Some(e)))?;
                snap = b.cluster();
            }
            let leader = snap.topic(TRANSACTION_STATE_TOPIC).and_then(|t| {
                let count = i32::try_from(t.partitions.len()).unwrap_or(i32::MAX);
                let p = usize::try_from(weir_txn::partition_for(key, count)).ok()?;
                snap.broker(t.partitions.get(p)?.leader)
            });
            coordinator_at(ctx, &snap, leader)
        }
        other => Err((
            ErrorCode::InvalidRequest,
            Some(format!("unknown coordinator key type {other}")),
        )),
    }
}

/// The coordinator `leader` as the client reaches it: on its endpoint of
/// the client's listener. Without a leader, or without that listener,
/// COORDINATOR_NOT_AVAILABLE, as Kafka answers.
fn coordinator_at(
    ctx: &RequestContext,
    snap: &crate::cluster::ClusterSnapshot,
    leader: Option<&crate::cluster::BrokerNode>,
) -> Lookup {
    let n = leader.ok_or((ErrorCode::CoordinatorNotAvailable, None))?;
    let (host, port) = ctx
        .node_address(snap, n)
        .ok_or((ErrorCode::CoordinatorNotAvailable, None))?;
    Ok((n.id, host, port))
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
