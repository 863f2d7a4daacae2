//! The workloads, driven with librdkafka: topic creation through the admin
//! API, a paced or unpaced producer (plain, idempotent or transactional)
//! with per-record ack latency, and a consumer that reads a partition set
//! from the beginning with assign().

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use hdrhistogram::Histogram;
use rdkafka::ClientConfig;
use rdkafka::ClientContext;
use rdkafka::Offset;
use rdkafka::TopicPartitionList;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};

/// librdkafka settings added to every client of a bootstrap address: the
/// SSL listener's `security.protocol` and CA (see [`register_security`]).
static SECURITY: Mutex<Vec<(String, Settings)>> = Mutex::new(Vec::new());

/// librdkafka settings as (name, value) pairs.
pub type Settings = Vec<(String, String)>;

/// Makes every client of `bootstrap` use `settings` as well.
pub fn register_security(bootstrap: &str, settings: Settings) {
    let mut all = SECURITY.lock().unwrap_or_else(|p| p.into_inner());
    all.retain(|(b, _)| b != bootstrap);
    all.push((bootstrap.to_string(), settings));
}

/// A librdkafka config for `bootstrap`, with its registered settings.
pub fn client_config(bootstrap: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap);
    let all = SECURITY.lock().unwrap_or_else(|p| p.into_inner());
    for (_, settings) in all.iter().filter(|(b, _)| b == bootstrap) {
        for (k, v) in settings {
            c.set(k, v);
        }
    }
    c
}

/// Timeout of one admin or metadata request.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);
/// A consumer that receives nothing for this long has stalled.
const CONSUME_STALL: Duration = Duration::from_secs(20);

