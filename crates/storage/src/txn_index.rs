//! The aborted-transaction index (`<base offset>.txnindex`), one per
//! segment, in Kafka's byte format (`TransactionIndex.java`): a run of
//! 34-byte big-endian entries, one per aborted transaction whose ABORT
//! marker lies in the segment, in marker order:
//!
//! ```text
//! version            int16  0
//! producer_id        int64
//! first_offset       int64  the transaction's first offset in the partition
//! last_offset        int64  the offset of its ABORT marker (in this segment)
//! last_stable_offset int64  the partition's LSO once the marker is written
//! ```
//!
//! A read_committed fetch is answered with the entries that overlap the
//! fetched range ([`collect`], Kafka's `collectAbortedTxns`); a consumer
//! skips a producer's transactional batches from its entry's first offset
//! to its ABORT marker. `last_stable_offset` lets that search stop: once an
//! entry's LSO lies at or past the range's end, no transaction that started
//! in the range ends later.
//!
//! The file exists only once a segment has an entry (Kafka creates it
//! lazily too). Entries are also kept in memory: an index holds one entry
//! per aborted transaction, few next to the records they end.
//!
//! Invariants of a [`TxnIndex`]: entries are in strictly increasing
//! `last_offset` order, each `last_offset` lies in the segment (≥ its base
//! offset), `first_offset <= last_offset`; the file holds exactly the
//! entries in memory (after every successful call).
//!
//! ```
//! use weir_storage::txn_index::{AbortedTxn, collect, parse};
//! let txn = AbortedTxn { producer_id: 7, first_offset: 3, last_offset: 9, last_stable_offset: 10 };
//! let bytes = txn.to_bytes();
//! assert_eq!(bytes.len(), 34);
//! assert_eq!(parse(&bytes, 0), (vec![txn], None));
//! let mut found = Vec::new();
//! // A fetch of [0, 5) overlaps it; its LSO 10 ends the search.
//! assert!(collect(&[txn], 0, 5, &mut found));
//! assert_eq!(found, vec![txn]);
//! ```

use crate::backend::{Storage, StorageFile};
use crate::error::{IoContext, StorageError};
use crate::log::Log;
use crate::segment::read_all;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Bytes of one entry.
pub const ENTRY_BYTES: usize = 34;
/// The entry version written (Kafka's `AbortedTxn.CURRENT_VERSION`).
pub const ENTRY_VERSION: i16 = 0;

