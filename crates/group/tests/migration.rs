//! Online upgrade and downgrade between classic and consumer groups
//! (`group.consumer.migration.policy`), with eager classic members (as
//! kafka-python: they give up every partition before rejoining) and a
//! consumer-protocol member, in virtual time. After every step no
//! partition is consumed by two clients.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, Bytes, BytesMut};
use weir_group::{
    AppendOutcome, ErrorCode, GroupCoordinator, GroupState, HeartbeatRequest, JoinRequest,
    LeaveRequest, LeavingMember, MemberState, MigrationPolicy, Output, Protocol, Response,
    SyncRequest,
};
use weir_protocol::codec::{Decodable, Encodable};
use weir_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use weir_protocol::messages::consumer_protocol_subscription::TopicPartition as OwnedTopic;
use weir_protocol::messages::{ConsumerProtocolAssignment, ConsumerProtocolSubscription};

use crate::consumer_common::{Cg, Client, GROUP, config, topic_id};

const TOPIC: &str = "t";
const PARTITIONS: i32 = 4;

/// A ConsumerProtocolSubscription v0 of `TOPIC`.
fn subscription() -> Bytes {
    Bytes::from(crate::common::subscription(&[TOPIC]))
}

fn encode_assignment(ps: &[i32]) -> Bytes {
    let a = ConsumerProtocolAssignment {
        assigned_partitions: vec![AssignedTopic {
            topic: TOPIC.to_string(),
            partitions: ps.to_vec(),
            ..Default::default()
        }],
        user_data: None,
        ..Default::default()
    };
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    a.encode(&mut buf, 0).expect("encodes");
    buf.freeze()
}

fn decode_assignment(b: &Bytes) -> BTreeSet<i32> {
    assert!(b.len() >= 2, "assignment too short: {b:?}");
    let version = i16::from_be_bytes([b[0], b[1]]);
    let mut body = b.slice(2..);
    let a = ConsumerProtocolAssignment::decode(&mut body, version).expect("decodes");
    a.assigned_partitions
        .into_iter()
        .inspect(|t| assert_eq!(t.topic, TOPIC))
        .flat_map(|t| t.partitions)
        .collect()
}

/// The coordinator with parked responses collected.
struct World {
    cg: Cg,
    token: u64,
    responses: BTreeMap<u64, Response>,
}

impl World {
    fn new(policy: MigrationPolicy) -> Self {
        let mut cg = Cg::new();
        cg.coord = GroupCoordinator::new(weir_group::GroupConfig {
            consumer_migration_policy: policy,
            ..config()
        });
        cg.topic(TOPIC, 1, PARTITIONS);
        Self {
            cg,
            token: 0,
            responses: BTreeMap::new(),
        }
    }

    fn exec(&mut self, out: Vec<Output>) {
        for o in out {
            match o {
                Output::Append { records, write, .. } => {
                    let base = self.cg.log.len() as i64;
                    for r in records {
                        self.cg.log.push((r.key, r.value));
                    }
                    let done = self.cg.coord.append_completed(
                        write,
                        AppendOutcome::Appended { base_offset: base },
                        self.cg.now,
                    );
                    self.exec(done.outputs);
                }
                Output::Respond { token, response } => {
                    self.responses.insert(token, response);
                }
            }
        }
    }

    fn advance(&mut self, ms: i64) {
        self.cg.now += ms;
        let out = self.cg.coord.tick(self.cg.now);
        self.exec(out);
    }

    fn group_type(&self) -> &'static str {
        self.cg
            .coord
            .list_groups(&[], &[])
            .into_iter()
            .find(|g| g.group_id == GROUP)
            .map(|g| g.group_type)
            .expect("group listed")
    }
}

/// An eager classic consumer (kafka-python's behaviour): it revokes all
/// its partitions before it rejoins; the leader assigns ranges.
#[derive(Debug)]
struct Classic {
    id: String,
    generation: i32,
    owned: BTreeSet<i32>,
    /// A JoinGroup waiting for the rebalance.
    parked_join: Option<u64>,
    /// Cooperative (as librdkafka's cooperative-sticky): keeps its
    /// partitions when it rejoins and reports them in its subscription.
    cooperative: bool,
    /// The last assignment received (cooperative members).
    assigned: BTreeSet<i32>,
    /// `group.instance.id` of a static member.
    instance: Option<String>,
}

impl Classic {
    fn new() -> Self {
        Self {
            id: String::new(),
            generation: -1,
            owned: BTreeSet::new(),
            parked_join: None,
            cooperative: false,
            assigned: BTreeSet::new(),
            instance: None,
        }
    }

