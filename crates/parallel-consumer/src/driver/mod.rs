//! The driver: one thread owns an rdkafka `BaseConsumer` and alone polls,
//! commits, pauses and resumes; handlers run as tokio tasks and report
//! through a queue.
//!
//! ```no_run
//! use rdkafka::ClientConfig;
//! use weir_parallel_consumer::driver::{DriverConfig, ParallelConsumer};
//! use weir_parallel_consumer::record::Record;
//! use weir_parallel_consumer::scheduler::Ordering;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = tokio::runtime::Runtime::new()?;
//! let mut client = ClientConfig::new();
//! client
//!     .set("bootstrap.servers", "127.0.0.1:9092")
//!     .set("group.id", "billing");
//! let mut config = DriverConfig::default();
//! config.engine.scheduler.ordering = Ordering::Key;
//! let consumer = ParallelConsumer::start(
//!     client,
//!     &["payments"],
//!     config,
//!     runtime.handle().clone(),
//!     |record: Record| async move {
//!         println!("{} {}", record.event_id(), record.offset);
//!         Ok::<(), std::io::Error>(())
//!     },
//! )?;
//! // ... later
//! for p in consumer.stats() {
//!     println!("{}-{}: committed {:?}", p.topic, p.partition, p.committed);
//! }
//! consumer.shutdown_blocking()?;
//! # Ok(())
//! # }
//! ```
//!
//! The crate documentation shows the builder ([`ParallelConsumer::builder`])
//! with an async handler that takes a [`HandlerContext`] and an async
//! shutdown.
//!
//! Exactly-once mode ([`ParallelConsumer::start_exactly_once`]): the handler
//! returns the output records of its input record; they are written, and
//! the input offsets committed, in one transaction per batch of completed
//! work (see [`txn`]).
//!
//! ```no_run
//! use rdkafka::ClientConfig;
//! use weir_parallel_consumer::driver::{DriverConfig, ExactlyOnceConfig, ParallelConsumer};
//! use weir_parallel_consumer::exactly_once::OutputRecord;
//! use weir_parallel_consumer::record::Record;
//! use weir_parallel_consumer::scheduler::Ordering;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = tokio::runtime::Runtime::new()?;
//! let mut client = ClientConfig::new();
//! client
//!     .set("bootstrap.servers", "127.0.0.1:9092")
//!     .set("group.id", "enricher");
//! let mut config = DriverConfig::default();
//! config.engine.scheduler.ordering = Ordering::Key;
//! let consumer = ParallelConsumer::start_exactly_once(
//!     client,
//!     &["payments"],
//!     config,
//!     ExactlyOnceConfig::new("enricher-0"),
//!     runtime.handle().clone(),
//!     |record: Record| async move {
//!         let mut out = OutputRecord::to("payments-enriched")
//!             .payload(record.payload.clone().unwrap_or_default());
//!         if let Some(key) = &record.key {
//!             out = out.key(key.clone());
//!         }
//!         Ok::<_, std::io::Error>(vec![out])
//!     },
//! )?;
//! // ... later
//! consumer.shutdown_blocking()?;
//! # Ok(())
//! # }
//! ```

mod builder;
mod commit;
mod config;
pub mod connection;
mod events;
mod handler;
mod owner;
mod rebalance;
pub mod txn;
mod worker;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering as AtomicOrdering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use tokio::sync::{broadcast, oneshot};

use crate::engine::{CommitRequest, Engine, Outcome, PartitionStats, Task};
use crate::exactly_once::OutputRecord;
use crate::record::Record;
use crate::scheduler::Decision;
use crate::tracker::TopicPartition;
pub use builder::{FETCH_QUEUE_BACKOFF_MS, FETCH_WAIT_MAX_MS, ParallelConsumerBuilder, Prepared};
pub use config::{CommitMode, DriverConfig, DriverError};
pub use events::{ConsumerEvent, EVENT_CAPACITY};
pub use handler::{BoxError, CancellationToken, HandlerContext, HandlerError, RetryDelay};
use txn::Transactional;
pub use txn::{ExactlyOnceConfig, TxnEvent, TxnObserver, TxnSummary};
use worker::{BoxHandler, Job, Report};

