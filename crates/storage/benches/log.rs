//! Storage benchmarks on real files (page cache; appends and reads are not
//! fsynced): append throughput for 1 KiB records in 16 KiB and 1 MiB batches,
//! the produce path's validate + append of 16 KiB batches per codec, random
//! offset lookups, sequential reads, recovery (unclean open with its fsyncs,
//! and the CRC scan alone). Compare with the raw
//! page-cache limits from `benches/raw_limit.sh`.

use bytes::Bytes;
use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use rand::{RngExt, SeedableRng, rngs::StdRng};
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
/// (`append_shared`, no copy). Measured in CPU time of the benchmark thread
/// (user + system, page-cache writes included), so other load on the
/// machine does not count; throughput is against the uncompressed records,
/// so codecs compare per GB of produced data.
fn produce_append(c: &mut Criterion<ThreadCpuTime>) {
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
            let off = rng.random_range(0..leo);
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

/// CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`), as a
/// criterion measurement.
struct ThreadCpuTime;

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, exclusively borrowed timespec the call
    // writes; the clock id is a constant the kernel supports.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Measurement for ThreadCpuTime {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, start: u64) -> u64 {
        thread_cpu_ns() - start
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuFormatter
    }
}

/// Values in CPU nanoseconds, shown as CPU milliseconds and MiB per CPU
/// second.
struct CpuFormatter;

impl ValueFormatter for CpuFormatter {
    fn scale_values(&self, _typical: f64, values: &mut [f64]) -> &'static str {
        values.iter_mut().for_each(|v| *v /= 1e6);
        "ms (cpu)"
    }
    fn scale_throughputs(
        &self,
        _typical: f64,
        throughput: &Throughput,
        values: &mut [f64],
    ) -> &'static str {
        let (units, unit, label) = match *throughput {
            Throughput::Bytes(b) | Throughput::BytesDecimal(b) => {
                (b as f64, (1u64 << 20) as f64, "MiB/s (cpu)")
            }
            Throughput::Elements(e) => (e as f64, 1.0, "elem/s (cpu)"),
        };
        values
            .iter_mut()
            .for_each(|v| *v = units / (*v * 1e-9) / unit);
        label
    }
    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

criterion_group!(benches, append, reads, recovery);
criterion_group! {
    name = produce;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = produce_append
}
criterion_main!(benches, produce);
