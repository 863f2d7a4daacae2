//! The log file on disk: a torn tail is cut, corruption before the tail is
//! an error, and the node starts from what survives.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use common::{Recorder, applied, bounded, options, wait_for};
use openraft::storage::RaftLogStorage;
use openraft::{EntryPayload, RaftLogReader};
use weir_raft::MetadataRaft;
use weir_raft::log_store::{LOG_FILE, LogOpenError, LogStore, RECORD_HEADER_BYTES};

fn voters() -> BTreeMap<u64, String> {
    BTreeMap::from([(1, "127.0.0.1:1".to_string())])
}

/// Writes a log of five proposals `[0]..[4]` with one voter and stops.
async fn write_log(dir: &Path) {
    let router = weir_raft::network::MemRouter::default();
    let node = MetadataRaft::start_mem(options(1, dir, &voters()), Recorder::default(), &router)
        .await
        .unwrap();
    node.initialize().await.unwrap();
    wait_for("node 1 leads", || (node.leader() == Some(1)).then_some(())).await;
    for i in 0..5u8 {
        bounded("propose", node.propose(Bytes::from(vec![i])))
            .await
            .unwrap();
    }
    node.shutdown().await.unwrap();
}

/// Byte positions where each record starts.
fn record_starts(bytes: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        starts.push(pos);
        let len = u32::from_be_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
        pos += RECORD_HEADER_BYTES + len;
    }
    assert_eq!(pos, bytes.len(), "whole records");
    starts
}

