//! Storage benchmarks on real files (page cache; appends and reads are not
//! fsynced): append throughput for 1 KiB records in 16 KiB and 1 MiB batches,
//! the produce path's validate + append of 16 KiB batches per codec, random
//! offset lookups, sequential reads, recovery (unclean open with its fsyncs,
//! and the CRC scan alone). Compare with the raw
//! page-cache limits from `benches/raw_limit.sh`.

use bytes::Bytes;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use weir_protocol::records::{Compression, RecordBatchBuilder};
use weir_storage::backend::{FileStorage, Storage};
use weir_storage::testing::batch;
use weir_storage::{Log, LogConfig, OpenOptions, TopicPartition};

const RECORD: usize = 1024;

fn config() -> LogConfig {
    LogConfig {
        message_timestamp_after_max_ms: i64::MAX,
        max_message_bytes: 2 << 20,
        ..LogConfig::default()
    }
}

fn make(batch_bytes: usize) -> Vec<u8> {
    let value = vec![7u8; RECORD];
    let n = batch_bytes / (RECORD + 8);
    let vals: Vec<&[u8]> = (0..n).map(|_| value.as_slice()).collect();
    batch(&vals, 1_000)
}

fn new_log(dir: &Path) -> Log {
    let s: Arc<dyn Storage> = Arc::new(FileStorage);
    Log::create(
        s,
        dir,
        &TopicPartition::new("bench", 0),
        [1; 16],
        config(),
        0,
    )
    .unwrap()
}

/// A log of about `bytes` bytes in `batch_bytes` batches.
fn filled(dir: &Path, bytes: usize, batch_bytes: usize) -> Log {
    let log = new_log(dir);
    let b = make(batch_bytes);
    for _ in 0..bytes / b.len() {
        log.append(&mut b.clone(), 0).unwrap();
    }
    log
}

fn append(c: &mut Criterion) {
    let mut g = c.benchmark_group("append");
    g.sample_size(10);
    for (name, size) in [("16KiB_batches", 16 << 10), ("1MiB_batches", 1 << 20)] {
        let b = make(size);
        let per_iter = 32 << 20;
        let n = per_iter / b.len();
        g.throughput(Throughput::Bytes((n * b.len()) as u64));
        g.bench_function(name, |bench| {
            bench.iter_batched(
                || (tempfile::tempdir().unwrap(), b.clone()),
                |(tmp, b)| {
                    let log = new_log(tmp.path());
                    for _ in 0..n {
                        log.append(&mut b.clone(), 0).unwrap();
                    }
                    black_box(log.log_end_offset());
                    tmp
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

/// A produced 16 KiB batch of 1 KiB JSON-like records (somewhat
/// compressible), and the size of its uncompressed records section.
fn produced(codec: Compression) -> (Vec<u8>, usize) {
    let build = |codec| {
        let mut b = RecordBatchBuilder::new(codec);
        for i in 0..15u32 {
            let value = format!(
                "{{\"id\":{i},\"user\":\"user-{}\",\"event\":\"click\",\"payload\":\"{}\"}}",
                i % 7,
                "x".repeat(950 + (i % 20) as usize)
            );
            b.push(
                1_000 + i as i64,
                Some(Bytes::from(format!("key-{}", i % 5))),
                Some(Bytes::from(value)),
                vec![],
            )
            .unwrap();
        }
        b.build().unwrap()
    };
    let raw = build(Compression::None).records_section().len();
    (build(codec).as_bytes().to_vec(), raw)
}

/// The produce path's storage half: every batch validated (header, CRC,
/// every record, decompressing when compressed) and appended as it came
/// (`append_shared`, no copy). Throughput is against the uncompressed
/// records, so codecs compare per GB of produced data.
fn produce_append(c: &mut Criterion) {
    let mut g = c.benchmark_group("produce_append_16KiB");
    g.sample_size(10);
    for codec in [Compression::None, Compression::Lz4, Compression::Zstd] {
        let (b, raw) = produced(codec);
        let n = (32 << 20) / raw;
        g.throughput(Throughput::Bytes((n * raw) as u64));
        g.bench_function(codec.name(), |bench| {
            bench.iter_batched(
                || tempfile::tempdir().unwrap(),
                |tmp| {
                    let log = new_log(tmp.path());
                    for _ in 0..n {
                        log.append_shared(&b, 0).unwrap();
                    }
                    black_box(log.log_end_offset());
                    tmp
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

fn reads(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let log = filled(tmp.path(), 64 << 20, 16 << 10);
    let leo = log.log_end_offset();
    let mut g = c.benchmark_group("read");
    g.throughput(Throughput::Elements(1));
    let mut rng = StdRng::seed_from_u64(1);
    g.bench_function("random_offset_lookup", |b| {
        b.iter(|| {
            let off = rng.gen_range(0..leo);
            black_box(log.read(off, 1, i64::MAX, true).unwrap().regions.len())
        })
    });
    let size = log.size_bytes();
    g.throughput(Throughput::Bytes(size));
    g.sample_size(10);
    g.bench_function("sequential_1MiB_fetches", |b| {
        b.iter(|| {
            let mut off = 0;
            let mut total = 0;
            while off < leo {
                let r = log.read(off, 1 << 20, i64::MAX, true).unwrap();
                for region in &r.regions {
                    let bytes = region.read_to_vec().unwrap();
                    total += bytes.len();
                    off = last_offset_in(&bytes) + 1;
                }
            }
            black_box(total)
        })
    });
    g.finish();
}

/// Last offset of the last batch in `bytes` (whole batches).
fn last_offset_in(bytes: &[u8]) -> i64 {
    let mut p = 0;
    let mut last = -1;
    while p < bytes.len() {
        let h = weir_protocol::records::BatchHeader::parse(&bytes[p..]).unwrap();
        last = h.last_offset();
        p += h.total_size();
    }
    last
}

fn recovery(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let log = filled(tmp.path(), 64 << 20, 16 << 10);
    let size = log.size_bytes();
    drop(log);
    let mut g = c.benchmark_group("recovery");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(size));
    g.bench_function("unclean_scan", |b| {
        b.iter(|| {
            let s: Arc<dyn Storage> = Arc::new(FileStorage);
            let log = Log::open(
                s,
                &tmp.path().join("bench-0"),
                TopicPartition::new("bench", 0),
                config(),
                OpenOptions {
                    recovery_point: 0,
                    log_start: 0,
                    clean_shutdown: false,
                    verify_flushed: false,
                    now_ms: 0,
                },
            )
            .unwrap();
            black_box(log.log_end_offset())
        })
    });
    // The scan alone (every batch read and CRC-checked, no index rebuild and
    // no fsync): what recovery costs beyond its syncs.
    let s: Arc<dyn Storage> = Arc::new(FileStorage);
    let log = Log::open(
        s,
        &tmp.path().join("bench-0"),
        TopicPartition::new("bench", 0),
        config(),
        OpenOptions {
            recovery_point: 0,
            log_start: 0,
            clean_shutdown: true,
            verify_flushed: false,
            now_ms: 0,
        },
    )
    .unwrap();
    g.bench_function("crc_scan", |b| {
        b.iter(|| black_box(log.verify().unwrap().is_none()))
    });
    g.finish();
}

criterion_group!(benches, append, produce_append, reads, recovery);
criterion_main!(benches);
