//! The openraft state machine adapter around a [`MetadataStateMachine`],
//! with snapshots kept in the metadata directory.
//!
//! The state machine itself lives in memory. On start it is restored from
//! the snapshot file (if any); openraft then re-applies the committed log
//! entries after the snapshot, so the applied state after a restart is the
//! same as before it.
//!
//! `snapshot.bin` layout (big-endian):
//! `[magic "WEIRSNP1"][meta_len: u32][crc32c(meta ++ data): u32][meta: JSON SnapshotMeta][data]`,
//! replaced atomically (temp, fsync, rename, directory fsync).

use std::io::{self, Cursor};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::RaftStateMachine;
use openraft::{
    BasicNode, EntryPayload, RaftSnapshotBuilder, Snapshot, SnapshotMeta, StorageIOError,
    StoredMembership,
};

use crate::log_store::write_atomically;
use crate::{Entry, LogId, StorageError, TypeConfig, storage_err};

/// Name of the snapshot file inside the metadata directory.
pub const SNAPSHOT_FILE: &str = "snapshot.bin";
const SNAPSHOT_MAGIC: &[u8; 8] = b"WEIRSNP1";
/// Largest snapshot file accepted on open.
pub const MAX_SNAPSHOT_BYTES: u64 = 1024 * 1024 * 1024;

/// What the metadata log drives: the cluster metadata image (or a test
/// model). `apply` is called once per committed entry, in log order, and
/// must be deterministic: every node applies the same payloads.
pub trait MetadataStateMachine: Send + Sync + 'static {
    /// Applies the payload committed at `index`. An error stops the node:
    /// a record one node cannot apply means its image has diverged.
    fn apply(&mut self, index: u64, payload: &[u8]) -> Result<(), String>;
    /// Serializes the whole state.
    fn snapshot(&self) -> Vec<u8>;
    /// Replaces the whole state with a snapshot's.
    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String>;
}

type Meta = SnapshotMeta<u64, BasicNode>;

#[derive(Debug)]
struct StoredSnapshot {
    meta: Meta,
    data: Vec<u8>,
}

struct Inner<S> {
    sm: S,
    last_applied: Option<LogId>,
    membership: StoredMembership<u64, BasicNode>,
    snapshot: Option<StoredSnapshot>,
    /// Distinguishes snapshots built at the same log id.
    builds: u64,
}

/// The state machine side of openraft's storage; cloning shares it.
pub struct StateMachineStore<S> {
    dir: PathBuf,
    inner: Arc<Mutex<Inner<S>>>,
}

impl<S> Clone for StateMachineStore<S> {
    fn clone(&self) -> Self {
        StateMachineStore {
            dir: self.dir.clone(),
            inner: Arc::clone(&self.inner),
        }
    }
}

/// What can go wrong loading the snapshot on start.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotLoadError {
    #[error("snapshot {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("snapshot {path} is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn encode_snapshot(meta: &Meta, data: &[u8]) -> io::Result<Vec<u8>> {
    let meta_bytes = serde_json::to_vec(meta).map_err(io::Error::other)?;
    let meta_len = u32::try_from(meta_bytes.len()).map_err(io::Error::other)?;
    let crc = crc32c::crc32c_append(crc32c::crc32c(&meta_bytes), data);
    let mut out = Vec::with_capacity(16 + meta_bytes.len() + data.len());
    out.extend_from_slice(SNAPSHOT_MAGIC);
    out.extend_from_slice(&meta_len.to_be_bytes());
    out.extend_from_slice(&crc.to_be_bytes());
    out.extend_from_slice(&meta_bytes);
    out.extend_from_slice(data);
    Ok(out)
}

/// Fuzz entry point for the snapshot file reader: any bytes decode or are
/// refused with a message, never a panic.
pub fn fuzz_decode_snapshot(bytes: &[u8]) {
    if let Ok((_, data)) = decode_snapshot(bytes) {
        assert!(data.len() <= bytes.len());
    }
}

fn decode_snapshot(bytes: &[u8]) -> Result<(Meta, Vec<u8>), String> {
    let header = bytes.get(..16).ok_or("shorter than its header")?;
    let (magic, rest) = header.split_at(8);
    if magic != SNAPSHOT_MAGIC {
        return Err("bad magic".to_string());
    }
    let (len, crc) = rest.split_at(4);
    let meta_len = u32::from_be_bytes(len.try_into().map_err(|_| "header")?) as usize;
    let crc = u32::from_be_bytes(crc.try_into().map_err(|_| "header")?);
    let body = bytes.get(16..).ok_or("shorter than its header")?;
    if crc32c::crc32c(body) != crc {
        return Err("CRC32C mismatch".to_string());
    }
    let meta_bytes = body
        .get(..meta_len)
        .ok_or_else(|| format!("metadata length {meta_len} past the end"))?;
    let data = body.get(meta_len..).ok_or("no data")?;
    let meta: Meta = serde_json::from_slice(meta_bytes).map_err(|e| e.to_string())?;
    Ok((meta, data.to_vec()))
}

