//! Test harness: drives a coordinator in virtual time and keeps every
//! response and every appended `__consumer_offsets` record.
#![allow(dead_code)]

use std::collections::HashMap;

use bytes::Bytes;
use weir_group::{
    AppendOutcome, GroupConfig, GroupCoordinator, JoinRequest, JoinResponse, LogPosition, Output,
    Protocol, Response, SyncRequest, SyncResponse, TxnCompletion,
};

/// What the harness appended to one `__consumer_offsets` partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Logged {
    /// One batch, its first record at `base_offset`; `transaction` is the
    /// producer id of a transactional batch.
    Batch {
        partition: i32,
        base_offset: i64,
        transaction: Option<i64>,
        records: Vec<(Bytes, Option<Bytes>)>,
    },
    /// A COMMIT (`committed`) or ABORT marker of `producer_id`.
    Marker {
        partition: i32,
        offset: i64,
        producer_id: i64,
        committed: bool,
    },
}

pub struct Harness {
    pub coord: GroupCoordinator,
    pub config: GroupConfig,
    pub now: i64,
    next_token: u64,
    pub joins: HashMap<u64, JoinResponse>,
    pub syncs: HashMap<u64, SyncResponse>,
    /// Every appended batch and marker in append order.
    pub batches: Vec<Logged>,
    /// The next offset of each `__consumer_offsets` partition.
    next_offset: HashMap<i32, i64>,
    /// When set, (generator state, n): about one append in n fails, chosen
    /// by a seeded generator (deterministic per seed).
    pub random_failures: Option<(u64, u64)>,
    /// Appends that failed so far.
    pub failed_appends: usize,
}

impl Harness {
    pub fn new(config: GroupConfig) -> Self {
        Self {
            coord: GroupCoordinator::new(config.clone()),
            config,
            now: 1_000_000,
            next_token: 0,
            joins: HashMap::new(),
            syncs: HashMap::new(),
            batches: Vec::new(),
            next_offset: HashMap::new(),
            random_failures: None,
            failed_appends: 0,
        }
    }

    /// Whether the next append fails under `random_failures`.
    fn inject_failure(&mut self) -> bool {
        let Some((state, n)) = &mut self.random_failures else {
            return false;
        };
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % (*n).max(1) == 0
    }

    /// Default config without the initial rebalance delay.
    pub fn no_delay() -> Self {
        Self::new(GroupConfig {
            initial_rebalance_delay_ms: 0,
            ..GroupConfig::default()
        })
    }

    /// Performs outputs as the broker does, every append succeeding.
    pub fn absorb(&mut self, out: Vec<Output>) {
        self.absorb_with(out, |_| true);
    }

    /// Performs outputs; an append to a partition for which `durable`
    /// returns false fails (nothing is logged), and the answers that
    /// depended on it become COORDINATOR_NOT_AVAILABLE errors, as the
    /// broker sends them.
    pub fn absorb_with(&mut self, out: Vec<Output>, durable: impl Fn(i32) -> bool + Copy) {
        let mut failed: Vec<u64> = Vec::new();
        let mut queue: std::collections::VecDeque<Output> = out.into();
        while let Some(o) = queue.pop_front() {
            let o = match o {
                Output::Respond { token, response } if failed.contains(&token) => {
                    let e = weir_group::ErrorCode::CoordinatorNotAvailable;
                    let response = match response {
                        Response::Join(j) => Response::Join(JoinResponse {
                            error: e,
                            generation_id: -1,
                            members: Vec::new(),
                            ..j
                        }),
                        Response::Sync(_) => Response::Sync(SyncResponse {
                            error: e,
                            protocol_type: None,
                            protocol_name: None,
                            assignment: Bytes::new(),
                        }),
                    };
                    Output::Respond { token, response }
                }
                o => o,
            };
            match o {
                Output::Respond {
                    token,
                    response: Response::Join(r),
                } => {
                    assert!(
                        self.joins.insert(token, r).is_none(),
                        "token {token} answered twice"
                    );
                }
                Output::Respond {
                    token,
                    response: Response::Sync(r),
                } => {
                    assert!(
                        self.syncs.insert(token, r).is_none(),
                        "token {token} answered twice"
                    );
                }
                Output::Append {
                    partition,
                    records,
                    write,
                    transaction,
                } => {
                    let ok = durable(partition) && !self.inject_failure();
                    let outcome = if ok {
                        let next = self.next_offset.entry(partition).or_insert(0);
                        let base_offset = *next;
                        *next += records.len() as i64;
                        self.batches.push(Logged::Batch {
                            partition,
                            base_offset,
                            transaction: transaction.map(|t| t.producer_id),
                            records: records.into_iter().map(|r| (r.key, r.value)).collect(),
                        });
                        AppendOutcome::Appended { base_offset }
                    } else {
                        self.failed_appends += 1;
                        AppendOutcome::Failed
                    };
                    let done = self.coord.append_completed(write, outcome, self.now);
                    failed.extend(done.failed_tokens);
                    for o in done.outputs.into_iter().rev() {
                        queue.push_front(o);
                    }
                }
            }
        }
    }

