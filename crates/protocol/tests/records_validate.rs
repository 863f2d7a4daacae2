//! `validate_records` against the decoder: every batch the builder makes
//! passes with every codec; each kind of damage fails with its error; random
//! damage never panics, and whatever passes decodes to exactly the declared
//! records at offsets 0, 1, 2, ….

use bytes::Bytes;
use proptest::prelude::*;
use weir_protocol::records::compression::compress;
use weir_protocol::records::{
    BatchHeader, Compression, DecompressLimits, RecordBatch, RecordBatchBuilder, RecordError,
    RecordHeader, RecordsError, validate_records,
};

const SMALL: DecompressLimits = DecompressLimits {
    max_bytes: 256 * 1024,
};

fn build(codec: Compression, values: &[Vec<u8>]) -> RecordBatch {
    let mut b = RecordBatchBuilder::new(codec);
    for (i, v) in values.iter().enumerate() {
        let headers = if i % 2 == 0 {
            vec![RecordHeader {
                key: "trace".into(),
                value: Some(Bytes::from_static(b"abc")),
            }]
        } else {
            vec![]
        };
        let key = (i % 3 != 0).then(|| Bytes::from(format!("key-{i}")));
        b.push(
            1_700_000_000_000 + i as i64,
            key,
            Some(Bytes::from(v.clone())),
            headers,
        )
        .unwrap();
    }
    b.build().unwrap()
}

fn check(h: &BatchHeader, section: &[u8]) -> Result<(), RecordsError> {
    validate_records(h, section, &DecompressLimits::default())
}

/// The uncompressed records of a valid batch, and its header.
fn plain(n: usize) -> (BatchHeader, Vec<u8>) {
    let values: Vec<Vec<u8>> = (0..n).map(|i| vec![b'a' + i as u8; 10 + i]).collect();
    let b = build(Compression::None, &values);
    (*b.header(), b.records_section().to_vec())
}

/// `section` compressed with `codec`, and `h` flagged with it.
fn with_codec(mut h: BatchHeader, section: &[u8], codec: Compression) -> (BatchHeader, Vec<u8>) {
    h.attributes = (h.attributes & !7) | codec.id() as i16;
    let mut out = Vec::new();
    compress(codec, section, &mut out).unwrap();
    (h, out)
}

#[test]
fn builder_batches_pass_with_every_codec() {
    for codec in Compression::ALL {
        for n in [1, 2, 17, 200] {
            let values: Vec<Vec<u8>> = (0..n).map(|i| vec![i as u8; i * 7]).collect();
            let b = build(codec, &values);
            assert_eq!(
                check(b.header(), b.records_section()),
                Ok(()),
                "{codec:?} n={n}"
            );
        }
    }
}

#[test]
fn each_kind_of_damage_fails_with_its_error_under_every_codec() {
    let (h, section) = plain(3);
    for codec in Compression::ALL {
        let (h, sec) = with_codec(h, &section, codec);
        // Count and offset range disagree.
        let mut bad = h;
        bad.records_count = 1000;
        assert_eq!(
            check(&bad, &sec),
            Err(RecordsError::InconsistentOffsetRange {
                records_count: 1000,
                last_offset_delta: 2
            }),
            "{codec:?}"
        );
        // Both claim 1000 records: the section runs out.
        bad.last_offset_delta = 999;
        assert_eq!(
            check(&bad, &sec),
            Err(RecordsError::MissingRecords {
                declared: 1000,
                found: 3
            }),
            "{codec:?}"
        );
        // Fewer declared than present.
        let mut fewer = h;
        fewer.records_count = 2;
        fewer.last_offset_delta = 1;
        assert!(
            matches!(
                check(&fewer, &sec),
                Err(RecordsError::TrailingBytes { declared: 2, .. })
            ),
            "{codec:?}"
        );
        // Zero records.
        let mut zero = h;
        zero.records_count = 0;
        zero.last_offset_delta = -1;
        assert_eq!(
            check(&zero, &sec),
            Err(RecordsError::InvalidRecordCount { count: 0 })
        );
    }

    // A record length that runs past the section, as the decoder reports it.
    let mut cut = section.clone();
    cut.truncate(section.len() - 1);
    for codec in Compression::ALL {
        let (h, sec) = with_codec(h, &cut, codec);
        assert!(
            matches!(
                check(&h, &sec),
                Err(RecordsError::CorruptRecord {
                    index: 2,
                    error: RecordError::LengthExceedsRemaining { .. }
                })
            ),
            "{codec:?}: {:?}",
            check(&h, &sec)
        );
    }

    // A header key that is not UTF-8 (the first record's header "trace").
    let at = section.windows(5).position(|w| w == b"trace").unwrap();
    let mut bad_key = section.clone();
    bad_key[at] = 0xff;
    assert_eq!(
        check(&h, &bad_key),
        Err(RecordsError::CorruptRecord {
            index: 0,
            error: RecordError::InvalidHeaderKey
        })
    );

    // Unknown codecs.
    for id in 5..=7 {
        let mut bad = h;
        bad.attributes |= id;
        assert_eq!(
            check(&bad, &section),
            Err(RecordsError::UnknownCompression { id: id as u8 })
        );
    }

    // Bytes that are not the flagged codec.
    let random: Vec<u8> = (0..500u32).map(|i| (i * 7919 % 256) as u8).collect();
    for codec in [
        Compression::Gzip,
        Compression::Lz4,
        Compression::Zstd,
        Compression::Snappy,
    ] {
        let mut bad = h;
        bad.attributes |= codec.id() as i16;
        let result = check(&bad, &random);
        assert!(
            matches!(result, Err(RecordsError::Decompress { codec: c, .. }) if c == codec),
            "{codec:?}: {result:?}"
        );
        assert!(!result.unwrap_err().is_invalid_record());
    }
}

