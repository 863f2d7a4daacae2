//! Fuzz smoke tests of the broker's own decoders (the cargo-fuzz targets
//! `producer_snapshot` and `console_query` run the same entry points):
//! seeds from real inputs, then mutations and random bytes.

use weir_broker::producer_state::{BatchMeta, PartitionProducers};
use weir_broker::producer_state_io::{encode_snapshot, fuzz_decode};

#[test]
fn producer_snapshots_survive_mutation() {
    let mut state = PartitionProducers::default();
    for (pid, epoch) in [(1000i64, 0i16), (1001, 3), (i64::MAX, i16::MAX)] {
        for i in 0..3 {
            state.record(
                pid,
                epoch,
                BatchMeta {
                    first_seq: i * 10,
                    last_seq: i * 10 + 9,
                    first_offset: 100 * i as i64,
                    last_offset: 100 * i as i64 + 9,
                    timestamp: 1_700_000_000_000,
                },
            );
        }
    }
    let seeds = vec![
        encode_snapshot(&state),
        encode_snapshot(&PartitionProducers::default()),
    ];
    weir_test_support::fuzz_smoke("producer_snapshot", &seeds, 50_000, fuzz_decode);
}

#[test]
fn console_queries_survive_mutation() {
    let seeds: Vec<Vec<u8>> = [
        "topic=orders&partition=0&offset=10&limit=50",
        "topic=a%20b&timestamp=1700000000000",
        "group=g%2F1&limit=%FF%FE",
        "topic=%&partition=-1&offset=99999999999999999999",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    weir_test_support::fuzz_smoke(
        "console_query",
        &seeds,
        50_000,
        weir_broker::http::console::fuzz_query,
    );
}
