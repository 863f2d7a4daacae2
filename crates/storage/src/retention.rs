//! Retention (`cleanup.policy=delete`): which whole segments to delete, as a
//! pure plan, and a [`Retention`] worker that executes plans.
//!
//! Deleting a segment takes four steps, in this order, so that a crash at
//! any point leaves a consistent log:
//! 1. the log start offset moves past the segment and the segment leaves the
//!    log's map (new reads cannot reach it; reads that already hold a
//!    [`crate::FileRegion`] keep their open file);
//! 2. `log-start-offset-checkpoint` is written;
//! 3. its files are renamed `<name>.deleted` and the dir is synced;
//! 4. after `file.delete.delay.ms` the `.deleted` files are unlinked (on
//!    restart, recovery removes any that are left).
//!
//! ```
//! use weir_storage::retention::{SegmentSummary, plan_retention};
//! use weir_storage::LogConfig;
//! let cfg = LogConfig { retention_ms: 1_000, ..LogConfig::default() };
//! let segs = [
//!     SegmentSummary { base_offset: 0, size: 100, max_timestamp: 10 },
//!     SegmentSummary { base_offset: 5, size: 100, max_timestamp: 5_000 },
//!     SegmentSummary { base_offset: 9, size: 0, max_timestamp: -1 }, // active
//! ];
//! let plan = plan_retention(&segs, 0, 9, &cfg, 5_500);
//! assert_eq!((plan.delete, plan.new_log_start), (vec![0], 5));
//! ```

use crate::checkpoint::LOG_START_OFFSET_CHECKPOINT;
use crate::config::LogConfig;
use crate::error::{IoContext, StorageError};
use crate::log::Log;
use crate::manager::LogManager;
use crate::segment::{SEGMENT_SUFFIXES, Segment};
use std::path::PathBuf;
use std::sync::Mutex;

/// What retention needs to know of one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentSummary {
    pub base_offset: i64,
    pub size: u64,
    /// Largest batch timestamp in the segment (-1 when empty).
    pub max_timestamp: i64,
}

/// Why a segment is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetentionReason {
    /// Wholly below the log start offset (DeleteRecords, an earlier run).
    BelowLogStart,
    /// Largest timestamp older than `retention.ms`.
    Time,
    /// The partition exceeds `retention.bytes`.
    Size,
}

/// A retention decision for one log. `delete` is a prefix of the segments
/// (oldest first) that never includes the last (active) one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RetentionPlan {
    /// Base offsets of the segments to delete.
    pub delete: Vec<i64>,
    pub reasons: Vec<RetentionReason>,
    /// The log start offset after the deletion (at least the current one).
    pub new_log_start: i64,
}

/// Decides which segments to delete. `segments` are the log's segments,
/// oldest first, the last one active; only segments whose successor starts
/// at or below `high_watermark` are considered (as Kafka does). Retention
/// by time and size applies when `cleanup.policy` contains `delete`;
/// segments wholly below `log_start` are always deleted.
pub fn plan_retention(
    segments: &[SegmentSummary],
    log_start: i64,
    high_watermark: i64,
    config: &LogConfig,
    now_ms: i64,
) -> RetentionPlan {
    let mut plan = RetentionPlan {
        new_log_start: log_start,
        ..RetentionPlan::default()
    };
    let total: u64 = segments.iter().map(|s| s.size).sum();
    let mut excess: i64 = if config.delete() && config.retention_bytes >= 0 {
        (total as i64).saturating_sub(config.retention_bytes)
    } else {
        0
    };
    for pair in segments.windows(2) {
        let (seg, next) = (pair[0], pair[1]);
        if next.base_offset > high_watermark {
            break;
        }
        let reason = if next.base_offset <= log_start {
            RetentionReason::BelowLogStart
        } else if config.delete()
            && config.retention_ms >= 0
            && seg.max_timestamp >= 0
            && now_ms.saturating_sub(seg.max_timestamp) > config.retention_ms
        {
            RetentionReason::Time
        } else if excess > 0 && excess >= seg.size as i64 {
            RetentionReason::Size
        } else {
            break;
        };
        excess -= seg.size as i64;
        plan.delete.push(seg.base_offset);
        plan.reasons.push(reason);
        plan.new_log_start = plan.new_log_start.max(next.base_offset);
    }
    plan
}