/// Creates `name` with `partitions` partitions, `replication` replicas each
/// and the given topic configs, then waits until every partition has a
/// leader and all `replication` replicas in its ISR.
pub fn create_topic(
    bootstrap: &str,
    name: &str,
    partitions: i32,
    replication: i32,
    configs: &[(&str, &str)],
) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap)
        .create()
        .context("create admin client")?;
    let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(replication));
    for (k, v) in configs {
        topic = topic.set(k, v);
    }
    let opts = AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    let results = rt
        .block_on(admin.create_topics([&topic], &opts))
        .with_context(|| format!("CreateTopics {name}"))?;
    for r in results {
        match r {
            Ok(_) => {}
            Err((t, RDKafkaErrorCode::TopicAlreadyExists)) => {
                bail!("topic {t} already exists; refusing to reuse its data")
            }
            Err((t, code)) => bail!("CreateTopics {t} failed: {code:?}"),
        }
    }
    // Metadata may lag the creation for a moment; bounded retries.
    let deadline = Instant::now() + ADMIN_TIMEOUT;
    loop {
        let md = admin
            .inner()
            .fetch_metadata(Some(name), Duration::from_secs(5))
            .context("metadata")?;
        let ready = md.topics().iter().any(|t| {
            t.name() == name
                && t.error().is_none()
                && t.partitions().len() == partitions as usize
                && t.partitions().iter().all(|p| {
                    // A single replica is in sync by definition; only a
                    // replicated topic waits for its followers.
                    p.leader() >= 0 && (replication <= 1 || p.isr().len() == replication as usize)
                })
        });
        if ready {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "topic {name}: not every partition has a leader and {replication} in-sync replicas after {ADMIN_TIMEOUT:?}"
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the cluster behind `bootstrap` lists `n` brokers in its
/// Metadata answers (every node registered with the controller).
pub fn wait_for_brokers(bootstrap: &str, n: usize, timeout: Duration) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap)
        .create()
        .context("create admin client")?;
    let deadline = Instant::now() + timeout;
    let mut seen = 0;
    loop {
        // A node without a quorum yet may fail the request; that is retried.
        if let Ok(md) = admin.inner().fetch_metadata(None, Duration::from_secs(5)) {
            seen = md.brokers().len();
            if seen >= n {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            bail!("{seen} of {n} brokers registered after {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Deletes topics (best effort, for external brokers).
pub fn delete_topics(bootstrap: &str, names: &[&str]) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create()?;
    let opts = AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    rt.block_on(admin.delete_topics(names, &opts))?;
    Ok(())
}

/// Delivery bookkeeping shared with librdkafka's delivery callback, which
/// runs on the producer's polling thread.
struct Deliveries {
    start: Instant,
    acked: AtomicU64,
    failed: AtomicU64,
    /// `acked + failed`, counted once per delivery report.
    done: AtomicU64,
    first_error: Mutex<Option<String>>,
    /// Send-to-ack latency in nanoseconds, for records sent with a stamp.
    latency: Mutex<Histogram<u64>>,
    /// A waiter sleeps on `delivered` until `done` reaches `wake_at`
    /// (`u64::MAX`: nobody waits). Waiting sleeps instead of polling:
    /// rust-rdkafka's `poll(1 ms)` spins for that millisecond (its timeout
    /// is rounded down to 0 ms), and a spinning thread takes the client
    /// core from librdkafka's own threads.
    wake_at: AtomicU64,
    waiting: Mutex<()>,
    delivered: Condvar,
}

impl Deliveries {
    fn new() -> Result<Deliveries> {
        Ok(Deliveries {
            start: Instant::now(),
            acked: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            done: AtomicU64::new(0),
            first_error: Mutex::new(None),
            latency: Mutex::new(Histogram::new(3)?),
            wake_at: AtomicU64::new(u64::MAX),
            waiting: Mutex::new(()),
            delivered: Condvar::new(),
        })
    }

    fn done(&self) -> u64 {
        self.done.load(Ordering::SeqCst)
    }

    /// Counts one delivery report and wakes a waiter whose count it reaches.
    fn count_done(&self) {
        let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        if done >= self.wake_at.load(Ordering::SeqCst) {
            drop(self.waiting.lock());
            self.delivered.notify_all();
        }
    }

    /// Forgets the warm-up's deliveries (the producer has none in flight).
    fn reset(&self) {
        self.acked.store(0, Ordering::SeqCst);
        self.done.store(0, Ordering::SeqCst);
    }

    /// Sleeps until `n` records have their delivery report or `timeout`
    /// passed; returns the number that have.
    fn wait_done(&self, n: u64, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        let mut guard = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        // SeqCst on both sides: either this load sees the callback's
        // increment, or the callback sees `wake_at` and notifies (under the
        // lock, so not before this thread waits).
        self.wake_at.store(n, Ordering::SeqCst);
        loop {
            let done = self.done();
            let now = Instant::now();
            if done >= n || now >= deadline {
                self.wake_at.store(u64::MAX, Ordering::SeqCst);
                return done;
            }
            guard = match self.delivered.wait_timeout(guard, deadline - now) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
    }
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    /// Nanoseconds since `start` when the record was handed to send(), plus
    /// one (0 means "not timed").
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, sent_at: usize) {
        match result {
            Ok(_) => {
                self.acked.fetch_add(1, Ordering::Relaxed);
                if sent_at > 0 {
                    let now = self.start.elapsed().as_nanos() as u64;
                    let lat = now.saturating_sub(sent_at as u64 - 1).max(1);
                    if let Ok(mut h) = self.latency.lock() {
                        let _ = h.record(lat);
                    }
                }
            }
            Err((e, _)) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut first) = self.first_error.lock()
                    && first.is_none()
                {
                    *first = Some(e.to_string());
                }
            }
        }
        self.count_done();
    }
}

/// How the producer writes.
#[derive(Clone, Copy, Debug)]
pub enum Mode<'a> {
    /// librdkafka's default: neither idempotent nor transactional.
    Plain,
    /// `enable.idempotence=true` (librdkafka then requires acks=all).
    Idempotent,
    /// `transactional.id` (idempotent, acks=all): `init_transactions`, then
    /// transaction after transaction: begin, send for `commit_interval`,
    /// commit.
    Transactional {
        id: &'a str,
        commit_interval: Duration,
    },
}

/// librdkafka's `queue.buffering.max.kbytes` for P1–P8: large enough that
/// a whole run can be queued ahead of the broker.
pub const QUEUE_KIB_UNBOUNDED: u64 = 1 << 20;

/// What a producer run is asked to do.
#[derive(Clone, Debug)]
pub struct ProduceSpec<'a> {
    pub topic: &'a str,
    pub partitions: i32,
    pub record_bytes: usize,
    pub records: u64,
    /// "1", "all", ...
    pub acks: &'a str,
    pub linger_ms: u32,
    /// Records per second; None for as fast as possible (always None for
    /// [`Mode::Transactional`]).
    pub rate: Option<f64>,
    /// Stamp every record to measure send-to-ack latency. Transactional
    /// runs stamp the first record of each transaction instead.
    pub timed: bool,
    /// The whole run fails if it takes longer.
    pub budget: Duration,
    pub mode: Mode<'a>,
    /// librdkafka's `queue.buffering.max.kbytes`: how far sends may run
    /// ahead of the acknowledgements before send() has to wait.
    pub queue_kib: u64,
}

