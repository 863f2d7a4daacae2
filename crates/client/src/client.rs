//! A cluster client: bootstrap, metadata, admin and data operations.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use weir_protocol::Uuid;
use weir_protocol::codec::{Message, Request};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use weir_protocol::messages::delete_topics_request::DeleteTopicState;
use weir_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use weir_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use weir_protocol::messages::metadata_request::MetadataRequestTopic;
use weir_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use weir_protocol::messages::{
    CreateTopicsRequest, DeleteTopicsRequest, FetchRequest, ListOffsetsRequest, MetadataRequest,
    MetadataResponse, ProduceRequest,
};

use crate::connection::Connection;
use crate::error::ClientError;
use crate::security::Security;

/// What the client knows of one partition.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionInfo {
    pub partition: i32,
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// Replicas on brokers that are not live (Metadata v5+; empty before).
    pub offline_replicas: Vec<i32>,
    pub error_code: i16,
}

/// What the client knows of one topic.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicInfo {
    pub name: String,
    pub topic_id: Uuid,
    pub is_internal: bool,
    pub error_code: i16,
    pub partitions: Vec<PartitionInfo>,
}

/// A topic to produce to, as [`Client::producer_topic`] found it: every
/// partition has a leader.
#[derive(Debug, Clone, PartialEq)]
pub struct ProducerTopic {
    pub info: TopicInfo,
    /// The topic did not exist and the broker created it (auto-creation).
    pub auto_created: bool,
}

/// Pause between metadata requests while a topic to produce to is not
/// ready (Kafka's `retry.backoff.ms` default).
const METADATA_RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// Records fetched from one partition.
#[derive(Debug, Clone)]
pub struct FetchedPartition {
    pub error_code: i16,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub last_stable_offset: i64,
    /// Raw record batches, as sent by the broker (may end with a partial
    /// batch, which readers skip).
    pub records: Bytes,
}

/// Timeouts and security of a [`Client`]'s connections.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// How long each step of opening a connection (TCP connect, the TLS
    /// handshake, ApiVersions, each SASL round trip) may take.
    pub connect_timeout: Duration,
    /// How long a request may wait for its response (fetches add their
    /// `max_wait_ms`).
    pub request_timeout: Duration,
    /// TLS and SASL, the same for every connection (bootstrap and
    /// brokers); PLAINTEXT by default.
    pub security: Security,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(30),
            security: Security::plaintext(),
        }
    }
}

/// A client for a Kafka-compatible cluster.
pub struct Client {
    client_id: String,
    bootstrap: Vec<String>,
    /// Node id → host:port, from the last metadata response.
    brokers: HashMap<i32, String>,
    /// Open connections by address.
    connections: HashMap<String, Connection>,
    controller: i32,
    cluster_id: Option<String>,
    options: ClientOptions,
}

impl Client {
    /// Connects to the first reachable bootstrap server
    /// (`host:port[,host:port…]`) with the default timeouts.
    pub async fn connect(bootstrap: &str, client_id: &str) -> Result<Client, ClientError> {
        Self::connect_with(bootstrap, client_id, ClientOptions::default()).await
    }

    /// Connects to the first reachable bootstrap server with `options`.
    pub async fn connect_with(
        bootstrap: &str,
        client_id: &str,
        options: ClientOptions,
    ) -> Result<Client, ClientError> {
        let mut client = Client {
            client_id: client_id.to_string(),
            bootstrap: bootstrap
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
            brokers: HashMap::new(),
            connections: HashMap::new(),
            controller: -1,
            cluster_id: None,
            options,
        };
        client.metadata(Some(&[]), false).await?;
        Ok(client)
    }

    /// The cluster id of the last metadata response.
    pub fn cluster_id(&self) -> Option<&str> {
        self.cluster_id.as_deref()
    }

    /// How long a request may wait for its response.
    pub fn request_timeout(&self) -> Duration {
        self.options.request_timeout
    }

    /// Known brokers, node id → address.
    pub fn brokers(&self) -> &HashMap<i32, String> {
        &self.brokers
    }

    async fn connection(&mut self, addr: &str) -> Result<&mut Connection, ClientError> {
        if !self.connections.contains_key(addr) {
            let conn = Connection::connect_with(addr, &self.client_id, &self.options).await?;
            self.connections.insert(addr.to_string(), conn);
        }
        Ok(self.connections.get_mut(addr).expect("inserted above"))
    }

