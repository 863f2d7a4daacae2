//! Transactions with librdkafka (the `rdkafka` crate) against a real
//! `weir serve`: committed records are visible to read_committed consumers
//! and aborted ones are not (read_uncommitted consumers see both, control
//! batches skipped); an open transaction holds read_committed consumers at
//! the last stable offset; a second producer with the same
//! `transactional.id` fences the first and aborts its open transaction;
//! a consume-transform-produce loop with `send_offsets_to_transaction`
//! processes every input record exactly once across a crash of the
//! processor and a kill -9 of the broker; a transaction open when the
//! broker is killed with -9 is aborted on its timeout by the restarted
//! coordinator, and none of its records reaches a read_committed consumer.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use weir_client::Connection;
use weir_compat_tests::WeirProcess;
use weir_protocol::messages::DescribeTransactionsRequest;
use weir_protocol::messages::describe_transactions_response::TransactionState;

use crate::txn_marker_recovery::{fetch_read_committed, read_committed};

const TIMEOUT: Duration = Duration::from_secs(30);

fn start_broker() -> WeirProcess {
    WeirProcess::start().unwrap_or_else(|e| panic!("weir did not start: {e}"))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn create_topic(bootstrap: &str, topic: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client");
    let opts = AdminOptions::new()
        .operation_timeout(Some(TIMEOUT))
        .request_timeout(Some(TIMEOUT));
    let results = runtime()
        .block_on(admin.create_topics(
            [&NewTopic::new(
                topic,
                partitions,
                TopicReplication::Fixed(1),
            )],
            &opts,
        ))
        .expect("CreateTopics");
    if let Err((name, code)) = &results[0] {
        panic!("creating {name}: {code:?}");
    }
}

/// A transactional producer, its transactions initialised.
fn transactional(bootstrap: &str, id: &str) -> BaseProducer {
    transactional_with_timeout(bootstrap, id, "60000")
}

/// [`transactional`] with `transaction.timeout.ms` (and
/// `message.timeout.ms`, which librdkafka requires to be no longer).
fn transactional_with_timeout(bootstrap: &str, id: &str, timeout_ms: &str) -> BaseProducer {
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("transactional.id", id)
        .set("transaction.timeout.ms", timeout_ms)
        .set("message.timeout.ms", timeout_ms)
        .set("linger.ms", "5")
        .create()
        .expect("transactional producer");
    p.init_transactions(TIMEOUT)
        .unwrap_or_else(|e| panic!("init_transactions {id}: {e}"));
    p
}

/// Sends `values` to partition 0 of `topic` and waits until they are all
/// written (not committed: that is the transaction's business).
fn send_all(p: &BaseProducer, topic: &str, values: &[String]) {
    for v in values {
        p.send(BaseRecord::<(), String>::to(topic).partition(0).payload(v))
            .unwrap_or_else(|(e, _)| panic!("send {v}: {e}"));
    }
    p.flush(TIMEOUT).expect("flush");
}

fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

fn consumer(bootstrap: &str, isolation: &str, group: Option<&str>) -> BaseConsumer {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("group.id", group.unwrap_or("weir-txn-unused"))
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", isolation)
        .set("fetch.wait.max.ms", "100");
    c.create().expect("consumer")
}

/// Every record of partition 0 of `topic` a consumer at `isolation` reads
/// until it reaches `end` (an offset: the partition's high watermark or
/// last stable offset), as (offset, value).
fn read_until(bootstrap: &str, topic: &str, isolation: &str, want: usize) -> Vec<(i64, String)> {
    let c = consumer(bootstrap, isolation, None);
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + TIMEOUT;
    while out.len() < want && Instant::now() < deadline {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            out.push((
                m.offset(),
                String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
            ));
        }
    }
    out
}

/// Reads for `window` more after `want` records arrived, to see that no
/// more come (the deadline is what the test waits on; nothing else).
fn read_exactly(
    bootstrap: &str,
    topic: &str,
    isolation: &str,
    want: usize,
    window: Duration,
) -> Vec<String> {
    let c = consumer(bootstrap, isolation, None);
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + TIMEOUT;
    let mut quiet_until: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if quiet_until.is_some_and(|q| now >= q) || now >= deadline {
            return out;
        }
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            out.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
        }
        if out.len() >= want && quiet_until.is_none() {
            quiet_until = Some(Instant::now() + window);
        }
    }
}

