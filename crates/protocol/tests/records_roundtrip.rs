//! Build → parse round trips, CRC coverage, torn and corrupt buffers.

use bytes::Bytes;
use proptest::prelude::*;
use weir_protocol::records::header::{
    self, ATTRIBUTES_OFFSET, CRC_OFFSET, LENGTH_OFFSET, MAGIC_OFFSET, RECORDS_COUNT_OFFSET,
};
use weir_protocol::records::{
    BatchIter, BatchSlices, Compression, ControlRecordType, DecompressLimits, EndTxnMarker,
    HeaderError, RecordBatch, RecordBatchBuilder, RecordHeader, RecordsError,
};

/// What a test record is, independent of the codec.
#[derive(Debug, Clone)]
struct Input {
    offset_gap: i64,
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

#[derive(Debug, Clone)]
struct Flags {
    codec: Compression,
    base_offset: i64,
    partition_leader_epoch: i32,
    producer: (i64, i16, i32),
    transactional: bool,
    control: bool,
    log_append_time: Option<i64>,
    delete_horizon: Option<i64>,
}

fn bytes_opt(max: usize) -> impl Strategy<Value = Option<Vec<u8>>> {
    prop::option::of(prop::collection::vec(any::<u8>(), 0..max))
}

fn input() -> impl Strategy<Value = Input> {
    (
        0i64..3,
        1_600_000_000_000i64..1_800_000_000_000,
        bytes_opt(40),
        bytes_opt(300),
        prop::collection::vec(("[a-zA-Z0-9._\u{e9}-]{0,12}", bytes_opt(20)), 0..4),
    )
        .prop_map(|(offset_gap, timestamp, key, value, headers)| Input {
            offset_gap,
            timestamp,
            key,
            value,
            headers,
        })
}

fn flags() -> impl Strategy<Value = Flags> {
    (
        0usize..5,
        0i64..(1 << 40),
        -1i32..100,
        (-1i64..1000, -1i16..10, -1i32..1000),
        any::<bool>(),
        any::<bool>(),
        prop::option::of(1_600_000_000_000i64..1_800_000_000_000),
        prop::option::of(1_600_000_000_000i64..1_800_000_000_000),
    )
        .prop_map(
            |(c, base_offset, ple, producer, transactional, control, lat, dh)| Flags {
                codec: Compression::ALL[c],
                base_offset,
                partition_leader_epoch: ple,
                producer,
                transactional,
                control,
                log_append_time: lat,
                delete_horizon: dh,
            },
        )
}

fn build(flags: &Flags, inputs: &[Input]) -> (RecordBatch, Vec<i64>) {
    let mut b = RecordBatchBuilder::new(flags.codec)
        .base_offset(flags.base_offset)
        .partition_leader_epoch(flags.partition_leader_epoch)
        .producer(flags.producer.0, flags.producer.1, flags.producer.2)
        .transactional(flags.transactional)
        .control(flags.control)
        .delete_horizon(flags.delete_horizon);
    if let Some(t) = flags.log_append_time {
        b = b.log_append_time(t);
    }
    let mut offsets = Vec::new();
    let mut next = flags.base_offset;
    for i in inputs {
        let offset = next + i.offset_gap;
        b.push_at(
            offset,
            i.timestamp,
            i.key.clone().map(Bytes::from),
            i.value.clone().map(Bytes::from),
            i.headers
                .iter()
                .map(|(k, v)| RecordHeader {
                    key: k.clone(),
                    value: v.clone().map(Bytes::from),
                })
                .collect(),
        )
        .unwrap();
        offsets.push(offset);
        next = offset + 1;
    }
    (b.build().unwrap(), offsets)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn build_then_parse(flags in flags(), inputs in prop::collection::vec(input(), 0..12)) {
        let (batch, offsets) = build(&flags, &inputs);
        // Through the splitter, as a broker would see it.
        let parsed: Vec<_> = BatchIter::new(batch.as_bytes().clone()).collect();
        prop_assert_eq!(parsed.len(), 1);
        let parsed = parsed.into_iter().next().unwrap().unwrap();
        prop_assert_eq!(&parsed, &batch);
        let h = parsed.header();
        prop_assert_eq!(h.base_offset, flags.base_offset);
        prop_assert_eq!(h.partition_leader_epoch, flags.partition_leader_epoch);
        prop_assert_eq!(h.compression(), flags.codec.id());
        prop_assert_eq!(h.is_transactional(), flags.transactional);
        prop_assert_eq!(h.is_control(), flags.control);
        prop_assert_eq!(h.is_log_append_time(), flags.log_append_time.is_some());
        prop_assert_eq!(h.has_delete_horizon(), flags.delete_horizon.is_some());
        prop_assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence), flags.producer);
        prop_assert_eq!(h.records_count as usize, inputs.len());
        let expected_last = offsets.last().copied().unwrap_or(flags.base_offset);
        prop_assert_eq!(parsed.last_offset(), expected_last);
        let expected_max = match flags.log_append_time {
            Some(t) => t,
            None => inputs.iter().map(|i| i.timestamp).max().unwrap_or(-1),
        };
        prop_assert_eq!(h.max_timestamp, expected_max);
        if let Some(dh) = flags.delete_horizon {
            prop_assert_eq!(h.base_timestamp, dh);
        } else if let Some(first) = inputs.first() {
            prop_assert_eq!(h.base_timestamp, first.timestamp);
        }

