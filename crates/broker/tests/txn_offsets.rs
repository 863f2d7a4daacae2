//! Consumer group offsets committed inside transactions (TxnOffsetCommit)
//! against an in-process broker with raw requests: the commit is a
//! transactional batch in `__consumer_offsets`, pending (OffsetFetch with
//! `require_stable` answers UNSTABLE_OFFSET_COMMIT) until the producer's
//! marker lands on that partition; COMMIT makes the offsets visible, ABORT
//! keeps the old ones; a restart between the commit and the marker replays
//! the pending offsets from the log; refused commits write nothing.

use crate::common;

use common::*;
use weir_protocol::error_code::ErrorCode;

const GROUP_CONFIG: &[(&str, &str)] = &[
    ("group.initial.rebalance.delay.ms", "0"),
    ("offsets.topic.num.partitions", "3"),
];
const OFFSETS: &str = "__consumer_offsets";
const PID: i64 = 7000;
const EPOCH: i16 = 2;
/// The offsets most tests commit in a transaction: t-0 at 20, t-1 at 5.
const TXN_OFFSETS: &[(&str, i32, i64)] = &[("t", 0, 20), ("t", 1, 5)];

fn code(e: ErrorCode) -> i16 {
    e.code()
}

/// The identity a TxnOffsetCommit carries besides its offsets.
struct Txn<'a> {
    group: &'a str,
    producer_id: i64,
    producer_epoch: i16,
    generation: i32,
    member: &'a str,
    instance: Option<&'a str>,
}

impl<'a> Txn<'a> {
    /// A producer outside group management (generation -1, no member).
    fn standalone(group: &'a str) -> Self {
        Txn {
            group,
            producer_id: PID,
            producer_epoch: EPOCH,
            generation: -1,
            member: "",
            instance: None,
        }
    }
}

