//! [`ParallelConsumerBuilder`]: client settings, topics, driver settings
//! and the runtime, checked by [`ParallelConsumerBuilder::build`] before
//! anything connects; then a handler starts the consumer.

use std::future::Future;
use std::sync::atomic::{AtomicU8, AtomicU64};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::FutureProducer;
use tokio::sync::{broadcast, oneshot};

use super::events::EVENT_CAPACITY;
use super::handler::{HandlerContext, HandlerError, RetryDelay};
use super::rebalance::PcContext;
use super::txn::Transactional;
use super::worker::{BoxBatchHandler, BoxHandler, Handler, WorkerEnv};
use super::{
    CommitMode, DriverConfig, DriverError, ExactlyOnceConfig, ParallelConsumer, RUN, Shared,
    dead_letter_config, owner,
};
use crate::engine::Engine;
use crate::exactly_once::OutputRecord;
use crate::record::{FailurePolicy, Record, RetryPolicy};
use crate::scheduler::Ordering;

/// `fetch.queue.backoff.ms` unless the client configuration sets it.
pub const FETCH_QUEUE_BACKOFF_MS: &str = "10";

/// `fetch.wait.max.ms` unless the client configuration sets it.
pub const FETCH_WAIT_MAX_MS: &str = "100";

/// Builds a [`ParallelConsumer`]. Every setting has a default except the
/// client's `bootstrap.servers` and `group.id` and the topics.
#[derive(Clone)]
pub struct ParallelConsumerBuilder {
    client: ClientConfig,
    topics: Vec<String>,
    config: DriverConfig,
    exactly_once: Option<ExactlyOnceConfig>,
    runtime: Option<tokio::runtime::Handle>,
}

impl Default for ParallelConsumerBuilder {
    fn default() -> Self {
        ParallelConsumerBuilder {
            client: ClientConfig::new(),
            topics: Vec::new(),
            config: DriverConfig::default(),
            exactly_once: None,
            runtime: None,
        }
    }
}

impl ParallelConsumerBuilder {
    /// The Kafka client's settings (replacing any set so far).
    pub fn client(mut self, client: ClientConfig) -> Self {
        self.client = client;
        self
    }

    /// One librdkafka setting of the consumer.
    pub fn set(mut self, key: &str, value: &str) -> Self {
        self.client.set(key, value);
        self
    }

    pub fn bootstrap_servers(self, servers: &str) -> Self {
        self.set("bootstrap.servers", servers)
    }

    pub fn group_id(self, group: &str) -> Self {
        self.set("group.id", group)
    }

    /// Adds a topic to subscribe to.
    pub fn topic(mut self, topic: &str) -> Self {
        self.topics.push(topic.to_string());
        self
    }

