//! Fuzz smoke test of the `__consumer_offsets` record decoders (the
//! cargo-fuzz target `consumer_offsets_records` runs the same entry point):
//! seeds from every record weir writes, then mutations and random bytes.

use bytes::Bytes;
use weir_group::CommittedOffset;
use weir_group::records::*;

#[test]
fn consumer_offsets_records_survive_mutation() {
    let member = MemberMetadata {
        member_id: "m-1".into(),
        group_instance_id: Some("static".into()),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        rebalance_timeout_ms: 300_000,
        session_timeout_ms: 45_000,
        subscription: Bytes::from_static(&[0, 1, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 0]),
        assignment: Bytes::from_static(&[0, 1, 0, 0, 0, 0, 0, 0, 0, 0]),
    };
    let seeds: Vec<Vec<u8>> = vec![
        encode_offset_commit_key("group", "topic", 3).to_vec(),
        encode_group_metadata_key("group").to_vec(),
        encode_offset_commit_value(&CommittedOffset {
            offset: 42,
            leader_epoch: 7,
            metadata: "meta".into(),
            commit_timestamp_ms: 1_700_000_000_000,
            expire_timestamp_ms: None,
        })
        .to_vec(),
        encode_offset_commit_value(&CommittedOffset {
            offset: 42,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: 1,
            expire_timestamp_ms: Some(2),
        })
        .to_vec(),
        encode_group_metadata_value(&GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 3,
            protocol: Some("range".into()),
            leader: Some("m-1".into()),
            current_state_timestamp_ms: 5,
            members: vec![member.clone(), member],
        })
        .to_vec(),
    ];
    weir_test_support::fuzz_smoke("consumer_offsets_records", &seeds, 50_000, fuzz_decode);
}
