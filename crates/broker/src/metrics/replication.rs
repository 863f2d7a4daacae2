//! Replication metrics, with Kafka's meanings under weir's names:
//!
//! | weir | Kafka |
//! | --- | --- |
//! | `weir_under_replicated_partitions` | `ReplicaManager.UnderReplicatedPartitions` |
//! | `weir_under_min_isr_partitions` | `ReplicaManager.UnderMinIsrPartitionCount` |
//! | `weir_partition_replica_lag_messages` / `_lag_ms` | the leader's view of each follower (Kafka keeps it per replica, without a metric) |
//! | `weir_isr_shrinks_total` / `weir_isr_expands_total` | `ReplicaManager.IsrShrinksPerSec` / `IsrExpandsPerSec` |
//! | `weir_replication_bytes_in_total` / `_out_total` | `BrokerTopicMetrics.ReplicationBytesInPerSec` / `ReplicationBytesOutPerSec` |
//!
//! The counters ([`ReplicationCounters`]) are kept by the
//! [`ReplicaManager`](crate::replica_manager::ReplicaManager) and added to
//! where the events happen: the controller's answer to an ISR change, a
//! follower's append, a leader's answer to a follower's fetch. The gauges
//! are computed at scrape time from the partitions' replication states;
//! [`follower_lags`] is also what the console shows.

use std::sync::atomic::{AtomicU64, Ordering};

use super::text::{Kind, TextWriter};
use crate::broker::Broker;
use crate::replication::state::{PartitionReplication, Role};

/// Replication event counters since start.
#[derive(Debug, Default)]
pub struct ReplicationCounters {
    /// Committed ISR changes of partitions led here that removed members.
    pub isr_shrinks: AtomicU64,
    /// Committed ISR changes of partitions led here that added members.
    pub isr_expands: AtomicU64,
    /// Record bytes appended as a follower.
    pub bytes_in: AtomicU64,
    /// Record bytes in this leader's answers to follower fetches.
    pub bytes_out: AtomicU64,
}

