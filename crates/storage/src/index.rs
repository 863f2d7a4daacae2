//! Sparse offset index (`.index`) and time index (`.timeindex`): one
//! [`Index`] type, parameterised by the kind of entry it holds ([`Offsets`]
//! or [`Timestamps`]).
//!
//! On disk, exactly Kafka's layout: `.index` is a run of 8-byte big-endian
//! entries (offset − base offset as int32, position int32); `.timeindex` of
//! 12-byte entries (timestamp int64, offset − base offset int32). The file of
//! the active segment is preallocated to `segment.index.bytes` (zeros past
//! the last entry) and trimmed to its entries on roll and close.
//!
//! Preallocation is lazy when a segment becomes active again (on open, after
//! a rebuild): [`Index::preallocate`] only marks the file, and the first
//! [`Index::write_pending`] that has entries to write grows it. Opening a
//! log for reading therefore never writes to an index file, so a log dir on
//! a full disk still opens and serves reads.
//!
//! Entries are kept in memory for lookups. An append only adds to memory;
//! [`Index::write_pending`] then writes every entry not yet in the file with
//! one positional write through the [`StorageFile`] seam, so every backend
//! sees the same bytes (the real backend gets them into the page cache with
//! a positional write instead of a memory map). A rebuild writes at the end,
//! so many entries cost one write, not one each. Appends to the active
//! segment write once [`PENDING_WRITE_BATCH`] entries are waiting, and always
//! before the file matters: when the segment stops being active (`trim`, on
//! roll and close), which is before its index is synced and trusted. Until
//! then the file may lack the newest entries; that is safe because recovery
//! never trusts the index of the segment holding the recovery point or of
//! any later one (it rebuilds them from the log).

use crate::backend::StorageFile;
use std::fmt::Debug;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Entries an append lets wait in memory before writing them out.
pub const PENDING_WRITE_BATCH: usize = 64;

/// Kafka searches the last 8 KiB of an index first: caught-up readers only
/// touch those pages.
const WARM_BYTES: usize = 8192;

/// What sets one index file apart from the other: the entry's layout, what
/// lookups search by, and the order a file's entries keep.
pub trait EntryKind {
    /// An entry as held in memory: its two fields, in file order.
    type Entry: Copy + Debug + PartialEq;
    /// Bytes of one entry on disk.
    const ENTRY_BYTES: usize;
    /// Appends the entry's `ENTRY_BYTES` big-endian bytes to `out`.
    fn encode(entry: Self::Entry, out: &mut Vec<u8>);
    /// Reads an entry from its bytes; `None` when they are too short.
    fn decode(bytes: &[u8]) -> Option<Self::Entry>;
    /// The entry's offset minus the segment's base offset.
    fn relative_offset(entry: &Self::Entry) -> i32;
    /// What lookups search by; increases along the index.
    fn key(entry: &Self::Entry, base_offset: i64) -> i64;
    /// Why `entry` cannot stand in a file after `prev` (`None`: it is the
    /// first). Only asked of entries before the zero padding.
    fn check(prev: Option<&Self::Entry>, entry: &Self::Entry) -> Result<(), &'static str>;
}

/// `.index` entries: (relative offset, position of a batch start). Both
/// strictly increase.
#[derive(Debug)]
pub enum Offsets {}

impl Offsets {
    fn increases(prev: &(i32, i32), next: &(i32, i32)) -> bool {
        next.0 > prev.0 && next.1 > prev.1
    }
}

impl EntryKind for Offsets {
    type Entry = (i32, i32);
    const ENTRY_BYTES: usize = 8;

    fn encode((rel, pos): (i32, i32), out: &mut Vec<u8>) {
        out.extend_from_slice(&rel.to_be_bytes());
        out.extend_from_slice(&pos.to_be_bytes());
    }
    fn decode(bytes: &[u8]) -> Option<(i32, i32)> {
        let (rel, rest) = bytes.split_first_chunk()?;
        let pos = rest.first_chunk()?;
        Some((i32::from_be_bytes(*rel), i32::from_be_bytes(*pos)))
    }
    fn relative_offset(entry: &(i32, i32)) -> i32 {
        entry.0
    }
    fn key(entry: &(i32, i32), base_offset: i64) -> i64 {
        base_offset + i64::from(entry.0)
    }
    fn check(prev: Option<&(i32, i32)>, &(rel, pos): &(i32, i32)) -> Result<(), &'static str> {
        // The first batch of a segment is never indexed, so (0, 0) is only
        // ever padding, and padding is all zeros to the end.
        if (rel, pos) == (0, 0) {
            Err("is zero padding followed by non-zero bytes")
        } else if rel < 0 || pos < 0 {
            Err("is negative")
        } else if prev.is_some_and(|p| !Self::increases(p, &(rel, pos))) {
            Err("does not increase")
        } else {
            Ok(())
        }
    }
}

