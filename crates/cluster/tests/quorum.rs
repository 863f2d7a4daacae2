//! Three controller nodes on weir-raft's in-memory router: requests on the
//! leader reach every node's image, followers answer NOT_CONTROLLER,
//! decisions are serialized, failover, session expiry and restart.

use crate::common;

use std::time::Duration;

use common::*;
use weir_cluster::ControllerError;
use weir_metadata::NO_LEADER;
use weir_metadata::controller::{AlterPartition, NewTopic, PRODUCER_ID_BLOCK_SIZE};
use weir_protocol::error_code::ErrorCode;
use weir_raft::network::MemRouter;

fn topic(name: &str, partitions: i32, rf: i16) -> NewTopic {
    NewTopic {
        name: name.into(),
        num_partitions: partitions,
        replication_factor: rf,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_on_the_leader_reach_every_image() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemRouter::default();
    let nodes = start_mem(dir.path(), &router, |_| {}).await;
    let leader = wait_for("a leader", || agreed_leader(&nodes)).await;
    let follower = nodes.iter().find(|n| n.node_id() != leader).unwrap();
    let mut follower_updates = follower.images.subscribe();
    let epochs = register_brokers(&nodes, 1..=3, 0).await;

    let id = on_leader(&nodes, |c| async move {
        c.create_topic(topic("orders", 6, 3)).await
    })
    .await;
    let t = wait_for("every image holds orders identically", || {
        topic_everywhere(&nodes, "orders")
    })
    .await;
    assert_eq!(t.id, id);
    assert_eq!(t.partitions.len(), 6);
    for p in t.partitions.values() {
        assert_eq!(p.replicas.len(), 3);
        assert_eq!(p.isr.len(), 3);
        assert_eq!(p.leader, p.replicas[0]);
    }
    // Leaders rotate over the three brokers.
    let leaders: std::collections::BTreeSet<i32> =
        t.partitions.values().map(|p| p.leader).collect();
    assert_eq!(leaders.len(), 3);

    // The follower's subscribers saw the delta.
    let created = bounded("the follower publishes the creation", async {
        loop {
            let u = follower_updates.recv().await.unwrap();
            if u.delta.topics_created.contains(&id) {
                return u;
            }
        }
    })
    .await;
    assert_eq!(created.delta.partitions_changed.len(), 6);

    // A follower does not decide: NOT_CONTROLLER with the leader.
    let err = follower
        .controller
        .create_topic(topic("elsewhere", 1, 1))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ControllerError::NotController {
            leader: Some(leader)
        }
    );
    assert_eq!(err.error_code(), ErrorCode::NotController);

    // Rejections come back as Kafka errors and change nothing.
    let leader_node = node(&nodes, leader);
    let err = leader_node
        .controller
        .create_topic(topic("orders", 1, 1))
        .await
        .unwrap_err();
    assert_eq!(err.error_code(), ErrorCode::TopicAlreadyExists);
    let err = leader_node
        .controller
        .create_topic(topic("wide", 1, 4))
        .await
        .unwrap_err();
    assert_eq!(err.error_code(), ErrorCode::InvalidReplicationFactor);

    // AlterPartition from partition 0's leader shrinks its ISR everywhere;
    // the same request again (now a stale partition epoch) is refused.
    let p0 = t.partitions[&0].clone();
    let shrink = AlterPartition {
        topic_id: id,
        partition: 0,
        leader_epoch: p0.leader_epoch,
        partition_epoch: p0.partition_epoch,
        new_isr: vec![(p0.leader, -1), (p0.replicas[1], -1)],
    };
    let leader_epoch = epochs[&p0.leader];
    let altered = on_leader(&nodes, |c| {
        let req = shrink.clone();
        async move { c.alter_partition(p0.leader, leader_epoch, req).await }
    })
    .await;
    assert_eq!(altered.isr.len(), 2);
    assert_eq!(altered.partition_epoch, p0.partition_epoch + 1);
    wait_for("every image holds the shrunk ISR", || {
        let t = topic_everywhere(&nodes, "orders")?;
        (t.partitions[&0] == altered).then_some(())
    })
    .await;
    let err = node(&nodes, leader)
        .controller
        .alter_partition(p0.leader, leader_epoch, shrink.clone())
        .await
        .unwrap_err();
    assert_eq!(err.error_code(), ErrorCode::InvalidUpdateVersion);

    // Producer ids: consecutive blocks.
    let (e1, e2, e3) = (epochs[&1], epochs[&2], epochs[&3]);
    let first = on_leader(
        &nodes,
        |c| async move { c.allocate_producer_ids(1, e1).await },
    )
    .await;
    let second = on_leader(
        &nodes,
        |c| async move { c.allocate_producer_ids(2, e2).await },
    )
    .await;
    assert_eq!(second, first + PRODUCER_ID_BLOCK_SIZE);

    // Controlled shutdown of broker 3: it leads nothing, on every node.
    on_leader(
        &nodes,
        |c| async move { c.controlled_shutdown(3, e3).await },
    )
    .await;
    wait_for("broker 3 leads nothing anywhere", || {
        let t = topic_everywhere(&nodes, "orders")?;
        t.partitions
            .values()
            .all(|p| p.leader != 3 && p.leader != NO_LEADER && !p.isr.contains(&3))
            .then_some(())
    })
    .await;

    // Delete: gone from every image.
    on_leader(
        &nodes,
        |c| async move { c.delete_topic("orders".into()).await },
    )
    .await;
    wait_for("orders is gone everywhere", || {
        nodes
            .iter()
            .all(|n| image(n).topic_by_name("orders").is_none())
            .then_some(())
    })
    .await;
    wait_for("all images equal", || images_equal(&nodes)).await;
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_duplicate_creates_exactly_one_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemRouter::default();
    let nodes = start_mem(dir.path(), &router, |_| {}).await;
    register_brokers(&nodes, 1..=3, 0).await;
    let leader = wait_for("a leader", || agreed_leader(&nodes)).await;
    let controller = node(&nodes, leader).controller.clone();

    for round in 0..5 {
        let name = format!("dup-{round}");
        let tasks: Vec<_> = (0..6)
            .map(|_| {
                let c = controller.clone();
                let t = topic(&name, 3, 3);
                tokio::spawn(async move { c.create_topic(t).await })
            })
            .collect();
        let mut ok = Vec::new();
        for task in tasks {
            match bounded("a create", task).await.unwrap() {
                Ok(id) => ok.push(id),
                Err(e) => assert_eq!(
                    e.error_code(),
                    ErrorCode::TopicAlreadyExists,
                    "round {round}: {e}"
                ),
            }
        }
        assert_eq!(ok.len(), 1, "round {round}: {ok:?}");
        let t = wait_for("the topic everywhere", || topic_everywhere(&nodes, &name)).await;
        assert_eq!(t.id, ok[0]);
    }
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolated_leader_is_replaced_and_its_request_fails() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemRouter::default();
    let nodes = start_mem(dir.path(), &router, |_| {}).await;
    register_brokers(&nodes, 1..=3, 0).await;
    on_leader(&nodes, |c| async move {
        c.create_topic(topic("before", 2, 3)).await
    })
    .await;
    wait_for("before everywhere", || topic_everywhere(&nodes, "before")).await;

    let old = agreed_leader(&nodes).unwrap();
    let rest: Vec<_> = nodes.iter().filter(|n| n.node_id() != old).collect();
    router.isolate(old);
    // A request on the cut-off leader is in flight while the others elect.
    let stale = node(&nodes, old).controller.clone();
    let in_flight = tokio::spawn(async move { stale.create_topic(topic("lost", 1, 1)).await });

    let new = wait_for("a new leader among the majority", || {
        agreed_leader(rest.iter().copied()).filter(|l| *l != old)
    })
    .await;
    let id = on_leader(rest.iter().copied(), |c| async move {
        c.create_topic(topic("after", 3, 3)).await
    })
    .await;
    let result = bounded("the old leader's request is answered", in_flight)
        .await
        .unwrap();
    let err = result.expect_err("the isolated leader's create must not succeed");
    assert!(
        matches!(
            err,
            ControllerError::NotController { .. } | ControllerError::TimedOut
        ),
        "{err}"
    );

    router.heal();
    let converged = wait_for("all images equal after the heal", || {
        images_equal(&nodes).filter(|i| i.topic_by_name("after").is_some())
    })
    .await;
    assert_eq!(converged.topic_by_name("after").unwrap().id, id);
    assert!(converged.topic_by_name("lost").is_none());
    // The old leader now points at the new one.
    wait_for("the old leader follows", || {
        (node(&nodes, old).controller.leader() == Some(new)).then_some(())
    })
    .await;
    let err = node(&nodes, old)
        .controller
        .create_topic(topic("late", 1, 1))
        .await
        .unwrap_err();
    assert_eq!(err, ControllerError::NotController { leader: Some(new) });
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposal_cut_off_after_the_decision_never_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemRouter::default();
    let nodes = start_mem(dir.path(), &router, |_| {}).await;
    register_brokers(&nodes, 1..=3, 0).await;
    let old = wait_for("a leader", || agreed_leader(&nodes)).await;
    let old_raft = node(&nodes, old).raft.raft().clone();
    let rest: Vec<_> = nodes.iter().filter(|n| n.node_id() != old).collect();

    // The leader still confirms its leadership (heartbeats pass) and so
    // decides and proposes, but its entry reaches nobody.
    router.drop_entries_from(old);
    let before = old_raft.metrics().borrow().last_log_index;
    let stale = node(&nodes, old).controller.clone();
    let in_flight = tokio::spawn(async move { stale.create_topic(topic("lost", 1, 1)).await });
    wait_for("the old leader appended the batch to its own log", || {
        let last = old_raft.metrics().borrow().last_log_index;
        (last > before).then_some(())
    })
    .await;
    assert!(!in_flight.is_finished(), "uncommitted, so unanswered");

    router.isolate(old);
    let new = wait_for("a new leader among the majority", || {
        agreed_leader(rest.iter().copied()).filter(|l| *l != old)
    })
    .await;
    on_leader(rest.iter().copied(), |c| async move {
        c.create_topic(topic("lost", 2, 3)).await
    })
    .await;
    router.heal();

    let result = bounded("the old leader's request is answered", in_flight)
        .await
        .unwrap();
    let err = result.expect_err("a batch that never committed must not succeed");
    assert!(
        matches!(
            err,
            ControllerError::NotController { .. } | ControllerError::TimedOut
        ),
        "{err}"
    );
    let converged = wait_for("all images equal after the heal", || {
        images_equal(&nodes).filter(|i| i.topic_by_name("lost").is_some())
    })
    .await;
    // The topic is the new leader's (2 partitions), not the old one's (1).
    assert_eq!(converged.topic_by_name("lost").unwrap().partitions.len(), 2);
    wait_for("the old leader follows", || {
        (node(&nodes, old).controller.leader() == Some(new)).then_some(())
    })
    .await;
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_broker_is_fenced_and_its_partitions_move() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemRouter::default();
    let nodes = start_mem(dir.path(), &router, |_| {}).await;
    let epochs = register_brokers(&nodes, 1..=3, 0).await;
    on_leader(&nodes, |c| async move {
        c.create_topic(topic("events", 6, 3)).await
    })
    .await;
    let before = wait_for("events everywhere", || topic_everywhere(&nodes, "events")).await;
    let silent = 2;
    assert!(before.partitions.values().any(|p| p.leader == silent));

    // Brokers 1 and 3 keep heartbeating; 2 stops after t = 0.
    let beat = |now_ms: u64| {
        let nodes = &nodes;
        let epochs = &epochs;
        async move {
            for id in [1, 3] {
                on_leader(nodes, |c| {
                    heartbeat(c, id, epochs[&id], u64::MAX / 2, now_ms)
                })
                .await;
            }
        }
    };
    beat(5_000).await;
    let fenced = on_leader(&nodes, |c| async move { c.tick(SESSION_TIMEOUT_MS).await }).await;
    assert!(
        fenced.is_empty(),
        "nobody's session expired yet: {fenced:?}"
    );
    beat(SESSION_TIMEOUT_MS).await;
    let fenced = on_leader(
        &nodes,
        |c| async move { c.tick(SESSION_TIMEOUT_MS + 1).await },
    )
    .await;
    assert_eq!(fenced, vec![silent]);

    let after = wait_for("every image shows the moves", || {
        nodes
            .iter()
            .all(|n| image(n).broker(silent).is_some_and(|b| b.fenced))
            .then(|| topic_everywhere(&nodes, "events"))
            .flatten()
    })
    .await;
    for (pid, p) in &after.partitions {
        let old = &before.partitions[pid];
        assert_ne!(p.leader, silent, "partition {pid}");
        assert!(!p.isr.contains(&silent), "partition {pid}");
        assert!(
            old.isr.contains(&p.leader),
            "partition {pid}: leader from the ISR"
        );
        if old.leader == silent {
            assert_eq!(p.leader_epoch, old.leader_epoch + 1, "partition {pid}");
        } else {
            assert_eq!(p.leader, old.leader, "partition {pid}");
        }
    }
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_node_rebuilds_the_same_image() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemRouter::default();
    // Small snapshots, so the restart restores one and replays the rest.
    let tune = |o: &mut weir_raft::RaftOptions| {
        o.snapshot_after_entries = 4;
        o.entries_kept_after_snapshot = 0;
    };
    let mut nodes = start_mem(dir.path(), &router, tune).await;
    register_brokers(&nodes, 1..=3, 0).await;
    for i in 0..4 {
        on_leader(&nodes, |c| async move {
            c.create_topic(topic(&format!("a{i}"), 2, 3)).await
        })
        .await;
    }
    let leader = wait_for("a leader", || agreed_leader(&nodes)).await;
    let pos = nodes.iter().position(|n| n.node_id() != leader).unwrap();
    let down = nodes.remove(pos);
    let down_id = down.node_id();
    router.unregister(down_id);
    down.shutdown().await.unwrap();
    for i in 0..6 {
        on_leader(&nodes, |c| async move {
            c.create_topic(topic(&format!("b{i}"), 2, 3)).await
        })
        .await;
    }
    on_leader(&nodes, |c| async move { c.delete_topic("a0".into()).await }).await;

    let snapshot_file = dir
        .path()
        .join(format!("node-{down_id}"))
        .join(weir_raft::state_machine::SNAPSHOT_FILE);
    assert!(snapshot_file.exists(), "the stopped node holds a snapshot");
    let mut opts = options(down_id, dir.path(), &mem_voters());
    tune(&mut opts);
    let restarted = weir_cluster::ControllerNode::start_mem(opts, config(down_id), &router)
        .await
        .unwrap();
    assert!(
        restarted
            .images
            .current()
            .image
            .topic_by_name("a1")
            .is_some(),
        "the restart rebuilt its image from disk before catching up"
    );
    nodes.push(restarted);
    let image = wait_for("the restarted node's image equals the others'", || {
        images_equal(&nodes).filter(|i| i.topic_by_name("b5").is_some())
    })
    .await;
    assert_eq!(image.topics().count(), 9);
    assert!(image.topic_by_name("a0").is_none());
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_timeout_bounds_a_leader_without_quorum() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemRouter::default();
    let nodes = start_mem(dir.path(), &router, |_| {}).await;
    register_brokers(&nodes, 1..=3, 0).await;
    let leader = wait_for("a leader", || agreed_leader(&nodes)).await;
    for n in &nodes {
        if n.node_id() != leader {
            router.unregister(n.node_id());
        }
    }
    let started = std::time::Instant::now();
    let err = bounded(
        "the request is answered",
        node(&nodes, leader)
            .controller
            .create_topic(topic("x", 1, 1)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            ControllerError::TimedOut | ControllerError::NotController { .. }
        ),
        "{err}"
    );
    assert!(started.elapsed() < config(leader).request_timeout + Duration::from_secs(2));
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}
