//! Online migration between the classic and the consumer protocol
//! (Kafka 4's `group.consumer.migration.policy`), and the classic requests
//! of members of the classic protocol inside a consumer group.
//!
//! * **Upgrade**: a ConsumerGroupHeartbeat joining a classic group with
//!   members (protocol type `consumer`, policy `upgrade` or
//!   `bidirectional`, not over `group.consumer.max.size`) converts it: every
//!   classic member becomes a consumer-group member of the classic protocol
//!   at member epoch = the classic generation, Stable, owning its last
//!   classic assignment, which is also its target; the group epoch and the
//!   assignment epoch are the generation. The GroupMetadata record is
//!   tombstoned and the consumer group's records written (Kafka's
//!   `ConsumerGroup.fromClassicGroup` and `createConsumerGroupRecords`),
//!   then the new member joins as any other (group epoch bump, new target).
//! * **Classic members of a consumer group** keep speaking JoinGroup,
//!   SyncGroup, Heartbeat and LeaveGroup; the consumer group serves them
//!   (Kafka's `classicGroup*ToConsumerGroup`). A JoinGroup reconciles the
//!   member towards its target with the owned partitions of its
//!   subscription (none for an eager client, which gave up everything
//!   before rejoining) and answers at once with generation = member
//!   epoch; SyncGroup returns its assigned partitions as a
//!   ConsumerProtocolAssignment; Heartbeat says REBALANCE_IN_PROGRESS when
//!   it must rejoin to revoke or receive partitions.
//! * **Downgrade**: when the last member of the consumer protocol leaves
//!   (epoch -1 or expiry) and every other member uses the classic
//!   protocol (policy `downgrade` or `bidirectional`, not over
//!   `group.max.size`), the group becomes a classic group of generation =
//!   group epoch, Stable with each member's target as its assignment, and
//!   rebalances at once (PreparingRebalance: the members rejoin).

use std::collections::BTreeMap;

use bytes::{BufMut, Bytes, BytesMut};
use weir_protocol::Uuid;
use weir_protocol::codec::{Decodable, Encodable};
use weir_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use weir_protocol::messages::{ConsumerProtocolAssignment, ConsumerProtocolSubscription};

use super::heartbeat::{Snapshot, heartbeat};
use super::reconcile::CurrentAssignment;
use super::records::{self as rec, ClassicMeta, MemberMetadata};
use super::types::{
    ConsumerHeartbeatRequest, ConsumerHeartbeatResponse, MemberState, Partitions, TopicsImage,
};
use super::{ConsumerGroup, ConsumerMember, LEAVE_EPOCH};
use crate::config::GroupConfig;
use crate::coordinator::GroupCoordinator;
use crate::error::ErrorCode;
use crate::group::{Ctx, Group, Member};
use crate::records::encode_group_metadata_key;
use crate::types::{
    GroupState, HeartbeatRequest, JoinRequest, JoinResponse, LeaveMemberResult, LeaveRequest,
    LeaveResponse, OffsetsRecord, Output, Protocol, Response, SyncRequest, SyncResponse,
};

const CONSUMER: &str = "consumer";

/// The newest ConsumerProtocol version this coordinator writes (newer
/// ones are read as this one, as Kafka does).
const MAX_CONSUMER_PROTOCOL_VERSION: i16 = 3;

/// The version prefix of ConsumerProtocol bytes, clamped to what is known.
fn protocol_version(bytes: &[u8]) -> Option<i16> {
    let v = i16::from_be_bytes(*bytes.first_chunk::<2>()?);
    (v >= 0).then_some(v.min(MAX_CONSUMER_PROTOCOL_VERSION))
}

/// Decodes a ConsumerProtocolSubscription (`None` if malformed).
pub(crate) fn decode_subscription(bytes: &Bytes) -> Option<ConsumerProtocolSubscription> {
    let version = protocol_version(bytes)?;
    let mut body = bytes.slice(2..);
    ConsumerProtocolSubscription::decode(&mut body, version).ok()
}