/// Whether a commit error means the partitions belong to someone else now
/// (stop committing for this assignment) rather than a transient failure
/// (retry with the next commit).
pub fn is_ownership_error(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::IllegalGeneration
            | RDKafkaErrorCode::UnknownMemberId
            | RDKafkaErrorCode::FencedInstanceId
            | RDKafkaErrorCode::StaleMemberEpoch
            | RDKafkaErrorCode::AssignmentLost
            | RDKafkaErrorCode::Fenced
    )
}

/// Whether a failed commit's error is an ownership error
/// ([`is_ownership_error`]).
pub(crate) fn ownership_error(e: &KafkaError) -> bool {
    matches!(e, KafkaError::ConsumerCommit(code) if is_ownership_error(*code))
}

const RUN: u8 = 0;
const SHUTDOWN: u8 = 1;
const ABORT: u8 = 2;
/// A fatal error stopped the consumer (the error is in `Shared::failure`).
const FAILED: u8 = 3;

/// State shared by the poll loop and the rebalance callbacks. Both run on
/// the owner thread; the mutexes are hardly contended (they make the context
/// `Sync`, as rdkafka requires): other threads lock the engine only to read
/// [`ParallelConsumer::stats`].
pub(crate) struct Shared {
    engine: Mutex<Engine<Record>>,
    results: Mutex<Receiver<Vec<Report>>>,
    config: DriverConfig,
    started: Instant,
    state: AtomicU8,
    /// Exactly-once mode: the transactional producer and waiting outputs.
    txn: Option<Transactional>,
    /// What stopped the consumer, with state `FAILED`.
    failure: Mutex<Option<DriverError>>,
    /// Where [`ConsumerEvent`]s go (sent only while someone listens).
    events: broadcast::Sender<ConsumerEvent>,
    /// The cancellation token of each owned partition's assignment, by
    /// generation; fired when the partition goes.
    tokens: Mutex<crate::scheduler::FastMap<TopicPartition, (u64, CancellationToken)>>,
    /// Periodic commits sent without waiting ([`CommitMode::Async`]) whose
    /// answer has not come yet.
    inflight_commits: Mutex<Vec<CommitRequest>>,
    /// Pause and resume decisions made by workers (see [`worker::Refill`]),
    /// for the owner thread to carry out. Changed only with the engine
    /// locked, so they keep the engine's order.
    flow: Mutex<Vec<Decision<Task<Record>>>>,
    /// How long the shutdown drain waits, in milliseconds
    /// ([`DriverConfig::shutdown_timeout`] unless shutdown says otherwise).
    shutdown_timeout_ms: AtomicU64,
    /// What the workers count ([`ParallelConsumer::metrics`]).
    counters: Arc<crate::metrics::Counters>,
}

