//! Byte-exact checks of the encoding rules that random round trips cannot
//! see: header versions, per-field flexible override, tagged-field defaults,
//! ignorable and non-ignorable fields, nullability, frame errors.

use bytes::{Bytes, BytesMut};
use weir_protocol::frame::{decode_request, encode_request, encode_response};
use weir_protocol::messages::*;
use weir_protocol::{
    Decodable, DecodeError, Encodable, EncodeError, FrameError, RawTaggedField, Uuid,
};

fn enc<T: Encodable>(v: &T, version: i16) -> Result<Vec<u8>, EncodeError> {
    let mut b = BytesMut::new();
    v.encode(&mut b, version)?;
    assert_eq!(v.encoded_len(version)?, b.len());
    Ok(b.to_vec())
}

#[test]
fn request_header_v2_keeps_int16_client_id() {
    let h = RequestHeader {
        request_api_key: 18,
        request_api_version: 3,
        correlation_id: 1,
        client_id: Some("ab".into()),
        ..Default::default()
    };
    // ClientId has "flexibleVersions": "none": int16 length even in v2,
    // followed by the (empty) tagged-field section.
    assert_eq!(
        enc(&h, 2).unwrap(),
        [0, 18, 0, 3, 0, 0, 0, 1, 0, 2, b'a', b'b', 0]
    );
    assert_eq!(
        enc(&h, 1).unwrap(),
        [0, 18, 0, 3, 0, 0, 0, 1, 0, 2, b'a', b'b']
    );
    // v0 has no client id; it is ignorable, so it is dropped.
    assert_eq!(enc(&h, 0).unwrap(), [0, 18, 0, 3, 0, 0, 0, 1]);
    let null = RequestHeader {
        client_id: None,
        ..h
    };
    assert_eq!(
        enc(&null, 1).unwrap(),
        [0, 18, 0, 3, 0, 0, 0, 1, 0xff, 0xff]
    );
}

#[test]
fn api_versions_request_v3_is_compact() {
    let r = ApiVersionsRequest {
        client_software_name: "x".into(),
        client_software_version: "1".into(),
        ..Default::default()
    };
    assert_eq!(enc(&r, 3).unwrap(), [2, b'x', 2, b'1', 0]);
    // Absent before v3 but ignorable: dropped.
    assert_eq!(enc(&r, 2).unwrap(), Vec::<u8>::new());
}

#[test]
fn non_ignorable_and_ignorable_fields() {
    // AllowAutoTopicCreation (v4+, default true, not ignorable).
    let m = MetadataRequest {
        allow_auto_topic_creation: false,
        ..Default::default()
    };
    assert_eq!(
        enc(&m, 3),
        Err(EncodeError::NonIgnorableField {
            field: "MetadataRequest.allow_auto_topic_creation",
            version: 3
        })
    );
    assert!(enc(&MetadataRequest::default(), 3).is_ok());
    // TopicId (v10+, ignorable) is silently dropped in v9.
    let t = metadata_request::MetadataRequestTopic {
        topic_id: Uuid([7; 16]),
        name: Some("t".into()),
        ..Default::default()
    };
    let m = MetadataRequest {
        topics: Some(vec![t]),
        ..Default::default()
    };
    // topics [name "t"], AllowAutoTopicCreation, IncludeCluster/TopicAuthorizedOperations, tags.
    assert_eq!(enc(&m, 9).unwrap(), [2, 2, b't', 0, 1, 0, 0, 0]);
}

#[test]
fn null_only_where_allowed() {
    let m = MetadataRequest {
        topics: None,
        ..Default::default()
    };
    assert_eq!(
        enc(&m, 0),
        Err(EncodeError::NullNotAllowed {
            field: "MetadataRequest.topics",
            version: 0
        })
    );
    assert_eq!(enc(&m, 1).unwrap(), [0xff, 0xff, 0xff, 0xff]);
    // A null array in v0 is rejected on decode too.
    let mut b = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff]);
    assert_eq!(
        MetadataRequest::decode(&mut b, 0),
        Err(DecodeError::NullNotAllowed {
            field: "MetadataRequest.topics"
        })
    );
}