/// Decodes a ConsumerProtocolAssignment into partitions by topic name;
/// empty bytes (no assignment yet) are no partitions; `None` if malformed.
fn decode_assignment(bytes: &Bytes) -> Option<Vec<(String, Vec<i32>)>> {
    if bytes.is_empty() {
        return Some(Vec::new());
    }
    let version = protocol_version(bytes)?;
    let mut body = bytes.slice(2..);
    let a = ConsumerProtocolAssignment::decode(&mut body, version).ok()?;
    Some(
        a.assigned_partitions
            .into_iter()
            .map(|t| (t.topic, t.partitions))
            .collect(),
    )
}

/// Partitions by topic name to partitions by topic id (topics the image
/// does not know are left out).
fn to_ids(list: &[(String, Vec<i32>)], topics: &TopicsImage) -> Partitions {
    let mut out = Partitions::new();
    for (name, ps) in list {
        if let Some(t) = topics.get(name) {
            out.entry(t.id).or_default().extend(ps.iter().copied());
        }
    }
    out.retain(|_, ps| !ps.is_empty());
    out
}

/// Encodes `partitions` as a ConsumerProtocolAssignment of `version`,
/// naming topics from the group's subscribed topics (or `topics`).
fn encode_assignment(
    partitions: &Partitions,
    cg: &ConsumerGroup,
    topics: &TopicsImage,
    version: i16,
) -> Bytes {
    let names: BTreeMap<Uuid, &str> = cg
        .subscribed
        .values()
        .map(|t| (t.id, t.name.as_str()))
        .collect();
    let a = ConsumerProtocolAssignment {
        assigned_partitions: partitions
            .iter()
            .filter_map(|(id, ps)| {
                let name = names.get(id).copied().or_else(|| topics.name(id))?;
                Some(AssignedTopic {
                    topic: name.to_string(),
                    partitions: ps.iter().copied().collect(),
                    ..Default::default()
                })
            })
            .collect(),
        user_data: None,
        ..Default::default()
    };
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i16(version);
    // Topic names come from the metadata image and fit an int16 string;
    // a failed encoding leaves the version alone, read as no partitions.
    let _ = a.encode(&mut buf, version);
    buf.freeze()
}

/// The subscription bytes of a classic member: those of the group's
/// protocol, else of its first one (no protocol chosen yet).
fn subscription_bytes<'a>(protocols: &'a [Protocol], chosen: Option<&str>) -> Option<&'a Bytes> {
    chosen
        .and_then(|c| protocols.iter().find(|p| p.name == c))
        .or(protocols.first())
        .map(|p| &p.metadata)
}

/// Answers the parked JoinGroups and SyncGroups of a classic group about
/// to be converted with REBALANCE_IN_PROGRESS: the members rejoin the
/// consumer group.
pub(crate) fn answer_parked(g: &mut Group) -> Vec<Output> {
    let mut out = Vec::new();
    for m in &mut g.members {
        if let Some(token) = m.awaiting_join.take() {
            out.push(Output::Respond {
                token,
                response: Response::Join(JoinResponse::error(
                    ErrorCode::RebalanceInProgress,
                    &m.member_id,
                )),
            });
        }
        if let Some(token) = m.awaiting_sync.take() {
            out.push(Output::Respond {
                token,
                response: Response::Sync(SyncResponse::error(ErrorCode::RebalanceInProgress)),
            });
        }
    }
    out
}

