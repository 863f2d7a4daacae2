//! The durable raft log: one append-only file of framed entries plus a
//! small state file for the vote and the committed log id.
//!
//! Layout of a metadata directory (see `docs/raft.md` for the bytes):
//!
//! - `raft.log`: records `[len: u32 BE][crc32c(payload): u32 BE][payload]`,
//!   the payload a JSON [`Record`]. An optional first record names the last
//!   purged log id; the entries follow with contiguous indexes.
//! - `raft-state.json`: `{"vote": ..., "committed": ...}`, replaced as a
//!   whole by write-temp, fsync, rename, directory fsync.
//!
//! Invariants: the in-memory entries are exactly the entries in `raft.log`
//! with contiguous indexes starting after the purged log id; an append is
//! fsynced before openraft hears it is durable. On open a torn tail (a
//! partial last record or a bad CRC on the last record) is cut with a
//! warning; anything wrong before the last record is an error.
//!
//! File I/O runs on blocking threads (`spawn_blocking`), never on the async
//! runtime.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{LogState, RaftLogReader, StorageIOError};
use serde::{Deserialize, Serialize};

use crate::{Entry, LogId, StorageError, TypeConfig, Vote, storage_err};

/// Name of the log file inside the metadata directory.
pub const LOG_FILE: &str = "raft.log";
/// Name of the vote / committed state file.
pub const STATE_FILE: &str = "raft-state.json";
/// Bytes of a record header: payload length and CRC32C.
pub const RECORD_HEADER_BYTES: usize = 8;
/// Largest record payload accepted, on write and on read.
pub const MAX_RECORD_BYTES: usize = 64 * 1024 * 1024;

/// What can go wrong opening a metadata log directory.
#[derive(Debug, thiserror::Error)]
pub enum LogOpenError {
    #[error("raft log {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("raft log {path} is corrupt at byte {position}: {reason}")]
    Corrupt {
        path: PathBuf,
        position: u64,
        reason: String,
    },
    #[error("raft state file {path} is unreadable: {reason}")]
    BadState { path: PathBuf, reason: String },
}

/// One record of `raft.log`.
#[derive(Debug, Serialize, Deserialize)]
enum Record {
    /// Everything up to and including this log id was purged (it lives in a
    /// snapshot). Only ever the first record.
    Purged(LogId),
    Entry(Entry),
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct PersistentState {
    vote: Option<Vote>,
    committed: Option<LogId>,
}

/// The in-memory view of the log, always equal to what is on disk once a
/// storage call returns.
#[derive(Debug, Default)]
struct MemLog {
    entries: BTreeMap<u64, Entry>,
    purged: Option<LogId>,
    state: PersistentState,
}

impl MemLog {
    fn last_log_id(&self) -> Option<LogId> {
        self.entries
            .last_key_value()
            .map(|(_, e)| e.log_id)
            .or(self.purged)
    }

    fn debug_check(&self) {
        let mut keys = self.entries.keys();
        let first = keys.next().copied();
        debug_assert!(
            self.entries
                .keys()
                .zip(self.entries.keys().skip(1))
                .all(|(a, b)| a + 1 == *b),
            "raft log entries are not contiguous"
        );
        debug_assert!(
            match (first, self.purged) {
                (Some(first), Some(purged)) => first == purged.index + 1,
                _ => true,
            },
            "first raft log entry does not follow the purged log id"
        );
    }
}

/// The open `raft.log` and where each entry's record starts.
#[derive(Debug)]
struct LogFile {
    path: PathBuf,
    file: File,
    /// Bytes of whole records; the next append writes here.
    len: u64,
    /// Entry index → byte position of its record.
    offsets: BTreeMap<u64, u64>,
}

#[derive(Debug)]
struct Shared {
    dir: PathBuf,
    mem: Mutex<MemLog>,
    file: Mutex<LogFile>,
}

/// The raft log storage of one node; cloning shares it (the clone serves as
/// openraft's log reader).
#[derive(Debug, Clone)]
pub struct LogStore {
    shared: Arc<Shared>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock means a panic mid-update elsewhere; the data is still
    // the last consistent state because updates finish before unlocking.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Frames `payload` as one record.
pub fn encode_record(payload: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
    if payload.len() > MAX_RECORD_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "raft log record of {} bytes exceeds the limit of {MAX_RECORD_BYTES}",
                payload.len()
            ),
        ));
    }
    let len = u32::try_from(payload.len()).map_err(io::Error::other)?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_be_bytes());
    out.extend_from_slice(payload);
    Ok(())
}

