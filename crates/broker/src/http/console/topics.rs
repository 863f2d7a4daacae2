//! `/api/topics` and `/api/topics/{t}`: every topic of the cluster, each
//! partition with its leadership as the cluster snapshot says and, where
//! this broker holds the partition's log, its offsets, sizes and segments.
//!
//! A single node holds every partition. In a cluster a broker holds only
//! its replicas: the other partitions are listed with `local: false` and
//! null offsets, since their data lives on other brokers.
//!
//! A partition this broker leads with followers lists each follower's
//! progress as the leader sees it (the replication metrics' values).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use serde::Serialize;
use weir_protocol::Uuid;
use weir_storage::Log;

use super::ConsoleError;
use super::api::{ConfigEntry, masked, source_name};
use crate::broker::Broker;
use crate::cluster::{ClusterSnapshot, PartitionView, TopicView};
use crate::groups::OFFSETS_TOPIC;
use crate::metrics::replication::{FollowerLag, follower_lags};
use crate::replication::state::Role;
use crate::topic_config;
use crate::topics::TopicMeta;

/// One partition. Leadership comes from the cluster snapshot; offsets
/// from the local log. Invariant of a local log: `log_start_offset` ≤
/// `high_watermark` ≤ `log_end_offset`.
#[derive(Serialize)]
pub struct PartitionSummary {
    pub partition: i32,
    /// This broker holds the partition's log (open, or failed to open).
    /// When false the offsets, size and segment count are null.
    pub local: bool,
    /// False when the local log failed to open (the offsets are then zero).
    pub online: bool,
    /// -1 when the partition has no leader, or the snapshot does not know
    /// the partition.
    pub leader: i32,
    /// -1 when the snapshot does not know the partition.
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// Replicas on brokers that are not live.
    pub offline_replicas: Vec<i32>,
    pub log_start_offset: Option<i64>,
    pub high_watermark: Option<i64>,
    pub log_end_offset: Option<i64>,
    pub size_bytes: Option<u64>,
    pub segment_count: Option<usize>,
    /// Segments found damaged: reads stop before the damage and answer
    /// CORRUPT_MESSAGE at it (docs/storage-format.md, "Damage").
    pub damage: Vec<DamageView>,
    /// When this broker leads the partition in a cluster: each follower's
    /// progress as this leader sees it, by broker id. Null otherwise.
    pub followers: Option<Vec<FollowerLag>>,
}

/// Where one segment of a partition is damaged.
#[derive(Serialize)]
pub struct DamageView {
    pub segment_base_offset: i64,
    /// Byte position in the segment's `.log` file.
    pub position: u64,
    /// The first offset that cannot be read.
    pub offset: i64,
    pub reason: String,
}

#[derive(Serialize)]
pub struct TopicSummary {
    pub name: String,
    pub id: String,
    pub internal: bool,
    /// This broker hosts partitions of the topic (it is in its topic
    /// table); only then are its config overrides known here.
    pub hosted: bool,
    pub partition_count: i32,
    /// Topic-level overrides only (defaults are in `/api/topics/{t}`);
    /// empty when the topic is not hosted here.
    pub config_overrides: BTreeMap<String, String>,
    /// Sums over the local partitions.
    pub size_bytes: u64,
    pub segment_count: usize,
    pub partitions: Vec<PartitionSummary>,
}

#[derive(Serialize)]
pub struct Topics {
    pub topics: Vec<TopicSummary>,
}

/// One segment's files. Sizes are what the file system reports (an
/// active segment's index files are preallocated, so they look large until
/// the segment is rolled); `None` when the file is missing (for example
/// deleted by retention between listing and reading).
#[derive(Serialize)]
pub struct SegmentFiles {
    pub base_offset: i64,
    pub file: String,
    pub active: bool,
    pub log_bytes: Option<u64>,
    pub index_bytes: Option<u64>,
    pub timeindex_bytes: Option<u64>,
}

#[derive(Serialize)]
pub struct PartitionDetail {
    #[serde(flatten)]
    pub summary: PartitionSummary,
    pub dir: Option<String>,
    pub segments: Vec<SegmentFiles>,
}

