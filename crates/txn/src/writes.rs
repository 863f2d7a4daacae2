//! Writes and markers: what a durable (or failed) `__transaction_state`
//! record does, and the markers of a transaction that is completing.

use weir_protocol::error_code::ErrorCode;

use crate::coordinator::{
    PartitionStatus, TxnCoordinator, append_error, debug_check, transition_failed,
};
use crate::metadata::Transit;
use crate::records;
use crate::state::TxnState;
use crate::types::{
    MarkerJob, ProducerIdAndEpoch, TopicPartition, TxnResult, Write, WriteDone, WriteId,
};

/// Why a write is made: what its outcome answers and starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Purpose {
    InitProducerId,
    AddPartitions,
    EndTxn(TxnResult),
    /// The abort of a fenced producer's transaction: for InitProducerId
    /// (answered CONCURRENT_TRANSACTIONS so the client retries) or for a
    /// timeout (nobody to answer).
    Fence {
        for_init: bool,
    },
    /// Every marker is written.
    Complete(TxnResult),
    Expire,
}

#[derive(Debug)]
pub(crate) struct PendingWrite {
    transactional_id: String,
    partition: usize,
    load: u64,
    transit: Transit,
    purpose: Purpose,
}

/// A transaction whose markers are being written.
#[derive(Debug)]
pub(crate) struct Completing {
    load: u64,
    producer_id: i64,
    producer_epoch: i16,
    result: TxnResult,
    /// The CompleteCommit/CompleteAbort target, prepared (pending) when the
    /// markers started.
    transit: Transit,
    /// The completion record is being written.
    writing: bool,
}

impl TxnCoordinator {
    pub(crate) fn new_write(
        &mut self,
        partition: usize,
        transactional_id: &str,
        transit: Transit,
        purpose: Purpose,
    ) -> Write {
        let id = WriteId(self.next_write);
        self.next_write += 1;
        let record = if purpose == Purpose::Expire {
            records::tombstone(transactional_id)
        } else {
            records::record(transactional_id, &transit)
        };
        self.writes.insert(
            id,
            PendingWrite {
                transactional_id: transactional_id.to_string(),
                partition,
                load: self.partitions[partition].load,
                transit,
                purpose,
            },
        );
        Write {
            id,
            partition: i32::try_from(partition).unwrap_or(i32::MAX),
            record,
        }
    }

    /// Reports the outcome of a [`Write`]: `Ok` once the record is durable
    /// (on every in-sync replica), else the append's error (mapped as
    /// Kafka maps it, [`append_error`]). A durable record's transition
    /// takes effect; a failed one is dropped (the transactional id is as
    /// before). A write of a partition that was unloaded or loaded again
    /// since changes nothing and answers NOT_COORDINATOR.
    pub fn write_completed(
        &mut self,
        id: WriteId,
        outcome: Result<(), ErrorCode>,
        now_ms: i64,
    ) -> WriteDone {
        let Some(w) = self.writes.remove(&id) else {
            return WriteDone::default();
        };
        let outcome = outcome.map_err(append_error);
        let answers = !matches!(w.purpose, Purpose::Complete(_) | Purpose::Expire)
            && w.purpose != Purpose::Fence { for_init: false };
        let current = self.partitions[w.partition].status == PartitionStatus::Active
            && self.partitions[w.partition].load == w.load
            && self.partitions[w.partition]
                .txns
                .contains_key(&w.transactional_id);
        if !current {
            return WriteDone {
                answer: answers.then_some(Err(match outcome {
                    Ok(()) => ErrorCode::NotCoordinator,
                    Err(e) => e,
                })),
                ..WriteDone::default()
            };
        }
        match outcome {
            Ok(()) => self.apply(w, now_ms),
            Err(code) => {
                let txns = &mut self.partitions[w.partition].txns;
                let Some(m) = txns.get_mut(&w.transactional_id) else {
                    return WriteDone::default();
                };
                match w.purpose {
                    // The markers are written: completing is retried until
                    // it succeeds (or the partition moves away), the
                    // pending completion stays.
                    Purpose::Complete(_) => {
                        if let Some(c) = self.completing.get_mut(&w.transactional_id) {
                            c.writing = false;
                        }
                        return WriteDone {
                            retry_completion: true,
                            ..WriteDone::default()
                        };
                    }
                    Purpose::Fence { .. } => {
                        m.pending = None;
                        m.has_failed_epoch_fence = true;
                    }
                    _ => m.pending = None,
                }
                WriteDone {
                    answer: answers.then_some(Err(code)),
                    ..WriteDone::default()
                }
            }
        }
    }

