//! Crash durability with a real client: an idempotent `acks=all` librdkafka
//! producer writes numbered records to a multi-partition topic while the
//! broker (`log.flush.interval.messages=1`) is SIGKILLed and restarted 25
//! times in the middle of the stream. The producer is never restarted: it
//! retries across the kills. At the end every partition is read from the
//! beginning and checked:
//!
//! - every record whose delivery report said success is there, at the offset
//!   the report gave (0 lost);
//! - no record appears twice (0 duplicated: the broker recognises retried
//!   batches of an idempotent producer after a restart too);
//! - each partition holds its records in production order.
//!
//! A restarted broker listens on a new port, so the producer talks to a
//! small TCP forwarder on a fixed port that the broker advertises
//! (`--advertised-listener`); after each restart the forwarder points at the
//! new port.
//!
//! Knobs: `WEIR_COMPAT_CRASH_CYCLES` (25), `WEIR_COMPAT_CRASH_RECORDS_PER_CYCLE`
//! (1000).

use std::collections::BTreeMap;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use weir_compat_tests::{WeirProcess, env_count};

const TOPIC: &str = "crash-loop";
const PARTITIONS: i32 = 4;
/// Records handed to the producer and not yet reported, at most.
const MAX_IN_FLIGHT: usize = 600;
/// Time allowed for one cycle's records to be acknowledged.
const CYCLE_DEADLINE: Duration = Duration::from_secs(30);

/// Forwards TCP connections from a fixed local port to the broker's current
/// address. A connection whose broker side closes (the broker was killed)
/// is closed on the client side too, as a direct connection would be.
struct Forwarder {
    addr: SocketAddr,
    upstream: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Forwarder {
    fn start(upstream: &str) -> io::Result<Forwarder> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let upstream = Arc::new(Mutex::new(upstream.to_string()));
        let stop = Arc::new(AtomicBool::new(false));
        let accept = {
            let (upstream, stop) = (upstream.clone(), stop.clone());
            thread::spawn(move || {
                for client in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(client) = client else { continue };
                    let target = upstream.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    thread::spawn(move || forward(client, &target));
                }
            })
        };
        Ok(Forwarder {
            addr,
            upstream,
            stop,
            accept: Some(accept),
        })
    }

    fn address(&self) -> String {
        self.addr.to_string()
    }

    fn point_at(&self, upstream: &str) {
        *self.upstream.lock().unwrap_or_else(|e| e.into_inner()) = upstream.to_string();
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn forward(client: TcpStream, target: &str) {
    let Ok(target) = target.parse::<SocketAddr>() else {
        return;
    };
    // A broker that is down refuses at once; the client then reconnects.
    let Ok(server) = TcpStream::connect_timeout(&target, Duration::from_secs(2)) else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let up = thread::spawn(move || pump(c2, s2));
    pump(server, client);
    let _ = up.join();
}

/// Copies `from` to `to` until either side ends, then closes both.
fn pump(mut from: TcpStream, mut to: TcpStream) {
    let _ = io::copy(&mut from, &mut to);
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// What a delivery report said about one record.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Report {
    Delivered { partition: i32, offset: i64 },
    Failed(String),
}

#[derive(Default)]
struct Reports {
    by_record: Mutex<BTreeMap<usize, Report>>,
    delivered: AtomicUsize,
    reported: AtomicUsize,
    /// Records handed to the producer so far.
    sent: AtomicUsize,
}

struct Ctx(Arc<Reports>);

impl ClientContext for Ctx {}

impl ProducerContext for Ctx {
    type DeliveryOpaque = usize;
    fn delivery(&self, result: &DeliveryResult<'_>, record: usize) {
        let report = match result {
            Ok(m) => Report::Delivered {
                partition: m.partition(),
                offset: m.offset(),
            },
            Err((e, _)) => Report::Failed(e.to_string()),
        };
        if matches!(report, Report::Delivered { .. }) {
            self.0.delivered.fetch_add(1, Ordering::SeqCst);
        }
        let previous = self
            .0
            .by_record
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(record, report);
        assert!(
            previous.is_none(),
            "two delivery reports for record {record}"
        );
        self.0.reported.fetch_add(1, Ordering::SeqCst);
    }
}

fn payload(i: usize) -> Vec<u8> {
    let mut v = format!("{i:08}:").into_bytes();
    v.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, 40 + i % 100));
    v
}

fn record_number(payload: &[u8]) -> Option<usize> {
    let head = payload.get(..8)?;
    std::str::from_utf8(head).ok()?.parse().ok()
}

