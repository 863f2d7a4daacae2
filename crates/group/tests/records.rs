//! Byte-exact encoding and bounds-checked decoding of `__consumer_offsets`
//! keys and values.

use bytes::Bytes;
use weir_group::CommittedOffset;
use weir_group::RecordError;
use weir_group::records::*;

#[test]
fn offset_commit_key_bytes() {
    let key = encode_offset_commit_key("g", "t", 7);
    assert_eq!(&key[..], &[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 7]);
    assert_eq!(
        decode_key(&key).unwrap(),
        RecordKey::OffsetCommit {
            group: "g".into(),
            topic: "t".into(),
            partition: 7
        }
    );
}

#[test]
fn group_metadata_key_bytes() {
    let key = encode_group_metadata_key("ab");
    assert_eq!(&key[..], &[0, 2, 0, 2, b'a', b'b']);
    assert_eq!(
        decode_key(&key).unwrap(),
        RecordKey::GroupMetadata { group: "ab".into() }
    );
}

#[test]
fn offset_commit_value_v3_bytes() {
    let v = CommittedOffset {
        offset: 5,
        leader_epoch: 2,
        metadata: "m".into(),
        commit_timestamp_ms: 9,
        expire_timestamp_ms: None,
    };
    let bytes = encode_offset_commit_value(&v);
    let mut want = vec![0, 3];
    want.extend_from_slice(&5i64.to_be_bytes());
    want.extend_from_slice(&2i32.to_be_bytes());
    want.extend_from_slice(&[0, 1, b'm']);
    want.extend_from_slice(&9i64.to_be_bytes());
    assert_eq!(&bytes[..], &want[..]);
    assert_eq!(decode_offset_commit_value(&bytes).unwrap(), v);
}

#[test]
fn offset_commit_value_v1_round_trip() {
    let v = CommittedOffset {
        offset: 5,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp_ms: 9,
        expire_timestamp_ms: Some(100),
    };
    let bytes = encode_offset_commit_value(&v);
    assert_eq!(&bytes[..2], &[0, 1]);
    assert_eq!(decode_offset_commit_value(&bytes).unwrap(), v);
}

#[test]
fn offset_commit_value_v4_flexible() {
    // v4: offset, leaderEpoch, compact string, commitTimestamp, tags.
    let mut raw = vec![0, 4];
    raw.extend_from_slice(&42i64.to_be_bytes());
    raw.extend_from_slice(&(-1i32).to_be_bytes());
    raw.extend_from_slice(&[3, b'h', b'i']); // length 2 as N+1
    raw.extend_from_slice(&7i64.to_be_bytes());
    raw.extend_from_slice(&[1, 0, 1, 0xff]); // one unknown tag, 1 byte
    let v = decode_offset_commit_value(&raw).unwrap();
    assert_eq!(v.offset, 42);
    assert_eq!(v.metadata, "hi");
    assert_eq!(v.commit_timestamp_ms, 7);
}

fn sample_group() -> GroupMetadataValue {
    GroupMetadataValue {
        protocol_type: "consumer".into(),
        generation: 3,
        protocol: Some("range".into()),
        leader: Some("m1".into()),
        current_state_timestamp_ms: 1234,
        members: vec![MemberMetadata {
            member_id: "m1".into(),
            group_instance_id: Some("i1".into()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: 300_000,
            session_timeout_ms: 45_000,
            subscription: Bytes::from_static(b"sub"),
            assignment: Bytes::from_static(b"asg"),
        }],
    }
}

#[test]
fn group_metadata_value_v3_bytes() {
    fn s(out: &mut Vec<u8>, v: &str) {
        out.extend_from_slice(&(v.len() as i16).to_be_bytes());
        out.extend_from_slice(v.as_bytes());
    }
    let mut want = vec![0, 3];
    s(&mut want, "consumer"); // protocolType
    want.extend_from_slice(&3i32.to_be_bytes()); // generation
    s(&mut want, "range"); // protocol
    s(&mut want, "m1"); // leader
    want.extend_from_slice(&1234i64.to_be_bytes()); // currentStateTimestamp
    want.extend_from_slice(&1i32.to_be_bytes()); // members
    s(&mut want, "m1");
    s(&mut want, "i1"); // groupInstanceId
    s(&mut want, "c");
    s(&mut want, "/127.0.0.1");
    want.extend_from_slice(&300_000i32.to_be_bytes());
    want.extend_from_slice(&45_000i32.to_be_bytes());
    want.extend_from_slice(&3i32.to_be_bytes());
    want.extend_from_slice(b"sub");
    want.extend_from_slice(&3i32.to_be_bytes());
    want.extend_from_slice(b"asg");
    assert_eq!(&encode_group_metadata_value(&sample_group())[..], &want[..]);
    // Empty group: null protocol and leader.
    let empty = GroupMetadataValue {
        protocol: None,
        leader: None,
        members: Vec::new(),
        ..sample_group()
    };
    let bytes = encode_group_metadata_value(&empty);
    let tail = &bytes[2 + 10 + 4..];
    assert_eq!(&tail[..4], &[0xff, 0xff, 0xff, 0xff]);
    assert_eq!(decode_group_metadata_value(&bytes).unwrap(), empty);
}

#[test]
fn group_metadata_value_v4_flexible() {
    // v4 = compact encodings and tagged fields, same fields as v3.
    let mut raw = vec![0, 4];
    raw.extend_from_slice(&[9]);
    raw.extend_from_slice(b"consumer");
    raw.extend_from_slice(&7i32.to_be_bytes());
    raw.extend_from_slice(&[0]); // protocol null
    raw.extend_from_slice(&[0]); // leader null
    raw.extend_from_slice(&(-1i64).to_be_bytes());
    raw.extend_from_slice(&[1]); // zero members
    raw.extend_from_slice(&[0]); // no tagged fields
    let v = decode_group_metadata_value(&raw).unwrap();
    assert_eq!(v.protocol_type, "consumer");
    assert_eq!(v.generation, 7);
    assert_eq!(v.protocol, None);
    assert!(v.members.is_empty());
}

#[test]
fn group_metadata_value_round_trip() {
    let v = sample_group();
    let bytes = encode_group_metadata_value(&v);
    assert_eq!(&bytes[..2], &[0, 3]);
    assert_eq!(decode_group_metadata_value(&bytes).unwrap(), v);
}

#[test]
fn truncated_inputs_are_errors_not_panics() {
    let full = encode_group_metadata_value(&sample_group());
    for cut in 0..full.len() {
        assert!(
            decode_group_metadata_value(&full[..cut]).is_err(),
            "cut at {cut}"
        );
    }
    let full = encode_offset_commit_key("group", "topic", 1);
    for cut in 0..full.len() {
        assert!(decode_key(&full[..cut]).is_err(), "cut at {cut}");
    }
}

#[test]
fn huge_member_count_is_rejected_before_allocating() {
    let mut raw = vec![0, 3, 0, 0];
    raw.extend_from_slice(&0i32.to_be_bytes());
    raw.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]); // protocol null
    raw.extend_from_slice(&(-1i64).to_be_bytes());
    raw.extend_from_slice(&i32::MAX.to_be_bytes());
    // protocol=null consumed 2 bytes, leader=null 2 bytes; the count
    // exceeds what remains.
    assert!(matches!(
        decode_group_metadata_value(&raw),
        Err(RecordError::Truncated { .. })
    ));
}

