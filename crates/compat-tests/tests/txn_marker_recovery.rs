//! Transaction markers outlive a crash of their coordinator: in a
//! three-node cluster a transaction is ended (EndTxn commit or abort) while
//! the leader of its data partition is stopped, so the coordinator writes
//! PrepareCommit / PrepareAbort, answers, and cannot write the markers. The
//! coordinator is then killed with SIGKILL and started again; the next
//! leader of the id's `__transaction_state` partition replays the
//! transaction in its Prepare state and must send the markers again. Once
//! the data leader runs again the transaction completes, a read_committed
//! reader sees exactly the committed records (none of the aborted ones,
//! whose range the Fetch answer lists as aborted) and the last stable
//! offset is past them.
//!
//! Roles: C leads the id's `__transaction_state` partition (the
//! coordinator), L the data partition (one replica, so its leadership
//! cannot move while L is stopped), Y is the third node. L is stopped
//! (SIGSTOP) and waited for until the controller has fenced it, so the
//! data partition has no leader: the markers of C find no route and are
//! retried without reaching L. The killed C comes back because L and C
//! down leave no metadata quorum; meanwhile the controller moves the
//! coordinator to Y when it expires C's old session.
//!
//! Waits poll observable state (Metadata, DescribeTransactions, Fetch)
//! against deadlines.

use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use weir_client::Connection;
use weir_compat_tests::cluster::{ClusterMetadata, FAST_FAILOVER, WeirCluster};
use weir_protocol::messages::describe_transactions_response::TransactionState;
use weir_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use weir_protocol::messages::fetch_response::PartitionData;
use weir_protocol::messages::{DescribeTransactionsRequest, FetchRequest};

use crate::cluster::{ALL, FAILOVER, READY, agreed, all_led, wait_settled, wait_until};
use crate::replicated_transactions::transaction_partition;
use crate::replication::create_assigned;

const RECORDS: usize = 20;
/// Few partitions of the internal topics: less to replicate on a busy
/// machine, and placement does not matter here.
const SETTINGS: &[(&str, &str)] = &[
    ("transaction.state.log.num.partitions", "5"),
    ("offsets.topic.num.partitions", "5"),
];
/// One exchange with a node; a stopped or restarting node fails it.
const REQUEST: Duration = Duration::from_secs(5);
const CLIENT_ID: &str = "txn-marker-recovery";
/// Fetch v12: topics by name, the last stable offset and aborted
/// transactions in the answer.
const FETCH_VERSION: i16 = 12;
const READ_COMMITTED: i8 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Commit,
    Abort,
}

impl End {
    fn prepare(self) -> &'static str {
        match self {
            End::Commit => "PrepareCommit",
            End::Abort => "PrepareAbort",
        }
    }

    fn complete(self) -> &'static str {
        match self {
            End::Commit => "CompleteCommit",
            End::Abort => "CompleteAbort",
        }
    }
}

#[test]
fn a_commit_completes_after_kill_9_of_its_coordinator_in_prepare_commit() {
    ended_during_a_coordinator_crash(End::Commit);
}

#[test]
fn an_abort_completes_after_kill_9_of_its_coordinator_in_prepare_abort() {
    ended_during_a_coordinator_crash(End::Abort);
}