/// The outcome of a producer run (all records acknowledged).
#[derive(Clone, Debug)]
pub struct ProduceOutcome {
    /// Records written before the clock started (one per partition).
    pub warmup_records: u64,
    /// Records written while the clock ran.
    pub records: u64,
    pub payload_bytes: u64,
    pub elapsed: Duration,
    pub latency: Option<Histogram<u64>>,
    /// Present for [`Mode::Transactional`].
    pub txn: Option<TxnOutcome>,
}

impl ProduceOutcome {
    pub fn records_per_s(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64()
    }
    pub fn bytes_per_s(&self) -> f64 {
        self.payload_bytes as f64 / self.elapsed.as_secs_f64()
    }
}

/// The transactions of a transactional run (every one committed). The
/// histograms hold one value per transaction, in nanoseconds.
#[derive(Clone, Debug)]
pub struct TxnOutcome {
    pub transactions: u64,
    /// From begin_transaction to commit_transaction's return.
    pub period: Histogram<u64>,
    /// From the end of the sending window to commit_transaction's return:
    /// what `commit_transaction` costs an application (it flushes first).
    pub commit: Histogram<u64>,
    /// The part of `commit` until every record of the transaction was
    /// acknowledged.
    pub drain: Histogram<u64>,
    /// The rest: `commit_transaction` once nothing is in flight (EndTxn).
    pub end_txn: Histogram<u64>,
    /// Send→ack of each transaction's first record: librdkafka adds the
    /// partition to the transaction (AddPartitionsToTxn) before producing.
    pub first_ack: Histogram<u64>,
}

impl TxnOutcome {
    fn new() -> Result<TxnOutcome> {
        let h = Histogram::new(3)?;
        Ok(TxnOutcome {
            transactions: 0,
            period: h.clone(),
            commit: h.clone(),
            drain: h.clone(),
            end_txn: h.clone(),
            first_ack: h,
        })
    }

    /// Adds the transactions of another run.
    pub fn merge(&mut self, other: &TxnOutcome) -> Result<()> {
        self.transactions += other.transactions;
        self.period.add(&other.period)?;
        self.commit.add(&other.commit)?;
        self.drain.add(&other.drain)?;
        self.end_txn.add(&other.end_txn)?;
        self.first_ack.add(&other.first_ack)?;
        Ok(())
    }
}

type Client = ThreadedProducer<Deliveries>;

fn producer_config(bootstrap: &str, spec: &ProduceSpec<'_>) -> ClientConfig {
    let mut c = client_config(bootstrap);
    c.set("acks", spec.acks)
        .set("linger.ms", spec.linger_ms.to_string())
        .set("batch.size", "1048576")
        // A request may carry one full batch per partition.
        .set("message.max.bytes", "8388608")
        .set("compression.type", "none")
        .set("queue.buffering.max.messages", "2000000")
        .set("queue.buffering.max.kbytes", spec.queue_kib.to_string())
        .set("batch.num.messages", "1000000")
        .set("message.timeout.ms", "120000")
        // Java's default: while 5 requests are in flight, records queue up
        // and form the next batch (librdkafka's default is 1000000, which
        // turns a paced acks=all stream into one request per record).
        .set("max.in.flight.requests.per.connection", "5")
        // TCP_NODELAY, as Java clients set it; with Nagle the tail of each
        // request waits for the broker's delayed ACK.
        .set("socket.nagle.disable", "true");
    match spec.mode {
        Mode::Plain => {}
        Mode::Idempotent => {
            c.set("enable.idempotence", "true");
        }
        Mode::Transactional { id, .. } => {
            // librdkafka wants message.timeout.ms ≤ transaction.timeout.ms.
            c.set("transactional.id", id)
                .set("transaction.timeout.ms", "120000");
        }
    }
    c
}