/// Converts a classic group with members into a consumer group (Kafka's
/// `convertToConsumerGroup`); `upgrade_allowed` said yes. Appends the
/// GroupMetadata tombstone and the consumer group's records.
pub(crate) fn convert_to_consumer(
    g: &mut Group,
    topics: &TopicsImage,
    now: i64,
    records: &mut Vec<OffsetsRecord>,
) {
    records.push(OffsetsRecord {
        key: encode_group_metadata_key(&g.id),
        value: None,
    });
    let generation = g.generation;
    let mut cg = ConsumerGroup {
        epoch: generation,
        assignment_epoch: generation,
        ..Default::default()
    };
    for m in &g.members {
        let sub = subscription_bytes(&m.protocols, g.protocol.as_deref())
            .and_then(decode_subscription)
            .unwrap_or_default();
        let assigned = decode_assignment(&m.assignment)
            .map(|a| to_ids(&a, topics))
            .unwrap_or_default();
        let mut member = ConsumerMember::new(m.member_id.clone());
        member.set_meta(MemberMetadata {
            instance_id: m.group_instance_id.clone(),
            rack_id: sub.rack_id,
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            subscribed_topic_names: sub.topics,
            subscribed_topic_regex: None,
            rebalance_timeout_ms: m.rebalance_timeout_ms,
            server_assignor: None,
            classic: Some(ClassicMeta {
                session_timeout_ms: m.session_timeout_ms,
                protocols: m.protocols.clone(),
            }),
        });
        member.session_deadline_ms = now.saturating_add(i64::from(m.session_timeout_ms));
        cg.members.insert(m.member_id.clone(), member);
        let current = CurrentAssignment {
            member_epoch: generation,
            previous_member_epoch: generation,
            state: MemberState::Stable,
            assigned: assigned.clone(),
            pending_revocation: Partitions::new(),
        };
        // Not strict: assignments of one generation are disjoint, but a
        // leader may have handed out one partition twice; the later
        // member keeps it.
        cg.set_current(&m.member_id, current, false);
        cg.target.insert(m.member_id.clone(), assigned);
    }
    for (id, m) in &cg.members {
        records.push(rec::member_metadata_record(&g.id, id, &m.meta));
    }
    records.push(rec::epoch_record(&g.id, cg.epoch));
    for (id, t) in &cg.target {
        records.push(rec::target_member_record(&g.id, id, t));
    }
    records.push(rec::target_metadata_record(&g.id, cg.assignment_epoch));
    for (id, m) in &cg.members {
        records.push(rec::current_assignment_record(&g.id, id, &m.current));
    }
    g.consumer = Some(Box::new(cg));
    g.protocol_type = Some(CONSUMER.to_string());
    g.clear_classic_part(now);
}

/// Kafka's `validateOnlineDowngradeWithFencedMember`: `leaving` goes and
/// every other member uses the classic protocol, at least one stays, the
/// policy allows it and the rest fits `group.max.size`.
pub(crate) fn may_downgrade(cg: &ConsumerGroup, leaving: &str, cfg: &GroupConfig) -> bool {
    cg.members.contains_key(leaving)
        && cg.members.len() > 1
        && cg
            .members
            .values()
            .all(|m| m.id == leaving || m.is_classic())
        && cfg.consumer_migration_policy.downgrade()
        && cg.members.len() - 1 <= cfg.max_group_size
}

/// Whether a classic member must rejoin (Kafka's
/// `classicGroupHeartbeatToConsumerGroup`): the group epoch moved on, it
/// must revoke partitions, or partitions it waits for are free now.
fn must_rejoin(cg: &ConsumerGroup, m: &ConsumerMember) -> bool {
    m.current.member_epoch < cg.epoch
        || m.current.state == MemberState::UnrevokedPartitions
        || (m.current.state == MemberState::UnreleasedPartitions && !waiting_on_unreleased(cg, m))
}

/// Some partition of the member's target is still owned by another member.
fn waiting_on_unreleased(cg: &ConsumerGroup, m: &ConsumerMember) -> bool {
    let Some(target) = cg.target.get(&m.id) else {
        return false;
    };
    target.iter().any(|(t, ps)| {
        ps.iter().any(|p| {
            !m.current.assigned.get(t).is_some_and(|a| a.contains(p))
                && cg.owners.get(&(*t, *p)).is_some_and(|o| *o != m.id)
        })
    })
}

