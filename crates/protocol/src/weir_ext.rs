//! weir's own extensions of the Kafka protocol, carried in tagged fields so
//! that a client that does not ask for them never sees a changed byte.
//!
//! Tagged fields exist only in flexible versions; a receiver that does not
//! know a tag keeps it as a [`RawTaggedField`] and otherwise ignores it
//! (KIP-482), so an extension tag is safe to send to any broker. The tags
//! used here are far above Kafka's own (which are below 10 as of Kafka 4.x)
//! so that a future Kafka field cannot collide with them.
//!
//! **Segment counts in DescribeLogDirs** (v2+): a request whose top-level
//! tagged fields hold [`SEGMENT_COUNT_TAG`] (empty value) asks the broker
//! to add the same tag to every `DescribeLogDirsPartition` of the
//! response, its value the partition's number of segments as an unsigned
//! varint. Without the request tag the response is unchanged.
//!
//! ```
//! use weir_protocol::messages::DescribeLogDirsRequest;
//! use weir_protocol::messages::describe_log_dirs_response::DescribeLogDirsPartition;
//! use weir_protocol::weir_ext;
//!
//! let mut req = DescribeLogDirsRequest::default();
//! assert!(!weir_ext::wants_segment_counts(&req));
//! weir_ext::request_segment_counts(&mut req);
//! assert!(weir_ext::wants_segment_counts(&req));
//!
//! let mut p = DescribeLogDirsPartition::default();
//! assert_eq!(weir_ext::segment_count(&p), None);
//! weir_ext::set_segment_count(&mut p, 3);
//! assert_eq!(weir_ext::segment_count(&p), Some(3));
//! ```

use bytes::{Bytes, BytesMut};

use crate::codec::RawTaggedField;
use crate::messages::DescribeLogDirsRequest;
use crate::messages::describe_log_dirs_response::DescribeLogDirsPartition;
use crate::varint;

/// Tag of the segment-count extension of DescribeLogDirs, both in the
/// request (top level, "please include segment counts", empty value) and
/// in each response `DescribeLogDirsPartition` (the count, unsigned
/// varint).
pub const SEGMENT_COUNT_TAG: u32 = 10_000;

/// Inserts `field` into `fields`, keeping them sorted by tag and replacing
/// a field with the same tag.
fn put_tag(fields: &mut Vec<RawTaggedField>, field: RawTaggedField) {
    match fields.binary_search_by_key(&field.tag, |f| f.tag) {
        Ok(i) => {
            if let Some(slot) = fields.get_mut(i) {
                *slot = field;
            }
        }
        Err(i) => fields.insert(i, field),
    }
}

/// Marks `req` as asking for segment counts. Only encodable in
/// DescribeLogDirs v2+ (flexible versions).
pub fn request_segment_counts(req: &mut DescribeLogDirsRequest) {
    put_tag(
        &mut req.unknown_tagged_fields,
        RawTaggedField {
            tag: SEGMENT_COUNT_TAG,
            data: Bytes::new(),
        },
    );
}

/// Whether `req` asks for segment counts.
pub fn wants_segment_counts(req: &DescribeLogDirsRequest) -> bool {
    req.unknown_tagged_fields
        .iter()
        .any(|f| f.tag == SEGMENT_COUNT_TAG)
}

/// Adds the segment count `count` to a response partition.
pub fn set_segment_count(p: &mut DescribeLogDirsPartition, count: u64) {
    let mut data = BytesMut::with_capacity(varint::unsigned_varlong_len(count));
    varint::put_unsigned_varlong(&mut data, count);
    put_tag(
        &mut p.unknown_tagged_fields,
        RawTaggedField {
            tag: SEGMENT_COUNT_TAG,
            data: data.freeze(),
        },
    );
}