        let records = parsed.collect_records(&DecompressLimits::default()).unwrap();
        prop_assert_eq!(records.len(), inputs.len());
        for ((r, i), off) in records.iter().zip(&inputs).zip(&offsets) {
            prop_assert_eq!(r.offset(h.base_offset), *off);
            prop_assert_eq!(r.timestamp(h.base_timestamp), i.timestamp);
            prop_assert_eq!(r.key.as_deref(), i.key.as_deref());
            prop_assert_eq!(r.value.as_deref(), i.value.as_deref());
            prop_assert_eq!(r.headers.len(), i.headers.len());
            for (rh, (k, v)) in r.headers.iter().zip(&i.headers) {
                prop_assert_eq!(&rh.key, k);
                prop_assert_eq!(rh.value.as_deref(), v.as_deref());
            }
        }
    }

    /// CRC-32C detects every single-bit error; the covered range is
    /// attributes..end, and a flip in the stored CRC itself is caught too.
    #[test]
    fn crc_detects_bit_flips(
        flags in flags(),
        inputs in prop::collection::vec(input(), 1..4),
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let (batch, _) = build(&flags, &inputs);
        let mut bytes = batch.as_bytes().to_vec();
        let pos = CRC_OFFSET + at.index(bytes.len() - CRC_OFFSET);
        bytes[pos] ^= 1 << bit;
        let flipped = RecordBatch::from_bytes(Bytes::from(bytes)).unwrap();
        let is_crc_mismatch = matches!(flipped.validate_crc(), Err(RecordsError::CrcMismatch { .. }));
        prop_assert!(is_crc_mismatch);
    }
}

fn sample_batch(codec: Compression, base_offset: i64, n: usize) -> RecordBatch {
    let mut b = RecordBatchBuilder::new(codec).base_offset(base_offset);
    for i in 0..n {
        b.push(
            1_700_000_000_000 + i as i64,
            Some(Bytes::from(format!("key-{i}"))),
            Some(Bytes::from(vec![i as u8; 50 + i])),
            vec![RecordHeader {
                key: "h".into(),
                value: Some(Bytes::from_static(b"v")),
            }],
        )
        .unwrap();
    }
    b.build().unwrap()
}

#[test]
fn every_bit_flip_of_one_batch_is_detected() {
    let batch = sample_batch(Compression::Lz4, 10, 3);
    let clean = batch.as_bytes().to_vec();
    for pos in CRC_OFFSET..clean.len() {
        for bit in 0..8 {
            let mut b = clean.clone();
            b[pos] ^= 1 << bit;
            let batch = RecordBatch::from_bytes(Bytes::from(b)).unwrap();
            assert!(
                matches!(batch.validate_crc(), Err(RecordsError::CrcMismatch { .. })),
                "flip at byte {pos} bit {bit} not detected"
            );
        }
    }
    // Base offset and leader epoch are outside the CRC on purpose: the
    // leader rewrites them.
    let mut b = clean.clone();
    header::set_base_offset(&mut b, 999);
    header::set_partition_leader_epoch(&mut b, 7);
    RecordBatch::from_bytes(Bytes::from(b))
        .unwrap()
        .validate_crc()
        .unwrap();
}

/// Every prefix of a multi-batch buffer yields the whole batches before the
/// cut, then `Incomplete` positioned at the start of the torn batch.
#[test]
fn every_prefix_splits_cleanly() {
    let batches: Vec<RecordBatch> = Compression::ALL
        .iter()
        .enumerate()
        .map(|(i, c)| sample_batch(*c, i as i64 * 100, i + 1))
        .collect();
    let mut buf = Vec::new();
    let mut ends = Vec::new();
    for b in &batches {
        buf.extend_from_slice(b.as_bytes());
        ends.push(buf.len());
    }
    for cut in 0..=buf.len() {
        let prefix = &buf[..cut];
        let complete = ends.iter().take_while(|&&e| e <= cut).count();
        let boundary = if complete == 0 { 0 } else { ends[complete - 1] };

        let mut slices = BatchSlices::new(prefix);
        let items: Vec<_> = slices.by_ref().collect();
        let oks = items.iter().take_while(|r| r.is_ok()).count();
        assert_eq!(oks, complete, "cut {cut}");
        for (i, item) in items.iter().take(oks).enumerate() {
            assert_eq!(item.as_ref().unwrap().bytes, batches[i].as_bytes());
        }
        if cut == boundary {
            assert_eq!(items.len(), complete, "cut {cut}");
        } else {
            assert_eq!(items.len(), complete + 1, "cut {cut}");
            match &items[complete] {
                Err(RecordsError::Incomplete {
                    position,
                    available,
                    ..
                }) => {
                    assert_eq!(*position, boundary);
                    assert_eq!(*available, cut - boundary);
                }
                other => panic!("cut {cut}: expected Incomplete, got {other:?}"),
            }
        }
        assert_eq!(slices.position(), boundary);

        // The owning splitter agrees.
        let mut iter = BatchIter::from_slice(prefix);
        let n_ok = iter.by_ref().take_while(|r| r.is_ok()).count();
        assert_eq!(n_ok, complete);
        assert_eq!(iter.position(), boundary);
    }
}

