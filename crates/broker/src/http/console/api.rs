//! The console's JSON API: overview, cluster, groups and broker config
//! (topics are in [`super::topics`], transactions in
//! [`super::transactions`]). Everything is read from the broker's
//! live state on each request.

use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;
use weir_group::{ConsumerGroupDescription, DescribedGroup, OffsetFetchGroup, Partitions};
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
            .map(|g| g.list_groups(&[], &[]).len())
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
    /// `None` when there is no assignment or it is not decodable. For a
    /// consumer-protocol (KIP-848) group: the partitions the member owns.
    pub assignment: Option<Vec<AssignedPartitions>>,
    pub assignment_bytes: usize,
    /// Consumer-protocol groups only: the member's epoch, its
    /// reconciliation state, what the assignor gave it, its subscription.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member_epoch: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member_state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_assignment: Option<Vec<AssignedPartitions>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscribed_topic_names: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscribed_topic_regex: Option<String>,
}

#[derive(Serialize)]
pub struct GroupDetail {
    pub group_id: String,
    /// `classic` or `consumer` (KIP-848).
    pub group_type: &'static str,
    pub state: &'static str,
    /// Consumer-protocol groups only: group and assignment epochs, the
    /// server-side assignor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_epoch: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assignment_epoch: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assignor: Option<String>,
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
    /// `classic` or `consumer` (KIP-848).
    pub group_type: &'static str,
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

/// One group as the console shows it, read under one coordinator lock:
/// DescribeGroups' view, and ConsumerGroupDescribe's for a
/// consumer-protocol (KIP-848) group (DescribeGroups reports those Dead).
struct Described {
    classic: DescribedGroup,
    consumer: Option<ConsumerGroupDescription>,
    generation: Option<i32>,
    partition: i32,
    offsets: Vec<GroupOffset>,
}

impl Described {
    fn group_type(&self) -> &'static str {
        if self.consumer.is_some() {
            "consumer"
        } else {
            "classic"
        }
    }

    fn state(&self) -> &'static str {
        match &self.consumer {
            Some(c) => c.state,
            None => self.classic.state.name(),
        }
    }

    fn members(&self) -> usize {
        match &self.consumer {
            Some(c) => c.members.len(),
            None => self.classic.members.len(),
        }
    }

    fn protocol_type(&self) -> String {
        match &self.consumer {
            Some(_) => "consumer".to_string(),
            None => self.classic.protocol_type.clone(),
        }
    }

    fn protocol(&self) -> String {
        match &self.consumer {
            Some(c) => c.assignor_name.clone(),
            None => self.classic.protocol.clone(),
        }
    }
}

/// Describes one group and fetches its offsets under its shard's lock.
fn describe(b: &Broker, id: &str) -> Result<Described, ConsoleError> {
    let groups = b.groups().ok_or(ConsoleError::CoordinatorUnavailable)?;
    let (described, consumer, generation, partition, fetched) = {
        let coord = groups.lock(id);
        let ids = [id.to_string()];
        let described = coord.describe_groups(&ids).into_iter().next();
        // GROUP_ID_NOT_FOUND for a classic or unknown group
        let consumer = coord
            .describe_consumer_groups(&ids)
            .into_iter()
            .next()
            .filter(|c| c.error.is_ok());
        let fetched = coord
            .fetch_offsets(&[OffsetFetchGroup {
                group_id: id.to_string(),
                partitions: None,
            }])
            .into_iter()
            .next();
        let generation = coord.group_state(id).map(|(_, g)| g);
        (
            described,
            consumer,
            generation,
            coord.partition_for(id),
            fetched,
        )
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
    Ok(Described {
        generation: match &consumer {
            Some(c) => Some(c.group_epoch),
            None => generation,
        },
        classic: described,
        consumer,
        partition,
        offsets: group_offsets(b, fetched),
    })
}

/// A consumer-protocol assignment by topic name (a topic id this broker
/// does not know is shown as the id).
fn named_partitions(b: &Broker, p: &Partitions) -> Vec<AssignedPartitions> {
    let cluster = b.cluster();
    p.iter()
        .map(|(id, parts)| AssignedPartitions {
            topic: cluster
                .topics()
                .find(|t| t.id == id.0)
                .map(|t| t.name.clone())
                .unwrap_or_else(|| id.to_string()),
            partitions: parts.iter().copied().collect(),
        })
        .collect()
}

fn group_detail(b: &Broker, id: &str) -> Result<GroupDetail, ConsoleError> {
    let d = describe(b, id)?;
    if !d.classic.found && d.consumer.is_none() && d.offsets.is_empty() {
        return Err(ConsoleError::NotFound {
            what: "group",
            name: id.to_string(),
        });
    }
    let (group_type, state, protocol_type, protocol) =
        (d.group_type(), d.state(), d.protocol_type(), d.protocol());
    let members = match &d.consumer {
        Some(c) => c
            .members
            .iter()
            .map(|m| GroupMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                assignment: Some(named_partitions(b, &m.assignment)),
                assignment_bytes: 0,
                member_epoch: Some(m.member_epoch),
                member_state: Some(format!("{:?}", m.state)),
                target_assignment: Some(named_partitions(b, &m.target_assignment)),
                subscribed_topic_names: Some(m.subscribed_topic_names.clone()),
                subscribed_topic_regex: m.subscribed_topic_regex.clone(),
            })
            .collect(),
        None => {
            let consumer = d.classic.protocol_type == "consumer";
            d.classic
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
                    member_epoch: None,
                    member_state: None,
                    target_assignment: None,
                    subscribed_topic_names: None,
                    subscribed_topic_regex: None,
                })
                .collect()
        }
    };
    Ok(GroupDetail {
        group_id: d.classic.group_id,
        group_type,
        state,
        group_epoch: d.consumer.as_ref().map(|c| c.group_epoch),
        assignment_epoch: d.consumer.as_ref().map(|c| c.assignment_epoch),
        assignor: d.consumer.as_ref().map(|c| c.assignor_name.clone()),
        protocol_type,
        protocol,
        generation: d.generation,
        coordinator_partition: d.partition,
        members,
        total_lag: d.offsets.iter().filter_map(|o| o.lag).sum(),
        offsets: d.offsets,
        now_ms: b.now_ms(),
    })
}

fn groups(b: &Broker) -> Result<Groups, ConsoleError> {
    let coordinator = b.groups().ok_or(ConsoleError::CoordinatorUnavailable)?;
    let mut listed = coordinator.list_groups(&[], &[]);
    listed.sort_by(|x, y| x.group_id.cmp(&y.group_id));
    let mut out = Vec::with_capacity(listed.len());
    for g in listed {
        // a group can disappear between listing and describing
        let Ok(d) = describe(b, &g.group_id) else {
            continue;
        };
        out.push(GroupSummary {
            group_type: d.group_type(),
            state: d.state(),
            protocol_type: d.protocol_type(),
            protocol: d.protocol(),
            members: d.members(),
            partitions: d.offsets.len(),
            total_lag: d.offsets.iter().filter_map(|o| o.lag).sum(),
            group_id: g.group_id,
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
