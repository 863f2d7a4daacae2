//! The metadata log for brokers that are not voters (`process.roles=broker`):
//! Fetch and FetchSnapshot on `__cluster_metadata` partition 0, as KRaft's
//! observers read it.
//!
//! - **Fetch**: `fetch_offset` is the next raft index the broker wants.
//!   The active controller answers with the batches applied from there on,
//!   each as one Kafka record batch whose base offset is the raft index and
//!   whose single record's value is the metadata batch
//!   ([`crate::batch`]). With nothing new it waits up to `max_wait_ms`
//!   (capped at [`MAX_WAIT`]) for the next batch. `high_watermark` is the
//!   applied index + 1. A broker further behind than the batches kept
//!   ([`ImageReader::batches_after`]) gets no records but a `snapshot_id`
//!   (end offset = snapshot index + 1, epoch 0).
//! - **FetchSnapshot**: the bytes of that snapshot
//!   ([`crate::image::snapshot_bytes`]) from `position`, at most
//!   `max_bytes` at a time; SNAPSHOT_NOT_FOUND once the image moved on
//!   (the broker fetches again and gets a newer snapshot id).
//!
//! Only the active controller answers; every other node answers
//! NOT_LEADER_OR_FOLLOWER with the leader it knows, so the broker's
//! [`ControllerClient`](crate::client::ControllerClient) moves on. Every
//! batch served was applied, so committed: a broker never sees metadata
//! the quorum could lose.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::fetch_response::{
    FetchableTopicResponse, LeaderIdAndEpoch, PartitionData, SnapshotId,
};
use weir_protocol::messages::fetch_snapshot_response::{self, PartitionSnapshot, TopicSnapshot};
use weir_protocol::messages::{
    FetchRequest, FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse,
};
use weir_protocol::records::{Compression, RecordBatchBuilder};

use super::{ListenerContext, METADATA_TOPIC};
use crate::image::RetainedBatches;

/// The metadata log's topic id, as in KRaft (`AAAAAAAAAAAAAAAAAAAAAQ`).
pub const METADATA_TOPIC_ID: Uuid = Uuid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
/// Longest a fetch waits for a new batch, whatever it asks.
pub const MAX_WAIT: Duration = Duration::from_secs(10);
/// Most bytes of batches or snapshot in one answer, whatever is asked.
pub const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;

fn is_metadata_topic(name: &str, id: &Uuid) -> bool {
    name == METADATA_TOPIC || *id == METADATA_TOPIC_ID
}

/// The leader this node knows and the raft term, as KRaft's leader epoch.
fn current_leader(ctx: &ListenerContext) -> (i32, i32) {
    let m = ctx.raft.metrics().borrow().clone();
    let leader = m
        .current_leader
        .and_then(|l| i32::try_from(l).ok())
        .unwrap_or(-1);
    (leader, i32::try_from(m.current_term).unwrap_or(i32::MAX))
}

fn bounded(max_bytes: i32) -> usize {
    usize::try_from(max_bytes)
        .unwrap_or(0)
        .clamp(1, MAX_RESPONSE_BYTES)
}

/// Answers a Fetch of the metadata log.
pub async fn fetch(ctx: &ListenerContext, req: FetchRequest) -> FetchResponse {
    let mut resp = FetchResponse::default();
    if let (Some(ours), Some(theirs)) = (&ctx.cluster_id, &req.cluster_id)
        && ours != theirs
    {
        resp.error_code = ErrorCode::InconsistentClusterId.code();
        return resp;
    }
    let mut wanted = None;
    for t in &req.topics {
        let mut topic = FetchableTopicResponse {
            topic: t.topic.clone(),
            topic_id: t.topic_id,
            ..Default::default()
        };
        for p in &t.partitions {
            let mut data = PartitionData {
                partition_index: p.partition,
                ..Default::default()
            };
            if !is_metadata_topic(&t.topic, &t.topic_id) || p.partition != 0 || wanted.is_some() {
                data.error_code = ErrorCode::UnknownTopicOrPartition.code();
            } else {
                wanted = Some((p.fetch_offset, p.partition_max_bytes));
            }
            topic.partitions.push(data);
        }
        resp.responses.push(topic);
    }
    let Some((fetch_offset, partition_max_bytes)) = wanted else {
        return resp;
    };
    let max_bytes = bounded(partition_max_bytes.min(req.max_bytes));
    let after = u64::try_from(fetch_offset.saturating_sub(1)).unwrap_or(0);
    let wait = Duration::from_millis(u64::try_from(req.max_wait_ms).unwrap_or(0)).min(MAX_WAIT);
    let data = if ctx.controller.is_active() {
        answer(ctx, after, max_bytes, wait).await
    } else {
        PartitionData {
            error_code: ErrorCode::NotLeaderOrFollower.code(),
            ..Default::default()
        }
    };
    let (leader_id, leader_epoch) = current_leader(ctx);
    for p in resp
        .responses
        .iter_mut()
        .flat_map(|t| t.partitions.iter_mut())
        .filter(|p| p.error_code == ErrorCode::None.code())
    {
        *p = PartitionData {
            partition_index: 0,
            current_leader: LeaderIdAndEpoch {
                leader_id,
                leader_epoch,
                ..Default::default()
            },
            ..data.clone()
        };
    }
    resp
}

