//! Executes one cleaning of one log: offset map over the dirty section,
//! rewrite of segment groups into `.cleaned` files, swap through `.swap`.
//!
//! Swap order for a group whose first segment has base `B` (the log's lock
//! is held throughout, so appends and reads see old or new segments):
//! 1. `B.log.cleaned` written and fsynced; when the group's segments hold
//!    aborted transactions whose ABORT marker still has data (see the `txn`
//!    module), their entries written to `B.txnindex.cleaned`, fsynced and
//!    renamed `B.txnindex.swap`;
//! 2. `B.log.cleaned` renamed `B.log.swap`, dir fsynced — from here recovery
//!    completes the swap (it replaces every segment whose base lies in the
//!    swap file's offset range; the last batch of a group is always kept,
//!    emptied if need be, so the range reaches the group's end);
//! 3. the old segments' files renamed `.deleted`, dir fsynced;
//! 4. `B.log.swap` renamed `B.log`, then `B.txnindex.swap` renamed
//!    `B.txnindex`, dir fsynced, indexes rebuilt;
//! 5. the `.deleted` files unlinked (open readers keep their files).
//!
//! A crash before 2 leaves a `.cleaned` file that recovery deletes (and a
//! `B.txnindex.swap` beside `B.log.cleaned`, deleted too); one between the
//! two renames of 4 leaves `B.txnindex.swap` alone, which recovery renames
//! into place.

use super::offset_map::OffsetMap;
use super::txn::{Marker, MarkerAction, TxnCleaning, marker_action};
use super::{CleanerConfig, Clock};
use crate::backend::{Storage, StorageFile};
use crate::error::{IoContext, StorageError};
use crate::log::{Log, roll_jitter};
use crate::segment::{
    LOG_SUFFIX, SEGMENT_SUFFIXES, Segment, TXN_INDEX_SUFFIX, file_name, read_all,
};
use crate::txn_index::AbortedTxn;
use bytes::Bytes;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use weir_protocol::records::{
    BatchIter, Compression, ControlRecordType, DecompressLimits, RecordBatch, RecordBatchBuilder,
    RecordsError,
};

/// The part of a log a cleaning looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section {
    /// First offset not yet covered by an offset map.
    pub first_dirty: i64,
    /// First offset that may not be cleaned (active segment, too young,
    /// above the high watermark); a segment boundary.
    pub cleanable_end: i64,
    pub clean_bytes: u64,
    pub dirty_bytes: u64,
    pub oldest_dirty_timestamp: Option<i64>,
}

/// What one cleaning did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanStats {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_kept: u64,
    pub records_dropped: u64,
    /// Transaction markers (control batches) removed.
    pub markers_removed: u64,
    pub segments_swapped: u64,
    /// The offset map covered `[first_dirty, map_end)`: the next first
    /// dirty offset (`cleaner-offset-checkpoint`).
    pub map_end: i64,
    pub duration_ms: i64,
}

struct SegSnap {
    base: i64,
    next_base: i64,
    size: u64,
    file: Arc<dyn StorageFile>,
    /// Its `.txnindex` entries.
    aborted: Vec<AbortedTxn>,
}

impl Log {
    /// The dirty and clean sections of this log for a cleaner checkpoint
    /// `checkpoint` (out-of-range checkpoints restart at the log start).
    pub fn clean_section(&self, checkpoint: Option<i64>, now_ms: i64) -> Section {
        self.clean_section_below(checkpoint, now_ms, i64::MAX)
    }

