//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup.

use bytes::Bytes;

use crate::coordinator::GroupCoordinator;
use crate::error::ErrorCode;
use crate::group::{Ctx, Group, Member};
use crate::types::{
    GroupState, HeartbeatRequest, JoinRequest, JoinResponse, LeaveMemberResult, LeaveRequest,
    LeaveResponse, Output, Response, SyncRequest, SyncResponse,
};
use crate::writes::Effect;

fn join_error(token: u64, error: ErrorCode, member_id: &str) -> Vec<Output> {
    vec![Output::Respond {
        token,
        response: Response::Join(JoinResponse::error(error, member_id)),
    }]
}

fn sync_error(token: u64, error: ErrorCode) -> Vec<Output> {
    vec![Output::Respond {
        token,
        response: Response::Sync(SyncResponse::error(error)),
    }]
}

impl GroupCoordinator {
    /// JoinGroup. The response arrives as an `Output::Respond` for `token`,
    /// possibly in this call's outputs, possibly later (from another
    /// member's join, a leave, or `tick` when the rebalance times out).
    pub fn join_group(&mut self, req: JoinRequest, token: u64, now_ms: i64) -> Vec<Output> {
        let partition = match self.check_owner(&req.group_id) {
            Ok(p) => p,
            Err(e) => return join_error(token, e, &req.member_id),
        };
        if req.group_id.is_empty() {
            return join_error(token, ErrorCode::InvalidGroupId, &req.member_id);
        }
        if req.session_timeout_ms < self.config.min_session_timeout_ms
            || req.session_timeout_ms > self.config.max_session_timeout_ms
        {
            return join_error(token, ErrorCode::InvalidSessionTimeout, &req.member_id);
        }
        let mut out = Vec::new();
        if let Some(g) = self.groups.get(&req.group_id)
            && g.consumer.is_some()
        {
            if g.is_active_consumer() {
                // A classic member of a consumer group (see
                // `consumer/migration.rs`).
                return self.classic_join_to_consumer(req, token, partition, now_ms);
            }
            // An empty consumer group becomes a classic group (its offsets
            // stay): its KIP-848 records are tombstoned.
            let records = g.metadata_tombstones();
            let before = crate::consumer::heartbeat::Snapshot::of(g);
            if let Some(g) = self.groups.get_mut(&req.group_id) {
                g.consumer = None;
                g.protocol_type = None;
            }
            out = self.consumer_write(partition, &req.group_id, Some(before), records);
        }
        if !self.groups.contains_key(&req.group_id) {
            if !req.member_id.is_empty() {
                return join_error(token, ErrorCode::UnknownMemberId, &req.member_id);
            }
            self.groups.insert(
                req.group_id.clone(),
                Group::new(req.group_id.clone(), now_ms),
            );
        }
        let new_id = if req.member_id.is_empty() {
            let prefix = req
                .group_instance_id
                .clone()
                .unwrap_or_else(|| req.client_id.clone());
            Some(self.new_member_id(&prefix))
        } else {
            None
        };
        let Some(group) = self.groups.get_mut(&req.group_id) else {
            return join_error(token, ErrorCode::UnknownServerError, &req.member_id);
        };
        let mut ctx = Ctx {
            now: now_ms,
            cfg: &self.config,
            partition,
            out: &mut out,
            writes: &mut self.writes,
        };
        match new_id {
            Some(id) => join_new_member(group, req, token, id, &mut ctx),
            None => join_known_member(group, req, token, &mut ctx),
        }
        out
    }

