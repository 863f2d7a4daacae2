//! Consumer groups of the consumer protocol (KIP-848), beside the classic
//! ones.
//!
//! The broker computes the assignment: members send ConsumerGroupHeartbeat
//! with their subscription (topic names or a regex) and the partitions they
//! own; the coordinator keeps
//!
//! * the **group epoch**, bumped when a member joins, leaves or changes its
//!   subscription, or the subscribed topics' metadata changes;
//! * the **target assignment** of the assignment epoch, recomputed by the
//!   group's server-side assignor (`uniform` or `range`, see [`assignor`])
//!   whenever the group epoch is ahead of it;
//! * per member its **current assignment** and member epoch, reconciled
//!   towards the target one heartbeat at a time ([`reconcile`]): a member
//!   first revokes what it must give away, and a partition is added to a
//!   member only once no other member owns it.
//!
//! Everything is persisted as Kafka's KIP-848 records in
//! `__consumer_offsets` ([`records`]) and rebuilt from them on load.
//!
//! A classic group with members becomes a consumer group when a member of
//! the consumer protocol joins, and back when the last one leaves
//! (`group.consumer.migration.policy`); members of the classic protocol
//! inside a consumer group keep using JoinGroup, SyncGroup and Heartbeat
//! (`migration.rs`).
//!
//! Invariants of [`ConsumerGroup`] (checked by `check` in debug builds
//! after every change):
//! * `owners` maps exactly the partitions in some member's `assigned` or
//!   `pending_revocation` to that member: no partition has two owners;
//! * `target` has entries only for members;
//! * `assignment_epoch <= epoch`.

pub mod assignor;
mod describe;
pub(crate) mod heartbeat;
pub(crate) mod migration;
pub mod reconcile;
pub mod records;
mod replay;
pub mod types;

use std::collections::{BTreeMap, BTreeSet};

use weir_protocol::Uuid;

use crate::config::GroupConfig;
use assignor::Assignor;
use reconcile::CurrentAssignment;
use records::{MemberMetadata, SubscribedTopic};
use types::{MemberState, Partitions, TopicsImage};

/// The member epoch of a static member that left temporarily.
pub const LEAVE_STATIC_EPOCH: i32 = -2;
/// The member epoch of a member leaving for good.
pub const LEAVE_EPOCH: i32 = -1;

/// Bytes a compiled subscription regex may use.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Compiles a SubscribedTopicRegex as Java's `Pattern.matches` uses it
/// (the whole topic name must match).
pub(crate) fn compile_regex(re: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(&format!("^(?:{re})$"))
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
}

#[derive(Clone, Debug)]
pub(crate) struct ConsumerMember {
    pub id: String,
    pub meta: MemberMetadata,
    pub current: CurrentAssignment,
    /// `meta.subscribed_topic_regex` compiled (None if absent or invalid).
    pub regex: Option<regex::Regex>,
    /// Removed (fenced) when no heartbeat arrives by then.
    pub session_deadline_ms: i64,
    /// Set while the member must revoke partitions: fenced if it has not
    /// by then.
    pub rebalance_deadline_ms: Option<i64>,
    /// A classic member told to rejoin (or that joined and must sync):
    /// fenced if it has not by then (Kafka's join and sync timeouts).
    pub classic_deadline_ms: Option<i64>,
}

impl ConsumerMember {
    pub fn new(id: String) -> Self {
        Self {
            id,
            meta: MemberMetadata {
                rebalance_timeout_ms: -1,
                ..Default::default()
            },
            current: CurrentAssignment::default(),
            regex: None,
            session_deadline_ms: i64::MAX,
            rebalance_deadline_ms: None,
            classic_deadline_ms: None,
        }
    }

    /// A member of the classic protocol (JoinGroup/SyncGroup/Heartbeat).
    pub fn is_classic(&self) -> bool {
        self.meta.classic.is_some()
    }

    /// The session timeout: the classic member's own, else the group's.
    pub fn session_timeout_ms(&self, cfg: &GroupConfig) -> i64 {
        i64::from(
            self.meta
                .classic
                .as_ref()
                .map_or(cfg.consumer_session_timeout_ms, |c| c.session_timeout_ms),
        )
    }