    /// Adds topics to subscribe to.
    pub fn topics<'a>(mut self, topics: impl IntoIterator<Item = &'a str>) -> Self {
        self.topics.extend(topics.into_iter().map(str::to_string));
        self
    }

    /// All driver settings at once (replacing any set so far).
    pub fn config(mut self, config: DriverConfig) -> Self {
        self.config = config;
        self
    }

    pub fn ordering(mut self, ordering: Ordering) -> Self {
        self.config.engine.scheduler.ordering = ordering;
        self
    }

    /// Handlers running at once, over all partitions.
    pub fn max_concurrency(mut self, n: usize) -> Self {
        self.config.engine.scheduler.max_concurrency = n;
        self
    }

    /// Records buffered per partition before it pauses, and the level at
    /// which it resumes (below `max`).
    pub fn buffers(mut self, max_per_partition: usize, resume_at: usize) -> Self {
        self.config.engine.scheduler.max_buffered_per_partition = max_per_partition;
        self.config.engine.scheduler.resume_at_buffered = resume_at;
        self
    }

    /// Bytes buffered over all partitions before all pause, and the level at
    /// which they resume (below `max`).
    pub fn buffered_bytes(mut self, max: usize, resume_at: usize) -> Self {
        self.config.engine.scheduler.max_buffered_bytes = max;
        self.config.engine.scheduler.resume_at_buffered_bytes = resume_at;
        self
    }

    pub fn commit_interval(mut self, interval: Duration) -> Self {
        self.config.commit_interval = interval;
        self
    }

    /// Whether the periodic commit waits for the broker ([`CommitMode`]).
    pub fn commit_mode(mut self, mode: CommitMode) -> Self {
        self.config.commit_mode = mode;
        self
    }

    pub fn revoke_timeout(mut self, timeout: Duration) -> Self {
        self.config.revoke_timeout = timeout;
        self
    }

    /// How long a shutdown (or the background drain after a drop) waits for
    /// in-flight handlers.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.config.shutdown_timeout = timeout;
        self
    }

    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.config.retry = retry;
        self
    }

    /// Attempts per record in total (1: no retry).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.config.retry.max_attempts = attempts;
        self
    }

    /// The wait after failed attempt `n` (1-based) before the next one.
    pub fn retry_delay(mut self, delay: impl Fn(u32) -> Duration + Send + Sync + 'static) -> Self {
        self.config.retry_delay = Some(RetryDelay::new(delay));
        self
    }

    /// What happens to a record that failed every attempt, or failed with
    /// [`HandlerError::Terminal`].
    pub fn on_failure(mut self, policy: FailurePolicy) -> Self {
        self.config.on_failure = policy;
        self
    }

    /// Exactly-once mode ([`ParallelConsumer::start_exactly_once`]); start
    /// with [`ParallelConsumerBuilder::start_transform`] (or
    /// [`ParallelConsumerBuilder::start_transform_batch`]).
    pub fn exactly_once(mut self, exactly_once: ExactlyOnceConfig) -> Self {
        self.exactly_once = Some(exactly_once);
        self
    }

    /// The runtime handlers run on (needs the time driver). Default: the
    /// runtime `build` is called in.
    pub fn runtime(mut self, runtime: tokio::runtime::Handle) -> Self {
        self.runtime = Some(runtime);
        self
    }

    /// Checks everything that can be checked without connecting.
    pub fn build(self) -> Result<Prepared, DriverError> {
        let ParallelConsumerBuilder {
            mut client,
            topics,
            mut config,
            exactly_once,
            runtime,
        } = self;
        config.validate()?;
        if topics.is_empty() || topics.iter().any(String::is_empty) {
            return Err(DriverError::NoTopics);
        }
        if client.get("group.id").is_none_or(str::is_empty) {
            return Err(DriverError::NoGroupId);
        }
        if client.get("enable.auto.commit") == Some("true") {
            return Err(DriverError::ForbiddenSetting {
                setting: "enable.auto.commit=true",
            });
        }
        client.set("enable.auto.commit", "false");
        client.set("enable.auto.offset.store", "false");
        // librdkafka stops fetching for `fetch.queue.backoff.ms` (1 s by
        // default) once its local queue holds `queued.min.messages` records
        // over all partitions, and a partition resumed after a pause waits
        // for the fetch in flight, which the broker may hold for
        // `fetch.wait.max.ms` (500 ms) when the other partitions have
        // nothing new. The owner thread reads ahead into its own bounded
        // buffers, so both happen in any backlog; with librdkafka's defaults
        // the consumer sat idle for most of a 200 000-record no-op run
        // (160 000 records/s; 450 000 to 560 000 with these). The user's
        // settings win.
        for (key, value) in [
            ("fetch.queue.backoff.ms", FETCH_QUEUE_BACKOFF_MS),
            ("fetch.wait.max.ms", FETCH_WAIT_MAX_MS),
        ] {
            if client.get(key).is_none() {
                client.set(key, value);
            }
        }
        if let Some(eos) = &exactly_once {
            if eos.transactional_id.is_empty() {
                return Err(DriverError::NoTransactionalId);
            }
            // Records of aborted upstream transactions must not be
            // transformed; committed offsets pending in an open transaction
            // are waited for (OffsetFetch with require_stable).
            if client.get("isolation.level") == Some("read_uncommitted") {
                return Err(DriverError::ForbiddenSetting {
                    setting: "isolation.level=read_uncommitted",
                });
            }
            client.set("isolation.level", "read_committed");
            // Records above the watermark have no outputs written yet: a new
            // owner must run them again.
            config.engine.completed_set = false;
        }
        let runtime = match runtime {
            Some(r) => r,
            None => tokio::runtime::Handle::try_current().map_err(|_| DriverError::NoRuntime)?,
        };
        Ok(Prepared {
            client,
            topics,
            config,
            exactly_once,
            runtime,
        })
    }

    /// [`ParallelConsumerBuilder::build`], then [`Prepared::start`].
    pub fn start<H, F>(self, handler: H) -> Result<ParallelConsumer, DriverError>
    where
        H: Fn(Record, HandlerContext) -> F + Send + Sync + 'static,
        F: Future<Output = Result<(), HandlerError>> + Send + 'static,
    {
        self.build()?.start(handler)
    }

    /// Records handed to one batch-handler call at most
    /// ([`ParallelConsumerBuilder::start_batch`]; see
    /// [`crate::scheduler::SchedulerConfig::max_batch`]).
    pub fn max_batch(mut self, records: usize) -> Self {
        self.config.engine.scheduler.max_batch = records;
        self
    }

    /// [`ParallelConsumerBuilder::build`], then [`Prepared::start_batch`].
    pub fn start_batch<H, F>(self, handler: H) -> Result<ParallelConsumer, DriverError>
    where
        H: Fn(Vec<Record>, HandlerContext) -> F + Send + Sync + 'static,
        F: Future<Output = Result<(), HandlerError>> + Send + 'static,
    {
        self.build()?.start_batch(handler)
    }

    /// [`ParallelConsumerBuilder::build`], then [`Prepared::start_transform`].
    pub fn start_transform<H, F>(self, handler: H) -> Result<ParallelConsumer, DriverError>
    where
        H: Fn(Record, HandlerContext) -> F + Send + Sync + 'static,
        F: Future<Output = Result<Vec<OutputRecord>, HandlerError>> + Send + 'static,
    {
        self.build()?.start_transform(handler)
    }

    /// [`ParallelConsumerBuilder::build`], then
    /// [`Prepared::start_transform_batch`].
    pub fn start_transform_batch<H, F>(self, handler: H) -> Result<ParallelConsumer, DriverError>
    where
        H: Fn(Vec<Record>, HandlerContext) -> F + Send + Sync + 'static,
        F: Future<Output = Result<Vec<OutputRecord>, HandlerError>> + Send + 'static,
    {
        self.build()?.start_transform_batch(handler)
    }
}

