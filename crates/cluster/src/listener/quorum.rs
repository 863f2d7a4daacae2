//! DescribeQuorum: the metadata log's raft state as Kafka reports it for
//! the partition `__cluster_metadata-0`.
//!
//! Offsets are exclusive ends, as Kafka's: the high watermark is the
//! committed raft index plus one and a voter's log end offset its matched
//! index plus one (-1 when the leader does not know it yet). openraft tracks no fetch
//! times, so `last_fetch_timestamp` is -1 and `last_caught_up_timestamp` is
//! the leader's wall clock now for the leader and for a voter whose log
//! matches the leader's end, -1 otherwise.

use std::time::{SystemTime, UNIX_EPOCH};

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use weir_protocol::messages::{DescribeQuorumRequest, DescribeQuorumResponse};

use super::ListenerContext;

/// The metadata log's topic name, as Kafka's.
pub const METADATA_TOPIC: &str = "__cluster_metadata";

pub(super) fn describe(
    ctx: &ListenerContext,
    req: DescribeQuorumRequest,
    version: i16,
) -> DescribeQuorumResponse {
    let metrics = ctx.raft.metrics().borrow().clone();
    if metrics.current_leader != Some(ctx.node_id) {
        return DescribeQuorumResponse {
            error_code: ErrorCode::NotController.code(),
            error_message: (version >= 2).then(|| {
                format!(
                    "node {} is not the active controller (leader {:?})",
                    ctx.node_id, metrics.current_leader
                )
            }),
            ..Default::default()
        };
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(-1, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let leader_end = metrics.last_log_index;
    let matched = |id: u64| -> Option<u64> {
        if id == ctx.node_id {
            return leader_end;
        }
        metrics
            .replication
            .as_ref()
            .and_then(|r| r.get(&id).copied().flatten())
            .map(|log_id| log_id.index)
    };
    let voters: Vec<u64> = metrics.membership_config.voter_ids().collect();
    // Committed: the highest index a majority of voters hold.
    let mut held: Vec<Option<u64>> = voters.iter().map(|v| matched(*v)).collect();
    held.sort_unstable_by(|a, b| b.cmp(a));
    let committed = held.get(voters.len() / 2).copied().flatten();
    let offset = |index: Option<u64>| index.map_or(-1, |i| i64::try_from(i + 1).unwrap_or(-1));
    let current_voters = voters
        .iter()
        .map(|&id| {
            let m = matched(id);
            let caught_up = m.is_some() && m == leader_end;
            ReplicaState {
                replica_id: id as i32,
                log_end_offset: offset(m),
                last_fetch_timestamp: -1,
                last_caught_up_timestamp: if caught_up { now_ms } else { -1 },
                ..Default::default()
            }
        })
        .collect::<Vec<_>>();
    let partition = |index: i32| PartitionData {
        partition_index: index,
        leader_id: ctx.node_id as i32,
        leader_epoch: i32::try_from(metrics.current_term).unwrap_or(i32::MAX),
        high_watermark: offset(committed),
        current_voters: current_voters.clone(),
        observers: Vec::new(),
        error_message: (version >= 2).then(String::new),
        ..Default::default()
    };
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let known = t.topic_name == METADATA_TOPIC;
            TopicData {
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| {
                        if known && p.partition_index == 0 {
                            partition(0)
                        } else {
                            PartitionData {
                                partition_index: p.partition_index,
                                error_code: ErrorCode::UnknownTopicOrPartition.code(),
                                leader_id: -1,
                                leader_epoch: -1,
                                high_watermark: -1,
                                error_message: (version >= 2).then(String::new),
                                ..Default::default()
                            }
                        }
                    })
                    .collect(),
                topic_name: t.topic_name,
                ..Default::default()
            }
        })
        .collect();
    let nodes = if version >= 2 {
        ctx.voters
            .iter()
            .map(|(id, addr)| Node {
                node_id: *id as i32,
                listeners: split_host_port(addr)
                    .map(|(host, port)| Listener {
                        name: "CONTROLLER".into(),
                        host,
                        port,
                        ..Default::default()
                    })
                    .into_iter()
                    .collect(),
                ..Default::default()
            })
            .collect()
    } else {
        Vec::new()
    };
    DescribeQuorumResponse {
        error_code: ErrorCode::None.code(),
        error_message: (version >= 2).then(String::new),
        topics,
        nodes,
        ..Default::default()
    }
}

/// `host:port` (or `[v6]:port`) split at the last colon.
pub fn split_host_port(addr: &str) -> Option<(String, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_string(), port.parse().ok()?))
}