impl Shared {
    fn lock_engine(&self) -> MutexGuard<'_, Engine<Record>> {
        // A poisoned lock means the owner thread panicked while holding it;
        // the engine's invariants hold between calls, so keep going.
        self.engine.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now_ms(&self) -> i64 {
        i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// Applies a worker's result; in exactly-once mode a record (or batch)
    /// that completed leaves its outputs to wait for the watermark.
    fn apply(&self, engine: &mut Engine<Record>, report: Report) {
        if !engine.finished(report.id, &report.task, report.outcome) {
            tracing::debug!(task = ?report.task, "stale result discarded");
            return;
        }
        let completed = matches!(
            report.outcome,
            Outcome::Success | Outcome::DeadLettered { .. }
        );
        if let Some(txn) = &self.txn
            && completed
        {
            let t = &report.task;
            let first = report.batch_first.unwrap_or(t.offset);
            txn.lock_outputs()
                .insert_batch(&t.tp, t.generation, first, t.offset, report.outputs);
        }
    }

    /// Stops the consumer with a fatal error (the first one is kept).
    fn fail(&self, error: DriverError) {
        tracing::error!(error = %error, "stopping");
        self.emit(|| ConsumerEvent::Stopped(error.clone()));
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(error);
        self.state.store(FAILED, AtomicOrdering::SeqCst);
    }

    /// Sends an event if anyone listens.
    fn emit(&self, event: impl FnOnce() -> ConsumerEvent) {
        if self.events.receiver_count() > 0 {
            let _ = self.events.send(event());
        }
    }

    /// The cancellation token of `tp`'s assignment `generation`; a token of
    /// an earlier generation is fired and replaced.
    fn token_for(
        tokens: &mut crate::scheduler::FastMap<TopicPartition, (u64, CancellationToken)>,
        tp: &TopicPartition,
        generation: u64,
    ) -> CancellationToken {
        match tokens.get(tp) {
            Some((g, token)) if *g == generation => token.clone(),
            _ => {
                let token = CancellationToken::new();
                if let Some((_, old)) = tokens.insert(tp.clone(), (generation, token.clone())) {
                    old.cancel();
                }
                token
            }
        }
    }

    /// Reports a failed commit of `request` (already logged).
    fn commit_failed(&self, request: &CommitRequest, error: KafkaError, ownership: bool) {
        self.emit(|| ConsumerEvent::CommitFailed {
            tp: request.tp.clone(),
            offset: request.offset,
            error,
            ownership,
        });
    }

    fn lock_tokens(
        &self,
    ) -> MutexGuard<'_, crate::scheduler::FastMap<TopicPartition, (u64, CancellationToken)>> {
        self.tokens.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Fires (and forgets) the tokens of partitions that are going.
    fn cancel(&self, tps: &[TopicPartition]) {
        let mut tokens = self.lock_tokens();
        for tp in tps {
            if let Some((_, token)) = tokens.remove(tp) {
                token.cancel();
            }
        }
    }

    fn cancel_all(&self) {
        for (_, (_, token)) in self.lock_tokens().drain() {
            token.cancel();
        }
    }

    /// Forgets the waiting outputs of partitions that are gone.
    fn forget_outputs(&self, tps: &[TopicPartition]) {
        if let Some(txn) = &self.txn {
            let mut outputs = txn.lock_outputs();
            for tp in tps {
                outputs.drop_partition(tp);
            }
        }
    }

    /// Waits up to `timeout` for worker results and applies them (one
    /// batch). False when none came.
    fn apply_one_result(&self, timeout: Duration) -> bool {
        let r = self
            .results
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .recv_timeout(timeout);
        match r {
            Ok(reports) => {
                let mut engine = self.lock_engine();
                for report in reports {
                    self.apply(&mut engine, report);
                }
                true
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => false,
        }
    }

    fn lock_inflight(&self) -> MutexGuard<'_, Vec<CommitRequest>> {
        self.inflight_commits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Records the outcome of a commit sent with [`CommitMode::Async`]
    /// (librdkafka's commit callback, on the owner thread): each partition
    /// in the answer that matches a request in flight is a checkpoint or a
    /// failure, as with a synchronous commit.
    fn async_commit_answered(
        &self,
        result: &rdkafka::error::KafkaResult<()>,
        offsets: &rdkafka::TopicPartitionList,
    ) {
        let mut answered = Vec::new();
        {
            let mut inflight = self.lock_inflight();
            for e in offsets.elements() {
                let rdkafka::Offset::Offset(offset) = e.offset() else {
                    continue;
                };
                let Some(i) = inflight.iter().position(|r| {
                    *r.tp.topic == *e.topic()
                        && r.tp.partition == e.partition()
                        && r.offset == offset
                }) else {
                    continue;
                };
                let request = inflight.swap_remove(i);
                let answer = match e.error() {
                    Err(KafkaError::OffsetFetch(code) | KafkaError::ConsumerCommit(code)) => {
                        Err(KafkaError::ConsumerCommit(code))
                    }
                    Err(other) => Err(other),
                    Ok(()) => result.clone(),
                };
                answered.push((request, answer));
            }
        }
        self.record_commits(answered.iter().map(|(r, a)| (r, a.clone())));
    }

    /// Records each partition's commit answer: a checkpoint, or a failure
    /// (logged and reported; an ownership error stops commits for the
    /// assignment).
    fn record_commits<'a>(
        &self,
        answers: impl IntoIterator<Item = (&'a CommitRequest, Result<(), KafkaError>)>,
    ) {
        let mut engine = self.lock_engine();
        for (request, answer) in answers {
            match answer {
                Ok(()) => engine.commit_succeeded(std::slice::from_ref(request)),
                Err(e) => {
                    let ownership = ownership_error(&e);
                    tracing::warn!(
                        topic = %request.tp.topic, partition = request.tp.partition,
                        offset = request.offset, error = %e, ownership,
                        "commit failed; not recorded as a checkpoint"
                    );
                    engine.commit_failed(std::slice::from_ref(request), ownership);
                    self.commit_failed(request, e, ownership);
                }
            }
        }
    }

    /// The engine's decisions, with the pause and resume decisions workers
    /// made first (in the order the engine made them all).
    fn actions(&self) -> Vec<Decision<Task<Record>>> {
        let mut engine = self.lock_engine();
        let mut decisions = std::mem::take(&mut *self.lock_flow());
        decisions.extend(engine.actions());
        decisions
    }

    /// The jobs of the submit decisions among `decisions` (a batch's
    /// records in one job), each with its assignment's cancellation token;
    /// the pause and resume decisions go to `flow`, in order.
    fn jobs(
        &self,
        decisions: Vec<Decision<Task<Record>>>,
        mut flow: impl FnMut(Decision<Task<Record>>),
    ) -> Vec<Job> {
        let mut jobs = Vec::new();
        let mut tokens = None;
        for d in decisions {
            match d {
                Decision::Submit {
                    id, batch, payload, ..
                } => {
                    let task = payload.task_ref();
                    Job::add(&mut jobs, id, batch, task, payload.payload, |task| {
                        let tokens = tokens.get_or_insert_with(|| self.lock_tokens());
                        Shared::token_for(tokens, &task.tp, task.generation)
                    });
                }
                other => flow(other),
            }
        }
        jobs
    }

    fn lock_flow(&self) -> MutexGuard<'_, Vec<Decision<Task<Record>>>> {
        self.flow.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn apply_ready_results(&self) {
        let rx = self.results.lock().unwrap_or_else(|p| p.into_inner());
        let mut engine = self.lock_engine();
        while let Ok(reports) = rx.try_recv() {
            for report in reports {
                self.apply(&mut engine, report);
            }
        }
    }
}

impl worker::Refill for Shared {
    fn finished(&self, reports: Vec<Report>) -> Result<Vec<Job>, Vec<Report>> {
        // Never wait for the engine on a runtime thread: the owner thread
        // holds it while it delivers a batch or runs a rebalance.
        let mut engine = match self.engine.try_lock() {
            Ok(engine) => engine,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Err(reports),
        };
        for report in reports {
            self.apply(&mut engine, report);
        }
        if self.state.load(AtomicOrdering::SeqCst) != RUN {
            return Ok(Vec::new());
        }
        // With the engine still locked, so the flow decisions keep its
        // order.
        let jobs = self.jobs(engine.actions(), |flow| self.lock_flow().push(flow));
        Ok(jobs)
    }
}

/// Commits explicit offsets (with their completed-set metadata) of every
/// partition in one request, waiting for the broker's answer, and returns
/// each partition's result ([`commit::commit_all`]: librdkafka's own
/// commit call reports a request in which only some partitions failed as a
/// success, and a checkpoint must never be recorded for a partition whose
/// commit failed).
pub(crate) fn commit<C: rdkafka::consumer::ConsumerContext>(
    consumer: &BaseConsumer<C>,
    requests: &[CommitRequest],
) -> Vec<Result<(), KafkaError>> {
    commit::commit_all(consumer, requests)
}

/// What the consumer thread did when it stopped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// The final commits made (empty after [`ParallelConsumer::abort`]).
    pub final_commits: Vec<CommitRequest>,
    /// Whether the final commit failed.
    pub final_commit_error: Option<String>,
    /// Tasks running when the shutdown began that finished within the
    /// drain deadline (their records are in the final commit's prefix
    /// unless an earlier record of their partition was unfinished).
    pub drained: usize,
    /// Tasks still running when the wait ended (their records run again on
    /// the next owner); their cancellation tokens were fired.
    pub abandoned: usize,
    /// From the owner thread seeing the stop request (within a loop turn)
    /// to the end of the final commit and leaving the group.
    pub duration: Duration,
}

type ThreadResult = Result<ShutdownReport, DriverError>;

/// A running parallel consumer.
///
/// Stopping: [`ParallelConsumer::shutdown`] (async: drains in-flight work
/// up to [`DriverConfig::shutdown_timeout`], commits the completed prefix,
/// leaves the group), [`ParallelConsumer::shutdown_blocking`] (the same for
/// callers outside an async runtime), [`ParallelConsumer::abort`] (no
/// drain, no commit). Dropping it never blocks: it asks the owner thread
/// to shut down and returns; the drain and final commit then happen in the
/// background (as long as the process and the handlers' runtime live).
pub struct ParallelConsumer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// The owner thread's result, sent as its last act.
    done: Option<oneshot::Receiver<ThreadResult>>,
}