    /// Applies a durable write of a current load.
    fn apply(&mut self, w: PendingWrite, now_ms: i64) -> WriteDone {
        let p = w.partition;
        let txns = &mut self.partitions[p].txns;
        let Some(m) = txns.get_mut(&w.transactional_id) else {
            return WriteDone::default();
        };
        if w.purpose == Purpose::Expire {
            // Forgotten only if nothing else happened to it meanwhile.
            if m.pending == Some(TxnState::Dead) && m.producer_epoch == w.transit.producer_epoch {
                txns.remove(&w.transactional_id);
            } else {
                m.pending = None;
            }
            return WriteDone::default();
        }
        if let Err(e) = m.complete_transition(&w.transit) {
            m.pending = None;
            let code = transition_failed(&e);
            return WriteDone {
                answer: Some(Err(code)),
                ..WriteDone::default()
            };
        }
        debug_check(m);
        let producer = ProducerIdAndEpoch {
            producer_id: m.producer_id,
            epoch: m.producer_epoch,
        };
        match w.purpose {
            Purpose::InitProducerId | Purpose::AddPartitions => WriteDone {
                answer: Some(Ok(producer)),
                ..WriteDone::default()
            },
            Purpose::EndTxn(result) => WriteDone {
                answer: Some(Ok(producer)),
                markers: self.start_markers(p, &w.transactional_id, result, now_ms),
                retry_completion: false,
            },
            Purpose::Fence { for_init } => {
                if !for_init {
                    self.timeouts += 1;
                }
                WriteDone {
                    answer: for_init.then_some(Err(ErrorCode::ConcurrentTransactions)),
                    markers: self.start_markers(p, &w.transactional_id, TxnResult::Abort, now_ms),
                    retry_completion: false,
                }
            }
            Purpose::Complete(result) => {
                self.completing.remove(&w.transactional_id);
                match result {
                    TxnResult::Commit => self.commits += 1,
                    TxnResult::Abort => self.aborts += 1,
                }
                WriteDone::default()
            }
            Purpose::Expire => WriteDone::default(),
        }
    }

    // ------------------------------------------------------------ markers

    /// Prepares the completion of a transaction in PrepareCommit or
    /// PrepareAbort and returns its markers.
    pub(crate) fn start_markers(
        &mut self,
        p: usize,
        transactional_id: &str,
        result: TxnResult,
        now_ms: i64,
    ) -> Option<MarkerJob> {
        let part = &mut self.partitions[p];
        let m = part.txns.get_mut(transactional_id)?;
        let transit = match m.prepare_complete(now_ms) {
            Ok(t) => t,
            Err(e) => {
                transition_failed(&e);
                return None;
            }
        };
        let job = MarkerJob {
            transactional_id: transactional_id.to_string(),
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
            result,
            coordinator_epoch: part.coordinator_epoch,
            txn_partition: i32::try_from(p).unwrap_or(i32::MAX),
            partitions: m.partitions.clone(),
            load: part.load,
        };
        self.completing.insert(
            transactional_id.to_string(),
            Completing {
                load: part.load,
                producer_id: m.producer_id,
                producer_epoch: m.producer_epoch,
                result,
                transit,
                writing: false,
            },
        );
        Some(job)
    }

    /// Whether `job` is still this coordinator's to finish: its partition
    /// is loaded by the same load and the transaction still completes.
    pub fn markers_wanted(&self, job: &MarkerJob) -> bool {
        let Some(part) = self.slot(job.txn_partition) else {
            return false;
        };
        part.status == PartitionStatus::Active
            && part.load == job.load
            && self.completing.get(&job.transactional_id).is_some_and(|c| {
                c.load == job.load
                    && c.producer_id == job.producer_id
                    && c.producer_epoch == job.producer_epoch
                    && c.result == job.result
            })
    }

    /// A partition leader wrote `job`'s marker to `tp` (or the partition is
    /// gone): it no longer waits for one.
    pub fn marker_written(&mut self, job: &MarkerJob, tp: &TopicPartition) {
        if !self.markers_wanted(job) {
            return;
        }
        if let Some(m) = usize::try_from(job.txn_partition)
            .ok()
            .and_then(|i| self.partitions.get_mut(i))
            .and_then(|p| p.txns.get_mut(&job.transactional_id))
        {
            m.partitions.remove(tp);
        }
    }

    /// A partition leader refused `job`'s markers for good (its producer
    /// epoch or this coordinator's epoch is older than one it saw): stop
    /// sending them, as Kafka does. The transaction stays pending until
    /// the partition is loaded again.
    pub fn markers_cancelled(&mut self, job: &MarkerJob) {
        if self.markers_wanted(job) {
            self.completing.remove(&job.transactional_id);
        }
    }

    /// The record that completes `job`'s transaction, once every marker is
    /// written; None while markers are missing, while that record is being
    /// written, or once the job is stale. Call again after a
    /// `retry_completion`.
    pub fn complete_markers(&mut self, job: &MarkerJob) -> Option<Write> {
        if !self.markers_wanted(job) {
            return None;
        }
        let p = usize::try_from(job.txn_partition).ok()?;
        let m = self.partitions[p].txns.get(&job.transactional_id)?;
        if !m.partitions.is_empty() {
            return None;
        }
        let c = self.completing.get_mut(&job.transactional_id)?;
        if c.writing {
            return None;
        }
        c.writing = true;
        let transit = c.transit.clone();
        let result = c.result;
        Some(self.new_write(p, &job.transactional_id, transit, Purpose::Complete(result)))
    }
}
