//! One segment: a `.log` file of record batches plus its two sparse indexes
//! and, once it holds an aborted transaction's marker, its `.txnindex`.
//!
//! Invariants: `size` is the byte length of whole, valid batches in the log
//! file; every index entry points at the start of one of those batches and
//! carries that batch's last offset; `max_timestamp` is the largest batch
//! max timestamp seen (−1 when none) and `offset_of_max_timestamp` the last
//! offset of the first batch that carried it.

use crate::backend::{Storage, StorageFile};
use crate::batch::{BatchScanner, Scanned, read_control_type, read_header};
use crate::error::{IoContext, StorageError};
use crate::index::{OffsetIndex, TimeIndex, parse_offset_index, parse_time_index};
use crate::txn_index::TxnIndex;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use weir_protocol::records::{BatchHeader, ControlRecordType};

pub const LOG_SUFFIX: &str = ".log";
pub const INDEX_SUFFIX: &str = ".index";
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";
/// The aborted-transaction index (see [`crate::txn_index`]); exists only
/// for segments with an entry.
pub const TXN_INDEX_SUFFIX: &str = ".txnindex";
/// Every file a segment may have: they are deleted, renamed and replaced
/// together.
pub const SEGMENT_SUFFIXES: [&str; 4] = [
    LOG_SUFFIX,
    INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
];
/// Kafka's producer state snapshot, `<20-digit offset>.snapshot`, written
/// into the partition dir by the broker; the offset is the log end offset
/// whose state it holds. Storage removes the ones above the log end offset
/// after a truncation or a recovery (they describe batches that are gone).
pub const PRODUCER_SNAPSHOT_SUFFIX: &str = ".snapshot";

/// `00000000000000000042.log` etc.
pub fn file_name(base_offset: i64, suffix: &str) -> String {
    format!("{base_offset:020}{suffix}")
}

/// Parses the base offset of a segment file name (`<20 digits><suffix>`).
pub fn parse_file_name(name: &str) -> Option<(i64, &str)> {
    let digits = name.get(..20)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().ok()?, &name[20..]))
}

/// Result of recovering a segment.
#[derive(Debug)]
pub(crate) struct Recovered {
    /// Length of the valid prefix of the log file.
    pub valid_bytes: u64,
    /// Bytes after the valid prefix (not yet removed: see `cut_log`).
    pub truncated_bytes: u64,
    /// Where and why the scan stopped early, with the offset expected there.
    pub invalid: Option<(u64, String, i64)>,
    /// Aborted-transaction entries dropped although their offset is in the
    /// valid prefix: no ABORT marker of theirs stands there, so the index
    /// file holds garbage (a marker lost with the torn tail is not counted).
    pub txn_mismatches: usize,
}

#[derive(Debug)]
pub(crate) struct Segment {
    pub base_offset: i64,
    pub dir: PathBuf,
    pub log: Arc<dyn StorageFile>,
    pub size: u64,
    pub index: OffsetIndex,
    pub time_index: TimeIndex,
    /// The aborted transactions whose ABORT marker lies in this segment.
    pub txn_index: TxnIndex,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    pub bytes_since_index: u64,
    /// Offset after the last batch (base offset when empty).
    pub next_offset: i64,
    pub created_ms: i64,
    /// Max timestamp of the first batch (Kafka's "rolling based timestamp"):
    /// `segment.ms` counts from it when records carry timestamps.
    pub first_batch_timestamp: Option<i64>,
    pub roll_jitter_ms: i64,
    /// The last batches appended to this segment while it is active, so a
    /// read at the tail (a consumer that has caught up) finds positions and
    /// sizes without reading batch headers from the file. See
    /// [`RecentBatches`].
    pub recent: RecentBatches,
    /// The first damaged position found in this segment, if any: reads
    /// stop before it and fail at or after its offset. See [`Damage`].
    /// Found by readers holding the log's lock only for reading, hence the
    /// mutex (never contended: the log's own lock is held).
    pub damage: std::sync::Mutex<Option<Damage>>,
}

/// Damage found in a segment's log file (a batch that does not parse, fails
/// its CRC, or breaks the offset order), below its end. Bytes from
/// `position` on are never served: a read before `offset` returns the
/// intact batches up to `position`, a read at or after it (and below the
/// next segment) fails with [`StorageError::CorruptLog`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// Byte position of the first unreadable batch.
    pub position: u64,
    /// The offset expected there (one past the last intact batch before it).
    pub offset: i64,
    pub reason: String,
}

/// Where one recently appended batch sits in its segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecentBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    pub position: u64,
    pub size: u32,
}

/// The last [`RecentBatches::CAPACITY`] batches of the active segment, in
/// file order and contiguous up to the segment's end: entry `i + 1` starts
/// where entry `i` ends, and the last one ends at the segment's size. Only
/// appends add entries; anything else that changes the file (recovery,
/// truncation, the segment becoming inactive) clears it, and readers fall
/// back to the index and header scans.
#[derive(Debug, Default)]
pub(crate) struct RecentBatches {
    batches: std::collections::VecDeque<RecentBatch>,
}