impl ParallelConsumer {
    /// A builder: client settings, topics, driver settings, runtime, then
    /// [`ParallelConsumerBuilder::start`] with a handler.
    pub fn builder() -> ParallelConsumerBuilder {
        ParallelConsumerBuilder::default()
    }

    /// Subscribes to `topics` and starts the owner thread. `client` must set
    /// `bootstrap.servers` and `group.id`; the driver sets
    /// `enable.auto.commit=false` and `enable.auto.offset.store=false` (it
    /// commits explicit offsets). Handlers run on `runtime`, which needs the
    /// time driver enabled (retries sleep). Every handler error is
    /// retriable ([`HandlerError::Retriable`]); the builder takes handlers
    /// with a [`HandlerContext`] and terminal errors.
    pub fn start<H, F, E>(
        client: ClientConfig,
        topics: &[&str],
        config: DriverConfig,
        runtime: tokio::runtime::Handle,
        handler: H,
    ) -> Result<ParallelConsumer, DriverError>
    where
        H: Fn(Record) -> F + Send + Sync + 'static,
        F: Future<Output = Result<(), E>> + Send + 'static,
        E: std::fmt::Display + Send + 'static,
    {
        let handler: BoxHandler = Arc::new(move |r, _cx| {
            let fut = handler(r);
            Box::pin(async move {
                fut.await
                    .map(|()| Vec::new())
                    .map_err(|e| HandlerError::retriable(e.to_string()))
            })
        });
        ParallelConsumer::builder()
            .client(client)
            .topics(topics.iter().copied())
            .config(config)
            .runtime(runtime)
            .build()?
            .start_boxed(handler)
    }

