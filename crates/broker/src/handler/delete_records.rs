//! DeleteRecords: moves the log start offset (-1 = the high watermark) of
//! partitions this broker leads.
//! Internal topics are refused with INVALID_TOPIC_EXCEPTION, as in Kafka.

use weir_acl::{Operation, ResourceType};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use weir_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse, ResponseBody};

use super::{Reply, RequestContext};
use crate::codes;

pub fn handle(ctx: &RequestContext, req: DeleteRecordsRequest) -> Reply {
    let b = &ctx.broker;
    let snap = b.cluster();
    let node_id = b.config.node_id;
    let topics = req
        .topics
        .iter()
        .map(|t| DeleteRecordsTopicResult {
            name: t.name.clone(),
            partitions: t
                .partitions
                .iter()
                .map(|p| {
                    // before the topic's existence, as Kafka checks
                    if !ctx.authorize(Operation::Delete, ResourceType::Topic, &t.name) {
                        return DeleteRecordsPartitionResult {
                            partition_index: p.partition_index,
                            low_watermark: -1,
                            error_code: ErrorCode::TopicAuthorizationFailed.code(),
                            ..Default::default()
                        };
                    }
                    let leadership = snap.check_leader(node_id, &t.name, p.partition_index, -1);
                    let log = b.replicas.log(&t.name, p.partition_index);
                    let (error_code, low_watermark) = match (leadership, log) {
                        (Err(e), _) => (e.code, -1),
                        (Ok(_), None) => (ErrorCode::UnknownTopicOrPartition, -1),
                        // as Kafka's ReplicaManager: "Cannot delete records
                        // of internal topic"
                        (Ok(_), Some(_)) if crate::groups::is_internal_topic(&t.name) => {
                            (ErrorCode::InvalidTopicException, -1)
                        }
                        (Ok(_), Some(log)) => {
                            let hw = log.high_watermark();
                            let target = if p.offset == -1 { hw } else { p.offset };
                            if target < 0 || target > hw {
                                (ErrorCode::OffsetOutOfRange, -1)
                            } else {
                                // The new log start is checkpointed before the
                                // reply; retention deletes the segments below it.
                                let moved = || {
                                    let start = log.delete_records_before(target)?;
                                    b.replicas.logs().checkpoint()?;
                                    Ok::<_, weir_storage::StorageError>(start)
                                };
                                match super::blocking(moved) {
                                    Ok(start) => (ErrorCode::None, start),
                                    Err(e) => (codes::from_storage(&e), -1),
                                }
                            }
                        }
                    };
                    DeleteRecordsPartitionResult {
                        partition_index: p.partition_index,
                        low_watermark,
                        error_code: error_code.code(),
                        ..Default::default()
                    }
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    Reply::Body(ResponseBody::DeleteRecords(DeleteRecordsResponse {
        throttle_time_ms: 0,
        topics,
        ..Default::default()
    }))
}
