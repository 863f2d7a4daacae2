//! The console's JSON API: overview, topics, groups and broker config.
//! Everything is read from the broker's live state on each request.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;
use weir_group::{DescribedGroup, OffsetFetchGroup};
use weir_protocol::codec::Decodable;
use weir_protocol::messages::ConsumerProtocolAssignment;
use weir_storage::Log;

use super::query::{Query, percent_decode};
use super::{ConsoleError, ConsoleResponse, json_response, records};
use crate::broker::Broker;
use crate::configdef;
use crate::groups::OFFSETS_TOPIC;
use crate::topic_config::{self, ConfigSource};

/// Routes `rest` (the path after `/api/`, without a leading slash).
pub fn route(b: &Arc<Broker>, rest: &str, query: &str) -> Result<ConsoleResponse, ConsoleError> {
    let segments: Vec<&str> = rest.split('/').collect();
    let no_query = |q: &str| Query::parse(q, &[]).map(|_| ());
    match segments.as_slice() {
        ["overview"] => {
            no_query(query)?;
            Ok(json_response(200, &overview(b)))
        }
        ["topics"] => {
            no_query(query)?;
            Ok(json_response(200, &topics(b)))
        }
        ["topics", name] => {
            no_query(query)?;
            let name = percent_decode(name, false)?;
            Ok(json_response(200, &topic_detail(b, &name)?))
        }
        ["groups"] => {
            no_query(query)?;
            Ok(json_response(200, &groups(b)?))
        }
        ["groups", id] => {
            no_query(query)?;
            let id = percent_decode(id, false)?;
            Ok(json_response(200, &group_detail(b, &id)?))
        }
        ["config"] => {
            no_query(query)?;
            Ok(json_response(200, &config(b)))
        }
        ["records"] => {
            let q = Query::parse(query, records::PARAMS)?;
            Ok(json_response(200, &records::read(b, &q)?))
        }
        _ => Err(ConsoleError::NoSuchPath(format!("/api/{rest}"))),
    }
}

// ---------------------------------------------------------------- overview

#[derive(Serialize)]
pub struct Overview {
    pub node_id: i32,
    pub cluster_id: String,
    pub version: &'static str,
    /// The Kafka listener clients are told to use (host:port).
    pub listener: String,
    pub data_dirs: Vec<String>,
    pub started_ms: i64,
    pub uptime_ms: u64,
    pub now_ms: i64,
    pub topics: usize,
    pub partitions: usize,
    pub offline_partitions: usize,
    pub size_bytes: u64,
    pub groups: usize,
}

fn overview(b: &Broker) -> Overview {
    let (host, port) = b.advertised();
    let logs = b.logs.logs();
    Overview {
        node_id: b.config.node_id,
        cluster_id: b.meta.cluster_id.clone(),
        version: env!("CARGO_PKG_VERSION"),
        listener: format!("{host}:{port}"),
        data_dirs: b
            .config
            .log_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect(),
        started_ms: b.metrics.start_time_unix_ms(),
        uptime_ms: u64::try_from(b.metrics.uptime().as_millis()).unwrap_or(u64::MAX),
        now_ms: b.now_ms(),
        topics: b.all_topics().len(),
        partitions: logs.len(),
        offline_partitions: b.logs.failed_logs().len(),
        size_bytes: logs.iter().map(|l| l.size_bytes()).sum(),
        groups: b
            .groups()
            .map(|g| g.lock().list_groups(&[], &[]).len())
            .unwrap_or(0),
    }
}

// ------------------------------------------------------------------ topics

/// One partition's offsets. Invariant of the log: `log_start_offset` ≤
/// `high_watermark` ≤ `log_end_offset`.
#[derive(Serialize)]
pub struct PartitionSummary {
    pub partition: i32,
    /// False when the partition's log failed to open (the other fields are
    /// then zero).
    pub online: bool,
    pub log_start_offset: i64,
    pub high_watermark: i64,
    pub log_end_offset: i64,
    pub size_bytes: u64,
    pub segment_count: usize,
    /// Segments found damaged: reads stop before the damage and answer
    /// CORRUPT_MESSAGE at it (docs/storage-format.md, "Damage").
    pub damage: Vec<DamageView>,
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
    pub partition_count: i32,
    /// Topic-level overrides only (defaults are in `/api/topics/{t}`).
    pub config_overrides: BTreeMap<String, String>,
    pub size_bytes: u64,
    pub segment_count: usize,
    pub partitions: Vec<PartitionSummary>,
}

