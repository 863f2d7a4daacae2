//! One transactional id's metadata and its two-step transitions, after
//! Kafka's `TransactionMetadata`: `prepare_*` checks that a transition is
//! allowed, marks it pending and returns the target ([`Transit`]) to write
//! to `__transaction_state`; once that record is durable,
//! [`TxnMetadata::complete_transition`] applies it. While a transition is
//! pending no other may start, so one transactional id has at most one
//! record in flight.
//!
//! Transaction version 1 semantics: the producer epoch stays the same
//! across the transactions of one producer session; it changes only on
//! InitProducerId and when a producer is fenced (a timeout, or a new
//! session while a transaction is open).

use std::collections::BTreeSet;

use crate::state::TxnState;
use crate::types::{NO_PRODUCER_EPOCH, TopicPartition};

/// A transition that must not happen: a bug in the coordinator (Kafka
/// throws IllegalStateException for these).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    #[error("{id}: a transition to {to} while {pending} is pending")]
    AlreadyPending {
        id: String,
        to: TxnState,
        pending: TxnState,
    },
    #[error("{id}: no transition from {from} to {to}")]
    NotAllowed {
        id: String,
        from: TxnState,
        to: TxnState,
    },
    #[error("{id}: invalid target of a transition to {to}: {why}")]
    BadTarget {
        id: String,
        to: TxnState,
        why: &'static str,
    },
    #[error("{id}: completing a transition to {to} while {pending:?} is pending")]
    NotPending {
        id: String,
        to: TxnState,
        pending: Option<TxnState>,
    },
}

/// Whether a producer epoch is used up: clients never get `i16::MAX`, so
/// the coordinator can always bump the epoch once more to fence them.
pub fn is_epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// The metadata of one transactional id.
///
/// Invariants: `pending` is the state of the one record in flight, if any;
/// `partitions` is empty in Empty, CompleteCommit and CompleteAbort;
/// `start_ms` is -1 until a transaction starts; `producer_epoch` is -1
/// only before the first InitProducerId of a new transactional id is
/// durable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    /// The producer id before the last change of producer id (KIP-360: a
    /// producer that retries InitProducerId after its epoch was exhausted
    /// may still name it).
    pub previous_producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump by InitProducerId (a retried
    /// InitProducerId names it); -1 after a fence. Not written to the log.
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// The partitions of the open transaction; in PrepareCommit and
    /// PrepareAbort, those whose marker is not written yet.
    pub partitions: BTreeSet<TopicPartition>,
    /// When the open (or last) transaction started; -1 before the first.
    pub start_ms: i64,
    pub last_update_ms: i64,
    /// The state of the transition being written, if any.
    pub pending: Option<TxnState>,
    /// A fence's epoch bump was not written (its append failed): the next
    /// fence does not bump again, as the bumped epoch was never handed out.
    pub has_failed_epoch_fence: bool,
}

/// The target of a transition: the metadata once its record is durable
/// (Kafka's `TxnTransitMetadata`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transit {
    pub producer_id: i64,
    pub previous_producer_id: i64,
    pub producer_epoch: i16,
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<TopicPartition>,
    pub start_ms: i64,
    pub last_update_ms: i64,
}

impl TxnMetadata {
    /// A transactional id seen for the first time: a new producer id, no
    /// epoch yet (InitProducerId's first transition gives it epoch 0).
    pub fn new(transactional_id: &str, producer_id: i64, timeout_ms: i32, now_ms: i64) -> Self {
        TxnMetadata {
            transactional_id: transactional_id.to_string(),
            producer_id,
            previous_producer_id: crate::types::NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
            pending: None,
            has_failed_epoch_fence: false,
        }
    }

    pub fn is_epoch_exhausted(&self) -> bool {
        is_epoch_exhausted(self.producer_epoch)
    }

    /// The metadata as it is, as a transition target (what a record of the
    /// current state holds).
    pub fn current(&self) -> Transit {
        Transit {
            producer_id: self.producer_id,
            previous_producer_id: self.previous_producer_id,
            producer_epoch: self.producer_epoch,
            last_producer_epoch: self.last_producer_epoch,
            timeout_ms: self.timeout_ms,
            state: self.state,
            partitions: self.partitions.clone(),
            start_ms: self.start_ms,
            last_update_ms: self.last_update_ms,
        }
    }

