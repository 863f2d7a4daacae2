//! OffsetFetch: v1-7 ask for one group, v8+ for many. A null topic list
//! (v2+) means every partition the group has offsets for.
//!
//! `require_stable` (v7+, KIP-447): a partition with offsets pending in an
//! open transaction is answered UNSTABLE_OFFSET_COMMIT, per partition in
//! every version as Kafka does, and the consumer retries; without it the
//! committed (stable) offsets are returned.

use weir_acl::{Operation, ResourceType as AclResource};
use weir_group::{FetchedOffset, OffsetFetchGroup, OffsetFetchResult};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use weir_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, ResponseBody};

use super::{Reply, RequestContext};

/// Groups results by topic, keeping the order of first appearance.
fn by_topic(r: &OffsetFetchResult) -> Vec<(String, Vec<&weir_group::FetchedOffset>)> {
    let mut out: Vec<(String, Vec<&weir_group::FetchedOffset>)> = Vec::new();
    for p in &r.partitions {
        match out.iter_mut().find(|(t, _)| *t == p.topic) {
            Some((_, v)) => v.push(p),
            None => out.push((p.topic.clone(), vec![p])),
        }
    }
    out
}

fn metadata(m: &str) -> Option<String> {
    Some(m.to_string())
}

/// A partition answered without the coordinator.
fn refused_partition(topic: &str, partition: i32, error: ErrorCode) -> FetchedOffset {
    FetchedOffset {
        topic: topic.to_string(),
        partition,
        offset: -1,
        leader_epoch: -1,
        metadata: String::new(),
        error,
    }
}

/// Kafka's checks around `fetch` (the coordinator's answer): a group the
/// client may not DESCRIBE is GROUP_AUTHORIZATION_FAILED (v0-1, which have
/// no group error, on each requested partition); of a group's requested
/// topics, those it may not DESCRIBE are left out of the coordinator's
/// question and answered TOPIC_AUTHORIZATION_FAILED after the others; when
/// all of a group's offsets are asked for, those of such topics are left
/// out of the answer. The results are in the groups' order.
fn authorized_results(
    ctx: &RequestContext,
    mut asked: Vec<OffsetFetchGroup>,
    fetch: impl FnOnce(&[OffsetFetchGroup]) -> Vec<OffsetFetchResult>,
) -> Vec<OffsetFetchResult> {
    if !ctx.broker.acls.enabled() {
        return fetch(&asked);
    }
    let describable = |t: &str| ctx.authorize(Operation::Describe, AclResource::Topic, t);
    // per asked group: None (refused), or its refused topic partitions
    let mut outcome: Vec<Option<Vec<FetchedOffset>>> = Vec::with_capacity(asked.len());
    let mut refused_groups = Vec::new();
    asked.retain_mut(|g| {
        if !ctx.authorize(Operation::Describe, AclResource::Group, &g.group_id) {
            let partitions = match &g.partitions {
                Some(ps) if ctx.api_version < 2 => ps
                    .iter()
                    .map(|(t, p)| refused_partition(t, *p, ErrorCode::GroupAuthorizationFailed))
                    .collect(),
                _ => Vec::new(),
            };
            refused_groups.push(OffsetFetchResult {
                group_id: g.group_id.clone(),
                error: ErrorCode::GroupAuthorizationFailed,
                partitions,
            });
            outcome.push(None);
            return false;
        }
        let mut refused = Vec::new();
        if let Some(ps) = &mut g.partitions {
            ps.retain(|(t, p)| {
                let ok = describable(t);
                if !ok {
                    refused.push(refused_partition(
                        t,
                        *p,
                        ErrorCode::TopicAuthorizationFailed,
                    ));
                }
                ok
            });
        }
        outcome.push(Some(refused));
        true
    });
    let mut fetched = fetch(&asked).into_iter();
    let mut refused_groups = refused_groups.into_iter();
    outcome
        .into_iter()
        .filter_map(|o| match o {
            None => refused_groups.next(),
            Some(refused) => {
                let mut r = fetched.next()?;
                if r.error.is_ok() {
                    r.partitions.retain(|p| describable(&p.topic));
                    r.partitions.extend(refused);
                }
                Some(r)
            }
        })
        .collect()
}

