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
//! Deciding is pure ([`ScramUsers::plan_alter`], [`ScramUsers::describe`]);
//! [`ScramStore`] writes the file and swaps the map in.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};
use weir_protocol::error_code::ErrorCode;

use crate::sasl::scram::{
    MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential, ScramCredentials, ScramHash,
};
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
}

/// A request's refusal of one user: a Kafka error code and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
}

impl Refusal {
    fn new(code: ErrorCode, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
        }
    }
}

/// Kafka's messages (`ScramControlManager`, `ScramImage`).
const DUPLICATE_ALTER: &str = "A user credential cannot be altered twice in the same request";
const DELETE_MISSING: &str = "Attempt to delete a user credential that does not exist";
const DESCRIBE_DUPLICATE: &str =
    "Cannot describe SCRAM credentials for the same user twice in a single request: ";
const DESCRIBE_MISSING: &str = "Attempt to describe a user credential that does not exist: ";

/// One deletion of an AlterUserScramCredentials request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deletion {
    pub user: String,
    /// Kafka's mechanism code (1 SCRAM-SHA-256, 2 SCRAM-SHA-512).
    pub mechanism: i8,
}

/// One upsertion of an AlterUserScramCredentials request.
#[derive(Clone, PartialEq, Eq)]
pub struct Upsertion {
    pub user: String,
    pub mechanism: i8,
    pub iterations: i32,
    pub salt: Vec<u8>,
    /// `Hi(password, salt, iterations)`; never stored.
    pub salted_password: Vec<u8>,
}

impl std::fmt::Debug for Upsertion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upsertion")
            .field("user", &self.user)
            .field("mechanism", &self.mechanism)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// What an alteration does: the credentials afterwards and one result per
/// user named in the request (successes first, deletions before
/// upsertions, then refusals, each in request order).
#[derive(Debug)]
pub struct AlterPlan {
    pub next: ScramUsers,
    /// Whether `next` differs from the credentials planned from (nothing to
    /// write when every entry was refused).
    pub changed: bool,
    pub results: Vec<(String, Result<(), Refusal>)>,
}

/// One user's answer to DescribeUserScramCredentials: the mechanisms and
/// iteration counts set for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserDescription {
    pub user: String,
    pub result: Result<Vec<(ScramHash, u32)>, Refusal>,
}

/// Every credential set at run time. Invariant: each passed
/// [`ScramUsers::plan_alter`]'s checks (a non-empty user, iterations in
/// 4096..=16384) and has keys of its hash's length; no user has an empty
/// mechanism map.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScramUsers {
    users: BTreeMap<String, BTreeMap<ScramHash, ScramCredential>>,
}

