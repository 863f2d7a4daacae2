//! Log compaction against a model, written and read by librdkafka (the
//! `rdkafka` crate) on a real `weir serve`:
//!
//! - 200 000 records over 10 000 keys (10 % tombstones, lz4): after
//!   cleaning, a consumer from the beginning sees exactly each key's latest
//!   record at the offset its delivery report gave; tombstones stay until
//!   `delete.retention.ms` after the cleaning that saw them, then go.
//! - repeated `kill -9` of the broker while a throttled cleaning runs: no
//!   key loses its latest value, no offset appears twice, offsets unchanged.
//! - a low-traffic topic with a short `segment.ms` rolls without new
//!   appends and gets cleaned.
//!
//! Sizes: `WEIR_COMPAT_COMPACTION_RECORDS` / `_KEYS` (defaults: the issue's
//! 200 000 / 10 000).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, NewTopic, ResourceSpecifier, TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use weir_compat_tests::segment::stored_batches;
use weir_compat_tests::{WeirProcess, env_count};

const TIMEOUT: Duration = Duration::from_secs(30);
/// Upper bound for any wait on the cleaner (a failure, not a skip, after it).
const CLEAN_WAIT: Duration = Duration::from_secs(150);

/// A record as produced: key and value (`None` = tombstone).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rec {
    key: String,
    value: Option<Vec<u8>>,
}

/// What was produced, by offset (from delivery reports), and each key's
/// latest offset.
#[derive(Default)]
struct Model {
    by_offset: BTreeMap<i64, Rec>,
    latest: HashMap<String, i64>,
}

impl Model {
    fn add(&mut self, offset: i64, rec: Rec) {
        if let Some(&prev) = self.latest.get(&rec.key) {
            assert!(
                offset > prev,
                "key {} written at {offset} after {prev}",
                rec.key
            );
        }
        self.latest.insert(rec.key.clone(), offset);
        assert!(
            self.by_offset.insert(offset, rec).is_none(),
            "offset {offset} reported twice"
        );
    }

    /// The latest record of every key, by offset; tombstones included or not.
    fn latest_records(&self, with_tombstones: bool) -> BTreeMap<i64, Rec> {
        self.latest
            .values()
            .filter_map(|o| self.by_offset.get(o).map(|r| (*o, r.clone())))
            .filter(|(_, r)| with_tombstones || r.value.is_some())
            .collect()
    }
}

/// Deterministic pseudo-random numbers (xorshift64*), so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| (self.next() >> 56) as u8).collect()
    }
}

fn start(args: &[&str]) -> WeirProcess {
    WeirProcess::start_with_args(args).unwrap_or_else(|e| panic!("weir did not start: {e}"))
}

fn admin(broker: &WeirProcess) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("allow.auto.create.topics", "false")
        .create()
        .expect("admin client")
}

fn opts() -> AdminOptions {
    AdminOptions::new()
        .operation_timeout(Some(TIMEOUT))
        .request_timeout(Some(TIMEOUT))
}

async fn create_topic(broker: &WeirProcess, topic: &str, configs: &[(&str, &str)]) {
    let mut t = NewTopic::new(topic, 1, TopicReplication::Fixed(1));
    for (k, v) in configs {
        t = t.set(k, v);
    }
    let res = admin(broker)
        .create_topics([&t], &opts())
        .await
        .unwrap_or_else(|e| panic!("create_topics failed: {e}\n{}", broker.stderr_tail()));
    if let Err((name, code)) = &res[0] {
        panic!("creating {name} failed: {code:?}");
    }
}

/// AlterConfigs (not incremental): `configs` is the topic's whole override set.
async fn alter_topic(broker: &WeirProcess, topic: &str, configs: &[(&str, &str)]) {
    let mut a = AlterConfig::new(ResourceSpecifier::Topic(topic));
    for (k, v) in configs {
        a = a.set(k, v);
    }
    let res = admin(broker)
        .alter_configs([&a], &opts())
        .await
        .expect("alter_configs request");
    assert!(res[0].is_ok(), "alter_configs {configs:?}: {res:?}");
}

