//! Partition reassignment, applied to an image: starting one
//! (AlterPartitionReassignments), its completion by the ISR change that
//! brings the last target replica in (AlterPartition) or at once when it
//! only removes, cancelling it, a new target midway, fencing during one,
//! ListPartitionReassignments and the refusals.

use weir_metadata::controller::{
    AlterPartition, Controller, ControllerConfig, Heartbeat, NewTopic, Reassignment, Registration,
    ongoing_reassignments,
};
use weir_metadata::image::TOPIC_RESOURCE;
use weir_metadata::{MetadataImage, NO_LEADER, Partition};
use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::metadata::ConfigRecord;
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

/// `n` unfenced brokers 1..=n.
fn cluster(n: i32) -> (Controller, MetadataImage) {
    let mut c = Controller::new(ControllerConfig::default(), 5);
    let mut image = MetadataImage::empty();
    for id in 1..=n {
        let reg = Registration {
            broker_id: id,
            incarnation_id: Uuid([id as u8; 16]),
            endpoints: vec![],
            rack: None,
        };
        let (_, records) = c.register_broker(&image, &reg, 0).unwrap();
        image = apply(&image, &records);
        let reply = c.heartbeat(&image, &hb(&image, id, false), 10, 0).unwrap();
        image = apply(&image, &reply.records);
    }
    (c, image)
}

/// Topic "t" with one partition on `replicas` (the first leads).
fn topic(c: &mut Controller, image: &MetadataImage, replicas: &[i32]) -> (Uuid, MetadataImage) {
    let t = NewTopic {
        name: "t".into(),
        num_partitions: -1,
        replication_factor: -1,
        assignments: vec![replicas.to_vec()],
        ..Default::default()
    };
    let (id, records) = c.create_topic(image, &t).unwrap();
    (id, apply(image, &records))
}

fn move_to(target: Option<&[i32]>) -> Reassignment {
    Reassignment {
        topic: "t".into(),
        partition: 0,
        target: target.map(<[i32]>::to_vec),
    }
}

/// Reassigns t-0 to `target` (`None`: cancels), which must be accepted.
fn reassign(c: &Controller, image: &MetadataImage, target: Option<&[i32]>) -> MetadataImage {
    let (results, records) = c.alter_partition_reassignments(image, &[move_to(target)]);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].result, Ok(()), "reassign to {target:?}");
    apply(image, &records)
}

/// The leader of t-0 proposes the ISR `isr`; returns the partition as
/// the controller answers it and the image after.
fn alter_isr(
    c: &Controller,
    image: &MetadataImage,
    id: Uuid,
    isr: &[i32],
) -> (Partition, MetadataImage) {
    let p = image.partition(id, 0).unwrap();
    let req = AlterPartition {
        topic_id: id,
        partition: 0,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: isr.iter().map(|b| (*b, -1)).collect(),
    };
    let (answer, records) = c.alter_partition(image, p.leader, -1, &req).unwrap();
    let image = apply(image, &records);
    assert_eq!(&answer, image.partition(id, 0).unwrap());
    (answer, image)
}

/// (replicas, adding, removing, ISR, leader) of t-0.
type Shape = (Vec<i32>, Vec<i32>, Vec<i32>, Vec<i32>, i32);

fn shape(image: &MetadataImage, id: Uuid) -> Shape {
    let p = image.partition(id, 0).unwrap();
    (
        p.replicas.clone(),
        p.adding_replicas.clone(),
        p.removing_replicas.clone(),
        p.isr.clone(),
        p.leader,
    )
}

fn s(replicas: &[i32], adding: &[i32], removing: &[i32], isr: &[i32], leader: i32) -> Shape {
    (
        replicas.to_vec(),
        adding.to_vec(),
        removing.to_vec(),
        isr.to_vec(),
        leader,
    )
}

fn leader_epoch(image: &MetadataImage, id: Uuid) -> i32 {
    image.partition(id, 0).unwrap().leader_epoch
}

