//! Cleaner throughput on a log with many duplicate keys (in memory).

use bytes::Bytes;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
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

fn bench(c: &mut Criterion) {
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
