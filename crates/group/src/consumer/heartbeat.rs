//! ConsumerGroupHeartbeat (join, heartbeat, leave), member expiry and the
//! consumer-group side of offset commits, as Kafka's
//! `GroupMetadataManager.consumerGroupHeartbeat`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::records::{self as rec, MemberMetadata};
use super::types::{
    ConsumerGroupTimeouts, ConsumerHeartbeatRequest, ConsumerHeartbeatResponse, Partitions,
    TopicsImage,
};
use super::{ConsumerGroup, ConsumerMember, LEAVE_EPOCH, LEAVE_STATIC_EPOCH, compile_regex};
use crate::config::GroupConfig;
use crate::consumer::reconcile::reconcile;
use crate::coordinator::{AssignmentClock, GroupCoordinator};
use crate::error::ErrorCode;
use crate::group::{ClassicPart, Group};
use crate::records::encode_group_metadata_key;
use crate::types::{OffsetsRecord, Output};
use crate::writes::Effect;

type Refusal = (ErrorCode, String);

fn refuse<T>(error: ErrorCode, message: impl Into<String>) -> Result<T, Refusal> {
    Err((error, message.into()))
}

/// Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`.
fn validate(req: &ConsumerHeartbeatRequest, cfg: &GroupConfig) -> Result<(), Refusal> {
    let blank = |s: &str| s.trim().is_empty();
    let invalid = ErrorCode::InvalidRequest;
    if (req.api_version >= 1 || req.member_epoch > 0 || req.member_epoch == LEAVE_EPOCH)
        && blank(&req.member_id)
    {
        return refuse(invalid, "MemberId can't be empty.");
    }
    if blank(&req.group_id) {
        return refuse(invalid, "GroupId can't be empty.");
    }
    if req.instance_id.as_deref().is_some_and(blank) {
        return refuse(invalid, "InstanceId can't be empty.");
    }
    if req.rack_id.as_deref().is_some_and(blank) {
        return refuse(invalid, "RackId can't be empty.");
    }
    if req.member_epoch == 0 {
        if req.rebalance_timeout_ms == -1 {
            return refuse(
                invalid,
                "RebalanceTimeoutMs must be provided in first request.",
            );
        }
        if req.owned.as_ref().is_none_or(|o| !o.is_empty()) {
            return refuse(invalid, "TopicPartitions must be empty when (re-)joining.");
        }
        if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
            return refuse(
                invalid,
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
            );
        }
    } else if req.member_epoch == LEAVE_STATIC_EPOCH {
        if req.instance_id.is_none() {
            return refuse(invalid, "InstanceId can't be null.");
        }
    } else if req.member_epoch < LEAVE_STATIC_EPOCH {
        return refuse(invalid, "MemberEpoch is invalid.");
    }
    if let Some(re) = req
        .subscribed_topic_regex
        .as_deref()
        .filter(|r| !r.is_empty())
        && let Err(e) = compile_regex(re)
    {
        return refuse(
            ErrorCode::InvalidRegularExpression,
            format!("SubscribedTopicRegex `{re}` is not a valid regular expression: {e}."),
        );
    }
    if let Some(a) = &req.server_assignor
        && !cfg.consumer_assignors.contains(a)
    {
        return refuse(
            ErrorCode::UnsupportedAssignor,
            format!(
                "ServerAssignor {a} is not supported. Supported assignors: {}.",
                cfg.consumer_assignors.join(", ")
            ),
        );
    }
    Ok(())
}

fn is_subset(owned: Option<&Partitions>, assigned: &Partitions) -> bool {
    let Some(owned) = owned else {
        return false;
    };
    owned
        .iter()
        .all(|(t, ps)| assigned.get(t).is_some_and(|a| ps.is_subset(a)))
}

/// Kafka's `throwIfConsumerGroupMemberEpochIsInvalid`: a newer epoch than
/// the member's is fenced; an older one only if it is the previous epoch
/// and the member owns nothing beyond its assignment (the response that
/// moved it on was lost).
fn check_epoch(m: &ConsumerMember, epoch: i32, owned: Option<&Partitions>) -> Result<(), Refusal> {
    let fenced = epoch > m.current.member_epoch
        || (epoch < m.current.member_epoch
            && (epoch != m.current.previous_member_epoch
                || !is_subset(owned, &m.current.assigned)));
    if fenced {
        return refuse(
            ErrorCode::FencedMemberEpoch,
            format!(
                "The consumer group member has a {} member epoch ({epoch}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.",
                if epoch > m.current.member_epoch {
                    "greater"
                } else {
                    "smaller"
                },
                m.current.member_epoch
            ),
        );
    }
    Ok(())
}

