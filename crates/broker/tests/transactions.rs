//! The transaction coordinator through raw requests: FindCoordinator for a
//! transactional id, InitProducerId bumping and fencing, AddPartitionsToTxn
//! and AddOffsetsToTxn, EndTxn without a transaction, Describe/List, the
//! state surviving a restart, and an expired transaction aborted by the
//! coordinator.

use crate::common;

use common::*;
use weir_protocol::error_code::ErrorCode;

const TXN_CONFIG: &[(&str, &str)] = &[
    ("transaction.state.log.num.partitions", "3"),
    ("offsets.topic.num.partitions", "3"),
];

const PRODUCER_FENCED: i16 = 90;
const INVALID_PRODUCER_EPOCH: i16 = 47;

fn code(c: i16) -> ErrorCode {
    ErrorCode::from_code_lossy(c)
}

pub async fn find_txn_coordinator(c: &mut Client, id: &str) -> FindCoordinatorResponse {
    let req = FindCoordinatorRequest {
        key: id.into(),
        key_type: 1,
        ..Default::default()
    };
    match c.call(RequestBody::FindCoordinator(req), 3).await {
        ResponseBody::FindCoordinator(r) => r,
        other => panic!("{other:?}"),
    }
}

/// InitProducerId v4 for `id`, after looking its coordinator up as clients
/// do: (error, producer id, epoch).
pub async fn init_txn(c: &mut Client, id: &str, timeout_ms: i32) -> (i16, i64, i16) {
    let found = find_txn_coordinator(c, id).await;
    assert_eq!(found.error_code, NONE, "{:?}", found.error_message);
    init_txn_v(c, id, timeout_ms, 4).await
}

pub async fn init_txn_v(c: &mut Client, id: &str, timeout_ms: i32, v: i16) -> (i16, i64, i16) {
    let req = InitProducerIdRequest {
        transactional_id: Some(id.into()),
        transaction_timeout_ms: timeout_ms,
        producer_id: -1,
        producer_epoch: -1,
        ..Default::default()
    };
    match c.call(RequestBody::InitProducerId(req), v).await {
        ResponseBody::InitProducerId(r) => (r.error_code, r.producer_id, r.producer_epoch),
        other => panic!("{other:?}"),
    }
}

