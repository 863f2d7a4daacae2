//! Table-driven tests of each controller decision, applied to an image.

use weir_metadata::controller::{
    AlterPartition, Controller, ControllerConfig, Heartbeat, NewTopic, Registration,
};
use weir_metadata::{MetadataImage, NO_LEADER};
use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::metadata_record::MetadataRecord;

fn apply(image: &MetadataImage, records: &[MetadataRecord]) -> MetadataImage {
    let (next, _) = image.apply(records).unwrap();
    next.check().unwrap();
    next
}

fn reg(id: i32, incarnation: u8) -> Registration {
    Registration {
        broker_id: id,
        incarnation_id: Uuid([incarnation; 16]),
        endpoints: vec![],
        rack: None,
    }
}

fn hb(image: &MetadataImage, id: i32) -> Heartbeat {
    Heartbeat {
        broker_id: id,
        broker_epoch: image.broker(id).unwrap().epoch,
        current_metadata_offset: 10,
        want_fence: false,
        want_shutdown: false,
    }
}

/// `n` registered, unfenced brokers 1..=n, heartbeats at time 0.
fn cluster(n: i32) -> (Controller, MetadataImage) {
    let mut c = Controller::new(ControllerConfig::default(), 7);
    let mut image = MetadataImage::empty();
    for id in 1..=n {
        let (_, records) = c.register_broker(&image, &reg(id, id as u8), 0).unwrap();
        image = apply(&image, &records);
        let reply = c.heartbeat(&image, &hb(&image, id), 10, 0).unwrap();
        image = apply(&image, &reply.records);
    }
    (c, image)
}

fn topic(name: &str, partitions: i32, rf: i16) -> NewTopic {
    NewTopic {
        name: name.into(),
        num_partitions: partitions,
        replication_factor: rf,
        ..Default::default()
    }
}

