//! A change is visible only once its `__consumer_offsets` record is
//! durable: commits, OffsetDelete, DeleteGroups and expiry take effect in
//! `append_completed`, and a failed write leaves the state as it was (or,
//! for a stored assignment, starts a rebalance).

use crate::common;

use common::*;
use weir_group::{
    CommitPartition, ErrorCode, GroupConfig, GroupState, HeartbeatRequest, LeaveRequest,
    LeavingMember, OffsetCommitRequest, Output,
};

fn commit(group: &str, generation: i32, member: &str, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: None,
        retention_time_ms: None,
        api_version: 9,
        partitions: vec![CommitPartition {
            topic: "t".into(),
            partition: 0,
            offset,
            leader_epoch: -1,
            metadata: None,
        }],
    }
}

fn committed(h: &Harness, group: &str) -> Option<i64> {
    h.coord.committed(group, "t", 0).map(|c| c.offset)
}

/// Commits with every append to the group's partition succeeding or not.
fn try_commit(h: &mut Harness, req: &OffsetCommitRequest, durable: bool) {
    let (res, out) = h.coord.commit_offsets(req, h.now);
    assert_eq!(res[0].error, ErrorCode::None, "validated before the write");
    h.absorb_with(out, |_| durable);
}

fn stable_one(h: &mut Harness) -> String {
    let sub = subscription(&["t"]);
    let (t, m) = h.join_new("g", "c1", &[("range", &sub)]);
    assert_eq!(h.join_resp(t).generation_id, 1);
    let s = h.sync(sync_req("g", 1, &m, &[(&m, b"t-0")]));
    assert_eq!(h.sync_resp(s).error, ErrorCode::None);
    m
}

