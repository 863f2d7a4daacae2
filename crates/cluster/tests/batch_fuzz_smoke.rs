//! Bounded fuzz run of the raft entry payload decoder (a batch of KRaft
//! metadata records): what decodes re-encodes to the same records. Seeds:
//! batches of real records, then mutations and random bytes. cargo-fuzz
//! target in `fuzz/`: `metadata_batch`.

use weir_cluster::batch::{encode_batch, fuzz_decode_batch};
use weir_protocol::codec::arbitrary::Rng;
use weir_protocol::metadata_record::MetadataRecord;

#[test]
fn batch_decode_never_panics_and_round_trips() {
    let mut rng = Rng(7);
    let seeds: Vec<Vec<u8>> = (0..8)
        .map(|n| {
            let records: Vec<MetadataRecord> = MetadataRecord::TYPES
                .iter()
                .cycle()
                .skip(n * 3)
                .take(n)
                .filter_map(|&(key, _, (_, hi))| MetadataRecord::random(key, &mut rng, hi))
                .collect();
            encode_batch(&records).unwrap().to_vec()
        })
        .collect();
    weir_test_support::fuzz_smoke("metadata_batch", &seeds, 20_000, fuzz_decode_batch);
}