/// The coordinator's config with `group_id`'s own session timeout and
/// heartbeat interval, if it has any (Kafka's
/// `consumerGroupSessionTimeoutMs(groupId)`); a value that is not
/// positive is ignored.
pub(crate) fn group_config<'a>(
    cfg: &'a GroupConfig,
    timeouts: &BTreeMap<String, ConsumerGroupTimeouts>,
    group_id: &str,
) -> Cow<'a, GroupConfig> {
    let Some(t) = timeouts.get(group_id) else {
        return Cow::Borrowed(cfg);
    };
    let mut own = cfg.clone();
    if let Some(s) = t.session_timeout_ms.filter(|v| *v > 0) {
        own.consumer_session_timeout_ms = s;
    }
    if let Some(h) = t.heartbeat_interval_ms.filter(|v| *v > 0) {
        own.consumer_heartbeat_interval_ms = h;
    }
    Cow::Owned(own)
}

/// Who the heartbeat is from.
enum Who {
    Existing,
    New,
    /// A static member joining under a new id in place of the member of
    /// its instance id (which left with -2, or one of them uses the
    /// classic protocol).
    Replaces(String),
}

impl GroupCoordinator {
    /// Sets the group configs `consumer.session.timeout.ms` and
    /// `consumer.heartbeat.interval.ms` of `group_id` (the default clears
    /// them). They apply from each member's next heartbeat: its session
    /// deadline and the interval in the response, as in Kafka 4. The
    /// group need not exist.
    pub fn set_consumer_group_timeouts(&mut self, group_id: &str, timeouts: ConsumerGroupTimeouts) {
        if timeouts == ConsumerGroupTimeouts::default() {
            self.consumer_timeouts.remove(group_id);
        } else {
            self.consumer_timeouts
                .insert(group_id.to_string(), timeouts);
        }
    }

    /// ConsumerGroupHeartbeat: joins (epoch 0), heartbeats, or leaves (-1,
    /// static -2) a consumer-protocol group. `topics` is the broker's view
    /// of the topics (for subscriptions and regexes). Returns the response
    /// and the records to append; the broker answers with the append's
    /// error if it fails (the group is then as before the heartbeat).
    pub fn consumer_group_heartbeat(
        &mut self,
        req: &ConsumerHeartbeatRequest,
        topics: &TopicsImage,
        now_ms: i64,
    ) -> (ConsumerHeartbeatResponse, Vec<Output>) {
        if let Err((e, m)) = validate(req, &self.config) {
            return (ConsumerHeartbeatResponse::error(e, m), Vec::new());
        }
        let partition = match self.check_owner(&req.group_id) {
            Ok(p) => p,
            Err(e) => return (ConsumerHeartbeatResponse::error(e, e.message()), Vec::new()),
        };
        let generated = (req.member_id.is_empty() && req.member_epoch == 0)
            .then(|| self.new_member_id("").trim_start_matches('-').to_string());
        let mut records = Vec::new();
        let clock = self.assignment_clock;
        let group_id = req.group_id.clone();
        // The state before, restored if the append fails.
        if self.topics != *topics {
            self.topics = topics.clone();
        }
        let joining = req.member_epoch == 0;
        let cfg = group_config(&self.config, &self.consumer_timeouts, &group_id);
        // A classic group with members that may be upgraded: its parked
        // joins and syncs are told to rejoin first (Kafka's
        // `convertToConsumerGroup`), so the snapshot below holds none.
        let mut answered = Vec::new();
        let upgrade = joining && self.upgrade_allowed(&group_id);
        if upgrade && let Some(g) = self.groups.get_mut(&group_id) {
            answered = super::migration::answer_parked(g);
        }
        if req.member_epoch == LEAVE_EPOCH && self.downgrade_allowed(&group_id, req) {
            return self.downgrade(partition, &group_id, &req.member_id, now_ms);
        }
        let before = self.groups.get(&group_id).map(Snapshot::of);
        let result = match self.groups.get_mut(&group_id) {
            None if !joining => refuse(
                ErrorCode::GroupIdNotFound,
                format!("Consumer group {group_id} not found."),
            ),
            None => {
                let mut g = Group::new(group_id.clone(), now_ms);
                g.consumer = Some(Box::default());
                g.protocol_type = Some("consumer".to_string());
                self.groups.insert(group_id.clone(), g);
                Ok(())
            }
            Some(g) if g.consumer.is_none() => {
                if upgrade {
                    super::migration::convert_to_consumer(g, topics, now_ms, &mut records);
                    Ok(())
                } else if joining && g.is_empty_classic() {
                    // An empty classic group becomes a consumer group (its
                    // offsets stay); its metadata record is tombstoned.
                    if g.protocol_type.is_some() {
                        records.push(OffsetsRecord {
                            key: encode_group_metadata_key(&group_id),
                            value: None,
                        });
                    }
                    g.consumer = Some(Box::default());
                    g.protocol_type = Some("consumer".to_string());
                    Ok(())
                } else {
                    refuse(
                        ErrorCode::GroupIdNotFound,
                        format!("Group {group_id} is not a consumer group."),
                    )
                }
            }
            Some(_) => Ok(()),
        };
        let result = result.and_then(|()| {
            let g = self
                .groups
                .get_mut(&group_id)
                .and_then(|g| g.consumer.as_deref_mut());
            let Some(cg) = g else {
                return refuse(ErrorCode::UnknownServerError, "group vanished");
            };
            let member_id = generated.unwrap_or_else(|| req.member_id.clone());
            let r = if req.member_epoch == LEAVE_EPOCH || req.member_epoch == LEAVE_STATIC_EPOCH {
                leave(cg, &group_id, req, &mut records)
            } else {
                heartbeat(
                    cg,
                    &group_id,
                    req,
                    member_id,
                    topics,
                    &cfg,
                    clock,
                    now_ms,
                    &mut records,
                    None,
                )
            };
            cg.check();
            r
        });
        match result {
            Err((e, message)) => {
                self.restore(&group_id, before);
                (ConsumerHeartbeatResponse::error(e, message), answered)
            }
            Ok(response) => {
                answered.extend(self.consumer_write(partition, &group_id, before, records));
                (response, answered)
            }
        }
    }