#[test]
fn a_move_completes_when_the_target_joins_the_isr() {
    let (mut c, image) = cluster(3);
    let (id, image) = topic(&mut c, &image, &[1]);
    let epoch = leader_epoch(&image, id);

    // Started: the replicas are the target then the removed one; the ISR
    // and the leader stay, and so does the leader epoch.
    let image = reassign(&c, &image, Some(&[2]));
    assert_eq!(shape(&image, id), s(&[2, 1], &[2], &[1], &[1], 1));
    assert_eq!(leader_epoch(&image, id), epoch);
    let listed = ongoing_reassignments(&image, None);
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (
            listed[0].topic.as_str(),
            listed[0].partition,
            listed[0].replicas.clone(),
            listed[0].adding.clone(),
            listed[0].removing.clone()
        ),
        ("t", 0, vec![2, 1], vec![2], vec![1])
    );

    // Broker 2 caught up: the leader's ISR change completes the move in
    // the same record; broker 2 leads from a new epoch.
    let (answer, image) = alter_isr(&c, &image, id, &[1, 2]);
    assert_eq!(shape(&image, id), s(&[2], &[], &[], &[2], 2));
    assert_eq!(answer.leader, 2, "the requester learns it no longer leads");
    assert_eq!(leader_epoch(&image, id), epoch + 1);
    assert!(ongoing_reassignments(&image, None).is_empty());
}

#[test]
fn adding_replicas_completes_only_when_all_are_in_sync() {
    let (mut c, image) = cluster(3);
    let (id, image) = topic(&mut c, &image, &[1]);
    let epoch = leader_epoch(&image, id);
    let image = reassign(&c, &image, Some(&[1, 2, 3]));
    assert_eq!(shape(&image, id), s(&[1, 2, 3], &[2, 3], &[], &[1], 1));

    let (_, image) = alter_isr(&c, &image, id, &[1, 2]);
    assert_eq!(shape(&image, id), s(&[1, 2, 3], &[2, 3], &[], &[1, 2], 1));
    let (_, image) = alter_isr(&c, &image, id, &[1, 2, 3]);
    assert_eq!(shape(&image, id), s(&[1, 2, 3], &[], &[], &[1, 2, 3], 1));
    // Nothing was removed and the leader stayed: no new leader epoch.
    assert_eq!(leader_epoch(&image, id), epoch);
}

#[test]
fn removing_in_sync_replicas_completes_at_once_and_fences_them() {
    let (mut c, image) = cluster(3);
    let (id, image) = topic(&mut c, &image, &[1, 2, 3]);
    let epoch = leader_epoch(&image, id);
    let image = reassign(&c, &image, Some(&[1, 2]));
    assert_eq!(shape(&image, id), s(&[1, 2], &[], &[], &[1, 2], 1));
    assert!(ongoing_reassignments(&image, None).is_empty());
    // Same leader, but a new epoch: broker 3's fetches at the old one fail.
    assert_eq!(leader_epoch(&image, id), epoch + 1);

    // The removed replica was the leader: the first target replica in
    // the ISR leads.
    let image = reassign(&c, &image, Some(&[2]));
    assert_eq!(shape(&image, id), s(&[2], &[], &[], &[2], 2));
}

#[test]
fn cancelling_returns_to_the_original_replicas() {
    let (mut c, image) = cluster(3);
    let (id, image) = topic(&mut c, &image, &[1, 2]);
    let before = image.partition(id, 0).unwrap().clone();
    let image = reassign(&c, &image, Some(&[3, 2]));
    assert_eq!(shape(&image, id), s(&[3, 2, 1], &[3], &[1], &[1, 2], 1));

    // The original replicas come back in their order of the reassignment
    // (target first), as in Kafka: the preferred leader may change.
    let image = reassign(&c, &image, None);
    let after = image.partition(id, 0).unwrap();
    assert_eq!(shape(&image, id), s(&[2, 1], &[], &[], &[1, 2], 1));
    assert!(
        after.leader_epoch > before.leader_epoch,
        "broker 3 is fenced"
    );

    // Nothing in progress any more.
    let (results, records) = c.alter_partition_reassignments(&image, &[move_to(None)]);
    assert_eq!(
        results[0].result.as_ref().map_err(|e| e.code),
        Err(ErrorCode::NoReassignmentInProgress)
    );
    assert!(records.is_empty());
}

#[test]
fn cancelling_after_the_added_replica_joined_the_isr_drops_it_again() {
    let (mut c, image) = cluster(3);
    let (id, image) = topic(&mut c, &image, &[1]);
    let image = reassign(&c, &image, Some(&[2, 3]));
    let (_, image) = alter_isr(&c, &image, id, &[1, 2]);
    assert_eq!(shape(&image, id), s(&[2, 3, 1], &[2, 3], &[1], &[1, 2], 1));
    let image = reassign(&c, &image, None);
    assert_eq!(shape(&image, id), s(&[1], &[], &[], &[1], 1));
}