#[test]
fn committed_records_are_read_committed_and_aborted_ones_are_not() {
    let broker = start_broker();
    let bootstrap = broker.bootstrap().to_string();
    let topic = "txn-visibility";
    create_topic(&bootstrap, topic, 1);
    let p = transactional(&bootstrap, "visibility");

    p.begin_transaction().unwrap();
    send_all(&p, topic, &values("first", 10));
    p.commit_transaction(TIMEOUT).expect("commit");

    p.begin_transaction().unwrap();
    send_all(&p, topic, &values("aborted", 10));
    p.abort_transaction(TIMEOUT).expect("abort");

    p.begin_transaction().unwrap();
    send_all(&p, topic, &values("second", 5));
    p.commit_transaction(TIMEOUT).expect("commit");

    let committed: Vec<String> = values("first", 10)
        .into_iter()
        .chain(values("second", 5))
        .collect();
    let read = read_exactly(
        &bootstrap,
        topic,
        "read_committed",
        committed.len(),
        Duration::from_secs(2),
    );
    assert_eq!(read, committed, "read_committed");

    // read_uncommitted: every data record in log order, aborted ones too;
    // the three markers take offsets but are never handed out.
    let all = read_until(&bootstrap, topic, "read_uncommitted", 25);
    let want: Vec<String> = values("first", 10)
        .into_iter()
        .chain(values("aborted", 10))
        .chain(values("second", 5))
        .collect();
    assert_eq!(
        all.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>(),
        want,
        "read_uncommitted"
    );
    // Offsets 10 and 21 are the commit and abort markers.
    assert_eq!(all[10].0, 11, "{all:?}");
    assert_eq!(all[20].0, 22, "{all:?}");
}

#[test]
fn an_open_transaction_holds_read_committed_consumers_at_the_last_stable_offset() {
    let broker = start_broker();
    let bootstrap = broker.bootstrap().to_string();
    let topic = "txn-lso";
    create_topic(&bootstrap, topic, 1);
    let p = transactional(&bootstrap, "lso");
    p.begin_transaction().unwrap();
    send_all(&p, topic, &values("before", 3));
    p.commit_transaction(TIMEOUT).unwrap();

    p.begin_transaction().unwrap();
    send_all(&p, topic, &values("open", 5));
    // The open transaction's records are written (read_uncommitted sees
    // them) but above the LSO.
    let uncommitted = read_until(&bootstrap, topic, "read_uncommitted", 8);
    assert_eq!(uncommitted.len(), 8, "{uncommitted:?}");
    let held = read_exactly(
        &bootstrap,
        topic,
        "read_committed",
        3,
        Duration::from_secs(2),
    );
    assert_eq!(held, values("before", 3));

    p.commit_transaction(TIMEOUT).unwrap();
    let all: Vec<String> = values("before", 3)
        .into_iter()
        .chain(values("open", 5))
        .collect();
    let read = read_exactly(
        &bootstrap,
        topic,
        "read_committed",
        all.len(),
        Duration::from_secs(1),
    );
    assert_eq!(read, all);
}

#[test]
fn a_second_producer_with_the_same_transactional_id_fences_the_first() {
    let broker = start_broker();
    let bootstrap = broker.bootstrap().to_string();
    let topic = "txn-fencing";
    create_topic(&bootstrap, topic, 1);
    let old = transactional(&bootstrap, "fenced");
    old.begin_transaction().unwrap();
    send_all(&old, topic, &values("zombie", 4));

    // The new instance's InitProducerId bumps the epoch and aborts the
    // old one's open transaction.
    let new = transactional(&bootstrap, "fenced");
    let err = old
        .commit_transaction(TIMEOUT)
        .expect_err("the fenced producer's commit must fail");
    assert!(
        matches!(&err, KafkaError::Transaction(e) if e.is_fatal()),
        "the fenced producer's error is fatal: {err:?}"
    );

    new.begin_transaction().unwrap();
    send_all(&new, topic, &values("live", 3));
    new.commit_transaction(TIMEOUT).unwrap();
    let read = read_exactly(
        &bootstrap,
        topic,
        "read_committed",
        3,
        Duration::from_secs(2),
    );
    assert_eq!(read, values("live", 3), "no zombie record is committed");
}

