//! Scenario tests of JoinGroup / SyncGroup / Heartbeat / LeaveGroup in
//! virtual time.

use crate::common;

use common::*;
use weir_group::{
    ErrorCode, GroupConfig, GroupState, HeartbeatRequest, LeaveRequest, LeavingMember,
};

const RANGE: &[(&str, &[u8])] = &[("range", b"sub")];

fn hb(h: &mut Harness, group: &str, gen_id: i32, member: &str) -> ErrorCode {
    let req = HeartbeatRequest {
        group_id: group.into(),
        generation_id: gen_id,
        member_id: member.into(),
        group_instance_id: None,
    };
    h.coord.heartbeat(&req, h.now)
}

fn leave(h: &mut Harness, group: &str, member: &str) -> ErrorCode {
    let req = LeaveRequest {
        group_id: group.into(),
        members: vec![LeavingMember {
            member_id: member.into(),
            group_instance_id: None,
        }],
    };
    let (resp, out) = h.coord.leave_group(&req, h.now);
    h.absorb(out);
    assert_eq!(resp.error, ErrorCode::None);
    resp.members[0].error
}

/// One member: member-id-required round trip, join, sync, heartbeat.
#[test]
fn single_member_happy_path() {
    let mut h = Harness::no_delay();
    let (t, id) = h.join_new("g", "c1", RANGE);
    let r = h.join_resp(t).clone();
    assert_eq!(r.error, ErrorCode::None);
    assert_eq!(r.generation_id, 1);
    assert_eq!(r.leader, id);
    assert_eq!(r.member_id, id);
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
    assert_eq!(r.members.len(), 1);
    assert_eq!(&r.members[0].metadata[..], b"sub");
    assert_eq!(
        h.coord.group_state("g"),
        Some((GroupState::CompletingRebalance, 1))
    );

    let appended_before = h.log().len();
    let s = h.sync(sync_req("g", 1, &id, &[(&id, b"p0,p1")]));
    assert_eq!(h.sync_resp(s).error, ErrorCode::None);
    assert_eq!(&h.sync_resp(s).assignment[..], b"p0,p1");
    assert_eq!(
        h.log().len(),
        appended_before + 1,
        "group metadata appended"
    );
    assert_eq!(h.coord.group_state("g"), Some((GroupState::Stable, 1)));

    assert_eq!(hb(&mut h, "g", 1, &id), ErrorCode::None);
    assert_eq!(hb(&mut h, "g", 0, &id), ErrorCode::IllegalGeneration);
    assert_eq!(hb(&mut h, "g", 1, "nobody"), ErrorCode::UnknownMemberId);
    assert_eq!(hb(&mut h, "nope", 1, &id), ErrorCode::UnknownMemberId);
}

/// Three members inside the initial rebalance delay form generation 1
/// together; followers that sync before the leader wait for it.
#[test]
fn three_members_with_initial_delay() {
    let mut h = Harness::new(GroupConfig::default());
    let (t1, m1) = h.join_new("g", "c1", RANGE);
    h.advance(1000);
    let (t2, m2) = h.join_new("g", "c2", RANGE);
    h.advance(1000);
    let (t3, m3) = h.join_new("g", "c3", RANGE);
    assert!(!h.joins.contains_key(&t1), "join held during the delay");
    // The first delay expires at 3000 but members kept arriving: extended.
    h.advance(1000);
    assert!(!h.joins.contains_key(&t1), "delay extended for new members");
    assert_eq!(
        h.coord.group_state("g"),
        Some((GroupState::PreparingRebalance, 0))
    );
    h.advance(3000);
    let (r1, r2, r3) = (
        h.join_resp(t1).clone(),
        h.join_resp(t2).clone(),
        h.join_resp(t3).clone(),
    );
    for r in [&r1, &r2, &r3] {
        assert_eq!(r.error, ErrorCode::None);
        assert_eq!(r.generation_id, 1);
        assert_eq!(r.leader, m1);
    }
    assert_eq!(r1.members.len(), 3);
    assert!(r2.members.is_empty() && r3.members.is_empty());

    let s2 = h.sync(sync_req("g", 1, &m2, &[]));
    assert!(!h.syncs.contains_key(&s2), "follower waits for the leader");
    let s1 = h.sync(sync_req(
        "g",
        1,
        &m1,
        &[(&m1, b"a"), (&m2, b"b"), (&m3, b"c")],
    ));
    assert_eq!(&h.sync_resp(s1).assignment[..], b"a");
    assert_eq!(&h.sync_resp(s2).assignment[..], b"b");
    let s3 = h.sync(sync_req("g", 1, &m3, &[]));
    assert_eq!(&h.sync_resp(s3).assignment[..], b"c");
    assert_eq!(h.coord.group_state("g"), Some((GroupState::Stable, 1)));
}

