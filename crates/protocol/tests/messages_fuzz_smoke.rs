//! Runs the fuzz targets' functions over the seed corpus and a few hundred
//! thousand generated and mutated frames, so every CI run fuzzes a little.
//! `WEIR_FUZZ_SMOKE_MUTATIONS` sets the mutations per valid frame (default 600).

use bytes::{Bytes, BytesMut};
use std::path::{Path, PathBuf};
use weir_protocol::codec::arbitrary::Rng;
use weir_protocol::frame::{
    decode_request, decode_response, encode_request, encode_response, fuzz_request_frame,
    fuzz_response_frame,
};
use weir_protocol::messages::{ApiKey, RequestBody, RequestHeader, ResponseBody};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

fn mutations() -> usize {
    std::env::var("WEIR_FUZZ_SMOKE_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600)
}

/// A valid request frame (without size prefix) of `key` at `version`.
fn request_frame(rng: &mut Rng, key: ApiKey, version: i16) -> Bytes {
    let header = RequestHeader {
        request_api_key: key as i16,
        request_api_version: version,
        correlation_id: rng.i32(),
        client_id: if rng.one_in(4) {
            None
        } else {
            Some(rng.string())
        },
        ..Default::default()
    };
    let body = RequestBody::random(key, rng, version);
    let mut buf = BytesMut::new();
    encode_request(&mut buf, &header, &body).expect("encode request");
    let frame = buf.freeze().slice(4..);
    // Valid frames must decode to what was encoded.
    let (h, b) = decode_request(frame.clone()).expect("decode a valid request");
    assert_eq!(b, body);
    assert_eq!(h.correlation_id, header.correlation_id);
    frame
}

/// A valid response fuzz input: key index, version offset, frame.
fn response_input(rng: &mut Rng, index: usize, version: i16) -> Vec<u8> {
    let key = ApiKey::ALL[index];
    let body = ResponseBody::random(key, rng, version);
    let mut buf = BytesMut::new();
    let correlation_id = rng.i32();
    encode_response(&mut buf, correlation_id, key, version, &body).expect("encode response");
    let frame = buf.freeze().slice(4..);
    let (h, b) = decode_response(frame.clone(), key, version).expect("decode a valid response");
    assert_eq!((h.correlation_id, &b), (correlation_id, &body));
    let (lo, _) = key.valid_versions();
    let mut input = (index as u16).to_be_bytes().to_vec();
    input.push((version - lo) as u8);
    input.extend_from_slice(&frame);
    input
}

/// One random mutation, biased towards what breaks length checks.
fn mutate(rng: &mut Rng, data: &[u8]) -> Vec<u8> {
    let mut d = data.to_vec();
    for _ in 0..1 + rng.below(3) {
        let pos = if d.is_empty() {
            0
        } else {
            rng.below(d.len() as u64) as usize
        };
        match rng.below(7) {
            0 if !d.is_empty() => d[pos] ^= 1 << rng.below(8),
            1 if !d.is_empty() => d[pos] = [0x00, 0xff, 0x7f, 0x80, 0x01][rng.below(5) as usize],
            2 => d.truncate(pos),
            3 => {
                let b = rng.bytes();
                d.splice(pos..pos, b);
            }
            4 if pos + 4 <= d.len() => d[pos..pos + 4].copy_from_slice(&[0x7f, 0xff, 0xff, 0xff]),
            5 if pos + 2 <= d.len() => d[pos..pos + 2].copy_from_slice(&[0xff, 0xff]),
            _ if !d.is_empty() => d[pos] = rng.next_u64() as u8,
            _ => d.push(rng.next_u64() as u8),
        }
    }
    d
}

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let Ok(dir) = std::fs::read_dir(corpus_dir(target)) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    files.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

#[test]
fn request_frames_survive_mutation() {
    let mut rng = Rng(0xf022);
    let mut runs = 0usize;
    let corpus = seeds("request_frame");
    for s in &corpus {
        fuzz_request_frame(s);
        runs += 1;
    }
    let n = mutations();
    for key in ApiKey::ALL {
        let (lo, hi) = key.valid_versions();
        for version in lo..=hi {
            let frame = request_frame(&mut rng, key, version);
            fuzz_request_frame(&frame);
            for _ in 0..n {
                fuzz_request_frame(&mutate(&mut rng, &frame));
            }
            runs += 1 + n;
        }
    }
    for _ in 0..20_000 {
        let len = rng.below(64) as usize;
        let junk: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        fuzz_request_frame(&junk);
        runs += 1;
    }
    eprintln!(
        "request fuzz smoke: {runs} inputs ({} seed files)",
        corpus.len()
    );
    assert!(!corpus.is_empty(), "seed corpus missing");
}

#[test]
fn response_frames_survive_mutation() {
    let mut rng = Rng(0x5e5);
    let mut runs = 0usize;
    let corpus = seeds("response_frame");
    for s in &corpus {
        fuzz_response_frame(s);
        runs += 1;
    }
    let n = mutations();
    for (i, key) in ApiKey::ALL.iter().enumerate() {
        let (lo, hi) = key.valid_versions();
        for version in lo..=hi {
            let input = response_input(&mut rng, i, version);
            fuzz_response_frame(&input);
            for _ in 0..n {
                // Keep the key/version selector, mutate the frame.
                let mut m = input[..3].to_vec();
                m.extend(mutate(&mut rng, &input[3..]));
                fuzz_response_frame(&m);
            }
            runs += 1 + n;
        }
    }
    eprintln!(
        "response fuzz smoke: {runs} inputs ({} seed files)",
        corpus.len()
    );
    assert!(!corpus.is_empty(), "seed corpus missing");
}

/// Writes the seed corpus for `cargo fuzz`: one valid frame per api key at
/// its lowest and highest version, plus frames declaring maximal lengths.
/// Run with `cargo test -p weir-protocol --test integration messages_fuzz_smoke:: -- --ignored`.
#[test]
#[ignore = "writes fuzz/corpus; run by hand"]
fn write_seed_corpus() {
    let mut rng = Rng(0xc0de);
    let req_dir = corpus_dir("request_frame");
    let resp_dir = corpus_dir("response_frame");
    std::fs::create_dir_all(&req_dir).unwrap();
    std::fs::create_dir_all(&resp_dir).unwrap();
    for (i, key) in ApiKey::ALL.iter().enumerate() {
        let (lo, hi) = key.valid_versions();
        for version in [lo, hi] {
            let name = format!("{}_v{version}", key.name());
            std::fs::write(req_dir.join(&name), request_frame(&mut rng, *key, version)).unwrap();
            std::fs::write(resp_dir.join(&name), response_input(&mut rng, i, version)).unwrap();
        }
    }
    let max: &[(&str, &[u8])] = &[
        // Metadata v0, client id "c", topics: 2^31-1 entries.
        (
            "max_array_int32",
            &[0, 3, 0, 0, 0, 0, 0, 1, 0, 1, b'c', 0x7f, 0xff, 0xff, 0xff],
        ),
        // Metadata v12 (header v2), topics: compact length 2^32-2.
        (
            "max_array_compact",
            &[
                0, 3, 0, 12, 0, 0, 0, 1, 0, 1, b'c', 0, 0xff, 0xff, 0xff, 0xff, 0x0f,
            ],
        ),
        // ApiVersions v0, client id declaring 32767 bytes.
        (
            "max_client_id",
            &[0, 18, 0, 0, 0, 0, 0, 1, 0x7f, 0xff, b'x'],
        ),
        // ApiVersions v3 (header v2): 2^32-1 tagged fields in the header.
        (
            "max_tag_count",
            &[
                0, 18, 0, 3, 0, 0, 0, 1, 0, 1, b'c', 0xff, 0xff, 0xff, 0xff, 0x0f,
            ],
        ),
        // ApiVersions v3: tagged field declaring 2^32-1 bytes.
        (
            "max_tag_size",
            &[
                0, 18, 0, 3, 0, 0, 0, 1, 0, 1, b'c', 1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f,
            ],
        ),
        // Produce v3: null transactional id, acks, timeout, 1 topic "t",
        // 1 partition, records declaring 2^31-1 bytes.
        (
            "max_records",
            &[
                0, 0, 0, 3, 0, 0, 0, 1, 0, 1, b'c', 0xff, 0xff, 0, 1, 0, 0, 0x75, 0x30, 0, 0, 0, 1,
                0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff,
            ],
        ),
    ];
    for (name, bytes) in max {
        std::fs::write(req_dir.join(name), bytes).unwrap();
    }
    // Responses: Metadata (index of key 3) v0 with 2^31-1 brokers.
    let meta = ApiKey::ALL
        .iter()
        .position(|k| *k == ApiKey::Metadata)
        .unwrap() as u16;
    let mut r = meta.to_be_bytes().to_vec();
    r.extend_from_slice(&[0, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff]);
    std::fs::write(resp_dir.join("max_array_int32"), r).unwrap();
}