/// Segments taken out of a log by retention, not yet renamed.
#[derive(Debug)]
pub(crate) struct Taken {
    segments: Vec<Segment>,
}

impl Log {
    /// The summaries [`plan_retention`] takes, oldest first.
    pub fn segment_summaries(&self) -> Vec<SegmentSummary> {
        self.lock()
            .segments
            .values()
            .map(|s| SegmentSummary {
                base_offset: s.base_offset,
                size: s.size,
                max_timestamp: s.max_timestamp,
            })
            .collect()
    }

    /// Plans retention for this log at `now_ms`.
    pub fn plan_retention(&self, now_ms: i64) -> RetentionPlan {
        let summaries = self.segment_summaries();
        let g = self.lock();
        plan_retention(&summaries, g.log_start, g.hw, &g.config, now_ms)
    }

    /// Step 1: moves the log start offset and takes the planned segments
    /// out of the log (the plan is re-checked against the current segments:
    /// only a prefix that is still present and not active is taken).
    pub(crate) fn take_for_retention(&self, plan: &RetentionPlan) -> Taken {
        let mut g = self.lock();
        let mut taken = Vec::new();
        for &base in &plan.delete {
            let mut it = g.segments.keys();
            let (Some(&first), Some(&second)) = (it.next(), it.next()) else {
                break;
            };
            if first != base || second > g.hw {
                break;
            }
            if let Some(seg) = g.segments.remove(&base) {
                taken.push(seg);
            }
            g.log_start = g.log_start.max(second);
        }
        if g.hw < g.log_start {
            g.hw = g.log_start;
        }
        // Offsets below the first remaining segment are gone, so the
        // recovery point may move up to its base, but no further: above
        // it (e.g. to a log start that DeleteRecords put inside that
        // segment) it would claim unsynced batches of the segment durable,
        // and recovery would take their torn tail for damage.
        let first = g.segments.keys().next().copied().unwrap_or(g.leo);
        if g.recovery_point < first {
            g.recovery_point = first.min(g.leo);
        }
        g.trim_epochs_to_log_start(&*self.storage, &self.dir);
        g.debug_check();
        Taken { segments: taken }
    }
}

/// A file renamed `.deleted`, unlinked once `due_ms` has passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingDelete {
    pub path: PathBuf,
    pub due_ms: i64,
}

/// What one retention run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionReport {
    pub segments_deleted: usize,
    pub bytes_deleted: u64,
    pub files_unlinked: usize,
}

/// Runs retention over a [`LogManager`] (every
/// `log.retention.check.interval.ms`) and unlinks `.deleted` files when
/// their delay has passed. Time is an input.
#[derive(Debug, Default)]
pub struct Retention {
    pending: Mutex<Vec<PendingDelete>>,
}

impl Retention {
    pub fn new() -> Self {
        Self::default()
    }