/// Sends records `0..total` to partition `i % PARTITIONS`, keeping at most
/// [`MAX_IN_FLIGHT`] unreported, then waits for every report.
fn produce_all(
    producer: BaseProducer<Ctx>,
    reports: Arc<Reports>,
    total: usize,
    stop: Arc<AtomicBool>,
) {
    let mut next = 0;
    while next < total && !stop.load(Ordering::SeqCst) {
        while next < total && next - reports.reported.load(Ordering::SeqCst) < MAX_IN_FLIGHT {
            let value = payload(next);
            let record: BaseRecord<'_, (), Vec<u8>, usize> =
                BaseRecord::with_opaque_to(TOPIC, next)
                    .partition((next % PARTITIONS as usize) as i32)
                    .payload(&value);
            match producer.send(record) {
                Ok(()) => {
                    next += 1;
                    reports.sent.store(next, Ordering::SeqCst);
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => break,
                Err((e, _)) => panic!("send of record {next} failed: {e}"),
            }
        }
        producer.poll(Duration::from_millis(5));
    }
    // Every record gets a report: delivered, or failed after message.timeout.ms.
    while reports.reported.load(Ordering::SeqCst) < next && !stop.load(Ordering::SeqCst) {
        producer.poll(Duration::from_millis(20));
    }
    if let Some((code, reason)) = producer.client().fatal_error() {
        panic!("the idempotent producer hit a fatal error: {code:?}: {reason}");
    }
}

fn producer(bootstrap: &str, reports: Arc<Reports>) -> BaseProducer<Ctx> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "2")
        .set("batch.num.messages", "50")
        // Long enough to outlast every restart: a record only fails when
        // the broker keeps refusing it.
        .set("message.timeout.ms", "60000")
        .set("request.timeout.ms", "5000")
        .set("reconnect.backoff.ms", "10")
        .set("reconnect.backoff.max.ms", "100")
        .set("retry.backoff.ms", "10")
        .set("retry.backoff.max.ms", "100")
        .set("topic.metadata.refresh.interval.ms", "1000")
        .create_with_context(Ctx(reports))
        .expect("producer")
}

