//! The leader epoch cache of a partition (KIP-101, KIP-279): for each
//! leader epoch that wrote to the log, the offset of its first record, kept
//! in `leader-epoch-checkpoint` in the partition directory in Kafka's text
//! format (`docs/storage-format.md`). A follower asks the leader where one
//! of its epochs ended ([`LeaderEpochCache::end_offset_for`]) and truncates
//! there instead of at its high watermark.
//!
//! The cache is a pure value; [`Log`](crate::Log) owns one, updates it on
//! appends, truncations and log start moves, and writes it with
//! [`write`] (atomically, through the storage backend) whenever it changes.
//!
//! ```
//! use weir_storage::epochs::{EpochEntry, LeaderEpochCache};
//!
//! let mut cache = LeaderEpochCache::default();
//! assert!(cache.assign(0, 0));
//! assert!(cache.assign(3, 120));
//! assert!(!cache.assign(3, 130), "epoch 3 already starts at 120");
//! assert_eq!(cache.encode(), "0\n2\n0 0\n3 120\n");
//! // Epoch 0 ended where epoch 3 began; the latest epoch ends at the LEO.
//! assert_eq!(cache.end_offset_for(1, 200), (0, 120));
//! assert_eq!(cache.end_offset_for(3, 200), (3, 200));
//! assert_eq!(cache.entries()[1], EpochEntry { epoch: 3, start_offset: 120 });
//! ```

use crate::backend::Storage;
use crate::checkpoint::{decode_lines, encode_lines, write_atomic};
use crate::error::{IoContext, StorageError};
use crate::segment::read_all;
use std::path::Path;

/// The file's name in the partition directory.
pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";
/// Kafka's `UNDEFINED_EPOCH`: no epoch (a batch no leader stamped, or an
/// answer of [`LeaderEpochCache::end_offset_for`] that knows nothing).
pub const UNDEFINED_EPOCH: i32 = -1;
/// Kafka's `UNDEFINED_EPOCH_OFFSET`.
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// One leader epoch and the offset of the first record it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// Leader epochs in order. Always true: epochs and start offsets are both
/// strictly increasing, and none is negative.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderEpochCache {
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// A cache holding `entries` as [`LeaderEpochCache::assign`] takes them
    /// one by one (so entries out of order replace the ones they conflict
    /// with, as when Kafka loads its checkpoint).
    pub fn from_entries(entries: impl IntoIterator<Item = EpochEntry>) -> Self {
        let mut cache = LeaderEpochCache::default();
        for e in entries {
            cache.assign(e.epoch, e.start_offset);
        }
        cache
    }

    /// Records that `epoch` starts at `start_offset`, as Kafka's `assign`:
    /// nothing happens when `epoch` is the latest one and starts at or
    /// before `start_offset` already. Otherwise the entries from the end
    /// whose epoch is ≥ `epoch` or whose start offset is ≥ `start_offset`
    /// are removed first (a leader's history that this one replaces), then
    /// the entry is added. Negative values are ignored. Returns whether the
    /// cache changed.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 || start_offset < 0 {
            return false;
        }
        let needed = self
            .latest_entry()
            .is_none_or(|l| l.epoch != epoch || start_offset < l.start_offset);
        if !needed {
            return false;
        }
        let mut removed = Vec::new();
        while let Some(&last) = self.entries.last()
            && (last.epoch >= epoch || last.start_offset >= start_offset)
        {
            removed.push(last);
            self.entries.pop();
        }
        // Replacing one entry that wrote nothing (same start offset) is the
        // normal case; anything else drops history worth a warning.
        if removed.len() > 1
            || removed
                .first()
                .is_some_and(|r| r.start_offset != start_offset)
        {
            tracing::warn!(
                epoch,
                start_offset,
                ?removed,
                "a new leader epoch entry replaced conflicting entries"
            );
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.debug_check();
        true
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn latest_entry(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    pub fn earliest_entry(&self) -> Option<EpochEntry> {
        self.entries.first().copied()
    }

    /// Kafka's `endOffsetFor`: the largest epoch ≤ `requested` and where it
    /// ended (the start offset of the next epoch), as (epoch, end offset).
    /// - `requested` is [`UNDEFINED_EPOCH`], or above every known epoch
    ///   (the cache is empty, or the epoch is newer than the latest):
    ///   ([`UNDEFINED_EPOCH`], [`UNDEFINED_EPOCH_OFFSET`]);
    /// - `requested` is the latest epoch: (`requested`, `log_end_offset`),
    ///   the epoch still being written;
    /// - `requested` is below every known epoch (its records are gone):
    ///   (`requested`, start offset of the earliest epoch);
    /// - otherwise: (largest epoch ≤ `requested`, start offset of the
    ///   first epoch above `requested`).
    pub fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> (i32, i64) {
        if requested == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        if self.latest_epoch() == Some(requested) {
            return (requested, log_end_offset);
        }
        let higher = self.entries.iter().find(|e| e.epoch > requested);
        let floor = self.entries.iter().rev().find(|e| e.epoch <= requested);
        match (floor, higher) {
            (_, None) => (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET),
            (None, Some(h)) => (requested, h.start_offset),
            (Some(f), Some(h)) => (f.epoch, h.start_offset),
        }
    }

    /// Removes the entries starting at or after `end_offset` (the log was
    /// truncated to it). Returns whether the cache changed.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> bool {
        if end_offset < 0 {
            return false;
        }
        let before = self.entries.len();
        while self
            .entries
            .last()
            .is_some_and(|e| e.start_offset >= end_offset)
        {
            self.entries.pop();
        }
        self.entries.len() != before
    }

    /// The log start moved up to `start_offset` (retention, DeleteRecords):
    /// the entries starting at or before it go, except the last of them,
    /// which now starts at `start_offset` (its epoch wrote the first record
    /// kept). Returns whether the cache changed.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> bool {
        let gone = self
            .entries
            .iter()
            .take_while(|e| e.start_offset <= start_offset)
            .count();
        if gone == 0 {
            return false;
        }
        let kept = EpochEntry {
            epoch: self.entries[gone - 1].epoch,
            start_offset,
        };
        let changed = gone > 1 || self.entries[0] != kept;
        self.entries.drain(..gone - 1);
        self.entries[0] = kept;
        self.debug_check();
        changed
    }

    /// Removes every entry. Returns whether the cache changed.
    pub fn clear(&mut self) -> bool {
        let changed = !self.entries.is_empty();
        self.entries.clear();
        changed
    }

    /// The file's text: `0\n<count>\n<epoch> <start offset>\n…`.
    pub fn encode(&self) -> String {
        encode_lines(
            self.entries
                .iter()
                .map(|e| format!("{} {}", e.epoch, e.start_offset)),
        )
    }

    /// Parses the file's text. The entries are taken as
    /// [`LeaderEpochCache::from_entries`] does; a negative value, a wrong
    /// count or a malformed line is an error.
    pub fn decode(text: &str) -> Result<LeaderEpochCache, String> {
        let mut entries = Vec::new();
        for line in decode_lines(text)? {
            let mut parts = line.split_whitespace();
            let (Some(epoch), Some(start), None) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(format!("malformed line {line:?}"));
            };
            let epoch: i32 = epoch
                .parse()
                .map_err(|e| format!("bad epoch in {line:?}: {e}"))?;
            let start_offset: i64 = start
                .parse()
                .map_err(|e| format!("bad offset in {line:?}: {e}"))?;
            if epoch < 0 || start_offset < 0 {
                return Err(format!("negative value in {line:?}"));
            }
            entries.push(EpochEntry {
                epoch,
                start_offset,
            });
        }
        Ok(LeaderEpochCache::from_entries(entries))
    }

    #[track_caller]
    fn debug_check(&self) {
        debug_assert!(
            self.entries
                .windows(2)
                .all(|w| w[0].epoch < w[1].epoch && w[0].start_offset < w[1].start_offset),
            "leader epochs and their start offsets strictly increase: {:?}",
            self.entries
        );
    }
}

