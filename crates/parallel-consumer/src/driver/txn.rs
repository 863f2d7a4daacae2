//! Exactly-once mode, the I/O part: one transactional producer, and per
//! batch of completed work one transaction that writes the outputs of the
//! records below the new commit offsets and commits those offsets
//! (`send_offsets_to_transaction` with the consumer's group metadata).
//!
//! What goes into a transaction is decided by
//! [`crate::exactly_once::OutputBuffer::plan`]; this module runs it:
//! begin, produce the plan's outputs in order, send the offsets, commit.
//!
//! - An abortable error (a failed delivery, a refused offset commit such as
//!   a stale group generation after a rebalance, a timeout) aborts the
//!   transaction; the partitions in it are rewound to their last committed
//!   offset (seek) and their records run again.
//! - A fatal error (another producer with the same `transactional.id`
//!   fenced this one, or a commit whose outcome stays unknown) stops the
//!   consumer with [`DriverError::ProducerFenced`] or
//!   [`DriverError::Transaction`]: nothing more is committed, and the next
//!   instance with the same `transactional.id` aborts whatever was open.
//!
//! Transactions run on the owner thread between polls (and in the revoke
//! callback, before the partitions go), so a transaction is never open
//! while the consumer polls: a rebalance always finds none open.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::events::ConsumerEvent;
use super::rebalance::PcContext;
use super::{DriverError, Shared};
use crate::engine::CommitRequest;
use crate::exactly_once::{OutputBuffer, OutputRecord, TxnPlan};
use crate::tracker::TopicPartition;

/// Called on the owner thread at each step of a transaction; it blocks the
/// consumer while it runs, so keep it short (log, count).
pub type TxnObserver = Arc<dyn Fn(&TxnEvent) + Send + Sync>;

/// Settings of the exactly-once mode.
#[derive(Clone)]
pub struct ExactlyOnceConfig {
    /// The producer's `transactional.id`. Give every consumer instance its
    /// own, stable across restarts (for example the host or pod name): a
    /// restarted instance then fences its predecessor and aborts its open
    /// transaction at once. An instance that never comes back leaves its
    /// transaction open until `transaction_timeout`, and read_committed
    /// readers of the output and the group's offsets wait for it.
    pub transactional_id: String,
    /// The producer's settings. `None`: the consumer's connection and
    /// security settings (`bootstrap.servers`, `client.id`,
    /// `security.protocol`, `sasl.*`, `ssl.*`, …: see
    /// [`super::connection`]). `transactional.id` and
    /// `transaction.timeout.ms` are set from this struct.
    pub producer: Option<ClientConfig>,
    /// `transaction.timeout.ms`: the broker aborts a transaction left open
    /// longer (a transaction here is open for one commit round only).
    pub transaction_timeout: Duration,
    /// Bound of each blocking transaction call (`init_transactions`,
    /// `send_offsets_to_transaction`, `commit_transaction`,
    /// `abort_transaction`) and of the seek of a rewind.
    pub operation_timeout: Duration,
    /// Once the outputs waiting for a transaction reach this many bytes
    /// (keys, values, headers), the next transaction starts without waiting
    /// for `commit_interval`. Outputs of records completed above an
    /// unfinished one cannot go yet; they are bounded by
    /// `max_tracked_per_partition` records.
    pub max_pending_output_bytes: usize,
    pub observer: Option<TxnObserver>,
}

impl ExactlyOnceConfig {
    pub fn new(transactional_id: impl Into<String>) -> Self {
        ExactlyOnceConfig {
            transactional_id: transactional_id.into(),
            producer: None,
            transaction_timeout: Duration::from_secs(30),
            operation_timeout: Duration::from_secs(30),
            max_pending_output_bytes: 16 << 20,
            observer: None,
        }
    }

    /// The producer's configuration (see [`ExactlyOnceConfig::producer`]).
    pub fn producer_config(&self, consumer: &ClientConfig) -> ClientConfig {
        let mut p = match &self.producer {
            Some(p) => p.clone(),
            None => super::connection::producer_base(consumer),
        };
        p.set("transactional.id", &self.transactional_id);
        p.set(
            "transaction.timeout.ms",
            self.transaction_timeout.as_millis().to_string(),
        );
        p
    }
}

