//! All-or-nothing creation of a topic's partition logs (or of the partitions
//! added to a topic), and the start-up rule for a creation a crash
//! interrupted. See `docs/storage-format.md`, "Start-up rules".
//!
//! Protocol:
//! 1. An intent file `<topic>.creating` (topic, topic id, partition range) is
//!    written atomically into every online log dir, before any partition
//!    directory exists.
//! 2. Every partition log is created. If one fails, the ones made so far
//!    (and the failed one's directory, if any) and the intent files are
//!    removed, and the creation reports the error.
//! 3. The caller records the topic in its own table (the broker's
//!    `weir-topics.json`), then [`PendingCreation::commit`] removes the
//!    intent files.
//!
//! At start ([`settle`]), an intent file means the creation was interrupted.
//! It counts as done when the caller's table holds the topic with that id and
//! at least that many partitions, or, for a caller without a table (or one
//! that lost it), when every partition of the range exists with that id.
//! Otherwise the partition directories of the range that carry the intent's
//! topic id (or no readable id) are removed, with a warning. A partition
//! therefore never appears alone: after a restart the creation either
//! happened completely or not at all.

use crate::backend::Storage;
use crate::checkpoint::{PARTITION_METADATA, decode_partition_metadata, write_atomic};
use crate::config::TopicPartition;
use crate::error::{IoContext, StorageError};
use crate::log::Log;
use crate::manager::LogManager;
use crate::segment::read_all;
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use weir_protocol::Uuid;

/// Suffix of an intent file: `<topic>.creating` in a log dir.
pub const CREATING_SUFFIX: &str = ".creating";

/// A committed topic as the caller's table knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownTopic {
    pub topic_id: [u8; 16],
    pub partitions: i32,
}

/// What an intent file says: partitions `partitions` of `topic`, created
/// with `topic_id`. Invariant: `0 <= partitions.start < partitions.end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Intent {
    pub topic: String,
    pub topic_id: [u8; 16],
    pub partitions: Range<i32>,
}

impl Intent {
    pub(crate) fn file_name(topic: &str) -> String {
        format!("{topic}{CREATING_SUFFIX}")
    }

    pub(crate) fn encode(&self) -> String {
        format!(
            "version: 0\ntopic: {}\ntopic_id: {}\nfirst_partition: {}\nend_partition: {}\n",
            self.topic,
            Uuid(self.topic_id),
            self.partitions.start,
            self.partitions.end
        )
    }

    pub(crate) fn decode(text: &str) -> Result<Intent, String> {
        let mut fields = HashMap::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (k, v) = line
                .split_once(": ")
                .ok_or_else(|| format!("malformed line {line:?}"))?;
            fields.insert(k, v.trim());
        }
        let get = |k: &str| fields.get(k).copied().ok_or(format!("no {k}"));
        if get("version")? != "0" {
            return Err(format!("unsupported version {:?}", get("version")?));
        }
        let topic_id = get("topic_id")?
            .parse::<Uuid>()
            .map_err(|_| "bad topic_id")?
            .0;
        let num = |k: &str| -> Result<i32, String> {
            get(k)?.parse().map_err(|e| format!("bad {k}: {e}"))
        };
        let partitions = num("first_partition")?..num("end_partition")?;
        if partitions.start < 0 || partitions.is_empty() {
            return Err(format!("bad partition range {partitions:?}"));
        }
        Ok(Intent {
            topic: get("topic")?.to_string(),
            topic_id,
            partitions,
        })
    }

    fn tps(&self) -> impl Iterator<Item = TopicPartition> + '_ {
        self.partitions
            .clone()
            .map(|p| TopicPartition::new(self.topic.clone(), p))
    }
}

/// The topic id in `<dir>/partition.metadata`: `Ok(None)` when the file is
/// missing, `Err` when it cannot be read or parsed.
fn dir_topic_id(storage: &dyn Storage, dir: &Path) -> Result<Option<[u8; 16]>, String> {
    let p = dir.join(PARTITION_METADATA);
    if !storage.exists(&p) {
        return Ok(None);
    }
    let f = storage.open(&p, false).map_err(|e| e.to_string())?;
    let bytes = read_all(&*f).map_err(|e| e.to_string())?;
    let text = String::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
    decode_partition_metadata(&text).map(Some)
}