    /// [`Log::clean_section`] with every cleanable offset below `limit`
    /// (the partition's last stable offset: the records of a transaction
    /// not yet decided are never cleaned, as Kafka's cleaner stops at the
    /// first unstable offset; an aborted one must not hide the committed
    /// record of its key).
    pub fn clean_section_below(&self, checkpoint: Option<i64>, now_ms: i64, limit: i64) -> Section {
        let g = self.lock();
        let min_lag = g.config.min_compaction_lag_ms;
        let bases: Vec<i64> = g.segments.keys().copied().collect();
        let mut cleanable_end = *bases.last().unwrap_or(&g.log_start);
        for (i, seg) in g.segments.values().enumerate() {
            let Some(&next) = bases.get(i + 1) else { break };
            let too_young = min_lag > 0 && now_ms.saturating_sub(seg.max_timestamp) < min_lag;
            if next > g.hw || next > limit || too_young {
                cleanable_end = seg.base_offset;
                break;
            }
        }
        let first_dirty = match checkpoint {
            Some(c) if c >= g.log_start && c <= g.leo => c,
            _ => g.log_start,
        }
        .min(cleanable_end);
        let mut s = Section {
            first_dirty,
            cleanable_end,
            clean_bytes: 0,
            dirty_bytes: 0,
            oldest_dirty_timestamp: None,
        };
        for (i, seg) in g.segments.values().enumerate() {
            if seg.base_offset >= cleanable_end {
                break;
            }
            let next = bases.get(i + 1).copied().unwrap_or(i64::MAX);
            if next <= first_dirty {
                s.clean_bytes += seg.size;
            } else {
                s.dirty_bytes += seg.size;
                let ts = seg.first_batch_timestamp.unwrap_or(seg.max_timestamp);
                if ts >= 0 {
                    s.oldest_dirty_timestamp =
                        Some(s.oldest_dirty_timestamp.map_or(ts, |o: i64| o.min(ts)));
                }
            }
        }
        s
    }
}

fn corrupt(path: &Path, position: u64, reason: impl ToString) -> StorageError {
    StorageError::CorruptLog {
        path: path.to_path_buf(),
        position,
        reason: reason.to_string(),
    }
}

fn read_segment(s: &SegSnap, dir: &Path) -> Result<Bytes, StorageError> {
    let path = dir.join(file_name(s.base, LOG_SUFFIX));
    let mut buf = vec![0u8; s.size as usize];
    s.file.read_exact_at(&mut buf, 0).at(&path)?;
    Ok(Bytes::from(buf))
}

/// Pure throttle: how long to wait so that `bytes` moved since the start
/// of a cleaning, `elapsed_ms` ago, stay within `max_bytes_per_second`.
pub fn throttle_delay_ms(bytes: u64, elapsed_ms: i64, max_bytes_per_second: f64) -> u64 {
    if max_bytes_per_second.is_nan() || max_bytes_per_second <= 0.0 {
        return 0;
    }
    let needed_ms = bytes as f64 * 1000.0 / max_bytes_per_second;
    let wait = needed_ms - elapsed_ms.max(0) as f64;
    if wait >= 1.0 { wait as u64 } else { 0 }
}

struct Throttle<'a> {
    clock: &'a dyn Clock,
    start_ms: i64,
    bytes: u64,
    rate: f64,
}

impl Throttle<'_> {
    fn add(&mut self, n: u64) {
        self.bytes += n;
        let wait = throttle_delay_ms(
            self.bytes,
            self.clock.now_ms().saturating_sub(self.start_ms),
            self.rate,
        );
        if wait > 0 {
            self.clock.sleep_ms(wait);
        }
    }
}

/// The type of the first control record of control batch `b`, `None`
/// when it has none left (a batch emptied by an earlier cleaning). A
/// record that does not read as a control record is of an unknown type
/// (kept, like every type but COMMIT and ABORT).
fn control_kind(b: &RecordBatch) -> Option<ControlRecordType> {
    if b.header().records_count == 0 {
        return None;
    }
    Some(
        b.control_type(&DecompressLimits::default())
            .unwrap_or(ControlRecordType::Unknown(-1)),
    )
}

/// Feeds batch `b` to `txns`: for a data batch whether it belongs to an
/// aborted transaction, for a control batch what it still marks.
fn track(txns: &mut TxnCleaning, b: &RecordBatch) -> Txn {
    let h = b.header();
    if h.is_control() {
        Txn::Marker(txns.on_marker(h.producer_id, b.last_offset(), control_kind(b)))
    } else {
        Txn::Data {
            aborted: txns.on_data(h.producer_id, h.is_transactional(), b.last_offset()),
        }
    }
}

