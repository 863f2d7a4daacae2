//! Topic metadata store: names, ids, partition counts and per-topic config
//! overrides, persisted crash-safely in the first data dir.
//!
//! Files (in the first `log.dirs` entry):
//! - `meta.properties`: Kafka-style `version`, `cluster.id`, `node.id`,
//!   `directory.id`; written once, checked on every start.
//! - `weir-topics.json`: every topic; rewritten as a whole through
//!   `weir-topics.json.tmp` + fsync + rename + directory fsync, so a crash
//!   leaves either the old or the new file, never a torn one.
//!
//! A `weir-topics.json` that cannot be parsed (corrupt, empty) does not
//! refuse the start: it is moved aside to `weir-topics.json.corrupt` and the
//! store opens empty with [`TopicStore::lost`] set; the broker then rebuilds
//! the table from the partition directories (see `broker.rs`). Per-topic
//! config overrides live only in this file, so they are lost then.
//!
//! Invariant: names are unique, ids are unique and never zero, partition
//! counts are ≥ 1 and only grow.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use weir_protocol::Uuid;

pub const TOPICS_FILE: &str = "weir-topics.json";
/// Where an unreadable `weir-topics.json` is moved before it is rebuilt.
pub const CORRUPT_TOPICS_FILE: &str = "weir-topics.json.corrupt";
pub const META_FILE: &str = "meta.properties";

