//! P5: end-to-end latency at a fixed rate with a librdkafka producer and
//! consumer in this process.
//!
//! Record `i` is due at `i / rate` seconds after the start; its value
//! begins with that *intended* send time (nanoseconds since the run's
//! start, big-endian) and its sequence number. The consumer's latency for a
//! record is receive time − intended send time, so a producer that falls
//! behind its schedule (a queue that stayed full, a slow broker) adds to the
//! latency of every record that waited instead of hiding it (coordinated
//! omission). One `Instant` is the clock of both sides.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use hdrhistogram::Histogram;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

/// Bytes at the start of each value: intended send time (ns) + sequence.
pub const HEADER_BYTES: usize = 16;

/// A consumer that receives nothing for this long after the producer
/// finished gives up.
const TAIL_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Clone, Debug)]
pub struct E2eSpec<'a> {
    pub topic: &'a str,
    pub partitions: i32,
    pub record_bytes: usize,
    pub rate: f64,
    pub seconds: f64,
    pub budget: Duration,
}

#[derive(Clone, Debug)]
pub struct E2eOutcome {
    pub sent: u64,
    pub received: u64,
    pub duplicates: u64,
    /// Records sent / seconds from the first intended send to the last send.
    pub achieved_rate: f64,
    /// Records that were sent later than 1 ms after their intended time.
    pub sent_late: u64,
    /// Nanoseconds, receive time − intended send time.
    pub latency: Histogram<u64>,
}

/// Encodes the value of record `seq`, intended at `intended_ns`.
pub fn encode_value(buf: &mut [u8], intended_ns: u64, seq: u64) {
    buf[..8].copy_from_slice(&intended_ns.to_be_bytes());
    buf[8..16].copy_from_slice(&seq.to_be_bytes());
}

/// (intended send time in ns, sequence) from a value.
pub fn decode_value(v: &[u8]) -> Option<(u64, u64)> {
    let t = u64::from_be_bytes(v.get(..8)?.try_into().ok()?);
    let s = u64::from_be_bytes(v.get(8..16)?.try_into().ok()?);
    Some((t, s))
}