    pub fn set_meta(&mut self, meta: MemberMetadata) {
        if meta.subscribed_topic_regex != self.meta.subscribed_topic_regex {
            self.regex = meta
                .subscribed_topic_regex
                .as_deref()
                .filter(|r| !r.is_empty())
                .and_then(|r| compile_regex(r).ok());
        }
        self.meta = meta;
    }

    /// The names of the topics this member subscribes to that exist:
    /// its topic names plus the non-internal topics its regex matches.
    pub fn topics(&self, image: &TopicsImage) -> BTreeSet<String> {
        let mut out: BTreeSet<String> = self
            .meta
            .subscribed_topic_names
            .iter()
            .filter(|t| image.get(t).is_some())
            .cloned()
            .collect();
        if let Some(re) = &self.regex {
            out.extend(
                image
                    .iter()
                    .filter(|(name, info)| !info.internal && re.is_match(name))
                    .map(|(name, _)| name.clone()),
            );
        }
        out
    }

    /// As [`ConsumerMember::topics`], but limited to the topics already
    /// known to the group (when no image is at hand, e.g. in timers).
    fn known_topics(&self, known: &BTreeMap<String, SubscribedTopic>) -> BTreeSet<String> {
        known
            .keys()
            .filter(|t| {
                self.meta.subscribed_topic_names.contains(t)
                    || self.regex.as_ref().is_some_and(|re| re.is_match(t))
            })
            .cloned()
            .collect()
    }
}

/// A consumer-protocol group (the membership part; offsets stay in the
/// enclosing `Group`).
#[derive(Clone, Debug, Default)]
pub(crate) struct ConsumerGroup {
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ConsumerMember>,
    /// Target assignment of `assignment_epoch` by member id.
    pub target: BTreeMap<String, Partitions>,
    /// The subscribed topics that exist, by name: what the target
    /// assignment was computed from (ConsumerGroupPartitionMetadata).
    pub subscribed: BTreeMap<String, SubscribedTopic>,
    /// The member owning each partition (assigned or pending revocation).
    pub owners: BTreeMap<(Uuid, i32), String>,
}

fn flatten(p: &Partitions) -> impl Iterator<Item = (Uuid, i32)> + '_ {
    p.iter()
        .flat_map(|(t, ps)| ps.iter().map(move |&p| (*t, p)))
}