/// The segment count of a response partition: None when the broker did
/// not send one (it does not know the extension, or it was not asked) or
/// the value is not exactly one unsigned varint.
pub fn segment_count(p: &DescribeLogDirsPartition) -> Option<u64> {
    let f = p
        .unknown_tagged_fields
        .iter()
        .find(|f| f.tag == SEGMENT_COUNT_TAG)?;
    match varint::read_unsigned_varlong(&f.data) {
        Ok((v, n)) if n == f.data.len() => Some(v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decodable, Encodable};
    use crate::messages::describe_log_dirs_response::{
        DescribeLogDirsResult, DescribeLogDirsTopic,
    };
    use crate::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
    use crate::messages::{DescribeLogDirsResponse, ProduceResponse, ResponseBody};

    #[test]
    fn request_tag_survives_the_wire_in_flexible_versions_only() {
        let mut req = DescribeLogDirsRequest::default();
        request_segment_counts(&mut req);
        request_segment_counts(&mut req); // idempotent
        assert_eq!(req.unknown_tagged_fields.len(), 1);
        for v in 2..=4 {
            let mut buf = BytesMut::new();
            req.encode(&mut buf, v).unwrap();
            let back = DescribeLogDirsRequest::decode(&mut buf.freeze(), v).unwrap();
            assert!(wants_segment_counts(&back), "v{v}");
        }
        let mut buf = BytesMut::new();
        assert!(req.encode(&mut buf, 1).is_err());
    }

    #[test]
    fn segment_counts_round_trip_and_reject_malformed_values() {
        for count in [0u64, 1, 127, 128, 300, u64::from(u32::MAX) + 5] {
            let mut p = DescribeLogDirsPartition::default();
            set_segment_count(&mut p, count);
            let resp = DescribeLogDirsResponse {
                results: vec![DescribeLogDirsResult {
                    topics: vec![DescribeLogDirsTopic {
                        name: "t".into(),
                        partitions: vec![p],
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            };
            let mut buf = BytesMut::new();
            resp.encode(&mut buf, 4).unwrap();
            let back = DescribeLogDirsResponse::decode(&mut buf.freeze(), 4).unwrap();
            let p = &back.results[0].topics[0].partitions[0];
            assert_eq!(segment_count(p), Some(count));
        }
        let mut p = DescribeLogDirsPartition::default();
        for data in [&[][..], &[0x80][..], &[1, 2][..]] {
            p.unknown_tagged_fields = vec![RawTaggedField {
                tag: SEGMENT_COUNT_TAG,
                data: Bytes::copy_from_slice(data),
            }];
            assert_eq!(segment_count(&p), None, "{data:?}");
        }
    }

    #[test]
    fn extension_tags_keep_other_unknown_tags_sorted() {
        let mut p = DescribeLogDirsPartition {
            unknown_tagged_fields: vec![
                RawTaggedField {
                    tag: 5,
                    data: Bytes::from_static(&[1]),
                },
                RawTaggedField {
                    tag: 20_000,
                    data: Bytes::from_static(&[2]),
                },
            ],
            ..Default::default()
        };
        set_segment_count(&mut p, 7);
        let tags: Vec<u32> = p.unknown_tagged_fields.iter().map(|f| f.tag).collect();
        assert_eq!(tags, [5, SEGMENT_COUNT_TAG, 20_000]);
        set_segment_count(&mut p, 8);
        assert_eq!(p.unknown_tagged_fields.len(), 3);
        assert_eq!(segment_count(&p), Some(8));
    }

    #[test]
    fn for_each_error_code_visits_nested_codes_in_order() {
        let part = |i: i32, code: i16| PartitionProduceResponse {
            index: i,
            error_code: code,
            ..Default::default()
        };
        let resp = ResponseBody::Produce(ProduceResponse {
            responses: vec![
                TopicProduceResponse {
                    name: "a".into(),
                    partition_responses: vec![part(0, 3), part(1, 0)],
                    ..Default::default()
                },
                TopicProduceResponse {
                    name: "b".into(),
                    partition_responses: vec![part(0, 87)],
                    ..Default::default()
                },
            ],
            ..Default::default()
        });
        let mut seen = Vec::new();
        resp.for_each_error_code(&mut |c| seen.push(c));
        assert_eq!(seen, [3, 0, 87]);

        // Top-level code first, then the results' codes.
        let resp = ResponseBody::DescribeLogDirs(DescribeLogDirsResponse {
            error_code: 31,
            results: vec![
                DescribeLogDirsResult {
                    error_code: 57,
                    ..Default::default()
                },
                DescribeLogDirsResult::default(),
            ],
            ..Default::default()
        });
        let mut seen = Vec::new();
        resp.for_each_error_code(&mut |c| seen.push(c));
        assert_eq!(seen, [31, 57, 0]);
    }
}