fn partition_summary(log: Option<&Log>, partition: i32) -> PartitionSummary {
    match log {
        Some(log) => PartitionSummary {
            partition,
            online: true,
            log_start_offset: log.log_start_offset(),
            high_watermark: log.high_watermark(),
            log_end_offset: log.log_end_offset(),
            size_bytes: log.size_bytes(),
            segment_count: log.segment_count(),
            damage: log
                .damage()
                .into_iter()
                .map(|(base, d)| DamageView {
                    segment_base_offset: base,
                    position: d.position,
                    offset: d.offset,
                    reason: d.reason,
                })
                .collect(),
        },
        None => PartitionSummary {
            partition,
            online: false,
            log_start_offset: 0,
            high_watermark: 0,
            log_end_offset: 0,
            size_bytes: 0,
            segment_count: 0,
            damage: Vec::new(),
        },
    }
}

fn topic_summary(b: &Broker, t: &crate::topics::TopicMeta) -> TopicSummary {
    let partitions: Vec<PartitionSummary> = (0..t.partitions)
        .map(|p| partition_summary(b.log(&t.name, p).as_deref(), p))
        .collect();
    TopicSummary {
        name: t.name.clone(),
        id: t.id.clone(),
        internal: t.name == OFFSETS_TOPIC,
        partition_count: t.partitions,
        config_overrides: t.configs.clone(),
        size_bytes: partitions.iter().map(|p| p.size_bytes).sum(),
        segment_count: partitions.iter().map(|p| p.segment_count).sum(),
        partitions,
    }
}

#[derive(Serialize)]
pub struct Topics {
    pub topics: Vec<TopicSummary>,
}

fn topics(b: &Broker) -> Topics {
    let mut all = b.all_topics();
    // user topics first, by name; internal ones last
    all.sort_by(|x, y| (x.name == OFFSETS_TOPIC, &x.name).cmp(&(y.name == OFFSETS_TOPIC, &y.name)));
    Topics {
        topics: all.iter().map(|t| topic_summary(b, t)).collect(),
    }
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
pub struct ConfigEntry {
    pub name: String,
    pub value: Option<String>,
    /// Kafka's source names: `DYNAMIC_TOPIC_CONFIG`, `STATIC_BROKER_CONFIG`,
    /// `DEFAULT_CONFIG`.
    pub source: &'static str,
    pub sensitive: bool,
}

#[derive(Serialize)]
pub struct TopicDetail {
    pub name: String,
    pub id: String,
    pub internal: bool,
    pub partition_count: i32,
    pub size_bytes: u64,
    pub configs: Vec<ConfigEntry>,
    pub partitions: Vec<PartitionDetail>,
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

fn source_name(s: ConfigSource) -> &'static str {
    s.name()
}

fn masked(value: Option<String>, sensitive: bool) -> Option<String> {
    if sensitive { None } else { value }
}

fn topic_detail(b: &Broker, name: &str) -> Result<TopicDetail, ConsoleError> {
    let t = b.topic(name).ok_or_else(|| ConsoleError::NotFound {
        what: "topic",
        name: name.to_string(),
    })?;
    let partitions: Vec<PartitionDetail> = (0..t.partitions)
        .map(|p| {
            let log = b.log(&t.name, p);
            PartitionDetail {
                summary: partition_summary(log.as_deref(), p),
                dir: log.as_ref().map(|l| l.dir().display().to_string()),
                segments: log.as_deref().map(segments).unwrap_or_default(),
            }
        })
        .collect();
    let configs = topic_config::resolve_all(&b.effective_config(), &t.configs)
        .into_iter()
        .map(|r| ConfigEntry {
            name: r.def.name.to_string(),
            value: masked(r.value, r.def.sensitive),
            source: source_name(r.source),
            sensitive: r.def.sensitive,
        })
        .collect();
    Ok(TopicDetail {
        name: t.name.clone(),
        id: t.id.clone(),
        internal: t.name == OFFSETS_TOPIC,
        partition_count: t.partitions,
        size_bytes: partitions.iter().map(|p| p.summary.size_bytes).sum(),
        configs,
        partitions,
    })
}

// ------------------------------------------------------------------ groups

/// A committed offset with the partition's high watermark. Lag is
/// HW − committed (S9), `None` when the partition has no open log.
#[derive(Serialize)]
pub struct GroupOffset {
    pub topic: String,
    pub partition: i32,
    pub committed_offset: i64,
    pub metadata: String,
    pub high_watermark: Option<i64>,
    pub log_end_offset: Option<i64>,
    pub lag: Option<i64>,
}

#[derive(Serialize)]
pub struct AssignedPartitions {
    pub topic: String,
    pub partitions: Vec<i32>,
}

#[derive(Serialize)]
pub struct GroupMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// Decoded for the `consumer` protocol type while the group is Stable;
    /// `None` when there is no assignment or it is not decodable.
    pub assignment: Option<Vec<AssignedPartitions>>,
    pub assignment_bytes: usize,
}