/// Produces `spec.records` records of `spec.record_bytes` bytes and waits
/// for every acknowledgement. Partitions are filled in turn, one batch's
/// worth of records each (see [`partition_of`]).
pub fn produce(bootstrap: &str, spec: &ProduceSpec<'_>) -> Result<ProduceOutcome> {
    let producer: Client = producer_config(bootstrap, spec)
        .create_with_context(Deliveries::new()?)
        .context("create producer")?;
    let payload: Vec<u8> = (0..spec.record_bytes).map(|i| (i % 251) as u8).collect();
    let partitions = spec.partitions.max(1) as u64;
    // Warm-up, outside the clock: one acknowledged record per partition (in
    // a committed transaction for a transactional producer), so connection
    // setup, metadata and the producer id are not counted as produce time.
    let warmup_deadline = Instant::now() + spec.budget;
    let transactional = matches!(spec.mode, Mode::Transactional { .. });
    if let Mode::Transactional { id, .. } = spec.mode {
        producer
            .init_transactions(ADMIN_TIMEOUT)
            .with_context(|| format!("init_transactions {id}"))?;
        producer.begin_transaction().context("begin_transaction")?;
    }
    for p in 0..spec.partitions.max(1) {
        let record = BaseRecord::<(), [u8], usize>::with_opaque_to(spec.topic, 0)
            .partition(p)
            .payload(&payload[..]);
        if let Err((e, _)) = producer.send(record) {
            bail!("send warm-up record to {} partition {p}: {e}", spec.topic);
        }
    }
    wait_acked(&producer, spec, partitions, warmup_deadline)?;
    if transactional {
        commit(&producer, warmup_deadline).context("commit the warm-up transaction")?;
    }
    producer.context().reset();
    let start = Instant::now();
    let deadline = start + spec.budget;
    let txn = match spec.mode {
        Mode::Transactional {
            commit_interval, ..
        } => Some(send_in_transactions(
            &producer,
            spec,
            &payload,
            commit_interval,
            deadline,
        )?),
        Mode::Plain | Mode::Idempotent => {
            for i in 0..spec.records {
                if let Some(rate) = spec.rate {
                    let due = start + Duration::from_secs_f64(i as f64 / rate);
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    }
                }
                send_one(&producer, spec, &payload, i, spec.timed, deadline)?;
                if i % 1024 == 0 {
                    check_failures(producer.context())?;
                }
            }
            None
        }
    };
    wait_acked(&producer, spec, spec.records, deadline)?;
    let elapsed = start.elapsed();
    let latency = if spec.timed && !transactional {
        Some(histogram(&producer.context().latency)?)
    } else {
        None
    };
    let txn = match txn {
        Some(mut t) => {
            t.first_ack = histogram(&producer.context().latency)?;
            Some(t)
        }
        None => None,
    };
    Ok(ProduceOutcome {
        warmup_records: partitions,
        records: spec.records,
        payload_bytes: spec.records * spec.record_bytes as u64,
        elapsed,
        latency,
        txn,
    })
}

/// Gives `id` a producer id (InitProducerId) and forgets the producer: the
/// broker's transaction coordinator is then set up (`__transaction_state`
/// created and loaded) before anything is measured.
pub fn init_transactional_id(bootstrap: &str, id: &str) -> Result<()> {
    let producer: Client = client_config(bootstrap)
        .set("transactional.id", id)
        .create_with_context(Deliveries::new()?)
        .context("create producer")?;
    producer
        .init_transactions(ADMIN_TIMEOUT)
        .with_context(|| format!("init_transactions {id}"))
}

/// Transaction after transaction until `spec.records` are sent: begin,
/// send for `interval` (at least one record), wait for the records'
/// acknowledgements, commit. Every transaction commits, or the run fails.
fn send_in_transactions(
    producer: &Client,
    spec: &ProduceSpec<'_>,
    payload: &[u8],
    interval: Duration,
    deadline: Instant,
) -> Result<TxnOutcome> {
    let mut out = TxnOutcome::new()?;
    let ns = |d: Duration| d.as_nanos().max(1) as u64;
    let mut i = 0;
    while i < spec.records {
        let begun = Instant::now();
        producer.begin_transaction().context("begin_transaction")?;
        let window_end = begun + interval;
        let first = i;
        while i < spec.records && (i == first || Instant::now() < window_end) {
            send_one(producer, spec, payload, i, i == first, deadline)?;
            i += 1;
            if i % 1024 == 0 {
                check_failures(producer.context())?;
            }
        }
        let sent = Instant::now();
        wait_acked(producer, spec, i, deadline)?;
        let acked = Instant::now();
        commit(producer, deadline)
            .with_context(|| format!("commit transaction {}", out.transactions + 1))?;
        let committed = Instant::now();
        out.transactions += 1;
        out.period.record(ns(committed - begun))?;
        out.commit.record(ns(committed - sent))?;
        out.drain.record(ns(acked - sent))?;
        out.end_txn.record(ns(committed - acked))?;
    }
    Ok(out)
}

