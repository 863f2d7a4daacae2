//! Admin operations beyond topic create/delete: partitions, configs,
//! DeleteRecords, log-dir sizes and SCRAM credentials.

use std::collections::BTreeMap;

use weir_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use weir_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use weir_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
use weir_protocol::messages::describe_configs_request::DescribeConfigsResource;
use weir_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use weir_protocol::messages::describe_user_scram_credentials_request::UserName;
use weir_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use weir_protocol::messages::{
    AlterUserScramCredentialsRequest, CreatePartitionsRequest, DeleteRecordsRequest,
    DescribeConfigsRequest, DescribeLogDirsRequest, DescribeUserScramCredentialsRequest,
    IncrementalAlterConfigsRequest,
};
use weir_protocol::weir_ext;
use weir_protocol::{Message, Request};

use crate::client::Client;
use crate::error::ClientError;

/// Kafka's config resource types (`ConfigResource.Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceType {
    Topic,
    Broker,
    /// A consumer or share group (Kafka 4.0 group configs).
    Group,
}

impl ResourceType {
    /// The wire code.
    pub fn code(self) -> i8 {
        match self {
            ResourceType::Topic => 2,
            ResourceType::Broker => 4,
            ResourceType::Group => 32,
        }
    }
}

/// Where a config value comes from (`DescribeConfigsResponse` source codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    Unknown,
    DynamicTopic,
    DynamicBroker,
    DynamicDefaultBroker,
    StaticBroker,
    Default,
    DynamicBrokerLogger,
    /// A per-group config (`GROUP_CONFIG`).
    Group,
    Other(i8),
}

impl ConfigSource {
    pub fn from_code(code: i8) -> ConfigSource {
        match code {
            0 => ConfigSource::Unknown,
            1 => ConfigSource::DynamicTopic,
            2 => ConfigSource::DynamicBroker,
            3 => ConfigSource::DynamicDefaultBroker,
            4 => ConfigSource::StaticBroker,
            5 => ConfigSource::Default,
            6 => ConfigSource::DynamicBrokerLogger,
            8 => ConfigSource::Group,
            other => ConfigSource::Other(other),
        }
    }

    /// Kafka's name for the source, as `kafka-configs.sh` prints it.
    pub fn name(self) -> &'static str {
        match self {
            ConfigSource::Unknown => "UNKNOWN",
            ConfigSource::DynamicTopic => "DYNAMIC_TOPIC_CONFIG",
            ConfigSource::DynamicBroker => "DYNAMIC_BROKER_CONFIG",
            ConfigSource::DynamicDefaultBroker => "DYNAMIC_DEFAULT_BROKER_CONFIG",
            ConfigSource::StaticBroker => "STATIC_BROKER_CONFIG",
            ConfigSource::Default => "DEFAULT_CONFIG",
            ConfigSource::DynamicBrokerLogger => "DYNAMIC_BROKER_LOGGER_CONFIG",
            ConfigSource::Group => "GROUP_CONFIG",
            ConfigSource::Other(_) => "OTHER",
        }
    }
}

/// One described config entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigEntry {
    pub name: String,
    /// `None` for sensitive or unset values.
    pub value: Option<String>,
    pub source: ConfigSource,
    pub read_only: bool,
    pub sensitive: bool,
    /// Lower-precedence values: (name, value, source), highest first.
    pub synonyms: Vec<(String, Option<String>, ConfigSource)>,
}

/// An IncrementalAlterConfigs operation on one config name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigOp {
    Set(String, String),
    Delete(String),
    Append(String, String),
    Subtract(String, String),
}

impl ConfigOp {
    fn to_wire(&self) -> AlterableConfig {
        let (name, op, value) = match self {
            ConfigOp::Set(n, v) => (n, 0, Some(v.clone())),
            ConfigOp::Delete(n) => (n, 1, None),
            ConfigOp::Append(n, v) => (n, 2, Some(v.clone())),
            ConfigOp::Subtract(n, v) => (n, 3, Some(v.clone())),
        };
        AlterableConfig {
            name: name.clone(),
            config_operation: op,
            value,
            ..Default::default()
        }
    }
}

