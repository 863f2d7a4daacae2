//! `weir perf e2e`: end-to-end latency at a fixed rate.
//!
//! A producer thread sends records on a fixed schedule (record `i` is due at
//! `i / throughput` seconds after the start); a consumer thread on its own
//! connection long-polls every partition. Each record's value starts with
//! its *intended* send time (nanoseconds since the run's start, big-endian)
//! and its sequence number; latency is receive time − intended send time,
//! so a producer that falls behind (a slow acknowledgement, a stalled
//! broker) shows up as latency of every record that had to wait, instead of
//! being hidden (coordinated omission). Both threads share one clock (one
//! `Instant`), so no clock synchronisation is involved.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::{BufMut, BytesMut};
use hdrhistogram::Histogram;
use weir_client::TopicInfo;
use weir_protocol::Uuid;
use weir_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use weir_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use weir_protocol::messages::{FetchRequest, ProduceRequest};
use weir_protocol::records::{BatchIter, Compression, DecompressLimits, RecordBatchBuilder};

use super::super::common::{ClientSettings, now_ms, producer_topic};

/// Bytes at the start of every value: intended send time (ns) + sequence.
pub const HEADER_BYTES: usize = 16;

/// Upper bound of a record's framing around its value (length, attributes,
/// deltas, key and header counts as varints), so a batch of records never
/// exceeds `batch_size` bytes; the batch header is counted once.
const RECORD_OVERHEAD: usize = 32;
const BATCH_HEADER: usize = 61;

/// What to run.
#[derive(Debug, Clone)]
pub struct E2eSpec {
    /// Where and how to connect (`client.id` applies to all three
    /// connections; without it they are named after their role).
    pub client: ClientSettings,
    pub topic: String,
    /// Records per second (the schedule).
    pub throughput: u64,
    pub record_size: usize,
    pub num_records: u64,
    /// Create the topic with this many partitions when it does not exist;
    /// None: the broker's auto-creation, as a producer gets it.
    pub partitions: Option<i32>,
    /// How long to wait for the topic's metadata (`max.block.ms`).
    pub max_block: Duration,
    pub acks: i16,
    /// Most bytes of one partition's batch in one produce request.
    pub batch_size: usize,
    /// Give up when the consumer sees nothing new for this long after the
    /// producer finished.
    pub tail_timeout: Duration,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct E2eSummary {
    pub sent: u64,
    pub received: u64,
    pub target_rate: u64,
    /// Records sent / seconds from the start to the last acknowledgement.
    pub achieved_rate: f64,
    /// End-to-end latency in microseconds, from the intended send time.
    pub latency_us: Histogram<u64>,
    /// Records received more than once (should be 0).
    pub duplicates: u64,
    /// Produce acknowledgement latency in microseconds, from the intended
    /// send time to the acknowledgement (empty with acks=0). Compared with
    /// `latency_us` it tells the produce leg from the fetch leg.
    pub ack_us: Histogram<u64>,
}

impl E2eSummary {
    fn q_ms(&self, q: f64) -> f64 {
        self.latency_us.value_at_quantile(q) as f64 / 1000.0
    }

    /// p50, p95, p99, p99.9, max in milliseconds.
    pub fn percentiles_ms(&self) -> [f64; 5] {
        [
            self.q_ms(0.5),
            self.q_ms(0.95),
            self.q_ms(0.99),
            self.q_ms(0.999),
            self.latency_us.max() as f64 / 1000.0,
        ]
    }

    /// Acknowledgement p50, p99, p99.9, max in milliseconds.
    pub fn ack_percentiles_ms(&self) -> [f64; 4] {
        let q = |q: f64| self.ack_us.value_at_quantile(q) as f64 / 1000.0;
        [q(0.5), q(0.99), q(0.999), self.ack_us.max() as f64 / 1000.0]
    }

