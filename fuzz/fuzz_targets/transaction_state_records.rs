//! Decoder of `__transaction_state` keys and values (weir-txn's record
//! codec); what decodes must round-trip. Smoke run:
//! `crates/txn/tests/records_fuzz_smoke.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    weir_txn::records::fuzz_decode(data);
});
