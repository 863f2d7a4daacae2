//! The group coordinator is sharded by `__consumer_offsets` partition and
//! no shard lock is held across an append: with an append to a partition
//! held at the disk (the broker's append gate, closed deterministically),
//! a Heartbeat and an OffsetFetch on a group of that partition are still
//! answered, and so are requests on the groups of other partitions, while
//! another group's commit waits for its append.

use crate::common;
use crate::groups::{GROUP_CONFIG, commit, fetch_offset, heartbeat, join_new, sync};

use std::sync::Arc;

use common::*;

const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// `offsets.topic.num.partitions` in [`GROUP_CONFIG`].
const OFFSETS_PARTITIONS: i32 = 3;

/// How long a request that must not wait on the held append may take
/// before the test gives up (a deadline, not a timing threshold: the broken
/// behaviour never answers).
const ANSWER_DEADLINE: Duration = Duration::from_secs(10);

/// A group id `<prefix>-<i>` whose offsets partition is `partition`.
/// Joins `group` as its only member, syncs, and commits offset 5 of `t`-0
/// at that generation: (member id, generation).
async fn stable_member_with_commit(c: &mut Client, group: &str) -> (String, i32) {
    let j = join_new(c, group).await;
    assert_eq!(j.error_code, NONE);
    let s = sync(
        c,
        group,
        j.generation_id,
        &j.member_id,
        vec![(j.member_id.clone(), b"a")],
    )
    .await;
    assert_eq!(s.error_code, NONE);
    assert_eq!(
        commit(c, group, j.generation_id, &j.member_id, "t", 0, 5).await,
        NONE
    );
    (j.member_id, j.generation_id)
}

fn group_on(prefix: &str, partition: i32) -> String {
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .find(|g| weir_group::partition_for(g, OFFSETS_PARTITIONS) == partition)
        .unwrap()
}

/// Holds the appends to (and loads of) one `__consumer_offsets` partition
/// until dropped
/// (also when an assertion fails, so the held threads finish).
pub(crate) struct HeldIo {
    broker: Arc<weir_broker::broker::Broker>,
    partition: i32,
}

impl HeldIo {
    pub(crate) fn new(broker: Arc<weir_broker::broker::Broker>, partition: i32) -> Self {
        broker.groups().unwrap().pause_io(partition);
        Self { broker, partition }
    }

    pub(crate) fn held(&self) -> usize {
        self.broker.groups().unwrap().held_io(self.partition)
    }

