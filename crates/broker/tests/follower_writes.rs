//! A follower's appends and truncations apply only while it still follows
//! the leader whose answer they come from: once the metadata makes this
//! broker the leader, an answer of the old leader still in flight changes
//! nothing (it would land below the new epoch's start, and every later
//! fetch of a follower would be told to cut it again).

use std::sync::Arc;

use weir_broker::cluster::LocalTopicAdmin;

use crate::common::*;

/// One batch of `n` records at `base`, written by the leader of `epoch`.
fn leader_batch(base: i64, epoch: i32, n: usize) -> Bytes {
    let mut b = RecordBatchBuilder::new(Compression::None)
        .base_offset(base)
        .partition_leader_epoch(epoch);
    for _ in 0..n {
        b.push(1, None, Some(Bytes::from_static(b"v")), vec![])
            .unwrap();
    }
    b.build().unwrap().as_bytes().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_leaders_answer_is_not_applied_after_this_broker_leads() {
    let dir = tempfile::tempdir().unwrap();
    let TopicT {
        running: _running,
        b,
        c: _,
        id,
        me,
        host,
        port,
    } = broker_with_topic_t(dir.path()).await;
    let view = FixedView::new(three_replicas(me, &host, port, id, 2, 1));
    b.set_cluster(view.clone(), Arc::new(LocalTopicAdmin));
    b.apply_leadership();
    let log = b.replicas.log("t", 0).unwrap();
    let tp = log.topic_partition().clone();

    // Following broker 2 in epoch 1: its records are appended.
    let appended = b.replicas.as_follower_of(&tp, 2, 1, || {
        log.append_as_follower(&leader_batch(0, 1, 3), 1)
    });
    assert!(matches!(appended, Some(Ok(_))), "{appended:?}");
    assert_eq!(log.log_end_offset(), 3);
    // Not for another leader or another epoch.
    assert!(b.replicas.as_follower_of(&tp, 3, 1, || ()).is_none());
    assert!(b.replicas.as_follower_of(&tp, 2, 0, || ()).is_none());

    // The metadata makes this broker the leader in epoch 2, at 3.
    *view.0.write().unwrap() = Arc::new(three_replicas(me, &host, port, id, me, 2));
    b.apply_leadership();
    assert_eq!(log.latest_epoch(), Some(2));

    // Broker 2's answer of epoch 1, still in flight, arrives now: neither
    // its records nor a truncation are applied.
    let late = b.replicas.as_follower_of(&tp, 2, 1, || {
        log.append_as_follower(&leader_batch(3, 1, 2), 1)
    });
    assert!(late.is_none(), "{late:?}");
    let cut = b
        .replicas
        .as_follower_of(&tp, 2, 1, || b.replicas.truncate_to(&tp, 0));
    assert!(cut.is_none(), "{cut:?}");
    assert_eq!(log.log_end_offset(), 3);
    // Epoch 2 starts where the log ended, above every record of epoch 1.
    assert_eq!(log.end_offset_for_epoch(1), (1, 3));
    assert_eq!(log.end_offset_for_epoch(2), (2, 3));
}

/// A produce checked against the leadership before its append is not
/// appended once the leadership has moved (the check and the append are
/// one step under the partition's state), not even answered as a retried
/// duplicate, and an acks=all wait for records of an earlier epoch ends
/// NOT_LEADER_OR_FOLLOWER even if this broker leads again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_appends_and_acknowledges_only_in_its_own_epoch() {
    use weir_broker::handler::produce::append_partition;
    use weir_protocol::error_code::ErrorCode;

    let dir = tempfile::tempdir().unwrap();
    let TopicT {
        running: _running,
        b,
        c: _,
        id,
        me,
        host,
        port,
    } = broker_with_topic_t(dir.path()).await;
    // A cluster member's partition layer (appends follow the leadership).
    let view = join_cluster(&b, three_replicas(me, &host, port, id, me, 1));
    let log = b.replicas.log("t", 0).unwrap();
    let tp = log.topic_partition().clone();

    // Leading in epoch 1: appended, and acks=all would wait in epoch 1.
    let first = idempotent_batch(7, 0, 0, 2);
    let (r, _) = append_partition(&b, "t", 0, Some(&first));
    assert_eq!(r.error_code, ErrorCode::None, "{r:?}");
    assert_eq!(r.replicated_in, Some(1));
    assert_eq!(log.log_end_offset(), 2);

    // Broker 2 leads in epoch 2: no append, not even of the duplicate.
    *view.0.write().unwrap() = Arc::new(three_replicas(me, &host, port, id, 2, 2));
    b.apply_leadership();
    let (r, _) = append_partition(&b, "t", 0, Some(&idempotent_batch(7, 0, 2, 1)));
    assert_eq!(r.error_code, ErrorCode::NotLeaderOrFollower, "{r:?}");
    let (r, _) = append_partition(&b, "t", 0, Some(&first));
    assert_eq!(r.error_code, ErrorCode::NotLeaderOrFollower, "{r:?}");
    assert!(b.replicas.as_leader_in(&tp, 1, || ()).is_none());
    assert_eq!(log.log_end_offset(), 2);

    // Leading again in epoch 3: a wait for epoch 1's records does not
    // count this epoch's high watermark.
    *view.0.write().unwrap() = Arc::new(three_replicas(me, &host, port, id, me, 3));
    b.apply_leadership();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let code = b
        .replicas
        .wait_for_replication_in(&tp, 2, 1, Some(1), deadline)
        .await;
    assert_eq!(code, ErrorCode::NotLeaderOrFollower);
}