/// Finds a classic member by member id or static instance id (Kafka's
/// `validateConsumerGroupMember` and `throwIfMemberDoesNotUseClassicProtocol`).
fn classic_member<'a>(
    cg: &'a ConsumerGroup,
    member_id: &str,
    instance_id: Option<&str>,
) -> Result<&'a ConsumerMember, ErrorCode> {
    let m = match instance_id {
        Some(instance) => {
            let id = cg
                .static_member(instance)
                .ok_or(ErrorCode::UnknownMemberId)?;
            if id != member_id {
                return Err(ErrorCode::FencedInstanceId);
            }
            &cg.members[id]
        }
        None => cg
            .members
            .get(member_id)
            .ok_or(ErrorCode::UnknownMemberId)?,
    };
    if !m.is_classic() {
        return Err(ErrorCode::UnknownMemberId);
    }
    Ok(m)
}

fn first_protocol_name(m: &ConsumerMember) -> Option<String> {
    m.meta
        .classic
        .as_ref()
        .and_then(|c| c.protocols.first())
        .map(|p| p.name.clone())
}

impl GroupCoordinator {
    /// The broker's view of the topics, for requests that come without
    /// one (a classic member's JoinGroup to a consumer group names its
    /// topics, which the coordinator resolves to ids with it).
    pub fn set_topics(&mut self, topics: TopicsImage) {
        self.topics = topics;
    }

    /// Kafka's `validateOnlineUpgrade` for a ConsumerGroupHeartbeat joining
    /// `group_id`: a classic group with members, of protocol type
    /// `consumer`, whose members' metadata decode, within
    /// `group.consumer.max.size`, and the policy allows upgrades.
    pub(crate) fn upgrade_allowed(&self, group_id: &str) -> bool {
        let Some(g) = self.groups.get(group_id) else {
            return false;
        };
        g.consumer.is_none()
            && !g.members.is_empty()
            && self.config.consumer_migration_policy.upgrade()
            && g.protocol_type.as_deref() == Some(CONSUMER)
            && g.members.len() <= self.config.consumer_max_size
            && g.members.iter().all(|m| {
                subscription_bytes(&m.protocols, g.protocol.as_deref())
                    .and_then(decode_subscription)
                    .is_some()
                    && decode_assignment(&m.assignment).is_some()
            })
    }

    /// Whether this leave (epoch -1) of a known member downgrades the group.
    pub(crate) fn downgrade_allowed(&self, group_id: &str, req: &ConsumerHeartbeatRequest) -> bool {
        let Some(cg) = self
            .groups
            .get(group_id)
            .and_then(|g| g.consumer.as_deref())
        else {
            return false;
        };
        let identified = match &req.instance_id {
            Some(instance) => cg.static_member(instance) == Some(&req.member_id),
            None => true,
        };
        req.member_epoch == LEAVE_EPOCH
            && identified
            && may_downgrade(cg, &req.member_id, &self.config)
    }

    /// Converts a consumer group whose member `leaving` goes into a classic
    /// group (Kafka's `convertToClassicGroup` and
    /// `ClassicGroup.fromConsumerGroup`) and starts a rebalance.
    pub(crate) fn downgrade(
        &mut self,
        partition: i32,
        group_id: &str,
        leaving: &str,
        now: i64,
    ) -> (ConsumerHeartbeatResponse, Vec<Output>) {
        let response = ConsumerHeartbeatResponse {
            error: ErrorCode::None,
            error_message: None,
            member_id: Some(leaving.to_string()),
            member_epoch: LEAVE_EPOCH,
            heartbeat_interval_ms: 0,
            assignment: None,
            assignment_nanos: None,
        };
        let Some(g) = self.groups.get(group_id) else {
            return (response, Vec::new());
        };
        let before = Snapshot::of(g);
        let out = self.convert_to_classic(
            partition,
            group_id,
            Some(leaving),
            before,
            Vec::new(),
            Vec::new(),
            now,
        );
        (response, out)
    }

