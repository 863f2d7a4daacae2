//! DeleteGroups: only Empty groups; their offsets and metadata are
//! tombstoned in `__consumer_offsets`.

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::delete_groups_response::DeletableGroupResult;
use weir_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, ResponseBody};

use super::{Reply, RequestContext, blocking};

pub async fn handle(ctx: &RequestContext, req: DeleteGroupsRequest) -> Reply {
    let results: Vec<(String, ErrorCode)> = match ctx.broker.groups() {
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
            .map(|(group_id, e)| DeletableGroupResult {
                group_id,
                error_code: e.code(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }))
}
