//! Fuzz smoke test of the `__transaction_state` record decoders (the
//! cargo-fuzz target `transaction_state_records` runs the same entry
//! point): seeds from every kind of record weir writes, then mutations and
//! random bytes.

use weir_txn::records::{encode_key, encode_value, fuzz_decode};
use weir_txn::{TopicPartition, Transit, TxnState};

#[test]
fn transaction_state_records_survive_mutation() {
    let mut seeds = vec![encode_key("tx").to_vec(), encode_key("").to_vec()];
    for state in TxnState::ALL {
        let t = Transit {
            producer_id: 4_000,
            previous_producer_id: if state == TxnState::Empty { 3_999 } else { -1 },
            producer_epoch: 3,
            last_producer_epoch: 2,
            timeout_ms: 60_000,
            state,
            partitions: [("a", 0), ("a", 1), ("b", 7)]
                .into_iter()
                .map(|(t, p)| TopicPartition::new(t, p))
                .collect(),
            start_ms: 1_700_000_000_000,
            last_update_ms: 1_700_000_000_500,
        };
        seeds.push(encode_value(&t).to_vec());
    }
    weir_test_support::fuzz_smoke("transaction_state_records", &seeds, 20_000, fuzz_decode);
}