#[test]
fn a_cancel_that_needs_an_unclean_election_is_refused_unless_the_topic_allows_it() {
    let (mut c, image) = cluster(3);
    let (id, image) = topic(&mut c, &image, &[1]);
    let image = reassign(&c, &image, Some(&[2, 3]));
    let (_, image) = alter_isr(&c, &image, id, &[1, 2]);
    // Broker 1, the only original replica, is fenced: 2 leads, and the
    // ISR holds only adding replicas.
    let r = c.heartbeat(&image, &hb(&image, 1, true), 10, 10).unwrap();
    let image = apply(&image, &r.records);
    assert_eq!(shape(&image, id), s(&[2, 3, 1], &[2, 3], &[1], &[2], 2));

    let (results, records) = c.alter_partition_reassignments(&image, &[move_to(None)]);
    assert_eq!(
        results[0].result.as_ref().map_err(|e| e.code),
        Err(ErrorCode::InvalidReplicaAssignment)
    );
    assert!(records.is_empty());

    let allow = MetadataRecord::Config(ConfigRecord {
        resource_type: TOPIC_RESOURCE,
        resource_name: "t".into(),
        name: "unclean.leader.election.enable".into(),
        value: Some("true".into()),
        ..Default::default()
    });
    let image = apply(&image, &[allow]);
    let image = reassign(&c, &image, None);
    // Broker 1 is the ISR again, leaderless until it comes back.
    assert_eq!(shape(&image, id), s(&[1], &[], &[], &[1], NO_LEADER));
}

#[test]
fn a_new_target_midway_is_computed_against_the_current_replicas() {
    let (mut c, image) = cluster(3);
    let (id, image) = topic(&mut c, &image, &[1]);
    let image = reassign(&c, &image, Some(&[2]));
    let image = reassign(&c, &image, Some(&[3]));
    assert_eq!(shape(&image, id), s(&[3, 1, 2], &[3], &[1, 2], &[1], 1));
    let (answer, image) = alter_isr(&c, &image, id, &[1, 3]);
    assert_eq!(shape(&image, id), s(&[3], &[], &[], &[3], 3));
    assert_eq!(answer.leader, 3);
}

#[test]
fn fencing_the_removed_leader_moves_leadership_and_the_move_goes_on() {
    let (mut c, image) = cluster(3);
    let (id, image) = topic(&mut c, &image, &[1, 2]);
    let image = reassign(&c, &image, Some(&[2, 3]));
    assert_eq!(shape(&image, id), s(&[2, 3, 1], &[3], &[1], &[1, 2], 1));
    let r = c.heartbeat(&image, &hb(&image, 1, true), 10, 10).unwrap();
    let image = apply(&image, &r.records);
    assert_eq!(shape(&image, id), s(&[2, 3, 1], &[3], &[1], &[2], 2));
    let epoch = leader_epoch(&image, id);
    let (_, image) = alter_isr(&c, &image, id, &[2, 3]);
    assert_eq!(shape(&image, id), s(&[2, 3], &[], &[], &[2, 3], 2));
    assert_eq!(leader_epoch(&image, id), epoch + 1, "broker 1 is fenced");
}

#[test]
fn session_expiry_of_a_removing_replica_keeps_the_reassignment() {
    let (mut c, image) = cluster(3);
    let (id, image) = topic(&mut c, &image, &[1, 2]);
    let image = reassign(&c, &image, Some(&[1, 3]));
    assert_eq!(shape(&image, id), s(&[1, 3, 2], &[3], &[2], &[1, 2], 1));
    // Brokers 1 and 3 heartbeat; 2 goes silent and is fenced.
    let mut now = 0;
    let mut image = image;
    while image.broker(2).is_some_and(|b| !b.fenced) {
        now += 1_000;
        for b in [1, 3] {
            let r = c.heartbeat(&image, &hb(&image, b, false), 10, now).unwrap();
            image = apply(&image, &r.records);
        }
        let records = c.expire_sessions(&image, now);
        image = apply(&image, &records);
        assert!(now < 60_000, "broker 2 never fenced");
    }
    assert_eq!(shape(&image, id), s(&[1, 3, 2], &[3], &[2], &[1], 1));
    let (_, image) = alter_isr(&c, &image, id, &[1, 3]);
    assert_eq!(shape(&image, id), s(&[1, 3], &[], &[], &[1, 3], 1));
}