fn rewrite(batch: &RecordBatch, f: impl FnOnce(&mut Vec<u8>)) -> RecordBatch {
    let mut b = batch.as_bytes().to_vec();
    f(&mut b);
    header::write_crc(&mut b);
    RecordBatch::from_bytes(Bytes::from(b)).unwrap()
}

#[test]
fn record_count_must_match() {
    for codec in Compression::ALL {
        let batch = sample_batch(codec, 0, 3);
        let set_count = |n: i32| {
            rewrite(&batch, |b| {
                b[RECORDS_COUNT_OFFSET..RECORDS_COUNT_OFFSET + 4].copy_from_slice(&n.to_be_bytes())
            })
        };
        let limits = DecompressLimits::default();
        assert_eq!(
            set_count(4).collect_records(&limits),
            Err(RecordsError::MissingRecords {
                declared: 4,
                found: 3
            })
        );
        assert!(matches!(
            set_count(2).collect_records(&limits),
            Err(RecordsError::TrailingBytes { declared: 2, .. })
        ));
        // Kafka never reads the section of a batch declaring no records.
        assert_eq!(set_count(0).collect_records(&limits), Ok(vec![]));
        assert_eq!(
            set_count(-1).collect_records(&limits),
            Err(RecordsError::InvalidRecordCount { count: -1 })
        );
        // A count far beyond the data must not allocate for it.
        assert!(matches!(
            set_count(i32::MAX).collect_records(&limits),
            Err(RecordsError::MissingRecords { .. })
        ));
    }
}

#[test]
fn invalid_headers_are_typed() {
    let batch = sample_batch(Compression::None, 0, 1);
    let mut bad_magic = batch.as_bytes().to_vec();
    bad_magic[MAGIC_OFFSET] = 1;
    assert_eq!(
        BatchSlices::new(&bad_magic).next(),
        Some(Err(RecordsError::InvalidHeader {
            position: 0,
            error: HeaderError::UnsupportedMagic { magic: 1 }
        }))
    );
    // Magic is rejected even when the batch is torn right after it.
    assert!(matches!(
        BatchSlices::new(&bad_magic[..20]).next(),
        Some(Err(RecordsError::InvalidHeader { .. }))
    ));
    let mut short = batch.as_bytes().to_vec();
    short[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&48i32.to_be_bytes());
    assert_eq!(
        BatchSlices::new(&short).next(),
        Some(Err(RecordsError::InvalidHeader {
            position: 0,
            error: HeaderError::LengthTooSmall { length: 48 }
        }))
    );
    let mut negative = batch.as_bytes().to_vec();
    negative[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&(-5i32).to_be_bytes());
    assert!(matches!(
        BatchSlices::new(&negative).next(),
        Some(Err(RecordsError::InvalidHeader { .. }))
    ));
    // Huge declared length: incomplete, nothing allocated.
    let mut huge = batch.as_bytes().to_vec();
    huge[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&i32::MAX.to_be_bytes());
    assert!(matches!(
        BatchSlices::new(&huge).next(),
        Some(Err(RecordsError::Incomplete { .. }))
    ));
    // Unknown codec 5..7.
    let codec7 = rewrite(&batch, |b| b[ATTRIBUTES_OFFSET + 1] |= 0x07);
    assert_eq!(
        codec7.collect_records(&DecompressLimits::default()),
        Err(RecordsError::UnknownCompression { id: 7 })
    );
    // A CRC error stops the splitter at that batch.
    let mut two = batch.as_bytes().to_vec();
    two.extend_from_slice(batch.as_bytes());
    let last = two.len() - 1;
    two[last] ^= 0xff;
    let mut it = BatchIter::from_slice(&two);
    assert!(it.next().unwrap().is_ok());
    assert!(matches!(
        it.next(),
        Some(Err(RecordsError::CrcMismatch { .. }))
    ));
    assert_eq!(it.next(), None);
    assert_eq!(it.position(), batch.size());
    // Without CRC checks the corrupt batch is returned.
    assert_eq!(BatchIter::from_slice(&two).verify_crc(false).count(), 2);
}