    /// Puts a group back as it was before a refused or failed change.
    pub(crate) fn restore(&mut self, group_id: &str, before: Option<Snapshot>) {
        match before {
            None => {
                if self.groups.get(group_id).is_some_and(Group::has_no_offsets) {
                    self.groups.remove(group_id);
                } else if let Some(g) = self.groups.get_mut(group_id) {
                    g.consumer = None;
                    g.protocol_type = None;
                }
            }
            Some(s) => {
                if let Some(g) = self.groups.get_mut(group_id) {
                    g.consumer = s.consumer;
                    g.protocol_type = s.protocol_type;
                    g.set_classic_part(*s.classic);
                }
            }
        }
    }

    /// The append of a consumer group's records, undone (the group
    /// restored to `before`) if it fails.
    pub(crate) fn consumer_write(
        &mut self,
        partition: i32,
        group_id: &str,
        before: Option<Snapshot>,
        records: Vec<OffsetsRecord>,
    ) -> Vec<Output> {
        self.consumer_write_answering(partition, group_id, before, records, Vec::new())
    }

    /// As [`GroupCoordinator::consumer_write`]; the parked requests of
    /// `tokens`, answered in the same outputs, get the append's error
    /// instead if it fails.
    pub(crate) fn consumer_write_answering(
        &mut self,
        partition: i32,
        group_id: &str,
        before: Option<Snapshot>,
        records: Vec<OffsetsRecord>,
        tokens: Vec<u64>,
    ) -> Vec<Output> {
        if records.is_empty() {
            return Vec::new();
        }
        let epoch_of = |cg: Option<&ConsumerGroup>| cg.map_or(0, |cg| cg.epoch);
        let was = epoch_of(before.as_ref().and_then(|b| b.consumer.as_deref()));
        let now = epoch_of(
            self.groups
                .get(group_id)
                .and_then(|g| g.consumer.as_deref()),
        );
        self.consumer_epoch_bumps = self
            .consumer_epoch_bumps
            .saturating_add(u64::try_from(now.saturating_sub(was)).unwrap_or(0));
        let effect = Effect::ConsumerGroup {
            group_id: group_id.to_string(),
            before: before.map(Box::new),
            tokens,
        };
        let write = self.writes.register(partition, effect);
        vec![Output::Append {
            partition,
            records,
            write,
            transaction: None,
        }]
    }

