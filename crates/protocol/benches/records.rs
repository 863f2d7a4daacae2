//! Record batch throughput per codec: build (encode + compress), parse
//! (split + CRC), validate (every record, as a produce is checked), and
//! decode (decompress + records). Throughput is reported
//! against the uncompressed records section.
//!
//! `cargo bench -p weir-protocol --bench records`

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use weir_protocol::records::{
    BatchIter, Compression, DecompressLimits, RecordBatchBuilder, validate_records,
};

/// 1000 records of ~1 KiB with somewhat compressible values, like JSON
/// events.
fn builder(codec: Compression) -> RecordBatchBuilder {
    let mut b = RecordBatchBuilder::new(codec).base_offset(1_000_000);
    for i in 0..1000u32 {
        let value = format!(
            "{{\"id\":{i},\"user\":\"user-{}\",\"event\":\"click\",\"payload\":\"{}\"}}",
            i % 97,
            "x".repeat(900 + (i % 50) as usize)
        );
        b.push(
            1_700_000_000_000 + i as i64,
            Some(Bytes::from(format!("key-{}", i % 100))),
            Some(Bytes::from(value)),
            vec![],
        )
        .expect("valid record");
    }
    b
}

fn bench(c: &mut Criterion) {
    let limits = DecompressLimits::default();
    for codec in Compression::ALL {
        let b = builder(codec);
        let raw_size = builder(Compression::None)
            .build()
            .expect("builds")
            .records_section()
            .len() as u64;
        let batch = b.build().expect("builds");
        let bytes = batch.as_bytes().clone();

        let mut g = c.benchmark_group("records");
        g.throughput(Throughput::Bytes(raw_size));
        g.bench_with_input(BenchmarkId::new("build", codec.name()), &b, |bench, b| {
            bench.iter(|| b.build().expect("builds"))
        });
        g.bench_with_input(
            BenchmarkId::new("split_crc", codec.name()),
            &bytes,
            |bench, bytes| bench.iter(|| BatchIter::new(bytes.clone()).count()),
        );
        g.bench_with_input(
            BenchmarkId::new("validate", codec.name()),
            &batch,
            |bench, batch| {
                bench.iter(|| {
                    validate_records(batch.header(), batch.records_section(), &limits)
                        .expect("valid")
                })
            },
        );
        g.bench_with_input(
            BenchmarkId::new("decode", codec.name()),
            &batch,
            |bench, batch| bench.iter(|| batch.collect_records(&limits).expect("decodes").len()),
        );
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
