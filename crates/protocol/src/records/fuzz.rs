//! Entry point of the `record_batch` fuzz target (also run by the fuzz smoke
//! test).

use super::batch::BatchSlices;
use super::builder::RecordBatchBuilder;
use super::compression::{Compression, DecompressLimits};
use super::control::{ControlRecordType, EndTxnMarker};
use super::record::Record;
use super::validate::validate_records;

/// Decompression bound used while fuzzing: small, so bombs fail fast.
const FUZZ_LIMITS: DecompressLimits = DecompressLimits {
    max_bytes: 64 * 1024,
};

/// Parses `data` as concatenated batches the way the broker does (header,
/// CRC, records with a decompression limit, control records) and checks
/// invariants. Returns the number of records decoded. Panics only when an
/// invariant is broken: that is what the fuzzer looks for.
///
/// Invariants checked: the splitter never reads past the buffer and its
/// positions add up; the produce validator accepts a batch exactly when it
/// decodes with offset deltas 0, 1, 2, … up to `lastOffsetDelta`; a batch
/// whose records all decode re-encodes (without compression, which the
/// property tests cover) to a batch that decodes to the same records.
pub fn fuzz_records(data: &[u8]) -> usize {
    let mut decoded = 0;
    // CRCs are checked but not required, so that mutated inputs still reach
    // the record decoder.
    let mut slices = BatchSlices::new(data).verify_crc(false);
    let mut expected_pos = 0;
    for batch in slices.by_ref() {
        let Ok(batch) = batch else { break };
        assert_eq!(batch.position, expected_pos);
        assert_eq!(batch.bytes.len(), batch.header.total_size());
        expected_pos += batch.bytes.len();
        let _ = batch.validate_crc();
        let owned = batch.to_batch();
        if owned.is_control() {
            let _ = owned.control_type(&FUZZ_LIMITS);
            let _ = owned.end_txn_marker(&FUZZ_LIMITS);
        }
        let valid = validate_records(owned.header(), owned.records_section(), &FUZZ_LIMITS);
        let Ok(records) = owned.collect_records(&FUZZ_LIMITS) else {
            assert!(valid.is_err(), "validated, but does not decode");
            continue;
        };
        // The validator accepts exactly the decodable batches whose offsets
        // run 0, 1, 2, … up to lastOffsetDelta.
        let numbered = !records.is_empty()
            && owned.header().last_offset_delta as i64 == records.len() as i64 - 1
            && records
                .iter()
                .enumerate()
                .all(|(i, r)| r.offset_delta as i64 == i as i64);
        assert_eq!(valid.is_ok(), numbered, "{valid:?}");
        decoded += records.len();
        for r in &records {
            if let Some(k) = &r.key {
                let _ = ControlRecordType::parse_key(k);
            }
            let _ = EndTxnMarker::from_record(r);
        }
        check_reencode(owned.header(), &records);
    }
    assert!(slices.position() <= data.len());
    assert_eq!(slices.position(), expected_pos);
    decoded
}

#[allow(clippy::expect_used)] // a fuzz target reports a broken property by panicking
fn check_reencode(header: &super::BatchHeader, records: &[Record]) {
    let mut b = RecordBatchBuilder::new(Compression::None)
        .base_offset(header.base_offset)
        .base_timestamp(header.base_timestamp);
    for r in records {
        let Some(offset) = header.base_offset.checked_add(r.offset_delta as i64) else {
            return;
        };
        let Some(ts) = header.base_timestamp.checked_add(r.timestamp_delta) else {
            return;
        };
        if b.push_at(
            offset,
            ts,
            r.key.clone(),
            r.value.clone(),
            r.headers.clone(),
        )
        .is_err()
        {
            return;
        }
    }
    let Ok(rebuilt) = b.build() else { return };
    rebuilt
        .validate_crc()
        .expect("a built batch has a valid crc");
    let again = rebuilt
        .collect_records(&DecompressLimits {
            max_bytes: usize::MAX,
        })
        .expect("a built batch decodes");
    assert_eq!(again.len(), records.len());
    for (a, b) in again.iter().zip(records) {
        assert_eq!(a.offset_delta, b.offset_delta);
        assert_eq!(a.timestamp_delta, b.timestamp_delta);
        assert_eq!(a.key, b.key);
        assert_eq!(a.value, b.value);
        assert_eq!(a.headers, b.headers);
    }
}