/// How long to wait for librdkafka to let go of acknowledged records.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(1);

/// Commits the open transaction; every record of it is acknowledged.
/// librdkafka counts a record as in flight until its delivery report is
/// destroyed, a moment after the callback, and rust-rdkafka's
/// commit_transaction flushes first in steps of 100 ms: so this waits
/// (briefly) until nothing is in flight, and the flush returns at once.
fn commit(producer: &Client, deadline: Instant) -> Result<()> {
    let release = Instant::now() + RELEASE_TIMEOUT;
    while producer.in_flight_count() > 0 && Instant::now() < release {
        std::thread::sleep(Duration::from_micros(20));
    }
    let timeout = deadline.saturating_duration_since(Instant::now());
    producer
        .commit_transaction(timeout)
        .context("commit_transaction")
}

/// How long one wait for queue space sleeps at most before checking the
/// deadline again.
const QUEUE_FULL_WAIT: Duration = Duration::from_millis(10);

/// Hands record `i` to librdkafka; while its queue is full, sleeps until
/// a batch's worth of records more is acknowledged (as a Java producer's
/// send() blocks on a full `buffer.memory` until a batch is freed).
/// Waking at every delivery report would not do: librdkafka frees the
/// records of a report only after the last of them is handed out, so the
/// send would find the queue full again once per record.
fn send_one(
    producer: &Client,
    spec: &ProduceSpec<'_>,
    payload: &[u8],
    i: u64,
    stamp: bool,
    deadline: Instant,
) -> Result<()> {
    let partition = partition_of(i, spec.record_bytes, spec.partitions.max(1) as u64);
    let mut record = BaseRecord::<(), [u8], usize>::with_opaque_to(spec.topic, 0)
        .partition(partition)
        .payload(payload);
    loop {
        if stamp {
            record = record.delivery_opaque(start_offset_ns(producer) as usize + 1);
        }
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                record = r;
                if Instant::now() > deadline {
                    bail!(
                        "produce to {} timed out after {:?}: local queue stayed full at record {i}",
                        spec.topic,
                        spec.budget
                    );
                }
                let c = producer.context();
                let batch = (STICKY_BYTES / spec.record_bytes.max(1)).max(1) as u64;
                c.wait_done(c.done() + batch, QUEUE_FULL_WAIT);
                check_failures(c)?;
            }
            Err((e, _)) => bail!("send record {i} to {}: {e}", spec.topic),
        }
    }
}

/// Waits until `total` records have their delivery report, bounded by
/// `deadline`; fails on the first failed delivery.
fn wait_acked(
    producer: &Client,
    spec: &ProduceSpec<'_>,
    total: u64,
    deadline: Instant,
) -> Result<()> {
    let c = producer.context();
    loop {
        check_failures(c)?;
        if c.done() >= total {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "produce to {} timed out after {:?}: {} of {total} records acknowledged, {} in flight",
                spec.topic,
                spec.budget,
                c.acked.load(Ordering::Relaxed),
                producer.in_flight_count()
            );
        }
        c.wait_done(total, Duration::from_millis(100));
    }
}

fn histogram(h: &Mutex<Histogram<u64>>) -> Result<Histogram<u64>> {
    Ok(h.lock()
        .map_err(|_| anyhow::anyhow!("latency lock poisoned"))?
        .clone())
}

/// Bytes of records sent to one partition before moving to the next: one
/// full batch (`batch.size`).
const STICKY_BYTES: usize = 1 << 20;

/// The partition of record `i`: consecutive runs of one batch's worth of
/// records go to the same partition, like the sticky partitioner of Kafka's
/// clients for records without a key. Round-robin per record would split
/// every batch into `partitions` small ones.
fn partition_of(i: u64, record_bytes: usize, partitions: u64) -> i32 {
    let per_batch = (STICKY_BYTES / record_bytes.max(1)).max(1) as u64;
    ((i / per_batch) % partitions.max(1)) as i32
}

fn start_offset_ns(producer: &Client) -> u64 {
    producer.context().start.elapsed().as_nanos() as u64
}