#[derive(Debug, thiserror::Error)]
pub enum TopicStoreError {
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("corrupt topics file {path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("{path}: node.id {found} does not match the configured node.id {configured}")]
    NodeIdMismatch {
        path: PathBuf,
        found: i32,
        configured: i32,
    },
    #[error(
        "{path}: cluster.id {found} is not this node's cluster ({expected}): the data dir belongs \
         to another cluster, or controller.quorum.voters changed (set cluster.id to keep it)"
    )]
    ClusterIdMismatch {
        path: PathBuf,
        found: String,
        expected: String,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> TopicStoreError + '_ {
    move |source| TopicStoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One topic. `id` is never zero.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMeta {
    pub name: String,
    /// Topic id in Kafka's base64url form (as in `partition.metadata`).
    pub id: String,
    pub partitions: i32,
    /// Topic-level config overrides (Kafka names).
    #[serde(default)]
    pub configs: BTreeMap<String, String>,
}

impl TopicMeta {
    pub fn id_bytes(&self) -> [u8; 16] {
        self.id.parse::<Uuid>().ok().map(|u| u.0).unwrap_or([0; 16])
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TopicsFile {
    version: u32,
    topics: Vec<TopicMeta>,
}

/// The persisted topic table.
#[derive(Debug)]
pub struct TopicStore {
    dir: PathBuf,
    topics: BTreeMap<String, TopicMeta>,
    /// Why the file on disk could not be read, when it could not.
    lost: Option<String>,
    /// Counts changes to `topics` (readers cache what they derive from it).
    generation: u64,
}

impl TopicStore {
    /// Loads `weir-topics.json` from `dir` (an empty store if absent). A
    /// leftover `.tmp` from a crash mid-write is discarded: the rename did
    /// not happen, so the old file is the committed state. A file that
    /// cannot be parsed is moved to `weir-topics.json.corrupt` and the store
    /// opens empty with [`TopicStore::lost`] saying why.
    pub fn open(dir: &Path) -> Result<TopicStore, TopicStoreError> {
        match Self::load(dir) {
            Err(TopicStoreError::Corrupt { path, reason }) => {
                let aside = dir.join(CORRUPT_TOPICS_FILE);
                if let Err(e) = std::fs::rename(&path, &aside) {
                    // e.g. a read-only disk: rebuilding in memory still works
                    tracing::warn!(path = %path.display(), error = %e, "cannot move the unreadable topic table aside");
                }
                Ok(TopicStore {
                    dir: dir.to_path_buf(),
                    topics: BTreeMap::new(),
                    lost: Some(reason),
                    generation: 0,
                })
            }
            other => other,
        }
    }

    fn load(dir: &Path) -> Result<TopicStore, TopicStoreError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let path = dir.join(TOPICS_FILE);
        let tmp = dir.join(format!("{TOPICS_FILE}.tmp"));
        if tmp.exists() {
            std::fs::remove_file(&tmp).map_err(io_err(&tmp))?;
        }
        let mut topics = BTreeMap::new();
        match std::fs::read(&path) {
            Ok(bytes) => {
                let file: TopicsFile =
                    serde_json::from_slice(&bytes).map_err(|e| TopicStoreError::Corrupt {
                        path: path.clone(),
                        reason: e.to_string(),
                    })?;
                for t in file.topics {
                    if t.partitions < 1 || t.id.parse::<Uuid>().is_err() {
                        return Err(TopicStoreError::Corrupt {
                            path: path.clone(),
                            reason: format!("bad entry for topic {}", t.name),
                        });
                    }
                    topics.insert(t.name.clone(), t);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&path)(e)),
        }
        Ok(TopicStore {
            dir: dir.to_path_buf(),
            topics,
            lost: None,
            generation: 0,
        })
    }

    /// Why `weir-topics.json` could not be read at open (its content was
    /// moved to `weir-topics.json.corrupt`), or None.
    pub fn lost(&self) -> Option<&str> {
        self.lost.as_deref()
    }

    /// Inserts or replaces topics found at start, then persists the table
    /// once. Unlike [`TopicStore::put`] they stay in memory when the write
    /// fails (e.g. a full disk): they exist on disk as partition
    /// directories, and the next successful write persists them.
    pub fn adopt(&mut self, topics: Vec<TopicMeta>) -> Result<(), TopicStoreError> {
        if topics.is_empty() && self.lost.is_none() {
            return Ok(());
        }
        for t in topics {
            self.topics.insert(t.name.clone(), t);
        }
        self.generation += 1;
        self.persist()?;
        self.lost = None;
        Ok(())
    }

    /// The committed topics as the log manager needs them to settle
    /// creations a crash interrupted.
    pub fn known_topics(&self) -> HashMap<String, weir_storage::KnownTopic> {
        self.topics
            .values()
            .map(|t| {
                (
                    t.name.clone(),
                    weir_storage::KnownTopic {
                        topic_id: t.id_bytes(),
                        partitions: t.partitions,
                    },
                )
            })
            .collect()
    }

    /// Changes with every change of the topics held (a failed write that
    /// was undone may change it too).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn get(&self, name: &str) -> Option<&TopicMeta> {
        self.topics.get(name)
    }

    pub fn by_id(&self, id: &[u8; 16]) -> Option<&TopicMeta> {
        self.topics.values().find(|t| &t.id_bytes() == id)
    }

    pub fn all(&self) -> impl Iterator<Item = &TopicMeta> {
        self.topics.values()
    }

    pub fn len(&self) -> usize {
        self.topics.len()
    }

    pub fn is_empty(&self) -> bool {
        self.topics.is_empty()
    }

    /// Inserts or replaces a topic and persists the table.
    pub fn put(&mut self, topic: TopicMeta) -> Result<(), TopicStoreError> {
        self.generation += 1;
        let old = self.topics.insert(topic.name.clone(), topic.clone());
        if let Err(e) = self.persist() {
            match old {
                Some(o) => self.topics.insert(o.name.clone(), o),
                None => self.topics.remove(&topic.name),
            };
            return Err(e);
        }
        Ok(())
    }

    /// Removes a topic and persists the table.
    pub fn remove(&mut self, name: &str) -> Result<Option<TopicMeta>, TopicStoreError> {
        let Some(old) = self.topics.remove(name) else {
            return Ok(None);
        };
        self.generation += 1;
        if let Err(e) = self.persist() {
            self.topics.insert(old.name.clone(), old);
            return Err(e);
        }
        Ok(Some(old))
    }

    fn persist(&self) -> Result<(), TopicStoreError> {
        let file = TopicsFile {
            version: 1,
            topics: self.topics.values().cloned().collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(|e| TopicStoreError::Corrupt {
            path: self.dir.join(TOPICS_FILE),
            reason: e.to_string(),
        })?;
        write_atomically(&self.dir, TOPICS_FILE, &bytes)
    }
}

/// Writes `dir/name` via `name.tmp`, fsync, rename, directory fsync.
pub fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), TopicStoreError> {
    let tmp = dir.join(format!("{name}.tmp"));
    let dst = dir.join(name);
    {
        let mut f = std::fs::File::create(&tmp).map_err(io_err(&tmp))?;
        f.write_all(bytes).map_err(io_err(&tmp))?;
        f.sync_all().map_err(io_err(&tmp))?;
    }
    std::fs::rename(&tmp, &dst).map_err(io_err(&dst))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))?;
    Ok(())
}

