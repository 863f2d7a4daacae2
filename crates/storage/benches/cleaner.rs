//! Cleaner throughput.
//!
//! - `cleaner/dedupe_1000_keys_20000_records` (criterion): one cleaning of a
//!   small in-memory log with many duplicate keys.
//! - Once per `cargo bench` run, before criterion, a disk run: a log of real
//!   files (`WEIR_BENCH_CLEANER_MB`, default 256 MiB of dirty data; keys
//!   updated ~5 times each), evicted from the page cache, cleaned once with
//!   the default 128 MiB dedupe buffer. It prints the cleaner's MB/s of
//!   dirty data and the process's peak resident memory during the cleaning
//!   (VmHWM after resetting it through `/proc/self/clear_refs`), beside the
//!   disk's raw rate measured in the same run on a file of the same size
//!   (write + fsync, then an uncached read back).

use bytes::Bytes;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;
use weir_protocol::records::{Compression, RecordBatchBuilder};
use weir_storage::backend::MemStorage;
use weir_storage::cleaner::{CleanerConfig, Clock, LogCleaner};
use weir_storage::{LogConfig, LogManager, LogManagerConfig, Ratio, TopicPartition};

struct Fixed(AtomicI64);
impl Clock for Fixed {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
    fn sleep_ms(&self, _ms: u64) {}
}

const BATCHES: usize = 2_000;
const PER_BATCH: usize = 10;
const KEYS: usize = 1_000;

fn setup() -> (LogManager, u64) {
    let storage = Arc::new(MemStorage::new());
    let mut mc = LogManagerConfig::with_storage(vec![PathBuf::from("/data")], storage);
    mc.default_log_config = LogConfig {
        segment_bytes: 1 << 20,
        cleanup_policy: "compact".into(),
        min_cleanable_dirty_ratio: Ratio(0.0),
        message_timestamp_after_max_ms: i64::MAX,
        ..LogConfig::default()
    };
    let cfg = mc.default_log_config.clone();
    let mgr = LogManager::open(mc, 0).unwrap();
    let log = mgr
        .create_log(&TopicPartition::new("b", 0), [1; 16], cfg)
        .unwrap();
    let value = Bytes::from(vec![b'v'; 100]);
    for i in 0..BATCHES {
        let mut b = RecordBatchBuilder::new(Compression::None);
        for j in 0..PER_BATCH {
            let key = Bytes::from(format!("key-{}", (i * PER_BATCH + j) % KEYS));
            b.push(0, Some(key), Some(value.clone()), Vec::new())
                .unwrap();
        }
        let mut bytes = b.build().unwrap().as_bytes().to_vec();
        log.append(&mut bytes, 0).unwrap();
    }
    log.set_high_watermark(log.log_end_offset());
    let size = log.size_bytes();
    (mgr, size)
}

/// A line of `/proc/self/status` in KiB (`VmRSS`, `VmHWM`).
fn status_kib(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Drops a file's pages from the page cache (GNU dd `nocache`), so the
/// next read comes from the disk. Returns false if dd refused.
fn evict(path: &Path) -> bool {
    Command::new("dd")
        .arg(format!("if={}", path.display()))
        .args(["iflag=nocache", "count=0", "status=none"])
        .status()
        .is_ok_and(|s| s.success())
}

const MIB: f64 = 1024.0 * 1024.0;

/// Writes `size` bytes with fsync, evicts them, reads them back: the disk's
/// raw (write MB/s, uncached read MB/s).
fn raw_disk(dir: &Path, size: u64) -> (f64, f64) {
    let path = dir.join("raw-disk-probe");
    let chunk: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let t = Instant::now();
    let mut f = std::fs::File::create(&path).unwrap();
    let mut left = size;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n]).unwrap();
        left -= n as u64;
    }
    f.sync_all().unwrap();
    drop(f);
    let write = size as f64 / MIB / t.elapsed().as_secs_f64();
    assert!(evict(&path), "dd iflag=nocache failed");
    let t = Instant::now();
    let mut f = std::fs::File::open(&path).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    assert_eq!(total, size);
    let read = size as f64 / MIB / t.elapsed().as_secs_f64();
    std::fs::remove_file(&path).unwrap();
    (write, read)
}

