//! Persisting and rebuilding idempotent-producer state.
//!
//! Snapshots use Kafka's producer snapshot format (version 1), in the
//! partition directory as `<20-digit offset>.snapshot`, where the offset is
//! the log end offset the state covers:
//!
//! ```text
//! version  int16   = 1
//! crc      uint32  CRC-32C of everything after this field
//! count    int32   number of entries
//! entry × count:
//!   producer_id int64, epoch int16, last_sequence int32, last_offset int64,
//!   offset_delta int32 (last - first sequence of the batch), timestamp int64,
//!   coordinator_epoch int32 (-1: none),
//!   current_txn_first_offset int64 (-1: no open transaction)
//! ```
//!
//! Kafka writes one entry per producer (its last batch). weir writes up to
//! the last five batches of each producer, oldest first, so a reader that
//! keeps the last entry per producer id (as Kafka does) gets Kafka's state,
//! and weir gets back its whole de-duplication window. Every entry of a
//! producer carries its coordinator epoch and the first offset of its open
//! transaction. A producer without a batch to remember (known by a marker
//! or a coordinator's batch) has one entry with last sequence -1, last
//! offset -1 and offset delta 0, as Kafka writes it.
//!
//! Snapshots are written at clean shutdown and at every periodic checkpoint
//! for partitions whose state is in memory and whose log end offset moved
//! since their last snapshot, once the partition's
//! aborted-transaction entries are synced (`Log::sync_aborted_txns`): the
//! entries of markers below a snapshot's offset are then durable. The
//! state of a partition is loaded lazily, the first time it is needed after
//! start (an idempotent or transactional append, a follower's append, the
//! last stable offset): from the newest snapshot at or below the log end
//! offset, then every batch after it, whose ABORT markers are indexed again
//! when a crash lost their `.txnindex` entry; without a snapshot, from the
//! batches of the log's tail (the last [`REBUILD_SCAN_OFFSETS`] offsets, or
//! fewer: the segments holding the last [`REBUILD_SCAN_BYTES`]). Producers
//! older than that window are treated like expired producers in Kafka:
//! their next sequence is accepted as is; a transaction open since before
//! it counts from its first batch inside it.

use std::path::{Path, PathBuf};

use weir_protocol::records::BatchHeader;
use weir_storage::backend::Storage;
use weir_storage::checkpoint::write_atomic;
use weir_storage::segment::{PRODUCER_SNAPSHOT_SUFFIX, read_all};
use weir_storage::{Log, StorageError};

use crate::producer_state::{AppliedBatch, BatchMeta, PartitionProducers};