/// Removes the intent files of `topic` (and `.tmp` leftovers) from `dirs`.
pub(crate) fn remove_intents(
    storage: &dyn Storage,
    dirs: &[PathBuf],
    topic: &str,
) -> Result<(), StorageError> {
    let name = Intent::file_name(topic);
    for d in dirs {
        let mut removed = false;
        for n in [name.clone(), format!("{name}.tmp")] {
            let p = d.join(n);
            if storage.exists(&p) {
                storage.remove_file(&p).at(&p)?;
                removed = true;
            }
        }
        if removed {
            storage.sync_dir(d).at(d)?;
        }
    }
    Ok(())
}

/// Start-up: settles every creation a crash interrupted (see the module
/// doc). Returns the partitions whose leftover directories could not be
/// removed, with the reason; the caller must not open them.
pub(crate) fn settle(
    storage: &dyn Storage,
    dirs: &[PathBuf],
    table: Option<&HashMap<String, KnownTopic>>,
) -> BTreeMap<TopicPartition, String> {
    let mut intents: BTreeMap<String, Option<Intent>> = BTreeMap::new();
    for d in dirs {
        let Ok(entries) = storage.list_dir(d) else {
            continue;
        };
        for (name, is_dir) in entries {
            if is_dir {
                continue;
            }
            let path = d.join(&name);
            if let Some(stem) = name.strip_suffix(".tmp")
                && stem.ends_with(CREATING_SUFFIX)
            {
                // The intent never reached its name, so no partition
                // directory was made for it.
                if let Err(e) = storage.remove_file(&path) {
                    tracing::warn!(path = %path.display(), error = %e, "cannot remove leftover intent file");
                }
                continue;
            }
            let Some(topic) = name.strip_suffix(CREATING_SUFFIX) else {
                continue;
            };
            let parsed = storage
                .open(&path, false)
                .and_then(|f| read_all(&*f))
                .map_err(|e| e.to_string())
                .and_then(|b| String::from_utf8(b).map_err(|_| "not UTF-8".to_string()))
                .and_then(|t| Intent::decode(&t));
            match parsed {
                Ok(i) if i.topic == topic => {
                    intents.insert(topic.to_string(), Some(i));
                }
                other => {
                    let reason = match other {
                        Ok(_) => "topic differs from the file name".to_string(),
                        Err(e) => e,
                    };
                    // Never remove data on an intent that cannot be read.
                    tracing::warn!(path = %path.display(), %reason, "unreadable creation intent; keeping every partition directory");
                    intents.entry(topic.to_string()).or_insert(None);
                }
            }
        }
    }
    let mut kept_out = BTreeMap::new();
    for (topic, intent) in intents {
        let done = match (&intent, table) {
            (None, _) => true,
            (Some(i), Some(table)) => table.get(&topic).is_some_and(|t| {
                t.topic_id == i.topic_id && t.partitions >= i.partitions.end
            }),
            (Some(i), None) => i.tps().all(|tp| {
                dirs.iter().any(|d| {
                    matches!(dir_topic_id(storage, &d.join(tp.to_string())), Ok(Some(id)) if id == i.topic_id)
                })
            }),
        };
        if let (Some(i), false) = (&intent, done) {
            for tp in i.tps() {
                for d in dirs {
                    let pdir = d.join(tp.to_string());
                    if !storage.exists(&pdir) {
                        continue;
                    }
                    match dir_topic_id(storage, &pdir) {
                        Ok(Some(id)) if id != i.topic_id => {
                            tracing::warn!(dir = %pdir.display(), "partition of another topic id than the interrupted creation; kept");
                            continue;
                        }
                        _ => {}
                    }
                    tracing::warn!(dir = %pdir.display(), topic = %topic, "removing a partition of an interrupted topic creation");
                    if let Err(e) = storage.remove_dir_all(&pdir) {
                        tracing::error!(dir = %pdir.display(), error = %e, "cannot remove a partition of an interrupted topic creation");
                        kept_out.insert(tp.clone(), format!("leftover of an interrupted topic creation that could not be removed: {e}"));
                    }
                }
            }
        }
        if kept_out.keys().any(|tp| tp.topic == topic) {
            // Keep the intent: the next start tries again.
            continue;
        }
        if let Err(e) = remove_intents(storage, dirs, &topic) {
            tracing::warn!(topic = %topic, error = %e, "cannot remove a creation intent");
        }
    }
    kept_out
}

