//! librdkafka `auto.offset.reset` against a real `weir serve`, for a group
//! with no committed offset and for one whose committed offsets expired
//! (`offsets.retention.minutes` = 1 after the group became empty):
//! `earliest` starts at the log start, `latest` at the log end (it reads
//! only records produced after it joined).

use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use weir_compat_tests::WeirProcess;

const TIMEOUT: Duration = Duration::from_secs(30);
/// Bound for a consumer to join and read its first record.
const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound for offsets to expire: retention 1 minute, checked every second.
const EXPIRY_TIMEOUT: Duration = Duration::from_secs(100);
/// Records produced before any consumer starts.
const EARLY: i64 = 10;

struct Fixture {
    broker: WeirProcess,
    rt: tokio::runtime::Runtime,
    producer: FutureProducer,
    topic: String,
}

impl Fixture {
    /// A broker and a one-partition topic holding `EARLY` records `early-<i>`.
    fn new(broker_args: &[&str], topic: &str) -> Self {
        let broker = WeirProcess::start_with_args(broker_args)
            .unwrap_or_else(|e| panic!("weir did not start: {e}"));
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", broker.bootstrap())
            .create()
            .expect("admin client");
        let opts = AdminOptions::new().operation_timeout(Some(TIMEOUT));
        let r = rt
            .block_on(admin.create_topics(
                &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
                &opts,
            ))
            .expect("create topics");
        assert!(r[0].is_ok(), "{r:?}");
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", broker.bootstrap())
            .set("acks", "all")
            .create()
            .expect("producer");
        let f = Fixture {
            broker,
            rt,
            producer,
            topic: topic.to_string(),
        };
        for i in 0..EARLY {
            let offset = f.produce(&format!("early-{i}"));
            assert_eq!(offset, i);
        }
        f
    }

    /// Produces one record and returns its offset.
    fn produce(&self, value: &str) -> i64 {
        let record = FutureRecord::<(), _>::to(&self.topic).payload(value);
        match self.rt.block_on(self.producer.send(record, TIMEOUT)) {
            Ok(delivery) => delivery.offset,
            Err((e, _)) => panic!("produce {value}: {e}\n{}", self.broker.stderr_tail()),
        }
    }

    fn consumer(&self, group: &str, reset: &str) -> BaseConsumer {
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", self.broker.bootstrap())
            .set("group.id", group)
            .set("auto.offset.reset", reset)
            .set("enable.auto.commit", "false")
            .set("session.timeout.ms", "6000")
            .set("heartbeat.interval.ms", "500")
            .create()
            .expect("consumer");
        c.subscribe(&[&self.topic]).expect("subscribe");
        c
    }

    /// The first record a new member of `group` reads: (offset, value).
    /// With `produce_late`, a record `late-<n>` is produced every poll round
    /// until one is read (a `latest` consumer reads only what comes after
    /// it joined).
    fn first_record(&self, group: &str, reset: &str, produce_late: bool) -> (i64, String) {
        let c = self.consumer(group, reset);
        let deadline = Instant::now() + READ_TIMEOUT;
        let mut late = 0;
        loop {
            assert!(
                Instant::now() < deadline,
                "{group} ({reset}) read nothing within {READ_TIMEOUT:?}\n{}",
                self.broker.stderr_tail()
            );
            if let Some(m) = c.poll(Duration::from_millis(200)) {
                let m = m.expect("consume");
                let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
                return (m.offset(), value);
            }
            if produce_late && c.assignment().is_ok_and(|a| a.count() > 0) {
                self.produce(&format!("late-{late}"));
                late += 1;
            }
        }
    }

    /// The group's committed offset for partition 0 (`None` if none).
    fn committed(&self, group: &str) -> Option<i64> {
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", self.broker.bootstrap())
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .expect("offset-fetch client");
        let mut list = TopicPartitionList::new();
        list.add_partition(&self.topic, 0);
        let answer = c.committed_offsets(list, TIMEOUT).expect("OffsetFetch");
        match answer.find_partition(&self.topic, 0).map(|e| e.offset()) {
            Some(Offset::Offset(o)) => Some(o),
            Some(Offset::Invalid) => None,
            other => panic!("unexpected committed offset {other:?}"),
        }
    }

    /// A member of `group` reads `count` records and commits the next
    /// offset, then closes (the group becomes empty).
    fn commit_after_reading(&self, group: &str, count: i64) {
        let c = self.consumer(group, "earliest");
        let deadline = Instant::now() + READ_TIMEOUT;
        let mut next = 0;
        while next < count {
            assert!(
                Instant::now() < deadline,
                "{group} read only {next} records\n{}",
                self.broker.stderr_tail()
            );
            if let Some(m) = c.poll(Duration::from_millis(200)) {
                let m = m.expect("consume");
                assert_eq!(m.offset(), next, "{group} reads in order from the start");
                next += 1;
            }
        }
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(&self.topic, 0, Offset::Offset(next))
            .expect("offset list");
        c.commit(&list, CommitMode::Sync).expect("commit");
        drop(c);
    }
}

fn assert_latest(f: &Fixture, group: &str) {
    let (offset, value) = f.first_record(group, "latest", true);
    assert!(
        value.starts_with("late-") && offset >= EARLY,
        "{group} with latest read {value} at {offset}: it must start at the log end"
    );
}

fn assert_earliest(f: &Fixture, group: &str) {
    let (offset, value) = f.first_record(group, "earliest", false);
    assert_eq!(
        (offset, value.as_str()),
        (0, "early-0"),
        "{group} with earliest starts at the log start"
    );
}

#[test]
fn rdkafka_auto_offset_reset_without_commit() {
    let f = Fixture::new(&[], "rk-reset");
    assert_eq!(f.committed("rk-reset-earliest"), None);
    assert_earliest(&f, "rk-reset-earliest");
    assert_eq!(f.committed("rk-reset-latest"), None);
    assert_latest(&f, "rk-reset-latest");
}

#[test]
fn rdkafka_auto_offset_reset_after_offsets_expire() {
    let f = Fixture::new(
        &[
            "--set",
            "offsets.retention.minutes=1",
            "--set",
            "offsets.retention.check.interval.ms=1000",
        ],
        "rk-expiry",
    );
    let groups = ["rk-expiry-earliest", "rk-expiry-latest"];
    for g in groups {
        f.commit_after_reading(g, 5);
        assert_eq!(f.committed(g), Some(5), "{g} committed");
    }
    // Both groups are empty now; a minute later their offsets expire.
    let deadline = Instant::now() + EXPIRY_TIMEOUT;
    for g in groups {
        while f.committed(g).is_some() {
            assert!(
                Instant::now() < deadline,
                "{g}: offsets still committed after {EXPIRY_TIMEOUT:?}\n{}",
                f.broker.stderr_tail()
            );
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    // Not offset 5 (the expired commit): the reset policy applies again.
    assert_earliest(&f, groups[0]);
    assert_latest(&f, groups[1]);
}