#[test]
fn end_txn_markers() {
    for (marker, kind) in [
        (EndTxnMarker::commit(5), ControlRecordType::Commit),
        (EndTxnMarker::abort(6), ControlRecordType::Abort),
    ] {
        let batch =
            RecordBatchBuilder::end_txn_marker_batch(42, 3, 1000, 2, 1_700_000_000_000, &marker)
                .unwrap();
        batch.validate_crc().unwrap();
        assert!(batch.is_control() && batch.is_transactional());
        assert_eq!(batch.base_offset(), 42);
        assert_eq!(batch.last_offset(), 42);
        assert_eq!(batch.header().producer_id, 1000);
        assert_eq!(batch.header().producer_epoch, 2);
        assert_eq!(batch.header().base_sequence, -1);
        let limits = DecompressLimits::default();
        assert_eq!(batch.control_type(&limits), Ok(kind));
        assert_eq!(batch.end_txn_marker(&limits), Ok(marker));
    }
    let data = sample_batch(Compression::None, 0, 1);
    assert!(data.end_txn_marker(&DecompressLimits::default()).is_err());
}

#[test]
fn empty_batch_keeps_offset_range() {
    // After compaction removes every record, Kafka keeps an empty batch so
    // the producer state and the offset range survive.
    let batch = RecordBatchBuilder::new(Compression::None)
        .base_offset(100)
        .producer(7, 1, 50)
        .last_offset_delta(9)
        .build()
        .unwrap();
    assert_eq!(batch.header().records_count, 0);
    assert_eq!(batch.last_offset(), 109);
    assert_eq!(batch.header().max_timestamp, -1);
    assert!(
        batch
            .collect_records(&DecompressLimits::default())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn builder_rejects_bad_offsets() {
    let mut b = RecordBatchBuilder::new(Compression::None).base_offset(10);
    assert!(b.push_at(9, 0, None, None, vec![]).is_err());
    b.push_at(12, 0, None, None, vec![]).unwrap();
    assert!(b.push_at(12, 0, None, None, vec![]).is_err());
    assert!(
        b.push_at(10 + i32::MAX as i64 + 1, 0, None, None, vec![])
            .is_err()
    );
    b.push(0, None, None, vec![]).unwrap();
    assert_eq!(b.next_offset(), 14);
    let b = b.last_offset_delta(1);
    assert!(b.build().is_err());
}

#[test]
fn leader_rewrites() {
    let batch = sample_batch(Compression::Snappy, 0, 2);
    let mut b = batch.as_bytes().to_vec();
    header::set_base_offset(&mut b, 5000);
    header::set_partition_leader_epoch(&mut b, 3);
    header::set_log_append_time(&mut b, 1_800_000_000_000);
    let rewritten = RecordBatch::from_bytes(Bytes::from(b)).unwrap();
    rewritten.validate_crc().unwrap();
    let h = rewritten.header();
    assert_eq!(h.base_offset, 5000);
    assert_eq!(h.partition_leader_epoch, 3);
    assert!(h.is_log_append_time());
    assert_eq!(h.max_timestamp, 1_800_000_000_000);
    assert_eq!(h.compression(), Compression::Snappy.id());
    let records = rewritten
        .collect_records(&DecompressLimits::default())
        .unwrap();
    assert_eq!(records[1].offset(h.base_offset), 5001);
    // A buffer with more than one batch is not "a batch".
    let mut two = batch.as_bytes().to_vec();
    two.extend_from_slice(batch.as_bytes());
    assert_eq!(
        RecordBatch::from_bytes(Bytes::from(two)),
        Err(RecordsError::NotOneBatch {
            batch_size: batch.size(),
            buffer_len: 2 * batch.size()
        })
    );
}

#[test]
fn sequences_wrap_like_kafka() {
    assert_eq!(header::increment_sequence(5, 3), 8);
    assert_eq!(header::increment_sequence(i32::MAX, 1), 0);
    assert_eq!(header::increment_sequence(i32::MAX - 1, 3), 1);
    let mut b = RecordBatchBuilder::new(Compression::None).producer(9, 0, i32::MAX - 1);
    for _ in 0..3 {
        b.push(0, None, None, vec![]).unwrap();
    }
    let batch = b.build().unwrap();
    assert!(batch.header().has_producer_id());
    // i32::MAX - 1, i32::MAX, 0
    assert_eq!(batch.header().last_sequence(), 0);
    let plain = sample_batch(Compression::None, 0, 3);
    assert!(!plain.header().has_producer_id());
    assert_eq!(plain.header().last_sequence(), -1);
}
