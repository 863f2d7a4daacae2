//! Offset commit / fetch / delete, expiry, group deletion and replay of
//! `__consumer_offsets`.

use crate::common;

use common::*;
use weir_group::records::{RecordKey, decode_key};
use weir_group::{
    CommitPartition, ErrorCode, GroupConfig, GroupState, LeaveRequest, LeavingMember,
    OffsetCommitRequest, OffsetFetchGroup, PartitionStatus,
};

fn commit(
    group: &str,
    generation: i32,
    member: &str,
    parts: &[(&str, i32, i64, Option<&str>)],
) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: None,
        retention_time_ms: None,
        api_version: 9,
        partitions: parts
            .iter()
            .map(|(t, p, o, m)| CommitPartition {
                topic: t.to_string(),
                partition: *p,
                offset: *o,
                leader_epoch: -1,
                metadata: m.map(str::to_string),
            })
            .collect(),
    }
}

fn do_commit(h: &mut Harness, req: &OffsetCommitRequest) -> Vec<ErrorCode> {
    let (res, out) = h.coord.commit_offsets(req, h.now);
    h.absorb(out);
    res.iter().map(|r| r.error).collect()
}

fn fetch(
    h: &Harness,
    group: &str,
    parts: Option<Vec<(&str, i32)>>,
) -> Vec<(String, i32, i64, String)> {
    let req = OffsetFetchGroup {
        group_id: group.into(),
        partitions: parts.map(|v| v.into_iter().map(|(t, p)| (t.to_string(), p)).collect()),
    };
    let res = h.coord.fetch_offsets(&[req]);
    assert_eq!(res[0].error, ErrorCode::None);
    res[0]
        .partitions
        .iter()
        .map(|p| (p.topic.clone(), p.partition, p.offset, p.metadata.clone()))
        .collect()
}

/// One-member group in Stable at generation 1, subscribed to "t".
fn stable_one(h: &mut Harness) -> String {
    let sub = subscription(&["t"]);
    let (t, m) = h.join_new("g", "c1", &[("range", &sub)]);
    assert_eq!(h.join_resp(t).generation_id, 1);
    let s = h.sync(sync_req("g", 1, &m, &[(&m, b"t-0")]));
    assert_eq!(h.sync_resp(s).error, ErrorCode::None);
    m
}

fn leave_all(h: &mut Harness, member: &str) {
    let req = LeaveRequest {
        group_id: "g".into(),
        members: vec![LeavingMember {
            member_id: member.into(),
            group_instance_id: None,
        }],
    };
    let (_, out) = h.coord.leave_group(&req, h.now);
    h.absorb(out);
}

#[test]
fn commit_validation_table() {
    let mut h = Harness::no_delay();
    let m = stable_one(&mut h);
    let p = &[("t", 0, 5, None)];
    let cases: Vec<(OffsetCommitRequest, ErrorCode)> = vec![
        (commit("g", 1, &m, p), ErrorCode::None),
        (commit("g", 0, &m, p), ErrorCode::IllegalGeneration),
        (commit("g", 2, &m, p), ErrorCode::IllegalGeneration),
        (commit("g", 1, "ghost", p), ErrorCode::UnknownMemberId),
        // Standalone commit into a group with members.
        (commit("g", -1, "", p), ErrorCode::UnknownMemberId),
        // Unknown group with a generation: cannot be current.
        (commit("other", 3, "x", p), ErrorCode::IllegalGeneration),
        // Standalone commit creates the group.
        (commit("simple", -1, "", p), ErrorCode::None),
        (
            {
                let mut r = commit("g", 1, &m, p);
                r.group_instance_id = Some("not-registered".into());
                r
            },
            ErrorCode::UnknownMemberId,
        ),
    ];
    for (i, (req, want)) in cases.iter().enumerate() {
        assert_eq!(do_commit(&mut h, req), vec![*want], "case {i}");
    }
    assert!(h.coord.group_state("other").is_none());
    assert_eq!(h.coord.group_state("simple"), Some((GroupState::Empty, 0)));
    // Oversized metadata is refused per partition; the others commit.
    let big = "x".repeat(4097);
    let req = commit("g", 1, &m, &[("t", 0, 6, Some(&big)), ("t", 1, 7, None)]);
    assert_eq!(
        do_commit(&mut h, &req),
        vec![ErrorCode::OffsetMetadataTooLarge, ErrorCode::None]
    );
    assert_eq!(h.coord.committed("g", "t", 0).map(|c| c.offset), Some(5));
}

