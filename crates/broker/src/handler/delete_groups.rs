//! DeleteGroups: only Empty groups; their offsets and metadata are
//! tombstoned in `__consumer_offsets`.

use weir_acl::{Operation, ResourceType as AclResource};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::delete_groups_response::DeletableGroupResult;
use weir_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, ResponseBody};

use super::{Reply, RequestContext, blocking};

/// Kafka: DELETE on each group; the refused ones are answered
/// GROUP_AUTHORIZATION_FAILED after the others.
pub async fn handle(ctx: &RequestContext, mut req: DeleteGroupsRequest) -> Reply {
    let (allowed, refused): (Vec<String>, Vec<String>) = std::mem::take(&mut req.groups_names)
        .into_iter()
        .partition(|g| ctx.authorize(Operation::Delete, AclResource::Group, g));
    req.groups_names = allowed;
    let refused = refused
        .into_iter()
        .map(|g| (g, ErrorCode::GroupAuthorizationFailed));
    let results: Vec<(String, ErrorCode)> = match ctx.broker.groups() {
        _ if req.groups_names.is_empty() => Vec::new(),
        None => req
            .groups_names
            .into_iter()
            .map(|g| (g, ErrorCode::CoordinatorNotAvailable))
            .collect(),
        Some(groups) => {
            if groups.ensure_topic(&ctx.broker).await.is_err() {
                req.groups_names
                    .into_iter()
                    .map(|g| (g, ErrorCode::CoordinatorNotAvailable))
                    .collect()
            } else {
                let now = ctx.broker.now_ms();
                let mut coord = groups.lock();
                let (results, out) = coord.delete_groups(&req.groups_names, now);
                let failures = blocking(|| groups.execute(&ctx.broker, &mut coord, out));
                // A group whose tombstones were not written is not deleted.
                results
                    .into_iter()
                    .map(|(g, e)| {
                        let failed = failures.for_partition(coord.partition_for(&g));
                        match failed {
                            Some(f) if e.is_ok() => (g, f),
                            _ => (g, e),
                        }
                    })
                    .collect()
            }
        }
    };
    Reply::Body(ResponseBody::DeleteGroups(DeleteGroupsResponse {
        results: results
            .into_iter()
            .chain(refused)
            .map(|(group_id, e)| DeletableGroupResult {
                group_id,
                error_code: e.code(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }))
}
