//! Server-side assignors of the consumer protocol: `uniform` and `range`.
//!
//! An assignor is a pure function from the members' subscriptions, the
//! partition counts of the subscribed topics and the previous target
//! assignment to the new target assignment. Every partition of a topic
//! that at least one member subscribes to is assigned to exactly one
//! member subscribed to it.
//!
//! * `uniform` (the default): balanced and sticky. When every member
//!   subscribes to the same topics each gets `⌊P/n⌋` or `⌈P/n⌉`
//!   partitions, keeping as many of its previous ones as that allows.
//!   With different subscriptions each partition goes to its previous
//!   owner if still subscribed, else to the least loaded subscribed member,
//!   then one pass moves partitions from members more than one above the
//!   least loaded eligible member.
//! * `range`: per topic, the subscribed members sorted by member id get
//!   consecutive ranges, the first `P mod n` one partition more.

use std::collections::{BTreeMap, BTreeSet};

use weir_protocol::Uuid;

use super::types::Partitions;

/// A server-side assignor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Assignor {
    Uniform,
    Range,
}

impl Assignor {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "uniform" => Some(Assignor::Uniform),
            "range" => Some(Assignor::Range),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Assignor::Uniform => "uniform",
            Assignor::Range => "range",
        }
    }

    /// The target assignment of every member of `subscriptions` (members
    /// without partitions get an empty map).
    pub fn assign(
        self,
        subscriptions: &BTreeMap<String, BTreeSet<Uuid>>,
        partition_counts: &BTreeMap<Uuid, i32>,
        previous: &BTreeMap<String, Partitions>,
    ) -> BTreeMap<String, Partitions> {
        match self {
            Assignor::Uniform => uniform(subscriptions, partition_counts, previous),
            Assignor::Range => range(subscriptions, partition_counts),
        }
    }
}

type Tp = (Uuid, i32);

fn to_partitions(list: &[Tp]) -> Partitions {
    let mut out = Partitions::new();
    for &(t, p) in list {
        out.entry(t).or_default().insert(p);
    }
    out
}

fn all_partitions(topics: &BTreeSet<Uuid>, counts: &BTreeMap<Uuid, i32>) -> Vec<Tp> {
    topics
        .iter()
        .filter_map(|t| counts.get(t).map(|&n| (*t, n)))
        .flat_map(|(t, n)| (0..n.max(0)).map(move |p| (t, p)))
        .collect()
}

fn range(
    subscriptions: &BTreeMap<String, BTreeSet<Uuid>>,
    counts: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Partitions> {
    let mut out: BTreeMap<String, Partitions> = subscriptions
        .keys()
        .map(|m| (m.clone(), Partitions::new()))
        .collect();
    for (&topic, &n) in counts {
        // BTreeMap order: members sorted by id.
        let members: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, s)| s.contains(&topic))
            .map(|(m, _)| m)
            .collect();
        if members.is_empty() || n <= 0 {
            continue;
        }
        let k = members.len() as i32;
        let (per, extra) = (n / k, n % k);
        for (i, m) in members.into_iter().enumerate() {
            let i = i as i32;
            let start = i * per + i.min(extra);
            let len = per + i32::from(i < extra);
            if len > 0
                && let Some(a) = out.get_mut(m)
            {
                a.entry(topic).or_default().extend(start..start + len);
            }
        }
    }
    out
}

fn uniform(
    subscriptions: &BTreeMap<String, BTreeSet<Uuid>>,
    counts: &BTreeMap<Uuid, i32>,
    previous: &BTreeMap<String, Partitions>,
) -> BTreeMap<String, Partitions> {
    let mut subs = subscriptions.values();
    let homogeneous = subs.next().is_none_or(|first| subs.all(|s| s == first));
    let lists = if homogeneous {
        uniform_homogeneous(subscriptions, counts, previous)
    } else {
        uniform_general(subscriptions, counts, previous)
    };
    lists
        .into_iter()
        .map(|(m, l)| (m, to_partitions(&l)))
        .collect()
}

/// The previous partitions of `member` that still exist and that it still
/// subscribes to.
fn still_valid(
    member: &str,
    topics: &BTreeSet<Uuid>,
    counts: &BTreeMap<Uuid, i32>,
    previous: &BTreeMap<String, Partitions>,
) -> Vec<Tp> {
    let Some(prev) = previous.get(member) else {
        return Vec::new();
    };
    prev.iter()
        .filter(|(t, _)| topics.contains(t))
        .flat_map(|(t, ps)| {
            let n = counts.get(t).copied().unwrap_or(0);
            ps.iter().filter(move |&&p| p < n).map(move |&p| (*t, p))
        })
        .collect()
}

