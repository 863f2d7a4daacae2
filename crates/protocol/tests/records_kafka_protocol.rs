//! Cross-check against an independent implementation: the `kafka-protocol`
//! crate's `RecordBatchEncoder` / `RecordBatchDecoder` (its lz4 is the C
//! liblz4, its snappy writes the xerial framing). Encode with one, decode
//! with the other, for every codec, and compare field by field.

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records as kp;
use proptest::prelude::*;
use weir_protocol::records::{
    BatchIter, Compression, DecompressLimits, RecordBatchBuilder, RecordHeader,
};

#[derive(Debug, Clone)]
struct Input {
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    /// Unique keys: kafka-protocol keeps headers in a map.
    headers: Vec<(String, Option<Vec<u8>>)>,
}

fn input() -> impl Strategy<Value = Input> {
    (
        1_600_000_000_000i64..1_800_000_000_000,
        prop::option::of(prop::collection::vec(any::<u8>(), 0..40)),
        prop::option::of(prop::collection::vec(any::<u8>(), 0..2000)),
        prop::collection::btree_map(
            "[a-z]{1,8}",
            prop::option::of(prop::collection::vec(any::<u8>(), 0..16)),
            0..3,
        ),
    )
        .prop_map(|(timestamp, key, value, headers)| Input {
            timestamp,
            key,
            value,
            headers: headers.into_iter().collect(),
        })
}

fn kp_codec(c: Compression) -> kp::Compression {
    match c {
        Compression::None => kp::Compression::None,
        Compression::Gzip => kp::Compression::Gzip,
        Compression::Snappy => kp::Compression::Snappy,
        Compression::Lz4 => kp::Compression::Lz4,
        Compression::Zstd => kp::Compression::Zstd,
    }
}

fn codec() -> impl Strategy<Value = Compression> {
    (0usize..5).prop_map(|i| Compression::ALL[i])
}