/// The consume-transform-produce loop: reads `input` in a group with
/// read_committed, writes `out-<value>` to `output` and commits the input
/// offsets in the same transaction, `batch` records per transaction. With
/// `crash_after` it stops in the middle of that transaction (after
/// sending, before committing) and drops everything, as a crashed
/// process would. Returns how many records it committed.
fn process(
    bootstrap: &str,
    input: &str,
    output: &str,
    batch: usize,
    crash_after: Option<usize>,
) -> usize {
    let group = "weir-txn-ctp";
    let c = consumer(bootstrap, "read_committed", Some(group));
    c.subscribe(&[input]).unwrap();
    let p = transactional(bootstrap, "ctp-processor");
    let mut done = 0;
    let mut idle_until = Instant::now() + Duration::from_secs(5);
    loop {
        p.begin_transaction().unwrap();
        let mut next: BTreeMap<i32, i64> = BTreeMap::new();
        let mut n = 0;
        while n < batch && Instant::now() < idle_until {
            let Some(m) = c.poll(Duration::from_millis(100)) else {
                continue;
            };
            let m = m.expect("consume");
            let v = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
            p.send(
                BaseRecord::<(), String>::to(output)
                    .partition(0)
                    .payload(&format!("out-{v}")),
            )
            .unwrap_or_else(|(e, _)| panic!("send: {e}"));
            next.insert(m.partition(), m.offset() + 1);
            n += 1;
            idle_until = Instant::now() + Duration::from_secs(5);
        }
        if n == 0 {
            p.abort_transaction(TIMEOUT).unwrap();
            return done;
        }
        if crash_after.is_some_and(|at| done + n >= at) {
            p.flush(TIMEOUT).unwrap();
            // Dropped with the transaction open: the next instance's
            // InitProducerId must abort it.
            return done;
        }
        let mut offsets = TopicPartitionList::new();
        for (partition, offset) in &next {
            offsets
                .add_partition_offset(input, *partition, Offset::Offset(*offset))
                .unwrap();
        }
        let meta = c.group_metadata().expect("group metadata");
        p.send_offsets_to_transaction(&offsets, &meta, TIMEOUT)
            .expect("send_offsets_to_transaction");
        p.commit_transaction(TIMEOUT).expect("commit");
        done += n;
    }
}

#[test]
fn consume_transform_produce_is_exactly_once_across_crashes() {
    let mut broker = start_broker();
    let bootstrap = broker.bootstrap().to_string();
    let (input, output) = ("ctp-in", "ctp-out");
    create_topic(&bootstrap, input, 1);
    create_topic(&bootstrap, output, 1);
    let total = 300;
    let plain: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    send_all(&plain, input, &values("in", total));

    // A processor crashes in the middle of a transaction.
    let first = process(&bootstrap, input, output, 25, Some(100));
    assert!(
        first > 0 && first < 100,
        "committed {first} before the crash"
    );
    // The broker is killed with -9 and comes back (coordinator state,
    // pending offsets and markers replayed).
    broker.kill_hard().expect("kill -9");
    broker.restart().expect("restart");
    let bootstrap = broker.bootstrap().to_string();
    let rest = process(&bootstrap, input, output, 25, None);
    assert_eq!(first + rest, total, "input records processed and committed");

    let want: Vec<String> = values("in", total)
        .into_iter()
        .map(|v| format!("out-{v}"))
        .collect();
    let read = read_exactly(
        &bootstrap,
        output,
        "read_committed",
        total,
        Duration::from_secs(2),
    );
    assert_eq!(read, want, "every input exactly once, in order");
    // The crashed transaction's records are in the log, aborted.
    let uncommitted = read_until(&bootstrap, output, "read_uncommitted", total + 1);
    assert!(
        uncommitted.len() > total,
        "the crashed transaction wrote records that read_committed skipped"
    );
}

/// `transaction.timeout.ms` of the transaction left open by the crash:
/// short, so the restarted coordinator's abort comes soon.
const OPEN_TXN_TIMEOUT_MS: &str = "4000";

