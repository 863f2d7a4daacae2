//! OffsetForLeaderEpoch: where a leader epoch ended in the leader's log
//! (Kafka's `endOffsetFor`, answered from the log's leader epoch cache).
//!
//! Two kinds of callers, both answered only by the partition's leader:
//! - consumers (`replica_id` -1, KIP-320; v2 has no `replica_id` and
//!   reads as -2, Kafka's "debugging" id, served alike) check after a
//!   leader change that the position they fetched up to was not truncated
//!   away;
//! - followers (`replica_id` = their broker id, ≥ 0) ask before
//!   truncating; the id must be one of the partition's other replicas.
//!
//! Per partition, as Kafka: `current_leader_epoch` is checked like Fetch's
//! (FENCED_LEADER_EPOCH below the leader's epoch, UNKNOWN_LEADER_EPOCH
//! above, NOT_LEADER_OR_FOLLOWER on a broker that does not lead); an epoch
//! the cache cannot place answers `(-1, -1)` with no error. v0 and v1 are
//! gone since Kafka 4.0 (KIP-896).

use weir_acl::{Operation, ResourceType};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderPartition;
use weir_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use weir_protocol::messages::{
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ResponseBody,
};

use super::{Reply, RequestContext};
use crate::broker::Broker;
use crate::cluster::ClusterSnapshot;

/// The answer for one partition, asked by `replica` (negative: not a
/// broker).
fn end_offset(
    b: &Broker,
    snap: &ClusterSnapshot,
    replica: i32,
    topic: &str,
    p: &OffsetForLeaderPartition,
) -> EpochEndOffset {
    let mut out = EpochEndOffset {
        error_code: ErrorCode::None.code(),
        partition: p.partition,
        leader_epoch: -1,
        end_offset: -1,
        ..Default::default()
    };
    let node_id = b.config.node_id;
    let current = match snap.check_leader(node_id, topic, p.partition, p.current_leader_epoch) {
        Ok(epoch) => epoch,
        Err(refused) => {
            out.error_code = refused.code.code();
            return out;
        }
    };
    // A follower's id must name one of the partition's other replicas.
    let is_follower = |id: i32| {
        id != node_id
            && snap
                .partition(topic, p.partition)
                .is_some_and(|v| v.replicas.contains(&id))
    };
    if replica >= 0 && !is_follower(replica) {
        out.error_code = ErrorCode::NotLeaderOrFollower.code();
        return out;
    }
    let Some(log) = b.replicas.log(topic, p.partition) else {
        out.error_code = b
            .replicas
            .missing_log_error(b.topic(topic).as_ref(), p.partition)
            .code();
        return out;
    };
    let (epoch, end) = match log.latest_epoch() {
        Some(_) => log.end_offset_for_epoch(p.leader_epoch),
        None => unstamped_end_offset(
            current,
            p.leader_epoch,
            log.log_start_offset(),
            log.log_end_offset(),
        ),
    };
    // Kafka answers an undefined end offset with the undefined epoch too.
    if end >= 0 {
        out.leader_epoch = epoch;
        out.end_offset = end;
    }
    out
}

/// `endOffsetFor` on a log no leader stamped, whose epoch cache is empty:
/// a single node keeps the producers' batch field, which says nothing
/// about leadership, and leads in `current` since it exists. Answered as
/// Kafka's cache of that history (`current` from the log start) would,
/// so that a consumer checking its position after a restart is not told
/// its epoch is unknown (librdkafka resets the offset then).
fn unstamped_end_offset(current: i32, requested: i32, log_start: i64, leo: i64) -> (i32, i64) {
    if requested < 0 || requested > current {
        (-1, -1)
    } else if requested == current {
        (current, leo)
    } else {
        // before the first known epoch: the start of the first
        (requested, log_start)
    }
}

pub fn handle(ctx: &RequestContext, req: OffsetForLeaderEpochRequest) -> Reply {
    let b = &ctx.broker;
    let snap = b.cluster();
    // Kafka: CLUSTER_ACTION (a follower) may ask about every topic, others
    // need DESCRIBE on each.
    let cluster_action = ctx.authorize_cluster(Operation::ClusterAction);
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let refused = !cluster_action
                && !ctx.authorize(Operation::Describe, ResourceType::Topic, &t.topic);
            OffsetForLeaderTopicResult {
                topic: t.topic.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| {
                        if refused {
                            EpochEndOffset {
                                error_code: ErrorCode::TopicAuthorizationFailed.code(),
                                partition: p.partition,
                                leader_epoch: -1,
                                end_offset: -1,
                                ..Default::default()
                            }
                        } else {
                            end_offset(b, &snap, req.replica_id, &t.topic, p)
                        }
                    })
                    .collect(),
                ..Default::default()
            }
        })
        .collect();
    Reply::Body(ResponseBody::OffsetForLeaderEpoch(
        OffsetForLeaderEpochResponse {
            throttle_time_ms: 0,
            topics,
            ..Default::default()
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::unstamped_end_offset;

    #[test]
    fn an_unstamped_log_is_one_epoch_from_its_start() {
        // (current, requested) -> answer, log start 4, LEO 10
        for ((current, requested), expect) in [
            ((0, 0), (0, 10)),
            ((3, 3), (3, 10)),
            ((3, 1), (1, 4)),
            ((0, 1), (-1, -1)),
            ((0, -1), (-1, -1)),
        ] {
            assert_eq!(
                unstamped_end_offset(current, requested, 4, 10),
                expect,
                "current {current}, requested {requested}"
            );
        }
    }
}