/// `.timeindex` entries: (timestamp, relative offset). Timestamps strictly
/// increase, offsets never decrease.
#[derive(Debug)]
pub enum Timestamps {}

impl EntryKind for Timestamps {
    type Entry = (i64, i32);
    const ENTRY_BYTES: usize = 12;

    fn encode((ts, rel): (i64, i32), out: &mut Vec<u8>) {
        out.extend_from_slice(&ts.to_be_bytes());
        out.extend_from_slice(&rel.to_be_bytes());
    }
    fn decode(bytes: &[u8]) -> Option<(i64, i32)> {
        let (ts, rest) = bytes.split_first_chunk()?;
        let rel = rest.first_chunk()?;
        Some((i64::from_be_bytes(*ts), i32::from_be_bytes(*rel)))
    }
    fn relative_offset(entry: &(i64, i32)) -> i32 {
        entry.1
    }
    fn key(entry: &(i64, i32), _base_offset: i64) -> i64 {
        entry.0
    }
    fn check(prev: Option<&(i64, i32)>, &(ts, rel): &(i64, i32)) -> Result<(), &'static str> {
        if rel < 0 {
            Err("has a negative offset")
        } else if prev.is_some_and(|&(lt, lr)| ts <= lt || rel < lr) {
            Err("does not increase")
        } else {
            Ok(())
        }
    }
}

/// A sparse map from offsets to file positions of batch starts.
pub type OffsetIndex = Index<Offsets>;
/// A sparse map from timestamps to offsets.
pub type TimeIndex = Index<Timestamps>;

/// Index of the largest entry whose key is ≤ `target`, searching the warm tail
/// section first. `None` when every key is greater (or there are none).
/// Keys must not decrease.
fn floor_slot<T>(
    entries: &[T],
    entry_size: usize,
    target: i64,
    key: impl Fn(&T) -> i64,
) -> Option<usize> {
    let first_warm = entries
        .len()
        .checked_sub(1)?
        .saturating_sub(WARM_BYTES / entry_size);
    let (start, section) = match entries.get(first_warm..) {
        Some(warm) if warm.first().is_some_and(|e| key(e) < target) => (first_warm, warm),
        _ => (0, entries.get(..=first_warm)?),
    };
    let at_or_below = section.partition_point(|e| key(e) <= target);
    at_or_below.checked_sub(1).map(|i| start + i)
}

/// One index file and its entries. Always true: the entries keep their
/// kind's order ([`EntryKind::check`]); `entries[..written]` are in the file
/// at their slots; `written <= entries.len()`.
#[derive(Debug)]
pub struct Index<K: EntryKind> {
    file: Arc<dyn StorageFile>,
    base_offset: i64,
    entries: Vec<K::Entry>,
    /// `entries[..written]` are in the file; the rest await `write_pending`.
    written: usize,
    max_entries: usize,
    /// The file is to be grown to `max_entries` entries before the next
    /// write (set by `preallocate`, done by `write_pending`). Atomic only
    /// because `preallocate` takes `&self`; the log's lock orders access.
    grow_before_write: AtomicBool,
}

impl<K: EntryKind> Index<K> {
    /// A new, empty index in `file`, preallocated to `max_bytes`.
    pub fn create(
        file: Arc<dyn StorageFile>,
        base_offset: i64,
        max_bytes: u32,
    ) -> io::Result<Self> {
        let max_entries = max_bytes as usize / K::ENTRY_BYTES;
        file.set_len(Self::bytes(max_entries))?;
        Ok(Index {
            file,
            base_offset,
            entries: Vec::new(),
            written: 0,
            max_entries,
            grow_before_write: AtomicBool::new(false),
        })
    }

