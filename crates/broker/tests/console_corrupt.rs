//! The console's record browser over a log with a corrupt batch: the page
//! is still a 200 with every intact record, and the damaged batch is one
//! row with its offsets and the reason, instead of a 500 for the page.

use crate::common;

use std::sync::Arc;

use common::*;
use serde_json::Value;
use weir_broker::Broker;
use weir_broker::http::console;

fn records(b: &Arc<Broker>, query: &str) -> Value {
    let r = console::handle(b, "/api/records", query).expect("a console path");
    let v: Value = serde_json::from_slice(&r.body).expect("JSON");
    assert_eq!(r.status, 200, "{query}: {v}");
    v
}

/// An error row: offset, last offset, reason.
type ErrorRow = (i64, Option<i64>, String);

/// Offsets of the record rows, and the error rows.
fn rows(page: &Value) -> (Vec<i64>, Vec<ErrorRow>) {
    let mut recs = Vec::new();
    let mut errors = Vec::new();
    for r in page["records"].as_array().unwrap() {
        match r["error"].as_str() {
            Some(e) => errors.push((
                r["offset"].as_i64().unwrap(),
                r["last_offset"].as_i64(),
                e.to_string(),
            )),
            None => recs.push(r["offset"].as_i64().unwrap()),
        }
    }
    (recs, errors)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_batch_is_an_error_row_between_intact_records() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    // one batch per segment: the damaged one is in a rolled segment, which
    // a clean restart does not check
    assert_eq!(
        create_topic(&mut c, "t", 1, &[("segment.bytes", "100")]).await,
        0
    );
    for (i, values) in [["a0", "a1"], ["b2", "b3"], ["c4", "c5"]]
        .iter()
        .enumerate()
    {
        let (err, base) = produce(&mut c, "t", 0, batch(values, 1_700_000_000_000), -1).await;
        assert_eq!((err, base), (0, 2 * i as i64));
    }
    drop(c);
    b.shutdown().await.unwrap();

    let seg = dir.path().join("t-0").join("00000000000000000002.log");
    let mut log = std::fs::read(&seg).unwrap();
    let last = log.len() - 1;
    log[last] ^= 0x5a;
    std::fs::write(&seg, &log).unwrap();
    assert!(dir.path().join("t-0/00000000000000000004.log").exists());

    let b = start_broker(dir.path(), &[]).await;
    let broker = b.broker.clone();
    let page = records(&broker, "topic=t&partition=0&offset=0");
    let (recs, errors) = rows(&page);
    assert_eq!(recs, vec![0, 1, 4, 5], "{page}");
    assert_eq!(errors.len(), 1, "{page}");
    let (offset, last_offset, error) = &errors[0];
    assert_eq!((*offset, *last_offset), (2, Some(3)));
    assert!(error.contains("crc"), "{error}");
    // in offset order: the error row sits between the records
    let order: Vec<i64> = page["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["offset"].as_i64().unwrap())
        .collect();
    assert_eq!(order, vec![0, 1, 2, 4, 5]);
    assert_eq!(page["next_offset"], 6);

    // starting inside the damaged batch shows it too
    let (recs, errors) = rows(&records(&broker, "topic=t&partition=0&offset=3"));
    assert_eq!((recs, errors.len()), (vec![4, 5], 1));
    // a limit counts the error row
    let page = records(&broker, "topic=t&partition=0&offset=0&limit=3");
    let (recs, errors) = rows(&page);
    assert_eq!((recs, errors.len()), (vec![0, 1], 1));
    assert_eq!(page["next_offset"], 4);
    b.shutdown().await.unwrap();
}