    /// SyncGroup. The leader's request carries the assignments; the
    /// responses of all members follow the GroupMetadata append.
    pub fn sync_group(&mut self, req: SyncRequest, token: u64, now_ms: i64) -> Vec<Output> {
        let partition = match self.check_owner(&req.group_id) {
            Ok(p) => p,
            Err(e) => return sync_error(token, e),
        };
        if req.group_id.is_empty() {
            return sync_error(token, ErrorCode::InvalidGroupId);
        }
        if self
            .groups
            .get(&req.group_id)
            .is_some_and(|g| g.consumer.is_some())
        {
            return self.classic_sync_to_consumer(&req, token, now_ms);
        }
        let Some(group) = self.groups.get_mut(&req.group_id) else {
            return sync_error(token, ErrorCode::UnknownMemberId);
        };
        if let Err(e) = group.validate_member(&req.member_id, req.group_instance_id.as_deref()) {
            return sync_error(token, e);
        }
        if req.generation_id != group.generation {
            return sync_error(token, ErrorCode::IllegalGeneration);
        }
        let type_mismatch = req
            .protocol_type
            .as_ref()
            .is_some_and(|t| group.protocol_type.as_ref() != Some(t));
        let name_mismatch = req
            .protocol_name
            .as_ref()
            .is_some_and(|n| group.protocol.as_ref() != Some(n));
        if type_mismatch || name_mismatch {
            return sync_error(token, ErrorCode::InconsistentGroupProtocol);
        }
        let mut out = Vec::new();
        let mut ctx = Ctx {
            now: now_ms,
            cfg: &self.config,
            partition,
            out: &mut out,
            writes: &mut self.writes,
        };
        match group.state {
            GroupState::Empty
            | GroupState::Dead
            | GroupState::Assigning
            | GroupState::Reconciling => {
                return sync_error(token, ErrorCode::UnknownMemberId);
            }
            GroupState::PreparingRebalance => {
                return sync_error(token, ErrorCode::RebalanceInProgress);
            }
            GroupState::CompletingRebalance => {
                group.pending_sync.remove(&req.member_id);
                if let Some(m) = group.member_mut(&req.member_id) {
                    m.heartbeat_deadline_ms =
                        now_ms.saturating_add(i64::from(m.session_timeout_ms));
                    if let Some(old) = m.awaiting_sync.replace(token) {
                        ctx.respond_sync(old, SyncResponse::error(ErrorCode::RebalanceInProgress));
                    }
                }
                if group.is_leader(&req.member_id) {
                    for m in &mut group.members {
                        m.assignment = req
                            .assignments
                            .iter()
                            .find(|a| a.member_id == m.member_id)
                            .map(|a| a.assignment.clone())
                            .unwrap_or_default();
                    }
                    group.transition(GroupState::Stable, now_ms);
                    // The members answered below get the assignment only
                    // if this record is durable (see `writes.rs`).
                    let tokens = group
                        .members
                        .iter()
                        .filter_map(|m| m.awaiting_sync)
                        .collect();
                    let effect = Effect::Assignment {
                        group_id: group.id.clone(),
                        generation: group.generation,
                        tokens,
                    };
                    ctx.append(vec![group.metadata_record()], effect);
                    let protocol_type = group.protocol_type.clone();
                    let protocol_name = group.protocol.clone();
                    for m in &mut group.members {
                        if let Some(t) = m.awaiting_sync.take() {
                            ctx.respond_sync(
                                t,
                                SyncResponse {
                                    error: ErrorCode::None,
                                    protocol_type: protocol_type.clone(),
                                    protocol_name: protocol_name.clone(),
                                    assignment: m.assignment.clone(),
                                },
                            );
                        }
                    }
                }
            }
            GroupState::Stable => {
                group.pending_sync.remove(&req.member_id);
                let protocol_type = group.protocol_type.clone();
                let protocol_name = group.protocol.clone();
                if let Some(m) = group.member_mut(&req.member_id) {
                    m.heartbeat_deadline_ms =
                        now_ms.saturating_add(i64::from(m.session_timeout_ms));
                    let assignment = m.assignment.clone();
                    ctx.respond_sync(
                        token,
                        SyncResponse {
                            error: ErrorCode::None,
                            protocol_type,
                            protocol_name,
                            assignment,
                        },
                    );
                }
            }
        }
        out
    }