#[test]
fn commit_during_rebalance() {
    let mut h = Harness::no_delay();
    let m1 = stable_one(&mut h);
    let sub = subscription(&["t"]);
    let (t2, m2) = h.join_new("g", "c2", &[("range", &sub)]);
    // PreparingRebalance: the current generation may still commit (this is
    // what consumers do in onPartitionsRevoked).
    assert_eq!(
        do_commit(&mut h, &commit("g", 1, &m1, &[("t", 0, 10, None)])),
        vec![ErrorCode::None]
    );
    let t1 = h.join(join_req("g", &m1, "c1", &[("range", &sub)]));
    assert_eq!(h.join_resp(t1).generation_id, 2);
    assert_eq!(h.join_resp(t2).generation_id, 2);
    // CompletingRebalance: the new generation has no assignment yet.
    assert_eq!(
        do_commit(&mut h, &commit("g", 2, &m2, &[("t", 0, 11, None)])),
        vec![ErrorCode::RebalanceInProgress]
    );
    // The old generation is stale now.
    assert_eq!(
        do_commit(&mut h, &commit("g", 1, &m1, &[("t", 0, 12, None)])),
        vec![ErrorCode::IllegalGeneration]
    );
    assert_eq!(h.coord.committed("g", "t", 0).map(|c| c.offset), Some(10));
}

#[test]
fn commit_metadata_round_trip() {
    let mut h = Harness::no_delay();
    let m = stable_one(&mut h);
    let meta = "{\"watermark\":41,\"gaps\":[38,39]} ünïcödé";
    let req = commit("g", 1, &m, &[("t", 0, 42, Some(meta)), ("t", 1, 7, None)]);
    assert_eq!(do_commit(&mut h, &req), vec![ErrorCode::None; 2]);
    let got = fetch(&h, "g", Some(vec![("t", 1), ("t", 0), ("u", 0)]));
    assert_eq!(
        got,
        vec![
            ("t".into(), 0, 42, meta.into()),
            ("t".into(), 1, 7, String::new()),
            ("u".into(), 0, -1, String::new()),
        ]
    );
    assert_eq!(fetch(&h, "g", None).len(), 2);
    assert!(fetch(&h, "unknown", None).is_empty());
    assert_eq!(fetch(&h, "unknown", Some(vec![("t", 0)]))[0].2, -1);
    // The same survives a replay of the log.
    let replayed = h.replayed();
    let c = replayed.committed("g", "t", 0).expect("replayed offset");
    assert_eq!((c.offset, c.metadata.as_str()), (42, meta));
}

#[test]
fn multi_group_fetch() {
    let mut h = Harness::no_delay();
    do_commit(&mut h, &commit("a", -1, "", &[("t", 0, 1, None)]));
    do_commit(&mut h, &commit("b", -1, "", &[("t", 0, 2, None)]));
    let res = h.coord.fetch_offsets(&[
        OffsetFetchGroup {
            group_id: "a".into(),
            partitions: None,
        },
        OffsetFetchGroup {
            group_id: "b".into(),
            partitions: Some(vec![("t".into(), 0)]),
        },
    ]);
    assert_eq!(res[0].partitions[0].offset, 1);
    assert_eq!(res[1].partitions[0].offset, 2);
}

