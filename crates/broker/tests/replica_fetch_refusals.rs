//! A leader's answers to follower fetches that must not be served as
//! such: from a broker that is not a replica, with a stale or unknown
//! leader epoch, and from a follower whose log diverged. None moves the
//! leader's log or its high watermark.

use std::sync::Arc;

use weir_broker::cluster::LocalTopicAdmin;
use weir_protocol::messages::fetch_response::PartitionData;

use crate::common::*;

const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const FENCED_LEADER_EPOCH: i16 = 74;
const UNKNOWN_LEADER_EPOCH: i16 = 75;

/// Partition 0 of topic `id` fetched by `replica` at `offset`, naming
/// `leader_epoch` and `last_fetched_epoch`.
async fn fetch(
    c: &mut Client,
    id: Uuid,
    replica: i32,
    offset: i64,
    leader_epoch: i32,
    last_fetched_epoch: i32,
) -> PartitionData {
    let req = follower_fetch_request(replica, id, offset, leader_epoch, last_fetched_epoch);
    let ResponseBody::Fetch(r) = c.call(RequestBody::Fetch(req), 17).await else {
        panic!("not a Fetch response");
    };
    r.responses[0].partitions[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_fetches_that_must_not_be_served_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let TopicT {
        running: _running,
        b,
        mut c,
        id,
        me,
        host,
        port,
    } = broker_with_topic_t(dir.path()).await;
    let (err, _) = produce(&mut c, "t", 0, batch(&["a", "b", "c"], 1), 1).await;
    assert_eq!(err, NONE);

    // This broker leads at epoch 1 with replicas me, 2, 3.
    let snap = three_replicas(me, &host, port, id, me, 1);
    b.set_cluster(FixedView::new(snap), Arc::new(LocalTopicAdmin));
    b.apply_leadership();
    let log = b.replicas.log("t", 0).unwrap();
    let (leo, hw) = (log.log_end_offset(), log.high_watermark());
    assert_eq!(leo, 3);

    let id = Uuid(id);
    // Broker 9 is no replica.
    let p = fetch(&mut c, id, 9, 0, 1, -1).await;
    assert_eq!(p.error_code, NOT_LEADER_OR_FOLLOWER);
    assert!(p.records.as_ref().is_none_or(|r| r.is_empty()));
    // A stale and a newer leader epoch.
    assert_eq!(
        fetch(&mut c, id, 2, 0, 0, -1).await.error_code,
        FENCED_LEADER_EPOCH
    );
    assert_eq!(
        fetch(&mut c, id, 2, 0, 2, -1).await.error_code,
        UNKNOWN_LEADER_EPOCH
    );
    // A follower at 10 in epoch 0, which this log never had past its
    // start of epoch 1 at 3: it must cut back to 3 first, and gets no
    // records.
    let p = fetch(&mut c, id, 2, 10, 1, 0).await;
    assert_eq!(p.error_code, NONE);
    assert_eq!(
        (p.diverging_epoch.epoch, p.diverging_epoch.end_offset),
        (0, 3)
    );
    assert!(p.records.as_ref().is_none_or(|r| r.is_empty()));

    // Nothing moved: the leader's log end, and the high watermark (which
    // waits for the followers' positions, none of which was recorded).
    assert_eq!((log.log_end_offset(), log.high_watermark()), (leo, hw));
    let state = b.replicas.replication_state(log.topic_partition()).unwrap();
    assert!(
        state.followers.values().all(|f| f.leo == -1),
        "{:?}",
        state.followers
    );
}

/// A follower that is fenced, or in its controlled shutdown, and catches up
/// is served but not asked back into the ISR (the controller would refuse
/// it with INELIGIBLE_REPLICA, over and over while it keeps fetching), as
/// Kafka's ISR eligibility rules; once it is live and not shutting down,
/// the same fetch asks for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_or_stopping_follower_is_not_asked_back_into_the_isr() {
    let dir = tempfile::tempdir().unwrap();
    let TopicT {
        running: _running,
        b,
        mut c,
        id,
        me,
        host,
        port,
    } = broker_with_topic_t(dir.path()).await;
    let (err, _) = produce(&mut c, "t", 0, batch(&["a", "b", "c"], 1), 1).await;
    assert_eq!(err, NONE);

    // Leading at epoch 1, broker 2 out of the ISR and shutting down.
    let without_2 = |snap: weir_broker::cluster::ClusterSnapshot| {
        let mut topics: Vec<_> = snap.topics().cloned().collect();
        topics[0].partitions[0].isr = vec![me, 3];
        weir_broker::cluster::ClusterSnapshot::new(snap.brokers.clone(), me, topics)
    };
    let snap = without_2(three_replicas(me, &host, port, id, me, 1)).with_shutting_down([2]);
    let view = join_cluster(&b, snap);
    // ISR changes go nowhere until asked for by a follower's fetch.
    let asked = Arc::new(RecordedIsrChanges::default());
    b.set_isr_changer(asked.clone());
    let tp = b.replicas.log("t", 0).unwrap().topic_partition().clone();
    let pending = || b.replicas.replication_state(&tp).unwrap().pending_isr;

    // Broker 3 and broker 2 both fetch at the log end: the high watermark
    // is 3 and 2 is caught up, but is not asked for.
    let id = Uuid(id);
    assert_eq!(fetch(&mut c, id, 3, 3, 1, 1).await.error_code, NONE);
    assert_eq!(fetch(&mut c, id, 2, 3, 1, 1).await.error_code, NONE);
    assert_eq!(pending(), None);
    // Fenced: not among the live brokers.
    let fenced = without_2(three_replicas(me, &host, port, id.0, me, 1));
    let live: Vec<_> = fenced
        .brokers
        .iter()
        .filter(|n| n.id != 2)
        .cloned()
        .collect();
    let topics: Vec<_> = fenced.topics().cloned().collect();
    *view.0.write().unwrap() =
        Arc::new(weir_broker::cluster::ClusterSnapshot::new(live, me, topics));
    let p = fetch(&mut c, id, 2, 3, 1, 1).await;
    assert_eq!(p.error_code, NONE);
    assert_eq!(p.high_watermark, 3);
    assert_eq!(pending(), None);
    assert!(asked.0.lock().unwrap().is_empty());

    // The same fetch once broker 2 is not shutting down.
    *view.0.write().unwrap() = Arc::new(without_2(three_replicas(me, &host, port, id.0, me, 1)));
    assert_eq!(fetch(&mut c, id, 2, 3, 1, 1).await.error_code, NONE);
    assert_eq!(pending(), Some(vec![me, 3, 2]));
    // The controller is asked from a task of its own, after the fetch was
    // answered.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while asked.0.lock().unwrap().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the ISR change was never asked for"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let asked = asked.0.lock().unwrap();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].new_isr, vec![me, 3, 2]);
}

/// An ISR changer that records what it is asked and never answers.
#[derive(Default)]
struct RecordedIsrChanges(std::sync::Mutex<Vec<weir_broker::replication::state::IsrChange>>);

impl weir_broker::replication::IsrChanger for RecordedIsrChanges {
    fn alter_partition(
        &self,
        change: weir_broker::replication::state::IsrChange,
    ) -> std::pin::Pin<Box<dyn Future<Output = weir_broker::replication::IsrAnswer> + Send>> {
        self.0.lock().unwrap().push(change);
        Box::pin(std::future::pending())
    }
}