fn encode(record: &Record, out: &mut Vec<u8>) -> io::Result<()> {
    let payload = serde_json::to_vec(record).map_err(io::Error::other)?;
    encode_record(&payload, out)
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> LogOpenError + '_ {
    move |source| LogOpenError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// fsyncs a directory so that a rename inside it is durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Replaces `path` with `bytes` atomically: temp file, fsync, rename,
/// directory fsync.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::other("path has no parent directory"))?;
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = PathBuf::from(tmp_name);
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    sync_dir(dir)
}

/// The result of scanning `raft.log`.
struct Scan {
    purged: Option<LogId>,
    entries: BTreeMap<u64, Entry>,
    offsets: BTreeMap<u64, u64>,
    /// Bytes of whole, valid records.
    valid_len: u64,
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let b: [u8; 4] = bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_be_bytes(b))
}

/// Parses the records of `raft.log`. A torn tail ends the scan (its
/// position is `valid_len`); corruption before the last record is an error.
fn scan(path: &Path, bytes: &[u8]) -> Result<Scan, LogOpenError> {
    let corrupt = |position: usize, reason: String| LogOpenError::Corrupt {
        path: path.to_path_buf(),
        position: position as u64,
        reason,
    };
    let mut out = Scan {
        purged: None,
        entries: BTreeMap::new(),
        offsets: BTreeMap::new(),
        valid_len: 0,
    };
    let mut pos = 0usize;
    while pos < bytes.len() {
        let (Some(len), Some(crc)) = (read_u32(bytes, pos), read_u32(bytes, pos + 4)) else {
            break; // partial header: torn tail
        };
        let len = len as usize;
        let start = pos + RECORD_HEADER_BYTES;
        let Some(payload) = start.checked_add(len).and_then(|end| bytes.get(start..end)) else {
            break; // record runs past the end of the file: torn tail
        };
        let end = start + len;
        if len > MAX_RECORD_BYTES {
            return Err(corrupt(
                pos,
                format!("record length {len} exceeds {MAX_RECORD_BYTES}"),
            ));
        }
        if crc32c::crc32c(payload) != crc {
            if end == bytes.len() {
                break; // last record only partly written: torn tail
            }
            return Err(corrupt(
                pos,
                "CRC32C mismatch before the last record".to_string(),
            ));
        }
        let record: Record = serde_json::from_slice(payload)
            .map_err(|e| corrupt(pos, format!("record does not decode: {e}")))?;
        match record {
            Record::Purged(log_id) => {
                if pos != 0 {
                    return Err(corrupt(
                        pos,
                        "purge marker after the first record".to_string(),
                    ));
                }
                out.purged = Some(log_id);
            }
            Record::Entry(entry) => {
                let index = entry.log_id.index;
                let expected = match (out.entries.last_key_value(), out.purged) {
                    (Some((last, _)), _) => Some(last + 1),
                    (None, Some(purged)) => Some(purged.index + 1),
                    (None, None) => None,
                };
                if expected.is_some_and(|e| e != index) {
                    return Err(corrupt(
                        pos,
                        format!("entry index {index}, expected {expected:?}"),
                    ));
                }
                out.offsets.insert(index, pos as u64);
                out.entries.insert(index, entry);
            }
        }
        pos = end;
        out.valid_len = pos as u64;
    }
    Ok(out)
}

