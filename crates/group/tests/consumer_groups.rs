//! Consumer-protocol (KIP-848) groups: scenarios in virtual time, the bad
//! requests, records and replay, and the assignors as tables.

use std::collections::{BTreeMap, BTreeSet};

use weir_group::{
    Assignor, CommitPartition, ConsumerGroupTimeouts, ErrorCode, GroupState, JoinRequest,
    MemberState, OffsetCommitRequest, Output, Partitions, Protocol, Response,
};

use crate::consumer_common::*;

fn twelve() -> Cg {
    let mut cg = Cg::new();
    cg.topic("t", 1, 12);
    cg
}

fn settle(cg: &mut Cg, clients: &mut [Client]) {
    for _ in 0..6 {
        for c in clients.iter_mut() {
            c.beat(cg, true);
        }
        assert_disjoint(clients);
    }
}

#[test]
fn two_members_split_partitions_and_revoke_before_reassignment() {
    let mut cg = twelve();
    let mut a = Client::new("a", &["t"]);
    let r = a.beat(&mut cg, true);
    assert_eq!(r.error, ErrorCode::None);
    assert_eq!(r.member_epoch, 1);
    assert_eq!(count(&a.owned), 12);
    assert_eq!(r.heartbeat_interval_ms, 5_000);

    let mut b = Client::new("b", &["t"]);
    let r = b.beat(&mut cg, true);
    // b is in epoch 2 but gets nothing a still owns.
    assert_eq!(r.member_epoch, 2);
    assert_eq!(count(&b.owned), 0);
    let d = cg.describe();
    assert_eq!(d.state, "Reconciling");
    assert_eq!(d.group_epoch, 2);
    assert_eq!(d.assignment_epoch, 2);
    let mb = d.members.iter().find(|m| m.member_id == "b").unwrap();
    assert_eq!(mb.state, MemberState::UnreleasedPartitions);
    assert_eq!(count(&mb.target_assignment), 6);

    // a heartbeats without having revoked: it stays in epoch 1.
    let r = a.beat(&mut cg, false);
    assert_eq!(r.member_epoch, 1);
    assert_eq!(count(&a.assigned), 6);
    assert_eq!(count(&a.owned), 12);
    let r = b.beat(&mut cg, true);
    assert_eq!(count(&b.owned), 0, "{r:?}");
    assert_disjoint(&[a.clone(), b.clone()]);

    // a revokes: it moves to epoch 2, then b gets the released partitions.
    let r = a.beat(&mut cg, true);
    assert_eq!(r.member_epoch, 2);
    assert_eq!(count(&a.owned), 6);
    b.beat(&mut cg, true);
    assert_eq!(count(&b.owned), 6);
    assert_disjoint(&[a.clone(), b.clone()]);
    assert_eq!(cg.describe().state, "Stable");
}

#[test]
fn five_members_balance_and_a_leave_moves_partitions() {
    let mut cg = twelve();
    let mut clients: Vec<Client> = (0..5)
        .map(|i| Client::new(&format!("m{i}"), &["t"]))
        .collect();
    for i in 0..clients.len() {
        clients[i].beat(&mut cg, true);
        settle(&mut cg, &mut clients[..=i]);
    }
    let counts: Vec<usize> = clients.iter().map(|c| count(&c.owned)).collect();
    assert_eq!(counts.iter().sum::<usize>(), 12);
    assert!(counts.iter().all(|&n| n == 2 || n == 3), "{counts:?}");
    let before: Vec<Partitions> = clients.iter().map(|c| c.owned.clone()).collect();

    let r = clients[4].leave(&mut cg);
    assert_eq!((r.error, r.member_epoch), (ErrorCode::None, -1));
    let mut rest = clients[..4].to_vec();
    settle(&mut cg, &mut rest);
    let counts: Vec<usize> = rest.iter().map(|c| count(&c.owned)).collect();
    assert_eq!(counts, vec![3, 3, 3, 3]);
    // Sticky: every remaining member kept what it had.
    for (c, b) in rest.iter().zip(&before) {
        for (t, ps) in b {
            assert!(ps.is_subset(&c.owned[t]), "{} lost partitions", c.id);
        }
    }
}

