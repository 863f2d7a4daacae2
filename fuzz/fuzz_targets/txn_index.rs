//! Parser of `.txnindex` files (aborted transactions); what it keeps must
//! round-trip and satisfy the index's invariants. Smoke run:
//! `crates/storage/tests/txn_index.rs` (`txn_index_files_survive_mutation`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    weir_storage::txn_index::fuzz_parse(data);
});
