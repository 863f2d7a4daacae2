//! A segment damaged below the recovery point (a corrupt `batchLength` in a
//! flushed segment, found after a restart): fetches before the damage get
//! the intact records up to it, fetches at or inside it get CORRUPT_MESSAGE,
//! no fetch ever returns records from a later offset than asked, and the
//! damage shows in `/metrics`.

use crate::common;

use common::*;
use std::path::{Path, PathBuf};
use weir_storage::testing::batch_layout;

const CORRUPT_MESSAGE: i16 = 2;

fn segment_logs(dir: &Path) -> Vec<(i64, PathBuf)> {
    let mut v: Vec<(i64, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            let name = p.file_name()?.to_str()?.to_string();
            let base = name.strip_suffix(".log")?.parse().ok()?;
            Some((base, p))
        })
        .collect();
    v.sort();
    v
}

/// The body of a GET on the broker's HTTP listener.
async fn http_get(b: &RunningBroker, path: &str) -> String {
    let addr = b.http_addr().expect("HTTP listener");
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    body.to_string()
}

async fn scrape_damaged(b: &RunningBroker, topic: &str) -> Option<f64> {
    let text = http_get(b, "/metrics").await;
    let want = format!("weir_partition_damaged_segments{{topic=\"{topic}\",partition=\"0\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&want).map(|v| v.trim().parse().unwrap()))
}

#[tokio::test]
async fn fetches_around_a_damaged_segment_never_skip_records() {
    let dir = tempfile::tempdir().unwrap();
    let conf = [("http.listeners", "127.0.0.1:0")];
    let b = start_broker(dir.path(), &conf).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(
        create_topic(&mut c, "d", 1, &[("segment.bytes", "1024")]).await,
        NONE
    );
    let n = 80;
    for i in 0..n {
        let (err, base) = produce(&mut c, "d", 0, batch(&[&format!("v{i}")], 1_000 + i), -1).await;
        assert_eq!((err, base), (NONE, i));
    }
    b.shutdown().await.unwrap();

    // Corrupt the length of the third batch of a middle segment so that it
    // spans the two batches after it exactly: a header-only walk lands on
    // a real batch further on.
    let pdir = dir.path().join("d-0");
    let logs = segment_logs(&pdir);
    assert!(logs.len() >= 4, "{logs:?}");
    let (victim_base, victim) = logs[logs.len() / 2].clone();
    let next_base = logs[logs.len() / 2 + 1].0;
    let mut bytes = std::fs::read(&victim).unwrap();
    let layout = batch_layout(&bytes);
    assert!(layout.len() >= 5);
    let (pos, h) = layout[2];
    let span = (h.total_size() + layout[3].1.total_size() + layout[4].1.total_size()) as i32 - 12;
    bytes[pos + 8..pos + 12].copy_from_slice(&span.to_be_bytes());
    std::fs::write(&victim, &bytes).unwrap();
    let damaged_from = h.base_offset;

    let b = start_broker(dir.path(), &conf).await;
    let mut c = Client::connect(b.local_addr).await;
    let mut corrupt = Vec::new();
    // Twice over, since a fetch that finds the damage changes what later
    // fetches see.
    for offset in (0..n).chain(0..n) {
        let (err, hw, values) = fetch(&mut c, 12, "d", Uuid::ZERO, offset, 0).await;
        assert_eq!(hw, n);
        match err {
            NONE => {
                assert!(!values.is_empty(), "nothing at {offset}");
                // librdkafka skips records below the asked offset in the
                // first batch; what it keeps must start exactly there.
                let kept: Vec<_> = values.into_iter().filter(|(o, _)| *o >= offset).collect();
                for (i, (o, v)) in kept.iter().enumerate() {
                    assert_eq!(*o, offset + i as i64, "fetch at {offset} skipped records");
                    assert_eq!(v, &format!("v{o}"));
                }
            }
            CORRUPT_MESSAGE => {
                assert!(
                    (damaged_from..next_base).contains(&offset),
                    "fetch at {offset} failed; damage spans {damaged_from}..{next_base}"
                );
                corrupt.push(offset);
            }
            other => panic!("fetch at {offset}: error {other}"),
        }
    }
    assert!(corrupt.contains(&damaged_from), "{corrupt:?}");
    assert_eq!(scrape_damaged(&b, "d").await, Some(1.0));
    // The console's API says where.
    let detail: serde_json::Value =
        serde_json::from_str(&http_get(&b, "/api/topics/d").await).unwrap();
    let damage = &detail["partitions"][0]["damage"];
    assert_eq!(damage.as_array().map(Vec::len), Some(1), "{detail}");
    assert_eq!(damage[0]["segment_base_offset"], victim_base);
    assert!(
        damage[0]["offset"].as_i64().unwrap() <= damaged_from,
        "{damage}"
    );
    assert!(victim_base < damaged_from);
    b.shutdown().await.unwrap();
}
