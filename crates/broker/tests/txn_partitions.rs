//! Transactions on the partition side, driven by raw requests: transactional
//! batches built by hand, COMMIT/ABORT markers through WriteTxnMarkers,
//! read_committed Fetch and ListOffsets, the last stable offset, the
//! aborted-transaction index, restarts and a follower's appends.

use std::collections::HashSet;
use std::sync::Arc;

use weir_protocol::messages::fetch_response::PartitionData;
use weir_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use weir_protocol::records::EndTxnMarker;
use weir_storage::AbortedTxn;

use crate::common::*;

const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_TXN_STATE: i16 = 48;
const TRANSACTION_COORDINATOR_FENCED: i16 = 52;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// A transactional batch of producer `pid` in `epoch` from sequence `seq`.
fn txn_batch(pid: i64, epoch: i16, seq: i32, values: &[&str]) -> Bytes {
    let mut b = RecordBatchBuilder::new(Compression::None)
        .producer(pid, epoch, seq)
        .transactional(true);
    for v in values {
        b.push(
            1_700_000_000_000,
            None,
            Some(Bytes::copy_from_slice(v.as_bytes())),
            vec![],
        )
        .unwrap();
    }
    b.build().unwrap().into_bytes()
}

/// Produces `records` to `t-0` with `transactional_id`: (error, base offset).
pub(crate) async fn produce_txn(
    c: &mut Client,
    transactional_id: Option<&str>,
    records: Bytes,
) -> (i16, i64) {
    produce_as(c, transactional_id, "t", 0, records, -1).await
}

