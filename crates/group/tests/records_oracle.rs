//! The hand-written `__consumer_offsets` codec against the codec generated
//! from Kafka's own JSON schemas (`weir_protocol::messages::group_coordinator`),
//! an independent implementation of the same format: what weir writes
//! decodes there to the same fields and re-encodes to the same bytes, and
//! every version the generated codec writes decodes here to the same fields.

use bytes::{Buf, Bytes, BytesMut};
use proptest::prelude::*;
use weir_group::CommittedOffset;
use weir_group::records::*;
use weir_protocol::codec::{Decodable, Encodable};
use weir_protocol::messages::group_coordinator as oracle;

/// Splits a record key or value into its version prefix and body.
fn split(bytes: &Bytes) -> (i16, Bytes) {
    let mut b = bytes.clone();
    let v = b.get_i16();
    (v, b)
}

fn with_version<T: Encodable>(v: i16, msg: &T) -> Bytes {
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&v.to_be_bytes());
    msg.encode(&mut buf, v).unwrap();
    buf.freeze()
}

fn decode_gen<T: Decodable>(bytes: &Bytes) -> (i16, T) {
    let (v, mut body) = split(bytes);
    let t = T::decode(&mut body, v).unwrap();
    assert!(body.is_empty(), "{} bytes left over", body.len());
    (v, t)
}

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9._ -]{0,24}"
}

fn blob() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..40).prop_map(Bytes::from)
}

fn committed() -> impl Strategy<Value = CommittedOffset> {
    (
        any::<i64>(),
        any::<i32>(),
        text(),
        any::<i64>(),
        proptest::option::of(0i64..i64::MAX),
    )
        .prop_map(|(offset, epoch, metadata, ts, expire)| CommittedOffset {
            offset,
            // v1 (written with an expire timestamp) has no leader epoch
            leader_epoch: if expire.is_some() { -1 } else { epoch },
            metadata,
            commit_timestamp_ms: ts,
            expire_timestamp_ms: expire,
        })
}

fn member() -> impl Strategy<Value = MemberMetadata> {
    (
        text(),
        proptest::option::of(text()),
        text(),
        text(),
        any::<i32>(),
        any::<i32>(),
        blob(),
        blob(),
    )
        .prop_map(|(m, g, c, h, rt, st, sub, asg)| MemberMetadata {
            member_id: m,
            group_instance_id: g,
            client_id: c,
            client_host: h,
            rebalance_timeout_ms: rt,
            session_timeout_ms: st,
            subscription: sub,
            assignment: asg,
        })
}

fn group_value() -> impl Strategy<Value = GroupMetadataValue> {
    (
        text(),
        any::<i32>(),
        proptest::option::of(text()),
        proptest::option::of(text()),
        any::<i64>(),
        proptest::collection::vec(member(), 0..4),
    )
        .prop_map(|(pt, g, p, l, ts, members)| GroupMetadataValue {
            protocol_type: pt,
            generation: g,
            protocol: p,
            leader: l,
            current_state_timestamp_ms: ts,
            members,
        })
}

fn to_gen_member(m: &MemberMetadata) -> oracle::group_metadata_value::MemberMetadata {
    oracle::group_metadata_value::MemberMetadata {
        member_id: m.member_id.clone(),
        group_instance_id: m.group_instance_id.clone(),
        client_id: m.client_id.clone(),
        client_host: m.client_host.clone(),
        rebalance_timeout: m.rebalance_timeout_ms,
        session_timeout: m.session_timeout_ms,
        subscription: m.subscription.clone(),
        assignment: m.assignment.clone(),
        ..Default::default()
    }
}

