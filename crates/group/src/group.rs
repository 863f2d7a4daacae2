//! One classic group: members, generation, rebalance bookkeeping and its
//! committed offsets. The transitions shared by all requests live here;
//! request handlers are in `membership.rs` and `offsets.rs`.
//!
//! Invariants of [`Group`]:
//! * `leader` is `Some` iff `members` is non-empty, and names a member.
//! * A member has at most one parked JoinGroup and one parked SyncGroup token;
//!   parked joins exist only in PreparingRebalance, parked syncs only in
//!   CompletingRebalance.
//! * `join_deadline_ms` is `Some` iff the state is PreparingRebalance.
//! * `generation` only ever increases (by one per completed join phase).
//! * `pending_txn` holds no empty map: a producer id is present iff it has
//!   transactional offsets of this group waiting for its marker.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::config::GroupConfig;
use crate::error::ErrorCode;
use crate::records::{
    self, GroupMetadataValue, MemberMetadata, encode_group_metadata_key,
    encode_group_metadata_value,
};
use crate::types::{
    CommittedOffset, GroupState, JoinMember, JoinResponse, OffsetsRecord, Output, Protocol,
    Response, SyncResponse,
};
use crate::writes::{Effect, Writes};

/// Everything a transition needs besides the group itself.
pub(crate) struct Ctx<'a> {
    pub now: i64,
    pub cfg: &'a GroupConfig,
    /// The `__consumer_offsets` partition of the group.
    pub partition: i32,
    pub out: &'a mut Vec<Output>,
    pub writes: &'a mut Writes,
}

impl Ctx<'_> {
    pub fn respond_join(&mut self, token: u64, response: JoinResponse) {
        self.out.push(Output::Respond {
            token,
            response: Response::Join(response),
        });
    }

    pub fn respond_sync(&mut self, token: u64, response: SyncResponse) {
        self.out.push(Output::Respond {
            token,
            response: Response::Sync(response),
        });
    }

    /// Emits an append whose outcome `append_completed` resolves with
    /// `effect`.
    pub fn append(&mut self, records: Vec<OffsetsRecord>, effect: Effect) {
        if !records.is_empty() {
            let write = self.writes.register(self.partition, effect);
            self.out.push(Output::Append {
                partition: self.partition,
                records,
                write,
                transaction: None,
            });
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocols: Vec<Protocol>,
    pub assignment: Bytes,
    pub awaiting_join: Option<u64>,
    pub awaiting_sync: Option<u64>,
    /// The member is removed when no heartbeat (or join/sync) arrives by
    /// then, unless it has a parked request (new members excepted).
    pub heartbeat_deadline_ms: i64,
    /// Joined for the first time and not yet through a completed join
    /// phase: its parked join does not keep it alive, because a client
    /// that disconnected while parked would otherwise stay forever.
    pub is_new: bool,
}

impl Member {
    /// Whether the session timer may remove this member now.
    pub fn expired(&self, now: i64) -> bool {
        let kept_alive =
            !self.is_new && (self.awaiting_join.is_some() || self.awaiting_sync.is_some());
        !kept_alive && self.heartbeat_deadline_ms <= now
    }

    /// Whether the session timer is running (for `next_deadline`).
    pub fn timer_running(&self) -> bool {
        self.is_new || (self.awaiting_join.is_none() && self.awaiting_sync.is_none())
    }
}

impl Member {
    pub fn metadata_for(&self, protocol: Option<&str>) -> Bytes {
        protocol
            .and_then(|name| self.protocols.iter().find(|p| p.name == name))
            .map(|p| p.metadata.clone())
            .unwrap_or_default()
    }

    fn supports(&self, name: &str) -> bool {
        self.protocols.iter().any(|p| p.name == name)
    }
}

/// An offset commit as it stands in `__consumer_offsets`: the value and
/// the log offset of its record. When a transaction commits, its offset
/// for a partition replaces the committed one only if its record is later
/// in the log (a plain commit written after the transactional one wins, as
/// in Kafka's `OffsetMetadataManager`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StoredOffset {
    pub value: CommittedOffset,
    pub record_offset: i64,
}