#[test]
fn tagged_fields_at_default_are_omitted() {
    // ApiVersionsResponse v3: SupportedFeatures (tag 0), FinalizedFeaturesEpoch
    // (tag 1, default -1), FinalizedFeatures (tag 2), ZkMigrationReady (tag 3).
    let r = ApiVersionsResponse::default();
    assert_eq!(r.finalized_features_epoch, -1);
    // error code, empty compact api_keys, throttle time, no tagged fields.
    assert_eq!(enc(&r, 3).unwrap(), [0, 0, 1, 0, 0, 0, 0, 0]);
    let r = ApiVersionsResponse {
        finalized_features_epoch: 5,
        ..Default::default()
    };
    assert_eq!(
        enc(&r, 3).unwrap(),
        [0, 0, 1, 0, 0, 0, 0, 1, 1, 8, 0, 0, 0, 0, 0, 0, 0, 5]
    );
    // Tagged fields do not exist in v2: the non-default value is dropped
    // only because the field is ignorable.
    assert_eq!(enc(&r, 2).unwrap(), [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
}

#[test]
fn unknown_tags_interleave_in_tag_order_and_survive() {
    let r = ApiVersionsResponse {
        finalized_features_epoch: 5,
        unknown_tagged_fields: vec![
            RawTaggedField {
                tag: 0,
                data: Bytes::from_static(&[1]),
            },
            RawTaggedField {
                tag: 9,
                data: Bytes::from_static(&[2, 3]),
            },
        ],
        ..Default::default()
    };
    let bytes = enc(&r, 3).unwrap();
    assert_eq!(
        bytes,
        [
            0, 0, 1, 0, 0, 0, 0, 3, 0, 1, 1, 1, 8, 0, 0, 0, 0, 0, 0, 0, 5, 9, 2, 2, 3
        ]
    );
    // Tag 0 is SupportedFeatures, known here, so it cannot stay raw: the
    // byte 1 decodes as an empty compact array of features.
    let back = ApiVersionsResponse::decode(&mut Bytes::from(bytes), 3).unwrap();
    assert_eq!(
        back.unknown_tagged_fields,
        vec![RawTaggedField {
            tag: 9,
            data: Bytes::from_static(&[2, 3])
        }]
    );
    assert_eq!(back.finalized_features_epoch, 5);
    assert!(back.supported_features.is_empty());
}

#[test]
fn known_tagged_field_must_fill_its_size() {
    // FinalizedFeaturesEpoch (int64) declared with 9 bytes.
    let mut b = Bytes::from_static(&[0, 0, 1, 0, 0, 0, 0, 1, 1, 9, 0, 0, 0, 0, 0, 0, 0, 5, 0]);
    assert_eq!(
        ApiVersionsResponse::decode(&mut b, 3),
        Err(DecodeError::TaggedFieldSize {
            tag: 1,
            declared: 9,
            consumed: 8
        })
    );
}

#[test]
fn header_versions() {
    assert_eq!(ApiKey::Produce.request_header_version(8), 1);
    assert_eq!(ApiKey::Produce.request_header_version(9), 2);
    assert_eq!(ApiKey::Produce.response_header_version(9), 1);
    assert_eq!(ApiKey::ControlledShutdown.request_header_version(0), 0);
    assert_eq!(ApiKey::ApiVersions.request_header_version(3), 2);
    assert_eq!(ApiKey::ApiVersions.response_header_version(3), 0);
    assert_eq!(ApiKey::try_from(18), Ok(ApiKey::ApiVersions));
    assert!(ApiKey::try_from(-1).is_err());
    assert_eq!(ApiKey::Metadata.name(), "Metadata");
    assert!(
        ApiKey::ALL
            .windows(2)
            .all(|w| (w[0] as i16) < (w[1] as i16))
    );
}

#[test]
fn api_versions_response_frame_uses_header_v0() {
    let mut buf = BytesMut::new();
    let body = ResponseBody::ApiVersions(ApiVersionsResponse::default());
    encode_response(&mut buf, 42, ApiKey::ApiVersions, 3, &body).unwrap();
    // size, correlation id, then the body: no tagged-field byte after the id.
    assert_eq!(&buf[..], [0, 0, 0, 12, 0, 0, 0, 42, 0, 0, 1, 0, 0, 0, 0, 0]);
    let mut buf = BytesMut::new();
    let body = ResponseBody::Metadata(MetadataResponse::default());
    encode_response(&mut buf, 42, ApiKey::Metadata, 9, &body).unwrap();
    assert_eq!(&buf[4..9], [0, 0, 0, 42, 0]);
    assert_eq!(
        encode_response(&mut BytesMut::new(), 1, ApiKey::Produce, 9, &body),
        Err(EncodeError::ApiKeyMismatch {
            api_key: ApiKey::Produce
        })
    );
}

#[test]
fn frame_errors_carry_the_correlation_id() {
    let f = Bytes::from_static(&[0x7f, 0, 0, 0, 0, 0, 0, 5, 0xff, 0xff]);
    assert_eq!(
        decode_request(f),
        Err(FrameError::UnknownApiKey {
            api_key: 0x7f00,
            correlation_id: 5
        })
    );
    let f = Bytes::from_static(&[0, 18, 0x7f, 0, 0, 0, 0, 6, 0xff, 0xff]);
    assert_eq!(
        decode_request(f),
        Err(FrameError::UnsupportedVersion {
            api_key: ApiKey::ApiVersions,
            version: 0x7f00,
            correlation_id: 6
        })
    );
    let f = Bytes::from_static(&[0, 18, 0, 0]);
    assert!(matches!(
        decode_request(f),
        Err(FrameError::Decode(DecodeError::Incomplete { .. }))
    ));
    // ApiVersions v0, null client id, then one extra byte.
    let f = Bytes::from_static(&[0, 18, 0, 0, 0, 0, 0, 7, 0xff, 0xff, 0]);
    assert_eq!(
        decode_request(f),
        Err(FrameError::TrailingBytes {
            api_key: ApiKey::ApiVersions,
            version: 0,
            remaining: 1
        })
    );
}

#[test]
fn request_frame_round_trip_with_size_prefix() {
    let header = RequestHeader {
        request_api_key: 3,
        request_api_version: 12,
        correlation_id: 3,
        ..Default::default()
    };
    let body = RequestBody::Metadata(MetadataRequest {
        topics: None,
        ..Default::default()
    });
    let mut buf = BytesMut::new();
    encode_request(&mut buf, &header, &body).unwrap();
    let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    assert_eq!(size, buf.len() - 4);
    assert_eq!(
        decode_request(buf.freeze().slice(4..)).unwrap(),
        (header, body)
    );
    let wrong = RequestHeader {
        request_api_key: 0,
        ..Default::default()
    };
    assert!(
        encode_request(
            &mut BytesMut::new(),
            &wrong,
            &RequestBody::Metadata(MetadataRequest::default())
        )
        .is_err()
    );
}

#[test]
fn uuid_text_matches_kafka() {
    // Kafka's Uuid.ONE_UUID (0, 1) prints as "AAAAAAAAAAAAAAAAAAAAAQ".
    let mut one = [0u8; 16];
    one[15] = 1;
    assert_eq!(Uuid(one).to_string(), "AAAAAAAAAAAAAAAAAAAAAQ");
    assert_eq!("AAAAAAAAAAAAAAAAAAAAAQ".parse::<Uuid>(), Ok(Uuid(one)));
}

#[test]
fn records_are_zero_copy() {
    let mut topic = produce_request::TopicProduceData {
        name: "t".into(),
        ..Default::default()
    };
    topic
        .partition_data
        .push(produce_request::PartitionProduceData {
            index: 0,
            records: Some(Bytes::from_static(b"batch-bytes")),
            ..Default::default()
        });
    let req = ProduceRequest {
        acks: -1,
        timeout_ms: 1000,
        topic_data: vec![topic],
        ..Default::default()
    };
    let mut buf = BytesMut::new();
    req.encode(&mut buf, 9).unwrap();
    let input = buf.freeze();
    let decoded = ProduceRequest::decode(&mut input.clone(), 9).unwrap();
    let records = decoded.topic_data[0].partition_data[0]
        .records
        .clone()
        .unwrap();
    assert_eq!(&records[..], b"batch-bytes");
    // The decoded slice points into the input buffer.
    let start = input.as_ptr() as usize;
    let p = records.as_ptr() as usize;
    assert!(p >= start && p + records.len() <= start + input.len());
}