#[derive(Serialize)]
pub struct GroupDetail {
    pub group_id: String,
    pub state: &'static str,
    pub protocol_type: String,
    pub protocol: String,
    pub generation: Option<i32>,
    pub coordinator_partition: i32,
    pub members: Vec<GroupMember>,
    pub offsets: Vec<GroupOffset>,
    /// Sum of the known per-partition lags.
    pub total_lag: i64,
    pub now_ms: i64,
}

#[derive(Serialize)]
pub struct GroupSummary {
    pub group_id: String,
    pub state: &'static str,
    pub protocol_type: String,
    pub protocol: String,
    pub members: usize,
    pub partitions: usize,
    pub total_lag: i64,
}

#[derive(Serialize)]
pub struct Groups {
    pub groups: Vec<GroupSummary>,
    pub now_ms: i64,
}

/// Decodes a consumer-protocol assignment (2-byte version, then the body).
fn decode_assignment(bytes: &Bytes) -> Option<Vec<AssignedPartitions>> {
    let version = i16::from_be_bytes(*bytes.first_chunk::<2>()?);
    let mut body = bytes.slice(2..);
    let a = ConsumerProtocolAssignment::decode(&mut body, version.clamp(0, 3)).ok()?;
    Some(
        a.assigned_partitions
            .into_iter()
            .map(|tp| AssignedPartitions {
                topic: tp.topic,
                partitions: tp.partitions,
            })
            .collect(),
    )
}

fn group_offsets(b: &Broker, fetched: Vec<weir_group::FetchedOffset>) -> Vec<GroupOffset> {
    fetched
        .into_iter()
        .filter(|f| f.offset >= 0)
        .map(|f| {
            let log = b.log(&f.topic, f.partition);
            let hw = log.as_ref().map(|l| l.high_watermark());
            GroupOffset {
                lag: hw.map(|hw| (hw - f.offset).max(0)),
                log_end_offset: log.as_ref().map(|l| l.log_end_offset()),
                high_watermark: hw,
                topic: f.topic,
                partition: f.partition,
                committed_offset: f.offset,
                metadata: f.metadata,
            }
        })
        .collect()
}

/// Describes one group and fetches its offsets under one coordinator lock.
fn describe(
    b: &Broker,
    id: &str,
) -> Result<(DescribedGroup, Option<i32>, i32, Vec<GroupOffset>), ConsoleError> {
    let groups = b.groups().ok_or(ConsoleError::CoordinatorUnavailable)?;
    let (described, generation, partition, fetched) = {
        let coord = groups.lock();
        let ids = [id.to_string()];
        let described = coord.describe_groups(&ids).into_iter().next();
        let fetched = coord
            .fetch_offsets(&[OffsetFetchGroup {
                group_id: id.to_string(),
                partitions: None,
            }])
            .into_iter()
            .next();
        let generation = coord.group_state(id).map(|(_, g)| g);
        (described, generation, coord.partition_for(id), fetched)
    };
    let described = described.ok_or_else(|| ConsoleError::NotFound {
        what: "group",
        name: id.to_string(),
    })?;
    if !described.error.is_ok() {
        return Err(ConsoleError::Group {
            group: id.to_string(),
            code: described.error.name(),
        });
    }
    let fetched = fetched.map(|f| f.partitions).unwrap_or_default();
    Ok((described, generation, partition, group_offsets(b, fetched)))
}