/// Fuzz entry point for the `raft.log` reader: any bytes scan to a result
/// or a readable error, never a panic; the entries found lie in the valid
/// prefix, in index order.
pub fn fuzz_scan(bytes: &[u8]) {
    if let Ok(scan) = scan(Path::new("raft.log"), bytes) {
        assert!(scan.valid_len as usize <= bytes.len());
        assert!(scan.offsets.values().all(|&o| o < scan.valid_len));
        assert_eq!(scan.offsets.len(), scan.entries.len());
    }
}

impl LogStore {
    /// Opens (or creates) the log in `dir`, cutting a torn tail. Blocking:
    /// call it from a blocking thread or before the runtime is busy.
    pub fn open(dir: &Path) -> Result<LogStore, LogOpenError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let path = dir.join(LOG_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err(&path))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io_err(&path))?;
        let scan = scan(&path, &bytes)?;
        if scan.valid_len < bytes.len() as u64 {
            tracing::warn!(
                path = %path.display(),
                valid_bytes = scan.valid_len,
                file_bytes = bytes.len(),
                "raft log has a torn tail (a partial or unchecked last entry); cutting it"
            );
            file.set_len(scan.valid_len).map_err(io_err(&path))?;
            file.sync_all().map_err(io_err(&path))?;
        }
        let state_path = dir.join(STATE_FILE);
        let state = match fs::read(&state_path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| LogOpenError::BadState {
                path: state_path.clone(),
                reason: e.to_string(),
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => PersistentState::default(),
            Err(e) => return Err(io_err(&state_path)(e)),
        };
        let mut mem = MemLog {
            entries: scan.entries,
            purged: scan.purged,
            state,
        };
        // Only a disk that lost fsynced bytes leaves the committed id past
        // the log's end; openraft needs committed <= last, and the peers
        // still hold the lost entries, so step back to what is here.
        let last = mem.last_log_id();
        if mem.state.committed.map(|c| c.index) > last.map(|l| l.index) {
            tracing::warn!(
                path = %path.display(),
                committed = ?mem.state.committed,
                last = ?last,
                "raft log ends before its committed index; resuming from the log's end"
            );
            mem.state.committed = last;
        }
        mem.debug_check();
        Ok(LogStore {
            shared: Arc::new(Shared {
                dir: dir.to_path_buf(),
                mem: Mutex::new(mem),
                file: Mutex::new(LogFile {
                    path,
                    file,
                    len: scan.valid_len,
                    offsets: scan.offsets,
                }),
            }),
        })
    }

    /// The committed log id last saved by openraft.
    pub fn committed(&self) -> Option<LogId> {
        lock(&self.shared.mem).state.committed
    }

    /// The last log id stored (or purged).
    pub fn last_log_id(&self) -> Option<LogId> {
        lock(&self.shared.mem).last_log_id()
    }

    /// Runs file work on a blocking thread.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Shared) -> io::Result<T> + Send + 'static,
    ) -> io::Result<T> {
        let shared = Arc::clone(&self.shared);
        tokio::task::spawn_blocking(move || f(&shared))
            .await
            .map_err(io::Error::other)?
    }

    async fn save_state(&self, state: PersistentState) -> io::Result<()> {
        self.blocking(move |shared| {
            let bytes = serde_json::to_vec(&state).map_err(io::Error::other)?;
            // Hold the file lock so two state writes never interleave.
            let _file = lock(&shared.file);
            write_atomically(&shared.dir.join(STATE_FILE), &bytes)
        })
        .await
    }
}

impl LogFile {
    fn append(&mut self, records: &[(u64, usize)], bytes: &[u8]) -> io::Result<()> {
        self.file.seek(SeekFrom::Start(self.len))?;
        self.file.write_all(bytes)?;
        self.file.sync_data()?;
        for (index, rel) in records {
            self.offsets.insert(*index, self.len + *rel as u64);
        }
        self.len += bytes.len() as u64;
        Ok(())
    }

    fn truncate_from(&mut self, index: u64) -> io::Result<()> {
        let Some(&at) = self.offsets.get(&index) else {
            return Ok(());
        };
        self.file.set_len(at)?;
        self.file.sync_data()?;
        self.offsets.split_off(&index);
        self.len = at;
        Ok(())
    }