/// What a batch is to the transactions of a cleaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Txn {
    Data { aborted: bool },
    Marker(Marker),
}

/// Cleans `log` over `section` at `now_ms` (the time that decides delete
/// horizons). Transaction markers at or past `marker_limit` are never
/// removed. Returns what it did; the caller checkpoints `map_end`.
pub(crate) fn clean(
    log: &Log,
    section: Section,
    cfg: &CleanerConfig,
    clock: &dyn Clock,
    now_ms: i64,
    marker_limit: i64,
) -> Result<CleanStats, StorageError> {
    let start_ms = clock.now_ms();
    let storage = log.storage.clone();
    let dir = log.dir.clone();
    let (snaps, config, aborted) = {
        let g = log.lock();
        // Every aborted transaction, also those whose marker lies past the
        // cleaned range (in the segment of its marker).
        let aborted: Vec<AbortedTxn> = g
            .segments
            .values()
            .flat_map(|s| s.txn_index.entries().iter().copied())
            .collect();
        let bases: Vec<i64> = g.segments.keys().copied().collect();
        let snaps: Vec<SegSnap> = g
            .segments
            .values()
            .enumerate()
            .filter(|(_, s)| s.base_offset < section.cleanable_end)
            .filter_map(|(i, s)| {
                Some(SegSnap {
                    base: s.base_offset,
                    next_base: *bases.get(i + 1)?,
                    size: s.size,
                    file: s.log.clone(),
                    aborted: s.txn_index.entries().to_vec(),
                })
            })
            .collect();
        (snaps, g.config.clone(), aborted)
    };
    let mut stats = CleanStats {
        map_end: section.first_dirty,
        ..CleanStats::default()
    };
    let mut throttle = Throttle {
        clock,
        start_ms,
        bytes: 0,
        rate: cfg.io_max_bytes_per_second,
    };
    let limits = DecompressLimits::default();

    // 1. Offset map over the dirty section, whole batches until full. The
    // records of aborted transactions never enter it (a committed record
    // of the same key must not go for them). Reading starts in the
    // segment of the first dirty offset: an aborted transaction whose
    // marker lies below it has no batch left to read.
    let mut map = OffsetMap::new(cfg.dedupe_buffer_size);
    let mut map_txns = TxnCleaning::new(
        aborted
            .iter()
            .filter(|t| t.last_offset >= section.first_dirty)
            .copied(),
    );
    'build: for s in snaps.iter().filter(|s| s.next_base > section.first_dirty) {
        let path = dir.join(file_name(s.base, LOG_SUFFIX));
        let bytes = read_segment(s, &dir)?;
        stats.bytes_read += bytes.len() as u64;
        throttle.add(bytes.len() as u64);
        let mut it = BatchIter::new(bytes);
        while let Some(b) = it.next() {
            let b = b.map_err(|e| corrupt(&path, it.position() as u64, e))?;
            let txn = track(&mut map_txns, &b);
            if b.last_offset() < section.first_dirty {
                continue;
            }
            if txn == (Txn::Data { aborted: false }) {
                let recs = b
                    .collect_records(&limits)
                    .map_err(|e| corrupt(&path, it.position() as u64, e))?;
                if recs.len() > map.free() {
                    if stats.map_end == section.first_dirty {
                        return Err(StorageError::InvalidArgument(format!(
                            "log.cleaner.dedupe.buffer.size holds {} keys, a batch of {} does not fit",
                            map.capacity(),
                            recs.len()
                        )));
                    }
                    break 'build;
                }
                for r in &recs {
                    let off = r.offset(b.base_offset());
                    if let Some(k) = &r.key
                        && off >= section.first_dirty
                    {
                        map.put(k, off);
                    }
                }
            }
            stats.map_end = b.next_offset();
        }
        stats.map_end = stats.map_end.max(s.next_base.min(section.cleanable_end));
    }
    // With nothing dirty the clean segments are still rewritten when a
    // tombstone's delete horizon has passed.
    // 2. Groups of segments below the map's end (or the cleanable end when
    // nothing was dirty), bounded by segment.bytes
    // and a 32-bit relative offset range.
    let upto = if stats.map_end > section.first_dirty {
        stats.map_end
    } else {
        section.cleanable_end
    };
    let to_clean: Vec<&SegSnap> = snaps.iter().filter(|s| s.base < upto).collect();
    let mut groups: Vec<Vec<&SegSnap>> = Vec::new();
    for s in to_clean {
        if let Some(g) = groups.last_mut() {
            let size: u64 = g.iter().map(|x| x.size).sum::<u64>() + s.size;
            if size <= config.segment_bytes && s.next_base - 1 - g[0].base <= i32::MAX as i64 {
                g.push(s);
                continue;
            }
        }
        groups.push(vec![s]);
    }

    // 3. Rewrite and swap each group, reading the log from its start: a
    // marker goes only once a whole pass finds no batch of its
    // transaction.
    let mut txns = TxnCleaning::new(aborted);
    for group in groups {
        let mut out: Vec<u8> = Vec::new();
        let mut changed = false;
        let batches_total: Vec<(usize, Bytes)> = group
            .iter()
            .enumerate()
            .map(|(i, s)| read_segment(s, &dir).map(|b| (i, b)))
            .collect::<Result<_, _>>()?;
        let last_seg = batches_total.len().saturating_sub(1);
        for (i, bytes) in batches_total {
            let path = dir.join(file_name(group[i].base, LOG_SUFFIX));
            stats.bytes_read += bytes.len() as u64;
            throttle.add(bytes.len() as u64);
            let mut it = BatchIter::new(bytes).peekable();
            while let Some(b) = it.next() {
                let b = b.map_err(|e| corrupt(&path, 0, e))?;
                let last_of_group = i == last_seg && it.peek().is_none();
                let retention = match track(&mut txns, &b) {
                    Txn::Data { aborted } => Retention::Records { aborted },
                    Txn::Marker(m) => Retention::Marker(marker_action(
                        m,
                        b.header()
                            .has_delete_horizon()
                            .then_some(b.header().base_timestamp),
                        now_ms,
                        config.delete_retention_ms,
                        b.last_offset() < marker_limit,
                    )),
                };
                let kept = filter_batch(
                    &b,
                    &map,
                    &config,
                    now_ms,
                    last_of_group,
                    retention,
                    &mut stats,
                )
                .map_err(|e| corrupt(&path, 0, e))?;
                match kept {
                    Some(nb) => {
                        changed |= nb.as_bytes() != b.as_bytes();
                        out.extend_from_slice(nb.as_bytes());
                    }
                    None => changed = true,
                }
            }
        }
        // The entries of ABORT markers whose transaction has no batch
        // left leave the index (their markers wait for their horizon).
        let unindexed: HashSet<AbortedTxn> = txns.removed_entries().iter().copied().collect();
        changed |= group
            .iter()
            .flat_map(|s| &s.aborted)
            .any(|t| unindexed.contains(t));
        if !changed {
            continue;
        }
        stats.bytes_written += out.len() as u64;
        throttle.add(out.len() as u64);
        swap_in(
            log, &*storage, &dir, &group, &out, &unindexed, &config, now_ms,
        )?;
        stats.segments_swapped += group.len() as u64;
    }
    stats.duration_ms = clock.now_ms().saturating_sub(start_ms);
    Ok(stats)
}

