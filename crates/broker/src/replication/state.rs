//! One partition's replication state on this broker, as pure decisions:
//! its role from the metadata, the followers' fetch progress when it
//! leads, the high watermark they allow, and the ISR changes to ask the
//! controller for. Time is passed in; nothing here does I/O.
//!
//! The rules are Kafka's:
//! - the high watermark is the smallest log end offset of the *maximal*
//!   ISR: the committed ISR plus the members of an expansion sent to the
//!   controller and not yet committed (so an expansion never lets the HW
//!   pass a replica it is about to count on); a member whose position is
//!   not known yet (right after this broker became leader) holds it;
//! - a follower is caught up when it fetches at or past the leader's log
//!   end offset; a fetch at or past the log end offset the previous fetch
//!   saw makes it caught up as of that previous fetch;
//! - an ISR member not caught up for `replica.lag.time.max.ms` is removed
//!   (never the leader, never below one member);
//! - a live replica outside the ISR is added back once its log end offset
//!   reaches the high watermark and the start of the leader's epoch.

use std::collections::BTreeMap;

use weir_protocol::error_code::ErrorCode;

use crate::cluster::PartitionView;

/// What this broker is for a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leader,
    /// Fetches from `leader`.
    Follower {
        leader: i32,
    },
    /// No leader, or this broker is not a replica.
    Offline,
}

/// A follower's progress as its leader sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerState {
    /// Its log end offset (the offset of its last fetch); -1 unknown.
    pub leo: i64,
    /// When it was last known to be caught up (ms).
    pub last_caught_up_ms: i64,
    /// Its last fetch (ms) and the leader's log end offset then.
    pub last_fetch_ms: i64,
    pub last_fetch_leader_leo: i64,
}

/// An ISR change to send to the controller (AlterPartition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrChange {
    pub topic: String,
    pub topic_id: [u8; 16],
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<i32>,
}

/// What changed when the metadata was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Same role and leader epoch.
    Unchanged,
    /// This broker leads from this new leader epoch on.
    BecameLeader,
    /// This broker follows (a new leader or a new epoch).
    BecameFollower,
    BecameOffline,
}

/// One partition's replication state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionReplication {
    pub topic_id: [u8; 16],
    pub role: Role,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    /// The ISR as committed (metadata, or the controller's answer).
    pub isr: Vec<i32>,
    /// An ISR change sent and not yet answered.
    pub pending_isr: Option<Vec<i32>>,
    /// Followers' progress (leader only), by broker id.
    pub followers: BTreeMap<i32, FollowerState>,
    /// The log end offset when this broker became leader of this epoch.
    pub epoch_start_offset: i64,
    /// After a refused ISR change, none is asked before this time (ms), so
    /// a leader with stale metadata does not ask on every fetch.
    pub isr_retry_after_ms: i64,
}

/// The pause after a refused ISR change.
pub const ISR_RETRY_BACKOFF_MS: i64 = 1_000;

impl PartitionReplication {
    /// The state for a partition first seen in `view`.
    pub fn new(me: i32, topic_id: [u8; 16], view: &PartitionView, leo: i64, now_ms: i64) -> Self {
        let mut s = PartitionReplication {
            topic_id,
            role: Role::Offline,
            leader_epoch: -1,
            partition_epoch: -1,
            replicas: Vec::new(),
            isr: Vec::new(),
            pending_isr: None,
            followers: BTreeMap::new(),
            epoch_start_offset: leo,
            isr_retry_after_ms: 0,
        };
        s.apply(me, view, leo, now_ms);
        s
    }