fn check_failures(c: &Deliveries) -> Result<()> {
    let failed = c.failed.load(Ordering::Relaxed);
    if failed > 0 {
        let first = c
            .first_error
            .lock()
            .ok()
            .and_then(|g| g.clone())
            .unwrap_or_default();
        bail!("{failed} records failed delivery; first error: {first}");
    }
    Ok(())
}

/// The outcome of a consumer run. The clock runs from the first record to
/// the last; `startup` is assign() to the first record.
#[derive(Clone, Debug)]
pub struct ConsumeOutcome {
    pub records: u64,
    pub payload_bytes: u64,
    pub elapsed: Duration,
    pub startup: Duration,
}

impl ConsumeOutcome {
    pub fn bytes_per_s(&self) -> f64 {
        self.payload_bytes as f64 / self.elapsed.as_secs_f64()
    }
}

/// Reads `expected` records from the beginning of every partition of
/// `topic` (assign(), no group) and returns once all have arrived.
pub fn consume(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    expected: u64,
    budget: Duration,
) -> Result<ConsumeOutcome> {
    let consumer: BaseConsumer = client_config(bootstrap)
        // librdkafka wants a group id even for assign(); nothing is
        // committed and no group is joined.
        .set("group.id", format!("weir-compare-{}", std::process::id()))
        .set("socket.nagle.disable", "true")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        .set("fetch.max.bytes", "52428800")
        .set("max.partition.fetch.bytes", "8388608")
        .set("receive.message.max.bytes", "104857600")
        .set("queued.max.messages.kbytes", "262144")
        .create()
        .context("create consumer")?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    let start = Instant::now();
    consumer.assign(&tpl).context("assign")?;
    let deadline = start + budget;
    let mut records = 0u64;
    let mut bytes = 0u64;
    let mut last_progress = Instant::now();
    let mut first: Option<(Instant, u64)> = None;
    while records < expected {
        let now = Instant::now();
        if now > deadline {
            bail!("consume {topic} timed out after {budget:?}: {records} of {expected} records");
        }
        if now.duration_since(last_progress) > CONSUME_STALL {
            bail!(
                "consume {topic} stalled: no record for {CONSUME_STALL:?} after {records} of {expected}"
            );
        }
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Ok(m)) => {
                records += 1;
                bytes += m.payload_len() as u64;
                last_progress = Instant::now();
                if first.is_none() {
                    first = Some((last_progress, bytes));
                }
            }
            Some(Err(e)) => bail!("consume {topic} after {records} records: {e}"),
        }
    }
    let (first_at, first_bytes) = first.context("no record consumed")?;
    Ok(ConsumeOutcome {
        records: records - 1,
        payload_bytes: bytes - first_bytes,
        elapsed: last_progress.duration_since(first_at),
        startup: first_at.duration_since(start),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_wakes_when_its_count_is_reached_not_at_its_timeout() {
        let d = std::sync::Arc::new(Deliveries::new().unwrap());
        let long = Duration::from_secs(20);
        let counter = {
            let d = d.clone();
            std::thread::spawn(move || {
                // Count only once the main thread waits for 1000.
                while d.wake_at.load(Ordering::SeqCst) != 1000 {
                    std::thread::yield_now();
                }
                for _ in 0..1000 {
                    d.count_done();
                }
            })
        };
        let start = Instant::now();
        assert_eq!(d.wait_done(1000, long), 1000);
        assert!(start.elapsed() < long / 2, "woke at {:?}", start.elapsed());
        assert_eq!(d.wake_at.load(Ordering::SeqCst), u64::MAX);
        counter.join().unwrap();
        // Not reached: returns what there is once the timeout passes.
        assert_eq!(d.wait_done(1001, Duration::from_millis(20)), 1000);
    }

    #[test]
    fn partitions_are_filled_a_batch_at_a_time() {
        // 1 KiB records: 1024 per 1 MiB batch.
        assert_eq!(partition_of(0, 1024, 4), 0);
        assert_eq!(partition_of(1023, 1024, 4), 0);
        assert_eq!(partition_of(1024, 1024, 4), 1);
        assert_eq!(partition_of(4 * 1024, 1024, 4), 0);
        assert_eq!(partition_of(5000, 1024, 1), 0);
        // Records larger than a batch still rotate, one per partition.
        assert_eq!(partition_of(3, 2 << 20, 4), 3);
    }
}
