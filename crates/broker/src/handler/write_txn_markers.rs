//! WriteTxnMarkers (v1): the transaction coordinator's COMMIT and ABORT
//! markers, appended to each partition this broker leads as a control batch
//! (control and transactional flags, the marker's producer id and epoch, no
//! sequence, one record: ControlRecordType and EndTransactionMarker, both
//! version 0), with acks=all semantics: the answer for a partition waits
//! until its in-sync replicas have the marker (or a 30 s timeout, Kafka's
//! default `request.timeout.ms`).
//!
//! Per partition: NONE; NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION
//! when this broker does not lead it; INVALID_PRODUCER_EPOCH for a marker
//! of an older producer epoch than the partition knows (nothing appended);
//! TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch;
//! NOT_ENOUGH_REPLICAS(_AFTER_APPEND) and REQUEST_TIMED_OUT as for an
//! acks=all Produce. A marker landing on a `__consumer_offsets` partition
//! then completes the producer's pending transactional offsets there
//! (`Groups::complete_txn`), once replicated.

use std::sync::Arc;
use std::time::Duration;

use weir_acl::Operation;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use weir_protocol::messages::{ResponseBody, WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use weir_storage::TopicPartition;

use super::produce::{PendingFlush, min_insync_replicas};
use super::{Reply, RequestContext};
use crate::broker::Broker;
use crate::groups::OFFSETS_TOPIC;
use crate::producer_state::MarkerRefusal;
use crate::txn_partition::{MarkerAppended, MarkerError, TxnMarker};

/// How long a marker waits for the in-sync replicas (Kafka's default
/// `request.timeout.ms`, which its coordinator-origin appends use).
const REPLICATION_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a partition's answer goes: (marker, topic, partition) indexes.
type Slot = (usize, usize, usize);

/// A marker appended, still to be made durable and replicated.
struct Pending {
    slot: Slot,
    tp: TopicPartition,
    marker: TxnMarker,
    appended: MarkerAppended,
    min_isr: usize,
}

/// Appends `marker` to `topic`-`partition` as its leader.
fn append(
    b: &Broker,
    topic: &str,
    partition: i32,
    marker: TxnMarker,
) -> Result<(MarkerAppended, Arc<weir_storage::Log>), ErrorCode> {
    let snap = b.cluster();
    snap.check_leader(b.config.node_id, topic, partition, -1)
        .map_err(|refused| refused.code)?;
    let Some(log) = b.replicas.log(topic, partition) else {
        return Err(b
            .replicas
            .missing_log_error(b.topic(topic).as_ref(), partition));
    };
    let isr = snap.partition(topic, partition).map_or(1, |p| p.isr.len());
    if (isr as i64) < min_insync_replicas(b, topic) {
        return Err(ErrorCode::NotEnoughReplicas);
    }
    match b.replicas.append_marker(&log, marker, b.now_ms()) {
        Ok(appended) => Ok((appended, log)),
        Err(MarkerError::NotLeader) => Err(ErrorCode::NotLeaderOrFollower),
        Err(MarkerError::Refused(MarkerRefusal::Fenced { .. })) => {
            Err(ErrorCode::InvalidProducerEpoch)
        }
        Err(MarkerError::Refused(MarkerRefusal::CoordinatorFenced { .. })) => {
            Err(ErrorCode::TransactionCoordinatorFenced)
        }
        Err(MarkerError::Storage(e)) => {
            tracing::warn!(topic, partition, error = %e, "transaction marker append failed");
            Err(crate::codes::from_storage(&e))
        }
    }
}

/// Every marker's partitions answered `code`.
fn refuse_all(req: &WriteTxnMarkersRequest, code: ErrorCode) -> Reply {
    let markers = req
        .markers
        .iter()
        .map(|wm| WritableTxnMarkerResult {
            producer_id: wm.producer_id,
            topics: wm
                .topics
                .iter()
                .map(|t| WritableTxnMarkerTopicResult {
                    name: t.name.clone(),
                    partitions: t
                        .partition_indexes
                        .iter()
                        .map(|&partition_index| WritableTxnMarkerPartitionResult {
                            partition_index,
                            error_code: code.code(),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    Reply::Body(ResponseBody::WriteTxnMarkers(WriteTxnMarkersResponse {
        markers,
        ..Default::default()
    }))
}

pub async fn handle(ctx: &RequestContext, req: WriteTxnMarkersRequest) -> Reply {
    // sent by transaction coordinators: Kafka asks for ALTER or
    // CLUSTER_ACTION on the cluster
    if !ctx.authorize_cluster(Operation::Alter) && !ctx.authorize_cluster(Operation::ClusterAction)
    {
        return refuse_all(&req, ErrorCode::ClusterAuthorizationFailed);
    }
    let b = Arc::clone(&ctx.broker);
    let mut response = Vec::with_capacity(req.markers.len());
    let mut pending = Vec::new();
    let mut flushes = Vec::new();
    // The appends touch files (and may load a partition's producer state).
    super::blocking(|| {
        for (m, wm) in req.markers.iter().enumerate() {
            let marker = TxnMarker {
                producer_id: wm.producer_id,
                producer_epoch: wm.producer_epoch,
                coordinator_epoch: wm.coordinator_epoch,
                commit: wm.transaction_result,
            };
            let mut topics = Vec::with_capacity(wm.topics.len());
            for (t, topic) in wm.topics.iter().enumerate() {
                let mut partitions = Vec::with_capacity(topic.partition_indexes.len());
                for (p, &partition) in topic.partition_indexes.iter().enumerate() {
                    let code = match append(&b, &topic.name, partition, marker) {
                        Ok((appended, log)) => {
                            if let Some(end_offset) = appended.flush {
                                flushes.push((
                                    (m, t, p),
                                    PendingFlush {
                                        log,
                                        end_offset,
                                        now_ms: b.now_ms(),
                                    },
                                ));
                            }
                            pending.push(Pending {
                                slot: (m, t, p),
                                tp: TopicPartition::new(topic.name.clone(), partition),
                                marker,
                                appended,
                                min_isr: usize::try_from(min_insync_replicas(&b, &topic.name))
                                    .unwrap_or(1),
                            });
                            ErrorCode::None
                        }
                        Err(code) => {
                            tracing::debug!(
                                topic = %topic.name, partition, producer = marker.producer_id,
                                epoch = marker.producer_epoch, code = code.code(),
                                "transaction marker refused"
                            );
                            code
                        }
                    };
                    partitions.push(WritableTxnMarkerPartitionResult {
                        partition_index: partition,
                        error_code: code.code(),
                        ..Default::default()
                    });
                }
                topics.push(WritableTxnMarkerTopicResult {
                    name: topic.name.clone(),
                    partitions,
                    ..Default::default()
                });
            }
            response.push(WritableTxnMarkerResult {
                producer_id: wm.producer_id,
                topics,
                ..Default::default()
            });
        }
    });
    let started: Vec<_> = flushes
        .into_iter()
        .map(|(slot, f)| (slot, f.start()))
        .collect();
    Reply::Later(Box::pin(async move {
        let mut response = response;
        let set =
            |response: &mut Vec<WritableTxnMarkerResult>, (m, t, p): Slot, code: ErrorCode| {
                if let Some(r) = response
                    .get_mut(m)
                    .and_then(|r| r.topics.get_mut(t))
                    .and_then(|t| t.partitions.get_mut(p))
                {
                    r.error_code = code.code();
                }
            };
        for (slot, task) in started {
            let failed = match task.await {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(crate::codes::from_storage(&e)),
                Err(_) => Some(ErrorCode::KafkaStorageError),
            };
            if let Some(code) = failed {
                set(&mut response, slot, code);
            }
        }
        let deadline = tokio::time::Instant::now() + REPLICATION_TIMEOUT;
        for p in pending {
            let failed = response
                .get(p.slot.0)
                .and_then(|r| r.topics.get(p.slot.1))
                .and_then(|t| t.partitions.get(p.slot.2))
                .is_some_and(|r| r.error_code != ErrorCode::None.code());
            if failed {
                continue;
            }
            if let Some(epoch) = p.appended.replicated_in {
                let code = b
                    .replicas
                    .wait_for_replication_in(
                        &p.tp,
                        p.appended.offset + 1,
                        p.min_isr,
                        Some(epoch),
                        deadline,
                    )
                    .await;
                if !code.is_ok() {
                    set(&mut response, p.slot, code);
                    continue;
                }
            }
            if p.tp.topic == OFFSETS_TOPIC
                && let Some(groups) = b.groups()
            {
                groups.complete_txn(&b, p.tp.partition, p.marker.producer_id, p.marker.commit);
            }
        }
        Reply::Body(ResponseBody::WriteTxnMarkers(WriteTxnMarkersResponse {
            markers: response,
            ..Default::default()
        }))
    }))
}