/// Reads `leader-epoch-checkpoint` in the partition directory `dir`:
/// `None` when there is none; a malformed file is
/// [`StorageError::MalformedFile`].
pub fn read(storage: &dyn Storage, dir: &Path) -> Result<Option<LeaderEpochCache>, StorageError> {
    let path = dir.join(LEADER_EPOCH_CHECKPOINT);
    if !storage.exists(&path) {
        return Ok(None);
    }
    let f = storage.open(&path, false).at(&path)?;
    let bytes = read_all(&*f).at(&path)?;
    let text = String::from_utf8(bytes).map_err(|_| StorageError::MalformedFile {
        path: path.clone(),
        reason: "not UTF-8".into(),
    })?;
    LeaderEpochCache::decode(&text)
        .map(Some)
        .map_err(|reason| StorageError::MalformedFile { path, reason })
}

/// Replaces `leader-epoch-checkpoint` in `dir` with `cache`, atomically
/// (temporary file, fsync, rename, directory fsync).
pub fn write(
    storage: &dyn Storage,
    dir: &Path,
    cache: &LeaderEpochCache,
) -> Result<(), StorageError> {
    write_atomic(
        storage,
        &dir.join(LEADER_EPOCH_CHECKPOINT),
        cache.encode().as_bytes(),
    )
}

/// Fuzz entry point: whatever decodes as a checkpoint encodes and decodes
/// back to the same cache.
#[doc(hidden)]
pub fn fuzz_decode(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(cache) = LeaderEpochCache::decode(text) {
        cache.debug_check();
        assert_eq!(
            LeaderEpochCache::decode(&cache.encode()).ok(),
            Some(cache),
            "leader-epoch-checkpoint round trip"
        );
    }
}