/// One aborted transaction of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AbortedTxn {
    pub producer_id: i64,
    /// The offset of the transaction's first batch in the partition.
    pub first_offset: i64,
    /// The offset of its ABORT marker.
    pub last_offset: i64,
    /// The partition's last stable offset once the marker is written: the
    /// first offset of the earliest transaction of another producer still
    /// open then, else `last_offset + 1` (Kafka's rule).
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    /// The entry's 34 bytes, version 0.
    pub fn to_bytes(&self) -> [u8; ENTRY_BYTES] {
        let mut b = [0u8; ENTRY_BYTES];
        b[0..2].copy_from_slice(&ENTRY_VERSION.to_be_bytes());
        b[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        b[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        b[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        b[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        b
    }

    /// Reads one entry: (version, entry).
    pub fn from_bytes(b: &[u8; ENTRY_BYTES]) -> (i16, AbortedTxn) {
        let i16_at = |at: usize| i16::from_be_bytes([b[at], b[at + 1]]);
        let i64_at = |at: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[at..at + 8]);
            i64::from_be_bytes(x)
        };
        (
            i16_at(0),
            AbortedTxn {
                producer_id: i64_at(2),
                first_offset: i64_at(10),
                last_offset: i64_at(18),
                last_stable_offset: i64_at(26),
            },
        )
    }
}

/// Why `entry` cannot follow `prev` in the index of a segment at
/// `base_offset`.
fn check(prev: Option<&AbortedTxn>, entry: &AbortedTxn, base_offset: i64) -> Option<String> {
    if entry.producer_id < 0 {
        return Some(format!("negative producer id {}", entry.producer_id));
    }
    if entry.last_offset < base_offset {
        return Some(format!(
            "last offset {} is below the segment's base offset {base_offset}",
            entry.last_offset
        ));
    }
    if entry.first_offset < 0 || entry.first_offset > entry.last_offset {
        return Some(format!(
            "first offset {} is not within [0, last offset {}]",
            entry.first_offset, entry.last_offset
        ));
    }
    match prev {
        Some(p) if p.last_offset >= entry.last_offset => Some(format!(
            "last offset {} does not follow the previous entry's {}",
            entry.last_offset, p.last_offset
        )),
        _ => None,
    }
}

/// Parses a `.txnindex` file of the segment at `base_offset`: the entries
/// of its valid prefix and, when the file does not end there, why (a torn
/// last entry, an unknown version, an entry out of order or outside the
/// segment). Never fails: the caller decides what damage means.
pub fn parse(bytes: &[u8], base_offset: i64) -> (Vec<AbortedTxn>, Option<String>) {
    let mut entries: Vec<AbortedTxn> = Vec::with_capacity(bytes.len() / ENTRY_BYTES);
    for (i, chunk) in bytes.chunks(ENTRY_BYTES).enumerate() {
        let Ok(raw) = <&[u8; ENTRY_BYTES]>::try_from(chunk) else {
            let reason = format!(
                "{} trailing bytes at position {}, less than an entry",
                chunk.len(),
                i * ENTRY_BYTES
            );
            return (entries, Some(reason));
        };
        let (version, entry) = AbortedTxn::from_bytes(raw);
        let bad = if version != ENTRY_VERSION {
            Some(format!("unknown entry version {version}"))
        } else {
            check(entries.last(), &entry, base_offset)
        };
        if let Some(reason) = bad {
            return (
                entries,
                Some(format!("entry at position {}: {reason}", i * ENTRY_BYTES)),
            );
        }
        entries.push(entry);
    }
    (entries, None)
}

/// Kafka's `collectAbortedTxns` over the entries of one index: appends to
/// `out` those overlapping the fetch range `[fetch_offset, upper_bound)`
/// (marker at or after the fetch offset, first offset before the bound).
/// Returns whether the search is complete: an entry's last stable offset
/// reached the bound, so no later segment holds a transaction that started
/// in the range.
pub fn collect(
    entries: &[AbortedTxn],
    fetch_offset: i64,
    upper_bound: i64,
    out: &mut Vec<AbortedTxn>,
) -> bool {
    for e in entries {
        if e.last_offset >= fetch_offset && e.first_offset < upper_bound {
            out.push(*e);
        }
        if e.last_stable_offset >= upper_bound {
            return true;
        }
    }
    false
}

/// The aborted-transaction index of one segment: its entries in memory and
/// its file, created with the first entry.
#[derive(Debug)]
pub(crate) struct TxnIndex {
    path: PathBuf,
    base_offset: i64,
    file: Option<Arc<dyn StorageFile>>,
    entries: Vec<AbortedTxn>,
    /// Written since the last sync (shared with a sync running without
    /// the log's lock, which sets it again when it fails).
    dirty: Arc<AtomicBool>,
}

impl TxnIndex {
    /// An index without entries and without a file.
    pub fn empty(path: PathBuf, base_offset: i64) -> TxnIndex {
        TxnIndex {
            path,
            base_offset,
            file: None,
            entries: Vec::new(),
            dirty: Arc::default(),
        }
    }

    /// Opens the index at `path` when its file exists: its valid entries,
    /// and why the file does not end with them, if it does not (the file is
    /// left as it is; see [`TxnIndex::replace`]).
    pub fn open(
        storage: &dyn Storage,
        path: PathBuf,
        base_offset: i64,
    ) -> Result<(TxnIndex, Option<String>), StorageError> {
        let mut index = TxnIndex::empty(path, base_offset);
        if !storage.exists(&index.path) {
            return Ok((index, None));
        }
        let file = storage.open(&index.path, false).at(&index.path)?;
        let bytes = read_all(&*file).at(&index.path)?;
        let (entries, damage) = parse(&bytes, base_offset);
        index.file = Some(file);
        index.entries = entries;
        Ok((index, damage))
    }

    pub fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn file_or_create(
        &mut self,
        storage: &dyn Storage,
    ) -> Result<Arc<dyn StorageFile>, StorageError> {
        if let Some(f) = &self.file {
            return Ok(f.clone());
        }
        let f = storage.open(&self.path, true).at(&self.path)?;
        f.set_len(0).at(&self.path)?;
        // The new name must survive a crash once entries are synced.
        if let Some(dir) = self.path.parent() {
            storage.sync_dir(dir).at(dir)?;
        }
        self.file = Some(f.clone());
        Ok(f)
    }

    /// Why `entry` cannot be appended, if it cannot.
    pub fn refuse(&self, entry: &AbortedTxn) -> Option<String> {
        check(self.entries.last(), entry, self.base_offset)
    }

    /// Appends `entry` (its last offset must follow every entry's).
    pub fn append(&mut self, storage: &dyn Storage, entry: AbortedTxn) -> Result<(), StorageError> {
        if let Some(reason) = self.refuse(&entry) {
            return Err(StorageError::InvalidArgument(format!(
                "aborted transaction {entry:?} in {}: {reason}",
                self.path.display()
            )));
        }
        let f = self.file_or_create(storage)?;
        let at = (self.entries.len() * ENTRY_BYTES) as u64;
        self.dirty.store(true, Ordering::Release);
        f.write_all_at(&entry.to_bytes(), at).at(&self.path)?;
        self.entries.push(entry);
        Ok(())
    }

    /// Inserts `entry` at its place by last offset, unless an entry with
    /// that last offset exists. Returns whether it was added. Entries after
    /// it are written again (a rare path: re-adding an entry a crash lost).
    pub fn insert(
        &mut self,
        storage: &dyn Storage,
        entry: AbortedTxn,
    ) -> Result<bool, StorageError> {
        let at = self
            .entries
            .partition_point(|e| e.last_offset < entry.last_offset);
        if self
            .entries
            .get(at)
            .is_some_and(|e| e.last_offset == entry.last_offset)
        {
            return Ok(false);
        }
        let prev = at.checked_sub(1).and_then(|i| self.entries.get(i));
        if let Some(reason) = check(prev, &entry, self.base_offset) {
            return Err(StorageError::InvalidArgument(format!(
                "aborted transaction {entry:?} in {}: {reason}",
                self.path.display()
            )));
        }
        let f = self.file_or_create(storage)?;
        self.entries.insert(at, entry);
        let tail: Vec<u8> = self.entries[at..]
            .iter()
            .flat_map(|e| e.to_bytes())
            .collect();
        self.dirty.store(true, Ordering::Release);
        f.write_all_at(&tail, (at * ENTRY_BYTES) as u64)
            .at(&self.path)?;
        Ok(true)
    }

    /// Removes the entries whose marker is at or after `offset` (Kafka's
    /// `truncateTo`).
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), StorageError> {
        let keep = self.entries.partition_point(|e| e.last_offset < offset);
        if keep == self.entries.len() {
            return Ok(());
        }
        self.entries.truncate(keep);
        if let Some(f) = &self.file {
            self.dirty.store(true, Ordering::Release);
            f.set_len((keep * ENTRY_BYTES) as u64).at(&self.path)?;
        }
        Ok(())
    }

    /// Keeps only `kept`, a subsequence of the entries. Dropping a tail
    /// only shortens the file (so it works on a full disk); anything else
    /// writes the kept entries again.
    pub fn retain(&mut self, kept: Vec<AbortedTxn>) -> Result<(), StorageError> {
        if self.entries.starts_with(&kept) {
            let cut = self
                .entries
                .get(kept.len())
                .map_or(i64::MAX, |e| e.last_offset);
            return self.truncate_to(cut);
        }
        let Some(f) = self.file.clone() else {
            // Entries come from the file or from appends, which create it.
            return Err(StorageError::InvalidArgument(format!(
                "{} has entries but no file",
                self.path.display()
            )));
        };
        self.write_all(&f, kept)
    }

    fn write_all(
        &mut self,
        f: &Arc<dyn StorageFile>,
        entries: Vec<AbortedTxn>,
    ) -> Result<(), StorageError> {
        let bytes: Vec<u8> = entries.iter().flat_map(|e| e.to_bytes()).collect();
        self.dirty.store(true, Ordering::Release);
        f.write_all_at(&bytes, 0).at(&self.path)?;
        f.set_len(bytes.len() as u64).at(&self.path)?;
        self.entries = entries;
        Ok(())
    }

    /// Makes the file hold exactly `entries` (which must be a valid index:
    /// sorted, inside the segment). No file is created for none.
    pub fn replace(
        &mut self,
        storage: &dyn Storage,
        entries: Vec<AbortedTxn>,
    ) -> Result<(), StorageError> {
        let mut prev = None;
        for e in &entries {
            if let Some(reason) = check(prev, e, self.base_offset) {
                return Err(StorageError::InvalidArgument(format!(
                    "aborted transaction {e:?} in {}: {reason}",
                    self.path.display()
                )));
            }
            prev = Some(e);
        }
        if entries.is_empty() && self.file.is_none() {
            self.entries.clear();
            return Ok(());
        }
        let f = self.file_or_create(storage)?;
        self.write_all(&f, entries)
    }

    /// The file and its written-since-sync flag, when it has unsynced
    /// writes, for a sync made without the log's lock: the flag is cleared
    /// now; [`sync_taken`] sets it again if the sync fails.
    pub fn take_unsynced(&self) -> Option<UnsyncedTxnIndex> {
        let file = self.file.clone()?;
        self.dirty
            .swap(false, Ordering::AcqRel)
            .then(|| UnsyncedTxnIndex {
                file,
                dirty: self.dirty.clone(),
                path: self.path.clone(),
            })
    }

    /// Syncs the file, if there is one.
    pub fn sync(&self) -> Result<(), StorageError> {
        if let Some(f) = &self.file {
            f.sync().at(&self.path)?;
            self.dirty.store(false, Ordering::Release);
        }
        Ok(())
    }
}

