//! Opening a log directory: leftover files, index sanity checks, and crash
//! recovery (see `docs/storage-format.md`, "Recovery").

use crate::backend::Storage;
use crate::checkpoint::{PARTITION_METADATA, decode_partition_metadata};
use crate::config::{LogConfig, TopicPartition};
use crate::epochs::{self, LeaderEpochCache};
use crate::error::{IoContext, StorageError};
use crate::log::{Inner, Log, remove_producer_snapshots_above, roll_jitter};
use crate::segment::{
    Damage, INDEX_SUFFIX, LOG_SUFFIX, SEGMENT_SUFFIXES, Segment, TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX, parse_file_name, read_all,
};
use crate::txn_index::AbortedTxn;
use std::collections::HashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use weir_protocol::records::ControlRecordType;

/// What the log manager knows about a log it opens.
#[derive(Debug, Clone, Copy)]
pub struct OpenOptions {
    /// From `recovery-point-offset-checkpoint` (0 when absent).
    pub recovery_point: i64,
    /// From `log-start-offset-checkpoint` (0 when absent).
    pub log_start: i64,
    /// The clean-shutdown marker was present.
    pub clean_shutdown: bool,
    /// Also CRC-check segments below the recovery point (slow).
    pub verify_flushed: bool,
    pub now_ms: i64,
}