/// Every record of every partition from the beginning, as (offset, record
/// number), read up to the high watermark.
fn read_everything(broker: &WeirProcess, bootstrap: &str) -> BTreeMap<i32, Vec<(i64, usize)>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        // librdkafka refuses assign() without a group.id; nothing joins
        // or commits to this group (no subscribe, no commits).
        .set("group.id", "weir-crash-loop-reader")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    let mut want = BTreeMap::new();
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        let (low, high) = consumer
            .fetch_watermarks(TOPIC, p, Duration::from_secs(30))
            .unwrap_or_else(|e| {
                panic!("watermarks of partition {p}: {e}\n{}", broker.stderr_tail())
            });
        assert_eq!(low, 0, "log start of partition {p}");
        want.insert(p, high);
        tpl.add_partition_offset(TOPIC, p, Offset::Beginning)
            .expect("tpl");
    }
    consumer.assign(&tpl).expect("assign");
    let mut read: BTreeMap<i32, Vec<(i64, usize)>> = BTreeMap::new();
    let done = |read: &BTreeMap<i32, Vec<(i64, usize)>>| {
        want.iter().all(|(p, &high)| {
            high == 0
                || read
                    .get(p)
                    .and_then(|r| r.last())
                    .is_some_and(|&(o, _)| o + 1 >= high)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done(&read) {
        assert!(
            Instant::now() < deadline,
            "reading back stopped short of the high watermarks {want:?}: read up to {:?}\n{}",
            read.iter()
                .map(|(p, r)| (p, r.last().map(|x| x.0)))
                .collect::<Vec<_>>(),
            broker.stderr_tail()
        );
        let Some(msg) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let msg = msg.unwrap_or_else(|e| panic!("consumer error: {e}\n{}", broker.stderr_tail()));
        let i = msg.payload().and_then(record_number).unwrap_or_else(|| {
            panic!("unexpected payload at {}/{}", msg.partition(), msg.offset())
        });
        assert_eq!(
            msg.payload(),
            Some(payload(i).as_slice()),
            "payload of record {i}"
        );
        read.entry(msg.partition())
            .or_default()
            .push((msg.offset(), i));
    }
    read
}

#[test]
fn acknowledged_records_survive_repeated_sigkill_exactly_once_in_order() {
    let cycles = env_count("WEIR_COMPAT_CRASH_CYCLES", 25);
    let per_cycle = env_count("WEIR_COMPAT_CRASH_RECORDS_PER_CYCLE", 1000);
    let total = per_cycle * (cycles + 1);
    let started = Instant::now();

    // The forwarder's port is known before the broker starts, so the broker
    // can advertise it; it is pointed at the broker once that is up.
    let forwarder = Forwarder::start("127.0.0.1:1").expect("forwarder");
    let advertised = forwarder.address();
    let mut broker = WeirProcess::start_with_args(&[
        "--advertised-listener",
        &advertised,
        "--set",
        "log.flush.interval.messages=1",
        "--set",
        &format!("num.partitions={PARTITIONS}"),
        "--set",
        "http.listeners=",
    ])
    .unwrap_or_else(|e| panic!("weir did not start: {e}"));
    forwarder.point_at(broker.bootstrap());

    let reports = Arc::new(Reports::default());
    let stop = Arc::new(AtomicBool::new(false));
    let producer_thread = {
        let p = producer(&advertised, reports.clone());
        let (reports, stop) = (reports.clone(), stop.clone());
        thread::spawn(move || produce_all(p, reports, total, stop))
    };
    // Stops the producer thread if an assertion below fails.
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let _stop_guard = StopOnDrop(stop.clone());

    let mut in_flight_at_kill = Vec::new();
    for cycle in 1..=cycles {
        let target = cycle * per_cycle;
        let deadline = Instant::now() + CYCLE_DEADLINE;
        while reports.delivered.load(Ordering::SeqCst) < target {
            assert!(
                !producer_thread.is_finished(),
                "the producer stopped before cycle {cycle}"
            );
            assert!(
                Instant::now() < deadline,
                "cycle {cycle}: only {} of {target} records acknowledged within {CYCLE_DEADLINE:?} ({} failed)\n--- weir stderr (tail) ---\n{}",
                reports.delivered.load(Ordering::SeqCst),
                reports.reported.load(Ordering::SeqCst) - reports.delivered.load(Ordering::SeqCst),
                broker.stderr_tail()
            );
            thread::sleep(Duration::from_millis(2));
        }
        broker
            .kill_hard()
            .unwrap_or_else(|e| panic!("SIGKILL in cycle {cycle}: {e}"));
        in_flight_at_kill
            .push(reports.sent.load(Ordering::SeqCst) - reports.reported.load(Ordering::SeqCst));
        broker
            .restart()
            .unwrap_or_else(|e| panic!("weir did not start again in cycle {cycle}: {e}"));
        forwarder.point_at(broker.bootstrap());
    }
    let killed_at = started.elapsed();
    producer_thread.join().expect("producer thread");

    let by_record =
        std::mem::take(&mut *reports.by_record.lock().unwrap_or_else(|e| e.into_inner()));
    let failed: Vec<(&usize, &Report)> = by_record
        .iter()
        .filter(|(_, r)| matches!(r, Report::Failed(_)))
        .collect();
    let read = read_everything(&broker, &advertised);

    // (partition, offset) of every record read, by record number.
    let mut seen: BTreeMap<usize, Vec<(i32, i64)>> = BTreeMap::new();
    // (partition, (offset, record), (offset, record)) where a record follows
    // one produced after it.
    let mut out_of_order = Vec::new();
    for (&p, recs) in &read {
        for w in recs.windows(2) {
            assert!(
                w[0].0 < w[1].0,
                "partition {p}: offsets not increasing: {w:?}"
            );
            if w[0].1 >= w[1].1 {
                out_of_order.push((p, w[0], w[1]));
            }
        }
        for &(o, i) in recs {
            assert_eq!(
                i % PARTITIONS as usize,
                p as usize,
                "record {i} in partition {p}"
            );
            seen.entry(i).or_default().push((p, o));
        }
    }
    let duplicated: Vec<_> = seen.iter().filter(|(_, at)| at.len() > 1).collect();
    let mut lost = Vec::new();
    let mut moved = Vec::new();
    for (i, r) in &by_record {
        if let Report::Delivered { partition, offset } = r {
            match seen.get(i) {
                None => lost.push(*i),
                Some(at) if !at.contains(&(*partition, *offset)) => {
                    moved.push((*i, (*partition, *offset), at.clone()))
                }
                Some(_) => {}
            }
        }
    }
    let delivered = by_record.len() - failed.len();
    let stored: usize = read.values().map(Vec::len).sum();
    eprintln!(
        "crash loop: {cycles} SIGKILLs in {killed_at:.1?} (in flight at each kill: {in_flight_at_kill:?}); \
         {delivered} of {total} records acknowledged, {} failed, {stored} stored; total {:.1?}",
        failed.len(),
        started.elapsed()
    );
    assert!(
        duplicated.is_empty() && lost.is_empty() && moved.is_empty() && out_of_order.is_empty(),
        "{} records duplicated (first: {:?}), {} acknowledged records lost (first: {:?}), \
         {} read at another offset than acknowledged (first: {:?}), \
         {} records after a later-produced one in their partition (first (partition, (offset, record) before, after): {:?})\n--- weir stderr (tail) ---\n{}",
        duplicated.len(),
        duplicated.iter().take(5).collect::<Vec<_>>(),
        lost.len(),
        lost.iter().take(10).collect::<Vec<_>>(),
        moved.len(),
        moved.iter().take(5).collect::<Vec<_>>(),
        out_of_order.len(),
        out_of_order.iter().take(5).collect::<Vec<_>>(),
        broker.stderr_tail()
    );
    // With a 60 s message timeout nothing should fail; a failure means the
    // broker kept refusing a record.
    assert!(
        failed.is_empty(),
        "{} records failed (first: {:?})\n--- weir stderr (tail) ---\n{}",
        failed.len(),
        failed.iter().take(5).collect::<Vec<_>>(),
        broker.stderr_tail()
    );
    assert_eq!(delivered, total, "every record acknowledged");
}