#[test]
fn over_the_bound_fails_before_reading_further() {
    // 300 records of 1 KiB: 300 KiB decompressed, over a 256 KiB bound.
    let values: Vec<Vec<u8>> = (0..300).map(|_| vec![7u8; 1024]).collect();
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let b = build(codec, &values);
        assert_eq!(
            validate_records(b.header(), b.records_section(), &SMALL),
            Err(RecordsError::DecompressedTooLarge {
                codec,
                limit: SMALL.max_bytes
            }),
            "{codec:?}"
        );
    }
}

fn codec() -> impl Strategy<Value = Compression> {
    prop::sample::select(Compression::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Random damage to a valid batch (records section and the header fields
    /// the validator reads) never panics; when the damaged batch still
    /// passes, the decoder reads exactly its declared records, numbered
    /// 0, 1, 2, ….
    #[test]
    fn random_damage_never_panics_and_what_passes_decodes(
        codec in codec(),
        values in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 1..12),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in prop::option::of(any::<prop::sample::Index>()),
        count_delta in -2i32..3,
        codec_bits in prop::option::of(0i16..8),
    ) {
        let b = build(codec, &values);
        let mut h = *b.header();
        let mut section = b.records_section().to_vec();
        for (at, x) in flips {
            if !section.is_empty() {
                let i = at.index(section.len());
                section[i] ^= x;
            }
        }
        if let Some(at) = cut {
            section.truncate(at.index(section.len() + 1));
        }
        h.records_count = h.records_count.saturating_add(count_delta);
        h.last_offset_delta = h.records_count.saturating_sub(1);
        if let Some(bits) = codec_bits {
            h.attributes = (h.attributes & !7) | bits;
        }
        let result = validate_records(&h, &section, &SMALL);
        if result.is_ok() {
            let codec = Compression::from_id(h.compression()).unwrap();
            let mut batch = RecordBatchBuilder::new(Compression::None).build().unwrap().into_bytes().to_vec();
            batch.truncate(weir_protocol::records::header::BATCH_HEADER_LEN);
            batch.extend_from_slice(&section);
            let len = (batch.len() - 12) as i32;
            batch[8..12].copy_from_slice(&len.to_be_bytes());
            batch[21..23].copy_from_slice(&(codec.id() as i16).to_be_bytes());
            batch[23..27].copy_from_slice(&h.last_offset_delta.to_be_bytes());
            batch[57..61].copy_from_slice(&h.records_count.to_be_bytes());
            let parsed = RecordBatch::from_bytes(Bytes::from(batch)).unwrap();
            let records = parsed.collect_records(&SMALL).unwrap();
            prop_assert_eq!(records.len(), h.records_count as usize);
            for (i, r) in records.iter().enumerate() {
                prop_assert_eq!(r.offset_delta as usize, i);
            }
        }
    }

    /// Arbitrary bytes as a records section, under any codec and count.
    #[test]
    fn arbitrary_sections_never_panic(
        codec_bits in 0i16..8,
        count in -3i32..50,
        section in prop::collection::vec(any::<u8>(), 0..2000),
    ) {
        let (mut h, _) = plain(1);
        h.attributes = codec_bits;
        h.records_count = count;
        h.last_offset_delta = count.saturating_sub(1);
        let _ = validate_records(&h, &section, &SMALL);
    }
}
