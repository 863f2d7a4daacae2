//! SCRAM credentials managed at run time (Kafka's KIP-554):
//! AlterUserScramCredentials sets and deletes them, DescribeUserScramCredentials
//! lists them, and every SASL listener checks SCRAM logins against them
//! before its static JAAS users.
//!
//! Only the salted form is kept, as in Kafka's `UserScramCredentialRecord`:
//! the salt and iteration count the client chose, `StoredKey` and
//! `ServerKey`. The client sends `SaltedPassword = Hi(password, salt, i)`;
//! the broker derives the two keys from it and forgets it.
//!
//! Durable in `weir-scram-credentials.json` in the first log dir, written
//! like `weir-dynamic-configs.json` (temporary file, fsync, rename,
//! directory fsync); binary fields in standard base64:
//!
//! ```json
//! {"version": 1,
//!  "users": {"alice": {"SCRAM-SHA-512": {"salt": "…", "iterations": 8192,
//!                                        "stored_key": "…", "server_key": "…"}}}}
//! ```
//!
//! A file that cannot be read or parsed stops the broker at start: starting
//! without it would lock out every user it holds, or (with a static JAAS
//! user of the same name) let an old password in.
//!
//! On a cluster member ([`ScramStore::in_cluster`]) there is no file: the
//! credentials live in the metadata log, AlterUserScramCredentials goes to
//! the active controller ([`crate::security_admin`]), and the process that
//! applies the metadata image hands every new credential set to
//! [`ScramStore::replace`]. Until the first set arrives there are no
//! credentials set at run time (SCRAM logins of those users fail).
//!
//! Deciding is pure and shared with a cluster's controller
//! ([`weir_metadata::scram`]: [`ScramUsers::plan_alter`],
//! [`ScramUsers::describe`]); [`ScramStore`] writes the file and swaps the
//! map in.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};
use weir_protocol::error_code::ErrorCode;

use crate::sasl::scram::{ScramCredential, ScramCredentials, ScramHash};
use crate::topics::{self, TopicStoreError};

pub const SCRAM_CREDENTIALS_FILE: &str = "weir-scram-credentials.json";

/// Why the stored credentials cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("corrupt SCRAM credentials file {path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error(transparent)]
    Write(#[from] TopicStoreError),
    #[error("a cluster member's SCRAM credentials are changed through the metadata log")]
    InCluster,
}

pub use weir_metadata::scram::{
    AlterPlan, Deletion, Refusal, ScramUsers, Upsertion, UserDescription,
};

#[derive(Serialize, Deserialize)]
struct ScramFile {
    version: u32,
    #[serde(default)]
    users: BTreeMap<String, BTreeMap<String, StoredCredential>>,
}

#[derive(Serialize, Deserialize)]
struct StoredCredential {
    salt: String,
    iterations: u32,
    stored_key: String,
    server_key: String,
}

/// Reads the stored credentials; a missing file means none.
pub fn load(dir: &Path) -> Result<ScramUsers, StoreError> {
    let path = dir.join(SCRAM_CREDENTIALS_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ScramUsers::default()),
        Err(source) => return Err(StoreError::Read { path, source }),
    };
    parse(&bytes).map_err(|reason| StoreError::Corrupt { path, reason })
}

fn parse(bytes: &[u8]) -> Result<ScramUsers, String> {
    let file: ScramFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if file.version != 1 {
        return Err(format!("unsupported version {}", file.version));
    }
    let mut users = ScramUsers::default();
    for (user, mechanisms) in file.users {
        if user.is_empty() {
            return Err("a user name is empty".into());
        }
        for (name, c) in mechanisms {
            let hash = ScramHash::from_name(&name)
                .ok_or_else(|| format!("user {user}: unknown mechanism {name}"))?;
            let field = |what: &str, v: &str| {
                B64.decode(v)
                    .map_err(|e| format!("user {user} {name}: {what} is not base64: {e}"))
            };
            let credential = ScramCredential {
                salt: field("salt", &c.salt)?,
                iterations: c.iterations,
                stored_key: field("stored_key", &c.stored_key)?,
                server_key: field("server_key", &c.server_key)?,
            };
            credential
                .check(hash)
                .map_err(|why| format!("user {user} {name}: {why}"))?;
            users.insert(hash, &user, credential);
        }
    }
    Ok(users)
}

