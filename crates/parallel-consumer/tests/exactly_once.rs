//! Exactly-once mode (consume-transform-produce) against weir: outputs and
//! input offsets commit in one transaction, an aborted transaction's
//! records run again, a second producer with the same `transactional.id`
//! stops the first, and (`exactly_once_e2e.rs`) separate consumer
//! processes killed with SIGKILL in the middle of a transaction leave every
//! input exactly once in the output.

use crate::common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::TestBroker;
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use weir_parallel_consumer::driver::{
    ConsumerEvent, DriverError, ExactlyOnceConfig, ParallelConsumer, TxnEvent, TxnObserver,
};
use weir_parallel_consumer::exactly_once::OutputRecord;
use weir_parallel_consumer::record::Record;
use weir_parallel_consumer::scheduler::Ordering;

const READ_WAIT: Duration = Duration::from_secs(60);

/// One record read back: (partition, offset, key, payload).
pub type Read = (i32, i64, Option<String>, String);

/// Every record of `topic` (partitions `0..partitions`) a consumer at
/// `isolation` reads from the beginning up to the end it sees (for
/// read_committed, the last stable offset). Ends when every partition
/// reported end of partition after its last record.
pub fn read_all(bootstrap: &str, topic: &str, partitions: i32, isolation: &str) -> Vec<Read> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", common::unique("reader"))
        .set("isolation.level", isolation)
        .set("enable.partition.eof", "true")
        .set("enable.auto.commit", "false")
        .create()
        .expect("reader");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .expect("tpl");
    }
    c.assign(&tpl).expect("assign");
    let mut at_end: HashSet<i32> = HashSet::new();
    let mut out = Vec::new();
    let deadline = Instant::now() + READ_WAIT;
    while at_end.len() < partitions as usize {
        assert!(
            Instant::now() < deadline,
            "reading {topic} ({isolation}): only partitions {at_end:?} reached their end"
        );
        match c.poll(Duration::from_millis(200)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            Some(Err(e)) => panic!("reading {topic}: {e}"),
            Some(Ok(m)) => {
                at_end.remove(&m.partition());
                let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8_lossy(b).into_owned());
                out.push((
                    m.partition(),
                    m.offset(),
                    text(m.key()),
                    text(m.payload()).unwrap_or_default(),
                ));
            }
        }
    }
    out
}

/// How often each payload occurs in `records`.
pub fn counts(records: &[Read]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for (_, _, _, payload) in records {
        *m.entry(payload.clone()).or_insert(0) += 1;
    }
    m
}

/// Payloads that do not occur exactly once (missing: 0; duplicated: 2+),
/// at most 20 of them.
pub fn not_exactly_once(want: &[String], got: &[Read]) -> Vec<(String, usize)> {
    let seen = counts(got);
    let mut wrong: Vec<(String, usize)> = want
        .iter()
        .map(|w| (w.clone(), seen.get(w).copied().unwrap_or(0)))
        .filter(|(_, n)| *n != 1)
        .collect();
    let wanted: HashSet<&String> = want.iter().collect();
    wrong.extend(
        seen.iter()
            .filter(|(p, _)| !wanted.contains(p))
            .map(|(p, n)| (p.clone(), *n)),
    );
    wrong.truncate(20);
    wrong
}

/// Keyed input `KEY/SEQ` (SEQ: the key's sequence number) over
/// `partitions`, `per_partition` records each, `keys` keys per partition;
/// keys are partition-local so every key's records sit in one partition in
/// sequence order. Returns every payload.
pub fn produce_keyed(
    b: &str,
    topic: &str,
    partitions: i32,
    per_partition: usize,
    keys: usize,
) -> Vec<String> {
    let mut all = Vec::new();
    for p in 0..partitions {
        let mut seq: HashMap<String, usize> = HashMap::new();
        let records: Vec<(String, String)> = (0..per_partition)
            .map(|i| {
                let key = format!("p{p}k{}", i % keys);
                let n = seq.entry(key.clone()).or_insert(0);
                let payload = format!("{key}/{n}");
                *n += 1;
                (key, payload)
            })
            .collect();
        let refs: Vec<(Option<&str>, &str)> = records
            .iter()
            .map(|(k, v)| (Some(k.as_str()), v.as_str()))
            .collect();
        common::produce(b, topic, p, &refs);
        all.extend(records.into_iter().map(|(_, v)| v));
    }
    all
}

/// Every key's sequence numbers in the order the output holds them (one
/// output partition per key) are 0, 1, 2, …
pub fn assert_key_order(records: &[Read]) {
    let mut next: HashMap<String, u64> = HashMap::new();
    let mut sorted = records.to_vec();
    sorted.sort_by_key(|(p, o, _, _)| (*p, *o));
    for (p, o, _, payload) in &sorted {
        let (key, seq) = payload.split_once('/').expect("KEY/SEQ payload");
        let seq: u64 = seq.parse().expect("sequence number");
        let want = next.entry(key.to_string()).or_insert(0);
        assert_eq!(
            seq, *want,
            "key {key}: output {p}-{o} carries sequence {seq}, expected {want}"
        );
        *want += 1;
    }
}