#[derive(Serialize)]
pub struct TopicDetail {
    pub name: String,
    pub id: String,
    pub internal: bool,
    pub hosted: bool,
    pub partition_count: i32,
    pub size_bytes: u64,
    /// Resolved configs with their sources; empty when the topic is not
    /// hosted here (its overrides are not known to this broker).
    pub configs: Vec<ConfigEntry>,
    pub partitions: Vec<PartitionDetail>,
}

/// A topic as the console lists it: the snapshot's view and this
/// broker's table entry, either of which may be missing.
struct ClusterTopic<'a> {
    name: String,
    id: String,
    view: Option<&'a TopicView>,
    /// This broker's table entry, only when it is the same topic as the
    /// snapshot's (same id): logs of an older topic of the same name are
    /// about to be removed and are not shown as this one's.
    local: Option<TopicMeta>,
}

impl ClusterTopic<'_> {
    fn partition_count(&self) -> i32 {
        let viewed = self
            .view
            .map_or(0, |v| i32::try_from(v.partitions.len()).unwrap_or(i32::MAX));
        viewed.max(self.local.as_ref().map_or(0, |m| m.partitions))
    }

    fn leadership(&self, partition: i32) -> Option<&PartitionView> {
        self.view?.partitions.get(usize::try_from(partition).ok()?)
    }
}

/// Every topic in the snapshot or this broker's table, by name.
fn cluster_topics<'a>(b: &Broker, snap: &'a ClusterSnapshot) -> Vec<ClusterTopic<'a>> {
    let mut local: BTreeMap<String, TopicMeta> = b
        .all_topics()
        .into_iter()
        .map(|t| (t.name.clone(), t))
        .collect();
    let mut out: Vec<ClusterTopic<'a>> = snap
        .topics()
        .map(|v| ClusterTopic {
            name: v.name.clone(),
            id: Uuid(v.id).to_string(),
            view: Some(v),
            local: local.remove(&v.name).filter(|m| m.id_bytes() == v.id),
        })
        .collect();
    // in the table but not (yet) in the snapshot
    out.extend(local.into_values().map(|m| ClusterTopic {
        name: m.name.clone(),
        id: m.id.clone(),
        view: None,
        local: Some(m),
    }));
    out.sort_by(|x, y| (x.name == OFFSETS_TOPIC, &x.name).cmp(&(y.name == OFFSETS_TOPIC, &y.name)));
    out
}

/// The number of topics the console lists (for the overview).
pub fn count(b: &Broker, snap: &ClusterSnapshot) -> usize {
    cluster_topics(b, snap).len()
}

fn partition_summary(
    b: &Broker,
    t: &ClusterTopic<'_>,
    partition: i32,
    log: Option<&Log>,
    failed: bool,
) -> PartitionSummary {
    let (leader, leader_epoch, replicas, isr, offline_replicas) = match t.leadership(partition) {
        Some(p) => (
            p.leader,
            p.leader_epoch,
            p.replicas.clone(),
            p.isr.clone(),
            p.offline_replicas.clone(),
        ),
        None => (-1, -1, Vec::new(), Vec::new(), Vec::new()),
    };
    let mut s = PartitionSummary {
        partition,
        local: log.is_some() || failed,
        online: log.is_some() || !failed,
        leader,
        leader_epoch,
        replicas,
        isr,
        offline_replicas,
        log_start_offset: None,
        high_watermark: None,
        log_end_offset: None,
        size_bytes: None,
        segment_count: None,
        damage: Vec::new(),
        followers: None,
    };
    if let Some(log) = log {
        s.log_start_offset = Some(log.log_start_offset());
        s.high_watermark = Some(log.high_watermark());
        s.log_end_offset = Some(log.log_end_offset());
        s.size_bytes = Some(log.size_bytes());
        s.segment_count = Some(log.segment_count());
        s.damage = log
            .damage()
            .into_iter()
            .map(|(base, d)| DamageView {
                segment_base_offset: base,
                position: d.position,
                offset: d.offset,
                reason: d.reason,
            })
            .collect();
        s.followers = b
            .replicas
            .replication_state(log.topic_partition())
            .filter(|r| r.role == Role::Leader)
            .map(|r| follower_lags(&r, log.log_end_offset(), b.now_ms()));
    } else if failed {
        s.log_start_offset = Some(0);
        s.high_watermark = Some(0);
        s.log_end_offset = Some(0);
        s.size_bytes = Some(0);
        s.segment_count = Some(0);
    }
    s
}