fn stable_pair(h: &mut Harness) -> (String, String) {
    let (t1, m1) = h.join_new("g", "c1", RANGE);
    let (t2, m2) = h.join_new("g", "c2", RANGE);
    // m2 arrived while the first join phase was waiting; since the delay is
    // off, m1's join completed alone and m2 triggered another rebalance.
    let g1 = h.join_resp(t1).generation_id;
    assert_eq!(g1, 1);
    let t1b = h.join(join_req("g", &m1, "c1", RANGE));
    let (r1, r2) = (h.join_resp(t1b).clone(), h.join_resp(t2).clone());
    assert_eq!(r1.generation_id, 2);
    assert_eq!(r2.generation_id, 2);
    let s1 = h.sync(sync_req("g", 2, &m1, &[(&m1, b"x"), (&m2, b"y")]));
    let s2 = h.sync(sync_req("g", 2, &m2, &[]));
    assert_eq!(&h.sync_resp(s1).assignment[..], b"x");
    assert_eq!(&h.sync_resp(s2).assignment[..], b"y");
    (m1, m2)
}

#[test]
fn join_of_new_member_rebalances_stable_group() {
    let mut h = Harness::no_delay();
    let (m1, m2) = stable_pair(&mut h);
    assert_eq!(h.coord.group_state("g"), Some((GroupState::Stable, 2)));
    let (t3, _m3) = h.join_new("g", "c3", RANGE);
    assert!(!h.joins.contains_key(&t3));
    assert_eq!(hb(&mut h, "g", 2, &m1), ErrorCode::RebalanceInProgress);
    assert_eq!(hb(&mut h, "g", 2, &m2), ErrorCode::RebalanceInProgress);
    let t1 = h.join(join_req("g", &m1, "c1", RANGE));
    assert!(!h.joins.contains_key(&t1), "waits for m2");
    let t2 = h.join(join_req("g", &m2, "c2", RANGE));
    for t in [t1, t2, t3] {
        assert_eq!(h.join_resp(t).generation_id, 3);
    }
}

#[test]
fn leave_rebalances_and_moves_leadership() {
    let mut h = Harness::no_delay();
    let (m1, m2) = stable_pair(&mut h);
    assert_eq!(leave(&mut h, "g", &m1), ErrorCode::None);
    assert_eq!(leave(&mut h, "g", &m1), ErrorCode::UnknownMemberId);
    assert_eq!(hb(&mut h, "g", 2, &m2), ErrorCode::RebalanceInProgress);
    let t2 = h.join(join_req("g", &m2, "c2", RANGE));
    let r = h.join_resp(t2);
    assert_eq!(r.generation_id, 3);
    assert_eq!(r.leader, m2);
    assert_eq!(r.members.len(), 1);
    // Last member leaves: the group becomes Empty with a new generation.
    let s = h.sync(sync_req("g", 3, &m2, &[(&m2, b"all")]));
    assert_eq!(h.sync_resp(s).error, ErrorCode::None);
    assert_eq!(leave(&mut h, "g", &m2), ErrorCode::None);
    assert_eq!(h.coord.group_state("g"), Some((GroupState::Empty, 4)));
}

#[test]
fn session_expiry_removes_member_and_rebalances() {
    let mut h = Harness::no_delay();
    let (m1, m2) = stable_pair(&mut h);
    // m1 keeps heartbeating, m2 goes silent.
    for _ in 0..3 {
        h.advance(3000);
        assert_eq!(hb(&mut h, "g", 2, &m1), ErrorCode::None);
    }
    assert_eq!(h.coord.group_state("g"), Some((GroupState::Stable, 2)));
    // 12 s > 10 s session timeout for m2.
    h.advance(3000);
    assert_eq!(hb(&mut h, "g", 2, &m2), ErrorCode::UnknownMemberId);
    assert_eq!(hb(&mut h, "g", 2, &m1), ErrorCode::RebalanceInProgress);
    let t = h.join(join_req("g", &m1, "c1", RANGE));
    assert_eq!(h.join_resp(t).generation_id, 3);
    assert_eq!(h.join_resp(t).members.len(), 1);
}

