//! Transactions in compaction on a broker, driven by raw requests: the
//! cleaner stops at the last stable offset, and removes a transaction's
//! marker only once no batch of it is left, its delete horizon has passed
//! and the partition's oldest producer snapshot lies past it.

use crate::common::*;
use crate::txn_partitions::{
    all_records, consumed, fetch_at, produce_txn, snapshots, txn_index_files, values, write_marker,
};
use weir_protocol::messages::fetch_response::PartitionData;

/// The background cleaner stays idle (`log.cleaner.backoff.ms` of an
/// hour): the tests clean in their own time.
const IDLE_CLEANER: &[(&str, &str)] = &[("log.cleaner.backoff.ms", "3600000")];

/// A broker with an idle background cleaner and topic `t` (one partition,
/// `configs`).
async fn compacted(dir: &std::path::Path, configs: &[(&str, &str)]) -> (RunningBroker, Client) {
    let b = start_broker(dir, IDLE_CLEANER).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 1, configs).await, NONE);
    (b, c)
}

/// One record of `key` at `timestamp`, in a transactional batch of `pid`
/// when given.
fn keyed(pid: Option<i64>, key: &str, value: &str, timestamp: i64) -> Bytes {
    let mut rb = RecordBatchBuilder::new(Compression::None);
    if let Some(pid) = pid {
        rb = rb.producer(pid, 0, 0).transactional(true);
    }
    rb.push(
        timestamp,
        Some(Bytes::copy_from_slice(key.as_bytes())),
        Some(Bytes::copy_from_slice(value.as_bytes())),
        vec![],
    )
    .unwrap();
    rb.build().unwrap().into_bytes()
}

/// A read_committed Fetch of `t-0` from 0: nothing is unstable (the last
/// stable offset is the high watermark `hw`) and a consumer reads `want`.
async fn assert_stable(c: &mut Client, hw: i64, want: &[&str], what: &str) {
    let pd = fetch_at(c, 0, true, 0).await;
    assert_eq!(
        (pd.high_watermark, pd.last_stable_offset),
        (hw, hw),
        "{what}"
    );
    assert_eq!(values(&consumed(&pd)), want, "{what}");
}

/// The broker's cleaner stops at the last stable offset: with a
/// transaction open, a later record of a key does not remove the earlier
/// one (the open transaction may still abort); once it commits, it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_stops_at_the_last_stable_offset() {
    let dir = tempfile::tempdir().unwrap();
    let configs = [("cleanup.policy", "compact"), ("segment.bytes", "200")];
    let (b, mut c) = compacted(dir.path(), &configs).await;
    let keyed = |pid, key: &str, value: &str| keyed(pid, key, value, 1_700_000_000_000);
    let plain = |key: &str, value: &str| keyed(None, key, value);
    assert_eq!(produce(&mut c, "t", 0, plain("k", "old"), 1).await.0, NONE);
    let txn = keyed(Some(61), "x", "t");
    assert_eq!(produce_txn(&mut c, Some("c"), txn).await.0, NONE);
    for i in 0..6 {
        let (code, _) = produce(&mut c, "t", 0, plain(&format!("f{i}"), "filler"), 1).await;
        assert_eq!(code, NONE);
    }
    assert_eq!(produce(&mut c, "t", 0, plain("k", "new"), 1).await.0, NONE);
    for i in 0..6 {
        let (code, _) = produce(&mut c, "t", 0, plain(&format!("g{i}"), "filler"), 1).await;
        assert_eq!(code, NONE);
    }
    let log = b.broker.replicas.log("t", 0).unwrap();
    assert!(log.segment_count() > 4, "{}", log.segment_count());
    let cleaner = b.broker.metrics.cleaner().expect("a cleaner").clone();
    let tp = log.topic_partition().clone();
    let clock = CleanerClock::at(1_000);
    let clean = || {
        cleaner
            .clean_now(b.broker.replicas.logs(), &tp, &clock)
            .unwrap()
    };
    let has_old = |pd: &PartitionData| values(&all_records(pd)).contains(&"old");

    clean();
    assert!(
        has_old(&fetch_at(&mut c, 0, false, 0).await),
        "cleaned past the open transaction"
    );
    assert_eq!(
        write_marker(&mut c, 61, 0, 0, true, "t", &[0]).await,
        [NONE]
    );
    clean();
    let pd = fetch_at(&mut c, 0, true, 0).await;
    assert!(!has_old(&pd), "{:?}", all_records(&pd));
    assert!(values(&consumed(&pd)).contains(&"new"));
    b.shutdown().await.unwrap();
}

/// The transaction markers in a read_uncommitted Fetch answer (control
/// batches with a record): offset, COMMIT (true) or ABORT, delete horizon.
fn markers(pd: &PartitionData) -> Vec<(i64, bool, Option<i64>)> {
    BatchIter::new(pd.records.clone().unwrap_or_default())
        .map(|b| b.unwrap())
        .filter(|b| b.is_control() && b.header().records_count > 0)
        .map(|b| {
            let h = *b.header();
            let kind = b.end_txn_marker(&Default::default()).unwrap().kind;
            let commit = kind == weir_protocol::records::ControlRecordType::Commit;
            (
                b.base_offset(),
                commit,
                h.has_delete_horizon().then_some(h.base_timestamp),
            )
        })
        .collect()
}

