//! Consumer groups: coordinator lookup, committed offsets, and a classic
//! group member (JoinGroup/SyncGroup with the range assignor, Heartbeat,
//! OffsetCommit, LeaveGroup).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use weir_protocol::codec::{Decodable, Encodable, Message, Request};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedPartitions;
use weir_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use weir_protocol::messages::leave_group_request::MemberIdentity;
use weir_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use weir_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use weir_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use weir_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, FindCoordinatorRequest,
    HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest, OffsetFetchRequest,
    SyncGroupRequest,
};

use crate::client::Client;
use crate::connection::Connection;
use crate::error::ClientError;

/// A topic partition: (topic, partition).
pub type TopicPartition = (String, i32);

/// Version of the consumer protocol metadata this client writes.
const SUBSCRIPTION_VERSION: i16 = 0;
const ASSIGNMENT_VERSION: i16 = 0;
/// The only assignor this client offers.
pub const RANGE_ASSIGNOR: &str = "range";

impl Client {
    /// The node id of the coordinator of `group` (FindCoordinator).
    pub async fn find_coordinator(&mut self, group: &str) -> Result<i32, ClientError> {
        let conn = self.any_connection().await?;
        let version = conn.version_for(
            FindCoordinatorRequest::API_KEY,
            FindCoordinatorRequest::VALID_VERSIONS,
        )?;
        // v4+ batch keys in `coordinator_keys`; older versions have one `key`.
        let req = if version >= 4 {
            FindCoordinatorRequest {
                key_type: 0,
                coordinator_keys: vec![group.to_string()],
                ..Default::default()
            }
        } else {
            FindCoordinatorRequest {
                key: group.to_string(),
                key_type: 0,
                ..Default::default()
            }
        };
        let resp = conn.send_version(&req, version).await?;
        let (code, message, node) = match resp.coordinators.into_iter().next() {
            Some(c) => (c.error_code, c.error_message, c.node_id),
            None => (resp.error_code, resp.error_message, resp.node_id),
        };
        ClientError::check(code, || format!("find coordinator of {group}"), message)?;
        Ok(node)
    }

    /// A connection to the coordinator of `group`.
    pub async fn coordinator_connection(
        &mut self,
        group: &str,
    ) -> Result<&mut Connection, ClientError> {
        let node = self.find_coordinator(group).await?;
        self.node_connection(node).await
    }

    /// Committed offsets of `group` (OffsetFetch for all topics);
    /// partitions without a commit are left out.
    pub async fn committed_offsets(
        &mut self,
        group: &str,
    ) -> Result<BTreeMap<TopicPartition, i64>, ClientError> {
        let conn = self.coordinator_connection(group).await?;
        let version = conn.version_for(
            OffsetFetchRequest::API_KEY,
            OffsetFetchRequest::VALID_VERSIONS,
        )?;
        // v8+ ask per group; older versions name one group at the top level.
        let req = if version >= 8 {
            OffsetFetchRequest {
                groups: vec![OffsetFetchRequestGroup {
                    group_id: group.to_string(),
                    topics: None,
                    ..Default::default()
                }],
                ..Default::default()
            }
        } else {
            OffsetFetchRequest {
                group_id: group.to_string(),
                topics: None,
                ..Default::default()
            }
        };
        let resp = conn.send_version(&req, version).await?;
        let context = || format!("fetch committed offsets of {group}");
        let mut out = BTreeMap::new();
        let mut add = |name: &str, partition: i32, offset: i64| {
            if offset >= 0 {
                out.insert((name.to_string(), partition), offset);
            }
        };
        if let Some(g) = resp.groups.into_iter().next() {
            ClientError::check(g.error_code, context, None)?;
            for t in g.topics {
                for p in t.partitions {
                    add(&t.name, p.partition_index, p.committed_offset);
                }
            }
        } else {
            ClientError::check(resp.error_code, context, None)?;
            for t in resp.topics {
                for p in t.partitions {
                    add(&t.name, p.partition_index, p.committed_offset);
                }
            }
        }
        Ok(out)
    }