impl ConsumerGroup {
    /// Kafka's consumer group states.
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.epoch > self.assignment_epoch {
            "Assigning"
        } else if self.members.values().all(|m| {
            m.current.state == MemberState::Stable
                && m.current.member_epoch == self.assignment_epoch
        }) {
            "Stable"
        } else {
            "Reconciling"
        }
    }

    pub fn static_member(&self, instance_id: &str) -> Option<&String> {
        self.members
            .values()
            .find(|m| m.meta.instance_id.as_deref() == Some(instance_id))
            .map(|m| &m.id)
    }

    /// Replaces the current assignment of `member`, keeping `owners` in
    /// step. On the request path (`strict`) a partition owned by another
    /// member is a bug (debug assertion); on replay the later record wins.
    pub fn set_current(&mut self, member: &str, next: CurrentAssignment, strict: bool) {
        let Some(m) = self.members.get_mut(member) else {
            return;
        };
        let old = std::mem::replace(&mut m.current, next.clone());
        for tp in flatten(&old.assigned).chain(flatten(&old.pending_revocation)) {
            if self.owners.get(&tp).is_some_and(|o| o == member) {
                self.owners.remove(&tp);
            }
        }
        for tp in flatten(&next.assigned).chain(flatten(&next.pending_revocation)) {
            let previous = self.owners.insert(tp, member.to_string());
            if strict {
                debug_assert!(
                    previous.as_ref().is_none_or(|p| p == member),
                    "partition {tp:?} given to {member} while {previous:?} owns it"
                );
            }
            // Replaying a log that contradicts itself: the later record
            // wins and the earlier owner loses the partition.
            if let Some(other) = previous.filter(|p| p != member)
                && let Some(o) = self.members.get_mut(&other)
            {
                for set in [&mut o.current.assigned, &mut o.current.pending_revocation] {
                    if let Some(ps) = set.get_mut(&tp.0) {
                        ps.remove(&tp.1);
                        if ps.is_empty() {
                            set.remove(&tp.0);
                        }
                    }
                }
            }
        }
    }

    /// Removes a member with its target and its ownership.
    pub fn remove_member(&mut self, member: &str) {
        self.set_current(member, CurrentAssignment::default(), false);
        self.members.remove(member);
        self.target.remove(member);
    }

    /// The subscribed topics that exist in `image`.
    pub fn compute_subscribed(&self, image: &TopicsImage) -> BTreeMap<String, SubscribedTopic> {
        let mut out = BTreeMap::new();
        for m in self.members.values() {
            for name in m.topics(image) {
                if let Some(info) = image.get(&name) {
                    out.insert(
                        name.clone(),
                        SubscribedTopic {
                            id: info.id,
                            name,
                            partitions: info.partitions,
                        },
                    );
                }
            }
        }
        out
    }

    /// The known subscribed topics some member still subscribes to.
    pub fn still_subscribed(&self) -> BTreeMap<String, SubscribedTopic> {
        let mut keep = BTreeSet::new();
        for m in self.members.values() {
            keep.extend(m.known_topics(&self.subscribed));
        }
        self.subscribed
            .iter()
            .filter(|(n, _)| keep.contains(*n))
            .map(|(n, t)| (n.clone(), t.clone()))
            .collect()
    }

    /// The assignor most members ask for (ties: the first configured
    /// one among them), else the configured default.
    pub fn assignor(&self, cfg: &GroupConfig) -> Assignor {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = m.meta.server_assignor.as_deref() {
                *votes.entry(a).or_default() += 1;
            }
        }
        let best = cfg
            .consumer_assignors
            .iter()
            .filter_map(|a| votes.get(a.as_str()).map(|&v| (a, v)))
            .fold(None::<(&String, usize)>, |best, (a, v)| match best {
                Some((_, bv)) if bv >= v => best,
                _ => Some((a, v)),
            });
        best.map(|(a, _)| a.as_str())
            .or(cfg.consumer_assignors.first().map(String::as_str))
            .and_then(Assignor::parse)
            .unwrap_or(Assignor::Uniform)
    }

    /// Recomputes the target assignment for `epoch` from the members'
    /// subscriptions to `self.subscribed`; returns the members whose target
    /// changed.
    pub fn compute_target(&mut self, cfg: &GroupConfig) -> Vec<String> {
        let subs: BTreeMap<String, BTreeSet<Uuid>> = self
            .members
            .values()
            .map(|m| {
                let ids = m
                    .known_topics(&self.subscribed)
                    .iter()
                    .filter_map(|n| self.subscribed.get(n).map(|t| t.id))
                    .collect();
                (m.id.clone(), ids)
            })
            .collect();
        let counts: BTreeMap<Uuid, i32> = self
            .subscribed
            .values()
            .map(|t| (t.id, t.partitions))
            .collect();
        let new = self.assignor(cfg).assign(&subs, &counts, &self.target);
        let changed = new
            .iter()
            .filter(|(m, t)| self.target.get(*m) != Some(*t))
            .map(|(m, _)| m.clone())
            .collect();
        self.target = new;
        changed
    }

    /// Checks the invariants (debug builds).
    pub fn check(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        let mut seen: BTreeMap<(Uuid, i32), &str> = BTreeMap::new();
        for m in self.members.values() {
            for tp in flatten(&m.current.assigned).chain(flatten(&m.current.pending_revocation)) {
                let other = seen.insert(tp, &m.id);
                assert!(
                    other.is_none(),
                    "partition {tp:?} owned by {} and {other:?}",
                    m.id
                );
                assert_eq!(
                    self.owners.get(&tp).map(String::as_str),
                    Some(m.id.as_str())
                );
            }
        }
        assert_eq!(seen.len(), self.owners.len(), "stale owners entries");
        assert!(self.target.keys().all(|m| self.members.contains_key(m)));
        assert!(self.assignment_epoch <= self.epoch);
    }
}