    /// Heartbeat: keeps the member alive; REBALANCE_IN_PROGRESS tells it to
    /// rejoin.
    pub fn heartbeat(&mut self, req: &HeartbeatRequest, now_ms: i64) -> ErrorCode {
        if let Err(e) = self.check_owner(&req.group_id) {
            return e;
        }
        if req.group_id.is_empty() {
            return ErrorCode::InvalidGroupId;
        }
        if self
            .groups
            .get(&req.group_id)
            .is_some_and(|g| g.consumer.is_some())
        {
            return self.classic_heartbeat_to_consumer(req, now_ms);
        }
        let Some(group) = self.groups.get_mut(&req.group_id) else {
            return ErrorCode::UnknownMemberId;
        };
        if let Err(e) = group.validate_member(&req.member_id, req.group_instance_id.as_deref()) {
            return e;
        }
        if req.generation_id != group.generation {
            return ErrorCode::IllegalGeneration;
        }
        let state = group.state;
        if let Some(m) = group.member_mut(&req.member_id) {
            m.heartbeat_deadline_ms = now_ms.saturating_add(i64::from(m.session_timeout_ms));
        }
        match state {
            GroupState::Empty
            | GroupState::Dead
            | GroupState::Assigning
            | GroupState::Reconciling => ErrorCode::UnknownMemberId,
            GroupState::PreparingRebalance => ErrorCode::RebalanceInProgress,
            GroupState::CompletingRebalance | GroupState::Stable => ErrorCode::None,
        }
    }

    /// LeaveGroup (batched). Outputs may answer other members' parked joins
    /// and record the group becoming empty.
    pub fn leave_group(&mut self, req: &LeaveRequest, now_ms: i64) -> (LeaveResponse, Vec<Output>) {
        let partition = match self.check_owner(&req.group_id) {
            Ok(p) => p,
            Err(error) => {
                return (
                    LeaveResponse {
                        error,
                        members: Vec::new(),
                    },
                    Vec::new(),
                );
            }
        };
        if self
            .groups
            .get(&req.group_id)
            .is_some_and(|g| g.consumer.is_some())
        {
            return self.classic_leave_to_consumer(req, partition);
        }
        let mut out = Vec::new();
        let Some(group) = self.groups.get_mut(&req.group_id) else {
            return (
                LeaveResponse {
                    error: ErrorCode::UnknownMemberId,
                    members: Vec::new(),
                },
                out,
            );
        };
        let mut ctx = Ctx {
            now: now_ms,
            cfg: &self.config,
            partition,
            out: &mut out,
            writes: &mut self.writes,
        };
        let mut results = Vec::with_capacity(req.members.len());
        let mut removed_any = false;
        for leaving in &req.members {
            let error = match leaving.group_instance_id.as_deref() {
                Some(instance) => match group.static_member(instance) {
                    None => ErrorCode::UnknownMemberId,
                    Some(id) if !leaving.member_id.is_empty() && id != leaving.member_id => {
                        ErrorCode::FencedInstanceId
                    }
                    Some(id) => {
                        group.remove_member(&id, ErrorCode::UnknownMemberId, &mut ctx);
                        removed_any = true;
                        ErrorCode::None
                    }
                },
                None if group.pending_members.remove(&leaving.member_id).is_some() => {
                    removed_any = true;
                    ErrorCode::None
                }
                None if group.has_member(&leaving.member_id) => {
                    group.remove_member(&leaving.member_id, ErrorCode::UnknownMemberId, &mut ctx);
                    removed_any = true;
                    ErrorCode::None
                }
                None => ErrorCode::UnknownMemberId,
            };
            results.push(LeaveMemberResult {
                member_id: leaving.member_id.clone(),
                group_instance_id: leaving.group_instance_id.clone(),
                error,
            });
        }
        if removed_any {
            group.after_member_removed(&mut ctx);
        }
        (
            LeaveResponse {
                error: ErrorCode::None,
                members: results,
            },
            out,
        )
    }
}

fn new_member(req: JoinRequest, member_id: String, token: u64, ctx: &Ctx<'_>) -> Member {
    Member {
        member_id,
        group_instance_id: req.group_instance_id,
        client_id: req.client_id,
        client_host: req.client_host,
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        protocols: req.protocols,
        assignment: Bytes::new(),
        awaiting_join: Some(token),
        awaiting_sync: None,
        heartbeat_deadline_ms: ctx.now.saturating_add(ctx.cfg.new_member_join_timeout_ms),
        is_new: true,
    }
}