/// Size of one partition in one log dir (DescribeLogDirs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaLogDir {
    pub log_dir: String,
    pub size_bytes: i64,
    pub offset_lag: i64,
    /// Number of segments, from weir's DescribeLogDirs extension
    /// ([`weir_protocol::weir_ext`]); None when the broker did not send it
    /// (not a weir broker, or DescribeLogDirs below v2).
    pub segment_count: Option<u64>,
}

/// A SCRAM mechanism (Kafka's `ScramMechanism`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramMechanism {
    ScramSha256,
    ScramSha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::ScramSha256, ScramMechanism::ScramSha512];

    /// The wire code (`ScramMechanism.type()`; 0 is Kafka's UNKNOWN).
    pub fn code(self) -> i8 {
        match self {
            ScramMechanism::ScramSha256 => 1,
            ScramMechanism::ScramSha512 => 2,
        }
    }

    pub fn from_code(code: i8) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.code() == code)
    }

    /// The SASL mechanism name (`SCRAM-SHA-256`).
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::ScramSha256 => "SCRAM-SHA-256",
            ScramMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    /// Case-sensitive, as SASL mechanism names are.
    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// `Hi(password, salt, iterations)` of RFC 5802: PBKDF2 with HMAC of the
    /// mechanism's hash. What AlterUserScramCredentials carries, so the
    /// password itself never leaves the client.
    pub fn salted_password(self, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
        let hash = match self {
            ScramMechanism::ScramSha256 => crate::scram::ScramHash::Sha256,
            ScramMechanism::ScramSha512 => crate::scram::ScramHash::Sha512,
        };
        hash.salted_password(password.as_bytes(), salt, iterations)
    }
}

/// Kafka's default iteration count for a new SCRAM credential
/// (`kafka-configs.sh` uses 4096 when none is given).
pub const DEFAULT_SCRAM_ITERATIONS: u32 = 4096;

/// One change of AlterUserScramCredentials.
#[derive(Clone, PartialEq, Eq)]
pub enum ScramAlteration {
    /// Sets `user`'s credential for `mechanism`. The client salts the
    /// password (a random 32-byte salt) and sends only the salted form.
    Upsert {
        user: String,
        mechanism: ScramMechanism,
        iterations: u32,
        password: String,
    },
    /// Deletes `user`'s credential for `mechanism`.
    Delete {
        user: String,
        mechanism: ScramMechanism,
    },
}

impl std::fmt::Debug for ScramAlteration {
    /// Without the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScramAlteration::Upsert {
                user,
                mechanism,
                iterations,
                ..
            } => f
                .debug_struct("Upsert")
                .field("user", user)
                .field("mechanism", mechanism)
                .field("iterations", iterations)
                .finish_non_exhaustive(),
            ScramAlteration::Delete { user, mechanism } => f
                .debug_struct("Delete")
                .field("user", user)
                .field("mechanism", mechanism)
                .finish(),
        }
    }
}

/// A SCRAM credential as DescribeUserScramCredentials shows it: never the
/// salt or keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScramCredentialInfo {
    /// None for a mechanism code this client does not know.
    pub mechanism: Option<ScramMechanism>,
    pub iterations: i32,
}

