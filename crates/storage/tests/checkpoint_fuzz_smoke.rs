//! Fuzz smoke test of the checkpoint and `partition.metadata` decoders (the
//! cargo-fuzz target `checkpoint` runs the same entry point): seeds from
//! real encodings, then mutations and random bytes.

use std::collections::BTreeMap;
use weir_storage::TopicPartition;
use weir_storage::checkpoint::{encode_checkpoint, encode_partition_metadata, fuzz_decode};

#[test]
fn checkpoint_files_survive_mutation() {
    let mut entries = BTreeMap::new();
    entries.insert(TopicPartition::new("orders", 0), 42);
    entries.insert(TopicPartition::new("orders", 11), 0);
    entries.insert(TopicPartition::new("__consumer_offsets", 49), 1 << 40);
    let seeds = vec![
        encode_checkpoint(&entries).into_bytes(),
        encode_checkpoint(&BTreeMap::new()).into_bytes(),
        encode_partition_metadata(&[0xab; 16]).into_bytes(),
    ];
    weir_test_support::fuzz_smoke("checkpoint", &seeds, 50_000, fuzz_decode);
}
