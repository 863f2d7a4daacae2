//! The controller's metrics, as Kafka's controller reports them:
//! `ActiveControllerCount`, `FencedBrokerCount`, `OfflinePartitionsCount`,
//! leader elections and preferred-election runs.
//!
//! The two counters are kept by this node's [`QuorumController`] and count
//! only what it committed while active (so the cluster's totals are the
//! sum over nodes); the gauges are read from this node's image when a
//! [`ControllerMetricsSnapshot`] is taken, so every node can report them
//! and only `active_controller` tells which node is the one to trust.
//!
//! [`QuorumController`]: crate::QuorumController

use std::sync::atomic::{AtomicU64, Ordering};

use weir_metadata::{MetadataImage, NO_LEADER, NO_LEADER_CHANGE};
use weir_protocol::metadata_record::MetadataRecord;

/// The counters a [`QuorumController`](crate::QuorumController) updates.
#[derive(Debug, Default)]
pub struct ControllerCounters {
    leader_elections: AtomicU64,
    preferred_election_runs: AtomicU64,
}

impl ControllerCounters {
    /// Counts the elections in a batch that committed: every
    /// `PartitionChangeRecord` naming a new leader (not a partition left
    /// without one).
    pub(crate) fn committed(&self, records: &[MetadataRecord]) {
        let elections = records
            .iter()
            .filter(|r| {
                matches!(r, MetadataRecord::PartitionChange(c)
                    if c.leader != NO_LEADER_CHANGE && c.leader != NO_LEADER)
            })
            .count() as u64;
        if elections > 0 {
            self.leader_elections
                .fetch_add(elections, Ordering::Relaxed);
        }
    }

    /// Counts one preferred election run (an ElectLeaders of the preferred
    /// type or a periodic rebalance check) on the active controller.
    pub(crate) fn preferred_run(&self) {
        self.preferred_election_runs.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(
        &self,
        image: &MetadataImage,
        active: bool,
    ) -> ControllerMetricsSnapshot {
        ControllerMetricsSnapshot {
            active_controller: u64::from(active),
            fenced_brokers: image.brokers().filter(|b| b.fenced).count() as u64,
            offline_partitions: image
                .topics()
                .flat_map(|t| t.partitions.values())
                .filter(|p| p.leader == NO_LEADER)
                .count() as u64,
            leader_elections_total: self.leader_elections.load(Ordering::Relaxed),
            preferred_election_runs_total: self.preferred_election_runs.load(Ordering::Relaxed),
        }
    }
}

/// The controller metrics at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ControllerMetricsSnapshot {
    /// 1 on the active controller, else 0 (`ActiveControllerCount`).
    pub active_controller: u64,
    /// Registered brokers that are fenced (`FencedBrokerCount`).
    pub fenced_brokers: u64,
    /// Partitions without a leader (`OfflinePartitionsCount`).
    pub offline_partitions: u64,
    /// Leaders elected in batches this node committed as the active
    /// controller: failover, unfencing, controlled shutdown, ElectLeaders
    /// and rebalance (a counter).
    pub leader_elections_total: u64,
    /// Preferred election runs this node made as the active controller:
    /// ElectLeaders requests of the preferred type and periodic rebalance
    /// checks (a counter).
    pub preferred_election_runs_total: u64,
}
