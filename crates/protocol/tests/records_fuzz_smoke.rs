//! Fuzz smoke test: runs the `record_batch` fuzz entry point
//! (`weir_protocol::records::fuzz_records`) over the seed corpus and a few
//! hundred thousand mutated and random inputs, without libFuzzer.
//!
//! The seeds are generated here; `WEIR_WRITE_RECORD_CORPUS=1` writes them to
//! `fuzz/corpus/record_batch/` (the corpus the fuzz target starts from).
//! `WEIR_RECORD_CORPUS=<dir>` points the test at another corpus directory.

use std::io::Write;
use std::path::PathBuf;

use bytes::Bytes;
use weir_protocol::records::header::{
    self, ATTRIBUTES_OFFSET, BATCH_HEADER_LEN, LENGTH_OFFSET, RECORDS_COUNT_OFFSET,
};
use weir_protocol::records::{
    Compression, EndTxnMarker, RecordBatchBuilder, RecordHeader, fuzz_records,
};

fn corpus_dir() -> PathBuf {
    match std::env::var_os("WEIR_RECORD_CORPUS") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/record_batch"),
    }
}

fn batch(codec: Compression, base_offset: i64, n: usize) -> Vec<u8> {
    let mut b = RecordBatchBuilder::new(codec)
        .base_offset(base_offset)
        .producer(4000, 1, 10);
    for i in 0..n {
        b.push(
            1_700_000_000_000 + i as i64 * 7,
            (i % 2 == 0).then(|| Bytes::from(format!("key-{i}"))),
            (i % 3 != 2).then(|| Bytes::from(vec![b'a' + i as u8; 20 + i * 5])),
            (0..i % 3)
                .map(|h| RecordHeader {
                    key: format!("h{h}"),
                    value: (h != 1).then(|| Bytes::from_static(b"hv")),
                })
                .collect(),
        )
        .unwrap();
    }
    b.build().unwrap().into_bytes().to_vec()
}

