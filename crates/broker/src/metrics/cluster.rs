//! The `weir_cluster_*` gauges: the cluster as this broker's snapshot
//! shows it (`Broker::cluster()`, the one the Kafka handlers use).

use super::text::{Kind, TextWriter};
use crate::broker::Broker;
use crate::cluster::ClusterSnapshot;

/// The cluster gauges of one snapshot, as this broker (`me`) sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterGauges {
    pub brokers: usize,
    pub controller_id: i32,
    pub active_controller: bool,
    /// Partitions of the whole cluster without a leader.
    pub offline_partitions: usize,
    /// Partitions `me` leads whose ISR is smaller than their replica set.
    pub under_replicated_partitions: usize,
    /// Partitions `me` leads.
    pub leader_partitions: usize,
}

impl ClusterGauges {
    pub fn of(snap: &ClusterSnapshot, me: i32) -> ClusterGauges {
        let mut g = ClusterGauges {
            brokers: snap.brokers.len(),
            controller_id: snap.controller_id,
            active_controller: snap.controller_id == me,
            offline_partitions: 0,
            under_replicated_partitions: 0,
            leader_partitions: 0,
        };
        for p in snap.topics().flat_map(|t| &t.partitions) {
            if p.leader < 0 {
                g.offline_partitions += 1;
            } else if p.leader == me {
                g.leader_partitions += 1;
                if p.isr.len() < p.replicas.len() {
                    g.under_replicated_partitions += 1;
                }
            }
        }
        g
    }
}

/// The `weir_cluster_*` families.
pub fn render(w: &mut TextWriter, b: &Broker) {
    let g = ClusterGauges::of(&b.cluster(), b.config.node_id);
    let gauges = [
        (
            "weir_cluster_brokers",
            "Live brokers in the cluster, as this broker's metadata shows them.",
            g.brokers as i128,
        ),
        (
            "weir_cluster_controller_id",
            "Id of the active controller, -1 when none is known.",
            i128::from(g.controller_id),
        ),
        (
            "weir_cluster_active_controller",
            "1 when this node is the active controller, else 0.",
            i128::from(g.active_controller),
        ),
        (
            "weir_cluster_offline_partitions",
            "Partitions of the whole cluster without a leader.",
            g.offline_partitions as i128,
        ),
        (
            "weir_cluster_under_replicated_partitions",
            "Partitions this broker leads whose ISR is smaller than their replica set.",
            g.under_replicated_partitions as i128,
        ),
        (
            "weir_cluster_leader_partitions",
            "Partitions this broker leads.",
            g.leader_partitions as i128,
        ),
    ];
    for (name, help, v) in gauges {
        w.family(name, Kind::Gauge, help);
        w.sample_int(name, &[], v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{BrokerNode, PartitionView, TopicView};

    fn part(leader: i32, replicas: &[i32], isr: &[i32]) -> PartitionView {
        PartitionView {
            leader,
            leader_epoch: 1,
            partition_epoch: 0,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            offline_replicas: replicas
                .iter()
                .copied()
                .filter(|r| !isr.contains(r))
                .collect(),
        }
    }

    #[test]
    fn cluster_gauges_count_from_one_snapshot() {
        let node = |id| BrokerNode {
            id,
            host: "h".into(),
            port: 1,
            rack: None,
        };
        let topic = |name: &str, partitions| TopicView {
            name: name.into(),
            id: [name.len() as u8; 16],
            partitions,
        };
        let snap = ClusterSnapshot::new(
            vec![node(1), node(2)],
            2,
            vec![
                topic(
                    "a",
                    vec![
                        part(1, &[1, 2, 3], &[1, 2]), // led here, under-replicated
                        part(1, &[1, 2], &[1, 2]),    // led here
                        part(2, &[2, 3], &[2]),       // under-replicated elsewhere
                        part(-1, &[3], &[]),          // offline
                    ],
                ),
                topic("bb", vec![part(-1, &[3, 4], &[]), part(1, &[1], &[1])]),
            ],
        );
        let g = ClusterGauges::of(&snap, 1);
        assert_eq!(
            g,
            ClusterGauges {
                brokers: 2,
                controller_id: 2,
                active_controller: false,
                offline_partitions: 2,
                under_replicated_partitions: 1,
                leader_partitions: 3,
            }
        );
        assert!(ClusterGauges::of(&snap, 2).active_controller);
        assert_eq!(ClusterGauges::of(&snap, 2).under_replicated_partitions, 1);
        let empty = ClusterGauges::of(&ClusterSnapshot::default(), 1);
        assert_eq!((empty.brokers, empty.offline_partitions), (0, 0));
    }
}