fn producer(broker: &WeirProcess, compression: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("compression.type", compression)
        .set("linger.ms", "5")
        // Below every segment.bytes used here: a batch larger than a
        // segment is refused (as Kafka does).
        .set("batch.size", "65536")
        .set("message.timeout.ms", "120000")
        .create()
        .expect("producer")
}

/// Produces `recs` in order and adds each to the model at the offset of its
/// delivery report.
async fn produce(
    broker: &WeirProcess,
    p: &FutureProducer,
    topic: &str,
    recs: Vec<Rec>,
    model: &mut Model,
) {
    let mut futures = Vec::with_capacity(recs.len());
    for (i, r) in recs.iter().enumerate() {
        let mut record = FutureRecord::<[u8], [u8]>::to(topic)
            .key(r.key.as_bytes())
            .partition(0);
        if let Some(v) = &r.value {
            record = record.payload(v.as_slice());
        }
        loop {
            match p.send_result(record) {
                Ok(f) => {
                    futures.push(f);
                    break;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                Err((e, _)) => panic!("send of record {i} failed: {e}"),
            }
        }
    }
    for (r, f) in recs.into_iter().zip(futures) {
        match f.await {
            Ok(Ok(d)) => model.add(d.offset, r),
            Ok(Err((e, _))) => panic!(
                "record {} not delivered: {e}\n--- weir stderr (tail) ---\n{}",
                r.key,
                broker.stderr_tail()
            ),
            Err(_) => panic!("delivery future of {} canceled", r.key),
        }
    }
}

/// `n` records with fresh keys and incompressible 1 KiB values: enough of
/// them pushes everything written before out of the active segment.
fn padding(tag: &str, n: usize, rng: &mut Rng) -> Vec<Rec> {
    (0..n)
        .map(|i| Rec {
            key: format!("pad-{tag}-{i}"),
            value: Some(rng.bytes(1024)),
        })
        .collect()
}

/// Consumes the partition from the beginning up to the high watermark
/// (assign(), no group commits); returns (offset, record) in read order.
fn consume_all(broker: &WeirProcess, topic: &str) -> Vec<(i64, Rec)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", "weir-compaction-check")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    let (_, high) = consumer
        .fetch_watermarks(topic, 0, TIMEOUT)
        .unwrap_or_else(|e| panic!("watermarks: {e}\n{}", broker.stderr_tail()));
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .expect("tpl");
    consumer.assign(&tpl).expect("assign");
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut out = Vec::new();
    let mut last = -1;
    while last < high - 1 {
        assert!(
            Instant::now() < deadline,
            "read {} records up to offset {last} of {high} before the deadline\n--- weir stderr (tail) ---\n{}",
            out.len(),
            broker.stderr_tail()
        );
        let Some(msg) = consumer.poll(Duration::from_millis(500)) else {
            continue;
        };
        let msg = msg.unwrap_or_else(|e| panic!("consumer error after offset {last}: {e}"));
        let key = String::from_utf8(msg.key().expect("every record has a key").to_vec())
            .expect("utf8 key");
        last = msg.offset();
        out.push((
            last,
            Rec {
                key,
                value: msg.payload().map(<[u8]>::to_vec),
            },
        ));
    }
    out
}

