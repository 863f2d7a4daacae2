//! DescribeCluster: the live brokers (at their endpoints of the client's
//! listener) and the controller of the cluster view. The cluster's authorized operations only when asked for (0 for a
//! client that may not DESCRIBE the cluster). As in Kafka, no ACL is
//! needed to ask: the brokers are what Metadata tells anyone anyway.

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use weir_protocol::messages::{DescribeClusterRequest, DescribeClusterResponse, ResponseBody};

use super::{Reply, RequestContext};
use crate::authorized_operations::cluster_authorized_operations;

pub fn handle(ctx: &RequestContext, req: DescribeClusterRequest) -> Reply {
    let b = &ctx.broker;
    let snap = b.cluster();
    Reply::Body(ResponseBody::DescribeCluster(DescribeClusterResponse {
        error_code: ErrorCode::None.code(),
        error_message: None,
        endpoint_type: 1,
        cluster_id: b.meta.cluster_id.clone(),
        controller_id: snap.controller_id,
        brokers: snap
            .brokers
            .iter()
            // as Kafka: a broker without the client's listener is left out
            .filter_map(|n| {
                let (host, port) = ctx.node_address(&snap, n)?;
                Some(DescribeClusterBroker {
                    broker_id: n.id,
                    host,
                    port,
                    rack: n.rack.clone(),
                    ..Default::default()
                })
            })
            .collect(),
        cluster_authorized_operations: cluster_authorized_operations(
            ctx,
            req.include_cluster_authorized_operations,
        ),
        ..Default::default()
    }))
}