    /// Starts in exactly-once mode (consume-transform-produce): `handler`
    /// returns the output records of its input record. Per batch of
    /// completed work (every `commit_interval`, at a revoke and at
    /// shutdown) one transaction writes the outputs of the records below
    /// the new commit offsets, in input order per partition, and commits
    /// those offsets through `send_offsets_to_transaction`; offsets are
    /// committed in no other way. Outputs of a record completed above an
    /// unfinished one wait for it. After an aborted transaction its
    /// partitions run again from their committed offsets.
    ///
    /// The consumer reads with `isolation.level=read_committed`
    /// (`read_uncommitted` is refused). The producer's transactions are
    /// initialised here, which fences an earlier producer with the same
    /// `transactional.id` and aborts its open transaction. If this producer
    /// is fenced later, the consumer stops: [`ParallelConsumer::is_running`]
    /// turns false, [`ConsumerEvent::Stopped`] is sent and
    /// [`ParallelConsumer::shutdown`] returns [`DriverError::ProducerFenced`].
    ///
    /// With [`crate::record::FailurePolicy::DeadLetter`] the dead-letter copy of a record
    /// is its output, written in the transaction.
    pub fn start_exactly_once<H, F, E>(
        client: ClientConfig,
        topics: &[&str],
        config: DriverConfig,
        exactly_once: ExactlyOnceConfig,
        runtime: tokio::runtime::Handle,
        handler: H,
    ) -> Result<ParallelConsumer, DriverError>
    where
        H: Fn(Record) -> F + Send + Sync + 'static,
        F: Future<Output = Result<Vec<OutputRecord>, E>> + Send + 'static,
        E: std::fmt::Display + Send + 'static,
    {
        let handler: BoxHandler = Arc::new(move |r, _cx| {
            let fut = handler(r);
            Box::pin(async move {
                fut.await
                    .map_err(|e| HandlerError::retriable(e.to_string()))
            })
        });
        ParallelConsumer::builder()
            .client(client)
            .topics(topics.iter().copied())
            .config(config)
            .exactly_once(exactly_once)
            .runtime(runtime)
            .build()?
            .start_boxed(handler)
    }