/// A `(topic, partition)` of the offsets a group commits.
pub(crate) type OffsetKey = (String, i32);

#[derive(Clone, Copy, Debug)]
pub(crate) struct InitialDelay {
    pub delay_ms: i64,
    pub remaining_ms: i64,
}

#[derive(Clone, Debug)]
pub(crate) struct Group {
    pub id: String,
    pub state: GroupState,
    /// When the group entered its current state (-1 unknown, after a load of
    /// an old record).
    pub state_timestamp_ms: i64,
    pub generation: i32,
    /// `None` for groups that only store offsets (no member ever joined).
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    /// In join order; the first member becomes leader when one is needed.
    pub members: Vec<Member>,
    /// Members that got MEMBER_ID_REQUIRED, with the deadline of their rejoin.
    pub pending_members: BTreeMap<String, i64>,
    /// Members of the current generation that have not sent SyncGroup yet.
    pub pending_sync: BTreeSet<String>,
    pub join_deadline_ms: Option<i64>,
    pub sync_deadline_ms: Option<i64>,
    pub initial_delay: Option<InitialDelay>,
    pub new_member_added: bool,
    /// Committed offsets: what OffsetFetch returns.
    pub offsets: BTreeMap<OffsetKey, StoredOffset>,
    /// Transactional offsets in the log whose producer's marker has not
    /// been seen yet, by producer id (Kafka's pending transactional offset
    /// commits). Invisible to OffsetFetch; a fetch that requires stable
    /// offsets gets UNSTABLE_OFFSET_COMMIT for their partitions.
    pub pending_txn: BTreeMap<i64, BTreeMap<OffsetKey, StoredOffset>>,
    /// Set when the group uses the consumer protocol (KIP-848): its members
    /// and assignments live there and the classic fields above stay empty
    /// (state Empty, no members); offsets are shared by both kinds.
    pub consumer: Option<Box<crate::consumer::ConsumerGroup>>,
}

/// The classic part of a group (everything but its id, offsets and
/// consumer part), set aside while a group converts between the classic
/// and the consumer protocol so a failed write can put it back.
#[derive(Clone, Debug)]
pub(crate) struct ClassicPart {
    state: GroupState,
    state_timestamp_ms: i64,
    generation: i32,
    protocol: Option<String>,
    leader: Option<String>,
    members: Vec<Member>,
    pending_members: BTreeMap<String, i64>,
    pending_sync: BTreeSet<String>,
    join_deadline_ms: Option<i64>,
    sync_deadline_ms: Option<i64>,
    initial_delay: Option<InitialDelay>,
    new_member_added: bool,
}

impl Group {
    /// A copy of the classic part.
    pub fn classic_part(&self) -> ClassicPart {
        ClassicPart {
            state: self.state,
            state_timestamp_ms: self.state_timestamp_ms,
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            members: self.members.clone(),
            pending_members: self.pending_members.clone(),
            pending_sync: self.pending_sync.clone(),
            join_deadline_ms: self.join_deadline_ms,
            sync_deadline_ms: self.sync_deadline_ms,
            initial_delay: self.initial_delay,
            new_member_added: self.new_member_added,
        }
    }

    /// Puts a classic part back (parked requests in it are not restored:
    /// they were answered when it was set aside).
    pub fn set_classic_part(&mut self, p: ClassicPart) {
        self.state = p.state;
        self.state_timestamp_ms = p.state_timestamp_ms;
        self.generation = p.generation;
        self.protocol = p.protocol;
        self.leader = p.leader;
        self.members = p.members;
        for m in &mut self.members {
            m.awaiting_join = None;
            m.awaiting_sync = None;
        }
        self.pending_members = p.pending_members;
        self.pending_sync = p.pending_sync;
        self.join_deadline_ms = p.join_deadline_ms;
        self.sync_deadline_ms = p.sync_deadline_ms;
        self.initial_delay = p.initial_delay;
        self.new_member_added = p.new_member_added;
    }