fn ended_during_a_coordinator_crash(end: End) {
    let topic = match end {
        End::Commit => "prepare-commit-crash",
        End::Abort => "prepare-abort-crash",
    };
    let id = format!("{topic}-tx");
    let settings: Vec<(&str, &str)> = FAST_FAILOVER.iter().chain(SETTINGS).copied().collect();
    let mut cluster = WeirCluster::start(ALL.len(), &settings)
        .unwrap_or_else(|e| panic!("the cluster did not start: {e}"));
    wait_settled(&cluster, &ALL, READY);

    // FindCoordinator creates __transaction_state; the client retries
    // until the id's partition is led.
    let producer = transactional(&cluster.bootstrap(), &id);
    producer
        .init_transactions(READY)
        .expect("init_transactions");
    let m = wait_until(
        &cluster,
        "__transaction_state led, full ISRs",
        READY,
        || {
            let m = agreed(&cluster, &ALL)?;
            let full = m
                .partitions("__transaction_state")
                .iter()
                .all(|p| p.isr.len() == ALL.len());
            (all_led(&m, "__transaction_state") && full)
                .then_some(m)
                .ok_or_else(|| "not yet".to_string())
        },
    );
    let state = m.partitions("__transaction_state");
    let txn_partition = transaction_partition(&id, state.len() as i32) as usize;
    let coordinator = state[txn_partition].leader;
    let others: Vec<i32> = ALL.into_iter().filter(|&n| n != coordinator).collect();
    let (data_leader, third) = (others[0], others[1]);
    println!("coordinator {coordinator}, data leader {data_leader}, third node {third}");

    create_assigned(&cluster.bootstrap(), topic, &[data_leader], &[]);
    wait_until(&cluster, "the data partition is led", READY, || {
        let m = agreed(&cluster, &ALL)?;
        leader_of(&m, topic)
            .filter(|&l| l == data_leader)
            .map(|_| ())
            .ok_or_else(|| format!("{:?}", m.partitions(topic)))
    });

    let values: Vec<String> = (0..RECORDS).map(|i| format!("{topic}-{i:03}")).collect();
    producer.begin_transaction().expect("begin_transaction");
    for v in &values {
        producer
            .send(BaseRecord::<(), _>::to(topic).partition(0).payload(v))
            .map_err(|(e, _)| e)
            .expect("enqueue");
    }
    producer.flush(READY).expect("flush");
    let leader_addr = cluster.node(data_leader).bootstrap().to_string();
    let open = fetch_read_committed(&leader_addr, topic).expect("Fetch from the data leader");
    assert_eq!(
        (open.high_watermark, open.last_stable_offset),
        (RECORDS as i64, 0),
        "the open transaction holds the last stable offset at its first record"
    );

    // The data leader stops; once it is fenced its partition has no
    // leader, and the __transaction_state ISRs no longer wait for it.
    assert!(cluster.signal(data_leader, libc::SIGSTOP), "SIGSTOP");
    let up = [coordinator, third];
    wait_until(
        &cluster,
        "the stopped data leader is fenced",
        FAILOVER,
        || {
            let m = agreed(&cluster, &up)?;
            let txn = &m.partitions("__transaction_state")[txn_partition];
            (leader_of(&m, topic) == Some(-1) && !txn.isr.contains(&data_leader))
                .then_some(())
                .ok_or_else(|| format!("data {:?}, txn {txn:?}", m.partitions(topic)))
        },
    );

    // EndTxn: the coordinator writes the Prepare record and answers; its
    // markers find no leader.
    match end {
        End::Commit => producer.commit_transaction(FAILOVER),
        End::Abort => producer.abort_transaction(FAILOVER),
    }
    .unwrap_or_else(|e| panic!("{end:?}: {e}"));
    let (_, before) = describe(&cluster, &[coordinator], &id).expect("DescribeTransactions");
    assert_eq!(before.transaction_state, end.prepare(), "{before:?}");
    assert_eq!(
        partitions(&before),
        [(topic.to_string(), 0)],
        "no marker yet"
    );

    cluster.node(coordinator).kill_hard().expect("kill -9");
    cluster.node(coordinator).restart().expect("start again");
    let (replayed_by, replayed) = wait_until(
        &cluster,
        &format!("a coordinator replays {id} in {}", end.prepare()),
        FAILOVER,
        || describe(&cluster, &up, &id),
    );
    assert_eq!(replayed.transaction_state, end.prepare(), "{replayed:?}");
    assert_eq!(replayed.producer_id, before.producer_id);
    println!("node {replayed_by} coordinates {id} after the crash");

    // The markers can be written once the data leader runs again.
    assert!(cluster.signal(data_leader, libc::SIGCONT), "SIGCONT");
    let done = wait_until(
        &cluster,
        &format!("{id} reaches {}", end.complete()),
        FAILOVER,
        || {
            let (_, d) = describe(&cluster, &ALL, &id)?;
            (d.transaction_state == end.complete())
                .then_some(d.clone())
                .ok_or_else(|| format!("{d:?}"))
        },
    );
    assert!(partitions(&done).is_empty(), "{done:?}");

    let data = wait_until(
        &cluster,
        "the data partition is led again",
        FAILOVER,
        || {
            let m = agreed(&cluster, &ALL)?;
            let leader = leader_of(&m, topic).filter(|&l| l >= 0);
            leader
                .and_then(|l| m.brokers.get(&l).cloned())
                .ok_or_else(|| format!("{:?}", m.partitions(topic)))
        },
    );
    let after = fetch_read_committed(&data, topic).expect("Fetch");
    // the records and the marker after them
    let end_offset = RECORDS as i64 + 1;
    assert_eq!(
        (after.high_watermark, after.last_stable_offset),
        (end_offset, end_offset),
        "the marker is written and the last stable offset is past it"
    );
    let aborted: Vec<(i64, i64)> = after
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| (a.producer_id, a.first_offset))
        .collect();
    let want_visible = match end {
        End::Commit => {
            assert_eq!(
                aborted,
                [],
                "a committed transaction is not listed as aborted"
            );
            values
        }
        End::Abort => {
            assert_eq!(
                aborted,
                [(before.producer_id, 0)],
                "the aborted range starts at the transaction's first record"
            );
            Vec::new()
        }
    };
    assert_eq!(read_committed(&cluster.bootstrap(), topic), want_visible);
}

