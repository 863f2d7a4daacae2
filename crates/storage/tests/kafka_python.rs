//! On-disk format check with an independent reader: kafka-python's record
//! batch parser reads weir's `.log` files, and every index entry must point
//! at a batch start whose last offset matches. Uses the test venv
//! (`WEIR_COMPAT_PYTHON`, else `.test-deps/venv`, as `scripts/test` builds
//! it); without it the test is skipped, or fails under CI.

use crate::common;
use common::make_batch;
use std::process::Command;
use std::sync::Arc;
use weir_protocol::records::{Compression, RecordBatchBuilder};
use weir_storage::backend::{FileStorage, Storage};
use weir_storage::{Log, LogConfig, TimestampType, TopicPartition};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn kafka_python_reads_weir_segments() {
    let Some(python) = weir_test_support::kafka_python() else {
        weir_test_support::skip_or_fail(
            "the kafka-python venv (.test-deps/venv, or WEIR_COMPAT_PYTHON)",
        );
        return;
    };
    for ts_type in [TimestampType::CreateTime, TimestampType::LogAppendTime] {
        let tmp = tempfile::tempdir().unwrap();
        let s: Arc<dyn Storage> = Arc::new(FileStorage);
        let config = LogConfig {
            segment_bytes: 8 * 1024,
            index_interval_bytes: 512,
            message_timestamp_type: ts_type,
            message_timestamp_after_max_ms: i64::MAX,
            ..LogConfig::default()
        };
        let tp = TopicPartition::new("fmt", 3);
        let log = Log::create(s, tmp.path(), &tp, [5; 16], config, 0).unwrap();
        let mut want = Vec::new();
        let now = 1_700_000_000_000;
        for i in 0..60i64 {
            let mut b = if i % 5 == 4 {
                // gzip: the codec kafka-python has without extra packages.
                let mut bb = RecordBatchBuilder::new(Compression::Gzip);
                for j in 0..3 {
                    let v = format!("compressed-{i}-{j}");
                    bb.push(
                        1_000 + i,
                        Some(bytes::Bytes::from(format!("k{j}"))),
                        Some(bytes::Bytes::from(v)),
                        vec![],
                    )
                    .unwrap();
                }
                bb.build().unwrap().into_bytes().to_vec()
            } else {
                make_batch((i % 3 + 1) as usize, 100 + i as usize, 1_000 + i, i as u8)
            };
            let info = log.append(&mut b, now).unwrap();
            // Expected records, from weir's own view of the stored batch.
            let recs = weir_protocol::records::RecordBatch::from_bytes(b.clone().into())
                .unwrap()
                .collect_records(&Default::default())
                .unwrap();
            for r in recs {
                let ts = if ts_type == TimestampType::LogAppendTime {
                    now
                } else {
                    r.timestamp(1_000 + i)
                };
                want.push(format!(
                    "R {} {} {} {}",
                    r.offset(info.base_offset),
                    ts,
                    r.key.as_deref().map_or("-".to_string(), hex),
                    r.value.as_deref().map_or("-".to_string(), hex)
                ));
            }
        }
        assert!(log.segment_count() > 2);
        log.close().unwrap();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kafka_python_check.py");
        let out = Command::new(&python)
            .arg(script)
            .arg(tmp.path().join("fmt-3"))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got: Vec<String> = stdout
            .lines()
            .filter(|l| l.starts_with("R "))
            .map(String::from)
            .collect();
        assert_eq!(got, want);
        let indexed: usize = stdout
            .lines()
            .filter(|l| l.starts_with("I ") && l.contains(".index"))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<usize>().unwrap())
            .sum();
        assert!(indexed > 5, "only {indexed} index entries checked");
    }
}
