//! The KIP-848 records of a consumer group in `__consumer_offsets`.
//!
//! Each key is an int16 *key version* that names the record type, then the
//! generated non-flexible key body; each value is an int16 value version
//! (0) then the generated flexible body (Kafka's `CoordinatorRecord`
//! framing, as for the classic records in `crate::records`):
//!
//! | key version | record | key fields | value |
//! | --- | --- | --- | --- |
//! | 3 | ConsumerGroupMetadata | group | group epoch |
//! | 4 | ConsumerGroupPartitionMetadata | group | subscribed topics: id, name, partition count |
//! | 5 | ConsumerGroupMemberMetadata | group, member | instance, rack, client, subscription, rebalance timeout, assignor, classic member metadata (session timeout, protocols) of a classic member |
//! | 6 | ConsumerGroupTargetAssignmentMetadata | group | assignment epoch |
//! | 7 | ConsumerGroupTargetAssignmentMember | group, member | target partitions |
//! | 8 | ConsumerGroupCurrentMemberAssignment | group, member | member epoch, previous epoch, state, assigned, pending revocation |

use bytes::{BufMut, Bytes, BytesMut};
use weir_protocol::codec::{Decodable, Encodable};
use weir_protocol::messages::group_coordinator::{
    ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue, ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue, ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue, ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue, ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue, consumer_group_current_member_assignment_value,
    consumer_group_member_metadata_value, consumer_group_partition_metadata_value,
    consumer_group_target_assignment_member_value,
};

use super::reconcile::CurrentAssignment;
use super::types::{MemberState, Partitions};
use crate::error::RecordError;
use crate::types::OffsetsRecord;

pub const METADATA: i16 = 3;
pub const PARTITION_METADATA: i16 = 4;
pub const MEMBER_METADATA: i16 = 5;
pub const TARGET_METADATA: i16 = 6;
pub const TARGET_MEMBER: i16 = 7;
pub const CURRENT_ASSIGNMENT: i16 = 8;

/// A decoded KIP-848 key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConsumerKey {
    Metadata { group: String },
    PartitionMetadata { group: String },
    MemberMetadata { group: String, member: String },
    TargetMetadata { group: String },
    TargetMember { group: String, member: String },
    CurrentAssignment { group: String, member: String },
}

/// The persisted part of a member (ConsumerGroupMemberMetadataValue).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberMetadata {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    /// Set for a member of the classic protocol inside a consumer group
    /// (the ClassicMemberMetadata tagged field).
    pub classic: Option<ClassicMeta>,
}

/// What a classic member brought with its JoinGroup: its session timeout
/// and its protocols (name and ConsumerProtocolSubscription bytes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassicMeta {
    pub session_timeout_ms: i32,
    pub protocols: Vec<crate::types::Protocol>,
}

/// One subscribed topic in ConsumerGroupPartitionMetadataValue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscribedTopic {
    pub id: weir_protocol::Uuid,
    pub name: String,
    pub partitions: i32,
}

fn encode_key<K: Encodable>(version: i16, key: &K) -> Bytes {
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i16(version);
    // Group and member ids are bounded far below an int16 string by the
    // broker's request size limits; an encoding failure leaves only the
    // version, which replay rejects instead of misreading.
    let _ = key.encode(&mut buf, version);
    buf.freeze()
}

fn encode_value<V: Encodable>(value: &V) -> Bytes {
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i16(0);
    let _ = value.encode(&mut buf, 0);
    buf.freeze()
}

fn record(key: Bytes, value: Option<Bytes>) -> OffsetsRecord {
    OffsetsRecord { key, value }
}

pub fn metadata_key(group: &str) -> Bytes {
    encode_key(
        METADATA,
        &ConsumerGroupMetadataKey {
            group_id: group.to_string(),
            ..Default::default()
        },
    )
}