/// What a cleaning keeps of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retention {
    /// A data batch: the latest record of each key (by the offset map),
    /// tombstones until their horizon; nothing of an aborted transaction
    /// (`aborted`), as Kafka's cleaner discards them.
    Records { aborted: bool },
    /// A control batch.
    Marker(MarkerAction),
}

/// The batch to keep in place of `b`, or `None` to drop it. `keep_empty`:
/// a batch left without records is still written, as a header that keeps
/// its offset range (the last batch of a group).
fn filter_batch(
    b: &RecordBatch,
    map: &OffsetMap,
    config: &crate::LogConfig,
    now_ms: i64,
    keep_empty: bool,
    retention: Retention,
    stats: &mut CleanStats,
) -> Result<Option<RecordBatch>, RecordsError> {
    let h = *b.header();
    let aborted = match retention {
        Retention::Records { aborted } => aborted,
        Retention::Marker(action) => return filter_marker(b, keep_empty, action, stats),
    };
    let recs = b.collect_records(&DecompressLimits::default())?;
    let horizon = h.has_delete_horizon().then_some(h.base_timestamp);
    let mut kept = Vec::with_capacity(recs.len());
    let mut tombstones = false;
    for r in recs.iter() {
        let off = r.offset(h.base_offset);
        let latest = match &r.key {
            Some(k) => map.get(k).is_none_or(|o| o <= off),
            None => true,
        };
        let tombstone = r.value.is_none() && r.key.is_some();
        let expired = tombstone && horizon.is_some_and(|hz| now_ms >= hz);
        if latest && !expired && !aborted {
            tombstones |= tombstone;
            kept.push(r);
        }
    }
    stats.records_kept += kept.len() as u64;
    stats.records_dropped += (recs.len() - kept.len()) as u64;
    let new_horizon = match horizon {
        Some(hz) => Some(hz),
        None if tombstones => Some(now_ms.saturating_add(config.delete_retention_ms)),
        None => None,
    };
    if kept.len() == recs.len() && new_horizon == horizon {
        return Ok(Some(b.clone()));
    }
    if kept.is_empty() {
        return if keep_empty {
            empty_header(b).map(Some)
        } else {
            Ok(None)
        };
    }
    let mut nb = RecordBatchBuilder::new(Compression::from_id(h.compression())?)
        .base_offset(h.base_offset)
        .partition_leader_epoch(h.partition_leader_epoch)
        .producer(h.producer_id, h.producer_epoch, h.base_sequence)
        .transactional(h.is_transactional())
        .last_offset_delta(h.last_offset_delta)
        .delete_horizon(new_horizon);
    if h.is_log_append_time() {
        nb = nb.log_append_time(h.max_timestamp);
    } else if horizon.is_none() {
        nb = nb.base_timestamp(h.base_timestamp);
    }
    for r in kept {
        nb.push_at(
            r.offset(h.base_offset),
            r.timestamp(h.base_timestamp),
            r.key.clone(),
            r.value.clone(),
            r.headers.clone(),
        )?;
    }
    nb.build().map(Some)
}

