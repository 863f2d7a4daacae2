//! ListOffsets: earliest (-2), latest (-1), max timestamp (-3), by time;
//! with read_committed, bounded by the last stable offset (LATEST answers
//! it) instead of the high watermark.

use weir_acl::{Operation, ResourceType};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use weir_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse, ResponseBody};

use super::{Reply, RequestContext};
use crate::broker::Broker;
use crate::codes;

pub const LATEST: i64 = -1;
pub const EARLIEST: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;
pub const EARLIEST_LOCAL: i64 = -4;
pub const LATEST_TIERED: i64 = -5;

/// (error code, timestamp, offset) for one partition.
pub fn lookup(
    b: &Broker,
    topic: &str,
    partition: i32,
    timestamp: i64,
    read_committed: bool,
) -> (ErrorCode, i64, i64) {
    let Some(log) = b.replicas.log(topic, partition) else {
        return (
            b.replicas
                .missing_log_error(b.topic(topic).as_ref(), partition),
            -1,
            -1,
        );
    };
    // Consumers see only below the HW; read_committed ones below the LSO
    // (Kafka's `lastFetchableOffset`).
    let fetchable = if read_committed {
        b.replicas.last_stable_offset(&log)
    } else {
        log.high_watermark()
    };
    match timestamp {
        LATEST => (ErrorCode::None, -1, fetchable),
        EARLIEST | EARLIEST_LOCAL => (ErrorCode::None, -1, log.log_start_offset()),
        LATEST_TIERED => (ErrorCode::None, -1, -1),
        MAX_TIMESTAMP => match log.max_timestamp_offset() {
            Ok(Some((offset, ts))) if offset < fetchable => (ErrorCode::None, ts, offset),
            Ok(_) => (ErrorCode::None, -1, -1),
            Err(e) => (codes::from_storage(&e), -1, -1),
        },
        ts if ts < 0 => (ErrorCode::InvalidRequest, -1, -1),
        ts => match log.offset_for_timestamp(ts) {
            Ok(Some((offset, found_ts))) if offset < fetchable => {
                (ErrorCode::None, found_ts, offset)
            }
            Ok(_) => (ErrorCode::None, -1, -1),
            Err(e) => (codes::from_storage(&e), -1, -1),
        },
    }
}

pub fn handle(ctx: &RequestContext, req: ListOffsetsRequest) -> Reply {
    let b = &ctx.broker;
    let snap = b.cluster();
    let node_id = b.config.node_id;
    let read_committed = req.isolation_level == 1;
    let version = ctx.api_version;
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            // Kafka checks DESCRIBE before it looks the topic up
            let describable = ctx.authorize(Operation::Describe, ResourceType::Topic, &t.name);
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    if !describable {
                        return ListOffsetsPartitionResponse {
                            partition_index: p.partition_index,
                            error_code: ErrorCode::TopicAuthorizationFailed.code(),
                            timestamp: -1,
                            offset: -1,
                            leader_epoch: -1,
                            ..Default::default()
                        };
                    }
                    let leadership = snap.check_leader(
                        node_id,
                        &t.name,
                        p.partition_index,
                        p.current_leader_epoch,
                    );
                    let (error_code, timestamp, offset) = match leadership {
                        // unknown partitions: answered from the logs
                        Err(e) if e.code != ErrorCode::UnknownTopicOrPartition => (e.code, -1, -1),
                        _ => lookup(b, &t.name, p.partition_index, p.timestamp, read_committed),
                    };
                    ListOffsetsPartitionResponse {
                        partition_index: p.partition_index,
                        error_code: error_code.code(),
                        timestamp,
                        offset,
                        // a field of v4+ that older versions cannot carry
                        leader_epoch: match leadership {
                            Ok(epoch) if error_code.is_ok() && version >= 4 => epoch,
                            _ => -1,
                        },
                        ..Default::default()
                    }
                })
                .collect();
            ListOffsetsTopicResponse {
                name: t.name,
                partitions,
                ..Default::default()
            }
        })
        .collect();
    Reply::Body(ResponseBody::ListOffsets(ListOffsetsResponse {
        throttle_time_ms: 0,
        topics,
        ..Default::default()
    }))
}
