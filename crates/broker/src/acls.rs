//! The broker's ACLs: where they are stored and how handlers ask.
//!
//! With `authorizer.class.name` set to Kafka's StandardAuthorizer, every
//! API checks Kafka's operations through [`AclStore::authorize`] (via
//! `RequestContext::authorize`); without it there is no authorizer and
//! everything is allowed, as in Kafka. The decisions are `weir_acl`'s.
//!
//! ACLs are durable in `weir-acls.json` in the first log dir, written
//! like `weir-topics.json` (temporary file, fsync, rename, directory
//! fsync) before CreateAcls or DeleteAcls answers. An unreadable file is a
//! start error: starting without stored DENY rules would let in clients
//! the operator meant to keep out.
//!
//! ```json
//! {"version": 1, "acls": [{"pattern": {"resource_type": "TOPIC",
//!   "name": "orders", "pattern_type": "LITERAL"}, "entry": {"principal":
//!   "User:alice", "host": "*", "operation": "READ", "permission": "ALLOW"}}]}
//! ```
//!
//! A decision reads an `Arc` snapshot under a read lock: a hash lookup and
//! string comparisons, no allocation. Changes are serialised by a mutex,
//! stored, then the snapshot is replaced.
//!
//! On a cluster member ([`AclStore::in_cluster`]) there is no file: the
//! ACLs live in the metadata log, CreateAcls and DeleteAcls go to the
//! active controller ([`crate::security_admin`]), and the process that
//! applies the metadata image hands every new ACL set to
//! [`AclStore::replace`]. Until the first set arrives only super users are
//! allowed, whatever `allow.everyone.if.no.acl.found` says: a DENY not yet
//! loaded must not let a client in (Kafka's authorizer is not ready before
//! its initial load either).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};
use weir_acl::{
    AclBinding, AclBindingFilter, Authorizer, AuthorizerConfig, InvalidAcl, Operation, ResourceType,
};

use crate::session::Session;
use crate::topics::{self, TopicStoreError};

pub const ACLS_FILE: &str = "weir-acls.json";

/// Why the stored ACLs cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum AclStoreError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("corrupt ACL file {path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error(transparent)]
    Write(#[from] TopicStoreError),
    #[error("a cluster member's ACLs are changed through the metadata log")]
    InCluster,
}

#[derive(Serialize, Deserialize)]
struct AclsFile {
    version: u32,
    acls: Vec<AclBinding>,
}

/// Why one ACL of a CreateAcls request was not created.
#[derive(Debug, thiserror::Error)]
pub enum CreateAclError {
    #[error(transparent)]
    Invalid(#[from] InvalidAcl),
    #[error("the ACLs cannot be stored: {0}")]
    Store(String),
}

/// The ACL set, its durable file and the authorizer snapshot.
pub struct AclStore {
    /// None: no authorizer configured.
    config: Option<AuthorizerConfig>,
    /// Where `weir-acls.json` lives; None on a cluster member, whose ACLs
    /// come from the metadata image.
    dir: Option<PathBuf>,
    /// The stored bindings; held across a change from reading to storing.
    bindings: Mutex<BTreeSet<AclBinding>>,
    snapshot: RwLock<Arc<Authorizer>>,
}

impl AclStore {
    /// Reads `weir-acls.json` in `dir` (none: no ACLs).
    pub fn open(dir: &Path, config: Option<AuthorizerConfig>) -> Result<AclStore, AclStoreError> {
        let bindings = load(dir)?;
        let snapshot = Authorizer::new(&config.clone().unwrap_or_default(), &bindings);
        Ok(AclStore {
            config,
            dir: Some(dir.to_path_buf()),
            bindings: Mutex::new(bindings),
            snapshot: RwLock::new(Arc::new(snapshot)),
        })
    }

    /// The store of a cluster member: no ACLs and nobody but super users
    /// allowed until the first [`AclStore::replace`] (see the module doc).
    pub fn in_cluster(config: Option<AuthorizerConfig>) -> AclStore {
        let not_loaded = AuthorizerConfig {
            allow_everyone_if_no_acl_found: false,
            ..config.clone().unwrap_or_default()
        };
        AclStore {
            config,
            dir: None,
            bindings: Mutex::new(BTreeSet::new()),
            snapshot: RwLock::new(Arc::new(Authorizer::new(&not_loaded, []))),
        }
    }

    /// Makes `bindings` the ACL set, as the metadata image holds it (a
    /// cluster member); the next decision uses it.
    pub fn replace(&self, bindings: BTreeSet<AclBinding>) {
        let mut current = self.bindings.lock().unwrap_or_else(|p| p.into_inner());
        *current = bindings;
        self.publish(&current);
    }

