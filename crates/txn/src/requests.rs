//! The client requests that change a transactional id: InitProducerId,
//! AddPartitionsToTxn / AddOffsetsToTxn, EndTxn (after Kafka's
//! `TransactionCoordinator`), and the partition leaders' verification of
//! a transactional produce.

use std::collections::BTreeSet;

use weir_protocol::error_code::ErrorCode;

use crate::coordinator::{TxnCoordinator, transition_failed};
use crate::metadata::{TxnMetadata, is_epoch_exhausted};
use crate::state::TxnState;
use crate::types::{NO_PRODUCER_EPOCH, ProducerIdAndEpoch, Step, TopicPartition, TxnResult, Write};
use crate::writes::Purpose;

impl TxnCoordinator {
    /// InitProducerId with a transactional id (Kafka's
    /// `handleInitProducerId`). `expected` is the producer a KIP-360 client
    /// names to recover; `fresh_producer_id` a producer id no one has, for
    /// when one is needed — without it, the answer may be
    /// [`Step::NeedProducerId`] (call again with one).
    ///
    /// A transaction still open is aborted first with a bumped epoch (the
    /// fence); that write answers CONCURRENT_TRANSACTIONS once durable, and
    /// the client's retry then gets the next epoch. An exhausted epoch
    /// moves to a new producer id at epoch 0.
    pub fn init_producer_id(
        &mut self,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<ProducerIdAndEpoch>,
        fresh_producer_id: Option<i64>,
        now_ms: i64,
    ) -> Result<Step, ErrorCode> {
        if transactional_id.is_empty() {
            return Err(ErrorCode::InvalidRequest);
        }
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            return Err(ErrorCode::InvalidTransactionTimeout);
        }
        let p = self.owner(transactional_id)?;
        let mut fresh = fresh_producer_id.filter(|&id| id >= 0);
        if !self.partitions[p].txns.contains_key(transactional_id) {
            let Some(id) = fresh.take() else {
                return Ok(Step::NeedProducerId);
            };
            self.partitions[p].txns.insert(
                transactional_id.to_string(),
                TxnMetadata::new(transactional_id, id, timeout_ms, now_ms),
            );
        }
        let m = self.partitions[p]
            .txns
            .get_mut(transactional_id)
            .ok_or(ErrorCode::UnknownServerError)?;
        if m.pending.is_some() {
            return Err(ErrorCode::ConcurrentTransactions);
        }
        if let Some(e) = expected {
            // Kafka's isValidProducerId: a new transactional id, the current
            // producer id, or the previous one with an exhausted epoch (a
            // retry after a producer id change the client did not see).
            let valid = m.producer_epoch == NO_PRODUCER_EPOCH
                || e.producer_id == m.producer_id
                || (e.producer_id == m.previous_producer_id && is_epoch_exhausted(e.epoch));
            if !valid {
                return Err(ErrorCode::ProducerFenced);
            }
        }
        let transit = match m.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                return Err(ErrorCode::ConcurrentTransactions);
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                if m.is_epoch_exhausted() && expected.is_none_or(|e| e.epoch == m.producer_epoch) {
                    let Some(id) = fresh else {
                        return Ok(Step::NeedProducerId);
                    };
                    m.prepare_producer_id_rotation(id, timeout_ms, now_ms, expected.is_some())
                        .map_err(|e| transition_failed(&e))?
                } else {
                    m.prepare_increment_producer_epoch(
                        timeout_ms,
                        expected.map(|e| e.epoch),
                        now_ms,
                    )
                    .map_err(|e| transition_failed(&e))??
                }
            }
            TxnState::Ongoing => {
                let w = self.fence_and_abort(p, transactional_id, true, now_ms)?;
                return Ok(Step::Write(w));
            }
            TxnState::Dead | TxnState::PrepareEpochFence => {
                debug_assert!(false, "{transactional_id} rests in {}", m.state);
                return Err(ErrorCode::UnknownServerError);
            }
        };
        Ok(Step::Write(self.new_write(
            p,
            transactional_id,
            transit,
            Purpose::InitProducerId,
        )))
    }

    /// Bumps the epoch of an open transaction's producer and aborts the
    /// transaction with it (Kafka's `prepareFenceProducerEpoch` followed by
    /// `endTransaction(ABORT)` on the coordinator's behalf): the bump and
    /// the abort are one record. The bumped epoch is in effect at once, so
    /// the fenced producer's requests fail even if that record is not
    /// written (and the next fence then does not bump again).
    pub(crate) fn fence_and_abort(
        &mut self,
        p: usize,
        transactional_id: &str,
        for_init: bool,
        now_ms: i64,
    ) -> Result<Write, ErrorCode> {
        let m = self.partitions[p]
            .txns
            .get_mut(transactional_id)
            .ok_or(ErrorCode::UnknownServerError)?;
        let fence = m
            .prepare_fence_producer_epoch()
            .map_err(|e| transition_failed(&e))?;
        m.pending = None;
        m.producer_epoch = fence.producer_epoch;
        m.last_producer_epoch = NO_PRODUCER_EPOCH;
        let transit = m
            .prepare_abort_or_commit(TxnState::PrepareAbort, now_ms)
            .map_err(|e| transition_failed(&e))?;
        Ok(self.new_write(p, transactional_id, transit, Purpose::Fence { for_init }))
    }

    /// AddPartitionsToTxn (client versions) and AddOffsetsToTxn (with the
    /// group's `__consumer_offsets` partition). Partitions already in the
    /// ongoing transaction are answered at once.
    pub fn add_partitions(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &BTreeSet<TopicPartition>,
        now_ms: i64,
    ) -> Result<Step, ErrorCode> {
        if transactional_id.is_empty() {
            return Err(ErrorCode::InvalidRequest);
        }
        let p = self.owner(transactional_id)?;
        let m = self.partitions[p]
            .txns
            .get_mut(transactional_id)
            .ok_or(ErrorCode::InvalidProducerIdMapping)?;
        if m.producer_id != producer_id {
            return Err(ErrorCode::InvalidProducerIdMapping);
        }
        if m.producer_epoch != producer_epoch {
            return Err(ErrorCode::ProducerFenced);
        }
        if m.pending.is_some()
            || matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort)
        {
            return Err(ErrorCode::ConcurrentTransactions);
        }
        if m.state == TxnState::Ongoing && partitions.is_subset(&m.partitions) {
            return Ok(Step::Done(ProducerIdAndEpoch {
                producer_id,
                epoch: producer_epoch,
            }));
        }
        let transit = m
            .prepare_add_partitions(partitions, now_ms)
            .map_err(|e| transition_failed(&e))?;
        Ok(Step::Write(self.new_write(
            p,
            transactional_id,
            transit,
            Purpose::AddPartitions,
        )))
    }

    /// AddPartitionsToTxn v4+ with `verify_only` (a partition leader asking
    /// whether a transactional produce belongs to the ongoing transaction):
    /// NONE per partition that does, TRANSACTION_ABORTABLE per other one.
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &BTreeSet<TopicPartition>,
    ) -> Result<Vec<(TopicPartition, ErrorCode)>, ErrorCode> {
        if transactional_id.is_empty() {
            return Err(ErrorCode::InvalidRequest);
        }
        let p = self.owner(transactional_id)?;
        let m = self.partitions[p]
            .txns
            .get(transactional_id)
            .ok_or(ErrorCode::InvalidProducerIdMapping)?;
        if m.producer_id != producer_id {
            return Err(ErrorCode::InvalidProducerIdMapping);
        }
        if m.producer_epoch != producer_epoch {
            return Err(ErrorCode::ProducerFenced);
        }
        if matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
            return Err(ErrorCode::ConcurrentTransactions);
        }
        Ok(partitions
            .iter()
            .map(|tp| {
                let code = if m.partitions.contains(tp) {
                    ErrorCode::None
                } else {
                    ErrorCode::TransactionAbortable
                };
                (tp.clone(), code)
            })
            .collect())
    }

    /// EndTxn from a client (transaction version 1). Repeating an EndTxn
    /// that completed answers NONE; one whose markers are still being
    /// written CONCURRENT_TRANSACTIONS (the client retries); the other
    /// direction, or no transaction at all, INVALID_TXN_STATE.
    pub fn end_txn(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        result: TxnResult,
        now_ms: i64,
    ) -> Result<Step, ErrorCode> {
        if transactional_id.is_empty() {
            return Err(ErrorCode::InvalidRequest);
        }
        let p = self.owner(transactional_id)?;
        let m = self.partitions[p]
            .txns
            .get_mut(transactional_id)
            .ok_or(ErrorCode::InvalidProducerIdMapping)?;
        if m.producer_id != producer_id {
            return Err(ErrorCode::InvalidProducerIdMapping);
        }
        // Transaction version 1: a client names exactly the current epoch.
        if producer_epoch != m.producer_epoch {
            return Err(ErrorCode::ProducerFenced);
        }
        if m.pending.is_some() {
            return Err(ErrorCode::ConcurrentTransactions);
        }
        let same = ProducerIdAndEpoch {
            producer_id: m.producer_id,
            epoch: m.producer_epoch,
        };
        let transit = match (m.state, result) {
            (TxnState::Ongoing, _) => m
                .prepare_abort_or_commit(result.prepare_state(), now_ms)
                .map_err(|e| transition_failed(&e))?,
            (TxnState::CompleteCommit, TxnResult::Commit)
            | (TxnState::CompleteAbort, TxnResult::Abort) => return Ok(Step::Done(same)),
            (TxnState::PrepareCommit, TxnResult::Commit)
            | (TxnState::PrepareAbort, TxnResult::Abort) => {
                return Err(ErrorCode::ConcurrentTransactions);
            }
            (TxnState::Dead | TxnState::PrepareEpochFence, _) => {
                debug_assert!(false, "{transactional_id} rests in {}", m.state);
                return Err(ErrorCode::UnknownServerError);
            }
            _ => return Err(ErrorCode::InvalidTxnState),
        };
        Ok(Step::Write(self.new_write(
            p,
            transactional_id,
            transit,
            Purpose::EndTxn(result),
        )))
    }
}