#[test]
fn session_timeout_fences_a_member_and_its_partitions_move() {
    let mut cg = twelve();
    let mut clients = vec![Client::new("a", &["t"]), Client::new("b", &["t"])];
    clients[0].beat(&mut cg, true);
    clients[1].beat(&mut cg, true);
    settle(&mut cg, &mut clients);
    let epoch = cg.describe().group_epoch;
    // Only a keeps heartbeating.
    for _ in 0..10 {
        cg.advance(5_000);
        clients[0].beat(&mut cg, true);
    }
    let d = cg.describe();
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.group_epoch, epoch + 1);
    clients[0].beat(&mut cg, true);
    assert_eq!(count(&clients[0].owned), 12);
    // b comes back with its old epoch: it is unknown now.
    let r = cg.heartbeat(&beat_req("b", clients[1].epoch.unwrap(), None));
    assert_eq!(r.error, ErrorCode::UnknownMemberId);
}

/// Kafka 4's group configs `consumer.session.timeout.ms` and
/// `consumer.heartbeat.interval.ms`: the group's own values apply from the
/// next heartbeat; another group keeps the broker's.
#[test]
fn a_groups_own_session_timeout_and_heartbeat_interval_apply() {
    let mut cg = twelve();
    cg.coord.set_consumer_group_timeouts(
        GROUP,
        ConsumerGroupTimeouts {
            session_timeout_ms: Some(10_000),
            heartbeat_interval_ms: Some(1_000),
        },
    );
    let mut a = Client::new("a", &["t"]);
    let mut b = Client::new("b", &["t"]);
    assert_eq!(a.beat(&mut cg, true).heartbeat_interval_ms, 1_000);
    b.beat(&mut cg, true);
    // b goes silent: fenced after the group's 10 s, not the broker's 45 s.
    for _ in 0..9 {
        cg.advance(1_000);
        assert_eq!(a.beat(&mut cg, true).error, ErrorCode::None);
    }
    assert_eq!(cg.describe().members.len(), 2, "b fenced before 10 s");
    cg.advance(1_001);
    assert_eq!(cg.describe().members.len(), 1, "b not fenced after 10 s");

    // Cleared: the broker's values from the next heartbeat (a 45 s
    // session, 5 s interval).
    cg.coord
        .set_consumer_group_timeouts(GROUP, ConsumerGroupTimeouts::default());
    assert_eq!(a.beat(&mut cg, true).heartbeat_interval_ms, 5_000);
    cg.advance(30_000);
    assert_eq!(cg.describe().members.len(), 1, "a fenced before 45 s");
    cg.advance(15_001);
    assert!(cg.describe().members.is_empty(), "a not fenced after 45 s");

    // Only the group the configs are for.
    cg.coord.set_consumer_group_timeouts(
        "other",
        ConsumerGroupTimeouts {
            session_timeout_ms: Some(10_000),
            heartbeat_interval_ms: Some(1_000),
        },
    );
    let r = Client::new("c", &["t"]).beat(&mut cg, true);
    assert_eq!((r.error, r.heartbeat_interval_ms), (ErrorCode::None, 5_000));
}

#[test]
fn rebalance_timeout_fences_a_member_that_does_not_revoke() {
    let mut cg = twelve();
    let mut a = Client::new("a", &["t"]);
    let mut req = join_req("a", &["t"]);
    req.rebalance_timeout_ms = 10_000;
    let r = cg.heartbeat(&req);
    a.epoch = Some(r.member_epoch);
    a.assigned = r.assignment.clone().unwrap();
    a.owned = a.assigned.clone();
    let mut b = Client::new("b", &["t"]);
    b.beat(&mut cg, true);
    a.beat(&mut cg, false); // told to revoke, does not
    for _ in 0..3 {
        cg.advance(4_000);
        a.beat(&mut cg, false);
        b.beat(&mut cg, true);
    }
    // a was fenced after 10 s and learns it on its next heartbeat.
    assert_eq!(a.epoch, None);
    assert_eq!(cg.describe().members.len(), 1);
    b.beat(&mut cg, true);
    assert_eq!(count(&b.owned), 12);
}