    /// Commits `offsets` (the NEXT offset to read per partition) for
    /// `group` as generation `generation` of member `member_id`; a
    /// generation of -1 with an empty member id commits for an empty group,
    /// as admin tools do.
    pub async fn commit_offsets(
        &mut self,
        group: &str,
        generation: i32,
        member_id: &str,
        offsets: &BTreeMap<TopicPartition, i64>,
    ) -> Result<(), ClientError> {
        let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for ((topic, partition), offset) in offsets {
            topics
                .entry(topic.as_str())
                .or_default()
                .push(OffsetCommitRequestPartition {
                    partition_index: *partition,
                    committed_offset: *offset,
                    committed_leader_epoch: -1,
                    commit_timestamp: -1,
                    committed_metadata: Some(String::new()),
                    ..Default::default()
                });
        }
        let req = OffsetCommitRequest {
            group_id: group.to_string(),
            generation_id_or_member_epoch: generation,
            member_id: member_id.to_string(),
            group_instance_id: None,
            retention_time_ms: -1,
            topics: topics
                .into_iter()
                .map(|(name, partitions)| OffsetCommitRequestTopic {
                    name: name.to_string(),
                    partitions,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let resp = self.coordinator_connection(group).await?.send(&req).await?;
        for t in resp.topics {
            for p in t.partitions {
                ClientError::check(
                    p.error_code,
                    || format!("commit offset of {}-{}", t.name, p.partition_index),
                    None,
                )?;
            }
        }
        Ok(())
    }
}

/// Decodes a consumer-protocol assignment (version prefix, then the
/// body); undecodable input gives an empty list.
pub fn decode_assignment(assignment: &Bytes) -> Vec<TopicPartition> {
    let mut buf = assignment.clone();
    if buf.len() < 2 {
        return Vec::new();
    }
    let version = i16::from_be_bytes([buf[0], buf[1]]);
    let _ = buf.split_to(2);
    match ConsumerProtocolAssignment::decode(&mut buf, version.clamp(0, 3)) {
        Ok(a) => a
            .assigned_partitions
            .into_iter()
            .flat_map(|tp| {
                let topic = tp.topic;
                tp.partitions.into_iter().map(move |p| (topic.clone(), p))
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn encode_subscription(topics: &[String]) -> Result<Bytes, ClientError> {
    let sub = ConsumerProtocolSubscription {
        topics: topics.to_vec(),
        user_data: None,
        ..Default::default()
    };
    let mut buf = BytesMut::new();
    buf.put_i16(SUBSCRIPTION_VERSION);
    sub.encode(&mut buf, SUBSCRIPTION_VERSION)?;
    Ok(buf.freeze())
}

fn decode_subscription(metadata: &Bytes) -> Vec<String> {
    let mut buf = metadata.clone();
    if buf.len() < 2 {
        return Vec::new();
    }
    let version = i16::from_be_bytes([buf[0], buf[1]]);
    let _ = buf.split_to(2);
    ConsumerProtocolSubscription::decode(&mut buf, version.clamp(0, 3))
        .map(|s| s.topics)
        .unwrap_or_default()
}

fn encode_assignment(partitions: &[TopicPartition]) -> Result<Bytes, ClientError> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in partitions {
        by_topic.entry(t.as_str()).or_default().push(*p);
    }
    let a = ConsumerProtocolAssignment {
        assigned_partitions: by_topic
            .into_iter()
            .map(|(topic, partitions)| AssignedPartitions {
                topic: topic.to_string(),
                partitions,
                ..Default::default()
            })
            .collect(),
        user_data: None,
        ..Default::default()
    };
    let mut buf = BytesMut::new();
    buf.put_i16(ASSIGNMENT_VERSION);
    a.encode(&mut buf, ASSIGNMENT_VERSION)?;
    Ok(buf.freeze())
}

/// Kafka's range assignor: per topic, members subscribed to it in member-id
/// order get consecutive ranges; the first `partitions % members` get one
/// more. `subscriptions` is member id → topics, `partition_counts` topic →
/// number of partitions. Every member appears in the result.
pub fn range_assign(
    subscriptions: &BTreeMap<String, Vec<String>>,
    partition_counts: &BTreeMap<String, i32>,
) -> BTreeMap<String, Vec<TopicPartition>> {
    let mut out: BTreeMap<String, Vec<TopicPartition>> = subscriptions
        .keys()
        .map(|m| (m.clone(), Vec::new()))
        .collect();
    let topics: BTreeSet<&String> = subscriptions.values().flatten().collect();
    for topic in topics {
        let Some(&count) = partition_counts.get(topic) else {
            continue;
        };
        let members: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, ts)| ts.contains(topic))
            .map(|(m, _)| m)
            .collect();
        let n = members.len() as i32;
        if n == 0 || count <= 0 {
            continue;
        }
        let (per, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, m) in members.into_iter().enumerate() {
            let take = per + i32::from((i as i32) < extra);
            let list = out.entry(m.clone()).or_default();
            list.extend((next..next + take).map(|p| (topic.clone(), p)));
            next += take;
        }
    }
    out
}

/// What a heartbeat found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeartbeatStatus {
    /// The member keeps its assignment.
    Stable,
    /// A rebalance started: commit, then call [`GroupMember::join`] again.
    Rebalance,
}

/// One member of a classic consumer group, subscribed to `topics`, using
/// the range assignor.
///
/// Always true: `generation_id` and `member_id` are those of the last
/// successful join (or -1 / empty before the first).
#[derive(Debug, Clone)]
pub struct GroupMember {
    pub group_id: String,
    pub topics: Vec<String>,
    pub member_id: String,
    pub generation_id: i32,
    /// Partitions assigned in the current generation.
    pub assignment: Vec<TopicPartition>,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
}

impl GroupMember {
    pub fn new(group_id: &str, topics: &[String]) -> GroupMember {
        GroupMember {
            group_id: group_id.to_string(),
            topics: topics.to_vec(),
            member_id: String::new(),
            generation_id: -1,
            assignment: Vec::new(),
            session_timeout: Duration::from_secs(45),
            rebalance_timeout: Duration::from_secs(60),
        }
    }

    /// Joins (or rejoins) the group and waits for this member's
    /// assignment. When chosen as leader, computes the range assignment
    /// for all members.
    pub async fn join(&mut self, client: &mut Client) -> Result<&[TopicPartition], ClientError> {
        let metadata = encode_subscription(&self.topics)?;
        // Rounds: MEMBER_ID_REQUIRED gives a member id to join again with;
        // REBALANCE_IN_PROGRESS on sync means another round.
        for _ in 0..10 {
            let req = JoinGroupRequest {
                group_id: self.group_id.clone(),
                session_timeout_ms: self.session_timeout.as_millis() as i32,
                rebalance_timeout_ms: self.rebalance_timeout.as_millis() as i32,
                member_id: self.member_id.clone(),
                group_instance_id: None,
                protocol_type: "consumer".into(),
                protocols: vec![JoinGroupRequestProtocol {
                    name: RANGE_ASSIGNOR.into(),
                    metadata: metadata.clone(),
                    ..Default::default()
                }],
                reason: None,
                ..Default::default()
            };
            let wait = self.rebalance_timeout + client.request_timeout();
            let conn = client.coordinator_connection(&self.group_id).await?;
            conn.set_request_timeout(wait);
            let resp = conn.send(&req).await?;
            let code = ErrorCode::from_code_lossy(resp.error_code);
            match code {
                ErrorCode::None => {}
                ErrorCode::MemberIdRequired => {
                    self.member_id = resp.member_id;
                    continue;
                }
                ErrorCode::UnknownMemberId => {
                    self.member_id.clear();
                    continue;
                }
                ErrorCode::RebalanceInProgress => continue,
                _ => {
                    return Err(ClientError::Broker {
                        context: format!("join group {}", self.group_id),
                        code,
                        message: None,
                    });
                }
            }
            self.member_id = resp.member_id;
            self.generation_id = resp.generation_id;
            let assignments = if resp.leader == self.member_id && !resp.skip_assignment {
                self.assign(client, &resp.members).await?
            } else {
                Vec::new()
            };
            let sync = SyncGroupRequest {
                group_id: self.group_id.clone(),
                generation_id: self.generation_id,
                member_id: self.member_id.clone(),
                group_instance_id: None,
                protocol_type: Some("consumer".into()),
                protocol_name: resp.protocol_name.clone(),
                assignments,
                ..Default::default()
            };
            let conn = client.coordinator_connection(&self.group_id).await?;
            conn.set_request_timeout(wait);
            let resp = conn.send(&sync).await?;
            match ErrorCode::from_code_lossy(resp.error_code) {
                ErrorCode::None => {
                    self.assignment = decode_assignment(&resp.assignment);
                    return Ok(&self.assignment);
                }
                ErrorCode::RebalanceInProgress => continue,
                ErrorCode::UnknownMemberId | ErrorCode::IllegalGeneration => {
                    self.member_id.clear();
                    continue;
                }
                code => {
                    return Err(ClientError::Broker {
                        context: format!("sync group {}", self.group_id),
                        code,
                        message: None,
                    });
                }
            }
        }
        Err(ClientError::Broker {
            context: format!("join group {} (gave up after 10 rounds)", self.group_id),
            code: ErrorCode::RebalanceInProgress,
            message: None,
        })
    }

    async fn assign(
        &self,
        client: &mut Client,
        members: &[weir_protocol::messages::join_group_response::JoinGroupResponseMember],
    ) -> Result<Vec<SyncGroupRequestAssignment>, ClientError> {
        let subscriptions: BTreeMap<String, Vec<String>> = members
            .iter()
            .map(|m| (m.member_id.clone(), decode_subscription(&m.metadata)))
            .collect();
        let topics: Vec<String> = subscriptions
            .values()
            .flatten()
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut counts = BTreeMap::new();
        for t in client.metadata(Some(&topics), false).await? {
            if t.error_code == 0 {
                counts.insert(t.name, t.partitions.len() as i32);
            }
        }
        range_assign(&subscriptions, &counts)
            .into_iter()
            .map(|(member_id, parts)| {
                Ok(SyncGroupRequestAssignment {
                    member_id,
                    assignment: encode_assignment(&parts)?,
                    ..Default::default()
                })
            })
            .collect()
    }

    /// Sends a heartbeat for the current generation.
    pub async fn heartbeat(&mut self, client: &mut Client) -> Result<HeartbeatStatus, ClientError> {
        let req = HeartbeatRequest {
            group_id: self.group_id.clone(),
            generation_id: self.generation_id,
            member_id: self.member_id.clone(),
            group_instance_id: None,
            ..Default::default()
        };
        let resp = client
            .coordinator_connection(&self.group_id)
            .await?
            .send(&req)
            .await?;
        match ErrorCode::from_code_lossy(resp.error_code) {
            ErrorCode::None => Ok(HeartbeatStatus::Stable),
            ErrorCode::RebalanceInProgress => Ok(HeartbeatStatus::Rebalance),
            ErrorCode::UnknownMemberId | ErrorCode::IllegalGeneration => {
                self.member_id.clear();
                self.generation_id = -1;
                Ok(HeartbeatStatus::Rebalance)
            }
            code => Err(ClientError::Broker {
                context: format!("heartbeat to group {}", self.group_id),
                code,
                message: None,
            }),
        }
    }

    /// Commits `offsets` (next offsets to read) for the current generation.
    pub async fn commit(
        &mut self,
        client: &mut Client,
        offsets: &BTreeMap<TopicPartition, i64>,
    ) -> Result<(), ClientError> {
        if offsets.is_empty() {
            return Ok(());
        }
        client
            .commit_offsets(&self.group_id, self.generation_id, &self.member_id, offsets)
            .await
    }

    /// Leaves the group (no-op before the first join).
    pub async fn leave(&mut self, client: &mut Client) -> Result<(), ClientError> {
        if self.member_id.is_empty() {
            return Ok(());
        }
        let conn = client.coordinator_connection(&self.group_id).await?;
        let version = conn.version_for(
            LeaveGroupRequest::API_KEY,
            LeaveGroupRequest::VALID_VERSIONS,
        )?;
        // v3+ name members in a batch; older versions one member id.
        let req = if version >= 3 {
            LeaveGroupRequest {
                group_id: self.group_id.clone(),
                members: vec![MemberIdentity {
                    member_id: self.member_id.clone(),
                    group_instance_id: None,
                    reason: Some("the consumer is closing".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }
        } else {
            LeaveGroupRequest {
                group_id: self.group_id.clone(),
                member_id: self.member_id.clone(),
                ..Default::default()
            }
        };
        let resp = conn.send_version(&req, version).await?;
        ClientError::check(
            resp.error_code,
            || format!("leave group {}", self.group_id),
            None,
        )?;
        self.member_id.clear();
        self.generation_id = -1;
        self.assignment.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subs(v: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        v.iter()
            .map(|(m, ts)| (m.to_string(), ts.iter().map(|t| t.to_string()).collect()))
            .collect()
    }

    #[test]
    fn range_assignor_matches_kafka() {
        let counts: BTreeMap<String, i32> = [("a".to_string(), 7), ("b".to_string(), 2)].into();
        // Table: subscriptions → expected partitions per member.
        type Expected<'a> = Vec<(&'a str, Vec<(&'a str, i32)>)>;
        let cases: Vec<(BTreeMap<String, Vec<String>>, Expected<'_>)> = vec![
            (
                subs(&[("m1", &["a"])]),
                vec![("m1", (0..7).map(|p| ("a", p)).collect())],
            ),
            (
                subs(&[("m1", &["a"]), ("m2", &["a"]), ("m3", &["a"])]),
                vec![
                    ("m1", vec![("a", 0), ("a", 1), ("a", 2)]),
                    ("m2", vec![("a", 3), ("a", 4)]),
                    ("m3", vec![("a", 5), ("a", 6)]),
                ],
            ),
            (
                subs(&[("m1", &["a", "b"]), ("m2", &["b"]), ("m3", &["b"])]),
                vec![
                    ("m1", (0..7).map(|p| ("a", p)).chain([("b", 0)]).collect()),
                    ("m2", vec![("b", 1)]),
                    ("m3", vec![]),
                ],
            ),
            (subs(&[("m1", &["unknown"])]), vec![("m1", vec![])]),
        ];
        for (s, want) in cases {
            let got = range_assign(&s, &counts);
            let want: BTreeMap<String, Vec<TopicPartition>> = want
                .into_iter()
                .map(|(m, ps)| {
                    (
                        m.to_string(),
                        ps.into_iter().map(|(t, p)| (t.to_string(), p)).collect(),
                    )
                })
                .collect();
            assert_eq!(got, want, "{s:?}");
        }
    }

    #[test]
    fn assignment_and_subscription_round_trip() {
        let parts = vec![
            ("a".to_string(), 0),
            ("a".to_string(), 3),
            ("b".to_string(), 1),
        ];
        let bytes = encode_assignment(&parts).unwrap();
        assert_eq!(decode_assignment(&bytes), parts);
        let topics = vec!["x".to_string(), "y".to_string()];
        let bytes = encode_subscription(&topics).unwrap();
        assert_eq!(decode_subscription(&bytes), topics);
        assert!(decode_assignment(&Bytes::from_static(&[0])).is_empty());
        assert!(decode_subscription(&Bytes::from_static(&[0, 0, 0xff])).is_empty());
    }
}