    /// Turns the consumer group `group_id` into a classic group of
    /// generation = group epoch, Stable, each member (but `leaving`)
    /// assigned its target. With `leaving` set a member left and the group
    /// rebalances at once; without, a classic static member just replaced
    /// the last member of the consumer protocol and took over its target,
    /// so the assignment stands (Kafka's `convertToClassicGroup` with a
    /// joining member). `records` (the change that led here) come before
    /// the conversion's; a failed append restores `before` and answers
    /// `tokens` with its error.
    #[allow(clippy::too_many_arguments)]
    fn convert_to_classic(
        &mut self,
        partition: i32,
        group_id: &str,
        leaving: Option<&str>,
        before: Snapshot,
        mut records: Vec<OffsetsRecord>,
        tokens: Vec<u64>,
        now: i64,
    ) -> Vec<Output> {
        let Some(g) = self.groups.get_mut(group_id) else {
            return Vec::new();
        };
        records.extend(g.metadata_tombstones());
        let Some(cg) = g.consumer.take() else {
            return Vec::new();
        };
        g.protocol_type = Some(CONSUMER.to_string());
        g.members = cg
            .members
            .values()
            .filter(|m| Some(m.id.as_str()) != leaving)
            .map(|m| {
                let classic = m.meta.classic.clone().unwrap_or_default();
                Member {
                    member_id: m.id.clone(),
                    group_instance_id: m.meta.instance_id.clone(),
                    client_id: m.meta.client_id.clone(),
                    client_host: m.meta.client_host.clone(),
                    session_timeout_ms: classic.session_timeout_ms,
                    rebalance_timeout_ms: m.meta.rebalance_timeout_ms,
                    protocols: classic.protocols,
                    assignment: Bytes::new(),
                    awaiting_join: None,
                    awaiting_sync: None,
                    heartbeat_deadline_ms: now
                        .saturating_add(i64::from(classic.session_timeout_ms)),
                    is_new: false,
                }
            })
            .collect();
        g.leader = g.members.first().map(|m| m.member_id.clone());
        g.generation = cg.epoch;
        g.transition(GroupState::Stable, now);
        g.protocol = g.select_protocol();
        let chosen = g.protocol.clone();
        for m in &mut g.members {
            let version = subscription_bytes(&m.protocols, chosen.as_deref())
                .and_then(|b| protocol_version(b))
                .unwrap_or(0);
            let target = cg.target.get(&m.member_id).cloned().unwrap_or_default();
            m.assignment = encode_assignment(&target, &cg, &self.topics, version);
        }
        records.push(g.metadata_record());
        let mut out = Vec::new();
        if leaving.is_some() {
            let mut ctx = Ctx {
                now,
                cfg: &self.config,
                partition,
                out: &mut out,
                writes: &mut self.writes,
            };
            g.prepare_rebalance(&mut ctx);
        }
        let mut all =
            self.consumer_write_answering(partition, group_id, Some(before), records, tokens);
        all.extend(out);
        all
    }