#[test]
fn static_member_keeps_its_partitions_across_a_restart() {
    let mut cg = twelve();
    let mut s1 = Client::new("s1", &["t"]);
    s1.instance = Some("i1".into());
    let mut s2 = Client::new("s2", &["t"]);
    s2.instance = Some("i2".into());
    let mut clients = vec![s1, s2];
    clients[0].beat(&mut cg, true);
    clients[1].beat(&mut cg, true);
    settle(&mut cg, &mut clients);
    let owned = clients[0].owned.clone();
    let epoch = cg.describe().group_epoch;

    // Leaves with -2: the partitions stay reserved.
    let mut r = beat_req("s1", -2, None);
    r.instance_id = Some("i1".into());
    let resp = cg.heartbeat(&r);
    assert_eq!((resp.error, resp.member_epoch), (ErrorCode::None, -2));
    clients[0].lose_all();
    clients[1].beat(&mut cg, true);
    assert_eq!(count(&clients[1].owned), 6);

    // The same instance under a new member id gets them back, no rebalance.
    let mut back = Client::new("s1-new", &["t"]);
    back.instance = Some("i1".into());
    let resp = back.beat(&mut cg, true);
    assert_eq!(resp.error, ErrorCode::None);
    assert_eq!(back.owned, owned);
    assert_eq!(cg.describe().group_epoch, epoch);

    // The old member id is fenced; a second instance with the id is refused.
    let mut stale = beat_req("s1", resp.member_epoch, None);
    stale.instance_id = Some("i1".into());
    assert_eq!(cg.heartbeat(&stale).error, ErrorCode::FencedInstanceId);
    let mut dup = join_req("s1-third", &["t"]);
    dup.instance_id = Some("i1".into());
    assert_eq!(cg.heartbeat(&dup).error, ErrorCode::UnreleasedInstanceId);
}

#[test]
fn static_member_that_does_not_return_expires() {
    let mut cg = twelve();
    let mut s = Client::new("s", &["t"]);
    s.instance = Some("i".into());
    s.beat(&mut cg, true);
    let mut o = Client::new("o", &["t"]);
    o.beat(&mut cg, true);
    let mut r = beat_req("s", s.epoch.unwrap(), None);
    r.member_epoch = -2;
    r.instance_id = Some("i".into());
    cg.heartbeat(&r);
    for _ in 0..10 {
        cg.advance(5_000);
        o.beat(&mut cg, true);
    }
    assert_eq!(cg.describe().members.len(), 1);
    assert_eq!(count(&o.owned), 12);
}

#[test]
fn regex_subscription_picks_up_a_new_topic() {
    let mut cg = twelve();
    let mut c = Client::new("c", &[]);
    c.topics.clear();
    c.regex = Some("t.*".into());
    let mut req = join_req("c", &[]);
    req.subscribed_topic_names = None;
    req.subscribed_topic_regex = Some("t.*".into());
    let r = cg.heartbeat(&req);
    assert_eq!(r.error, ErrorCode::None);
    c.epoch = Some(r.member_epoch);
    c.assigned = r.assignment.unwrap();
    c.owned = c.assigned.clone();
    assert_eq!(count(&c.owned), 12);
    let epoch = cg.describe().group_epoch;
    cg.topic("t2", 2, 3);
    cg.topic("other", 3, 3);
    cg.topics.insert("tinternal", topic_id(4), 3, true);
    c.beat(&mut cg, true);
    assert_eq!(cg.describe().group_epoch, epoch + 1);
    assert_eq!(count(&c.owned), 15);
    assert_eq!(c.owned[&topic_id(2)].len(), 3);
}

