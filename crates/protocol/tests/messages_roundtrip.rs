//! decode(encode(x)) == x for random values of every message in every
//! valid version, and `encoded_len` equals the bytes written.

use bytes::BytesMut;
use weir_protocol::codec::arbitrary::{Random, Rng};
use weir_protocol::messages::group_coordinator::*;
use weir_protocol::messages::metadata::*;
use weir_protocol::messages::transaction_coordinator::*;
use weir_protocol::messages::*;
use weir_protocol::{Decodable, Encodable, Message};

/// Random values per (message, version).
const CASES: u64 = 64;

fn round_trip<T>(seed: u64) -> usize
where
    T: Message + Encodable + Decodable + Random + PartialEq + std::fmt::Debug,
{
    let (lo, hi) = T::VALID_VERSIONS;
    let mut pairs = 0;
    for version in lo..=hi {
        for case in 0..CASES {
            let mut rng = Rng(seed ^ (u64::from(version as u16) << 32) ^ case);
            let value = T::random(&mut rng, version);
            let mut buf = BytesMut::new();
            value
                .encode(&mut buf, version)
                .unwrap_or_else(|e| panic!("{} v{version} case {case}: encode: {e}", T::NAME));
            assert_eq!(
                value.encoded_len(version).unwrap(),
                buf.len(),
                "{} v{version}: encoded_len",
                T::NAME
            );
            let mut bytes = buf.freeze();
            let decoded = T::decode(&mut bytes, version)
                .unwrap_or_else(|e| panic!("{} v{version} case {case}: decode: {e}", T::NAME));
            assert!(
                bytes.is_empty(),
                "{} v{version}: {} bytes left",
                T::NAME,
                bytes.len()
            );
            assert_eq!(decoded, value, "{} v{version} case {case}", T::NAME);
        }
        pairs += 1;
    }
    pairs
}

macro_rules! all {
    ($($t:ident),* $(,)?) => {{
        let mut pairs = 0;
        $( pairs += round_trip::<$t>(0x5eed); )*
        pairs
    }};
}

#[test]
fn every_message_every_version_round_trips() {
    let pairs = weir_protocol::__weir_all_messages!(all);
    eprintln!("round-tripped {pairs} (message, version) pairs x {CASES} random values");
    assert!(pairs > 600);
}

#[test]
fn every_coordinator_record_round_trips() {
    let pairs = weir_protocol::__weir_all_group_coordinator_records!(all)
        + weir_protocol::__weir_all_transaction_coordinator_records!(all)
        + weir_protocol::__weir_all_metadata_records!(all);
    eprintln!("round-tripped {pairs} coordinator and metadata (record, version) pairs");
    assert!(pairs > 60);
}