fn join_new_member(
    group: &mut Group,
    req: JoinRequest,
    token: u64,
    new_id: String,
    ctx: &mut Ctx<'_>,
) {
    if group.state == GroupState::Dead {
        ctx.respond_join(
            token,
            JoinResponse::error(ErrorCode::CoordinatorNotAvailable, ""),
        );
        return;
    }
    if !group.supports_protocols(&req.protocol_type, &req.protocols, None) {
        ctx.respond_join(
            token,
            JoinResponse::error(ErrorCode::InconsistentGroupProtocol, ""),
        );
        return;
    }
    if let Some(instance) = req.group_instance_id.as_deref()
        && let Some(old_id) = group.static_member(instance)
    {
        replace_static_member(group, req, token, &old_id, new_id, ctx);
        return;
    }
    if group.is_full(ctx.cfg) {
        ctx.respond_join(
            token,
            JoinResponse::error(ErrorCode::GroupMaxSizeReached, ""),
        );
        return;
    }
    if req.group_instance_id.is_none() && req.require_known_member_id {
        // The client must come back with this id; until then it counts as
        // a pending member that the join phase waits for.
        let deadline = ctx.now.saturating_add(i64::from(req.session_timeout_ms));
        group.pending_members.insert(new_id.clone(), deadline);
        ctx.respond_join(
            token,
            JoinResponse::error(ErrorCode::MemberIdRequired, &new_id),
        );
        return;
    }
    add_member_and_rebalance(group, req, new_id, token, ctx);
}

fn join_known_member(group: &mut Group, req: JoinRequest, token: u64, ctx: &mut Ctx<'_>) {
    let member_id = req.member_id.clone();
    if group.pending_members.contains_key(&member_id) {
        if !group.supports_protocols(&req.protocol_type, &req.protocols, None) {
            ctx.respond_join(
                token,
                JoinResponse::error(ErrorCode::InconsistentGroupProtocol, &member_id),
            );
            return;
        }
        group.pending_members.remove(&member_id);
        add_member_and_rebalance(group, req, member_id, token, ctx);
        return;
    }
    if let Err(e) = group.validate_member(&member_id, req.group_instance_id.as_deref()) {
        ctx.respond_join(token, JoinResponse::error(e, &member_id));
        return;
    }
    if !group.supports_protocols(&req.protocol_type, &req.protocols, Some(&member_id)) {
        ctx.respond_join(
            token,
            JoinResponse::error(ErrorCode::InconsistentGroupProtocol, &member_id),
        );
        return;
    }
    let unchanged = group
        .member(&member_id)
        .is_some_and(|m| m.protocols == req.protocols);
    match group.state {
        GroupState::PreparingRebalance => update_member_and_rebalance(group, req, token, ctx),
        GroupState::CompletingRebalance if unchanged => {
            // A retried join: answer with the generation it already joined.
            let response = group.current_join_response(&member_id);
            ctx.respond_join(token, response);
        }
        GroupState::Stable if unchanged && !group.is_leader(&member_id) => {
            let response = group.current_join_response(&member_id);
            ctx.respond_join(token, response);
        }
        GroupState::CompletingRebalance | GroupState::Stable => {
            update_member_and_rebalance(group, req, token, ctx)
        }
        GroupState::Empty | GroupState::Dead | GroupState::Assigning | GroupState::Reconciling => {
            ctx.respond_join(
                token,
                JoinResponse::error(ErrorCode::UnknownMemberId, &member_id),
            );
        }
    }
}

fn add_member_and_rebalance(
    group: &mut Group,
    req: JoinRequest,
    member_id: String,
    token: u64,
    ctx: &mut Ctx<'_>,
) {
    if group.members.is_empty() {
        group.protocol_type = Some(req.protocol_type.clone());
    }
    if group.leader.is_none() {
        group.leader = Some(member_id.clone());
    }
    group.members.push(new_member(req, member_id, token, ctx));
    if group.initial_delay.is_some() {
        group.new_member_added = true;
    }
    match group.state {
        GroupState::PreparingRebalance => group.maybe_complete_join(ctx),
        _ => group.prepare_rebalance(ctx),
    }
}