    /// Whether an authorizer is configured (`authorizer.class.name`).
    pub fn enabled(&self) -> bool {
        self.config.is_some()
    }

    /// May the session's client perform `op` on the resource? Always true
    /// without an authorizer.
    pub fn authorize(
        &self,
        session: &Session,
        op: Operation,
        rt: ResourceType,
        name: &str,
    ) -> bool {
        if self.config.is_none() || session.broker_itself {
            return true;
        }
        let snapshot = self.snapshot.read().unwrap_or_else(|p| p.into_inner());
        snapshot.authorize(&session.requestor(), op, rt, name)
    }

    /// May the session's client perform `op` on some resource of type
    /// `rt` (Kafka's `authorizeByResourceType`)? Always true without an
    /// authorizer.
    pub fn authorize_any(&self, session: &Session, op: Operation, rt: ResourceType) -> bool {
        if self.config.is_none() || session.broker_itself {
            return true;
        }
        let snapshot = self.snapshot.read().unwrap_or_else(|p| p.into_inner());
        snapshot.authorize_any(&session.requestor(), op, rt)
    }

    /// Every stored binding `filter` matches, in a stable order.
    pub fn describe(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        let bindings = self.bindings.lock().unwrap_or_else(|p| p.into_inner());
        bindings
            .iter()
            .filter(|b| filter.matches(b))
            .cloned()
            .collect()
    }

    /// Creates `new` (an existing identical binding is a success that
    /// changes nothing) and stores the set durably before returning; one
    /// result per binding, in order.
    pub fn create(&self, new: Vec<AclBinding>) -> Vec<Result<(), CreateAclError>> {
        let mut bindings = self.bindings.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = bindings.clone();
        let mut results: Vec<Result<(), CreateAclError>> = new
            .into_iter()
            .map(|b| {
                b.validate()?;
                next.insert(b);
                Ok(())
            })
            .collect();
        if next != *bindings {
            if let Err(e) = self.store(&next) {
                tracing::error!(error = %e, "ACLs could not be stored; nothing was created");
                for r in results.iter_mut().filter(|r| r.is_ok()) {
                    *r = Err(CreateAclError::Store(e.to_string()));
                }
                return results;
            }
            *bindings = next;
            self.publish(&bindings);
        }
        results
    }

    /// Deletes what each filter matches and stores the set durably before
    /// returning; for each filter, the bindings it deleted (a binding two
    /// filters match is reported under the first, as Kafka does).
    pub fn delete(&self, filters: &[AclBindingFilter]) -> Result<Vec<Vec<AclBinding>>, String> {
        let mut bindings = self.bindings.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = bindings.clone();
        let deleted: Vec<Vec<AclBinding>> = filters
            .iter()
            .map(|f| {
                let matched: Vec<AclBinding> =
                    next.iter().filter(|b| f.matches(b)).cloned().collect();
                for b in &matched {
                    next.remove(b);
                }
                matched
            })
            .collect();
        if next != *bindings {
            self.store(&next).map_err(|e| e.to_string())?;
            *bindings = next;
            self.publish(&bindings);
        }
        Ok(deleted)
    }

    fn store(&self, bindings: &BTreeSet<AclBinding>) -> Result<(), AclStoreError> {
        match &self.dir {
            Some(dir) => store(dir, bindings),
            None => Err(AclStoreError::InCluster),
        }
    }

    fn publish(&self, bindings: &BTreeSet<AclBinding>) {
        let snapshot = Authorizer::new(&self.config.clone().unwrap_or_default(), bindings);
        *self.snapshot.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(snapshot);
    }
}

fn load(dir: &Path) -> Result<BTreeSet<AclBinding>, AclStoreError> {
    let path = dir.join(ACLS_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeSet::new()),
        Err(source) => return Err(AclStoreError::Read { path, source }),
    };
    let file: AclsFile = serde_json::from_slice(&bytes).map_err(|e| AclStoreError::Corrupt {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    if file.version != 1 {
        return Err(AclStoreError::Corrupt {
            path,
            reason: format!("unsupported version {}", file.version),
        });
    }
    for b in &file.acls {
        b.validate().map_err(|e| AclStoreError::Corrupt {
            path: path.clone(),
            reason: format!("invalid ACL {b:?}: {e}"),
        })?;
    }
    Ok(file.acls.into_iter().collect())
}

fn store(dir: &Path, bindings: &BTreeSet<AclBinding>) -> Result<(), AclStoreError> {
    let file = AclsFile {
        version: 1,
        acls: bindings.iter().cloned().collect(),
    };
    let bytes = serde_json::to_vec_pretty(&file).map_err(|e| AclStoreError::Corrupt {
        path: dir.join(ACLS_FILE),
        reason: e.to_string(),
    })?;
    Ok(crate::handler::blocking(|| {
        topics::write_atomically(dir, ACLS_FILE, &bytes)
    })?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Principal;
    use weir_acl::{AccessControlEntry, PatternType, Permission, ResourcePattern};

    fn binding(principal: &str, op: Operation, perm: Permission) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type: ResourceType::Topic,
                name: "orders".into(),
                pattern_type: PatternType::Literal,
            },
            entry: AccessControlEntry {
                principal: principal.into(),
                host: "*".into(),
                operation: op,
                permission: perm,
            },
        }
    }