#[test]
fn rebalance_timeout_drops_members_that_do_not_rejoin() {
    let mut h = Harness::no_delay();
    let (m1, m2) = stable_pair(&mut h);
    let (t3, m3) = h.join_new("g", "c3", RANGE);
    let t1 = h.join(join_req("g", &m1, "c1", RANGE));
    // m2 keeps heartbeating but never rejoins.
    for _ in 0..9 {
        h.advance(3000);
        assert_eq!(hb(&mut h, "g", 2, &m2), ErrorCode::RebalanceInProgress);
    }
    assert!(!h.joins.contains_key(&t1));
    h.advance(3000); // 30 s rebalance timeout reached
    let r1 = h.join_resp(t1).clone();
    assert_eq!(r1.generation_id, 3);
    let ids: Vec<_> = r1.members.iter().map(|m| m.member_id.clone()).collect();
    assert_eq!(ids, vec![m1.clone(), m3.clone()]);
    assert_eq!(h.join_resp(t3).generation_id, 3);
    assert_eq!(hb(&mut h, "g", 2, &m2), ErrorCode::UnknownMemberId);
}

#[test]
fn sync_errors() {
    let mut h = Harness::no_delay();
    let (m1, m2) = stable_pair(&mut h);
    let s = h.sync(sync_req("g", 1, &m1, &[]));
    assert_eq!(h.sync_resp(s).error, ErrorCode::IllegalGeneration);
    let s = h.sync(sync_req("g", 2, "ghost", &[]));
    assert_eq!(h.sync_resp(s).error, ErrorCode::UnknownMemberId);
    let mut wrong = sync_req("g", 2, &m2, &[]);
    wrong.protocol_name = Some("roundrobin".into());
    let s = h.sync(wrong);
    assert_eq!(h.sync_resp(s).error, ErrorCode::InconsistentGroupProtocol);
    // During a rebalance, sync is refused.
    let _ = h.join_new("g", "c3", RANGE);
    let s = h.sync(sync_req("g", 2, &m2, &[]));
    assert_eq!(h.sync_resp(s).error, ErrorCode::RebalanceInProgress);
}

#[test]
fn join_validation_table() {
    let mut h = Harness::no_delay();
    let (t, m1) = h.join_new("g", "c1", RANGE);
    assert_eq!(h.join_resp(t).error, ErrorCode::None);
    let cases: Vec<(weir_group::JoinRequest, ErrorCode)> = vec![
        (
            {
                let mut r = join_req("g", "", "c", RANGE);
                r.session_timeout_ms = 1;
                r
            },
            ErrorCode::InvalidSessionTimeout,
        ),
        (join_req("", "", "c", RANGE), ErrorCode::InvalidGroupId),
        (
            join_req("g", "", "c", &[("roundrobin", b"")]),
            ErrorCode::InconsistentGroupProtocol,
        ),
        (
            {
                let mut r = join_req("g", "", "c", RANGE);
                r.protocol_type = "connect".into();
                r
            },
            ErrorCode::InconsistentGroupProtocol,
        ),
        (
            join_req("g", "ghost", "c", RANGE),
            ErrorCode::UnknownMemberId,
        ),
        (
            join_req("other", "ghost", "c", RANGE),
            ErrorCode::UnknownMemberId,
        ),
        (
            join_req("g", &m1, "c1", &[("roundrobin", b"")]),
            ErrorCode::None, // sole member may change protocols
        ),
    ];
    for (i, (req, want)) in cases.into_iter().enumerate() {
        let t = h.join(req);
        assert_eq!(h.join_resp(t).error, want, "case {i}");
    }
    assert!(h.coord.group_state("other").is_none(), "no group created");
}

