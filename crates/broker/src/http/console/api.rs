//! The console's JSON API: overview, cluster, groups and broker config
//! (topics are in [`super::topics`], transactions in
//! [`super::transactions`]). Everything is read from the broker's
//! live state on each request.

use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;
use weir_group::{DescribedGroup, OffsetFetchGroup};
use weir_protocol::codec::Decodable;
use weir_protocol::messages::ConsumerProtocolAssignment;

use super::query::{Query, percent_decode};
use super::{ConsoleError, ConsoleResponse, json_response, records, topics, transactions};
use crate::broker::Broker;
use crate::configdef;
use crate::topic_config::ConfigSource;

/// Routes `rest` (the path after `/api/`, without a leading slash).
pub fn route(b: &Arc<Broker>, rest: &str, query: &str) -> Result<ConsoleResponse, ConsoleError> {
    let segments: Vec<&str> = rest.split('/').collect();
    let no_query = |q: &str| Query::parse(q, &[]).map(|_| ());
    match segments.as_slice() {
        ["overview"] => {
            no_query(query)?;
            Ok(json_response(200, &overview(b)))
        }
        ["cluster"] => {
            no_query(query)?;
            Ok(json_response(200, &cluster(b)))
        }
        ["topics"] => {
            no_query(query)?;
            Ok(json_response(200, &topics::topics(b)))
        }
        ["topics", name] => {
            no_query(query)?;
            let name = percent_decode(name, false)?;
            Ok(json_response(200, &topics::topic_detail(b, &name)?))
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
        ["transactions"] => {
            no_query(query)?;
            Ok(json_response(200, &transactions::transactions(b)?))
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
    /// The active controller's id, -1 when none is known.
    pub controller_id: i32,
    /// Live brokers in the cluster (1 on a single node).
    pub brokers: usize,
    /// Topics of the cluster (as `/api/topics` lists them).
    pub topics: usize,
    /// Partitions whose log this broker holds.
    pub partitions: usize,
    /// Local partitions whose log failed to open.
    pub offline_partitions: usize,
    pub size_bytes: u64,
    pub groups: usize,
}

fn overview(b: &Broker) -> Overview {
    let (host, port) = b.advertised();
    let logs = b.replicas.logs().logs();
    let snap = b.cluster();
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
        controller_id: snap.controller_id,
        brokers: snap.brokers.len(),
        topics: topics::count(b, &snap),
        partitions: logs.len(),
        offline_partitions: b.replicas.logs().failed_logs().len(),
        size_bytes: logs.iter().map(|l| l.size_bytes()).sum(),
        groups: b
            .groups()
            .map(|g| g.lock().list_groups(&[], &[]).len())
            .unwrap_or(0),
    }
}

// ----------------------------------------------------------------- cluster

/// A live broker of the cluster.
#[derive(Serialize)]
pub struct BrokerEntry {
    pub id: i32,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
    pub is_controller: bool,
    /// The broker serving this console.
    pub is_self: bool,
}

#[derive(Serialize)]
pub struct ClusterView {
    /// This broker's id.
    pub node_id: i32,
    /// The active controller's id, -1 when none is known.
    pub controller_id: i32,
    /// Live brokers, by id.
    pub brokers: Vec<BrokerEntry>,
}

fn cluster(b: &Broker) -> ClusterView {
    let snap = b.cluster();
    let me = b.config.node_id;
    let mut brokers: Vec<BrokerEntry> = snap
        .brokers
        .iter()
        .map(|n| BrokerEntry {
            id: n.id,
            host: n.host.clone(),
            port: n.port,
            rack: n.rack.clone(),
            is_controller: n.id == snap.controller_id,
            is_self: n.id == me,
        })
        .collect();
    brokers.sort_by_key(|n| n.id);
    ClusterView {
        node_id: me,
        controller_id: snap.controller_id,
        brokers,
    }
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
            let log = b.replicas.log(&f.topic, f.partition);
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
pub struct ConfigEntry {
    pub name: String,
    pub value: Option<String>,
    /// Kafka's source names: `DYNAMIC_TOPIC_CONFIG`, `STATIC_BROKER_CONFIG`,
    /// `DEFAULT_CONFIG`.
    pub source: &'static str,
    pub sensitive: bool,
}

pub(super) fn source_name(s: ConfigSource) -> &'static str {
    s.name()
}

pub(super) fn masked(value: Option<String>, sensitive: bool) -> Option<String> {
    if sensitive { None } else { value }
}

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