#[test]
fn offsets_of_empty_group_expire_after_retention() {
    let retention = 60_000;
    let mut h = Harness::new(GroupConfig {
        initial_rebalance_delay_ms: 0,
        offsets_retention_ms: retention,
        offsets_retention_check_interval_ms: 1_000,
        ..GroupConfig::default()
    });
    let m = stable_one(&mut h);
    do_commit(
        &mut h,
        &commit("g", 1, &m, &[("t", 0, 5, None), ("t", 1, 6, None)]),
    );
    // While the group has members nothing expires, however old.
    for _ in 0..12 {
        h.advance(5_000);
        let hb = weir_group::HeartbeatRequest {
            group_id: "g".into(),
            generation_id: 1,
            member_id: m.clone(),
            group_instance_id: None,
        };
        assert_eq!(h.coord.heartbeat(&hb, h.now), ErrorCode::None);
    }
    h.advance(5_000);
    assert!(h.coord.committed("g", "t", 0).is_some());
    leave_all(&mut h, &m);
    assert_eq!(h.coord.group_state("g"), Some((GroupState::Empty, 2)));
    // Retention counts from the moment the group became empty.
    h.advance(retention - 1_000);
    assert!(h.coord.committed("g", "t", 0).is_some());
    let before = h.log().len();
    h.advance(1_000);
    assert!(h.coord.committed("g", "t", 0).is_none());
    assert!(h.coord.group_state("g").is_none(), "empty group removed");
    let tombstones: Vec<RecordKey> = h.log()[before..]
        .iter()
        .map(|(_, k, v)| {
            assert!(v.is_none(), "only tombstones");
            decode_key(k).unwrap()
        })
        .collect();
    assert_eq!(tombstones.len(), 3);
    assert!(tombstones.contains(&RecordKey::GroupMetadata { group: "g".into() }));
    assert!(h.replayed().group_ids().is_empty());
}

#[test]
fn standalone_offsets_expire_from_commit_time() {
    let mut h = Harness::new(GroupConfig {
        offsets_retention_ms: 10_000,
        offsets_retention_check_interval_ms: 1_000,
        ..GroupConfig::default()
    });
    do_commit(&mut h, &commit("s", -1, "", &[("t", 0, 1, None)]));
    h.advance(5_000);
    do_commit(&mut h, &commit("s", -1, "", &[("t", 1, 1, None)]));
    h.advance(5_000);
    assert!(h.coord.committed("s", "t", 0).is_none());
    assert!(h.coord.committed("s", "t", 1).is_some());
    h.advance(5_000);
    assert!(h.coord.group_state("s").is_none());
}

#[test]
fn delete_groups_writes_tombstones() {
    let mut h = Harness::no_delay();
    let m = stable_one(&mut h);
    do_commit(
        &mut h,
        &commit("g", 1, &m, &[("t", 0, 5, None), ("u", 3, 9, None)]),
    );
    let (res, out) = h.coord.delete_groups(&["g".into(), "nope".into()], h.now);
    assert!(out.is_empty());
    assert_eq!(res[0].1, ErrorCode::NonEmptyGroup);
    assert_eq!(res[1].1, ErrorCode::GroupIdNotFound);
    leave_all(&mut h, &m);
    let before = h.log().len();
    let (res, out) = h.coord.delete_groups(&["g".into()], h.now);
    h.absorb(out);
    assert_eq!(res[0].1, ErrorCode::None);
    let written: Vec<(RecordKey, bool)> = h.log()[before..]
        .iter()
        .map(|(p, k, v)| {
            assert_eq!(*p, h.coord.partition_for("g"));
            (decode_key(k).unwrap(), v.is_none())
        })
        .collect();
    assert_eq!(
        written,
        vec![
            (
                RecordKey::OffsetCommit {
                    group: "g".into(),
                    topic: "t".into(),
                    partition: 0
                },
                true
            ),
            (
                RecordKey::OffsetCommit {
                    group: "g".into(),
                    topic: "u".into(),
                    partition: 3
                },
                true
            ),
            (RecordKey::GroupMetadata { group: "g".into() }, true),
        ]
    );
    assert!(h.coord.group_state("g").is_none());
    assert!(fetch(&h, "g", None).is_empty());
    assert!(h.replayed().group_ids().is_empty());
}

#[test]
fn offset_delete() {
    let mut h = Harness::no_delay();
    let m = stable_one(&mut h);
    do_commit(
        &mut h,
        &commit("g", 1, &m, &[("t", 0, 5, None), ("old", 0, 9, None)]),
    );
    let (err, res, out) = h.coord.delete_offsets(
        "g",
        &[("t".into(), 0), ("old".into(), 0), ("old".into(), 1)],
        h.now,
    );
    h.absorb(out);
    assert_eq!(err, ErrorCode::None);
    let errors: Vec<ErrorCode> = res.iter().map(|r| r.error).collect();
    assert_eq!(
        errors,
        vec![
            ErrorCode::GroupSubscribedToTopic,
            ErrorCode::None,
            ErrorCode::None
        ]
    );
    assert!(h.coord.committed("g", "old", 0).is_none());
    assert!(h.coord.committed("g", "t", 0).is_some());
    assert!(h.replayed().committed("g", "old", 0).is_none());
    let (err, _, _) = h.coord.delete_offsets("nope", &[("t".into(), 0)], h.now);
    assert_eq!(err, ErrorCode::GroupIdNotFound);
}

