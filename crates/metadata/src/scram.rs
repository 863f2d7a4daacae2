//! SCRAM credentials set at run time (Kafka's KIP-554), the part both a
//! single node and a cluster's controller decide with: the credential
//! model, Kafka's validation of AlterUserScramCredentials
//! ([`ScramUsers::plan_alter`], as `ScramControlManager.alterCredentials`)
//! and the answer to DescribeUserScramCredentials
//! ([`ScramUsers::describe`], as `ScramImage.describe`).
//!
//! Only the salted form is kept, as in Kafka's `UserScramCredentialRecord`:
//! the salt and iteration count the client chose, `StoredKey` and
//! `ServerKey`. The client sends `SaltedPassword = Hi(password, salt, i)`;
//! [`ScramCredential::from_salted_password`] derives the two keys from it
//! (with `weir_client::scram`'s primitives) and it is forgotten.
//!
//! A single node stores the result in a file (weir-broker's
//! `scram_credentials`); a cluster's controller writes it to the metadata
//! log (`controller::alter_scram_credentials`) and every image holds it
//! ([`crate::MetadataImage::scram`]).
//!
//! ```
//! use weir_metadata::scram::{ScramHash, ScramUsers, Upsertion, salted_password};
//!
//! let salt = b"salt".to_vec();
//! let upsertion = Upsertion {
//!     user: "alice".into(),
//!     mechanism: ScramHash::Sha512.wire_type(),
//!     iterations: 4096,
//!     salted_password: salted_password(ScramHash::Sha512, "secret", &salt, 4096),
//!     salt,
//! };
//! let plan = ScramUsers::default().plan_alter(&[], &[upsertion]);
//! assert!(plan.changed && plan.results[0].1.is_ok());
//! assert!(plan.next.get(ScramHash::Sha512, "alice").is_some());
//! ```

use std::collections::BTreeMap;

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::AlterUserScramCredentialsRequest;
use weir_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;

pub use weir_client::scram::{MAX_ITERATIONS, MIN_ITERATIONS};

/// The two SCRAM hash functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramHash {
    Sha256,
    Sha512,
}

impl ScramHash {
    pub const ALL: [ScramHash; 2] = [ScramHash::Sha256, ScramHash::Sha512];

    /// Kafka's wire code of the mechanism (`ScramMechanism.type()`:
    /// 1 SCRAM-SHA-256, 2 SCRAM-SHA-512; 0 is UNKNOWN).
    pub fn wire_type(self) -> i8 {
        match self {
            ScramHash::Sha256 => 1,
            ScramHash::Sha512 => 2,
        }
    }

    pub fn from_wire_type(t: i8) -> Option<ScramHash> {
        ScramHash::ALL.into_iter().find(|h| h.wire_type() == t)
    }

    /// The mechanism's IANA name (`SCRAM-SHA-256`).
    pub fn name(self) -> &'static str {
        match self {
            ScramHash::Sha256 => "SCRAM-SHA-256",
            ScramHash::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<ScramHash> {
        ScramHash::ALL.into_iter().find(|h| h.name() == name)
    }

    /// Bytes of a digest: the length of a stored or server key.
    pub fn output_len(self) -> usize {
        match self {
            ScramHash::Sha256 => 32,
            ScramHash::Sha512 => 64,
        }
    }

    /// The hash primitives (one implementation for the client and the
    /// broker).
    fn primitives(self) -> weir_client::scram::ScramHash {
        match self {
            ScramHash::Sha256 => weir_client::scram::ScramHash::Sha256,
            ScramHash::Sha512 => weir_client::scram::ScramHash::Sha512,
        }
    }

    /// `HMAC(key, data)` with this hash.
    pub fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        self.primitives().hmac(key, data)
    }

    /// `H(data)`.
    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        self.primitives().hash(data)
    }

    /// `Hi(password, salt, i)`: PBKDF2 with HMAC of this hash.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        self.primitives()
            .salted_password(password, salt, iterations)
    }
}