#[test]
fn refusals() {
    let (mut c, image) = cluster(3);
    let (id, image) = topic(&mut c, &image, &[1]);
    // Broker 4 registers but stays fenced.
    let reg = Registration {
        broker_id: 4,
        incarnation_id: Uuid([4; 16]),
        endpoints: vec![],
        rack: None,
    };
    let (_, records) = c.register_broker(&image, &reg, 0).unwrap();
    let image = apply(&image, &records);
    let on = |topic: &str, partition: i32, target: Option<&[i32]>| Reassignment {
        topic: topic.into(),
        partition,
        target: target.map(<[i32]>::to_vec),
    };
    let cases: Vec<(&str, Reassignment, ErrorCode)> = vec![
        (
            "unknown topic",
            on("nope", 0, Some(&[1])),
            ErrorCode::UnknownTopicOrPartition,
        ),
        (
            "unknown partition",
            on("t", 1, Some(&[1])),
            ErrorCode::UnknownTopicOrPartition,
        ),
        (
            "empty target",
            on("t", 0, Some(&[])),
            ErrorCode::InvalidReplicaAssignment,
        ),
        (
            "duplicate broker",
            on("t", 0, Some(&[2, 2])),
            ErrorCode::InvalidReplicaAssignment,
        ),
        (
            "unregistered broker",
            on("t", 0, Some(&[2, 9])),
            ErrorCode::InvalidReplicaAssignment,
        ),
        (
            "fenced broker",
            on("t", 0, Some(&[4])),
            ErrorCode::InvalidReplicaAssignment,
        ),
        (
            "cancel with none in progress",
            on("t", 0, None),
            ErrorCode::NoReassignmentInProgress,
        ),
        (
            "cancel of an unknown partition",
            on("t", 3, None),
            ErrorCode::UnknownTopicOrPartition,
        ),
    ];
    for (what, r, code) in cases {
        let (results, records) = c.alter_partition_reassignments(&image, &[r]);
        assert_eq!(
            results[0].result.as_ref().map_err(|e| e.code),
            Err(code),
            "{what}"
        );
        assert!(records.is_empty(), "{what}");
    }
    assert_eq!(shape(&image, id), s(&[1], &[], &[], &[1], 1));
}

#[test]
fn one_request_answers_each_partition_and_a_repeated_one_once() {
    let (mut c, image) = cluster(3);
    let (id, image) = topic(&mut c, &image, &[1]);
    let asked = [
        move_to(Some(&[2])),
        move_to(Some(&[3])),
        Reassignment {
            topic: "t".into(),
            partition: 5,
            target: Some(vec![1]),
        },
    ];
    let (results, records) = c.alter_partition_reassignments(&image, &asked);
    let codes: Vec<_> = results
        .iter()
        .map(|r| r.result.as_ref().map_err(|e| e.code))
        .collect();
    assert_eq!(
        codes,
        vec![Ok(&()), Ok(&()), Err(ErrorCode::UnknownTopicOrPartition)]
    );
    assert_eq!(records.len(), 1, "t-0 is changed once, as first asked");
    let image = apply(&image, &records);
    assert_eq!(shape(&image, id), s(&[2, 1], &[2], &[1], &[1], 1));
}

#[test]
fn a_target_equal_to_the_replicas_changes_nothing() {
    let (mut c, image) = cluster(3);
    let (_, image) = topic(&mut c, &image, &[1, 2]);
    let (results, records) = c.alter_partition_reassignments(&image, &[move_to(Some(&[1, 2]))]);
    assert_eq!(results[0].result, Ok(()));
    assert!(records.is_empty());
}

#[test]
fn listing_filters_by_topic_and_partition() {
    let (mut c, image) = cluster(3);
    let t = NewTopic {
        name: "t".into(),
        num_partitions: -1,
        replication_factor: -1,
        assignments: vec![vec![1], vec![1], vec![1]],
        ..Default::default()
    };
    let (_, records) = c.create_topic(&image, &t).unwrap();
    let image = apply(&image, &records);
    let asked: Vec<Reassignment> = [0, 2]
        .into_iter()
        .map(|partition| Reassignment {
            topic: "t".into(),
            partition,
            target: Some(vec![2]),
        })
        .collect();
    let (_, records) = c.alter_partition_reassignments(&image, &asked);
    let image = apply(&image, &records);
    let listed = |filter: Option<&[(String, Vec<i32>)]>| -> Vec<(String, i32)> {
        ongoing_reassignments(&image, filter)
            .into_iter()
            .map(|o| (o.topic, o.partition))
            .collect()
    };
    assert_eq!(listed(None), vec![("t".into(), 0), ("t".into(), 2)]);
    let filter = [
        ("t".to_string(), vec![1, 2, 7]),
        ("missing".to_string(), vec![0]),
    ];
    assert_eq!(listed(Some(&filter)), vec![("t".into(), 2)]);
}