impl ScramUsers {
    pub fn get(&self, hash: ScramHash, user: &str) -> Option<&ScramCredential> {
        self.users.get(user).and_then(|m| m.get(&hash))
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    pub fn insert(&mut self, hash: ScramHash, user: &str, credential: ScramCredential) {
        self.users
            .entry(user.to_string())
            .or_default()
            .insert(hash, credential);
    }

    fn remove(&mut self, hash: ScramHash, user: &str) -> Option<ScramCredential> {
        let mechanisms = self.users.get_mut(user)?;
        let removed = mechanisms.remove(&hash);
        if mechanisms.is_empty() {
            self.users.remove(user);
        }
        removed
    }

    /// Plans an AlterUserScramCredentials request with Kafka's rules
    /// (`ScramControlManager.alterCredentials`): a user named twice in the
    /// request, in deletions or upsertions or both and whatever the
    /// mechanisms, is refused whole with DUPLICATE_RESOURCE; an empty user
    /// name or an iteration count outside 4096..=16384 is
    /// UNACCEPTABLE_CREDENTIAL; a mechanism other than 1 or 2 is
    /// UNSUPPORTED_SASL_MECHANISM; deleting a credential that is not set
    /// is RESOURCE_NOT_FOUND. The users not refused are changed together.
    pub fn plan_alter(&self, deletions: &[Deletion], upsertions: &[Upsertion]) -> AlterPlan {
        let mut refused: Vec<(String, Refusal)> = Vec::new();
        let is_refused =
            |refused: &[(String, Refusal)], user: &str| refused.iter().any(|(u, _)| u == user);
        let mut deletes: Vec<(&str, ScramHash)> = Vec::new();
        let mut upserts: Vec<(&str, ScramHash, &Upsertion)> = Vec::new();
        for d in deletions {
            if is_refused(&refused, &d.user) {
                continue;
            }
            if let Some(i) = deletes.iter().position(|(u, _)| *u == d.user) {
                deletes.remove(i);
                refused.push((
                    d.user.clone(),
                    Refusal::new(ErrorCode::DuplicateResource, DUPLICATE_ALTER),
                ));
                continue;
            }
            let checked =
                check_user_and_mechanism(&d.user, d.mechanism).and_then(|hash| {
                    match self.get(hash, &d.user) {
                        Some(_) => Ok(hash),
                        None => Err(Refusal::new(ErrorCode::ResourceNotFound, DELETE_MISSING)),
                    }
                });
            match checked {
                Ok(hash) => deletes.push((&d.user, hash)),
                Err(r) => refused.push((d.user.clone(), r)),
            }
        }
        for u in upsertions {
            if is_refused(&refused, &u.user) {
                continue;
            }
            let deleted = deletes.iter().position(|(user, _)| *user == u.user);
            let upserted = upserts.iter().position(|(user, _, _)| *user == u.user);
            if deleted.is_some() || upserted.is_some() {
                if let Some(i) = deleted {
                    deletes.remove(i);
                }
                if let Some(i) = upserted {
                    upserts.remove(i);
                }
                refused.push((
                    u.user.clone(),
                    Refusal::new(ErrorCode::DuplicateResource, DUPLICATE_ALTER),
                ));
                continue;
            }
            match check_upsertion(u) {
                Ok(hash) => upserts.push((&u.user, hash, u)),
                Err(r) => refused.push((u.user.clone(), r)),
            }
        }
        let mut next = self.clone();
        let mut results = Vec::with_capacity(deletes.len() + upserts.len() + refused.len());
        for (user, hash) in deletes {
            next.remove(hash, user);
            results.push((user.to_string(), Ok(())));
        }
        for (user, hash, u) in upserts {
            // iterations were checked to be in 4096..=16384
            let iterations = u32::try_from(u.iterations).unwrap_or(MIN_ITERATIONS);
            let credential = ScramCredential::from_salted_password(
                hash,
                &u.salted_password,
                &u.salt,
                iterations,
            );
            next.insert(hash, user, credential);
            results.push((user.to_string(), Ok(())));
        }
        results.extend(refused.into_iter().map(|(u, r)| (u, Err(r))));
        let changed = next != *self;
        AlterPlan {
            next,
            changed,
            results,
        }
    }

    /// Answers DescribeUserScramCredentials as Kafka's `ScramImage.describe`
    /// does: `None` or an empty list describes every user; a user named
    /// twice is DUPLICATE_RESOURCE, one without credentials
    /// RESOURCE_NOT_FOUND. Named users are answered in request order,
    /// all users by name.
    pub fn describe(&self, users: Option<&[String]>) -> Vec<UserDescription> {
        let names: Vec<(String, bool)> = match users {
            None | Some([]) => self.users.keys().map(|u| (u.clone(), false)).collect(),
            Some(list) => {
                let mut names: Vec<(String, bool)> = Vec::new();
                for u in list {
                    match names.iter_mut().find(|(n, _)| n == u) {
                        Some((_, duplicate)) => *duplicate = true,
                        None => names.push((u.clone(), false)),
                    }
                }
                names
            }
        };
        names
            .into_iter()
            .map(|(user, duplicate)| {
                let result = if duplicate {
                    Err(Refusal::new(
                        ErrorCode::DuplicateResource,
                        format!("{DESCRIBE_DUPLICATE}{user}"),
                    ))
                } else {
                    match self.users.get(&user) {
                        Some(m) => Ok(m.iter().map(|(h, c)| (*h, c.iterations)).collect()),
                        None => Err(Refusal::new(
                            ErrorCode::ResourceNotFound,
                            format!("{DESCRIBE_MISSING}{user}"),
                        )),
                    }
                };
                UserDescription { user, result }
            })
            .collect()
    }
}

/// Kafka's `validateScramUsernameAndMechanism`.
fn check_user_and_mechanism(user: &str, mechanism: i8) -> Result<ScramHash, Refusal> {
    if user.is_empty() {
        return Err(Refusal::new(
            ErrorCode::UnacceptableCredential,
            "Username must not be empty",
        ));
    }
    ScramHash::from_wire_type(mechanism).ok_or_else(|| {
        Refusal::new(
            ErrorCode::UnsupportedSaslMechanism,
            "Unknown SCRAM mechanism",
        )
    })
}

/// Kafka's `validateUpsertion`.
fn check_upsertion(u: &Upsertion) -> Result<ScramHash, Refusal> {
    let hash = check_user_and_mechanism(&u.user, u.mechanism)?;
    if i64::from(u.iterations) < i64::from(MIN_ITERATIONS) {
        return Err(Refusal::new(
            ErrorCode::UnacceptableCredential,
            "Too few iterations",
        ));
    }
    if i64::from(u.iterations) > i64::from(MAX_ITERATIONS) {
        return Err(Refusal::new(
            ErrorCode::UnacceptableCredential,
            "Too many iterations",
        ));
    }
    Ok(hash)
}

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
            if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&credential.iterations) {
                return Err(format!(
                    "user {user} {name}: {} iterations",
                    credential.iterations
                ));
            }
            if credential.stored_key.len() != hash.output_len()
                || credential.server_key.len() != hash.output_len()
            {
                return Err(format!("user {user} {name}: keys of the wrong length"));
            }
            users.insert(hash, &user, credential);
        }
    }
    Ok(users)
}

