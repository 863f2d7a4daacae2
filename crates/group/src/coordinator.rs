//! The coordinator: all groups, partition ownership, timers and the
//! administrative requests (FindCoordinator, ListGroups, DescribeGroups,
//! DeleteGroups). Membership requests are in `membership.rs`, offsets in
//! `offsets.rs`, loading in `replay.rs`.

use std::collections::{BTreeMap, BTreeSet};

use crate::config::GroupConfig;
use crate::error::ErrorCode;
use crate::group::{Ctx, Group};
use crate::partition::partition_for;
use crate::types::{DescribedGroup, DescribedMember, GroupState, ListedGroup, Output};
use crate::writes::{Effect, Writes};

/// Ownership of one `__consumer_offsets` partition by this coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionStatus {
    /// Serving requests for its groups.
    Active,
    /// Being replayed; requests get COORDINATOR_LOAD_IN_PROGRESS.
    Loading,
    /// Not ours; requests get NOT_COORDINATOR.
    NotOwned,
}

/// The classic group coordinator of one broker.
///
/// A pure state machine: every call takes the current time and returns
/// results and [`Output`]s; it never blocks, reads clocks or does I/O.
/// Invariants: every group in `groups` belongs to a partition that is Active
/// or Loading; `txn_index` names exactly the groups with pending
/// transactional offsets, under their partition and each producer id
/// (checked by `check_txn_index` in debug builds).
#[derive(Debug)]
pub struct GroupCoordinator {
    pub(crate) config: GroupConfig,
    pub(crate) groups: BTreeMap<String, Group>,
    pub(crate) partitions: Vec<PartitionStatus>,
    member_id_counter: u64,
    pub(crate) next_offsets_check_ms: Option<i64>,
    /// Appends whose outcome the broker has not reported yet.
    pub(crate) writes: Writes,
    /// Groups with pending transactional offsets by (`__consumer_offsets`
    /// partition, producer id): the groups a marker of that producer on
    /// that partition completes.
    pub(crate) txn_index: BTreeMap<(i32, i64), BTreeSet<String>>,
    /// Times consumer-protocol target assignments (None: not timed).
    pub(crate) assignment_clock: Option<AssignmentClock>,
    /// Consumer-protocol group epoch bumps decided since start (each is
    /// a rebalance); a bump whose append then fails is still counted.
    pub(crate) consumer_epoch_bumps: u64,
    /// The broker's latest view of the topics (from the last
    /// ConsumerGroupHeartbeat or `set_topics`): resolves the topic names
    /// of classic members inside consumer groups.
    pub(crate) topics: crate::consumer::types::TopicsImage,
    /// Per-group session timeouts and heartbeat intervals of consumer
    /// groups (group configs), by group id; absent: the broker's.
    pub(crate) consumer_timeouts: BTreeMap<String, crate::consumer::types::ConsumerGroupTimeouts>,
}

/// A monotonic clock in nanoseconds, given by the broker so the coordinator
/// can report how long a server-side assignment took without reading the
/// wall clock itself (tests give none, or a virtual one).
pub type AssignmentClock = fn() -> u64;

impl GroupCoordinator {
    /// A coordinator owning every `__consumer_offsets` partition, with no
    /// groups (a single broker that has nothing to load). Use
    /// [`GroupCoordinator::begin_load`] to replay existing records first.
    pub fn new(config: GroupConfig) -> Self {
        let n = usize::try_from(config.offsets_topic_partitions.max(1)).unwrap_or(1);
        Self {
            config,
            groups: BTreeMap::new(),
            partitions: vec![PartitionStatus::Active; n],
            member_id_counter: 0,
            next_offsets_check_ms: None,
            writes: Writes::default(),
            txn_index: BTreeMap::new(),
            assignment_clock: None,
            consumer_epoch_bumps: 0,
            topics: Default::default(),
            consumer_timeouts: BTreeMap::new(),
        }
    }

    /// Times each consumer-protocol target assignment with `clock`
    /// (reported in [`crate::ConsumerHeartbeatResponse::assignment_nanos`]).
    pub fn set_assignment_clock(&mut self, clock: AssignmentClock) {
        self.assignment_clock = Some(clock);
    }