    fn session(user: &str) -> Arc<Session> {
        let mut s = Session::internal("127.0.0.1", 9092);
        let s2 = Arc::make_mut(&mut s);
        s2.principal = Principal::user(user);
        s2.host = "10.1.1.1".into();
        s
    }

    #[test]
    fn acls_survive_a_reopen_and_decide() {
        let dir = tempfile::tempdir().unwrap();
        let config = Some(AuthorizerConfig::default());
        let store = AclStore::open(dir.path(), config.clone()).unwrap();
        let alice = session("alice");
        assert!(!store.authorize(&alice, Operation::Read, ResourceType::Topic, "orders"));
        let results = store.create(vec![
            binding("User:alice", Operation::Read, Permission::Allow),
            binding("alice", Operation::Read, Permission::Allow),
        ]);
        assert!(results[0].is_ok());
        assert!(matches!(results[1], Err(CreateAclError::Invalid(_))));
        assert!(store.authorize(&alice, Operation::Read, ResourceType::Topic, "orders"));

        let reopened = AclStore::open(dir.path(), config.clone()).unwrap();
        assert!(reopened.authorize(&alice, Operation::Read, ResourceType::Topic, "orders"));
        assert_eq!(reopened.describe(&AclBindingFilter::any()).len(), 1);

        let deleted = reopened
            .delete(&[AclBindingFilter::any(), AclBindingFilter::any()])
            .unwrap();
        assert_eq!((deleted[0].len(), deleted[1].len()), (1, 0));
        assert!(!reopened.authorize(&alice, Operation::Read, ResourceType::Topic, "orders"));
        let again = AclStore::open(dir.path(), config).unwrap();
        assert!(again.describe(&AclBindingFilter::any()).is_empty());
    }

    #[test]
    fn without_an_authorizer_everything_is_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let store = AclStore::open(dir.path(), None).unwrap();
        store.create(vec![binding("User:*", Operation::All, Permission::Deny)]);
        assert!(store.authorize(
            &session("x"),
            Operation::Write,
            ResourceType::Topic,
            "orders"
        ));
    }

    #[test]
    fn a_cluster_store_allows_only_super_users_until_loaded() {
        let config = AuthorizerConfig {
            super_users: vec!["User:admin".into()],
            allow_everyone_if_no_acl_found: true,
        };
        let store = AclStore::in_cluster(Some(config));
        let (alice, admin) = (session("alice"), session("admin"));
        let write =
            |s: &Session| store.authorize(s, Operation::Write, ResourceType::Topic, "orders");
        assert!(!write(&alice) && write(&admin));
        // Loaded with no ACLs: allow.everyone.if.no.acl.found applies.
        store.replace(BTreeSet::new());
        assert!(write(&alice));
        store.replace(BTreeSet::from([binding(
            "User:alice",
            Operation::Write,
            Permission::Deny,
        )]));
        assert!(!write(&alice) && write(&admin));
        assert_eq!(store.describe(&AclBindingFilter::any()).len(), 1);
        // Its ACLs are not changed locally.
        let r = store.create(vec![binding(
            "User:bob",
            Operation::Read,
            Permission::Allow,
        )]);
        assert!(matches!(r[0], Err(CreateAclError::Store(_))));
        assert_eq!(store.describe(&AclBindingFilter::any()).len(), 1);
    }

    #[test]
    fn a_corrupt_file_is_a_start_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(ACLS_FILE), b"{\"version\":1,\"acls\":[{}]}").unwrap();
        let err = AclStore::open(dir.path(), None).err().unwrap();
        assert!(err.to_string().contains("corrupt ACL file"), "{err}");
    }
}