impl fmt::Debug for ExactlyOnceConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExactlyOnceConfig")
            .field("transactional_id", &self.transactional_id)
            .field("producer", &self.producer)
            .field("transaction_timeout", &self.transaction_timeout)
            .field("operation_timeout", &self.operation_timeout)
            .field("max_pending_output_bytes", &self.max_pending_output_bytes)
            .field("observer", &self.observer.as_ref().map(|_| "<fn>"))
            .finish()
    }
}

/// One transaction as the observer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnSummary {
    /// Counts this consumer's transactions from 1.
    pub id: u64,
    /// Output records written in it.
    pub outputs: usize,
    /// The committed offsets it carries, per input partition.
    pub offsets: Vec<(TopicPartition, i64)>,
}

/// A step of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnEvent {
    /// The outputs are written (acknowledged by the broker) and the offsets
    /// sent: the transaction is open and its commit comes next.
    Committing(TxnSummary),
    Committed(TxnSummary),
    /// Aborted: its partitions run again from their committed offsets
    /// (after a revoke or at shutdown they are simply given up).
    Aborted {
        summary: TxnSummary,
        error: String,
    },
}

/// How a transaction ended, when the consumer can go on.
#[derive(Debug)]
pub(crate) enum TxnOutcome {
    Committed,
    Aborted(KafkaError),
}

/// The transactional producer and the outputs waiting for it.
pub(crate) struct Transactional {
    producer: BaseProducer,
    outputs: Mutex<OutputBuffer>,
    config: ExactlyOnceConfig,
    transactions: AtomicU64,
}

/// What a failed step asks for.
enum Failure {
    Abort(KafkaError),
    Fatal(KafkaError),
    /// The consumer has no group metadata (it is not in a group).
    NoGroup,
}

impl Transactional {
    /// Creates the producer and initialises its transactions: this fences
    /// an earlier producer with the same `transactional.id` and aborts its
    /// open transaction.
    pub(crate) fn start(
        consumer: &ClientConfig,
        config: ExactlyOnceConfig,
    ) -> Result<Transactional, DriverError> {
        if config.transactional_id.is_empty() {
            return Err(DriverError::NoTransactionalId);
        }
        let producer: BaseProducer = config.producer_config(consumer).create()?;
        producer
            .init_transactions(config.operation_timeout)
            .map_err(fatal)?;
        Ok(Transactional {
            producer,
            outputs: Mutex::new(OutputBuffer::default()),
            config,
            transactions: AtomicU64::new(0),
        })
    }

    /// Whether the waiting outputs reached
    /// [`ExactlyOnceConfig::max_pending_output_bytes`].
    pub(crate) fn outputs_full(&self) -> bool {
        self.lock_outputs().bytes() >= self.config.max_pending_output_bytes
    }

    pub(crate) fn lock_outputs(&self) -> MutexGuard<'_, OutputBuffer> {
        // Nothing panics while holding it; the buffer is consistent between
        // calls.
        self.outputs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn observe(&self, event: TxnEvent) {
        if let Some(observer) = &self.config.observer {
            observer(&event);
        }
    }

    /// Runs `plan` as one transaction. `Err` is fatal: the consumer stops.
    pub(crate) fn run(
        &self,
        consumer: &BaseConsumer<PcContext>,
        plan: &TxnPlan,
    ) -> Result<TxnOutcome, DriverError> {
        let summary = TxnSummary {
            id: self.transactions.fetch_add(1, AtomicOrdering::Relaxed) + 1,
            outputs: plan.output_count(),
            offsets: plan
                .parts
                .iter()
                .map(|p| (p.commit.tp.clone(), p.commit.offset))
                .collect(),
        };
        match self.attempt(consumer, plan, &summary) {
            Ok(()) => {
                tracing::debug!(
                    txn = summary.id,
                    outputs = summary.outputs,
                    "transaction committed"
                );
                self.observe(TxnEvent::Committed(summary));
                Ok(TxnOutcome::Committed)
            }
            Err(Failure::Fatal(e)) => Err(fatal(e)),
            Err(Failure::NoGroup) => Err(DriverError::NoGroupId),
            Err(Failure::Abort(e)) => {
                tracing::warn!(txn = summary.id, error = %e, "transaction failed: aborting");
                self.abort()?;
                self.observe(TxnEvent::Aborted {
                    summary,
                    error: e.to_string(),
                });
                Ok(TxnOutcome::Aborted(e))
            }
        }
    }