    /// Wraps already-parsed entries (see [`parse`]).
    pub fn from_entries(
        file: Arc<dyn StorageFile>,
        base_offset: i64,
        entries: Vec<K::Entry>,
        max_bytes: u32,
    ) -> Self {
        let max_entries = (max_bytes as usize / K::ENTRY_BYTES).max(entries.len());
        Index {
            file,
            base_offset,
            written: entries.len(),
            entries,
            max_entries,
            grow_before_write: AtomicBool::new(false),
        }
    }

    /// File bytes taken by `entries` entries.
    fn bytes(entries: usize) -> u64 {
        (entries * K::ENTRY_BYTES) as u64
    }

    /// `offset` relative to the segment's base offset.
    fn relative(&self, offset: i64) -> i32 {
        (offset - self.base_offset) as i32
    }

    pub fn entries(&self) -> &[K::Entry] {
        &self.entries
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// Writes the entries appended since the last call, in one write (after
    /// a preallocation left pending by [`Index::preallocate`]).
    pub fn write_pending(&mut self) -> io::Result<()> {
        let pending = self.entries.get(self.written..).unwrap_or_default();
        if pending.is_empty() {
            return Ok(());
        }
        if self.grow_before_write.load(Ordering::Relaxed) {
            grow_to(&*self.file, Self::bytes(self.max_entries))?;
            self.grow_before_write.store(false, Ordering::Relaxed);
        }
        let mut buf = Vec::with_capacity(pending.len() * K::ENTRY_BYTES);
        for &entry in pending {
            K::encode(entry, &mut buf);
        }
        self.file.write_all_at(&buf, Self::bytes(self.written))?;
        self.written = self.entries.len();
        Ok(())
    }

    /// Whether every entry is in the file.
    pub fn is_written(&self) -> bool {
        self.written == self.entries.len()
    }

    /// Entries not yet in the file.
    pub fn pending(&self) -> usize {
        debug_assert!(self.written <= self.entries.len());
        self.entries.len() - self.written
    }

    /// The largest entry whose key is ≤ `target`.
    fn floor(&self, target: i64) -> Option<&K::Entry> {
        let slot = floor_slot(&self.entries, K::ENTRY_BYTES, target, |e| {
            K::key(e, self.base_offset)
        })?;
        self.entries.get(slot)
    }

    /// Removes the entries for offsets ≥ `offset` (zeroing them in the file).
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let keep = self
            .entries
            .partition_point(|e| self.base_offset + i64::from(K::relative_offset(e)) < offset);
        self.truncate_entries(keep)
    }

    fn truncate_entries(&mut self, keep: usize) -> io::Result<()> {
        if keep >= self.entries.len() {
            return Ok(());
        }
        self.entries.truncate(keep);
        // Entries never written have nothing to zero. Memory is right even
        // if zeroing fails: the next write starts at `keep`, and a trim cuts
        // the file to the entries.
        if keep < self.written {
            let stale = std::mem::replace(&mut self.written, keep) - keep;
            let zeros = vec![0u8; stale * K::ENTRY_BYTES];
            self.file.write_all_at(&zeros, Self::bytes(keep))?;
        }
        debug_assert!(self.written <= self.entries.len());
        Ok(())
    }

    /// Writes pending entries and cuts the file to them (done on roll and
    /// close).
    pub fn trim(&mut self) -> io::Result<()> {
        self.grow_before_write.store(false, Ordering::Relaxed);
        self.write_pending()?;
        self.file.set_len(Self::bytes(self.entries.len()))
    }
    /// Preallocates the file again (when a segment becomes active), lazily:
    /// the file grows at the next write of entries, so opening a log writes
    /// nothing here (see the module doc). Never fails; the `Result` stays
    /// for callers written against the eager version.
    pub fn preallocate(&self) -> io::Result<()> {
        self.grow_before_write.store(true, Ordering::Relaxed);
        Ok(())
    }
    /// Whether a preallocation is still waiting for the next write.
    pub fn preallocation_pending(&self) -> bool {
        self.grow_before_write.load(Ordering::Relaxed)
    }
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync()
    }
    pub fn file(&self) -> Arc<dyn StorageFile> {
        self.file.clone()
    }

    /// Drops every entry and rewrites the file as freshly preallocated (stale
    /// bytes from a bogus file must not survive a rebuild).
    pub fn reset(&mut self) -> io::Result<()> {
        self.entries.clear();
        self.written = 0;
        self.file.set_len(0)?;
        self.preallocate()
    }
}