/// An index file with writes not yet synced (see
/// [`TxnIndex::take_unsynced`]).
#[derive(Debug)]
pub(crate) struct UnsyncedTxnIndex {
    file: Arc<dyn StorageFile>,
    dirty: Arc<AtomicBool>,
    path: PathBuf,
}

/// Syncs indexes taken with [`TxnIndex::take_unsynced`]; those that fail
/// are marked unsynced again. Returns the first error.
pub(crate) fn sync_taken(taken: &[UnsyncedTxnIndex]) -> Result<(), StorageError> {
    let mut first = None;
    for t in taken {
        if let Err(e) = t.file.sync() {
            t.dirty.store(true, Ordering::Release);
            first.get_or_insert(StorageError::Io {
                path: t.path.clone(),
                source: e,
            });
        }
    }
    first.map_or(Ok(()), Err)
}

/// Fuzz entry point (cargo-fuzz target `txn_index` and the smoke test):
/// parses `data` after its first 8 bytes (the segment's base offset); the
/// entries kept must satisfy the index's invariants, be exactly the
/// leading bytes of the input, and parse back without damage.
#[doc(hidden)]
#[allow(clippy::expect_used, clippy::indexing_slicing)] // a fuzz target reports a broken property by panicking
pub fn fuzz_parse(data: &[u8]) {
    let Some((base, body)) = data.split_first_chunk::<8>() else {
        return;
    };
    let base = i64::from_be_bytes(*base);
    let (entries, damage) = parse(body, base);
    let encoded: Vec<u8> = entries.iter().flat_map(|e| e.to_bytes()).collect();
    assert_eq!(
        &body[..encoded.len()],
        &encoded[..],
        "entries re-encode to the input's prefix"
    );
    assert_eq!(damage.is_none(), encoded.len() == body.len());
    assert_eq!(parse(&encoded, base), (entries.clone(), None));
    let mut prev: Option<&AbortedTxn> = None;
    for e in &entries {
        assert!(check(prev, e, base).is_none(), "{e:?} after {prev:?}");
        prev = Some(e);
    }
    let mut out = Vec::new();
    collect(&entries, base, base.saturating_add(1), &mut out);
    assert!(out.iter().all(|t| entries.contains(t)));
}