fn group_detail(b: &Broker, id: &str) -> Result<GroupDetail, ConsoleError> {
    let (d, generation, coordinator_partition, offsets) = describe(b, id)?;
    if !d.found && offsets.is_empty() {
        return Err(ConsoleError::NotFound {
            what: "group",
            name: id.to_string(),
        });
    }
    let consumer = d.protocol_type == "consumer";
    let members = d
        .members
        .into_iter()
        .map(|m| GroupMember {
            assignment: if consumer && !m.assignment.is_empty() {
                decode_assignment(&m.assignment)
            } else {
                None
            },
            assignment_bytes: m.assignment.len(),
            member_id: m.member_id,
            group_instance_id: m.group_instance_id,
            client_id: m.client_id,
            client_host: m.client_host,
        })
        .collect();
    Ok(GroupDetail {
        group_id: d.group_id,
        state: d.state.name(),
        protocol_type: d.protocol_type,
        protocol: d.protocol,
        generation,
        coordinator_partition,
        members,
        total_lag: offsets.iter().filter_map(|o| o.lag).sum(),
        offsets,
        now_ms: b.now_ms(),
    })
}

fn groups(b: &Broker) -> Result<Groups, ConsoleError> {
    let coordinator = b.groups().ok_or(ConsoleError::CoordinatorUnavailable)?;
    let mut listed = coordinator.lock().list_groups(&[], &[]);
    listed.sort_by(|x, y| x.group_id.cmp(&y.group_id));
    let mut out = Vec::with_capacity(listed.len());
    for g in listed {
        // a group can disappear between listing and describing
        let Ok((d, _, _, offsets)) = describe(b, &g.group_id) else {
            continue;
        };
        out.push(GroupSummary {
            group_id: g.group_id,
            state: d.state.name(),
            protocol_type: d.protocol_type,
            protocol: d.protocol,
            members: d.members.len(),
            partitions: offsets.len(),
            total_lag: offsets.iter().filter_map(|o| o.lag).sum(),
        });
    }
    Ok(Groups {
        groups: out,
        now_ms: b.now_ms(),
    })
}

// ------------------------------------------------------------------ config

#[derive(Serialize)]
pub struct BrokerConfigView {
    pub node_id: i32,
    pub configs: Vec<ConfigEntry>,
    /// Settings that were supplied but are not used by weir.
    pub unused: Vec<String>,
}

fn config(b: &Broker) -> BrokerConfigView {
    let cfg = b.effective_config();
    let configs = configdef::BROKER_CONFIGS
        .iter()
        .map(|d| {
            // dynamic for this broker, dynamic cluster-wide, static, default
            let set = cfg
                .layers()
                .into_iter()
                .find_map(|(layer, source)| layer.get(d.name).map(|v| (v.clone(), source)));
            let (value, source) = match set {
                Some((v, source)) => (Some(v), source),
                None => (cfg.value(d.name), ConfigSource::Default),
            };
            ConfigEntry {
                name: d.name.to_string(),
                value: masked(value, d.sensitive),
                source: source_name(source),
                sensitive: d.sensitive,
            }
        })
        .collect();
    BrokerConfigView {
        node_id: b.config.node_id,
        configs,
        unused: b.config.unused.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_protocol::codec::Encodable;
    use weir_protocol::messages::consumer_protocol_assignment::TopicPartition;

    #[test]
    fn assignment_round_trip_and_garbage() {
        let a = ConsumerProtocolAssignment {
            assigned_partitions: vec![TopicPartition {
                topic: "t".into(),
                partitions: vec![0, 2],
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut buf = vec![0u8, 1];
        let mut body = bytes::BytesMut::new();
        a.encode(&mut body, 1).unwrap();
        buf.extend_from_slice(&body);
        let got = decode_assignment(&Bytes::from(buf)).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].topic, "t");
        assert_eq!(got[0].partitions, vec![0, 2]);
        for bad in [&[][..], &[0][..], &[0, 1, 0xff, 0xff, 0xff, 0xff][..]] {
            assert!(decode_assignment(&Bytes::copy_from_slice(bad)).is_none());
        }
    }
}