/// The compact (uvarint) length of a flexible value: more than five bytes is
/// an error at the varint's first byte, an input ending inside it a
/// truncation at the end of the input.
#[test]
fn malformed_uvarint_lengths_are_errors() {
    // OffsetCommitValue v4: version, offset, leader epoch, then the compact
    // metadata length at byte 14.
    let mut head = vec![0, 4];
    head.extend_from_slice(&7i64.to_be_bytes());
    head.extend_from_slice(&0i32.to_be_bytes());

    let mut too_long = head.clone();
    too_long.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]);
    assert_eq!(
        decode_offset_commit_value(&too_long),
        Err(RecordError::VarintTooLong { position: 14 })
    );

    let mut cut = head.clone();
    cut.extend_from_slice(&[0x80, 0x80]);
    assert_eq!(
        decode_offset_commit_value(&cut),
        Err(RecordError::Truncated {
            position: 16,
            needed: 1,
            remaining: 0
        })
    );

    // A two-byte length, 129 - 1 = 128 bytes of metadata: the bytes after
    // the varint are where the string starts.
    let mut ok = head;
    ok.extend_from_slice(&[0x81, 0x01]);
    ok.extend_from_slice(&[b'm'; 128]);
    ok.extend_from_slice(&5i64.to_be_bytes());
    ok.push(0); // no tagged fields
    let v = decode_offset_commit_value(&ok).unwrap();
    assert_eq!(
        (v.offset, v.metadata.len(), v.commit_timestamp_ms),
        (7, 128, 5)
    );
}

/// Random and bit-flipped inputs: decoders return errors, never panic,
/// and never allocate from an unchecked length.
#[test]
fn arbitrary_bytes_never_panic() {
    let mut state = 0x5eed_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let seeds = [
        encode_group_metadata_value(&sample_group()).to_vec(),
        encode_offset_commit_key("group", "topic", 3).to_vec(),
        encode_offset_commit_value(&CommittedOffset {
            offset: 1,
            leader_epoch: 2,
            metadata: "meta".into(),
            commit_timestamp_ms: 3,
            expire_timestamp_ms: None,
        })
        .to_vec(),
    ];
    let mut decoded_ok = 0;
    for i in 0..20_000 {
        let mut input = seeds[i % seeds.len()].clone();
        if i % 4 == 0 {
            let len = (next() % 64) as usize;
            input = (0..len).map(|_| next() as u8).collect();
        } else {
            for _ in 0..(1 + next() % 3) {
                let pos = (next() as usize) % input.len();
                input[pos] ^= 1 << (next() % 8);
            }
        }
        // Only the absence of panics is checked; a flip in a timestamp
        // still decodes.
        decoded_ok += usize::from(decode_key(&input).is_ok());
        decoded_ok += usize::from(decode_offset_commit_value(&input).is_ok());
        decoded_ok += usize::from(decode_group_metadata_value(&input).is_ok());
    }
    assert!(
        decoded_ok > 0,
        "the mutations should leave some inputs valid"
    );
}

#[test]
fn unknown_key_versions_are_other() {
    assert_eq!(
        decode_key(&[0, 3, 0, 0]).unwrap(),
        RecordKey::Other { version: 3 }
    );
}