/// As Kafka's `writeEmptyHeader`: `b` without records, a header-only,
/// uncompressed batch that keeps its offset range, producer and flags. (A
/// compressed batch with an empty payload makes librdkafka abort.)
fn empty_header(b: &RecordBatch) -> Result<RecordBatch, RecordsError> {
    let h = b.header();
    let nb = RecordBatchBuilder::new(Compression::None)
        .base_offset(h.base_offset)
        .partition_leader_epoch(h.partition_leader_epoch)
        .producer(h.producer_id, h.producer_epoch, h.base_sequence)
        .transactional(h.is_transactional())
        .control(h.is_control())
        .last_offset_delta(h.last_offset_delta);
    if h.is_log_append_time() {
        nb.log_append_time(h.max_timestamp)
    } else {
        nb.base_timestamp(h.max_timestamp)
    }
    .build()
}

/// [`filter_batch`] for a control batch: kept, given a delete horizon, or
/// removed (written as an empty header if `keep_empty`).
fn filter_marker(
    b: &RecordBatch,
    keep_empty: bool,
    action: MarkerAction,
    stats: &mut CleanStats,
) -> Result<Option<RecordBatch>, RecordsError> {
    let h = *b.header();
    let count = h.records_count.max(0) as u64;
    match action {
        MarkerAction::Keep => {
            stats.records_kept += count;
            Ok(Some(b.clone()))
        }
        MarkerAction::SetHorizon(horizon) => {
            stats.records_kept += count;
            let mut nb = RecordBatchBuilder::new(Compression::from_id(h.compression())?)
                .base_offset(h.base_offset)
                .partition_leader_epoch(h.partition_leader_epoch)
                .producer(h.producer_id, h.producer_epoch, h.base_sequence)
                .transactional(h.is_transactional())
                .control(true)
                .last_offset_delta(h.last_offset_delta)
                .delete_horizon(Some(horizon));
            if h.is_log_append_time() {
                nb = nb.log_append_time(h.max_timestamp);
            }
            for r in b.collect_records(&DecompressLimits::default())? {
                nb.push_at(
                    r.offset(h.base_offset),
                    r.timestamp(h.base_timestamp),
                    r.key,
                    r.value,
                    r.headers,
                )?;
            }
            nb.build().map(Some)
        }
        MarkerAction::Remove => {
            stats.records_dropped += count;
            if count > 0 {
                stats.markers_removed += 1;
            }
            match keep_empty {
                // already a bare header: nothing to rewrite
                true if count == 0 => Ok(Some(b.clone())),
                true => empty_header(b).map(Some),
                false => Ok(None),
            }
        }
    }
}

