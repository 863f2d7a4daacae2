//! DeleteRecords: moves the log start offset (-1 = the high watermark).
//! Internal topics are refused with INVALID_TOPIC_EXCEPTION, as in Kafka.

use weir_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use weir_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse, ResponseBody};

use super::{Reply, RequestContext};
use crate::codes;

pub fn handle(ctx: &RequestContext, req: DeleteRecordsRequest) -> Reply {
    let b = &ctx.broker;
    let topics = req
        .topics
        .iter()
        .map(|t| DeleteRecordsTopicResult {
            name: t.name.clone(),
            partitions: t
                .partitions
                .iter()
                .map(|p| {
                    let (error_code, low_watermark) = match b.log(&t.name, p.partition_index) {
                        None => (codes::UNKNOWN_TOPIC_OR_PARTITION, -1),
                        // as Kafka's ReplicaManager: "Cannot delete records
                        // of internal topic"
                        Some(_) if crate::groups::is_internal_topic(&t.name) => {
                            (codes::INVALID_TOPIC_EXCEPTION, -1)
                        }
                        Some(log) => {
                            let hw = log.high_watermark();
                            let target = if p.offset == -1 { hw } else { p.offset };
                            if target < 0 || target > hw {
                                (codes::OFFSET_OUT_OF_RANGE, -1)
                            } else {
                                // The new log start is checkpointed before the
                                // reply; retention deletes the segments below it.
                                let moved = || {
                                    let start = log.delete_records_before(target)?;
                                    b.logs.checkpoint()?;
                                    Ok::<_, weir_storage::StorageError>(start)
                                };
                                match super::blocking(moved) {
                                    Ok(start) => (codes::NONE, start),
                                    Err(e) => (codes::from_storage(&e), -1),
                                }
                            }
                        }
                    };
                    DeleteRecordsPartitionResult {
                        partition_index: p.partition_index,
                        low_watermark,
                        error_code,
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
