//! DescribeCluster. The cluster's authorized operations only when asked for.

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use weir_protocol::messages::{DescribeClusterRequest, DescribeClusterResponse, ResponseBody};

use super::{Reply, RequestContext};
use crate::authorized_operations::{ResourceType, authorized_operations};

pub fn handle(ctx: &RequestContext, req: DescribeClusterRequest) -> Reply {
    let b = &ctx.broker;
    let (host, port) = b.advertised();
    Reply::Body(ResponseBody::DescribeCluster(DescribeClusterResponse {
        error_code: ErrorCode::None.code(),
        error_message: None,
        endpoint_type: 1,
        cluster_id: b.meta.cluster_id.clone(),
        controller_id: b.config.node_id,
        brokers: vec![DescribeClusterBroker {
            broker_id: b.config.node_id,
            host,
            port: port as i32,
            rack: None,
            ..Default::default()
        }],
        cluster_authorized_operations: authorized_operations(
            ResourceType::Cluster,
            req.include_cluster_authorized_operations,
        ),
        ..Default::default()
    }))
}