    /// Empties the classic part (state Empty, no members, generation 0).
    pub fn clear_classic_part(&mut self, now: i64) {
        let fresh = Group::new(self.id.clone(), now);
        self.set_classic_part(fresh.classic_part());
    }

    pub fn new(id: String, now: i64) -> Self {
        Self {
            id,
            state: GroupState::Empty,
            state_timestamp_ms: now,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: Vec::new(),
            pending_members: BTreeMap::new(),
            pending_sync: BTreeSet::new(),
            join_deadline_ms: None,
            sync_deadline_ms: None,
            initial_delay: None,
            new_member_added: false,
            offsets: BTreeMap::new(),
            pending_txn: BTreeMap::new(),
            consumer: None,
        }
    }

    /// A classic group without members (only offsets, or nobody joined
    /// since it became Empty): it may become a consumer group.
    pub fn is_empty_classic(&self) -> bool {
        self.consumer.is_none()
            && self.members.is_empty()
            && self.pending_members.is_empty()
            && matches!(self.state, GroupState::Empty | GroupState::Dead)
    }

    /// A consumer-protocol group with members.
    pub fn is_active_consumer(&self) -> bool {
        self.consumer
            .as_ref()
            .is_some_and(|c| !c.members.is_empty())
    }

    /// Whether a transaction of some producer has an offset of `key`
    /// waiting for its marker.
    pub fn has_pending_txn(&self, key: &OffsetKey) -> bool {
        self.pending_txn.values().any(|p| p.contains_key(key))
    }

    /// Whether the group holds no offsets at all, committed or pending.
    pub fn has_no_offsets(&self) -> bool {
        self.offsets.is_empty() && self.pending_txn.is_empty()
    }

    /// Removes the committed offset of `key` and every pending
    /// transactional one (a tombstone in the log covers both, as Kafka's
    /// replay does). Returns the producers left without pending offsets of
    /// this group.
    pub fn remove_offset(&mut self, key: &OffsetKey) -> Vec<i64> {
        self.offsets.remove(key);
        let mut emptied = Vec::new();
        self.pending_txn.retain(|&producer_id, pending| {
            pending.remove(key);
            if pending.is_empty() {
                emptied.push(producer_id);
            }
            !pending.is_empty()
        });
        emptied
    }

    /// Every offset key the group has, committed or pending.
    pub fn all_offset_keys(&self) -> BTreeSet<OffsetKey> {
        let mut keys: BTreeSet<OffsetKey> = self.offsets.keys().cloned().collect();
        for pending in self.pending_txn.values() {
            keys.extend(pending.keys().cloned());
        }
        keys
    }

    pub fn transition(&mut self, state: GroupState, now: i64) {
        self.state = state;
        self.state_timestamp_ms = now;
    }