/// Checked settings, ready to start with a handler.
pub struct Prepared {
    client: ClientConfig,
    topics: Vec<String>,
    config: DriverConfig,
    exactly_once: Option<ExactlyOnceConfig>,
    runtime: tokio::runtime::Handle,
}

impl Prepared {
    /// The driver settings as they will run (exactly-once mode turns the
    /// completed set off).
    pub fn config(&self) -> &DriverConfig {
        &self.config
    }

    /// The consumer's settings as they will be used.
    pub fn client(&self) -> &ClientConfig {
        &self.client
    }

    /// Subscribes and starts the owner thread; `handler` runs per record
    /// with its [`HandlerContext`]. In exactly-once mode the records have no
    /// outputs (their offsets are still committed in transactions).
    pub fn start<H, F>(self, handler: H) -> Result<ParallelConsumer, DriverError>
    where
        H: Fn(Record, HandlerContext) -> F + Send + Sync + 'static,
        F: Future<Output = Result<(), HandlerError>> + Send + 'static,
    {
        let handler: BoxHandler = Arc::new(move |r, cx| {
            let fut = handler(r, cx);
            Box::pin(async move { fut.await.map(|()| Vec::new()) })
        });
        self.start_boxed(handler)
    }

    /// Exactly-once mode (needs [`ParallelConsumerBuilder::exactly_once`]):
    /// `handler` returns the output records of its input record, written
    /// in the transaction that commits the input's offset.
    pub fn start_transform<H, F>(self, handler: H) -> Result<ParallelConsumer, DriverError>
    where
        H: Fn(Record, HandlerContext) -> F + Send + Sync + 'static,
        F: Future<Output = Result<Vec<OutputRecord>, HandlerError>> + Send + 'static,
    {
        if self.exactly_once.is_none() {
            return Err(DriverError::NoTransactionalId);
        }
        let handler: BoxHandler = Arc::new(move |r, cx| Box::pin(handler(r, cx)));
        self.start_boxed(handler)
    }

    /// Subscribes and starts the owner thread; `handler` runs once per
    /// batch: up to [`crate::scheduler::SchedulerConfig::max_batch`]
    /// records of one partition that the ordering mode lets run together
    /// (the same key in key order, consecutive records otherwise), in
    /// offset order. The batch's records share its outcome: all done, or
    /// retried together and then resolved one by one by the failure policy
    /// (each dead-lettered, or the partition stopped at the first). In
    /// exactly-once mode the batches have no outputs (their offsets are
    /// still committed in transactions, a batch's all in the same one).
    pub fn start_batch<H, F>(self, handler: H) -> Result<ParallelConsumer, DriverError>
    where
        H: Fn(Vec<Record>, HandlerContext) -> F + Send + Sync + 'static,
        F: Future<Output = Result<(), HandlerError>> + Send + 'static,
    {
        let batch: BoxBatchHandler = Arc::new(move |records, cx| {
            let fut = handler(records, cx);
            Box::pin(async move { fut.await.map(|()| Vec::new()) })
        });
        self.start_batch_boxed(batch)
    }