/// Compaction removes a transaction's marker only once no batch of the
/// transaction is left and its delete horizon has passed, and never at or
/// past the partition's oldest producer snapshot: a rebuild of the
/// producer state from that snapshot replays the marker. Throughout,
/// read_committed reads the same records and the last stable offset
/// reaches the high watermark, also after the producer state is rebuilt
/// and after restarts with and without a snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_removes_markers_once_their_transactions_have_no_batches() {
    let dir = tempfile::tempdir().unwrap();
    // Segments of about seven batches: the first holds every transaction,
    // and none of their records is the last batch of a cleaned group
    // (which a cleaning keeps, emptied, and which keeps its marker).
    let configs = [
        ("cleanup.policy", "compact"),
        ("segment.bytes", "600"),
        ("delete.retention.ms", "1000"),
    ];
    let (b, mut c) = compacted(dir.path(), &configs).await;
    // Records stamped now, as the markers are (a segment rolls when its
    // timestamps span more than segment.ms).
    let now = b.broker.now_ms();
    let keyed = |pid, key: &str, value: &str| keyed(pid, key, value, now);
    // 0: k (plain); 1: 81 aborts a; 2: 82 commits k; the producer snapshot
    // is taken with both open.
    let plain = keyed(None, "k", "k-old");
    assert_eq!(produce(&mut c, "t", 0, plain, 1).await.0, NONE);
    for (pid, key, value) in [(81, "a", "a-aborted"), (82, "k", "k-txn")] {
        let txn = keyed(Some(pid), key, value);
        assert_eq!(produce_txn(&mut c, Some("x"), txn).await.0, NONE);
    }
    let log = b.broker.replicas.log("t", 0).unwrap();
    let tp = log.topic_partition().clone();
    b.broker.replicas.checkpoint().unwrap();
    // 3: ABORT 81; 4: COMMIT 82; 5, 6: 83 commits c; 7: k (plain), which
    // supersedes 82's record; then records that roll the segments.
    for (pid, commit) in [(81, false), (82, true)] {
        let written = write_marker(&mut c, pid, 0, 0, commit, "t", &[0]).await;
        assert_eq!(written, [NONE]);
    }
    let txn = keyed(Some(83), "c", "c-txn");
    assert_eq!(produce_txn(&mut c, Some("y"), txn).await.0, NONE);
    assert_eq!(
        write_marker(&mut c, 83, 0, 0, true, "t", &[0]).await,
        [NONE]
    );
    let plain = keyed(None, "k", "k-new");
    assert_eq!(produce(&mut c, "t", 0, plain, 1).await.0, NONE);
    for i in 0..8 {
        let filler = keyed(None, &format!("f{i}"), "filler");
        assert_eq!(produce(&mut c, "t", 0, filler, 1).await.0, NONE);
    }
    let hw = log.high_watermark();
    let bases = log.segment_base_offsets();
    assert!(bases.len() > 1 && bases[1] >= 7, "{bases:?}");
    let read_committed = [vec!["c-txn", "k-new"], vec!["filler"; 8]].concat();

    let cleaner = b.broker.metrics.cleaner().expect("a cleaner").clone();
    let clock = CleanerClock::at(now);
    let clean = || {
        cleaner
            .clean_now(b.broker.replicas.logs(), &tp, &clock)
            .unwrap()
    };
    let index_files = || txn_index_files(&log.dir()).len();
    // The records of 81 and 82 go; every marker stays (their batches were
    // read by this cleaning), and 81's entry.
    clean();
    assert_stable(&mut c, hw, &read_committed, "first cleaning").await;
    let all = fetch_at(&mut c, 0, false, 0).await;
    assert_eq!(
        markers(&all),
        [(3, false, None), (4, true, None), (6, true, None)]
    );
    assert_eq!((log.all_aborted_txns().len(), index_files()), (1, 1));

    // No batch of 81's and 82's transactions is left: their markers get a
    // delete horizon, 81's entry goes.
    clean();
    let horizon = Some(now + 1_000);
    let waiting = [(3, false, horizon), (4, true, horizon), (6, true, None)];
    assert_eq!(markers(&fetch_at(&mut c, 0, false, 0).await), waiting);
    assert_eq!((log.all_aborted_txns().len(), index_files()), (0, 0));
    assert_stable(&mut c, hw, &read_committed, "horizons set").await;

    // Past the horizon, but at or past the snapshot (offset 3): they stay,
    // and a rebuild from the snapshot ends both transactions.
    clock.set(now + 1_000);
    clean();
    b.broker.replicas.forget_producers(&tp);
    let what = "a transaction is open after a rebuild from the snapshot";
    assert_stable(&mut c, hw, &read_committed, what).await;
    assert_eq!(markers(&fetch_at(&mut c, 0, false, 0).await), waiting);

    // A snapshot past them: they go; 83's stays with its record.
    b.broker.replicas.checkpoint().unwrap();
    clean();
    assert_eq!(
        markers(&fetch_at(&mut c, 0, false, 0).await),
        [(6, true, None)]
    );
    b.broker.replicas.forget_producers(&tp);
    assert_stable(&mut c, hw, &read_committed, "markers removed").await;
    b.shutdown().await.unwrap();

    for without_snapshot in [false, true] {
        if without_snapshot {
            for p in snapshots(&dir.path().join("t-0")) {
                std::fs::remove_file(p).unwrap();
            }
        }
        let b = start_broker(dir.path(), IDLE_CLEANER).await;
        let mut c = Client::connect(b.local_addr).await;
        let what = format!("restarted, without snapshot: {without_snapshot}");
        assert_stable(&mut c, hw, &read_committed, &what).await;
        b.shutdown().await.unwrap();
    }
}