    /// A connection to any broker (the bootstrap list, then known brokers).
    pub async fn any_connection(&mut self) -> Result<&mut Connection, ClientError> {
        let mut candidates: Vec<String> = self.connections.keys().cloned().collect();
        candidates.extend(self.bootstrap.iter().cloned());
        candidates.extend(self.brokers.values().cloned());
        let mut last_err = None;
        for addr in candidates {
            match self.connection(&addr).await {
                Ok(_) => return self.connection(&addr).await,
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| ClientError::Connect {
            addr: "<none>".into(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no bootstrap servers"),
        }))
    }

    /// A connection to broker `node_id`.
    pub async fn node_connection(&mut self, node_id: i32) -> Result<&mut Connection, ClientError> {
        match self.brokers.get(&node_id).cloned() {
            Some(addr) => self.connection(&addr).await,
            None => self.any_connection().await,
        }
    }

    /// A connection to the controller (for admin requests).
    pub async fn controller_connection(&mut self) -> Result<&mut Connection, ClientError> {
        let controller = self.controller;
        self.node_connection(controller).await
    }

    /// Fetches metadata for `topics` (`None` = all topics, `Some(&[])` = no
    /// topics, brokers only).
    pub async fn metadata(
        &mut self,
        topics: Option<&[String]>,
        auto_create: bool,
    ) -> Result<Vec<TopicInfo>, ClientError> {
        let req = MetadataRequest {
            topics: topics.map(|ts| {
                ts.iter()
                    .map(|t| MetadataRequestTopic {
                        name: Some(t.clone()),
                        ..Default::default()
                    })
                    .collect()
            }),
            allow_auto_topic_creation: auto_create,
            ..Default::default()
        };
        let resp: MetadataResponse = self.any_connection().await?.send(&req).await?;
        self.brokers = resp
            .brokers
            .iter()
            .map(|b| (b.node_id, format!("{}:{}", b.host, b.port)))
            .collect();
        self.controller = resp.controller_id;
        self.cluster_id = resp.cluster_id.clone();
        Ok(resp
            .topics
            .into_iter()
            .map(|t| TopicInfo {
                name: t.name.unwrap_or_default(),
                topic_id: t.topic_id,
                is_internal: t.is_internal,
                error_code: t.error_code,
                partitions: {
                    let mut ps: Vec<_> = t
                        .partitions
                        .into_iter()
                        .map(|p| PartitionInfo {
                            partition: p.partition_index,
                            leader: p.leader_id,
                            replicas: p.replica_nodes,
                            isr: p.isr_nodes,
                            offline_replicas: p.offline_replicas,
                            error_code: p.error_code,
                        })
                        .collect();
                    ps.sort_by_key(|p| p.partition);
                    ps
                },
            })
            .collect())
    }

    /// Metadata of one topic; an error if it does not exist.
    pub async fn topic(&mut self, topic: &str) -> Result<TopicInfo, ClientError> {
        let mut topics = self.metadata(Some(&[topic.to_string()]), false).await?;
        let t = topics
            .pop()
            .ok_or_else(|| ClientError::UnknownTopic(topic.to_string()))?;
        if t.error_code == ErrorCode::UnknownTopicOrPartition.code() {
            return Err(ClientError::UnknownTopic(topic.to_string()));
        }
        ClientError::check(t.error_code, || format!("metadata for {topic}"), None)?;
        Ok(t)
    }

    /// Metadata of a topic to produce to, got as Kafka's producer gets it:
    /// a missing topic is requested with `allow_auto_topic_creation`, so a
    /// broker with `auto.create.topics.enable=true` creates it, and metadata
    /// is asked again (every [`METADATA_RETRY_BACKOFF`]) while the topic
    /// reports a retriable error or a partition has no leader, for at most
    /// `max_block` (Kafka's `max.block.ms`).
    ///
    /// The first request does not allow auto-creation, so that a topic the
    /// broker creates is told apart from one that existed (the answer to an
    /// auto-creating request looks the same in both cases). A missing topic
    /// that the broker still reports unknown after being asked to create it
    /// is [`ClientError::AutoCreateDisabled`]: Kafka answers
    /// `LEADER_NOT_AVAILABLE` while a topic is being created, and
    /// `UNKNOWN_TOPIC_OR_PARTITION` when it does not auto-create.
    pub async fn producer_topic(
        &mut self,
        topic: &str,
        max_block: Duration,
    ) -> Result<ProducerTopic, ClientError> {
        let deadline = tokio::time::Instant::now() + max_block;
        let names = [topic.to_string()];
        // Whether requests ask the broker to create the topic, and whether
        // one of those answers showed it did (or is doing so).
        let mut auto_create = false;
        let mut auto_created = false;
        loop {
            let info = self
                .metadata(Some(&names), auto_create)
                .await?
                .into_iter()
                .find(|t| t.name == topic);
            let code = info
                .as_ref()
                .map_or(ErrorCode::UnknownTopicOrPartition, |t| {
                    ErrorCode::from_code_lossy(t.error_code)
                });
            let unknown = code == ErrorCode::UnknownTopicOrPartition;
            if auto_create && !auto_created {
                if unknown {
                    return Err(ClientError::AutoCreateDisabled(topic.to_string()));
                }
                auto_created = true;
            }
            let reason = match info {
                Some(info) if code.is_ok() => {
                    let leaderless: Vec<String> = info
                        .partitions
                        .iter()
                        .filter(|p| p.leader < 0)
                        .map(|p| p.partition.to_string())
                        .collect();
                    if leaderless.is_empty() && !info.partitions.is_empty() {
                        return Ok(ProducerTopic { info, auto_created });
                    }
                    match leaderless.len() {
                        0 => "no partitions".to_string(),
                        1 => format!("no leader for partition {}", leaderless[0]),
                        _ => format!("no leader for partitions {}", leaderless.join(", ")),
                    }
                }
                _ if unknown && !auto_create => {
                    auto_create = true;
                    continue;
                }
                _ if code.is_retriable() => code.name().to_string(),
                info => {
                    return Err(ClientError::Broker {
                        context: format!("metadata for {topic}"),
                        code,
                        message: info
                            .is_none()
                            .then(|| "topic missing from the response".into()),
                    });
                }
            };
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(ClientError::TopicNotReady {
                    topic: topic.to_string(),
                    waited_ms: max_block.as_millis() as u64,
                    reason,
                });
            }
            tokio::time::sleep(METADATA_RETRY_BACKOFF.min(deadline - now)).await;
        }
    }