    /// Exactly-once mode (needs [`ParallelConsumerBuilder::exactly_once`])
    /// with batches as in [`Prepared::start_batch`]: `handler` returns the
    /// output records of its whole batch. A batch commits as one: its
    /// outputs and the offsets of all its records go in the same
    /// transaction (no transaction commits an offset between its first and
    /// last record), and an aborted transaction runs the whole batch again.
    /// A batch that failed every attempt is resolved record by record by
    /// the failure policy; dead-letter copies are written in the
    /// transaction, like outputs.
    pub fn start_transform_batch<H, F>(self, handler: H) -> Result<ParallelConsumer, DriverError>
    where
        H: Fn(Vec<Record>, HandlerContext) -> F + Send + Sync + 'static,
        F: Future<Output = Result<Vec<OutputRecord>, HandlerError>> + Send + 'static,
    {
        if self.exactly_once.is_none() {
            return Err(DriverError::NoTransactionalId);
        }
        let batch: BoxBatchHandler = Arc::new(move |records, cx| Box::pin(handler(records, cx)));
        self.start_batch_boxed(batch)
    }

    fn start_batch_boxed(self, batch: BoxBatchHandler) -> Result<ParallelConsumer, DriverError> {
        self.start_with(Handler::Batch(batch))
    }

    pub(crate) fn start_boxed(self, handler: BoxHandler) -> Result<ParallelConsumer, DriverError> {
        if self.config.engine.scheduler.max_batch > 1 {
            return Err(DriverError::BatchNeedsBatchHandler);
        }
        self.start_with(Handler::Record(handler))
    }

    fn start_with(self, handler: Handler) -> Result<ParallelConsumer, DriverError> {
        let Prepared {
            client,
            topics,
            config,
            exactly_once,
            runtime,
        } = self;
        let dead_letter = match &config.on_failure {
            FailurePolicy::DeadLetter { .. } if exactly_once.is_none() => Some(
                dead_letter_config(&client, config.dead_letter_producer.as_ref())?
                    .create::<FutureProducer>()?,
            ),
            _ => None,
        };
        let mut engine = Engine::new(config.engine.clone())?;
        // The owner thread checks the metadata bound on a timer.
        engine.defer_metadata_checks();
        // Before subscribing: fencing the previous producer aborts its open
        // transaction, so the offsets this consumer starts from are settled.
        let txn = exactly_once
            .map(|eos| Transactional::start(&client, eos))
            .transpose()?;
        let (results_tx, results_rx) = channel();
        let (events, _) = broadcast::channel(EVENT_CAPACITY);
        let shutdown_ms = u64::try_from(config.shutdown_timeout.as_millis()).unwrap_or(u64::MAX);
        let counters = Arc::new(crate::metrics::Counters::new());
        let shared = Arc::new(Shared {
            engine: Mutex::new(engine),
            results: Mutex::new(results_rx),
            started: Instant::now(),
            state: AtomicU8::new(RUN),
            txn,
            failure: Mutex::new(None),
            events: events.clone(),
            tokens: Mutex::new(Default::default()),
            flow: Mutex::new(Vec::new()),
            inflight_commits: Mutex::new(Vec::new()),
            shutdown_timeout_ms: AtomicU64::new(shutdown_ms),
            config: config.clone(),
            counters: counters.clone(),
        });
        let consumer: BaseConsumer<PcContext> = client.create_with_context(PcContext {
            shared: shared.clone(),
        })?;
        let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
        consumer.subscribe(&topics)?;
        let env = Arc::new(WorkerEnv {
            handler,
            retry: config.retry.clone(),
            retry_delay: config.retry_delay.clone(),
            on_failure: config.on_failure.clone(),
            dead_letter,
            dead_letter_timeout: config.dead_letter_timeout,
            dead_letter_as_output: shared.txn.is_some(),
            results: results_tx,
            refill: Some(shared.clone()),
            events,
            counters,
        });
        let thread_shared = shared.clone();
        let (done_tx, done_rx) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("weir-pc-owner".into())
            .spawn(move || {
                let result = owner::run(consumer, thread_shared, env, runtime);
                // Nobody waits after a drop: the result only goes to the log.
                if let Err(Err(e)) = done_tx.send(result) {
                    tracing::error!(error = %e, "stopped");
                }
            })
            .map_err(|e| DriverError::Spawn(Arc::new(e)))?;
        Ok(ParallelConsumer {
            shared,
            thread: Some(thread),
            done: Some(done_rx),
        })
    }
}
