//! The workload: one idempotent acks=all librdkafka producer writing `w-0`,
//! `w-1`, … round-robin over the partitions at a fixed rate, recording each
//! delivery report; consumers (assign, read_uncommitted) recording every
//! record they see; and the final read of every partition from its start to
//! its high watermark.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::checker::{Acked, Read, value_of};

/// A record waits this long for its acknowledgement before it fails
/// (indeterminate); the longest fault is shorter.
pub(crate) const MESSAGE_TIMEOUT: Duration = Duration::from_secs(30);
/// Sends queued but unanswered; above it the producer waits.
const MAX_IN_FLIGHT: i32 = 2000;

/// Settings of every client of the run: short socket timeouts and
/// metadata refreshes, so a client notices a dead or cut-off leader quickly.
fn client_config(bootstrap: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("socket.timeout.ms", "5000")
        .set("topic.metadata.refresh.interval.ms", "2000")
        .set("reconnect.backoff.max.ms", "1000")
        .set("allow.auto.create.topics", "false");
    c
}

/// The delivery reports, filled by librdkafka's callback.
#[derive(Default)]
pub(crate) struct Deliveries {
    pub(crate) acked: Mutex<Vec<Acked>>,
    pub(crate) failed: Mutex<Vec<Failed>>,
}

/// A delivery report with an error.
#[derive(Debug, Clone)]
pub(crate) struct Failed {
    pub(crate) value: u64,
    pub(crate) partition: i32,
    pub(crate) error: String,
    pub(crate) at: Instant,
}

/// The producer's context: it records each delivery report.
struct Recorder(Arc<ProducerShared>);

impl ClientContext for Recorder {}