#[test]
fn more_partitions_bump_the_epoch() {
    let mut cg = twelve();
    let mut c = Client::new("c", &["t"]);
    c.beat(&mut cg, true);
    cg.topic("t", 1, 14);
    c.beat(&mut cg, true);
    assert_eq!(count(&c.owned), 14);
    assert_eq!(cg.describe().group_epoch, 2);
}

#[test]
fn bad_requests_are_refused_with_kafka_errors() {
    let mut cg = twelve();
    let mut a = Client::new("a", &["t"]);
    a.beat(&mut cg, true);
    for n in [13, 14] {
        cg.topic("t", 1, n);
        a.beat(&mut cg, true);
    }
    let epoch = a.epoch.unwrap();
    assert_eq!(epoch, 3);
    let cases: Vec<(&str, weir_group::ConsumerHeartbeatRequest, ErrorCode)> = vec![
        (
            "epoch ahead",
            beat_req("a", epoch + 1, None),
            ErrorCode::FencedMemberEpoch,
        ),
        (
            "epoch behind, not the previous one",
            beat_req("a", epoch - 2, Some(Partitions::new())),
            ErrorCode::FencedMemberEpoch,
        ),
        (
            "unknown member",
            beat_req("nobody", 1, None),
            ErrorCode::UnknownMemberId,
        ),
        (
            "unknown member leaving",
            beat_req("nobody", -1, None),
            ErrorCode::UnknownMemberId,
        ),
        (
            "invalid regex",
            weir_group::ConsumerHeartbeatRequest {
                subscribed_topic_regex: Some("t[".into()),
                ..join_req("x", &[])
            },
            ErrorCode::InvalidRegularExpression,
        ),
        (
            "unknown assignor",
            weir_group::ConsumerHeartbeatRequest {
                server_assignor: Some("sticky".into()),
                ..join_req("x", &["t"])
            },
            ErrorCode::UnsupportedAssignor,
        ),
        (
            "empty member id in v1",
            join_req("", &["t"]),
            ErrorCode::InvalidRequest,
        ),
        (
            "join without rebalance timeout",
            weir_group::ConsumerHeartbeatRequest {
                rebalance_timeout_ms: -1,
                ..join_req("x", &["t"])
            },
            ErrorCode::InvalidRequest,
        ),
        (
            "join with owned partitions",
            weir_group::ConsumerHeartbeatRequest {
                owned: Some(parts(&[(1, &[0])])),
                ..join_req("x", &["t"])
            },
            ErrorCode::InvalidRequest,
        ),
        (
            "join without subscription",
            weir_group::ConsumerHeartbeatRequest {
                subscribed_topic_names: None,
                ..join_req("x", &["t"])
            },
            ErrorCode::InvalidRequest,
        ),
        (
            "epoch below -2",
            beat_req("a", -3, None),
            ErrorCode::InvalidRequest,
        ),
        (
            "static leave without instance id",
            beat_req("a", -2, None),
            ErrorCode::InvalidRequest,
        ),
        (
            "empty group id",
            weir_group::ConsumerHeartbeatRequest {
                group_id: String::new(),
                ..join_req("x", &["t"])
            },
            ErrorCode::InvalidRequest,
        ),
        (
            "heartbeat to an unknown group",
            weir_group::ConsumerHeartbeatRequest {
                group_id: "nope".into(),
                ..beat_req("a", 1, None)
            },
            ErrorCode::GroupIdNotFound,
        ),
    ];
    for (name, req, want) in cases {
        let r = cg.heartbeat(&req);
        assert_eq!(r.error, want, "{name}: {r:?}");
        assert!(r.error_message.is_some(), "{name}");
    }
    // The group is unchanged by the refusals.
    let d = cg.describe();
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.group_epoch, epoch);
    // v0: the coordinator makes up the member id.
    let r = cg.heartbeat(&weir_group::ConsumerHeartbeatRequest {
        api_version: 0,
        ..join_req("", &["t"])
    });
    assert_eq!(r.error, ErrorCode::None);
    assert!(!r.member_id.unwrap().is_empty());
}