    /// Applies the partition as the metadata now has it.
    pub fn apply(&mut self, me: i32, view: &PartitionView, leo: i64, now_ms: i64) -> Transition {
        let role = if !view.replicas.contains(&me) || view.leader < 0 {
            Role::Offline
        } else if view.leader == me {
            Role::Leader
        } else {
            Role::Follower {
                leader: view.leader,
            }
        };
        let new_epoch = view.leader_epoch != self.leader_epoch;
        let transition = match role {
            _ if role == self.role && !new_epoch => Transition::Unchanged,
            Role::Leader => Transition::BecameLeader,
            Role::Follower { .. } => Transition::BecameFollower,
            Role::Offline => Transition::BecameOffline,
        };
        // A metadata change older than what the controller already
        // answered is not applied over it; the same partition epoch again
        // leaves a change in flight pending (it was asked against it).
        if new_epoch || view.partition_epoch > self.partition_epoch {
            self.isr = view.isr.clone();
            self.partition_epoch = view.partition_epoch;
            self.pending_isr = None;
            // New metadata: a change may be asked against it at once.
            self.isr_retry_after_ms = 0;
        }
        self.replicas = view.replicas.clone();
        self.leader_epoch = view.leader_epoch;
        self.role = role;
        match transition {
            Transition::BecameLeader => {
                self.epoch_start_offset = leo;
                // Every follower starts unknown; ISR members count as
                // caught up now, so none is removed before it could fetch.
                self.followers = self
                    .replicas
                    .iter()
                    .filter(|r| **r != me)
                    .map(|r| {
                        let in_isr = self.isr.contains(r);
                        (
                            *r,
                            FollowerState {
                                leo: -1,
                                last_caught_up_ms: if in_isr { now_ms } else { 0 },
                                last_fetch_ms: 0,
                                last_fetch_leader_leo: -1,
                            },
                        )
                    })
                    .collect();
            }
            Transition::BecameFollower | Transition::BecameOffline => self.followers.clear(),
            Transition::Unchanged => {
                // Reassignment may add or drop replicas.
                if self.role == Role::Leader {
                    self.followers.retain(|r, _| view.replicas.contains(r));
                    for r in view.replicas.iter().filter(|r| **r != me) {
                        self.followers.entry(*r).or_insert(FollowerState {
                            leo: -1,
                            last_caught_up_ms: 0,
                            last_fetch_ms: 0,
                            last_fetch_leader_leo: -1,
                        });
                    }
                }
            }
        }
        transition
    }

    /// The maximal ISR: committed plus a pending expansion's members.
    pub fn maximal_isr(&self) -> Vec<i32> {
        let mut out = self.isr.clone();
        if let Some(p) = &self.pending_isr {
            out.extend(p.iter().filter(|r| !self.isr.contains(r)));
        }
        out
    }

    /// The high watermark the maximal ISR allows with the leader at
    /// `leader_leo` (leader only): the smallest log end offset among them.
    pub fn high_watermark(&self, me: i32, leader_leo: i64) -> Option<i64> {
        if self.role != Role::Leader {
            return None;
        }
        let mut hw = leader_leo;
        for r in self.maximal_isr().into_iter().filter(|r| *r != me) {
            let leo = self.followers.get(&r).map_or(-1, |f| f.leo);
            if leo < 0 {
                return None;
            }
            hw = hw.min(leo);
        }
        Some(hw)
    }

    /// Records a fetch by follower `replica` at `fetch_offset` while the
    /// leader's log end offset is `leader_leo`.
    pub fn record_fetch(
        &mut self,
        replica: i32,
        fetch_offset: i64,
        leader_leo: i64,
        now_ms: i64,
    ) -> Result<(), ErrorCode> {
        if self.role != Role::Leader {
            return Err(ErrorCode::NotLeaderOrFollower);
        }
        let Some(f) = self.followers.get_mut(&replica) else {
            return Err(ErrorCode::NotLeaderOrFollower);
        };
        if fetch_offset >= leader_leo {
            f.last_caught_up_ms = f.last_caught_up_ms.max(now_ms);
        } else if f.last_fetch_leader_leo >= 0 && fetch_offset >= f.last_fetch_leader_leo {
            f.last_caught_up_ms = f.last_caught_up_ms.max(f.last_fetch_ms);
        }
        f.leo = fetch_offset;
        f.last_fetch_ms = now_ms;
        f.last_fetch_leader_leo = leader_leo;
        Ok(())
    }

    /// The ISR with `replica` added, when it should be: it is live, not in
    /// the ISR and caught up to `hw` and this epoch's start. None while
    /// another change is pending.
    pub fn expansion(
        &self,
        replica: i32,
        hw: i64,
        now_ms: i64,
        live: impl Fn(i32) -> bool,
    ) -> Option<Vec<i32>> {
        if self.role != Role::Leader
            || self.pending_isr.is_some()
            || self.isr.contains(&replica)
            || now_ms < self.isr_retry_after_ms
        {
            return None;
        }
        let f = self.followers.get(&replica)?;
        if !live(replica) || f.leo < hw || f.leo < self.epoch_start_offset {
            return None;
        }
        let mut isr = self.isr.clone();
        isr.push(replica);
        Some(isr)
    }

