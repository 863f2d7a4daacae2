//! DescribeLogDirs: partition sizes per data dir (KAFKA_STORAGE_ERROR for a
//! dir that is offline), and segment counts for
//! a client that asks with weir's extension tag
//! ([`weir_protocol::weir_ext::SEGMENT_COUNT_TAG`]); without it the response
//! is what Kafka sends.

use std::collections::BTreeMap;

use weir_acl::Operation;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use weir_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, ResponseBody};
use weir_protocol::weir_ext;

use super::{Reply, RequestContext};

pub fn handle(ctx: &RequestContext, req: DescribeLogDirsRequest) -> Reply {
    let b = &ctx.broker;
    // Kafka: DESCRIBE on the cluster, else no dirs and the error (v3+)
    if !ctx.authorize_cluster(Operation::Describe) {
        return Reply::Body(ResponseBody::DescribeLogDirs(DescribeLogDirsResponse {
            error_code: ErrorCode::ClusterAuthorizationFailed.code(),
            results: Vec::new(),
            ..Default::default()
        }));
    }
    let segment_counts = weir_ext::wants_segment_counts(&req);
    let wanted = |topic: &str, p: i32| -> bool {
        match &req.topics {
            None => true,
            Some(ts) => ts
                .iter()
                .any(|t| t.topic == topic && t.partitions.contains(&p)),
        }
    };
    // dir -> topic -> partitions
    let mut by_dir: BTreeMap<String, BTreeMap<String, Vec<DescribeLogDirsPartition>>> =
        BTreeMap::new();
    for d in &b.config.log_dirs {
        by_dir.entry(d.display().to_string()).or_default();
    }
    for log in b.replicas.logs().logs() {
        let tp = log.topic_partition();
        if !wanted(&tp.topic, tp.partition) {
            continue;
        }
        let dir = log
            .dir()
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let mut partition = DescribeLogDirsPartition {
            partition_index: tp.partition,
            partition_size: log.size_bytes() as i64,
            offset_lag: 0,
            is_future_key: false,
            ..Default::default()
        };
        if segment_counts {
            weir_ext::set_segment_count(&mut partition, log.segment_count() as u64);
        }
        by_dir
            .entry(dir)
            .or_default()
            .entry(tp.topic.clone())
            .or_default()
            .push(partition);
    }
    // A log dir taken offline at start answers KAFKA_STORAGE_ERROR, as in
    // Kafka, and lists nothing.
    let offline: Vec<String> = b
        .replicas
        .logs()
        .offline_dirs()
        .keys()
        .map(|d| d.display().to_string())
        .collect();
    let results = by_dir
        .into_iter()
        .map(|(dir, topics)| DescribeLogDirsResult {
            error_code: if offline.contains(&dir) {
                ErrorCode::KafkaStorageError
            } else {
                ErrorCode::None
            }
            .code(),
            log_dir: dir,
            topics: topics
                .into_iter()
                .map(|(name, mut partitions)| {
                    partitions.sort_by_key(|p| p.partition_index);
                    DescribeLogDirsTopic {
                        name,
                        partitions,
                        ..Default::default()
                    }
                })
                .collect(),
            total_bytes: -1,
            usable_bytes: -1,
            ..Default::default()
        })
        .collect();
    Reply::Body(ResponseBody::DescribeLogDirs(DescribeLogDirsResponse {
        throttle_time_ms: 0,
        error_code: ErrorCode::None.code(),
        results,
        ..Default::default()
    }))
}