/// TxnOffsetCommit of (topic, partition, offset) entries; the error code of
/// every partition in answer order.
async fn txn_commit(
    c: &mut Client,
    version: i16,
    t: &Txn<'_>,
    offsets: &[(&str, i32, i64)],
) -> Vec<(String, i32, i16)> {
    let mut topics: Vec<txn_offset_commit_request::TxnOffsetCommitRequestTopic> = Vec::new();
    for &(topic, partition, offset) in offsets {
        let p = txn_offset_commit_request::TxnOffsetCommitRequestPartition {
            partition_index: partition,
            committed_offset: offset,
            committed_leader_epoch: -1,
            committed_metadata: Some(format!("txn-{offset}")),
            ..Default::default()
        };
        match topics.iter_mut().find(|x| x.name == topic) {
            Some(x) => x.partitions.push(p),
            None => topics.push(txn_offset_commit_request::TxnOffsetCommitRequestTopic {
                name: topic.into(),
                partitions: vec![p],
                ..Default::default()
            }),
        }
    }
    let req = TxnOffsetCommitRequest {
        transactional_id: "tx".into(),
        group_id: t.group.into(),
        producer_id: t.producer_id,
        producer_epoch: t.producer_epoch,
        generation_id: if version >= 3 { t.generation } else { -1 },
        member_id: if version >= 3 {
            t.member.into()
        } else {
            String::new()
        },
        group_instance_id: if version >= 3 {
            t.instance.map(str::to_string)
        } else {
            None
        },
        topics,
        ..Default::default()
    };
    match c.call(RequestBody::TxnOffsetCommit(req), version).await {
        ResponseBody::TxnOffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (t.name.clone(), p.partition_index, p.error_code))
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

/// The per-partition error codes of a commit, in order.
fn errors(r: &[(String, i32, i16)]) -> Vec<i16> {
    r.iter().map(|(_, _, e)| *e).collect()
}

async fn plain_commit(c: &mut Client, group: &str, topic: &str, partition: i32, offset: i64) {
    let req = OffsetCommitRequest {
        group_id: group.into(),
        generation_id_or_member_epoch: -1,
        topics: vec![offset_commit_request::OffsetCommitRequestTopic {
            name: topic.into(),
            partitions: vec![offset_commit_request::OffsetCommitRequestPartition {
                partition_index: partition,
                committed_offset: offset,
                committed_leader_epoch: -1,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::OffsetCommit(req), 8).await {
        ResponseBody::OffsetCommit(r) => assert_eq!(r.topics[0].partitions[0].error_code, NONE),
        other => panic!("{other:?}"),
    }
}

/// OffsetFetch of `partitions` of `topic`: (partition, offset, error) in
/// answer order. v7 asks for one group, v8+ for a list of groups.
async fn fetch_offsets(
    c: &mut Client,
    version: i16,
    group: &str,
    require_stable: bool,
    topic: &str,
    partitions: &[i32],
) -> Vec<(i32, i64, i16)> {
    let req = if version >= 8 {
        OffsetFetchRequest {
            groups: vec![offset_fetch_request::OffsetFetchRequestGroup {
                group_id: group.into(),
                topics: Some(vec![offset_fetch_request::OffsetFetchRequestTopics {
                    name: topic.into(),
                    partition_indexes: partitions.to_vec(),
                    ..Default::default()
                }]),
                ..Default::default()
            }],
            require_stable,
            ..Default::default()
        }
    } else {
        OffsetFetchRequest {
            group_id: group.into(),
            topics: Some(vec![offset_fetch_request::OffsetFetchRequestTopic {
                name: topic.into(),
                partition_indexes: partitions.to_vec(),
                ..Default::default()
            }]),
            require_stable,
            ..Default::default()
        }
    };
    match c.call(RequestBody::OffsetFetch(req), version).await {
        ResponseBody::OffsetFetch(r) if version >= 8 => {
            assert_eq!(r.groups[0].error_code, NONE);
            r.groups[0].topics[0]
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.committed_offset, p.error_code))
                .collect()
        }
        ResponseBody::OffsetFetch(r) => {
            assert_eq!(r.error_code, NONE);
            r.topics[0]
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.committed_offset, p.error_code))
                .collect()
        }
        other => panic!("{other:?}"),
    }
}

/// (plain fetch, stable fetch) of partitions 0 and 1 of "t" via v8.
async fn both(c: &mut Client, group: &str) -> (Vec<(i32, i64, i16)>, Vec<(i32, i64, i16)>) {
    (
        fetch_offsets(c, 8, group, false, "t", &[0, 1]).await,
        fetch_offsets(c, 8, group, true, "t", &[0, 1]).await,
    )
}

fn offsets_partition(b: &RunningBroker, group: &str) -> i32 {
    b.broker.groups().unwrap().partition_for(group)
}

/// The end offset of the group's `__consumer_offsets` partition.
fn offsets_end(b: &RunningBroker, group: &str) -> i64 {
    let p = offsets_partition(b, group);
    b.broker
        .replicas
        .log(OFFSETS, p)
        .map_or(0, |l| l.log_end_offset())
}

/// The batches of the group's `__consumer_offsets` partition:
/// (producer id, transactional, control, record count).
fn offsets_batches(b: &RunningBroker, group: &str) -> Vec<(i64, bool, bool, i32)> {
    let p = offsets_partition(b, group);
    let log = b.broker.replicas.log(OFFSETS, p).unwrap();
    let read = log
        .read(log.log_start_offset(), 1 << 20, log.log_end_offset(), true)
        .unwrap();
    let mut data = Vec::new();
    for region in &read.regions {
        data.extend_from_slice(&region.read_to_vec().unwrap());
    }
    BatchIter::new(data)
        .map(|batch| {
            let batch = batch.unwrap();
            let h = batch.header();
            (
                h.producer_id,
                batch.is_transactional(),
                batch.is_control(),
                h.records_count,
            )
        })
        .collect()
}

/// Sends `producer_id`'s COMMIT or ABORT marker for the group's
/// `__consumer_offsets` partition with WriteTxnMarkers, as the transaction
/// coordinator does; the handler appends it and completes the producer's
/// pending offsets there.
async fn write_marker(
    c: &mut Client,
    b: &RunningBroker,
    group: &str,
    producer_id: i64,
    committed: bool,
) {
    let req = WriteTxnMarkersRequest {
        markers: vec![write_txn_markers_request::WritableTxnMarker {
            producer_id,
            producer_epoch: EPOCH,
            transaction_result: committed,
            topics: vec![write_txn_markers_request::WritableTxnMarkerTopic {
                name: OFFSETS.into(),
                partition_indexes: vec![offsets_partition(b, group)],
                ..Default::default()
            }],
            coordinator_epoch: 0,
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.call(RequestBody::WriteTxnMarkers(req), 1).await {
        ResponseBody::WriteTxnMarkers(r) => {
            assert_eq!(r.markers[0].topics[0].partitions[0].error_code, NONE)
        }
        other => panic!("{other:?}"),
    }
}

/// The last stable offset of the group's `__consumer_offsets` partition.
fn offsets_lso(b: &RunningBroker, group: &str) -> i64 {
    let p = offsets_partition(b, group);
    let log = b.broker.replicas.log(OFFSETS, p).unwrap();
    b.broker.replicas.last_stable_offset(&log)
}

/// A broker with `config` on `dir` (started again on the same data), and
/// a client.
async fn start(dir: &std::path::Path, config: &[(&str, &str)]) -> (RunningBroker, Client) {
    let b = start_broker(dir, config).await;
    let c = Client::connect(b.local_addr).await;
    (b, c)
}

/// A broker with `config` and topic `t` of two partitions.
async fn setup_with(dir: &std::path::Path, config: &[(&str, &str)]) -> (RunningBroker, Client) {
    let (b, mut c) = start(dir, config).await;
    assert_eq!(create_topic(&mut c, "t", 2, &[]).await, NONE);
    (b, c)
}

async fn setup(dir: &std::path::Path) -> (RunningBroker, Client) {
    setup_with(dir, GROUP_CONFIG).await
}

/// A TxnOffsetCommit that every partition accepts.
async fn txn_commit_ok(c: &mut Client, version: i16, t: &Txn<'_>, offsets: &[(&str, i32, i64)]) {
    let r = txn_commit(c, version, t, offsets).await;
    assert!(errors(&r).iter().all(|&e| e == NONE), "{r:?}");
}

/// t-0 and t-1 of `group` with a transaction's offsets pending: OffsetFetch
/// answers the committed `offsets`, and UNSTABLE_OFFSET_COMMIT with
/// `require_stable`.
async fn assert_pending(c: &mut Client, group: &str, offsets: [i64; 2]) {
    let unstable = code(ErrorCode::UnstableOffsetCommit);
    let (plain, stable) = both(c, group).await;
    assert_eq!(plain, vec![(0, offsets[0], NONE), (1, offsets[1], NONE)]);
    assert_eq!(stable, vec![(0, -1, unstable), (1, -1, unstable)]);
}

/// t-0 and t-1 of `group` with nothing pending: OffsetFetch answers the
/// committed `offsets`, with and without `require_stable`.
async fn assert_committed(c: &mut Client, group: &str, offsets: [i64; 2]) {
    let (plain, stable) = both(c, group).await;
    assert_eq!(plain, vec![(0, offsets[0], NONE), (1, offsets[1], NONE)]);
    assert_eq!(stable, plain);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn txn_offsets_are_pending_until_the_commit_marker() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c) = setup(dir.path()).await;
    plain_commit(&mut c, "g", "t", 0, 10).await;
    let before = offsets_batches(&b, "g").len();
    let txn_start = offsets_end(&b, "g");
    assert_eq!(offsets_lso(&b, "g"), txn_start);
    txn_commit_ok(&mut c, 3, &Txn::standalone("g"), TXN_OFFSETS).await;
    // One transactional batch of the producer with both records, which
    // opens its transaction on the partition: the last stable offset stays
    // at the batch until the marker.
    assert_eq!(offsets_batches(&b, "g")[before..], [(PID, true, false, 2)]);
    assert_eq!(offsets_lso(&b, "g"), txn_start);

    assert_pending(&mut c, "g", [10, -1]).await;
    // v7 (one group) answers per partition too.
    let unstable = code(ErrorCode::UnstableOffsetCommit);
    assert_eq!(
        fetch_offsets(&mut c, 7, "g", true, "t", &[0, 1]).await,
        vec![(0, -1, unstable), (1, -1, unstable)]
    );
    // Another group is not affected.
    plain_commit(&mut c, "other", "t", 0, 3).await;
    assert_eq!(
        fetch_offsets(&mut c, 8, "other", true, "t", &[0]).await,
        vec![(0, 3, NONE)]
    );

    write_marker(&mut c, &b, "g", PID, true).await;
    assert_committed(&mut c, "g", [20, 5]).await;
    assert_eq!(
        offsets_batches(&b, "g")[before..],
        [(PID, true, false, 2), (PID, true, true, 1)]
    );
    assert_eq!(offsets_lso(&b, "g"), offsets_end(&b, "g"));
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_marker_keeps_the_old_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c) = setup(dir.path()).await;
    plain_commit(&mut c, "g", "t", 0, 10).await;
    // v0 carries no member fields at all.
    txn_commit_ok(&mut c, 0, &Txn::standalone("g"), TXN_OFFSETS).await;
    write_marker(&mut c, &b, "g", PID, false).await;
    assert_committed(&mut c, "g", [10, -1]).await;
    b.shutdown().await.unwrap();
}

/// A plain OffsetCommit written after the transactional one stays when the
/// transaction commits (the later record in the log wins).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn later_plain_commit_stays_over_the_committed_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c) = setup(dir.path()).await;
    txn_commit_ok(
        &mut c,
        4,
        &Txn::standalone("g"),
        &[("t", 0, 20), ("t", 1, 21)],
    )
    .await;
    plain_commit(&mut c, "g", "t", 0, 30).await;
    write_marker(&mut c, &b, "g", PID, true).await;
    assert_committed(&mut c, "g", [30, 21]).await;
    b.shutdown().await.unwrap();
    // The replayed log agrees.
    let (b, mut c) = start(dir.path(), GROUP_CONFIG).await;
    assert_committed(&mut c, "g", [30, 21]).await;
    b.shutdown().await.unwrap();
}

/// A restart between TxnOffsetCommit and the marker: the load replays the
/// transactional batches as pending, markers already in the log complete
/// theirs, and a marker written after the restart completes the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_offsets_are_replayed_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c) = setup(dir.path()).await;
    plain_commit(&mut c, "g", "t", 0, 10).await;
    txn_commit_ok(&mut c, 3, &Txn::standalone("g"), TXN_OFFSETS).await;
    // Two more producers, completed before the restart: one committed,
    // one aborted.
    for (group, pid, committed) in [("done", PID + 1, true), ("dropped", PID + 2, false)] {
        let t = Txn {
            producer_id: pid,
            ..Txn::standalone(group)
        };
        txn_commit_ok(&mut c, 3, &t, &[("t", 0, 7)]).await;
        write_marker(&mut c, &b, group, pid, committed).await;
    }
    b.shutdown().await.unwrap();

    let (b, mut c) = start(dir.path(), GROUP_CONFIG).await;
    assert_pending(&mut c, "g", [10, -1]).await;
    assert_eq!(
        fetch_offsets(&mut c, 8, "done", true, "t", &[0]).await,
        vec![(0, 7, NONE)]
    );
    assert_eq!(
        fetch_offsets(&mut c, 8, "dropped", true, "t", &[0]).await,
        vec![(0, -1, NONE)]
    );
    write_marker(&mut c, &b, "g", PID, true).await;
    assert_committed(&mut c, "g", [20, 5]).await;
    b.shutdown().await.unwrap();
}