/// Every record read is the one produced at that offset, offsets strictly
/// increase, and each key's latest record is there (tombstones: as asked).
fn check_read(read: &[(i64, Rec)], model: &Model, tombstones: Tombstones) {
    let mut prev = -1;
    for (off, rec) in read {
        assert!(*off > prev, "offset {off} read after {prev}");
        prev = *off;
        assert_eq!(
            model.by_offset.get(off),
            Some(rec),
            "record at offset {off} differs from the one produced there"
        );
    }
    let read_offsets: std::collections::HashSet<i64> = read.iter().map(|(o, _)| *o).collect();
    for (key, off) in &model.latest {
        let is_tombstone = model.by_offset[off].value.is_none();
        let present = read_offsets.contains(off);
        match (is_tombstone, tombstones) {
            (false, _) => assert!(present, "key {key}: latest value (offset {off}) is missing"),
            (true, Tombstones::Present) => {
                assert!(
                    present,
                    "key {key}: tombstone at {off} gone before its horizon"
                )
            }
            (true, Tombstones::Gone) => {
                assert!(
                    !present,
                    "key {key}: tombstone at {off} still there after its horizon"
                )
            }
            (true, Tombstones::Either) => {}
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Tombstones {
    Present,
    Gone,
    Either,
}

/// Records in the partition's `.log` files (batch header counts), or
/// `None` while a file is in flux (a swap, an append in progress) or a
/// cleaning has leftovers (`.cleaned` / `.swap`).
fn records_on_disk(data_dir: &Path, topic: &str) -> Option<i64> {
    let dir = data_dir.join(format!("{topic}-0"));
    let busy = std::fs::read_dir(&dir)
        .ok()?
        .filter_map(Result::ok)
        .any(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.ends_with(".cleaned") || n.ends_with(".swap")
        });
    if busy {
        return None;
    }
    let batches = stored_batches(data_dir, topic, 0).ok()?;
    Some(batches.iter().map(|b| i64::from(b.record_count)).sum())
}

/// Waits (bounded) until the `.log` files hold exactly `want` records, seen
/// twice in a row with no cleaning leftovers in between.
fn wait_for_records_on_disk(broker: &WeirProcess, topic: &str, want: i64, what: &str) {
    let started = Instant::now();
    let mut seen = None;
    let mut hits = 0;
    while hits < 2 {
        assert!(
            started.elapsed() < CLEAN_WAIT,
            "{what}: the log still holds {seen:?} records, expected {want}, after {CLEAN_WAIT:?}\n--- weir stderr (tail) ---\n{}",
            broker.stderr_tail()
        );
        std::thread::sleep(Duration::from_millis(250));
        seen = records_on_disk(broker.data_dir(), topic);
        hits = if seen == Some(want) { hits + 1 } else { 0 };
    }
    eprintln!(
        "{what}: {want} records on disk after {:.1?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_keeps_each_keys_latest_record_and_drops_tombstones_after_the_horizon() {
    let n = env_count("WEIR_COMPAT_COMPACTION_RECORDS", 200_000);
    let keys = env_count("WEIR_COMPAT_COMPACTION_KEYS", 10_000) as u64;
    let delete_retention_ms = 15_000u64;
    let broker = start(&[
        "--set",
        "log.cleaner.backoff.ms=100",
        "--set",
        "log.retention.check.interval.ms=1000",
    ]);
    let topic = "compacted";
    let hold = [
        ("cleanup.policy", "compact"),
        ("segment.bytes", "262144"),
        ("min.cleanable.dirty.ratio", "0.01"),
        ("delete.retention.ms", "15000"),
        ("file.delete.delay.ms", "1000"),
        // Nothing is cleanable while the data is written, so every
        // tombstone's horizon is set by the cleanings after the writes.
        ("min.compaction.lag.ms", "3600000"),
    ];
    create_topic(&broker, topic, &hold).await;

    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let recs: Vec<Rec> = (0..n)
        .map(|i| {
            let k = rng.next() % keys;
            let tombstone = rng.next().is_multiple_of(10);
            let value = (!tombstone).then(|| {
                let mut v = format!("value-{i}-of-key-{k}-").into_bytes();
                v.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, 8 + i % 64));
                v
            });
            Rec {
                key: format!("key-{k}"),
                value,
            }
        })
        .collect();
    let tombstones_written = recs.iter().filter(|r| r.value.is_none()).count();
    let mut model = Model::default();
    let p = producer(&broker, "lz4");
    let started = Instant::now();
    produce(&broker, &p, topic, recs, &mut model).await;
    produce(&broker, &p, topic, padding("a", 600, &mut rng), &mut model).await;
    eprintln!(
        "produced {} records ({tombstones_written} tombstones, {} keys) in {:.1?}",
        model.by_offset.len(),
        model.latest.len(),
        started.elapsed()
    );
    // Nothing was cleaned while min.compaction.lag.ms held it back.
    assert_eq!(
        records_on_disk(broker.data_dir(), topic),
        Some(model.by_offset.len() as i64),
        "records were removed before they were cleanable"
    );

    // Live change: the lag goes to 0 and the cleaner takes the topic.
    let mut now_cleanable = hold.to_vec();
    now_cleanable.retain(|(k, _)| *k != "min.compaction.lag.ms");
    alter_topic(&broker, topic, &now_cleanable).await;
    let all_latest = model.latest_records(true);
    wait_for_records_on_disk(&broker, topic, all_latest.len() as i64, "first cleaning");
    let cleaned_at = Instant::now();
    let read = consume_all(&broker, topic);
    check_read(&read, &model, Tombstones::Present);
    assert_eq!(
        read.iter().map(|(o, _)| *o).collect::<Vec<_>>(),
        all_latest.keys().copied().collect::<Vec<_>>(),
        "after cleaning exactly each key's latest record remains"
    );
    let deleted_keys = all_latest.values().filter(|r| r.value.is_none()).count();
    assert!(
        deleted_keys > 0,
        "the data set must end some keys with a tombstone"
    );

    // Past every horizon (set at or before `cleaned_at`), new dirty data
    // makes the cleaner run again, and the tombstones go.
    let wait =
        Duration::from_millis(delete_retention_ms + 1_000).saturating_sub(cleaned_at.elapsed());
    tokio::time::sleep(wait).await;
    produce(&broker, &p, topic, padding("b", 600, &mut rng), &mut model).await;
    let live = model.latest_records(false);
    wait_for_records_on_disk(
        &broker,
        topic,
        live.len() as i64,
        "cleaning after the horizon",
    );
    let read = consume_all(&broker, topic);
    check_read(&read, &model, Tombstones::Gone);
    assert_eq!(
        read.iter().map(|(o, _)| *o).collect::<Vec<_>>(),
        live.keys().copied().collect::<Vec<_>>(),
        "after the horizon exactly each live key's latest record remains"
    );
}

/// Files of a cleaning in progress in the partition directory.
fn cleaning_files(data_dir: &Path, topic: &str) -> Vec<String> {
    let dir = data_dir.join(format!("{topic}-0"));
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    n.ends_with(".cleaned") || n.ends_with(".swap") || n.ends_with(".deleted")
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_throttled_cleanings_loses_no_latest_value() {
    let mut broker = start(&[
        "--set",
        "log.cleaner.backoff.ms=100",
        // Two seconds per MB read or written: a cleaning of this log
        // (0.6 to 3.5 MB, read twice, partly rewritten) takes seconds, so
        // the kills below land inside one.
        "--set",
        "log.cleaner.io.max.bytes.per.second=500000",
    ]);
    let topic = "killed";
    create_topic(
        &broker,
        topic,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "131072"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    )
    .await;
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let mut model = Model::default();
    // Delays after each round's writes before the kill, in ms.
    // When to kill after each round's writes: after a delay in ms, or
    // (`None`) as soon as a `.cleaned` / `.swap` file shows up (polled
    // every millisecond for up to 20 s), to land inside a swap.
    let delays = [
        Some(200u64),
        Some(700),
        Some(1_300),
        Some(2_100),
        Some(3_000),
        None,
    ];
    let mut during = 0;
    for (round, delay) in delays.iter().enumerate() {
        let recs: Vec<Rec> = (0..4_000)
            .map(|i| {
                let k = rng.next() % 1_000;
                let tombstone = rng.next().is_multiple_of(10);
                Rec {
                    key: format!("key-{k}"),
                    value: (!tombstone).then(|| {
                        let mut v = format!("r{round}-{i}-").into_bytes();
                        v.extend(rng.bytes(64));
                        v
                    }),
                }
            })
            .collect();
        let p = producer(&broker, "none");
        produce(&broker, &p, topic, recs, &mut model).await;
        produce(
            &broker,
            &p,
            topic,
            padding(&round.to_string(), 150, &mut rng),
            &mut model,
        )
        .await;
        drop(p);
        let waited = Instant::now();
        let files = match delay {
            Some(ms) => {
                tokio::time::sleep(Duration::from_millis(*ms)).await;
                cleaning_files(broker.data_dir(), topic)
            }
            None => loop {
                let files = cleaning_files(broker.data_dir(), topic);
                let swapping = files
                    .iter()
                    .any(|f| f.ends_with(".cleaned") || f.ends_with(".swap"));
                if swapping || waited.elapsed() > Duration::from_secs(20) {
                    break files;
                }
                std::thread::sleep(Duration::from_millis(1));
            },
        };
        let waited = waited.elapsed();
        let swapping = files
            .iter()
            .any(|f| f.ends_with(".cleaned") || f.ends_with(".swap"));
        if swapping {
            during += 1;
        }
        // The round that waits for the cleaning files must kill inside a
        // cleaning, or this test would not test what its name says.
        assert!(
            delay.is_some() || swapping,
            "round {round}: no .cleaned/.swap file within 20 s; files: {files:?}"
        );
        broker
            .kill_hard()
            .unwrap_or_else(|e| panic!("SIGKILL of the broker: {e}"));
        // Cleanings this broker process finished before the kill.
        let finished = broker.stderr_tail().matches("cleaned log").count();
        eprintln!(
            "round {round}: SIGKILL after {waited:.1?}, {finished} cleaning(s) finished by this process; cleaning files then: {files:?}"
        );
        broker
            .restart()
            .unwrap_or_else(|e| panic!("weir did not start again after SIGKILL: {e}"));
        // Right after recovery: duplicates may remain, nothing else.
        let read = consume_all(&broker, topic);
        check_read(&read, &model, Tombstones::Either);
    }
    eprintln!(
        "{during} of {} kills hit a cleaning's .cleaned/.swap files",
        delays.len()
    );
    assert!(during >= 1, "no kill landed inside a cleaning");
    // Left alone, the cleaner finishes: exactly each key's latest record
    // (tombstones stay for delete.retention.ms, 24 h by default).
    let all_latest = model.latest_records(true);
    wait_for_records_on_disk(
        &broker,
        topic,
        all_latest.len() as i64,
        "cleaning after the kills",
    );
    let read = consume_all(&broker, topic);
    check_read(&read, &model, Tombstones::Present);
    assert_eq!(
        read.iter().map(|(o, _)| *o).collect::<Vec<_>>(),
        all_latest.keys().copied().collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn low_traffic_topic_rolls_on_segment_ms_and_gets_cleaned() {
    let broker = start(&["--set", "log.cleaner.backoff.ms=100"]);
    let topic = "quiet";
    // Default min.cleanable.dirty.ratio: a never-cleaned log is all dirty.
    create_topic(
        &broker,
        topic,
        &[("cleanup.policy", "compact"), ("segment.ms", "2000")],
    )
    .await;
    let p = producer(&broker, "none");
    let mut model = Model::default();
    for round in 0..4 {
        let recs = (0..3)
            .map(|k| Rec {
                key: format!("key-{k}"),
                value: Some(format!("round-{round}").into_bytes()),
            })
            .collect();
        produce(&broker, &p, topic, recs, &mut model).await;
    }
    assert_eq!(records_on_disk(broker.data_dir(), topic), Some(12));
    // No more writes: the broker's tick rolls the segment once segment.ms
    // has passed, the rolled segment is dirty and gets cleaned.
    wait_for_records_on_disk(&broker, topic, 3, "quiet topic cleaned");
    let read = consume_all(&broker, topic);
    check_read(&read, &model, Tombstones::Present);
    let values: Vec<(String, Option<Vec<u8>>)> =
        read.into_iter().map(|(_, r)| (r.key, r.value)).collect();
    assert_eq!(
        values,
        (0..3)
            .map(|k| (format!("key-{k}"), Some(b"round-3".to_vec())))
            .collect::<Vec<_>>()
    );
}