/// kill -9 of the broker with a transaction open. The restarted
/// coordinator replays the transaction as Ongoing and aborts it once its
/// timeout has passed (its producer fenced); until then it holds
/// read_committed readers at its first record, afterwards its records are
/// listed as aborted. At no point does a read_committed Fetch hand out one
/// of them, and the transactional id serves a new producer afterwards.
#[test]
fn a_transaction_open_at_kill_9_of_the_broker_is_aborted_on_its_timeout() {
    // The coordinator looks for timed-out transactions every 200 ms.
    let mut broker = WeirProcess::start_with_args(&[
        "--set",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
    ])
    .unwrap_or_else(|e| panic!("weir did not start: {e}"));
    let bootstrap = broker.bootstrap().to_string();
    let (topic, id) = ("txn-open-at-crash", "open-at-crash");
    create_topic(&bootstrap, topic, 1);
    let p = transactional_with_timeout(&bootstrap, id, OPEN_TXN_TIMEOUT_MS);
    p.begin_transaction().unwrap();
    let open = values("open", 10);
    send_all(&p, topic, &open);
    let before = describe_txn(&bootstrap, id).expect("DescribeTransactions");
    assert_eq!(before.transaction_state, "Ongoing", "{before:?}");
    let held = fetch_read_committed(&bootstrap, topic).expect("Fetch");
    assert_eq!(
        (held.high_watermark, held.last_stable_offset),
        (10, 0),
        "the open transaction holds the last stable offset at its first record"
    );

    broker.kill_hard().expect("kill -9");
    drop(p);
    broker.restart().expect("start again on the same data");
    let bootstrap = broker.bootstrap().to_string();

    let deadline = Instant::now() + TIMEOUT;
    let aborted = loop {
        // Whenever a Fetch is answered, the records are either above the
        // last stable offset or listed as aborted.
        if let Ok(f) = fetch_read_committed(&bootstrap, topic) {
            let listed = f
                .aborted_transactions
                .iter()
                .flatten()
                .any(|a| (a.producer_id, a.first_offset) == (before.producer_id, 0));
            assert!(
                f.last_stable_offset <= 0 || listed,
                "undecided records below the last stable offset and not listed as aborted: {f:?}"
            );
        }
        match describe_txn(&bootstrap, id) {
            Ok(d) if d.transaction_state == "CompleteAbort" => break d,
            other => assert!(
                Instant::now() < deadline,
                "{id} not aborted within {TIMEOUT:?} of the restart: {other:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(aborted.producer_id, before.producer_id);
    assert!(
        aborted.producer_epoch > before.producer_epoch,
        "the timed-out producer is fenced: {aborted:?}"
    );

    let after = fetch_read_committed(&bootstrap, topic).expect("Fetch");
    assert_eq!(
        (after.high_watermark, after.last_stable_offset),
        (11, 11),
        "the ABORT marker is written and the last stable offset is the high watermark"
    );
    let listed: Vec<(i64, i64)> = after
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| (a.producer_id, a.first_offset))
        .collect();
    assert_eq!(listed, [(before.producer_id, 0)]);
    assert_eq!(
        read_committed(&bootstrap, topic),
        Vec::<String>::new(),
        "read_committed reads nothing of the aborted transaction"
    );
    let uncommitted = read_until(&bootstrap, topic, "read_uncommitted", open.len());
    assert_eq!(
        uncommitted.into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
        open,
        "read_uncommitted reads the aborted records"
    );

    let next = transactional(&bootstrap, id);
    next.begin_transaction().unwrap();
    send_all(&next, topic, &values("after", 3));
    next.commit_transaction(TIMEOUT).expect("commit");
    assert_eq!(read_committed(&bootstrap, topic), values("after", 3));
}

/// DescribeTransactions of `id` at the broker `addr`; an error code is an
/// error.
fn describe_txn(addr: &str, id: &str) -> Result<TransactionState, String> {
    let req = DescribeTransactionsRequest {
        transactional_ids: vec![id.to_string()],
        ..Default::default()
    };
    let mut resp = runtime().block_on(async {
        let mut conn = Connection::connect_timeout(addr, "weir-txn-compat", TIMEOUT)
            .await
            .map_err(|e| format!("connect to {addr}: {e}"))?;
        conn.set_request_timeout(TIMEOUT);
        conn.send(&req)
            .await
            .map_err(|e| format!("DescribeTransactions: {e}"))
    })?;
    match resp.transaction_states.pop() {
        Some(s) if s.error_code == 0 => Ok(s),
        Some(s) => Err(format!("error {}", s.error_code)),
        None => Err("an empty answer".to_string()),
    }
}