/// A creation whose logs all exist but which is not committed yet: the
/// intent files are still in place, so a crash now undoes it at the next
/// start (unless the caller's table already holds the topic). Dropping it
/// without [`PendingCreation::commit`] aborts it.
#[must_use = "a pending creation is undone unless committed"]
#[derive(Debug)]
pub struct PendingCreation<'a> {
    pub(crate) mgr: &'a LogManager,
    pub(crate) intent: Intent,
    pub(crate) dirs: Vec<PathBuf>,
    pub(crate) logs: Vec<Arc<Log>>,
    pub(crate) settled: bool,
}

impl PendingCreation<'_> {
    /// The new logs, in partition order.
    pub fn logs(&self) -> &[Arc<Log>] {
        &self.logs
    }

    /// Makes the creation final: removes the intent files. The logs exist
    /// either way; a failure to remove an intent is only logged, because at
    /// the next start the caller's table (or, without one, the complete set
    /// of partitions) shows the creation as done.
    pub fn commit(mut self) -> Vec<Arc<Log>> {
        self.settled = true;
        let storage = self.mgr.storage();
        if let Err(e) = remove_intents(&*storage, &self.dirs, &self.intent.topic) {
            tracing::warn!(topic = %self.intent.topic, error = %e, "cannot remove the creation intent; the next start settles it");
        }
        std::mem::take(&mut self.logs)
    }

    /// Undoes the creation: removes the new logs, then the intent files.
    /// On an error the intent stays and the next start finishes the undo.
    pub fn abort(mut self) -> Result<(), StorageError> {
        self.settled = true;
        undo(self.mgr, &self.intent, &self.dirs)
    }
}

impl Drop for PendingCreation<'_> {
    fn drop(&mut self) {
        if !self.settled
            && let Err(e) = undo(self.mgr, &self.intent, &self.dirs)
        {
            tracing::error!(topic = %self.intent.topic, error = %e, "cannot undo a topic creation; the next start settles it");
        }
    }
}

/// Removes every log and directory of the intent's range (all were made by
/// this creation: it refused to start over an existing one), then the
/// intent files.
pub(crate) fn undo(
    mgr: &LogManager,
    intent: &Intent,
    dirs: &[PathBuf],
) -> Result<(), StorageError> {
    let storage = mgr.storage();
    for tp in intent.tps() {
        if mgr.get(&tp).is_some() {
            mgr.delete_log(&tp)?;
        }
        for d in dirs {
            let pdir = d.join(tp.to_string());
            if storage.exists(&pdir) {
                storage.remove_dir_all(&pdir).at(&pdir)?;
                storage.sync_dir(d).at(d)?;
            }
        }
    }
    remove_intents(&*storage, dirs, &intent.topic)
}

/// Writes the intent into every dir of `dirs`; on a failure removes what
/// was written.
pub(crate) fn write_intents(
    storage: &dyn Storage,
    dirs: &[PathBuf],
    intent: &Intent,
) -> Result<(), StorageError> {
    let bytes = intent.encode();
    for d in dirs {
        let p = d.join(Intent::file_name(&intent.topic));
        if let Err(e) = write_atomic(storage, &p, bytes.as_bytes()) {
            if let Err(e2) = remove_intents(storage, dirs, &intent.topic) {
                tracing::warn!(topic = %intent.topic, error = %e2, "cannot remove a partly written creation intent");
            }
            return Err(e);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intent_text_round_trip_and_rejects_garbage() {
        let i = Intent {
            topic: "a.b-c".into(),
            topic_id: [7; 16],
            partitions: 3..50,
        };
        assert_eq!(Intent::decode(&i.encode()).unwrap(), i);
        assert_eq!(Intent::file_name("x.creating"), "x.creating.creating");
        for bad in [
            "",
            "version: 1\n",
            "version: 0\ntopic: a\ntopic_id: short\nfirst_partition: 0\nend_partition: 1\n",
            "version: 0\ntopic: a\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\nfirst_partition: 2\nend_partition: 2\n",
            "version: 0\ntopic: a\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\nfirst_partition: -1\nend_partition: 2\n",
            "garbage",
        ] {
            assert!(Intent::decode(bad).is_err(), "{bad:?}");
        }
    }
}
