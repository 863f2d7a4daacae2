//! Follower fetches: one task per leader broker, fetching every partition
//! this broker follows there in one Fetch request (Kafka's replica fetch:
//! `ReplicaState.replica_id` = this broker, `fetch_offset` = the local log
//! end offset, `last_fetched_epoch` = the local log's latest leader epoch).
//!
//! Per partition of an answer:
//! - records: appended as the leader wrote them (offsets, leader epochs
//!   and producer fields kept), then the local high watermark is the
//!   leader's, capped at the local log end offset;
//! - a diverging epoch (the local log has records of an epoch the leader
//!   ended earlier): the local log is truncated to the leader's end of that
//!   epoch before fetching again (KIP-320/KIP-595), so no divergent suffix
//!   survives a failover;
//! - OFFSET_OUT_OF_RANGE below the leader's log start: the local log starts
//!   again there (empty); above the leader's end: truncated to the leader's
//!   high watermark;
//! - NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH and
//!   the like: the partition waits for the next metadata (which moves it to
//!   another fetcher or stops it).
//!
//! Memory is bounded by `replica.fetch.response.max.bytes` per task; the
//! leader answers with sendfile like any fetch.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use weir_client::Connection;
use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::FetchRequest;
use weir_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use weir_protocol::messages::fetch_response::PartitionData;
use weir_storage::{Log, TopicPartition};

use crate::broker::Broker;
use crate::replica_manager::Followed;

/// The fetch tasks of this broker, by leader.
#[derive(Default)]
pub struct FetcherManager {
    fetchers: Mutex<HashMap<i32, Fetcher>>,
}

struct Fetcher {
    partitions: watch::Sender<Vec<Followed>>,
    task: JoinHandle<()>,
}

impl Drop for Fetcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FetcherManager {
    /// Makes the fetch tasks follow `assignments` (leader → partitions):
    /// a task per leader with partitions, none for the others.
    pub fn assign(&self, broker: &Arc<Broker>, assignments: BTreeMap<i32, Vec<Followed>>) {
        let mut fetchers = self.fetchers.lock().unwrap_or_else(|p| p.into_inner());
        fetchers.retain(|leader, _| assignments.contains_key(leader));
        for (leader, partitions) in assignments {
            match fetchers.get(&leader) {
                Some(f) => {
                    f.partitions.send_if_modified(|current| {
                        let changed = *current != partitions;
                        if changed {
                            *current = partitions.clone();
                        }
                        changed
                    });
                }
                None => {
                    let (tx, rx) = watch::channel(partitions);
                    let task = tokio::spawn(run(Arc::clone(broker), leader, rx));
                    fetchers.insert(
                        leader,
                        Fetcher {
                            partitions: tx,
                            task,
                        },
                    );
                }
            }
        }
    }