/// Contents of `meta.properties`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaProperties {
    pub cluster_id: String,
    pub node_id: i32,
    pub directory_id: String,
}

/// Reads `meta.properties` from `dir`, or creates it with a fresh cluster
/// id. A node id different from the configured one is an error (as in Kafka).
pub fn load_or_create_meta(dir: &Path, node_id: i32) -> Result<MetaProperties, TopicStoreError> {
    load_or_create_meta_in(dir, node_id, None)
}

/// [`load_or_create_meta`] of a node whose cluster id is known (a cluster
/// member's): a new `meta.properties` gets `cluster_id`, an existing one
/// must have it.
pub fn load_or_create_meta_in(
    dir: &Path,
    node_id: i32,
    expected_cluster_id: Option<&str>,
) -> Result<MetaProperties, TopicStoreError> {
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let path = dir.join(META_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let mut kv = BTreeMap::new();
            for line in text.lines() {
                let line = line.trim();
                if line.starts_with('#') || line.is_empty() {
                    continue;
                }
                if let Some((k, v)) = line.split_once('=') {
                    kv.insert(k.trim().to_string(), v.trim().to_string());
                }
            }
            let corrupt = |reason: &str| TopicStoreError::Corrupt {
                path: path.clone(),
                reason: reason.to_string(),
            };
            let cluster_id = kv
                .get("cluster.id")
                .cloned()
                .ok_or_else(|| corrupt("missing cluster.id"))?;
            let found: i32 = kv
                .get("node.id")
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| corrupt("missing or invalid node.id"))?;
            if found != node_id {
                return Err(TopicStoreError::NodeIdMismatch {
                    path,
                    found,
                    configured: node_id,
                });
            }
            if let Some(expected) = expected_cluster_id
                && expected != cluster_id
            {
                return Err(TopicStoreError::ClusterIdMismatch {
                    path,
                    found: cluster_id,
                    expected: expected.to_string(),
                });
            }
            let directory_id = kv
                .get("directory.id")
                .cloned()
                .unwrap_or_else(|| Uuid(random_uuid()).to_string());
            Ok(MetaProperties {
                cluster_id,
                node_id,
                directory_id,
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let meta = MetaProperties {
                cluster_id: expected_cluster_id
                    .map(str::to_string)
                    .unwrap_or_else(|| Uuid(random_uuid()).to_string()),
                node_id,
                directory_id: Uuid(random_uuid()).to_string(),
            };
            let text = format!(
                "#\n#weir\ncluster.id={}\ndirectory.id={}\nnode.id={}\nversion=1\n",
                meta.cluster_id, meta.directory_id, meta.node_id
            );
            write_atomically(dir, META_FILE, text.as_bytes())?;
            Ok(meta)
        }
        Err(e) => Err(io_err(&path)(e)),
    }
}