fn render(users: &ScramUsers) -> Result<Vec<u8>, serde_json::Error> {
    let file = ScramFile {
        version: 1,
        users: users
            .users
            .iter()
            .map(|(user, mechanisms)| {
                let stored = mechanisms
                    .iter()
                    .map(|(hash, c)| {
                        (
                            hash.name().to_string(),
                            StoredCredential {
                                salt: B64.encode(&c.salt),
                                iterations: c.iterations,
                                stored_key: B64.encode(&c.stored_key),
                                server_key: B64.encode(&c.server_key),
                            },
                        )
                    })
                    .collect();
                (user.clone(), stored)
            })
            .collect(),
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
/// change is written before it is swapped in).
#[derive(Debug)]
pub struct ScramStore {
    dir: PathBuf,
    users: RwLock<Arc<ScramUsers>>,
    /// Serialises alterations from planning to the swap, so none is
    /// planned on credentials another is replacing.
    writer: Mutex<()>,
}

impl ScramStore {
    /// Loads `weir-scram-credentials.json` from `dir` (the first log dir).
    pub fn open(dir: &Path) -> Result<ScramStore, StoreError> {
        Ok(ScramStore {
            dir: dir.to_path_buf(),
            users: RwLock::new(Arc::new(load(dir)?)),
            writer: Mutex::new(()),
        })
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
        if let Err(e) = store(&self.dir, &plan.next) {
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

    fn codes(plan: &AlterPlan) -> Vec<(&str, ErrorCode)> {
        plan.results
            .iter()
            .map(|(u, r)| {
                let code = match r {
                    Ok(()) => ErrorCode::None,
                    Err(r) => r.code,
                };
                (u.as_str(), code)
            })
            .collect()
    }

    #[test]
    fn upsertion_derives_the_keys_a_password_gives() {
        let plan = ScramUsers::default().plan_alter(&[], &[upsert("alice", 2, 8192)]);
        assert_eq!(codes(&plan), [("alice", ErrorCode::None)]);
        assert!(plan.changed);
        let want = ScramCredential::from_password(ScramHash::Sha512, "pw", b"salt", 8192);
        assert_eq!(plan.next.get(ScramHash::Sha512, "alice"), Some(&want));
        assert_eq!(plan.next.get(ScramHash::Sha256, "alice"), None);
    }

    #[test]
    fn kafkas_validation() {
        let mut current = ScramUsers::default();
        current.insert(
            ScramHash::Sha256,
            "set",
            ScramCredential::from_password(ScramHash::Sha256, "x", b"s", 4096),
        );
        type Case = (
            Vec<Deletion>,
            Vec<Upsertion>,
            Vec<(&'static str, ErrorCode)>,
        );
        let cases: Vec<Case> = vec![
            (
                vec![],
                vec![upsert("a", 1, 4095)],
                vec![("a", ErrorCode::UnacceptableCredential)],
            ),
            (
                vec![],
                vec![upsert("a", 1, 16385)],
                vec![("a", ErrorCode::UnacceptableCredential)],
            ),
            (
                vec![],
                vec![upsert("a", 1, 4096)],
                vec![("a", ErrorCode::None)],
            ),
            (
                vec![],
                vec![upsert("a", 2, 16384)],
                vec![("a", ErrorCode::None)],
            ),
            (
                vec![],
                vec![upsert("a", 1, -1)],
                vec![("a", ErrorCode::UnacceptableCredential)],
            ),
            (
                vec![],
                vec![upsert("a", 0, 4096)],
                vec![("a", ErrorCode::UnsupportedSaslMechanism)],
            ),
            (
                vec![],
                vec![upsert("a", 3, 4096)],
                vec![("a", ErrorCode::UnsupportedSaslMechanism)],
            ),
            (
                vec![],
                vec![upsert("", 1, 4096)],
                vec![("", ErrorCode::UnacceptableCredential)],
            ),
            (
                vec![delete("", 1)],
                vec![],
                vec![("", ErrorCode::UnacceptableCredential)],
            ),
            (
                vec![delete("a", 0)],
                vec![],
                vec![("a", ErrorCode::UnsupportedSaslMechanism)],
            ),
            (
                vec![delete("nobody", 1)],
                vec![],
                vec![("nobody", ErrorCode::ResourceNotFound)],
            ),
            // set for SHA-256 only
            (
                vec![delete("set", 2)],
                vec![],
                vec![("set", ErrorCode::ResourceNotFound)],
            ),
            (
                vec![delete("set", 1)],
                vec![],
                vec![("set", ErrorCode::None)],
            ),
            // a user twice, whatever the mechanisms: refused whole
            (
                vec![delete("set", 1)],
                vec![upsert("set", 2, 4096)],
                vec![("set", ErrorCode::DuplicateResource)],
            ),
            (
                vec![],
                vec![
                    upsert("a", 1, 4096),
                    upsert("a", 2, 4096),
                    upsert("a", 2, 4096),
                ],
                vec![("a", ErrorCode::DuplicateResource)],
            ),
            (
                vec![delete("set", 1), delete("set", 1)],
                vec![],
                vec![("set", ErrorCode::DuplicateResource)],
            ),
            // others in the same request go ahead; successes first
            (
                vec![delete("nobody", 1)],
                vec![upsert("b", 1, 100), upsert("c", 1, 4096)],
                vec![
                    ("c", ErrorCode::None),
                    ("nobody", ErrorCode::ResourceNotFound),
                    ("b", ErrorCode::UnacceptableCredential),
                ],
            ),
        ];
        for (deletions, upsertions, want) in cases {
            let plan = current.plan_alter(&deletions, &upsertions);
            assert_eq!(codes(&plan), want, "{deletions:?} {upsertions:?}");
            let ok = want.iter().any(|(_, c)| *c == ErrorCode::None);
            assert_eq!(plan.changed, ok, "{deletions:?} {upsertions:?}");
            if !ok {
                assert_eq!(plan.next, current);
            }
        }
    }

    #[test]
    fn refusal_messages_are_kafkas() {
        let plan = ScramUsers::default().plan_alter(
            &[delete("d", 1)],
            &[
                upsert("a", 1, 1),
                upsert("b", 1, 99_999),
                upsert("", 1, 4096),
            ],
        );
        let messages: Vec<&str> = plan
            .results
            .iter()
            .filter_map(|(_, r)| r.as_ref().err().map(|r| r.message.as_str()))
            .collect();
        assert_eq!(
            messages,
            [
                DELETE_MISSING,
                "Too few iterations",
                "Too many iterations",
                "Username must not be empty"
            ]
        );
    }

    #[test]
    fn describe_like_kafka() {
        let mut users = ScramUsers::default();
        for (h, u, i) in [
            (ScramHash::Sha512, "bob", 8192),
            (ScramHash::Sha256, "alice", 4096),
            (ScramHash::Sha512, "alice", 16384),
        ] {
            users.insert(h, u, ScramCredential::from_password(h, "p", b"s", i));
        }
        let all = users.describe(None);
        assert_eq!(all, users.describe(Some(&[])));
        let summary: Vec<(&str, Vec<(ScramHash, u32)>)> = all
            .iter()
            .map(|d| (d.user.as_str(), d.result.clone().unwrap()))
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "alice",
                    vec![(ScramHash::Sha256, 4096), (ScramHash::Sha512, 16384)]
                ),
                ("bob", vec![(ScramHash::Sha512, 8192)]),
            ]
        );
        let named = users.describe(Some(&["zed".into(), "bob".into(), "zed".into()]));
        assert_eq!(named.len(), 2);
        assert_eq!(named[0].user, "zed");
        let dup = named[0].result.clone().unwrap_err();
        assert_eq!(dup.code, ErrorCode::DuplicateResource);
        assert_eq!(dup.message, format!("{DESCRIBE_DUPLICATE}zed"));
        assert!(named[1].result.is_ok());
        let missing = users.describe(Some(&["zed".into()]));
        let r = missing[0].result.clone().unwrap_err();
        assert_eq!(r.code, ErrorCode::ResourceNotFound);
        assert_eq!(
            r.message,
            "Attempt to describe a user credential that does not exist: zed"
        );
        assert!(ScramUsers::default().describe(None).is_empty());
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