    /// Waits (up to 20 s) until `n` appends are held.
    pub(crate) async fn wait_held(&self, n: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while self.held() < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{n} held append(s) or load(s) expected, {} after 20 s",
                self.held()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Drop for HeldIo {
    fn drop(&mut self) {
        if let Some(g) = self.broker.groups() {
            g.resume_io(self.partition);
        }
    }
}

/// `f` answered within [`ANSWER_DEADLINE`] while `hold` holds the
/// appends, or the test fails naming `what`. The deadline is kept by a
/// thread of its own (a broker that blocks its runtime's workers would stop
/// the runtime's timers too); at the deadline it lets the appends go, so a
/// request stuck behind them is answered and the test fails instead of
/// hanging.
pub(crate) async fn answered<T>(
    hold: &HeldIo,
    what: &str,
    f: impl std::future::Future<Output = T>,
) -> T {
    let (done, deadline) = std::sync::mpsc::channel::<()>();
    let (broker, partition) = (hold.broker.clone(), hold.partition);
    let watchdog = std::thread::spawn(move || {
        let late = deadline.recv_timeout(ANSWER_DEADLINE).is_err();
        if late {
            broker.groups().unwrap().resume_io(partition);
        }
        late
    });
    let v = f.await;
    let _ = done.send(());
    let late = watchdog.join().unwrap();
    assert!(
        !late,
        "{what}: not answered while the I/O of {OFFSETS_TOPIC} partition {partition} was held"
    );
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_and_offset_fetch_do_not_wait_on_a_held_append() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), GROUP_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 1, &[]).await, NONE);
    let member_group = group_on("member", 0);
    let other_group = group_on("other", 0);
    let elsewhere = group_on("elsewhere", 1);

    // A stable member of a group of partition 0, with a committed offset.
    let (member_id, generation) = stable_member_with_commit(&mut c, &member_group).await;

    // Another group's commit on partition 0 reaches the disk and is held.
    let hold = HeldIo::new(b.broker.clone(), 0);
    let mut committer = Client::connect(b.local_addr).await;
    let group = other_group.clone();
    let in_flight =
        tokio::spawn(async move { commit(&mut committer, &group, -1, "", "t", 0, 7).await });
    hold.wait_held(1).await;

    // Same partition: the heartbeat and the fetches are answered; the held
    // commit is not visible yet.
    assert_eq!(
        answered(
            &hold,
            "Heartbeat",
            heartbeat(&mut c, &member_group, generation, &member_id)
        )
        .await,
        NONE
    );
    assert_eq!(
        answered(
            &hold,
            "OffsetFetch",
            fetch_offset(&mut c, &member_group, "t", 0)
        )
        .await,
        5
    );
    assert_eq!(
        answered(
            &hold,
            "OffsetFetch of the held commit's group",
            fetch_offset(&mut c, &other_group, "t", 0)
        )
        .await,
        -1
    );
    // Another partition: its own shard writes and answers meanwhile.
    assert_eq!(
        answered(
            &hold,
            "OffsetCommit on another partition",
            commit(&mut c, &elsewhere, -1, "", "t", 0, 9)
        )
        .await,
        NONE
    );
    assert_eq!(fetch_offset(&mut c, &elsewhere, "t", 0).await, 9);
    // The commit on partition 0 is still waiting for its append.
    assert_eq!(hold.held(), 1);
    assert!(!in_flight.is_finished());

    drop(hold);
    assert_eq!(in_flight.await.unwrap(), NONE);
    assert_eq!(fetch_offset(&mut c, &other_group, "t", 0).await, 7);
    assert_eq!(
        heartbeat(&mut c, &member_group, generation, &member_id).await,
        NONE
    );
    drop(c);
    b.shutdown().await.unwrap();
}

/// A member's own commit held at the disk: its heartbeat is answered and
/// OffsetFetch keeps the last durable offset until the append completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_heartbeats_while_its_own_commit_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), GROUP_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 1, &[]).await, NONE);
    let group = group_on("own", 2);
    let (member_id, generation) = stable_member_with_commit(&mut c, &group).await;

    let hold = HeldIo::new(b.broker.clone(), 2);
    let mut committer = Client::connect(b.local_addr).await;
    let (g, member) = (group.clone(), member_id.clone());
    let in_flight =
        tokio::spawn(
            async move { commit(&mut committer, &g, generation, &member, "t", 0, 6).await },
        );
    hold.wait_held(1).await;
    assert_eq!(
        answered(
            &hold,
            "Heartbeat of the committing member",
            heartbeat(&mut c, &group, generation, &member_id)
        )
        .await,
        NONE
    );
    assert_eq!(
        answered(
            &hold,
            "OffsetFetch of the committing group",
            fetch_offset(&mut c, &group, "t", 0)
        )
        .await,
        5
    );
    assert_eq!(hold.held(), 1);
    assert!(!in_flight.is_finished());

    drop(hold);
    assert_eq!(in_flight.await.unwrap(), NONE);
    assert_eq!(fetch_offset(&mut c, &group, "t", 0).await, 6);
    drop(c);
    b.shutdown().await.unwrap();
}

/// Each shard hands out its own member ids: the first members of groups on
/// different partitions, joining from the same client id, get different
/// ids (one coordinator's ids are unique by its counter; the shards'
/// counters all start at zero, so their seeds must differ).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_hand_out_distinct_member_ids() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), GROUP_CONFIG).await;
    let mut c = Client::connect(b.local_addr).await;
    let mut ids = std::collections::BTreeSet::new();
    for p in 0..OFFSETS_PARTITIONS {
        let j = join_new(&mut c, &group_on("first", p)).await;
        assert_eq!(j.error_code, NONE);
        assert!(ids.insert(j.member_id.clone()), "{} twice", j.member_id);
    }
    drop(c);
    b.shutdown().await.unwrap();
}