impl Client {
    /// Sets and deletes SCRAM credentials (AlterUserScramCredentials), in
    /// one request. Answers per user: the broker refuses a user named
    /// twice in one request (DUPLICATE_RESOURCE), an iteration count
    /// outside 4096..=16384 (UNACCEPTABLE_CREDENTIAL) and the deletion of a
    /// credential that is not set (RESOURCE_NOT_FOUND), and changes the
    /// other users.
    pub async fn alter_user_scram_credentials(
        &mut self,
        alterations: &[ScramAlteration],
    ) -> Result<BTreeMap<String, Result<(), ClientError>>, ClientError> {
        let mut req = AlterUserScramCredentialsRequest::default();
        for a in alterations {
            match a {
                ScramAlteration::Upsert {
                    user,
                    mechanism,
                    iterations,
                    password,
                } => {
                    let salt: [u8; 32] = rand::random();
                    req.upsertions.push(ScramCredentialUpsertion {
                        name: user.clone(),
                        mechanism: mechanism.code(),
                        iterations: i32::try_from(*iterations).unwrap_or(i32::MAX),
                        salt: bytes::Bytes::copy_from_slice(&salt),
                        salted_password: mechanism
                            .salted_password(password, &salt, *iterations)
                            .into(),
                        ..Default::default()
                    });
                }
                ScramAlteration::Delete { user, mechanism } => {
                    req.deletions.push(ScramCredentialDeletion {
                        name: user.clone(),
                        mechanism: mechanism.code(),
                        ..Default::default()
                    });
                }
            }
        }
        let resp = self.any_connection().await?.send(&req).await?;
        Ok(resp
            .results
            .into_iter()
            .map(|r| {
                let user = r.user;
                let checked = ClientError::check(
                    r.error_code,
                    || format!("alter SCRAM credentials of user {user}"),
                    r.error_message,
                );
                (user, checked)
            })
            .collect())
    }

    /// The SCRAM credentials of `users` (`None`: of every user) as
    /// DescribeUserScramCredentials answers: per user its mechanisms and
    /// iteration counts, or the error for that user (RESOURCE_NOT_FOUND for
    /// one without credentials).
    pub async fn describe_user_scram_credentials(
        &mut self,
        users: Option<&[String]>,
    ) -> Result<BTreeMap<String, Result<Vec<ScramCredentialInfo>, ClientError>>, ClientError> {
        let req = DescribeUserScramCredentialsRequest {
            users: users.map(|us| {
                us.iter()
                    .map(|name| UserName {
                        name: name.clone(),
                        ..Default::default()
                    })
                    .collect()
            }),
            ..Default::default()
        };
        let resp = self.any_connection().await?.send(&req).await?;
        ClientError::check(
            resp.error_code,
            || "describe SCRAM credentials".into(),
            resp.error_message,
        )?;
        Ok(resp
            .results
            .into_iter()
            .map(|r| {
                let user = r.user;
                let described = ClientError::check(
                    r.error_code,
                    || format!("describe SCRAM credentials of user {user}"),
                    r.error_message,
                )
                .map(|()| {
                    r.credential_infos
                        .iter()
                        .map(|c| ScramCredentialInfo {
                            mechanism: ScramMechanism::from_code(c.mechanism),
                            iterations: c.iterations,
                        })
                        .collect()
                });
                (user, described)
            })
            .collect())
    }

    /// Raises the partition count of `topic` to `count` (CreatePartitions).
    pub async fn create_partitions(&mut self, topic: &str, count: i32) -> Result<(), ClientError> {
        let req = CreatePartitionsRequest {
            topics: vec![CreatePartitionsTopic {
                name: topic.to_string(),
                count,
                assignments: None,
                ..Default::default()
            }],
            timeout_ms: self.request_timeout().as_millis() as i32,
            validate_only: false,
            ..Default::default()
        };
        let resp = self.controller_connection().await?.send(&req).await?;
        for r in resp.results {
            ClientError::check(
                r.error_code,
                || format!("add partitions to {topic}"),
                r.error_message,
            )?;
        }
        Ok(())
    }