/// A broker that stops following the metadata (shutting down) gives up its
/// leaderships: an acks=all produce waiting there is answered
/// NOT_LEADER_OR_FOLLOWER at once, not held to its timeout (which would
/// leave its producer unsure whether the batch was written), later
/// appends are refused, and a later leadership change takes nothing up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resigned_leader_answers_waiting_acks_all_produces_at_once() {
    use weir_broker::handler::produce::append_partition;
    use weir_protocol::error_code::ErrorCode;

    let dir = tempfile::tempdir().unwrap();
    let TopicT {
        running: _running,
        b,
        c: _,
        id,
        me,
        host,
        port,
    } = broker_with_topic_t(dir.path()).await;
    let view = join_cluster(&b, three_replicas(me, &host, port, id, me, 1));
    let log = b.replicas.log("t", 0).unwrap();
    let tp = log.topic_partition().clone();

    let (r, _) = append_partition(&b, "t", 0, Some(&idempotent_batch(7, 0, 0, 2)));
    assert_eq!(r.error_code, ErrorCode::None, "{r:?}");
    // The followers (unreachable) never fetch: the wait would last until
    // its deadline.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    let waiting = {
        let b = b.clone();
        let tp = tp.clone();
        tokio::spawn(async move {
            b.replicas
                .wait_for_replication_in(&tp, 2, 1, Some(1), deadline)
                .await
        })
    };
    // Parked on the partition (not answered before the resignation).
    tokio::task::yield_now().await;
    assert!(!waiting.is_finished());

    assert_eq!(b.resign_leaderships(), 1);
    let code = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("the waiting produce was answered at once")
        .unwrap();
    assert_eq!(code, ErrorCode::NotLeaderOrFollower);
    let (r, _) = append_partition(&b, "t", 0, Some(&idempotent_batch(7, 0, 2, 1)));
    assert_eq!(r.error_code, ErrorCode::NotLeaderOrFollower, "{r:?}");
    assert_eq!(log.log_end_offset(), 2);

    // A leadership in a new epoch that a late image would give it is not
    // taken up.
    *view.0.write().unwrap() = Arc::new(three_replicas(me, &host, port, id, me, 2));
    b.apply_leadership();
    assert!(b.replicas.as_leader_in(&tp, 2, || ()).is_none());
}