fn render(users: &ScramUsers) -> Result<Vec<u8>, serde_json::Error> {
    let mut stored: BTreeMap<String, BTreeMap<String, StoredCredential>> = BTreeMap::new();
    for (user, hash, c) in users.iter() {
        stored.entry(user.to_string()).or_default().insert(
            hash.name().to_string(),
            StoredCredential {
                salt: B64.encode(&c.salt),
                iterations: c.iterations,
                stored_key: B64.encode(&c.stored_key),
                server_key: B64.encode(&c.server_key),
            },
        );
    }
    let file = ScramFile {
        version: 1,
        users: stored,
    };
    serde_json::to_vec_pretty(&file)
}

/// Writes the credentials durably (temporary file, fsync, rename,
/// directory fsync).
pub fn store(dir: &Path, users: &ScramUsers) -> Result<(), StoreError> {
    let bytes = render(users).map_err(|e| StoreError::Corrupt {
        path: dir.join(SCRAM_CREDENTIALS_FILE),
        reason: e.to_string(),
    })?;
    Ok(topics::write_atomically(
        dir,
        SCRAM_CREDENTIALS_FILE,
        &bytes,
    )?)
}

/// The broker's credentials set at run time: the file and the map every
/// SASL listener reads. Invariant: `users` is what the file holds (a
/// change is written before it is swapped in), or on a cluster member what
/// the metadata image last handed over.
#[derive(Debug)]
pub struct ScramStore {
    /// Where the file lives; None on a cluster member.
    dir: Option<PathBuf>,
    users: RwLock<Arc<ScramUsers>>,
    /// Serialises alterations from planning to the swap, so none is
    /// planned on credentials another is replacing.
    writer: Mutex<()>,
}

impl ScramStore {
    /// Loads `weir-scram-credentials.json` from `dir` (the first log dir).
    pub fn open(dir: &Path) -> Result<ScramStore, StoreError> {
        Ok(ScramStore {
            dir: Some(dir.to_path_buf()),
            users: RwLock::new(Arc::new(load(dir)?)),
            writer: Mutex::new(()),
        })
    }

    /// The store of a cluster member: no file, no credentials until the
    /// first [`ScramStore::replace`] (see the module doc).
    pub fn in_cluster() -> ScramStore {
        ScramStore {
            dir: None,
            users: RwLock::new(Arc::new(ScramUsers::default())),
            writer: Mutex::new(()),
        }
    }

    /// Makes `users` the credentials, as the metadata image holds them (a
    /// cluster member); the next authentication uses them.
    pub fn replace(&self, users: ScramUsers) {
        let _writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        *self.users.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(users);
    }

    /// The credentials as of now.
    pub fn snapshot(&self) -> Arc<ScramUsers> {
        self.users.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Applies an AlterUserScramCredentials request: plans it
    /// ([`ScramUsers::plan_alter`]), writes the file, then swaps the new
    /// credentials in, so the next authentication uses them. When the
    /// write fails nothing changes and the users that would have been
    /// changed get KAFKA_STORAGE_ERROR. Blocks on the file system.
    pub fn alter(
        &self,
        deletions: &[Deletion],
        upsertions: &[Upsertion],
    ) -> Vec<(String, Result<(), Refusal>)> {
        let _writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let plan = self.snapshot().plan_alter(deletions, upsertions);
        if !plan.changed {
            return plan.results;
        }
        let stored = match &self.dir {
            Some(dir) => store(dir, &plan.next),
            None => Err(StoreError::InCluster),
        };
        if let Err(e) = stored {
            tracing::error!(error = %e, "SCRAM credentials not changed: cannot write them");
            let message = format!("cannot store the SCRAM credentials: {e}");
            return plan
                .results
                .into_iter()
                .map(|(user, r)| {
                    let r = r.and(Err(Refusal::new(
                        ErrorCode::KafkaStorageError,
                        message.clone(),
                    )));
                    (user, r)
                })
                .collect();
        }
        *self.users.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(plan.next);
        for (user, r) in &plan.results {
            if r.is_ok() {
                tracing::info!(user, "SCRAM credentials changed");
            }
        }
        plan.results
    }
}

impl ScramCredentials for ScramStore {
    fn credential(&self, hash: ScramHash, user: &str) -> Option<ScramCredential> {
        self.users
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(hash, user)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sasl::scram::salted_password;

    fn upsert(user: &str, mechanism: i8, iterations: i32) -> Upsertion {
        let salt = b"salt".to_vec();
        let hash = ScramHash::from_wire_type(mechanism).unwrap_or(ScramHash::Sha256);
        let iters = u32::try_from(iterations).unwrap_or(1).clamp(1, 20_000);
        Upsertion {
            user: user.into(),
            mechanism,
            iterations,
            salted_password: salted_password(hash, "pw", &salt, iters),
            salt,
        }
    }

    fn delete(user: &str, mechanism: i8) -> Deletion {
        Deletion {
            user: user.into(),
            mechanism,
        }
    }

    #[test]
    fn store_round_trip_and_corrupt_files() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(dir.path()).unwrap().is_empty());
        let plan = ScramUsers::default()
            .plan_alter(&[], &[upsert("alice", 1, 4096), upsert("bob", 2, 9000)]);
        store(dir.path(), &plan.next).unwrap();
        assert_eq!(load(dir.path()).unwrap(), plan.next);
        let text = std::fs::read_to_string(dir.path().join(SCRAM_CREDENTIALS_FILE)).unwrap();
        assert!(
            text.contains("\"SCRAM-SHA-512\"") && text.contains("stored_key"),
            "{text}"
        );