/// Where a read starts according to [`RecentBatches::find`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RecentHit {
    /// The batch holding the offset is entry `k` (and the rest follow it).
    At(usize),
    /// The offset is past the last batch (nothing to read here).
    PastEnd,
}

impl RecentBatches {
    /// Enough for the batches appended between two fetches of a consumer
    /// that keeps up; small, so idle partitions cost nothing and busy ones
    /// a few KiB.
    pub const CAPACITY: usize = 64;

    /// Records a batch appended at the end of the segment (`position` must
    /// be where the previous entry ends; otherwise the cache restarts).
    pub fn push(&mut self, b: RecentBatch) {
        if let Some(last) = self.batches.back()
            && last.position + last.size as u64 != b.position
        {
            self.batches.clear();
        }
        if self.batches.len() == Self::CAPACITY {
            self.batches.pop_front();
        }
        self.batches.push_back(b);
    }

    pub fn clear(&mut self) {
        self.batches.clear();
        self.batches.shrink_to_fit();
    }

    /// The batch holding `offset` (the first whose last offset is ≥ it),
    /// when the cache covers it: `offset` must be at or after the first
    /// cached batch's base offset, and the cache must end at `segment_size`.
    pub fn find(&self, offset: i64, segment_size: u64) -> Option<RecentHit> {
        let first = self.batches.front()?;
        let last = self.batches.back()?;
        if offset < first.base_offset || last.position + last.size as u64 != segment_size {
            return None;
        }
        let k = self.batches.partition_point(|b| b.last_offset < offset);
        Some(if k == self.batches.len() {
            RecentHit::PastEnd
        } else {
            RecentHit::At(k)
        })
    }

    /// Whether the cache holds every batch of a segment of `segment_size`
    /// bytes (it starts at position 0 and ends at the segment's end).
    pub fn covers(&self, segment_size: u64) -> bool {
        match (self.batches.front(), self.batches.back()) {
            (Some(first), Some(last)) => {
                first.position == 0 && last.position + last.size as u64 == segment_size
            }
            _ => false,
        }
    }

    /// The cached batches from entry `k` on.
    pub fn from(&self, k: usize) -> impl Iterator<Item = &RecentBatch> {
        self.batches.range(k..)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.batches.len()
    }
}

impl Segment {
    pub fn path(&self, suffix: &str) -> PathBuf {
        self.dir.join(file_name(self.base_offset, suffix))
    }

    /// Where reads of this segment stop: its size, or the damage found in it.
    pub fn readable_end(&self) -> u64 {
        self.damage()
            .map_or(self.size, |d| d.position.min(self.size))
    }