    /// Bumps the epoch to fence the current producer (a timeout, or a new
    /// session while a transaction is open). The bumped epoch is never
    /// returned to a client: the abort that follows carries it.
    pub fn prepare_fence_producer_epoch(&mut self) -> Result<Transit, TransitionError> {
        if self.producer_epoch == i16::MAX {
            return Err(self.bad(TxnState::PrepareEpochFence, "the epoch would overflow"));
        }
        let epoch = if self.has_failed_epoch_fence {
            self.producer_epoch
        } else {
            self.producer_epoch + 1
        };
        let t = Transit {
            producer_epoch: epoch,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            state: TxnState::PrepareEpochFence,
            ..self.current()
        };
        self.prepare(t)
    }

    /// InitProducerId on an idle transactional id: the next epoch of the
    /// same producer id. `expected_epoch` is the epoch a KIP-360 producer
    /// names: its current epoch (bump), the previous one (a retry of a
    /// bump it did not see the answer of: no second bump), anything else is
    /// PRODUCER_FENCED.
    pub fn prepare_increment_producer_epoch(
        &mut self,
        timeout_ms: i32,
        expected_epoch: Option<i16>,
        now_ms: i64,
    ) -> Result<Result<Transit, weir_protocol::error_code::ErrorCode>, TransitionError> {
        if self.is_epoch_exhausted() {
            return Err(self.bad(TxnState::Empty, "the epoch is exhausted"));
        }
        let bumped = self.producer_epoch + 1;
        let (epoch, last) = match expected_epoch {
            None => (bumped, NO_PRODUCER_EPOCH),
            Some(e) if self.producer_epoch == NO_PRODUCER_EPOCH || e == self.producer_epoch => {
                (bumped, self.producer_epoch)
            }
            Some(e) if e == self.last_producer_epoch => {
                (self.producer_epoch, self.last_producer_epoch)
            }
            Some(_) => return Ok(Err(weir_protocol::error_code::ErrorCode::ProducerFenced)),
        };
        let t = Transit {
            producer_epoch: epoch,
            last_producer_epoch: last,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
            ..self.current()
        };
        self.prepare(t).map(Ok)
    }

    /// InitProducerId when the epoch is exhausted: a new producer id at
    /// epoch 0. `record_last_epoch` keeps the old epoch as the last one (a
    /// KIP-360 producer named it, and may retry).
    pub fn prepare_producer_id_rotation(
        &mut self,
        new_producer_id: i64,
        timeout_ms: i32,
        now_ms: i64,
        record_last_epoch: bool,
    ) -> Result<Transit, TransitionError> {
        if self.state.is_open() {
            return Err(self.bad(TxnState::Empty, "a transaction is still open"));
        }
        let t = Transit {
            producer_id: new_producer_id,
            producer_epoch: 0,
            last_producer_epoch: if record_last_epoch {
                self.producer_epoch
            } else {
                NO_PRODUCER_EPOCH
            },
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
            ..self.current()
        };
        self.prepare(t)
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn: the transaction is (or stays)
    /// Ongoing with `added` among its partitions. The first addition starts
    /// it (`start_ms`).
    pub fn prepare_add_partitions(
        &mut self,
        added: &BTreeSet<TopicPartition>,
        now_ms: i64,
    ) -> Result<Transit, TransitionError> {
        let start_ms = match self.state {
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => now_ms,
            _ => self.start_ms,
        };
        let t = Transit {
            state: TxnState::Ongoing,
            partitions: self.partitions.union(added).cloned().collect(),
            start_ms,
            last_update_ms: now_ms,
            ..self.current()
        };
        self.prepare(t)
    }

    /// EndTxn: PrepareCommit or PrepareAbort with the same partitions
    /// (transaction version 1: the epoch stays).
    pub fn prepare_abort_or_commit(
        &mut self,
        state: TxnState,
        now_ms: i64,
    ) -> Result<Transit, TransitionError> {
        let t = Transit {
            state,
            last_update_ms: now_ms,
            ..self.current()
        };
        self.prepare(t)
    }

    /// Every marker is written: CompleteCommit or CompleteAbort, no
    /// partitions.
    pub fn prepare_complete(&mut self, now_ms: i64) -> Result<Transit, TransitionError> {
        let state = match self.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            _ => TxnState::CompleteAbort,
        };
        // The transaction's record reached the log, so a fence bump it
        // carried was written.
        self.has_failed_epoch_fence = false;
        let t = Transit {
            state,
            last_producer_epoch: self.producer_epoch,
            partitions: BTreeSet::new(),
            last_update_ms: now_ms,
            ..self.current()
        };
        self.prepare(t)
    }

