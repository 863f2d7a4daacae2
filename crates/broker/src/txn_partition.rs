//! Transactions on the partition side: the last stable offset (LSO), COMMIT
//! and ABORT markers appended as a partition's leader (WriteTxnMarkers),
//! and followers' appends, each keeping the partition's producer state
//! ([`crate::producer_state`]) and its aborted-transaction index
//! (`.txnindex`, see `weir_storage::txn_index`) in step with its log: an
//! ABORT marker that ends a transaction is appended with its index entry,
//! in one step of the log.
//!
//! Lock order, as for every append that touches producer state: the
//! partition's producer state, then its replication state
//! (`as_leader_in` / `as_follower_of`), then the log.
//!
//! Invariants: the LSO never exceeds the high watermark, never lies below
//! the log start offset, and never passes the first offset of a
//! transaction that is open or whose marker is not yet below the high
//! watermark.

use weir_protocol::records::{EndTxnMarker, RecordBatchBuilder};
use weir_storage::{AbortMarker, AppendInfo, Log, StorageError};

use crate::producer_state::{AppliedBatch, MarkerRefusal};
use crate::replica_manager::{AppendRole, ReplicaManager};

/// A COMMIT or ABORT marker of one producer, as WriteTxnMarkers names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
    pub commit: bool,
}

/// A marker appended as the leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkerAppended {
    /// The marker's offset.
    pub offset: i64,
    /// The offset to flush through before answering, when the topic's
    /// flush policy asks for it.
    pub flush: Option<i64>,
    /// The leader epoch it was appended in, when other replicas must have
    /// it before it is acknowledged.
    pub replicated_in: Option<i32>,
}