#[test]
fn protocol_selection_for_cooperative_and_eager_assignors() {
    let coop: &[(&str, &[u8])] = &[("cooperative-sticky", b"c"), ("range", b"r")];
    let eager: &[(&str, &[u8])] = &[("range", b"r")];
    // All members support cooperative-sticky: it is chosen.
    let mut h = Harness::new(GroupConfig {
        initial_rebalance_delay_ms: 100,
        ..GroupConfig::default()
    });
    let (t1, _) = h.join_new("g", "a", coop);
    let (t2, _) = h.join_new("g", "b", coop);
    // b arrived during the delay, which is extended once.
    h.advance(100);
    assert!(!h.joins.contains_key(&t1));
    h.advance(100);
    assert_eq!(
        h.join_resp(t1).protocol_name.as_deref(),
        Some("cooperative-sticky")
    );
    assert_eq!(&h.join_resp(t1).members[1].metadata[..], b"c");
    assert_eq!(
        h.join_resp(t2).protocol_name.as_deref(),
        Some("cooperative-sticky")
    );
    // One eager-only member: the common protocol "range" is chosen
    // (rolling upgrade from eager to cooperative).
    let mut h = Harness::new(GroupConfig {
        initial_rebalance_delay_ms: 100,
        ..GroupConfig::default()
    });
    let (t1, _) = h.join_new("g", "a", coop);
    let (t2, _) = h.join_new("g", "b", eager);
    h.advance(200);
    assert_eq!(h.join_resp(t1).protocol_name.as_deref(), Some("range"));
    assert_eq!(h.join_resp(t2).protocol_name.as_deref(), Some("range"));
    assert_eq!(&h.join_resp(t1).members[0].metadata[..], b"r");
}

/// Cooperative clients rejoin right after syncing (second rebalance) with
/// changed metadata; a non-leader rejoin with unchanged metadata in Stable
/// gets the current generation without a rebalance.
#[test]
fn rejoin_without_change_keeps_generation() {
    let mut h = Harness::no_delay();
    let (m1, m2) = stable_pair(&mut h);
    let t = h.join(join_req("g", &m2, "c2", RANGE));
    let r = h.join_resp(t);
    assert_eq!(r.generation_id, 2);
    assert_eq!(r.leader, m1);
    assert!(r.members.is_empty());
    assert_eq!(h.coord.group_state("g"), Some((GroupState::Stable, 2)));
    // Changed metadata triggers a rebalance.
    let t = h.join(join_req("g", &m2, "c2", &[("range", b"owned:p1")]));
    assert!(!h.joins.contains_key(&t));
    assert_eq!(
        h.coord.group_state("g"),
        Some((GroupState::PreparingRebalance, 2))
    );
}

fn static_join(h: &mut Harness, instance: &str, member: &str) -> u64 {
    let mut r = join_req("g", member, "c", RANGE);
    r.group_instance_id = Some(instance.into());
    h.join(r)
}

#[test]
fn static_member_rejoin_fences_old_member_id() {
    let mut h = Harness::no_delay();
    let t = static_join(&mut h, "i1", "");
    let r = h.join_resp(t).clone();
    assert_eq!(
        r.error,
        ErrorCode::None,
        "static members skip MEMBER_ID_REQUIRED"
    );
    assert!(r.member_id.starts_with("i1-"));
    let old = r.member_id.clone();
    let mut s = sync_req("g", 1, &old, &[(&old, b"p0")]);
    s.group_instance_id = Some("i1".into());
    let s = h.sync(s);
    assert_eq!(&h.sync_resp(s).assignment[..], b"p0");

    // Restart with the same instance id: new member id, same generation,
    // no rebalance; the leader is told to skip assignment.
    let t = static_join(&mut h, "i1", "");
    let r = h.join_resp(t).clone();
    assert_eq!(r.error, ErrorCode::None);
    assert_ne!(r.member_id, old);
    assert_eq!(r.generation_id, 1);
    assert!(r.skip_assignment);
    assert_eq!(h.coord.group_state("g"), Some((GroupState::Stable, 1)));
    let new = r.member_id.clone();

    let fenced = weir_group::HeartbeatRequest {
        group_id: "g".into(),
        generation_id: 1,
        member_id: old.clone(),
        group_instance_id: Some("i1".into()),
    };
    assert_eq!(
        h.coord.heartbeat(&fenced, h.now),
        ErrorCode::FencedInstanceId
    );
    let current = weir_group::HeartbeatRequest {
        member_id: new.clone(),
        ..fenced.clone()
    };
    assert_eq!(h.coord.heartbeat(&current, h.now), ErrorCode::None);
    // The old id rejoining is fenced too.
    let t = static_join(&mut h, "i1", &old);
    assert_eq!(h.join_resp(t).error, ErrorCode::FencedInstanceId);
    // Sync with the new id returns the assignment kept across the restart.
    let mut s = sync_req("g", 1, &new, &[]);
    s.group_instance_id = Some("i1".into());
    let s = h.sync(s);
    assert_eq!(&h.sync_resp(s).assignment[..], b"p0");
    // Leave by instance id with a mismatching member id is fenced.
    let req = LeaveRequest {
        group_id: "g".into(),
        members: vec![LeavingMember {
            member_id: old,
            group_instance_id: Some("i1".into()),
        }],
    };
    let (resp, _) = h.coord.leave_group(&req, h.now);
    assert_eq!(resp.members[0].error, ErrorCode::FencedInstanceId);
}