fn leader_of(m: &ClusterMetadata, topic: &str) -> Option<i32> {
    m.partitions(topic).first().map(|p| p.leader)
}

fn transactional(bootstrap: &str, id: &str) -> BaseProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("transactional.id", id)
        .set("socket.timeout.ms", "10000")
        .create()
        .expect("transactional producer")
}

fn runtime() -> tokio::runtime::Runtime {
    crate::cluster::runtime()
}

async fn connect(addr: &str) -> Result<Connection, String> {
    let mut conn = Connection::connect_timeout(addr, CLIENT_ID, REQUEST)
        .await
        .map_err(|e| format!("connect to {addr}: {e}"))?;
    conn.set_request_timeout(REQUEST);
    Ok(conn)
}

/// DescribeTransactions of `id`, asked of the nodes `ids` in turn: the
/// first that coordinates it (answers NONE) and its answer.
fn describe(
    cluster: &WeirCluster,
    ids: &[i32],
    id: &str,
) -> Result<(i32, TransactionState), String> {
    let mut seen = Vec::new();
    for &node in ids {
        let addr = cluster.nodes[(node - 1) as usize].bootstrap().to_string();
        let answer = runtime().block_on(async {
            let req = DescribeTransactionsRequest {
                transactional_ids: vec![id.to_string()],
                ..Default::default()
            };
            let mut resp = connect(&addr)
                .await?
                .send(&req)
                .await
                .map_err(|e| format!("DescribeTransactions: {e}"))?;
            resp.transaction_states
                .pop()
                .ok_or_else(|| "an empty answer".to_string())
        });
        match answer {
            Ok(s) if s.error_code == 0 => return Ok((node, s)),
            Ok(s) => seen.push(format!("node {node}: error {}", s.error_code)),
            Err(e) => seen.push(format!("node {node}: {e}")),
        }
    }
    Err(seen.join("; "))
}

fn partitions(s: &TransactionState) -> Vec<(String, i32)> {
    s.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|&p| (t.topic.clone(), p)))
        .collect()
}

/// One read_committed Fetch of partition 0 of `topic` from offset 0, sent
/// to `addr`.
pub(crate) fn fetch_read_committed(addr: &str, topic: &str) -> Result<PartitionData, String> {
    let req = FetchRequest {
        replica_id: -1,
        max_wait_ms: 0,
        min_bytes: 0,
        max_bytes: 1 << 20,
        isolation_level: READ_COMMITTED,
        session_id: 0,
        session_epoch: -1,
        topics: vec![FetchTopic {
            topic: topic.to_string(),
            partitions: vec![FetchPartition {
                partition: 0,
                current_leader_epoch: -1,
                fetch_offset: 0,
                last_fetched_epoch: -1,
                log_start_offset: -1,
                partition_max_bytes: 1 << 20,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let resp = runtime().block_on(async {
        connect(addr)
            .await?
            .send_version(&req, FETCH_VERSION)
            .await
            .map_err(|e| format!("Fetch: {e}"))
    })?;
    let p = resp
        .responses
        .into_iter()
        .flat_map(|t| t.partitions)
        .next()
        .ok_or("no partition in the Fetch answer")?;
    if p.error_code != 0 {
        return Err(format!("Fetch: error {}", p.error_code));
    }
    Ok(p)
}

/// Every value a librdkafka read_committed consumer reads from partition 0
/// of `topic` up to its end.
pub(crate) fn read_committed(bootstrap: &str, topic: &str) -> Vec<String> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "txn-marker-recovery-reader")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .expect("partition");
    c.assign(&tpl).expect("assign");
    let deadline = Instant::now() + FAILOVER;
    let mut values = Vec::new();
    loop {
        assert!(
            Instant::now() < deadline,
            "read_committed: not at the end of {topic} within {FAILOVER:?} ({values:?})"
        );
        match c.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                values.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned())
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => return values,
            Some(Err(e)) => panic!("read_committed consumer: {e}"),
            None => {}
        }
    }
}