    /// Creates a topic.
    pub async fn create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &[(String, String)],
    ) -> Result<(), ClientError> {
        let req = CreateTopicsRequest {
            topics: vec![CreatableTopic {
                name: name.to_string(),
                num_partitions: partitions,
                replication_factor,
                configs: configs
                    .iter()
                    .map(|(k, v)| CreatableTopicConfig {
                        name: k.clone(),
                        value: Some(v.clone()),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            timeout_ms: self.options.request_timeout.as_millis() as i32,
            ..Default::default()
        };
        let resp = self.controller_connection().await?.send(&req).await?;
        for t in resp.topics {
            ClientError::check(
                t.error_code,
                || format!("create topic {name}"),
                t.error_message,
            )?;
        }
        Ok(())
    }

    /// Deletes a topic by name.
    pub async fn delete_topic(&mut self, name: &str) -> Result<(), ClientError> {
        let timeout_ms = self.options.request_timeout.as_millis() as i32;
        let conn = self.controller_connection().await?;
        let version = conn.version_for(
            DeleteTopicsRequest::API_KEY,
            DeleteTopicsRequest::VALID_VERSIONS,
        )?;
        // Version 6 names topics in `topics`; older versions in `topic_names`.
        let req = if version >= 6 {
            DeleteTopicsRequest {
                topics: vec![DeleteTopicState {
                    name: Some(name.to_string()),
                    ..Default::default()
                }],
                timeout_ms,
                ..Default::default()
            }
        } else {
            DeleteTopicsRequest {
                topic_names: vec![name.to_string()],
                timeout_ms,
                ..Default::default()
            }
        };
        let resp = conn.send_version(&req, version).await?;
        for r in resp.responses {
            ClientError::check(
                r.error_code,
                || format!("delete topic {name}"),
                r.error_message,
            )?;
        }
        Ok(())
    }

    /// Leader node of a partition, refreshing metadata once if unknown.
    pub async fn leader(&mut self, topic: &str, partition: i32) -> Result<i32, ClientError> {
        let t = self.topic(topic).await?;
        t.partitions
            .iter()
            .find(|p| p.partition == partition && p.leader >= 0)
            .map(|p| p.leader)
            .ok_or_else(|| ClientError::NoLeader {
                topic: topic.to_string(),
                partition,
            })
    }

    /// Produces one buffer of record batches to a partition and returns its
    /// base offset (or -1 with acks=0).
    pub async fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        records: Bytes,
        acks: i16,
        leader: i32,
    ) -> Result<i64, ClientError> {
        let req = ProduceRequest {
            acks,
            timeout_ms: self.options.request_timeout.as_millis() as i32,
            topic_data: vec![TopicProduceData {
                name: topic.to_string(),
                partition_data: vec![PartitionProduceData {
                    index: partition,
                    records: Some(records),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let conn = self.node_connection(leader).await?;
        if acks == 0 {
            conn.send_no_response(&req).await?;
            return Ok(-1);
        }
        let resp = conn.send(&req).await?;
        let p = resp
            .responses
            .into_iter()
            .flat_map(|t| t.partition_responses)
            .find(|p| p.index == partition)
            .ok_or_else(|| {
                ClientError::Records(format!("no produce response for {topic}-{partition}"))
            })?;
        ClientError::check(
            p.error_code,
            || format!("produce to {topic}-{partition}"),
            p.error_message,
        )?;
        Ok(p.base_offset)
    }

    /// Fetches from one partition starting at `offset`.
    #[allow(clippy::too_many_arguments)]
    pub async fn fetch(
        &mut self,
        topic: &str,
        topic_id: Uuid,
        partition: i32,
        offset: i64,
        max_bytes: i32,
        max_wait_ms: i32,
        leader: i32,
    ) -> Result<FetchedPartition, ClientError> {
        let req = FetchRequest {
            max_wait_ms,
            min_bytes: 1,
            max_bytes,
            isolation_level: 0,
            session_epoch: -1,
            topics: vec![FetchTopic {
                topic: topic.to_string(),
                topic_id,
                partitions: vec![FetchPartition {
                    partition,
                    fetch_offset: offset,
                    partition_max_bytes: max_bytes,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let timeout =
            self.options.request_timeout + Duration::from_millis(max_wait_ms.max(0) as u64);
        let conn = self.node_connection(leader).await?;
        conn.set_request_timeout(timeout);
        let resp = conn.send(&req).await?;
        ClientError::check(
            resp.error_code,
            || format!("fetch from {topic}-{partition}"),
            None,
        )?;
        let p = resp
            .responses
            .into_iter()
            .flat_map(|t| t.partitions)
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| {
                ClientError::Records(format!("no fetch response for {topic}-{partition}"))
            })?;
        Ok(FetchedPartition {
            error_code: p.error_code,
            high_watermark: p.high_watermark,
            log_start_offset: p.log_start_offset,
            last_stable_offset: p.last_stable_offset,
            records: p.records.unwrap_or_default(),
        })
    }

    /// ListOffsets for one partition: `timestamp` -2 = earliest, -1 =
    /// latest, -3 = max timestamp, otherwise the first offset whose
    /// timestamp is ≥ it. Returns (offset, timestamp).
    pub async fn list_offset(
        &mut self,
        topic: &str,
        partition: i32,
        timestamp: i64,
        leader: i32,
    ) -> Result<(i64, i64), ClientError> {
        let req = ListOffsetsRequest {
            replica_id: -1,
            topics: vec![ListOffsetsTopic {
                name: topic.to_string(),
                partitions: vec![ListOffsetsPartition {
                    partition_index: partition,
                    timestamp,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let resp = self.node_connection(leader).await?.send(&req).await?;
        let p = resp
            .topics
            .into_iter()
            .flat_map(|t| t.partitions)
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| ClientError::Records(format!("no offsets for {topic}-{partition}")))?;
        ClientError::check(
            p.error_code,
            || format!("list offsets of {topic}-{partition}"),
            None,
        )?;
        Ok((p.offset, p.timestamp))
    }
}