    /// Files renamed `.deleted` and not yet unlinked.
    pub fn pending(&self) -> Vec<PendingDelete> {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Plans and executes retention for every log, then unlinks due files.
    /// Returns the first error after trying every log.
    pub fn run(&self, mgr: &LogManager, now_ms: i64) -> Result<RetentionReport, StorageError> {
        let mut report = RetentionReport::default();
        let mut taken = Vec::new();
        for log in mgr.logs() {
            let plan = log.plan_retention(now_ms);
            if plan.delete.is_empty() {
                continue;
            }
            let t = log.take_for_retention(&plan);
            if !t.segments.is_empty() {
                let cfg = log.config();
                tracing::info!(
                    tp = %log.topic_partition(),
                    segments = t.segments.len(),
                    log_start = log.log_start_offset(),
                    reasons = ?plan.reasons,
                    "retention deletes segments"
                );
                taken.push((log, t, cfg.file_delete_delay_ms));
            }
        }
        if taken.is_empty() {
            report.files_unlinked = self.unlink_due(mgr, now_ms)?;
            return Ok(report);
        }
        // Step 2: the new log start offsets are durable before any file goes.
        mgr.checkpoint()?;
        let storage = mgr.storage();
        let mut first_err = None;
        for (log, t, delay) in taken {
            for seg in t.segments {
                report.segments_deleted += 1;
                report.bytes_deleted += seg.size;
                match rename_deleted(&*storage, &seg) {
                    Ok(paths) => {
                        let due_ms = now_ms.saturating_add(delay.max(0));
                        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
                        p.extend(paths.into_iter().map(|path| PendingDelete { path, due_ms }));
                    }
                    Err(e) => {
                        tracing::error!(tp = %log.topic_partition(), error = %e, "renaming a deleted segment failed");
                        first_err.get_or_insert(e);
                    }
                }
            }
            if let Err(e) = storage.sync_dir(&log.dir).at(&log.dir) {
                first_err.get_or_insert(e);
            }
        }
        report.files_unlinked = self.unlink_due(mgr, now_ms)?;
        first_err.map_or(Ok(report), Err)
    }

    /// Unlinks the `.deleted` files whose delay has passed.
    pub fn unlink_due(&self, mgr: &LogManager, now_ms: i64) -> Result<usize, StorageError> {
        let due: Vec<PendingDelete> = {
            let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            let (due, keep) = std::mem::take(&mut *p)
                .into_iter()
                .partition(|d| d.due_ms <= now_ms);
            *p = keep;
            due
        };
        let storage = mgr.storage();
        let mut n = 0;
        for d in due {
            if storage.exists(&d.path) {
                storage.remove_file(&d.path).at(&d.path)?;
                n += 1;
            }
        }
        Ok(n)
    }
}

/// Step 3: renames the segment's files `.deleted`; returns the new paths.
fn rename_deleted(
    storage: &dyn crate::backend::Storage,
    seg: &Segment,
) -> Result<Vec<PathBuf>, StorageError> {
    let mut out = Vec::new();
    for s in SEGMENT_SUFFIXES {
        let p = seg.path(s);
        let mut d = p.clone().into_os_string();
        d.push(".deleted");
        let d = PathBuf::from(d);
        if storage.exists(&p) {
            storage.rename(&p, &d).at(&p)?;
            out.push(d);
        }
    }
    Ok(out)
}

/// The checkpoint file retention writes first, for documentation and tests.
pub const CHECKPOINT_FILE: &str = LOG_START_OFFSET_CHECKPOINT;

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(base: i64, size: u64, ts: i64) -> SegmentSummary {
        SegmentSummary {
            base_offset: base,
            size,
            max_timestamp: ts,
        }
    }