/// Why a marker was not appended.
#[derive(Debug, thiserror::Error)]
pub enum MarkerError {
    #[error("this broker does not lead the partition")]
    NotLeader,
    #[error("marker refused: {0:?}")]
    Refused(MarkerRefusal),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl ReplicaManager {
    /// The partition's last stable offset: the high watermark, capped by
    /// the first offset of the earliest transaction still open (or ended by
    /// a marker the high watermark has not passed), never below the log
    /// start offset (Kafka's `lastStableOffset`). What a read_committed
    /// consumer may read up to; every Fetch answers it.
    pub fn last_stable_offset(&self, log: &Log) -> i64 {
        self.with_producers(log, |state| {
            // Read under the producer state's lock, which an append that
            // opens a transaction holds until the state has it: the high
            // watermark never covers a transaction the state lacks.
            let hw = log.high_watermark();
            let lso = state.last_stable_offset(hw).max(log.log_start_offset());
            debug_assert!(lso <= hw, "LSO {lso} above the high watermark {hw}");
            lso
        })
    }

    /// Appends `marker` to `log` as the partition's leader (Kafka's
    /// coordinator-origin append): refused when the marker's producer or
    /// coordinator epoch is older than the partition knows; an ABORT that
    /// ends an open transaction is indexed in `.txnindex` with it. A marker
    /// for a producer with nothing open is appended too (the coordinator
    /// retries markers). The high watermark moves and fetches waiting on
    /// the partition wake (a COMMIT makes data visible to read_committed
    /// consumers once the marker is replicated).
    pub fn append_marker(
        &self,
        log: &Log,
        marker: TxnMarker,
        now_ms: i64,
    ) -> Result<MarkerAppended, MarkerError> {
        let tp = log.topic_partition();
        let role = self.append_role(tp);
        if role == AppendRole::NotLeader {
            return Err(MarkerError::NotLeader);
        }
        let end = if marker.commit {
            EndTxnMarker::commit(marker.coordinator_epoch)
        } else {
            EndTxnMarker::abort(marker.coordinator_epoch)
        };
        let mut batch = RecordBatchBuilder::end_txn_marker_batch(
            0,
            -1,
            marker.producer_id,
            marker.producer_epoch,
            now_ms,
            &end,
        )
        .map_err(|e| StorageError::InvalidArgument(e.to_string()))?
        .as_bytes()
        .to_vec();
        let appended = self.with_producers(log, |state| {
            state
                .check_marker(
                    marker.producer_id,
                    marker.producer_epoch,
                    marker.coordinator_epoch,
                )
                .map_err(MarkerError::Refused)?;
            let aborts: Vec<AbortMarker> = state
                .would_complete(marker.producer_id)
                .filter(|_| !marker.commit)
                .map(|done| AbortMarker {
                    batch: 0,
                    producer_id: done.producer_id,
                    first_offset: done.first_offset,
                    next_open_offset: done.next_open_offset,
                })
                .into_iter()
                .collect();
            // A leader with followers stamps its epoch, as on produced
            // batches.
            let (info, flush) = self
                .append_in_role(tp, role, |stamp| {
                    log.append_ending_txns(&mut batch, now_ms, stamp, &aborts)
                })
                .ok_or(MarkerError::NotLeader)??;
            let done = state.end_txn(
                marker.producer_id,
                marker.producer_epoch,
                marker.coordinator_epoch,
                info.base_offset,
                now_ms,
            );
            // Ended transactions whose marker is replicated are forgotten
            // here too, not only when a fetch asks for the LSO.
            state.first_unstable_offset_at(log.high_watermark());
            debug_assert_eq!(
                done.is_some() && !marker.commit,
                !aborts.is_empty(),
                "the transaction indexed is the one the marker ended"
            );
            state.debug_check();
            tracing::debug!(
                partition = %tp, producer = marker.producer_id, epoch = marker.producer_epoch,
                commit = marker.commit, offset = info.base_offset, ended = ?done,
                "transaction marker appended"
            );
            Ok::<_, MarkerError>(MarkerAppended {
                offset: info.base_offset,
                flush,
                replicated_in: role.stamp(),
            })
        })?;
        self.advance_high_watermark(log);
        self.notify_append(log);
        Ok(appended)
    }

    /// A follower's append of the batches it fetched from `leader` in
    /// `leader_epoch` (as `Log::append_as_follower`, flush included), run
    /// only while it still follows them (see
    /// [`ReplicaManager::as_follower_of`]; `None` otherwise). The batches'
    /// transactions go to the partition's producer state as the leader's
    /// did, and the ABORT markers among them are indexed with them, so a
    /// follower's `.txnindex` is the leader's. A failed append drops the
    /// producer state (it is rebuilt from the log).
    pub fn append_as_follower(
        &self,
        log: &Log,
        records: &[u8],
        now_ms: i64,
        leader: i32,
        leader_epoch: i32,
    ) -> Option<Result<AppendInfo, StorageError>> {
        let slot = self.producer_slot(log);
        let mut guard = slot.lock().unwrap_or_else(|p| p.into_inner());
        self.as_follower_of(log.topic_partition(), leader, leader_epoch, || {
            let state = guard.get_or_insert_with(|| crate::producer_state_io::rebuild(log));
            let mut aborts = Vec::new();
            for (i, b) in applied_batches(records).iter().enumerate() {
                if let Some(done) = state.apply(b)
                    && b.marker == Some(false)
                {
                    aborts.push(AbortMarker {
                        batch: i,
                        producer_id: done.producer_id,
                        first_offset: done.first_offset,
                        next_open_offset: done.next_open_offset,
                    });
                }
            }
            match log.append_as_follower_ending_txns(records, now_ms, &aborts) {
                Ok((info, flush)) => {
                    // A follower is asked for no LSO: its ended
                    // transactions below its high watermark go now.
                    state.first_unstable_offset_at(log.high_watermark());
                    state.debug_check();
                    match flush {
                        Some(end) => log.flush_through(end, now_ms).map(|()| info),
                        None => Ok(info),
                    }
                }
                Err(e) => {
                    // The state took batches the log refused.
                    *guard = None;
                    Err(e)
                }
            }
        })
    }
}

/// The batches of `records` (whole batches, offsets as stored), up to the
/// first that does not parse.
fn applied_batches(records: &[u8]) -> Vec<AppliedBatch> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(rest) = records.get(pos..)
        && !rest.is_empty()
        && let Ok(h) = weir_protocol::records::BatchHeader::parse(rest)
        && let Some(b) = rest.get(..h.total_size()).and_then(AppliedBatch::parse)
    {
        out.push(b);
        pos += h.total_size();
    }
    out
}