    /// JoinGroup of a classic member to a consumer group with members
    /// (Kafka's `classicGroupJoinToConsumerGroup`). Answered at once (after
    /// the append of its records, failed with the append's error).
    pub(crate) fn classic_join_to_consumer(
        &mut self,
        req: JoinRequest,
        token: u64,
        partition: i32,
        now: i64,
    ) -> Vec<Output> {
        let fail = |error: ErrorCode, member_id: &str| {
            vec![Output::Respond {
                token,
                response: Response::Join(JoinResponse::error(error, member_id)),
            }]
        };
        let Some(cg) = self
            .groups
            .get(&req.group_id)
            .and_then(|g| g.consumer.as_deref())
        else {
            return fail(ErrorCode::UnknownServerError, &req.member_id);
        };
        // Kafka's `supportsClassicProtocols`: a protocol every other
        // classic member supports.
        let others: Vec<&ClassicMeta> = cg
            .members
            .values()
            .filter(|m| m.id != req.member_id)
            .filter_map(|m| m.meta.classic.as_ref())
            .collect();
        let supported = req.protocol_type == CONSUMER
            && !req.protocols.is_empty()
            && req.protocols.iter().any(|p| {
                others
                    .iter()
                    .all(|c| c.protocols.iter().any(|q| q.name == p.name))
            });
        if !supported {
            return fail(ErrorCode::InconsistentGroupProtocol, &req.member_id);
        }
        if let Some(m) = cg.members.get(&req.member_id)
            && !m.is_classic()
        {
            return fail(ErrorCode::UnknownMemberId, &req.member_id);
        }
        // A static member with a member id must be the one of its instance
        // id; without one it replaces that member (Kafka's
        // `getOrMaybeSubscribeStaticConsumerGroupMember`).
        let static_owner = req
            .group_instance_id
            .as_deref()
            .and_then(|i| cg.static_member(i))
            .cloned();
        if req.group_instance_id.is_some() && !req.member_id.is_empty() {
            match &static_owner {
                None => return fail(ErrorCode::UnknownMemberId, &req.member_id),
                Some(id) if *id != req.member_id => {
                    return fail(ErrorCode::FencedInstanceId, &req.member_id);
                }
                Some(_) => {}
            }
        }
        // Replacing the last member of the consumer protocol downgrades the
        // group, the newcomer keeping the assignment of the member it
        // replaces (Kafka's `validateOnlineDowngradeWithReplacedMemberId`).
        let replaced = static_owner.filter(|_| req.member_id.is_empty());
        let downgrade = replaced.as_ref().is_some_and(|old| {
            cg.members.values().all(|m| m.id == *old || m.is_classic())
                && self.config.consumer_migration_policy.downgrade()
                && cg.members.len() <= self.config.max_group_size
        });
        let Some(sub) = req
            .protocols
            .first()
            .and_then(|p| decode_subscription(&p.metadata))
        else {
            return fail(ErrorCode::InconsistentGroupProtocol, &req.member_id);
        };
        let member_id = if req.member_id.is_empty() {
            let prefix = req
                .group_instance_id
                .clone()
                .unwrap_or_else(|| req.client_id.clone());
            let id = self.new_member_id(&prefix);
            if req.group_instance_id.is_none() && req.require_known_member_id {
                return fail(ErrorCode::MemberIdRequired, &id);
            }
            id
        } else {
            req.member_id.clone()
        };
        let Some(g) = self.groups.get_mut(&req.group_id) else {
            return fail(ErrorCode::UnknownServerError, &member_id);
        };
        let before = Snapshot::of(g);
        let Some(cg) = g.consumer.as_deref_mut() else {
            return fail(ErrorCode::UnknownServerError, &member_id);
        };
        let owned: Vec<(String, Vec<i32>)> = sub
            .owned_partitions
            .iter()
            .map(|t| (t.topic.clone(), t.partitions.clone()))
            .collect();
        let epoch = cg
            .members
            .get(&member_id)
            .map_or(0, |m| m.current.member_epoch);
        let beat = ConsumerHeartbeatRequest {
            group_id: req.group_id.clone(),
            member_id: member_id.clone(),
            member_epoch: epoch,
            instance_id: req.group_instance_id.clone(),
            rack_id: sub.rack_id.clone(),
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            subscribed_topic_names: Some(sub.topics.clone()),
            subscribed_topic_regex: None,
            server_assignor: None,
            owned: Some(to_ids(&owned, &self.topics)),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            api_version: 1,
        };
        let classic = ClassicMeta {
            session_timeout_ms: req.session_timeout_ms,
            protocols: req.protocols.clone(),
        };
        let mut records = Vec::new();
        let cfg =
            super::heartbeat::group_config(&self.config, &self.consumer_timeouts, &req.group_id);
        let result = heartbeat(
            cg,
            &req.group_id,
            &beat,
            member_id.clone(),
            &self.topics,
            &cfg,
            self.assignment_clock,
            now,
            &mut records,
            Some(&classic),
        );
        cg.check();
        let resp = match result {
            Err((e, _)) => {
                self.restore(&req.group_id, Some(before));
                return fail(e, &member_id);
            }
            Ok(r) => r,
        };
        if let Some(m) = cg.members.get_mut(&member_id) {
            // SyncGroup is due within the rebalance timeout.
            m.classic_deadline_ms =
                Some(now.saturating_add(i64::from(req.rebalance_timeout_ms.max(0))));
        }
        let response = JoinResponse {
            error: ErrorCode::None,
            generation_id: resp.member_epoch,
            protocol_type: Some(CONSUMER.to_string()),
            protocol_name: req.protocols.first().map(|p| p.name.clone()),
            leader: String::new(),
            skip_assignment: false,
            member_id,
            members: Vec::new(),
        };
        if downgrade {
            let mut out = self.convert_to_classic(
                partition,
                &req.group_id,
                None,
                before,
                records,
                vec![token],
                now,
            );
            out.push(Output::Respond {
                token,
                response: Response::Join(response),
            });
            return out;
        }
        let mut out = self.consumer_write_answering(
            partition,
            &req.group_id,
            Some(before),
            records,
            vec![token],
        );
        out.push(Output::Respond {
            token,
            response: Response::Join(response),
        });
        out
    }