    /// Its subscription: v0, or for a cooperative member v1 with the
    /// partitions it owns.
    fn subscription(&self) -> Bytes {
        if !self.cooperative {
            return subscription();
        }
        let sub = ConsumerProtocolSubscription {
            topics: vec![TOPIC.to_string()],
            user_data: None,
            owned_partitions: vec![OwnedTopic {
                topic: TOPIC.to_string(),
                partitions: self.owned.iter().copied().collect(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut buf = BytesMut::new();
        buf.put_i16(1);
        sub.encode(&mut buf, 1).expect("encodes");
        buf.freeze()
    }

    fn join_req(&self) -> JoinRequest {
        JoinRequest {
            group_id: GROUP.into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            member_id: self.id.clone(),
            group_instance_id: self.instance.clone(),
            protocol_type: "consumer".into(),
            protocols: vec![Protocol {
                name: "range".into(),
                metadata: self.subscription(),
            }],
            client_id: "kafka-python".into(),
            client_host: "/127.0.0.1".into(),
            require_known_member_id: true,
            supports_skip_assignment: true,
        }
    }

    /// Sends JoinGroup (revoking everything first); the answer may be
    /// parked.
    fn join(&mut self, w: &mut World) {
        if !self.cooperative {
            self.owned.clear();
        }
        loop {
            w.token += 1;
            let token = w.token;
            let out = w.cg.coord.join_group(self.join_req(), token, w.cg.now);
            w.exec(out);
            match w.responses.remove(&token) {
                Some(Response::Join(r)) if r.error == ErrorCode::MemberIdRequired => {
                    self.id = r.member_id;
                }
                Some(r) => {
                    w.responses.insert(token, r);
                    self.parked_join = Some(token);
                    return;
                }
                None => {
                    self.parked_join = Some(token);
                    return;
                }
            }
        }
    }

    /// The join's answer, if it arrived: generation and the members to
    /// assign when this client leads.
    fn joined(&mut self, w: &mut World) -> Option<Vec<String>> {
        let token = self.parked_join?;
        let Response::Join(r) = w.responses.remove(&token)? else {
            panic!("not a join response");
        };
        self.parked_join = None;
        assert_eq!(r.error, ErrorCode::None, "join of {}: {r:?}", self.id);
        self.generation = r.generation_id;
        self.id = r.member_id.clone();
        Some(if r.leader == r.member_id {
            r.members.into_iter().map(|m| m.member_id).collect()
        } else {
            Vec::new()
        })
    }

    /// SyncGroup; as leader with `members`, ranges of the partitions.
    fn sync(&mut self, w: &mut World, members: &[String]) -> ErrorCode {
        let mut assignments = Vec::new();
        let n = members.len().max(1) as i32;
        for (i, m) in members.iter().enumerate() {
            let i = i as i32;
            let ps: Vec<i32> = (0..PARTITIONS)
                .filter(|p| p * n / PARTITIONS == i)
                .collect();
            assignments.push(weir_group::Assignment {
                member_id: m.clone(),
                assignment: encode_assignment(&ps),
            });
        }
        w.token += 1;
        let token = w.token;
        let req = SyncRequest {
            group_id: GROUP.into(),
            generation_id: self.generation,
            member_id: self.id.clone(),
            group_instance_id: self.instance.clone(),
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            assignments,
        };
        let out = w.cg.coord.sync_group(req, token, w.cg.now);
        w.exec(out);
        let Some(Response::Sync(r)) = w.responses.remove(&token) else {
            panic!("sync of {} not answered", self.id);
        };
        if r.error == ErrorCode::None {
            let assigned = decode_assignment(&r.assignment);
            if self.cooperative {
                // New partitions are taken now; revoked ones are given up
                // only by `revoke` (then it rejoins).
                self.owned.extend(assigned.iter().copied());
                self.assigned = assigned;
            } else {
                self.owned = assigned;
            }
        }
        r.error
    }

    fn heartbeat(&self, w: &mut World) -> ErrorCode {
        let req = HeartbeatRequest {
            group_id: GROUP.into(),
            generation_id: self.generation,
            member_id: self.id.clone(),
            group_instance_id: self.instance.clone(),
        };
        w.cg.coord.heartbeat(&req, w.cg.now)
    }

    /// Join, then sync once the join is answered (for a group that
    /// answers at once: a consumer group, or a lone classic member).
    fn rejoin_and_sync(&mut self, w: &mut World) {
        self.join(w);
        let members = self.joined(w).expect("join answered at once");
        assert_eq!(self.sync(w, &members), ErrorCode::None);
    }
}

/// Panics if two clients consume one partition; returns who owns what.
fn owners(classic: &[&Classic], consumer: &[&Client]) -> BTreeMap<i32, String> {
    let mut seen = BTreeMap::new();
    let t = topic_id(1);
    let all = classic
        .iter()
        .map(|c| (c.id.clone(), c.owned.clone()))
        .chain(consumer.iter().map(|c| {
            let ps = c.owned.get(&t).cloned().unwrap_or_default();
            (c.id.clone(), ps)
        }));
    for (id, ps) in all {
        for p in ps {
            if let Some(other) = seen.insert(p, id.clone()) {
                panic!("partition {p} consumed by {other} and {id}");
            }
        }
    }
    seen
}

/// Two classic members a and b, Stable with two partitions each.
fn classic_pair(w: &mut World) -> (Classic, Classic) {
    let mut a = Classic::new();
    a.rejoin_and_sync(w);
    assert_eq!(a.owned.len(), PARTITIONS as usize);
    let mut b = Classic::new();
    b.join(w);
    assert!(b.joined(w).is_none(), "b waits for a to rejoin");
    assert_eq!(a.heartbeat(w), ErrorCode::RebalanceInProgress);
    a.join(w);
    let leader_members = a.joined(w).expect("a's join completes the phase");
    b.joined(w).expect("b answered too");
    assert_eq!(a.sync(w, &leader_members), ErrorCode::None);
    assert_eq!(b.sync(w, &[]), ErrorCode::None);
    assert_eq!(a.owned.len() + b.owned.len(), PARTITIONS as usize);
    owners(&[&a, &b], &[]);
    (a, b)
}

/// Drives a, b (rejoining when told) and c until everyone owns its
/// target; checks single ownership after every step.
fn settle(w: &mut World, a: &mut Classic, b: &mut Classic, c: &mut Client) {
    for _ in 0..20 {
        let mut quiet = true;
        for m in [&mut *a, &mut *b] {
            match m.heartbeat(w) {
                ErrorCode::None => {}
                ErrorCode::RebalanceInProgress => {
                    quiet = false;
                    m.join(w);
                    let members = m.joined(w).expect("answered at once");
                    assert!(members.is_empty(), "no leader in a consumer group");
                    match m.sync(w, &[]) {
                        ErrorCode::None | ErrorCode::RebalanceInProgress => {}
                        e => panic!("sync of {}: {e:?}", m.id),
                    }
                }
                e => panic!("heartbeat of {}: {e:?}", m.id),
            }
        }
        owners(&[a, b], &[c]);
        let before = c.owned.clone();
        c.beat(&mut w.cg, true);
        owners(&[a, b], &[c]);
        quiet &= before == c.owned;
        let d = w.cg.describe();
        if quiet && d.state == "Stable" {
            return;
        }
        w.advance(1_000);
    }
    panic!("did not settle: {:#?}", w.cg.describe());
}

#[test]
fn upgrade_splits_partitions_without_two_owners_and_downgrade_hands_all_back() {
    let mut w = World::new(MigrationPolicy::Bidirectional);
    let (mut a, mut b) = classic_pair(&mut w);
    assert_eq!(w.group_type(), "classic");
    let generation = a.generation;

    // A consumer-protocol member joins: the group becomes a consumer
    // group whose classic members keep their partitions at epoch =
    // generation; the newcomer gets nothing until they are released.
    let mut c = Client::new("c", &[TOPIC]);
    let r = c.beat(&mut w.cg, true);
    assert_eq!(r.error, ErrorCode::None, "{r:?}");
    assert_eq!(w.group_type(), "consumer");
    owners(&[&a, &b], &[&c]);
    let d = w.cg.describe();
    assert_eq!(d.group_epoch, generation + 1);
    assert_eq!(d.members.len(), 3);
    for m in d.members.iter().filter(|m| m.member_id != "c") {
        assert_eq!(m.member_epoch, generation);
        assert_eq!(m.state, MemberState::Stable);
        assert_eq!(m.assignment.values().map(BTreeSet::len).sum::<usize>(), 2);
    }
    assert!(c.owned.is_empty(), "c got partitions a or b still hold");

    // The classic members are told to rejoin and get their new
    // assignment through SyncGroup; c then gets what they released.
    settle(&mut w, &mut a, &mut b, &mut c);
    let who = owners(&[&a, &b], &[&c]);
    assert_eq!(
        who.len(),
        PARTITIONS as usize,
        "every partition owned: {who:?}"
    );
    for id in [&a.id, &b.id, &c.id] {
        assert!(who.values().any(|o| o == id), "{id} owns nothing: {who:?}");
    }
    // Classic members commit with generation = member epoch.
    let epoch = a.generation;
    assert_eq!(commit(&mut w, &a.id, epoch, 8), ErrorCode::None);
    assert_eq!(
        commit(&mut w, &a.id, epoch - 1, 8),
        ErrorCode::IllegalGeneration
    );

    // The consumer member leaves: the group is classic again and
    // rebalancing; a and b rejoin and split everything.
    let r = c.leave(&mut w.cg);
    assert_eq!(r.error, ErrorCode::None);
    assert_eq!(w.group_type(), "classic");
    let (state, group_gen) = w.cg.coord.group_state(GROUP).expect("group");
    assert_eq!(state, GroupState::PreparingRebalance);
    assert_eq!(
        group_gen, a.generation,
        "generation = the consumer group's epoch"
    );
    assert_eq!(a.heartbeat(&mut w), ErrorCode::RebalanceInProgress);
    a.join(&mut w);
    b.join(&mut w);
    let members = a.joined(&mut w).expect("both rejoined");
    b.joined(&mut w).expect("both rejoined");
    let (leader, follower) = if members.is_empty() {
        (&mut b, &mut a)
    } else {
        (&mut a, &mut b)
    };
    let members = if members.is_empty() {
        vec![leader.id.clone(), follower.id.clone()]
    } else {
        members
    };
    assert_eq!(leader.sync(&mut w, &members), ErrorCode::None);
    assert_eq!(follower.sync(&mut w, &[]), ErrorCode::None);
    let who = owners(&[&a, &b], &[]);
    assert_eq!(who.len(), PARTITIONS as usize);
}

fn commit(w: &mut World, member: &str, generation: i32, version: i16) -> ErrorCode {
    let req = weir_group::OffsetCommitRequest {
        group_id: GROUP.into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: None,
        retention_time_ms: None,
        partitions: vec![weir_group::CommitPartition {
            topic: TOPIC.into(),
            partition: 0,
            offset: 5,
            leader_epoch: -1,
            metadata: None,
        }],
        api_version: version,
    };
    let (resp, out) = w.cg.coord.commit_offsets(&req, w.cg.now);
    w.exec(out);
    resp[0].error
}

#[test]
fn the_last_classic_member_owns_everything_after_the_downgrade() {
    let mut w = World::new(MigrationPolicy::Bidirectional);
    let mut a = Classic::new();
    a.rejoin_and_sync(&mut w);
    let mut c = Client::new("c", &[TOPIC]);
    c.beat(&mut w.cg, true);
    owners(&[&a], &[&c]);
    assert_eq!(w.group_type(), "consumer");
    for _ in 0..20 {
        if a.heartbeat(&mut w) == ErrorCode::RebalanceInProgress {
            a.join(&mut w);
            a.joined(&mut w).expect("answered");
            let _ = a.sync(&mut w, &[]);
        }
        owners(&[&a], &[&c]);
        c.beat(&mut w.cg, true);
        owners(&[&a], &[&c]);
        let split = a.owned.len() + c.owned.values().map(BTreeSet::len).sum::<usize>();
        if !c.owned.is_empty() && split == PARTITIONS as usize {
            break;
        }
        w.advance(1_000);
    }
    assert_eq!(a.owned.len(), 2, "split in two: {:?}", a.owned);
    c.leave(&mut w.cg);
    assert_eq!(w.group_type(), "classic");
    assert_eq!(a.heartbeat(&mut w), ErrorCode::RebalanceInProgress);
    a.rejoin_and_sync(&mut w);
    assert_eq!(a.owned, (0..PARTITIONS).collect::<BTreeSet<_>>());
}

#[test]
fn classic_members_learn_their_assignment_only_through_sync_group() {
    let mut w = World::new(MigrationPolicy::Bidirectional);
    let (mut a, _b) = classic_pair(&mut w);
    let mut c = Client::new("c", &[TOPIC]);
    c.beat(&mut w.cg, true);
    // Before rejoining, a's sync at its old generation is told to rejoin.
    assert_eq!(a.sync(&mut w, &[]), ErrorCode::RebalanceInProgress);
    a.join(&mut w);
    a.joined(&mut w).expect("answered");
    let d = w.cg.describe();
    let target: BTreeSet<i32> = d
        .members
        .iter()
        .find(|m| m.member_id == a.id)
        .map(|m| m.assignment.values().flatten().copied().collect())
        .expect("a described");
    assert_eq!(a.sync(&mut w, &[]), ErrorCode::None);
    assert_eq!(a.owned, target);
    // A wrong generation or an unknown member is refused.
    a.generation -= 1;
    assert_eq!(a.heartbeat(&mut w), ErrorCode::IllegalGeneration);
    let stranger = HeartbeatRequest {
        group_id: GROUP.into(),
        generation_id: 1,
        member_id: "nobody".into(),
        group_instance_id: None,
    };
    assert_eq!(
        w.cg.coord.heartbeat(&stranger, w.cg.now),
        ErrorCode::UnknownMemberId
    );
    // A consumer-protocol member cannot speak the classic protocol.
    let as_classic = HeartbeatRequest {
        member_id: "c".into(),
        generation_id: c.epoch.expect("joined"),
        ..stranger
    };
    assert_eq!(
        w.cg.coord.heartbeat(&as_classic, w.cg.now),
        ErrorCode::UnknownMemberId
    );
}

#[test]
fn disabled_policy_keeps_a_classic_group_classic() {
    let mut w = World::new(MigrationPolicy::Disabled);
    let (_a, _b) = classic_pair(&mut w);
    let mut c = Client::new("c", &[TOPIC]);
    let r = c.beat(&mut w.cg, true);
    assert_eq!(r.error, ErrorCode::GroupIdNotFound);
    assert_eq!(
        r.error_message.as_deref(),
        Some("Group g is not a consumer group.")
    );
    assert_eq!(w.group_type(), "classic");
    assert_eq!(
        w.cg.coord.group_state(GROUP).map(|s| s.0),
        Some(GroupState::Stable)
    );
}

#[test]
fn upgrade_only_policy_keeps_the_consumer_group_when_the_consumer_member_leaves() {
    let mut w = World::new(MigrationPolicy::Upgrade);
    let (_a, _b) = classic_pair(&mut w);
    let mut c = Client::new("c", &[TOPIC]);
    assert_eq!(c.beat(&mut w.cg, true).error, ErrorCode::None);
    assert_eq!(w.group_type(), "consumer");
    c.leave(&mut w.cg);
    assert_eq!(w.group_type(), "consumer");
    assert_eq!(w.cg.describe().members.len(), 2);
}

#[test]
fn a_classic_group_of_another_protocol_type_is_not_upgraded() {
    let mut w = World::new(MigrationPolicy::Bidirectional);
    let mut a = Classic::new();
    let mut req = a.join_req();
    req.protocol_type = "connect".into();
    req.require_known_member_id = false;
    w.token += 1;
    let out = w.cg.coord.join_group(req, w.token, w.cg.now);
    w.exec(out);
    a.parked_join = Some(w.token);
    a.joined(&mut w).expect("joined");
    let r = Client::new("c", &[TOPIC]).beat(&mut w.cg, true);
    assert_eq!(r.error, ErrorCode::GroupIdNotFound);
    assert_eq!(w.group_type(), "classic");
}

#[test]
fn replay_restores_the_migrated_group_and_its_classic_members() {
    let mut w = World::new(MigrationPolicy::Bidirectional);
    let (mut a, mut b) = classic_pair(&mut w);
    let mut c = Client::new("c", &[TOPIC]);
    c.beat(&mut w.cg, true);
    settle(&mut w, &mut a, &mut b, &mut c);
    let before = w.cg.describe();
    let mut replayed = w.cg.replayed();
    let after = replayed
        .describe_consumer_groups(&[GROUP.to_string()])
        .remove(0);
    assert_eq!(after.members, before.members);
    assert_eq!(after.group_epoch, before.group_epoch);
    // The classic members are still classic: their heartbeats with
    // generation = member epoch are accepted.
    for m in [&a, &b] {
        let req = HeartbeatRequest {
            group_id: GROUP.into(),
            generation_id: m.generation,
            member_id: m.id.clone(),
            group_instance_id: None,
        };
        assert_eq!(replayed.heartbeat(&req, w.cg.now), ErrorCode::None);
    }

    // After the downgrade, the log holds a classic group with a and b.
    c.leave(&mut w.cg);
    let replayed = w.cg.replayed();
    let g = replayed.describe_groups(&[GROUP.to_string()]).remove(0);
    assert!(g.found);
    let mut ids: Vec<String> = g.members.into_iter().map(|m| m.member_id).collect();
    ids.sort();
    let mut want = vec![a.id.clone(), b.id.clone()];
    want.sort();
    assert_eq!(ids, want);
    assert_eq!(replayed.list_groups(&[], &[])[0].group_type, "classic");
}

#[test]
fn a_classic_member_leaving_bumps_the_epoch_and_its_partitions_move() {
    let mut w = World::new(MigrationPolicy::Bidirectional);
    let (mut a, mut b) = classic_pair(&mut w);
    let mut c = Client::new("c", &[TOPIC]);
    c.beat(&mut w.cg, true);
    settle(&mut w, &mut a, &mut b, &mut c);
    let epoch = w.cg.describe().group_epoch;
    let (resp, out) = w.cg.coord.leave_group(
        &LeaveRequest {
            group_id: GROUP.into(),
            members: vec![LeavingMember {
                member_id: b.id.clone(),
                group_instance_id: None,
            }],
        },
        w.cg.now,
    );
    w.exec(out);
    assert_eq!(resp.members[0].error, ErrorCode::None);
    b.owned.clear();
    let d = w.cg.describe();
    assert_eq!(d.group_epoch, epoch + 1);
    assert_eq!(d.members.len(), 2);
    for _ in 0..10 {
        if a.heartbeat(&mut w) == ErrorCode::RebalanceInProgress {
            a.join(&mut w);
            a.joined(&mut w).expect("answered");
            let _ = a.sync(&mut w, &[]);
        }
        c.beat(&mut w.cg, true);
        owners(&[&a], &[&c]);
        w.advance(1_000);
    }
    let who = owners(&[&a], &[&c]);
    assert_eq!(who.len(), PARTITIONS as usize, "{who:?}");
}

#[test]
fn the_consumer_member_expiring_downgrades_the_group() {
    let mut w = World::new(MigrationPolicy::Bidirectional);
    let (mut a, mut b) = classic_pair(&mut w);
    let mut c = Client::new("c", &[TOPIC]);
    c.beat(&mut w.cg, true);
    settle(&mut w, &mut a, &mut b, &mut c);
    // c goes silent; a and b keep heartbeating (their own 10 s sessions).
    let session = i64::from(crate::consumer_common::SESSION_MS);
    let mut waited = 0;
    while w.group_type() == "consumer" {
        assert!(waited <= session + 5_000, "c never expired");
        for m in [&a, &b] {
            assert_eq!(m.heartbeat(&mut w), ErrorCode::None);
        }
        w.advance(5_000);
        waited += 5_000;
    }
    assert!(waited >= session, "downgraded before c's session ended");
    assert_eq!(
        w.cg.coord.group_state(GROUP).map(|s| s.0),
        Some(GroupState::PreparingRebalance)
    );
    assert_eq!(a.heartbeat(&mut w), ErrorCode::RebalanceInProgress);
}

#[test]
fn a_failed_upgrade_write_leaves_the_classic_group_as_it_was() {
    let mut w = World::new(MigrationPolicy::Bidirectional);
    let (a, b) = classic_pair(&mut w);
    let join = crate::consumer_common::join_req("c", &[TOPIC]);
    let (resp, out) =
        w.cg.coord
            .consumer_group_heartbeat(&join, &w.cg.topics, w.cg.now);
    assert_eq!(resp.error, ErrorCode::None);
    for o in out {
        if let Output::Append { write, .. } = o {
            let done =
                w.cg.coord
                    .append_completed(write, AppendOutcome::Failed, w.cg.now);
            w.exec(done.outputs);
        }
    }
    assert_eq!(w.group_type(), "classic");
    assert_eq!(
        w.cg.coord.group_state(GROUP),
        Some((GroupState::Stable, a.generation))
    );
    for m in [&a, &b] {
        assert_eq!(m.heartbeat(&mut w), ErrorCode::None);
    }
}

#[test]
fn a_cooperative_classic_member_keeps_what_it_must_revoke_until_it_rejoins_without_it() {
    let mut w = World::new(MigrationPolicy::Bidirectional);
    let mut a = Classic::new();
    a.cooperative = true;
    a.rejoin_and_sync(&mut w);
    assert_eq!(a.owned.len(), PARTITIONS as usize);
    let mut c = Client::new("c", &[TOPIC]);
    c.beat(&mut w.cg, true);
    owners(&[&a], &[&c]);
    // a rejoins still owning everything: it stays in its epoch with the
    // partitions to revoke pending; c gets none of them.
    assert_eq!(a.heartbeat(&mut w), ErrorCode::RebalanceInProgress);
    let epoch = a.generation;
    a.join(&mut w);
    a.joined(&mut w).expect("answered");
    assert_eq!(a.generation, epoch, "still in its epoch");
    let d = w.cg.describe();
    let state = d
        .members
        .iter()
        .find(|m| m.member_id == a.id)
        .map(|m| m.state);
    assert_eq!(state, Some(MemberState::UnrevokedPartitions));
    c.beat(&mut w.cg, true);
    owners(&[&a], &[&c]);
    assert!(c.owned.is_empty(), "c got partitions a still owns");
    // SyncGroup gives a what it keeps; it revokes the rest and rejoins
    // (told so by its heartbeat), then c gets them.
    assert_eq!(a.sync(&mut w, &[]), ErrorCode::None);
    assert_eq!(a.assigned.len(), 2);
    c.beat(&mut w.cg, true);
    owners(&[&a], &[&c]);
    a.owned = a.assigned.clone();
    assert_eq!(a.heartbeat(&mut w), ErrorCode::RebalanceInProgress);
    a.join(&mut w);
    a.joined(&mut w).expect("answered");
    assert!(a.generation > epoch, "moved to the new epoch");
    assert_eq!(a.sync(&mut w, &[]), ErrorCode::None);
    c.beat(&mut w.cg, true);
    let who = owners(&[&a], &[&c]);
    assert_eq!(who.len(), PARTITIONS as usize, "{who:?}");
    assert_eq!(c.owned.values().map(BTreeSet::len).sum::<usize>(), 2);
}

/// The partitions a member is assigned now, by ConsumerGroupDescribe.
fn described(w: &World, member: &str) -> Option<(i32, BTreeSet<i32>)> {
    w.cg.describe()
        .members
        .into_iter()
        .find(|m| m.member_id == member)
        .map(|m| {
            (
                m.member_epoch,
                m.assignment.values().flatten().copied().collect(),
            )
        })
}

/// A consumer group of a static classic member a (`instance-a`), the
/// consumer-protocol member `consumer` (joined after a, so the group was
/// upgraded) and a classic member b, settled.
fn settled_with_static_member(consumer: &str) -> (World, Classic, Classic, Client) {
    let mut w = World::new(MigrationPolicy::Bidirectional);
    let mut a = Classic::new();
    a.instance = Some("instance-a".into());
    a.rejoin_and_sync(&mut w);
    let mut c = Client::new(consumer, &[TOPIC]);
    c.beat(&mut w.cg, true);
    let mut b = Classic::new();
    b.rejoin_and_sync(&mut w);
    settle(&mut w, &mut a, &mut b, &mut c);
    (w, a, b, c)
}

#[test]
fn a_restarted_static_classic_member_replaces_itself_in_a_consumer_group() {
    let (mut w, mut a, b, mut c) = settled_with_static_member("c");
    let epoch = w.cg.describe().group_epoch;
    let (a_epoch, a_parts) = described(&w, &a.id).expect("a is a member");
    assert!(!a_parts.is_empty(), "a owns partitions");
    let c_before = c.owned.clone();

    // a restarts: a new incarnation with the same instance id and no
    // member id. It takes over the old member: same epoch, same
    // partitions, no rebalance of the others.
    let old = std::mem::replace(&mut a, Classic::new());
    a.instance = old.instance.clone();
    a.join(&mut w);
    a.joined(&mut w).expect("answered at once");
    assert_ne!(a.id, old.id, "a new member id");
    assert_eq!(a.generation, a_epoch, "the old member's epoch");
    assert_eq!(a.sync(&mut w, &[]), ErrorCode::None);
    assert_eq!(a.owned, a_parts, "the old member's partitions");
    let d = w.cg.describe();
    assert_eq!(d.group_epoch, epoch, "no rebalance");
    assert_eq!(d.members.len(), 3);
    assert!(described(&w, &old.id).is_none(), "the old member is gone");
    assert_eq!(a.heartbeat(&mut w), ErrorCode::None);
    assert_eq!(b.heartbeat(&mut w), ErrorCode::None);
    c.beat(&mut w.cg, true);
    assert_eq!(c.owned, c_before, "c's assignment did not change");
    // The old incarnation is fenced; its partitions are a's now.
    assert_eq!(old.heartbeat(&mut w), ErrorCode::FencedInstanceId);
    owners(&[&a, &b], &[&c]);

    // A JoinGroup with the instance id and another member id is fenced;
    // an unknown instance id with a member id is unknown.
    let mut stranger = Classic::new();
    stranger.instance = a.instance.clone();
    stranger.id = "someone-else".into();
    stranger.join(&mut w);
    let token = stranger.parked_join.expect("answered");
    let Some(Response::Join(r)) = w.responses.remove(&token) else {
        panic!("join not answered");
    };
    assert_eq!(r.error, ErrorCode::FencedInstanceId);
    stranger.instance = Some("instance-unknown".into());
    stranger.join(&mut w);
    let token = stranger.parked_join.expect("answered");
    let Some(Response::Join(r)) = w.responses.remove(&token) else {
        panic!("join not answered");
    };
    assert_eq!(r.error, ErrorCode::UnknownMemberId);
    assert_eq!(w.cg.describe().members.len(), 3);

    // The replacement is in the log: a replayed coordinator knows a (not
    // the old member) with the same assignment.
    let replayed = w.cg.replayed();
    let after = replayed
        .describe_consumer_groups(&[GROUP.to_string()])
        .remove(0);
    assert_eq!(after.members, w.cg.describe().members);
}

#[test]
fn a_static_classic_member_replacing_the_last_consumer_member_downgrades_the_group() {
    let mut w = World::new(MigrationPolicy::Bidirectional);
    let (mut a, mut b) = classic_pair(&mut w);
    let mut c = Client::new("c", &[TOPIC]);
    c.instance = Some("instance-c".into());
    c.beat(&mut w.cg, true);
    settle(&mut w, &mut a, &mut b, &mut c);
    let epoch = w.cg.describe().group_epoch;
    let (_, c_parts) = described(&w, "c").expect("c is a member");
    assert!(!c_parts.is_empty());

    // c's application comes back speaking the classic protocol with the
    // same instance id: it takes c's place and the group, now all
    // classic, is a classic group again, Stable at generation = epoch.
    let mut c2 = Classic::new();
    c2.instance = c.instance.clone();
    c2.join(&mut w);
    c2.joined(&mut w).expect("answered at once");
    assert_eq!(w.group_type(), "classic");
    assert_eq!(
        w.cg.coord.group_state(GROUP),
        Some((GroupState::Stable, epoch))
    );
    assert_eq!(c2.generation, epoch);
    assert_eq!(c2.sync(&mut w, &[]), ErrorCode::None);
    c.owned.clear();
    assert_eq!(c2.owned, c_parts, "c's partitions");
    // No rebalance: a and b keep theirs.
    for m in [&a, &b] {
        assert_eq!(m.heartbeat(&mut w), ErrorCode::None);
    }
    let who = owners(&[&a, &b, &c2], &[]);
    assert_eq!(who.len(), PARTITIONS as usize, "{who:?}");
    let replayed = w.cg.replayed();
    assert_eq!(replayed.list_groups(&[], &[])[0].group_type, "classic");
}

#[test]
fn a_consumer_member_replaces_a_static_classic_member_of_its_instance_id() {
    let (mut w, mut a, b, other) = settled_with_static_member("other");
    let (a_epoch, a_parts) = described(&w, &a.id).expect("a is a member");
    let epoch = w.cg.describe().group_epoch;

    // a's application comes back on the consumer protocol: it replaces
    // the classic member at once (no -2 leave was sent) and owns what a
    // owned, at a's epoch.
    let mut c = Client::new("c", &[TOPIC]);
    c.instance = a.instance.clone();
    let r = c.beat(&mut w.cg, true);
    assert_eq!(r.error, ErrorCode::None, "{r:?}");
    assert_eq!(r.member_epoch, a_epoch);
    let t = topic_id(1);
    assert_eq!(c.owned.get(&t).cloned().unwrap_or_default(), a_parts);
    assert_eq!(w.cg.describe().group_epoch, epoch, "no rebalance");
    assert!(described(&w, &a.id).is_none(), "a is gone");
    assert_eq!(a.heartbeat(&mut w), ErrorCode::FencedInstanceId);
    a.owned.clear();
    owners(&[&a, &b], &[&c, &other]);
}

#[test]
fn a_failed_write_of_a_replacing_downgrade_leaves_the_consumer_group_as_it_was() {
    let mut w = World::new(MigrationPolicy::Bidirectional);
    let (mut a, mut b) = classic_pair(&mut w);
    let mut c = Client::new("c", &[TOPIC]);
    c.instance = Some("instance-c".into());
    c.beat(&mut w.cg, true);
    settle(&mut w, &mut a, &mut b, &mut c);
    let before = w.cg.describe();

    let mut c2 = Classic::new();
    c2.instance = c.instance.clone();
    w.token += 1;
    let token = w.token;
    let out = w.cg.coord.join_group(c2.join_req(), token, w.cg.now);
    // The append fails: the join is answered with the append's error (its
    // token is in the completion's failed tokens) and the group restored.
    let mut failed = false;
    for o in out {
        if let Output::Append { write, .. } = o {
            let done =
                w.cg.coord
                    .append_completed(write, AppendOutcome::Failed, w.cg.now);
            failed |= done.failed_tokens.contains(&token);
        }
    }
    assert!(failed, "the join is not answered with the append's error");
    assert_eq!(w.group_type(), "consumer");
    let after = w.cg.describe();
    assert_eq!(after.members, before.members, "c and the others as before");
    assert_eq!(after.group_epoch, before.group_epoch);
    assert_eq!(c.beat(&mut w.cg, true).error, ErrorCode::None);
    for m in [&a, &b] {
        assert_eq!(m.heartbeat(&mut w), ErrorCode::None);
    }
}