/// Refused commits answer Kafka's error codes and append nothing to
/// `__consumer_offsets`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_txn_offset_commits_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c) = setup(dir.path()).await;
    // A group with one member at generation 1.
    let join = |member: &str| {
        RequestBody::JoinGroup(JoinGroupRequest {
            group_id: "g".into(),
            session_timeout_ms: 30_000,
            rebalance_timeout_ms: 30_000,
            member_id: member.into(),
            group_instance_id: Some("instance-1".into()),
            protocol_type: "consumer".into(),
            protocols: vec![join_group_request::JoinGroupRequestProtocol {
                name: "range".into(),
                metadata: Bytes::from_static(b"meta"),
                ..Default::default()
            }],
            ..Default::default()
        })
    };
    let (generation, member) = match c.call(join(""), 7).await {
        ResponseBody::JoinGroup(r) => {
            assert_eq!(r.error_code, NONE);
            (r.generation_id, r.member_id)
        }
        other => panic!("{other:?}"),
    };
    // Accepted once, so the producer's epoch is known to the partition.
    let ok = Txn {
        generation,
        member: &member,
        instance: Some("instance-1"),
        ..Txn::standalone("g")
    };
    txn_commit_ok(&mut c, 3, &ok, &[("t", 0, 1)]).await;

    /// (what is wrong, the commit, its offsets, the expected error codes)
    type Case<'a> = (&'a str, Txn<'a>, Vec<(&'a str, i32, i64)>, Vec<i16>);
    let cases: Vec<Case<'_>> = vec![
        (
            "unknown group with a generation",
            Txn {
                generation: 1,
                member: "m",
                ..Txn::standalone("nobody")
            },
            vec![("t", 0, 5)],
            vec![code(ErrorCode::IllegalGeneration)],
        ),
        (
            "stale generation",
            Txn {
                generation: generation - 1,
                ..ok
            },
            vec![("t", 0, 5)],
            vec![code(ErrorCode::IllegalGeneration)],
        ),
        (
            "unknown member",
            Txn {
                member: "ghost",
                instance: None,
                ..ok
            },
            vec![("t", 0, 5)],
            vec![code(ErrorCode::UnknownMemberId)],
        ),
        (
            "another member id for the static instance",
            Txn {
                member: "ghost",
                ..ok
            },
            vec![("t", 0, 5)],
            vec![code(ErrorCode::FencedInstanceId)],
        ),
        (
            "older producer epoch",
            Txn {
                producer_epoch: EPOCH - 1,
                ..ok
            },
            vec![("t", 0, 5), ("t", 1, 5)],
            vec![code(ErrorCode::InvalidProducerEpoch); 2],
        ),
        (
            "unknown topic, and an error for the whole commit",
            Txn {
                generation: generation + 1,
                ..ok
            },
            vec![("nope", 0, 5), ("t", 0, 5)],
            vec![
                code(ErrorCode::UnknownTopicOrPartition),
                code(ErrorCode::IllegalGeneration),
            ],
        ),
        (
            "unknown partition only",
            Txn { ..ok },
            vec![("t", 9, 5)],
            vec![code(ErrorCode::UnknownTopicOrPartition)],
        ),
        (
            "empty group id",
            Txn::standalone(""),
            vec![("t", 0, 5)],
            vec![code(ErrorCode::InvalidGroupId)],
        ),
    ];
    for (name, t, offsets, want) in &cases {
        let ends: Vec<i64> = ["g", "nobody"].iter().map(|g| offsets_end(&b, g)).collect();
        let got = txn_commit(&mut c, 3, t, offsets).await;
        assert_eq!(&errors(&got), want, "{name}");
        let after: Vec<i64> = ["g", "nobody"].iter().map(|g| offsets_end(&b, g)).collect();
        assert_eq!(ends, after, "{name}: nothing appended");
    }
    assert_eq!(
        fetch_offsets(&mut c, 8, "nobody", false, "t", &[0]).await,
        vec![(0, -1, NONE)]
    );
    b.shutdown().await.unwrap();
}