/// A random version-4 UUID that is never zero.
pub fn random_uuid() -> [u8; 16] {
    loop {
        let mut b: [u8; 16] = rand::random();
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        // Kafka avoids ids whose base64 starts with '-' (command-line parsing).
        if b != [0; 16] && !Uuid(b).to_string().starts_with('-') {
            return b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_uuids_are_version_4_and_never_start_with_a_dash() {
        for _ in 0..100 {
            let u = random_uuid();
            assert_eq!(u[6] >> 4, 4);
            assert_eq!(u[8] >> 6, 0b10);
            let text = Uuid(u).to_string();
            assert!(!text.starts_with('-'), "{text}");
            assert_eq!(text.parse::<Uuid>(), Ok(Uuid(u)));
        }
    }

    #[test]
    fn store_persists_and_survives_a_leftover_tmp() {
        let d = tempfile::tempdir().unwrap();
        let mut s = TopicStore::open(d.path()).unwrap();
        let t = TopicMeta {
            name: "a".into(),
            id: Uuid(random_uuid()).to_string(),
            partitions: 3,
            configs: [("retention.ms".to_string(), "1000".to_string())].into(),
        };
        s.put(t.clone()).unwrap();
        s.put(TopicMeta {
            name: "b".into(),
            id: Uuid(random_uuid()).to_string(),
            partitions: 1,
            configs: BTreeMap::new(),
        })
        .unwrap();
        s.remove("b").unwrap();
        std::fs::write(d.path().join("weir-topics.json.tmp"), b"{garbage").unwrap();
        let s2 = TopicStore::open(d.path()).unwrap();
        assert_eq!(s2.get("a"), Some(&t));
        assert!(s2.get("b").is_none());
        assert_eq!(s2.by_id(&t.id_bytes()).map(|t| t.name.as_str()), Some("a"));
    }

    #[test]
    fn a_corrupt_or_empty_file_opens_empty_and_is_kept_aside() {
        for bytes in [&b""[..], b"{\"version\":1,\"topics\":[{", b"\x00\x00\x00"] {
            let d = tempfile::tempdir().unwrap();
            std::fs::write(d.path().join(TOPICS_FILE), bytes).unwrap();
            let mut s = TopicStore::open(d.path()).unwrap();
            assert!(s.is_empty());
            assert!(s.lost().is_some());
            assert_eq!(
                std::fs::read(d.path().join(CORRUPT_TOPICS_FILE)).unwrap(),
                bytes
            );
            let t = TopicMeta {
                name: "a".into(),
                id: Uuid(random_uuid()).to_string(),
                partitions: 2,
                configs: BTreeMap::new(),
            };
            s.adopt(vec![t.clone()]).unwrap();
            assert!(s.lost().is_none());
            let s2 = TopicStore::open(d.path()).unwrap();
            assert_eq!(s2.get("a"), Some(&t));
            assert!(s2.lost().is_none());
        }
    }

    #[test]
    fn meta_properties_are_stable_and_node_id_checked() {
        let d = tempfile::tempdir().unwrap();
        let m1 = load_or_create_meta(d.path(), 1).unwrap();
        let m2 = load_or_create_meta(d.path(), 1).unwrap();
        assert_eq!(m1, m2);
        assert!(matches!(
            load_or_create_meta(d.path(), 2),
            Err(TopicStoreError::NodeIdMismatch { .. })
        ));
    }

    #[test]
    fn a_cluster_member_gets_its_cluster_id_and_refuses_another() {
        let d = tempfile::tempdir().unwrap();
        let m = load_or_create_meta_in(d.path(), 3, Some("AAAAAAAAAAAAAAAAAAAAAQ")).unwrap();
        assert_eq!(m.cluster_id, "AAAAAAAAAAAAAAAAAAAAAQ");
        assert_eq!(
            load_or_create_meta_in(d.path(), 3, Some("AAAAAAAAAAAAAAAAAAAAAQ")).unwrap(),
            m
        );
        // a single node's reading does not ask
        assert_eq!(load_or_create_meta(d.path(), 3).unwrap(), m);
        let e = load_or_create_meta_in(d.path(), 3, Some("AAAAAAAAAAAAAAAAAAAAAg")).unwrap_err();
        assert!(
            matches!(e, TopicStoreError::ClusterIdMismatch { .. }),
            "{e}"
        );
        assert!(e.to_string().contains("belongs to another cluster"), "{e}");
    }
}