    fn attempt(
        &self,
        consumer: &BaseConsumer<PcContext>,
        plan: &TxnPlan,
        summary: &TxnSummary,
    ) -> Result<(), Failure> {
        // Not reachable with a group.id; nothing has begun yet.
        let group = consumer.group_metadata().ok_or(Failure::NoGroup)?;
        let deadline = Instant::now() + self.config.operation_timeout;
        // A begin that fails leaves the producer in a state this loop does
        // not know how to leave: stop.
        self.producer.begin_transaction().map_err(Failure::Fatal)?;
        for output in plan.outputs() {
            self.send(output, deadline)?;
        }
        // commit_transaction would flush anyway; flushing first makes
        // `Committing` mean the outputs are on the broker.
        self.producer
            .flush(deadline.saturating_duration_since(Instant::now()))
            .map_err(classify)?;
        let mut offsets = TopicPartitionList::with_capacity(plan.parts.len());
        for p in &plan.parts {
            offsets
                .add_partition_offset(
                    &p.commit.tp.topic,
                    p.commit.tp.partition,
                    Offset::Offset(p.commit.offset),
                )
                .map_err(Failure::Abort)?;
        }
        self.producer
            .send_offsets_to_transaction(&offsets, &group, self.config.operation_timeout)
            .map_err(classify)?;
        self.observe(TxnEvent::Committing(summary.clone()));
        // A retriable error (a timeout) leaves the outcome unknown; the
        // commit is retried until it is known or the deadline passes.
        let deadline = Instant::now() + self.config.operation_timeout;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            match self
                .producer
                .commit_transaction(remaining.max(Duration::from_millis(1)))
            {
                Ok(()) => return Ok(()),
                Err(e) if retriable(&e) && !remaining.is_zero() => {
                    tracing::warn!(error = %e, "commit_transaction: retrying");
                }
                Err(e) if retriable(&e) => {
                    tracing::error!(error = %e, "commit_transaction: outcome unknown");
                    return Err(Failure::Fatal(e));
                }
                Err(e) => return Err(classify(e)),
            }
        }
    }

    /// Produces one output into the open transaction, waiting (until
    /// `deadline`) while the producer's queue is full.
    fn send(&self, output: &OutputRecord, deadline: Instant) -> Result<(), Failure> {
        let mut headers = OwnedHeaders::new_with_capacity(output.headers.len());
        for (key, value) in &output.headers {
            headers = headers.insert(Header {
                key,
                value: value.as_deref(),
            });
        }
        loop {
            let mut record: BaseRecord<'_, [u8], [u8]> =
                BaseRecord::to(&output.topic).headers(headers.clone());
            if let Some(p) = output.partition {
                record = record.partition(p);
            }
            if let Some(k) = &output.key {
                record = record.key(k.as_slice());
            }
            if let Some(v) = &output.payload {
                record = record.payload(v.as_slice());
            }
            if let Some(ts) = output.timestamp_ms {
                record = record.timestamp(ts);
            }
            match self.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _))
                    if Instant::now() < deadline =>
                {
                    self.producer.poll(Duration::from_millis(10));
                }
                Err((e, _)) => return Err(classify(e)),
            }
        }
    }

    fn abort(&self) -> Result<(), DriverError> {
        let deadline = Instant::now() + self.config.operation_timeout;
        // abort_transaction waits until every message sent in the
        // transaction has its delivery report, and a BaseProducer makes
        // those only while it is polled: serve them first (the outputs sent
        // before the failure reach the broker and are aborted with it).
        // Without this an abort with outputs still queued timed out and
        // stopped the consumer.
        if let Err(e) = self.producer.flush(self.config.operation_timeout) {
            tracing::warn!(error = %e, "flush before abort_transaction");
        }
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            match self
                .producer
                .abort_transaction(remaining.max(Duration::from_millis(1)))
            {
                Ok(()) => return Ok(()),
                Err(e) if retriable(&e) && !remaining.is_zero() => {
                    tracing::warn!(error = %e, "abort_transaction: retrying");
                }
                Err(e) => return Err(fatal(e)),
            }
        }
    }
}

fn retriable(e: &KafkaError) -> bool {
    match e {
        KafkaError::Transaction(r) => r.is_retriable() && !r.is_fatal() && !r.txn_requires_abort(),
        // commit_transaction flushes first; its timeout returns before the
        // commit was even asked for.
        KafkaError::Flush(_) => true,
        _ => false,
    }
}

fn classify(e: KafkaError) -> Failure {
    match &e {
        KafkaError::Transaction(r) if r.is_fatal() => Failure::Fatal(e),
        _ => Failure::Abort(e),
    }
}