    /// Fences consumer-protocol members whose session or rebalance timeout
    /// passed (called from `tick`).
    pub(crate) fn expire_consumer_members(&mut self, now_ms: i64) -> Vec<Output> {
        let mut out = Vec::new();
        let ids: Vec<String> = self
            .groups
            .iter()
            .filter(|(_, g)| g.consumer.is_some())
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            let Ok(partition) = self.check_owner(&id) else {
                continue;
            };
            let Some(g) = self.groups.get_mut(&id) else {
                continue;
            };
            let before = Snapshot::of(g);
            let Some(cg) = g.consumer.as_deref_mut() else {
                continue;
            };
            let expired: Vec<String> = cg
                .members
                .values()
                .filter(|m| {
                    m.session_deadline_ms <= now_ms
                        || m.rebalance_deadline_ms.is_some_and(|t| t <= now_ms)
                        || m.classic_deadline_ms.is_some_and(|t| t <= now_ms)
                })
                .map(|m| m.id.clone())
                .collect();
            if expired.is_empty() {
                continue;
            }
            // The last consumer-protocol member expiring among classic
            // ones downgrades the group (Kafka's
            // `validateOnlineDowngradeWithFencedMember`).
            if let Some(last) = expired
                .iter()
                .find(|m| super::migration::may_downgrade(cg, m, &self.config))
                .cloned()
            {
                let (_, o) = self.downgrade(partition, &id, &last, now_ms);
                out.extend(o);
                continue;
            }
            let mut records = Vec::new();
            for m in &expired {
                fence(cg, &id, m, &mut records);
            }
            cg.check();
            out.extend(self.consumer_write(partition, &id, Some(before), records));
        }
        out
    }

    /// The earliest session or rebalance deadline of a consumer member.
    pub(crate) fn next_consumer_deadline(&self) -> Option<i64> {
        self.groups
            .values()
            .filter_map(|g| g.consumer.as_deref())
            .flat_map(|cg| cg.members.values())
            .flat_map(|m| {
                [
                    Some(m.session_deadline_ms),
                    m.rebalance_deadline_ms,
                    m.classic_deadline_ms,
                ]
            })
            .flatten()
            .filter(|&t| t < i64::MAX)
            .min()
    }

    /// OffsetFetch v9+ from a consumer-protocol member (Kafka's
    /// `ConsumerGroup.validateOffsetFetch`): NONE when it may fetch.
    /// `member_id` None with a negative epoch is an admin client.
    pub fn check_offset_fetch_member(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> ErrorCode {
        let Some(cg) = self
            .groups
            .get(group_id)
            .and_then(|g| g.consumer.as_deref())
        else {
            return ErrorCode::None;
        };
        let member_id = member_id.filter(|m| !m.is_empty());
        if member_id.is_none() && member_epoch < 0 {
            return ErrorCode::None;
        }
        match member_id.and_then(|m| cg.members.get(m)) {
            None => ErrorCode::UnknownMemberId,
            Some(m) if m.current.member_epoch != member_epoch => stale_epoch(m),
            Some(_) => ErrorCode::None,
        }
    }
}

/// The state of a group that a failed write restores.
#[derive(Clone, Debug)]
pub(crate) struct Snapshot {
    pub consumer: Option<Box<ConsumerGroup>>,
    pub protocol_type: Option<String>,
    /// The classic part (empty for a consumer group): what a failed
    /// upgrade puts back and a failed downgrade empties again.
    pub classic: Box<ClassicPart>,
}

impl Snapshot {
    pub fn of(g: &Group) -> Self {
        Self {
            consumer: g.consumer.clone(),
            protocol_type: g.protocol_type.clone(),
            classic: Box::new(g.classic_part()),
        }
    }
}

/// A wrong epoch: STALE_MEMBER_EPOCH, or ILLEGAL_GENERATION for a member
/// of the classic protocol (its generation is its member epoch).
fn stale_epoch(m: &ConsumerMember) -> ErrorCode {
    if m.is_classic() {
        ErrorCode::IllegalGeneration
    } else {
        ErrorCode::StaleMemberEpoch
    }
}

