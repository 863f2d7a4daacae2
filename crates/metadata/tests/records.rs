//! The `__cluster_metadata` framing of `weir_protocol::metadata_record`:
//! decode(encode(r)) == r for random records of every type and version,
//! exact bytes of one record, each framing error, and a fuzz smoke run of
//! the decoder's entry point.

use bytes::{Bytes, BytesMut};
use weir_protocol::codec::arbitrary::Rng;
use weir_protocol::messages::metadata::FenceBrokerRecord;
use weir_protocol::metadata_record::{MetadataRecord, MetadataRecordError, fuzz_metadata_record};

const CASES: u64 = 64;

fn random_records(seed: u64) -> Vec<(MetadataRecord, i16)> {
    let mut out = Vec::new();
    for &(key, name, (lo, hi)) in MetadataRecord::TYPES {
        for version in lo..=hi {
            for case in 0..CASES {
                let mut rng = Rng(seed ^ (u64::from(key) << 40) ^ ((version as u64) << 32) ^ case);
                let r = MetadataRecord::random(key, &mut rng, version)
                    .unwrap_or_else(|| panic!("{name}: no random constructor"));
                out.push((r, version));
            }
        }
    }
    out
}

#[test]
fn every_record_type_and_version_round_trips() {
    let records = random_records(0x5eed);
    assert!(records.len() > 25 * CASES as usize);
    for (r, version) in records {
        let mut buf = BytesMut::new();
        r.encode(&mut buf, version)
            .unwrap_or_else(|e| panic!("{} v{version}: {e}", r.name()));
        assert_eq!(
            r.encoded_len(version).unwrap(),
            buf.len(),
            "{} v{version}",
            r.name()
        );
        let (back, v) = MetadataRecord::decode(buf.freeze()).unwrap();
        assert_eq!((back, v), (r, version));
    }
}

#[test]
fn fence_broker_record_bytes() {
    let r = MetadataRecord::FenceBroker(FenceBrokerRecord {
        id: 3,
        epoch: 258,
        ..Default::default()
    });
    let bytes = r.encode_to_vec(0).unwrap();
    // frame 1, type 7, version 0, id int32, epoch int64, no tagged fields
    assert_eq!(bytes, [1, 7, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 1, 2, 0]);
}

#[test]
fn framing_errors() {
    let good = MetadataRecord::FenceBroker(FenceBrokerRecord {
        id: 3,
        epoch: 1,
        ..Default::default()
    })
    .encode_to_vec(0)
    .unwrap();
    let with = |prefix: &[u8]| {
        let mut v = prefix.to_vec();
        v.extend_from_slice(good.get(3..).unwrap());
        Bytes::from(v)
    };
    let mut trailing = good.clone();
    trailing.push(0);
    type Case = (&'static str, Bytes, fn(&MetadataRecordError) -> bool);
    let cases: Vec<Case> = vec![
        ("empty", Bytes::new(), |e| {
            matches!(
                e,
                MetadataRecordError::Header {
                    field: "frame version",
                    ..
                }
            )
        }),
        ("frame 0", with(&[0, 7, 0]), |e| {
            matches!(e, MetadataRecordError::UnknownFrameVersion { version: 0 })
        }),
        ("frame 2", with(&[2, 7, 0]), |e| {
            matches!(e, MetadataRecordError::UnknownFrameVersion { version: 2 })
        }),
        ("unknown type", with(&[1, 99, 0]), |e| {
            matches!(e, MetadataRecordError::UnknownType { api_key: 99 })
        }),
        ("type above i16", with(&[1, 0x80, 0x80, 0x02, 0]), |e| {
            matches!(e, MetadataRecordError::TooLarge { field: "type", .. })
        }),
        ("version above i16", with(&[1, 7, 0x80, 0x80, 0x02]), |e| {
            matches!(
                e,
                MetadataRecordError::TooLarge {
                    field: "version",
                    ..
                }
            )
        }),
        ("unknown version", with(&[1, 7, 5]), |e| {
            matches!(
                e,
                MetadataRecordError::Body {
                    api_key: 7,
                    version: 5,
                    ..
                }
            )
        }),
        (
            "truncated body",
            Bytes::from(good.get(..good.len() - 2).unwrap().to_vec()),
            |e| matches!(e, MetadataRecordError::Body { .. }),
        ),
        ("trailing byte", Bytes::from(trailing), |e| {
            matches!(
                e,
                MetadataRecordError::TrailingBytes {
                    api_key: 7,
                    remaining: 1
                }
            )
        }),
    ];
    for (name, bytes, ok) in cases {
        let err = MetadataRecord::decode(bytes).expect_err(name);
        assert!(ok(&err), "{name}: {err:?}");
    }
    assert!(MetadataRecord::decode(Bytes::from(good)).is_ok());
}

#[test]
fn encode_refuses_a_version_the_type_lacks() {
    let r = MetadataRecord::FenceBroker(FenceBrokerRecord::default());
    let mut buf = BytesMut::new();
    assert!(r.encode(&mut buf, 9).is_err());
    assert!(buf.is_empty(), "nothing written on error");
}

#[test]
fn fuzz_smoke() {
    let seeds: Vec<Vec<u8>> = random_records(7)
        .into_iter()
        .step_by(16)
        .map(|(r, v)| r.encode_to_vec(v).unwrap())
        .collect();
    weir_test_support::fuzz_smoke("metadata_record", &seeds, 200_000, fuzz_metadata_record);
}