/// The partition's answer on the active controller: the batches after
/// `after`, waiting up to `wait` for one, or a snapshot id.
async fn answer(
    ctx: &ListenerContext,
    after: u64,
    max_bytes: usize,
    wait: Duration,
) -> PartitionData {
    let mut published = ctx.images.watch();
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let high_watermark = i64::try_from(ctx.images.current().index)
            .unwrap_or(i64::MAX)
            .saturating_add(1);
        match ctx.images.batches_after(after, max_bytes) {
            RetainedBatches::Behind => {
                let (index, _) = ctx.images.snapshot();
                return PartitionData {
                    high_watermark,
                    snapshot_id: SnapshotId {
                        end_offset: i64::try_from(index).unwrap_or(i64::MAX).saturating_add(1),
                        epoch: 0,
                        ..Default::default()
                    },
                    ..Default::default()
                };
            }
            RetainedBatches::Batches(batches) if !batches.is_empty() => {
                return match encode(&batches) {
                    Ok(records) => PartitionData {
                        high_watermark,
                        records: Some(records),
                        ..Default::default()
                    },
                    Err(e) => {
                        tracing::error!(error = %e, "metadata batches do not encode as records");
                        PartitionData {
                            error_code: ErrorCode::UnknownServerError.code(),
                            ..Default::default()
                        }
                    }
                };
            }
            RetainedBatches::Batches(_) => {}
        }
        // Nothing new: wait for the next publish or the deadline.
        match tokio::time::timeout_at(deadline, published.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) | Err(_) => {
                return PartitionData {
                    high_watermark,
                    records: Some(Bytes::new()),
                    ..Default::default()
                };
            }
        }
    }
}

/// Each batch as one record batch at its raft index.
fn encode(batches: &[(u64, Bytes)]) -> Result<Bytes, weir_protocol::records::RecordsError> {
    let mut out = BytesMut::new();
    for (index, payload) in batches {
        let mut b = RecordBatchBuilder::new(Compression::None)
            .base_offset(i64::try_from(*index).unwrap_or(i64::MAX));
        b.push(0, None, Some(payload.clone()), Vec::new())?;
        out.extend_from_slice(b.build()?.as_bytes());
    }
    Ok(out.freeze())
}

/// Answers a FetchSnapshot of the metadata log.
pub fn fetch_snapshot(ctx: &ListenerContext, req: FetchSnapshotRequest) -> FetchSnapshotResponse {
    let mut resp = FetchSnapshotResponse::default();
    if let (Some(ours), Some(theirs)) = (&ctx.cluster_id, &req.cluster_id)
        && ours != theirs
    {
        resp.error_code = ErrorCode::InconsistentClusterId.code();
        return resp;
    }
    let (leader_id, leader_epoch) = current_leader(ctx);
    let active = ctx.controller.is_active();
    let max_bytes = bounded(req.max_bytes);
    for t in &req.topics {
        let mut topic = TopicSnapshot {
            name: t.name.clone(),
            ..Default::default()
        };
        for p in &t.partitions {
            let mut out = PartitionSnapshot {
                index: p.partition,
                snapshot_id: fetch_snapshot_response::SnapshotId {
                    end_offset: p.snapshot_id.end_offset,
                    epoch: p.snapshot_id.epoch,
                    ..Default::default()
                },
                current_leader: fetch_snapshot_response::LeaderIdAndEpoch {
                    leader_id,
                    leader_epoch,
                    ..Default::default()
                },
                ..Default::default()
            };
            let index = u64::try_from(p.snapshot_id.end_offset.saturating_sub(1)).ok();
            let snapshot = index.and_then(|i| ctx.images.served_snapshot(i));
            match snapshot {
                _ if t.name != METADATA_TOPIC || p.partition != 0 => {
                    out.error_code = ErrorCode::UnknownTopicOrPartition.code();
                }
                _ if !active => out.error_code = ErrorCode::NotLeaderOrFollower.code(),
                None => out.error_code = ErrorCode::SnapshotNotFound.code(),
                Some(bytes) => {
                    let start = usize::try_from(p.position).unwrap_or(usize::MAX);
                    if start > bytes.len() {
                        out.error_code = ErrorCode::PositionOutOfRange.code();
                    } else {
                        let end = bytes.len().min(start.saturating_add(max_bytes));
                        out.size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
                        out.position = p.position;
                        out.unaligned_records = Some(bytes.slice(start..end));
                    }
                }
            }
            topic.partitions.push(out);
        }
        resp.topics.push(topic);
    }
    resp
}