pub fn handle(ctx: &RequestContext, req: OffsetFetchRequest) -> Reply {
    let v = ctx.api_version;
    let require_stable = req.require_stable;
    // v9+: a member of a consumer-protocol group (KIP-848) names itself
    // and its epoch, checked as Kafka does (UNKNOWN_MEMBER_ID,
    // STALE_MEMBER_EPOCH).
    let members: Vec<(String, Option<String>, i32)> = if v >= 9 {
        req.groups
            .iter()
            .map(|g| (g.group_id.clone(), g.member_id.clone(), g.member_epoch))
            .collect()
    } else {
        Vec::new()
    };
    let asked: Vec<OffsetFetchGroup> = if v >= 8 {
        req.groups
            .into_iter()
            .map(|g| OffsetFetchGroup {
                group_id: g.group_id,
                partitions: g.topics.map(|ts| {
                    ts.into_iter()
                        .flat_map(|t| {
                            let name = t.name;
                            t.partition_indexes
                                .into_iter()
                                .map(move |p| (name.clone(), p))
                        })
                        .collect()
                }),
            })
            .collect()
    } else {
        vec![OffsetFetchGroup {
            group_id: req.group_id,
            partitions: req.topics.map(|ts| {
                ts.into_iter()
                    .flat_map(|t| {
                        let name = t.name;
                        t.partition_indexes
                            .into_iter()
                            .map(move |p| (name.clone(), p))
                    })
                    .collect()
            }),
        }]
    };
    let results = authorized_results(ctx, asked, |asked| match ctx.broker.groups() {
        // each group under its own shard's lock, never held across an append
        Some(groups) => groups.fetch_offsets(asked, require_stable, |coord, group| {
            match members.iter().find(|(g, _, _)| g == group) {
                Some((g, id, epoch)) => coord.check_offset_fetch_member(g, id.as_deref(), *epoch),
                None => ErrorCode::None,
            }
        }),
        None => asked
            .iter()
            .map(|g| OffsetFetchResult {
                group_id: g.group_id.clone(),
                error: ErrorCode::CoordinatorNotAvailable,
                partitions: Vec::new(),
            })
            .collect(),
    });
    let resp = if v >= 8 {
        OffsetFetchResponse {
            groups: results
                .iter()
                .map(|r| OffsetFetchResponseGroup {
                    group_id: r.group_id.clone(),
                    error_code: r.error.code(),
                    topics: by_topic(r)
                        .into_iter()
                        .map(|(name, ps)| OffsetFetchResponseTopics {
                            name,
                            partitions: ps
                                .into_iter()
                                .map(|p| OffsetFetchResponsePartitions {
                                    partition_index: p.partition,
                                    committed_offset: p.offset,
                                    committed_leader_epoch: p.leader_epoch,
                                    metadata: metadata(&p.metadata),
                                    error_code: p.error.code(),
                                    ..Default::default()
                                })
                                .collect(),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    } else {
        let r = results.into_iter().next().unwrap_or(OffsetFetchResult {
            group_id: String::new(),
            error: ErrorCode::UnknownServerError,
            partitions: Vec::new(),
        });
        // v1 has no top-level error code: report it on every partition
        let group_error = r.error;
        OffsetFetchResponse {
            error_code: group_error.code(),
            topics: by_topic(&r)
                .into_iter()
                .map(|(name, ps)| OffsetFetchResponseTopic {
                    name,
                    partitions: ps
                        .into_iter()
                        .map(|p| OffsetFetchResponsePartition {
                            partition_index: p.partition,
                            committed_offset: p.offset,
                            committed_leader_epoch: p.leader_epoch,
                            metadata: metadata(&p.metadata),
                            error_code: if v < 2 && !group_error.is_ok() {
                                group_error.code()
                            } else {
                                p.error.code()
                            },
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    };
    Reply::Body(ResponseBody::OffsetFetch(resp))
}