impl Index<Offsets> {
    /// Adds an entry for a batch ending at `offset` and starting at `position`
    /// (in memory; see [`Index::write_pending`]). Entries that would not
    /// keep the index strictly increasing are ignored.
    pub fn append(&mut self, offset: i64, position: u32) {
        let entry = (self.relative(offset), position as i32);
        if self.is_full()
            || self
                .entries
                .last()
                .is_some_and(|last| !Offsets::increases(last, &entry))
        {
            return;
        }
        self.entries.push(entry);
    }

    /// The largest entry with offset ≤ `target` as (absolute offset, position);
    /// `(base_offset, 0)` when there is none.
    pub fn lookup(&self, target: i64) -> (i64, u32) {
        match self.floor(target) {
            Some(&(rel, pos)) => (self.base_offset + i64::from(rel), pos as u32),
            None => (self.base_offset, 0),
        }
    }

    /// Removes entries whose position is ≥ `position`.
    pub fn truncate_to_position(&mut self, position: u32) -> io::Result<()> {
        let keep = self.entries.partition_point(|e| (e.1 as u32) < position);
        self.truncate_entries(keep)
    }
}

impl Index<Timestamps> {
    /// (timestamp, absolute offset) of `entry`.
    fn absolute(&self, &(ts, rel): &(i64, i32)) -> (i64, i64) {
        (ts, self.base_offset + i64::from(rel))
    }

    /// The last entry as (timestamp, absolute offset); `(-1, base)` if empty.
    pub fn last_entry(&self) -> (i64, i64) {
        self.entries
            .last()
            .map_or((-1, self.base_offset), |e| self.absolute(e))
    }

    /// Kafka's `maybeAppend`: adds (timestamp, offset) only when the timestamp
    /// is larger than the last one (in memory; see [`Index::write_pending`]).
    /// `skip_full_check` lets the final entry of a segment in even when the
    /// index is full.
    pub fn maybe_append(&mut self, timestamp: i64, offset: i64, skip_full_check: bool) {
        if !skip_full_check && self.is_full() {
            return;
        }
        let (last_ts, last_off) = self.last_entry();
        if timestamp <= last_ts || offset < last_off {
            return;
        }
        self.entries.push((timestamp, self.relative(offset)));
        self.max_entries = self.max_entries.max(self.entries.len());
    }

    /// The largest entry with timestamp ≤ `target` as (timestamp, offset);
    /// `(-1, base_offset)` when there is none.
    pub fn lookup(&self, target: i64) -> (i64, i64) {
        self.floor(target)
            .map_or((-1, self.base_offset), |e| self.absolute(e))
    }
}

/// Grows `file` to `len` bytes (zeros); never shrinks it.
fn grow_to(file: &dyn StorageFile, len: u64) -> io::Result<()> {
    if file.len()? < len {
        file.set_len(len)?;
    }
    Ok(())
}

/// Parses index bytes: entries in their kind's order
/// ([`EntryKind::check`]), then only zero padding (a preallocated file).
/// Errors describe what is wrong.
pub fn parse<K: EntryKind>(bytes: &[u8]) -> Result<Vec<K::Entry>, String> {
    let size = K::ENTRY_BYTES;
    if !bytes.len().is_multiple_of(size) {
        return Err(format!("size {} is not a multiple of {size}", bytes.len()));
    }
    let mut out: Vec<K::Entry> = Vec::new();
    for (i, chunk) in bytes.chunks_exact(size).enumerate() {
        let rest = bytes.get(i * size..).unwrap_or_default();
        if rest.iter().all(|&b| b == 0) {
            break;
        }
        let entry = K::decode(chunk).ok_or_else(|| format!("entry {i} is short"))?;
        K::check(out.last(), &entry).map_err(|why| format!("entry {i} {entry:?} {why}"))?;
        out.push(entry);
    }
    Ok(out)
}

/// Parses `.index` bytes (see [`parse`]).
pub fn parse_offset_index(bytes: &[u8]) -> Result<Vec<(i32, i32)>, String> {
    parse::<Offsets>(bytes)
}