/// Producer identity shared by a batch: (id, epoch, base sequence,
/// transactional, leader epoch).
fn producer() -> impl Strategy<Value = (i64, i16, i32, bool, i32)> {
    prop_oneof![
        Just((-1i64, -1i16, -1i32, false, -1i32)),
        (
            0i64..1_000_000,
            0i16..100,
            0i32..1_000_000,
            any::<bool>(),
            0i32..50
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn weir_encodes_kafka_protocol_decodes(
        codec in codec(),
        base_offset in 0i64..(1 << 40),
        producer in producer(),
        inputs in prop::collection::vec(input(), 1..20),
    ) {
        let (pid, epoch, seq, txn, ple) = producer;
        let mut b = RecordBatchBuilder::new(codec)
            .base_offset(base_offset)
            .producer(pid, epoch, seq)
            .transactional(txn)
            .partition_leader_epoch(ple);
        for i in &inputs {
            b.push(
                i.timestamp,
                i.key.clone().map(Bytes::from),
                i.value.clone().map(Bytes::from),
                i.headers
                    .iter()
                    .map(|(k, v)| RecordHeader { key: k.clone(), value: v.clone().map(Bytes::from) })
                    .collect(),
            ).unwrap();
        }
        let batch = b.build().unwrap();
        let mut buf = batch.into_bytes();
        let set = kp::RecordBatchDecoder::decode(&mut buf).unwrap();
        prop_assert_eq!(set.compression, kp_codec(codec));
        prop_assert_eq!(set.records.len(), inputs.len());
        for (n, (r, i)) in set.records.iter().zip(&inputs).enumerate() {
            prop_assert_eq!(r.offset, base_offset + n as i64);
            prop_assert_eq!(r.timestamp, i.timestamp);
            prop_assert_eq!(r.key.as_deref(), i.key.as_deref());
            prop_assert_eq!(r.value.as_deref(), i.value.as_deref());
            prop_assert_eq!(r.producer_id, pid);
            prop_assert_eq!(r.producer_epoch, epoch);
            prop_assert_eq!(r.transactional, txn);
            prop_assert!(!r.control);
            prop_assert_eq!(r.partition_leader_epoch, ple);
            prop_assert_eq!(r.timestamp_type, kp::TimestampType::Creation);
            // kafka-protocol reports baseSequence + offsetDelta even when
            // the batch has no sequence (-1).
            prop_assert_eq!(r.sequence, seq.wrapping_add(n as i32));
            let headers: Vec<(String, Option<Vec<u8>>)> = r
                .headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.as_ref().map(|v| v.to_vec())))
                .collect();
            prop_assert_eq!(&headers, &i.headers);
        }
    }

    #[test]
    fn kafka_protocol_encodes_weir_decodes(
        codec in codec(),
        base_offset in 0i64..(1 << 40),
        producer in producer(),
        inputs in prop::collection::vec(input(), 1..20),
    ) {
        let (pid, epoch, seq, txn, ple) = producer;
        let records: Vec<kp::Record> = inputs
            .iter()
            .enumerate()
            .map(|(n, i)| kp::Record {
                transactional: txn,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: ple,
                producer_id: pid,
                producer_epoch: epoch,
                timestamp_type: kp::TimestampType::Creation,
                offset: base_offset + n as i64,
                // kafka-protocol starts a new batch whenever offset − sequence
                // changes, so sequences advance with offsets even from -1.
                sequence: seq.wrapping_add(n as i32),
                timestamp: i.timestamp,
                key: i.key.clone().map(Bytes::from),
                value: i.value.clone().map(Bytes::from),
                headers: i
                    .headers
                    .iter()
                    .map(|(k, v)| (StrBytes::from_string(k.clone()), v.clone().map(Bytes::from)))
                    .collect::<IndexMap<_, _>>(),
            })
            .collect();
        let mut out = BytesMut::new();
        kp::RecordBatchEncoder::encode(
            &mut out,
            &records,
            &kp::RecordEncodeOptions { version: 2, compression: kp_codec(codec) },
        ).unwrap();
        let batches: Vec<_> = BatchIter::new(out.freeze()).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(batches.len(), 1);
        let batch = &batches[0];
        let h = batch.header();
        prop_assert_eq!(batch.compression().unwrap(), codec);
        prop_assert_eq!(h.base_offset, base_offset);
        prop_assert_eq!(h.producer_id, pid);
        prop_assert_eq!(h.producer_epoch, epoch);
        prop_assert_eq!(h.base_sequence, seq);
        prop_assert_eq!(h.partition_leader_epoch, ple);
        prop_assert_eq!(h.is_transactional(), txn);
        prop_assert_eq!(h.max_timestamp, inputs.iter().map(|i| i.timestamp).max().unwrap());
        prop_assert_eq!(batch.last_offset(), base_offset + inputs.len() as i64 - 1);
        let decoded = batch.collect_records(&DecompressLimits::default()).unwrap();
        prop_assert_eq!(decoded.len(), inputs.len());
        for (n, (r, i)) in decoded.iter().zip(&inputs).enumerate() {
            prop_assert_eq!(r.offset(h.base_offset), base_offset + n as i64);
            prop_assert_eq!(r.timestamp(h.base_timestamp), i.timestamp);
            prop_assert_eq!(r.key.as_deref(), i.key.as_deref());
            prop_assert_eq!(r.value.as_deref(), i.value.as_deref());
            let headers: Vec<(String, Option<Vec<u8>>)> = r
                .headers
                .iter()
                .map(|h| (h.key.clone(), h.value.as_ref().map(|v| v.to_vec())))
                .collect();
            prop_assert_eq!(&headers, &i.headers);
        }
    }
}

/// Large, compressible records span several snappy (32 KiB) and lz4
/// (64 KiB) blocks.
#[test]
fn multi_block_payloads_cross_decode() {
    let value: Vec<u8> = (0..300_000u32).map(|i| (i % 97) as u8).collect();
    for codec in Compression::ALL {
        let mut b = RecordBatchBuilder::new(codec);
        for n in 0..3 {
            b.push(
                1_700_000_000_000 + n,
                None,
                Some(Bytes::from(value.clone())),
                vec![],
            )
            .unwrap();
        }
        let mut buf = b.build().unwrap().into_bytes();
        let set = kp::RecordBatchDecoder::decode(&mut buf).unwrap();
        assert_eq!(set.records.len(), 3, "{codec:?}");
        for r in &set.records {
            assert_eq!(r.value.as_deref(), Some(&value[..]), "{codec:?}");
        }

        let records: Vec<kp::Record> = (0..3)
            .map(|n| kp::Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: kp::TimestampType::Creation,
                offset: n,
                sequence: n as i32 - 1,
                timestamp: 1_700_000_000_000,
                key: None,
                value: Some(Bytes::from(value.clone())),
                headers: IndexMap::new(),
            })
            .collect();
        let mut out = BytesMut::new();
        kp::RecordBatchEncoder::encode(
            &mut out,
            &records,
            &kp::RecordEncodeOptions {
                version: 2,
                compression: kp_codec(codec),
            },
        )
        .unwrap();
        let batch = BatchIter::new(out.freeze()).next().unwrap().unwrap();
        let decoded = batch.collect_records(&DecompressLimits::default()).unwrap();
        assert_eq!(decoded.len(), 3);
        for r in &decoded {
            assert_eq!(r.value.as_deref(), Some(&value[..]), "{codec:?}");
        }
    }
}