/// AddPartitionsToTxn (client versions): the error of each partition.
pub async fn add_partitions(
    c: &mut Client,
    id: &str,
    (pid, epoch): (i64, i16),
    partitions: &[(&str, i32)],
    v: i16,
) -> Vec<(String, i32, i16)> {
    let mut topics: Vec<add_partitions_to_txn_request::AddPartitionsToTxnTopic> = Vec::new();
    for (t, p) in partitions {
        match topics.iter_mut().find(|x| x.name == *t) {
            Some(x) => x.partitions.push(*p),
            None => topics.push(add_partitions_to_txn_request::AddPartitionsToTxnTopic {
                name: t.to_string(),
                partitions: vec![*p],
                ..Default::default()
            }),
        }
    }
    let req = AddPartitionsToTxnRequest {
        v3_and_below_transactional_id: id.into(),
        v3_and_below_producer_id: pid,
        v3_and_below_producer_epoch: epoch,
        v3_and_below_topics: topics,
        ..Default::default()
    };
    match c.call(RequestBody::AddPartitionsToTxn(req), v).await {
        ResponseBody::AddPartitionsToTxn(r) => r
            .results_by_topic_v3_and_below
            .into_iter()
            .flat_map(|t| {
                t.results_by_partition
                    .into_iter()
                    .map(move |p| (t.name.clone(), p.partition_index, p.partition_error_code))
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

pub async fn end_txn(c: &mut Client, id: &str, (pid, epoch): (i64, i16), commit: bool) -> i16 {
    let req = EndTxnRequest {
        transactional_id: id.into(),
        producer_id: pid,
        producer_epoch: epoch,
        committed: commit,
        ..Default::default()
    };
    match c.call(RequestBody::EndTxn(req), 3).await {
        ResponseBody::EndTxn(r) => r.error_code,
        other => panic!("{other:?}"),
    }
}

pub async fn describe(
    c: &mut Client,
    id: &str,
) -> describe_transactions_response::TransactionState {
    let req = DescribeTransactionsRequest {
        transactional_ids: vec![id.into()],
        ..Default::default()
    };
    match c.call(RequestBody::DescribeTransactions(req), 0).await {
        ResponseBody::DescribeTransactions(mut r) => r.transaction_states.remove(0),
        other => panic!("{other:?}"),
    }
}

pub async fn list(c: &mut Client, req: ListTransactionsRequest) -> ListTransactionsResponse {
    match c.call(RequestBody::ListTransactions(req), 1).await {
        ResponseBody::ListTransactions(r) => r,
        other => panic!("{other:?}"),
    }
}

/// A transactional batch of `pid` / `epoch` from sequence `seq`.
pub fn txn_batch(pid: i64, epoch: i16, seq: i32, value: &str) -> Bytes {
    let mut b = RecordBatchBuilder::new(Compression::None)
        .producer(pid, epoch, seq)
        .transactional(true);
    b.push(
        1_700_000_000_000,
        None,
        Some(Bytes::from(value.to_string())),
        vec![],
    )
    .unwrap();
    b.build().unwrap().into_bytes()
}

/// Produces `records` to `topic`-`partition` as transactional id `id`
/// (acks=all): the error.
pub async fn produce_txn(
    c: &mut Client,
    id: &str,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> i16 {
    let req = ProduceRequest {
        transactional_id: Some(id.into()),
        acks: -1,
        timeout_ms: 5000,
        topic_data: vec![produce_request::TopicProduceData {
            name: topic.into(),
            partition_data: vec![produce_request::PartitionProduceData {
                index: partition,
                records: Some(records),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::Produce(req), 9).await {
        ResponseBody::Produce(r) => r.responses[0].partition_responses[0].error_code,
        other => panic!("{other:?}"),
    }
}

/// ListOffsets LATEST of `topic`-`partition`: the last stable offset with
/// `read_committed`, else the high watermark.
pub async fn latest(c: &mut Client, topic: &str, partition: i32, read_committed: bool) -> i64 {
    let req = ListOffsetsRequest {
        replica_id: -1,
        isolation_level: i8::from(read_committed),
        topics: vec![list_offsets_request::ListOffsetsTopic {
            name: topic.into(),
            partitions: vec![list_offsets_request::ListOffsetsPartition {
                partition_index: partition,
                current_leader_epoch: -1,
                timestamp: -1,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::ListOffsets(req), 8).await {
        ResponseBody::ListOffsets(r) => {
            let p = &r.topics[0].partitions[0];
            assert_eq!(p.error_code, NONE);
            p.offset
        }
        other => panic!("{other:?}"),
    }
}

/// Waits (up to 20 s) until `id`'s described state is one of `states`.
pub async fn wait_for_state(
    c: &mut Client,
    id: &str,
    states: &[&str],
) -> describe_transactions_response::TransactionState {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let d = describe(c, id).await;
        if states.contains(&d.transaction_state.as_str()) {
            return d;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{id} still {} after 20 s, waiting for {states:?}",
            d.transaction_state
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_coordinator_creates_the_state_topic_and_names_this_broker() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), TXN_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    let r = find_txn_coordinator(&mut c, "tx").await;
    assert_eq!(r.error_code, NONE, "{:?}", r.error_message);
    assert_eq!(r.node_id, b.broker.config.node_id);
    assert_eq!(r.port, i32::from(b.local_addr.port()));
    let req = FindCoordinatorRequest {
        key_type: 1,
        coordinator_keys: vec!["a".into(), "b".into()],
        ..Default::default()
    };
    let ResponseBody::FindCoordinator(r) = c.call(RequestBody::FindCoordinator(req), 4).await
    else {
        panic!()
    };
    assert!(r.coordinators.iter().all(|k| k.error_code == NONE));
    let md = metadata(&mut c, Some(vec!["__transaction_state"]), false).await;
    assert_eq!(md.topics[0].error_code, NONE);
    assert!(md.topics[0].is_internal);
    assert_eq!(md.topics[0].partitions.len(), 3);
    let configs = topic_config(&mut c, "__transaction_state").await;
    assert_eq!(configs["cleanup.policy"].0.as_deref(), Some("compact"));
    assert_eq!(configs["min.insync.replicas"].0.as_deref(), Some("1"));
    // clients may not create or write it
    assert_eq!(
        create_topic(&mut c, "__transaction_state", 1, &[]).await,
        ErrorCode::TopicAlreadyExists.code()
    );
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_producer_id_twice_bumps_the_epoch_and_fences_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), TXN_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 2, &[]).await, NONE);
    let (e, pid, epoch) = init_txn(&mut c, "tx", 60_000).await;
    assert_eq!((e, epoch), (NONE, 0));
    let (e, pid2, epoch2) = init_txn(&mut c, "tx", 60_000).await;
    assert_eq!(
        (e, pid2, epoch2),
        (NONE, pid, 1),
        "same producer id, next epoch"
    );
    // the first session is fenced: PRODUCER_FENCED from v2, earlier
    // clients get INVALID_PRODUCER_EPOCH
    let r = add_partitions(&mut c, "tx", (pid, epoch), &[("t", 0)], 3).await;
    assert_eq!(r, vec![("t".into(), 0, PRODUCER_FENCED)]);
    let r = add_partitions(&mut c, "tx", (pid, epoch), &[("t", 0)], 1).await;
    assert_eq!(r, vec![("t".into(), 0, INVALID_PRODUCER_EPOCH)]);
    assert_eq!(
        init_txn_v(&mut c, "tx", 60_000, 3).await.1,
        pid,
        "v3 works too"
    );
    let (_, _, epoch3) = init_txn(&mut c, "tx", 60_000).await;
    assert_eq!(epoch3, 3);
    // the live session adds partitions; a wrong producer id is no mapping
    let r = add_partitions(&mut c, "tx", (pid, epoch3), &[("t", 0), ("t", 1)], 3).await;
    assert!(r.iter().all(|x| x.2 == NONE), "{r:?}");
    let r = add_partitions(&mut c, "tx", (pid + 1, epoch3), &[("t", 0)], 3).await;
    assert_eq!(code(r[0].2), ErrorCode::InvalidProducerIdMapping);
    let d = describe(&mut c, "tx").await;
    assert_eq!(d.transaction_state, "Ongoing");
    assert_eq!((d.producer_id, d.producer_epoch), (pid, epoch3));
    assert_eq!(d.topics[0].partitions, vec![0, 1]);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_the_state_topic_exists_requests_are_not_coordinator() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), TXN_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    let (e, _, _) = init_txn_v(&mut c, "tx", 60_000, 4).await;
    assert_eq!(code(e), ErrorCode::NotCoordinator);
    assert_eq!(
        code(describe(&mut c, "tx").await.error_code),
        ErrorCode::NotCoordinator
    );
    assert!(b.broker.topic("__transaction_state").is_none());
    assert_eq!(find_txn_coordinator(&mut c, "tx").await.error_code, NONE);
    assert_eq!(init_txn_v(&mut c, "tx", 60_000, 4).await.0, NONE);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_producer_id_checks_its_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(
        dir.path(),
        &[
            ("transaction.state.log.num.partitions", "1"),
            ("transaction.max.timeout.ms", "5000"),
        ],
    )
    .await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(find_txn_coordinator(&mut c, "tx").await.error_code, NONE);
    let (e, pid, epoch) = init_txn(&mut c, "tx", 5_001).await;
    assert_eq!(
        (code(e), pid, epoch),
        (ErrorCode::InvalidTransactionTimeout, -1, -1)
    );
    assert_eq!(
        code(init_txn(&mut c, "tx", 0).await.0),
        ErrorCode::InvalidTransactionTimeout
    );
    let req = InitProducerIdRequest {
        transactional_id: Some("tx".into()),
        transaction_timeout_ms: 1_000,
        producer_id: 5,
        producer_epoch: -1,
        ..Default::default()
    };
    let ResponseBody::InitProducerId(r) = c.call(RequestBody::InitProducerId(req), 4).await else {
        panic!()
    };
    assert_eq!(code(r.error_code), ErrorCode::InvalidRequest);
    // An empty transactional id is refused, as Kafka's coordinator does;
    // none at all (null) is an idempotent producer.
    let (e, pid, _) = init_txn_v(&mut c, "", 1_000, 4).await;
    assert_eq!((code(e), pid), (ErrorCode::InvalidRequest, -1));
    let req = InitProducerIdRequest {
        transactional_id: None,
        transaction_timeout_ms: 1_000,
        producer_id: -1,
        producer_epoch: -1,
        ..Default::default()
    };
    let ResponseBody::InitProducerId(r) = c.call(RequestBody::InitProducerId(req), 4).await else {
        panic!()
    };
    assert_eq!(code(r.error_code), ErrorCode::None);
    assert!(r.producer_id >= 0);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_txn_without_a_transaction_is_invalid_txn_state() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), TXN_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    let (_, pid, epoch) = init_txn(&mut c, "tx", 60_000).await;
    assert_eq!(
        code(end_txn(&mut c, "tx", (pid, epoch), true).await),
        ErrorCode::InvalidTxnState
    );
    assert_eq!(
        code(end_txn(&mut c, "tx", (pid, epoch), false).await),
        ErrorCode::InvalidTxnState
    );
    assert_eq!(
        code(end_txn(&mut c, "unknown", (pid, epoch), true).await),
        ErrorCode::InvalidProducerIdMapping
    );
    assert_eq!(
        code(end_txn(&mut c, "tx", (pid, epoch + 1), true).await),
        ErrorCode::ProducerFenced
    );
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_partitions_refuses_unknown_and_internal_topics_as_a_whole() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), TXN_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 1, &[]).await, NONE);
    let (_, pid, epoch) = init_txn(&mut c, "tx", 60_000).await;
    let r = add_partitions(
        &mut c,
        "tx",
        (pid, epoch),
        &[("t", 0), ("t", 5), ("nope", 0)],
        3,
    )
    .await;
    let codes: Vec<ErrorCode> = r.iter().map(|x| code(x.2)).collect();
    assert_eq!(
        codes,
        vec![
            ErrorCode::OperationNotAttempted,
            ErrorCode::UnknownTopicOrPartition,
            ErrorCode::UnknownTopicOrPartition
        ]
    );
    let r = add_partitions(&mut c, "tx", (pid, epoch), &[("__transaction_state", 0)], 3).await;
    assert_eq!(code(r[0].2), ErrorCode::TopicAuthorizationFailed);
    assert_eq!(describe(&mut c, "tx").await.transaction_state, "Empty");
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_offsets_adds_the_groups_offsets_partition() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), TXN_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    let (_, pid, epoch) = init_txn(&mut c, "tx", 60_000).await;
    let add = |epoch: i16| {
        RequestBody::AddOffsetsToTxn(AddOffsetsToTxnRequest {
            transactional_id: "tx".into(),
            producer_id: pid,
            producer_epoch: epoch,
            group_id: "g".into(),
            ..Default::default()
        })
    };
    let ResponseBody::AddOffsetsToTxn(r) = c.call(add(epoch), 3).await else {
        panic!()
    };
    assert_eq!(r.error_code, NONE);
    let d = describe(&mut c, "tx").await;
    let group_partition = b.broker.groups().unwrap().partition_for("g");
    assert_eq!(d.topics[0].topic, "__consumer_offsets");
    assert_eq!(d.topics[0].partitions, vec![group_partition]);
    let ResponseBody::AddOffsetsToTxn(r) = c.call(add(epoch + 1), 1).await else {
        panic!()
    };
    assert_eq!(r.error_code, INVALID_PRODUCER_EPOCH);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinator_state_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), TXN_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 2, &[]).await, NONE);
    let (_, pid, _) = init_txn(&mut c, "open", 60_000).await;
    let (_, _, epoch) = init_txn(&mut c, "open", 60_000).await;
    let r = add_partitions(&mut c, "open", (pid, epoch), &[("t", 1), ("t", 0)], 3).await;
    assert!(r.iter().all(|x| x.2 == NONE));
    let (_, idle_pid, idle_epoch) = init_txn(&mut c, "idle", 45_000).await;
    let before = describe(&mut c, "open").await;
    b.shutdown().await.unwrap();

    let b = start_broker(dir.path(), TXN_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    let after = describe(&mut c, "open").await;
    assert_eq!(after.error_code, NONE);
    assert_eq!(
        (
            &after.transaction_state,
            after.producer_id,
            after.producer_epoch,
            after.transaction_timeout_ms,
            after.transaction_start_time_ms,
            &after.topics
        ),
        (
            &before.transaction_state,
            before.producer_id,
            before.producer_epoch,
            before.transaction_timeout_ms,
            before.transaction_start_time_ms,
            &before.topics
        )
    );
    assert_eq!(after.transaction_state, "Ongoing");
    // the replayed session goes on
    let r = add_partitions(&mut c, "open", (pid, epoch), &[("t", 0)], 3).await;
    assert_eq!(r[0].2, NONE);
    let idle = describe(&mut c, "idle").await;
    assert_eq!(
        (
            idle.producer_id,
            idle.producer_epoch,
            idle.transaction_timeout_ms
        ),
        (idle_pid, idle_epoch, 45_000)
    );
    let (e, p, next) = init_txn(&mut c, "idle", 45_000).await;
    assert_eq!((e, p, next), (NONE, idle_pid, idle_epoch + 1));
    let listed = list(&mut c, ListTransactionsRequest::default()).await;
    let mut ids: Vec<String> = listed
        .transaction_states
        .iter()
        .map(|t| t.transactional_id.clone())
        .collect();
    ids.sort();
    assert_eq!(ids, ["idle", "open"]);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_transactions_filters() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), TXN_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 1, &[]).await, NONE);
    let (_, a_pid, a_epoch) = init_txn(&mut c, "a", 60_000).await;
    add_partitions(&mut c, "a", (a_pid, a_epoch), &[("t", 0)], 3).await;
    let (_, b_pid, _) = init_txn(&mut c, "b", 60_000).await;
    let ids = |r: &ListTransactionsResponse| {
        let mut v: Vec<(String, String)> = r
            .transaction_states
            .iter()
            .map(|t| (t.transactional_id.clone(), t.transaction_state.clone()))
            .collect();
        v.sort();
        v
    };
    let r = list(
        &mut c,
        ListTransactionsRequest {
            state_filters: vec!["Ongoing".into(), "Nonsense".into()],
            ..Default::default()
        },
    )
    .await;
    assert_eq!(r.error_code, NONE);
    assert_eq!(ids(&r), vec![("a".into(), "Ongoing".into())]);
    assert_eq!(r.unknown_state_filters, vec!["Nonsense".to_string()]);
    let r = list(
        &mut c,
        ListTransactionsRequest {
            producer_id_filters: vec![b_pid],
            ..Default::default()
        },
    )
    .await;
    assert_eq!(ids(&r), vec![("b".into(), "Empty".into())]);
    let r = list(
        &mut c,
        ListTransactionsRequest {
            state_filters: vec!["Ongoing".into()],
            duration_filter: 3_600_000,
            ..Default::default()
        },
    )
    .await;
    assert!(ids(&r).is_empty(), "nothing runs for an hour");
    b.shutdown().await.unwrap();
}