/// `__consumer_offsets` in 200-byte segments, so the cleaner may compact
/// everything but the last few commits.
fn small_segments() -> Vec<(&'static str, &'static str)> {
    GROUP_CONFIG
        .iter()
        .copied()
        .chain([("offsets.topic.segment.bytes", "200")])
        .collect()
}

/// Commits more offsets of t-1 for `group`, so its earlier records are in
/// segments the cleaner may compact, then compacts its partition now;
/// returns the partition's batches after the compaction.
async fn roll_and_compact(
    c: &mut Client,
    b: &RunningBroker,
    group: &str,
) -> Vec<(i64, bool, bool, i32)> {
    for i in 0..3 {
        plain_commit(c, group, "t", 1, i).await;
    }
    let tp = weir_storage::TopicPartition::new(OFFSETS, offsets_partition(b, group));
    let cleaner = b.broker.metrics.cleaner().expect("a log cleaner");
    cleaner
        .clean_now(
            b.broker.replicas.logs(),
            &tp,
            &CleanerClock::at(b.broker.now_ms()),
        )
        .unwrap();
    offsets_batches(b, group)
}

/// The records of an aborted transaction must not displace, in a
/// compaction, the plain commit of the same partition before them: the
/// restarted coordinator would load no offset where the live one had one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_keeps_a_plain_commit_under_an_aborted_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c) = setup_with(dir.path(), &small_segments()).await;
    plain_commit(&mut c, "a", "t", 0, 10).await;
    txn_commit_ok(&mut c, 3, &Txn::standalone("a"), &[("t", 0, 20)]).await;
    write_marker(&mut c, &b, "a", PID, false).await;
    let before = offsets_batches(&b, "a").len();
    let after = roll_and_compact(&mut c, &b, "a").await;
    // The compaction ran: the superseded commits of t-1 are gone, and so is
    // the aborted transaction's record (its marker stays).
    assert!(after.len() < before + 3, "{after:?}");
    assert!(
        !after
            .iter()
            .any(|&(pid, txn, control, _)| pid == PID && txn && !control),
        "{after:?}"
    );
    let want = vec![(0, 10, NONE)];
    assert_eq!(fetch_offsets(&mut c, 8, "a", true, "t", &[0]).await, want);
    b.shutdown().await.unwrap();

    let (b, mut c) = start(dir.path(), &small_segments()).await;
    assert_eq!(
        fetch_offsets(&mut c, 8, "a", true, "t", &[0]).await,
        want,
        "after a restart"
    );
    b.shutdown().await.unwrap();
}

/// A compaction must not clean past an open transaction (Kafka cleans
/// below the first unstable offset only): the open transaction's record
/// would displace the plain commit before it, which the transaction's
/// ABORT must leave in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_stops_at_an_open_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c) = setup_with(dir.path(), &small_segments()).await;
    plain_commit(&mut c, "o", "t", 0, 30).await;
    txn_commit_ok(&mut c, 3, &Txn::standalone("o"), &[("t", 0, 40)]).await;
    // Nothing at or above the open transaction is cleanable; the plain
    // commit below it is the only record of its key there.
    roll_and_compact(&mut c, &b, "o").await;
    b.shutdown().await.unwrap();

    let (b, mut c) = start(dir.path(), &small_segments()).await;
    assert_eq!(
        fetch_offsets(&mut c, 8, "o", true, "t", &[0]).await,
        vec![(0, -1, code(ErrorCode::UnstableOffsetCommit))]
    );
    write_marker(&mut c, &b, "o", PID, false).await;
    assert_eq!(
        fetch_offsets(&mut c, 8, "o", true, "t", &[0]).await,
        vec![(0, 30, NONE)],
        "the plain commit under the aborted transaction"
    );
    b.shutdown().await.unwrap();
}