fn observer(events: Arc<Mutex<Vec<TxnEvent>>>) -> TxnObserver {
    Arc::new(move |e: &TxnEvent| events.lock().unwrap().push(e.clone()))
}

fn transform(output: String) -> impl Fn(Record) -> common::OutputFuture + Send + Sync + 'static {
    move |r: Record| {
        let output = output.clone();
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(r.offset as u64 % 3)).await;
            let mut out = OutputRecord::to(output).payload(r.payload.clone().unwrap_or_default());
            if let Some(k) = &r.key {
                out = out.key(k.clone());
            }
            Ok(vec![out])
        })
    }
}

fn broker() -> TestBroker {
    TestBroker::embedded(&[("group.initial.rebalance.delay.ms", "0")])
}

#[test]
fn outputs_and_offsets_commit_in_one_transaction() {
    let broker = broker();
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (input, output, group) = (
        common::unique("eos-in"),
        common::unique("eos-out"),
        common::unique("eos-g"),
    );
    broker.create_topic(&rt, &input, 3);
    broker.create_topic(&rt, &output, 2);
    let want = produce_keyed(b, &input, 3, 100, 5);
    let events = Arc::new(Mutex::new(Vec::new()));
    let mut eos = ExactlyOnceConfig::new(common::unique("txn"));
    eos.observer = Some(observer(events.clone()));
    let pc = ParallelConsumer::start_exactly_once(
        common::client(b, &group),
        &[input.as_str()],
        common::config(Ordering::Key, 16),
        eos,
        rt.handle().clone(),
        transform(output.clone()),
    )
    .expect("start");
    common::wait_until("every input offset committed", || {
        (0..3).all(|p| common::committed(b, &group, &input, p).is_some_and(|(o, _)| o == 100))
    });
    for p in 0..3 {
        let (_, metadata) = common::committed(b, &group, &input, p).expect("committed");
        assert_eq!(metadata, "", "exactly-once commits carry no completed set");
    }
    let report = pc.shutdown_blocking().expect("shutdown");
    assert_eq!(report.final_commit_error, None);
    let got = read_all(b, &output, 2, "read_committed");
    assert_eq!(not_exactly_once(&want, &got), vec![]);
    assert_key_order(&got);
    let events = events.lock().unwrap();
    let committed: usize = events
        .iter()
        .map(|e| match e {
            TxnEvent::Committed(s) => s.outputs,
            _ => 0,
        })
        .sum();
    assert_eq!(
        committed, 300,
        "every output went out in a committed transaction"
    );
    assert!(
        !events.iter().any(|e| matches!(e, TxnEvent::Aborted { .. })),
        "{events:?}"
    );
}

#[test]
fn an_aborted_transaction_runs_its_records_again() {
    let broker = broker();
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (input, output, group) = (
        common::unique("eos-abort-in"),
        common::unique("eos-abort-out"),
        common::unique("eos-abort-g"),
    );
    broker.create_topic(&rt, &input, 1);
    broker.create_topic(&rt, &output, 1);
    let want = produce_keyed(b, &input, 1, 20, 5);
    let events = Arc::new(Mutex::new(Vec::new()));
    let mut eos = ExactlyOnceConfig::new(common::unique("txn"));
    eos.observer = Some(observer(events.clone()));
    let calls: Arc<Mutex<HashMap<i64, usize>>> = Arc::default();
    // The first run of record 5 writes to a partition the output topic does
    // not have: its transaction cannot commit.
    let poisoned = Arc::new(AtomicBool::new(true));
    let handler = {
        let (calls, poisoned, output) = (calls.clone(), poisoned.clone(), output.clone());
        move |r: Record| {
            *calls.lock().unwrap().entry(r.offset).or_insert(0) += 1;
            let mut out = OutputRecord::to(output.clone())
                .partition(0)
                .payload(r.payload.clone().unwrap_or_default());
            if r.offset == 5 && poisoned.swap(false, AtomicOrdering::SeqCst) {
                out = out.partition(99);
            }
            async move { Ok::<_, String>(vec![out]) }
        }
    };
    let pc = ParallelConsumer::start_exactly_once(
        common::client(b, &group),
        &[input.as_str()],
        common::config(Ordering::Partition, 4),
        eos,
        rt.handle().clone(),
        handler,
    )
    .expect("start");
    common::wait_until_or(
        "20 committed",
        || common::committed(b, &group, &input, 0).is_some_and(|(o, _)| o == 20),
        || format!("{:#?}", events.lock().unwrap()),
    );
    pc.shutdown_blocking().expect("shutdown");
    let events = events.lock().unwrap().clone();
    let aborted = events
        .iter()
        .find_map(|e| match e {
            TxnEvent::Aborted { summary, .. } => Some(summary.clone()),
            _ => None,
        })
        .expect("a transaction aborted");
    let (_, aborted_to) = aborted.offsets[0];
    assert!(aborted_to > 5, "the aborted transaction held record 5");
    let calls = calls.lock().unwrap();
    for o in 0..20 {
        let n = calls.get(&o).copied().unwrap_or(0);
        let committed_before = events.iter().any(
            |e| matches!(e, TxnEvent::Committed(s) if s.id < aborted.id && s.offsets[0].1 > o),
        );
        if committed_before {
            assert_eq!(n, 1, "record {o} was committed before the abort");
        } else if o < aborted_to {
            assert!(
                n >= 2,
                "record {o} of the aborted transaction ran {n} times"
            );
        }
    }
    let got = read_all(b, &output, 1, "read_committed");
    assert_eq!(not_exactly_once(&want, &got), vec![]);
    assert_key_order(&got);
}