/// One metric of `/metrics` (counter or gauge, no labels).
async fn metric(b: &RunningBroker, name: &str) -> Option<f64> {
    let addr = b.http_addr().expect("HTTP listener");
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: weir\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut buf))
        .await
        .expect("HTTP response within 20 s")
        .unwrap();
    let text = String::from_utf8(buf).unwrap();
    let body = text.split_once("\r\n\r\n").expect("HTTP body").1;
    let scrape = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).unwrap();
    scrape
        .samples
        .iter()
        .find(|x| x.metric == name)
        .and_then(|x| match x.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v) => Some(v),
            _ => None,
        })
}

/// Waits (up to 20 s) until `check` holds for metric `name`.
async fn wait_metric(b: &RunningBroker, name: &str, check: impl Fn(f64) -> bool) -> f64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let v = metric(b, name).await;
        if let Some(v) = v.filter(|v| check(*v)) {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} is {v:?} after 20 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_transactional_ids_and_open_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = TXN_CONFIG.to_vec();
    config.push(("http.listeners", "127.0.0.1:0"));
    let b = start_broker(dir.path(), &config).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 1, &[]).await, NONE);
    assert_eq!(metric(&b, "weir_transactional_ids").await, Some(0.0));
    let (_, pid, epoch) = init_txn(&mut c, "open", 60_000).await;
    init_txn(&mut c, "idle", 60_000).await;
    add_partitions(&mut c, "open", (pid, epoch), &[("t", 0)], 3).await;
    assert_eq!(metric(&b, "weir_transactional_ids").await, Some(2.0));
    assert_eq!(metric(&b, "weir_transactions_open").await, Some(1.0));
    wait_metric(&b, "weir_transactions_oldest_open_age_seconds", |v| v > 0.0).await;
    for counter in [
        "weir_transactions_committed_total",
        "weir_transactions_aborted_total",
        "weir_transactions_timed_out_total",
    ] {
        assert_eq!(metric(&b, counter).await, Some(0.0), "{counter}");
    }
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_transaction_is_aborted_and_its_producer_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(
        dir.path(),
        &[
            ("http.listeners", "127.0.0.1:0"),
            ("transaction.state.log.num.partitions", "1"),
            ("transaction.max.timeout.ms", "2000"),
            (
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                "100",
            ),
        ],
    )
    .await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 1, &[]).await, NONE);
    let (_, pid, epoch) = init_txn(&mut c, "slow", 300).await;
    let r = add_partitions(&mut c, "slow", (pid, epoch), &[("t", 0)], 3).await;
    assert_eq!(r[0].2, NONE);
    let d = wait_for_state(&mut c, "slow", &["CompleteAbort"]).await;
    assert_eq!(d.producer_epoch, epoch + 1, "aborted with a bumped epoch");
    let r = add_partitions(&mut c, "slow", (pid, epoch), &[("t", 0)], 3).await;
    assert_eq!(r[0].2, PRODUCER_FENCED);
    assert_eq!(
        code(end_txn(&mut c, "slow", (pid, epoch), true).await),
        ErrorCode::ProducerFenced
    );
    assert_eq!(
        metric(&b, "weir_transactions_timed_out_total").await,
        Some(1.0)
    );
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_completes_once_its_markers_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(
        dir.path(),
        &[
            ("http.listeners", "127.0.0.1:0"),
            ("transaction.state.log.num.partitions", "2"),
        ],
    )
    .await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 2, &[]).await, NONE);
    let (_, pid, epoch) = init_txn(&mut c, "tx", 60_000).await;
    let r = add_partitions(&mut c, "tx", (pid, epoch), &[("t", 0), ("t", 1)], 3).await;
    assert!(r.iter().all(|x| x.2 == NONE), "{r:?}");
    for p in [0, 1] {
        assert_eq!(
            produce_txn(&mut c, "tx", "t", p, txn_batch(pid, epoch, 0, "a")).await,
            NONE
        );
        assert_eq!(latest(&mut c, "t", p, true).await, 0, "open: the LSO holds");
    }
    assert_eq!(end_txn(&mut c, "tx", (pid, epoch), true).await, NONE);
    let d = wait_for_state(&mut c, "tx", &["CompleteCommit"]).await;
    assert!(d.topics.is_empty(), "no partition left: {:?}", d.topics);
    for p in [0, 1] {
        // the record and the COMMIT marker
        assert_eq!(latest(&mut c, "t", p, false).await, 2);
        assert_eq!(
            latest(&mut c, "t", p, true).await,
            2,
            "committed: the LSO moved"
        );
    }
    assert_eq!(
        metric(&b, "weir_transactions_committed_total").await,
        Some(1.0)
    );
    // retries after completion
    assert_eq!(end_txn(&mut c, "tx", (pid, epoch), true).await, NONE);
    assert_eq!(
        code(end_txn(&mut c, "tx", (pid, epoch), false).await),
        ErrorCode::InvalidTxnState
    );

    // the next transaction of the same session, aborted
    add_partitions(&mut c, "tx", (pid, epoch), &[("t", 0)], 3).await;
    assert_eq!(
        produce_txn(&mut c, "tx", "t", 0, txn_batch(pid, epoch, 1, "b")).await,
        NONE
    );
    assert_eq!(end_txn(&mut c, "tx", (pid, epoch), false).await, NONE);
    wait_for_state(&mut c, "tx", &["CompleteAbort"]).await;
    assert_eq!(latest(&mut c, "t", 0, true).await, 4);
    assert_eq!(
        metric(&b, "weir_transactions_aborted_total").await,
        Some(1.0)
    );
    assert_eq!(metric(&b, "weir_transactions_open").await, Some(0.0));
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_session_aborts_the_open_transaction_first() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), TXN_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 1, &[]).await, NONE);
    let (_, pid, epoch) = init_txn(&mut c, "tx", 60_000).await;
    add_partitions(&mut c, "tx", (pid, epoch), &[("t", 0)], 3).await;
    assert_eq!(
        produce_txn(&mut c, "tx", "t", 0, txn_batch(pid, epoch, 0, "a")).await,
        NONE
    );
    // the new session is told to retry while the old transaction aborts
    let (e, _, _) = init_txn(&mut c, "tx", 60_000).await;
    assert_eq!(code(e), ErrorCode::ConcurrentTransactions);
    let d = wait_for_state(&mut c, "tx", &["CompleteAbort"]).await;
    assert_eq!(
        d.producer_epoch,
        epoch + 1,
        "aborted with the fencing epoch"
    );
    assert_eq!(
        latest(&mut c, "t", 0, true).await,
        2,
        "the abort marker ends it"
    );
    let (e, p, next) = init_txn(&mut c, "tx", 60_000).await;
    assert_eq!((e, p, next), (NONE, pid, epoch + 2));
    // the old session is fenced on the partition too
    assert_ne!(
        produce_txn(&mut c, "tx", "t", 0, txn_batch(pid, epoch, 1, "late")).await,
        NONE
    );
    b.shutdown().await.unwrap();
}