    /// The per-partition observations now (read from the owner thread's
    /// state under its lock; nothing is copied out per loop turn).
    pub fn stats(&self) -> Vec<PartitionStats> {
        self.shared.lock_engine().stats(self.shared.now_ms())
    }

    /// The consumer's counters and handler latency histogram since it
    /// started, with the owned partitions' [`ParallelConsumer::stats`]
    /// (a snapshot; the counters are atomics the workers update).
    pub fn metrics(&self) -> crate::metrics::ConsumerMetrics {
        self.shared.counters.snapshot(self.stats())
    }

    /// [`ParallelConsumer::metrics`] in the Prometheus text format
    /// ([`crate::metrics::render_prometheus_metrics`]).
    pub fn prometheus_text(&self) -> String {
        crate::metrics::render_prometheus_metrics(&self.metrics())
    }

    /// Cargo feature `metrics`: sets the owned partitions' gauges (lag,
    /// positions, in flight, ...) in the `metrics` facade's recorder;
    /// those of partitions no longer owned that describe held work go to
    /// 0. Counters and the latency histogram need no call: they reach the
    /// recorder installed when the consumer started as they happen. Call
    /// it periodically or before each scrape.
    #[cfg(feature = "metrics")]
    pub fn publish_metrics(&self) {
        let stats = self.stats();
        let mut published = self
            .shared
            .counters
            .published
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        crate::metrics::publish_partitions(&stats, &mut published);
    }

    /// Whether the owner thread is still running (false after a fatal
    /// error, which [`ParallelConsumer::shutdown`] returns).
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// A receiver of the [`ConsumerEvent`]s from now on: commit failures,
    /// dead-letter failures, stopped partitions, lost assignments, client
    /// errors, and the fatal error that stopped the consumer. Each call
    /// gives a new receiver; one that falls more than [`EVENT_CAPACITY`]
    /// events behind loses the oldest (`RecvError::Lagged`).
    pub fn events(&self) -> broadcast::Receiver<ConsumerEvent> {
        self.shared.events.subscribe()
    }

    /// Pauses `tp` for this consumer: nothing more of it is fetched or
    /// handed to handlers (tasks already running finish) until
    /// [`ParallelConsumer::resume`], whatever its buffer holds, and across
    /// reassignments of the partition. The owner thread applies it within
    /// a loop turn ([`DriverConfig::poll_timeout`]). A partition not owned
    /// now is paused once assigned.
    pub fn pause(&self, tp: &TopicPartition) {
        self.shared.lock_engine().set_user_paused(tp, true);
    }

    /// Ends a [`ParallelConsumer::pause`]; flow control decides again
    /// whether the partition fetches.
    pub fn resume(&self, tp: &TopicPartition) {
        self.shared.lock_engine().set_user_paused(tp, false);
    }

    /// Stops fetching, waits up to [`DriverConfig::shutdown_timeout`] for
    /// in-flight work, commits the completed prefix and leaves the group. If
    /// a fatal error had already stopped the consumer, returns it.
    ///
    /// The wait happens on the owner thread: this future only awaits its
    /// answer, so on any runtime (a current-thread one included) the
    /// handlers keep running while it drains.
    pub async fn shutdown(self) -> Result<ShutdownReport, DriverError> {
        self.stop_async(SHUTDOWN).await
    }