#[test]
fn create_topic_validation() {
    let long = "x".repeat(250);
    let cases: Vec<(&str, NewTopic, Option<ErrorCode>)> = vec![
        ("ok", topic("t", 3, 3), None),
        ("defaults", topic("t", -1, -1), None),
        (
            "exists",
            topic("existing", 1, 1),
            Some(ErrorCode::TopicAlreadyExists),
        ),
        (
            "empty name",
            topic("", 1, 1),
            Some(ErrorCode::InvalidTopicException),
        ),
        (
            "dot",
            topic(".", 1, 1),
            Some(ErrorCode::InvalidTopicException),
        ),
        (
            "bad char",
            topic("a/b", 1, 1),
            Some(ErrorCode::InvalidTopicException),
        ),
        (
            "too long",
            topic(&long, 1, 1),
            Some(ErrorCode::InvalidTopicException),
        ),
        (
            "zero partitions",
            topic("t", 0, 1),
            Some(ErrorCode::InvalidPartitions),
        ),
        (
            "rf zero",
            topic("t", 1, 0),
            Some(ErrorCode::InvalidReplicationFactor),
        ),
        (
            "rf above brokers",
            topic("t", 1, 4),
            Some(ErrorCode::InvalidReplicationFactor),
        ),
        (
            "assignment and rf",
            NewTopic {
                assignments: vec![vec![1]],
                ..topic("t", -1, 1)
            },
            Some(ErrorCode::InvalidRequest),
        ),
        (
            "assignment repeats broker",
            NewTopic {
                assignments: vec![vec![1, 1]],
                ..topic("t", -1, -1)
            },
            Some(ErrorCode::InvalidReplicaAssignment),
        ),
        (
            "assignment unknown broker",
            NewTopic {
                assignments: vec![vec![1, 9]],
                ..topic("t", -1, -1)
            },
            Some(ErrorCode::InvalidReplicaAssignment),
        ),
        (
            "assignment uneven",
            NewTopic {
                assignments: vec![vec![1, 2], vec![3]],
                ..topic("t", -1, -1)
            },
            Some(ErrorCode::InvalidReplicaAssignment),
        ),
        (
            "assignment ok",
            NewTopic {
                assignments: vec![vec![3, 1], vec![2, 3]],
                ..topic("t", -1, -1)
            },
            None,
        ),
    ];
    for (name, t, want) in cases {
        let (mut c, image) = cluster(3);
        let (_, r) = c.create_topic(&image, &topic("existing", 1, 1)).unwrap();
        let image = apply(&image, &r);
        match (c.create_topic(&image, &t), want) {
            (Ok((id, records)), None) => {
                let image = apply(&image, &records);
                assert_eq!(image.topic_by_name(&t.name).unwrap().id, id, "{name}");
            }
            (Err(e), Some(code)) => assert_eq!(e.code, code, "{name}: {}", e.message),
            (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn placement_spreads_leaders_and_replicas() {
    let (mut c, image) = cluster(3);
    let (id, records) = c.create_topic(&image, &topic("t", 6, 2)).unwrap();
    let image = apply(&image, &records);
    let t = image.topic(id).unwrap();
    let mut leaders = [0; 4];
    let mut replicas = [0; 4];
    for p in t.partitions.values() {
        assert_eq!(p.replicas.len(), 2);
        assert_eq!(p.isr, p.replicas);
        assert_eq!(p.leader, p.replicas[0]);
        leaders[p.leader as usize] += 1;
        for r in &p.replicas {
            replicas[*r as usize] += 1;
        }
    }
    assert_eq!(&leaders[1..], &[2, 2, 2]);
    assert_eq!(&replicas[1..], &[4, 4, 4]);
    // Explicit assignments are kept as given.
    let t2 = NewTopic {
        assignments: vec![vec![3, 1]],
        ..topic("u", -1, -1)
    };
    let (id, records) = c.create_topic(&image, &t2).unwrap();
    let image = apply(&image, &records);
    assert_eq!(image.partition(id, 0).unwrap().replicas, vec![3, 1]);
    assert_eq!(image.partition(id, 0).unwrap().leader, 3);
}

#[test]
fn fenced_brokers_get_no_replicas() {
    let (mut c, image) = cluster(3);
    // Broker 3 misses its heartbeats; 1 and 2 keep theirs.
    let mut image = image;
    for id in [1, 2] {
        let r = c.heartbeat(&image, &hb(&image, id), 10, 5_000).unwrap();
        image = apply(&image, &r.records);
    }
    let records = c.expire_sessions(&image, 9_500);
    let image = apply(&image, &records);
    assert!(image.broker(3).unwrap().fenced);
    assert!(!image.broker(1).unwrap().fenced);
    let err = c.create_topic(&image, &topic("t", 1, 3)).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidReplicationFactor);
    let (id, records) = c.create_topic(&image, &topic("t", 4, 2)).unwrap();
    let image = apply(&image, &records);
    assert!(
        image
            .topic(id)
            .unwrap()
            .partitions
            .values()
            .all(|p| !p.replicas.contains(&3))
    );
}

#[test]
fn delete_topic() {
    let (mut c, image) = cluster(1);
    let (id, records) = c.create_topic(&image, &topic("t", 2, 1)).unwrap();
    let image = apply(&image, &records);
    assert_eq!(
        c.delete_topic(&image, "nope").unwrap_err().code,
        ErrorCode::UnknownTopicOrPartition
    );
    let (image, delta) = image.apply(&c.delete_topic(&image, "t").unwrap()).unwrap();
    assert!(delta.topics_removed.contains_key(&id));
    assert!(image.topic_by_name("t").is_none() && image.topic(id).is_none());
}

#[test]
fn registration_and_heartbeat() {
    let (mut c, image) = cluster(2);
    let epoch1 = image.broker(1).unwrap().epoch;
    // Same incarnation: same epoch, nothing to write.
    assert_eq!(
        c.register_broker(&image, &reg(1, 1), 100).unwrap(),
        (epoch1, vec![])
    );
    // New incarnation while the old session lives.
    let err = c.register_broker(&image, &reg(1, 99), 100).unwrap_err();
    assert_eq!(err.code, ErrorCode::DuplicateBrokerRegistration);
    // Heartbeat errors.
    let mut h = hb(&image, 1);
    h.broker_epoch += 5;
    assert_eq!(
        c.heartbeat(&image, &h, 10, 100).unwrap_err().code,
        ErrorCode::StaleBrokerEpoch
    );
    h.broker_id = 9;
    assert_eq!(
        c.heartbeat(&image, &h, 10, 100).unwrap_err().code,
        ErrorCode::BrokerIdNotRegistered
    );
    // After the session expired, a new incarnation gets a higher epoch and starts fenced.
    let (epoch, records) = c.register_broker(&image, &reg(1, 99), 20_000).unwrap();
    assert!(epoch > image.highest_broker_epoch());
    let image = apply(&image, &records);
    assert!(image.broker(1).unwrap().fenced);
    // Not caught up: stays fenced; caught up: unfenced.
    let mut h = hb(&image, 1);
    h.current_metadata_offset = 5;
    let r = c.heartbeat(&image, &h, 10, 20_100).unwrap();
    assert!(r.is_fenced && r.records.is_empty());
    h.current_metadata_offset = 10;
    let r = c.heartbeat(&image, &h, 10, 20_200).unwrap();
    assert!(!r.is_fenced);
    let image = apply(&image, &r.records);
    assert!(!image.broker(1).unwrap().fenced);
}

/// Topic "t" with one partition on [1, 2, 3], led by 1.
fn three_replicas() -> (Controller, MetadataImage, Uuid) {
    let (mut c, image) = cluster(3);
    let t = NewTopic {
        assignments: vec![vec![1, 2, 3]],
        ..topic("t", -1, -1)
    };
    let (id, records) = c.create_topic(&image, &t).unwrap();
    (c, apply(&image, &records), id)
}

#[test]
fn session_expiry_fences_and_elects_from_the_isr() {
    let (mut c, image, id) = three_replicas();
    let mut image = image;
    for b in [2, 3] {
        let r = c.heartbeat(&image, &hb(&image, b), 10, 8_000).unwrap();
        image = apply(&image, &r.records);
    }
    assert!(
        c.expire_sessions(&image, 9_000).is_empty(),
        "nobody expired yet"
    );
    let (image, delta) = image.apply(&c.expire_sessions(&image, 9_001)).unwrap();
    assert!(delta.brokers_fenced.contains(&1));
    let p = image.partition(id, 0).unwrap();
    assert_eq!(
        (p.leader, p.isr.clone(), p.leader_epoch),
        (2, vec![2, 3], 1)
    );
    // Everyone gone: leaderless, the last ISR member stays (no unclean election).
    let (image, _) = image.apply(&c.expire_sessions(&image, 30_000)).unwrap();
    let p = image.partition(id, 0).unwrap();
    assert_eq!(p.leader, NO_LEADER);
    assert_eq!(p.isr.len(), 1);
    let last = p.isr[0];
    // That member comes back: it leads again.
    let r = c.heartbeat(&image, &hb(&image, last), 10, 31_000).unwrap();
    let image = apply(&image, &r.records);
    assert_eq!(image.partition(id, 0).unwrap().leader, last);
}

/// A heartbeat that reached the controller while it could not commit (no
/// quorum) still renews the session: the quorum coming back fences only the
/// brokers that were silent, not every one whose heartbeats waited.
#[test]
fn heartbeats_heard_without_a_quorum_renew_their_sessions() {
    let (mut c, image, _) = three_replicas();
    let mut image = image;
    for b in [1, 2, 3] {
        let r = c.heartbeat(&image, &hb(&image, b), 10, 8_000).unwrap();
        image = apply(&image, &r.records);
    }
    // Brokers 1 and 2 kept heartbeating at 12 000 while nothing could be
    // decided; 3 went silent. One of 2's is of an old epoch.
    let epoch = |b: i32| image.broker(b).unwrap().epoch;
    c.heard_from(&image, 1, epoch(1), 12_000);
    c.heard_from(&image, 2, epoch(2) - 1, 12_000);
    let (image, delta) = image.apply(&c.expire_sessions(&image, 17_001)).unwrap();
    assert!(!delta.brokers_fenced.contains(&1), "{delta:?}");
    assert!(delta.brokers_fenced.contains(&2), "{delta:?}");
    assert!(delta.brokers_fenced.contains(&3), "{delta:?}");
    assert!(image.is_active(1));
}

#[test]
fn controlled_shutdown_moves_leadership() {
    let (mut c, image, id) = three_replicas();
    let mut h = hb(&image, 1);
    h.want_shutdown = true;
    let r = c.heartbeat(&image, &h, 10, 100).unwrap();
    // It leads: its leadership moves first, and it must wait.
    assert!(!r.should_shut_down);
    let image = apply(&image, &r.records);
    let p = image.partition(id, 0).unwrap();
    assert_eq!((p.leader, p.isr.clone()), (2, vec![2, 3]));
    assert!(image.broker(1).unwrap().in_controlled_shutdown);
    assert!(!image.broker(1).unwrap().fenced);
    // Leading nothing now: fenced and told to stop, so a new incarnation
    // registers at once although this session is still alive.
    let r = c.heartbeat(&image, &h, 10, 200).unwrap();
    assert!(r.should_shut_down);
    let stopped = apply(&image, &r.records);
    assert!(stopped.broker(1).unwrap().fenced);
    let again = reg(1, 9);
    let (epoch, records) = c.register_broker(&stopped, &again, 300).unwrap();
    let restarted = apply(&stopped, &records);
    assert_eq!(restarted.broker(1).unwrap().epoch, epoch);
    // Without the fence, the live session refuses the new incarnation.
    assert_eq!(
        c.register_broker(&image, &again, 300).unwrap_err().code,
        ErrorCode::DuplicateBrokerRegistration
    );
    // A shutting-down broker gets no new replicas.
    let (t2, records) = c.create_topic(&image, &topic("u", 3, 2)).unwrap();
    let image = apply(&image, &records);
    assert!(
        image
            .topic(t2)
            .unwrap()
            .partitions
            .values()
            .all(|p| !p.replicas.contains(&1))
    );
}

#[test]
fn alter_partition_checks() {
    let (c, image, id) = three_replicas();
    let epoch = |b: i32| image.broker(b).unwrap().epoch;
    let req = |le: i32, pe: i32, isr: &[i32]| AlterPartition {
        topic_id: id,
        partition: 0,
        leader_epoch: le,
        partition_epoch: pe,
        new_isr: isr.iter().map(|b| (*b, -1)).collect(),
    };
    let cases: Vec<(&str, i32, i64, AlterPartition, Option<ErrorCode>)> = vec![
        ("shrink", 1, epoch(1), req(0, 0, &[1, 2]), None),
        (
            "stale broker epoch",
            1,
            epoch(1) + 100,
            req(0, 0, &[1, 2]),
            Some(ErrorCode::StaleBrokerEpoch),
        ),
        (
            "unknown topic",
            1,
            epoch(1),
            AlterPartition {
                topic_id: Uuid([9; 16]),
                ..req(0, 0, &[1])
            },
            Some(ErrorCode::UnknownTopicId),
        ),
        (
            "unknown partition",
            1,
            epoch(1),
            AlterPartition {
                partition: 5,
                ..req(0, 0, &[1])
            },
            Some(ErrorCode::UnknownTopicOrPartition),
        ),
        (
            "newer leader epoch",
            1,
            epoch(1),
            req(1, 0, &[1]),
            Some(ErrorCode::NotController),
        ),
        (
            "older leader epoch",
            1,
            epoch(1),
            req(-1, 0, &[1]),
            Some(ErrorCode::FencedLeaderEpoch),
        ),
        (
            "not the leader",
            2,
            epoch(2),
            req(0, 0, &[2]),
            Some(ErrorCode::InvalidRequest),
        ),
        (
            "older partition epoch",
            1,
            epoch(1),
            req(0, -1, &[1]),
            Some(ErrorCode::InvalidUpdateVersion),
        ),
        (
            "not a replica",
            1,
            epoch(1),
            req(0, 0, &[1, 7]),
            Some(ErrorCode::InvalidRequest),
        ),
        (
            "leader missing",
            1,
            epoch(1),
            req(0, 0, &[2, 3]),
            Some(ErrorCode::InvalidRequest),
        ),
        (
            "replica epoch mismatch",
            1,
            epoch(1),
            AlterPartition {
                new_isr: vec![(1, -1), (2, epoch(2) + 1)],
                ..req(0, 0, &[])
            },
            Some(ErrorCode::IneligibleReplica),
        ),
    ];
    for (name, broker, broker_epoch, r, want) in cases {
        match (c.alter_partition(&image, broker, broker_epoch, &r), want) {
            (Ok((p, records)), None) => {
                let next = apply(&image, &records);
                assert_eq!(next.partition(id, 0).unwrap(), &p, "{name}");
                assert_eq!(p.partition_epoch, 1, "{name}");
                assert_eq!(
                    p.leader_epoch, 0,
                    "{name}: ISR changes keep the leader epoch"
                );
            }
            (Err(e), Some(code)) => assert_eq!(e.code, code, "{name}: {}", e.message),
            (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn alter_partition_refuses_a_fenced_replica() {
    let (mut c, mut image, id) = three_replicas();
    for b in [1, 2] {
        let r = c.heartbeat(&image, &hb(&image, b), 10, 8_000).unwrap();
        image = apply(&image, &r.records);
    }
    let image = apply(&image, &c.expire_sessions(&image, 9_500));
    let p = image.partition(id, 0).unwrap().clone();
    assert_eq!(p.isr, vec![1, 2]);
    let r = AlterPartition {
        topic_id: id,
        partition: 0,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: vec![(1, -1), (2, -1), (3, -1)],
    };
    let err = c
        .alter_partition(&image, 1, image.broker(1).unwrap().epoch, &r)
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::IneligibleReplica);
}

#[test]
fn producer_id_blocks_do_not_overlap() {
    let (c, image) = cluster(1);
    let e = image.broker(1).unwrap().epoch;
    let (first, records) = c.allocate_producer_ids(&image, 1, e).unwrap();
    let image = apply(&image, &records);
    let (second, _) = c.allocate_producer_ids(&image, 1, e).unwrap();
    assert_eq!((first, second), (0, 1_000));
    assert_eq!(
        c.allocate_producer_ids(&image, 1, e + 1).unwrap_err().code,
        ErrorCode::StaleBrokerEpoch
    );
}

#[test]
fn apply_rejects_invalid_records() {
    use weir_metadata::ApplyError;
    use weir_protocol::messages::metadata::{
        PartitionChangeRecord, PartitionRecord, RemoveTopicRecord,
    };
    let (_, image, id) = three_replicas();
    let cases: Vec<(&str, MetadataRecord)> = vec![
        (
            "unknown topic",
            RemoveTopicRecord {
                topic_id: Uuid([9; 16]),
                ..Default::default()
            }
            .into(),
        ),
        (
            "missing partition",
            PartitionChangeRecord {
                topic_id: id,
                partition_id: 4,
                leader: 2,
                ..Default::default()
            }
            .into(),
        ),
        (
            "leader not in isr",
            PartitionChangeRecord {
                topic_id: id,
                partition_id: 0,
                isr: Some(vec![2, 3]),
                ..Default::default()
            }
            .into(),
        ),
        (
            "isr outside replicas",
            PartitionChangeRecord {
                topic_id: id,
                partition_id: 0,
                isr: Some(vec![1, 7]),
                ..Default::default()
            }
            .into(),
        ),
        (
            "duplicate partition",
            PartitionRecord {
                topic_id: id,
                partition_id: 0,
                replicas: vec![1],
                isr: vec![1],
                leader: 1,
                ..Default::default()
            }
            .into(),
        ),
    ];
    for (name, r) in cases {
        let before = image.clone();
        let err = image.apply([&r]).expect_err(name);
        assert!(
            !matches!(err, ApplyError::InvalidField { .. }) || name.is_empty(),
            "{name}: {err}"
        );
        assert_eq!(image, before, "{name}: the image is a value");
    }
}

#[test]
fn placement_spreads_replicas_over_racks() {
    let mut c = Controller::new(ControllerConfig::default(), 11);
    let mut image = MetadataImage::empty();
    let rack = |id: i32| ["a", "b", "c"][((id - 1) / 2) as usize].to_string();
    for id in 1..=6 {
        let r = Registration {
            rack: Some(rack(id)),
            ..reg(id, id as u8)
        };
        let (_, records) = c.register_broker(&image, &r, 0).unwrap();
        image = apply(&image, &records);
        let reply = c.heartbeat(&image, &hb(&image, id), 10, 0).unwrap();
        image = apply(&image, &reply.records);
    }
    for (name, rf) in [("three", 3), ("two", 2)] {
        let (id, records) = c.create_topic(&image, &topic(name, 12, rf)).unwrap();
        image = apply(&image, &records);
        for (i, p) in &image.topic(id).unwrap().partitions {
            let racks: std::collections::BTreeSet<String> =
                p.replicas.iter().map(|r| rack(*r)).collect();
            assert_eq!(racks.len(), rf as usize, "{name}-{i}: {:?}", p.replicas);
        }
    }
}