    /// Stops every fetch task.
    pub fn stop(&self) {
        self.fetchers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

/// Settings of the replica fetch, from the broker config.
struct FetchSettings {
    max_wait_ms: i32,
    min_bytes: i32,
    max_bytes: i32,
    partition_max_bytes: i32,
    backoff: Duration,
}

impl FetchSettings {
    fn of(b: &Broker) -> Self {
        let c = b.effective_config();
        let int = |name: &str, default: i64| -> i32 {
            i32::try_from(c.integer(name).unwrap_or(default)).unwrap_or(i32::MAX)
        };
        FetchSettings {
            max_wait_ms: int("replica.fetch.wait.max.ms", 500),
            min_bytes: int("replica.fetch.min.bytes", 1),
            max_bytes: int("replica.fetch.response.max.bytes", 10_485_760),
            partition_max_bytes: int("replica.fetch.max.bytes", 1_048_576),
            backoff: Duration::from_millis(
                u64::try_from(int("replica.fetch.backoff.ms", 1000)).unwrap_or(1000),
            ),
        }
    }
}

/// The fetch loop for the partitions led by `leader`.
async fn run(broker: Arc<Broker>, leader: i32, mut partitions: watch::Receiver<Vec<Followed>>) {
    let me = broker.config.node_id;
    let mut conn: Option<(String, Connection)> = None;
    // Partitions that got an error wait for new metadata, or the backoff.
    let mut parked: BTreeMap<TopicPartition, (i32, Instant)> = BTreeMap::new();
    loop {
        let settings = FetchSettings::of(&broker);
        let now = Instant::now();
        parked.retain(|tp, (epoch, until)| {
            *until > now
                && partitions
                    .borrow()
                    .iter()
                    .any(|f| &f.tp == tp && f.leader_epoch == *epoch)
        });
        let followed: Vec<Followed> = partitions
            .borrow_and_update()
            .iter()
            .filter(|f| !parked.contains_key(&f.tp))
            .cloned()
            .collect();
        if followed.is_empty() {
            let next = parked.values().map(|(_, until)| *until).min();
            match next {
                Some(until) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(until) => {}
                        r = partitions.changed() => if r.is_err() { return },
                    }
                }
                None => {
                    if partitions.changed().await.is_err() {
                        return;
                    }
                }
            }
            continue;
        }
        let addr = broker
            .cluster()
            .broker(leader)
            .map(|n| format!("{}:{}", n.host, n.port));
        let Some(addr) = addr else {
            tracing::debug!(leader, "leader not among the live brokers; waiting");
            wait_or_change(&mut partitions, settings.backoff).await;
            continue;
        };
        if conn.as_ref().is_none_or(|(a, _)| *a != addr) {
            let client_id = format!("weir-replica-fetcher-{me}-{leader}");
            match Connection::connect_timeout(&addr, &client_id, Duration::from_secs(10)).await {
                Ok(c) => conn = Some((addr.clone(), c)),
                Err(e) => {
                    tracing::debug!(leader, %addr, error = %e, "cannot reach the leader");
                    conn = None;
                    wait_or_change(&mut partitions, settings.backoff).await;
                    continue;
                }
            }
        }
        let Some((_, c)) = conn.as_mut() else {
            continue;
        };
        let (req, logs) = request(&broker, me, &followed, &settings);
        c.set_request_timeout(Duration::from_millis(
            u64::try_from(settings.max_wait_ms).unwrap_or(0) + 30_000,
        ));
        let resp = match c.send(&req).await {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(leader, error = %e, "replica fetch failed");
                conn = None;
                wait_or_change(&mut partitions, settings.backoff).await;
                continue;
            }
        };
        if resp.error_code != ErrorCode::None.code() {
            tracing::warn!(leader, code = resp.error_code, "replica fetch refused");
            wait_or_change(&mut partitions, settings.backoff).await;
            continue;
        }
        for topic in resp.responses {
            for p in topic.partitions {
                let Some((f, log)) = logs.iter().find(|(f, _)| {
                    f.topic_id == topic.topic_id.0 && f.tp.partition == p.partition_index
                }) else {
                    continue;
                };
                if let Err(code) = handle_partition(&broker, leader, f, log, p).await {
                    tracing::debug!(partition = %f.tp, ?code, "follower fetch error; waiting for metadata");
                    parked.insert(
                        f.tp.clone(),
                        (f.leader_epoch, Instant::now() + settings.backoff),
                    );
                }
            }
        }
    }
}

/// Waits `backoff` or until the partition set changes.
async fn wait_or_change(partitions: &mut watch::Receiver<Vec<Followed>>, backoff: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(backoff) => {}
        _ = partitions.changed() => {}
    }
}