fn deleted_path(p: &Path) -> PathBuf {
    let mut d = p.as_os_str().to_owned();
    d.push(".deleted");
    PathBuf::from(d)
}

/// Swaps the cleaned `out` in for the segments of `group`; the group's
/// `.txnindex` entries go with it, except those in `unindexed`.
#[allow(clippy::too_many_arguments)]
fn swap_in(
    log: &Log,
    storage: &dyn Storage,
    dir: &Path,
    group: &[&SegSnap],
    out: &[u8],
    unindexed: &HashSet<AbortedTxn>,
    config: &crate::LogConfig,
    now_ms: i64,
) -> Result<(), StorageError> {
    let base = group[0].base;
    let final_path = dir.join(file_name(base, LOG_SUFFIX));
    let cleaned = PathBuf::from(format!("{}.cleaned", final_path.display()));
    let swap = PathBuf::from(format!("{}.swap", final_path.display()));
    {
        let f = storage.open(&cleaned, true).at(&cleaned)?;
        f.set_len(0).at(&cleaned)?;
        f.write_all_at(out, 0).at(&cleaned)?;
        f.sync().at(&cleaned)?;
    }
    let mut g = log.lock();
    let active = g.segments.keys().next_back().copied();
    let unchanged = group.iter().all(|s| {
        Some(s.base) != active
            && g.segments
                .get(&s.base)
                .is_some_and(|seg| seg.size == s.size)
    });
    if !unchanged {
        drop(g);
        tracing::info!(tp = %log.tp, base, "segments changed during cleaning; skipping the swap");
        storage.remove_file(&cleaned).at(&cleaned)?;
        return Ok(());
    }
    // The group's aborted transactions that still have batches index the
    // new segment.
    let txns: Vec<AbortedTxn> = group
        .iter()
        .filter_map(|s| g.segments.get(&s.base))
        .flat_map(|seg| seg.txn_index.entries().iter().copied())
        .filter(|t| !unindexed.contains(t))
        .collect();
    let txn_final = dir.join(file_name(base, TXN_INDEX_SUFFIX));
    let txn_swap = PathBuf::from(format!("{}.swap", txn_final.display()));
    if !txns.is_empty() {
        let txn_cleaned = PathBuf::from(format!("{}.cleaned", txn_final.display()));
        let f = storage.open(&txn_cleaned, true).at(&txn_cleaned)?;
        let bytes: Vec<u8> = txns.iter().flat_map(|t| t.to_bytes()).collect();
        f.set_len(0).at(&txn_cleaned)?;
        f.write_all_at(&bytes, 0).at(&txn_cleaned)?;
        f.sync().at(&txn_cleaned)?;
        storage.rename(&txn_cleaned, &txn_swap).at(&txn_swap)?;
    }
    storage.rename(&cleaned, &swap).at(&swap)?;
    storage.sync_dir(dir).at(dir)?;
    let mut doomed = Vec::new();
    for s in group {
        if let Some(old) = g.segments.remove(&s.base) {
            for suffix in SEGMENT_SUFFIXES {
                let p = old.path(suffix);
                if storage.exists(&p) {
                    let d = deleted_path(&p);
                    storage.rename(&p, &d).at(&p)?;
                    doomed.push(d);
                }
            }
        }
    }
    storage.sync_dir(dir).at(dir)?;
    storage.rename(&swap, &final_path).at(&final_path)?;
    if !txns.is_empty() {
        storage.rename(&txn_swap, &txn_final).at(&txn_final)?;
    }
    storage.sync_dir(dir).at(dir)?;
    let (mut seg, _, txn_damage) = Segment::open(
        storage,
        dir,
        base,
        config.segment_index_bytes,
        now_ms,
        roll_jitter(config),
        false,
    )?;
    let r = seg.recover(config.index_interval_bytes)?;
    if let Some((position, reason, _)) = r.invalid {
        return Err(corrupt(&final_path, position, reason));
    }
    if let Some(reason) = txn_damage {
        return Err(StorageError::MalformedFile {
            path: txn_final,
            reason,
        });
    }
    seg.on_become_inactive()?;
    seg.flush()?;
    g.segments.insert(base, seg);
    drop(g);
    for d in doomed {
        storage.remove_file(&d).at(&d)?;
    }
    Ok(())
}