proptest! {
    #[test]
    fn keys_match_the_generated_codec(group in text(), topic in text(), partition in any::<i32>()) {
        let key = encode_offset_commit_key(&group, &topic, partition);
        let (v, k): (i16, oracle::OffsetCommitKey) = decode_gen(&key);
        prop_assert_eq!(v, OFFSET_COMMIT_KEY_VERSION);
        prop_assert_eq!((&k.group, &k.topic, k.partition), (&group, &topic, partition));
        prop_assert_eq!(with_version(v, &k), key);

        let key = encode_group_metadata_key(&group);
        let (v, k): (i16, oracle::GroupMetadataKey) = decode_gen(&key);
        prop_assert_eq!(v, GROUP_METADATA_KEY_VERSION);
        prop_assert_eq!(&k.group, &group);
        prop_assert_eq!(with_version(v, &k), key.clone());
        prop_assert_eq!(decode_key(&key).unwrap(), RecordKey::GroupMetadata { group });
    }

    #[test]
    fn offset_commit_values_match_the_generated_codec(c in committed()) {
        // weir's encoding, read by the generated codec, written back
        let bytes = encode_offset_commit_value(&c);
        let (v, g): (i16, oracle::OffsetCommitValue) = decode_gen(&bytes);
        prop_assert_eq!(g.offset, c.offset);
        prop_assert_eq!(g.metadata.as_str(), c.metadata.as_str());
        prop_assert_eq!(g.commit_timestamp, c.commit_timestamp_ms);
        if v >= 3 {
            prop_assert_eq!(g.leader_epoch, c.leader_epoch);
        }
        if v == 1 {
            prop_assert_eq!(Some(g.expire_timestamp), c.expire_timestamp_ms);
        }
        prop_assert_eq!(with_version(v, &g), bytes);
    }

    #[test]
    fn every_offset_commit_version_decodes_the_same(c in committed(), v in 0i16..=4) {
        let g = oracle::OffsetCommitValue {
            offset: c.offset,
            leader_epoch: c.leader_epoch,
            metadata: c.metadata.clone(),
            commit_timestamp: c.commit_timestamp_ms,
            expire_timestamp: c.expire_timestamp_ms.unwrap_or(-1),
            ..Default::default()
        };
        let ours = decode_offset_commit_value(&with_version(v, &g)).unwrap();
        prop_assert_eq!(ours.offset, c.offset);
        prop_assert_eq!(ours.metadata, c.metadata);
        prop_assert_eq!(ours.commit_timestamp_ms, c.commit_timestamp_ms);
        prop_assert_eq!(ours.leader_epoch, if v >= 3 { c.leader_epoch } else { -1 });
        prop_assert_eq!(
            ours.expire_timestamp_ms,
            if v == 1 { c.expire_timestamp_ms } else { None }
        );
    }

    #[test]
    fn group_metadata_values_match_the_generated_codec(value in group_value()) {
        let bytes = encode_group_metadata_value(&value);
        let (v, g): (i16, oracle::GroupMetadataValue) = decode_gen(&bytes);
        prop_assert_eq!(&g.protocol_type, &value.protocol_type);
        prop_assert_eq!(g.generation, value.generation);
        prop_assert_eq!(&g.protocol, &value.protocol);
        prop_assert_eq!(&g.leader, &value.leader);
        prop_assert_eq!(g.current_state_timestamp, value.current_state_timestamp_ms);
        let want: Vec<_> = value.members.iter().map(to_gen_member).collect();
        prop_assert_eq!(&g.members, &want);
        prop_assert_eq!(with_version(v, &g), bytes);
    }

    #[test]
    fn every_group_metadata_version_decodes_the_same(value in group_value(), v in 0i16..=4) {
        let g = oracle::GroupMetadataValue {
            protocol_type: value.protocol_type.clone(),
            generation: value.generation,
            protocol: value.protocol.clone(),
            leader: value.leader.clone(),
            current_state_timestamp: value.current_state_timestamp_ms,
            members: value.members.iter().map(to_gen_member).collect(),
            ..Default::default()
        };
        let ours = decode_group_metadata_value(&with_version(v, &g)).unwrap();
        prop_assert_eq!(&ours.protocol_type, &value.protocol_type);
        prop_assert_eq!(ours.generation, value.generation);
        prop_assert_eq!(&ours.protocol, &value.protocol);
        prop_assert_eq!(&ours.leader, &value.leader);
        prop_assert_eq!(
            ours.current_state_timestamp_ms,
            if v >= 2 { value.current_state_timestamp_ms } else { -1 }
        );
        prop_assert_eq!(ours.members.len(), value.members.len());
        for (o, m) in ours.members.iter().zip(&value.members) {
            prop_assert_eq!(&o.member_id, &m.member_id);
            prop_assert_eq!(&o.group_instance_id, &if v >= 3 { m.group_instance_id.clone() } else { None });
            prop_assert_eq!(&o.client_id, &m.client_id);
            prop_assert_eq!(&o.client_host, &m.client_host);
            prop_assert_eq!(o.rebalance_timeout_ms, if v >= 1 { m.rebalance_timeout_ms } else { -1 });
            prop_assert_eq!(o.session_timeout_ms, m.session_timeout_ms);
            prop_assert_eq!(&o.subscription, &m.subscription);
            prop_assert_eq!(&o.assignment, &m.assignment);
        }
    }
}