#[test]
fn a_second_producer_with_the_same_transactional_id_stops_the_first() {
    let broker = broker();
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (input, output, group) = (
        common::unique("eos-fence-in"),
        common::unique("eos-fence-out"),
        common::unique("eos-fence-g"),
    );
    broker.create_topic(&rt, &input, 2);
    broker.create_topic(&rt, &output, 1);
    let txn_id = common::unique("txn");
    let mut want = produce_keyed(b, &input, 2, 10, 5);
    let first = ParallelConsumer::start_exactly_once(
        common::client(b, &group),
        &[input.as_str()],
        common::config(Ordering::Key, 4),
        ExactlyOnceConfig::new(txn_id.clone()),
        rt.handle().clone(),
        transform(output.clone()),
    )
    .expect("first");
    common::wait_until("the first instance committed", || {
        (0..2).all(|p| common::committed(b, &group, &input, p).is_some_and(|(o, _)| o == 10))
    });
    let mut first_events = first.events();
    let second = ParallelConsumer::start_exactly_once(
        common::client(b, &group),
        &[input.as_str()],
        common::config(Ordering::Key, 4),
        ExactlyOnceConfig::new(txn_id),
        rt.handle().clone(),
        transform(output.clone()),
    )
    .expect("second");
    // More work for both, whoever owns which partition: the first one's
    // next transaction (or its revoke's) finds it fenced.
    for p in 0..2 {
        let more: Vec<String> = (0..10).map(|i| format!("p{p}late{i}/0")).collect();
        let refs: Vec<(Option<&str>, &str)> = more.iter().map(|v| (None, v.as_str())).collect();
        common::produce(b, &input, p, &refs);
        want.extend(more);
    }
    common::wait_until("the fenced instance stopped", || !first.is_running());
    // The fatal error also came as the last event (any before it are
    // rebalance ones).
    let mut stopped = None;
    while let Ok(e) = first_events.try_recv() {
        if let ConsumerEvent::Stopped(error) = e {
            stopped = Some(error);
        }
    }
    assert!(
        matches!(stopped, Some(DriverError::ProducerFenced(_))),
        "{stopped:?}"
    );
    let err = first
        .shutdown_blocking()
        .expect_err("the first instance was fenced");
    assert!(matches!(err, DriverError::ProducerFenced(_)), "{err:?}");
    assert!(second.is_running());
    common::wait_until("the second instance committed everything", || {
        (0..2).all(|p| common::committed(b, &group, &input, p).is_some_and(|(o, _)| o == 20))
    });
    second.shutdown_blocking().expect("shutdown second");
    let got = read_all(b, &output, 1, "read_committed");
    assert_eq!(not_exactly_once(&want, &got), vec![]);
}