fn update_member_and_rebalance(group: &mut Group, req: JoinRequest, token: u64, ctx: &mut Ctx<'_>) {
    let Some(m) = group.member_mut(&req.member_id) else {
        ctx.respond_join(
            token,
            JoinResponse::error(ErrorCode::UnknownMemberId, &req.member_id),
        );
        return;
    };
    m.protocols = req.protocols;
    m.session_timeout_ms = req.session_timeout_ms;
    m.rebalance_timeout_ms = req.rebalance_timeout_ms;
    m.client_id = req.client_id;
    m.client_host = req.client_host;
    if let Some(old) = m.awaiting_join.replace(token) {
        // A duplicate join (the client retried): the older request is
        // answered so its connection is not left waiting.
        ctx.respond_join(
            old,
            JoinResponse::error(ErrorCode::RebalanceInProgress, &req.member_id),
        );
    }
    match group.state {
        GroupState::PreparingRebalance => group.maybe_complete_join(ctx),
        _ => group.prepare_rebalance(ctx),
    }
}

/// A static member rejoined with an unknown member id: the new id replaces
/// the old one, whose parked requests are fenced.
fn replace_static_member(
    group: &mut Group,
    req: JoinRequest,
    token: u64,
    old_id: &str,
    new_id: String,
    ctx: &mut Ctx<'_>,
) {
    let state = group.state;
    let previous_leader = group.leader.clone().unwrap_or_default();
    let Some(m) = group.member_mut(old_id) else {
        ctx.respond_join(token, JoinResponse::error(ErrorCode::UnknownMemberId, ""));
        return;
    };
    if let Some(t) = m.awaiting_join.take() {
        ctx.respond_join(t, JoinResponse::error(ErrorCode::FencedInstanceId, old_id));
    }
    if let Some(t) = m.awaiting_sync.take() {
        ctx.respond_sync(t, SyncResponse::error(ErrorCode::FencedInstanceId));
    }
    let supports_skip = req.supports_skip_assignment;
    m.member_id = new_id.clone();
    m.protocols = req.protocols;
    m.session_timeout_ms = req.session_timeout_ms;
    m.rebalance_timeout_ms = req.rebalance_timeout_ms;
    m.client_id = req.client_id;
    m.client_host = req.client_host;
    m.heartbeat_deadline_ms = ctx.now.saturating_add(i64::from(req.session_timeout_ms));
    if group.pending_sync.remove(old_id) {
        group.pending_sync.insert(new_id.clone());
    }
    if group.is_leader(old_id) {
        group.leader = Some(new_id.clone());
    }
    // Like Kafka, a Stable group skips the rebalance when the protocol it
    // would select next is the current one.
    let unchanged = group.select_protocol() == group.protocol;
    match state {
        GroupState::Stable if unchanged => {
            // No rebalance: the group keeps its generation and assignment.
            // v9+ tell a rejoining leader to skip the assignment; older
            // versions see the previous leader id, so it acts as follower.
            let effect = Effect::StaticReplace {
                group_id: group.id.clone(),
                old_id: old_id.to_string(),
                new_id: new_id.clone(),
                token,
            };
            ctx.append(vec![group.metadata_record()], effect);
            let mut response = group.current_join_response(&new_id);
            if supports_skip {
                response.skip_assignment = group.is_leader(&new_id);
            } else {
                response.leader = previous_leader;
                response.members.clear();
            }
            ctx.respond_join(token, response);
        }
        GroupState::Stable | GroupState::CompletingRebalance | GroupState::PreparingRebalance => {
            if let Some(m) = group.member_mut(&new_id) {
                m.awaiting_join = Some(token);
            }
            if state == GroupState::PreparingRebalance {
                group.maybe_complete_join(ctx);
            } else {
                group.prepare_rebalance(ctx);
            }
        }
        GroupState::Empty | GroupState::Dead | GroupState::Assigning | GroupState::Reconciling => {
            ctx.respond_join(token, JoinResponse::error(ErrorCode::UnknownMemberId, ""));
        }
    }
}