    /// Consumer-protocol group epoch bumps (rebalances) since start.
    pub fn consumer_epoch_bumps(&self) -> u64 {
        self.consumer_epoch_bumps
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// FindCoordinator: the `__consumer_offsets` partition whose leader
    /// coordinates `group_id` (the broker answers with that leader).
    pub fn partition_for(&self, group_id: &str) -> i32 {
        partition_for(group_id, self.config.offsets_topic_partitions)
    }

    /// FindCoordinator for a batch of keys (v4+).
    pub fn find_coordinators(&self, group_ids: &[String]) -> Vec<(String, i32)> {
        group_ids
            .iter()
            .map(|g| (g.clone(), self.partition_for(g)))
            .collect()
    }

    pub fn partition_status(&self, partition: i32) -> PartitionStatus {
        usize::try_from(partition)
            .ok()
            .and_then(|p| self.partitions.get(p).copied())
            .unwrap_or(PartitionStatus::NotOwned)
    }

    /// The partition of `group_id` if this coordinator serves it now.
    pub(crate) fn check_owner(&self, group_id: &str) -> Result<i32, ErrorCode> {
        let p = self.partition_for(group_id);
        match self.partition_status(p) {
            PartitionStatus::Active => Ok(p),
            PartitionStatus::Loading => Err(ErrorCode::CoordinatorLoadInProgress),
            PartitionStatus::NotOwned => Err(ErrorCode::NotCoordinator),
        }
    }

    /// A fresh member id `<prefix>-<uuid>`, as Kafka builds them (client id
    /// or group instance id as prefix). Ids are derived from
    /// `member_id_seed` and a counter, so they are unique per coordinator
    /// and reproducible in tests.
    pub(crate) fn new_member_id(&mut self, prefix: &str) -> String {
        self.member_id_counter += 1;
        let a = splitmix64(self.config.member_id_seed ^ self.member_id_counter.rotate_left(17));
        let b = splitmix64(a ^ self.member_id_counter);
        format!(
            "{prefix}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xffff,
            b >> 48,
            b & 0xffff_ffff_ffff
        )
    }

    /// Runs timers: session expiry, pending member expiry, join and sync
    /// deadlines, and (every `offsets_retention_check_interval_ms`) offset
    /// expiry. Call it at least at [`GroupCoordinator::next_deadline`].
    pub fn tick(&mut self, now_ms: i64) -> Vec<Output> {
        let mut out = Vec::new();
        let ids: Vec<String> = self.groups.keys().cloned().collect();
        for id in ids {
            let partition = self.partition_for(&id);
            if self.partition_status(partition) != PartitionStatus::Active {
                continue;
            }
            let Some(group) = self.groups.get_mut(&id) else {
                continue;
            };
            let mut ctx = Ctx {
                now: now_ms,
                cfg: &self.config,
                partition,
                out: &mut out,
                writes: &mut self.writes,
            };
            run_group_timers(group, &mut ctx);
        }
        out.extend(self.expire_consumer_members(now_ms));
        let due = self.next_offsets_check_ms.is_none_or(|t| now_ms >= t);
        if due {
            self.next_offsets_check_ms =
                Some(now_ms.saturating_add(self.config.offsets_retention_check_interval_ms));
            out.extend(self.expire_offsets(now_ms));
        }
        out
    }

    /// The earliest time at which [`GroupCoordinator::tick`] has work.
    pub fn next_deadline(&self) -> Option<i64> {
        let mut best = self.next_offsets_check_ms;
        let mut consider = |t: i64| best = Some(best.map_or(t, |b| b.min(t)));
        for g in self.groups.values() {
            g.join_deadline_ms.into_iter().for_each(&mut consider);
            g.sync_deadline_ms.into_iter().for_each(&mut consider);
            g.pending_members.values().copied().for_each(&mut consider);
            g.members
                .iter()
                .filter(|m| m.timer_running())
                .for_each(|m| consider(m.heartbeat_deadline_ms));
        }
        self.next_consumer_deadline().into_iter().for_each(consider);
        best
    }

    /// ListGroups. Empty filters match everything; state names and types
    /// ("classic", "consumer") are case-insensitive.
    pub fn list_groups(
        &self,
        states_filter: &[String],
        types_filter: &[String],
    ) -> Vec<ListedGroup> {
        let states: Vec<Option<GroupState>> =
            states_filter.iter().map(|s| GroupState::parse(s)).collect();
        self.groups
            .values()
            .filter(|g| self.partition_status(self.partition_for(&g.id)) == PartitionStatus::Active)
            .map(|g| match g.consumer.as_deref() {
                None => ListedGroup {
                    group_id: g.id.clone(),
                    protocol_type: g.protocol_type.clone().unwrap_or_default(),
                    state: g.state,
                    group_type: "classic",
                },
                Some(cg) => ListedGroup {
                    group_id: g.id.clone(),
                    protocol_type: "consumer".to_string(),
                    state: GroupState::parse(cg.state_name()).unwrap_or(GroupState::Empty),
                    group_type: "consumer",
                },
            })
            .filter(|l| states.is_empty() || states.contains(&Some(l.state)))
            .filter(|l| {
                types_filter.is_empty()
                    || types_filter
                        .iter()
                        .any(|t| t.eq_ignore_ascii_case(l.group_type))
            })
            .collect()
    }

    /// DescribeGroups.
    pub fn describe_groups(&self, group_ids: &[String]) -> Vec<DescribedGroup> {
        group_ids.iter().map(|id| self.describe_group(id)).collect()
    }

    fn describe_group(&self, id: &str) -> DescribedGroup {
        let mut d = DescribedGroup {
            group_id: id.to_string(),
            error: ErrorCode::None,
            found: false,
            state: GroupState::Dead,
            protocol_type: String::new(),
            protocol: String::new(),
            members: Vec::new(),
        };
        if let Err(e) = self.check_owner(id) {
            d.error = e;
            return d;
        }
        let Some(g) = self.groups.get(id) else {
            return d;
        };
        if g.consumer.is_some() {
            // Not a classic group: DescribeGroups v0-5 report it Dead
            // (ConsumerGroupDescribe describes it).
            return d;
        }
        let stable = g.state == GroupState::Stable;
        d.found = true;
        d.state = g.state;
        d.protocol_type = g.protocol_type.clone().unwrap_or_default();
        if stable {
            d.protocol = g.protocol.clone().unwrap_or_default();
        }
        d.members = g
            .members
            .iter()
            .map(|m| DescribedMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: if stable {
                    m.metadata_for(g.protocol.as_deref())
                } else {
                    Default::default()
                },
                assignment: if stable {
                    m.assignment.clone()
                } else {
                    Default::default()
                },
            })
            .collect();
        d
    }