pub const REBUILD_SCAN_OFFSETS: i64 = 100_000;
pub const REBUILD_SCAN_BYTES: usize = 64 << 20;
const SNAPSHOT_VERSION: i16 = 1;
const ENTRY_LEN: usize = 46;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot too short or truncated")]
    Truncated,
    #[error("unsupported snapshot version {0}")]
    Version(i16),
    #[error("snapshot CRC mismatch")]
    Crc,
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub fn encode_snapshot(state: &PartitionProducers) -> Vec<u8> {
    let mut entries = Vec::new();
    let mut count: i32 = 0;
    for (pid, e) in state.entries() {
        let mut entry = |last_seq: i32, last_offset: i64, delta: i32, timestamp: i64| {
            entries.extend_from_slice(&pid.to_be_bytes());
            entries.extend_from_slice(&e.epoch.to_be_bytes());
            entries.extend_from_slice(&last_seq.to_be_bytes());
            entries.extend_from_slice(&last_offset.to_be_bytes());
            entries.extend_from_slice(&delta.to_be_bytes());
            entries.extend_from_slice(&timestamp.to_be_bytes());
            entries.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
            entries.extend_from_slice(&e.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
            count += 1;
        };
        if e.batches.is_empty() {
            entry(-1, -1, 0, e.last_timestamp);
        }
        for b in &e.batches {
            let delta = (b.last_offset - b.first_offset).clamp(0, i32::MAX as i64) as i32;
            entry(b.last_seq, b.last_offset, delta, b.timestamp);
        }
    }
    let mut body = Vec::with_capacity(4 + entries.len());
    body.extend_from_slice(&count.to_be_bytes());
    body.extend_from_slice(&entries);
    let mut out = Vec::with_capacity(6 + body.len());
    out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

fn be<const N: usize>(b: &[u8], at: usize) -> Result<[u8; N], SnapshotError> {
    b.get(at..at + N)
        .and_then(|s| s.try_into().ok())
        .ok_or(SnapshotError::Truncated)
}

pub fn decode_snapshot(bytes: &[u8]) -> Result<PartitionProducers, SnapshotError> {
    let version = i16::from_be_bytes(be(bytes, 0)?);
    if version != SNAPSHOT_VERSION {
        return Err(SnapshotError::Version(version));
    }
    let crc = u32::from_be_bytes(be(bytes, 2)?);
    let body = bytes.get(6..).ok_or(SnapshotError::Truncated)?;
    if crc32c::crc32c(body) != crc {
        return Err(SnapshotError::Crc);
    }
    let count = i32::from_be_bytes(be(body, 0)?);
    // the count is checked against the bytes present before iterating
    if count < 0 || (count as usize).saturating_mul(ENTRY_LEN) != body.len() - 4 {
        return Err(SnapshotError::Truncated);
    }
    let mut state = PartitionProducers::default();
    for i in 0..count as usize {
        let at = 4 + i * ENTRY_LEN;
        let pid = i64::from_be_bytes(be(body, at)?);
        let epoch = i16::from_be_bytes(be(body, at + 8)?);
        let last_seq = i32::from_be_bytes(be(body, at + 10)?);
        let last_offset = i64::from_be_bytes(be(body, at + 14)?);
        let delta = i32::from_be_bytes(be(body, at + 22)?);
        let timestamp = i64::from_be_bytes(be(body, at + 26)?);
        let coordinator_epoch = i32::from_be_bytes(be(body, at + 34)?);
        let txn_first = i64::from_be_bytes(be(body, at + 38)?);
        // A producer known without a batch (by a transaction marker, or a
        // coordinator's batch): nothing to check sequences against.
        let batch = (last_seq >= 0 && delta >= 0).then(|| {
            let first_seq = if last_seq >= delta {
                last_seq - delta
            } else {
                // wrapped past i32::MAX
                (i32::MAX as i64 + 1 + last_seq as i64 - delta as i64) as i32
            };
            BatchMeta {
                first_seq,
                last_seq,
                first_offset: last_offset - delta as i64,
                last_offset,
                timestamp,
            }
        });
        state.restore(
            pid,
            epoch,
            batch,
            coordinator_epoch,
            (txn_first >= 0).then_some(txn_first),
            timestamp,
        );
    }
    state.normalize_timestamps();
    state.debug_check();
    Ok(state)
}

fn snapshot_offset(name: &str) -> Option<i64> {
    let stem = name.strip_suffix(PRODUCER_SNAPSHOT_SUFFIX)?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
        .then(|| stem.parse().ok())
        .flatten()
}

fn list_snapshots(storage: &dyn Storage, dir: &Path) -> Vec<(i64, PathBuf)> {
    let Ok(entries) = storage.list_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<(i64, PathBuf)> = entries
        .into_iter()
        .filter(|(_, is_dir)| !is_dir)
        .filter_map(|(name, _)| snapshot_offset(&name).map(|o| (o, dir.join(name))))
        .collect();
    v.sort();
    v
}

/// The offset of the oldest producer snapshot in `dir`, if any: where the
/// earliest rebuild of the partition's producer state would start.
pub fn oldest_snapshot(storage: &dyn Storage, dir: &Path) -> Option<i64> {
    list_snapshots(storage, dir).first().map(|(o, _)| *o)
}

/// Whether `<offset>.snapshot` exists in `dir`.
pub fn has_snapshot_at(storage: &dyn Storage, dir: &Path, offset: i64) -> bool {
    storage.exists(&dir.join(format!("{offset:020}{PRODUCER_SNAPSHOT_SUFFIX}")))
}

/// Writes `<offset>.snapshot` the way checkpoints are written (tmp file,
/// fsync, rename, directory fsync), then removes older snapshots of the
/// partition. A crash at any point leaves the previous snapshot or the new
/// one, complete.
pub fn write_snapshot(
    storage: &dyn Storage,
    dir: &Path,
    offset: i64,
    state: &PartitionProducers,
) -> Result<(), StorageError> {
    let path = dir.join(format!("{offset:020}{PRODUCER_SNAPSHOT_SUFFIX}"));
    write_atomic(storage, &path, &encode_snapshot(state))?;
    let mut removed = false;
    for (o, p) in list_snapshots(storage, dir) {
        if o != offset {
            removed |= storage.remove_file(&p).is_ok();
        }
    }
    if removed {
        // best effort: an old snapshot that comes back is ignored or
        // superseded by the newer one
        let _ = storage.sync_dir(dir);
    }
    Ok(())
}

fn read_snapshot(storage: &dyn Storage, path: &Path) -> Result<PartitionProducers, SnapshotError> {
    let io = |source| SnapshotError::Io {
        path: path.to_path_buf(),
        source,
    };
    let f = storage.open(path, false).map_err(io)?;
    let bytes = read_all(&*f).map_err(io)?;
    decode_snapshot(&bytes)
}

/// Replays the batches of `[from, end)` into `state`. With `reindex` (the
/// state at `from` is known: a snapshot's), an ABORT marker that ends a
/// transaction gets its `.txnindex` entry back if a crash lost it.
///
/// The scan goes on to `end`: a marker left unread would leave its
/// transaction open, and the partition's last stable offset stuck there.
fn scan(log: &Log, state: &mut PartitionProducers, from: i64, end: i64, reindex: bool) {
    let mut offset = from.max(log.log_start_offset());
    while offset < end {
        let Ok(read) = log.read(offset, 1 << 20, end, true) else {
            tracing::warn!(partition = %log.topic_partition(), offset, "producer state rebuilt up to an unreadable offset");
            break;
        };
        let before = offset;
        for region in read.regions {
            let Ok(data) = region.read_to_vec() else {
                return;
            };
            let mut pos = 0;
            while let Some(rest) = data.get(pos..)
                && let Ok(h) = BatchHeader::parse(rest)
            {
                if pos + h.total_size() > data.len() {
                    break;
                }
                if h.producer_id >= 0
                    && h.last_offset() >= from
                    && let Some(b) = data
                        .get(pos..pos + h.total_size())
                        .and_then(AppliedBatch::parse)
                    && let Some(done) = state.apply(&b)
                    && reindex
                    && b.marker == Some(false)
                {
                    let txn = weir_storage::AbortedTxn {
                        producer_id: done.producer_id,
                        first_offset: done.first_offset,
                        last_offset: b.base_offset,
                        last_stable_offset: done.next_open_offset.unwrap_or(b.base_offset + 1),
                    };
                    if let Err(e) = log.append_aborted_txn(txn) {
                        tracing::warn!(partition = %log.topic_partition(), ?txn, error = %e, "cannot index an aborted transaction again");
                    }
                }
                offset = offset.max(h.last_offset() + 1);
                pos += h.total_size();
            }
        }
        if offset <= before {
            break;
        }
    }
}

/// Loads a partition's producer state: newest usable snapshot, then the log
/// after it; or the log's tail.
pub fn rebuild(log: &Log) -> PartitionProducers {
    let end = log.log_end_offset();
    let storage = log.storage();
    for (offset, path) in list_snapshots(&*storage, &log.dir()).into_iter().rev() {
        if offset > end {
            continue; // the log was truncated below it
        }
        match read_snapshot(&*storage, &path) {
            Ok(mut state) => {
                scan(log, &mut state, offset, end, true);
                state.debug_check();
                return state;
            }
            Err(e) => tracing::warn!(path = %path.display(), "ignoring producer snapshot: {e}"),
        }
    }
    // The state before the window is unknown: a transaction that ends in
    // it may have begun before it, so nothing is indexed again.
    let mut state = PartitionProducers::default();
    scan(log, &mut state, window_start(log, end), end, false);
    state.debug_check();
    state
}

/// Where a rebuild without a snapshot starts: the last
/// [`REBUILD_SCAN_OFFSETS`] offsets, or the segments holding the last
/// [`REBUILD_SCAN_BYTES`] bytes if they start later.
fn window_start(log: &Log, end: i64) -> i64 {
    let mut bytes = 0u64;
    let mut start = end;
    for s in log.segment_summaries().iter().rev() {
        if bytes >= REBUILD_SCAN_BYTES as u64 {
            break;
        }
        start = s.base_offset;
        bytes += s.size;
    }
    start.max(end - REBUILD_SCAN_OFFSETS)
}

/// Fuzz entry point (cargo-fuzz target `producer_snapshot` and the smoke
/// test): decodes `data` as a producer snapshot, and again with its CRC
/// fixed so the body is exercised; whatever decodes must encode and decode
/// back to the same state.
#[doc(hidden)]
#[allow(clippy::expect_used)] // a fuzz target reports a broken property by panicking
pub fn fuzz_decode(data: &[u8]) {
    let check = |bytes: &[u8]| {
        if let Ok(state) = decode_snapshot(bytes) {
            let encoded = encode_snapshot(&state);
            let again = decode_snapshot(&encoded).expect("an encoded snapshot decodes");
            assert_eq!(again.entries(), state.entries(), "snapshot round trip");
            assert_eq!(encode_snapshot(&again), encoded);
        }
    };
    check(data);
    let mut fixed = data.to_vec();
    // bytes 2..6 hold the CRC of the rest
    if let Some((crc, body)) = fixed
        .get_mut(2..)
        .and_then(|f| f.split_first_chunk_mut::<4>())
    {
        *crc = crc32c::crc32c(body).to_be_bytes();
        check(&fixed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use weir_storage::backend::{CrashMode, FaultyStorage, FileStorage, MemStorage};

    fn meta(first_seq: i32, last_seq: i32, first_offset: i64) -> BatchMeta {
        BatchMeta {
            first_seq,
            last_seq,
            first_offset,
            last_offset: first_offset + (last_seq - first_seq) as i64,
            timestamp: 1234,
        }
    }

    #[test]
    fn snapshot_round_trip_keeps_the_dedup_window() {
        let mut s = PartitionProducers::default();
        for i in 0..7 {
            s.record(42, 3, meta(i * 2, i * 2 + 1, 100 + i as i64 * 2));
        }
        s.record(7, 0, meta(0, 0, 500));
        let bytes = encode_snapshot(&s);
        assert_eq!(bytes.len(), 2 + 4 + 4 + 6 * ENTRY_LEN);
        let back = decode_snapshot(&bytes).unwrap();
        assert_eq!(back.get(42), s.get(42));
        assert_eq!(back.get(7), s.get(7));
    }

    /// An open transaction, a producer known by its marker alone and the
    /// coordinator epochs come back from a snapshot; the bytes of an entry
    /// with an open transaction are Kafka's (CurrentTxnFirstOffset last).
    #[test]
    fn snapshot_round_trip_keeps_open_transactions() {
        let mut s = PartitionProducers::default();
        s.record_data(42, 3, Some(meta(0, 1, 100)), true);
        s.record_data(42, 3, Some(meta(2, 2, 102)), true);
        s.record_data(7, 1, Some(meta(0, 0, 101)), true);
        s.end_txn(7, 2, 9, 104, 555); // ends 7's transaction in a newer epoch
        s.record_data(8, 0, Some(meta(0, 0, 103)), false);
        assert_eq!(s.first_open_offset(), Some(100));
        let bytes = encode_snapshot(&s);
        let back = decode_snapshot(&bytes).unwrap();
        assert_eq!(back.entries(), s.entries());
        assert_eq!(back.first_open_offset(), Some(100));
        assert_eq!(back.open_txns().collect::<Vec<_>>(), vec![(100, 42)]);
        let seven = back.get(7).unwrap();
        assert_eq!(
            (seven.epoch, seven.coordinator_epoch, seven.batches.len()),
            (2, 9, 0)
        );
        // Producer 7's entry (ids in order: 7, 8, 42): no batch.
        let e7 = &bytes[10..10 + ENTRY_LEN];
        assert_eq!(&e7[..8], &7i64.to_be_bytes());
        assert_eq!(&e7[10..14], &(-1i32).to_be_bytes(), "last sequence");
        assert_eq!(&e7[14..22], &(-1i64).to_be_bytes(), "last offset");
        assert_eq!(&e7[22..26], &0i32.to_be_bytes(), "offset delta");
        assert_eq!(&e7[26..34], &555i64.to_be_bytes(), "timestamp");
        assert_eq!(&e7[34..38], &9i32.to_be_bytes(), "coordinator epoch");
        assert_eq!(&e7[38..46], &(-1i64).to_be_bytes(), "no open transaction");
        // Producer 42's last entry: its open transaction's first offset.
        let last = &bytes[bytes.len() - ENTRY_LEN..];
        assert_eq!(&last[..8], &42i64.to_be_bytes());
        assert_eq!(&last[38..46], &100i64.to_be_bytes());
        // Ending it after the round trip works as before it.
        let mut back = back;
        let done = back.end_txn(42, 3, 0, 105, 0).unwrap();
        assert_eq!((done.first_offset, done.next_open_offset), (100, None));
    }

    #[test]
    fn corrupt_or_truncated_snapshots_are_rejected() {
        let mut s = PartitionProducers::default();
        s.record(1, 0, meta(0, 4, 0));
        let bytes = encode_snapshot(&s);
        for cut in 0..bytes.len() {
            assert!(decode_snapshot(&bytes[..cut]).is_err(), "cut {cut}");
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(decode_snapshot(&b).is_err(), "flip {i}");
        }
        // a huge declared count is refused without allocating
        let mut b = vec![0, 1, 0, 0, 0, 0];
        let body = i32::MAX.to_be_bytes();
        b[2..6].copy_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        b.extend_from_slice(&body);
        assert!(matches!(decode_snapshot(&b), Err(SnapshotError::Truncated)));
    }

    #[test]
    fn snapshot_files_replace_older_ones() {
        let d = tempfile::tempdir().unwrap();
        let mut s = PartitionProducers::default();
        s.record(1, 0, meta(0, 0, 0));
        write_snapshot(&FileStorage, d.path(), 1, &s).unwrap();
        s.record(1, 0, meta(1, 1, 1));
        write_snapshot(&FileStorage, d.path(), 2, &s).unwrap();
        let files = list_snapshots(&FileStorage, d.path());
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].0, 2);
        assert!(files[0].1.ends_with("00000000000000000002.snapshot"));
        assert_eq!(
            read_snapshot(&FileStorage, &files[0].1).unwrap().get(1),
            s.get(1)
        );
    }

    /// A log of transactional batches and markers of three producers.
    fn txn_log(dir: &Path) -> std::sync::Arc<Log> {
        use weir_protocol::records::{Compression, EndTxnMarker, RecordBatchBuilder};
        let mgr = weir_storage::LogManager::open(
            weir_storage::LogManagerConfig::new(vec![dir.to_path_buf()]),
            0,
        )
        .unwrap();
        let tp = weir_storage::TopicPartition::new("t", 0);
        mgr.prepare_logs("t", [1; 16], 0..1, weir_storage::LogConfig::default())
            .unwrap()
            .commit();
        let log = mgr.get(&tp).unwrap();
        let data = |pid: i64, seq: i32| {
            let mut b = RecordBatchBuilder::new(Compression::None)
                .producer(pid, 0, seq)
                .transactional(true);
            b.push(1, None, Some(bytes::Bytes::from_static(b"v")), vec![])
                .unwrap();
            b.build().unwrap().as_bytes().to_vec()
        };
        let end = |pid: i64, commit: bool| {
            let m = if commit {
                EndTxnMarker::commit(0)
            } else {
                EndTxnMarker::abort(0)
            };
            RecordBatchBuilder::end_txn_marker_batch(0, -1, pid, 0, 1, &m)
                .unwrap()
                .as_bytes()
                .to_vec()
        };
        // 0: 1 opens; 1: 2 opens; 2: 1 again; 3: 2 aborts; 4: 3 opens;
        // 5: 1 commits. Open at the end: producer 3 from offset 4.
        for mut b in [
            data(1, 0),
            data(2, 0),
            data(1, 1),
            end(2, false),
            data(3, 0),
            end(1, true),
        ] {
            log.append(&mut b, 1).unwrap();
        }
        log
    }

    /// Rebuilt from the log's tail, the state knows the open transaction
    /// and the sequences; from a snapshot in the middle, the same, and an
    /// ABORT entry a crash lost is indexed again (once).
    #[test]
    fn rebuild_from_the_log_reconstructs_transactions() {
        let dir = tempfile::tempdir().unwrap();
        let log = txn_log(dir.path());
        let state = rebuild(&log);
        assert_eq!(state.open_txns().collect::<Vec<_>>(), vec![(4, 3)]);
        assert_eq!(state.get(1).unwrap().batches.len(), 2);
        assert_eq!(state.get(2).unwrap().current_txn_first_offset, None);
        // No snapshot: the window's state at its start is unknown, and the
        // ABORT at 3 (not indexed by these plain appends) stays unindexed.
        assert!(log.all_aborted_txns().is_empty());

        // A snapshot at offset 1 (producer 1 open from 0), then a rebuild.
        let mut at1 = PartitionProducers::default();
        at1.record_data(1, 0, Some(meta(0, 0, 0)), true);
        write_snapshot(&FileStorage, &log.dir(), 1, &at1).unwrap();
        let state = rebuild(&log);
        assert_eq!(state.open_txns().collect::<Vec<_>>(), vec![(4, 3)]);
        let want = weir_storage::AbortedTxn {
            producer_id: 2,
            first_offset: 1,
            last_offset: 3,
            last_stable_offset: 0,
        };
        assert_eq!(log.all_aborted_txns(), vec![want]);
        rebuild(&log);
        assert_eq!(log.all_aborted_txns(), vec![want], "indexed once");
    }

    /// The newest snapshot on disk after a crash, decoded.
    fn newest_after_crash(mem: &MemStorage, mode: CrashMode, dir: &Path) -> PartitionProducers {
        let after = mem.crash(mode);
        let (_, path) = list_snapshots(&after, dir)
            .pop()
            .expect("a snapshot survives");
        read_snapshot(&after, &path).expect("the surviving snapshot is complete")
    }

    #[test]
    fn a_crash_leaves_the_old_or_the_new_snapshot_never_a_torn_one() {
        let dir = Path::new("/data/t-0");
        let mut old = PartitionProducers::default();
        old.record(1, 0, meta(0, 0, 0));
        let mut new = old.clone();
        for i in 1..40 {
            new.record(1, 0, meta(i, i, i as i64));
            new.record(2 + i as i64, 0, meta(0, 3, 10 * i as i64));
        }
        let modes = [CrashMode::LoseUnsynced, CrashMode::KeepWritten]
            .into_iter()
            .chain((0..16).map(|seed| CrashMode::Torn { seed }));
        for mode in modes {
            // completed: the new state survives
            let mem = MemStorage::new();
            mem.create_dir_all(dir).unwrap();
            write_snapshot(&mem, dir, 1, &old).unwrap();
            write_snapshot(&mem, dir, 40, &new).unwrap();
            assert_eq!(
                newest_after_crash(&mem, mode, dir).entries(),
                new.entries(),
                "{mode:?}"
            );

            // stopped at each step (write, sync, rename): the old or the new
            for stop in 0..3 {
                let mem = MemStorage::new();
                mem.create_dir_all(dir).unwrap();
                write_snapshot(&mem, dir, 1, &old).unwrap();
                let faulty = FaultyStorage::new(mem.clone());
                faulty.faults().halt_on_fault.store(true, Ordering::SeqCst);
                match stop {
                    0 => faulty.fail_writes_after(0),
                    1 => faulty.set_fail_sync(true),
                    _ => faulty.faults().fail_dir_ops.store(true, Ordering::SeqCst),
                }
                assert!(write_snapshot(&faulty, dir, 40, &new).is_err());
                let got = newest_after_crash(&mem, mode, dir);
                assert!(
                    got.entries() == old.entries() || got.entries() == new.entries(),
                    "{mode:?}, stop {stop}"
                );
            }
        }
    }
}