    /// Expiration: the transactional id is forgotten once its tombstone is
    /// durable.
    pub fn prepare_dead(&mut self) -> Result<Transit, TransitionError> {
        let t = Transit {
            state: TxnState::Dead,
            partitions: BTreeSet::new(),
            ..self.current()
        };
        self.prepare(t)
    }

    /// Checks a transition and marks it pending (Kafka's
    /// `prepareTransitionTo`). Every target keeps the current producer id
    /// as the previous one.
    fn prepare(&mut self, mut t: Transit) -> Result<Transit, TransitionError> {
        if let Some(pending) = self.pending {
            return Err(TransitionError::AlreadyPending {
                id: self.transactional_id.clone(),
                to: t.state,
                pending,
            });
        }
        if t.producer_id < 0 {
            return Err(self.bad(t.state, "negative producer id"));
        }
        if t.state != TxnState::Dead && t.producer_epoch < 0 {
            return Err(self.bad(t.state, "negative producer epoch"));
        }
        if !t.state.may_follow(self.state) {
            return Err(TransitionError::NotAllowed {
                id: self.transactional_id.clone(),
                from: self.state,
                to: t.state,
            });
        }
        t.previous_producer_id = self.producer_id;
        self.pending = Some(t.state);
        Ok(t)
    }

    /// Applies a prepared transition whose record is durable (Kafka's
    /// `completeTransitionTo`), after checking it is the one pending and
    /// consistent with the current metadata.
    pub fn complete_transition(&mut self, t: &Transit) -> Result<(), TransitionError> {
        if self.pending != Some(t.state) {
            return Err(TransitionError::NotPending {
                id: self.transactional_id.clone(),
                to: t.state,
                pending: self.pending,
            });
        }
        let same_producer =
            t.producer_id == self.producer_id && t.producer_epoch == self.producer_epoch;
        match t.state {
            TxnState::Empty => {
                let bump = t.producer_epoch == self.producer_epoch.saturating_add(1)
                    || (t.producer_epoch == 0 && t.producer_id != self.producer_id);
                if (t.producer_epoch != self.producer_epoch && !bump)
                    || !t.partitions.is_empty()
                    || t.start_ms != -1
                {
                    return Err(self.bad(t.state, "not an epoch bump of an idle producer"));
                }
                self.timeout_ms = t.timeout_ms;
                // Kafka keeps the last transaction's start in memory here,
                // though its record says -1; the record is what a reload
                // sees, so memory follows it.
                self.start_ms = t.start_ms;
                self.producer_epoch = t.producer_epoch;
                self.last_producer_epoch = t.last_producer_epoch;
                self.producer_id = t.producer_id;
                self.previous_producer_id = t.previous_producer_id;
            }
            TxnState::Ongoing => {
                if !same_producer
                    || !self.partitions.is_subset(&t.partitions)
                    || self.timeout_ms != t.timeout_ms
                {
                    return Err(self.bad(t.state, "partitions removed or producer changed"));
                }
                self.start_ms = t.start_ms;
                self.partitions.extend(t.partitions.iter().cloned());
            }
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                if !same_producer
                    || self.partitions != t.partitions
                    || self.timeout_ms != t.timeout_ms
                    || self.start_ms != t.start_ms
                {
                    return Err(self.bad(t.state, "not the open transaction"));
                }
            }
            TxnState::CompleteCommit | TxnState::CompleteAbort => {
                if !same_producer || self.timeout_ms != t.timeout_ms || t.start_ms == -1 {
                    return Err(self.bad(t.state, "not the transaction being completed"));
                }
                self.start_ms = t.start_ms;
                self.partitions.clear();
            }
            TxnState::PrepareEpochFence | TxnState::Dead => {
                // A fence is written as PrepareAbort; an expiration removes
                // the transactional id instead of completing.
                return Err(self.bad(t.state, "never completed"));
            }
        }
        self.last_update_ms = t.last_update_ms;
        self.pending = None;
        self.state = t.state;
        Ok(())
    }

    fn bad(&self, to: TxnState, why: &'static str) -> TransitionError {
        TransitionError::BadTarget {
            id: self.transactional_id.clone(),
            to,
            why,
        }
    }
}
