//! [`MetadataObserver`]: the metadata image of a broker that is not a voter
//! (`process.roles=broker`). It fetches the metadata log from the active
//! controller (Fetch on `__cluster_metadata`, see
//! [`crate::listener::metadata_fetch`]) and applies each batch to its own
//! [`ImageStateMachine`], so everything that reads an [`ImageReader`]
//! works on it as on a voter's image. A broker further behind than the
//! controller keeps batches, or starting empty, loads a snapshot first
//! (FetchSnapshot).
//!
//! Nothing is kept on disk: a restarted broker reads the image again from
//! the controller (one snapshot and the batches after it). Its metadata
//! offset (the image's index, reported in heartbeats) only moves forward
//! while it runs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::task::JoinHandle;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use weir_protocol::messages::fetch_snapshot_request::{self, PartitionSnapshot, TopicSnapshot};
use weir_protocol::messages::{FetchRequest, FetchSnapshotRequest};
use weir_protocol::records::{BatchIter, DecompressLimits};
use weir_raft::MetadataStateMachine;

use crate::client::{ControllerClient, ControllerClientConfig};
use crate::image::{ImageReader, ImageStateMachine};
use crate::listener::METADATA_TOPIC;
use crate::listener::metadata_fetch::{MAX_RESPONSE_BYTES, METADATA_TOPIC_ID};

/// Largest snapshot a broker accepts.
pub const MAX_SNAPSHOT_BYTES: i64 = 1 << 30;

/// How a [`MetadataObserver`] fetches.
#[derive(Debug, Clone)]
pub struct ObserverConfig {
    /// This broker's `node.id` (the fetch's replica id).
    pub node_id: i32,
    /// Sent with every fetch; a controller of another cluster refuses.
    pub cluster_id: Option<String>,
    /// How long one fetch waits at the controller for a new batch.
    pub max_wait: Duration,
    /// Pause after a failed fetch before the next.
    pub retry_backoff: Duration,
    pub client: ControllerClientConfig,
}

impl ObserverConfig {
    pub fn new(node_id: i32) -> Self {
        ObserverConfig {
            node_id,
            cluster_id: None,
            max_wait: Duration::from_millis(500),
            retry_backoff: Duration::from_millis(100),
            client: ControllerClientConfig {
                client_id: format!("weir-metadata-observer-{node_id}"),
                ..ControllerClientConfig::default()
            },
        }
    }
}

/// A running fetch of the metadata log; stops when dropped.
pub struct MetadataObserver {
    images: ImageReader,
    leader: Arc<AtomicI64>,
    task: JoinHandle<()>,
}

impl MetadataObserver {
    /// Starts fetching from the voters `id -> host:port` (their CONTROLLER
    /// listeners).
    pub fn start(voters: BTreeMap<u64, String>, config: ObserverConfig) -> Self {
        let (sm, images) = ImageStateMachine::with_retained(1);
        let leader = Arc::new(AtomicI64::new(-1));
        let client = ControllerClient::new(voters, config.client.clone());
        let task = tokio::spawn(run(sm, client, config, Arc::clone(&leader)));
        MetadataObserver {
            images,
            leader,
            task,
        }
    }

    /// The image this broker applies.
    pub fn images(&self) -> ImageReader {
        self.images.clone()
    }

    /// The active controller, as the last fetch answer named it.
    pub fn leader(&self) -> Option<u64> {
        u64::try_from(self.leader.load(Ordering::Relaxed)).ok()
    }

    /// A shared reader of [`leader`](Self::leader).
    pub fn leader_reader(&self) -> Arc<dyn Fn() -> Option<u64> + Send + Sync> {
        let leader = Arc::clone(&self.leader);
        Arc::new(move || u64::try_from(leader.load(Ordering::Relaxed)).ok())
    }
}

impl Drop for MetadataObserver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run(
    mut sm: ImageStateMachine,
    client: ControllerClient,
    config: ObserverConfig,
    leader: Arc<AtomicI64>,
) {
    let mut applied = 0u64;
    let mut failing = false;
    loop {
        match fetch_once(&mut sm, &client, &config, &leader, &mut applied).await {
            Ok(()) => {
                if failing {
                    tracing::info!(applied, "fetching the metadata log again");
                    failing = false;
                }
            }
            Err(why) => {
                if !failing {
                    tracing::warn!(%why, applied, "fetching the metadata log failed; retrying");
                    failing = true;
                } else {
                    tracing::debug!(%why, "metadata fetch failed");
                }
                tokio::time::sleep(config.retry_backoff).await;
            }
        }
    }
}

