//! Harness for consumer-protocol (KIP-848) groups: a coordinator in
//! virtual time with one `__consumer_offsets` partition whose appended
//! records are kept, a topics image, and model clients that follow the
//! protocol (adopt the assignment of a response, revoke eagerly or late).
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use weir_group::{
    AppendOutcome, ConsumerGroupDescription, ConsumerHeartbeatRequest, ConsumerHeartbeatResponse,
    ErrorCode, GroupConfig, GroupCoordinator, LogPosition, Output, Partitions, TopicsImage,
};
use weir_protocol::Uuid;

pub const GROUP: &str = "g";
pub const SESSION_MS: i32 = 45_000;

pub fn topic_id(n: u8) -> Uuid {
    Uuid([n; 16])
}

pub fn config() -> GroupConfig {
    GroupConfig {
        offsets_topic_partitions: 1,
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    }
}

pub struct Cg {
    pub coord: GroupCoordinator,
    pub now: i64,
    pub topics: TopicsImage,
    /// Every appended record, in order.
    pub log: Vec<(Bytes, Option<Bytes>)>,
}

impl Default for Cg {
    fn default() -> Self {
        Self::new()
    }
}

impl Cg {
    pub fn new() -> Self {
        Self {
            coord: GroupCoordinator::new(config()),
            now: 1_000,
            topics: TopicsImage::new(),
            log: Vec::new(),
        }
    }

    pub fn topic(&mut self, name: &str, n: u8, partitions: i32) {
        self.topics.insert(name, topic_id(n), partitions, false);
    }

    /// Performs outputs: every append succeeds.
    pub fn run(&mut self, out: Vec<Output>) {
        for o in out {
            if let Output::Append { records, write, .. } = o {
                let base = self.log.len() as i64;
                for r in records {
                    self.log.push((r.key, r.value));
                }
                let done = self.coord.append_completed(
                    write,
                    AppendOutcome::Appended { base_offset: base },
                    self.now,
                );
                self.run(done.outputs);
            }
        }
    }

    pub fn heartbeat(&mut self, req: &ConsumerHeartbeatRequest) -> ConsumerHeartbeatResponse {
        let (resp, out) = self
            .coord
            .consumer_group_heartbeat(req, &self.topics, self.now);
        self.run(out);
        resp
    }

    pub fn advance(&mut self, ms: i64) {
        self.now += ms;
        let out = self.coord.tick(self.now);
        self.run(out);
    }

    pub fn describe(&self) -> ConsumerGroupDescription {
        self.coord
            .describe_consumer_groups(&[GROUP.to_string()])
            .remove(0)
    }

    /// A coordinator rebuilt from the log.
    pub fn replayed(&self) -> GroupCoordinator {
        let mut c = GroupCoordinator::new(config());
        let _ = c.begin_load(0);
        for (i, (k, v)) in self.log.iter().enumerate() {
            c.replay(LogPosition::plain(i as i64), k, v.as_deref())
                .expect("own records decode");
        }
        c.complete_load(0, self.now);
        c
    }
}

pub fn parts(list: &[(u8, &[i32])]) -> Partitions {
    list.iter()
        .map(|(t, ps)| (topic_id(*t), ps.iter().copied().collect()))
        .collect()
}

pub fn count(p: &Partitions) -> usize {
    p.values().map(BTreeSet::len).sum()
}

pub fn join_req(member: &str, topics: &[&str]) -> ConsumerHeartbeatRequest {
    ConsumerHeartbeatRequest {
        group_id: GROUP.to_string(),
        member_id: member.to_string(),
        member_epoch: 0,
        instance_id: None,
        rack_id: None,
        rebalance_timeout_ms: 300_000,
        subscribed_topic_names: Some(topics.iter().map(|t| t.to_string()).collect()),
        subscribed_topic_regex: None,
        server_assignor: None,
        owned: Some(Partitions::new()),
        client_id: "client".to_string(),
        client_host: "/127.0.0.1".to_string(),
        api_version: 1,
    }
}

pub fn beat_req(member: &str, epoch: i32, owned: Option<Partitions>) -> ConsumerHeartbeatRequest {
    ConsumerHeartbeatRequest {
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        subscribed_topic_names: None,
        owned,
        ..join_req(member, &[])
    }
}

/// A consumer following the protocol.
#[derive(Clone, Debug)]
pub struct Client {
    pub id: String,
    pub instance: Option<String>,
    pub topics: Vec<String>,
    pub regex: Option<String>,
    /// None until joined (and after leaving or being fenced).
    pub epoch: Option<i32>,
    /// Partitions it consumes now.
    pub owned: Partitions,
    /// The assignment of the last response that carried one.
    pub assigned: Partitions,
    pub last_ok_ms: i64,
}

impl Client {
    pub fn new(id: &str, topics: &[&str]) -> Self {
        Self {
            id: id.to_string(),
            instance: None,
            topics: topics.iter().map(|t| t.to_string()).collect(),
            regex: None,
            epoch: None,
            owned: Partitions::new(),
            assigned: Partitions::new(),
            last_ok_ms: 0,
        }
    }

    fn request(&self) -> ConsumerHeartbeatRequest {
        let mut r = match self.epoch {
            None => join_req(&self.id, &[]),
            Some(e) => beat_req(&self.id, e, Some(self.owned.clone())),
        };
        if self.epoch.is_none() {
            r.subscribed_topic_names = Some(self.topics.clone());
            r.subscribed_topic_regex = self.regex.clone();
        }
        r.instance_id = self.instance.clone();
        r
    }

    /// One heartbeat. With `revoke`, partitions no longer assigned are
    /// given up first; new ones are taken from the response.
    pub fn beat(&mut self, cg: &mut Cg, revoke: bool) -> ConsumerHeartbeatResponse {
        if revoke {
            self.revoke();
        }
        let r = cg.heartbeat(&self.request());
        match r.error {
            ErrorCode::None => {
                self.epoch = Some(r.member_epoch);
                self.last_ok_ms = cg.now;
                if let Some(a) = &r.assignment {
                    self.assigned = a.clone();
                    // Newly assigned partitions are taken at once; ones no
                    // longer assigned are kept until the client revokes.
                    for (t, ps) in a {
                        self.owned.entry(*t).or_default().extend(ps);
                    }
                }
            }
            ErrorCode::FencedMemberEpoch | ErrorCode::UnknownMemberId => self.lose_all(),
            _ => {}
        }
        r
    }

    pub fn revoke(&mut self) {
        let assigned = self.assigned.clone();
        self.owned.retain(|t, ps| {
            ps.retain(|p| assigned.get(t).is_some_and(|a| a.contains(p)));
            !ps.is_empty()
        });
    }

    /// Session lost or fenced: stop consuming everything, rejoin later.
    pub fn lose_all(&mut self) {
        self.epoch = None;
        self.owned.clear();
        self.assigned.clear();
    }

    pub fn leave(&mut self, cg: &mut Cg) -> ConsumerHeartbeatResponse {
        let mut r = beat_req(&self.id, -1, None);
        r.instance_id = self.instance.clone();
        let resp = cg.heartbeat(&r);
        self.lose_all();
        resp
    }
}

/// Panics if two clients consume one partition.
pub fn assert_disjoint(clients: &[Client]) {
    let mut seen: BTreeMap<(Uuid, i32), &str> = BTreeMap::new();
    for c in clients {
        for (t, ps) in &c.owned {
            for p in ps {
                if let Some(other) = seen.insert((*t, *p), &c.id) {
                    panic!("partition {t:?}-{p} consumed by {other} and {}", c.id);
                }
            }
        }
    }
}