#[test]
fn waiting_outputs_over_their_byte_bound_start_a_transaction_early() {
    let broker = broker();
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (input, output, group) = (
        common::unique("eos-full-in"),
        common::unique("eos-full-out"),
        common::unique("eos-full-g"),
    );
    broker.create_topic(&rt, &input, 1);
    broker.create_topic(&rt, &output, 1);
    let want = produce_keyed(b, &input, 1, 50, 5);
    let events = Arc::new(Mutex::new(Vec::new()));
    let mut eos = ExactlyOnceConfig::new(common::unique("txn"));
    eos.observer = Some(observer(events.clone()));
    // An output is 10 or 11 bytes (key `p0kN`, payload `p0kN/M`): four
    // waiting records reach the bound and start a transaction; at most
    // three (33 bytes) wait for the interval.
    eos.max_pending_output_bytes = 40;
    let mut config = common::config(Ordering::Key, 4);
    config.commit_interval = Duration::from_secs(3600);
    let pc = ParallelConsumer::start_exactly_once(
        common::client(b, &group),
        &[input.as_str()],
        config,
        eos,
        rt.handle().clone(),
        transform(output.clone()),
    )
    .expect("start");
    common::wait_until_or(
        "47 or more committed long before the commit interval",
        || common::committed(b, &group, &input, 0).is_some_and(|(o, _)| o >= 47),
        || format!("{:#?}", events.lock().unwrap()),
    );
    let transactions = events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, TxnEvent::Committed(s) if s.outputs > 0))
        .count();
    assert!(
        transactions >= 2,
        "{transactions} transactions with outputs for 50 records"
    );
    // The rest goes with the shutdown's transaction.
    pc.shutdown_blocking().expect("shutdown");
    assert_eq!(
        common::committed(b, &group, &input, 0).map(|(o, _)| o),
        Some(50)
    );
    let got = read_all(b, &output, 1, "read_committed");
    assert_eq!(not_exactly_once(&want, &got), vec![]);
}

/// A second member joins while record 2 of every partition runs and 0, 1,
/// 3, 4 are done. With a one-hour commit interval only the revoke can
/// commit: one transaction with the offsets at 2 and the outputs of 0 and
/// 1 (3 and 4 are above the watermark: dropped, they run again).
#[test]
fn a_revoke_commits_the_completed_prefix_in_a_transaction() {
    let broker = broker();
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (input, output, group) = (
        common::unique("eos-revoke-in"),
        common::unique("eos-revoke-out"),
        common::unique("eos-revoke-g"),
    );
    broker.create_topic(&rt, &input, 2);
    broker.create_topic(&rt, &output, 1);
    let want = produce_keyed(b, &input, 2, 5, 5);
    let (open, gate) = tokio::sync::watch::channel(false);
    let gated = {
        let output = output.clone();
        move |r: Record| {
            let mut gate = gate.clone();
            let out =
                OutputRecord::to(output.clone()).payload(r.payload.clone().unwrap_or_default());
            async move {
                if r.offset == 2 {
                    gate.wait_for(|open| *open)
                        .await
                        .map_err(|e| e.to_string())?;
                }
                Ok::<_, String>(vec![out])
            }
        }
    };
    let first_events = Arc::new(Mutex::new(Vec::new()));
    let mut eos = ExactlyOnceConfig::new(common::unique("txn-first"));
    eos.observer = Some(observer(first_events.clone()));
    let mut slow = common::config(Ordering::Unordered, 8);
    slow.commit_interval = Duration::from_secs(3600);
    let first = ParallelConsumer::start_exactly_once(
        common::client(b, &group),
        &[input.as_str()],
        slow,
        eos,
        rt.handle().clone(),
        gated,
    )
    .expect("first");
    common::wait_until("0, 1, 3, 4 done and 2 running on both partitions", || {
        let s = first.stats();
        s.len() == 2
            && s.iter()
                .all(|p| p.position == 5 && p.effect_watermark == 2 && p.in_flight == 1)
    });
    assert!(
        first_events.lock().unwrap().is_empty(),
        "nothing committed yet"
    );
    let second = ParallelConsumer::start_exactly_once(
        common::client(b, &group),
        &[input.as_str()],
        common::config(Ordering::Unordered, 8),
        ExactlyOnceConfig::new(common::unique("txn-second")),
        rt.handle().clone(),
        transform(output.clone()),
    )
    .expect("second");
    let revoke_commit = {
        let events = first_events.clone();
        move || {
            events.lock().unwrap().iter().find_map(|e| match e {
                TxnEvent::Committed(s) => Some(s.clone()),
                _ => None,
            })
        }
    };
    common::wait_until_or(
        "the first member's revoke transaction",
        || revoke_commit().is_some(),
        || format!("{:#?}", first_events.lock().unwrap()),
    );
    let s = revoke_commit().expect("committed");
    let offsets: Vec<(i32, i64)> = s.offsets.iter().map(|(tp, o)| (tp.partition, *o)).collect();
    assert_eq!(offsets, vec![(0, 2), (1, 2)], "{s:?}");
    assert_eq!(
        s.outputs, 4,
        "the outputs of 0 and 1 of both partitions: {s:?}"
    );
    open.send(true).expect("open gate");
    common::wait_until(
        "the second member owns a partition and committed it",
        || second.stats().iter().any(|p| p.committed == Some(5)),
    );
    second.shutdown_blocking().expect("shutdown second");
    first.shutdown_blocking().expect("shutdown first");
    for p in 0..2 {
        assert_eq!(
            common::committed(b, &group, &input, p).map(|(o, _)| o),
            Some(5)
        );
    }
    let got = read_all(b, &output, 1, "read_committed");
    assert_eq!(not_exactly_once(&want, &got), vec![]);
}