/// One fetch: applies the batches it returns, or loads the snapshot it
/// points to.
async fn fetch_once(
    sm: &mut ImageStateMachine,
    client: &ControllerClient,
    config: &ObserverConfig,
    leader: &AtomicI64,
    applied: &mut u64,
) -> Result<(), String> {
    let req = FetchRequest {
        cluster_id: config.cluster_id.clone(),
        // v15+ (weir's controllers speak v17): the replica id travels in
        // ReplicaState.
        replica_state: ReplicaState {
            replica_id: config.node_id,
            replica_epoch: -1,
            ..Default::default()
        },
        max_wait_ms: i32::try_from(config.max_wait.as_millis()).unwrap_or(i32::MAX),
        min_bytes: 1,
        max_bytes: MAX_RESPONSE_BYTES as i32,
        topics: vec![FetchTopic {
            topic: METADATA_TOPIC.into(),
            topic_id: METADATA_TOPIC_ID,
            partitions: vec![FetchPartition {
                partition: 0,
                fetch_offset: i64::try_from(*applied).unwrap_or(i64::MAX) + 1,
                partition_max_bytes: MAX_RESPONSE_BYTES as i32,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let resp = client.send(&req).await.map_err(|e| e.to_string())?;
    if resp.error_code != ErrorCode::None.code() {
        return Err(format!(
            "the controller answered {:?}",
            ErrorCode::from_code(resp.error_code)
        ));
    }
    let Some(p) = resp.responses.first().and_then(|t| t.partitions.first()) else {
        return Err("the controller's fetch answer has no partition".into());
    };
    if p.current_leader.leader_id >= 0 {
        leader.store(i64::from(p.current_leader.leader_id), Ordering::Relaxed);
    }
    if p.error_code != ErrorCode::None.code() {
        return Err(format!(
            "the controller answered {:?} for the metadata log",
            ErrorCode::from_code(p.error_code)
        ));
    }
    if p.snapshot_id.end_offset > 0 {
        let snapshot = fetch_snapshot(client, config, p.snapshot_id.end_offset).await?;
        sm.restore(&snapshot)?;
        *applied = u64::try_from(p.snapshot_id.end_offset - 1).unwrap_or(0);
        tracing::info!(index = *applied, "metadata image loaded from a snapshot");
        return Ok(());
    }
    let records = p.records.clone().unwrap_or_default();
    let limits = DecompressLimits::default();
    for batch in BatchIter::new(records) {
        let batch = batch.map_err(|e| format!("metadata records: {e}"))?;
        let Ok(index) = u64::try_from(batch.base_offset()) else {
            return Err(format!("metadata batch at offset {}", batch.base_offset()));
        };
        if index <= *applied {
            continue;
        }
        let record = batch
            .collect_records(&limits)
            .map_err(|e| format!("metadata records: {e}"))?
            .into_iter()
            .next();
        let payload = record.and_then(|r| r.value).unwrap_or_default();
        sm.apply(index, &payload)?;
        *applied = index;
    }
    Ok(())
}

/// Reads the snapshot ending at `end_offset` in chunks; an error (the
/// image moved on: SNAPSHOT_NOT_FOUND) sends the caller back to Fetch.
async fn fetch_snapshot(
    client: &ControllerClient,
    config: &ObserverConfig,
    end_offset: i64,
) -> Result<Bytes, String> {
    let mut out = BytesMut::new();
    loop {
        let req = FetchSnapshotRequest {
            cluster_id: config.cluster_id.clone(),
            replica_id: config.node_id,
            max_bytes: MAX_RESPONSE_BYTES as i32,
            topics: vec![TopicSnapshot {
                name: METADATA_TOPIC.into(),
                partitions: vec![PartitionSnapshot {
                    partition: 0,
                    current_leader_epoch: -1,
                    snapshot_id: fetch_snapshot_request::SnapshotId {
                        end_offset,
                        epoch: 0,
                        ..Default::default()
                    },
                    position: i64::try_from(out.len()).unwrap_or(i64::MAX),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let resp = client.send(&req).await.map_err(|e| e.to_string())?;
        let Some(p) = resp.topics.first().and_then(|t| t.partitions.first()) else {
            return Err(format!(
                "the controller's snapshot answer has no partition ({:?})",
                ErrorCode::from_code(resp.error_code)
            ));
        };
        if p.error_code != ErrorCode::None.code() {
            return Err(format!(
                "the controller answered {:?} for the metadata snapshot",
                ErrorCode::from_code(p.error_code)
            ));
        }
        if !(0..=MAX_SNAPSHOT_BYTES).contains(&p.size) {
            return Err(format!("metadata snapshot of {} bytes", p.size));
        }
        let chunk = p.unaligned_records.clone().unwrap_or_default();
        if p.position != i64::try_from(out.len()).unwrap_or(-1) {
            return Err("metadata snapshot chunk at the wrong position".into());
        }
        out.extend_from_slice(&chunk);
        let size = usize::try_from(p.size).unwrap_or(usize::MAX);
        if out.len() >= size {
            out.truncate(size);
            return Ok(out.freeze());
        }
        if chunk.is_empty() {
            return Err("empty metadata snapshot chunk before its end".into());
        }
    }
}
