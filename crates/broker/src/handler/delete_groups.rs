//! DeleteGroups: only Empty groups; their offsets and metadata are
//! tombstoned in `__consumer_offsets`.

use weir_acl::{Operation, ResourceType as AclResource};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::delete_groups_response::DeletableGroupResult;
use weir_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, ResponseBody};

use std::collections::{BTreeMap, VecDeque};

use super::{Reply, RequestContext};

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
                // One writing call per shard, answered in the order asked.
                let mut by_partition: BTreeMap<i32, Vec<String>> = BTreeMap::new();
                for g in &req.groups_names {
                    by_partition
                        .entry(groups.partition_for(g))
                        .or_default()
                        .push(g.clone());
                }
                let mut answered: BTreeMap<i32, VecDeque<(String, ErrorCode)>> = BTreeMap::new();
                for (p, ids) in by_partition {
                    let (results, failures) = groups
                        .write_partition(&ctx.broker, p, |coord| coord.delete_groups(&ids, now));
                    // A group whose tombstones were not written is not deleted.
                    let failed = failures.for_partition(p);
                    let results = results.into_iter().map(|(g, e)| match failed {
                        Some(f) if e.is_ok() => (g, f),
                        _ => (g, e),
                    });
                    answered.insert(p, results.collect());
                }
                req.groups_names
                    .iter()
                    .filter_map(|g| answered.get_mut(&groups.partition_for(g))?.pop_front())
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