pub fn run(bootstrap: &str, spec: &E2eSpec<'_>) -> Result<E2eOutcome> {
    if spec.record_bytes < HEADER_BYTES || spec.rate <= 0.0 {
        bail!("record size must be ≥ {HEADER_BYTES} and the rate positive");
    }
    let total = (spec.rate * spec.seconds).ceil() as u64;
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "1")
        // Latency run: no lingering; batches form while requests are in flight.
        .set("linger.ms", "0")
        .set("batch.size", "1048576")
        .set("compression.type", "none")
        .set("queue.buffering.max.messages", "2000000")
        .set("queue.buffering.max.kbytes", "1048576")
        .set("message.timeout.ms", "120000")
        .set("max.in.flight.requests.per.connection", "5")
        .set("socket.nagle.disable", "true")
        .create()
        .context("create producer")?;
    // Warm-up outside the clock: one record per partition, acknowledged,
    // so connections and metadata exist before the schedule starts.
    let warm = vec![0u8; spec.record_bytes];
    for p in 0..spec.partitions {
        let r = BaseRecord::<(), [u8]>::to(spec.topic)
            .partition(p)
            .payload(&warm[..]);
        producer
            .send(r)
            .map_err(|(e, _)| anyhow::anyhow!("warm-up send: {e}"))?;
    }
    producer
        .flush(Duration::from_secs(30))
        .context("warm-up flush")?;

    // The consumer starts at the current end of every partition.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set(
            "group.id",
            format!("weir-compare-e2e-{}", std::process::id()),
        )
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        .set("socket.nagle.disable", "true")
        // Answer as soon as one byte is there; wake fetches fast.
        .set("fetch.wait.max.ms", "100")
        .set("fetch.min.bytes", "1")
        .set("fetch.queue.backoff.ms", "0")
        .create()
        .context("create consumer")?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..spec.partitions {
        let (_, high) = consumer
            .fetch_watermarks(spec.topic, p, Duration::from_secs(30))
            .with_context(|| format!("watermarks of partition {p}"))?;
        tpl.add_partition_offset(spec.topic, p, Offset::Offset(high))?;
    }
    consumer.assign(&tpl).context("assign")?;

    let origin = Instant::now();
    let done = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let consumer_thread = {
        let (done, sent) = (done.clone(), sent.clone());
        let budget = spec.budget;
        std::thread::Builder::new()
            .name("p5-consumer".into())
            .spawn(move || consume(consumer, origin, total, &done, &sent, budget))?
    };

    let interval_ns = 1e9 / spec.rate;
    let mut value = vec![b'x'; spec.record_bytes];
    let deadline = origin + spec.budget;
    let mut sent_late = 0u64;
    let mut last_send = origin;
    let mut result = Ok(());
    'records: for i in 0..total {
        let intended = Duration::from_nanos((i as f64 * interval_ns) as u64);
        loop {
            let now = origin.elapsed();
            if now >= intended {
                break;
            }
            producer.poll(Duration::ZERO);
            // A sleep, not a spin: the consumer thread shares this core.
            std::thread::sleep(intended - now);
        }
        if origin.elapsed() > intended + Duration::from_millis(1) {
            sent_late += 1;
        }
        encode_value(&mut value, intended.as_nanos() as u64, i);
        let partition = (i % spec.partitions.max(1) as u64) as i32;
        let mut record = BaseRecord::<(), [u8]>::to(spec.topic)
            .partition(partition)
            .payload(&value[..]);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    if Instant::now() > deadline {
                        result = Err(anyhow::anyhow!("local queue stayed full at record {i}"));
                        break 'records;
                    }
                    producer.poll(Duration::from_millis(1));
                }
                Err((e, _)) => {
                    result = Err(anyhow::anyhow!("send record {i}: {e}"));
                    break 'records;
                }
            }
        }
        sent.store(i + 1, Ordering::SeqCst);
        last_send = Instant::now();
        if i % 64 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    let flushed = producer.flush(spec.budget);
    done.store(true, Ordering::SeqCst);
    let consumed = consumer_thread
        .join()
        .map_err(|_| anyhow::anyhow!("consumer thread panicked"))?;
    result?;
    flushed.context("flush the producer")?;
    let (latency, received, duplicates) = consumed?;
    let sent = sent.load(Ordering::SeqCst);
    Ok(E2eOutcome {
        sent,
        received,
        duplicates,
        achieved_rate: sent as f64 / last_send.duration_since(origin).as_secs_f64().max(1e-9),
        sent_late,
        latency,
    })
}

/// Receives until every sent record arrived; returns (latency histogram in
/// ns, received, duplicates).
fn consume(
    consumer: BaseConsumer,
    origin: Instant,
    total: u64,
    done: &AtomicBool,
    sent: &AtomicU64,
    budget: Duration,
) -> Result<(Histogram<u64>, u64, u64)> {
    let mut latency = Histogram::<u64>::new(3)?;
    let mut seen = vec![false; total as usize];
    let (mut received, mut duplicates) = (0u64, 0u64);
    let deadline = origin + budget + TAIL_TIMEOUT;
    let mut last_progress = Instant::now();
    loop {
        let finished = done.load(Ordering::SeqCst);
        if finished && received >= sent.load(Ordering::SeqCst) {
            break;
        }
        if finished && last_progress.elapsed() > TAIL_TIMEOUT {
            bail!(
                "consumer stalled: {received} of {} records after {TAIL_TIMEOUT:?} without progress",
                sent.load(Ordering::SeqCst)
            );
        }
        if Instant::now() > deadline {
            bail!("consumer timed out with {received} of {total} records");
        }
        match consumer.poll(Duration::from_millis(50)) {
            None => {}
            Some(Ok(m)) => {
                let now = origin.elapsed().as_nanos() as u64;
                let Some((intended, seq)) = m.payload().and_then(decode_value) else {
                    continue;
                };
                match seen.get_mut(seq as usize) {
                    Some(s) if !*s => {
                        *s = true;
                        received += 1;
                        latency.record(now.saturating_sub(intended).max(1)).ok();
                        last_progress = Instant::now();
                    }
                    Some(_) => duplicates += 1,
                    None => {}
                }
            }
            Some(Err(e)) => bail!("consume after {received} records: {e}"),
        }
    }
    Ok((latency, received, duplicates))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_carry_time_and_sequence() {
        let mut v = vec![0u8; 32];
        encode_value(&mut v, 987_654_321, 7);
        assert_eq!(decode_value(&v), Some((987_654_321, 7)));
        assert_eq!(decode_value(&v[..12]), None);
    }
}