    #[test]
    fn plan_table() {
        let time = LogConfig {
            retention_ms: 100,
            ..LogConfig::default()
        };
        let size = LogConfig {
            retention_ms: -1,
            retention_bytes: 150,
            ..LogConfig::default()
        };
        let compact = LogConfig {
            retention_ms: 100,
            cleanup_policy: "compact".into(),
            ..LogConfig::default()
        };
        let segs = [
            seg(0, 100, 10),
            seg(10, 100, 20),
            seg(20, 100, 500),
            seg(30, 0, -1),
        ];
        // (config, log start, hw, now, expected deletes, expected start)
        type Case<'a> = (&'a LogConfig, i64, i64, i64, Vec<i64>, i64);
        let cases: Vec<Case<'_>> = vec![
            (&time, 0, 30, 100, vec![], 0),
            (&time, 0, 30, 115, vec![0], 10),
            (&time, 0, 30, 200, vec![0, 10], 20),
            // Never the active segment, even when everything is expired.
            (&time, 0, 30, 10_000, vec![0, 10, 20], 30),
            // Not past the high watermark.
            (&time, 0, 15, 10_000, vec![0], 10),
            // Size: 300 bytes, keep 150 → delete one (200 left), not two.
            (&size, 0, 30, 0, vec![0], 10),
            (&compact, 0, 30, 10_000, vec![], 0),
            // Below the log start offset: always.
            (&compact, 20, 30, 0, vec![0, 10], 20),
        ];
        for (i, (cfg, start, hw, now, del, new_start)) in cases.into_iter().enumerate() {
            let p = plan_retention(&segs, start, hw, cfg, now);
            assert_eq!(p.delete, del, "case {i}");
            assert_eq!(p.new_log_start, new_start, "case {i}");
        }
        // A stop at the first kept segment: no holes.
        let holes = [seg(0, 100, 500), seg(10, 100, 10), seg(20, 0, -1)];
        assert!(plan_retention(&holes, 0, 20, &time, 200).delete.is_empty());
    }

    /// DeleteRecords moves the log start only; the segments below it go
    /// through the retention path: checkpoint, `.deleted`, delayed unlink,
    /// and a reader holding one of them keeps reading.
    #[test]
    fn delete_records_goes_through_retention() {
        use crate::TopicPartition;
        use crate::backend::{MemStorage, Storage};
        use crate::checkpoint::read_checkpoint;
        use crate::manager::LogManagerConfig;
        use crate::testing::batch_with;
        use std::sync::Arc;

        let mem = MemStorage::new();
        let storage: Arc<dyn Storage> = Arc::new(mem.clone());
        let data = PathBuf::from("/data");
        let mgr = LogManager::open(
            LogManagerConfig::with_storage(vec![data.clone()], storage),
            0,
        )
        .unwrap();
        let cfg = LogConfig {
            segment_bytes: 1024,
            segment_index_bytes: 8 * 1024,
            file_delete_delay_ms: 1_000,
            message_timestamp_after_max_ms: i64::MAX,
            message_timestamp_before_max_ms: i64::MAX,
            ..LogConfig::default()
        };
        let tp = TopicPartition::new("d", 0);
        let log = mgr.create_log(&tp, [2; 16], cfg).unwrap();
        let v = vec![1u8; 300];
        for i in 0..9 {
            log.append(&mut batch_with(&[(None, v.as_slice(), i)]), i)
                .unwrap();
        }
        log.set_high_watermark(log.log_end_offset());
        let bases = log.segment_base_offsets();
        assert!(bases.len() >= 3, "{bases:?}");
        let deleted = || {
            mem.list_dir(&data.join("d-0"))
                .unwrap()
                .iter()
                .filter(|(n, _)| n.ends_with(".deleted"))
                .count()
        };
        let region = log.read(0, 1 << 20, log.high_watermark(), true).unwrap();
        let before = region.regions[0].read_to_vec().unwrap();

        // Into the middle of the third segment: the first two go.
        let target = bases[2] + 1;
        assert_eq!(log.delete_records_before(target).unwrap(), target);
        assert_eq!(log.log_start_offset(), target);
        assert!(
            log.read(bases[2], 1 << 20, log.high_watermark(), true)
                .is_err()
        );
        assert!(
            log.read(target, 1 << 20, log.high_watermark(), true)
                .is_ok()
        );
        // Moving backwards is a no-op; beyond the high watermark an error.
        assert_eq!(log.delete_records_before(1).unwrap(), target);
        assert!(log.delete_records_before(log.high_watermark() + 1).is_err());
        // Nothing is deleted until retention runs (so the log start is
        // checkpointed before any file goes).
        assert_eq!(log.segment_count(), bases.len());
        assert_eq!(deleted(), 0);

        let retention = Retention::new();
        let r = retention.run(&mgr, 10).unwrap();
        assert_eq!(r.segments_deleted, 2);
        assert_eq!(log.segment_base_offsets(), bases[2..].to_vec());
        assert_eq!(log.log_start_offset(), target);
        let ck = read_checkpoint(&mem, &data.join(CHECKPOINT_FILE)).unwrap();
        assert_eq!(ck.get(&tp), Some(&target));
        assert_eq!(deleted(), 6);
        assert_eq!(region.regions[0].read_to_vec().unwrap(), before);

        assert_eq!(retention.unlink_due(&mgr, 1_009).unwrap(), 0);
        assert_eq!(deleted(), 6);
        assert_eq!(retention.unlink_due(&mgr, 1_010).unwrap(), 6);
        assert_eq!(deleted(), 0);
        assert_eq!(region.regions[0].read_to_vec().unwrap(), before);
    }
}