fn classic_join(cg: &mut Cg, group: &str) -> Vec<Output> {
    let join = JoinRequest {
        group_id: group.into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        member_id: String::new(),
        group_instance_id: None,
        protocol_type: "consumer".into(),
        protocols: vec![Protocol {
            name: "range".into(),
            metadata: Default::default(),
        }],
        client_id: "c".into(),
        client_host: "/h".into(),
        require_known_member_id: false,
        supports_skip_assignment: true,
    };
    cg.coord.join_group(join, 7, cg.now)
}

#[test]
fn classic_and_consumer_groups_do_not_mix() {
    let mut cg = twelve();
    // A classic group whose member's metadata is no ConsumerProtocol
    // subscription cannot be upgraded: a consumer heartbeat is refused.
    let out = classic_join(&mut cg, "classic");
    cg.run(out);
    let r = cg.heartbeat(&weir_group::ConsumerHeartbeatRequest {
        group_id: "classic".into(),
        ..join_req("x", &["t"])
    });
    assert_eq!(r.error, ErrorCode::GroupIdNotFound);
    // A consumer group with a member: a classic join whose metadata is
    // no ConsumerProtocol subscription is refused.
    let mut a = Client::new("a", &["t"]);
    a.beat(&mut cg, true);
    let out = classic_join(&mut cg, GROUP);
    let Some(Output::Respond {
        response: Response::Join(j),
        ..
    }) = out.last()
    else {
        panic!("{out:?}")
    };
    assert_eq!(j.error, ErrorCode::InconsistentGroupProtocol);
    // ListGroups tells them apart.
    let listed = cg.coord.list_groups(&[], &["consumer".into()]);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].group_id, GROUP);
    assert_eq!(listed[0].group_type, "consumer");
    assert_eq!(listed[0].state, GroupState::Stable);
    assert_eq!(cg.coord.list_groups(&[], &["classic".into()]).len(), 1);
    // Once the consumer group is empty, a classic member may take it over.
    a.leave(&mut cg);
    let out = classic_join(&mut cg, GROUP);
    cg.run(out);
    assert_eq!(cg.coord.list_groups(&[], &["consumer".into()]).len(), 0);
    let replayed = cg.replayed();
    assert_eq!(replayed.list_groups(&[], &["consumer".into()]).len(), 0);
}

