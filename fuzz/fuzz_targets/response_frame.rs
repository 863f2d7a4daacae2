//! Response frames: the first three bytes pick api key and version, the
//! rest is the frame; decode, and if that works, re-encode and re-decode.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    weir_protocol::frame::fuzz_response_frame(data);
});