/// A batch with `count` declared records whose (possibly compressed)
/// section is `section`, CRC fixed.
fn raw_batch(codec: Compression, count: i32, section: &[u8]) -> Vec<u8> {
    let mut b = RecordBatchBuilder::new(Compression::None)
        .build()
        .unwrap()
        .into_bytes()
        .to_vec();
    b.truncate(BATCH_HEADER_LEN);
    b.extend_from_slice(section);
    let len = (b.len() - 12) as i32;
    b[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&len.to_be_bytes());
    b[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&(codec.id() as i16).to_be_bytes());
    b[RECORDS_COUNT_OFFSET..RECORDS_COUNT_OFFSET + 4].copy_from_slice(&count.to_be_bytes());
    header::write_crc(&mut b);
    b
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut s = Vec::new();
    for codec in Compression::ALL {
        s.push((format!("batch-{}", codec.name()), batch(codec, 100, 4)));
    }
    let commit =
        RecordBatchBuilder::end_txn_marker_batch(9, 0, 4000, 1, 0, &EndTxnMarker::commit(3))
            .unwrap();
    let abort =
        RecordBatchBuilder::end_txn_marker_batch(10, 0, 4000, 1, 0, &EndTxnMarker::abort(3))
            .unwrap();
    s.push(("control-commit".into(), commit.as_bytes().to_vec()));
    s.push(("control-abort".into(), abort.as_bytes().to_vec()));
    s.push((
        "empty-batch".into(),
        RecordBatchBuilder::new(Compression::None)
            .last_offset_delta(4)
            .build()
            .unwrap()
            .into_bytes()
            .to_vec(),
    ));
    let mut multi = Vec::new();
    for (i, codec) in Compression::ALL.iter().enumerate() {
        multi.extend(batch(*codec, i as i64 * 10, i + 1));
    }
    multi.extend_from_slice(commit.as_bytes());
    s.push(("multi-batch".into(), multi.clone()));
    s.push((
        "torn-multi-batch".into(),
        multi[..multi.len() - 30].to_vec(),
    ));

    // Maximal declared lengths.
    let plain = batch(Compression::None, 0, 1);
    let mut max_len = plain.clone();
    max_len[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&i32::MAX.to_be_bytes());
    s.push(("max-batch-length".into(), max_len));
    let mut max_count = plain.clone();
    max_count[RECORDS_COUNT_OFFSET..RECORDS_COUNT_OFFSET + 4]
        .copy_from_slice(&i32::MAX.to_be_bytes());
    header::write_crc(&mut max_count);
    s.push(("max-record-count".into(), max_count));
    // record length = i32::MAX (zigzag varint 0xfe 0xff 0xff 0xff 0x0f)
    s.push((
        "max-record-length".into(),
        raw_batch(
            Compression::None,
            1,
            &[0xfe, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0],
        ),
    ));
    // record with key length i32::MAX
    s.push((
        "max-key-length".into(),
        raw_batch(
            Compression::None,
            1,
            &[18, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 0x0f, 1, 0],
        ),
    ));
    // record with header count i32::MAX
    s.push((
        "max-header-count".into(),
        raw_batch(
            Compression::None,
            1,
            &[20, 0, 0, 0, 1, 1, 0xfe, 0xff, 0xff, 0xff, 0x0f, 0],
        ),
    ));
    // unframed snappy declaring u32::MAX bytes
    s.push((
        "snappy-declares-4gib".into(),
        raw_batch(
            Compression::Snappy,
            1,
            &[0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, b'x'],
        ),
    ));
    // xerial block length u32::MAX
    let mut xerial = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
    xerial.extend_from_slice(&u32::MAX.to_be_bytes());
    xerial.extend_from_slice(&[0x05, 0x10, b'h', b'e', b'l', b'l', b'o']);
    s.push((
        "xerial-max-block-length".into(),
        raw_batch(Compression::Snappy, 1, &xerial),
    ));
    // small gzip / zstd / lz4 bombs: 2 MiB of zeros (far over the fuzz limit)
    let zeros = vec![0u8; 2 << 20];
    let mut gz = Vec::new();
    let mut e = flate2::write::GzEncoder::new(&mut gz, flate2::Compression::best());
    e.write_all(&zeros).unwrap();
    e.finish().unwrap();
    s.push(("gzip-bomb".into(), raw_batch(Compression::Gzip, 1, &gz)));
    let zs = zstd::encode_all(&zeros[..], 3).unwrap();
    s.push(("zstd-bomb".into(), raw_batch(Compression::Zstd, 1, &zs)));
    let mut lz = Vec::new();
    let info = lz4_flex::frame::FrameInfo::new().block_size(lz4_flex::frame::BlockSize::Max64KB);
    let mut e = lz4_flex::frame::FrameEncoder::with_frame_info(info, &mut lz);
    e.write_all(&zeros).unwrap();
    e.finish().unwrap();
    s.push(("lz4-bomb".into(), raw_batch(Compression::Lz4, 1, &lz)));
    s
}

/// xorshift64*: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const INTERESTING_I32: [i32; 8] = [0, 1, -1, 49, 61, i32::MAX, i32::MIN, 0x7fff];