/// Writes one marker to partitions of `topic`: the error of each.
pub(crate) async fn write_marker(
    c: &mut Client,
    pid: i64,
    epoch: i16,
    coordinator_epoch: i32,
    commit: bool,
    topic: &str,
    partitions: &[i32],
) -> Vec<i16> {
    let req = WriteTxnMarkersRequest {
        markers: vec![WritableTxnMarker {
            producer_id: pid,
            producer_epoch: epoch,
            transaction_result: commit,
            topics: vec![WritableTxnMarkerTopic {
                name: topic.into(),
                partition_indexes: partitions.to_vec(),
                ..Default::default()
            }],
            coordinator_epoch,
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::WriteTxnMarkers(req), 1).await {
        ResponseBody::WriteTxnMarkers(r) => {
            assert_eq!(r.markers[0].producer_id, pid);
            r.markers[0].topics[0]
                .partitions
                .iter()
                .map(|p| p.error_code)
                .collect()
        }
        other => panic!("{other:?}"),
    }
}

/// Fetches `t-0` from `offset` (read_committed or not): the partition's
/// answer.
pub(crate) async fn fetch_at(
    c: &mut Client,
    offset: i64,
    read_committed: bool,
    max_wait_ms: i32,
) -> PartitionData {
    let req = FetchRequest {
        replica_id: -1,
        max_wait_ms,
        min_bytes: 1,
        max_bytes: 1 << 20,
        isolation_level: i8::from(read_committed),
        topics: vec![fetch_request::FetchTopic {
            topic: "t".into(),
            partitions: vec![fetch_request::FetchPartition {
                partition: 0,
                current_leader_epoch: -1,
                fetch_offset: offset,
                last_fetched_epoch: -1,
                log_start_offset: -1,
                partition_max_bytes: 1 << 20,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::Fetch(req), 12).await {
        ResponseBody::Fetch(mut r) => r.responses.remove(0).partitions.remove(0),
        other => panic!("{other:?}"),
    }
}

/// The records a read_committed consumer delivers from `pd`, as (offset,
/// value): the Java consumer's rule. An aborted transaction's producer is
/// skipped from the first batch whose last offset reaches the
/// transaction's first offset until its ABORT marker; control batches are
/// never delivered.
pub(crate) fn consumed(pd: &PartitionData) -> Vec<(i64, String)> {
    let mut aborted: Vec<(i64, i64)> = pd
        .aborted_transactions
        .iter()
        .flatten()
        .map(|t| (t.first_offset, t.producer_id))
        .collect();
    aborted.sort();
    let mut aborted = aborted.into_iter().peekable();
    let mut skipping: HashSet<i64> = HashSet::new();
    let mut out = Vec::new();
    for b in BatchIter::new(pd.records.clone().unwrap_or_default()) {
        let b = b.unwrap();
        let h = *b.header();
        if h.producer_id >= 0 {
            while let Some(&(first, pid)) = aborted.peek() {
                if first > b.last_offset() {
                    break;
                }
                skipping.insert(pid);
                aborted.next();
            }
            if b.is_control() {
                if b.end_txn_marker(&Default::default()).unwrap().kind
                    == weir_protocol::records::ControlRecordType::Abort
                {
                    skipping.remove(&h.producer_id);
                }
            } else if b.is_transactional() && skipping.contains(&h.producer_id) {
                continue;
            }
        }
        if b.is_control() {
            continue;
        }
        for r in b.collect_records(&Default::default()).unwrap() {
            let v = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
            out.push((r.offset(b.base_offset()), v));
        }
    }
    out
}

/// Every data record of `pd`, as (offset, value).
pub(crate) fn all_records(pd: &PartitionData) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    for b in BatchIter::new(pd.records.clone().unwrap_or_default()) {
        let b = b.unwrap();
        if b.is_control() {
            continue;
        }
        for r in b.collect_records(&Default::default()).unwrap() {
            let v = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
            out.push((r.offset(b.base_offset()), v));
        }
    }
    out
}

pub(crate) fn values(records: &[(i64, String)]) -> Vec<&str> {
    records.iter().map(|(_, v)| v.as_str()).collect()
}

/// ListOffsets LATEST of `t-0` at an isolation level.
async fn latest(c: &mut Client, read_committed: bool) -> i64 {
    let req = ListOffsetsRequest {
        replica_id: -1,
        isolation_level: i8::from(read_committed),
        topics: vec![list_offsets_request::ListOffsetsTopic {
            name: "t".into(),
            partitions: vec![list_offsets_request::ListOffsetsPartition {
                partition_index: 0,
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

/// A cluster of this broker and broker 2 (unroutable: no fetch ever
/// reaches it), with topic `t` of one partition on both, led by `leader`
/// in `epoch` with `isr`.
fn two_replicas(
    b: &weir_broker::Broker,
    leader: i32,
    epoch: i32,
    isr: Vec<i32>,
) -> weir_broker::cluster::ClusterSnapshot {
    use weir_broker::cluster::{BrokerNode, ClusterSnapshot, PartitionView, TopicView};
    let me = b.config.node_id;
    let (host, port) = b.advertised();
    let brokers = [me, 2]
        .into_iter()
        .map(|n| BrokerNode {
            id: n,
            host: if n == me {
                host.clone()
            } else {
                "192.0.2.2".into()
            },
            port: if n == me { port } else { 1 },
            rack: None,
        })
        .collect();
    ClusterSnapshot::new(
        brokers,
        me,
        vec![TopicView {
            name: "t".into(),
            id: b.topic("t").unwrap().id_bytes(),
            partitions: vec![PartitionView {
                leader,
                leader_epoch: epoch,
                partition_epoch: epoch,
                replicas: vec![me, 2],
                isr,
                offline_replicas: vec![],
            }],
        }],
    )
}

/// Makes the broker a cluster member whose view is [`two_replicas`] (a
/// test may replace it through the view returned) and applies its
/// leadership.
fn join_two_replicas(
    b: &Arc<weir_broker::Broker>,
    leader: i32,
    epoch: i32,
    isr: Vec<i32>,
) -> Arc<FixedView> {
    join_cluster(b, two_replicas(b, leader, epoch, isr))
}

/// The producer snapshots in partition directory `dir`.
pub(crate) fn snapshots(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "snapshot"))
        .collect()
}

async fn broker_with_topic(dir: &std::path::Path) -> (RunningBroker, Client) {
    let b = start_broker(dir, &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 1, &[]).await, NONE);
    (b, c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_committed_stops_at_an_open_transaction_until_it_commits() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c) = broker_with_topic(dir.path()).await;
    let pid = 9;
    assert_eq!(
        produce(&mut c, "t", 0, batch(&["a"], 1), 1).await,
        (NONE, 0)
    );
    assert_eq!(
        produce_txn(&mut c, Some("tx"), txn_batch(pid, 0, 0, &["t1", "t2"])).await,
        (NONE, 1)
    );
    assert_eq!(
        produce(&mut c, "t", 0, batch(&["b"], 1), 1).await,
        (NONE, 3)
    );

    // read_uncommitted reads past the open transaction; both are told the
    // LSO, the first offset of the open transaction.
    let pd = fetch_at(&mut c, 0, false, 0).await;
    assert_eq!((pd.high_watermark, pd.last_stable_offset), (4, 1));
    assert_eq!(values(&all_records(&pd)), ["a", "t1", "t2", "b"]);
    assert_eq!(pd.aborted_transactions, None);
    let pd = fetch_at(&mut c, 0, true, 0).await;
    assert_eq!((pd.high_watermark, pd.last_stable_offset), (4, 1));
    assert_eq!(values(&all_records(&pd)), ["a"]);
    assert_eq!(pd.aborted_transactions, Some(vec![]));
    // Nothing visible at the LSO yet.
    let pd = fetch_at(&mut c, 1, true, 0).await;
    assert!(all_records(&pd).is_empty());
    assert_eq!(
        (latest(&mut c, true).await, latest(&mut c, false).await),
        (1, 4)
    );

    // A read_committed consumer waiting at the LSO is woken by the COMMIT.
    let addr = b.local_addr;
    let waiting = tokio::spawn(async move {
        let mut c2 = Client::connect(addr).await;
        fetch_at(&mut c2, 1, true, 20_000).await
    });
    wait_parked_fetches(&b, 1).await;
    assert_eq!(
        write_marker(&mut c, pid, 0, 0, true, "t", &[0]).await,
        [NONE]
    );
    let pd = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the marker wakes the fetch")
        .unwrap();
    assert_eq!(values(&consumed(&pd)), ["t1", "t2", "b"]);
    assert_eq!((pd.high_watermark, pd.last_stable_offset), (5, 5));
    assert_eq!(pd.aborted_transactions, Some(vec![]));
    assert_eq!(latest(&mut c, true).await, 5);
    assert!(
        b.broker
            .replicas
            .log("t", 0)
            .unwrap()
            .all_aborted_txns()
            .is_empty()
    );
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_transaction_is_listed_and_filtered_out() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c) = broker_with_topic(dir.path()).await;
    let (p1, p2) = (11, 12);
    // 0: p1 opens; 1: p2 opens; 2: plain; 3: p1 again.
    assert_eq!(
        produce_txn(&mut c, Some("x1"), txn_batch(p1, 0, 0, &["x1"])).await,
        (NONE, 0)
    );
    assert_eq!(
        produce_txn(&mut c, Some("x2"), txn_batch(p2, 0, 0, &["y1"])).await,
        (NONE, 1)
    );
    assert_eq!(
        produce(&mut c, "t", 0, batch(&["plain1"], 1), 1).await,
        (NONE, 2)
    );
    assert_eq!(
        produce_txn(&mut c, Some("x1"), txn_batch(p1, 0, 1, &["x2"])).await,
        (NONE, 3)
    );
    // 4: p1 aborts; p2 is still open: the LSO is its first offset.
    assert_eq!(
        write_marker(&mut c, p1, 0, 0, false, "t", &[0]).await,
        [NONE]
    );
    let pd = fetch_at(&mut c, 0, true, 0).await;
    assert_eq!(pd.last_stable_offset, 1);
    assert_eq!(consumed(&pd), []);
    // 5: p2 commits; 6: plain.
    assert_eq!(
        write_marker(&mut c, p2, 0, 0, true, "t", &[0]).await,
        [NONE]
    );
    assert_eq!(
        produce(&mut c, "t", 0, batch(&["plain2"], 1), 1).await,
        (NONE, 6)
    );

    let pd = fetch_at(&mut c, 0, true, 0).await;
    assert_eq!(pd.last_stable_offset, 7);
    let listed: Vec<(i64, i64)> = pd
        .aborted_transactions
        .iter()
        .flatten()
        .map(|t| (t.producer_id, t.first_offset))
        .collect();
    assert_eq!(listed, [(p1, 0)]);
    assert_eq!(values(&consumed(&pd)), ["y1", "plain1", "plain2"]);
    // read_uncommitted: everything, no list.
    let pd = fetch_at(&mut c, 0, false, 0).await;
    assert_eq!(
        values(&all_records(&pd)),
        ["x1", "y1", "plain1", "x2", "plain2"]
    );
    assert_eq!(pd.aborted_transactions, None);
    // From past the abort marker, no aborted transaction overlaps.
    let pd = fetch_at(&mut c, 5, true, 0).await;
    assert_eq!(pd.aborted_transactions, Some(vec![]));
    assert_eq!(values(&consumed(&pd)), ["plain2"]);
    // From inside the aborted transaction (at its second batch).
    let pd = fetch_at(&mut c, 3, true, 0).await;
    assert_eq!(values(&consumed(&pd)), ["plain2"]);

    // The index on disk, in Kafka's format: the LSO when p1 aborted was
    // p2's first offset.
    let log = b.broker.replicas.log("t", 0).unwrap();
    let want = AbortedTxn {
        producer_id: p1,
        first_offset: 0,
        last_offset: 4,
        last_stable_offset: 1,
    };
    assert_eq!(log.all_aborted_txns(), [want]);
    assert_eq!(txn_index_files(&log.dir()), [want.to_bytes().to_vec()]);
    b.shutdown().await.unwrap();
}

/// The contents of every `.txnindex` file in a partition directory (one
/// per segment holding an ABORT that ended a transaction).
pub(crate) fn txn_index_files(dir: &std::path::Path) -> Vec<Vec<u8>> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txnindex"))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_markers_are_fenced_and_append_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c) = broker_with_topic(dir.path()).await;
    let log = b.broker.replicas.log("t", 0).unwrap();
    let pid = 21;
    assert_eq!(
        produce_txn(&mut c, Some("f"), txn_batch(pid, 3, 0, &["v"])).await,
        (NONE, 0)
    );
    // An older producer epoch: fenced, nothing appended, still open.
    assert_eq!(
        write_marker(&mut c, pid, 2, 0, false, "t", &[0]).await,
        [INVALID_PRODUCER_EPOCH]
    );
    assert_eq!(log.log_end_offset(), 1);
    assert_eq!(fetch_at(&mut c, 0, true, 0).await.last_stable_offset, 0);
    // Unknown partitions are answered per partition, the known one written.
    assert_eq!(
        write_marker(&mut c, pid, 3, 5, true, "t", &[0, 7]).await,
        [NONE, UNKNOWN_TOPIC_OR_PARTITION]
    );
    assert_eq!(
        write_marker(&mut c, pid, 3, 5, true, "nope", &[0]).await,
        [UNKNOWN_TOPIC_OR_PARTITION]
    );
    assert_eq!(log.log_end_offset(), 2);
    assert_eq!(fetch_at(&mut c, 0, true, 0).await.last_stable_offset, 2);
    // A coordinator epoch older than the last marker's: fenced.
    assert_eq!(
        write_marker(&mut c, pid, 3, 4, true, "t", &[0]).await,
        [TRANSACTION_COORDINATOR_FENCED]
    );
    assert_eq!(log.log_end_offset(), 2);
    // A retried marker with nothing open is appended (and ends nothing).
    assert_eq!(
        write_marker(&mut c, pid, 3, 5, true, "t", &[0]).await,
        [NONE]
    );
    assert_eq!(log.log_end_offset(), 3);
    // A marker in a newer producer epoch (the coordinator's abort of a
    // restarted producer's transaction) fences the old epoch's batches.
    assert_eq!(
        write_marker(&mut c, pid, 4, 5, false, "t", &[0]).await,
        [NONE]
    );
    assert_eq!(
        produce_txn(&mut c, Some("f"), txn_batch(pid, 3, 1, &["late"]))
            .await
            .0,
        INVALID_PRODUCER_EPOCH
    );
    assert_eq!(log.log_end_offset(), 4);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactional_produce_follows_the_producer_rules() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c) = broker_with_topic(dir.path()).await;
    let pid = 31;
    // Transactional records need the transactional id they are sent for.
    assert_eq!(
        produce_txn(&mut c, None, txn_batch(pid, 0, 0, &["v"]))
            .await
            .0,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    assert_eq!(
        produce_txn(&mut c, Some("r"), txn_batch(pid, 0, 0, &["v"])).await,
        (NONE, 0)
    );
    // The sequence rules of idempotence hold: a retry is answered with the
    // original offset, a gap is refused.
    assert_eq!(
        produce_txn(&mut c, Some("r"), txn_batch(pid, 0, 0, &["v"])).await,
        (NONE, 0)
    );
    assert_eq!(
        produce_txn(&mut c, Some("r"), txn_batch(pid, 0, 5, &["v"]))
            .await
            .0,
        OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    // A non-transactional batch while the transaction is open.
    assert_eq!(
        produce_txn(&mut c, Some("r"), idempotent_batch(pid, 0, 1, 1))
            .await
            .0,
        INVALID_TXN_STATE
    );
    // A client may not write a marker itself.
    let marker =
        RecordBatchBuilder::end_txn_marker_batch(0, -1, pid, 0, 1, &EndTxnMarker::commit(0))
            .unwrap()
            .into_bytes();
    assert_eq!(
        produce_txn(&mut c, Some("r"), marker).await.0,
        87,
        "INVALID_RECORD"
    );
    assert_eq!(b.broker.replicas.log("t", 0).unwrap().log_end_offset(), 1);
    // Once committed, the producer may write outside a transaction.
    assert_eq!(
        write_marker(&mut c, pid, 0, 0, true, "t", &[0]).await,
        [NONE]
    );
    assert_eq!(
        produce_txn(&mut c, Some("r"), idempotent_batch(pid, 0, 1, 1)).await,
        (NONE, 2)
    );
    b.shutdown().await.unwrap();
}

/// An open transaction still holds the LSO after a restart: from the
/// producer snapshot of the clean shutdown, and, without it, from the
/// batches of the log's tail; its ABORT is then indexed as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_transaction_holds_the_lso_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c) = broker_with_topic(dir.path()).await;
    let pid = 41;
    assert_eq!(
        produce(&mut c, "t", 0, batch(&["a"], 1), 1).await,
        (NONE, 0)
    );
    assert_eq!(
        produce_txn(&mut c, Some("s"), txn_batch(pid, 0, 0, &["t1"])).await,
        (NONE, 1)
    );
    assert_eq!(
        produce(&mut c, "t", 0, batch(&["b"], 1), 1).await,
        (NONE, 2)
    );
    b.shutdown().await.unwrap();
    let part_dir = dir.path().join("t-0");
    assert_eq!(
        snapshots(&part_dir).len(),
        1,
        "a snapshot at the clean shutdown"
    );

    for without_snapshot in [false, true] {
        if without_snapshot {
            for s in snapshots(&part_dir) {
                std::fs::remove_file(s).unwrap();
            }
        }
        let b = start_broker(dir.path(), &[]).await;
        let mut c = Client::connect(b.local_addr).await;
        let pd = fetch_at(&mut c, 0, true, 0).await;
        assert_eq!(
            (pd.high_watermark, pd.last_stable_offset),
            (3, 1),
            "without snapshot: {without_snapshot}"
        );
        assert_eq!(values(&consumed(&pd)), ["a"]);
        b.shutdown().await.unwrap();
    }
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(
        write_marker(&mut c, pid, 0, 0, false, "t", &[0]).await,
        [NONE]
    );
    let pd = fetch_at(&mut c, 0, true, 0).await;
    assert_eq!(pd.last_stable_offset, 4);
    assert_eq!(values(&consumed(&pd)), ["a", "b"]);
    b.shutdown().await.unwrap();
}

/// A follower applies the leader's transactional batches and markers to
/// its producer state and writes the same `.txnindex` entries; once it
/// leads, a transaction left open holds its LSO.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_indexes_aborts_and_leads_with_the_open_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let (running, mut c) = broker_with_topic(dir.path()).await;
    let b = running.broker.clone();
    let me = b.config.node_id;
    let view = join_two_replicas(&b, 2, 1, vec![me, 2]);
    let log = b.replicas.log("t", 0).unwrap();

    // Broker 2's batches, as its log holds them (epoch 1): producer 51
    // opens at 0, 52 at 1, 51 aborts at 2, 53 opens at 3.
    let at = |records: Bytes, base: i64| {
        let mut v = records.to_vec();
        weir_protocol::records::header::set_base_offset(&mut v, base);
        weir_protocol::records::header::set_partition_leader_epoch(&mut v, 1);
        v
    };
    let abort = RecordBatchBuilder::end_txn_marker_batch(2, 1, 51, 0, 1, &EndTxnMarker::abort(0))
        .unwrap()
        .into_bytes();
    let mut fetched = at(txn_batch(51, 0, 0, &["x"]), 0);
    fetched.extend(at(txn_batch(52, 0, 0, &["y"]), 1));
    fetched.extend_from_slice(&abort);
    let appended = b.replicas.append_as_follower(&log, &fetched, 1, 2, 1);
    assert!(matches!(appended, Some(Ok(_))), "{appended:?}");
    let more = at(txn_batch(53, 0, 0, &["z"]), 3);
    assert!(matches!(
        b.replicas.append_as_follower(&log, &more, 1, 2, 1),
        Some(Ok(_))
    ));
    // Not from another leader.
    assert!(
        b.replicas
            .append_as_follower(&log, &more, 1, 3, 1)
            .is_none()
    );
    let entry = AbortedTxn {
        producer_id: 51,
        first_offset: 0,
        last_offset: 2,
        last_stable_offset: 1,
    };
    assert_eq!(log.all_aborted_txns(), [entry]);
    assert_eq!(txn_index_files(&log.dir()), [entry.to_bytes().to_vec()]);

    // This broker leads (alone in the ISR): 52 and 53 are still open.
    *view.0.write().unwrap() = Arc::new(two_replicas(&b, me, 2, vec![me]));
    b.apply_leadership();
    let pd = fetch_at(&mut c, 0, true, 0).await;
    assert_eq!((pd.high_watermark, pd.last_stable_offset), (4, 1));
    assert_eq!(
        write_marker(&mut c, 52, 0, 0, true, "t", &[0]).await,
        [NONE]
    );
    let pd = fetch_at(&mut c, 0, true, 0).await;
    assert_eq!(pd.last_stable_offset, 3);
    assert_eq!(values(&consumed(&pd)), ["y"]);
    running.shutdown().await.unwrap();
}

/// On a leader with followers a committed transaction stays unstable
/// until the high watermark passes its marker (Kafka's unreplicated
/// transactions): a new leader without the marker would still see it open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_is_stable_only_once_its_marker_is_replicated() {
    use weir_broker::handler::produce::append_partition;
    use weir_broker::txn_partition::TxnMarker;
    let dir = tempfile::tempdir().unwrap();
    let (running, mut c) = broker_with_topic(dir.path()).await;
    let b = running.broker.clone();
    let me = b.config.node_id;
    join_two_replicas(&b, me, 1, vec![me, 2]);
    let log = b.replicas.log("t", 0).unwrap();
    let follower_at = |offset: i64| {
        b.replicas
            .record_follower_fetch(&log, 2, offset, b.now_ms(), |_| true)
            .unwrap();
    };

    let (r, _) = append_partition(&b, "t", 0, Some(&txn_batch(71, 0, 0, &["v"])));
    assert_eq!(r.base_offset, 0, "{r:?}");
    follower_at(1);
    assert_eq!(log.high_watermark(), 1);
    assert_eq!(b.replicas.last_stable_offset(&log), 0, "open");
    let marker = TxnMarker {
        producer_id: 71,
        producer_epoch: 0,
        coordinator_epoch: 0,
        commit: true,
    };
    let appended = b.replicas.append_marker(&log, marker, b.now_ms()).unwrap();
    assert_eq!((appended.offset, appended.replicated_in), (1, Some(1)));
    // Committed, but the follower does not have the marker yet.
    assert_eq!(b.replicas.last_stable_offset(&log), 0);
    let pd = fetch_at(&mut c, 0, true, 0).await;
    assert_eq!((pd.high_watermark, pd.last_stable_offset), (1, 0));
    assert!(consumed(&pd).is_empty());
    follower_at(2);
    assert_eq!(b.replicas.last_stable_offset(&log), 2);
    let pd = fetch_at(&mut c, 0, true, 0).await;
    assert_eq!(values(&consumed(&pd)), ["v"]);
    running.shutdown().await.unwrap();
}