#[test]
fn static_member_parked_join_is_fenced_by_restart() {
    let mut h = Harness::no_delay();
    let t = static_join(&mut h, "i1", "");
    let m1 = h.join_resp(t).member_id.clone();
    let (t2, _m2) = h.join_new("g", "c2", RANGE);
    // m1 must rejoin for generation 2; its rejoin is parked until...
    let parked = static_join(&mut h, "i1", &m1);
    assert!(
        h.joins.contains_key(&parked),
        "all joined: completes at once"
    );
    assert_eq!(h.join_resp(t2).generation_id, 2);
}

#[test]
fn pending_member_that_never_returns_expires() {
    let mut h = Harness::no_delay();
    let (t1, m1) = h.join_new("g", "c1", RANGE);
    let s = h.sync(sync_req("g", 1, &m1, &[(&m1, b"a")]));
    assert_eq!(h.sync_resp(s).error, ErrorCode::None);
    assert_eq!(h.join_resp(t1).generation_id, 1);
    // A client gets MEMBER_ID_REQUIRED and disappears.
    let t = h.join(join_req("g", "", "ghost", RANGE));
    assert_eq!(h.join_resp(t).error, ErrorCode::MemberIdRequired);
    assert_eq!(h.coord.group_state("g"), Some((GroupState::Stable, 1)));
    h.advance(5000);
    assert_eq!(hb(&mut h, "g", 1, &m1), ErrorCode::None);
    h.advance(6000);
    assert_eq!(hb(&mut h, "g", 1, &m1), ErrorCode::None);
    assert_eq!(h.coord.group_state("g"), Some((GroupState::Stable, 1)));
}

#[test]
fn list_and_describe() {
    let mut h = Harness::no_delay();
    let (m1, _m2) = stable_pair(&mut h);
    let listed = h.coord.list_groups(&[], &[]);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state, GroupState::Stable);
    assert_eq!(listed[0].protocol_type, "consumer");
    assert!(h.coord.list_groups(&["empty".into()], &[]).is_empty());
    assert_eq!(h.coord.list_groups(&["STABLE".into()], &[]).len(), 1);
    assert!(h.coord.list_groups(&[], &["consumer".into()]).is_empty());
    let d = h.coord.describe_groups(&["g".into(), "missing".into()]);
    assert!(d[0].found);
    assert_eq!(d[0].protocol, "range");
    assert_eq!(d[0].members.len(), 2);
    assert_eq!(d[0].members[0].member_id, m1);
    assert_eq!(&d[0].members[0].assignment[..], b"x");
    assert!(!d[1].found);
    assert_eq!(d[1].state, GroupState::Dead);
}

#[test]
fn find_coordinator_batches_keys() {
    let h = Harness::no_delay();
    let got = h
        .coord
        .find_coordinators(&["hello".into(), "consumer-0".into()]);
    // "consumer-0" hashes to -166239207: Kafka's Utils.abs gives partition
    // 7 (masking the sign bit would give 41).
    assert_eq!(got, vec![("hello".into(), 22), ("consumer-0".into(), 7)]);
}