    /// Every appended record in append order: (partition, key, value).
    pub fn log(&self) -> Vec<(i32, Bytes, Option<Bytes>)> {
        self.batches
            .iter()
            .flat_map(|b| match b {
                Logged::Batch {
                    partition, records, ..
                } => records
                    .iter()
                    .map(|(k, v)| (*partition, k.clone(), v.clone()))
                    .collect(),
                Logged::Marker { .. } => Vec::new(),
            })
            .collect()
    }

    /// Appends `producer_id`'s COMMIT (`committed`) or ABORT marker to
    /// `partition` and reports it to the coordinator, as the broker's
    /// WriteTxnMarkers handler does.
    pub fn marker(&mut self, partition: i32, producer_id: i64, committed: bool) -> TxnCompletion {
        let next = self.next_offset.entry(partition).or_insert(0);
        let offset = *next;
        *next += 1;
        self.batches.push(Logged::Marker {
            partition,
            offset,
            producer_id,
            committed,
        });
        self.coord.complete_txn(partition, producer_id, committed)
    }

    pub fn token(&mut self) -> u64 {
        self.next_token += 1;
        self.next_token
    }

    pub fn join(&mut self, req: JoinRequest) -> u64 {
        let t = self.token();
        let out = self.coord.join_group(req, t, self.now);
        self.absorb(out);
        t
    }

    pub fn sync(&mut self, req: SyncRequest) -> u64 {
        let t = self.token();
        let out = self.coord.sync_group(req, t, self.now);
        self.absorb(out);
        t
    }

    pub fn advance(&mut self, ms: i64) {
        self.now += ms;
        let out = self.coord.tick(self.now);
        self.absorb(out);
    }

    pub fn join_resp(&self, token: u64) -> &JoinResponse {
        self.joins
            .get(&token)
            .unwrap_or_else(|| panic!("join {token} not answered"))
    }

    pub fn sync_resp(&self, token: u64) -> &SyncResponse {
        self.syncs
            .get(&token)
            .unwrap_or_else(|| panic!("sync {token} not answered"))
    }

    /// Dynamic member joining with the v4+ member-id-required round trip.
    /// Returns the token of the second join (answered later if a
    /// rebalance is pending) and the member id.
    pub fn join_new(
        &mut self,
        group: &str,
        client: &str,
        protocols: &[(&str, &[u8])],
    ) -> (u64, String) {
        let t = self.join(join_req(group, "", client, protocols));
        let r = self.join_resp(t).clone();
        assert_eq!(r.error, weir_group::ErrorCode::MemberIdRequired);
        assert!(r.member_id.starts_with(client), "{}", r.member_id);
        let t2 = self.join(join_req(group, &r.member_id, client, protocols));
        (t2, r.member_id)
    }

    /// Replays the log into a fresh coordinator.
    pub fn replayed(&self) -> GroupCoordinator {
        let mut c = GroupCoordinator::new(self.config.clone());
        for p in 0..self.config.offsets_topic_partitions {
            assert!(c.begin_load(p).is_empty());
        }
        for b in &self.batches {
            match b {
                Logged::Batch {
                    base_offset,
                    transaction,
                    records,
                    ..
                } => {
                    for ((k, v), offset) in records.iter().zip(*base_offset..) {
                        let at = LogPosition {
                            offset,
                            transaction: *transaction,
                        };
                        c.replay(at, k, v.as_deref()).expect("replay");
                    }
                }
                Logged::Marker {
                    partition,
                    producer_id,
                    committed,
                    ..
                } => {
                    c.complete_txn(*partition, *producer_id, *committed);
                }
            }
        }
        for p in 0..self.config.offsets_topic_partitions {
            c.complete_load(p, self.now);
        }
        c
    }
}

pub fn protocols(list: &[(&str, &[u8])]) -> Vec<Protocol> {
    list.iter()
        .map(|(n, m)| Protocol {
            name: n.to_string(),
            metadata: Bytes::copy_from_slice(m),
        })
        .collect()
}

pub fn join_req(group: &str, member: &str, client: &str, protos: &[(&str, &[u8])]) -> JoinRequest {
    JoinRequest {
        group_id: group.into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        member_id: member.into(),
        group_instance_id: None,
        protocol_type: "consumer".into(),
        protocols: protocols(protos),
        client_id: client.into(),
        client_host: "/127.0.0.1".into(),
        require_known_member_id: true,
        supports_skip_assignment: true,
    }
}

pub fn sync_req(
    group: &str,
    generation: i32,
    member: &str,
    assignments: &[(&str, &[u8])],
) -> SyncRequest {
    SyncRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol_name: None,
        assignments: assignments
            .iter()
            .map(|(m, a)| weir_group::Assignment {
                member_id: m.to_string(),
                assignment: Bytes::copy_from_slice(a),
            })
            .collect(),
    }
}

/// A ConsumerProtocolSubscription v0 with these topics (no user data).
pub fn subscription(topics: &[&str]) -> Vec<u8> {
    let mut v = vec![0, 0];
    v.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        v.extend_from_slice(&(t.len() as i16).to_be_bytes());
        v.extend_from_slice(t.as_bytes());
    }
    v.extend_from_slice(&(-1i32).to_be_bytes()); // null user data
    v
}