#[test]
fn offset_commits_check_the_member_epoch() {
    let mut cg = twelve();
    let mut a = Client::new("a", &["t"]);
    a.beat(&mut cg, true);
    let commit = |member: &str, epoch: i32| OffsetCommitRequest {
        group_id: GROUP.into(),
        generation_id: epoch,
        member_id: member.into(),
        group_instance_id: None,
        retention_time_ms: None,
        api_version: 9,
        partitions: vec![CommitPartition {
            topic: "t".into(),
            partition: 0,
            offset: 5,
            leader_epoch: -1,
            metadata: None,
        }],
    };
    let epoch = a.epoch.unwrap();
    let (r, _) = cg.coord.commit_offsets(&commit("a", epoch + 1), cg.now);
    assert_eq!(r[0].error, ErrorCode::StaleMemberEpoch);
    let (r, _) = cg.coord.commit_offsets(&commit("zz", epoch), cg.now);
    assert_eq!(r[0].error, ErrorCode::UnknownMemberId);
    let (r, _) = cg.coord.commit_offsets(&commit("", -1), cg.now);
    assert_eq!(r[0].error, ErrorCode::UnknownMemberId);
    // A member commits with v9 or later (Kafka 4's validateOffsetCommit);
    // the unknown member is still named first.
    let v8 = |member: &str, epoch: i32| OffsetCommitRequest {
        api_version: 8,
        ..commit(member, epoch)
    };
    let (r, _) = cg.coord.commit_offsets(&v8("a", epoch), cg.now);
    assert_eq!(r[0].error, ErrorCode::UnsupportedVersion);
    let (r, _) = cg.coord.commit_offsets(&v8("zz", epoch), cg.now);
    assert_eq!(r[0].error, ErrorCode::UnknownMemberId);
    let (r, out) = cg.coord.commit_offsets(&commit("a", epoch), cg.now);
    assert_eq!(r[0].error, ErrorCode::None);
    cg.run(out);
    assert_eq!(cg.coord.committed(GROUP, "t", 0).unwrap().offset, 5);
    assert_eq!(
        cg.coord
            .check_offset_fetch_member(GROUP, Some("a"), epoch + 1),
        ErrorCode::StaleMemberEpoch
    );
    assert_eq!(
        cg.coord.check_offset_fetch_member(GROUP, None, -1),
        ErrorCode::None
    );
    // Subscribed topics' offsets are not deleted; the group is not empty.
    let (e, res, _) = cg.coord.delete_offsets(GROUP, &[("t".into(), 0)], cg.now);
    assert_eq!(e, ErrorCode::None);
    assert_eq!(res[0].error, ErrorCode::GroupSubscribedToTopic);
    let (res, _) = cg.coord.delete_groups(&[GROUP.into()], cg.now);
    assert_eq!(res[0].1, ErrorCode::NonEmptyGroup);
    // Empty: standalone commits work and the group can be deleted.
    a.leave(&mut cg);
    let (r, out) = cg.coord.commit_offsets(&commit("", -1), cg.now);
    assert_eq!(r[0].error, ErrorCode::None);
    cg.run(out);
    let (res, out) = cg.coord.delete_groups(&[GROUP.into()], cg.now);
    assert_eq!(res[0].1, ErrorCode::None);
    cg.run(out);
    assert!(cg.coord.group_ids().is_empty());
    assert!(cg.replayed().group_ids().is_empty());
}

#[test]
fn replay_restores_epochs_and_assignments() {
    let mut cg = twelve();
    let mut clients: Vec<Client> = (0..3)
        .map(|i| Client::new(&format!("m{i}"), &["t"]))
        .collect();
    for c in clients.iter_mut() {
        c.beat(&mut cg, true);
    }
    // Mid-reconciliation: m0 was told to revoke and has not yet.
    let replayed = cg.replayed();
    let want = cg.describe();
    let got = replayed.describe_consumer_groups(&[GROUP.into()]).remove(0);
    assert_eq!(got, want);
    // The restarted coordinator carries on the same way.
    cg.coord = replayed;
    settle(&mut cg, &mut clients);
    assert_eq!(cg.describe().state, "Stable");
    let total: usize = clients.iter().map(|c| count(&c.owned)).sum();
    assert_eq!(total, 12);
}

#[test]
fn a_failed_append_leaves_the_group_as_before() {
    let mut cg = twelve();
    let mut a = Client::new("a", &["t"]);
    a.beat(&mut cg, true);
    let before = cg.describe();
    let (r, out) = cg
        .coord
        .consumer_group_heartbeat(&join_req("b", &["t"]), &cg.topics, cg.now);
    assert_eq!(r.error, ErrorCode::None);
    for o in out {
        if let Output::Append { write, .. } = o {
            cg.coord
                .append_completed(write, weir_group::AppendOutcome::Failed, cg.now);
        }
    }
    assert_eq!(cg.describe(), before);
    // A new group whose first write fails is gone again.
    let (_, out) = cg.coord.consumer_group_heartbeat(
        &weir_group::ConsumerHeartbeatRequest {
            group_id: "new".into(),
            ..join_req("n", &["t"])
        },
        &cg.topics,
        cg.now,
    );
    for o in out {
        if let Output::Append { write, .. } = o {
            cg.coord
                .append_completed(write, weir_group::AppendOutcome::Failed, cg.now);
        }
    }
    assert!(!cg.coord.group_ids().contains(&"new".to_string()));
}

