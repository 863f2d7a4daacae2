//! Decoder of `__consumer_offsets` keys and values (weir-group's record codec); what decodes must
//! round-trip. Smoke run: `crates/group/tests/records_fuzz_smoke.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    weir_group::records::fuzz_decode(data);
});