        let path = dir.path().join(SCRAM_CREDENTIALS_FILE);
        let key32 = B64.encode([0u8; 32]);
        for (bad, why) in [
            ("{oops".to_string(), "key must be a string"),
            (r#"{"version": 2}"#.to_string(), "unsupported version 2"),
            (
                r#"{"version":1,"users":{"a":{"SCRAM-SHA-1":{"salt":"","iterations":4096,"stored_key":"","server_key":""}}}}"#.to_string(),
                "unknown mechanism SCRAM-SHA-1",
            ),
            (
                format!(r#"{{"version":1,"users":{{"a":{{"SCRAM-SHA-256":{{"salt":"!","iterations":4096,"stored_key":"{key32}","server_key":"{key32}"}}}}}}}}"#),
                "salt is not base64",
            ),
            (
                format!(r#"{{"version":1,"users":{{"a":{{"SCRAM-SHA-256":{{"salt":"","iterations":10,"stored_key":"{key32}","server_key":"{key32}"}}}}}}}}"#),
                "10 iterations",
            ),
            (
                format!(r#"{{"version":1,"users":{{"a":{{"SCRAM-SHA-512":{{"salt":"","iterations":4096,"stored_key":"{key32}","server_key":"{key32}"}}}}}}}}"#),
                "keys of the wrong length",
            ),
        ] {
            std::fs::write(&path, &bad).unwrap();
            let e = load(dir.path()).unwrap_err().to_string();
            assert!(
                e.contains("corrupt SCRAM credentials file") && e.contains(why),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn the_store_writes_before_it_answers() {
        let dir = tempfile::tempdir().unwrap();
        let s = ScramStore::open(dir.path()).unwrap();
        let r = s.alter(&[], &[upsert("alice", 2, 4096)]);
        assert!(r[0].1.is_ok());
        assert!(s.credential(ScramHash::Sha512, "alice").is_some());
        // a fresh store reads what the first wrote
        let again = ScramStore::open(dir.path()).unwrap();
        assert_eq!(*again.snapshot(), *s.snapshot());
        let r = again.alter(&[delete("alice", 2)], &[]);
        assert!(r[0].1.is_ok());
        assert!(again.credential(ScramHash::Sha512, "alice").is_none());
        assert!(ScramStore::open(dir.path()).unwrap().snapshot().is_empty());
    }

    #[test]
    fn a_cluster_store_takes_the_images_credentials() {
        let s = ScramStore::in_cluster();
        assert!(s.credential(ScramHash::Sha512, "alice").is_none());
        let plan = ScramUsers::default().plan_alter(&[], &[upsert("alice", 2, 4096)]);
        s.replace(plan.next.clone());
        assert!(s.credential(ScramHash::Sha512, "alice").is_some());
        // Not changed locally: a cluster member forwards the request.
        let r = s.alter(&[delete("alice", 2)], &[]);
        assert_eq!(
            r[0].1.as_ref().unwrap_err().code,
            ErrorCode::KafkaStorageError
        );
        assert_eq!(*s.snapshot(), plan.next);
    }

    #[test]
    fn a_failed_write_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let s = ScramStore::open(dir.path()).unwrap();
        // the temporary file's name is taken by a directory: the write fails
        std::fs::create_dir(dir.path().join(format!("{SCRAM_CREDENTIALS_FILE}.tmp"))).unwrap();
        let r = s.alter(&[delete("nobody", 1)], &[upsert("alice", 2, 4096)]);
        let codes: Vec<ErrorCode> = r
            .iter()
            .map(|(_, r)| r.as_ref().err().map_or(ErrorCode::None, |r| r.code))
            .collect();
        assert_eq!(
            codes,
            [ErrorCode::KafkaStorageError, ErrorCode::ResourceNotFound]
        );
        assert!(s.credential(ScramHash::Sha512, "alice").is_none());
    }
}