    /// The ISR without the members that have not been caught up for
    /// `lag_max_ms`, when there are such members. None while another
    /// change is pending.
    pub fn shrink(&self, me: i32, now_ms: i64, lag_max_ms: i64) -> Option<Vec<i32>> {
        if self.role != Role::Leader
            || self.pending_isr.is_some()
            || now_ms < self.isr_retry_after_ms
        {
            return None;
        }
        let out_of_sync: Vec<i32> = self
            .isr
            .iter()
            .copied()
            .filter(|r| *r != me)
            .filter(|r| {
                self.followers
                    .get(r)
                    .is_none_or(|f| now_ms - f.last_caught_up_ms > lag_max_ms)
            })
            .collect();
        if out_of_sync.is_empty() {
            return None;
        }
        let isr: Vec<i32> = self
            .isr
            .iter()
            .copied()
            .filter(|r| !out_of_sync.contains(r))
            .collect();
        (!isr.is_empty()).then_some(isr)
    }

    /// The controller's answer to an ISR change: the partition as
    /// committed, or an error (the change is dropped and may be asked
    /// again).
    pub fn isr_answered(&mut self, answer: Result<(i32, i32, Vec<i32>), ErrorCode>, now_ms: i64) {
        self.pending_isr = None;
        match answer {
            Ok((leader_epoch, partition_epoch, isr))
                if leader_epoch == self.leader_epoch && partition_epoch > self.partition_epoch =>
            {
                self.partition_epoch = partition_epoch;
                self.isr = isr;
            }
            Ok(_) => {}
            Err(_) => self.isr_retry_after_ms = now_ms + ISR_RETRY_BACKOFF_MS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: i32 = 1;

    fn view(leader: i32, epoch: i32, pepoch: i32, isr: &[i32]) -> PartitionView {
        PartitionView {
            leader,
            leader_epoch: epoch,
            partition_epoch: pepoch,
            replicas: vec![1, 2, 3],
            isr: isr.to_vec(),
            offline_replicas: vec![],
        }
    }

    fn leader(leo: i64) -> PartitionReplication {
        PartitionReplication::new(ME, [0; 16], &view(ME, 1, 1, &[1, 2, 3]), leo, 1_000)
    }

    /// The seed's scenario: the leader at LEO 10, one follower at 8 and
    /// one at 10: the HW is 8, so offsets 8 and 9 stay invisible; the slow
    /// follower leaves the ISR after replica.lag.time.max.ms, and the HW
    /// moves to 10.
    #[test]
    fn a_slow_follower_holds_the_high_watermark_until_it_leaves_the_isr() {
        let mut s = leader(0);
        assert_eq!(s.high_watermark(ME, 10), None, "positions unknown");
        s.record_fetch(2, 8, 10, 2_000).unwrap();
        s.record_fetch(3, 10, 10, 2_000).unwrap();
        assert_eq!(s.high_watermark(ME, 10), Some(8));
        // Follower 2 keeps fetching but never catches up.
        s.record_fetch(2, 8, 10, 20_000).unwrap();
        assert_eq!(s.shrink(ME, 20_000, 30_000), None, "within the lag");
        s.record_fetch(3, 10, 10, 31_500).unwrap();
        let isr = s.shrink(ME, 31_500, 30_000).expect("follower 2 is out");
        assert_eq!(isr, vec![1, 3]);
        s.pending_isr = Some(isr.clone());
        // Until the shrink is committed, 2 still holds the HW.
        assert_eq!(s.high_watermark(ME, 10), Some(8));
        s.isr_answered(Ok((1, 2, isr)), 31_500);
        assert_eq!(s.high_watermark(ME, 10), Some(10));
    }

    #[test]
    fn a_follower_is_caught_up_as_of_its_previous_fetch() {
        let mut s = leader(0);
        s.record_fetch(2, 5, 10, 1_000).unwrap();
        // At 10 (the LEO the last fetch saw), though the leader is at 12.
        s.record_fetch(2, 10, 12, 5_000).unwrap();
        assert_eq!(s.followers[&2].last_caught_up_ms, 1_000);
        s.record_fetch(2, 12, 12, 6_000).unwrap();
        assert_eq!(s.followers[&2].last_caught_up_ms, 6_000);
    }

    #[test]
    fn an_expansion_waits_for_the_high_watermark_and_the_epoch_start() {
        let mut s = PartitionReplication::new(ME, [0; 16], &view(ME, 3, 7, &[1, 2]), 40, 0);
        s.record_fetch(2, 50, 50, 10).unwrap();
        s.record_fetch(3, 30, 50, 10).unwrap();
        let live = |_| true;
        assert_eq!(s.expansion(3, 50, 20, live), None, "behind the HW");
        s.record_fetch(3, 50, 50, 20).unwrap();
        assert_eq!(s.expansion(3, 50, 20, |r| r != 3), None, "not live");
        assert_eq!(s.expansion(3, 50, 20, live), Some(vec![1, 2, 3]));
        // Refused (stale metadata): not asked again before the backoff.
        let mut refused = s.clone();
        refused.pending_isr = Some(vec![1, 2, 3]);
        refused.isr_answered(Err(ErrorCode::InvalidUpdateVersion), 20);
        assert_eq!(refused.expansion(3, 50, 21, live), None);
        assert_eq!(
            refused.expansion(3, 50, 20 + ISR_RETRY_BACKOFF_MS, live),
            Some(vec![1, 2, 3])
        );
        s.pending_isr = Some(vec![1, 2, 3]);
        // The pending member counts for the HW.
        s.record_fetch(3, 45, 60, 30).unwrap();
        s.record_fetch(2, 60, 60, 30).unwrap();
        assert_eq!(s.high_watermark(ME, 60), Some(45));
    }

    #[test]
    fn a_fetch_from_a_replica_outside_the_assignment_or_on_a_follower_is_refused() {
        let mut s = leader(0);
        assert_eq!(
            s.record_fetch(9, 0, 0, 0),
            Err(ErrorCode::NotLeaderOrFollower)
        );
        let mut f = PartitionReplication::new(ME, [0; 16], &view(2, 1, 1, &[1, 2, 3]), 0, 0);
        assert_eq!(f.role, Role::Follower { leader: 2 });
        assert_eq!(
            f.record_fetch(3, 0, 0, 0),
            Err(ErrorCode::NotLeaderOrFollower)
        );
    }

    #[test]
    fn transitions_follow_the_leader_and_its_epoch() {
        let mut s = leader(5);
        assert_eq!(
            s.apply(ME, &view(ME, 1, 2, &[1, 2]), 5, 0),
            Transition::Unchanged
        );
        assert_eq!(s.isr, vec![1, 2]);
        assert_eq!(
            s.apply(ME, &view(2, 2, 3, &[1, 2]), 5, 0),
            Transition::BecameFollower
        );
        assert_eq!(
            s.apply(ME, &view(ME, 3, 4, &[1, 2]), 9, 0),
            Transition::BecameLeader
        );
        assert_eq!(s.epoch_start_offset, 9);
        assert_eq!(
            s.apply(ME, &view(-1, 4, 5, &[1]), 9, 0),
            Transition::BecameOffline
        );
    }

    #[test]
    fn the_same_metadata_again_keeps_a_change_in_flight_pending() {
        let mut s = PartitionReplication::new(ME, [0; 16], &view(ME, 1, 4, &[1, 2]), 0, 0);
        s.pending_isr = Some(vec![1, 2, 3]);
        s.apply(ME, &view(ME, 1, 4, &[1, 2]), 0, 0);
        assert_eq!(s.pending_isr, Some(vec![1, 2, 3]), "asked against epoch 4");
        s.apply(ME, &view(ME, 1, 5, &[1, 2, 3]), 0, 0);
        assert_eq!((s.pending_isr.clone(), s.partition_epoch), (None, 5));
    }

    #[test]
    fn the_leader_is_never_removed_and_the_isr_never_empties() {
        let s = PartitionReplication::new(ME, [0; 16], &view(ME, 1, 1, &[1]), 0, 0);
        assert_eq!(s.shrink(ME, i64::MAX / 2, 10), None);
    }
}
