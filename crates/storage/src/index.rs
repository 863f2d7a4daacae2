//! Sparse offset index (`.index`) and time index (`.timeindex`).
//!
//! On disk, exactly Kafka's layout: `.index` is a run of 8-byte big-endian
//! entries (offset − base offset as int32, position int32); `.timeindex` of
//! 12-byte entries (timestamp int64, offset − base offset int32). The file of
//! the active segment is preallocated to `segment.index.bytes` (zeros past
//! the last entry) and trimmed to its entries on roll and close.
//!
//! Preallocation is lazy when a segment becomes active again (on open, after
//! a rebuild): [`OffsetIndex::preallocate`] only marks the file, and the
//! first [`OffsetIndex::write_pending`] that has entries to write grows it.
//! Opening a log for reading therefore never writes to an index file, so a
//! log dir on a full disk still opens and serves reads.
//!
//! Entries are kept in memory for lookups. An append only adds to memory;
//! [`OffsetIndex::write_pending`] then writes every entry not yet in the file
//! with one positional write through the [`StorageFile`] seam, so every
//! backend sees the same bytes (the real backend gets them into the page
//! cache with a positional write instead of a memory map). A rebuild writes
//! at the end, so many entries cost one write, not one each. Appends to the
//! active segment write once [`PENDING_WRITE_BATCH`] entries are waiting,
//! and always before the file matters: when the segment stops being active
//! (`trim`, on roll and close), which is before its index is synced and
//! trusted. Until then the file may lack the newest entries; that is safe
//! because recovery never trusts the index of the segment holding the
//! recovery point or of any later one (it rebuilds them from the log).

use crate::backend::StorageFile;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

/// Entries an append lets wait in memory before writing them out.
pub const PENDING_WRITE_BATCH: usize = 64;
use std::sync::Arc;

pub const OFFSET_ENTRY: usize = 8;
pub const TIME_ENTRY: usize = 12;
/// Kafka searches the last 8 KiB of an index first: caught-up readers only
/// touch those pages.
const WARM_BYTES: usize = 8192;