    pub fn member(&self, id: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.member_id == id)
    }

    pub fn member_mut(&mut self, id: &str) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.member_id == id)
    }

    pub fn has_member(&self, id: &str) -> bool {
        self.member(id).is_some()
    }

    /// The member id currently registered for a static instance id.
    pub fn static_member(&self, instance_id: &str) -> Option<String> {
        self.members
            .iter()
            .find(|m| m.group_instance_id.as_deref() == Some(instance_id))
            .map(|m| m.member_id.clone())
    }

    pub fn is_leader(&self, id: &str) -> bool {
        self.leader.as_deref() == Some(id)
    }

    pub fn is_full(&self, cfg: &GroupConfig) -> bool {
        self.members.len() + self.pending_members.len() >= cfg.max_group_size
    }

    /// Kafka's member check: a static instance id must map to this member
    /// id (FENCED_INSTANCE_ID otherwise); a dynamic member must exist.
    pub fn validate_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), ErrorCode> {
        match instance_id {
            Some(instance) => match self.static_member(instance) {
                None => Err(ErrorCode::UnknownMemberId),
                Some(id) if id != member_id => Err(ErrorCode::FencedInstanceId),
                Some(_) => Ok(()),
            },
            None if self.has_member(member_id) => Ok(()),
            None => Err(ErrorCode::UnknownMemberId),
        }
    }

    fn max_rebalance_timeout_ms(&self) -> i64 {
        self.members
            .iter()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    /// Whether a member with these protocols may be in the group, given the
    /// other members (`except` is the joining member's own id).
    pub fn supports_protocols(
        &self,
        protocol_type: &str,
        protocols: &[Protocol],
        except: Option<&str>,
    ) -> bool {
        let mut others = self
            .members
            .iter()
            .filter(|m| Some(m.member_id.as_str()) != except)
            .peekable();
        if others.peek().is_none() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        let others: Vec<&Member> = others.collect();
        protocols
            .iter()
            .any(|p| others.iter().all(|m| m.supports(&p.name)))
    }

    /// Protocols every member supports, in the leader's preference order.
    pub fn candidate_protocols(&self) -> Vec<String> {
        let Some(first) = self
            .leader
            .as_deref()
            .and_then(|l| self.member(l))
            .or(self.members.first())
        else {
            return Vec::new();
        };
        first
            .protocols
            .iter()
            .filter(|p| self.members.iter().all(|m| m.supports(&p.name)))
            .map(|p| p.name.clone())
            .collect()
    }

    /// Kafka's protocol vote: each member votes for its most preferred
    /// candidate; most votes wins, ties go to the leader's preference.
    pub fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes = vec![0usize; candidates.len()];
        for m in &self.members {
            if let Some(i) = m
                .protocols
                .iter()
                .find_map(|p| candidates.iter().position(|c| *c == p.name))
            {
                votes[i] += 1;
            }
        }
        let mut best: Option<usize> = None;
        for (i, &v) in votes.iter().enumerate() {
            if best.is_none_or(|b| v > votes[b]) {
                best = Some(i);
            }
        }
        best.map(|i| candidates[i].clone())
    }

    /// The JoinGroup response of the current generation for `member_id`.
    pub fn current_join_response(&self, member_id: &str) -> JoinResponse {
        let is_leader = self.is_leader(member_id);
        JoinResponse {
            error: ErrorCode::None,
            generation_id: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            skip_assignment: false,
            member_id: member_id.to_string(),
            members: if is_leader {
                self.join_members()
            } else {
                Vec::new()
            },
        }
    }

    fn join_members(&self) -> Vec<JoinMember> {
        self.members
            .iter()
            .map(|m| JoinMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata_for(self.protocol.as_deref()),
            })
            .collect()
    }

    /// Starts a rebalance (Kafka's prepareRebalance).
    pub fn prepare_rebalance(&mut self, ctx: &mut Ctx<'_>) {
        if self.state == GroupState::CompletingRebalance {
            // Members waiting for their assignment must rejoin.
            for m in &mut self.members {
                m.assignment = Bytes::new();
                if let Some(token) = m.awaiting_sync.take() {
                    ctx.respond_sync(token, SyncResponse::error(ErrorCode::RebalanceInProgress));
                }
            }
        }
        self.pending_sync.clear();
        self.sync_deadline_ms = None;
        let rebalance_timeout = self.max_rebalance_timeout_ms();
        let delay = i64::from(ctx.cfg.initial_rebalance_delay_ms);
        if self.state == GroupState::Empty && delay > 0 {
            self.initial_delay = Some(InitialDelay {
                delay_ms: delay,
                remaining_ms: (rebalance_timeout - delay).max(0),
            });
            self.new_member_added = false;
            self.join_deadline_ms = Some(ctx.now.saturating_add(delay));
        } else {
            self.initial_delay = None;
            self.join_deadline_ms = Some(ctx.now.saturating_add(rebalance_timeout));
        }
        self.transition(GroupState::PreparingRebalance, ctx.now);
        self.maybe_complete_join(ctx);
    }

    fn all_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.iter().all(|m| m.awaiting_join.is_some())
    }

    /// Completes the join phase early when every member has rejoined
    /// (never during the initial delay, whose purpose is to wait).
    pub fn maybe_complete_join(&mut self, ctx: &mut Ctx<'_>) {
        if self.state == GroupState::PreparingRebalance
            && self.initial_delay.is_none()
            && self.all_joined()
        {
            self.complete_join(ctx);
        }
    }

    /// The join deadline `deadline` passed: extend the initial delay (from
    /// that deadline, as a timer would) if members kept arriving, otherwise
    /// complete the join with whoever rejoined.
    pub fn on_join_deadline(&mut self, deadline: i64, ctx: &mut Ctx<'_>) {
        if let Some(d) = self.initial_delay
            && self.new_member_added
            && d.remaining_ms > 0
        {
            self.new_member_added = false;
            let delay = d.delay_ms.min(d.remaining_ms);
            self.initial_delay = Some(InitialDelay {
                delay_ms: d.delay_ms,
                remaining_ms: (d.remaining_ms - d.delay_ms).max(0),
            });
            self.join_deadline_ms = Some(deadline.saturating_add(delay));
            return;
        }
        self.complete_join(ctx);
    }

    /// Ends the join phase: dynamic members that did not rejoin are removed
    /// (static ones stay, keeping their place for a quick restart), the
    /// generation advances, a protocol and a leader that rejoined are chosen
    /// and every parked JoinGroup is answered.
    pub fn complete_join(&mut self, ctx: &mut Ctx<'_>) {
        self.join_deadline_ms = None;
        self.initial_delay = None;
        self.new_member_added = false;
        let gone: Vec<String> = self
            .members
            .iter()
            .filter(|m| m.awaiting_join.is_none() && m.group_instance_id.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for id in gone {
            self.remove_member(&id, ErrorCode::UnknownMemberId, ctx);
        }
        if !self.members.is_empty() && !self.elect_joined_leader() {
            // Only static members that have not rejoined remain: wait
            // another rebalance timeout (their sessions may expire first).
            let timeout = self.max_rebalance_timeout_ms().max(1);
            self.join_deadline_ms = Some(ctx.now.saturating_add(timeout));
            return;
        }
        self.generation = self.generation.saturating_add(1);
        if self.members.is_empty() {
            self.protocol = None;
            self.leader = None;
            self.transition(GroupState::Empty, ctx.now);
            ctx.append(vec![self.metadata_record()], Effect::Nothing);
            return;
        }
        self.protocol = self.select_protocol();
        self.transition(GroupState::CompletingRebalance, ctx.now);
        for i in 0..self.members.len() {
            let m = &mut self.members[i];
            m.is_new = false;
            m.heartbeat_deadline_ms = ctx.now.saturating_add(i64::from(m.session_timeout_ms));
            let token = m.awaiting_join.take();
            let id = m.member_id.clone();
            if let Some(token) = token {
                let response = self.current_join_response(&id);
                ctx.respond_join(token, response);
            }
        }
        self.pending_sync = self.members.iter().map(|m| m.member_id.clone()).collect();
        let timeout = self.max_rebalance_timeout_ms();
        self.sync_deadline_ms = Some(ctx.now.saturating_add(timeout));
    }

    /// Keeps the leader if it rejoined, else picks a member that did.
    /// False when no member rejoined.
    fn elect_joined_leader(&mut self) -> bool {
        let leader_joined = self
            .leader
            .as_deref()
            .and_then(|l| self.member(l))
            .is_some_and(|m| m.awaiting_join.is_some());
        if leader_joined {
            return true;
        }
        match self.members.iter().find(|m| m.awaiting_join.is_some()) {
            Some(m) => {
                self.leader = Some(m.member_id.clone());
                true
            }
            None => false,
        }
    }

    /// Removes a member, answering its parked requests with `error`, and
    /// re-elects the leader if needed. Does not start a rebalance.
    pub fn remove_member(&mut self, id: &str, error: ErrorCode, ctx: &mut Ctx<'_>) {
        let Some(pos) = self.members.iter().position(|m| m.member_id == id) else {
            return;
        };
        let m = self.members.remove(pos);
        if let Some(token) = m.awaiting_join {
            ctx.respond_join(token, JoinResponse::error(error, id));
        }
        if let Some(token) = m.awaiting_sync {
            ctx.respond_sync(token, SyncResponse::error(error));
        }
        self.pending_sync.remove(id);
        if self.is_leader(id) {
            self.leader = self.members.first().map(|m| m.member_id.clone());
        }
    }

    /// Kafka's reaction to a member going away (leave, session expiry).
    pub fn after_member_removed(&mut self, ctx: &mut Ctx<'_>) {
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => self.prepare_rebalance(ctx),
            GroupState::PreparingRebalance => self.maybe_complete_join(ctx),
            GroupState::Empty
            | GroupState::Dead
            | GroupState::Assigning
            | GroupState::Reconciling => {}
        }
    }

    /// The GroupMetadata record describing the group now.
    pub fn metadata_record(&self) -> OffsetsRecord {
        let value = GroupMetadataValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            current_state_timestamp_ms: self.state_timestamp_ms,
            members: self
                .members
                .iter()
                .map(|m| MemberMetadata {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata_for(self.protocol.as_deref()),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        };
        OffsetsRecord {
            key: encode_group_metadata_key(&self.id),
            value: Some(encode_group_metadata_value(&value)),
        }
    }

    /// Tombstones for every offset (committed or pending in a transaction,
    /// as Kafka's `deleteAllOffsets`) and for the group itself.
    pub fn tombstones(&self) -> Vec<OffsetsRecord> {
        let mut out: Vec<OffsetsRecord> = self
            .all_offset_keys()
            .iter()
            .map(|(topic, partition)| OffsetsRecord {
                key: records::encode_offset_commit_key(&self.id, topic, *partition),
                value: None,
            })
            .collect();
        out.extend(self.metadata_tombstones());
        out
    }

    /// The tombstones that remove the group itself: its GroupMetadata
    /// record, or for a consumer group its KIP-848 records.
    pub fn metadata_tombstones(&self) -> Vec<OffsetsRecord> {
        match self.consumer.as_deref() {
            None => vec![OffsetsRecord {
                key: encode_group_metadata_key(&self.id),
                value: None,
            }],
            Some(cg) => {
                let mut out = Vec::new();
                for m in cg.members.keys() {
                    out.extend(crate::consumer::records::member_tombstones(&self.id, m));
                }
                out.extend(crate::consumer::records::group_tombstones(&self.id));
                out
            }
        }
    }

    /// Topics the members subscribe to, when the group uses the consumer
    /// protocol and every subscription parses; `None` otherwise.
    pub fn subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        let mut topics = BTreeSet::new();
        for m in &self.members {
            let meta = m.metadata_for(self.protocol.as_deref());
            topics.extend(parse_subscription_topics(&meta)?);
        }
        Some(topics)
    }
}

/// Topics of a ConsumerProtocolSubscription (version int16, then an array of
/// strings in every version 0-3). `None` if the bytes do not parse.
pub fn parse_subscription_topics(meta: &[u8]) -> Option<Vec<String>> {
    let mut pos = 2usize;
    let read = |pos: &mut usize, n: usize| -> Option<&[u8]> {
        let end = pos.checked_add(n)?;
        let out = meta.get(*pos..end)?;
        *pos = end;
        Some(out)
    };
    meta.get(..2)?;
    let count = i32::from_be_bytes(read(&mut pos, 4)?.try_into().ok()?);
    if count < 0 {
        return Some(Vec::new());
    }
    let mut topics = Vec::new();
    for _ in 0..count {
        let len = i16::from_be_bytes(read(&mut pos, 2)?.try_into().ok()?);
        let len = usize::try_from(len).ok()?;
        let raw = read(&mut pos, len)?;
        topics.push(std::str::from_utf8(raw).ok()?.to_string());
    }
    Some(topics)
}