fn mutate(rng: &mut Rng, input: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(4) {
        let len = input.len();
        match rng.below(8) {
            0 if len > 0 => {
                let at = rng.below(len);
                input[at] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let at = rng.below(len);
                input[at] = [0u8, 0xff, 0x7f, 0x80, 1][rng.below(5)];
            }
            2 if len >= 4 => {
                let at = rng.below(len - 3);
                let v = INTERESTING_I32[rng.below(INTERESTING_I32.len())];
                input[at..at + 4].copy_from_slice(&v.to_be_bytes());
            }
            3 => input.truncate(rng.below(len + 1)),
            4 if len > 0 => {
                let from = rng.below(len);
                let to = from + rng.below(len - from);
                let chunk = input[from..to].to_vec();
                let at = rng.below(input.len() + 1);
                input.splice(at..at, chunk);
            }
            5 => {
                let at = rng.below(len + 1);
                let extra: Vec<u8> = (0..rng.below(16)).map(|_| rng.next() as u8).collect();
                input.splice(at..at, extra);
            }
            6 if len > BATCH_HEADER_LEN => header::write_crc(input),
            _ => {
                if len > 0 {
                    let at = rng.below(len);
                    input[at] = rng.next() as u8;
                }
            }
        }
    }
    // Keep the batch length consistent half of the time so mutations reach
    // the records section instead of stopping at the splitter.
    if input.len() > BATCH_HEADER_LEN && rng.below(2) == 0 {
        let n = (input.len() - 12) as i32;
        input[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&n.to_be_bytes());
        header::write_crc(input);
    }
}

#[test]
fn seeds_decode_as_expected() {
    let seeds = seeds();
    let count = |name: &str| {
        let (_, data) = seeds.iter().find(|(n, _)| n == name).unwrap();
        fuzz_records(data)
    };
    for codec in Compression::ALL {
        assert_eq!(count(&format!("batch-{}", codec.name())), 4);
    }
    assert_eq!(count("control-commit"), 1);
    assert_eq!(count("multi-batch"), 1 + 2 + 3 + 4 + 5 + 1);
    assert_eq!(count("empty-batch"), 0);
    for bad in [
        "max-batch-length",
        "max-record-count",
        "max-record-length",
        "max-key-length",
        "max-header-count",
        "snappy-declares-4gib",
        "xerial-max-block-length",
        "gzip-bomb",
        "zstd-bomb",
        "lz4-bomb",
    ] {
        assert_eq!(count(bad), 0, "{bad}");
    }
}

#[test]
fn corpus_on_disk_matches_the_generated_seeds() {
    let dir = corpus_dir();
    let seeds = seeds();
    if std::env::var_os("WEIR_WRITE_RECORD_CORPUS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, data) in &seeds {
            std::fs::write(dir.join(name), data).unwrap();
        }
    }
    for (name, data) in &seeds {
        let on_disk = std::fs::read(dir.join(name)).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; regenerate with WEIR_WRITE_RECORD_CORPUS=1",
                dir.join(name).display()
            )
        });
        // Compressed seeds may differ byte-wise across codec library
        // versions; they must still decode the same.
        assert_eq!(fuzz_records(&on_disk), fuzz_records(data), "{name}");
    }
}

#[test]
fn fuzz_smoke() {
    let seed: u64 = match std::env::var("WEIR_FUZZ_SEED") {
        Ok(s) => s.parse().expect("WEIR_FUZZ_SEED must be a u64"),
        Err(_) => 0x05ee_d0fb_a7c4,
    };
    eprintln!("fuzz_smoke seed {seed} (set WEIR_FUZZ_SEED to reproduce)");
    let mut rng = Rng(seed | 1);
    let mut corpus: Vec<Vec<u8>> = seeds().into_iter().map(|(_, d)| d).collect();
    // Files a fuzzer added to the corpus (the generated seeds are already in).
    if let Ok(entries) = std::fs::read_dir(corpus_dir()) {
        for e in entries.flatten() {
            if let Ok(d) = std::fs::read(e.path())
                && !corpus.contains(&d)
            {
                corpus.push(d);
            }
        }
    }
    let iterations: usize = std::env::var("WEIR_FUZZ_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300_000);
    let mut decoded = 0usize;
    for i in 0..iterations {
        let input = if i % 10 == 0 {
            (0..rng.below(200)).map(|_| rng.next() as u8).collect()
        } else {
            let mut input = corpus[rng.below(corpus.len())].clone();
            mutate(&mut rng, &mut input);
            input
        };
        decoded += fuzz_records(&input);
    }
    // Mutated inputs still reach the record decoder.
    assert!(decoded > iterations / 10, "only {decoded} records decoded");
}