/// Kafka's `ConsumerGroup.validateOffsetCommit` for a group of the
/// consumer protocol: a commit without a member (epoch < 0) only into an
/// empty group; otherwise a known member with its current epoch, and for
/// a member of the consumer protocol an OffsetCommit
/// (`offset_commit_version`, None for TxnOffsetCommit) of v9 or later.
pub(crate) fn validate_commit(
    cg: &ConsumerGroup,
    member_id: &str,
    member_epoch: i32,
    offset_commit_version: Option<i16>,
) -> Result<(), ErrorCode> {
    if member_epoch < 0 && cg.members.is_empty() {
        return Ok(());
    }
    match cg.members.get(member_id) {
        None => Err(ErrorCode::UnknownMemberId),
        Some(m) if !m.is_classic() && offset_commit_version.is_some_and(|v| v < 9) => {
            Err(ErrorCode::UnsupportedVersion)
        }
        Some(m) if m.current.member_epoch != member_epoch => Err(stale_epoch(m)),
        Some(_) => Ok(()),
    }
}

/// Removes a member for good (leave with -1, expiry) and bumps the group
/// epoch so the others are reassigned.
pub(crate) fn fence(
    cg: &mut ConsumerGroup,
    group_id: &str,
    member: &str,
    records: &mut Vec<OffsetsRecord>,
) {
    records.extend(rec::member_tombstones(group_id, member));
    cg.remove_member(member);
    let subscribed = cg.still_subscribed();
    if subscribed != cg.subscribed {
        cg.subscribed = subscribed;
        let topics: Vec<_> = cg.subscribed.values().cloned().collect();
        records.push(rec::partition_metadata_record(group_id, &topics));
    }
    cg.epoch = cg.epoch.saturating_add(1);
    records.push(rec::epoch_record(group_id, cg.epoch));
}

fn leave(
    cg: &mut ConsumerGroup,
    group_id: &str,
    req: &ConsumerHeartbeatRequest,
    records: &mut Vec<OffsetsRecord>,
) -> Result<ConsumerHeartbeatResponse, Refusal> {
    let member_id = match &req.instance_id {
        Some(instance) => {
            let Some(id) = cg.static_member(instance).cloned() else {
                return refuse(
                    ErrorCode::UnknownMemberId,
                    format!("Instance id {instance} is unknown."),
                );
            };
            if id != req.member_id {
                return refuse(
                    ErrorCode::FencedInstanceId,
                    format!(
                        "Static member {} with instance id {instance} was fenced by member {id}.",
                        req.member_id
                    ),
                );
            }
            id
        }
        None if cg.members.contains_key(&req.member_id) => req.member_id.clone(),
        None => {
            return refuse(
                ErrorCode::UnknownMemberId,
                format!(
                    "Member {} is not a member of group {group_id}.",
                    req.member_id
                ),
            );
        }
    };
    if req.member_epoch == LEAVE_STATIC_EPOCH {
        // Keeps its partitions (nobody else gets them) until it comes back
        // under a new member id or its session expires.
        let mut next = cg.members[&member_id].current.clone();
        next.member_epoch = LEAVE_STATIC_EPOCH;
        next.pending_revocation.clear();
        if let Some(m) = cg.members.get_mut(&member_id) {
            m.rebalance_deadline_ms = None;
        }
        records.push(rec::current_assignment_record(group_id, &member_id, &next));
        cg.set_current(&member_id, next, true);
    } else {
        fence(cg, group_id, &member_id, records);
    }
    Ok(ConsumerHeartbeatResponse {
        error: ErrorCode::None,
        error_message: None,
        member_id: Some(member_id),
        member_epoch: req.member_epoch,
        heartbeat_interval_ms: 0,
        assignment: None,
        assignment_nanos: None,
    })
}

