//! AlterPartitionReassignments: moves partitions to other replicas
//! (KIP-455). A cluster member forwards it to the active controller
//! through its [`crate::cluster::TopicAdmin`]; a single node is the only
//! broker, so the only valid target is itself, which is where every
//! partition already is: NONE for that, INVALID_REPLICA_ASSIGNMENT for any
//! other target, NO_REASSIGNMENT_IN_PROGRESS for a cancel, and
//! UNKNOWN_TOPIC_OR_PARTITION for a partition it does not have.

use std::collections::BTreeSet;

use weir_acl::Operation;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use weir_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ResponseBody,
};

use super::{Reply, RequestContext};

pub async fn handle(ctx: &RequestContext, req: AlterPartitionReassignmentsRequest) -> Reply {
    // Kafka: ALTER on the cluster; refused as a whole and per partition
    if !ctx.authorize_cluster(Operation::Alter) {
        let code = ErrorCode::ClusterAuthorizationFailed;
        let message = Some(format!("{code:?}"));
        return Reply::Body(ResponseBody::AlterPartitionReassignments(
            AlterPartitionReassignmentsResponse {
                error_code: code.code(),
                error_message: message.clone(),
                responses: req
                    .topics
                    .into_iter()
                    .map(|t| ReassignableTopicResponse {
                        partitions: t
                            .partitions
                            .iter()
                            .map(|p| ReassignablePartitionResponse {
                                partition_index: p.partition_index,
                                error_code: code.code(),
                                error_message: message.clone(),
                                ..Default::default()
                            })
                            .collect(),
                        name: t.name,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            },
        ));
    }
    let admin = ctx.broker.topic_admin();
    let resp = admin.alter_partition_reassignments(ctx, req).await;
    Reply::Body(ResponseBody::AlterPartitionReassignments(resp))
}

/// This broker's own answer ([`crate::cluster::LocalTopicAdmin`]).
pub fn alter_locally(
    ctx: &RequestContext,
    req: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let snap = ctx.broker.cluster();
    let responses = req
        .topics
        .into_iter()
        .map(|t| ReassignableTopicResponse {
            partitions: t
                .partitions
                .iter()
                .map(|p| {
                    let (code, message) = match (snap.partition(&t.name, p.partition_index), &p.replicas) {
                        (None, _) => (
                            ErrorCode::UnknownTopicOrPartition,
                            format!("no partition {}-{}", t.name, p.partition_index),
                        ),
                        (Some(_), None) => (
                            ErrorCode::NoReassignmentInProgress,
                            format!("no reassignment of {}-{} is in progress", t.name, p.partition_index),
                        ),
                        (Some(now), Some(target)) => {
                            let distinct: BTreeSet<&i32> = target.iter().collect();
                            if target.is_empty() || distinct.len() != target.len() {
                                (
                                    ErrorCode::InvalidReplicaAssignment,
                                    format!("the target replicas {target:?} are empty or repeat a broker"),
                                )
                            } else if let Some(b) = target.iter().find(|b| snap.broker(**b).is_none()) {
                                (
                                    ErrorCode::InvalidReplicaAssignment,
                                    format!("the target replicas name broker {b}, which is not registered"),
                                )
                            } else {
                                // The only broker: the target is where the
                                // partition already is.
                                let _ = now;
                                return ReassignablePartitionResponse {
                                    partition_index: p.partition_index,
                                    ..Default::default()
                                };
                            }
                        }
                    };
                    ReassignablePartitionResponse {
                        partition_index: p.partition_index,
                        error_code: code.code(),
                        error_message: Some(message),
                        ..Default::default()
                    }
                })
                .collect(),
            name: t.name,
            ..Default::default()
        })
        .collect();
    AlterPartitionReassignmentsResponse {
        responses,
        ..Default::default()
    }
}
