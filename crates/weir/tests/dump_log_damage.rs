//! `weir dump-log` on a damaged segment: it prints every batch as Kafka's
//! tool does, marks where the damage is, and exits non-zero.

use crate::common;

use bytes::Bytes;
use common::weir;
use weir_protocol::records::{Compression, RecordBatchBuilder};

#[test]
fn dump_log_names_the_damaged_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut file = Vec::new();
    let mut positions = Vec::new();
    for i in 0..5i64 {
        let mut b = RecordBatchBuilder::new(Compression::None).base_offset(i);
        b.push(
            1_000 + i,
            None,
            Some(Bytes::from(format!("value-{i}"))),
            vec![],
        )
        .unwrap();
        positions.push(file.len());
        file.extend_from_slice(b.build().unwrap().as_bytes());
    }
    let path = dir.path().join("00000000000000000000.log");
    std::fs::write(&path, &file).unwrap();
    let clean = weir(None, &["dump-log", path.to_str().unwrap()], None);
    assert_eq!(clean.code, 0, "{}", clean.stderr);
    assert!(!clean.stdout.contains("Damage"), "{}", clean.stdout);

    // A flipped byte in the value of the third batch.
    let at = positions[3] - 3;
    file[at] ^= 0x40;
    std::fs::write(&path, &file).unwrap();
    let out = weir(None, &["dump-log", path.to_str().unwrap()], None);
    assert_eq!(out.code, 1, "{}", out.stdout);
    let line = format!("Damage at position {} (offset 2 expected)", positions[2]);
    assert!(out.stdout.contains(&line), "{}", out.stdout);
    assert!(out.stderr.contains("damaged at position"), "{}", out.stderr);
    // Every batch is still listed, the damaged one as invalid.
    assert_eq!(out.stdout.matches("baseOffset:").count(), 5);
    assert_eq!(out.stdout.matches("isvalid: false").count(), 1);
}

#[test]
fn dump_log_prints_a_txnindex_as_kafka_does_and_names_its_damage() {
    use weir_storage::AbortedTxn;
    let dir = tempfile::tempdir().unwrap();
    let entries = [
        AbortedTxn {
            producer_id: 7,
            first_offset: 100,
            last_offset: 104,
            last_stable_offset: 102,
        },
        AbortedTxn {
            producer_id: 8,
            first_offset: 102,
            last_offset: 110,
            last_stable_offset: 111,
        },
    ];
    let mut file: Vec<u8> = entries.iter().flat_map(|e| e.to_bytes()).collect();
    let path = dir.path().join("00000000000000000100.txnindex");
    std::fs::write(&path, &file).unwrap();
    let out = weir(None, &["dump-log", path.to_str().unwrap()], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        format!(
            "Dumping {}\n\
             version: 0 producerId: 7 firstOffset: 100 lastOffset: 104 lastStableOffset: 102\n\
             version: 0 producerId: 8 firstOffset: 102 lastOffset: 110 lastStableOffset: 111\n",
            path.display()
        )
    );

    // A torn last entry: the entries before it, then the damage.
    file.truncate(file.len() - 10);
    std::fs::write(&path, &file).unwrap();
    let out = weir(None, &["dump-log", path.to_str().unwrap()], None);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert_eq!(
        out.stdout.matches("producerId:").count(),
        1,
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("damaged transaction index"),
        "{}",
        out.stderr
    );
}