#[test]
fn replay_rebuilds_group_and_offsets() {
    let mut h = Harness::no_delay();
    let sub = subscription(&["t"]);
    let (_, m1) = h.join_new("g", "c1", &[("range", &sub)]);
    let (t2, m2) = h.join_new("g", "c2", &[("range", &sub)]);
    let t1 = h.join(join_req("g", &m1, "c1", &[("range", &sub)]));
    assert_eq!(h.join_resp(t1).generation_id, 2);
    assert_eq!(h.join_resp(t2).generation_id, 2);
    h.sync(sync_req("g", 2, &m1, &[(&m1, b"t-0"), (&m2, b"t-1")]));
    h.sync(sync_req("g", 2, &m2, &[]));
    do_commit(&mut h, &commit("g", 2, &m1, &[("t", 0, 100, Some("a"))]));
    do_commit(&mut h, &commit("g", 2, &m2, &[("t", 1, 200, Some("b"))]));
    do_commit(&mut h, &commit("g", 2, &m1, &[("t", 0, 150, Some("c"))]));
    do_commit(&mut h, &commit("solo", -1, "", &[("x", 0, 1, None)]));

    let r = h.replayed();
    assert_eq!(r.group_state("g"), Some((GroupState::Stable, 2)));
    assert_eq!(r.group_state("solo"), Some((GroupState::Empty, 0)));
    for (topic, p) in [("t", 0), ("t", 1)] {
        assert_eq!(r.committed("g", topic, p), h.coord.committed("g", topic, p));
    }
    assert_eq!(r.committed("g", "t", 0).unwrap().metadata, "c");
    let (a, b) = (
        r.describe_groups(&["g".into()]),
        h.coord.describe_groups(&["g".into()]),
    );
    assert_eq!(a, b, "same members, protocol and assignments");
    // Members carry on after the restart with the same generation.
    let mut r = r;
    let hb = weir_group::HeartbeatRequest {
        group_id: "g".into(),
        generation_id: 2,
        member_id: m2.clone(),
        group_instance_id: None,
    };
    assert_eq!(r.heartbeat(&hb, h.now), ErrorCode::None);
    let (res, _) = r.commit_offsets(&commit("g", 2, &m2, &[("t", 1, 201, None)]), h.now);
    assert_eq!(res[0].error, ErrorCode::None);
}

#[test]
fn loading_partition_answers_load_in_progress() {
    let mut h = Harness::no_delay();
    let p = h.coord.partition_for("g");
    let _ = h.coord.begin_load(p);
    assert_eq!(h.coord.partition_status(p), PartitionStatus::Loading);
    let t = h.join(join_req("g", "", "c", &[("range", b"")]));
    assert_eq!(h.join_resp(t).error, ErrorCode::CoordinatorLoadInProgress);
    assert_eq!(
        do_commit(&mut h, &commit("g", -1, "", &[("t", 0, 1, None)])),
        vec![ErrorCode::CoordinatorLoadInProgress]
    );
    h.coord.complete_load(p, h.now);
    let _ = h.coord.unload(p);
    let t = h.join(join_req("g", "", "c", &[("range", b"")]));
    assert_eq!(h.join_resp(t).error, ErrorCode::NotCoordinator);
}

#[test]
fn replay_rejects_corrupt_records_without_panicking() {
    let mut c = weir_group::GroupCoordinator::new(GroupConfig::default());
    let key = weir_group::records::encode_group_metadata_key("g");
    let at = weir_group::LogPosition::plain(0);
    assert!(c.replay(at, &key, Some(&[0, 3, 0])).is_err());
    assert!(c.replay(at, &[0], None).is_err());
    // KIP-848 consumer group records are read (a corrupt value is an
    // error); record types this coordinator does not know (share groups)
    // are skipped.
    assert!(c.replay(at, &[0, 3, 0, 1, b'g'], Some(&[1, 2, 3])).is_err());
    assert!(c.replay(at, &[0, 11, 0, 1, b'g'], Some(&[1, 2, 3])).is_ok());
}
