//! Table-driven tests of CreatePartitions, ElectLeaders (preferred and
//! unclean) and the periodic leader rebalance, applied to an image.

use weir_metadata::controller::{
    AlterPartition, Controller, ControllerConfig, ElectionType, Heartbeat, NewPartitions, NewTopic,
    Registration, imbalanced_partitions,
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

fn hb(image: &MetadataImage, id: i32, want_fence: bool) -> Heartbeat {
    Heartbeat {
        broker_id: id,
        broker_epoch: image.broker(id).unwrap().epoch,
        current_metadata_offset: 10,
        want_fence,
        want_shutdown: false,
    }
}

/// `n` unfenced brokers 1..=n, broker i in rack `racks[i-1]` if given.
fn cluster(n: i32, racks: &[&str]) -> (Controller, MetadataImage) {
    let mut c = Controller::new(ControllerConfig::default(), 11);
    let mut image = MetadataImage::empty();
    for id in 1..=n {
        let reg = Registration {
            broker_id: id,
            incarnation_id: Uuid([id as u8; 16]),
            endpoints: vec![],
            rack: racks.get(id as usize - 1).map(|r| r.to_string()),
        };
        let (_, records) = c.register_broker(&image, &reg, 0).unwrap();
        image = apply(&image, &records);
        let reply = c.heartbeat(&image, &hb(&image, id, false), 10, 0).unwrap();
        image = apply(&image, &reply.records);
    }
    (c, image)
}

fn create(
    c: &mut Controller,
    image: &MetadataImage,
    name: &str,
    n: i32,
    rf: i16,
) -> (Uuid, MetadataImage) {
    let t = NewTopic {
        name: name.into(),
        num_partitions: n,
        replication_factor: rf,
        ..Default::default()
    };
    let (id, records) = c.create_topic(image, &t).unwrap();
    (id, apply(image, &records))
}

fn more(name: &str, count: i32, assignments: Option<Vec<Vec<i32>>>) -> NewPartitions {
    NewPartitions {
        name: name.into(),
        count,
        assignments,
    }
}

#[test]
fn create_partitions_validation() {
    let (mut c, image) = cluster(3, &[]);
    let (_, image) = create(&mut c, &image, "t", 2, 2);
    let (_, image) = create(&mut c, &image, "__consumer_offsets", 1, 1);
    let cases: Vec<(&str, NewPartitions, Option<ErrorCode>)> = vec![
        ("grow", more("t", 5, None), None),
        (
            "unknown",
            more("nope", 5, None),
            Some(ErrorCode::UnknownTopicOrPartition),
        ),
        (
            "same count",
            more("t", 2, None),
            Some(ErrorCode::InvalidPartitions),
        ),
        (
            "fewer",
            more("t", 1, None),
            Some(ErrorCode::InvalidPartitions),
        ),
        (
            "negative",
            more("t", -3, None),
            Some(ErrorCode::InvalidPartitions),
        ),
        (
            "too many",
            more("t", 20_000, None),
            Some(ErrorCode::InvalidPartitions),
        ),
        (
            "internal",
            more("__consumer_offsets", 4, None),
            Some(ErrorCode::InvalidTopicException),
        ),
        (
            "assigned",
            more("t", 4, Some(vec![vec![3, 1], vec![2, 3]])),
            None,
        ),
        (
            "too few assignments",
            more("t", 4, Some(vec![vec![3, 1]])),
            Some(ErrorCode::InvalidReplicaAssignment),
        ),
        (
            "wrong replication factor",
            more("t", 3, Some(vec![vec![1, 2, 3]])),
            Some(ErrorCode::InvalidReplicaAssignment),
        ),
        (
            "repeated broker",
            more("t", 3, Some(vec![vec![1, 1]])),
            Some(ErrorCode::InvalidReplicaAssignment),
        ),
        (
            "unregistered broker",
            more("t", 3, Some(vec![vec![1, 9]])),
            Some(ErrorCode::InvalidReplicaAssignment),
        ),
        (
            "empty assignment",
            more("t", 3, Some(vec![vec![]])),
            Some(ErrorCode::InvalidReplicaAssignment),
        ),
    ];
    for (name, req, want) in cases {
        match (c.create_partitions(&image, &req), want) {
            (Ok(records), None) => {
                let image = apply(&image, &records);
                let t = image.topic_by_name(&req.name).unwrap();
                assert_eq!(t.partitions.len() as i32, req.count, "{name}");
                assert!(
                    t.partitions.values().all(|p| p.replicas.len() == 2),
                    "{name}"
                );
                if let Some(a) = &req.assignments {
                    let added: Vec<Vec<i32>> = t
                        .partitions
                        .values()
                        .skip(2)
                        .map(|p| p.replicas.clone())
                        .collect();
                    assert_eq!(&added, a, "{name}");
                }
            }
            (Err(e), Some(code)) => assert_eq!(e.code, code, "{name}: {}", e.message),
            (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn new_partitions_need_enough_active_brokers() {
    let (mut c, image) = cluster(3, &[]);
    let (_, image) = create(&mut c, &image, "t", 1, 3);
    // Broker 3 asks to be fenced: two active brokers left for rf 3.
    let r = c.heartbeat(&image, &hb(&image, 3, true), 10, 10).unwrap();
    let image = apply(&image, &r.records);
    let err = c
        .create_partitions(&image, &more("t", 2, None))
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidReplicationFactor);
    // An explicit assignment may name a fenced broker beside active ones;
    // it starts outside the ISR.
    let records = c
        .create_partitions(&image, &more("t", 2, Some(vec![vec![3, 1, 2]])))
        .unwrap();
    let image2 = apply(&image, &records);
    let id = image2.topic_by_name("t").unwrap().id;
    let p = image2.partition(id, 1).unwrap();
    assert_eq!((p.leader, p.isr.clone()), (1, vec![1, 2]));
    // But not only fenced ones (a one-replica topic to say so).
    let (_, image) = create(&mut c, &image, "one", 1, 1);
    let err = c
        .create_partitions(&image, &more("one", 2, Some(vec![vec![3]])))
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidReplicaAssignment);
}

#[test]
fn new_partitions_spread_leaders_over_racks() {
    let (mut c, image) = cluster(4, &["a", "a", "b", "b"]);
    let (id, image) = create(&mut c, &image, "t", 1, 2);
    let records = c.create_partitions(&image, &more("t", 9, None)).unwrap();
    let image = apply(&image, &records);
    let t = image.topic(id).unwrap();
    let rack = |b: i32| if b <= 2 { "a" } else { "b" };
    let mut leaders = [0; 5];
    for (i, p) in t.partitions.iter().skip(1) {
        assert_ne!(
            rack(p.replicas[0]),
            rack(p.replicas[1]),
            "partition {i} in one rack"
        );
        assert_eq!(p.leader, p.replicas[0]);
        assert_eq!(p.isr, p.replicas);
        assert_eq!((p.leader_epoch, p.partition_epoch), (0, 0));
        leaders[p.leader as usize] += 1;
    }
    assert_eq!(&leaders[1..], &[2, 2, 2, 2], "8 new leaders over 4 brokers");
}

/// Topic "t", one partition on [1, 2, 3]; broker 1 is fenced and comes
/// back, so 2 leads and 1 is out of the ISR.
fn moved_leader() -> (Controller, MetadataImage, Uuid) {
    let (mut c, image) = cluster(3, &[]);
    let t = NewTopic {
        name: "t".into(),
        num_partitions: -1,
        replication_factor: -1,
        assignments: vec![vec![1, 2, 3]],
        ..Default::default()
    };
    let (id, records) = c.create_topic(&image, &t).unwrap();
    let image = apply(&image, &records);
    let r = c.heartbeat(&image, &hb(&image, 1, true), 10, 10).unwrap();
    let image = apply(&image, &r.records);
    let r = c.heartbeat(&image, &hb(&image, 1, false), 10, 20).unwrap();
    let image = apply(&image, &r.records);
    let p = image.partition(id, 0).unwrap();
    assert_eq!((p.leader, p.isr.clone()), (2, vec![2, 3]));
    (c, image, id)
}

/// The leader takes `back` into the ISR again (it caught up).
fn rejoin(c: &Controller, image: &MetadataImage, id: Uuid, back: i32) -> MetadataImage {
    let p = image.partition(id, 0).unwrap();
    let mut isr: Vec<(i32, i64)> = p.isr.iter().map(|r| (*r, -1)).collect();
    isr.push((back, -1));
    let req = AlterPartition {
        topic_id: id,
        partition: 0,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: isr,
    };
    let (_, records) = c.alter_partition(image, p.leader, -1, &req).unwrap();
    apply(image, &records)
}

fn codes(results: &[weir_metadata::controller::ElectionResult]) -> Vec<(String, i32, ErrorCode)> {
    results
        .iter()
        .map(|r| {
            let code = r
                .result
                .as_ref()
                .map_or_else(|e| e.code, |_| ErrorCode::None);
            (r.topic.clone(), r.partition, code)
        })
        .collect()
}

#[test]
fn preferred_election() {
    let (c, image, id) = moved_leader();
    let asked = [
        ("t".to_string(), 0),
        ("t".to_string(), 7),
        ("u".to_string(), 0),
    ];
    // Broker 1 is active but not in the ISR.
    let (results, records) = c.elect_leaders(&image, ElectionType::Preferred, Some(&asked));
    assert!(records.is_empty());
    assert_eq!(
        codes(&results),
        vec![
            ("t".into(), 0, ErrorCode::PreferredLeaderNotAvailable),
            ("t".into(), 7, ErrorCode::UnknownTopicOrPartition),
            ("u".into(), 0, ErrorCode::UnknownTopicOrPartition),
        ]
    );
    assert_eq!(imbalanced_partitions(&image), vec![]);

    let image = rejoin(&c, &image, id, 1);
    assert_eq!(imbalanced_partitions(&image), vec![(id, 0)]);
    let before = image.partition(id, 0).unwrap().leader_epoch;
    let (results, records) = c.elect_leaders(&image, ElectionType::Preferred, Some(&asked[..1]));
    assert_eq!(codes(&results), vec![("t".into(), 0, ErrorCode::None)]);
    let image = apply(&image, &records);
    let p = image.partition(id, 0).unwrap();
    assert_eq!((p.leader, p.leader_epoch), (1, before + 1));
    assert_eq!(imbalanced_partitions(&image), vec![]);

    // Again: not needed. For every partition, those are left out.
    let (results, records) = c.elect_leaders(&image, ElectionType::Preferred, Some(&asked[..1]));
    assert!(records.is_empty());
    assert_eq!(
        codes(&results),
        vec![("t".into(), 0, ErrorCode::ElectionNotNeeded)]
    );
    let (results, _) = c.elect_leaders(&image, ElectionType::Preferred, None);
    assert!(results.is_empty(), "{results:?}");
}

#[test]
fn a_partition_named_twice_is_elected_once() {
    let (c, image, id) = moved_leader();
    let image = rejoin(&c, &image, id, 1);
    let asked = [("t".to_string(), 0), ("t".to_string(), 0)];
    let (results, records) = c.elect_leaders(&image, ElectionType::Preferred, Some(&asked));
    assert_eq!(records.len(), 1);
    assert_eq!(codes(&results), vec![("t".into(), 0, ErrorCode::None); 2]);
}

#[test]
fn rebalance_elects_every_preferred_replica_it_can() {
    let (mut c, image, id) = moved_leader();
    assert!(
        c.rebalance_leaders(&image).is_empty(),
        "1 is not in the ISR yet"
    );
    let image = rejoin(&c, &image, id, 1);
    let (u, image) = create(&mut c, &image, "u", 6, 3);
    let records = c.rebalance_leaders(&image);
    assert_eq!(records.len(), 1, "only t-0 is off its preferred replica");
    let image = apply(&image, &records);
    assert_eq!(image.partition(id, 0).unwrap().leader, 1);
    assert!(
        image
            .topic(u)
            .unwrap()
            .partitions
            .values()
            .all(|p| p.leader == p.replicas[0])
    );
    assert!(c.rebalance_leaders(&image).is_empty());
}

#[test]
fn unclean_election() {
    let (mut c, image) = cluster(3, &[]);
    let t = NewTopic {
        name: "t".into(),
        num_partitions: -1,
        replication_factor: -1,
        assignments: vec![vec![1, 2, 3]],
        ..Default::default()
    };
    let (id, records) = c.create_topic(&image, &t).unwrap();
    let mut image = apply(&image, &records);
    let asked = [("t".to_string(), 0)];
    let (results, _) = c.elect_leaders(&image, ElectionType::Unclean, Some(&asked));
    assert_eq!(
        codes(&results),
        vec![("t".into(), 0, ErrorCode::ElectionNotNeeded)]
    );

    // 1, then 2, then 3 fenced: leaderless with ISR [3].
    for b in [1, 2, 3] {
        let r = c.heartbeat(&image, &hb(&image, b, true), 10, 10).unwrap();
        image = apply(&image, &r.records);
    }
    let p = image.partition(id, 0).unwrap();
    assert_eq!((p.leader, p.isr.clone()), (NO_LEADER, vec![3]));
    let (results, records) = c.elect_leaders(&image, ElectionType::Unclean, Some(&asked));
    assert!(records.is_empty());
    assert_eq!(
        codes(&results),
        vec![("t".into(), 0, ErrorCode::EligibleLeadersNotAvailable)]
    );
    let (results, _) = c.elect_leaders(&image, ElectionType::Preferred, Some(&asked));
    assert_eq!(
        codes(&results),
        vec![("t".into(), 0, ErrorCode::PreferredLeaderNotAvailable)]
    );

    // 1 comes back: out of the ISR, so only an unclean election makes it
    // leader, and the ISR becomes just 1.
    let r = c.heartbeat(&image, &hb(&image, 1, false), 10, 20).unwrap();
    let image = apply(&image, &r.records);
    assert_eq!(image.partition(id, 0).unwrap().leader, NO_LEADER);
    let before = image.partition(id, 0).unwrap().leader_epoch;
    let (results, records) = c.elect_leaders(&image, ElectionType::Unclean, None);
    assert_eq!(codes(&results), vec![("t".into(), 0, ErrorCode::None)]);
    let image = apply(&image, &records);
    let p = image.partition(id, 0).unwrap();
    assert_eq!(
        (p.leader, p.isr.clone(), p.leader_epoch),
        (1, vec![1], before + 1)
    );
}