/// Finds the member a (non-leaving) heartbeat is from.
/// `classic`: the request is the JoinGroup of a member of the classic
/// protocol.
fn resolve(
    cg: &ConsumerGroup,
    req: &ConsumerHeartbeatRequest,
    member_id: &str,
    cfg: &GroupConfig,
    classic: bool,
) -> Result<Who, Refusal> {
    let joining = req.member_epoch == 0;
    if !cg.members.contains_key(member_id) && cg.members.len() >= cfg.consumer_max_size {
        return refuse(
            ErrorCode::GroupMaxSizeReached,
            format!(
                "The consumer group has reached its maximum capacity of {} members.",
                cfg.consumer_max_size
            ),
        );
    }
    let existing = |id: &str| -> Result<Who, Refusal> {
        let m = &cg.members[id];
        check_epoch(m, req.member_epoch, req.owned.as_ref())?;
        Ok(Who::Existing)
    };
    match &req.instance_id {
        Some(instance) => match cg.static_member(instance) {
            None if joining => match cg.members.contains_key(member_id) {
                true => existing(member_id),
                false => Ok(Who::New),
            },
            None => refuse(
                ErrorCode::UnknownMemberId,
                format!("Instance id {instance} is unknown."),
            ),
            Some(old) if joining && old != member_id => {
                // Kafka's `getOrMaybeSubscribeStaticConsumerGroupMember`:
                // between two members of the consumer protocol the old one
                // must have left with -2 first; a member of the classic
                // protocol on either side replaces it at once (a classic
                // client rejoining after a restart never said it left).
                let old_classic = cg.members[old].is_classic();
                if !classic
                    && !old_classic
                    && cg.members[old].current.member_epoch != LEAVE_STATIC_EPOCH
                {
                    return refuse(
                        ErrorCode::UnreleasedInstanceId,
                        format!(
                            "Static member {member_id} with instance id {instance} cannot join the group because the instance id is owned by {old} member."
                        ),
                    );
                }
                Ok(Who::Replaces(old.clone()))
            }
            Some(old) if old != member_id => refuse(
                ErrorCode::FencedInstanceId,
                format!(
                    "Static member {member_id} with instance id {instance} was fenced by member {old}."
                ),
            ),
            Some(old) => existing(old),
        },
        None if cg.members.contains_key(member_id) => existing(member_id),
        None if joining => Ok(Who::New),
        None => refuse(
            ErrorCode::UnknownMemberId,
            format!("Member {member_id} is not a member of the group."),
        ),
    }
}