impl Log {
    /// The aborted transactions overlapping `[fetch_offset, upper_bound)`,
    /// from the segment holding `fetch_offset` on, stopping as Kafka's
    /// `collectAbortedTransactions` does (see [`collect`]). What a
    /// read_committed fetch answers with the records it returns, where
    /// `upper_bound` is the offset after the last returned batch.
    pub fn aborted_txns(&self, fetch_offset: i64, upper_bound: i64) -> Vec<AbortedTxn> {
        let g = self.lock();
        let start = g
            .segments
            .range(..=fetch_offset)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        let mut out = Vec::new();
        for seg in g.segments.range(start..).map(|(_, s)| s) {
            if collect(seg.txn_index.entries(), fetch_offset, upper_bound, &mut out) {
                break;
            }
        }
        out
    }

    /// Every entry of every segment's aborted-transaction index, oldest
    /// first (tools and tests).
    pub fn all_aborted_txns(&self) -> Vec<AbortedTxn> {
        let g = self.lock();
        g.segments
            .values()
            .flat_map(|s| s.txn_index.entries().iter().copied())
            .collect()
    }

    /// Adds `txn` to the index of the segment holding its marker, unless
    /// an entry for that marker is there: for entries a crash lost, found
    /// again by replaying the batches after a producer snapshot. Returns
    /// whether it was added. Appends index their aborts themselves
    /// ([`AbortMarker`](crate::AbortMarker)).
    pub fn append_aborted_txn(&self, txn: AbortedTxn) -> Result<bool, StorageError> {
        let mut g = self.lock();
        if txn.last_offset < g.log_start || txn.last_offset >= g.leo {
            return Err(StorageError::InvalidArgument(format!(
                "aborted transaction {txn:?} outside the log [{}, {})",
                g.log_start, g.leo
            )));
        }
        let storage = self.storage.clone();
        let Some((_, seg)) = g.segments.range_mut(..=txn.last_offset).next_back() else {
            return Ok(false);
        };
        let added = seg.txn_index.insert(&*storage, txn)?;
        if added {
            tracing::info!(tp = %self.tp, ?txn, "re-indexed an aborted transaction");
        }
        Ok(added)
    }

