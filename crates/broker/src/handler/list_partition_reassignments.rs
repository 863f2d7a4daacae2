//! ListPartitionReassignments: the partition reassignments in progress. A
//! cluster member forwards it to the active controller through its
//! [`crate::cluster::TopicAdmin`]; a single node never has one in progress
//! (see `alter_partition_reassignments`), so it answers an empty list.

use weir_acl::Operation;
use weir_protocol::messages::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, ResponseBody,
};

use super::{Reply, RequestContext};

pub async fn handle(ctx: &RequestContext, req: ListPartitionReassignmentsRequest) -> Reply {
    // Kafka: DESCRIBE on the cluster
    if !ctx.authorize_cluster(Operation::Describe) {
        let code = weir_protocol::error_code::ErrorCode::ClusterAuthorizationFailed;
        return Reply::Body(ResponseBody::ListPartitionReassignments(
            ListPartitionReassignmentsResponse {
                error_code: code.code(),
                error_message: Some(format!("{code:?}")),
                ..Default::default()
            },
        ));
    }
    let admin = ctx.broker.topic_admin();
    let resp = admin.list_partition_reassignments(ctx, req).await;
    Reply::Body(ResponseBody::ListPartitionReassignments(resp))
}

/// This broker's own answer ([`crate::cluster::LocalTopicAdmin`]).
pub fn list_locally(
    _ctx: &RequestContext,
    _req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    ListPartitionReassignmentsResponse::default()
}