#[test]
fn static_member_that_misses_a_rebalance_keeps_its_place() {
    let mut h = Harness::no_delay();
    let t = static_join(&mut h, "i1", "");
    let s1 = h.join_resp(t).member_id.clone();
    let mut s = sync_req("g", 1, &s1, &[(&s1, b"p0")]);
    s.group_instance_id = Some("i1".into());
    h.sync(s);
    // A dynamic member joins; the static member (e.g. restarting) does not
    // rejoin before the rebalance timeout but keeps heartbeating.
    let (t2, m2) = h.join_new("g", "c2", RANGE);
    let hb_static = weir_group::HeartbeatRequest {
        group_id: "g".into(),
        generation_id: 1,
        member_id: s1.clone(),
        group_instance_id: Some("i1".into()),
    };
    for _ in 0..9 {
        h.advance(3000);
        assert_eq!(
            h.coord.heartbeat(&hb_static, h.now),
            ErrorCode::RebalanceInProgress
        );
    }
    h.advance(3000); // rebalance timeout (30 s)
    // Still a member, now behind by one generation.
    assert_eq!(
        h.coord.heartbeat(&hb_static, h.now),
        ErrorCode::IllegalGeneration
    );
    let r2 = h.join_resp(t2).clone();
    assert_eq!(r2.generation_id, 2);
    assert_eq!(r2.leader, m2, "leadership moves to a member that rejoined");
    let ids: Vec<_> = r2.members.iter().map(|m| m.member_id.clone()).collect();
    assert_eq!(ids, vec![s1.clone(), m2.clone()], "static member kept");
    // It never syncs or heartbeats again: once its session runs out it is
    // removed and the remaining member rebalances.
    let s = h.sync(sync_req("g", 2, &m2, &[(&m2, b"p1"), (&s1, b"p0")]));
    assert_eq!(&h.sync_resp(s).assignment[..], b"p1");
    for _ in 0..3 {
        h.advance(3000);
        assert_eq!(hb(&mut h, "g", 2, &m2), ErrorCode::None);
    }
    h.advance(3000);
    assert_eq!(hb(&mut h, "g", 2, &m2), ErrorCode::RebalanceInProgress);
    let d = h.coord.describe_groups(&["g".into()]);
    assert_eq!(d[0].members.len(), 1);
    assert_eq!(d[0].members[0].member_id, m2);
}

#[test]
fn members_that_never_sync_are_removed_after_the_rebalance_timeout() {
    let mut h = Harness::no_delay();
    let (m1, m2) = stable_pair(&mut h);
    let (t3, m3) = h.join_new("g", "c3", RANGE);
    let t1 = h.join(join_req("g", &m1, "c1", RANGE));
    let t2 = h.join(join_req("g", &m2, "c2", RANGE));
    for t in [t1, t2, t3] {
        assert_eq!(h.join_resp(t).generation_id, 3);
    }
    // m1 (leader) and m2 sync; m3 only heartbeats.
    h.sync(sync_req(
        "g",
        3,
        &m1,
        &[(&m1, b"a"), (&m2, b"b"), (&m3, b"c")],
    ));
    h.sync(sync_req("g", 3, &m2, &[]));
    for _ in 0..10 {
        h.advance(3000);
        for m in [&m1, &m2, &m3] {
            let _ = hb(&mut h, "g", 3, m);
        }
    }
    // 30 s after the join phase m3 is dropped for not syncing.
    let d = h.coord.describe_groups(&["g".into()]);
    let ids: Vec<_> = d[0].members.iter().map(|m| m.member_id.clone()).collect();
    assert_eq!(ids, vec![m1.clone(), m2.clone()]);
    assert_eq!(hb(&mut h, "g", 3, &m1), ErrorCode::RebalanceInProgress);
}

#[test]
fn static_leader_rejoin_before_v9_is_answered_as_follower() {
    let mut h = Harness::no_delay();
    let t = static_join(&mut h, "i1", "");
    let old = h.join_resp(t).member_id.clone();
    let mut s = sync_req("g", 1, &old, &[(&old, b"p0")]);
    s.group_instance_id = Some("i1".into());
    h.sync(s);
    let mut req = join_req("g", "", "c", RANGE);
    req.group_instance_id = Some("i1".into());
    req.supports_skip_assignment = false;
    let t = h.join(req);
    let r = h.join_resp(t);
    assert_eq!(r.error, ErrorCode::None);
    assert_eq!(r.generation_id, 1);
    assert_eq!(
        r.leader, old,
        "previous leader id, so the client does not assign"
    );
    assert!(r.members.is_empty());
    assert!(!r.skip_assignment);
}

#[test]
fn leave_of_unknown_group() {
    let h = Harness::no_delay();
    let req = LeaveRequest {
        group_id: "none".into(),
        members: vec![LeavingMember {
            member_id: "m".into(),
            group_instance_id: None,
        }],
    };
    let mut coord = h.coord;
    let (resp, out) = coord.leave_group(&req, h.now);
    assert!(out.is_empty());
    assert_eq!(resp.error, ErrorCode::UnknownMemberId);
}