/// Parses `.timeindex` bytes (see [`parse`]).
pub fn parse_time_index(bytes: &[u8]) -> Result<Vec<(i64, i32)>, String> {
    parse::<Timestamps>(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{FaultyStorage, MemStorage, Storage};
    use std::path::Path;

    fn file() -> Arc<dyn StorageFile> {
        let s = MemStorage::new();
        s.create_dir_all(Path::new("/x")).unwrap();
        s.open(Path::new("/x/i"), true).unwrap()
    }

    #[test]
    fn floor_slot_matches_linear_search() {
        // Enough entries that the warm section is a strict suffix.
        let keys: Vec<i64> = (0..3000).map(|i| i * 3 + 10).collect();
        for target in [
            -1, 0, 9, 10, 11, 12, 13, 5000, 8000, 8995, 8997, 9010, 100_000,
        ] {
            let want = keys.iter().rposition(|&k| k <= target);
            assert_eq!(
                floor_slot(&keys, Offsets::ENTRY_BYTES, target, |k| *k),
                want,
                "target {target}"
            );
        }
        for n in 0..5 {
            let small: Vec<i64> = (0..n).map(|i| i * 2).collect();
            for t in -1..10 {
                let want = small.iter().rposition(|&k| k <= t);
                assert_eq!(floor_slot(&small, Offsets::ENTRY_BYTES, t, |k| *k), want);
            }
        }
    }

    #[test]
    fn offset_index_round_trip_and_trim() {
        let f = file();
        let mut idx = OffsetIndex::create(f.clone(), 100, 80).unwrap();
        assert_eq!(f.len().unwrap(), 80);
        idx.append(105, 4100);
        idx.append(110, 8300);
        idx.append(110, 9000); // not increasing: ignored
        assert!(!idx.is_written());
        assert_eq!(f.len().unwrap(), 80);
        let mut bytes = vec![0u8; 80];
        f.read_exact_at(&mut bytes, 0).unwrap();
        assert!(
            bytes.iter().all(|&b| b == 0),
            "nothing written before write_pending"
        );
        idx.write_pending().unwrap();
        assert!(idx.is_written());
        assert_eq!(idx.lookup(99), (100, 0));
        assert_eq!(idx.lookup(107), (105, 4100));
        assert_eq!(idx.lookup(200), (110, 8300));
        let mut bytes = vec![0u8; 80];
        f.read_exact_at(&mut bytes, 0).unwrap();
        assert_eq!(
            parse_offset_index(&bytes).unwrap(),
            vec![(5, 4100), (10, 8300)]
        );
        assert_eq!(&bytes[..8], &[0, 0, 0, 5, 0, 0, 0x10, 0x04]);
        idx.trim().unwrap();
        assert_eq!(f.len().unwrap(), 16);
        idx.truncate_to(110).unwrap();
        assert_eq!(idx.entries(), &[(5, 4100)]);
    }

    #[test]
    fn truncating_pending_entries_keeps_the_file_in_step() {
        let f = file();
        let mut idx = OffsetIndex::create(f.clone(), 0, 80).unwrap();
        idx.append(10, 100);
        idx.append(20, 200);
        idx.write_pending().unwrap();
        idx.append(30, 300);
        idx.append(40, 400);
        // Cuts one written and both pending entries.
        idx.truncate_to(20).unwrap();
        assert!(idx.is_written());
        idx.append(25, 250);
        idx.write_pending().unwrap();
        let mut bytes = vec![0u8; 80];
        f.read_exact_at(&mut bytes, 0).unwrap();
        assert_eq!(parse_offset_index(&bytes).unwrap(), idx.entries());
        assert_eq!(idx.entries(), &[(10, 100), (25, 250)]);

        let tf = file();
        let mut t = TimeIndex::create(tf.clone(), 0, 120).unwrap();
        t.maybe_append(1000, 1, false);
        t.write_pending().unwrap();
        t.maybe_append(2000, 5, false);
        t.truncate_to(5).unwrap();
        t.maybe_append(1500, 4, false);
        t.trim().unwrap();
        assert_eq!(tf.len().unwrap(), 2 * Timestamps::ENTRY_BYTES as u64);
        let mut bytes = vec![0u8; 2 * Timestamps::ENTRY_BYTES];
        tf.read_exact_at(&mut bytes, 0).unwrap();
        assert_eq!(parse_time_index(&bytes).unwrap(), &[(1000, 1), (1500, 4)]);
    }

    #[test]
    fn time_index_only_grows() {
        let f = file();
        let mut idx = TimeIndex::create(f.clone(), 0, 120).unwrap();
        idx.maybe_append(1000, 3, false);
        idx.write_pending().unwrap();
        idx.maybe_append(1000, 5, false);
        idx.maybe_append(999, 6, false);
        idx.maybe_append(2000, 9, false);
        idx.write_pending().unwrap();
        assert_eq!(idx.entries(), &[(1000, 3), (2000, 9)]);
        assert_eq!(idx.lookup(500), (-1, 0));
        assert_eq!(idx.lookup(1500), (1000, 3));
        assert_eq!(idx.lookup(5000), (2000, 9));
        let mut bytes = vec![0u8; 120];
        f.read_exact_at(&mut bytes, 0).unwrap();
        assert_eq!(parse_time_index(&bytes).unwrap(), idx.entries());
        // Kafka's layout: timestamp int64, then relative offset int32.
        assert_eq!(&bytes[..12], &[0, 0, 0, 0, 0, 0, 0x03, 0xe8, 0, 0, 0, 3]);
    }

    #[test]
    fn a_failed_truncation_keeps_memory_right_and_trim_mends_the_file() {
        let faulty = FaultyStorage::new(MemStorage::new());
        faulty.create_dir_all(Path::new("/x")).unwrap();
        let f = faulty.open(Path::new("/x/i"), true).unwrap();
        let mut idx = OffsetIndex::create(f.clone(), 0, 80).unwrap();
        idx.append(10, 100);
        idx.append(20, 200);
        idx.append(30, 300);
        idx.write_pending().unwrap();
        faulty.fail_writes_after(0);
        assert!(
            idx.truncate_to(20).is_err(),
            "zeroing the cut entries fails"
        );
        assert_eq!(idx.entries(), &[(10, 100)]);
        assert_eq!(idx.pending(), 0);
        faulty.heal();
        idx.append(15, 150);
        idx.trim().unwrap();
        let mut bytes = vec![0u8; 16];
        f.read_exact_at(&mut bytes, 0).unwrap();
        assert_eq!(f.len().unwrap(), 16);
        assert_eq!(parse_offset_index(&bytes).unwrap(), &[(10, 100), (15, 150)]);
    }

    #[test]
    fn preallocation_waits_for_the_first_write_of_entries() {
        let f = file();
        let mut idx = OffsetIndex::from_entries(f.clone(), 0, Vec::new(), 80);
        idx.preallocate().unwrap();
        assert!(idx.preallocation_pending());
        idx.write_pending().unwrap();
        assert_eq!(f.len().unwrap(), 0, "nothing to write: the file stays");
        idx.append(5, 100);
        idx.write_pending().unwrap();
        assert!(!idx.preallocation_pending());
        assert_eq!(f.len().unwrap(), 80);
        let mut bytes = vec![0u8; 80];
        f.read_exact_at(&mut bytes, 0).unwrap();
        assert_eq!(parse_offset_index(&bytes).unwrap(), &[(5, 100)]);
        // Trimmed before the write: no growth at all.
        idx.preallocate().unwrap();
        idx.trim().unwrap();
        assert!(!idx.preallocation_pending());
        assert_eq!(f.len().unwrap(), 8);

        let tf = file();
        let mut t = TimeIndex::from_entries(tf.clone(), 0, Vec::new(), 120);
        t.preallocate().unwrap();
        assert_eq!(tf.len().unwrap(), 0);
        t.maybe_append(1000, 3, false);
        t.write_pending().unwrap();
        assert_eq!(tf.len().unwrap(), 120);
        t.trim().unwrap();
        assert_eq!(tf.len().unwrap(), Timestamps::ENTRY_BYTES as u64);
    }

    #[test]
    fn parse_rejects_garbage() {
        assert!(parse_offset_index(&[0; 7]).is_err());
        let mut b = vec![0u8; 24];
        b[3] = 5;
        b[7] = 9;
        b[11] = 4; // decreasing offset
        b[15] = 20;
        assert!(parse_offset_index(&b).is_err());
        let mut z = vec![0u8; 24];
        z[20] = 1; // padding then junk
        assert!(parse_offset_index(&z).is_err());
    }
}