impl<S: MetadataStateMachine> StateMachineStore<S> {
    /// Wraps `sm`, restoring it from the snapshot in `dir` if there is one.
    /// Blocking.
    pub fn open(dir: &Path, sm: S) -> Result<Self, SnapshotLoadError> {
        let path = dir.join(SNAPSHOT_FILE);
        let mut inner = Inner {
            sm,
            last_applied: None,
            membership: StoredMembership::default(),
            snapshot: None,
            builds: 0,
        };
        match std::fs::metadata(&path) {
            Ok(md) => {
                if md.len() > MAX_SNAPSHOT_BYTES {
                    return Err(SnapshotLoadError::Corrupt {
                        path,
                        reason: format!("{} bytes exceeds {MAX_SNAPSHOT_BYTES}", md.len()),
                    });
                }
                let bytes = std::fs::read(&path).map_err(|source| SnapshotLoadError::Io {
                    path: path.clone(),
                    source,
                })?;
                let (meta, data) =
                    decode_snapshot(&bytes).map_err(|reason| SnapshotLoadError::Corrupt {
                        path: path.clone(),
                        reason,
                    })?;
                inner
                    .sm
                    .restore(&data)
                    .map_err(|reason| SnapshotLoadError::Corrupt {
                        path: path.clone(),
                        reason: format!("state machine refused it: {reason}"),
                    })?;
                inner.last_applied = meta.last_log_id;
                inner.membership = meta.last_membership.clone();
                inner.snapshot = Some(StoredSnapshot { meta, data });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => return Err(SnapshotLoadError::Io { path, source }),
        }
        Ok(StateMachineStore {
            dir: dir.to_path_buf(),
            inner: Arc::new(Mutex::new(inner)),
        })
    }

    /// Reads the state machine.
    pub fn read<T>(&self, f: impl FnOnce(&S) -> T) -> T {
        f(&lock(&self.inner).sm)
    }

    /// The last log id applied.
    pub fn last_applied(&self) -> Option<LogId> {
        lock(&self.inner).last_applied
    }

    async fn write_snapshot_file(&self, meta: &Meta, data: &[u8]) -> io::Result<()> {
        let bytes = encode_snapshot(meta, data)?;
        let path = self.dir.join(SNAPSHOT_FILE);
        tokio::task::spawn_blocking(move || write_atomically(&path, &bytes))
            .await
            .map_err(io::Error::other)?
    }
}

impl<S: MetadataStateMachine> RaftSnapshotBuilder<TypeConfig> for StateMachineStore<S> {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let (meta, data) = {
            let mut inner = lock(&self.inner);
            inner.builds += 1;
            let data = inner.sm.snapshot();
            let snapshot_id = match inner.last_applied {
                Some(id) => format!("{}-{}-{}", id.leader_id.term, id.index, inner.builds),
                None => format!("none-{}", inner.builds),
            };
            let meta = Meta {
                last_log_id: inner.last_applied,
                last_membership: inner.membership.clone(),
                snapshot_id,
            };
            (meta, data)
        };
        self.write_snapshot_file(&meta, &data)
            .await
            .map_err(|e| storage_err(StorageIOError::write_state_machine, &e))?;
        lock(&self.inner).snapshot = Some(StoredSnapshot {
            meta: meta.clone(),
            data: data.clone(),
        });
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl<S: MetadataStateMachine> RaftStateMachine<TypeConfig> for StateMachineStore<S> {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId>, StoredMembership<u64, BasicNode>), StorageError> {
        let inner = lock(&self.inner);
        Ok((inner.last_applied, inner.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<u64>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut inner = lock(&self.inner);
        let mut out = Vec::new();
        for entry in entries {
            debug_assert!(
                inner
                    .last_applied
                    .is_none_or(|last| last.index < entry.log_id.index),
                "entries applied out of order"
            );
            match entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(payload) => {
                    if let Err(reason) = inner.sm.apply(entry.log_id.index, &payload) {
                        return Err(StorageError::IO {
                            source: StorageIOError::apply(entry.log_id, &io::Error::other(reason)),
                        });
                    }
                }
                EntryPayload::Membership(m) => {
                    inner.membership = StoredMembership::new(Some(entry.log_id), m);
                }
            }
            inner.last_applied = Some(entry.log_id);
            out.push(entry.log_id.index);
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        {
            let mut inner = lock(&self.inner);
            inner.sm.restore(&data).map_err(|e| {
                storage_err(StorageIOError::write_state_machine, &io::Error::other(e))
            })?;
            inner.last_applied = meta.last_log_id;
            inner.membership = meta.last_membership.clone();
        }
        self.write_snapshot_file(meta, &data)
            .await
            .map_err(|e| storage_err(StorageIOError::write_state_machine, &e))?;
        lock(&self.inner).snapshot = Some(StoredSnapshot {
            meta: meta.clone(),
            data,
        });
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let inner = lock(&self.inner);
        Ok(inner.snapshot.as_ref().map(|s| Snapshot {
            meta: s.meta.clone(),
            snapshot: Box::new(Cursor::new(s.data.clone())),
        }))
    }
}
