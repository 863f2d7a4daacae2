//! Decoder of the web console's query strings and percent-decoding.
//! Smoke run: `crates/broker/tests/decoders_fuzz_smoke.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    weir_broker::http::console::fuzz_query(data);
});