    /// DeleteGroups: only Empty groups (with or without offsets) can be
    /// deleted; their offsets and metadata are tombstoned. Offsets pending
    /// in a transaction are tombstoned too (Kafka's `deleteAllOffsets`), so
    /// a later COMMIT marker of that transaction brings nothing back.
    pub fn delete_groups(
        &mut self,
        group_ids: &[String],
        _now_ms: i64,
    ) -> (Vec<(String, ErrorCode)>, Vec<Output>) {
        let mut results = Vec::with_capacity(group_ids.len());
        let mut out = Vec::new();
        for id in group_ids {
            let error = match self.check_owner(id) {
                Err(e) => e,
                Ok(partition) => match self.groups.get(id) {
                    None => ErrorCode::GroupIdNotFound,
                    Some(g) if g.state == GroupState::Dead => ErrorCode::GroupIdNotFound,
                    Some(g) if g.state != GroupState::Empty || g.is_active_consumer() => {
                        ErrorCode::NonEmptyGroup
                    }
                    Some(g) => {
                        // Removed once the tombstones are durable.
                        let effect = Effect::Tombstones {
                            group_id: id.clone(),
                            offsets: g.all_offset_keys().into_iter().collect(),
                            remove_group: true,
                        };
                        let write = self.writes.register(partition, effect);
                        out.push(Output::Append {
                            partition,
                            records: g.tombstones(),
                            write,
                            transaction: None,
                        });
                        ErrorCode::None
                    }
                },
            };
            results.push((id.clone(), error));
        }
        (results, out)
    }

    /// Group ids known to this coordinator (any state), for tests and tools.
    pub fn group_ids(&self) -> Vec<String> {
        self.groups.keys().cloned().collect()
    }

    /// State and generation of a group, if it exists.
    pub fn group_state(&self, group_id: &str) -> Option<(GroupState, i32)> {
        self.groups.get(group_id).map(|g| (g.state, g.generation))
    }
}

fn run_group_timers(group: &mut Group, ctx: &mut Ctx<'_>) {
    let now = ctx.now;
    // Members that never came back after MEMBER_ID_REQUIRED.
    let expired: Vec<String> = group
        .pending_members
        .iter()
        .filter(|&(_, &deadline)| deadline <= now)
        .map(|(id, _)| id.clone())
        .collect();
    if !expired.is_empty() {
        for id in &expired {
            group.pending_members.remove(id);
        }
        group.maybe_complete_join(ctx);
    }
    // Session expiry; members with a parked request are alive.
    let expired: Vec<String> = group
        .members
        .iter()
        .filter(|m| m.expired(now))
        .map(|m| m.member_id.clone())
        .collect();
    for id in expired {
        // The state can change while removing (a join may complete), so
        // re-check that the member is still there and still expired.
        let still = group.member(&id).is_some_and(|m| m.expired(now));
        if still {
            group.remove_member(&id, ErrorCode::UnknownMemberId, ctx);
            group.after_member_removed(ctx);
        }
    }
    // Each extension of the initial delay moves the deadline forward by a
    // positive amount, so this loop ends.
    while let Some(t) = group.join_deadline_ms
        && t <= now
    {
        group.on_join_deadline(t, ctx);
    }
    if group.sync_deadline_ms.is_some_and(|t| t <= now) {
        group.sync_deadline_ms = None;
        let laggards: Vec<String> = group.pending_sync.iter().cloned().collect();
        if !laggards.is_empty()
            && matches!(
                group.state,
                GroupState::CompletingRebalance | GroupState::Stable
            )
        {
            for id in laggards {
                group.remove_member(&id, ErrorCode::UnknownMemberId, ctx);
            }
            group.after_member_removed(ctx);
        }
    }
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}