fn uniform_homogeneous(
    subscriptions: &BTreeMap<String, BTreeSet<Uuid>>,
    counts: &BTreeMap<Uuid, i32>,
    previous: &BTreeMap<String, Partitions>,
) -> BTreeMap<String, Vec<Tp>> {
    let mut out: BTreeMap<String, Vec<Tp>> = BTreeMap::new();
    let Some(topics) = subscriptions.values().next() else {
        return out;
    };
    let all = all_partitions(topics, counts);
    let n = subscriptions.len();
    let (base, mut extra) = (all.len() / n, all.len() % n);
    let retained: BTreeMap<&String, Vec<Tp>> = subscriptions
        .keys()
        .map(|m| (m, still_valid(m, topics, counts, previous)))
        .collect();
    // Quotas: the `extra` members allowed one more partition are those
    // that held more than `base` already (fewest moves), then by id.
    let mut quota: BTreeMap<&String, usize> = subscriptions.keys().map(|m| (m, base)).collect();
    let mut by_retained: Vec<&String> = subscriptions.keys().collect();
    by_retained.sort_by_key(|m| std::cmp::Reverse(retained[m].len()));
    for m in by_retained {
        if extra > 0 && retained[m].len() > base {
            *quota.entry(m).or_default() += 1;
            extra -= 1;
        }
    }
    for m in subscriptions.keys() {
        if extra > 0 && quota[m] == base {
            *quota.entry(m).or_default() += 1;
            extra -= 1;
        }
    }
    let mut taken: BTreeSet<Tp> = BTreeSet::new();
    for m in subscriptions.keys() {
        let keep: Vec<Tp> = retained[m].iter().copied().take(quota[m]).collect();
        taken.extend(keep.iter().copied());
        out.insert(m.clone(), keep);
    }
    for tp in all {
        if taken.contains(&tp) {
            continue;
        }
        // The member furthest below its quota (ties: lowest id).
        let pick = subscriptions
            .keys()
            .filter(|m| out[*m].len() < quota[m])
            .min_by_key(|m| out[*m].len() as i64 - quota[m] as i64);
        if let Some(m) = pick
            && let Some(list) = out.get_mut(m)
        {
            list.push(tp);
        }
    }
    out
}

fn uniform_general(
    subscriptions: &BTreeMap<String, BTreeSet<Uuid>>,
    counts: &BTreeMap<Uuid, i32>,
    previous: &BTreeMap<String, Partitions>,
) -> BTreeMap<String, Vec<Tp>> {
    let topics: BTreeSet<Uuid> = subscriptions.values().flatten().copied().collect();
    let all = all_partitions(&topics, counts);
    let mut owner: BTreeMap<Tp, String> = BTreeMap::new();
    for m in subscriptions.keys() {
        for tp in still_valid(m, &subscriptions[m], counts, previous) {
            owner.entry(tp).or_insert_with(|| m.clone());
        }
    }
    let mut load: BTreeMap<&String, usize> = subscriptions.keys().map(|m| (m, 0)).collect();
    for m in owner.values() {
        if let Some((k, _)) = subscriptions.get_key_value(m) {
            *load.entry(k).or_default() += 1;
        }
    }
    let least_loaded = |load: &BTreeMap<&String, usize>, t: &Uuid| -> Option<String> {
        subscriptions
            .iter()
            .filter(|(_, s)| s.contains(t))
            .min_by_key(|(m, _)| load[m])
            .map(|(m, _)| m.clone())
    };
    for tp in &all {
        if owner.contains_key(tp) {
            continue;
        }
        if let Some(m) = least_loaded(&load, &tp.0) {
            if let Some((k, _)) = subscriptions.get_key_value(&m) {
                *load.entry(k).or_default() += 1;
            }
            owner.insert(*tp, m);
        }
    }
    // One balancing pass: move a partition away from a member more than
    // one partition above the least loaded member that could take it.
    for tp in &all {
        let Some(cur) = owner.get(tp).cloned() else {
            continue;
        };
        let Some(best) = least_loaded(&load, &tp.0) else {
            continue;
        };
        let (Some((ck, _)), Some((bk, _))) = (
            subscriptions.get_key_value(&cur),
            subscriptions.get_key_value(&best),
        ) else {
            continue;
        };
        if load[ck] > load[bk] + 1 {
            *load.entry(ck).or_default() -= 1;
            *load.entry(bk).or_default() += 1;
            owner.insert(*tp, best);
        }
    }
    let mut out: BTreeMap<String, Vec<Tp>> = subscriptions
        .keys()
        .map(|m| (m.clone(), Vec::new()))
        .collect();
    for (tp, m) in owner {
        if let Some(list) = out.get_mut(&m) {
            list.push(tp);
        }
    }
    out
}
