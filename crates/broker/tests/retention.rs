//! Compacted topics end to end: keyless records refused, the cleaner runs on
//! its schedule and a fetch then shows only each key's latest value.

use crate::common;
use common::*;

fn keyed(records: &[(&str, Option<&str>)], ts: i64) -> Bytes {
    let mut b = RecordBatchBuilder::new(Compression::None);
    for (k, v) in records {
        b.push(
            ts,
            Some(Bytes::from(k.to_string())),
            v.map(|v| Bytes::from(v.to_string())),
            vec![],
        )
        .unwrap();
    }
    b.build().unwrap().into_bytes()
}

#[tokio::test]
async fn compacted_topic_keeps_latest_values() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(
        dir.path(),
        &[
            ("log.cleaner.backoff.ms", "10"),
            ("log.retention.check.interval.ms", "10"),
        ],
    )
    .await;
    let mut c = Client::connect(b.local_addr).await;
    let configs = [
        ("cleanup.policy", "compact"),
        ("segment.bytes", "200"),
        ("min.cleanable.dirty.ratio", "0.01"),
    ];
    assert_eq!(create_topic(&mut c, "cmp", 1, &configs).await, NONE);

    // Keyless records are refused (INVALID_RECORD = 87).
    let keyless = {
        let mut bb = RecordBatchBuilder::new(Compression::None);
        bb.push(1, None, Some(Bytes::from("v")), vec![]).unwrap();
        bb.build().unwrap().into_bytes()
    };
    assert_eq!(produce(&mut c, "cmp", 0, keyless, -1).await.0, 87);

    let now = 1_700_000_000_000;
    for round in 0..10 {
        let a = format!("a{round}");
        let bv = format!("b{round}");
        let recs = [("a", Some(a.as_str())), ("b", Some(bv.as_str()))];
        assert_eq!(
            produce(&mut c, "cmp", 0, keyed(&recs, now), -1).await.0,
            NONE
        );
    }
    // A tombstone for "b", then more records so that everything above is
    // in inactive segments.
    assert_eq!(
        produce(&mut c, "cmp", 0, keyed(&[("b", None)], now), -1)
            .await
            .0,
        NONE
    );
    for i in 0..4 {
        let v = format!("c{i}");
        assert_eq!(
            produce(&mut c, "cmp", 0, keyed(&[("c", Some(v.as_str()))], now), -1)
                .await
                .0,
            NONE
        );
    }
    let id = metadata(&mut c, Some(vec!["cmp"]), false).await.topics[0].topic_id;

    // Wait for the cleaner (scheduled every 10 ms), at most 30 s.
    let mut values = Vec::new();
    for _ in 0..600 {
        let (err, _, v) = fetch(&mut c, 12, "cmp", id, 0, 0).await;
        assert_eq!(err, NONE);
        values = v;
        // The cleaner may run while the records above are produced; wait
        // for a cleaning that saw all of them.
        let a_left = values.iter().filter(|(_, v)| v.starts_with('a')).count();
        let b_left = values.iter().filter(|(_, v)| v.starts_with('b')).count();
        if a_left == 1 && b_left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let a: Vec<&str> = values
        .iter()
        .filter(|(_, v)| v.starts_with('a'))
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(a, vec!["a9"], "{values:?}");
    // "b" only has its tombstone left (an empty value in this helper).
    assert!(
        !values.iter().any(|(_, v)| v.starts_with('b')),
        "{values:?}"
    );
    // Offsets are unchanged: a9 is at 18, the tombstone at 20.
    assert!(values.contains(&(18, "a9".to_string())), "{values:?}");
    assert!(values.contains(&(20, String::new())), "{values:?}");
    b.shutdown().await.unwrap();
}