/// Reads a whole file (the cleaner checkpoint).
pub(crate) fn read_file(storage: &dyn Storage, p: &Path) -> Result<Vec<u8>, StorageError> {
    let f = storage.open(p, false).at(p)?;
    read_all(&*f).at(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An emptied batch that must stay (the group's last) is written as
    /// Kafka's empty header: uncompressed, no payload, same offset range.
    #[test]
    fn emptied_compressed_batch_becomes_an_uncompressed_header() {
        let mut b = RecordBatchBuilder::new(Compression::Lz4)
            .base_offset(100)
            .producer(7, 1, 5);
        for i in 0..3 {
            b.push(
                1_000 + i,
                Some(Bytes::from_static(b"k")),
                Some(Bytes::from_static(b"v")),
                vec![],
            )
            .unwrap();
        }
        let batch = b.build().unwrap();
        let mut map = OffsetMap::new(1 << 16);
        assert!(map.put(b"k", 200));
        let cfg = crate::LogConfig::default();
        let mut stats = CleanStats::default();
        const KEEP: Retention = Retention::Records { aborted: false };
        assert!(
            filter_batch(&batch, &map, &cfg, 0, false, KEEP, &mut stats)
                .unwrap()
                .is_none()
        );
        let kept = filter_batch(&batch, &map, &cfg, 0, true, KEEP, &mut stats)
            .unwrap()
            .expect("kept as the group's last batch");
        let h = *kept.header();
        assert_eq!(h.compression(), 0);
        assert_eq!(h.records_count, 0);
        assert_eq!(h.batch_length, 49, "header only");
        assert_eq!((h.base_offset, h.last_offset_delta), (100, 2));
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (7, 1, 5)
        );
        assert_eq!(stats.records_dropped, 6);
    }

    #[test]
    fn throttle_table() {
        // (bytes, elapsed ms, rate, expected wait)
        let cases = [
            (1_000u64, 0i64, 1_000.0f64, 1_000u64),
            (1_000, 400, 1_000.0, 600),
            (1_000, 1_000, 1_000.0, 0),
            (1_000, 5_000, 1_000.0, 0),
            (1_000, 0, f64::MAX, 0),
            (1_000, 0, f64::INFINITY, 0),
            (500, 0, 2_000.0, 250),
        ];
        for (i, (b, e, r, want)) in cases.into_iter().enumerate() {
            assert_eq!(throttle_delay_ms(b, e, r), want, "case {i}");
        }
    }
}