impl ReplicationCounters {
    /// Counts a committed ISR change from `before` to `after` (Kafka counts
    /// one per committed AlterPartition): a shrink when a member left, an
    /// expansion when one joined; a change doing both counts as both, an
    /// unchanged ISR (a refused or stale answer) as neither.
    pub fn record_isr_change(&self, before: &[i32], after: &[i32]) {
        if before.iter().any(|r| !after.contains(r)) {
            self.isr_shrinks.fetch_add(1, Ordering::Relaxed);
        }
        if after.iter().any(|r| !before.contains(r)) {
            self.isr_expands.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts `bytes` of records appended as a follower.
    pub fn record_bytes_in(&self, bytes: usize) {
        self.bytes_in.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Counts `bytes` of records sent in an answer to a follower's fetch.
    pub fn record_bytes_out(&self, bytes: usize) {
        self.bytes_out.fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

/// A follower's progress as its leader sees it. Unknown values are None:
/// the position of a follower that has not fetched since this broker
/// became leader, the catch-up time of one not caught up since then.
/// The console's JSON carries it as is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct FollowerLag {
    pub replica: i32,
    pub in_isr: bool,
    /// Its log end offset (the offset of its last fetch).
    pub log_end_offset: Option<i64>,
    /// The leader's log end offset minus the follower's.
    pub lag_messages: Option<i64>,
    /// Milliseconds since it was last caught up (fetched at the leader's
    /// log end offset).
    pub lag_ms: Option<i64>,
}

/// The followers of a partition this broker leads, by broker id, with the
/// leader at `leader_leo` and the time `now_ms`; empty when it does not
/// lead.
pub fn follower_lags(s: &PartitionReplication, leader_leo: i64, now_ms: i64) -> Vec<FollowerLag> {
    if s.role != Role::Leader {
        return Vec::new();
    }
    s.followers
        .iter()
        .map(|(&replica, f)| {
            let leo = (f.leo >= 0).then_some(f.leo);
            FollowerLag {
                replica,
                in_isr: s.isr.contains(&replica),
                log_end_offset: leo,
                lag_messages: leo.map(|leo| (leader_leo - leo).max(0)),
                // 0: not caught up since this broker became leader
                lag_ms: (f.last_caught_up_ms > 0).then(|| (now_ms - f.last_caught_up_ms).max(0)),
            }
        })
        .collect()
}

/// A partition this broker leads, as the replication gauges count it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedPartition {
    pub topic: String,
    pub partition: i32,
    pub replicas: usize,
    pub isr: usize,
    /// The topic's `min.insync.replicas`.
    pub min_isr: i64,
    pub followers: Vec<FollowerLag>,
}

impl LedPartition {
    /// Kafka's rule: a replica outside the ISR.
    pub fn under_replicated(&self) -> bool {
        self.isr < self.replicas
    }

    /// Fewer in-sync replicas than `min.insync.replicas`: acks=all
    /// produces are refused (NOT_ENOUGH_REPLICAS), whatever the
    /// replication factor, as in Kafka.
    pub fn under_min_isr(&self) -> bool {
        i64::try_from(self.isr).unwrap_or(i64::MAX) < self.min_isr
    }
}

/// The partitions whose log is here and which this broker leads: by their
/// replication state (the ISR as the controller last committed it), or,
/// for a partition without one (a single node), by the cluster snapshot.
pub fn led_partitions(b: &Broker) -> Vec<LedPartition> {
    let me = b.config.node_id;
    let snap = b.cluster();
    let now = b.now_ms();
    let config = b.effective_config();
    let min_isr_def = crate::configdef::topic_def("min.insync.replicas");
    let mut min_isr_of = std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for log in b.replicas.logs().logs() {
        let tp = log.topic_partition();
        let (replicas, isr, followers) = match b.replicas.replication_state(tp) {
            Some(s) if s.role == Role::Leader => (
                s.replicas.len(),
                s.isr.len(),
                follower_lags(&s, log.log_end_offset(), now),
            ),
            Some(_) => continue,
            None => match snap.partition(&tp.topic, tp.partition) {
                Some(v) if v.leader == me => (v.replicas.len(), v.isr.len(), Vec::new()),
                _ => continue,
            },
        };
        let min_isr = *min_isr_of.entry(tp.topic.clone()).or_insert_with(|| {
            let (Some(t), Some(def)) = (b.topic(&tp.topic), min_isr_def) else {
                return 1;
            };
            let r = crate::topic_config::resolve(&config, &t.configs, def);
            r.value.as_deref().and_then(|v| v.parse().ok()).unwrap_or(1)
        });
        out.push(LedPartition {
            topic: tp.topic.clone(),
            partition: tp.partition,
            replicas,
            isr,
            min_isr,
            followers,
        });
    }
    out.sort_by(|x, y| (&x.topic, x.partition).cmp(&(&y.topic, y.partition)));
    out
}

/// Reads one lag of a follower.
type LagOf = fn(&FollowerLag) -> Option<i64>;

/// The replication families.
pub fn render(w: &mut TextWriter, b: &Broker) {
    let led = led_partitions(b);
    let count = |f: fn(&LedPartition) -> bool| led.iter().filter(|p| f(p)).count() as i128;
    let gauges = [
        (
            "weir_under_replicated_partitions",
            "Partitions this broker leads whose ISR is smaller than their replica set (by this leader's replication state).",
            count(LedPartition::under_replicated),
        ),
        (
            "weir_under_min_isr_partitions",
            "Partitions this broker leads whose ISR is smaller than the topic's min.insync.replicas (acks=all produces are refused).",
            count(LedPartition::under_min_isr),
        ),
    ];
    for (name, help, v) in gauges {
        w.family(name, Kind::Gauge, help);
        w.sample_int(name, &[], v);
    }
    let lag_families: [(&str, &str, LagOf); 2] = [
        (
            "weir_partition_replica_lag_messages",
            "Leader side: the leader's log end offset minus the follower's, per follower whose position is known.",
            |f| f.lag_messages,
        ),
        (
            "weir_partition_replica_lag_ms",
            "Leader side: milliseconds since the follower was last caught up to the leader's log end offset, per follower caught up since this broker became leader.",
            |f| f.lag_ms,
        ),
    ];
    for (name, help, value) in lag_families {
        w.family(name, Kind::Gauge, help);
        for p in &led {
            let partition = p.partition.to_string();
            for f in &p.followers {
                if let Some(v) = value(f) {
                    let replica = f.replica.to_string();
                    let labels = [
                        ("topic", p.topic.as_str()),
                        ("partition", partition.as_str()),
                        ("replica", replica.as_str()),
                    ];
                    w.sample_int(name, &labels, i128::from(v));
                }
            }
        }
    }
    let c = b.replicas.replication_counters();
    let counters = [
        (
            "weir_isr_shrinks_total",
            "Committed ISR changes of partitions led here that removed replicas.",
            &c.isr_shrinks,
        ),
        (
            "weir_isr_expands_total",
            "Committed ISR changes of partitions led here that added replicas.",
            &c.isr_expands,
        ),
        (
            "weir_replication_bytes_in_total",
            "Record bytes appended by this broker as a follower.",
            &c.bytes_in,
        ),
        (
            "weir_replication_bytes_out_total",
            "Record bytes this broker sent as a leader in answers to follower fetches.",
            &c.bytes_out,
        ),
    ];
    for (name, help, v) in counters {
        w.family(name, Kind::Counter, help);
        w.sample_int(name, &[], i128::from(v.load(Ordering::Relaxed)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::PartitionView;

    const ME: i32 = 1;

    fn leading(isr: &[i32]) -> PartitionReplication {
        let view = PartitionView {
            leader: ME,
            leader_epoch: 4,
            partition_epoch: 1,
            replicas: vec![1, 2, 3],
            isr: isr.to_vec(),
            offline_replicas: vec![],
        };
        PartitionReplication::new(ME, [0; 16], &view, 0, 1_000)
    }

    #[test]
    fn an_isr_change_counts_as_shrink_expand_both_or_neither() {
        let c = ReplicationCounters::default();
        let counts = || {
            (
                c.isr_shrinks.load(Ordering::Relaxed),
                c.isr_expands.load(Ordering::Relaxed),
            )
        };
        c.record_isr_change(&[1, 2, 3], &[1, 3]);
        assert_eq!(counts(), (1, 0));
        c.record_isr_change(&[1, 3], &[1, 3, 2]);
        assert_eq!(counts(), (1, 1));
        c.record_isr_change(&[1, 2], &[2, 1]);
        assert_eq!(counts(), (1, 1), "same members, another order");
        c.record_isr_change(&[1, 2], &[1, 3]);
        assert_eq!(counts(), (2, 2));
    }

    #[test]
    fn lags_are_known_once_a_follower_fetched_or_caught_up() {
        // 2 in the ISR (caught up as of leadership, at 1 000), 3 not
        let mut s = leading(&[1, 2]);
        let lags = follower_lags(&s, 10, 4_000);
        assert_eq!(
            lags,
            vec![
                FollowerLag {
                    replica: 2,
                    in_isr: true,
                    log_end_offset: None,
                    lag_messages: None,
                    lag_ms: Some(3_000),
                },
                FollowerLag {
                    replica: 3,
                    in_isr: false,
                    log_end_offset: None,
                    lag_messages: None,
                    lag_ms: None,
                },
            ]
        );
        s.record_fetch(2, 10, 10, 5_000).unwrap();
        s.record_fetch(3, 4, 10, 5_000).unwrap();
        let lags = follower_lags(&s, 12, 6_500);
        assert_eq!(
            (lags[0].lag_messages, lags[0].lag_ms),
            (Some(2), Some(1_500))
        );
        assert_eq!(
            (lags[1].log_end_offset, lags[1].lag_messages),
            (Some(4), Some(8))
        );
        assert_eq!(lags[1].lag_ms, None, "never caught up");
    }

    #[test]
    fn a_follower_has_no_lags() {
        let view = PartitionView {
            leader: 2,
            leader_epoch: 4,
            partition_epoch: 1,
            replicas: vec![1, 2],
            isr: vec![1, 2],
            offline_replicas: vec![],
        };
        let s = PartitionReplication::new(ME, [0; 16], &view, 0, 0);
        assert!(follower_lags(&s, 10, 10).is_empty());
    }

    #[test]
    fn under_replicated_and_under_min_isr_are_counted_apart() {
        let p = |replicas, isr, min_isr| LedPartition {
            topic: "t".into(),
            partition: 0,
            replicas,
            isr,
            min_isr,
            followers: vec![],
        };
        assert!(p(3, 2, 2).under_replicated() && !p(3, 2, 2).under_min_isr());
        assert!(p(3, 1, 2).under_min_isr());
        // one replica, min.insync.replicas=2: acks=all is refused
        assert!(!p(1, 1, 2).under_replicated() && p(1, 1, 2).under_min_isr());
        assert!(!p(3, 3, 3).under_replicated() && !p(3, 3, 3).under_min_isr());
    }
}