/// What the server keeps for a user and a mechanism (never the password).
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub iterations: u32,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredential")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl ScramCredential {
    /// Derives the credential from a password (RFC 5802 section 3).
    pub fn from_password(hash: ScramHash, password: &str, salt: &[u8], iterations: u32) -> Self {
        let salted = hash.salted_password(password.as_bytes(), salt, iterations);
        Self::from_salted_password(hash, &salted, salt, iterations)
    }

    /// Derives the credential from `SaltedPassword = Hi(password, salt, i)`,
    /// which is what AlterUserScramCredentials carries (the client salts;
    /// the broker never sees the password): `StoredKey = H(HMAC(salted,
    /// "Client Key"))`, `ServerKey = HMAC(salted, "Server Key")`.
    pub fn from_salted_password(
        hash: ScramHash,
        salted_password: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> Self {
        let client_key = hash.hmac(salted_password, b"Client Key");
        ScramCredential {
            salt: salt.to_vec(),
            iterations,
            stored_key: hash.hash(&client_key),
            server_key: hash.hmac(salted_password, b"Server Key"),
        }
    }

    /// Whether this is a credential [`ScramUsers`] may hold for `hash`: an
    /// iteration count in 4096..=16384 and keys of the hash's length.
    /// `Err` says what is wrong (a stored file or a metadata record that
    /// was not written by a [`ScramUsers::plan_alter`]).
    pub fn check(&self, hash: ScramHash) -> Result<(), String> {
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&self.iterations) {
            return Err(format!("{} iterations", self.iterations));
        }
        if self.stored_key.len() != hash.output_len() || self.server_key.len() != hash.output_len()
        {
            return Err("keys of the wrong length".into());
        }
        Ok(())
    }
}

/// `Hi(password, salt, i)` of RFC 5802: what a client sends in
/// AlterUserScramCredentials.
pub fn salted_password(hash: ScramHash, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
    hash.salted_password(password.as_bytes(), salt, iterations)
}

/// A request's refusal of one user: a Kafka error code and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
}

impl Refusal {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Refusal {
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

    /// Every credential: (user, hash, credential), by user then hash.
    pub fn iter(&self) -> impl Iterator<Item = (&str, ScramHash, &ScramCredential)> {
        self.users
            .iter()
            .flat_map(|(u, m)| m.iter().map(move |(h, c)| (u.as_str(), *h, c)))
    }

    /// How many (user, mechanism) credentials are set.
    pub fn len(&self) -> usize {
        self.users.values().map(BTreeMap::len).sum()
    }

    pub fn insert(&mut self, hash: ScramHash, user: &str, credential: ScramCredential) {
        self.users
            .entry(user.to_string())
            .or_default()
            .insert(hash, credential);
    }

    pub fn remove(&mut self, hash: ScramHash, user: &str) -> Option<ScramCredential> {
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

/// The deletions and upsertions of an AlterUserScramCredentials request,
/// as sent (one reading for a broker's handler and the controller's
/// listener).
pub fn request_changes(req: &AlterUserScramCredentialsRequest) -> (Vec<Deletion>, Vec<Upsertion>) {
    let deletions = req
        .deletions
        .iter()
        .map(|d| Deletion {
            user: d.name.clone(),
            mechanism: d.mechanism,
        })
        .collect();
    let upsertions = req
        .upsertions
        .iter()
        .map(|u| Upsertion {
            user: u.name.clone(),
            mechanism: u.mechanism,
            iterations: u.iterations,
            salt: u.salt.to_vec(),
            salted_password: u.salted_password.to_vec(),
        })
        .collect();
    (deletions, upsertions)
}

/// The per-user results of AlterUserScramCredentials on the wire.
pub fn alter_results(
    results: Vec<(String, Result<(), Refusal>)>,
) -> Vec<AlterUserScramCredentialsResult> {
    results
        .into_iter()
        .map(|(user, r)| match r {
            Ok(()) => alter_result(user, ErrorCode::None, None),
            Err(r) => alter_result(user, r.code, Some(r.message)),
        })
        .collect()
}

/// `code` with `message` for each user the request names, once, in the
/// order first named (deletions, then upsertions).
pub fn refuse_all(
    req: &AlterUserScramCredentialsRequest,
    code: ErrorCode,
    message: &str,
) -> Vec<AlterUserScramCredentialsResult> {
    let mut users: Vec<&str> = Vec::new();
    let named = req
        .deletions
        .iter()
        .map(|d| d.name.as_str())
        .chain(req.upsertions.iter().map(|u| u.name.as_str()));
    for u in named {
        if !users.contains(&u) {
            users.push(u);
        }
    }
    users
        .into_iter()
        .map(|u| alter_result(u.to_string(), code, Some(message.to_string())))
        .collect()
}

fn alter_result(
    user: String,
    code: ErrorCode,
    message: Option<String>,
) -> AlterUserScramCredentialsResult {
    AlterUserScramCredentialsResult {
        user,
        error_code: code.code(),
        error_message: message,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn stored_credentials_are_checked() {
        let good = ScramCredential::from_password(ScramHash::Sha256, "p", b"s", 4096);
        assert_eq!(good.check(ScramHash::Sha256), Ok(()));
        assert_eq!(
            good.check(ScramHash::Sha512).unwrap_err(),
            "keys of the wrong length"
        );
        let few = ScramCredential {
            iterations: 10,
            ..good
        };
        assert_eq!(few.check(ScramHash::Sha256).unwrap_err(), "10 iterations");
    }
}