pub fn partition_metadata_key(group: &str) -> Bytes {
    encode_key(
        PARTITION_METADATA,
        &ConsumerGroupPartitionMetadataKey {
            group_id: group.to_string(),
            ..Default::default()
        },
    )
}

pub fn member_metadata_key(group: &str, member: &str) -> Bytes {
    encode_key(
        MEMBER_METADATA,
        &ConsumerGroupMemberMetadataKey {
            group_id: group.to_string(),
            member_id: member.to_string(),
            ..Default::default()
        },
    )
}

pub fn target_metadata_key(group: &str) -> Bytes {
    encode_key(
        TARGET_METADATA,
        &ConsumerGroupTargetAssignmentMetadataKey {
            group_id: group.to_string(),
            ..Default::default()
        },
    )
}

pub fn target_member_key(group: &str, member: &str) -> Bytes {
    encode_key(
        TARGET_MEMBER,
        &ConsumerGroupTargetAssignmentMemberKey {
            group_id: group.to_string(),
            member_id: member.to_string(),
            ..Default::default()
        },
    )
}

pub fn current_assignment_key(group: &str, member: &str) -> Bytes {
    encode_key(
        CURRENT_ASSIGNMENT,
        &ConsumerGroupCurrentMemberAssignmentKey {
            group_id: group.to_string(),
            member_id: member.to_string(),
            ..Default::default()
        },
    )
}

pub fn epoch_record(group: &str, epoch: i32) -> OffsetsRecord {
    let v = ConsumerGroupMetadataValue {
        epoch,
        ..Default::default()
    };
    record(metadata_key(group), Some(encode_value(&v)))
}

