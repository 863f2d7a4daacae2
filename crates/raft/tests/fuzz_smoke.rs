//! Bounded fuzz runs of the decoders of on-disk bytes: `raft.log` records
//! and the snapshot file (seeds: a real log and a well-formed snapshot
//! file, then mutations and random bytes). cargo-fuzz targets in `fuzz/`:
//! `raft_log`, `raft_snapshot`.

use bytes::Bytes;
use openraft::EntryPayload;
use openraft::storage::RaftLogStorageExt;
use weir_raft::log_store::{LOG_FILE, LogStore, fuzz_scan};
use weir_raft::state_machine::fuzz_decode_snapshot;

fn entry(term: u64, index: u64) -> weir_raft::Entry {
    openraft::Entry {
        log_id: openraft::LogId::new(openraft::CommittedLeaderId::new(term, 1), index),
        payload: EntryPayload::Normal(Bytes::from(index.to_be_bytes().to_vec())),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_log_scan_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = LogStore::open(dir.path()).unwrap();
    store
        .blocking_append((0..4).map(|i| entry(1, i)))
        .await
        .unwrap();
    drop(store);
    let log = std::fs::read(dir.path().join(LOG_FILE)).unwrap();
    assert!(!log.is_empty());
    weir_test_support::fuzz_smoke("raft_log", &[log, Vec::new()], 20_000, fuzz_scan);
}

#[test]
fn snapshot_decode_never_panics() {
    let meta =
        serde_json::to_vec(&openraft::SnapshotMeta::<u64, openraft::BasicNode>::default()).unwrap();
    let mut body = meta.clone();
    body.extend_from_slice(b"state");
    let mut file = b"WEIRSNP1".to_vec();
    file.extend_from_slice(&(meta.len() as u32).to_be_bytes());
    file.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    file.extend_from_slice(&body);
    weir_test_support::fuzz_smoke("raft_snapshot", &[file], 20_000, fuzz_decode_snapshot);
}