impl ProducerContext for Recorder {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, n: usize) {
        let n = n as u64;
        let d = &self.0.deliveries;
        match result {
            Ok(m) => lock(&d.acked).push(Acked {
                value: n,
                partition: m.partition(),
                offset: m.offset(),
            }),
            Err((e, m)) => lock(&d.failed).push(Failed {
                value: n,
                partition: m.partition(),
                error: e.to_string(),
                at: Instant::now(),
            }),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What the producer thread shares with the others.
pub(crate) struct ProducerShared {
    pub(crate) deliveries: Deliveries,
    /// The next value to send (so: values `0..next` were sent).
    pub(crate) next: AtomicU64,
    /// Set to end sending; the producer then waits for every report.
    pub(crate) stop: AtomicBool,
    /// Fatal errors of the idempotent producer (each replaces the producer).
    pub(crate) fatal: Mutex<Vec<String>>,
}

impl ProducerShared {
    pub(crate) fn new() -> Self {
        ProducerShared {
            deliveries: Deliveries::default(),
            next: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            fatal: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn acked(&self) -> usize {
        lock(&self.deliveries.acked).len()
    }

    /// Acknowledged records whose value is at least `n`.
    pub(crate) fn acked_from(&self, n: u64) -> usize {
        lock(&self.deliveries.acked)
            .iter()
            .filter(|a| a.value >= n)
            .count()
    }
}

/// Sends `rate` records a second until `shared.stop`, then waits (bounded by
/// the message timeout) until every record has its delivery report.
pub(crate) fn produce(
    shared: &Arc<ProducerShared>,
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    rate: u32,
) -> Result<(), KafkaError> {
    let interval = Duration::from_secs(1) / rate.max(1);
    let started = Instant::now();
    let mut producer = idempotent_producer(shared, bootstrap)?;
    while !shared.stop.load(Ordering::Relaxed) {
        if let Some((code, reason)) = producer.client().fatal_error() {
            // Outstanding records fail with the fatal error; finish them
            // and go on with a new producer (a new producer id).
            lock(&shared.fatal).push(format!("{code:?}: {reason}"));
            let _ = producer.flush(MESSAGE_TIMEOUT);
            producer = idempotent_producer(shared, bootstrap)?;
        }
        let n = shared.next.load(Ordering::Relaxed);
        let due = started + interval * (n as u32);
        let now = Instant::now();
        if now < due || producer.in_flight_count() >= MAX_IN_FLIGHT {
            producer.poll(
                due.saturating_duration_since(now)
                    .min(Duration::from_millis(50)),
            );
            continue;
        }
        let payload = value_of(n);
        let record = BaseRecord::<(), String, usize>::with_opaque_to(topic, n as usize)
            .partition((n % partitions as u64) as i32)
            .payload(&payload);
        match producer.send(record) {
            Ok(()) => {
                shared.next.store(n + 1, Ordering::Relaxed);
            }
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                producer.poll(Duration::from_millis(50));
            }
            Err((e, _)) => return Err(e),
        }
        producer.poll(Duration::ZERO);
    }
    // Every record resolves within the message timeout.
    let _ = producer.flush(MESSAGE_TIMEOUT + Duration::from_secs(10));
    Ok(())
}

fn idempotent_producer(
    shared: &Arc<ProducerShared>,
    bootstrap: &str,
) -> Result<BaseProducer<Recorder>, KafkaError> {
    client_config(bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("request.timeout.ms", "5000")
        .set("retry.backoff.ms", "100")
        .set(
            "message.timeout.ms",
            MESSAGE_TIMEOUT.as_millis().to_string(),
        )
        .create_with_context(Recorder(Arc::clone(shared)))
}

fn assigned_consumer(bootstrap: &str, topic: &str, partitions: i32) -> KafkaResult<BaseConsumer> {
    let consumer: BaseConsumer = client_config(bootstrap)
        // assign() needs a group id; the group is never joined or committed.
        .set("group.id", "weir-jepsen-unused")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_uncommitted")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", "100")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    consumer.assign(&tpl)?;
    Ok(consumer)
}

type KafkaResult<T> = Result<T, KafkaError>;

/// Reads every partition from its start until `stop`, returning every
/// record seen (repeats included) and the number of errors polled.
pub(crate) fn consume(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    stop: &AtomicBool,
) -> KafkaResult<(Vec<Read>, usize)> {
    let consumer = assigned_consumer(bootstrap, topic, partitions)?;
    let mut reads = Vec::new();
    let mut errors = 0;
    while !stop.load(Ordering::Relaxed) {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => reads.push(Read {
                partition: m.partition(),
                offset: m.offset(),
                payload: String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
            }),
            Some(Err(_)) => errors += 1,
            None => {}
        }
    }
    Ok((reads, errors))
}

/// Per partition: its log start offset and high watermark.
pub(crate) type Watermarks = BTreeMap<i32, (i64, i64)>;

/// Every partition's high watermark, asked of its leader.
pub(crate) fn high_watermarks(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
) -> KafkaResult<Watermarks> {
    let consumer: BaseConsumer = client_config(bootstrap).create()?;
    (0..partitions)
        .map(|p| {
            consumer
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .map(|w| (p, w))
        })
        .collect()
}

/// Reads every partition from its start up to `marks` (its high
/// watermark); fails if that is not done within `limit`.
pub(crate) fn read_all(
    bootstrap: &str,
    topic: &str,
    marks: &Watermarks,
    limit: Duration,
) -> Result<Vec<Read>, String> {
    let partitions = marks.len() as i32;
    let consumer = assigned_consumer(bootstrap, topic, partitions).map_err(|e| e.to_string())?;
    let mut next: BTreeMap<i32, i64> = marks.iter().map(|(&p, &(low, _))| (p, low)).collect();
    let done = |next: &BTreeMap<i32, i64>| next.iter().all(|(p, &o)| o >= marks[p].1);
    let mut log = Vec::new();
    let deadline = Instant::now() + limit;
    while !done(&next) {
        if Instant::now() >= deadline {
            return Err(format!(
                "the final read did not reach the high watermarks {marks:?} within {limit:?}: at {next:?}"
            ));
        }
        let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let (p, o) = (m.partition(), m.offset());
        if o >= marks[&p].1 {
            continue;
        }
        log.push(Read {
            partition: p,
            offset: o,
            payload: String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
        });
        next.insert(p, o + 1);
    }
    Ok(log)
}

/// Sleeps `d` in short steps, returning early when `stop` is set.
pub(crate) fn pause(d: Duration, stop: &AtomicBool) {
    let until = Instant::now() + d;
    while !stop.load(Ordering::Relaxed) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        thread::sleep(left.min(Duration::from_millis(50)));
    }
}