    /// SyncGroup of a classic member of a consumer group (Kafka's
    /// `classicGroupSyncToConsumerGroup`): its assigned partitions.
    pub(crate) fn classic_sync_to_consumer(
        &mut self,
        req: &SyncRequest,
        token: u64,
        now: i64,
    ) -> Vec<Output> {
        let respond = |response: SyncResponse| {
            vec![Output::Respond {
                token,
                response: Response::Sync(response),
            }]
        };
        let topics = &self.topics;
        let Some(cg) = self
            .groups
            .get_mut(&req.group_id)
            .and_then(|g| g.consumer.as_deref_mut())
        else {
            return respond(SyncResponse::error(ErrorCode::UnknownMemberId));
        };
        let m = match classic_member(cg, &req.member_id, req.group_instance_id.as_deref()) {
            Ok(m) => m,
            Err(e) => return respond(SyncResponse::error(e)),
        };
        if req.generation_id != m.current.member_epoch {
            return respond(SyncResponse::error(ErrorCode::IllegalGeneration));
        }
        let name = first_protocol_name(m);
        if req.protocol_type.as_ref().is_some_and(|t| t != CONSUMER)
            || req
                .protocol_name
                .as_ref()
                .is_some_and(|n| Some(n) != name.as_ref())
        {
            return respond(SyncResponse::error(ErrorCode::InconsistentGroupProtocol));
        }
        let id = m.id.clone();
        let rejoin = cg.epoch > m.current.member_epoch
            && m.current.state != MemberState::UnrevokedPartitions;
        let version = m
            .meta
            .classic
            .as_ref()
            .and_then(|c| c.protocols.first())
            .and_then(|p| protocol_version(&p.metadata))
            .unwrap_or(0);
        let assignment = encode_assignment(&m.current.assigned, cg, topics, version);
        let session = m.session_timeout_ms(&self.config);
        let rebalance = i64::from(m.meta.rebalance_timeout_ms.max(0));
        let Some(m) = cg.members.get_mut(&id) else {
            return respond(SyncResponse::error(ErrorCode::UnknownMemberId));
        };
        if rejoin {
            m.classic_deadline_ms
                .get_or_insert(now.saturating_add(rebalance));
            return respond(SyncResponse::error(ErrorCode::RebalanceInProgress));
        }
        m.classic_deadline_ms = None;
        m.session_deadline_ms = now.saturating_add(session);
        respond(SyncResponse {
            error: ErrorCode::None,
            protocol_type: Some(CONSUMER.to_string()),
            protocol_name: name,
            assignment,
        })
    }