/// Index of the largest entry whose key is ≤ `target`, searching the warm tail
/// section first. `None` when every key is greater (or there are none).
fn floor_slot<T>(
    entries: &[T],
    entry_size: usize,
    target: i64,
    key: impl Fn(&T) -> i64,
) -> Option<usize> {
    if entries.is_empty() {
        return None;
    }
    let n = entries.len();
    let warm = WARM_BYTES / entry_size;
    let first_hot = n.saturating_sub(1 + warm);
    let (lo, hi) = if key(&entries[first_hot]) < target {
        (first_hot, n - 1)
    } else {
        if key(&entries[0]) > target {
            return None;
        }
        (0, first_hot)
    };
    // Invariant: key(lo) <= target; answer in [lo, hi].
    let (mut lo, mut hi) = (lo, hi);
    while lo < hi {
        let mid = hi - (hi - lo) / 2;
        if key(&entries[mid]) <= target {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

/// A sparse map from offsets to file positions of batch starts. Invariant:
/// relative offsets and positions are strictly increasing.
#[derive(Debug)]
pub struct OffsetIndex {
    file: Arc<dyn StorageFile>,
    base_offset: i64,
    entries: Vec<(i32, i32)>,
    /// `entries[..written]` are in the file; the rest await `write_pending`.
    written: usize,
    max_entries: usize,
    /// The file is to be grown to `max_entries` entries before the next
    /// write (set by `preallocate`, done by `write_pending`). Atomic only
    /// because `preallocate` takes `&self`; the log's lock orders access.
    grow_before_write: AtomicBool,
}

impl OffsetIndex {
    /// A new, empty index in `file`, preallocated to `max_bytes`.
    pub fn create(
        file: Arc<dyn StorageFile>,
        base_offset: i64,
        max_bytes: u32,
    ) -> io::Result<Self> {
        let max_entries = max_bytes as usize / OFFSET_ENTRY;
        file.set_len((max_entries * OFFSET_ENTRY) as u64)?;
        Ok(OffsetIndex {
            file,
            base_offset,
            entries: Vec::new(),
            written: 0,
            max_entries,
            grow_before_write: AtomicBool::new(false),
        })
    }

    /// Wraps already-parsed entries (see [`parse_offset_index`]).
    pub fn from_entries(
        file: Arc<dyn StorageFile>,
        base_offset: i64,
        entries: Vec<(i32, i32)>,
        max_bytes: u32,
    ) -> Self {
        let max_entries = (max_bytes as usize / OFFSET_ENTRY).max(entries.len());
        OffsetIndex {
            file,
            base_offset,
            written: entries.len(),
            entries,
            max_entries,
            grow_before_write: AtomicBool::new(false),
        }
    }

    pub fn entries(&self) -> &[(i32, i32)] {
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

    /// Adds an entry for a batch ending at `offset` and starting at `position`
    /// (in memory; see [`OffsetIndex::write_pending`]). Entries that would not
    /// keep the index strictly increasing are ignored.
    pub fn append(&mut self, offset: i64, position: u32) {
        let rel = (offset - self.base_offset) as i32;
        let pos = position as i32;
        if self.is_full() {
            return;
        }
        if let Some(&(lr, lp)) = self.entries.last()
            && (rel <= lr || pos <= lp)
        {
            return;
        }
        self.entries.push((rel, pos));
    }

    /// Writes the entries appended since the last call, in one write (after
    /// a preallocation left pending by [`OffsetIndex::preallocate`]).
    pub fn write_pending(&mut self) -> io::Result<()> {
        if self.written == self.entries.len() {
            return Ok(());
        }
        if self.grow_before_write.load(Ordering::Relaxed) {
            grow_to(&*self.file, (self.max_entries * OFFSET_ENTRY) as u64)?;
            self.grow_before_write.store(false, Ordering::Relaxed);
        }
        let pending = &self.entries[self.written..];
        let mut buf = Vec::with_capacity(pending.len() * OFFSET_ENTRY);
        for &(rel, pos) in pending {
            buf.extend_from_slice(&rel.to_be_bytes());
            buf.extend_from_slice(&pos.to_be_bytes());
        }
        self.file
            .write_all_at(&buf, (self.written * OFFSET_ENTRY) as u64)?;
        self.written = self.entries.len();
        Ok(())
    }

    /// Whether every entry is in the file.
    pub fn is_written(&self) -> bool {
        self.written == self.entries.len()
    }

    /// Entries not yet in the file.
    pub fn pending(&self) -> usize {
        self.entries.len() - self.written
    }

    /// The largest entry with offset ≤ `target` as (absolute offset, position);
    /// `(base_offset, 0)` when there is none.
    pub fn lookup(&self, target: i64) -> (i64, u32) {
        match floor_slot(&self.entries, OFFSET_ENTRY, target, |e| {
            self.base_offset + e.0 as i64
        }) {
            Some(i) => {
                let (r, p) = self.entries[i];
                (self.base_offset + r as i64, p as u32)
            }
            None => (self.base_offset, 0),
        }
    }

    /// Removes the entries for offsets ≥ `offset` (zeroing them in the file).
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let keep = self
            .entries
            .partition_point(|e| self.base_offset + (e.0 as i64) < offset);
        self.truncate_entries(keep)
    }

    /// Removes entries whose position is ≥ `position`.
    pub fn truncate_to_position(&mut self, position: u32) -> io::Result<()> {
        let keep = self.entries.partition_point(|e| (e.1 as u32) < position);
        self.truncate_entries(keep)
    }

    fn truncate_entries(&mut self, keep: usize) -> io::Result<()> {
        if keep < self.entries.len() {
            // Entries never written have nothing to zero.
            self.entries.truncate(keep);
            if keep < self.written {
                let zeros = vec![0u8; (self.written - keep) * OFFSET_ENTRY];
                self.file
                    .write_all_at(&zeros, (keep * OFFSET_ENTRY) as u64)?;
                self.written = keep;
            }
        }
        Ok(())
    }

    /// Writes pending entries and cuts the file to them (done on roll and
    /// close).
    pub fn trim(&mut self) -> io::Result<()> {
        self.grow_before_write.store(false, Ordering::Relaxed);
        self.write_pending()?;
        self.file
            .set_len((self.entries.len() * OFFSET_ENTRY) as u64)
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
}

/// A sparse map from timestamps to offsets. Invariant: timestamps strictly
/// increase, relative offsets never decrease.
#[derive(Debug)]
pub struct TimeIndex {
    file: Arc<dyn StorageFile>,
    base_offset: i64,
    entries: Vec<(i64, i32)>,
    /// `entries[..written]` are in the file; the rest await `write_pending`.
    written: usize,
    max_entries: usize,
    /// See [`OffsetIndex`]'s field of the same name.
    grow_before_write: AtomicBool,
}

impl TimeIndex {
    pub fn create(
        file: Arc<dyn StorageFile>,
        base_offset: i64,
        max_bytes: u32,
    ) -> io::Result<Self> {
        let max_entries = max_bytes as usize / TIME_ENTRY;
        file.set_len((max_entries * TIME_ENTRY) as u64)?;
        Ok(TimeIndex {
            file,
            base_offset,
            entries: Vec::new(),
            written: 0,
            max_entries,
            grow_before_write: AtomicBool::new(false),
        })
    }

    pub fn from_entries(
        file: Arc<dyn StorageFile>,
        base_offset: i64,
        entries: Vec<(i64, i32)>,
        max_bytes: u32,
    ) -> Self {
        let max_entries = (max_bytes as usize / TIME_ENTRY).max(entries.len());
        TimeIndex {
            file,
            base_offset,
            written: entries.len(),
            entries,
            max_entries,
            grow_before_write: AtomicBool::new(false),
        }
    }

    pub fn entries(&self) -> &[(i64, i32)] {
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

    /// The last entry as (timestamp, absolute offset); `(-1, base)` if empty.
    pub fn last_entry(&self) -> (i64, i64) {
        match self.entries.last() {
            Some(&(t, r)) => (t, self.base_offset + r as i64),
            None => (-1, self.base_offset),
        }
    }

    /// Kafka's `maybeAppend`: adds (timestamp, offset) only when the timestamp
    /// is larger than the last one (in memory; see
    /// [`TimeIndex::write_pending`]). `skip_full_check` lets the final entry
    /// of a segment in even when the index is full.
    pub fn maybe_append(&mut self, timestamp: i64, offset: i64, skip_full_check: bool) {
        if !skip_full_check && self.is_full() {
            return;
        }
        let (last_ts, last_off) = self.last_entry();
        if timestamp <= last_ts || offset < last_off {
            return;
        }
        let rel = (offset - self.base_offset) as i32;
        self.entries.push((timestamp, rel));
        if self.entries.len() > self.max_entries {
            self.max_entries = self.entries.len();
        }
    }

    /// Writes the entries appended since the last call, in one write (after
    /// a pending preallocation, see [`OffsetIndex::write_pending`]).
    pub fn write_pending(&mut self) -> io::Result<()> {
        if self.written == self.entries.len() {
            return Ok(());
        }
        if self.grow_before_write.load(Ordering::Relaxed) {
            grow_to(&*self.file, (self.max_entries * TIME_ENTRY) as u64)?;
            self.grow_before_write.store(false, Ordering::Relaxed);
        }
        let pending = &self.entries[self.written..];
        let mut buf = Vec::with_capacity(pending.len() * TIME_ENTRY);
        for &(ts, rel) in pending {
            buf.extend_from_slice(&ts.to_be_bytes());
            buf.extend_from_slice(&rel.to_be_bytes());
        }
        self.file
            .write_all_at(&buf, (self.written * TIME_ENTRY) as u64)?;
        self.written = self.entries.len();
        Ok(())
    }

    /// Whether every entry is in the file.
    pub fn is_written(&self) -> bool {
        self.written == self.entries.len()
    }

    /// Entries not yet in the file.
    pub fn pending(&self) -> usize {
        self.entries.len() - self.written
    }

    /// The largest entry with timestamp ≤ `target` as (timestamp, offset);
    /// `(-1, base_offset)` when there is none.
    pub fn lookup(&self, target: i64) -> (i64, i64) {
        match floor_slot(&self.entries, TIME_ENTRY, target, |e| e.0) {
            Some(i) => {
                let (t, r) = self.entries[i];
                (t, self.base_offset + r as i64)
            }
            None => (-1, self.base_offset),
        }
    }

    /// Removes the entries for offsets ≥ `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let keep = self
            .entries
            .partition_point(|e| self.base_offset + (e.1 as i64) < offset);
        if keep < self.entries.len() {
            self.entries.truncate(keep);
            if keep < self.written {
                let zeros = vec![0u8; (self.written - keep) * TIME_ENTRY];
                self.file.write_all_at(&zeros, (keep * TIME_ENTRY) as u64)?;
                self.written = keep;
            }
        }
        Ok(())
    }

    /// See [`OffsetIndex::trim`].
    pub fn trim(&mut self) -> io::Result<()> {
        self.grow_before_write.store(false, Ordering::Relaxed);
        self.write_pending()?;
        self.file.set_len((self.entries.len() * TIME_ENTRY) as u64)
    }
    /// See [`OffsetIndex::preallocate`]: lazy, writes nothing now.
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
}

/// Grows `file` to `len` bytes (zeros); never shrinks it.
fn grow_to(file: &dyn StorageFile, len: u64) -> io::Result<()> {
    if file.len()? < len {
        file.set_len(len)?;
    }
    Ok(())
}

/// Parses `.index` bytes: strictly increasing entries, then only zero padding
/// (a preallocated file). Errors describe what is wrong.
pub fn parse_offset_index(bytes: &[u8]) -> Result<Vec<(i32, i32)>, String> {
    if !bytes.len().is_multiple_of(OFFSET_ENTRY) {
        return Err(format!(
            "size {} is not a multiple of {OFFSET_ENTRY}",
            bytes.len()
        ));
    }
    let mut out: Vec<(i32, i32)> = Vec::new();
    for (i, c) in bytes.chunks_exact(OFFSET_ENTRY).enumerate() {
        let rel = i32::from_be_bytes([c[0], c[1], c[2], c[3]]);
        let pos = i32::from_be_bytes([c[4], c[5], c[6], c[7]]);
        if rel == 0 && pos == 0 {
            if bytes[i * OFFSET_ENTRY..].iter().any(|&b| b != 0) {
                return Err(format!("zero entry {i} followed by non-zero bytes"));
            }
            break;
        }
        if rel < 0 || pos < 0 {
            return Err(format!("entry {i} ({rel}, {pos}) is negative"));
        }
        if let Some(&(lr, lp)) = out.last()
            && (rel <= lr || pos <= lp)
        {
            return Err(format!("entry {i} ({rel}, {pos}) does not increase"));
        }
        out.push((rel, pos));
    }
    Ok(out)
}

/// Parses `.timeindex` bytes like [`parse_offset_index`].
pub fn parse_time_index(bytes: &[u8]) -> Result<Vec<(i64, i32)>, String> {
    if !bytes.len().is_multiple_of(TIME_ENTRY) {
        return Err(format!(
            "size {} is not a multiple of {TIME_ENTRY}",
            bytes.len()
        ));
    }
    let mut out: Vec<(i64, i32)> = Vec::new();
    for (i, c) in bytes.chunks_exact(TIME_ENTRY).enumerate() {
        let ts = i64::from_be_bytes(c[..8].try_into().unwrap_or([0; 8]));
        let rel = i32::from_be_bytes([c[8], c[9], c[10], c[11]]);
        if ts == 0 && rel == 0 && bytes[i * TIME_ENTRY..].iter().all(|&b| b == 0) {
            break;
        }
        if rel < 0 {
            return Err(format!("entry {i} has negative offset {rel}"));
        }
        if let Some(&(lt, lr)) = out.last()
            && (ts <= lt || rel < lr)
        {
            return Err(format!("entry {i} ({ts}, {rel}) does not increase"));
        }
        out.push((ts, rel));
    }
    Ok(out)
}

impl OffsetIndex {
    /// Drops every entry and rewrites the file as freshly preallocated (stale
    /// bytes from a bogus file must not survive a rebuild).
    pub fn reset(&mut self) -> io::Result<()> {
        self.entries.clear();
        self.written = 0;
        self.file.set_len(0)?;
        self.preallocate()
    }
}

impl TimeIndex {
    /// See [`OffsetIndex::reset`].
    pub fn reset(&mut self) -> io::Result<()> {
        self.entries.clear();
        self.written = 0;
        self.file.set_len(0)?;
        self.preallocate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{MemStorage, Storage};
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
                floor_slot(&keys, OFFSET_ENTRY, target, |k| *k),
                want,
                "target {target}"
            );
        }
        for n in 0..5 {
            let small: Vec<i64> = (0..n).map(|i| i * 2).collect();
            for t in -1..10 {
                let want = small.iter().rposition(|&k| k <= t);
                assert_eq!(floor_slot(&small, OFFSET_ENTRY, t, |k| *k), want);
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
        assert_eq!(tf.len().unwrap(), 2 * TIME_ENTRY as u64);
        let mut bytes = vec![0u8; 2 * TIME_ENTRY];
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
        assert_eq!(tf.len().unwrap(), TIME_ENTRY as u64);
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