async fn normal_payloads(store: &mut LogStore) -> Vec<Vec<u8>> {
    store
        .try_get_log_entries(..)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.payload {
            EntryPayload::Normal(b) => Some(b.to_vec()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_unacknowledged_append_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path()).await;
    let node_dir = dir.path().join("node-1");
    let path = node_dir.join(LOG_FILE);
    let bytes = std::fs::read(&path).unwrap();
    let last = *record_starts(&bytes).last().unwrap();

    // A crash in the middle of an append leaves the start of a record
    // that was never acknowledged.
    let mut torn = bytes.clone();
    torn.extend_from_slice(&bytes[last..last + RECORD_HEADER_BYTES + 5]);
    std::fs::write(&path, &torn).unwrap();
    let mut store = LogStore::open(&node_dir).unwrap();
    let five: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i]).collect();
    assert_eq!(normal_payloads(&mut store).await, five);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "exactly the torn record is cut"
    );
    drop(store);

    let router = weir_raft::network::MemRouter::default();
    let node = MetadataRaft::start_mem(
        options(1, dir.path(), &voters()),
        Recorder::default(),
        &router,
    )
    .await
    .unwrap();
    wait_for("replayed state", || {
        (applied(&node).len() == 5).then_some(())
    })
    .await;
    bounded("propose", node.propose(Bytes::from_static(b"next")))
        .await
        .unwrap();
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torn_last_entry_is_cut_and_the_node_restarts() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path()).await;
    let node_dir = dir.path().join("node-1");
    let path = node_dir.join(LOG_FILE);
    let bytes = std::fs::read(&path).unwrap();
    let last = *record_starts(&bytes).last().unwrap();

    // Cut the file in the middle of the last entry, as a crash mid-append
    // would leave it.
    let cut = last + RECORD_HEADER_BYTES + 3;
    std::fs::write(&path, &bytes[..cut]).unwrap();
    let mut store = LogStore::open(&node_dir).unwrap();
    assert_eq!(
        normal_payloads(&mut store).await,
        vec![vec![0], vec![1], vec![2], vec![3]]
    );
    assert_eq!(
        std::fs::metadata(&path).unwrap().len() as usize,
        last,
        "tail cut on disk"
    );
    let state = store.get_log_state().await.unwrap();
    drop(store);

    // A node starts on the shortened log and keeps going.
    let router = weir_raft::network::MemRouter::default();
    let node = MetadataRaft::start_mem(
        options(1, dir.path(), &voters()),
        Recorder::default(),
        &router,
    )
    .await
    .unwrap();
    wait_for("node 1 leads", || (node.leader() == Some(1)).then_some(())).await;
    let index = bounded("propose", node.propose(Bytes::from_static(b"next")))
        .await
        .unwrap();
    assert!(index > state.last_log_id.unwrap().index);
    let payloads: Vec<Vec<u8>> = applied(&node).into_iter().map(|(_, p)| p).collect();
    assert_eq!(payloads.last().unwrap(), b"next");
    assert!(payloads.len() >= 4, "{payloads:?}");
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_crc_on_the_last_entry_is_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path()).await;
    let node_dir = dir.path().join("node-1");
    let path = node_dir.join(LOG_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = *record_starts(&bytes).last().unwrap();
    let n = bytes.len();
    bytes[n - 2] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();

    let mut store = LogStore::open(&node_dir).unwrap();
    assert_eq!(
        normal_payloads(&mut store).await,
        vec![vec![0], vec![1], vec![2], vec![3]]
    );
    assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, last);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corruption_before_the_tail_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path()).await;
    let node_dir = dir.path().join("node-1");
    let path = node_dir.join(LOG_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    let starts = record_starts(&bytes);
    // Turn the payload [2] of the third proposal into [3]: still valid
    // JSON, so only the CRC can tell.
    let needle = b"\"Normal\":[2]";
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap();
    bytes[at + needle.len() - 2] = b'3';
    let second = *starts.iter().filter(|s| **s < at).max().unwrap();
    assert!(
        second < *starts.last().unwrap(),
        "the damaged record is not the last"
    );
    std::fs::write(&path, &bytes).unwrap();

    let err = LogStore::open(&node_dir).unwrap_err();
    match &err {
        LogOpenError::Corrupt { position, .. } => assert_eq!(*position as usize, second),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(err.to_string().contains("CRC32C mismatch"), "{err}");
    // Nothing was cut: the file is left for an operator to inspect.
    assert_eq!(std::fs::read(&path).unwrap(), bytes);

    let router = weir_raft::network::MemRouter::default();
    let start = MetadataRaft::start_mem(
        options(1, dir.path(), &voters()),
        Recorder::default(),
        &router,
    )
    .await;
    assert!(start.is_err(), "a node must not start on a corrupt log");
}

fn entry(term: u64, index: u64) -> weir_raft::Entry {
    openraft::Entry {
        log_id: openraft::LogId::new(openraft::CommittedLeaderId::new(term, 1), index),
        payload: EntryPayload::Normal(Bytes::from(index.to_be_bytes().to_vec())),
    }
}

async fn snapshot_of(
    store: &mut LogStore,
) -> (
    Vec<weir_raft::Entry>,
    openraft::LogState<weir_raft::TypeConfig>,
) {
    let entries = store.try_get_log_entries(..).await.unwrap();
    (entries, store.get_log_state().await.unwrap())
}

/// Every storage operation is on disk when it returns: reopening after
/// each one gives back the same log, vote and committed id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_survives_a_reopen() {
    use openraft::storage::RaftLogStorageExt;
    let dir = tempfile::tempdir().unwrap();
    let mut store = LogStore::open(dir.path()).unwrap();

    async fn check_reopen(dir: &Path, store: &mut LogStore, step: &str) -> LogStore {
        let before = snapshot_of(store).await;
        let vote = store.read_vote().await.unwrap();
        let committed = store.read_committed().await.unwrap();
        let mut reopened = LogStore::open(dir).unwrap();
        assert_eq!(snapshot_of(&mut reopened).await, before, "log after {step}");
        assert_eq!(
            reopened.read_vote().await.unwrap(),
            vote,
            "vote after {step}"
        );
        assert_eq!(
            reopened.read_committed().await.unwrap(),
            committed,
            "committed after {step}"
        );
        reopened
    }

    store
        .blocking_append((0..10).map(|i| entry(1, i)))
        .await
        .unwrap();
    store = check_reopen(dir.path(), &mut store, "append").await;
    store
        .truncate(openraft::LogId::new(
            openraft::CommittedLeaderId::new(1, 1),
            6,
        ))
        .await
        .unwrap();
    store = check_reopen(dir.path(), &mut store, "truncate").await;
    assert_eq!(
        store
            .get_log_state()
            .await
            .unwrap()
            .last_log_id
            .unwrap()
            .index,
        5
    );
    store
        .blocking_append((6..9).map(|i| entry(2, i)))
        .await
        .unwrap();
    store.save_vote(&openraft::Vote::new(2, 3)).await.unwrap();
    store
        .save_committed(Some(openraft::LogId::new(
            openraft::CommittedLeaderId::new(2, 1),
            7,
        )))
        .await
        .unwrap();
    store = check_reopen(dir.path(), &mut store, "vote and committed").await;
    store
        .purge(openraft::LogId::new(
            openraft::CommittedLeaderId::new(1, 1),
            4,
        ))
        .await
        .unwrap();
    store = check_reopen(dir.path(), &mut store, "purge").await;
    let (entries, state) = snapshot_of(&mut store).await;
    assert_eq!(
        entries
            .iter()
            .map(|e| (e.log_id.leader_id.term, e.log_id.index))
            .collect::<Vec<_>>(),
        vec![(1, 5), (2, 6), (2, 7), (2, 8)]
    );
    assert_eq!(state.last_purged_log_id.unwrap().index, 4);
    // Purging past the end leaves an empty log that remembers the purge.
    store
        .purge(openraft::LogId::new(
            openraft::CommittedLeaderId::new(2, 1),
            12,
        ))
        .await
        .unwrap();
    store = check_reopen(dir.path(), &mut store, "purge past the end").await;
    let (entries, state) = snapshot_of(&mut store).await;
    assert!(entries.is_empty());
    assert_eq!(state.last_log_id.unwrap().index, 12);
}