    /// [`ParallelConsumer::shutdown`] with another drain deadline.
    pub async fn shutdown_with_timeout(
        self,
        timeout: Duration,
    ) -> Result<ShutdownReport, DriverError> {
        self.set_shutdown_timeout(timeout);
        self.stop_async(SHUTDOWN).await
    }

    /// Stops at once without committing anything more, as if the process
    /// died after its last periodic commit: in-flight work is abandoned
    /// (its cancellation tokens fire).
    pub async fn abort(self) -> Result<ShutdownReport, DriverError> {
        self.stop_async(ABORT).await
    }

    /// [`ParallelConsumer::shutdown`] for callers outside an async context:
    /// blocks the calling thread until the owner thread finished. Do not
    /// call it on a runtime thread: on a current-thread runtime the
    /// handlers could not run while it waits.
    pub fn shutdown_blocking(mut self) -> Result<ShutdownReport, DriverError> {
        self.stop_blocking(SHUTDOWN)
    }

    /// [`ParallelConsumer::abort`], blocking the calling thread.
    pub fn abort_blocking(mut self) -> Result<ShutdownReport, DriverError> {
        self.stop_blocking(ABORT)
    }

    fn set_shutdown_timeout(&self, timeout: Duration) {
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        self.shared
            .shutdown_timeout_ms
            .store(ms, AtomicOrdering::SeqCst);
    }

    fn request_stop(&self, how: u8) {
        let _ = self.shared.state.compare_exchange(
            RUN,
            how,
            AtomicOrdering::SeqCst,
            AtomicOrdering::SeqCst,
        );
    }

    async fn stop_async(mut self, how: u8) -> Result<ShutdownReport, DriverError> {
        self.request_stop(how);
        // The owner thread sends its result as its last act; it is not
        // joined (that would block), it ends right after.
        drop(self.thread.take());
        match self.done.take() {
            Some(rx) => rx.await.map_err(|_| DriverError::ThreadPanicked)?,
            None => Ok(ShutdownReport::default()),
        }
    }

    fn stop_blocking(&mut self, how: u8) -> Result<ShutdownReport, DriverError> {
        self.request_stop(how);
        let Some(thread) = self.thread.take() else {
            return Ok(ShutdownReport::default());
        };
        thread.join().map_err(|_| DriverError::ThreadPanicked)?;
        match self.done.take().map(|mut rx| rx.try_recv()) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(DriverError::ThreadPanicked),
            None => Ok(ShutdownReport::default()),
        }
    }
}

/// The dead-letter producer's configuration: `settings` as given, or
/// without them the consumer's connection and security settings
/// ([`connection::producer_base`]); `acks=all` either way (a record counts
/// as completed once its copy is acknowledged by every in-sync replica).
fn dead_letter_config(
    consumer: &ClientConfig,
    settings: Option<&BTreeMap<String, String>>,
) -> Result<ClientConfig, DriverError> {
    let mut p = match settings {
        Some(settings) => {
            let mut p = ClientConfig::new();
            for (k, v) in settings {
                p.set(k, v);
            }
            p
        }
        None => connection::producer_base(consumer),
    };
    match p.get("acks") {
        None | Some("all" | "-1") => {}
        Some(_) => {
            return Err(DriverError::ForbiddenSetting {
                setting: "dead_letter_producer acks other than all",
            });
        }
    }
    p.set("acks", "all");
    Ok(p)
}

/// Never blocks: asks the owner thread to shut down (drain up to
/// [`DriverConfig::shutdown_timeout`], commit the completed prefix, leave
/// the group) and lets it finish in the background.
impl Drop for ParallelConsumer {
    fn drop(&mut self) {
        if self.thread.take().is_some() {
            self.request_stop(SHUTDOWN);
            tracing::debug!("dropped: shutting down in the background");
        }
    }
}

#[cfg(test)]
mod tests;
