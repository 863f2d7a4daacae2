//! The coordinator's log: appending one `__transaction_state` record as
//! the partition's leader with acks=all, and replaying a partition when
//! its leadership is taken up.

use std::sync::Arc;
use std::time::Duration;

use weir_protocol::error_code::ErrorCode;
use weir_protocol::records::{BatchIter, Compression, DecompressLimits, RecordBatchBuilder};
use weir_storage::TopicPartition;
use weir_txn::{TxnCoordinator, Write};

use super::TRANSACTION_STATE_TOPIC;
use crate::broker::Broker;
use crate::replica_manager::AppendRole;

/// Bytes read from `__transaction_state` per step while loading.
const LOAD_CHUNK_BYTES: usize = 1 << 20;

/// How long an append waits for the in-sync replicas (Kafka's default
/// `request.timeout.ms`); past it the request gets COORDINATOR_NOT_AVAILABLE
/// and the client retries.
const APPEND_TIMEOUT: Duration = Duration::from_secs(30);

/// The `min.insync.replicas` of `__transaction_state` as this broker knows
/// it (the topic's override, else the broker default).
fn min_isr(b: &Broker) -> usize {
    let snap = b.cluster();
    let overrides = snap
        .topic_configs(TRANSACTION_STATE_TOPIC)
        .cloned()
        .unwrap_or_default();
    let def = crate::configdef::topic_def("min.insync.replicas");
    let v = def.and_then(|d| {
        crate::topic_config::resolve(&b.effective_config(), &overrides, d)
            .value
            .and_then(|v| v.parse::<usize>().ok())
    });
    v.unwrap_or(1).max(1)
}

/// Appends one record to its `__transaction_state` partition as its leader
/// in `coordinator_epoch` (the leader epoch the coordinator loaded it at:
/// a leadership taken up again since has not been replayed, and must not
/// take records of the earlier load), and waits until every in-sync
/// replica has it (acks=all). Errors are the log's codes, which the
/// coordinator maps.
pub(super) async fn append(
    b: &Arc<Broker>,
    w: &Write,
    coordinator_epoch: i32,
) -> Result<(), ErrorCode> {
    let tp = TopicPartition::new(TRANSACTION_STATE_TOPIC, w.partition);
    let snap = b.cluster();
    let view_epoch = snap
        .check_leader(b.config.node_id, TRANSACTION_STATE_TOPIC, w.partition, -1)
        .map_err(|e| e.code)?;
    if view_epoch != coordinator_epoch {
        return Err(ErrorCode::NotLeaderOrFollower);
    }
    let min_isr = min_isr(b);
    let isr = snap
        .partition(TRANSACTION_STATE_TOPIC, w.partition)
        .map_or(1, |p| p.isr.len());
    if isr < min_isr {
        return Err(ErrorCode::NotEnoughReplicas);
    }
    let log = b
        .replicas
        .log(TRANSACTION_STATE_TOPIC, w.partition)
        .ok_or(ErrorCode::UnknownTopicOrPartition)?;
    let now = b.now_ms();
    let mut builder = RecordBatchBuilder::new(Compression::None);
    builder
        .push(
            now,
            Some(w.record.key.clone()),
            w.record.value.clone(),
            Vec::new(),
        )
        .map_err(|_| ErrorCode::RecordListTooLarge)?;
    let batch = builder.build().map_err(|_| ErrorCode::RecordListTooLarge)?;
    let mut buf = batch.as_bytes().to_vec();
    // The leadership is checked and the record appended in one step, so
    // it cannot move in between (see `ReplicaManager::as_leader_in`).
    let role = b.replicas.append_role(&tp);
    let end = crate::handler::blocking(|| {
        let appended = match role {
            AppendRole::Leader { epoch, .. } if epoch != coordinator_epoch => None,
            _ => b.replicas.append_in_role(&tp, role, |stamp| match stamp {
                Some(epoch) => log.append_as_leader(&mut buf, now, epoch),
                None => log.append(&mut buf, now),
            }),
        };
        let info = appended
            .ok_or(ErrorCode::NotLeaderOrFollower)?
            .map_err(|e| crate::codes::from_storage(&e))?;
        b.replicas.advance_high_watermark(&log);
        b.replicas.notify_append(&log);
        Ok::<_, ErrorCode>(info.last_offset + 1)
    })?;
    let AppendRole::Leader {
        epoch,
        replicated: true,
    } = role
    else {
        return Ok(());
    };
    let deadline = tokio::time::Instant::now() + APPEND_TIMEOUT;
    match b
        .replicas
        .wait_for_replication_in(&tp, end, min_isr, Some(epoch), deadline)
        .await
    {
        ErrorCode::None => Ok(()),
        code => Err(code),
    }
}

/// Replays one partition of `__transaction_state` into the coordinator.
/// Unreadable data ends the load of that partition with a warning (what was
/// read so far stays); records the coordinator cannot decode are skipped.
pub(super) fn load_partition(b: &Broker, coord: &mut TxnCoordinator, partition: i32) {
    let Some(log) = b.replicas.log(TRANSACTION_STATE_TOPIC, partition) else {
        return;
    };
    let limits = DecompressLimits::default();
    let end = log.log_end_offset();
    let mut offset = log.log_start_offset();
    let mut replayed = 0usize;
    while offset < end {
        let read = match log.read(offset, LOAD_CHUNK_BYTES, end, true) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(
                    partition,
                    offset,
                    "cannot read {TRANSACTION_STATE_TOPIC}: {e}"
                );
                return;
            }
        };
        let mut data = Vec::with_capacity(read.total_bytes);
        for region in &read.regions {
            match region.read_to_vec() {
                Ok(v) => data.extend_from_slice(&v),
                Err(e) => {
                    tracing::warn!(
                        partition,
                        offset,
                        "cannot read {TRANSACTION_STATE_TOPIC}: {e}"
                    );
                    return;
                }
            }
        }
        let before = offset;
        for batch in BatchIter::new(data) {
            let batch = match batch {
                Ok(batch) => batch,
                Err(e) => {
                    tracing::warn!(
                        partition,
                        offset,
                        "bad batch in {TRANSACTION_STATE_TOPIC}: {e}"
                    );
                    return;
                }
            };
            offset = batch.next_offset();
            if batch.is_control() || batch.next_offset() <= before {
                continue;
            }
            let records = match batch.collect_records(&limits) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(
                        partition,
                        offset,
                        "bad batch in {TRANSACTION_STATE_TOPIC}: {e}"
                    );
                    continue;
                }
            };
            for r in records {
                let Some(key) = r.key else { continue };
                match coord.replay(partition, &key, r.value.as_deref()) {
                    Ok(()) => replayed += 1,
                    Err(e) => {
                        tracing::warn!(partition, "skipping {TRANSACTION_STATE_TOPIC} record: {e}")
                    }
                }
            }
        }
        if offset <= before {
            break;
        }
    }
    if replayed > 0 {
        tracing::info!(
            partition,
            records = replayed,
            "loaded {TRANSACTION_STATE_TOPIC} partition"
        );
    }
}