/// The disk run (see the crate doc above). Skipped under `cargo test`.
fn disk_run() {
    let target_mb: u64 = std::env::var("WEIR_BENCH_CLEANER_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let dir = tempfile::Builder::new()
        .prefix("weir-cleaner-bench-")
        .tempdir_in(
            std::env::var_os("WEIR_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from),
        )
        .unwrap();
    let mut mc = LogManagerConfig::new(vec![dir.path().to_path_buf()]);
    mc.default_log_config = LogConfig {
        cleanup_policy: "compact".into(),
        segment_bytes: 64 << 20,
        // Appends run at time 0; a tick at 10 s rolls the last segment.
        segment_ms: 1_000,
        min_cleanable_dirty_ratio: Ratio(0.0),
        message_timestamp_after_max_ms: i64::MAX,
        ..LogConfig::default()
    };
    let cfg = mc.default_log_config.clone();
    let mgr = LogManager::open(mc, 0).unwrap();
    let tp = TopicPartition::new("disk", 0);
    let log = mgr.create_log(&tp, [2; 16], cfg).unwrap();
    // ~130 bytes per record: keys get about 5 updates each.
    let keys = (target_mb * 1024 * 1024 / 130 / 5).max(1);
    let value = Bytes::from(vec![b'v'; 100]);
    let mut i = 0u64;
    while log.size_bytes() < target_mb << 20 {
        let mut b = RecordBatchBuilder::new(Compression::None);
        for _ in 0..PER_BATCH {
            let key = Bytes::from(format!("key-{:012}", i.wrapping_mul(0x9E37_79B9) % keys));
            b.push(0, Some(key), Some(value.clone()), Vec::new())
                .unwrap();
            i += 1;
        }
        let mut bytes = b.build().unwrap().as_bytes().to_vec();
        log.append(&mut bytes, 0).unwrap();
    }
    log.set_high_watermark(log.log_end_offset());
    // Everything is in rolled segments: only the active one is never cleaned.
    log.tick(10_000).unwrap();
    log.flush().unwrap();
    let size = log.size_bytes();
    let log_dir = log.dir();
    let mut evicted = true;
    for e in std::fs::read_dir(&log_dir).unwrap() {
        evicted &= evict(&e.unwrap().path());
    }
    let cleaner = LogCleaner::open(CleanerConfig::default(), &mgr).unwrap();
    let clock = Fixed(AtomicI64::new(0));
    let rss_before = status_kib("VmRSS").unwrap_or(0);
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let t = Instant::now();
    let stats = cleaner.clean_now(&mgr, &tp, &clock).unwrap().unwrap();
    let secs = t.elapsed().as_secs_f64();
    let hwm = status_kib("VmHWM").unwrap_or(0);
    let (raw_w, raw_r) = raw_disk(dir.path(), size);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "cleaner disk run: {:.0} MiB dirty ({} records, {} keys), default dedupe buffer {} MiB{}",
        size as f64 / MIB,
        i,
        keys,
        CleanerConfig::default().dedupe_buffer_size >> 20,
        if evicted {
            ", log evicted from the page cache"
        } else {
            " (eviction failed: log cached)"
        },
    );
    println!(
        "  cleaning: {:.2} s, {:.1} MiB/s of dirty data; read {:.0} MiB, wrote {:.0} MiB; kept {}, dropped {}",
        secs,
        size as f64 / MIB / secs,
        stats.bytes_read as f64 / MIB,
        stats.bytes_written as f64 / MIB,
        stats.records_kept,
        stats.records_dropped
    );
    println!(
        "  peak resident memory during the cleaning: {:.1} MiB (VmHWM{}), {:.1} MiB resident before",
        hwm as f64 / 1024.0,
        if reset {
            " reset before the cleaning"
        } else {
            " since process start: clear_refs refused"
        },
        rss_before as f64 / 1024.0
    );
    println!(
        "  raw disk, same size, same run: write+fsync {raw_w:.1} MiB/s, uncached read {raw_r:.1} MiB/s, \
         write then read {:.1} MiB/s",
        1.0 / (1.0 / raw_w + 1.0 / raw_r)
    );
    println!("  load average: {}", load.trim());
}

fn bench(c: &mut Criterion) {
    if std::env::args().any(|a| a == "--bench")
        && std::env::var_os("WEIR_BENCH_SKIP_DISK").is_none()
    {
        disk_run();
    }
    let (_, size) = setup();
    let mut g = c.benchmark_group("cleaner");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(size));
    g.bench_function("dedupe_1000_keys_20000_records", |b| {
        b.iter_batched(
            setup,
            |(mgr, _)| {
                let cleaner = LogCleaner::open(
                    CleanerConfig {
                        dedupe_buffer_size: 1 << 20,
                        ..CleanerConfig::default()
                    },
                    &mgr,
                )
                .unwrap();
                let clock = Fixed(AtomicI64::new(0));
                cleaner
                    .clean_now(&mgr, &TopicPartition::new("b", 0), &clock)
                    .unwrap()
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
