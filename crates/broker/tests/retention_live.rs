//! Topic config changes take effect on a running broker, and DeleteRecords
//! deletes through the retention path. The broker runs on an injected
//! clock: retention and the cleaner run only when the test moves time on,
//! so "nothing happened yet" and "it happened now" are both observable.

use crate::common;
use common::*;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use weir_broker::server::start_with_clock;

/// Virtual time of the broker (ms since the epoch).
struct VirtualClock(Arc<AtomicI64>);

impl VirtualClock {
    fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

const T0: i64 = 1_700_000_000_000;

/// A broker whose retention check and cleaner are due whenever the clock
/// moves by 10 ms.
async fn start_virtual(dir: &Path) -> (RunningBroker, VirtualClock) {
    start_virtual_with(dir, &[]).await
}

/// [`start_virtual`] with more broker settings.
async fn start_virtual_with(dir: &Path, extra: &[(&str, &str)]) -> (RunningBroker, VirtualClock) {
    let time = Arc::new(AtomicI64::new(T0));
    let t = time.clone();
    let mut s = ConfigSources::default();
    s.set("listeners", "127.0.0.1:0");
    s.set("log.dirs", &dir.display().to_string());
    s.set("log.retention.check.interval.ms", "10");
    s.set("log.cleaner.backoff.ms", "10");
    for (k, v) in extra {
        s.set(k, v);
    }
    let b = start_with_clock(
        s.build().unwrap(),
        Arc::new(move || t.load(Ordering::SeqCst)),
    )
    .await
    .unwrap();
    (b, VirtualClock(time))
}

/// IncrementalAlterConfigs SET (op 0) or DELETE (op 1) on one topic.
async fn alter(c: &mut Client, topic: &str, ops: &[(&str, i8, Option<&str>)]) {
    let req = IncrementalAlterConfigsRequest {
        resources: vec![incremental_alter_configs_request::AlterConfigsResource {
            resource_type: 2,
            resource_name: topic.into(),
            configs: ops
                .iter()
                .map(
                    |(name, op, value)| incremental_alter_configs_request::AlterableConfig {
                        name: name.to_string(),
                        config_operation: *op,
                        value: value.map(String::from),
                        ..Default::default()
                    },
                )
                .collect(),
            ..Default::default()
        }],
        validate_only: false,
        ..Default::default()
    };
    match c.call(RequestBody::IncrementalAlterConfigs(req), 1).await {
        ResponseBody::IncrementalAlterConfigs(r) => {
            assert_eq!(r.responses[0].error_code, NONE, "{:?}", r.responses[0])
        }
        other => panic!("{other:?}"),
    }
}

/// Waits (bounded: 30 s real time) until `cond` holds, moving the clock on
/// by `step_ms` each round so that periodic work falls due.
async fn wait_until(
    clock: &VirtualClock,
    step_ms: i64,
    what: &str,
    mut cond: impl FnMut() -> bool,
) {
    for _ in 0..300 {
        if cond() {
            return;
        }
        clock.advance(step_ms);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// Lets the broker's periodic work (every 500 ms) run a few times with the
/// clock moved on by `step_ms` each time, for "nothing happens" checks.
async fn let_ticks_pass(clock: &VirtualClock, step_ms: i64) {
    for _ in 0..4 {
        clock.advance(step_ms);
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
}

fn files(dir: &Path, topic: &str, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join(format!("{topic}-0")))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    v.sort();
    v
}

/// One batch of `n` records with ~300-byte values, keys `k0..k{n-1}`.
fn values(n: usize, tag: &str, ts: i64) -> Bytes {
    let v = format!("{tag}-{}", "x".repeat(300));
    let vs: Vec<&str> = (0..n).map(|_| v.as_str()).collect();
    batch(&vs, ts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lowering_retention_ms_live_deletes_old_segments() {
    let dir = tempfile::tempdir().unwrap();
    let (b, clock) = start_virtual(dir.path()).await;
    let mut c = Client::connect(b.local_addr).await;
    let cfg = [("segment.bytes", "1024"), ("file.delete.delay.ms", "5000")];
    assert_eq!(create_topic(&mut c, "rt", 1, &cfg).await, NONE);
    // Two hours old, then fresh.
    for _ in 0..6 {
        let r = produce(&mut c, "rt", 0, values(2, "old", T0 - 7_200_000), -1).await;
        assert_eq!(r.0, NONE);
    }
    for _ in 0..3 {
        let r = produce(&mut c, "rt", 0, values(2, "new", T0), -1).await;
        assert_eq!(r.0, NONE);
    }
    let log = b.broker.replicas.log("rt", 0).unwrap();
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 5, "{bases:?}");
    // The default 7 days keeps everything.
    let_ticks_pass(&clock, 20).await;
    assert_eq!(log.segment_base_offsets(), bases);
    assert_eq!(list_offset(&mut c, "rt", -2).await.1, 0);

    alter(&mut c, "rt", &[("retention.ms", 0, Some("3600000"))]).await;
    wait_until(&clock, 20, "old segments deleted", || {
        log.log_start_offset() > 0
    })
    .await;
    // Exactly the segments holding only two-hour-old records went (each
    // batch is 2 records; 6 old batches = offsets 0..12).
    let start = log.log_start_offset();
    assert!(start <= 12, "a fresh segment was deleted: start {start}");
    assert!(
        log.segment_base_offsets().iter().all(|&b| b >= start),
        "{:?}",
        log.segment_base_offsets()
    );
    let fresh_base = bases.iter().copied().filter(|&b| b <= 12).max().unwrap();
    assert_eq!(start, fresh_base, "{bases:?}");
    assert_eq!(list_offset(&mut c, "rt", -2).await.1, start);
    // Renamed, not yet unlinked, until file.delete.delay.ms has passed. The
    // rename follows the log start move and its checkpoint, so wait for it
    // (in real time: the virtual clock stays where it is).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while files(dir.path(), "rt", ".deleted").is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the deleted segments were never renamed .deleted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    clock.advance(5_000);
    wait_until(&clock, 20, ".deleted files unlinked", || {
        files(dir.path(), "rt", ".deleted").is_empty()
    })
    .await;
    let (err, _, got) = fetch(&mut c, 12, "rt", Uuid::ZERO, start, 0).await;
    assert_eq!(err, NONE);
    assert_eq!(got.first().map(|x| x.0), Some(start));
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setting_retention_bytes_live_deletes_oldest_segments() {
    let dir = tempfile::tempdir().unwrap();
    let (b, clock) = start_virtual(dir.path()).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(
        create_topic(&mut c, "rb", 1, &[("segment.bytes", "1024")]).await,
        NONE
    );
    for _ in 0..10 {
        assert_eq!(
            produce(&mut c, "rb", 0, values(2, "v", T0), -1).await.0,
            NONE
        );
    }
    let log = b.broker.replicas.log("rb", 0).unwrap();
    let before = log.segment_base_offsets();
    assert!(before.len() >= 4, "{before:?}");
    let_ticks_pass(&clock, 20).await;
    assert_eq!(log.segment_base_offsets(), before);

    alter(&mut c, "rb", &[("retention.bytes", 0, Some("2048"))]).await;
    wait_until(&clock, 20, "segments over retention.bytes deleted", || {
        log.segment_count() < before.len()
    })
    .await;
    // As Kafka: oldest first, and the log stays at or above the limit.
    let after = log.segment_base_offsets();
    assert_eq!(&before[before.len() - after.len()..], after.as_slice());
    assert!(log.size_bytes() >= 2048, "{}", log.size_bytes());
    let summaries = log.segment_summaries();
    assert!(log.size_bytes() - summaries[0].size < 2048 || after.len() == 1);
    assert_eq!(list_offset(&mut c, "rb", -2).await.1, after[0]);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_segment_bytes_live_applies_to_the_next_roll() {
    let dir = tempfile::tempdir().unwrap();
    let (b, _clock) = start_virtual(dir.path()).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "sb", 1, &[]).await, NONE);
    for _ in 0..6 {
        assert_eq!(
            produce(&mut c, "sb", 0, values(1, "a", T0), -1).await.0,
            NONE
        );
    }
    let log = b.broker.replicas.log("sb", 0).unwrap();
    assert_eq!(log.segment_count(), 1);
    let first_size = log.size_bytes();
    assert!(first_size > 1024, "{first_size}");

    alter(&mut c, "sb", &[("segment.bytes", 0, Some("1024"))]).await;
    for _ in 0..9 {
        assert_eq!(
            produce(&mut c, "sb", 0, values(1, "b", T0), -1).await.0,
            NONE
        );
    }
    let s = log.segment_summaries();
    assert!(s.len() >= 4, "{s:?}");
    // The segment written before the change is not rewritten; it rolls at
    // the first append after the change (it is already over the limit).
    assert_eq!((s[0].base_offset, s[0].size), (0, first_size));
    assert_eq!(s[1].base_offset, 6);
    for seg in &s[1..] {
        assert!(seg.size <= 1024, "{s:?}");
    }
    b.shutdown().await.unwrap();
}

/// Every record of partition 0 of `pol` from offset 0, with its offset.
async fn read_all(c: &mut Client, id: Uuid) -> Vec<(i64, String)> {
    let (err, _, v) = fetch(c, 12, "pol", id, 0, 0).await;
    assert_eq!(err, NONE);
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_cleanup_policy_to_compact_live_compacts_the_topic() {
    let dir = tempfile::tempdir().unwrap();
    let (b, clock) = start_virtual(dir.path()).await;
    let mut c = Client::connect(b.local_addr).await;
    let cfg = [
        ("segment.bytes", "1024"),
        ("min.cleanable.dirty.ratio", "0.01"),
    ];
    assert_eq!(create_topic(&mut c, "pol", 1, &cfg).await, NONE);
    // Keys k0, k1 written 8 times each (2 records per batch).
    for round in 0..8 {
        let r = produce(&mut c, "pol", 0, values(2, &format!("r{round}"), T0), -1).await;
        assert_eq!(r.0, NONE);
    }
    let id = metadata(&mut c, Some(vec!["pol"]), false).await.topics[0].topic_id;
    let all = read_all(&mut c, id).await;
    assert_eq!(all.len(), 16);
    // With cleanup.policy=delete the cleaner leaves the topic alone.
    let_ticks_pass(&clock, 20).await;
    assert_eq!(read_all(&mut c, id).await, all);

    alter(&mut c, "pol", &[("cleanup.policy", 0, Some("compact"))]).await;
    let log = b.broker.replicas.log("pol", 0).unwrap();
    // Records below the active segment (never cleaned), per key (k0 at
    // even offsets, k1 at odd ones).
    let below_active_per_key = |got: &[(i64, String)]| {
        let active = *log.segment_base_offsets().last().unwrap();
        let mut per_key = [0, 0];
        for (o, _) in got.iter().filter(|(o, _)| *o < active) {
            per_key[(*o % 2) as usize] += 1;
        }
        per_key
    };
    let mut got = Vec::new();
    for _ in 0..300 {
        got = read_all(&mut c, id).await;
        if below_active_per_key(&got).iter().all(|&n| n <= 1) {
            break;
        }
        clock.advance(20);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Below the active segment each key has only its latest record left;
    // everything still there is at its old offset; the latest (14: k0,
    // 15: k1) are there.
    assert!(
        below_active_per_key(&got).iter().all(|&n| n <= 1),
        "not compacted: {got:?}"
    );
    assert!(got.len() < all.len(), "{got:?}");
    for rec in &got {
        assert!(all.contains(rec), "{rec:?} was not written at that offset");
    }
    assert!(got.contains(&all[14]) && got.contains(&all[15]), "{got:?}");
    b.shutdown().await.unwrap();
}

/// A long cleaning does not hold up the periodic log work: a segment
/// rolls by `segment.ms` while the cleaner is still busy with another
/// topic (retention and the cleaner run apart from rolls, flushes and
/// checkpoints).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segment_ms_rolls_while_the_cleaner_is_busy() {
    let dir = tempfile::tempdir().unwrap();
    // 1000 bytes/s of cleaner I/O at the broker's (virtual) clock: about
    // 25 s of cleaning for the topic below unless the test moves time on.
    let (b, clock) = start_virtual_with(
        dir.path(),
        &[("log.cleaner.io.max.bytes.per.second", "1000")],
    )
    .await;
    let mut c = Client::connect(b.local_addr).await;
    let cfg = [
        ("cleanup.policy", "compact"),
        ("segment.bytes", "1024"),
        ("min.cleanable.dirty.ratio", "0.01"),
    ];
    assert_eq!(create_topic(&mut c, "slow", 1, &cfg).await, NONE);
    for round in 0..40 {
        let r = produce(&mut c, "slow", 0, values(2, &format!("r{round}"), T0), -1).await;
        assert_eq!(r.0, NONE);
    }
    assert_eq!(
        create_topic(&mut c, "rolls", 1, &[("segment.ms", "1000")]).await,
        NONE
    );
    assert_eq!(
        produce(&mut c, "rolls", 0, values(1, "a", T0), -1).await.0,
        NONE
    );
    let rolls = b.broker.replicas.log("rolls", 0).unwrap();
    assert_eq!(rolls.segment_base_offsets().len(), 1);
    let cleaner = b.broker.metrics.cleaner().expect("cleaner enabled").clone();
    // The cleaner starts on "slow" (its backoff is 10 ms of broker time).
    wait_until(&clock, 1, "the cleaner to start", || {
        cleaner.cleanings_in_progress() == 1
    })
    .await;
    // segment.ms of "rolls" passes; its segment must roll while the
    // cleaning goes on.
    clock.advance(1_100);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while rolls.segment_base_offsets().len() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no roll by segment.ms while the cleaner was busy"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        cleaner.cleanings_in_progress(),
        1,
        "the cleaning ended first"
    );
    // Time moves on: the throttle lets the cleaning finish.
    clock.advance(3_600_000);
    let done = || cleaner.metrics().cleanings.load(Ordering::SeqCst) >= 1;
    wait_until(&clock, 1_000, "the cleaning to finish", done).await;
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_deletes_segments_through_retention() {
    let dir = tempfile::tempdir().unwrap();
    let (b, clock) = start_virtual(dir.path()).await;
    let mut c = Client::connect(b.local_addr).await;
    let cfg = [("segment.bytes", "1024"), ("file.delete.delay.ms", "5000")];
    assert_eq!(create_topic(&mut c, "dr", 1, &cfg).await, NONE);
    for _ in 0..10 {
        assert_eq!(
            produce(&mut c, "dr", 0, values(2, "v", T0), -1).await.0,
            NONE
        );
    }
    let log = b.broker.replicas.log("dr", 0).unwrap();
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 4, "{bases:?}");
    let target = bases[2] + 1;
    let logs_before = files(dir.path(), "dr", ".log");
    // A read that started before the deletion holds the first segment.
    let held = log.read(0, 1 << 20, log.high_watermark(), true).unwrap();
    let held_bytes = held.regions[0].read_to_vec().unwrap();

    let req = DeleteRecordsRequest {
        topics: vec![delete_records_request::DeleteRecordsTopic {
            name: "dr".into(),
            partitions: vec![delete_records_request::DeleteRecordsPartition {
                partition_index: 0,
                offset: target,
                ..Default::default()
            }],
            ..Default::default()
        }],
        timeout_ms: 1000,
        ..Default::default()
    };
    match c.call(RequestBody::DeleteRecords(req), 2).await {
        ResponseBody::DeleteRecords(r) => {
            let p = &r.topics[0].partitions[0];
            assert_eq!((p.error_code, p.low_watermark), (NONE, target));
        }
        other => panic!("{other:?}"),
    }
    // The log start moved at once and is checkpointed; no segment file is
    // touched until retention runs.
    assert_eq!(list_offset(&mut c, "dr", -2).await.1, target);
    let ck = std::fs::read_to_string(dir.path().join("log-start-offset-checkpoint")).unwrap();
    assert!(
        ck.lines().any(|l| l == format!("dr 0 {target}")),
        "checkpoint right after DeleteRecords:\n{ck}"
    );
    assert_eq!(fetch(&mut c, 12, "dr", Uuid::ZERO, bases[1], 0).await.0, 1);
    assert_eq!(files(dir.path(), "dr", ".log"), logs_before);

    // Retention renames the two segments below the log start `.deleted`
    // after checkpointing the log start.
    clock.advance(20);
    wait_until(&clock, 0, "segments below the log start renamed", || {
        files(dir.path(), "dr", ".log.deleted").len() == 2
    })
    .await;
    assert_eq!(log.segment_base_offsets(), bases[2..].to_vec());
    let ck = std::fs::read_to_string(dir.path().join("log-start-offset-checkpoint")).unwrap();
    assert!(
        ck.lines().any(|l| l == format!("dr 0 {target}")),
        "checkpoint:\n{ck}"
    );
    assert_eq!(held.regions[0].read_to_vec().unwrap(), held_bytes);
    // Unlinked once file.delete.delay.ms has passed; the reader is unharmed.
    clock.advance(5_000);
    wait_until(&clock, 0, ".deleted files unlinked", || {
        files(dir.path(), "dr", ".deleted").is_empty()
    })
    .await;
    assert_eq!(held.regions[0].read_to_vec().unwrap(), held_bytes);
    let (err, _, got) = fetch(&mut c, 12, "dr", Uuid::ZERO, target, 0).await;
    assert_eq!(err, NONE);
    assert!(got.iter().any(|x| x.0 == target), "{got:?}");
    b.shutdown().await.unwrap();
}