fn request(
    broker: &Broker,
    me: i32,
    followed: &[Followed],
    s: &FetchSettings,
) -> (FetchRequest, Vec<(Followed, Arc<Log>)>) {
    let mut topics: Vec<FetchTopic> = Vec::new();
    let mut logs = Vec::new();
    for f in followed {
        let Some(log) = broker.replicas.log(&f.tp.topic, f.tp.partition) else {
            continue;
        };
        let partition = FetchPartition {
            partition: f.tp.partition,
            current_leader_epoch: f.leader_epoch,
            fetch_offset: log.log_end_offset(),
            last_fetched_epoch: log.latest_epoch().unwrap_or(-1),
            log_start_offset: log.log_start_offset(),
            partition_max_bytes: s.partition_max_bytes,
            ..Default::default()
        };
        match topics.iter_mut().find(|t| t.topic_id.0 == f.topic_id) {
            Some(t) => t.partitions.push(partition),
            None => topics.push(FetchTopic {
                topic: f.tp.topic.clone(),
                topic_id: Uuid(f.topic_id),
                partitions: vec![partition],
                ..Default::default()
            }),
        }
        logs.push((f.clone(), log));
    }
    let req = FetchRequest {
        replica_state: ReplicaState {
            replica_id: me,
            replica_epoch: -1,
            ..Default::default()
        },
        max_wait_ms: s.max_wait_ms,
        min_bytes: s.min_bytes,
        max_bytes: s.max_bytes,
        isolation_level: 0,
        topics,
        ..Default::default()
    };
    (req, logs)
}

/// Applies one partition of the leader's answer.
async fn handle_partition(
    broker: &Arc<Broker>,
    leader: i32,
    f: &Followed,
    log: &Arc<Log>,
    p: PartitionData,
) -> Result<(), ErrorCode> {
    let code = ErrorCode::from_code_lossy(p.error_code);
    let replicas = &broker.replicas;
    match code {
        ErrorCode::None => {}
        ErrorCode::OffsetOutOfRange => {
            let leo = log.log_end_offset();
            let (start, hw) = (p.log_start_offset, p.high_watermark);
            let (b, tp, epoch) = (Arc::clone(broker), f.tp.clone(), f.leader_epoch);
            let outcome = tokio::task::spawn_blocking(move || {
                b.replicas.as_follower_of(&tp, leader, epoch, || {
                    if start >= 0 && leo < start {
                        b.replicas.truncate_fully_and_start_at(&tp, start)
                    } else if hw >= 0 && leo > hw {
                        b.replicas.truncate_to(&tp, hw)
                    } else {
                        Ok(())
                    }
                })
            })
            .await;
            return match outcome {
                Ok(Some(Ok(()))) => {
                    tracing::info!(partition = %f.tp, leo, leader_start = start, leader_hw = hw, "follower log out of range; realigned");
                    Ok(())
                }
                Ok(None) => Err(ErrorCode::NotLeaderOrFollower),
                _ => Err(ErrorCode::KafkaStorageError),
            };
        }
        other => return Err(other),
    }
    if p.diverging_epoch.end_offset >= 0 {
        let to = truncation_offset(log, p.diverging_epoch.epoch, p.diverging_epoch.end_offset);
        let (b, tp, epoch) = (Arc::clone(broker), f.tp.clone(), f.leader_epoch);
        let outcome = tokio::task::spawn_blocking(move || {
            b.replicas
                .as_follower_of(&tp, leader, epoch, || b.replicas.truncate_to(&tp, to))
        })
        .await;
        return match outcome {
            Ok(Some(Ok(()))) => {
                tracing::info!(partition = %f.tp, epoch = p.diverging_epoch.epoch, to, "truncated a divergent suffix");
                Ok(())
            }
            Ok(None) => Err(ErrorCode::NotLeaderOrFollower),
            _ => Err(ErrorCode::KafkaStorageError),
        };
    }
    let records = p.records.unwrap_or_default();
    if !records.is_empty() {
        append(broker, leader, f, log, records).await?;
    }
    if p.high_watermark >= 0 {
        replicas.raise_high_watermark(log, p.high_watermark);
    }
    replicas.notify_append(log);
    Ok(())
}

