//! Reconciliation of one member's current assignment towards its target
//! (Kafka's `CurrentAssignmentBuilder`).
//!
//! A member moves to a newer epoch only once it has revoked the partitions
//! its target no longer holds, and a partition is added to a member's
//! assignment only when no other member owns it (assigned or pending
//! revocation). So at every moment each partition has at most one owner.
//!
//! ```text
//!            target epoch newer, partitions to revoke
//!   STABLE ─────────────────────────────────────────► UNREVOKED_PARTITIONS
//!     ▲  ▲                                                  │ revoked (not in owned)
//!     │  │ all target partitions free                       ▼
//!     │  └──────────────── UNRELEASED_PARTITIONS ◄── next epoch, some target
//!     │                                                partitions still owned elsewhere
//!     └── next epoch, nothing to revoke or wait for
//! ```

use super::types::{MemberState, Partitions};
use weir_protocol::Uuid;

/// The assignment half of a member (what the CurrentMemberAssignment
/// record holds).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CurrentAssignment {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    /// Owned and kept.
    pub assigned: Partitions,
    /// Owned, to be given up before the member moves to the next epoch.
    pub pending_revocation: Partitions,
}

/// Whether the member (by its `owned` report; `None` = not reported, so
/// assume it still owns them) still holds any of `partitions`.
fn owns_any(owned: Option<&Partitions>, partitions: &Partitions) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    owned.iter().any(|(t, ps)| {
        partitions
            .get(t)
            .is_some_and(|revoked| ps.iter().any(|p| revoked.contains(p)))
    })
}

/// The next state of `current` given the target assignment of epoch
/// `target_epoch`. `owned_elsewhere(topic, partition)` says whether another
/// member owns a partition now; `owned` is the member's report of its
/// partitions in this heartbeat.
pub fn reconcile(
    current: &CurrentAssignment,
    target_epoch: i32,
    target: &Partitions,
    owned_elsewhere: &dyn Fn(&Uuid, i32) -> bool,
    owned: Option<&Partitions>,
) -> CurrentAssignment {
    match current.state {
        MemberState::Stable => {
            if current.member_epoch != target_epoch {
                next_assignment(
                    current,
                    current.member_epoch,
                    target_epoch,
                    target,
                    owned_elsewhere,
                    owned,
                )
            } else {
                current.clone()
            }
        }
        MemberState::UnrevokedPartitions => {
            if owns_any(owned, &current.pending_revocation) {
                return current.clone();
            }
            next_assignment(
                current,
                current.member_epoch.saturating_add(1),
                target_epoch,
                target,
                owned_elsewhere,
                owned,
            )
        }
        MemberState::UnreleasedPartitions => next_assignment(
            current,
            current.member_epoch,
            target_epoch,
            target,
            owned_elsewhere,
            owned,
        ),
        MemberState::Unknown => {
            // Only a newer writer's state: start over from nothing (Kafka
            // fences the member unless it reports owning nothing).
            let empty = CurrentAssignment {
                member_epoch: current.member_epoch,
                previous_member_epoch: current.previous_member_epoch,
                ..Default::default()
            };
            next_assignment(
                &empty,
                target_epoch,
                target_epoch,
                target,
                owned_elsewhere,
                owned,
            )
        }
    }
}

fn with_epoch(current: &CurrentAssignment, epoch: i32) -> (i32, i32) {
    if epoch == current.member_epoch {
        (current.member_epoch, current.previous_member_epoch)
    } else {
        (epoch, current.member_epoch)
    }
}

fn next_assignment(
    current: &CurrentAssignment,
    member_epoch: i32,
    target_epoch: i32,
    target: &Partitions,
    owned_elsewhere: &dyn Fn(&Uuid, i32) -> bool,
    owned: Option<&Partitions>,
) -> CurrentAssignment {
    let mut assigned = Partitions::new();
    let mut revoke = Partitions::new();
    let mut to_assign = Partitions::new();
    let mut unreleased = false;
    let topics: std::collections::BTreeSet<&Uuid> =
        target.keys().chain(current.assigned.keys()).collect();
    for t in topics {
        let empty = Default::default();
        let tgt = target.get(t).unwrap_or(&empty);
        let cur = current.assigned.get(t).unwrap_or(&empty);
        let keep: std::collections::BTreeSet<i32> = cur.intersection(tgt).copied().collect();
        let give_up: std::collections::BTreeSet<i32> = cur.difference(&keep).copied().collect();
        let mut add: std::collections::BTreeSet<i32> = tgt.difference(&keep).copied().collect();
        let before = add.len();
        add.retain(|&p| !owned_elsewhere(t, p));
        unreleased |= add.len() != before;
        if !keep.is_empty() {
            assigned.insert(*t, keep);
        }
        if !give_up.is_empty() {
            revoke.insert(*t, give_up);
        }
        if !add.is_empty() {
            to_assign.insert(*t, add);
        }
    }
    if !revoke.is_empty() && owns_any(owned, &revoke) {
        // Stay in this epoch until the client confirms the revocation.
        let (epoch, previous) = with_epoch(current, member_epoch);
        return CurrentAssignment {
            member_epoch: epoch,
            previous_member_epoch: previous,
            state: MemberState::UnrevokedPartitions,
            assigned,
            pending_revocation: revoke,
        };
    }
    for (t, ps) in to_assign {
        assigned.entry(t).or_default().extend(ps);
    }
    let (epoch, previous) = with_epoch(current, target_epoch);
    CurrentAssignment {
        member_epoch: epoch,
        previous_member_epoch: previous,
        state: if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        },
        assigned,
        pending_revocation: Partitions::new(),
    }
}
