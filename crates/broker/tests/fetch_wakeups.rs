//! Per-partition wake-ups of parked long-poll fetches: an append wakes only
//! the fetches waiting on its partition (`weir_fetch_wakeups_total`).

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::common::*;

/// Fetches one partition of `topic` (v12, by name); returns (error, values).
async fn fetch_partition(
    c: &mut Client,
    topic: &str,
    partition: i32,
    max_wait_ms: i32,
) -> (i16, Vec<String>) {
    let req = FetchRequest {
        replica_id: -1,
        max_wait_ms,
        min_bytes: 1,
        max_bytes: 1 << 20,
        session_epoch: -1,
        topics: vec![fetch_request::FetchTopic {
            topic: topic.to_string(),
            partitions: vec![fetch_request::FetchPartition {
                partition,
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
    let resp = match c.call(RequestBody::Fetch(req), 12).await {
        ResponseBody::Fetch(r) => r,
        other => panic!("{other:?}"),
    };
    let p = &resp.responses[0].partitions[0];
    let mut values = Vec::new();
    for b in BatchIter::new(p.records.clone().unwrap_or_default()) {
        for r in b.unwrap().collect_records(&Default::default()).unwrap() {
            values.push(String::from_utf8_lossy(&r.value.unwrap_or_default()).into_owned());
        }
    }
    (p.error_code, values)
}

fn wakeups(b: &RunningBroker) -> u64 {
    b.broker.metrics.fetch_wakeups.load(Ordering::SeqCst)
}

/// Waits (up to 20 s) until the counter reaches `n`.
async fn wait_wakeups(b: &RunningBroker, n: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while wakeups(b) < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{n} wake-ups expected, {} after 20 s",
            wakeups(b)
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_to_another_partition_leave_a_parked_fetch_asleep() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 2, &[]).await, NONE);
    let addr = b.local_addr;
    let max_wait = Duration::from_millis(5_000);
    let before = wakeups(&b);
    let started = Instant::now();
    let waiter = tokio::spawn(async move {
        let mut c = Client::connect(addr).await;
        fetch_partition(&mut c, "t", 0, max_wait.as_millis() as i32).await
    });
    wait_parked_fetches(&b, 1).await;
    for i in 0..100 {
        let (err, _) = produce(&mut c, "t", 1, batch(&[&format!("b{i}")], 1), 1).await;
        assert_eq!(err, NONE);
    }
    // every append above happened while the fetch was parked
    assert!(
        !waiter.is_finished() && b.broker.metrics.parked_fetches() == 1,
        "the fetch ended before the appends to partition 1 were done"
    );
    let (err, got) = waiter.await.unwrap();
    assert_eq!(err, NONE);
    assert!(got.is_empty(), "{got:?}");
    assert!(started.elapsed() >= max_wait, "{:?}", started.elapsed());
    assert_eq!(wakeups(&b), before, "appends to partition 1 woke the fetch");
    assert_eq!(b.broker.replicas.wakeups().waiting_partitions(), 0);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_append_to_its_partition_wakes_a_parked_fetch() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 2, &[]).await, NONE);
    let addr = b.local_addr;
    let before = wakeups(&b);
    let waiter = tokio::spawn(async move {
        let mut c = Client::connect(addr).await;
        // max_wait is the broker's cap (30 s); the test's own bound is lower
        fetch_partition(&mut c, "t", 0, 30_000).await
    });
    wait_parked_fetches(&b, 1).await;
    assert_eq!(b.broker.replicas.wakeups().waiting_partitions(), 1);
    assert_eq!(
        produce(&mut c, "t", 0, batch(&["a"], 1), 1).await,
        (NONE, 0)
    );
    let (err, got) = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("the append to partition 0 did not wake the fetch")
        .unwrap();
    assert_eq!((err, got), (NONE, vec!["a".to_string()]));
    assert_eq!(wakeups(&b), before + 1);
    assert_eq!(b.broker.replicas.wakeups().waiting_partitions(), 0);
    b.shutdown().await.unwrap();
}

/// 200 fetches, each parked on its own partition; appends go to partition 0
/// only. A broker-wide signal would wake all 200 on the first append and the
/// 199 still parked on each later one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_to_one_partition_wake_only_its_fetch_among_200() {
    const FETCHES: i32 = 200;
    const APPENDS: usize = 10;
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "many", FETCHES, &[]).await, NONE);
    let addr = b.local_addr;
    let before = wakeups(&b);
    let mut waiters = Vec::new();
    for p in 0..FETCHES {
        waiters.push(tokio::spawn(async move {
            let mut c = Client::connect(addr).await;
            fetch_partition(&mut c, "many", p, 30_000).await
        }));
    }
    wait_parked_fetches(&b, i64::from(FETCHES)).await;
    assert_eq!(
        b.broker.replicas.wakeups().waiting_partitions(),
        FETCHES as usize
    );
    for i in 0..APPENDS {
        let (err, _) = produce(&mut c, "many", 0, batch(&[&format!("v{i}")], 1), 1).await;
        assert_eq!(err, NONE);
    }
    let first = waiters.remove(0);
    let (err, got) = tokio::time::timeout(Duration::from_secs(20), first)
        .await
        .expect("the fetch on partition 0 was not woken")
        .unwrap();
    assert_eq!(err, NONE);
    assert!(!got.is_empty());
    wait_wakeups(&b, before + 1).await;
    let woken = wakeups(&b) - before;
    eprintln!("{FETCHES} parked fetches, {APPENDS} appends to one partition: {woken} wake-up(s)");
    assert_eq!(woken, 1);
    assert!(waiters.iter().all(|w| !w.is_finished()));
    // shutdown answers the other long polls
    b.shutdown().await.unwrap();
    for w in waiters {
        let (err, got) = w.await.unwrap();
        assert_eq!(err, NONE);
        assert!(got.is_empty());
    }
}