    pub fn text(&self) -> String {
        let [p50, p95, p99, p999, max] = self.percentiles_ms();
        let mut s = format!(
            "{} records sent, {} received, {:.1} records/sec (target {}), end-to-end latency {:.3} ms avg, {p50:.3} ms 50th, {p95:.3} ms 95th, {p99:.3} ms 99th, {p999:.3} ms 99.9th, {max:.3} ms max.",
            self.sent,
            self.received,
            self.achieved_rate,
            self.target_rate,
            self.latency_us.mean() / 1000.0,
        );
        if !self.ack_us.is_empty() {
            let [a50, a99, a999, amax] = self.ack_percentiles_ms();
            s.push_str(&format!(
                "\nproduce acknowledgement (from intended send time): {a50:.3} ms 50th, {a99:.3} ms 99th, {a999:.3} ms 99.9th, {amax:.3} ms max."
            ));
        }
        s
    }

    pub fn json(&self) -> String {
        let [p50, p95, p99, p999, max] = self.percentiles_ms();
        let [a50, a99, a999, amax] = self.ack_percentiles_ms();
        format!(
            "{{\"records_sent\":{},\"records_received\":{},\"duplicates\":{},\"target_records_per_sec\":{},\"records_per_sec\":{:.1},\"avg_ms\":{:.3},\"p50_ms\":{p50:.3},\"p95_ms\":{p95:.3},\"p99_ms\":{p99:.3},\"p999_ms\":{p999:.3},\"max_ms\":{max:.3},\"ack_p50_ms\":{a50:.3},\"ack_p99_ms\":{a99:.3},\"ack_p999_ms\":{a999:.3},\"ack_max_ms\":{amax:.3}}}",
            self.sent,
            self.received,
            self.duplicates,
            self.target_rate,
            self.achieved_rate,
            self.latency_us.mean() / 1000.0,
        )
    }
}

/// One partition as the two sides see it.
#[derive(Debug, Clone, Copy)]
struct Part {
    partition: i32,
    leader: i32,
}

/// Runs the producer and the consumer (each on its own thread and
/// connection) and returns what the consumer measured.
pub fn run(spec: &E2eSpec) -> Result<E2eSummary> {
    if spec.throughput == 0 {
        bail!("--throughput must be > 0");
    }
    if spec.record_size < HEADER_BYTES {
        bail!("--record-size must be at least {HEADER_BYTES} (send time and sequence)");
    }
    let rt = runtime()?;
    let (parts, topic_id) = rt.block_on(prepare(spec))?;

    let origin = Instant::now();
    let sent = Arc::new(AtomicU64::new(0));
    let producer_done = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
    let mut ack_us = Histogram::<u64>::new(3).expect("valid sigfig");

    let consumer = {
        let spec = spec.clone();
        let parts = parts.clone();
        let sent = sent.clone();
        let producer_done = producer_done.clone();
        std::thread::Builder::new()
            .name("e2e-consumer".into())
            .spawn(move || -> Result<(Histogram<u64>, u64, u64)> {
                let rt = runtime()?;
                rt.block_on(consume(
                    &spec,
                    &parts,
                    topic_id,
                    origin,
                    &sent,
                    &producer_done,
                    ready_tx,
                ))
            })
            .context("start the consumer thread")?
    };
    // The consumer knows where the partitions end before anything is sent.
    let ready = ready_rx
        .recv()
        .map_err(|_| anyhow::anyhow!("the consumer thread stopped before it was ready"));
    let produced = match ready.and_then(|r| r) {
        Ok(()) => rt.block_on(produce(spec, &parts, origin, &sent, &mut ack_us)),
        Err(e) => Err(e),
    };
    producer_done.store(true, Ordering::SeqCst);
    let consumed = consumer
        .join()
        .map_err(|_| anyhow::anyhow!("the consumer thread panicked"))?;
    let elapsed = produced?;
    let (latency_us, received, duplicates) = consumed?;
    let sent = sent.load(Ordering::SeqCst);
    Ok(E2eSummary {
        sent,
        received,
        target_rate: spec.throughput,
        achieved_rate: sent as f64 / elapsed.as_secs_f64().max(1e-9),
        latency_us,
        duplicates,
        ack_us,
    })
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("start a runtime")
}

/// Creates the topic if asked and missing (else the broker may create it,
/// see [`producer_topic`]); returns its partitions and id.
async fn prepare(spec: &E2eSpec) -> Result<(Vec<Part>, Uuid)> {
    let mut client = spec.client.connect_as("weir-perf-e2e").await?;
    let Some(n) = spec.partitions else {
        let topic = producer_topic(&mut client, &spec.topic, spec.max_block).await?;
        return parts_of(&topic);
    };
    let topic = match client.topic(&spec.topic).await {
        Ok(t) => t,
        Err(weir_client::ClientError::UnknownTopic(_)) => {
            client
                .create_topic(&spec.topic, n, 1, &[])
                .await
                .with_context(|| format!("create topic {}", spec.topic))?;
            // Metadata may lag the creation by a moment.
            let mut tries = 0;
            loop {
                match client.topic(&spec.topic).await {
                    Ok(t) if t.partitions.iter().all(|p| p.leader >= 0) => break t,
                    _ if tries < 50 => {
                        tries += 1;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    other => break other?,
                }
            }
        }
        Err(e) => return Err(e).with_context(|| format!("topic {}", spec.topic)),
    };
    parts_of(&topic)
}

/// The partitions (with leaders) and id of a topic.
fn parts_of(topic: &TopicInfo) -> Result<(Vec<Part>, Uuid)> {
    let parts: Vec<Part> = topic
        .partitions
        .iter()
        .map(|p| Part {
            partition: p.partition,
            leader: p.leader,
        })
        .collect();
    if parts.is_empty() {
        bail!("topic {} has no partitions", topic.name);
    }
    Ok((parts, topic.topic_id))
}

/// Sends records on schedule until `num_records` are acknowledged; returns
/// the time from `origin` to the last acknowledgement.
async fn produce(
    spec: &E2eSpec,
    parts: &[Part],
    origin: Instant,
    sent: &AtomicU64,
    ack_us: &mut Histogram<u64>,
) -> Result<Duration> {
    let mut client = spec.client.connect_as("weir-perf-e2e-producer").await?;
    let filler = vec![b'x'; spec.record_size - HEADER_BYTES];
    let interval_ns = 1e9 / spec.throughput as f64;
    // The schedule starts now (the consumer's setup is not the producer's
    // backlog); times stay relative to the shared `origin`.
    let start = origin.elapsed();
    let due_at = |seq: u64| start + Duration::from_nanos((seq as f64 * interval_ns) as u64);
    let mut next = 0u64;
    while next < spec.num_records {
        let now = origin.elapsed();
        let due =
            (((now - start).as_nanos() as f64 / interval_ns) as u64 + 1).min(spec.num_records);
        if due <= next {
            // Sleep to the next record's intended time. A blocking sleep:
            // this runtime runs nothing else, and the OS timer is finer than
            // tokio's millisecond wheel.
            std::thread::sleep(due_at(next).saturating_sub(now));
            continue;
        }
        // Everything due now, one batch per partition (round robin by
        // sequence), bounded by batch.size per partition.
        let mut batches: BTreeMap<usize, (RecordBatchBuilder, usize)> = BTreeMap::new();
        let ts = now_ms();
        let mut seq = next;
        while seq < due {
            let p = (seq % parts.len() as u64) as usize;
            let (b, bytes) = batches
                .entry(p)
                .or_insert_with(|| (RecordBatchBuilder::new(Compression::None), BATCH_HEADER));
            // encoded size: the value plus at most RECORD_OVERHEAD of framing
            if *bytes > BATCH_HEADER
                && *bytes + spec.record_size + RECORD_OVERHEAD > spec.batch_size
            {
                break;
            }
            let mut v = BytesMut::with_capacity(spec.record_size);
            v.put_u64(due_at(seq).as_nanos() as u64);
            v.put_u64(seq);
            v.put_slice(&filler);
            b.push(ts, None, Some(v.freeze()), vec![])?;
            *bytes += spec.record_size + RECORD_OVERHEAD;
            seq += 1;
        }
        // One request per leader, all its partitions in it.
        let mut by_leader: HashMap<i32, Vec<PartitionProduceData>> = HashMap::new();
        for (p, (b, _)) in batches {
            let part = parts[p];
            by_leader
                .entry(part.leader)
                .or_default()
                .push(PartitionProduceData {
                    index: part.partition,
                    records: Some(b.build()?.into_bytes()),
                    ..Default::default()
                });
        }
        for (leader, partition_data) in by_leader {
            let req = ProduceRequest {
                acks: spec.acks,
                timeout_ms: 30_000,
                topic_data: vec![TopicProduceData {
                    name: spec.topic.clone(),
                    partition_data,
                    ..Default::default()
                }],
                ..Default::default()
            };
            let conn = client.node_connection(leader).await?;
            if spec.acks == 0 {
                conn.send_no_response(&req).await?;
                continue;
            }
            let resp = conn.send(&req).await?;
            for t in resp.responses {
                for p in t.partition_responses {
                    if p.error_code != 0 {
                        bail!(
                            "produce to {}-{} failed: error {} {}",
                            spec.topic,
                            p.index,
                            p.error_code,
                            p.error_message.unwrap_or_default()
                        );
                    }
                }
            }
        }
        if spec.acks != 0 {
            let acked = origin.elapsed();
            for s in next..seq {
                let us = acked.saturating_sub(due_at(s)).as_micros() as u64;
                ack_us.record(us.max(1)).ok();
            }
        }
        sent.store(seq, Ordering::SeqCst);
        next = seq;
    }
    Ok(origin.elapsed())
}

/// Long-polls every partition from its end offset at the start until every
/// sent record arrived (or nothing arrives for `tail_timeout` after the
/// producer finished); returns (latency histogram in µs, received, duplicates).
async fn consume(
    spec: &E2eSpec,
    parts: &[Part],
    topic_id: Uuid,
    origin: Instant,
    sent: &AtomicU64,
    producer_done: &AtomicBool,
    ready: std::sync::mpsc::Sender<Result<()>>,
) -> Result<(Histogram<u64>, u64, u64)> {
    let start = async {
        let mut client = spec.client.connect_as("weir-perf-e2e-consumer").await?;
        let mut positions: BTreeMap<i32, Vec<(i32, i64)>> = BTreeMap::new();
        for p in parts {
            let (end, _) = client
                .list_offset(&spec.topic, p.partition, -1, p.leader)
                .await?;
            positions
                .entry(p.leader)
                .or_default()
                .push((p.partition, end));
        }
        anyhow::Ok((client, positions))
    };
    let (mut client, mut positions) = match start.await {
        Ok(s) => {
            let _ = ready.send(Ok(()));
            s
        }
        Err(e) => {
            let _ = ready.send(Err(anyhow::anyhow!("consumer setup failed: {e:#}")));
            return Err(e);
        }
    };
    let mut latency = Histogram::<u64>::new(3).expect("valid sigfig");
    let mut seen = vec![false; spec.num_records as usize];
    let (mut received, mut duplicates) = (0u64, 0u64);
    let limits = DecompressLimits::default();
    let mut last_progress = Instant::now();
    loop {
        let done = producer_done.load(Ordering::SeqCst);
        if done && received >= sent.load(Ordering::SeqCst) {
            break;
        }
        if done && last_progress.elapsed() >= spec.tail_timeout {
            eprintln!(
                "no new records for {:?}; stopping with {received} of {} received",
                spec.tail_timeout,
                sent.load(Ordering::SeqCst)
            );
            break;
        }
        let mut got = false;
        for (&leader, partitions) in positions.iter_mut() {
            let req = FetchRequest {
                max_wait_ms: 100,
                min_bytes: 1,
                max_bytes: 64 << 20,
                isolation_level: 0,
                session_epoch: -1,
                topics: vec![FetchTopic {
                    topic: spec.topic.clone(),
                    topic_id,
                    partitions: partitions
                        .iter()
                        .map(|&(partition, offset)| FetchPartition {
                            partition,
                            fetch_offset: offset,
                            partition_max_bytes: 4 << 20,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }],
                ..Default::default()
            };
            let resp = client.node_connection(leader).await?.send(&req).await?;
            let now_ns = origin.elapsed().as_nanos() as u64;
            if resp.error_code != 0 {
                bail!("fetch failed: error {}", resp.error_code);
            }
            for t in resp.responses {
                for fp in t.partitions {
                    if fp.error_code != 0 {
                        bail!(
                            "fetch from {}-{} failed: error {}",
                            spec.topic,
                            fp.partition_index,
                            fp.error_code
                        );
                    }
                    let Some(pos) = partitions
                        .iter_mut()
                        .find(|(p, _)| *p == fp.partition_index)
                    else {
                        continue;
                    };
                    for batch in BatchIter::new(fp.records.unwrap_or_default()) {
                        // A partial batch at the end of the response.
                        let Ok(batch) = batch else { break };
                        for r in batch.records(&limits)? {
                            let r = r?;
                            if r.offset(batch.base_offset()) < pos.1 {
                                continue;
                            }
                            let Some((intended_ns, seq)) = r.value.as_deref().and_then(header)
                            else {
                                continue;
                            };
                            match seen.get_mut(seq as usize) {
                                Some(s) if !*s => {
                                    *s = true;
                                    received += 1;
                                    let us = now_ns.saturating_sub(intended_ns) / 1000;
                                    latency.record(us.max(1)).ok();
                                }
                                Some(_) => duplicates += 1,
                                None => {}
                            }
                            got = true;
                        }
                        pos.1 = batch.next_offset();
                    }
                }
            }
        }
        if got {
            last_progress = Instant::now();
        }
    }
    Ok((latency, received, duplicates))
}

/// (intended send time in ns, sequence) from the start of a value.
fn header(v: &[u8]) -> Option<(u64, u64)> {
    let t = u64::from_be_bytes(v.get(0..8)?.try_into().ok()?);
    let s = u64::from_be_bytes(v.get(8..16)?.try_into().ok()?);
    Some((t, s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_short_values() {
        let mut v = BytesMut::new();
        v.put_u64(123_456_789);
        v.put_u64(42);
        v.put_slice(b"rest");
        assert_eq!(header(&v), Some((123_456_789, 42)));
        assert_eq!(header(&v[..15]), None);
    }

    /// Runs the tool against an in-process broker with small numbers.
    #[test]
    fn e2e_against_a_broker_counts_every_record() {
        let dir =
            std::env::temp_dir().join(format!("weir-perf-e2e-{}-{}", std::process::id(), now_ms()));
        std::fs::create_dir_all(&dir).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let broker = rt.block_on(async {
            let mut s = weir_broker::config::ConfigSources::default();
            s.set("listeners", "127.0.0.1:0");
            s.set("log.dirs", &dir.display().to_string());
            weir_broker::start(s.build().unwrap()).await.unwrap()
        });
        let spec = E2eSpec {
            client: ClientSettings {
                bootstrap: broker.local_addr.to_string(),
                client_id: None,
                options: weir_client::ClientOptions::default(),
            },
            topic: "e2e".into(),
            throughput: 2_000,
            record_size: 100,
            num_records: 600,
            partitions: Some(3),
            max_block: Duration::from_secs(10),
            acks: 1,
            batch_size: 16 * 1024,
            tail_timeout: Duration::from_secs(20),
        };
        let s = run(&spec).unwrap();
        rt.block_on(broker.shutdown()).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(s.sent, 600);
        assert_eq!(s.received, 600, "{}", s.text());
        assert_eq!(s.duplicates, 0);
        assert_eq!(s.latency_us.len(), 600);
        let p = s.percentiles_ms();
        assert!(p.windows(2).all(|w| w[0] <= w[1]), "{p:?}");
        assert!(p[0] > 0.0);
        assert!(s.achieved_rate > 0.0);
        let json = s.json();
        assert!(json.contains("\"records_received\":600"), "{json}");
    }
}