/// The partitions of `t` whose local log failed to open.
fn failed_partitions(b: &Broker, t: &ClusterTopic<'_>) -> HashSet<i32> {
    if t.local.is_none() {
        return HashSet::new();
    }
    b.replicas
        .logs()
        .failed_logs()
        .into_keys()
        .filter(|tp| tp.topic == t.name)
        .map(|tp| tp.partition)
        .collect()
}

/// The local log of `t`'s partition, when it is this topic's.
fn local_log(b: &Broker, t: &ClusterTopic<'_>, partition: i32) -> Option<std::sync::Arc<Log>> {
    t.local.as_ref()?;
    b.replicas.log(&t.name, partition)
}

fn topic_summary(b: &Broker, t: &ClusterTopic<'_>) -> TopicSummary {
    let failed = failed_partitions(b, t);
    let partitions: Vec<PartitionSummary> = (0..t.partition_count())
        .map(|p| {
            let log = local_log(b, t, p);
            partition_summary(b, t, p, log.as_deref(), failed.contains(&p))
        })
        .collect();
    TopicSummary {
        name: t.name.clone(),
        id: t.id.clone(),
        internal: t.name == OFFSETS_TOPIC,
        hosted: t.local.is_some(),
        partition_count: t.partition_count(),
        config_overrides: t
            .local
            .as_ref()
            .map(|m| m.configs.clone())
            .unwrap_or_default(),
        size_bytes: partitions.iter().filter_map(|p| p.size_bytes).sum(),
        segment_count: partitions.iter().filter_map(|p| p.segment_count).sum(),
        partitions,
    }
}

pub fn topics(b: &Broker) -> Topics {
    let snap = b.cluster();
    Topics {
        topics: cluster_topics(b, &snap)
            .iter()
            .map(|t| topic_summary(b, t))
            .collect(),
    }
}

fn file_size(path: &Path) -> Option<u64> {
    std::fs::metadata(path).ok().map(|m| m.len())
}

fn segments(log: &Log) -> Vec<SegmentFiles> {
    let dir = log.dir();
    let bases = log.segment_base_offsets();
    let last = bases.last().copied();
    bases
        .into_iter()
        .map(|base| {
            let stem = format!("{base:020}");
            SegmentFiles {
                base_offset: base,
                file: format!("{stem}.log"),
                active: Some(base) == last,
                log_bytes: file_size(&dir.join(format!("{stem}.log"))),
                index_bytes: file_size(&dir.join(format!("{stem}.index"))),
                timeindex_bytes: file_size(&dir.join(format!("{stem}.timeindex"))),
            }
        })
        .collect()
}

pub fn topic_detail(b: &Broker, name: &str) -> Result<TopicDetail, ConsoleError> {
    let snap = b.cluster();
    let t = cluster_topics(b, &snap)
        .into_iter()
        .find(|t| t.name == name)
        .ok_or_else(|| ConsoleError::NotFound {
            what: "topic",
            name: name.to_string(),
        })?;
    let failed = failed_partitions(b, &t);
    let partitions: Vec<PartitionDetail> = (0..t.partition_count())
        .map(|p| {
            let log = local_log(b, &t, p);
            PartitionDetail {
                summary: partition_summary(b, &t, p, log.as_deref(), failed.contains(&p)),
                dir: log.as_ref().map(|l| l.dir().display().to_string()),
                segments: log.as_deref().map(segments).unwrap_or_default(),
            }
        })
        .collect();
    let configs = match &t.local {
        Some(meta) => topic_config::resolve_all(&b.effective_config(), &meta.configs)
            .into_iter()
            .map(|r| ConfigEntry {
                name: r.def.name.to_string(),
                value: masked(r.value, r.def.sensitive),
                source: source_name(r.source),
                sensitive: r.def.sensitive,
            })
            .collect(),
        None => Vec::new(),
    };
    Ok(TopicDetail {
        internal: t.name == OFFSETS_TOPIC,
        hosted: t.local.is_some(),
        partition_count: t.partition_count(),
        size_bytes: partitions.iter().filter_map(|p| p.summary.size_bytes).sum(),
        configs,
        partitions,
        name: t.name,
        id: t.id,
    })
}