/// A ConsumerGroupHeartbeat that joins or heartbeats, or (with `classic`
/// set) the JoinGroup of a classic member, which then carries its
/// subscription and owned partitions in `req`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn heartbeat(
    cg: &mut ConsumerGroup,
    group_id: &str,
    req: &ConsumerHeartbeatRequest,
    member_id: String,
    topics: &TopicsImage,
    cfg: &GroupConfig,
    clock: Option<AssignmentClock>,
    now: i64,
    records: &mut Vec<OffsetsRecord>,
    classic: Option<&super::records::ClassicMeta>,
) -> Result<ConsumerHeartbeatResponse, Refusal> {
    let who = resolve(cg, req, &member_id, cfg, classic.is_some())?;
    // 1. The member, created or updated; a static member coming back takes
    // over its previous incarnation's assignment with epoch 0.
    let (old, new_member) = match &who {
        Who::Existing => (cg.members[&member_id].clone(), false),
        Who::New => (ConsumerMember::new(member_id.clone()), true),
        Who::Replaces(old_id) => {
            let old = cg.members[old_id].clone();
            let target = cg.target.get(old_id).cloned().unwrap_or_default();
            records.extend(rec::member_tombstones(group_id, old_id));
            cg.remove_member(old_id);
            let mut m = old.clone();
            m.id = member_id.clone();
            m.current.member_epoch = 0;
            m.current.previous_member_epoch = 0;
            m.rebalance_deadline_ms = None;
            m.classic_deadline_ms = None;
            records.push(rec::member_metadata_record(group_id, &member_id, &m.meta));
            records.push(rec::target_member_record(group_id, &member_id, &target));
            records.push(rec::current_assignment_record(
                group_id, &member_id, &m.current,
            ));
            let current = std::mem::take(&mut m.current);
            cg.members.insert(member_id.clone(), m.clone());
            cg.set_current(&member_id, current, true);
            cg.target.insert(member_id.clone(), target);
            (cg.members[&member_id].clone(), false)
        }
    };
    let mut meta: MemberMetadata = old.meta.clone();
    if req.instance_id.is_some() {
        meta.instance_id = req.instance_id.clone();
    }
    if req.rack_id.is_some() {
        meta.rack_id = req.rack_id.clone();
    }
    if req.rebalance_timeout_ms != -1 {
        meta.rebalance_timeout_ms = req.rebalance_timeout_ms;
    }
    if req.server_assignor.is_some() {
        meta.server_assignor = req.server_assignor.clone();
    }
    if let Some(names) = &req.subscribed_topic_names {
        meta.subscribed_topic_names = names.clone();
    }
    if let Some(re) = &req.subscribed_topic_regex {
        meta.subscribed_topic_regex = Some(re.clone()).filter(|r| !r.is_empty());
    }
    meta.client_id = req.client_id.clone();
    meta.client_host = req.client_host.clone();
    meta.classic = classic.cloned();
    let subscription_changed = new_member
        || meta.subscribed_topic_names != old.meta.subscribed_topic_names
        || meta.subscribed_topic_regex != old.meta.subscribed_topic_regex
        || meta.server_assignor != old.meta.server_assignor;
    if new_member || meta != old.meta {
        records.push(rec::member_metadata_record(group_id, &member_id, &meta));
    }
    cg.members
        .entry(member_id.clone())
        .or_insert_with(|| ConsumerMember::new(member_id.clone()))
        .set_meta(meta);

    // 2. The group epoch: bumped for a new or changed subscription or a
    // change of the subscribed topics (new topic, more partitions).
    let mut bump = cg.epoch == 0 || subscription_changed;
    let subscribed = cg.compute_subscribed(topics);
    if subscribed != cg.subscribed {
        bump = true;
        let list: Vec<_> = subscribed.values().cloned().collect();
        records.push(rec::partition_metadata_record(group_id, &list));
        cg.subscribed = subscribed;
    }
    if bump {
        cg.epoch = cg.epoch.saturating_add(1);
        records.push(rec::epoch_record(group_id, cg.epoch));
    }

    // 3. The target assignment of the new group epoch (timed with the
    // injected clock, if any).
    let mut assignment_nanos = None;
    if cg.epoch > cg.assignment_epoch {
        let start = clock.map(|c| c());
        let changed = cg.compute_target(cfg);
        assignment_nanos = clock.zip(start).map(|(c, s)| c().saturating_sub(s));
        for m in changed {
            let t = cg.target.get(&m).cloned().unwrap_or_default();
            records.push(rec::target_member_record(group_id, &m, &t));
        }
        cg.assignment_epoch = cg.epoch;
        records.push(rec::target_metadata_record(group_id, cg.assignment_epoch));
    }

    // 4. Reconcile the member towards its target.
    let current = cg.members[&member_id].current.clone();
    let reconciled = current.state == super::types::MemberState::Stable
        && current.member_epoch == cg.assignment_epoch;
    if !reconciled {
        let empty = Partitions::new();
        let target = cg.target.get(&member_id).unwrap_or(&empty);
        let owners = &cg.owners;
        let elsewhere =
            |t: &weir_protocol::Uuid, p: i32| owners.get(&(*t, p)).is_some_and(|o| *o != member_id);
        let next = reconcile(
            &current,
            cg.assignment_epoch,
            target,
            &elsewhere,
            req.owned.as_ref(),
        );
        if next != current {
            let unrevoked = super::types::MemberState::UnrevokedPartitions;
            let started_revoking = next.state == unrevoked
                && (current.state != unrevoked || current.member_epoch != next.member_epoch);
            if let Some(m) = cg.members.get_mut(&member_id) {
                if started_revoking {
                    let timeout = i64::from(m.meta.rebalance_timeout_ms.max(0));
                    m.rebalance_deadline_ms = Some(now.saturating_add(timeout));
                } else if next.state != unrevoked {
                    m.rebalance_deadline_ms = None;
                }
            }
            records.push(rec::current_assignment_record(group_id, &member_id, &next));
            cg.set_current(&member_id, next, true);
        }
    }
    let m = cg
        .members
        .get_mut(&member_id)
        .ok_or((ErrorCode::UnknownServerError, "member vanished".to_string()))?;
    m.session_deadline_ms = now.saturating_add(m.session_timeout_ms(cfg));

    let full = req.member_epoch == 0
        || (req.rebalance_timeout_ms != -1
            && (req.subscribed_topic_names.is_some() || req.subscribed_topic_regex.is_some())
            && req.owned.is_some());
    let changed = m.current.assigned != old.current.assigned || new_member;
    Ok(ConsumerHeartbeatResponse {
        error: ErrorCode::None,
        error_message: None,
        member_id: Some(member_id),
        member_epoch: m.current.member_epoch,
        heartbeat_interval_ms: cfg.consumer_heartbeat_interval_ms,
        assignment: (full || changed).then(|| m.current.assigned.clone()),
        assignment_nanos,
    })
}