    /// Describes the configs of one resource (all keys), with synonyms.
    /// For brokers, `name` is the node id (or empty for the one answering).
    pub async fn describe_configs(
        &mut self,
        resource: ResourceType,
        name: &str,
    ) -> Result<Vec<ConfigEntry>, ClientError> {
        let req = DescribeConfigsRequest {
            resources: vec![DescribeConfigsResource {
                resource_type: resource.code(),
                resource_name: name.to_string(),
                configuration_keys: None,
                ..Default::default()
            }],
            include_synonyms: true,
            include_documentation: false,
            ..Default::default()
        };
        let conn = match (resource, name.parse::<i32>()) {
            (ResourceType::Broker, Ok(node)) => self.node_connection(node).await?,
            _ => self.any_connection().await?,
        };
        let resp = conn.send(&req).await?;
        let mut out = Vec::new();
        for r in resp.results {
            check_config_result(
                resource,
                name,
                r.error_code,
                r.error_message,
                "describe configs of",
            )?;
            for c in r.configs {
                out.push(ConfigEntry {
                    name: c.name,
                    value: c.value,
                    source: ConfigSource::from_code(c.config_source),
                    read_only: c.read_only,
                    sensitive: c.is_sensitive,
                    synonyms: c
                        .synonyms
                        .into_iter()
                        .map(|s| (s.name, s.value, ConfigSource::from_code(s.source)))
                        .collect(),
                });
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Applies `ops` to one resource's configs (IncrementalAlterConfigs).
    pub async fn incremental_alter_configs(
        &mut self,
        resource: ResourceType,
        name: &str,
        ops: &[ConfigOp],
    ) -> Result<(), ClientError> {
        let req = IncrementalAlterConfigsRequest {
            resources: vec![AlterConfigsResource {
                resource_type: resource.code(),
                resource_name: name.to_string(),
                configs: ops.iter().map(ConfigOp::to_wire).collect(),
                ..Default::default()
            }],
            validate_only: false,
            ..Default::default()
        };
        let resp = self.controller_connection().await?.send(&req).await?;
        for r in resp.responses {
            check_config_result(
                resource,
                name,
                r.error_code,
                r.error_message,
                "alter configs of",
            )?;
        }
        Ok(())
    }

    /// Deletes records of `topic` below the given offsets, per partition
    /// (-1 = up to the high watermark). Returns partition → new low
    /// watermark (log start offset).
    pub async fn delete_records(
        &mut self,
        topic: &str,
        offsets: &[(i32, i64)],
    ) -> Result<BTreeMap<i32, i64>, ClientError> {
        // Requests go to each partition's leader.
        let mut by_leader: BTreeMap<i32, Vec<(i32, i64)>> = BTreeMap::new();
        let info = self.topic(topic).await?;
        for &(p, o) in offsets {
            let leader = info
                .partitions
                .iter()
                .find(|x| x.partition == p)
                .map(|x| x.leader)
                .ok_or_else(|| ClientError::Broker {
                    context: format!("delete records of {topic}-{p}"),
                    code: weir_protocol::error_code::ErrorCode::UnknownTopicOrPartition,
                    message: Some(format!("topic {topic} has no partition {p}")),
                })?;
            by_leader.entry(leader).or_default().push((p, o));
        }
        let timeout_ms = self.request_timeout().as_millis() as i32;
        let mut out = BTreeMap::new();
        for (leader, parts) in by_leader {
            let req = DeleteRecordsRequest {
                topics: vec![DeleteRecordsTopic {
                    name: topic.to_string(),
                    partitions: parts
                        .iter()
                        .map(|&(p, o)| DeleteRecordsPartition {
                            partition_index: p,
                            offset: o,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }],
                timeout_ms,
                ..Default::default()
            };
            let resp = self.node_connection(leader).await?.send(&req).await?;
            for t in resp.topics {
                for p in t.partitions {
                    ClientError::check(
                        p.error_code,
                        || format!("delete records of {}-{}", t.name, p.partition_index),
                        None,
                    )?;
                    out.insert(p.partition_index, p.low_watermark);
                }
            }
        }
        Ok(out)
    }

    /// Partition sizes of `topic` as reported by DescribeLogDirs on
    /// broker `node`: partition → replicas in log dirs.
    ///
    /// In v2+ the request carries weir's segment-count tag
    /// ([`weir_protocol::weir_ext::SEGMENT_COUNT_TAG`]); a weir broker then
    /// reports [`ReplicaLogDir::segment_count`], any other broker ignores
    /// the tag.
    pub async fn describe_log_dirs(
        &mut self,
        node: i32,
        topic: &str,
        partitions: &[i32],
    ) -> Result<BTreeMap<i32, Vec<ReplicaLogDir>>, ClientError> {
        let mut req = DescribeLogDirsRequest {
            topics: Some(vec![DescribableLogDirTopic {
                topic: topic.to_string(),
                partitions: partitions.to_vec(),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let conn = self.node_connection(node).await?;
        let version = conn.version_for(
            DescribeLogDirsRequest::API_KEY,
            DescribeLogDirsRequest::VALID_VERSIONS,
        )?;
        if DescribeLogDirsRequest::FLEXIBLE_MIN.is_some_and(|flex| version >= flex) {
            weir_ext::request_segment_counts(&mut req);
        }
        let resp = conn.send_version(&req, version).await?;
        ClientError::check(resp.error_code, || "describe log dirs".into(), None)?;
        let mut out: BTreeMap<i32, Vec<ReplicaLogDir>> = BTreeMap::new();
        for d in resp.results {
            if d.error_code != 0 {
                continue;
            }
            for t in d.topics.iter().filter(|t| t.name == topic) {
                for p in &t.partitions {
                    if p.is_future_key {
                        continue;
                    }
                    out.entry(p.partition_index)
                        .or_default()
                        .push(ReplicaLogDir {
                            log_dir: d.log_dir.clone(),
                            size_bytes: p.partition_size,
                            offset_lag: p.offset_lag,
                            segment_count: weir_ext::segment_count(p),
                        });
                }
            }
        }
        Ok(out)
    }
}

/// A config resource's result: an unknown topic becomes
/// [`ClientError::UnknownTopic`], any other error a broker error naming
/// `what` and the resource.
fn check_config_result(
    resource: ResourceType,
    name: &str,
    code: i16,
    message: Option<String>,
    what: &str,
) -> Result<(), ClientError> {
    if resource == ResourceType::Topic
        && code == weir_protocol::error_code::ErrorCode::UnknownTopicOrPartition.code()
    {
        return Err(ClientError::UnknownTopic(name.to_string()));
    }
    ClientError::check(code, || format!("{what} {name}"), message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scram_mechanisms_and_salted_passwords() {
        for m in ScramMechanism::ALL {
            assert_eq!(ScramMechanism::from_code(m.code()), Some(m));
            assert_eq!(ScramMechanism::from_name(m.name()), Some(m));
        }
        assert_eq!(ScramMechanism::from_code(0), None);
        assert_eq!(ScramMechanism::from_name("scram-sha-256"), None);
        // one digest long
        let salt = b"salt";
        assert_eq!(
            ScramMechanism::ScramSha256
                .salted_password("pencil", salt, 4096)
                .len(),
            32
        );
        assert_eq!(
            ScramMechanism::ScramSha512
                .salted_password("pencil", salt, 4096)
                .len(),
            64
        );
        // the published PBKDF2-HMAC-SHA256 vector ("password", "salt", 1)
        assert_eq!(
            ScramMechanism::ScramSha256.salted_password("password", b"salt", 1)[..8],
            [0x12, 0x0f, 0xb6, 0xcf, 0xfc, 0xf8, 0xb3, 0x2c]
        );
        let a = ScramAlteration::Upsert {
            user: "alice".into(),
            mechanism: ScramMechanism::ScramSha512,
            iterations: 8192,
            password: "hunter2".into(),
        };
        assert!(!format!("{a:?}").contains("hunter2"));
    }
}