    /// Syncs every aborted-transaction index written since its last sync
    /// (a producer snapshot at an offset is written only once the entries
    /// below it are durable: a replay from the snapshot cannot find them
    /// again). Holds the log's lock only to list the files.
    pub fn sync_aborted_txns(&self) -> Result<(), StorageError> {
        let taken: Vec<_> = {
            let g = self.lock();
            g.segments
                .values()
                .filter_map(|s| s.txn_index.take_unsynced())
                .collect()
        };
        sync_taken(&taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::MemStorage;

    fn txn(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: lso,
        }
    }

    #[test]
    fn entry_bytes_are_kafkas() {
        let bytes = txn(0x0102, 0x0304, 0x0506, 0x0708).to_bytes();
        let mut want = vec![0, 0];
        for v in [0x0102i64, 0x0304, 0x0506, 0x0708] {
            want.extend_from_slice(&v.to_be_bytes());
        }
        assert_eq!(bytes.to_vec(), want);
    }

    #[test]
    fn parse_keeps_the_valid_prefix_and_says_why_it_stops() {
        let a = txn(1, 10, 12, 13);
        let b = txn(2, 11, 20, 21);
        let mut bytes: Vec<u8> = [a, b].iter().flat_map(|t| t.to_bytes()).collect();
        assert_eq!(parse(&bytes, 10), (vec![a, b], None));
        // A torn last entry.
        let (e, why) = parse(&bytes[..bytes.len() - 3], 10);
        assert_eq!(e, vec![a]);
        assert!(why.unwrap().contains("trailing bytes"));
        // A zeroed entry (a torn write) does not follow the previous one.
        bytes.extend_from_slice(&[0u8; ENTRY_BYTES]);
        let (e, why) = parse(&bytes, 10);
        assert_eq!(e, vec![a, b]);
        assert!(why.unwrap().contains("below the segment's base offset"));
        // Unknown version, first after last, below the segment.
        let mut v1 = a.to_bytes();
        v1[1] = 1;
        assert!(parse(&v1, 10).1.unwrap().contains("version 1"));
        assert!(parse(&txn(1, 13, 12, 13).to_bytes(), 10).1.is_some());
        assert!(parse(&a.to_bytes(), 13).1.is_some());
        let same: Vec<u8> = [a, a].iter().flat_map(|t| t.to_bytes()).collect();
        assert!(parse(&same, 10).1.unwrap().contains("does not follow"));
    }

    #[test]
    fn collect_stops_at_an_lso_past_the_range() {
        // Two interleaved aborted transactions, then one far later.
        let entries = [txn(1, 0, 5, 3), txn(2, 3, 8, 9), txn(3, 50, 60, 61)];
        let mut out = Vec::new();
        // The first entry's LSO (3) is below the bound 4: go on; the
        // second's (9) ends the search before the third.
        assert!(collect(&entries, 0, 4, &mut out));
        assert_eq!(out, entries[..2].to_vec());
        out.clear();
        // Fetching from 6: the first ended before; the third starts after.
        assert!(!collect(&entries, 6, 100, &mut out));
        assert_eq!(out, vec![entries[1], entries[2]]);
    }

    #[test]
    fn file_follows_appends_truncation_inserts_and_replacement() {
        let storage = MemStorage::new();
        storage.create_dir_all(Path::new("/d")).unwrap();
        let path = PathBuf::from("/d/00000000000000000010.txnindex");
        let (mut idx, damage) = TxnIndex::open(&storage, path.clone(), 10).unwrap();
        assert!(damage.is_none() && !storage.exists(&path));
        let on_disk = |s: &MemStorage| {
            let f = s.open(&path, false).unwrap();
            parse(&read_all(&*f).unwrap(), 10)
        };
        let (a, b, c) = (txn(1, 10, 12, 13), txn(2, 11, 20, 21), txn(3, 15, 30, 31));
        idx.append(&storage, a).unwrap();
        idx.append(&storage, c).unwrap();
        // Not after the last entry: refused.
        assert!(idx.append(&storage, b).is_err());
        assert!(idx.insert(&storage, b).unwrap());
        assert!(!idx.insert(&storage, b).unwrap(), "already there");
        assert_eq!(on_disk(&storage), (vec![a, b, c], None));
        idx.truncate_to(20).unwrap();
        assert_eq!(idx.entries(), &[a]);
        assert_eq!(on_disk(&storage), (vec![a], None));
        idx.replace(&storage, vec![b, c]).unwrap();
        assert_eq!(on_disk(&storage), (vec![b, c], None));
        let (again, damage) = TxnIndex::open(&storage, path.clone(), 10).unwrap();
        assert_eq!((again.entries(), damage), (&[b, c][..], None));
        assert!(idx.replace(&storage, vec![c, b]).is_err());
    }
}