/// The error that stops the consumer.
fn fatal(e: KafkaError) -> DriverError {
    let code = match &e {
        KafkaError::Transaction(r) => Some(r.code()),
        other => other.rdkafka_error_code(),
    };
    if code.is_some_and(is_fencing) {
        DriverError::ProducerFenced(e)
    } else {
        DriverError::Transaction(e)
    }
}

/// Errors meaning another producer with our `transactional.id` took over.
pub fn is_fencing(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::ProducerFenced
            | RDKafkaErrorCode::Fenced
            | RDKafkaErrorCode::InvalidProducerEpoch
            | RDKafkaErrorCode::TransactionCoordinatorFenced
    )
}

/// One round of the owner loop: a transaction for every partition whose
/// completed prefix moved. After an abort the partitions in it run again
/// from their committed offsets. `Err` is fatal.
pub(crate) fn commit_round(
    consumer: &BaseConsumer<PcContext>,
    shared: &Shared,
    txn: &Transactional,
) -> Result<(), DriverError> {
    let plan = {
        let engine = shared.lock_engine();
        // A batch straddling the watermark can hold a partition at the
        // offset already committed: no transaction for that.
        txn.lock_outputs()
            .plan(engine.commits())
            .without_unmoved(|tp| engine.confirmed(tp))
    };
    if plan.is_empty() {
        return Ok(());
    }
    match txn.run(consumer, &plan)? {
        TxnOutcome::Committed => {
            shared.lock_engine().commit_succeeded(&plan.commits());
            Ok(())
        }
        TxnOutcome::Aborted(e) => {
            shared.emit(|| ConsumerEvent::TransactionAborted {
                error: e.to_string(),
            });
            rewind(consumer, shared, txn, &plan.commits())
        }
    }
}

/// Starts the partitions of an aborted transaction again at their last
/// committed offsets: a new generation in the engine (late results of the
/// old one are discarded), their buffered outputs dropped, the consumer
/// sought back (its prefetched records for them are purged) and resumed.
fn rewind(
    consumer: &BaseConsumer<PcContext>,
    shared: &Shared,
    txn: &Transactional,
    commits: &[CommitRequest],
) -> Result<(), DriverError> {
    for c in commits {
        let rewound = {
            let mut engine = shared.lock_engine();
            if engine.generation(&c.tp) != Some(c.generation) {
                continue;
            }
            engine.rewind(&c.tp)
        };
        txn.lock_outputs().drop_partition(&c.tp);
        // Running tasks of the old generation are stale now.
        shared.cancel(std::slice::from_ref(&c.tp));
        let Some((generation, offset)) = rewound else {
            continue;
        };
        tracing::info!(
            topic = %c.tp.topic, partition = c.tp.partition, offset, generation,
            "transaction aborted: records run again from the committed offset"
        );
        // With a timeout, seek returns once no record fetched before it can
        // be returned by poll; if it fails the position is unknown: stop.
        consumer
            .seek(
                &c.tp.topic,
                c.tp.partition,
                Offset::Offset(offset),
                txn.config.operation_timeout,
            )
            .map_err(DriverError::Rewind)?;
        let mut tpl = TopicPartitionList::with_capacity(1);
        tpl.add_partition(&c.tp.topic, c.tp.partition);
        if let Err(e) = consumer.resume(&tpl) {
            tracing::debug!(error = %e, "resume after rewind");
        }
    }
    Ok(())
}

/// The final transaction of partitions that are going (revoke, shutdown):
/// their completed prefix is committed with its outputs, the rest dropped.
/// Returns the commits it carried (a request's offset lowered to the first
/// record of a batch that straddles it) and the error text when it did not
/// commit; `Err` is fatal.
pub(crate) fn commit_leaving(
    consumer: &BaseConsumer<PcContext>,
    txn: &Transactional,
    requests: Vec<CommitRequest>,
    tps: &[TopicPartition],
) -> Result<(Vec<CommitRequest>, Option<String>), DriverError> {
    let plan = {
        let mut outputs = txn.lock_outputs();
        let plan = outputs.plan(requests);
        for tp in tps {
            outputs.drop_partition(tp);
        }
        plan
    };
    if plan.is_empty() {
        return Ok((Vec::new(), None));
    }
    let commits = plan.commits();
    match txn.run(consumer, &plan)? {
        TxnOutcome::Committed => Ok((commits, None)),
        TxnOutcome::Aborted(e) => Ok((commits, Some(e.to_string()))),
    }
}