pub fn partition_metadata_record(group: &str, topics: &[SubscribedTopic]) -> OffsetsRecord {
    let v = ConsumerGroupPartitionMetadataValue {
        topics: topics
            .iter()
            .map(|t| consumer_group_partition_metadata_value::TopicMetadata {
                topic_id: t.id,
                topic_name: t.name.clone(),
                num_partitions: t.partitions,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    record(partition_metadata_key(group), Some(encode_value(&v)))
}

pub fn member_metadata_record(group: &str, member: &str, m: &MemberMetadata) -> OffsetsRecord {
    let v = ConsumerGroupMemberMetadataValue {
        instance_id: m.instance_id.clone(),
        rack_id: m.rack_id.clone(),
        client_id: m.client_id.clone(),
        client_host: m.client_host.clone(),
        subscribed_topic_names: m.subscribed_topic_names.clone(),
        subscribed_topic_regex: m.subscribed_topic_regex.clone(),
        rebalance_timeout_ms: m.rebalance_timeout_ms,
        server_assignor: m.server_assignor.clone(),
        classic_member_metadata: m.classic.as_ref().map(|c| {
            consumer_group_member_metadata_value::ClassicMemberMetadata {
                session_timeout_ms: c.session_timeout_ms,
                supported_protocols: c
                    .protocols
                    .iter()
                    .map(|p| consumer_group_member_metadata_value::ClassicProtocol {
                        name: p.name.clone(),
                        metadata: p.metadata.clone(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }
        }),
        ..Default::default()
    };
    record(member_metadata_key(group, member), Some(encode_value(&v)))
}

pub fn target_metadata_record(group: &str, epoch: i32) -> OffsetsRecord {
    let v = ConsumerGroupTargetAssignmentMetadataValue {
        assignment_epoch: epoch,
        ..Default::default()
    };
    record(target_metadata_key(group), Some(encode_value(&v)))
}

pub fn target_member_record(group: &str, member: &str, target: &Partitions) -> OffsetsRecord {
    let v = ConsumerGroupTargetAssignmentMemberValue {
        topic_partitions: target
            .iter()
            .map(
                |(t, ps)| consumer_group_target_assignment_member_value::TopicPartition {
                    topic_id: *t,
                    partitions: ps.iter().copied().collect(),
                    ..Default::default()
                },
            )
            .collect(),
        ..Default::default()
    };
    record(target_member_key(group, member), Some(encode_value(&v)))
}

fn current_partitions(
    p: &Partitions,
) -> Vec<consumer_group_current_member_assignment_value::TopicPartitions> {
    p.iter()
        .map(
            |(t, ps)| consumer_group_current_member_assignment_value::TopicPartitions {
                topic_id: *t,
                partitions: ps.iter().copied().collect(),
                ..Default::default()
            },
        )
        .collect()
}

pub fn current_assignment_record(
    group: &str,
    member: &str,
    c: &CurrentAssignment,
) -> OffsetsRecord {
    let v = ConsumerGroupCurrentMemberAssignmentValue {
        member_epoch: c.member_epoch,
        previous_member_epoch: c.previous_member_epoch,
        state: c.state.value(),
        assigned_partitions: current_partitions(&c.assigned),
        partitions_pending_revocation: current_partitions(&c.pending_revocation),
        ..Default::default()
    };
    record(
        current_assignment_key(group, member),
        Some(encode_value(&v)),
    )
}

/// The three tombstones that remove a member, in Kafka's order.
pub fn member_tombstones(group: &str, member: &str) -> Vec<OffsetsRecord> {
    vec![
        record(current_assignment_key(group, member), None),
        record(target_member_key(group, member), None),
        record(member_metadata_key(group, member), None),
    ]
}

/// The tombstones of the group-level records (after its members').
pub fn group_tombstones(group: &str) -> Vec<OffsetsRecord> {
    vec![
        record(target_metadata_key(group), None),
        record(partition_metadata_key(group), None),
        record(metadata_key(group), None),
    ]
}

// ---------------------------------------------------------------- decoding

fn decode_err(kind: &'static str, e: impl std::fmt::Display) -> RecordError {
    RecordError::Decode {
        kind,
        message: e.to_string(),
    }
}

fn body<T: Decodable>(kind: &'static str, bytes: &[u8], version: i16) -> Result<T, RecordError> {
    let mut buf = Bytes::copy_from_slice(bytes);
    let v = T::decode(&mut buf, version).map_err(|e| decode_err(kind, e))?;
    if !buf.is_empty() {
        return Err(RecordError::TrailingBytes {
            kind,
            remaining: buf.len(),
        });
    }
    Ok(v)
}

/// Decodes a key of version 3-8; `None` for other versions.
pub fn decode_key(key: &[u8]) -> Result<Option<ConsumerKey>, RecordError> {
    let Some((v, rest)) = key.split_first_chunk::<2>() else {
        return Err(RecordError::Truncated {
            position: 0,
            needed: 2,
            remaining: key.len(),
        });
    };
    let version = i16::from_be_bytes(*v);
    Ok(Some(match version {
        METADATA => {
            let k: ConsumerGroupMetadataKey = body("consumer group metadata key", rest, version)?;
            ConsumerKey::Metadata { group: k.group_id }
        }
        PARTITION_METADATA => {
            let k: ConsumerGroupPartitionMetadataKey =
                body("consumer group partition metadata key", rest, version)?;
            ConsumerKey::PartitionMetadata { group: k.group_id }
        }
        MEMBER_METADATA => {
            let k: ConsumerGroupMemberMetadataKey =
                body("consumer group member metadata key", rest, version)?;
            ConsumerKey::MemberMetadata {
                group: k.group_id,
                member: k.member_id,
            }
        }
        TARGET_METADATA => {
            let k: ConsumerGroupTargetAssignmentMetadataKey = body(
                "consumer group target assignment metadata key",
                rest,
                version,
            )?;
            ConsumerKey::TargetMetadata { group: k.group_id }
        }
        TARGET_MEMBER => {
            let k: ConsumerGroupTargetAssignmentMemberKey =
                body("consumer group target assignment member key", rest, version)?;
            ConsumerKey::TargetMember {
                group: k.group_id,
                member: k.member_id,
            }
        }
        CURRENT_ASSIGNMENT => {
            let k: ConsumerGroupCurrentMemberAssignmentKey = body(
                "consumer group current member assignment key",
                rest,
                version,
            )?;
            ConsumerKey::CurrentAssignment {
                group: k.group_id,
                member: k.member_id,
            }
        }
        _ => return Ok(None),
    }))
}

fn value_body<T: Decodable>(kind: &'static str, value: &[u8]) -> Result<T, RecordError> {
    let Some((v, rest)) = value.split_first_chunk::<2>() else {
        return Err(RecordError::Truncated {
            position: 0,
            needed: 2,
            remaining: value.len(),
        });
    };
    let version = i16::from_be_bytes(*v);
    if version != 0 {
        return Err(RecordError::UnsupportedVersion { kind, version });
    }
    body(kind, rest, 0)
}

pub fn decode_epoch(value: &[u8]) -> Result<i32, RecordError> {
    let v: ConsumerGroupMetadataValue = value_body("consumer group metadata value", value)?;
    Ok(v.epoch)
}

pub fn decode_target_epoch(value: &[u8]) -> Result<i32, RecordError> {
    let v: ConsumerGroupTargetAssignmentMetadataValue =
        value_body("consumer group target assignment metadata value", value)?;
    Ok(v.assignment_epoch)
}

pub fn decode_partition_metadata(value: &[u8]) -> Result<Vec<SubscribedTopic>, RecordError> {
    let v: ConsumerGroupPartitionMetadataValue =
        value_body("consumer group partition metadata value", value)?;
    Ok(v.topics
        .into_iter()
        .map(|t| SubscribedTopic {
            id: t.topic_id,
            name: t.topic_name,
            partitions: t.num_partitions,
        })
        .collect())
}

pub fn decode_member_metadata(value: &[u8]) -> Result<MemberMetadata, RecordError> {
    let v: ConsumerGroupMemberMetadataValue =
        value_body("consumer group member metadata value", value)?;
    Ok(MemberMetadata {
        instance_id: v.instance_id,
        rack_id: v.rack_id,
        client_id: v.client_id,
        client_host: v.client_host,
        subscribed_topic_names: v.subscribed_topic_names,
        subscribed_topic_regex: v.subscribed_topic_regex,
        rebalance_timeout_ms: v.rebalance_timeout_ms,
        server_assignor: v.server_assignor,
        classic: v.classic_member_metadata.map(|c| ClassicMeta {
            session_timeout_ms: c.session_timeout_ms,
            protocols: c
                .supported_protocols
                .into_iter()
                .map(|p| crate::types::Protocol {
                    name: p.name,
                    metadata: p.metadata,
                })
                .collect(),
        }),
    })
}

pub fn decode_target_member(value: &[u8]) -> Result<Partitions, RecordError> {
    let v: ConsumerGroupTargetAssignmentMemberValue =
        value_body("consumer group target assignment member value", value)?;
    let mut out = Partitions::new();
    for tp in v.topic_partitions {
        out.entry(tp.topic_id).or_default().extend(tp.partitions);
    }
    Ok(out)
}

pub fn decode_current_assignment(value: &[u8]) -> Result<CurrentAssignment, RecordError> {
    let v: ConsumerGroupCurrentMemberAssignmentValue =
        value_body("consumer group current member assignment value", value)?;
    let collect = |list: Vec<consumer_group_current_member_assignment_value::TopicPartitions>| {
        let mut out = Partitions::new();
        for tp in list {
            out.entry(tp.topic_id).or_default().extend(tp.partitions);
        }
        out
    };
    Ok(CurrentAssignment {
        member_epoch: v.member_epoch,
        previous_member_epoch: v.previous_member_epoch,
        state: MemberState::from_value(v.state),
        assigned: collect(v.assigned_partitions),
        pending_revocation: collect(v.partitions_pending_revocation),
    })
}