/// Where to cut the local log for the leader's diverging epoch
/// `(epoch, end_offset)`, as Kafka's follower does: at the smaller of the
/// leader's end of that epoch and this log's own end of it. When this log
/// does not know that epoch, its end of the largest epoch below it (the
/// next fetch then names an older epoch and converges). A cut at the
/// leader's end alone could keep a record of a later local epoch below it
/// and name that epoch again forever.
fn truncation_offset(log: &Log, epoch: i32, end_offset: i64) -> i64 {
    let (local_epoch, local_end) = log.end_offset_for_epoch(epoch);
    let to = if local_epoch == epoch {
        local_end.min(end_offset)
    } else if local_end >= 0 {
        local_end
    } else {
        end_offset
    };
    to.min(log.log_end_offset()).max(0)
}

/// Appends the leader's batches (on a blocking thread: file I/O), with
/// the flush the topic's policy asks for, while this broker still follows
/// `leader` in the fetched epoch; their transactions go to the partition's
/// producer state and `.txnindex` as on the leader.
async fn append(
    broker: &Arc<Broker>,
    leader: i32,
    f: &Followed,
    log: &Arc<Log>,
    records: Bytes,
) -> Result<(), ErrorCode> {
    let now = broker.now_ms();
    let (b, l, epoch) = (Arc::clone(broker), Arc::clone(log), f.leader_epoch);
    let len = records.len();
    let outcome = tokio::task::spawn_blocking(move || {
        b.replicas
            .append_as_follower(&l, &records, now, leader, epoch)
            .ok_or(ErrorCode::NotLeaderOrFollower)
    })
    .await;
    match outcome {
        Ok(Err(code)) => Err(code),
        Ok(Ok(Ok(_))) => {
            broker.replicas.replication_counters().record_bytes_in(len);
            Ok(())
        }
        Ok(Ok(Err(e))) => {
            tracing::warn!(partition = %log.topic_partition(), error = %e, "follower append failed");
            Err(crate::codes::from_storage(&e))
        }
        Err(_) => Err(ErrorCode::KafkaStorageError),
    }
}

#[cfg(test)]
mod tests {
    use weir_protocol::records::{Compression, RecordBatchBuilder};
    use weir_storage::{LogConfig, LogManager, LogManagerConfig};

    use super::*;

    /// A follower log with batches of `count` records at `(base, epoch)`.
    fn follower_log(dir: &std::path::Path, batches: &[(i64, i32, usize)]) -> Arc<Log> {
        let logs = LogManager::open(LogManagerConfig::new(vec![dir.to_path_buf()]), 0).unwrap();
        logs.prepare_logs("t", [1; 16], 0..1, LogConfig::default())
            .unwrap()
            .commit();
        let log = logs.get(&TopicPartition::new("t", 0)).unwrap();
        for &(base, epoch, count) in batches {
            let mut b = RecordBatchBuilder::new(Compression::None)
                .base_offset(base)
                .partition_leader_epoch(epoch);
            for _ in 0..count {
                b.push(1, None, Some(Bytes::from_static(b"v")), vec![])
                    .unwrap();
            }
            log.append_as_follower(b.build().unwrap().as_bytes(), 1)
                .unwrap();
        }
        log
    }

    /// The old leader wrote epoch 5 from offset 290, where the new leader
    /// still had epoch 3 records up to 300 (then its own epoch 6): the
    /// leader's answer to epoch 5 is (3, 300). Cutting at 300 would keep
    /// epoch 5's records 290..300 and name epoch 5 again forever; the cut is
    /// at this log's own end of epoch 3, 290.
    #[test]
    fn a_diverging_epoch_cuts_at_the_smaller_end_of_both_logs() {
        let dir = tempfile::tempdir().unwrap();
        let log = follower_log(dir.path(), &[(0, 3, 290), (290, 5, 41)]);
        assert_eq!(log.log_end_offset(), 331);
        assert_eq!(truncation_offset(&log, 3, 300), 290);
        // An epoch both know: the smaller end.
        assert_eq!(truncation_offset(&log, 5, 310), 310);
        assert_eq!(truncation_offset(&log, 5, 400), 331);
        // An epoch older than any here: this log's first epoch start.
        assert_eq!(truncation_offset(&log, 1, 50), 0);
    }
}