    /// The damage found in this segment, if any.
    pub fn damage(&self) -> Option<Damage> {
        self.damage
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Records damage (keeping the earliest found), with a log line the
    /// first time.
    pub fn record_damage(&self, d: Damage) {
        let mut g = self.damage.lock().unwrap_or_else(|e| e.into_inner());
        if g.as_ref().is_none_or(|old| d.position < old.position) {
            tracing::error!(
                path = %self.path(LOG_SUFFIX).display(), position = d.position,
                offset = d.offset, reason = %d.reason,
                "damaged log segment: reads stop before this position"
            );
            *g = Some(d);
        }
    }

    /// The error for a read at `offset` at or past the damage.
    pub(crate) fn damage_error(&self, d: &Damage) -> StorageError {
        StorageError::CorruptLog {
            path: self.path(LOG_SUFFIX),
            position: d.position,
            reason: format!("damaged from offset {}: {}", d.offset, d.reason),
        }
    }

    /// Maps an I/O error on one of the segment's files, building the path
    /// only when there is an error (the append path must not format names).
    fn io_err(&self, suffix: &'static str) -> impl FnOnce(std::io::Error) -> StorageError + '_ {
        move |source| StorageError::Io {
            path: self.path(suffix),
            source,
        }
    }

    /// Creates a new, empty segment (truncating any leftover files).
    pub fn create(
        storage: &dyn Storage,
        dir: &Path,
        base_offset: i64,
        index_bytes: u32,
        now_ms: i64,
        roll_jitter_ms: i64,
    ) -> Result<Segment, StorageError> {
        let p = |s| dir.join(file_name(base_offset, s));
        let log_path = p(LOG_SUFFIX);
        let log = storage.open(&log_path, true).at(&log_path)?;
        log.set_len(0).at(&log_path)?;
        let ip = p(INDEX_SUFFIX);
        let ifile = storage.open(&ip, true).at(&ip)?;
        ifile.set_len(0).at(&ip)?;
        let index = OffsetIndex::create(ifile, base_offset, index_bytes).at(&ip)?;
        let tp = p(TIME_INDEX_SUFFIX);
        let tfile = storage.open(&tp, true).at(&tp)?;
        tfile.set_len(0).at(&tp)?;
        let time_index = TimeIndex::create(tfile, base_offset, index_bytes).at(&tp)?;
        // A leftover aborted-transaction index would describe other batches.
        let xp = p(TXN_INDEX_SUFFIX);
        if storage.exists(&xp) {
            storage.remove_file(&xp).at(&xp)?;
        }
        Ok(Segment {
            base_offset,
            dir: dir.to_path_buf(),
            log,
            size: 0,
            index,
            time_index,
            txn_index: TxnIndex::empty(xp, base_offset),
            max_timestamp: -1,
            offset_of_max_timestamp: base_offset,
            bytes_since_index: 0,
            next_offset: base_offset,
            created_ms: now_ms,
            first_batch_timestamp: None,
            roll_jitter_ms,
            recent: RecentBatches::default(),
            damage: Default::default(),
        })
    }

    /// Opens an existing segment. Index files that are missing or fail the
    /// sanity check (or are not loaded) come back empty with
    /// `needs_rebuild = true`. The aborted-transaction index is always
    /// loaded: its valid entries are kept, and the third value says why its
    /// file does not end with them, if it does not (the caller rebuilds it).
    pub fn open(
        storage: &dyn Storage,
        dir: &Path,
        base_offset: i64,
        index_bytes: u32,
        now_ms: i64,
        roll_jitter_ms: i64,
        load_indexes: bool,
    ) -> Result<(Segment, bool, Option<String>), StorageError> {
        let p = |s| dir.join(file_name(base_offset, s));
        let log_path = p(LOG_SUFFIX);
        let log = storage.open(&log_path, false).at(&log_path)?;
        let size = log.len().at(&log_path)?;
        // A segment about to be recovered gets its indexes rebuilt anyway:
        // do not read a possibly preallocated 10 MiB file for nothing.
        let mut needs_rebuild = !load_indexes;

        let ip = p(INDEX_SUFFIX);
        let tp = p(TIME_INDEX_SUFFIX);
        if size > 0 && (!storage.exists(&ip) || !storage.exists(&tp)) {
            needs_rebuild = true;
        }
        let ifile = storage.open(&ip, true).at(&ip)?;
        let ibytes = if load_indexes {
            read_all(&*ifile).at(&ip)?
        } else {
            Vec::new()
        };
        let ientries = match parse_offset_index(&ibytes) {
            Ok(e)
                if e.last().is_none_or(|&(_, pos)| (pos as u64) < size)
                    && e.last().is_none_or(|&(rel, _)| rel >= 0) =>
            {
                e
            }
            Ok(_) => {
                tracing::warn!(path = %ip.display(), "index points past the log; rebuilding");
                needs_rebuild = true;
                Vec::new()
            }
            Err(reason) => {
                tracing::warn!(path = %ip.display(), %reason, "bad index; rebuilding");
                needs_rebuild = true;
                Vec::new()
            }
        };
        // Spot check: the last entry must point at a batch start holding or
        // preceding its offset (Kafka before 3.8 indexed a whole append's
        // last offset at its first batch, so "holding" is not required).
        if let Some(&(rel, pos)) = ientries.last() {
            let ok = matches!(
                read_header(&*log, pos as u64, size),
                Ok(Some(h)) if h.base_offset <= base_offset + rel as i64
            );
            if !ok {
                tracing::warn!(path = %ip.display(), "last index entry does not match the log; rebuilding");
                needs_rebuild = true;
            }
        }
        let ientries = if needs_rebuild { Vec::new() } else { ientries };
        let index = OffsetIndex::from_entries(ifile, base_offset, ientries, index_bytes);

        let tfile = storage.open(&tp, true).at(&tp)?;
        let tbytes = if load_indexes {
            read_all(&*tfile).at(&tp)?
        } else {
            Vec::new()
        };
        let tentries = match parse_time_index(&tbytes) {
            Ok(e) => e,
            Err(reason) => {
                tracing::warn!(path = %tp.display(), %reason, "bad time index; rebuilding");
                needs_rebuild = true;
                Vec::new()
            }
        };
        let time_index = TimeIndex::from_entries(tfile, base_offset, tentries, index_bytes);
        let (txn_index, txn_damage) = TxnIndex::open(storage, p(TXN_INDEX_SUFFIX), base_offset)?;
        if let Some(reason) = &txn_damage {
            tracing::warn!(path = %txn_index.path().display(), %reason, "damaged aborted-transaction index");
        }
        let (max_ts, max_off) = time_index.last_entry();
        let mut seg = Segment {
            base_offset,
            dir: dir.to_path_buf(),
            log,
            size,
            index,
            time_index,
            txn_index,
            max_timestamp: max_ts,
            offset_of_max_timestamp: max_off,
            bytes_since_index: 0,
            next_offset: base_offset,
            created_ms: now_ms,
            first_batch_timestamp: None,
            roll_jitter_ms,
            recent: RecentBatches::default(),
            damage: Default::default(),
        };
        if let Ok(Some(h)) = read_header(&*seg.log, 0, size) {
            seg.first_batch_timestamp = Some(h.max_timestamp);
        }
        if size > 0 && !needs_rebuild {
            // The time index covers the batches up to its last offset index
            // entry (the closing entry written on roll may not have reached
            // the disk): take the rest from the batch headers after it.
            seg.scan_max_timestamp()?;
        }
        Ok((seg, needs_rebuild, txn_damage))
    }

    fn scan_max_timestamp(&mut self) -> Result<(), StorageError> {
        let (_, from) = self.index.lookup(i64::MAX);
        let mut sc = BatchScanner::new(&*self.log, from as u64, self.size, false);
        while let Some(Scanned::Batch { header, .. }) = sc.next_batch().at(&self.path(LOG_SUFFIX))?
        {
            if header.max_timestamp > self.max_timestamp {
                self.max_timestamp = header.max_timestamp;
                self.offset_of_max_timestamp = header.last_offset();
            }
        }
        Ok(())
    }

    /// Appends already-validated batches (contiguous in `bytes`). With
    /// `write_base_offsets`, `bytes` still carry the producer's base offsets
    /// and each batch's assigned one is written over the stored copy (8
    /// bytes at the batch start, outside the CRC), so the caller's buffer
    /// is stored without being copied first.
    pub fn append(
        &mut self,
        bytes: &[u8],
        batches: &[crate::batch::AppendedBatch],
        index_interval: u32,
        write_base_offsets: bool,
    ) -> Result<(), StorageError> {
        if write_base_offsets {
            // Each batch's assigned base offset replaces the first 8 bytes of
            // its stored copy: one vectored write of the caller's bytes with
            // the new offsets spliced in (no copy, one system call).
            let bases: Vec<[u8; 8]> = batches
                .iter()
                .map(|b| b.base_offset.to_be_bytes())
                .collect();
            let mut parts: Vec<&[u8]> = Vec::with_capacity(2 * batches.len());
            let (mut pos, mut run_start) = (0usize, 0usize);
            for (b, base) in batches.iter().zip(&bases) {
                if bytes.get(pos..pos + 8) != Some(&base[..]) {
                    if run_start < pos {
                        parts.push(&bytes[run_start..pos]);
                    }
                    parts.push(base);
                    run_start = pos + 8;
                }
                pos += b.size;
            }
            if run_start < bytes.len() {
                parts.push(&bytes[run_start..]);
            }
            self.log
                .write_vectored_all_at(&parts, self.size)
                .map_err(self.io_err(LOG_SUFFIX))?;
        } else {
            self.log
                .write_all_at(bytes, self.size)
                .map_err(self.io_err(LOG_SUFFIX))?;
        }
        if self.size == 0 {
            self.first_batch_timestamp = batches.first().map(|b| b.max_timestamp);
        }
        let mut pos = self.size;
        for b in batches {
            self.index_batch(
                pos,
                b.last_offset,
                b.max_timestamp,
                b.size as u64,
                index_interval,
            );
            pos += b.size as u64;
        }
        // Index entries wait in memory (see `index`): the file must hold them
        // only once the segment is trimmed, before its index is trusted.
        if self.index.pending() >= crate::index::PENDING_WRITE_BATCH
            || self.time_index.pending() >= crate::index::PENDING_WRITE_BATCH
        {
            self.write_index_entries()?;
        }
        let mut at = self.size;
        for b in batches {
            self.recent.push(RecentBatch {
                base_offset: b.base_offset,
                last_offset: b.last_offset,
                position: at,
                size: b.size as u32,
            });
            at += b.size as u64;
        }
        self.size = pos;
        if let Some(b) = batches.last() {
            self.next_offset = b.last_offset + 1;
        }
        Ok(())
    }

    /// Writes the index entries added by the current operation (one write per
    /// index file, whatever the number of entries).
    pub(crate) fn write_index_entries(&mut self) -> Result<(), StorageError> {
        self.index
            .write_pending()
            .map_err(self.io_err(INDEX_SUFFIX))?;
        self.time_index
            .write_pending()
            .map_err(self.io_err(TIME_INDEX_SUFFIX))
    }

    fn index_batch(
        &mut self,
        pos: u64,
        last_offset: i64,
        max_ts: i64,
        size: u64,
        index_interval: u32,
    ) {
        if max_ts > self.max_timestamp {
            self.max_timestamp = max_ts;
            self.offset_of_max_timestamp = last_offset;
        }
        if self.bytes_since_index > index_interval as u64 {
            self.index.append(last_offset, pos as u32);
            self.time_index
                .maybe_append(self.max_timestamp, self.offset_of_max_timestamp, false);
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += size;
    }

    /// Position and header of the first batch whose last offset is ≥ `target`,
    /// searching from the index entry for `target`. `None` if past the end.
    /// Fails with [`StorageError::CorruptLog`] when the search meets damage
    /// (recorded for later reads) or `target` lies at or past known damage.
    pub fn translate_offset(
        &self,
        target: i64,
    ) -> Result<Option<(u64, BatchHeader)>, StorageError> {
        if let Some(d) = self.damage()
            && target >= d.offset
        {
            return Err(self.damage_error(&d));
        }
        let (_, pos) = self.index.lookup(target);
        let mut pos = pos as u64;
        if pos >= self.readable_end() {
            pos = 0;
        }
        let path = self.path(LOG_SUFFIX);
        loop {
            let from_index = pos > 0;
            let mut walk = HeaderWalk::new(self, pos, (!from_index).then_some(self.base_offset));
            let mut first = true;
            let restart = loop {
                match walk.next_step()? {
                    Step::Batch(p, h) => {
                        if first && from_index && h.base_offset > target {
                            // The index disagrees with the log: never skip
                            // batches because of it; scan from the start.
                            tracing::warn!(path = %path.display(), target, "index entry past its offset");
                            break true;
                        }
                        first = false;
                        if h.last_offset() >= target {
                            return Ok(Some((p, h)));
                        }
                    }
                    Step::End => {
                        return match self.damage() {
                            // The search reached the damage without finding
                            // `target`: it lies in the damaged part.
                            Some(d) => Err(self.damage_error(&d)),
                            None => Ok(None),
                        };
                    }
                    // Where an index entry led straight into damage, find
                    // where it starts (and the offset expected there) from
                    // the segment's start.
                    Step::Damaged(_) if first && from_index => break true,
                    Step::Damaged(d) => return Err(self.damage_error(&d)),
                }
            };
            debug_assert!(restart);
            pos = 0;
        }
    }

    /// After a clean shutdown: checks that the segment ends on a batch
    /// boundary by reading (with CRCs) the batches after its last index
    /// entry, and cuts whatever follows the last intact one — bytes of a
    /// write that failed (a full disk) before the shutdown, or appended
    /// since. Sets the next offset and the max timestamp from what stays.
    /// Returns the number of bytes cut.
    pub fn verify_tail(&mut self) -> Result<u64, StorageError> {
        let (_, pos) = self.index.lookup(i64::MAX);
        let mut pos = pos as u64;
        if pos >= self.size {
            pos = 0;
        }
        let path = self.path(LOG_SUFFIX);
        let (ts, off) = self.time_index.last_entry();
        let (mut max_ts, mut max_off) = (ts, off);
        let mut next = None;
        let mut valid = pos;
        let mut bad = None;
        let mut sc = BatchScanner::new(&*self.log, pos, self.size, true);
        while let Some(item) = sc.next_batch().at(&path)? {
            match item {
                Scanned::Batch { position, header } => {
                    if next.is_some_and(|n| header.base_offset < n) {
                        bad = Some((position, "offsets go backwards".to_string()));
                        break;
                    }
                    if header.max_timestamp > max_ts {
                        max_ts = header.max_timestamp;
                        max_off = header.last_offset();
                    }
                    next = Some(header.last_offset() + 1);
                    valid = position + header.total_size() as u64;
                }
                Scanned::Invalid { position, reason } => {
                    bad = Some((position, reason));
                    break;
                }
            }
        }
        if pos > 0 && next.is_none() && bad.is_some() {
            // The last index entry does not lead to a batch: trust nothing
            // of the index and recover the whole segment instead.
            return Err(StorageError::CorruptLog {
                path,
                position: pos,
                reason: "the last index entry does not point at an intact batch".into(),
            });
        }
        self.next_offset = next.unwrap_or(if pos == 0 {
            self.base_offset
        } else {
            self.next_offset
        });
        self.max_timestamp = max_ts;
        self.offset_of_max_timestamp = max_off;
        let cut = self.size - valid;
        if cut > 0 {
            let reason = bad.map(|(_, r)| r).unwrap_or_default();
            tracing::warn!(
                path = %path.display(), position = valid, bytes = cut, %reason,
                "segment does not end on a batch boundary after a clean shutdown; cutting the bytes after its last intact batch"
            );
            self.cut_log(valid)?;
        }
        Ok(cut)
    }

    /// Cuts the log file after its valid prefix found by `recover`.
    pub fn cut_log(&mut self, valid_bytes: u64) -> Result<(), StorageError> {
        self.recent.clear();
        if valid_bytes == 0 {
            self.first_batch_timestamp = None;
        }
        if valid_bytes < self.size {
            self.log.set_len(valid_bytes).at(&self.path(LOG_SUFFIX))?;
            self.size = valid_bytes;
        }
        Ok(())
    }

    /// Rebuilds indexes and the max timestamp by scanning every batch with
    /// CRC checks up to the first invalid batch. Does not change the log
    /// file: the caller decides whether to `cut_log` or report corruption.
    pub fn recover(&mut self, index_interval: u32) -> Result<Recovered, StorageError> {
        let log_path = self.path(LOG_SUFFIX);
        self.recent.clear();
        self.index.reset().at(&self.path(INDEX_SUFFIX))?;
        self.time_index.reset().at(&self.path(TIME_INDEX_SUFFIX))?;
        self.max_timestamp = -1;
        self.offset_of_max_timestamp = self.base_offset;
        self.bytes_since_index = 0;
        self.first_batch_timestamp = None;
        let mut next = self.base_offset;
        let mut valid = 0u64;
        let mut invalid = None;
        // ABORT markers of the valid prefix, as (offset, producer id).
        let mut aborts = Vec::new();
        let file = self.log.clone();
        let mut sc = BatchScanner::new(&*file, 0, self.size, true);
        while let Some(item) = sc.next_batch().at(&log_path)? {
            match item {
                Scanned::Batch { position, header } => {
                    let last = header.last_offset();
                    let bad = if header.base_offset < next {
                        Some(format!(
                            "base offset {} is below the expected {next}",
                            header.base_offset
                        ))
                    } else if header.last_offset_delta < 0
                        || last - self.base_offset > i32::MAX as i64
                    {
                        Some(format!("last offset {last} out of range"))
                    } else {
                        None
                    };
                    if let Some(reason) = bad {
                        invalid = Some((position, reason, next));
                        break;
                    }
                    self.first_batch_timestamp
                        .get_or_insert(header.max_timestamp);
                    self.index_batch(
                        position,
                        last,
                        header.max_timestamp,
                        header.total_size() as u64,
                        index_interval,
                    );
                    if header.is_control()
                        && header.producer_id >= 0
                        && read_control_type(&*file, position, &header).at(&log_path)?
                            == Some(ControlRecordType::Abort)
                    {
                        aborts.push((header.base_offset, header.producer_id));
                    }
                    next = last + 1;
                    valid = position + header.total_size() as u64;
                }
                Scanned::Invalid { position, reason } => {
                    invalid = Some((position, reason, next));
                    break;
                }
            }
        }
        self.next_offset = next;
        // Entries whose ABORT marker is not in the valid prefix (lost with
        // a torn tail, or cut) go.
        let txn_mismatches = self.keep_txns_with_markers(&aborts, next)?;
        // On a full disk the rebuilt entries stay in memory (lookups use
        // them) and reach the file with a later write: opening a log to
        // read it must not need free space.
        if let Err(e) = self.write_index_entries() {
            if !e.is_no_space() {
                return Err(e);
            }
            tracing::warn!(path = %log_path.display(), error = %e, "rebuilt index kept in memory: no space to write it");
        }
        Ok(Recovered {
            valid_bytes: valid,
            truncated_bytes: self.size - valid,
            invalid,
            txn_mismatches,
        })
    }

    /// Keeps the aborted-transaction entries whose ABORT marker (of their
    /// producer, at their last offset) is among `aborts` (the segment's
    /// markers, in offset order): the others describe batches a crash or a
    /// cut took, or are garbage. Returns how many of those that went lie
    /// below `end` (the offset after the valid prefix): garbage.
    fn keep_txns_with_markers(
        &mut self,
        aborts: &[(i64, i64)],
        end: i64,
    ) -> Result<usize, StorageError> {
        let entries = self.txn_index.entries();
        let kept: Vec<_> = entries
            .iter()
            .filter(|e| {
                aborts
                    .binary_search_by_key(&e.last_offset, |&(o, _)| o)
                    .is_ok_and(|i| aborts[i].1 == e.producer_id)
            })
            .copied()
            .collect();
        let dropped = entries.len() - kept.len();
        if dropped == 0 {
            return Ok(0);
        }
        let mismatches = entries
            .iter()
            .filter(|e| e.last_offset < end && !kept.contains(e))
            .count();
        tracing::warn!(
            path = %self.txn_index.path().display(), dropped,
            "aborted-transaction entries without their ABORT marker in the log removed"
        );
        self.txn_index.retain(kept)?;
        Ok(mismatches)
    }

    /// Cuts the log at the start of the first batch whose last offset is
    /// ≥ `offset`. Returns that batch's base offset (None if nothing was cut).
    pub fn truncate_to(
        &mut self,
        offset: i64,
        index_interval: u32,
    ) -> Result<Option<i64>, StorageError> {
        let Some((pos, cut)) = self.translate_offset(offset)? else {
            return Ok(None);
        };
        let log_path = self.path(LOG_SUFFIX);
        self.log.set_len(pos).at(&log_path)?;
        self.size = pos;
        self.txn_index.truncate_to(cut.base_offset)?;
        // Simplest correct way to restore every derived field: rebuild.
        let r = self.recover(index_interval)?;
        if let Some((position, reason, _)) = r.invalid {
            // Only reachable if the file changed under us.
            return Err(StorageError::CorruptLog {
                path: log_path,
                position,
                reason,
            });
        }
        Ok(Some(cut.base_offset))
    }

    /// Preallocates the index files again (the segment became active).
    pub fn make_active(&self) -> Result<(), StorageError> {
        self.index.preallocate().at(&self.path(INDEX_SUFFIX))?;
        self.time_index
            .preallocate()
            .at(&self.path(TIME_INDEX_SUFFIX))?;
        Ok(())
    }

    /// The files a flush must sync (so it can run without the log's lock).
    pub fn files(&self) -> [Arc<dyn StorageFile>; 3] {
        let [index, time_index] = self.index_files();
        [self.log.clone(), index, time_index]
    }

    /// The offset and time index files.
    pub fn index_files(&self) -> [Arc<dyn StorageFile>; 2] {
        [self.index.file(), self.time_index.file()]
    }

    /// First record with timestamp ≥ `ts` at or after `start_offset`:
    /// time index → offset index → batch scan.
    pub fn find_offset_by_timestamp(
        &self,
        ts: i64,
        start_offset: i64,
    ) -> Result<Option<(i64, i64)>, StorageError> {
        let (_, off) = self.time_index.lookup(ts);
        let (_, pos) = self.index.lookup(off.max(start_offset));
        let path = self.path(LOG_SUFFIX);
        let mut p = pos as u64;
        let end = self.readable_end();
        loop {
            let h = match read_header(&*self.log, p, end) {
                Ok(Some(h)) => h,
                Ok(None) => return Ok(None),
                Err(reason) => {
                    return Err(StorageError::CorruptLog {
                        path,
                        position: p,
                        reason,
                    });
                }
            };
            if h.max_timestamp >= ts && h.last_offset() >= start_offset {
                let mut buf = vec![0u8; h.total_size()];
                self.log.read_exact_at(&mut buf, p).at(&path)?;
                match crate::batch::record_timestamps(&buf) {
                    Some(recs) => {
                        if let Some(&(o, t)) =
                            recs.iter().find(|&&(o, t)| t >= ts && o >= start_offset)
                        {
                            return Ok(Some((o, t)));
                        }
                    }
                    // Undecodable records: answer at batch granularity.
                    None => return Ok(Some((h.base_offset.max(start_offset), h.max_timestamp))),
                }
            }
            p += h.total_size() as u64;
        }
    }

    /// Kafka's `timeWaitedForRoll`: time since the first batch's timestamp,
    /// measured with the incoming records' timestamp, or wall time since
    /// creation when records carry no timestamp.
    pub fn time_waited_for_roll(&self, now_ms: i64, incoming_max_timestamp: i64) -> i64 {
        match self.first_batch_timestamp {
            Some(t) if t >= 0 => incoming_max_timestamp.saturating_sub(t),
            _ => now_ms.saturating_sub(self.created_ms),
        }
    }

    /// Called when the segment stops being the active one: final time index
    /// entry, indexes trimmed to their entries.
    pub fn on_become_inactive(&mut self) -> Result<(), StorageError> {
        self.recent.clear();
        if self.max_timestamp >= 0 {
            self.time_index
                .maybe_append(self.max_timestamp, self.offset_of_max_timestamp, true);
        }
        self.index.trim().at(&self.path(INDEX_SUFFIX))?;
        self.time_index.trim().at(&self.path(TIME_INDEX_SUFFIX))?;
        Ok(())
    }

    pub fn flush(&self) -> Result<(), StorageError> {
        self.log.sync().at(&self.path(LOG_SUFFIX))?;
        self.index.sync().at(&self.path(INDEX_SUFFIX))?;
        self.time_index.sync().at(&self.path(TIME_INDEX_SUFFIX))?;
        self.txn_index.sync()?;
        Ok(())
    }

    /// Renames the segment's files to `<name>.deleted`, then removes them.
    pub fn delete(&self, storage: &dyn Storage) -> Result<(), StorageError> {
        for s in SEGMENT_SUFFIXES {
            let p = self.path(s);
            let mut d = p.clone().into_os_string();
            d.push(".deleted");
            let d = PathBuf::from(d);
            if storage.exists(&p) {
                storage.rename(&p, &d).at(&p)?;
            }
        }
        storage.sync_dir(&self.dir).at(&self.dir)?;
        for s in SEGMENT_SUFFIXES {
            let mut d = self.path(s).into_os_string();
            d.push(".deleted");
            let d = PathBuf::from(d);
            if storage.exists(&d) {
                storage.remove_file(&d).at(&d)?;
            }
        }
        Ok(())
    }
}

/// One step of a [`HeaderWalk`].
#[derive(Debug)]
pub(crate) enum Step {
    /// The next batch, at this position.
    Batch(u64, BatchHeader),
    /// The walk reached the readable end of the segment.
    End,
    /// The walk met damage (already recorded in the segment).
    Damaged(Damage),
}

/// Walks a segment's batch headers from a batch start without reading the
/// batches, checking what a header alone shows: it parses (magic 2, sane
/// length), fits before the readable end, and continues the offset order
/// (offsets only grow, stay inside the segment's range). On the first
/// violation the batch before it has its CRC checked — a corrupt length
/// there is what sends a walk astray — and the damage is recorded in the
/// segment at whichever of the two is bad.
pub(crate) struct HeaderWalk<'a> {
    seg: &'a Segment,
    scanner: BatchScanner<'a>,
    /// Position and header of the previous batch of this walk.
    prev: Option<(u64, BatchHeader)>,
    /// The offset expected at the start, when known (a walk from an index
    /// entry knows only a bound). Damage met at the very start of a walk
    /// that does not know it is not recorded: the caller walks again from
    /// the segment's start to find where the damage begins.
    start_offset: Option<i64>,
}

impl<'a> HeaderWalk<'a> {
    /// A walk from `start` (a batch start) where offset `start_offset` is
    /// expected, when known.
    pub fn new(seg: &'a Segment, start: u64, start_offset: Option<i64>) -> Self {
        let end = seg.readable_end();
        HeaderWalk {
            seg,
            scanner: BatchScanner::new(&*seg.log, start.min(end), end, false),
            prev: None,
            start_offset,
        }
    }

    pub fn next_step(&mut self) -> Result<Step, StorageError> {
        let path = || self.seg.path(LOG_SUFFIX);
        let found = match self.scanner.next_batch().at(&path())? {
            None => return Ok(Step::End),
            Some(Scanned::Invalid { position, reason }) => (position, reason),
            Some(Scanned::Batch { position, header }) => {
                let floor = self
                    .prev
                    .map_or(self.seg.base_offset, |(_, p)| p.last_offset() + 1);
                let bad = if header.base_offset < floor {
                    Some(format!(
                        "base offset {} is below the expected {floor}",
                        header.base_offset
                    ))
                } else if header.last_offset_delta < 0
                    || header.last_offset() - self.seg.base_offset > i32::MAX as i64
                {
                    Some(format!("last offset {} out of range", header.last_offset()))
                } else {
                    None
                };
                // A gap after the previous batch is normal in a compacted
                // log, but is also what a corrupt length that happens to
                // land on a later batch looks like: check that batch's CRC.
                let gap = self.prev.is_some() && header.base_offset > floor;
                match bad {
                    None if !gap || self.prev_intact()? => {
                        self.prev = Some((position, header));
                        return Ok(Step::Batch(position, header));
                    }
                    None => (
                        position,
                        format!("offsets jump from {floor} to {}", header.base_offset),
                    ),
                    Some(reason) => (position, reason),
                }
            }
        };
        let (position, reason) = found;
        let Some(offset) = self
            .prev
            .map(|(_, p)| p.last_offset() + 1)
            .or(self.start_offset)
        else {
            return Ok(Step::Damaged(Damage {
                position,
                offset: -1,
                reason,
            }));
        };
        let mut damage = Damage {
            position,
            offset,
            reason,
        };
        if let Some((ppos, ph)) = self.prev
            && !self.prev_intact()?
        {
            damage = Damage {
                position: ppos,
                offset: ph.base_offset,
                reason: format!("CRC mismatch (the next header at {position} does not follow)"),
            };
        }
        self.seg.record_damage(damage.clone());
        Ok(Step::Damaged(damage))
    }

    /// Whether the previous batch of the walk passes its CRC check.
    fn prev_intact(&self) -> Result<bool, StorageError> {
        let Some((pos, h)) = self.prev else {
            return Ok(true);
        };
        let mut buf = vec![0u8; h.total_size()];
        self.seg
            .log
            .read_exact_at(&mut buf, pos)
            .at(&self.seg.path(LOG_SUFFIX))?;
        Ok(h.verify_crc(&buf).is_ok())
    }
}

/// Reads a whole file.
pub fn read_all(f: &dyn StorageFile) -> std::io::Result<Vec<u8>> {
    let len = f.len()?;
    let mut buf = vec![0u8; len as usize];
    f.read_exact_at(&mut buf, 0)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: i64, records: i64, position: u64, size: u32) -> RecentBatch {
        RecentBatch {
            base_offset: base,
            last_offset: base + records - 1,
            position,
            size,
        }
    }

    /// Batches of 2 records and 100 bytes from offset 10, position 0.
    fn filled(n: usize) -> RecentBatches {
        let mut r = RecentBatches::default();
        for i in 0..n {
            r.push(batch(10 + 2 * i as i64, 2, 100 * i as u64, 100));
        }
        r
    }

    #[test]
    fn find_locates_the_batch_holding_an_offset() {
        let r = filled(4); // offsets 10..=17, bytes 0..400
        assert_eq!(r.find(10, 400), Some(RecentHit::At(0)));
        assert_eq!(r.find(11, 400), Some(RecentHit::At(0)));
        assert_eq!(r.find(12, 400), Some(RecentHit::At(1)));
        assert_eq!(r.find(17, 400), Some(RecentHit::At(3)));
        assert_eq!(r.find(18, 400), Some(RecentHit::PastEnd));
        // before the first cached batch: unknown
        assert_eq!(r.find(9, 400), None);
        // the cache must end where the segment ends
        assert_eq!(r.find(12, 500), None);
        assert_eq!(RecentBatches::default().find(0, 0), None);
        let from: Vec<i64> = r.from(2).map(|b| b.base_offset).collect();
        assert_eq!(from, vec![14, 16]);
        assert!(r.covers(400));
        assert!(!r.covers(500));
        assert!(!RecentBatches::default().covers(0));
    }

    #[test]
    fn keeps_the_last_capacity_batches() {
        let n = RecentBatches::CAPACITY + 5;
        let r = filled(n);
        assert_eq!(r.len(), RecentBatches::CAPACITY);
        let end = 100 * n as u64;
        // the oldest five fell out
        assert_eq!(r.find(10, end), None);
        assert!(!r.covers(end));
        assert_eq!(r.find(10 + 2 * 5, end), Some(RecentHit::At(0)));
    }

    #[test]
    fn a_gap_in_positions_restarts_the_cache() {
        let mut r = filled(3);
        r.push(batch(16, 1, 999, 50));
        assert_eq!(r.len(), 1);
        assert_eq!(r.find(16, 1049), Some(RecentHit::At(0)));
        assert_eq!(r.find(12, 1049), None);
        r.clear();
        assert_eq!(r.len(), 0);
    }
}