    /// Rewrites the file as `purged` followed by `rest`, atomically.
    fn rewrite(&mut self, purged: LogId, rest: &[Entry]) -> io::Result<()> {
        let mut bytes = Vec::new();
        encode(&Record::Purged(purged), &mut bytes)?;
        let mut offsets = BTreeMap::new();
        for entry in rest {
            offsets.insert(entry.log_id.index, bytes.len() as u64);
            encode(&Record::Entry(entry.clone()), &mut bytes)?;
        }
        write_atomically(&self.path, &bytes)?;
        self.file = OpenOptions::new().read(true).write(true).open(&self.path)?;
        self.len = bytes.len() as u64;
        self.offsets = offsets;
        Ok(())
    }
}

fn range_to_bounds(range: &impl RangeBounds<u64>) -> (Bound<u64>, Bound<u64>) {
    (range.start_bound().cloned(), range.end_bound().cloned())
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let mem = lock(&self.shared.mem);
        Ok(mem
            .entries
            .range(range_to_bounds(&range))
            .map(|(_, e)| e.clone())
            .collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let mem = lock(&self.shared.mem);
        Ok(LogState {
            last_purged_log_id: mem.purged,
            last_log_id: mem.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let state = {
            let mem = lock(&self.shared.mem);
            PersistentState {
                vote: Some(*vote),
                committed: mem.state.committed,
            }
        };
        self.save_state(state.clone())
            .await
            .map_err(|e| storage_err(StorageIOError::write_vote, &e))?;
        lock(&self.shared.mem).state = state;
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(lock(&self.shared.mem).state.vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        let state = {
            let mem = lock(&self.shared.mem);
            PersistentState {
                vote: mem.state.vote,
                committed,
            }
        };
        self.save_state(state.clone())
            .await
            .map_err(|e| storage_err(StorageIOError::write_logs, &e))?;
        lock(&self.shared.mem).state = state;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(lock(&self.shared.mem).state.committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        // Entries at or below the purged id are covered by the snapshot and
        // are never read again; keeping them would break contiguity.
        let purged = lock(&self.shared.mem).purged.map(|p| p.index);
        let entries: Vec<Entry> = entries
            .into_iter()
            .filter(|e| purged.is_none_or(|p| e.log_id.index > p))
            .collect();
        let mut bytes = Vec::new();
        let mut records = Vec::with_capacity(entries.len());
        for entry in &entries {
            records.push((entry.log_id.index, bytes.len()));
            let rec = Record::Entry(entry.clone());
            if let Err(e) = encode(&rec, &mut bytes) {
                return Err(StorageError::IO {
                    source: StorageIOError::write_log_entry(entry.log_id, &e),
                });
            }
        }
        let result = self
            .blocking(move |shared| lock(&shared.file).append(&records, &bytes))
            .await;
        match result {
            Ok(()) => {
                {
                    let mut mem = lock(&self.shared.mem);
                    for entry in entries {
                        mem.entries.insert(entry.log_id.index, entry);
                    }
                    mem.debug_check();
                }
                // The entries are on disk: only now may openraft count them.
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let err = storage_err(StorageIOError::write_logs, &e);
                callback.log_io_completed(Err(e));
                Err(err)
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let index = log_id.index;
        self.blocking(move |shared| lock(&shared.file).truncate_from(index))
            .await
            .map_err(|e| storage_err(StorageIOError::write_logs, &e))?;
        let mut mem = lock(&self.shared.mem);
        mem.entries.split_off(&index);
        mem.debug_check();
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let rest: Vec<Entry> = {
            let mem = lock(&self.shared.mem);
            mem.entries
                .range(log_id.index + 1..)
                .map(|(_, e)| e.clone())
                .collect()
        };
        self.blocking(move |shared| lock(&shared.file).rewrite(log_id, &rest))
            .await
            .map_err(|e| storage_err(StorageIOError::write_logs, &e))?;
        let mut mem = lock(&self.shared.mem);
        mem.entries = mem.entries.split_off(&(log_id.index + 1));
        mem.purged = Some(log_id);
        mem.debug_check();
        Ok(())
    }
}