impl Log {
    /// Opens and, unless shut down cleanly, recovers the log in `dir`.
    pub fn open(
        storage: Arc<dyn Storage>,
        dir: &Path,
        tp: TopicPartition,
        config: LogConfig,
        opts: OpenOptions,
    ) -> Result<Log, StorageError> {
        let topic_id = read_topic_id(&*storage, dir)?;
        let files = storage.list_dir(dir).at(dir)?;
        let path = |n: &str| dir.join(n);

        // 1. Leftovers of interrupted deletes and cleanings.
        let names: BTreeSet<&str> = files
            .iter()
            .filter(|(_, is_dir)| !is_dir)
            .map(|(n, _)| n.as_str())
            .collect();
        let mut swaps = Vec::new();
        let mut logs = BTreeSet::new();
        let mut indexes = Vec::new();
        for &name in &names {
            if name.ends_with(".deleted") || name.ends_with(".cleaned") {
                // A delete already decided, or a cleaning that never reached
                // the swap step: the originals are still in place.
                storage.remove_file(&path(name)).at(&path(name))?;
            } else if let Some(stem) = name.strip_suffix(".swap") {
                swaps.push(stem.to_string());
            } else if let Some((base, suffix)) = parse_file_name(name) {
                match suffix {
                    LOG_SUFFIX => {
                        logs.insert(base);
                    }
                    INDEX_SUFFIX | TIME_INDEX_SUFFIX | TXN_INDEX_SUFFIX => {
                        indexes.push((base, name.to_string()))
                    }
                    _ => {}
                }
            }
        }
        complete_swaps(&*storage, dir, &swaps, &names, &mut logs)?;
        for (base, name) in indexes {
            if !logs.contains(&base) && storage.exists(&path(&name)) {
                storage.remove_file(&path(&name)).at(&path(&name))?;
            }
        }

        // An empty segment at `base` (the log's first, or the next active one).
        let new_segment = |base: i64| {
            Segment::create(
                &*storage,
                dir,
                base,
                config.segment_index_bytes,
                opts.now_ms,
                roll_jitter(&config),
            )
        };

        // 2. Open segments.
        let rp = opts.recovery_point.max(0);
        let first_unflushed = if opts.clean_shutdown {
            i64::MAX
        } else {
            logs.range(..=rp).next_back().copied().unwrap_or(i64::MIN)
        };
        let mut segments = BTreeMap::new();
        let mut rebuild = BTreeSet::new();
        // Segments whose aborted-transaction index is damaged.
        let mut txn_damaged = BTreeSet::new();
        for &base in &logs {
            let (seg, bad_index, txn_damage) = Segment::open(
                &*storage,
                dir,
                base,
                config.segment_index_bytes,
                opts.now_ms,
                roll_jitter(&config),
                base < first_unflushed,
            )?;
            if bad_index {
                rebuild.insert(base);
            }
            if txn_damage.is_some() {
                txn_damaged.insert(base);
            }
            segments.insert(base, seg);
        }
        if segments.is_empty() {
            let start = opts.log_start.max(0);
            let seg = new_segment(start)?;
            segments.insert(start, seg);
        }

        // 3. Recover.
        let bases: Vec<i64> = segments.keys().copied().collect();
        let last_base = bases.last().copied();
        let mut recovered_any = false;
        let mut cut_after = None;
        let mut damaged_active = None;
        for &base in &bases {
            let unflushed = base >= first_unflushed;
            let Some(seg) = segments.get_mut(&base) else {
                continue;
            };
            if !unflushed && !rebuild.contains(&base) && !opts.verify_flushed {
                continue;
            }
            let r = seg.recover(config.index_interval_bytes)?;
            recovered_any = true;
            if r.txn_mismatches > 0 {
                txn_damaged.insert(base);
            }
            if let Some((position, reason, expected)) = r.invalid {
                if !unflushed || expected < rp || opts.clean_shutdown {
                    // Damage in data that was flushed: not a torn write.
                    if Some(base) != last_base {
                        // An inactive segment keeps its bytes; reads stop
                        // before the damage and fail from its offset on.
                        seg.record_damage(Damage {
                            position,
                            offset: expected,
                            reason,
                        });
                        continue;
                    }
                    // The active segment keeps its bytes too and stops
                    // being appended to; see `after_damaged_active`.
                    seg.record_damage(Damage {
                        position,
                        offset: expected,
                        reason,
                    });
                    damaged_active = Some(after_damaged_active(seg, rp, expected));
                    break;
                }
                seg.cut_log(r.valid_bytes)?;
                tracing::warn!(
                    tp = %tp, segment = base, position, %reason,
                    truncated = r.truncated_bytes, "truncated torn or corrupt tail"
                );
                cut_after = Some(base);
                break;
            }
            // An unflushed segment was rolled at its own end offset, so the
            // next segment must start right there; a gap means this one lost
            // its tail in the crash while a later one kept bytes.
            let next_base = segments.range(base + 1..).next().map(|(b, _)| *b);
            if unflushed
                && let (Some(nb), Some(seg)) = (next_base, segments.get(&base))
                && seg.next_offset != nb
            {
                tracing::warn!(tp = %tp, segment = base, next = nb, "segment ends before the next one starts; dropping later segments");
                cut_after = Some(base);
                break;
            }
        }
        if let Some(base) = cut_after {
            let later: Vec<i64> = segments.range(base + 1..).map(|(b, _)| *b).collect();
            for b in later {
                if let Some(seg) = segments.remove(&b) {
                    seg.delete(&*storage)?;
                }
            }
        }

        // After a clean shutdown the active segment was not scanned: check
        // that it ends on a batch boundary.
        let last = *segments.keys().next_back().expect("at least one segment");
        let scanned_last = !opts.clean_shutdown || rebuild.contains(&last) || opts.verify_flushed;
        if !scanned_last && let Some(active) = segments.get_mut(&last) {
            match active.verify_tail() {
                Ok(_) => {}
                Err(StorageError::CorruptLog { reason, .. }) => {
                    // The index does not lead to the tail: rebuild it.
                    tracing::warn!(tp = %tp, segment = last, %reason, "recovering the active segment");
                    let r = active.recover(config.index_interval_bytes)?;
                    recovered_any = true;
                    if let Some((position, reason, expected)) = r.invalid {
                        active.record_damage(Damage {
                            position,
                            offset: expected,
                            reason,
                        });
                        damaged_active = Some(after_damaged_active(active, rp, expected));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        if let Some(base) = damaged_active {
            tracing::error!(tp = %tp, segment = last, next = base, "damaged active segment: appends go to a new segment");
            let seg = new_segment(base)?;
            segments.insert(base, seg);
            recovered_any = true;
        }

        // A damaged transaction index (a torn entry, garbage, an entry
        // without its marker in the log) may have lost entries that its
        // batches cannot give back alone: rebuild every index from the
        // log. (Whole entries a crash lost with nothing torn leave no
        // trace here; the broker indexes them again when it replays the
        // batches after its producer snapshot, below which entries are
        // durable.)
        if txn_damaged.iter().any(|b| segments.contains_key(b)) {
            tracing::warn!(tp = %tp, segments = ?txn_damaged, "damaged aborted-transaction index; rebuilding every segment's from the log");
            rebuild_txn_indexes(&*storage, &tp, &mut segments)?;
        }

        // 4. The active segment.
        let active_base = *segments.keys().next_back().expect("at least one segment");
        for (b, seg) in segments.iter_mut() {
            if *b != active_base && recovered_any {
                // Rebuilt indexes of inactive segments are trimmed, as on
                // roll (on a full disk they stay in memory, see `recover`).
                match seg.on_become_inactive() {
                    Err(e) if e.is_no_space() => {
                        tracing::warn!(tp = %tp, segment = *b, error = %e, "index kept in memory: no space to write it");
                    }
                    r => r?,
                }
            }
        }
        let active = segments.get_mut(&active_base).expect("active segment");
        active.make_active()?;
        let leo = active.next_offset;
        // What was scanned is now the truth: make it durable before the
        // recovery point covers it. On a full disk the log still opens for
        // reading, with the recovery point where it was (the next start
        // recovers the same segments again).
        let mut recovery_durable = recovered_any;
        if recovered_any {
            let synced = segments
                .values()
                .try_for_each(|seg| seg.flush())
                .and_then(|()| storage.sync_dir(dir).at(dir));
            match synced {
                Err(e) if e.is_no_space() => {
                    tracing::warn!(tp = %tp, error = %e, "recovered log not synced: no space; the recovery point stays");
                    recovery_durable = false;
                }
                r => r?,
            }
        }
        let first_base = *segments.keys().next().expect("segment");
        let mut log_start = opts.log_start.max(first_base);
        let mut leo = leo;
        let emptied = log_start > leo;
        if emptied {
            // Everything left is below the log start offset (e.g. records
            // deleted by DeleteRecords were then lost in the crash): start
            // empty at the log start offset.
            tracing::warn!(tp = %tp, log_start, leo, "log end below log start; starting empty");
            for (_, seg) in std::mem::take(&mut segments) {
                seg.delete(&*storage)?;
            }
            let seg = new_segment(log_start)?;
            segments.insert(log_start, seg);
            leo = log_start;
        }
        log_start = log_start.min(leo);
        // Producer snapshots above the log end offset describe batches the
        // crash took (or a truncation the checkpoint never saw): remove them
        // before the broker loads one (Kafka does the same on load).
        let snapshots_above = if emptied { i64::MIN } else { leo };
        if remove_producer_snapshots_above(&*storage, dir, snapshots_above)? > 0 {
            storage.sync_dir(dir).at(dir)?;
        }
        let recovery_point = if opts.clean_shutdown || recovery_durable {
            leo
        } else {
            rp.min(leo)
        };
        let epochs = load_epochs(&*storage, dir, &tp, &segments, log_start, leo);
        let log = Log {
            tp,
            topic_id,
            dir: dir.to_path_buf(),
            storage,
            inner: Mutex::new(Inner {
                config,
                segments,
                log_start,
                leo,
                hw: leo,
                recovery_point,
                unflushed_messages: 0,
                last_flush_ms: opts.now_ms,
                last_now_ms: opts.now_ms,
                truncations: 0,
                closed: false,
                epochs,
                // Recovery may have created segment files (an emptied log)
                // after its last directory sync: the first flush syncs it.
                flush: crate::log::FlushState::with_directory_unsynced(),
            }),
            owner: Mutex::new(std::sync::Weak::new()),
        };
        log.lock().debug_check();
        Ok(log)
    }
}

/// The leader epochs of a log being opened: its `leader-epoch-checkpoint`,
/// trimmed to what recovery kept (entries at or after the LEO go, the log
/// start cuts the first ones, as Kafka does on load). A missing or
/// malformed file is rebuilt from the partitionLeaderEpoch of the batches
/// (headers only), with a warning; the log opens in any case. The file is
/// rewritten when this changed it (a failure to write is logged: the next
/// open does the same again).
fn load_epochs(
    storage: &dyn Storage,
    dir: &Path,
    tp: &TopicPartition,
    segments: &BTreeMap<i64, Segment>,
    log_start: i64,
    leo: i64,
) -> LeaderEpochCache {
    let (mut cache, mut changed) = match epochs::read(storage, dir) {
        Ok(Some(cache)) => (cache, false),
        Ok(None) => {
            let cache = epochs_from_batches(tp, segments);
            if !cache.is_empty() {
                tracing::warn!(%tp, entries = cache.entries().len(), "no leader epoch checkpoint; rebuilt it from the batches");
            }
            (cache, true)
        }
        Err(e) => {
            let cache = epochs_from_batches(tp, segments);
            tracing::warn!(%tp, error = %e, entries = cache.entries().len(), "unreadable leader epoch checkpoint; rebuilt it from the batches");
            (cache, true)
        }
    };
    changed |= cache.truncate_from_end(leo);
    changed |= cache.truncate_from_start(log_start);
    if changed && let Err(e) = epochs::write(storage, dir, &cache) {
        tracing::warn!(%tp, error = %e, "cannot write the leader epoch checkpoint; it is rebuilt or trimmed again at the next start");
    }
    cache
}

/// The leader epochs the batches of `segments` carry, as appends record
/// them: an epoch newer than the latest starts at its first batch. Reads
/// batch headers only; a segment's walk stops at its first bad header.
fn epochs_from_batches(tp: &TopicPartition, segments: &BTreeMap<i64, Segment>) -> LeaderEpochCache {
    let mut cache = LeaderEpochCache::default();
    for seg in segments.values() {
        let mut sc = crate::batch::BatchScanner::new(&*seg.log, 0, seg.readable_end(), false);
        loop {
            match sc.next_batch() {
                Ok(Some(crate::batch::Scanned::Batch { header, .. })) => {
                    let epoch = header.partition_leader_epoch;
                    if epoch >= 0 && cache.latest_epoch().is_none_or(|l| epoch > l) {
                        cache.assign(epoch, header.base_offset);
                    }
                }
                Ok(Some(crate::batch::Scanned::Invalid { .. }) | None) => break,
                Err(e) => {
                    tracing::warn!(%tp, segment = seg.base_offset, error = %e, "cannot read batch headers to rebuild leader epochs");
                    break;
                }
            }
        }
    }
    cache
}

/// Where appends go after damage found in the active segment `seg` below
/// the recovery point: a new segment at the recovery point, so no offset the
/// log may have handed out is used twice (the offsets from the damage up to
/// it stay in the damaged segment, where reads fail). The recovery point is
/// only trusted inside the offsets the segment can hold.
fn after_damaged_active(seg: &Segment, rp: i64, expected: i64) -> i64 {
    let max = seg.base_offset.saturating_add(i32::MAX as i64);
    rp.clamp(expected.max(seg.base_offset + 1), max.max(expected + 1))
}

/// Rebuilds the aborted-transaction index of every segment from the
/// batches, oldest first, as the producer state would have written them:
/// a producer's transactional batch opens its transaction when none is
/// open, its COMMIT or ABORT marker closes it, and an ABORT of an open
/// transaction is indexed with the first offset of the earliest other
/// transaction still open (else its own offset + 1) as last stable offset.
/// Reads every batch header of the log (and the records of its control
/// batches): for damage, not for every start. A transaction begun before
/// the first segment counts from its first batch in the log.
pub(crate) fn rebuild_txn_indexes(
    storage: &dyn Storage,
    tp: &TopicPartition,
    segments: &mut BTreeMap<i64, Segment>,
) -> Result<(), StorageError> {
    // Open transactions: by first offset, and each producer's.
    let mut open: BTreeMap<i64, i64> = BTreeMap::new();
    let mut first_of: HashMap<i64, i64> = HashMap::new();
    let mut total = 0usize;
    for seg in segments.values_mut() {
        let mut entries = Vec::new();
        let path = seg.path(LOG_SUFFIX);
        let mut sc = crate::batch::BatchScanner::new(&*seg.log, 0, seg.readable_end(), false);
        while let Some(crate::batch::Scanned::Batch {
            position,
            header: h,
        }) = sc.next_batch().at(&path)?
        {
            if h.producer_id < 0 {
                continue;
            }
            if !h.is_control() {
                if h.is_transactional() && !first_of.contains_key(&h.producer_id) {
                    first_of.insert(h.producer_id, h.base_offset);
                    open.insert(h.base_offset, h.producer_id);
                }
                continue;
            }
            let kind = crate::batch::read_control_type(&*seg.log, position, &h).at(&path)?;
            if !matches!(
                kind,
                Some(ControlRecordType::Abort | ControlRecordType::Commit)
            ) {
                continue;
            }
            let Some(first) = first_of.remove(&h.producer_id) else {
                continue;
            };
            open.remove(&first);
            if kind == Some(ControlRecordType::Abort) {
                entries.push(AbortedTxn {
                    producer_id: h.producer_id,
                    first_offset: first,
                    last_offset: h.base_offset,
                    last_stable_offset: open.keys().next().copied().unwrap_or(h.base_offset + 1),
                });
            }
        }
        total += entries.len();
        seg.txn_index.replace(storage, entries)?;
        seg.txn_index.sync()?;
    }
    tracing::info!(%tp, entries = total, "rebuilt the aborted-transaction indexes");
    Ok(())
}

fn read_topic_id(storage: &dyn Storage, dir: &Path) -> Result<[u8; 16], StorageError> {
    let p = dir.join(PARTITION_METADATA);
    if !storage.exists(&p) {
        return Ok([0; 16]);
    }
    let f = storage.open(&p, false).at(&p)?;
    let text =
        String::from_utf8(read_all(&*f).at(&p)?).map_err(|_| StorageError::MalformedFile {
            path: p.clone(),
            reason: "not UTF-8".into(),
        })?;
    decode_partition_metadata(&text)
        .map_err(|reason| StorageError::MalformedFile { path: p, reason })
}

/// `.swap` files are the complete output of a cleaning that was being
/// swapped in: finish the swap. The swapped segment replaces every old
/// segment whose base offset lies in its offset range; index swaps are
/// dropped (rebuilt from the log).
fn complete_swaps(
    storage: &dyn Storage,
    dir: &Path,
    swaps: &[String],
    names: &BTreeSet<&str>,
    logs: &mut BTreeSet<i64>,
) -> Result<(), StorageError> {
    let name = |base: i64, suffix: &str| crate::segment::file_name(base, suffix);
    for stem in swaps {
        let swap_path = dir.join(format!("{stem}.swap"));
        let Some((base, suffix)) = parse_file_name(stem) else {
            continue;
        };
        if suffix == TXN_INDEX_SUFFIX {
            // The cleaner renames it `.swap` before its log's swap and into
            // place after it (see `cleaner::worker`): with the log's swap
            // here it goes with it (below); with the log's `.cleaned` here
            // the swap never started; with neither, it completed.
            let log = name(base, LOG_SUFFIX);
            if names.contains(format!("{log}.swap").as_str()) {
                continue;
            }
            if names.contains(format!("{log}.cleaned").as_str()) {
                storage.remove_file(&swap_path).at(&swap_path)?;
            } else {
                let target = dir.join(name(base, TXN_INDEX_SUFFIX));
                storage.rename(&swap_path, &target).at(&target)?;
                storage.sync_dir(dir).at(dir)?;
            }
            continue;
        }
        if suffix != LOG_SUFFIX {
            storage.remove_file(&swap_path).at(&swap_path)?;
            continue;
        }
        let f = storage.open(&swap_path, false).at(&swap_path)?;
        let size = f.len().at(&swap_path)?;
        let mut last = base;
        let mut sc = crate::batch::BatchScanner::new(&*f, 0, size, true);
        while let Some(item) = sc.next_batch().at(&swap_path)? {
            match item {
                crate::batch::Scanned::Batch { header, .. } => last = header.last_offset(),
                crate::batch::Scanned::Invalid { position, reason } => {
                    return Err(StorageError::CorruptLog {
                        path: swap_path,
                        position,
                        reason,
                    });
                }
            }
        }
        drop(f);
        let replaced: Vec<i64> = logs.range(base..=last).copied().collect();
        for b in replaced {
            for s in SEGMENT_SUFFIXES {
                let p = dir.join(name(b, s));
                if storage.exists(&p) {
                    storage.remove_file(&p).at(&p)?;
                }
            }
            logs.remove(&b);
        }
        let target: PathBuf = dir.join(name(base, LOG_SUFFIX));
        storage.rename(&swap_path, &target).at(&target)?;
        for s in [INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
            let p = dir.join(name(base, s));
            if storage.exists(&p) {
                storage.remove_file(&p).at(&p)?;
            }
        }
        // The cleaned segment's transaction index, when it has entries.
        let txn_swap = dir.join(format!("{}.swap", name(base, TXN_INDEX_SUFFIX)));
        if storage.exists(&txn_swap) {
            let p = dir.join(name(base, TXN_INDEX_SUFFIX));
            storage.rename(&txn_swap, &p).at(&p)?;
        }
        logs.insert(base);
        storage.sync_dir(dir).at(dir)?;
    }
    Ok(())
}