    /// Heartbeat of a classic member of a consumer group (Kafka's
    /// `classicGroupHeartbeatToConsumerGroup`).
    pub(crate) fn classic_heartbeat_to_consumer(
        &mut self,
        req: &HeartbeatRequest,
        now: i64,
    ) -> ErrorCode {
        let cfg = &self.config;
        let Some(cg) = self
            .groups
            .get_mut(&req.group_id)
            .and_then(|g| g.consumer.as_deref_mut())
        else {
            return ErrorCode::UnknownMemberId;
        };
        let m = match classic_member(cg, &req.member_id, req.group_instance_id.as_deref()) {
            Ok(m) => m,
            Err(e) => return e,
        };
        if req.generation_id != m.current.member_epoch {
            return ErrorCode::IllegalGeneration;
        }
        let id = m.id.clone();
        let rejoin = must_rejoin(cg, m);
        let session = m.session_timeout_ms(cfg);
        let rebalance = i64::from(m.meta.rebalance_timeout_ms.max(0));
        let Some(m) = cg.members.get_mut(&id) else {
            return ErrorCode::UnknownMemberId;
        };
        m.session_deadline_ms = now.saturating_add(session);
        if rejoin {
            // It must rejoin within its rebalance timeout.
            m.classic_deadline_ms
                .get_or_insert(now.saturating_add(rebalance));
            return ErrorCode::RebalanceInProgress;
        }
        ErrorCode::None
    }

    /// LeaveGroup of classic members of a consumer group (Kafka's
    /// `classicGroupLeaveToConsumerGroup`): removed, one group epoch bump.
    pub(crate) fn classic_leave_to_consumer(
        &mut self,
        req: &LeaveRequest,
        partition: i32,
    ) -> (LeaveResponse, Vec<Output>) {
        let Some(g) = self.groups.get_mut(&req.group_id) else {
            return (
                LeaveResponse {
                    error: ErrorCode::UnknownMemberId,
                    members: Vec::new(),
                },
                Vec::new(),
            );
        };
        let before = Snapshot::of(g);
        let Some(cg) = g.consumer.as_deref_mut() else {
            return (
                LeaveResponse {
                    error: ErrorCode::UnknownMemberId,
                    members: Vec::new(),
                },
                Vec::new(),
            );
        };
        let mut records = Vec::new();
        let mut results = Vec::with_capacity(req.members.len());
        let mut gone = Vec::new();
        for leaving in &req.members {
            let found = match leaving.group_instance_id.as_deref() {
                Some(instance) => match cg.static_member(instance) {
                    None => Err(ErrorCode::UnknownMemberId),
                    Some(id) if !leaving.member_id.is_empty() && *id != leaving.member_id => {
                        Err(ErrorCode::FencedInstanceId)
                    }
                    Some(id) => Ok(id.clone()),
                },
                None => Ok(leaving.member_id.clone()),
            };
            let found = found.and_then(|id| match cg.members.get(&id) {
                Some(m) if m.is_classic() => Ok(id),
                _ => Err(ErrorCode::UnknownMemberId),
            });
            let error = match found {
                Ok(id) => {
                    records.extend(rec::member_tombstones(&req.group_id, &id));
                    cg.remove_member(&id);
                    gone.push(id);
                    ErrorCode::None
                }
                Err(e) => e,
            };
            results.push(LeaveMemberResult {
                member_id: leaving.member_id.clone(),
                group_instance_id: leaving.group_instance_id.clone(),
                error,
            });
        }
        if !gone.is_empty() {
            // As `fence`, with one bump for the whole batch.
            let subscribed = cg.still_subscribed();
            if subscribed != cg.subscribed {
                cg.subscribed = subscribed;
                let topics: Vec<_> = cg.subscribed.values().cloned().collect();
                records.push(rec::partition_metadata_record(&req.group_id, &topics));
            }
            cg.epoch = cg.epoch.saturating_add(1);
            records.push(rec::epoch_record(&req.group_id, cg.epoch));
        }
        cg.check();
        let out = self.consumer_write(partition, &req.group_id, Some(before), records);
        (
            LeaveResponse {
                error: ErrorCode::None,
                members: results,
            },
            out,
        )
    }
}
