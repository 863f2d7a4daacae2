//! ElectLeaders: preferred (type 0) or unclean (type 1) leader election. A
//! cluster member forwards it to the active controller through its
//! [`crate::cluster::TopicAdmin`]; a single node leads every partition with
//! its only (and so preferred) replica, so there is never an election to
//! run: ELECTION_NOT_NEEDED for each known partition.

use weir_acl::Operation;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use weir_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, ResponseBody};

use super::{Reply, RequestContext};

pub async fn handle(ctx: &RequestContext, req: ElectLeadersRequest) -> Reply {
    // Kafka: ALTER on the cluster; refused as a whole (v1+) and for each
    // requested partition
    if !ctx.authorize_cluster(Operation::Alter) {
        let code = ErrorCode::ClusterAuthorizationFailed;
        return Reply::Body(ResponseBody::ElectLeaders(ElectLeadersResponse {
            error_code: code.code(),
            replica_election_results: req
                .topic_partitions
                .unwrap_or_default()
                .into_iter()
                .map(|t| ReplicaElectionResult {
                    partition_result: t
                        .partitions
                        .iter()
                        .map(|&partition_id| PartitionResult {
                            partition_id,
                            error_code: code.code(),
                            error_message: Some(format!("{code:?}")),
                            ..Default::default()
                        })
                        .collect(),
                    topic: t.topic,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }));
    }
    let admin = ctx.broker.topic_admin();
    let resp = admin.elect_leaders(ctx, req).await;
    Reply::Body(ResponseBody::ElectLeaders(resp))
}

/// This broker's own answer ([`crate::cluster::LocalTopicAdmin`]).
pub fn elect_locally(ctx: &RequestContext, req: ElectLeadersRequest) -> ElectLeadersResponse {
    if req.election_type != 0 && req.election_type != 1 {
        return ElectLeadersResponse {
            error_code: ErrorCode::InvalidRequest.code(),
            ..Default::default()
        };
    }
    let snap = ctx.broker.cluster();
    // All partitions (null): a single node has nothing to elect, and Kafka
    // lists only the partitions an election was attempted for.
    let requested = req.topic_partitions.unwrap_or_default();
    let results = requested
        .into_iter()
        .map(|t| ReplicaElectionResult {
            partition_result: t
                .partitions
                .iter()
                .map(|&p| {
                    let (code, message) = match snap.partition(&t.topic, p) {
                        Some(_) => (
                            ErrorCode::ElectionNotNeeded,
                            "the preferred replica is already the leader",
                        ),
                        None => (
                            ErrorCode::UnknownTopicOrPartition,
                            "this server does not host this topic-partition",
                        ),
                    };
                    PartitionResult {
                        partition_id: p,
                        error_code: code.code(),
                        error_message: Some(message.to_string()),
                        ..Default::default()
                    }
                })
                .collect(),
            topic: t.topic,
            ..Default::default()
        })
        .collect();
    ElectLeadersResponse {
        error_code: ErrorCode::None.code(),
        replica_election_results: results,
        ..Default::default()
    }
}
