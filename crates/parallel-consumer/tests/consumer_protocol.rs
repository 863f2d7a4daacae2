//! Two parallel consumers with librdkafka's KIP-848 consumer protocol
//! (`group.protocol=consumer`) sharing a topic on an embedded weir broker:
//! the second one joins, takes half the partitions, and shuts down; its
//! partitions go back to the first. Revocations are incremental: the
//! first consumer's partitions that stay with it are never revoked (their
//! per-partition assignment generation in `stats()` never changes) when
//! the other joins or leaves. Every record is processed at least once and
//! the final committed offsets are the log end offsets (nothing lost,
//! nothing committed past an unprocessed record).
//!
//! `WEIR_PC_BOOTSTRAP` is not used: the test needs a broker with the
//! consumer protocol and short heartbeat intervals.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::{Arc, Mutex};

use common::TestBroker;
use rdkafka::ClientConfig;
use weir_parallel_consumer::driver::ParallelConsumer;
use weir_parallel_consumer::record::Record;
use weir_parallel_consumer::scheduler::Ordering;
use weir_protocol::messages::ApiKey;

const PARTITIONS: i32 = 4;

/// (partition, offset) → how many times a handler finished it.
type Processed = Arc<Mutex<BTreeMap<(i32, i64), usize>>>;

fn member(bootstrap: &str, group: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    // Only settings librdkafka accepts with the consumer protocol: the
    // session and heartbeat timings and the assignor are the broker's.
    c.set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("group.protocol", "consumer")
        .set("auto.offset.reset", "earliest");
    c
}

fn start(
    bootstrap: &str,
    group: &str,
    topic: &str,
    rt: &tokio::runtime::Runtime,
    processed: &Processed,
) -> ParallelConsumer {
    let processed = processed.clone();
    ParallelConsumer::start(
        member(bootstrap, group),
        &[topic],
        common::config(Ordering::Unordered, 8),
        rt.handle().clone(),
        move |r: Record| {
            let processed = processed.clone();
            async move {
                *processed
                    .lock()
                    .unwrap()
                    .entry((r.partition, r.offset))
                    .or_default() += 1;
                Ok::<(), String>(())
            }
        },
    )
    .expect("start")
}

/// Partition → assignment generation, of the partitions `pc` owns.
fn generations(pc: &ParallelConsumer, topic: &str) -> BTreeMap<i32, u64> {
    pc.stats()
        .into_iter()
        .filter(|s| s.topic == topic)
        .map(|s| (s.partition, s.generation))
        .collect()
}

fn produce_batch(bootstrap: &str, topic: &str, label: &str, per_partition: usize) {
    for p in 0..PARTITIONS {
        let values: Vec<String> = (0..per_partition)
            .map(|i| format!("{label}-{p}-{i}"))
            .collect();
        let records: Vec<(Option<&str>, &str)> =
            values.iter().map(|v| (None, v.as_str())).collect();
        common::produce(bootstrap, topic, p, &records);
    }
}

/// Requests of `api` the embedded broker has answered.
fn requests(broker: &TestBroker, api: ApiKey) -> u64 {
    let TestBroker::Embedded(e) = broker else {
        unreachable!("an embedded broker")
    };
    e.broker()
        .metrics
        .api(i16::from(api))
        .map_or(0, |a| a.requests.load(AtomicOrdering::Relaxed))
}

/// Every offset below `end` of every partition processed at least once.
fn all_processed(processed: &Processed, end: i64) -> bool {
    let done = processed.lock().unwrap();
    (0..PARTITIONS).all(|p| (0..end).all(|o| done.contains_key(&(p, o))))
}

#[test]
fn two_consumers_share_a_topic_and_revocation_is_incremental() {
    let broker = TestBroker::embedded(&[
        ("group.consumer.min.heartbeat.interval.ms", "100"),
        ("group.consumer.heartbeat.interval.ms", "300"),
        ("group.consumer.min.session.timeout.ms", "1000"),
        ("group.consumer.session.timeout.ms", "6000"),
    ]);
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (topic, group) = (common::unique("cp"), common::unique("gcp"));
    broker.create_topic(&rt, &topic, PARTITIONS);
    let processed = Processed::default();
    let per_batch = 20;
    produce_batch(b, &topic, "first", per_batch);

    let first = start(b, &group, &topic, &rt, &processed);
    common::wait_until("the first consumer owns every partition", || {
        generations(&first, &topic).len() == PARTITIONS as usize
    });
    common::wait_until("the first batch processed", || {
        all_processed(&processed, per_batch as i64)
    });
    let alone = generations(&first, &topic);

    // The second joins: the first gives up two partitions and keeps two
    // without revoking them.
    let second = start(b, &group, &topic, &rt, &processed);
    let diagnose = || {
        format!(
            "first: {:?}\nsecond: {:?}",
            generations(&first, &topic),
            generations(&second, &topic)
        )
    };
    common::wait_until_or(
        "the partitions split two and two",
        || {
            let (f, s) = (generations(&first, &topic), generations(&second, &topic));
            let owners: BTreeSet<i32> = f.keys().chain(s.keys()).copied().collect();
            f.len() == 2 && s.len() == 2 && owners.len() == PARTITIONS as usize
        },
        diagnose,
    );
    let kept = generations(&first, &topic);
    for (p, g) in &kept {
        assert_eq!(
            alone.get(p),
            Some(g),
            "partition {p} was revoked and assigned again when the second consumer joined\n{}",
            diagnose()
        );
    }
    produce_batch(b, &topic, "second", per_batch);
    common::wait_until_or(
        "the second batch processed",
        || all_processed(&processed, 2 * per_batch as i64),
        diagnose,
    );

    // The second shuts down (commits and leaves): its partitions go back
    // to the first, whose own two are not revoked.
    let report = second.shutdown_blocking().expect("shutdown second");
    assert_eq!(report.abandoned, 0, "{report:?}");
    common::wait_until_or(
        "the first consumer owns every partition again",
        || generations(&first, &topic).len() == PARTITIONS as usize,
        || format!("first: {:?}", generations(&first, &topic)),
    );
    let after = generations(&first, &topic);
    for (p, g) in &kept {
        assert_eq!(
            after.get(p),
            Some(g),
            "partition {p} was revoked when the second consumer left: {after:?}"
        );
    }
    produce_batch(b, &topic, "third", per_batch);
    let end = 3 * per_batch as i64;
    common::wait_until("the third batch processed", || {
        all_processed(&processed, end)
    });
    first.shutdown_blocking().expect("shutdown first");

    // Every record committed: the group's offsets are the log end offsets.
    for p in 0..PARTITIONS {
        let committed = common::committed(b, &group, &topic, p).map(|(o, _)| o);
        assert_eq!(committed, Some(end), "partition {p}");
    }
    // They spoke the consumer protocol, never the classic one.
    assert!(requests(&broker, ApiKey::ConsumerGroupHeartbeat) > 0);
    assert_eq!(requests(&broker, ApiKey::JoinGroup), 0);
    let done = processed.lock().unwrap();
    assert_eq!(done.len(), (PARTITIONS as usize) * 3 * per_batch);
    assert!(
        done.keys()
            .all(|(p, o)| (0..PARTITIONS).contains(p) && (0..end).contains(o)),
        "a record that was never produced: {done:?}"
    );
}