fn leave(h: &mut Harness, member: &str) {
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

/// One step of a scenario on a standalone group "s" (generation -1
/// commits): the operation, whether its append is durable, and the
/// committed offset (and whether the group exists) afterwards.
#[derive(Clone, Copy, Debug)]
enum Op {
    Commit(i64),
    DeleteOffset,
    DeleteGroup,
    /// Advance past the retention period and run the expiry check.
    Expire,
}

#[test]
fn standalone_group_table() {
    type Step = (Op, bool, Option<i64>, bool);
    let cases: &[(&str, &[Step])] = &[
        (
            "failed first commit creates nothing",
            &[(Op::Commit(5), false, None, false)],
        ),
        (
            "failed commit keeps the previous offset",
            &[
                (Op::Commit(5), true, Some(5), true),
                (Op::Commit(9), false, Some(5), true),
                (Op::Commit(9), true, Some(9), true),
            ],
        ),
        (
            "failed OffsetDelete keeps the offset",
            &[
                (Op::Commit(5), true, Some(5), true),
                (Op::DeleteOffset, false, Some(5), true),
                (Op::DeleteOffset, true, None, true),
            ],
        ),
        (
            "failed DeleteGroups keeps group and offsets",
            &[
                (Op::Commit(5), true, Some(5), true),
                (Op::DeleteGroup, false, Some(5), true),
                (Op::DeleteGroup, true, None, false),
            ],
        ),
        (
            "failed expiry keeps the offsets until the next check",
            &[
                (Op::Commit(5), true, Some(5), true),
                (Op::Expire, false, Some(5), true),
                (Op::Expire, true, None, false),
            ],
        ),
    ];
    for (name, steps) in cases {
        let mut h = Harness::new(GroupConfig {
            initial_rebalance_delay_ms: 0,
            offsets_retention_ms: 60_000,
            offsets_retention_check_interval_ms: 1_000,
            ..GroupConfig::default()
        });
        // Schedule the periodic expiry check.
        h.advance(1);
        let mut prev = None;
        for (i, &(op, durable, want, exists)) in steps.iter().enumerate() {
            let out = match op {
                Op::Commit(o) => h.coord.commit_offsets(&commit("s", -1, "", o), h.now).1,
                Op::DeleteOffset => h.coord.delete_offsets("s", &[("t".into(), 0)], h.now).2,
                Op::DeleteGroup => h.coord.delete_groups(&["s".into()], h.now).1,
                Op::Expire => {
                    h.now += 120_000;
                    h.coord.tick(h.now)
                }
            };
            let appends = out
                .iter()
                .filter(|o| matches!(o, Output::Append { .. }))
                .count();
            assert_eq!(appends, 1, "{name}: step {i} {op:?} writes once");
            // Nothing is visible before the outcome is reported.
            assert_eq!(committed(&h, "s"), prev, "{name}: step {i} pending");
            h.absorb_with(out, |_| durable);
            assert_eq!(h.coord.pending_writes(), 0, "{name}: step {i}");
            assert_eq!(committed(&h, "s"), want, "{name}: step {i} {op:?}");
            assert_eq!(
                h.coord.group_state("s").is_some(),
                exists,
                "{name}: step {i} {op:?} group exists"
            );
            if !durable {
                assert_eq!(
                    want, prev,
                    "{name}: step {i}: a failed write changes nothing"
                );
            }
            prev = want;
            // The log agrees with what the coordinator shows.
            let replayed = h.replayed();
            assert_eq!(
                replayed.committed("s", "t", 0).map(|c| c.offset),
                want,
                "{name}: step {i} replay"
            );
        }
    }
}

#[test]
fn commit_is_invisible_until_durable() {
    let mut h = Harness::no_delay();
    let m = stable_one(&mut h);
    let (res, out) = h.coord.commit_offsets(&commit("g", 1, &m, 7), h.now);
    assert_eq!(res[0].error, ErrorCode::None);
    assert_eq!(committed(&h, "g"), None, "pending commit is not fetched");
    assert_eq!(h.coord.pending_writes(), 1);
    h.absorb(out);
    assert_eq!(committed(&h, "g"), Some(7));
}

#[test]
fn member_commit_failure_keeps_previous_offset() {
    let mut h = Harness::no_delay();
    let m = stable_one(&mut h);
    try_commit(&mut h, &commit("g", 1, &m, 3), true);
    try_commit(&mut h, &commit("g", 1, &m, 8), false);
    assert_eq!(committed(&h, "g"), Some(3));
    // The member and its generation are unaffected: the retry succeeds.
    try_commit(&mut h, &commit("g", 1, &m, 8), true);
    assert_eq!(committed(&h, "g"), Some(8));
}

#[test]
fn failed_assignment_write_fails_syncs_and_rebalances() {
    let mut h = Harness::no_delay();
    let sub = subscription(&["t"]);
    let (t1, m1) = h.join_new("g", "c1", &[("range", &sub)]);
    let (t2, m2) = h.join_new("g", "c2", &[("range", &sub)]);
    // c2's join started a new join phase that c1 must rejoin.
    let _ = t1;
    let t1b = h.join(join_req("g", &m1, "c1", &[("range", &sub)]));
    let gen_ = h.join_resp(t1b).generation_id;
    assert_eq!(h.join_resp(t2).generation_id, gen_);
    let leader = h.join_resp(t1b).leader.clone();
    let follower = if leader == m1 { m2.clone() } else { m1.clone() };
    let f = h.sync(sync_req("g", gen_, &follower, &[]));
    assert!(!h.syncs.contains_key(&f), "follower waits for the leader");
    let before = h.log().len();
    let token = h.token();
    let out = h.coord.sync_group(
        sync_req("g", gen_, &leader, &[(&m1, b"t-0"), (&m2, b"t-1")]),
        token,
        h.now,
    );
    h.absorb_with(out, |_| false);
    assert_eq!(h.log().len(), before, "nothing written");
    for t in [f, token] {
        assert_eq!(h.sync_resp(t).error, ErrorCode::CoordinatorNotAvailable);
        assert!(h.sync_resp(t).assignment.is_empty());
    }
    assert_eq!(
        h.coord.group_state("g"),
        Some((GroupState::PreparingRebalance, gen_))
    );
    // Heartbeats tell the members to rejoin.
    let beat = HeartbeatRequest {
        group_id: "g".into(),
        generation_id: gen_,
        member_id: m1.clone(),
        group_instance_id: None,
    };
    assert_eq!(
        h.coord.heartbeat(&beat, h.now),
        ErrorCode::RebalanceInProgress
    );
    // Both rejoin; the next generation's assignment is written normally.
    let a = h.join(join_req("g", &m1, "c1", &[("range", &sub)]));
    let b = h.join(join_req("g", &m2, "c2", &[("range", &sub)]));
    let g2 = h.join_resp(a).generation_id;
    assert_eq!(g2, gen_ + 1);
    assert_eq!(h.join_resp(b).generation_id, g2);
    let l = h.join_resp(a).leader.clone();
    let s = h.sync(sync_req("g", g2, &l, &[(&m1, b"t-0"), (&m2, b"t-1")]));
    assert_eq!(h.sync_resp(s).error, ErrorCode::None);
    assert_eq!(h.coord.group_state("g"), Some((GroupState::Stable, g2)));
}

#[test]
fn failed_static_replacement_restores_old_member_id() {
    let mut h = Harness::no_delay();
    let sub = subscription(&["t"]);
    let mut req = join_req("g", "", "c1", &[("range", &sub)]);
    req.group_instance_id = Some("i1".into());
    let t = h.join(req.clone());
    let old = h.join_resp(t).member_id.clone();
    let s = h.sync(SyncRequestExt::with_instance(
        sync_req("g", 1, &old, &[(&old, b"t-0")]),
        "i1",
    ));
    assert_eq!(h.sync_resp(s).error, ErrorCode::None);
    // The instance restarts: a join without member id replaces `old`.
    let token = h.token();
    let out = h.coord.join_group(req, token, h.now);
    h.absorb_with(out, |_| false);
    assert_eq!(h.join_resp(token).error, ErrorCode::CoordinatorNotAvailable);
    let beat = |member: &str| HeartbeatRequest {
        group_id: "g".into(),
        generation_id: 1,
        member_id: member.into(),
        group_instance_id: Some("i1".into()),
    };
    assert_eq!(h.coord.heartbeat(&beat(&old), h.now), ErrorCode::None);
    assert_eq!(h.coord.group_state("g"), Some((GroupState::Stable, 1)));
}

#[test]
fn failed_tombstones_of_group_members_leave_offsets() {
    let mut h = Harness::no_delay();
    let m = stable_one(&mut h);
    try_commit(&mut h, &commit("g", 1, &m, 4), true);
    leave(&mut h, &m);
    let (res, out) = h.coord.delete_groups(&["g".into()], h.now);
    assert_eq!(res[0].1, ErrorCode::None);
    h.absorb_with(out, |_| false);
    assert_eq!(committed(&h, "g"), Some(4));
    assert_eq!(
        h.coord.group_state("g").map(|s| s.0),
        Some(GroupState::Empty)
    );
}

/// Adds `group_instance_id` to a SyncGroup request.
trait SyncRequestExt {
    fn with_instance(self, instance: &str) -> Self;
}

impl SyncRequestExt for weir_group::SyncRequest {
    fn with_instance(mut self, instance: &str) -> Self {
        self.group_instance_id = Some(instance.into());
        self
    }
}