// ------------------------------------------------------------- assignors

fn subs(list: &[(&str, &[u8])]) -> BTreeMap<String, BTreeSet<weir_protocol::Uuid>> {
    list.iter()
        .map(|(m, ts)| (m.to_string(), ts.iter().map(|t| topic_id(*t)).collect()))
        .collect()
}

fn counts(list: &[(u8, i32)]) -> BTreeMap<weir_protocol::Uuid, i32> {
    list.iter().map(|(t, n)| (topic_id(*t), *n)).collect()
}

#[test]
fn range_assignor_table() {
    type Case = (
        &'static str,
        Vec<(&'static str, &'static [u8])>,
        Vec<(u8, i32)>,
        Vec<(&'static str, Partitions)>,
    );
    let cases: Vec<Case> = vec![
        (
            "7 partitions over 3 members",
            vec![("a", &[1]), ("b", &[1]), ("c", &[1])],
            vec![(1, 7)],
            vec![
                ("a", parts(&[(1, &[0, 1, 2])])),
                ("b", parts(&[(1, &[3, 4])])),
                ("c", parts(&[(1, &[5, 6])])),
            ],
        ),
        (
            "co-partitioned topics get the same ranges",
            vec![("a", &[1, 2]), ("b", &[1, 2])],
            vec![(1, 4), (2, 4)],
            vec![
                ("a", parts(&[(1, &[0, 1]), (2, &[0, 1])])),
                ("b", parts(&[(1, &[2, 3]), (2, &[2, 3])])),
            ],
        ),
        (
            "more members than partitions",
            vec![("a", &[1]), ("b", &[1]), ("c", &[1])],
            vec![(1, 2)],
            vec![
                ("a", parts(&[(1, &[0])])),
                ("b", parts(&[(1, &[1])])),
                ("c", Partitions::new()),
            ],
        ),
        (
            "different subscriptions",
            vec![("a", &[1]), ("b", &[1, 2])],
            vec![(1, 2), (2, 3)],
            vec![
                ("a", parts(&[(1, &[0])])),
                ("b", parts(&[(1, &[1]), (2, &[0, 1, 2])])),
            ],
        ),
    ];
    for (name, s, c, want) in cases {
        let got = Assignor::Range.assign(&subs(&s), &counts(&c), &BTreeMap::new());
        let want: BTreeMap<String, Partitions> =
            want.into_iter().map(|(m, p)| (m.to_string(), p)).collect();
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn uniform_assignor_table() {
    // (name, subscriptions, partition counts, previous, expected counts,
    // partitions that must stay with their previous owner)
    type Case = (
        &'static str,
        Vec<(&'static str, &'static [u8])>,
        Vec<(u8, i32)>,
        Vec<(&'static str, Partitions)>,
        Vec<(&'static str, usize)>,
    );
    let cases: Vec<Case> = vec![
        (
            "12 over 5, fresh",
            vec![
                ("a", &[1]),
                ("b", &[1]),
                ("c", &[1]),
                ("d", &[1]),
                ("e", &[1]),
            ],
            vec![(1, 12)],
            vec![],
            vec![("a", 3), ("b", 3), ("c", 2), ("d", 2), ("e", 2)],
        ),
        (
            "a member joins: the others keep theirs",
            vec![("a", &[1]), ("b", &[1]), ("c", &[1])],
            vec![(1, 6)],
            vec![
                ("a", parts(&[(1, &[0, 1, 2])])),
                ("b", parts(&[(1, &[3, 4, 5])])),
            ],
            vec![("a", 2), ("b", 2), ("c", 2)],
        ),
        (
            "extra partitions go to those that had more",
            vec![("a", &[1]), ("b", &[1])],
            vec![(1, 5)],
            vec![("b", parts(&[(1, &[0, 1, 2, 3, 4])]))],
            vec![("a", 2), ("b", 3)],
        ),
        (
            "different subscriptions",
            vec![("a", &[1]), ("b", &[1, 2]), ("c", &[2])],
            vec![(1, 4), (2, 4)],
            vec![],
            vec![("a", 2), ("b", 3), ("c", 3)],
        ),
    ];
    for (name, s, c, prev, want) in cases {
        let prev: BTreeMap<String, Partitions> =
            prev.into_iter().map(|(m, p)| (m.to_string(), p)).collect();
        let s = subs(&s);
        let got = Assignor::Uniform.assign(&s, &counts(&c), &prev);
        let got_counts: Vec<(&str, usize)> =
            got.iter().map(|(m, p)| (m.as_str(), count(p))).collect();
        assert_eq!(got_counts, want, "{name}");
        // Every partition exactly once, to a subscriber.
        let mut seen = BTreeSet::new();
        for (m, p) in &got {
            for (t, ps) in p {
                assert!(s[m].contains(t), "{name}: {m} not subscribed");
                for x in ps {
                    assert!(seen.insert((*t, *x)), "{name}: {x} twice");
                }
            }
        }
        let total: i32 = c.iter().map(|(_, n)| n).sum();
        assert_eq!(seen.len(), total as usize, "{name}");
        // Sticky: with balance allowing, previous partitions stay.
        for (m, p) in &prev {
            let kept = got
                .get(m)
                .map(|g| {
                    p.iter()
                        .map(|(t, ps)| g.get(t).map_or(0, |x| ps.intersection(x).count()))
                        .sum::<usize>()
                })
                .unwrap_or(0);
            assert_eq!(kept, count(&got[m]).min(count(p)), "{name}: {m}");
        }
    }
}

/// A virtual assignment clock: each reading is 250 ns after the previous.
fn stepping_clock() -> u64 {
    static NOW: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NOW.fetch_add(250, std::sync::atomic::Ordering::SeqCst)
}

#[test]
fn epoch_bumps_are_counted_and_assignments_timed_with_the_injected_clock() {
    // Without a clock nothing is timed.
    let mut plain = twelve();
    let r = Client::new("a", &["t"]).beat(&mut plain, true);
    assert_eq!((r.error, r.assignment_nanos), (ErrorCode::None, None));
    assert_eq!(plain.coord.consumer_epoch_bumps(), 1);

    let mut cg = twelve();
    cg.coord.set_assignment_clock(stepping_clock);
    let mut a = Client::new("a", &["t"]);
    let mut b = Client::new("b", &["t"]);
    // a joins, b joins: two new epochs, each assignment timed between two
    // readings of the clock
    assert_eq!(a.beat(&mut cg, true).assignment_nanos, Some(250));
    assert_eq!(b.beat(&mut cg, true).assignment_nanos, Some(250));
    assert_eq!(cg.coord.consumer_epoch_bumps(), 2);
    // a heartbeat in the same epoch computes nothing
    assert_eq!(a.beat(&mut cg, true).assignment_nanos, None);
    assert_eq!(cg.coord.consumer_epoch_bumps(), 2);
    // a leaves: a new epoch, assigned at b's next heartbeat
    a.leave(&mut cg);
    assert_eq!(cg.coord.consumer_epoch_bumps(), 3);
    assert_eq!(b.beat(&mut cg, true).assignment_nanos, Some(250));
    // b's session expires (tick): one more
    cg.advance(i64::from(SESSION_MS) + 1);
    assert!(cg.describe().members.is_empty());
    assert_eq!(cg.coord.consumer_epoch_bumps(), 4);
    // a coordinator rebuilt from the log starts counting again
    assert_eq!(cg.replayed().consumer_epoch_bumps(), 0);
}
